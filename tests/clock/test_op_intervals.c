/* clock_op_intervals: the op intervals (aggregator/db/op_intervals.c) and the GPU timer
 * calibration's bracket queries that read them, against a trivial reference: the plain SQL
 * joins of the rule in aggregator/SCHEMA.md ("An operation's interval"), run by SQLite on
 * the same rows. Random databases: several ranks (one far from the others), kernels in
 * shuffled order (correlation ids jump back and forth, so the per-rank cursor moves both
 * ways), lost and corrupt kernel records, NULL correlation ids, ops without a launch id,
 * launches with several correlation ids, kernels shared by several ops, channels of ops
 * that have no nccl_ops row, invalid channel times, API calls that match and that do not.
 * Every table must equal its reference row for row (both EXCEPTs empty, equal counts).
 * Stored by the finalize, they are read back as views on another connection, and built
 * again once a source table gained rows. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "db.h"
#include "testutil.h"

/* The reference: the rule written as plain joins (no index, no C). */
static const char ref_sql[] =
    "CREATE TEMP TABLE ref_link AS SELECT DISTINCT n.rank, ec.correlation_id, n.op_id"
    " FROM nccl_ops n JOIN external_correlations ec ON ec.rank = n.rank"
    " AND ec.external_id = n.launch_id WHERE n.launch_id IS NOT NULL;"
    "CREATE TEMP TABLE ref_k AS SELECT l.rank, l.op_id, MIN(k.start_ns) AS s, MAX(k.end_ns) AS e"
    " FROM ref_link l JOIN kernels k ON k.rank = l.rank AND k.correlation_id = l.correlation_id"
    " WHERE NOT (k.start_ns = 0 AND k.end_ns = 0) AND k.end_ns >= k.start_ns"
    " GROUP BY l.rank, l.op_id;"
    "CREATE TEMP TABLE ref_time AS SELECT rank, op_id, s AS start_ns, e AS end_ns, 1 AS source"
    " FROM ref_k UNION ALL SELECT c.rank, c.op_id, MIN(c.gpu_start), MAX(c.gpu_end), 2"
    " FROM nccl_channels c WHERE c.gpu_start > 0 AND c.gpu_end >= c.gpu_start"
    " AND NOT EXISTS (SELECT 1 FROM ref_k r WHERE r.rank = c.rank AND r.op_id = c.op_id)"
    " GROUP BY c.rank, c.op_id;"
    "CREATE TEMP TABLE ref_kb AS SELECT k.rank, COALESCE(k.device, o.device, 0) AS dev,"
    " k.start_ns, k.end_ns, MIN(c.gpu_start) AS g0, MAX(c.gpu_end) AS g1 FROM nccl_ops o"
    " JOIN external_correlations x ON x.rank = o.rank AND x.external_id = o.launch_id"
    " JOIN kernels k ON k.rank = x.rank AND k.correlation_id = x.correlation_id"
    " JOIN nccl_channels c ON c.rank = o.rank AND c.op_id = o.op_id"
    " WHERE o.launch_id IS NOT NULL AND c.gpu_start > 0 AND c.gpu_end >= c.gpu_start"
    " AND NOT (k.start_ns = 0 AND k.end_ns = 0) AND k.end_ns >= k.start_ns"
    " GROUP BY k.rank, k.correlation_id, k.start_ns;"
    "CREATE TEMP TABLE ref_hb AS WITH l AS (SELECT x.rank, x.external_id, MIN(a.start_ns) AS t"
    " FROM external_correlations x JOIN api_calls a ON a.rank = x.rank"
    " AND a.correlation_id = x.correlation_id GROUP BY x.rank, x.external_id)"
    " SELECT o.rank, COALESCE(o.device, 0) AS dev, l.t, c.gpu_start, c.host_start_ns"
    " FROM nccl_ops o JOIN l ON l.rank = o.rank AND l.external_id = o.launch_id"
    " JOIN nccl_channels c ON c.rank = o.rank AND c.op_id = o.op_id"
    " WHERE o.launch_id IS NOT NULL AND c.gpu_start > 0 AND c.host_start_ns > 0;";

static int64_t rnd(int64_t n)
{
    return (int64_t)(tu_next() % (uint64_t)n);
}

static void bind_or_null(sqlite3_stmt *st, int i, int64_t v, int null)
{
    if (null)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

static void step_reset(sqlite3_stmt *st)
{
    CHECK_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
}

struct krow {
    int64_t rank, corr, start, end, device;
    int corr_null, dev_null;
};

static void fill(sqlite3 *db, int nops)
{
    static const int64_t ranks[] = {0, 1, 2, 3, 700};
    sqlite3_stmt *op, *ec, *k, *ch, *api;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash,"
                                " launch_id, is_p2p, device) VALUES (?1, ?2, 0, 0, 1, ?3, 0, ?4)",
                                -1, &op, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db, "INSERT INTO external_correlations VALUES (?1, ?2, ?3, 2)", -1,
                                &ec, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "INSERT INTO kernels (rank, device, start_ns, end_ns,"
                                " correlation_id) VALUES (?1, ?2, ?3, ?4, ?5)",
                                -1, &k, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db, "INSERT INTO nccl_channels VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1,
                                &ch, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "INSERT INTO api_calls (rank, start_ns, end_ns, correlation_id)"
                                " VALUES (?1, ?2, ?2, ?3)",
                                -1, &api, NULL),
             SQLITE_OK);
    size_t nk = 0, capk = (size_t)nops * 8 + 64;
    struct krow *ks = malloc(capk * sizeof(*ks));
    CHECK(ks != NULL);
    tu_exec(db, "BEGIN");
    for (int i = 0; i < nops; i++) {
        int64_t rank = ranks[rnd(5)], op_id = i + 1;
        int64_t launch = 1000 + rnd(nops); /* launches shared by several ops now and then */
        int no_launch = rnd(6) == 0;
        sqlite3_bind_int64(op, 1, rank);
        sqlite3_bind_int64(op, 2, op_id);
        bind_or_null(op, 3, launch, no_launch);
        bind_or_null(op, 4, rank % 2, rank == 700); /* one device per rank: no ambiguity */
        step_reset(op);
        if (!no_launch && rnd(3) != 0) {
            int nec = 1 + (int)rnd(2);
            for (int j = 0; j < nec; j++) {
                int64_t corr = 50000 + rnd(4 * (int64_t)nops);
                sqlite3_bind_int64(ec, 1, rank);
                sqlite3_bind_int64(ec, 2, corr);
                sqlite3_bind_int64(ec, 3, launch);
                step_reset(ec);
                for (int64_t m = rnd(3); m > 0 && nk < capk; m--) { /* its kernels */
                    int64_t s = 1000000 + (int64_t)(tu_next() % 1000000000000ull);
                    int64_t e = s + rnd(100000);
                    int kind = (int)rnd(10);
                    if (kind == 0)
                        s = e = 0; /* lost record */
                    else if (kind == 1)
                        e = s - 1 - rnd(1000); /* corrupt */
                    ks[nk++] = (struct krow){rank, corr, s, e, rank % 2, 0, rnd(4) == 0};
                }
                if (rnd(2)) { /* its launch's API call, sometimes two */
                    for (int64_t m = 1 + rnd(2); m > 0; m--) {
                        sqlite3_bind_int64(api, 1, rank);
                        sqlite3_bind_int64(api, 2, 5000 + rnd(1000000));
                        sqlite3_bind_int64(api, 3, corr);
                        step_reset(api);
                    }
                }
            }
        }
        for (int64_t c = rnd(4); c > 0; c--) { /* channels */
            int64_t g = 1700000000000000000ll + rnd(1000000000);
            int kind = (int)rnd(8);
            sqlite3_bind_int64(ch, 1, rank);
            sqlite3_bind_int64(ch, 2, op_id);
            sqlite3_bind_int64(ch, 3, c);
            bind_or_null(ch, 4, kind == 0 ? 0 : g, kind == 1);
            bind_or_null(ch, 5, kind == 2 ? g - 5 : g + rnd(50000), kind == 3);
            bind_or_null(ch, 6, kind == 4 ? 0 : 7000 + rnd(1000000), kind == 5);
            step_reset(ch);
        }
    }
    for (int i = 0; i < nops / 4; i++) { /* channels of ops without an nccl_ops row */
        int64_t g = 1700000000000000000ll + rnd(1000000000);
        sqlite3_bind_int64(ch, 1, ranks[rnd(5)]);
        sqlite3_bind_int64(ch, 2, nops + 1 + rnd(nops / 8 + 1));
        sqlite3_bind_int64(ch, 3, i);
        sqlite3_bind_int64(ch, 4, g);
        sqlite3_bind_int64(ch, 5, g + rnd(1000));
        sqlite3_bind_int64(ch, 6, 1);
        step_reset(ch);
    }
    for (int i = 0; i < 6 * nops && nk < capk; i++) /* kernels of no NCCL op */
        ks[nk++] = (struct krow){ranks[rnd(5)], 50000 + rnd(8 * (int64_t)nops), 1 + rnd(1000000),
                                 2000000 + rnd(1000), 0, rnd(5) == 0, 0};
    for (size_t i = nk; i > 1; i--) { /* table order: shuffled */
        size_t j = (size_t)rnd((int64_t)i);
        struct krow t = ks[i - 1];
        ks[i - 1] = ks[j], ks[j] = t;
    }
    for (size_t i = 0; i < nk; i++) {
        sqlite3_bind_int64(k, 1, ks[i].rank);
        bind_or_null(k, 2, ks[i].device, ks[i].dev_null);
        sqlite3_bind_int64(k, 3, ks[i].start);
        sqlite3_bind_int64(k, 4, ks[i].end);
        bind_or_null(k, 5, ks[i].corr, ks[i].corr_null);
        step_reset(k);
    }
    tu_exec(db, "COMMIT");
    free(ks);
    sqlite3_finalize(op);
    sqlite3_finalize(ec);
    sqlite3_finalize(k);
    sqlite3_finalize(ch);
    sqlite3_finalize(api);
}

/* Rows of a and b (same columns) equal as multisets, and not both empty by accident. */
static int64_t same_rows(sqlite3 *db, const char *a, const char *b)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT (SELECT count(*) FROM %s) - (SELECT count(*) FROM %s)", a,
             b);
    CHECK_EQ(check_sql_int(db, sql), 0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM (SELECT * FROM %s EXCEPT SELECT * FROM %s)",
             a, b);
    CHECK_EQ(check_sql_int(db, sql), 0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM (SELECT * FROM %s EXCEPT SELECT * FROM %s)",
             b, a);
    CHECK_EQ(check_sql_int(db, sql), 0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", a);
    return check_sql_int(db, sql);
}

static void one(uint64_t seed, int nops)
{
    sqlite3 *db = tu_open_db();
    tu_seed(seed);
    fill(db, nops);
    tu_exec(db, ref_sql);
    CHECK_OK(mrd_db_op_intervals(db, 1));
    int64_t links = same_rows(db, "temp.mrd_link", "ref_link");
    int64_t times = same_rows(db, "temp.mrd_op_time", "ref_time");
    char *q = sqlite3_mprintf("CREATE TEMP TABLE got_kb AS %s; CREATE TEMP TABLE got_hb AS %s",
                              mrd_db_sql_gpu_kernel_brackets, mrd_db_sql_gpu_host_brackets);
    CHECK(q != NULL);
    tu_exec(db, q);
    sqlite3_free(q);
    int64_t kb = same_rows(db, "got_kb", "ref_kb");
    int64_t hb = same_rows(db, "got_hb", "ref_hb");
    /* the random data must reach every case, or the comparison proves little */
    CHECK_GT(links, nops / 4);
    CHECK_GT(check_sql_int(db, "SELECT count(*) FROM temp.mrd_op_time WHERE source = 1"), 0);
    CHECK_GT(check_sql_int(db, "SELECT count(*) FROM temp.mrd_op_time WHERE source = 2"), 0);
    CHECK_GT(check_sql_int(db, "SELECT count(*) FROM temp.mrd_op_time t WHERE NOT EXISTS"
                               " (SELECT 1 FROM nccl_ops n WHERE n.rank = t.rank"
                               " AND n.op_id = t.op_id)"),
             0);
    CHECK_GT(kb, 0);
    CHECK_GT(hb, 0);
    printf("seed %llu: %d ops, %lld links, %lld intervals, %lld kernel and %lld host brackets\n",
           (unsigned long long)seed, nops, (long long)links, (long long)times, (long long)kb,
           (long long)hb);
    /* reused as they are without fresh; rebuilt (same rows) with it */
    tu_exec(db, "DELETE FROM temp.mrd_op_time WHERE source = 2");
    CHECK_OK(mrd_db_op_intervals(db, 0));
    CHECK_LT(check_sql_int(db, "SELECT count(*) FROM temp.mrd_op_time"), times);
    CHECK_OK(mrd_db_op_intervals(db, 1));
    CHECK_EQ(same_rows(db, "temp.mrd_op_time", "ref_time"), times);
    sqlite3_close(db);
}

static int64_t time_kind(sqlite3 *db)
{
    return check_sql_int(db, "SELECT CASE type WHEN 'view' THEN 2 ELSE 1 END"
                             " FROM temp.sqlite_master WHERE name = 'mrd_op_time'");
}

static sqlite3 *open_file(const char *path)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    return db;
}

/* Stored by the finalize (mrd_db_op_intervals_save): a later connection reads them as
 * views with the same rows; once a source table gained rows, it builds them again. */
static void stored(void)
{
    char path[] = "/tmp/mrd-op-intervals-XXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    close(fd);
    sqlite3 *db = open_file(path);
    tu_apply_schema(db);
    tu_seed(99);
    fill(db, 300);
    CHECK_OK(mrd_db_op_intervals_save(db)); /* builds, then stores */
    sqlite3_close(db);

    db = open_file(path);
    CHECK_OK(mrd_db_op_intervals(db, 0));
    CHECK_EQ(time_kind(db), 2); /* views of the stored tables */
    tu_exec(db, ref_sql);
    int64_t times = same_rows(db, "temp.mrd_op_time", "ref_time");
    CHECK_GT(times, 0);
    CHECK_GT(same_rows(db, "temp.mrd_link", "ref_link"), 0);
    CHECK_OK(mrd_db_op_intervals_save(db)); /* current: nothing to do, rows kept */
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM nccl_op_intervals"), times);
    /* a kernel of op 1's launch arrives later: that op's interval can change */
    tu_exec(db, "INSERT INTO kernels (rank, start_ns, end_ns, correlation_id)"
                " SELECT rank, 1, 3000000000000, correlation_id FROM temp.mrd_link LIMIT 1");
    sqlite3_close(db);

    db = open_file(path);
    CHECK_OK(mrd_db_op_intervals(db, 0));
    CHECK_EQ(time_kind(db), 1); /* built again */
    tu_exec(db, ref_sql);
    CHECK_GE(same_rows(db, "temp.mrd_op_time", "ref_time"), times);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM temp.mrd_op_time WHERE end_ns = 3000000000000"),
             1);
    sqlite3_close(db);
    unlink(path);
}

int main(void)
{
    for (uint64_t seed = 1; seed <= 10; seed++)
        one(seed, seed <= 4 ? 40 : 600);
    /* no NCCL data at all: empty tables, no error */
    sqlite3 *db = tu_open_db();
    CHECK_OK(mrd_db_op_intervals(db, 1));
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM temp.mrd_op_time"), 0);
    sqlite3_close(db);
    stored();
    printf("clock_op_intervals: ok\n");
    return 0;
}
