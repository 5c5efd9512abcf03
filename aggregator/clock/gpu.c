/* GPU timer calibration: NCCL's raw GPU timer values -> the rank's local host clock.
 *
 * Where it sits: finalize step, after the clock fit. NCCL's KernelCh events carry raw
 * %globaltimer values (nccl_channels.gpu_start/gpu_end), which run 0.1-0.3 ms off the host
 * clock and drift 1-2 ppm, per GPU. Every piece of evidence is a bracket: a GPU time that
 * must map at or after one host time, and one that must map at or before another.
 *  - CUPTI (detail windows): CUPTI's records of the same NCCL kernels are in the local
 *    clock (the agent hands CUPTI its clock), so each NCCL kernel's channels' earliest
 *    start maps at or after the kernel's start and the latest end at or before its end.
 *  - Host (any tier): a channel's GPU start cannot precede the host entering the launch of
 *    its kernel (the earliest API call CUPTI tied to the launch id), and NCCL's proxy
 *    reports the channel started (nccl_channels.host_start_ns) only after reading the
 *    start time the GPU wrote: [launch, callback] brackets gpu_start. In the steady tier
 *    (no CUPTI) the agent sends the same evidence as gpu_clock_samples (a GPU time, the
 *    host time half-way, half the width as uncertainty: agent/capture/nccl_plugin.c).
 *    The Coll event's own start (nccl_ops.start_ns) is not used: NCCL starts it after the
 *    launch, and in both recorded H200 runs a kernel began before it (by up to 18-21 us).
 * Host brackets are as wide as the kernel waited in its stream behind earlier work (0.9 ms
 * and more in the recorded runs), so a host-only bound is far looser than a CUPTI one;
 * where both exist the band is their intersection. The method (gpu_timer_models.method)
 * says which evidence a GPU's fit used. Nothing runs on the GPU for this: the job's
 * streams and its graph capture are untouched.
 *
 * Fit: local = slope * gpu + intercept. For a slope, every bracket bounds the intercept
 * from below (lo - slope * g_lo) and above (hi - slope * g_hi); the feasible band's width
 * is concave in the slope, so the slope that maximises it is found by a coarse grid and a
 * golden-section refinement; where the band is wider than 20 us (host-only brackets hardly
 * constrain the slope) the slope then moves towards 1 as long as the band keeps 99% of
 * that width. The intercept is the band's centre and the bound half its width. Up to 1% of
 * the brackets (the most contradictory ones) are trimmed as outliers.
 * When even then no line satisfies all brackets, the line of least maximal violation is
 * used, the bound is that violation and the method says "relaxed".
 *
 * Precision: GPU timer values are ~1.7e18 ns (epoch based); a double slope near 1 is only
 * exact to ~1e-16, i.e. ~200 ns at that magnitude. So the fit works on offsets from a
 * reference point, and the intercept is computed for the slope as stored:
 * local = gpu + (slope - 1) * gpu + intercept, which is exact in integer + small-double
 * arithmetic (see SCHEMA.md).
 *
 * Workload: one bracket per NCCL kernel and one per channel with a launch time (thousands
 * to millions per run); memory capped at
 * MRD_GPU_BRACKET_CAP brackets in all (beyond it further brackets are ignored and
 * counted in the log line).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"
#include "clock_internal.h"
#include "cmp.h"
#include "db.h"
#include "error.h"

#define MRD_GPU_BRACKET_CAP     (1u << 21)
#define MRD_GPU_SLOPE_RANGE_PPM 1000.0 /* search |slope - 1| up to this */
#define MRD_GPU_TRIM            0.01
#define MRD_GPU_SLOPE_GIVE      0.01    /* band width given up for a slope nearer 1 ... */
#define MRD_GPU_LOOSE_WIDTH_NS  20000.0 /* ... when the band is wider than this */

struct gctx {
    const struct mrd_gpu_bracket *b;
    size_t n, trim;
    int64_t g0, l0;  /* reference point */
    double *lo, *hi; /* scratch */
};

/* The k-th smallest of v[0..n) (0-based), reordering v. Expected O(n). */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        double piv = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < piv)
                i++;
            while (v[j] > piv)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j], v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* Intercept limits at slope 1 + eps*1e-6 with `trim` brackets dropped from each side. */
static double band(struct gctx *c, double eps, double *LO, double *HI)
{
    double s = 1.0 + eps * 1e-6;
    for (size_t i = 0; i < c->n; i++) {
        c->lo[i] = (double)(c->b[i].lo - c->l0) - s * (double)(c->b[i].g_lo - c->g0);
        c->hi[i] = (double)(c->b[i].hi - c->l0) - s * (double)(c->b[i].g_hi - c->g0);
    }
    if (c->trim == 0) {
        double mx = c->lo[0], mn = c->hi[0];
        for (size_t i = 1; i < c->n; i++) {
            if (c->lo[i] > mx)
                mx = c->lo[i];
            if (c->hi[i] < mn)
                mn = c->hi[i];
        }
        *LO = mx, *HI = mn;
    } else {
        *LO = select_kth(c->lo, c->n, c->n - 1 - c->trim);
        *HI = select_kth(c->hi, c->n, c->trim);
    }
    return *HI - *LO;
}

/* The end of the feasible slope interval (band width >= 0) that lies from e towards `to`;
 * e must be feasible. Width is concave in the slope, so bisection finds it. */
static double feasible_edge(struct gctx *c, double e, double to)
{
    double LO, HI, in = e, out = to;
    if (band(c, to, &LO, &HI) >= 0)
        return to;
    for (int it = 0; it < 60 && fabs(out - in) > 1e-6; it++) {
        double x = 0.5 * (in + out);
        if (band(c, x, &LO, &HI) >= 0)
            in = x;
        else
            out = x;
    }
    return in;
}

/* The latest (upper) or earliest local time, less l0, that any line satisfying the brackets
 * gives the GPU time g0 + dg: over the feasible slopes [ea, eb], the band's top (bottom)
 * line at dg, a concave (convex) function of the slope, by golden section. */
static double envelope(struct gctx *c, double dg, int upper, double ea, double eb)
{
    const double gr = 0.6180339887498949;
    double LO, HI, a = ea, z = eb;
    for (int it = 0; it < 60 && z - a > 1e-6; it++) {
        double x1 = z - gr * (z - a), x2 = a + gr * (z - a), f1, f2;
        band(c, x1, &LO, &HI);
        f1 = upper ? (1.0 + x1 * 1e-6) * dg + HI : -((1.0 + x1 * 1e-6) * dg + LO);
        band(c, x2, &LO, &HI);
        f2 = upper ? (1.0 + x2 * 1e-6) * dg + HI : -((1.0 + x2 * 1e-6) * dg + LO);
        if (f1 >= f2)
            z = x2;
        else
            a = x1;
    }
    double x = 0.5 * (a + z);
    band(c, x, &LO, &HI);
    return (1.0 + x * 1e-6) * dg + (upper ? HI : LO);
}

/* How far the line (slope 1 + e ppm, mid) can be from any line that satisfies the brackets,
 * over the GPU times the brackets span: the larger of the envelopes' distances at the span's
 * two ends (the envelope minus a line is convex in the GPU time: largest at an end). This
 * includes the slope's own uncertainty, which half the band's width at one slope leaves out. */
static double span_deviation(struct gctx *c, double e, double mid)
{
    int64_t gmin = c->b[0].g_lo, gmax = c->b[0].g_hi;
    for (size_t i = 0; i < c->n; i++) {
        int64_t lo = c->b[i].g_lo < c->b[i].g_hi ? c->b[i].g_lo : c->b[i].g_hi;
        int64_t hi = c->b[i].g_lo < c->b[i].g_hi ? c->b[i].g_hi : c->b[i].g_lo;
        if (lo < gmin)
            gmin = lo;
        if (hi > gmax)
            gmax = hi;
    }
    double ea = feasible_edge(c, e, -MRD_GPU_SLOPE_RANGE_PPM);
    double eb = feasible_edge(c, e, MRD_GPU_SLOPE_RANGE_PPM);
    double dev = 0;
    const double ends[2] = {(double)(gmin - c->g0), (double)(gmax - c->g0)};
    for (int k = 0; k < 2; k++) {
        double at = (1.0 + e * 1e-6) * ends[k] + mid;
        double up = envelope(c, ends[k], 1, ea, eb) - at;
        double down = at - envelope(c, ends[k], 0, ea, eb);
        dev = fmax(dev, fmax(up, down));
    }
    return dev;
}

int mrd_clock_gpu_fit(const struct mrd_gpu_bracket *b, size_t n, struct mrd_gpu_timer_model *m)
{
    struct gctx c = {.b = b, .n = n};
    int rc = -ENOMEM;
    if (n == 0)
        return -ENODATA;
    c.trim = (size_t)floor(MRD_GPU_TRIM * (double)n);
    c.g0 = b[0].g_lo;
    c.l0 = b[0].lo;
    c.lo = malloc(n * sizeof(double));
    c.hi = malloc(n * sizeof(double));
    if (!c.lo || !c.hi)
        goto fail;
    /* coarse grid, then a finer one around the best, then golden section */
    double best = 0, bw = -INFINITY, LO, HI, step = 10.0;
    for (double e = -MRD_GPU_SLOPE_RANGE_PPM; e <= MRD_GPU_SLOPE_RANGE_PPM; e += step) {
        double wdt = band(&c, e, &LO, &HI);
        if (wdt > bw + 1e-9 || (fabs(wdt - bw) <= 1e-9 && fabs(e) < fabs(best)))
            bw = wdt, best = e;
    }
    for (double e = best - step; e <= best + step; e += step / 20) {
        double wdt = band(&c, e, &LO, &HI);
        if (wdt > bw + 1e-9)
            bw = wdt, best = e;
    }
    double a = best - step / 20, z = best + step / 20;
    const double gr = 0.6180339887498949;
    for (int it = 0; it < 60 && z - a > 1e-6; it++) {
        double x1 = z - gr * (z - a), x2 = a + gr * (z - a);
        if (band(&c, x1, &LO, &HI) >= band(&c, x2, &LO, &HI))
            z = x2;
        else
            a = x1;
    }
    double e = 0.5 * (a + z);
    double wdt = band(&c, e, &LO, &HI);
    if (wdt < bw) { /* keep the grid's best if refinement did not improve it */
        e = best;
        wdt = band(&c, e, &LO, &HI);
    }
    if (wdt > MRD_GPU_LOOSE_WIDTH_NS && e != 0) {
        /* Wide brackets (host-only evidence) leave the slope loose: a band 1 ms wide was
         * widest at -349 ppm over 0.18 s of collectives, while GPU timers drift 1-2 ppm. Take the
         * slope nearest 1 whose band is within MRD_GPU_SLOPE_GIVE of the widest (width is
         * concave in the slope, so those slopes form an interval around e). Tight bands
         * (CUPTI's: a few us) keep the widest band's slope. */
        double want = wdt * (1.0 - MRD_GPU_SLOPE_GIVE), near = 0.0, far = e;
        if (band(&c, 0.0, &LO, &HI) < want) {
            for (int it = 0; it < 60 && fabs(far - near) > 1e-6; it++) {
                double x = 0.5 * (near + far);
                if (band(&c, x, &LO, &HI) >= want)
                    far = x;
                else
                    near = x;
            }
            near = far;
        }
        e = near;
        wdt = band(&c, e, &LO, &HI);
    }
    m->slope = 1.0 + e * 1e-6;
    /* intercept for the stored double slope: local = g + (slope-1) g + intercept */
    double mid = 0.5 * (LO + HI); /* local - l0 = s (g - g0) + mid */
    double sm1 = m->slope - 1.0;
    m->intercept_ns = c.l0 + (int64_t)llround(mid) - c.g0 - (int64_t)llround(sm1 * (double)c.g0);
    double bound = fabs(wdt) / 2;
    if (wdt >= 0)
        bound = fmax(bound, span_deviation(&c, e, mid));
    m->error_bound_ns = (int64_t)ceil(bound);
    m->samples = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
    m->rejected = (uint32_t)c.trim;
    rc = wdt >= 0 ? 0 : 1; /* 1: relaxed (no line satisfies every bracket) */
fail:
    free(c.lo);
    free(c.hi);
    return rc;
}

int64_t mrd_clock_gpu_map(const struct mrd_gpu_timer_model *m, int64_t gpu_ns)
{
    return gpu_ns + (int64_t)llround((m->slope - 1.0) * (double)gpu_ns) + m->intercept_ns;
}

/* Where a bracket's evidence comes from: CUPTI's record of the NCCL kernel, or host times
 * only (the launch and NCCL's KernelCh callback; direct samples, which the agent makes
 * from the same two host times). */
enum { SRC_CUPTI = 1, SRC_HOST = 2 };

struct gbr {
    int rank, device, src;
    struct mrd_gpu_bracket b;
};

static int cmp_gbr(const void *x, const void *y)
{
    const struct gbr *a = x, *b = y;
    return MRD_CMP_KEYS(MRD_CMP(a->rank, b->rank), MRD_CMP(a->device, b->device),
                        MRD_CMP(a->b.g_lo, b->b.g_lo));
}

static int push(struct gbr **v, size_t *n, size_t *cap, const struct gbr *x, uint64_t *over)
{
    if (*n >= MRD_GPU_BRACKET_CAP) { /* policy at the cap: ignore and count */
        (*over)++;
        return 0;
    }
    int rc = mrd_array_reserve(v, cap, *n, sizeof(**v), 1024, 0);
    if (rc == 0)
        (*v)[(*n)++] = *x;
    return rc;
}

/* Which columns of a bracket query hold what. */
enum bracket_shape {
    SHAPE_KERNEL, /* rank, device, lo, hi, g_lo, g_hi */
    SHAPE_SAMPLE, /* rank, device, lo, g, hi */
    SHAPE_HOST,   /* rank, device, lo, g, hi (launch, channel start, its callback) */
};

static int load_query(sqlite3 *db, FILE *log, const char *sql, const char *what,
                      enum bracket_shape shape, struct gbr **v, size_t *n, size_t *cap,
                      uint64_t *over)
{
    sqlite3_stmt *st = NULL;
    int rc = 0, step;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return mrd__clock_sqlerr(db, log, what);
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbr x = {.rank = sqlite3_column_int(st, 0),
                        .device = sqlite3_column_int(st, 1),
                        .src = shape == SHAPE_KERNEL ? SRC_CUPTI : SRC_HOST};
        x.b.lo = sqlite3_column_int64(st, 2);
        if (shape == SHAPE_KERNEL) {
            x.b.hi = sqlite3_column_int64(st, 3);
            x.b.g_lo = sqlite3_column_int64(st, 4);
            x.b.g_hi = sqlite3_column_int64(st, 5);
        } else {
            x.b.g_lo = x.b.g_hi = sqlite3_column_int64(st, 3);
            x.b.hi = sqlite3_column_int64(st, 4);
        }
        if ((rc = push(v, n, cap, &x, over)))
            break;
    }
    if (!rc && step != SQLITE_DONE)
        rc = mrd__clock_sqlerr(db, log, what);
    sqlite3_finalize(st);
    return rc;
}

static int load_brackets(sqlite3 *db, FILE *log, struct gbr **v, size_t *n, uint64_t *over)
{
    size_t cap = 0;
    /* afresh: the calibration is the first pass that reads them, and the causality check
     * after it reuses them on this connection */
    int rc = mrd_db_op_intervals(db, 1);
    if (rc < 0)
        return mrd__clock_sqlerr(db, log, "op intervals");
    rc = load_query(db, log, mrd_db_sql_gpu_kernel_brackets, "calibration query", SHAPE_KERNEL, v,
                    n, &cap, over);
    if (!rc && mrd_db_has_table(db, "api_calls") == 1 &&
        mrd_db_has_table(db, "nccl_channels") == 1)
        rc = load_query(db, log, mrd_db_sql_gpu_host_brackets, "host calibration query", SHAPE_HOST,
                        v, n, &cap, over);
    if (!rc && mrd_db_has_table(db, "gpu_clock_samples") == 1)
        rc = load_query(db, log, mrd_db_sql_gpu_sample_brackets, "gpu_clock_samples query",
                        SHAPE_SAMPLE, v, n, &cap, over);
    return rc;
}

/* gpu_timer_models.method and the log's word for the evidence a GPU's fit used. */
static const char *method_of(int srcs, int relaxed, const char **word)
{
    static const char *const names[2][3] = {
        {"kernel-bracket-v1", "host-bracket-v1", "kernel+host-bracket-v1"},
        {"kernel-bracket-relaxed-v1", "host-bracket-relaxed-v1", "kernel+host-bracket-relaxed-v1"}};
    static const char *const words[3] = {"cupti", "host", "cupti+host"};
    int i = srcs == SRC_CUPTI ? 0 : srcs == SRC_HOST ? 1 : 2;
    *word = words[i];
    return names[relaxed ? 1 : 0][i];
}

int mrd_clock_gpu_fit_db(sqlite3 *db, FILE *log)
{
    struct gbr *v = NULL;
    struct mrd_gpu_bracket *tmp = NULL;
    sqlite3_stmt *ins = NULL;
    size_t n = 0;
    uint64_t over = 0;
    int rc, fitted = 0, in_tx = 0;
    if ((rc = mrd__clock_ensure_tables(db, log)))
        return rc;
    if ((rc = load_brackets(db, log, &v, &n, &over)))
        goto fail;
    if (over && log)
        fprintf(log, "clock: gpu: %llu brackets over the cap of %u ignored\n",
                (unsigned long long)over, MRD_GPU_BRACKET_CAP);
    if (n > 1) /* qsort(NULL, 0, ...) is undefined behaviour (UBSan stops there) */
        qsort(v, n, sizeof(*v), cmp_gbr);
    tmp = malloc((n ? n : 1) * sizeof(*tmp));
    if (!tmp) {
        rc = -ENOMEM;
        goto fail;
    }
    if (sqlite3_prepare_v2(db, mrd_db_sql_gpu_model_insert, -1, &ins, NULL) != SQLITE_OK) {
        rc = mrd__clock_sqlerr(db, log, "prepare");
        goto fail;
    }
    if ((rc = mrd__clock_exec(db, log, mrd_db_sql_gpu_models_begin)))
        goto fail;
    in_tx = 1;
    for (size_t i = 0; i < n;) {
        size_t j = i, k = 0;
        int srcs = 0;
        while (j < n && v[j].rank == v[i].rank && v[j].device == v[i].device) {
            srcs |= v[j].src;
            tmp[k++] = v[j++].b;
        }
        struct mrd_gpu_timer_model m = {.rank = v[i].rank, .device = v[i].device};
        int fr = mrd_clock_gpu_fit(tmp, k, &m);
        if (fr < 0) {
            rc = fr;
            goto fail;
        }
        const char *word;
        const char *method = method_of(srcs, fr, &word);
        if (MRD_DB_WRITE_ROW(ins, MRD_DB_INT(m.rank), MRD_DB_INT(m.device), MRD_DB_REAL(m.slope),
                             MRD_DB_INT(m.intercept_ns), MRD_DB_INT(m.error_bound_ns),
                             MRD_DB_INT(m.samples), MRD_DB_TEXT(method)) < 0) {
            rc = mrd__clock_sqlerr(db, log, "storing gpu_timer_models");
            goto fail;
        }
        /* no offset in this line: the GPU timer counts from the Unix epoch and the host
         * clock is CLOCK_MONOTONIC, so their difference is the boot time, not a skew */
        if (log)
            fprintf(log,
                    "clock: gpu rank %d device %d: method %s, %u brackets (%u trimmed),"
                    " slope-1 %+.3f ppm, bound %.2f us%s\n",
                    m.rank, m.device, word, m.samples, m.rejected, (m.slope - 1.0) * 1e6,
                    (double)m.error_bound_ns / 1e3,
                    fr ? " (brackets contradict each other: relaxed fit)" : "");
        fitted++;
        i = j;
    }
    if ((rc = mrd__clock_exec(db, log, mrd_db_sql_commit)))
        goto fail;
    in_tx = 0;
    rc = fitted;
fail:
    if (in_tx)
        mrd__clock_exec(db, NULL, mrd_db_sql_rollback);
    sqlite3_finalize(ins);
    free(tmp);
    free(v);
    return rc;
}
