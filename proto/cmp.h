/* Three-way comparison for qsort and bsearch comparators: the one home of the
 * "-1, 0 or 1 by this key, then by that one" step of the aggregator's sorts (in proto/ so
 * that the launcher and proto itself may use it too: it depends on nothing).
 *
 * A comparator names its keys in order of precedence, each as one MRD_CMP (ascending) or
 * MRD_CMP with its operands swapped (descending):
 *
 *     return MRD_CMP_KEYS(MRD_CMP(a->rank, b->rank), MRD_CMP(b->cost, a->cost));
 *
 * MRD_CMP compares, never subtracts, so it cannot overflow. On doubles a NaN compares
 * equal to everything (a chain of `!=` tests would answer 1): the comparators of values
 * that may be NaN keep their own. Every key is evaluated: keep keys to plain reads (or a
 * strcmp). Header only, no state, any thread.
 */
#ifndef MRD_CMP_H
#define MRD_CMP_H

#include <stddef.h>
#include <stdint.h>

/* -1, 0 or 1 as a is below, equal to or above b (both of one arithmetic type). */
#define MRD_CMP(a, b) (((a) > (b)) - ((a) < (b)))

/* The first of n three-way results that is not 0; 0 when all are. */
static inline int mrd_cmp_first(const int *results, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (results[i])
            return results[i];
    return 0;
}

/* The order by several keys, most significant first: MRD_CMP_KEYS(MRD_CMP(..), ..). */
#define MRD_CMP_KEYS(...)                                                                          \
    mrd_cmp_first((const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

/* The qsort comparator of a plain array of int64_t, ascending. */
static inline int mrd_cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return MRD_CMP(x, y);
}

#endif
