/* The global-time views of the database module (mrd_db_global_views) against the
 * analysis' own mapping (the clock module's timebase): row for row, every event table's
 * start_global_ns / end_global_ns equal mrd_timebase_map of its local times and
 * start_at_ns / end_at_ns equal that minus the one origin (mrd_timebase_origin).
 *
 * Data: the collective-matching fixture (4 ranks with clock models, rank 3 with a 1000 ppm
 * drift segment) plus 2000 random kernels, NVTX ranges and NCCL ops of those ranks and of
 * a rank without a model, at local times before the first segment, inside each, across
 * the boundary and after the last (extrapolated), so that the segment choice, the drift
 * term's rounding and the unfitted rank's identity are all exercised; then the same
 * database without clock models (every view in local time).
 *
 * usage: test_analysis_views DB */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "db.h"
#include "fixture.h"
#include "timebase.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static int64_t rnd(int64_t lo, int64_t hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo));
}

/* Compares one view with the timebase; returns the rows compared. */
static int64_t compare(sqlite3 *db, const struct mrd_timebase *tb, int64_t origin,
                       const char *table)
{
    char sql[256];
    sqlite3_stmt *st = NULL;
    int64_t n = 0, base = -1;
    snprintf(sql, sizeof(sql),
             "SELECT rank, start_ns, end_ns, start_global_ns, end_global_ns, start_at_ns, "
             "end_at_ns FROM temp.%s_global",
             table);
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int rank = sqlite3_column_int(st, 0);
        int64_t s = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
        int64_t gs = mrd_timebase_map(tb, rank, s), ge = mrd_timebase_map(tb, rank, e);
        if (sqlite3_column_int64(st, 3) != gs || sqlite3_column_int64(st, 4) != ge)
            fprintf(stderr, "%s: rank %d local %" PRId64 "..%" PRId64 ": view %lld..%lld\n", table,
                    rank, s, e, (long long)sqlite3_column_int64(st, 3),
                    (long long)sqlite3_column_int64(st, 4));
        CHECK_EQ(sqlite3_column_int64(st, 3), gs);
        CHECK_EQ(sqlite3_column_int64(st, 4), ge);
        CHECK_EQ(sqlite3_column_int64(st, 5), gs - origin);
        CHECK_EQ(sqlite3_column_int64(st, 6), ge - origin);
        n++;
    }
    sqlite3_finalize(st);
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM main.%s", table);
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        base = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    CHECK_EQ(n, base); /* one view row per table row */
    return n;
}

static int64_t compare_all(sqlite3 *db, int ignore_models)
{
    struct mrd_timebase *tb = NULL;
    int64_t origin = 0, rows = 0;
    CHECK_EQ(mrd_timebase_load(db, ignore_models, &tb), 0);
    CHECK_EQ(mrd_timebase_origin(tb, db, &origin), 0);
    CHECK_EQ(mrd_db_global_views(db, origin), 0);
    rows += compare(db, tb, origin, "kernels");
    rows += compare(db, tb, origin, "nvtx");
    rows += compare(db, tb, origin, "nccl_ops");
    mrd_timebase_destroy(tb);
    return rows;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    sqlite3 *db = fx_create(argv[1]);
    fx_build_match(db);
    fx_exec(db, "BEGIN");
    for (int i = 0; i < 2000; i++) {
        int rank = (int)rnd(0, 5); /* rank 4: no clock model */
        int64_t s = rnd(-500000000, 3000000000LL), d = rnd(0, 2000000);
        switch (i % 3) {
        case 0:
            fx_kernel(db, rank, 0, 7, s, s + d, 5000000 + i, "k");
            break;
        case 1:
            fx_nvtx(db, rank, s, s + d, 1, "range");
            break;
        default:
            fx_op(db, rank, 900000 + i, 0x99, i, "AllGather", 5, s, s + d + 1, 0);
            break;
        }
    }
    fx_exec(db, "COMMIT");

    int64_t rows = compare_all(db, 0);
    CHECK_GT(rows, 2000);
    /* the enumerations */
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT (SELECT name FROM enum_nvtx_kind WHERE value = 3), "
                                "(SELECT name FROM enum_memcpy_kind WHERE value = 8), "
                                "(SELECT COUNT(*) FROM enum_sync_type)",
                                -1, &st, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "mark") == 0);
    CHECK(strcmp((const char *)sqlite3_column_text(st, 1), "DtoD") == 0);
    CHECK_EQ(sqlite3_column_int(st, 2), 5);
    sqlite3_finalize(st);

    /* without clock models: local times, views on the same origin rule */
    fx_exec(db, "DROP TABLE clock_models");
    CHECK_EQ(compare_all(db, 0), rows);
    sqlite3_close(db);
    printf("analysis_views: %lld rows equal the timebase's mapping\n", (long long)rows);
    return 0;
}
