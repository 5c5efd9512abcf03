/* Caller-owned arrays that grow (array.h). */
#include "array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The pointer at items_ptr is read and written through memcpy: the caller's T * and a
 * void * may differ in type, never in representation on the platforms we build for. */
static int resize(void *items_ptr, size_t n, size_t elem)
{
    void *items;
    if (elem && n > SIZE_MAX / elem)
        return -ENOMEM;
    memcpy(&items, items_ptr, sizeof(items));
    void *grown = realloc(items, n * elem);
    if (!grown)
        return -ENOMEM;
    memcpy(items_ptr, &grown, sizeof(grown));
    return 0;
}

int mrd_array_reserve(void *items_ptr, size_t *cap, size_t n, size_t elem, size_t first, size_t max)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap : first;
    while (n >= ncap) {
        if (ncap > SIZE_MAX / 2)
            return -ENOMEM;
        ncap = ncap ? ncap * 2 : 1;
    }
    if (max && ncap > max)
        return -E2BIG;
    int rc = resize(items_ptr, ncap, elem);
    if (rc < 0)
        return rc;
    *cap = ncap;
    return 0;
}

int mrd_array_extend(void *items_ptr, size_t old, size_t n, size_t elem)
{
    int rc = resize(items_ptr, n, elem);
    if (rc < 0)
        return rc;
    char *items;
    memcpy(&items, items_ptr, sizeof(items));
    memset(items + old * elem, 0, (n - old) * elem);
    return 0;
}

void mrd_array_free_all(void *const *ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}

/* The lower bound of both key widths: key_bytes is sizeof(int) or sizeof(int64_t). */
static size_t lower_bound(const void *items, size_t n, size_t elem, size_t key_at,
                          size_t key_bytes, int64_t key)
{
    const unsigned char *base = items;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t k;
        if (key_bytes == sizeof(int)) {
            int k32;
            memcpy(&k32, base + mid * elem + key_at, sizeof(k32));
            k = k32;
        } else {
            memcpy(&k, base + mid * elem + key_at, sizeof(k));
        }
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t mrd_array_lower_bound_int(const void *items, size_t n, size_t elem, size_t key_at,
                                 int key)
{
    return lower_bound(items, n, elem, key_at, sizeof(int), key);
}

size_t mrd_array_lower_bound_int64(const void *items, size_t n, size_t elem, size_t key_at,
                                   int64_t key)
{
    return lower_bound(items, n, elem, key_at, sizeof(int64_t), key);
}

void mrd_array_free_each(void *items_ptr, size_t n)
{
    unsigned char *items;
    memcpy(&items, items_ptr, sizeof(items));
    for (size_t i = 0; items && i < n; i++) {
        void *item;
        memcpy(&item, items + i * sizeof(item), sizeof(item));
        free(item);
    }
    free(items);
    items = NULL;
    memcpy(items_ptr, &items, sizeof(items));
}
