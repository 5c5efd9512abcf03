/* Three-way comparison for qsort and bsearch comparators: the one home of the
 * "-1, 0 or 1 by this key, then by that one" step that the aggregator's sorts and the
 * launcher's all need.
 *
 * A comparator names its keys in order of precedence, each as one MRD_CMP (ascending) or
 * MRD_CMP with its operands swapped (descending):
 *
 *     return MRD_CMP_KEYS(MRD_CMP(a->rank, b->rank), MRD_CMP(b->cost, a->cost));
 *
 * MRD_CMP compares, never subtracts, so it cannot overflow; it is meant for integer keys
 * (for a NaN it answers 0, where a chain of `!=` tests answers 1). Every key is evaluated:
 * keep keys to plain field reads. Header only, no state, any thread.
 */
#ifndef MRD_CMP_H
#define MRD_CMP_H

#include <stddef.h>

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

#endif
