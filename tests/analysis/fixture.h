/* Small meridian databases with hand-chosen intervals for the analysis tests.
 *
 * Built with the real schema (the whole of it, build/aggregator/store/schema-full.sql, path
 * compiled in as MRD_SCHEMA_SQL) and plain SQLite inserts, so the tests do not depend on
 * the daemon.
 * Every expected value the tests check is derived by hand in the test's comments.
 */
#ifndef MRD_TEST_FIXTURE_H
#define MRD_TEST_FIXTURE_H

#include <stdint.h>

#include <sqlite3.h>

/* Creates `path` (removed first) with the schema applied; exits on failure. */
sqlite3 *fx_create(const char *path);

/* Interns a string, returns strings.id. */
int64_t fx_str(sqlite3 *db, const char *s);

void fx_run(sqlite3 *db, const char *run_id, int world, int64_t anchor);
void fx_rank(sqlite3 *db, int rank, const char *host, int pid);
void fx_kernel(sqlite3 *db, int rank, int device, int stream, int64_t start, int64_t end,
               int64_t correlation, const char *name);
/* An NCCL op; with a kernel (kstart < kend) it also writes the kernel and the external
 * correlation linking them (correlation = 1000000 + op_id). seq < 0 = NULL (p2p). */
void fx_op(sqlite3 *db, int rank, int64_t op_id, int64_t comm, int64_t seq, const char *func,
           int nranks, int64_t kstart, int64_t kend, int p2p);
void fx_channel(sqlite3 *db, int rank, int64_t op_id, int channel, int64_t gpu_start,
                int64_t gpu_end);
void fx_nvtx(sqlite3 *db, int rank, int64_t start, int64_t end, int kind, const char *name);
void fx_clock(sqlite3 *db, int rank, int segment, int64_t begin, int64_t end, int64_t offset,
              double drift_ppm, int64_t bound);
void fx_gpu_model(sqlite3 *db, int rank, int device, double slope, int64_t intercept);
void fx_counter(sqlite3 *db, int rank, const char *category, const char *name, int64_t v);
void fx_exec(sqlite3 *db, const char *sql);

/* The collective-matching fixture of test_match.c (4 ranks, 7 instances, steps, clock
 * models incl. a drift segment, a GPU-timer-only op). */
void fx_build_match(sqlite3 *db);

#endif
