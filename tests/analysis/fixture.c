/* Fixture databases for the analysis tests (see fixture.h). */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(sqlite3 *db, const char *what)
{
    fprintf(stderr, "fixture: %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
    exit(1);
}

void fx_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "fixture: %s\n  in: %.200s\n", err ? err : "?", sql);
        exit(1);
    }
}

sqlite3 *fx_create(const char *path)
{
    sqlite3 *db = NULL;
    FILE *f = fopen(MRD_SCHEMA_SQL, "r");
    char *sql;
    long n;
    char p[1024];
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
    if (!f)
        die(NULL, "cannot open " MRD_SCHEMA_SQL);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    sql = calloc(1, (size_t)n + 1);
    if (!sql || fread(sql, 1, (size_t)n, f) != (size_t)n)
        die(NULL, "read schema");
    fclose(f);
    if (sqlite3_open(path, &db) != SQLITE_OK)
        die(db, "open");
    fx_exec(db, sql);
    fx_exec(db, "INSERT INTO schema_version VALUES (2)"); /* MRD_STORE_SCHEMA_VERSION */
    free(sql);
    return db;
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        die(db, sql);
    return st;
}

static void done(sqlite3 *db, sqlite3_stmt *st)
{
    if (sqlite3_step(st) != SQLITE_DONE)
        die(db, "step");
    sqlite3_finalize(st);
}

int64_t fx_str(sqlite3 *db, const char *s)
{
    sqlite3_stmt *st = prep(db, "INSERT OR IGNORE INTO strings (value) VALUES (?1)");
    sqlite3_bind_text(st, 1, s, -1, SQLITE_TRANSIENT);
    done(db, st);
    st = prep(db, "SELECT id FROM strings WHERE value = ?1");
    sqlite3_bind_text(st, 1, s, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_ROW)
        die(db, "string id");
    int64_t id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return id;
}

void fx_run(sqlite3 *db, const char *run_id, int world, int64_t anchor)
{
    sqlite3_stmt *st = prep(db, "INSERT INTO runs (run_id, world_size, anchor_realtime_ns, "
                                "anchor_monotonic_ns, created_ns) VALUES (?1, ?2, ?3, 0, ?3)");
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 2, world);
    sqlite3_bind_int64(st, 3, anchor);
    done(db, st);
}

void fx_rank(sqlite3 *db, int rank, const char *host, int pid)
{
    sqlite3_stmt *st = prep(db, "INSERT INTO ranks (rank, local_rank, world_size, host, pid, "
                                "goodbye) VALUES (?1, ?1, 4, ?2, ?3, 1)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_text(st, 2, host, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, pid);
    done(db, st);
    st = prep(db, "INSERT INTO gpus (rank, device, uuid, pci_bus_id, name) VALUES (?1, 0, "
                  "'GPU-fixture', '0000:01:00.0', 'NVIDIA H200')");
    sqlite3_bind_int(st, 1, rank);
    done(db, st);
}

void fx_kernel(sqlite3 *db, int rank, int device, int stream, int64_t start, int64_t end,
               int64_t correlation, const char *name)
{
    int64_t name_id = fx_str(db, name);
    sqlite3_stmt *st = prep(db, "INSERT INTO kernels (rank, device, stream, start_ns, end_ns, "
                                "correlation_id, name_id, grid_x, grid_y, grid_z, block_x, "
                                "block_y, block_z) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, 1, 1, "
                                "128, 1, 1)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int(st, 2, device);
    sqlite3_bind_int(st, 3, stream);
    sqlite3_bind_int64(st, 4, start);
    sqlite3_bind_int64(st, 5, end);
    sqlite3_bind_int64(st, 6, correlation);
    sqlite3_bind_int64(st, 7, name_id);
    done(db, st);
}

void fx_op(sqlite3 *db, int rank, int64_t op_id, int64_t comm, int64_t seq, const char *func,
           int nranks, int64_t kstart, int64_t kend, int p2p)
{
    int64_t func_id = fx_str(db, func), corr = 1000000 + op_id, launch = 500000 + op_id;
    sqlite3_stmt *st = prep(db, "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, "
                                "comm_hash, comm_rank, comm_nranks, seq, func_id, count, bytes, "
                                "launch_id, is_p2p, device, channels) VALUES (?1, ?2, ?3, ?4, "
                                "?5, ?1, ?6, ?7, ?8, 1024, 4096, ?9, ?10, 0, 2)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, op_id);
    sqlite3_bind_int64(st, 3, kstart > 100 ? kstart - 100 : 0); /* host enqueue just before */
    sqlite3_bind_int64(st, 4, kstart > 50 ? kstart - 50 : 0);
    sqlite3_bind_int64(st, 5, comm);
    sqlite3_bind_int(st, 6, nranks);
    if (seq < 0)
        sqlite3_bind_null(st, 7);
    else
        sqlite3_bind_int64(st, 7, seq);
    sqlite3_bind_int64(st, 8, func_id);
    sqlite3_bind_int64(st, 9, launch);
    sqlite3_bind_int(st, 10, p2p);
    done(db, st);
    if (kstart >= kend)
        return;
    char name[128];
    snprintf(name, sizeof(name), "ncclDevKernel_%s_Sum_f32_RING_LL", func);
    fx_kernel(db, rank, 0, 7, kstart, kend, corr, name);
    st = prep(db, "INSERT INTO external_correlations (rank, correlation_id, external_id, kind) "
                  "VALUES (?1, ?2, ?3, 6)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, corr);
    sqlite3_bind_int64(st, 3, launch);
    done(db, st);
}

void fx_channel(sqlite3 *db, int rank, int64_t op_id, int channel, int64_t gpu_start,
                int64_t gpu_end)
{
    sqlite3_stmt *st = prep(db, "INSERT INTO nccl_channels (rank, op_id, channel, gpu_start, "
                                "gpu_end, host_start_ns) VALUES (?1, ?2, ?3, ?4, ?5, 0)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, op_id);
    sqlite3_bind_int(st, 3, channel);
    sqlite3_bind_int64(st, 4, gpu_start);
    sqlite3_bind_int64(st, 5, gpu_end);
    done(db, st);
}

void fx_nvtx(sqlite3 *db, int rank, int64_t start, int64_t end, int kind, const char *name)
{
    int64_t name_id = fx_str(db, name);
    sqlite3_stmt *st = prep(db, "INSERT INTO nvtx (rank, thread, start_ns, end_ns, kind, "
                                "domain_id, name_id, depth) VALUES (?1, 4242, ?2, ?3, ?4, 0, "
                                "?5, 0)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, start);
    sqlite3_bind_int64(st, 3, end);
    sqlite3_bind_int(st, 4, kind);
    sqlite3_bind_int64(st, 5, name_id);
    done(db, st);
}

void fx_clock(sqlite3 *db, int rank, int segment, int64_t begin, int64_t end, int64_t offset,
              double drift_ppm, int64_t bound)
{
    sqlite3_stmt *st = prep(db, "INSERT INTO clock_models (rank, segment, local_begin_ns, "
                                "local_end_ns, offset_ns, drift_ppm, error_bound_ns, samples, "
                                "method) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 40, 'fixture')");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int(st, 2, segment);
    sqlite3_bind_int64(st, 3, begin);
    sqlite3_bind_int64(st, 4, end);
    sqlite3_bind_int64(st, 5, offset);
    sqlite3_bind_double(st, 6, drift_ppm);
    sqlite3_bind_int64(st, 7, bound);
    done(db, st);
}

void fx_gpu_model(sqlite3 *db, int rank, int device, double slope, int64_t intercept)
{
    sqlite3_stmt *st = prep(db, "INSERT INTO gpu_timer_models (rank, device, slope, "
                                "intercept_ns, error_bound_ns, samples, method) VALUES (?1, ?2, "
                                "?3, ?4, 100, 10, 'fixture')");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int(st, 2, device);
    sqlite3_bind_double(st, 3, slope);
    sqlite3_bind_int64(st, 4, intercept);
    done(db, st);
}

void fx_counter(sqlite3 *db, int rank, const char *category, const char *name, int64_t v)
{
    sqlite3_stmt *st = prep(db, "INSERT INTO agent_counters (rank, category, name, value) "
                                "VALUES (?1, ?2, ?3, ?4)");
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_text(st, 2, category, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, v);
    done(db, st);
}

/* Local time of rank r for global time g in the fixture's models (seg 0 of every rank):
 * global = local - 1000 * r, i.e. local = g + 1000 * r. */
static int64_t L(int r, int64_t g)
{
    return g + 1000 * r;
}

void fx_build_match(sqlite3 *db)
{
    const int64_t H = 0x1234, G = -5; /* communicators (G tests a negative stored hash) */
    fx_exec(db, "BEGIN");
    fx_run(db, "fixture-run", 4, 1000);
    for (int r = 0; r < 4; r++) {
        fx_rank(db, r, r < 2 ? "nodeA" : "nodeB", 100 + r);
        if (r < 3)
            fx_clock(db, r, 0, 0, 2000000000, -1000 * r, 0.0, 150 + r);
        fx_kernel(db, r, 0, 3, L(r, 500), L(r, 1800), 77 + r, "sgemm_kernel"); /* compute */
        for (int s = 0; s < 2; s++) /* steps 0 and 1 on every rank */
            fx_nvtx(db, r, L(r, s ? 10000 : 0), L(r, s ? 60000 : 10000), 1,
                    s ? "step 1" : "step 0");
        if (r < 3) /* step 2 only on ranks 0-2 */
            fx_nvtx(db, r, L(r, 1500000000), L(r, 1600000000), 1, "step 2");
    }
    /* rank 3: two segments, the second with 1000 ppm drift, continuous at 1e9 */
    fx_clock(db, 3, 0, 0, 1000000000, -3000, 0.0, 200);
    fx_clock(db, 3, 1, 1000000000, 2000000000, -3000, 1000.0, 400);
    /* rank 0: a nested range and a non-step name, a mark: none of them is a step */
    fx_nvtx(db, 0, 12000, 13000, 1, "step 1 fwd");
    fx_nvtx(db, 0, 70000, 80000, 1, "stepper");
    fx_nvtx(db, 0, 75000, 75000, 3, "step 9");
    /* I1 AllReduce seq 0: starts 1000 1200 1100 1500, ends 2000 */
    const int64_t i1[4] = {1000, 1200, 1100, 1500};
    for (int r = 0; r < 4; r++)
        fx_op(db, r, 100 + r, H, 0, "AllReduce", 4, L(r, i1[r]), L(r, 2000), 0);
    /* I2 AllReduce seq 1: 5000 5000 5900 5100, ends 6000 */
    const int64_t i2[4] = {5000, 5000, 5900, 5100};
    for (int r = 0; r < 4; r++)
        fx_op(db, r, 200 + r, H, 1, "AllReduce", 4, L(r, i2[r]), L(r, 6000), 0);
    /* I3 AllReduce seq 2: rank 3 missing; 9000 9050 9000, ends 9500 */
    const int64_t i3[3] = {9000, 9050, 9000};
    for (int r = 0; r < 3; r++)
        fx_op(db, r, 300 + r, H, 2, "AllReduce", 4, L(r, i3[r]), L(r, 9500), 0);
    /* I4 AllGather seq 0 on G: rank 1 has neither kernel nor channels -> untimed */
    fx_op(db, 0, 400, G, 0, "AllGather", 2, 20000, 20100, 0);
    fx_op(db, 1, 401, G, 0, "AllGather", 2, 0, 0, 0);
    /* I5 AllReduce seq 3: rank 0 ends (30100) before rank 1 starts (30200): a violation */
    const int64_t i5s[4] = {30000, 30200, 30000, 30000}, i5e[4] = {30100, 30300, 30300, 30300};
    for (int r = 0; r < 4; r++)
        fx_op(db, r, 500 + r, H, 3, "AllReduce", 4, L(r, i5s[r]), L(r, i5e[r]), 0);
    /* I6 AllReduce seq 4 in rank 3's drift segment: ranks 0-2 start at 1500500000; rank 3
     * local 1500003000 -> global 1500003000 - 3000 + 1e-3 * 500003000 = 1500500003 */
    for (int r = 0; r < 3; r++)
        fx_op(db, r, 600 + r, H, 4, "AllReduce", 4, L(r, 1500500000), L(r, 1500501000), 0);
    fx_op(db, 3, 603, H, 4, "AllReduce", 4, 1500003000, 1500004000, 0);
    /* I7 Broadcast seq 0 on G: rank 1 timed by its channels only: gpu 1051040 -> local
     * (slope 1, intercept -1000000) 51040 -> global 50040 */
    fx_op(db, 0, 700, G, 0, "Broadcast", 2, 50000, 50100, 0);
    fx_op(db, 1, 701, G, 0, "Broadcast", 2, 0, 0, 0);
    fx_channel(db, 1, 701, 0, 1051040, 1051100);
    fx_channel(db, 1, 701, 1, 1051050, 1051090);
    fx_gpu_model(db, 1, 0, 1.0, -1000000);
    /* a p2p op (no seq): never matched */
    fx_op(db, 0, 900, H, -1, "Send", 4, 40000, 40500, 1);
    fx_counter(db, 0, "dropped", "ring_full", 5);
    fx_counter(db, 0, "captured", "kernel", 12);
    fx_exec(db, "COMMIT");
}
