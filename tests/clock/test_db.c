/* clock_db: the fit over a database. Probes of three ranks (different offsets, drifts
 * and paths) in clock_samples become clock_models rows that map to the truth within their
 * bounds; a rank with one probe is skipped; a rerun replaces rows and clears an earlier
 * causality pass's adjustments; models load back by rank. */
#include <errno.h>
#include <math.h>

#include "check.h"
#include "clock.h"
#include "testutil.h"

#define S 1000000000LL

static const struct tu_clock k_clocks[3] = {
    {.l0 = 3000 * S,
     .off = 1700000000LL * S + 30 * S,
     .knee = INT64_MAX / 4,
     .ppm0 = 100,
     .ppm1 = 100},
    {.l0 = 2970 * S,
     .off = 1700000000LL * S - 2 * S,
     .knee = INT64_MAX / 4,
     .ppm0 = -100,
     .ppm1 = -100},
    {.l0 = 2990 * S, .off = 1700000000LL * S + 777, .knee = INT64_MAX / 4, .ppm0 = 3, .ppm1 = 3},
};

static void insert_probes(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    struct tu_path paths[3] = {{.floor_ns = 15000, .mean_ns = 20000, .proc_ns = 3000},
                               {.floor_ns = 700000, .unif_ns = 600000, .proc_ns = 5000},
                               {.floor_ns = 40000, .mean_ns = 5000, .proc_ns = 1000}};
    tu_exec(db, "BEGIN");
    CHECK_EQ(
        sqlite3_prepare_v2(db, "INSERT INTO clock_samples VALUES (?1,?2,?3,?4,?5)", -1, &st, NULL),
        SQLITE_OK);
    for (int r = 0; r < 3; r++) {
        for (int64_t t = 0; t < 60 * S; t += S / 16) {
            struct mrd_clock_sample x = tu_probe(&k_clocks[r], &paths[r], k_clocks[r].l0 + t);
            sqlite3_reset(st);
            sqlite3_bind_int(st, 1, r);
            sqlite3_bind_int64(st, 2, x.t0);
            sqlite3_bind_int64(st, 3, x.t1);
            sqlite3_bind_int64(st, 4, x.t2);
            sqlite3_bind_int64(st, 5, x.t3);
            CHECK_EQ(sqlite3_step(st), SQLITE_DONE);
        }
    }
    sqlite3_finalize(st);
    tu_exec(db, "INSERT INTO clock_samples VALUES (5, 10, 20, 21, 30); COMMIT");
}

static void check_models(sqlite3 *db)
{
    struct mrd_clock_models *ms = NULL;
    CHECK_OK(mrd_clock_models_load(db, &ms));
    CHECK_EQ(ms->max_rank, 2);
    for (int r = 0; r < 3; r++) {
        const struct mrd_clock_model *m = mrd_clock_models_get(ms, r);
        CHECK(m != NULL);
        CHECK_STREQ(m->method, "minrtt-envelope-v1");
        for (int64_t t = 0; t <= 60 * S; t += 5 * S) {
            int64_t l = k_clocks[r].l0 + t;
            int64_t err = mrd_clock_map(m, l) - tu_true_global(&k_clocks[r], l);
            CHECK_LE(llabs(err), mrd_clock_bound(m, l));
            CHECK_LE(llabs(err), r == 1 ? 50000 : 3000);
        }
    }
    CHECK(mrd_clock_models_get(ms, 5) == NULL);
    CHECK(mrd_clock_models_get(ms, -1) == NULL);
    mrd_clock_models_destroy(ms);
}

int main(void)
{
    sqlite3 *db = tu_open_db();
    struct mrd_clock_models *ms = NULL;
    tu_seed(21);
    /* no models yet: an empty set */
    CHECK_OK(mrd_clock_models_load(db, &ms));
    CHECK_EQ(ms->max_rank, -1);
    CHECK(mrd_clock_models_get(ms, 0) == NULL);
    mrd_clock_models_destroy(ms);
    insert_probes(db);
    CHECK_EQ(mrd_clock_fit_db(db, NULL, stderr), 3);
    int64_t rows = check_sql_int(db, "SELECT count(*) FROM clock_models");
    CHECK_GE(rows, 3);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM clock_models WHERE rank = 5"), 0);
    check_models(db);
    /* a rerun replaces the rows and clears an earlier causality pass's shifts */
    tu_exec(db, "INSERT INTO clock_adjustments VALUES (0, 5, 1, 1, 0, 0, 1.0, 3)");
    CHECK_EQ(mrd_clock_fit_db(db, NULL, NULL), 3);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM clock_models"), rows);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM clock_adjustments"), 0);
    check_models(db);
    /* every probe is counted in exactly one segment of its rank */
    CHECK_EQ(check_sql_int(db, "SELECT sum(samples) FROM clock_models WHERE rank = 0"),
             check_sql_int(db, "SELECT count(*) FROM clock_samples WHERE rank = 0"));
    sqlite3_close(db);
    fprintf(stderr, "clock_db: ok\n");
    return 0;
}
