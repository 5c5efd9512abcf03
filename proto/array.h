/* Caller-owned arrays that grow: the one home of the realloc-and-double step that the
 * aggregator's clock passes, its analysis, the launcher's diff and replay and their readers
 * of a database all need, and of the release of a struct's owned arrays.
 *
 * An array is a pointer the caller owns (T *items, NULL when empty) and its capacity or
 * length in elements, kept by the caller; these functions resize it, search it or free it.
 * Those that resize leave the array as it was when they fail, so the caller's one cleanup
 * path frees it.
 * No locks: an array belongs to the thread that grows it. Not for the agent's hot path
 * (they allocate).
 */
#ifndef MRD_ARRAY_H
#define MRD_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/* Makes room for the element at index n of the array at *items_ptr (a T **), whose
 * capacity is *cap elements of elem bytes: nothing to do while n < *cap; otherwise the
 * capacity becomes `first` (from 0) or twice *cap, doubled again until index n fits (an
 * append, n == *cap, takes one step). With max > 0, a capacity above max
 * is refused. Returns 0 (the element at index n exists), -ENOMEM (no memory) or
 * -E2BIG (the new capacity would pass max); *items_ptr and *cap change only on 0. */
int mrd_array_reserve(void *items_ptr, size_t *cap, size_t n, size_t elem, size_t first,
                      size_t max);

/* Resizes the array at *items_ptr (a T **) from old to n > old elements of elem bytes,
 * the new ones zeroed; the caller records n as the new length. Returns 0 or -ENOMEM
 * (*items_ptr unchanged). */
int mrd_array_extend(void *items_ptr, size_t old, size_t n, size_t elem);

/* Frees an array of owned pointers: each of its n elements (free(NULL) for a NULL one),
 * then the array at *items_ptr (a T ** whose T is a pointer type), which becomes NULL. */
void mrd_array_free_each(void *items_ptr, size_t n);

/* Frees each of the n pointers at ptrs (free(NULL) for a NULL one): the owned arrays of a
 * struct being destroyed, named in one statement through MRD_ARRAY_FREE_ALL. */
void mrd_array_free_all(void *const *ptrs, size_t n);

/* MRD_ARRAY_FREE_ALL(p->a, p->b, p): frees every pointer named, in one call (the list is
 * read before anything is freed, so the struct holding the others may come last). */
#define MRD_ARRAY_FREE_ALL(...)                                                                    \
    mrd_array_free_all((void *const[]){__VA_ARGS__},                                               \
                       sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* Lower bound in an array sorted by an int key (a rank, most often): the index of the
 * first of the n elements at items, elem bytes each, whose int at byte offset key_at is
 * >= key; n when every key is below. Equal keys may repeat (then the first of them). */
size_t mrd_array_lower_bound_int(const void *items, size_t n, size_t elem, size_t key_at,
                                 int key);
/* The same for an int64_t key (a rank or an id as SQLite returns it). */
size_t mrd_array_lower_bound_int64(const void *items, size_t n, size_t elem, size_t key_at,
                                   int64_t key);

#endif
