/* ab_stats.h: the statistics of the in-process A/B benchmarks (sampler_ab, extcorr_ab):
 * the median of an array and a bootstrap interval of the median of paired figures.
 *
 * Where it sits: header-only, included by the .cu benchmarks of tests/workloads; nothing of
 * meridian uses it. The bootstrap has a fixed seed, so that a rerun of the same figures
 * prints the same interval.
 */
#ifndef MRD_AB_STATS_H
#define MRD_AB_STATS_H

#include <stdlib.h>

static inline int ab_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (n >= 1); sorts v in place. */
static inline double ab_median(double *v, int n)
{
    qsort(v, n, sizeof *v, ab_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The 95% interval of the median of v[0..n) over 2000 resamples (fixed seed) into *lo, *hi.
 * v is left as it was. Returns 0, or -1 when memory runs out (n >= 1). */
static inline int ab_bootstrap_median(const double *v, int n, double *lo, double *hi)
{
    enum { B = 2000 };
    double *boot = (double *)calloc(B, sizeof(double));
    double *tmp = (double *)calloc(n, sizeof(double));
    unsigned seed = 12345;
    if (!boot || !tmp) {
        free(boot);
        free(tmp);
        return -1;
    }
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            tmp[i] = v[(seed >> 8) % (unsigned)n];
        }
        boot[b] = ab_median(tmp, n);
    }
    qsort(boot, B, sizeof(double), ab_cmp_double);
    *lo = boot[B * 25 / 1000];
    *hi = boot[B * 975 / 1000 - 1];
    free(boot);
    free(tmp);
    return 0;
}

#endif
