/* proto_array: the growing arrays of proto/array.h against a trivial model.
 *
 * The model is a fixed buffer the size of the largest array the test builds and the
 * capacity rule written out as arithmetic: the capacity after reserving index n is the
 * smallest of first, 2*first, 4*first, ... above n. Every element the test appended
 * must read back, every element mrd_array_extend added must read zero, and a capacity
 * over max must be refused with the array unchanged. The lower bound is checked against a
 * linear scan. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "array.h"
#include "check.h"

#define N 5000

static size_t model_cap(size_t n, size_t first)
{
    size_t cap = first;
    while (cap <= n)
        cap *= 2;
    return cap;
}

/* mrd_array_lower_bound_int and _int64 against a linear scan, on sorted arrays of records with
 * repeated keys, for every key from below the first to above the last. */
struct keyed {
    int64_t big; /* rank * 4e9: the same order beyond 32 bits (mrd_array_lower_bound_int64) */
    int rank;
    int other;
};

static void check_lower_bound(void)
{
    static struct keyed v[600];
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (size_t n = 0; n <= 600; n = n ? n * 2 + 1 : 1) {
        int k = -3;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            k += (int)(x % 3); /* steps of 0, 1 or 2: repeats and gaps */
            v[i].rank = k;
            v[i].big = (int64_t)k * 4000000000ll;
            v[i].other = -k;
        }
        for (int key = -5; key <= k + 2; key++) {
            size_t want = 0;
            while (want < n && v[want].rank < key)
                want++;
            CHECK_UEQ(mrd_array_lower_bound_int(v, n, sizeof(v[0]), offsetof(struct keyed, rank),
                                                key),
                      want);
            CHECK_UEQ(mrd_array_lower_bound_int64(v, n, sizeof(v[0]), offsetof(struct keyed, big),
                                                  (int64_t)key * 4000000000ll),
                      want);
        }
    }
}

/* mrd_array_free_each: every element and the array freed (LeakSanitizer in the ASan build
 * reports any left), NULL elements allowed, the array pointer NULL afterwards. */
static void check_free_each(void)
{
    char **owned = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < 100; n++) {
        CHECK_OK(mrd_array_reserve(&owned, &cap, n, sizeof(*owned), 8, 0));
        owned[n] = n % 7 == 3 ? NULL : malloc(n + 1);
    }
    mrd_array_free_each(&owned, 100);
    CHECK(owned == NULL);
    mrd_array_free_each(&owned, 0); /* an empty array */
    CHECK(owned == NULL);
}

int main(void)
{
    static uint64_t model[N];
    uint64_t *items = NULL;
    size_t cap = 0;
    uint64_t x = 0x9e3779b97f4a7c15ull;

    for (size_t n = 0; n < N; n++) {
        CHECK_OK(mrd_array_reserve(&items, &cap, n, sizeof(*items), 48, 0));
        CHECK_UEQ(cap, model_cap(n, 48));
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        items[n] = model[n] = x;
    }
    for (size_t i = 0; i < N; i++)
        CHECK_UEQ(items[i], model[i]);

    /* a limit: 48 -> 96 -> 192 fits under 200, the next doubling does not */
    uint32_t *small = NULL;
    size_t small_cap = 0;
    for (size_t n = 0; n < 192; n++) {
        CHECK_OK(mrd_array_reserve(&small, &small_cap, n, sizeof(*small), 48, 200));
        small[n] = (uint32_t)n;
    }
    CHECK_EQ(mrd_array_reserve(&small, &small_cap, 192, sizeof(*small), 48, 200), -E2BIG);
    CHECK_UEQ(small_cap, 192);
    for (uint32_t i = 0; i < 192; i++)
        CHECK_UEQ(small[i], i);
    /* a size that cannot be counted in bytes is refused as out of memory, array kept */
    CHECK_EQ(mrd_array_reserve(&small, &small_cap, 192, SIZE_MAX / 100, 48, 0), -ENOMEM);
    CHECK_UEQ(small_cap, 192);
    CHECK_UEQ(small[191], 191);

    /* extend: old elements kept, new ones zero, in steps of odd sizes */
    uint64_t *ext = NULL;
    size_t len = 0;
    for (size_t n = 7; n < 3000; n = n * 3 + 1) {
        CHECK_OK(mrd_array_extend(&ext, len, n, sizeof(*ext)));
        for (size_t i = 0; i < len; i++)
            CHECK_UEQ(ext[i], model[i]);
        for (size_t i = len; i < n; i++)
            CHECK_UEQ(ext[i], 0);
        for (size_t i = len; i < n; i++)
            ext[i] = model[i];
        len = n;
    }
    check_lower_bound();
    check_free_each();
    free(items);
    free(small);
    free(ext);
    return 0;
}
