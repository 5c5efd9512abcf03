/* clock_fit: the per-rank model recovers a known offset and drift from simulated probes
 * (jittered, asymmetric outliers, a drift change, a quiet path slightly longer one way),
 * and its stored bound covers the true error while staying tight. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "testutil.h"

#define S 1000000000LL

struct outcome {
    double p99_err, max_err, coverage, bound_median;
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Probes every period over dur (plus bursts of 16 at both ends), fit, then evaluate the
 * model at 2000 evenly spaced local times against the truth. outlier_frac of the probes
 * get their aggregator timestamps moved by +5 ms (a wrong answer with a short round trip). */
static struct outcome run(const struct tu_clock *c, const struct tu_path *p, int64_t dur,
                          int64_t period, double outlier_frac, struct mrd_clock_model **keep)
{
    size_t cap = (size_t)(dur / period) + 64, n = 0;
    struct mrd_clock_sample *s = malloc(cap * sizeof(*s));
    CHECK(s != NULL);
    for (int i = 0; i < 16; i++)
        s[n++] = tu_probe(c, p, c->l0 + i * 1000000LL);
    for (int64_t t = period; t < dur; t += period)
        s[n++] = tu_probe(c, p, c->l0 + t);
    for (int i = 0; i < 16; i++)
        s[n++] = tu_probe(c, p, c->l0 + dur + i * 1000000LL);
    for (size_t i = 0; i < n; i++)
        if (tu_unif() < outlier_frac)
            s[i].t1 += 5000000, s[i].t2 += 5000000;
    struct mrd_clock_model *m = NULL;
    CHECK_OK(mrd_clock_fit_samples(s, n, NULL, &m));
    free(s);
    enum { K = 2000 };
    static double err[K], bnd[K];
    struct outcome o = {0};
    int covered = 0;
    for (int i = 0; i < K; i++) {
        int64_t l = c->l0 + dur * i / (K - 1);
        double e = fabs((double)(mrd_clock_map(m, l) - tu_true_global(c, l)));
        err[i] = e;
        bnd[i] = (double)mrd_clock_bound(m, l);
        covered += e <= bnd[i];
        if (e > o.max_err)
            o.max_err = e;
    }
    qsort(err, K, sizeof(double), cmp_d);
    qsort(bnd, K, sizeof(double), cmp_d);
    o.p99_err = err[K * 99 / 100];
    o.coverage = (double)covered / K;
    o.bound_median = bnd[K / 2];
    fprintf(stderr, "  p99 %.3f us, max %.3f us, coverage %.4f, bound median %.3f us, %u seg\n",
            o.p99_err / 1e3, o.max_err / 1e3, o.coverage, o.bound_median / 1e3, m->nseg);
    if (keep)
        *keep = m;
    else
        mrd_clock_model_destroy(m);
    return o;
}

/* loopback-like path: 15 us floor, 20 us mean jitter; +30 s, +100 ppm */
static void test_loopback_positive(void)
{
    tu_seed(1);
    struct tu_clock c = {
        .l0 = 5000 * S, .off = 30 * S + 123456, .knee = INT64_MAX / 4, .ppm0 = 100, .ppm1 = 100};
    struct tu_path p = {.floor_ns = 15000, .mean_ns = 20000, .proc_ns = 3000};
    struct mrd_clock_model *m = NULL;
    struct outcome o = run(&c, &p, 60 * S, S / 10, 0, &m);
    CHECK_LE(o.p99_err, 2000);
    CHECK(o.coverage >= 0.99);
    CHECK_LE(o.bound_median, 15000);
    CHECK_EQ(m->nseg, 1);
    CHECK(fabs(m->seg[0].drift_ppm - 100) < 0.1);
    CHECK_LE(llabs(m->seg[0].offset_ns -
                   (tu_true_global(&c, m->seg[0].local_begin) - m->seg[0].local_begin)),
             2000);
    mrd_clock_model_destroy(m);
}

/* relay-like path: 1 ms +- 0.3 ms each way (uniform); -30 s, -100 ppm */
static void test_jitter_negative(void)
{
    tu_seed(2);
    struct tu_clock c = {
        .l0 = 900 * S, .off = -30 * S - 777, .knee = INT64_MAX / 4, .ppm0 = -100, .ppm1 = -100};
    struct tu_path p = {.floor_ns = 700000, .unif_ns = 600000, .proc_ns = 5000};
    struct outcome o = run(&c, &p, 60 * S, S / 10, 0, NULL);
    CHECK_LE(o.p99_err, 30000);
    CHECK(o.coverage >= 0.99);
    CHECK_LE(o.bound_median, 100000);
}

/* 2% of the answers are 5 ms wrong but look fast: the robust fit ignores them */
static void test_outliers(void)
{
    tu_seed(3);
    struct tu_clock c = {
        .l0 = 100 * S, .off = 7 * S, .knee = INT64_MAX / 4, .ppm0 = 20, .ppm1 = 20};
    struct tu_path p = {.floor_ns = 15000, .mean_ns = 20000, .proc_ns = 3000};
    struct outcome o = run(&c, &p, 60 * S, S / 10, 0.02, NULL);
    CHECK_LE(o.p99_err, 3000);
    CHECK(o.coverage >= 0.99);
}

/* drift changes by 10 ppm near a segment boundary (a crystal warming up, exaggerated):
 * the piecewise model follows it */
static void test_drift_change(void)
{
    tu_seed(4);
    struct tu_clock c = {.l0 = 100 * S, .off = -2 * S, .knee = 120 * S, .ppm0 = 55, .ppm1 = 45};
    struct tu_path p = {.floor_ns = 15000, .mean_ns = 20000, .proc_ns = 3000};
    struct mrd_clock_model *m = NULL;
    struct outcome o = run(&c, &p, 240 * S, S / 10, 0, &m);
    CHECK_GE(m->nseg, 2);
    CHECK_LE(o.p99_err, 3000);
    CHECK(o.coverage >= 0.99);
    /* continuous: both neighbours map a boundary to within 1 ns */
    for (uint32_t j = 0; j + 1 < m->nseg; j++) {
        const struct mrd_clock_segment *a = &m->seg[j], *b = &m->seg[j + 1];
        int64_t via_a =
            b->local_begin + a->offset_ns +
            (int64_t)llround(a->drift_ppm * (double)(b->local_begin - a->local_begin) / 1e6);
        CHECK_LE(llabs(via_a - (b->local_begin + b->offset_ns)), 1);
        CHECK_EQ(a->local_end, b->local_begin);
    }
    mrd_clock_model_destroy(m);
}

/* a 1 ppm drift step inside a piece (e.g. NTP re-tuning the aggregator's clock): the
 * chi-square test refines the pieces and the error stays small, but the bias near the
 * step is only partly covered by the bound (documented limitation: ~90-95% coverage
 * here over 15 seeds, not 99%) */
static void test_drift_step_inside(void)
{
    tu_seed(5);
    struct tu_clock c = {.l0 = 100 * S, .off = 3 * S, .knee = 40 * S, .ppm0 = 10.5, .ppm1 = 11.5};
    struct tu_path p = {.floor_ns = 15000, .mean_ns = 20000, .proc_ns = 3000};
    struct mrd_clock_model *m = NULL;
    struct outcome o = run(&c, &p, 60 * S, S / 10, 0, &m);
    CHECK_GT(m->nseg, 1);
    CHECK_LE(o.p99_err, 3000);
    CHECK(o.coverage >= 0.85);
    mrd_clock_model_destroy(m);
}

static void test_edges(void)
{
    struct mrd_clock_model *m = NULL;
    struct mrd_clock_sample one = {100, 200, 210, 300};
    CHECK_EQ(mrd_clock_fit_samples(&one, 1, NULL, &m), -ENODATA);
    CHECK_EQ(mrd_clock_fit_samples(NULL, 0, NULL, &m), -ENODATA);
    /* broken probes (reply before probe; t2 < t1) are not used */
    struct mrd_clock_sample bad[3] = {
        {100, 200, 210, 50}, {100, 200, 190, 300}, {100, 1000, 1030, 120}};
    CHECK_EQ(mrd_clock_fit_samples(bad, 3, NULL, &m), -ENODATA);
    /* a single burst: offset only, drift 0 */
    struct mrd_clock_sample b[4] = {{1000, 5000, 5010, 1030},
                                    {2000, 6004, 6010, 2030},
                                    {3000, 7005, 7009, 3028},
                                    {4000, 8001, 8003, 4010}};
    CHECK_OK(mrd_clock_fit_samples(b, 4, NULL, &m));
    CHECK_EQ(m->nseg, 1);
    CHECK(m->seg[0].drift_ppm == 0);
    CHECK_LE(llabs(mrd_clock_map(m, 2500) - (2500 + 3990)), 10);
    mrd_clock_model_destroy(m);
    /* NULL and empty models map identically */
    CHECK_EQ(mrd_clock_map(NULL, 42), 42);
    CHECK_EQ(mrd_clock_bound(NULL, 42), 0);
    mrd_clock_model_destroy(NULL);
    struct mrd_clock_fit_options o;
    mrd_clock_fit_options_default(&o);
    o.window_ns = 0;
    CHECK_EQ(mrd_clock_fit_samples(b, 4, &o, &m), -EINVAL);
}

/* mapping uses the right segment and extends the end segments outward */
static void test_map_segments(void)
{
    struct mrd_clock_segment seg[2] = {{.local_begin = 1000,
                                        .local_end = 2000,
                                        .offset_ns = 100,
                                        .drift_ppm = 1e4,
                                        .error_bound_ns = 7},
                                       {.local_begin = 2000,
                                        .local_end = 3000,
                                        .offset_ns = 110,
                                        .drift_ppm = -2e4,
                                        .error_bound_ns = 9}};
    struct mrd_clock_model m = {.rank = 0, .nseg = 2, .seg = seg};
    CHECK_EQ(mrd_clock_map(&m, 1000), 1100);
    CHECK_EQ(mrd_clock_map(&m, 1500), 1605);
    CHECK_EQ(mrd_clock_map(&m, 2000), 2110);
    CHECK_EQ(mrd_clock_map(&m, 2500), 2600);
    CHECK_EQ(mrd_clock_map(&m, 500), 595);   /* before: first segment's line */
    CHECK_EQ(mrd_clock_map(&m, 3500), 3580); /* after: last segment's line */
    CHECK_EQ(mrd_clock_bound(&m, 1999), 7);
    CHECK_EQ(mrd_clock_bound(&m, 2000), 9);
}

/* A quiet loopback whose way out is 0.6 us longer than the way back (the kernel's send and
 * receive paths differ; measured +0.1..+0.4 us of bias): 0.3 us of error no probe can see,
 * and the statistical bound of so little jitter is far tighter. The default allowance
 * (MRD_CLOCK_FLOOR_ASYM_NS) covers it while staying under 1 us; without it the bound does
 * not (multinode_aggregation's 88% coverage on a quiet machine). */
static void test_quiet_asymmetric(void)
{
    tu_seed(7);
    struct tu_clock c = {
        .l0 = 300 * S, .off = 4 * S + 321, .knee = INT64_MAX / 4, .ppm0 = 20, .ppm1 = 20};
    struct tu_path p = {.floor_ns = 8000, .mean_ns = 40, .asym_ns = 600, .proc_ns = 2000};
    enum { N = 400 };
    static struct mrd_clock_sample smp[N];
    for (int i = 0; i < N; i++)
        smp[i] = tu_probe(&c, &p, c.l0 + (int64_t)i * (S / 20));
    struct mrd_clock_fit_options dflt, none;
    mrd_clock_fit_options_default(&dflt);
    none = dflt;
    none.floor_asym_ns = 0;
    double cov[2], bnd[2];
    for (int k = 0; k < 2; k++) {
        struct mrd_clock_model *m = NULL;
        CHECK_OK(mrd_clock_fit_samples(smp, N, k == 0 ? &dflt : &none, &m));
        int covered = 0;
        for (int i = 0; i < 1000; i++) {
            int64_t l = c.l0 + (int64_t)N * (S / 20) * i / 1000;
            covered += llabs(mrd_clock_map(m, l) - tu_true_global(&c, l)) <= mrd_clock_bound(m, l);
        }
        cov[k] = covered / 1000.0;
        bnd[k] = (double)mrd_clock_bound(m, c.l0);
        mrd_clock_model_destroy(m);
    }
    fprintf(stderr,
            "  coverage %.4f with the default allowance (bound %.3f us), %.4f without "
            "(bound %.3f us)\n",
            cov[0], bnd[0] / 1e3, cov[1], bnd[1] / 1e3);
    CHECK(cov[0] >= 0.99);
    CHECK_LE(bnd[0], 1000);
    CHECK(cov[1] < 0.5); /* the scenario does need the allowance */
}

int main(void)
{
    fprintf(stderr, "loopback +30 s +100 ppm\n");
    test_loopback_positive();
    fprintf(stderr, "1 ms +- 0.3 ms jitter -30 s -100 ppm\n");
    test_jitter_negative();
    fprintf(stderr, "outliers\n");
    test_outliers();
    fprintf(stderr, "drift change at a knot\n");
    test_drift_change();
    fprintf(stderr, "1 ppm drift step inside a segment\n");
    test_drift_step_inside();
    fprintf(stderr, "quiet loopback, 0.6 us longer on the way out\n");
    test_quiet_asymmetric();
    test_edges();
    test_map_segments();
    fprintf(stderr, "clock_fit: ok\n");
    return 0;
}
