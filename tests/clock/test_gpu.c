/* clock_gpu: GPU timer calibration from kernel brackets. A known map gpu -> local (slope a
 * few ppm off 1, epoch-sized GPU times) is recovered from brackets built like NCCL channel
 * times inside CUPTI kernel records; outliers are trimmed; contradictory data gives a
 * relaxed fit; the database pass joins nccl_channels -> nccl_ops -> external_correlations
 * -> kernels and also uses gpu_clock_samples. */
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
    /* rank 2, device 1: only direct samples (+-1 us) */
    struct gtruth t2 = {.g0 = 1763000000LL * S, .l0 = 50 * S, .ppm = 3.0};
    for (int k = 0; k < 100; k++) {
        int64_t g = t2.g0 + k * (S / 2);
        snprintf(sql, sizeof sql, "INSERT INTO gpu_clock_samples VALUES (2, 1, %lld, %lld, 1000)",
                 (long long)t_local(&t2, g), (long long)g);
        tu_exec(db, sql);
    }
    tu_exec(db, "COMMIT");
    CHECK_EQ(mrd_clock_gpu_fit_db(db, stderr), 3);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpu_timer_models"), 3);
    CHECK_EQ(check_sql_int(db, "SELECT samples FROM gpu_timer_models WHERE rank = 0"), 200);
    for (int r = 0; r < 3; r++) {
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
        check_model(r < 2 ? &t[r] : &t2, &m, 2000);
    }
    /* rerun replaces, no duplicates */
    CHECK_EQ(mrd_clock_gpu_fit_db(db, NULL), 3);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpu_timer_models"), 3);
    sqlite3_close(db);
}

int main(void)
{
    test_recover();
    test_outliers();
    test_contradiction_and_empty();
    test_db();
    fprintf(stderr, "clock_gpu: ok\n");
    return 0;
}
