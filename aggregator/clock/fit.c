/* Per-rank clock model fit from NTP-style probes.
 *
 * Where it sits: finalize step, first of the clock module's passes. Reads clock_samples
 * (t0, t3: the rank's local clock; t1, t2: the global timebase), writes clock_models.
 *
 * Method (the reasoning, the assumptions and the bound are written out in README.md):
 *   1. each probe gives an upper limit of the offset theta = global - local at t0,
 *      u = t1 - t0 = theta + forward delay, and a lower limit at t3,
 *      l = t2 - t3 = theta - backward delay; their mean is the usual NTP estimate and
 *      their difference the round trip delta;
 *   2. first line: in every 2 s window keep the lowest-round-trip 20% (>= 2) and fit a
 *      continuous piecewise-linear theta (one piece per ~60 s), weighted least squares with
 *      weights 1 / (s0^2 + excess^2 / 3), excess = the probe's half round trip above the
 *      fastest one, Huber down-weighting of outliers, s0 from the scatter of the best probes;
 *   3. envelopes: in windows of a few seconds, with the current line removed, the fastest
 *      forward trip (min u) and the fastest backward trip (max l) need not be the same
 *      probe; half their sum is the window's offset, half their difference its round trip.
 *      The same robust fit over these window points gives the model (twice, re-detrending).
 *      Each window's error is half the difference of its two fastest trips' excess delays,
 *      which shrinks with the number of probes per window for any jitter that has a floor;
 *   4. bound per segment: z x the fit's standard error at the segment's ends (scaled up by
 *      the reduced chi-square when the scatter exceeds the noise model) plus an allowance
 *      for the unseen asymmetry of the fastest path.
 *
 * Workload: probes arrive a few per second per rank; a run of hours gives ~10^4-10^5 per
 * rank. Selection streams (bounded window buffer), the fit holds only kept probes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"
#include "clock_internal.h"
#include "cmp.h"
#include "error.h"

#define MRD_CLOCK_MAX_SEGMENTS 256
#define MRD_CLOCK_METHOD       "minrtt-envelope-v1"
/* Selection windows: at least this many over a run (shorter windows for short runs), but
 * none shorter than 1 ms (a single burst stays one window). */
#define MRD_CLOCK_MIN_WINDOWS   16
#define MRD_CLOCK_MIN_WINDOW_NS 1000000LL

struct probe {
    int64_t t0, t3, m; /* local: sent, answer received, midpoint */
    int64_t u, l;      /* t1 - t0 (>= theta), t2 - t3 (<= theta) */
};

/* A fit input: an offset estimate theta at local m, with a round trip (its error is at
 * most half the round trip above the fastest one). */
struct point {
    int64_t m, theta, delta;
};

struct mrd__clock_probes {
    struct mrd_clock_fit_options o;
    struct probe *all;
    size_t n, cap;
    uint32_t stride, skip; /* thinning: take every stride-th arriving probe */
    struct mrd__clock_probe_stats st;
};

void mrd_clock_fit_options_default(struct mrd_clock_fit_options *o)
{
    memset(o, 0, sizeof(*o));
    o->window_ns = 2000000000LL;
    o->keep_fraction = 0.2;
    o->keep_min = 2;
    o->segment_ns = 60000000000LL;
    o->segment_min_samples = 12;
    o->bound_z = 3.0;
    o->floor_asym_ns = MRD_CLOCK_FLOOR_ASYM_NS;
    o->floor_asym_frac = 0;
}

static int cmp_point_delta(const void *a, const void *b)
{
    const struct point *x = a, *y = b;
    return MRD_CMP(x->delta, y->delta);
}

static int cmp_point_m(const void *a, const void *b)
{
    const struct point *x = a, *y = b;
    return MRD_CMP(x->m, y->m);
}

static int cmp_probe_m(const void *a, const void *b)
{
    const struct probe *x = a, *y = b;
    return MRD_CMP(x->m, y->m);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return MRD_CMP(x, y);
}

static double median_of(double *v, size_t n) /* sorts v */
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- probe collection ------------------------------------------------------------------ */

void mrd__clock_probes_destroy(struct mrd__clock_probes *p)
{
    if (!p)
        return;
    free(p->all);
    free(p);
}

int mrd__clock_probes_create(const struct mrd_clock_fit_options *o, struct mrd__clock_probes **out)
{
    struct mrd__clock_probes *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    if (o)
        p->o = *o;
    else
        mrd_clock_fit_options_default(&p->o);
    if (p->o.window_ns <= 0 || p->o.segment_ns <= 0 || !(p->o.keep_fraction > 0)) {
        free(p);
        return -EINVAL;
    }
    p->stride = 1;
    *out = p;
    return 0;
}

void mrd__clock_probes_stats(const struct mrd__clock_probes *p, struct mrd__clock_probe_stats *st)
{
    *st = p->st;
}

int mrd__clock_probes_add(struct mrd__clock_probes *p, const struct mrd_clock_sample *x)
{
    if (x->t3 < x->t0 || x->t2 < x->t1 || (x->t3 - x->t0) < (x->t2 - x->t1)) {
        p->st.invalid++; /* answered after it came back, or negative round trip: broken */
        return 0;
    }
    p->st.valid++;
    int64_t rtt = (x->t3 - x->t0) - (x->t2 - x->t1);
    if (p->st.valid == 1 || rtt < p->st.fastest_rtt)
        p->st.fastest_rtt = rtt;
    if (++p->skip < p->stride) {
        p->st.thinned++;
        return 0;
    }
    p->skip = 0;
    if (p->n == MRD__CLOCK_PROBE_CAP) { /* policy at the cap: keep every second one */
        for (size_t i = 0; i < p->n / 2; i++)
            p->all[i] = p->all[2 * i];
        p->st.thinned += p->n - p->n / 2;
        p->n /= 2;
        p->stride *= 2;
    }
    int rc = mrd_array_reserve(&p->all, &p->cap, p->n, sizeof(*p->all), 1024, 0);
    if (rc < 0)
        return rc;
    struct probe *q = &p->all[p->n++];
    q->t0 = x->t0, q->t3 = x->t3;
    q->m = x->t0 + (x->t3 - x->t0) / 2;
    q->u = x->t1 - x->t0;
    q->l = x->t2 - x->t3;
    return 0;
}

/* ---- the weighted piecewise-linear fit ------------------------------------------------ */

struct fitws {
    size_t n;
    int p; /* knots */
    double *y, *var, *h, *r, *tmp, *u, *knot, *A, *b, *inv;
    int *seg;
};

static void fitws_free(struct fitws *w)
{
    free(w->y), free(w->var), free(w->h), free(w->r), free(w->tmp), free(w->u);
    free(w->knot), free(w->A), free(w->b), free(w->inv), free(w->seg);
}

/* One weighted least-squares solve over the hat basis (values at the knots): fills w->b,
 * w->inv (diagonal of the inverse normal matrix) and the residuals w->r. 0 or -EDOM. */
static int wls_solve(struct fitws *w)
{
    int p = w->p;
    memset(w->A, 0, sizeof(*w->A) * (size_t)p * (size_t)p);
    memset(w->b, 0, sizeof(*w->b) * (size_t)p);
    for (size_t i = 0; i < w->n; i++) {
        double wt = w->h[i] / w->var[i];
        int j = w->seg[i];
        double a0 = 1 - w->u[i], a1 = w->u[i];
        w->A[j * p + j] += wt * a0 * a0;
        w->b[j] += wt * a0 * w->y[i];
        if (p > 1) {
            w->A[j * p + j + 1] += wt * a0 * a1;
            w->A[(j + 1) * p + j] += wt * a0 * a1;
            w->A[(j + 1) * p + j + 1] += wt * a1 * a1;
            w->b[j + 1] += wt * a1 * w->y[i];
        }
    }
    int rc = mrd__clock_spd_solve(w->A, w->b, p, w->inv);
    if (rc)
        return rc;
    for (size_t i = 0; i < w->n; i++) {
        int j = w->seg[i];
        double f = p > 1 ? (1 - w->u[i]) * w->b[j] + w->u[i] * w->b[j + 1] : w->b[0];
        w->r[i] = w->y[i] - f;
    }
    return 0;
}

/* Number of segments for points k[0..n) (sorted by m): the target length's count, fewer
 * while one of them would hold fewer than min_pts points. */
static int choose_segments(const struct point *k, size_t n, int64_t seg_ns, uint32_t min_pts)
{
    double span = (double)(k[n - 1].m - k[0].m);
    int nseg = (int)llround(span / (double)seg_ns);
    if (nseg < 1)
        nseg = 1;
    if (nseg > MRD_CLOCK_MAX_SEGMENTS)
        nseg = MRD_CLOCK_MAX_SEGMENTS;
    for (; nseg > 1; nseg--) {
        size_t cnt[MRD_CLOCK_MAX_SEGMENTS] = {0};
        int thin = 0;
        for (size_t i = 0; i < n; i++) {
            int j = (int)((double)(k[i].m - k[0].m) / span * nseg);
            cnt[j >= nseg ? nseg - 1 : j]++;
        }
        for (int j = 0; j < nseg; j++)
            thin |= cnt[j] < min_pts;
        if (!thin)
            break;
    }
    return nseg;
}

/* Robust weighted fit of points k[0..n) (sorted by m) with nseg pieces over
 * [begin, end]; writes a new model. */
static int fit_points(const struct point *k, size_t n, int nseg, int64_t begin, int64_t end,
                      const struct mrd_clock_fit_options *o, struct mrd_clock_model **out,
                      double *red_out)
{
    struct fitws w = {0};
    struct mrd_clock_model *m = NULL;
    int rc = -ENOMEM;
    int64_t floor = k[0].delta, th0 = k[0].theta;
    double span = (double)(end - begin);
    for (size_t i = 1; i < n; i++)
        if (k[i].delta < floor)
            floor = k[i].delta;
    /* a span too short to see drift (all probes in one burst) fits an offset only */
    int const_only = span < 1e6 || n < 3;
    if (const_only)
        nseg = 1;
    w.n = n;
    w.p = const_only ? 1 : nseg + 1;
    w.y = malloc(n * sizeof(double)), w.var = malloc(n * sizeof(double));
    w.h = malloc(n * sizeof(double)), w.r = malloc(n * sizeof(double));
    w.tmp = malloc(n * sizeof(double)), w.u = malloc(n * sizeof(double));
    w.seg = malloc(n * sizeof(int)), w.knot = malloc((size_t)(nseg + 1) * sizeof(double));
    w.A = malloc((size_t)w.p * (size_t)w.p * sizeof(double));
    w.b = malloc((size_t)w.p * sizeof(double)), w.inv = malloc((size_t)w.p * sizeof(double));
    if (!w.y || !w.var || !w.h || !w.r || !w.tmp || !w.u || !w.seg || !w.knot || !w.A || !w.b ||
        !w.inv)
        goto fail;
    for (int j = 0; j <= nseg; j++)
        w.knot[j] = span * j / nseg;
    for (size_t i = 0; i < n; i++) {
        double x = (double)(k[i].m - begin);
        w.y[i] = (double)(k[i].theta - th0);
        w.h[i] = 1;
        int j = const_only ? 0 : (int)(x / span * nseg);
        j = j < 0 ? 0 : j >= nseg ? nseg - 1 : j;
        w.seg[i] = j;
        w.u[i] = const_only ? 0 : (x - w.knot[j]) / (w.knot[j + 1] - w.knot[j]);
    }
    /* noise model: s0^2 + excess^2/3 (excess uniform in +-half the extra round trip) */
    double half_floor = (double)floor / 2;
    double s0sq = fmax(half_floor * half_floor / 400.0, 100.0);
    for (int iter = 0; iter < 5; iter++) {
        for (size_t i = 0; i < n; i++) {
            double e = (double)(k[i].delta - floor) / 2;
            w.var[i] = s0sq + e * e / 3;
        }
        if ((rc = wls_solve(&w)))
            goto fail;
        /* Huber weights on standardized residuals, robust scale */
        for (size_t i = 0; i < n; i++)
            w.tmp[i] = fabs(w.r[i]) / sqrt(w.var[i]);
        double scale = fmax(1.4826 * median_of(w.tmp, n), 1);
        for (size_t i = 0; i < n; i++) {
            double z = fabs(w.r[i]) / sqrt(w.var[i]);
            w.h[i] = z <= 3 * scale ? 1 : 3 * scale / z;
        }
        /* s0: the scatter of differences of neighbouring residuals (a smooth misfit
         * cancels there, so the chi-square below can still reveal it) */
        if (n >= 4) {
            for (size_t i = 0; i + 1 < n; i++)
                w.tmp[i] = fabs(w.r[i + 1] - w.r[i]);
            double sd = 1.4826 * median_of(w.tmp, n - 1) / sqrt(2.0);
            s0sq = fmax(sd * sd, 100.0);
        }
    }
    /* reduced chi-square scales the covariance up (never down) */
    double chi2 = 0;
    for (size_t i = 0; i < n; i++)
        chi2 += w.h[i] * w.r[i] * w.r[i] / w.var[i];
    double dof = (double)n - w.p;
    double red = dof > 0 ? fmax(chi2 / dof, 1) : 1;
    if (red_out)
        *red_out = dof > 0 ? chi2 / dof : 1;
    double allow = (double)o->floor_asym_ns + o->floor_asym_frac * half_floor;

    rc = -ENOMEM;
    if (!(m = calloc(1, sizeof(*m))) || !(m->seg = calloc((size_t)nseg, sizeof(*m->seg))))
        goto fail;
    m->nseg = (uint32_t)nseg;
    snprintf(m->method, sizeof(m->method), "%s", MRD_CLOCK_METHOD);
    int64_t prev_off = 0;
    for (int j = 0; j < nseg; j++) {
        struct mrd_clock_segment *g = &m->seg[j];
        int jj = const_only ? 0 : j;
        int64_t b0 = begin + (int64_t)llround(const_only ? 0 : w.knot[j]);
        int64_t b1 = const_only ? end : begin + (int64_t)llround(w.knot[j + 1]);
        int64_t off0 = j == 0 ? th0 + (int64_t)llround(w.b[0]) : prev_off;
        int64_t off1 = th0 + (int64_t)llround(w.b[const_only ? 0 : j + 1]);
        g->local_begin = b0;
        g->local_end = b1;
        g->offset_ns = off0;
        g->drift_ppm = b1 > b0 ? (double)(off1 - off0) / (double)(b1 - b0) * 1e6 : 0;
        double se = sqrt(fmax(w.inv[jj], w.inv[const_only ? 0 : j + 1]) * red);
        double bnd = ceil(o->bound_z * se + allow);
        g->error_bound_ns = isfinite(bnd) && bnd < 1e15 ? (int64_t)bnd : (int64_t)1e15;
        prev_off = off1;
    }
    *out = m;
    m = NULL;
    rc = 0;
fail:
    mrd_clock_model_destroy(m);
    fitws_free(&w);
    return rc;
}

/* ---- the two stages ------------------------------------------------------------------ */

/* Stage 1: per window the lowest-round-trip fraction of the probes, as NTP points. */
static int select_minrtt(const struct mrd__clock_probes *p, struct point **out, size_t *nout)
{
    const struct mrd_clock_fit_options *o = &p->o;
    struct point *pt = malloc(p->n * sizeof(*pt));
    size_t n = 0;
    if (!pt)
        return -ENOMEM;
    /* at least ~MRD_CLOCK_MIN_WINDOWS windows over the run, so the kept probes spread
     * over it even when the run is shorter than one window (a short job, or a run made of
     * a few probe rounds): otherwise the fastest 20% can all come from one round, and a
     * line through a cluster a fraction of a millisecond wide extrapolates its noise into
     * a drift of hundreds of ppm (GPU host, 1.5 s run: -1231 ppm, 1.9 ms off) */
    int64_t win = (p->all[p->n - 1].m - p->all[0].m) / MRD_CLOCK_MIN_WINDOWS;
    win = win < MRD_CLOCK_MIN_WINDOW_NS ? MRD_CLOCK_MIN_WINDOW_NS : win;
    win = win > o->window_ns ? o->window_ns : win;
    for (size_t i = 0; i < p->n;) {
        size_t j = i;
        while (j < p->n && p->all[j].m < p->all[i].m + win)
            j++;
        size_t w0 = n;
        for (size_t q = i; q < j; q++) {
            const struct probe *x = &p->all[q];
            pt[n].m = x->m;
            pt[n].theta = x->u + (x->l - x->u) / 2;
            pt[n].delta = x->u - x->l;
            n++;
        }
        qsort(pt + w0, j - i, sizeof(*pt), cmp_point_delta);
        size_t keep = (size_t)ceil(o->keep_fraction * (double)(j - i));
        keep = keep < o->keep_min ? o->keep_min : keep;
        n = w0 + (keep < j - i ? keep : j - i);
        i = j;
    }
    qsort(pt, n, sizeof(*pt), cmp_point_m);
    *out = pt, *nout = n;
    return 0;
}

/* Stage 2: per window (with the model m removed) the fastest forward trip and the fastest
 * backward trip, combined into one point at the window's mean midpoint. */
static int select_envelope(const struct mrd__clock_probes *p, const struct mrd_clock_model *m,
                           int64_t win, struct point **out, size_t *nout)
{
    /* A probe that claims a trip faster than the floor by more than the first line's
     * uncertainty allows is wrong (a bad timestamp), not fast: it must not define an
     * envelope. Real delays only ever make u larger and l smaller. */
    int64_t margin = 3 * mrd_clock_bound(m, p->all[0].m) + p->st.fastest_rtt / 2;
    struct point *pt = malloc(p->n * sizeof(*pt));
    size_t n = 0;
    if (!pt)
        return -ENOMEM;
    for (size_t i = 0; i < p->n;) {
        size_t j = i;
        while (j < p->n && p->all[j].m < p->all[i].m + win)
            j++;
        if (j - i >= 2) {
            size_t used = 0;
            int64_t umin = INT64_MAX, lmax = INT64_MIN;
            double msum = 0;
            for (size_t q = i; q < j; q++) {
                const struct probe *x = &p->all[q];
                int64_t du = x->u - (mrd_clock_map(m, x->t0) - x->t0);
                int64_t dl = x->l - (mrd_clock_map(m, x->t3) - x->t3);
                if (du < -margin || dl > margin)
                    continue;
                umin = du < umin ? du : umin;
                lmax = dl > lmax ? dl : lmax;
                msum += (double)(x->m - p->all[i].m);
                used++;
            }
            if (used < 2) {
                i = j;
                continue;
            }
            pt[n].m = p->all[i].m + (int64_t)llround(msum / (double)used);
            pt[n].theta = mrd_clock_map(m, pt[n].m) - pt[n].m + lmax + (umin - lmax) / 2;
            pt[n].delta = umin - lmax;
            n++;
        }
        i = j;
    }
    *out = pt, *nout = n;
    return 0;
}

int mrd__clock_probes_fit(struct mrd__clock_probes *p, struct mrd_clock_model **out)
{
    const struct mrd_clock_fit_options *o = &p->o;
    struct point *pt = NULL;
    struct mrd_clock_model *m = NULL, *m2 = NULL;
    size_t n = 0;
    int rc;
    if (p->n < 2)
        return -ENODATA;
    qsort(p->all, p->n, sizeof(*p->all), cmp_probe_m); /* nearly sorted already */
    int64_t begin = p->all[0].m, end = p->all[p->n - 1].m;
    if ((rc = select_minrtt(p, &pt, &n)))
        return rc;
    p->st.kept = n;
    int nseg = choose_segments(pt, n, o->segment_ns, o->segment_min_samples);
    rc = fit_points(pt, n, nseg, begin, end, o, &m, NULL);
    free(pt);
    pt = NULL;
    if (rc)
        return rc;
    /* envelope windows: ~12 per segment, between 0.5 s and 5 s */
    int64_t win;
    double red = 1;
    /* envelope fit, twice (re-detrending); then, while the residuals say the drift is not
     * linear inside the pieces (chi-square too large), twice as many pieces, as long as
     * each stays 4 s long; ~12 envelope windows per piece, 0.5-5 s each */
    for (int it = 0; it < 12; it++) {
        int want = (int)m->nseg;
        if (it >= 2) {
            /* chi-square above its mean by 2 standard deviations */
            double dof = (double)n - want - 1;
            if (dof < 1 || red <= 1 + 2 * sqrt(2 / dof) || 2 * want > MRD_CLOCK_MAX_SEGMENTS ||
                (end - begin) / (2 * want) < 4000000000LL)
                break;
            want *= 2;
        }
        win = (end - begin) / (12 * (int64_t)want);
        win = win < 500000000LL ? 500000000LL : win > 5000000000LL ? 5000000000LL : win;
        if ((rc = select_envelope(p, m, win, &pt, &n)))
            goto fail;
        if (n < 4 * ((size_t)want + 1)) /* too few windows: keep what we have */
            break;
        p->st.windows = n;
        rc = fit_points(pt, n, want, begin, end, o, &m2, &red);
        free(pt);
        pt = NULL;
        if (rc)
            goto fail;
        mrd_clock_model_destroy(m);
        m = m2;
        m2 = NULL;
    }
    for (uint32_t j = 0; j < m->nseg; j++) /* probes per segment */
        for (size_t i = 0; i < p->n; i++)
            m->seg[j].samples += p->all[i].m >= m->seg[j].local_begin &&
                                 (p->all[i].m < m->seg[j].local_end ||
                                  (j + 1 == m->nseg && p->all[i].m == m->seg[j].local_end));
    *out = m;
    free(pt);
    return 0;
fail:
    free(pt);
    mrd_clock_model_destroy(m);
    return rc;
}

static int cmp_sample_t0(const void *a, const void *b)
{
    const struct mrd_clock_sample *x = a, *y = b;
    return MRD_CMP(x->t0, y->t0);
}

int mrd_clock_fit_samples(const struct mrd_clock_sample *s, size_t n,
                          const struct mrd_clock_fit_options *o, struct mrd_clock_model **out)
{
    struct mrd__clock_probes *p = NULL;
    struct mrd_clock_sample *copy = NULL;
    int rc;
    if (!out || (n && !s))
        return -EINVAL;
    if ((rc = mrd__clock_probes_create(o, &p)))
        return rc;
    rc = -ENOMEM;
    if (!(copy = malloc((n ? n : 1) * sizeof(*copy))))
        goto fail;
    if (n) {
        memcpy(copy, s, n * sizeof(*copy));
        qsort(copy, n, sizeof(*copy), cmp_sample_t0);
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = mrd__clock_probes_add(p, &copy[i])))
            goto fail;
    rc = mrd__clock_probes_fit(p, out);
fail:
    free(copy);
    mrd__clock_probes_destroy(p);
    return rc;
}
