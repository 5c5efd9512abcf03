/* clock_gpu: GPU timer calibration from kernel brackets and from host-only brackets. A
 * known map gpu -> local (slope a few ppm off 1, epoch-sized GPU times) is recovered from
 * brackets built like NCCL channel times inside CUPTI kernel records; outliers are trimmed;
 * contradictory data gives a relaxed fit. Host-only brackets (a channel's GPU start or end
 * between its kernel's launch, queued behind other work, and NCCL's late start or stop
 * callback) give a looser map whose stated bound must still cover the truth over the whole
 * span, whatever the slope (random property test); tight stop callbacks must tighten it.
 * The database pass joins nccl_channels -> nccl_ops -> external_correlations -> kernels,
 * uses the launch's API record with the channels' start callbacks, and gpu_clock_samples,
 * and names the evidence in gpu_timer_models.method. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "clock.h"
#include "testutil.h"

#define S 1000000000LL

/* truth: local = l0 + (gpu - g0) * (1 + ppm/1e6) */
struct gtruth {
    int64_t g0, l0;
    double ppm;
};

static int64_t t_local(const struct gtruth *t, int64_t g)
{
    return t->l0 + (int64_t)llroundl((long double)(g - t->g0) * (1.0L + t->ppm / 1e6L));
}

static int64_t t_gpu(const struct gtruth *t, int64_t l)
{
    return t->g0 + (int64_t)llroundl((long double)(l - t->l0) / (1.0L + t->ppm / 1e6L));
}

/* n kernels over 60 s; channels start 1-20 us after the kernel and end 1-20 us before. */
static struct mrd_gpu_bracket *make(const struct gtruth *t, size_t n, double bad_frac)
{
    struct mrd_gpu_bracket *b = malloc(n * sizeof(*b));
    CHECK(b != NULL);
    for (size_t i = 0; i < n; i++) {
        int64_t s = t->l0 + (int64_t)(tu_unif() * 60.0 * S),
                d = 50000 + (int64_t)(tu_unif() * 450000);
        int64_t a = 1000 + (int64_t)(tu_unif() * 19000), z = 1000 + (int64_t)(tu_unif() * 19000);
        b[i] = (struct mrd_gpu_bracket){
            .g_lo = t_gpu(t, s + a), .lo = s, .g_hi = t_gpu(t, s + d - z), .hi = s + d};
        if (tu_unif() < bad_frac) /* a mismatched record: channels 1 ms outside */
            b[i].g_lo -= 1000000, b[i].g_hi -= 1000000;
    }
    return b;
}

static void check_model(const struct gtruth *t, const struct mrd_gpu_timer_model *m, double tol)
{
    for (int i = 0; i <= 10; i++) {
        int64_t g = t->g0 + (int64_t)(i * 5.0 * S); /* inside the data */
        int64_t err = mrd_clock_gpu_map(m, g) - t_local(t, g);
        CHECK_LE(llabs(err), m->error_bound_ns);
        CHECK_LE(llabs(err), (int64_t)tol);
    }
    CHECK(fabs((m->slope - 1.0) * 1e6 - t->ppm) < 0.1);
}

static void test_recover(void)
{
    tu_seed(11);
    struct gtruth t = {.g0 = 1763000000LL * S + 123456789, .l0 = 5000 * S, .ppm = -1.5};
    struct mrd_gpu_bracket *b = make(&t, 400, 0);
    struct mrd_gpu_timer_model m = {0};
    CHECK_EQ(mrd_clock_gpu_fit(b, 400, &m), 0);
    check_model(&t, &m, 1500);
    CHECK_LE(m.error_bound_ns, 3000);
    free(b);
}

static void test_outliers(void)
{
    tu_seed(12);
    struct gtruth t = {.g0 = 1763000000LL * S, .l0 = 70 * S, .ppm = 2.0};
    struct mrd_gpu_bracket *b = make(&t, 1000, 0.005);
    struct mrd_gpu_timer_model m = {0};
    CHECK_EQ(mrd_clock_gpu_fit(b, 1000, &m), 0);
    CHECK_EQ(m.rejected, 10);
    check_model(&t, &m, 1500);
    free(b);
}

/* Host-only evidence for n ops over `span` s: the kernel waits in its stream after the
 * launch (queue: 300 us - 3 ms, or 4-15 us for the `idle` fraction of ops, whose GPU was
 * free), channel start callbacks come lat_s (ns, range [lat_s, 2 lat_s]) after the GPU
 * start, stop callbacks lat_e after the GPU end. Brackets: [launch, start callback] at the
 * GPU start, [launch, stop callback] at the GPU end (with_end). */
static size_t make_host(const struct gtruth *t, size_t n, double span, double idle, int64_t lat_s,
                        int64_t lat_e, int with_end, struct mrd_gpu_bracket *b)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t ts = t->l0 + (int64_t)(tu_unif() * span * S);
        int64_t queue = tu_unif() < idle ? 4000 + (int64_t)(tu_unif() * 11000)
                                         : 300000 + (int64_t)(tu_unif() * 2700000);
        int64_t te = ts + 20000 + (int64_t)(tu_unif() * 480000);
        int64_t launch = ts - queue;
        int64_t cs = ts + lat_s + (int64_t)(tu_unif() * (double)lat_s);
        int64_t ce = te + lat_e + (int64_t)(tu_unif() * (double)lat_e);
        int64_t gs = t_gpu(t, ts), ge = t_gpu(t, te);
        b[k++] = (struct mrd_gpu_bracket){.g_lo = gs, .lo = launch, .g_hi = gs, .hi = cs};
        if (with_end)
            b[k++] = (struct mrd_gpu_bracket){.g_lo = ge, .lo = launch, .g_hi = ge, .hi = ce};
    }
    return k;
}

/* The largest |mapped - true| over the span [l0, l0 + span s] (ends and 9 inner points). */
static int64_t worst_error(const struct gtruth *t, const struct mrd_gpu_timer_model *m, double span)
{
    int64_t worst = 0;
    for (int i = 0; i <= 10; i++) {
        int64_t g = t_gpu(t, t->l0 + (int64_t)(i * span / 10 * S));
        int64_t err = llabs(mrd_clock_gpu_map(m, g) - t_local(t, g));
        if (err > worst)
            worst = err;
    }
    return worst;
}

static void test_host_brackets(void)
{
    struct mrd_gpu_bracket *b = malloc(2 * 2000 * sizeof(*b));
    CHECK(b != NULL);
    /* the stated bound covers the truth over the whole span, any drift, any offset; with a
     * tenth of the ops launched onto an idle GPU the bound is tens of us, not the queue */
    for (unsigned seed = 1; seed <= 40; seed++) {
        tu_seed(100 + seed);
        struct gtruth t = {.g0 = 1763000000LL * S + (int64_t)(tu_unif() * 1e15),
                           .l0 = (int64_t)(1 + tu_unif() * 5000) * S,
                           .ppm = -3.0 + 6.0 * tu_unif()};
        double span = seed % 4 == 0 ? 1.5 : 30.0; /* short runs leave the slope loose */
        size_t n = make_host(&t, 300, span, 0.1, 1000, 1000, 1, b);
        struct mrd_gpu_timer_model m = {0};
        CHECK_EQ(mrd_clock_gpu_fit(b, n, &m), 0);
        CHECK_LE(worst_error(&t, &m, span), m.error_bound_ns);
        CHECK_LE(m.error_bound_ns, 150000);
    }
    /* every op queued (no idle launch): the bound is honest and as wide as the queue */
    tu_seed(7);
    struct gtruth t = {.g0 = 1763000000LL * S, .l0 = 80 * S, .ppm = 1.5};
    size_t n = make_host(&t, 500, 20.0, 0.0, 1000, 1000, 1, b);
    struct mrd_gpu_timer_model busy = {0};
    CHECK_EQ(mrd_clock_gpu_fit(b, n, &busy), 0);
    CHECK_LE(worst_error(&t, &busy, 20.0), busy.error_bound_ns);
    CHECK_GE(busy.error_bound_ns, 140000); /* half the shortest queue, at least */
    /* late start callbacks (40-80 us), prompt stop callbacks (1-2 us): the end brackets
     * tighten the fit; without them the bound is looser */
    tu_seed(8);
    n = make_host(&t, 1000, 20.0, 0.2, 40000, 1000, 1, b);
    struct mrd_gpu_timer_model both = {0}, starts = {0};
    CHECK_EQ(mrd_clock_gpu_fit(b, n, &both), 0);
    CHECK_LE(worst_error(&t, &both, 20.0), both.error_bound_ns);
    tu_seed(8);
    n = make_host(&t, 1000, 20.0, 0.2, 40000, 1000, 0, b);
    CHECK_EQ(mrd_clock_gpu_fit(b, n, &starts), 0);
    CHECK_LE(worst_error(&t, &starts, 20.0), starts.error_bound_ns);
    CHECK_LE(both.error_bound_ns + 10000, starts.error_bound_ns);
    free(b);
}

static void test_contradiction_and_empty(void)
{
    struct mrd_gpu_timer_model m = {0};
    CHECK_EQ(mrd_clock_gpu_fit(NULL, 0, &m), -ENODATA);
    /* the same GPU instant inside two disjoint host intervals */
    struct mrd_gpu_bracket b[2] = {{.g_lo = 1000, .lo = 0, .g_hi = 1000, .hi = 10},
                                   {.g_lo = 1000, .lo = 100, .g_hi = 1000, .hi = 110}};
    CHECK_EQ(mrd_clock_gpu_fit(b, 2, &m), 1);
    /* the relaxed line sits between them: 45 ns short of each */
    int64_t l = mrd_clock_gpu_map(&m, 1000);
    CHECK(l >= 10 && l <= 100);
    CHECK_GE(m.error_bound_ns, 45);
}

static void test_db(void)
{
    sqlite3 *db = tu_open_db();
    char sql[512];
    tu_seed(13);
    struct gtruth t[2] = {{.g0 = 1763000000LL * S, .l0 = 100 * S, .ppm = 1.2},
                          {.g0 = 1763000000LL * S + 7 * S, .l0 = 900 * S, .ppm = -0.7}};
    tu_exec(db, "BEGIN");
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 200; k++) {
            int64_t s = t[r].l0 + k * (S / 4), e = s + 200000;
            snprintf(sql, sizeof sql,
                     "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq,"
                     " func_id, launch_id, is_p2p, device) VALUES (%d, %d, 0, 0, 1, %d, 1, %d,"
                     " 0, 0);"
                     "INSERT INTO external_correlations VALUES (%d, %d, %d, 2);"
                     "INSERT INTO kernels (rank, device, start_ns, end_ns, correlation_id)"
                     " VALUES (%d, 0, %lld, %lld, %d)",
                     r, k, k, 700 + k, r, 90 + k, 700 + k, r, (long long)s, (long long)e, 90 + k);
            tu_exec(db, sql);
            for (int ch = 0; ch < 3; ch++) {
                snprintf(sql, sizeof sql,
                         "INSERT INTO nccl_channels VALUES (%d, %d, %d, %lld,"
                         " %lld, 0)",
                         r, k, ch, (long long)t_gpu(&t[r], s + 3000 + ch * 500),
                         (long long)t_gpu(&t[r], e - 2000 - ch * 700));
                tu_exec(db, sql);
            }
        }
    }
    /* rank 3, device 0: no kernel records, only host times: the launch's API record
     * (1-2 ms before the GPU start) and each channel's start callback (5-25 us after) */
    struct gtruth t3 = {.g0 = 1763000000LL * S + 3 * S, .l0 = 300 * S, .ppm = 0.8};
    for (int k = 0; k < 200; k++) {
        int64_t s = t3.l0 + k * (S / 4), launch = s - 1000000 - (k % 7) * 150000;
        snprintf(sql, sizeof sql,
                 "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq,"
                 " func_id, launch_id, is_p2p, device) VALUES (3, %d, %lld, %lld, 1, %d, 1,"
                 " %d, 0, 0);"
                 "INSERT INTO external_correlations VALUES (3, %d, %d, 2);"
                 "INSERT INTO api_calls (rank, start_ns, end_ns, correlation_id, cbid)"
                 " VALUES (3, %lld, %lld, %d, 652)",
                 k, (long long)(launch + 6000), (long long)(launch + 9000), k, 700 + k, 90 + k,
                 700 + k, (long long)launch, (long long)(launch + 4000), 90 + k);
        tu_exec(db, sql);
        for (int ch = 0; ch < 3; ch++) {
            snprintf(sql, sizeof sql,
                     "INSERT INTO nccl_channels VALUES (3, %d, %d, %lld, %lld, %lld)", k, ch,
                     (long long)t_gpu(&t3, s + ch * 500), (long long)t_gpu(&t3, s + 90000),
                     (long long)(s + ch * 500 + 5000 + (k % 5) * 5000));
            tu_exec(db, sql);
        }
    }
    /* rank 2, device 1: only direct samples (+-1 us) */
    struct gtruth t2 = {.g0 = 1763000000LL * S, .l0 = 50 * S, .ppm = 3.0};
    for (int k = 0; k < 100; k++) {
        int64_t g = t2.g0 + k * (S / 2);
        snprintf(sql, sizeof sql, "INSERT INTO gpu_clock_samples VALUES (2, 1, %lld, %lld, 1000)",
                 (long long)t_local(&t2, g), (long long)g);
        tu_exec(db, sql);
    }
    tu_exec(db, "COMMIT");
    CHECK_EQ(mrd_clock_gpu_fit_db(db, stderr), 4);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpu_timer_models"), 4);
    CHECK_EQ(check_sql_int(db, "SELECT samples FROM gpu_timer_models WHERE rank = 0"), 200);
    CHECK_EQ(check_sql_int(db, "SELECT samples FROM gpu_timer_models WHERE rank = 3"), 600);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpu_timer_models WHERE rank < 2 AND"
                               " method = 'kernel-bracket-v1'"),
             2);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpu_timer_models WHERE rank >= 2 AND"
                               " method = 'host-bracket-v1'"),
             2);
    for (int r = 0; r < 4; r++) {
        sqlite3_stmt *st = NULL;
        CHECK_EQ(sqlite3_prepare_v2(db,
                                    "SELECT slope, intercept_ns, error_bound_ns FROM"
                                    " gpu_timer_models WHERE rank = ?1",
                                    -1, &st, NULL),
                 SQLITE_OK);
        sqlite3_bind_int(st, 1, r);
        CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
        struct mrd_gpu_timer_model m = {.slope = sqlite3_column_double(st, 0),
                                        .intercept_ns = sqlite3_column_int64(st, 1),
                                        .error_bound_ns = sqlite3_column_int64(st, 2)};
        sqlite3_finalize(st);
        if (r == 3) { /* host-only: honest over the span, and as loose as its evidence */
            CHECK_LE(worst_error(&t3, &m, 50.0), m.error_bound_ns);
            CHECK_GE(m.error_bound_ns, 500000);
            CHECK_LE(m.error_bound_ns, 800000);
            continue;
        }
        check_model(r < 2 ? &t[r] : &t2, &m, 2000);
    }
    /* rerun replaces, no duplicates */
    CHECK_EQ(mrd_clock_gpu_fit_db(db, NULL), 4);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpu_timer_models"), 4);
    sqlite3_close(db);
}

int main(void)
{
    test_recover();
    test_outliers();
    test_contradiction_and_empty();
    test_host_brackets();
    test_db();
    fprintf(stderr, "clock_gpu: ok\n");
    return 0;
}
