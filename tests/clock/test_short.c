/* clock_short: short runs and large shifts (issue 4, GPU host). A 1.5 s run is a handful
 * of probe rounds (a burst of 16 at connect, 8 every 500 ms, 16 before goodbye); with the
 * local clock shifted by thousands of seconds (a time namespace) the model must still
 * recover the shift within 5 us. Replays the probes recorded on the 2 x H200 host (where
 * the fit once came out -1231 ppm, 1.9 ms off) and simulates such runs with a known truth.
 */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "clock.h"
#include "h200_clockshift_samples.h"
#include "testutil.h"

#define S  1000000000LL
#define US 1000LL

/* The local time of model m that maps to global g (m is monotonic: drift >> -1e6 ppm). */
static int64_t inverse_map(const struct mrd_clock_model *m, int64_t g)
{
    int64_t l = g - m->seg[0].offset_ns;
    for (int i = 0; i < 8; i++)
        l -= mrd_clock_map(m, l) - g;
    return l;
}

static struct mrd_clock_model *fit_rank(int rank, int64_t local_shift)
{
    size_t n = 0, total = sizeof(h200_samples) / sizeof(h200_samples[0]);
    struct mrd_clock_sample *s = calloc(total, sizeof(*s));
    CHECK(s != NULL);
    for (size_t i = 0; i < total; i++)
        if (h200_samples[i][0] == rank)
            s[n++] =
                (struct mrd_clock_sample){h200_samples[i][1] + local_shift, h200_samples[i][2],
                                          h200_samples[i][3], h200_samples[i][4] + local_shift};
    CHECK_GE(n, 40);
    struct mrd_clock_model *m = NULL;
    CHECK_OK(mrd_clock_fit_samples(s, n, NULL, &m));
    free(s);
    return m;
}

/* The recorded run: rank 1's local clock is rank 0's + 5000 s exactly (one host). */
static void test_h200_replay(void)
{
    struct mrd_clock_model *m0 = fit_rank(0, 0), *m1 = fit_rank(1, 0);
    int64_t b = m0->seg[0].local_begin, e = m0->seg[m0->nseg - 1].local_end, worst = 0;
    for (int i = 0; i <= 100; i++) {
        int64_t l0 = b + (e - b) * i / 100;
        int64_t err = inverse_map(m1, mrd_clock_map(m0, l0)) - l0 - H200_SHIFT_NS;
        worst = llabs(err) > worst ? llabs(err) : worst;
        /* the stored bounds of both ranks together cover the recovered shift's error */
        CHECK_LE(llabs(err), mrd_clock_bound(m0, l0) + mrd_clock_bound(m1, l0 + H200_SHIFT_NS));
    }
    fprintf(stderr,
            "  replay: shift recovered to %.3f us; drift %+.3f / %+.3f ppm, bounds"
            " %.2f / %.2f us\n",
            (double)worst / 1e3, m0->seg[0].drift_ppm, m1->seg[0].drift_ppm,
            (double)m0->seg[0].error_bound_ns / 1e3, (double)m1->seg[0].error_bound_ns / 1e3);
    CHECK_LE(worst, 5 * US);
    /* one oscillator: both ranks see the same drift of the aggregator's clock (+- noise) */
    CHECK(fabs(m0->seg[0].drift_ppm - m1->seg[0].drift_ppm) < 5);
    CHECK_LE(m1->seg[0].error_bound_ns, 10 * US);

    /* the size of the shift plays no part: rank 1's probes with the 5000 s taken out of
     * its local stamps give the same model, moved by exactly 5000 s */
    struct mrd_clock_model *m1u = fit_rank(1, -H200_SHIFT_NS);
    CHECK_EQ(m1u->nseg, m1->nseg);
    for (uint32_t j = 0; j < m1->nseg; j++) {
        CHECK_EQ(m1u->seg[j].local_begin, m1->seg[j].local_begin - H200_SHIFT_NS);
        CHECK_EQ(m1u->seg[j].offset_ns, m1->seg[j].offset_ns + H200_SHIFT_NS);
        CHECK(fabs(m1u->seg[j].drift_ppm - m1->seg[j].drift_ppm) < 1e-6);
    }
    mrd_clock_model_destroy(m0);
    mrd_clock_model_destroy(m1);
    mrd_clock_model_destroy(m1u);
}

/* An agent's probes over a run of dur: 16 at connect, 8 every 500 ms, 16 before goodbye,
 * each probe 25 us after the previous one's return. The goodbye burst goes over a quiet
 * path (the job has finished: faster trips), which is what concentrated the fastest
 * probes in one round on the GPU host. Returns the count. */
static size_t agent_probes(const struct tu_clock *c, int64_t dur, struct mrd_clock_sample *s)
{
    struct tu_path busy = {.floor_ns = 9000, .mean_ns = 4000, .proc_ns = 400};
    struct tu_path quiet = {.floor_ns = 8000, .mean_ns = 500, .proc_ns = 350};
    size_t n = 0;
    for (int64_t t = 0; t <= dur; t += 500000000LL) {
        int last = t + 500000000LL > dur, count = t == 0 || last ? 16 : 8;
        int64_t at = c->l0 + (last ? dur : t);
        for (int i = 0; i < count; i++) {
            s[n] = tu_probe(c, last ? &quiet : &busy, at);
            at = s[n++].t3 + 25 * US;
        }
    }
    return n;
}

/* Short runs with local clocks thousands of seconds off: every seed, both signs of the
 * shift and of the drift, the alignment error stays within 5 us and inside the bound. */
static void test_short_runs_large_shift(void)
{
    static const int64_t shift_s[] = {5000, -3000, 2500, 0};
    static const double ppm[] = {3.5, -40, 80, -0.5};
    static struct mrd_clock_sample s[256];
    double worst = 0, worst_drift = 0;
    int cases = 0, covered = 0, points = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        tu_seed(seed * 7919);
        int k = (int)(seed % 4);
        int64_t dur = seed % 3 == 0 ? 1500000000LL : seed % 3 == 1 ? 2000000000LL : 1000000000LL;
        /* the aggregator's global time is CLOCK_REALTIME-like (~1.8e18 ns); the rank's
         * local clock is its host's monotonic clock (~100 s) plus the namespace shift */
        struct tu_clock c = {.l0 = 99 * S + 700000000LL + shift_s[k] * S,
                             .off = 1796003872216198000LL - shift_s[k] * S,
                             .knee = INT64_MAX / 4,
                             .ppm0 = ppm[k],
                             .ppm1 = ppm[k]};
        size_t n = agent_probes(&c, dur, s);
        struct mrd_clock_model *m = NULL;
        CHECK_OK(mrd_clock_fit_samples(s, n, NULL, &m));
        for (int i = 0; i <= 100; i++) {
            int64_t l = c.l0 + dur * i / 100;
            double e = fabs((double)(mrd_clock_map(m, l) - tu_true_global(&c, l)));
            worst = e > worst ? e : worst;
            covered += e <= (double)mrd_clock_bound(m, l);
            points++;
        }
        double de = fabs(m->seg[0].drift_ppm - ppm[k]);
        worst_drift = de > worst_drift ? de : worst_drift;
        CHECK_LE(m->seg[0].error_bound_ns, 10 * US);
        mrd_clock_model_destroy(m);
        cases++;
    }
    fprintf(stderr,
            "  %d short runs (1-2 s, shifts -3000..+5000 s): worst error %.3f us, worst"
            " drift error %.3f ppm, bound coverage %.4f\n",
            cases, worst / 1e3, worst_drift, (double)covered / points);
    CHECK(worst <= 5 * US);
    CHECK(worst_drift < 5);
    CHECK((double)covered / points >= 0.95);
}

int main(void)
{
    fprintf(stderr, "H200 host probes, rank 1 shifted +5000 s, 1.5 s run\n");
    test_h200_replay();
    fprintf(stderr, "synthetic short runs, large shifts\n");
    test_short_runs_large_shift();
    fprintf(stderr, "clock_short: ok\n");
    return 0;
}
