/* The global timebase as the analysis sees it: per-rank clock models loaded from the
 * database, and the maps local -> global (and back) that every cross-rank computation and
 * every export applies to a row's timestamp.
 *
 * Where it sits: in the clock module, after the fit that writes clock_models and
 * gpu_timer_models (fit_db.c, gpu.c); used downstream by analyze (matching, steps, the
 * windows table) and export (Perfetto, HTML).
 * It reads the tables directly, using only the formulas documented in schema.sql, so the
 * analysis works on any database that has them, whoever fitted them.
 *
 * Workload: a few segments per rank (piecewise linear) for up to 512 ranks, loaded once
 * (at most MRD_TIMEBASE_MAX_SEGMENTS rows; beyond, the load fails with -E2BIG rather
 * than growing); each map is a binary search, called once per exported row.
 * Not thread-safe for writing; concurrent read-only use after load is fine.
 */
#ifndef MRD_TIMEBASE_H
#define MRD_TIMEBASE_H

#include <stdint.h>

#include <sqlite3.h>

#define MRD_TIMEBASE_MAX_SEGMENTS (1u << 20)

struct mrd_timebase;

/* Loads clock_models and gpu_timer_models from db (tables may be absent; the statements
 * are the database module's mrd_db_sql_clock_segments and mrd_db_sql_gpu_models). With
 * ignore_models set, every rank stays in its local clock. Returns 0 and
 * *out (caller destroys), -ENOMEM, -E2BIG, or -MRD_ERR_SQLITE. Any thread; db is only
 * used during the call. */
int mrd_timebase_load(sqlite3 *db, int ignore_models, struct mrd_timebase **out);

/* Accepts NULL. */
void mrd_timebase_destroy(struct mrd_timebase *tb);

/* 1 when at least one rank has a clock model (times are in the global timebase), 0 when
 * every rank is in its own local clock. */
int mrd_timebase_is_global(const struct mrd_timebase *tb);

/* 1 when `rank` has a model. In a global timebase, an unfitted rank's times cannot be
 * compared with other ranks': callers exclude it from cross-rank work and say so. */
int mrd_timebase_rank_fitted(const struct mrd_timebase *tb, int rank);

/* Maps a rank-local host timestamp to the global timebase with that rank's model
 * (global = local + offset + drift_ppm * (local - local_begin) / 1e6, segment chosen by
 * local time, first/last segment extrapolated). Returns `local` unchanged for a rank
 * without a model. */
int64_t mrd_timebase_map(const struct mrd_timebase *tb, int rank, int64_t local);

/* Inverse of mrd_timebase_map (to within 1 ns for drifts below 1e5 ppm). */
int64_t mrd_timebase_unmap(const struct mrd_timebase *tb, int rank, int64_t global);

/* Converts a raw GPU timer value of (rank, device) to the rank-local host clock with
 * gpu_timer_models (local = gpu * slope + intercept). Returns 0 and *local, or -ENOENT
 * when that GPU has no calibration. */
int mrd_timebase_gpu_to_local(const struct mrd_timebase *tb, int rank, int device, int64_t gpu_ns,
                              int64_t *local);

/* The time origin of every output (mrd_db_time_origin, aggregator/SCHEMA.md "The time
 * origin"), in this timebase: global ns when it has models, else local ns. Outputs show
 * times as (time - origin), small enough for exact float microseconds and never
 * negative. db: the database tb was loaded from. Returns 0 and *origin, or
 * -MRD_ERR_SQLITE. Caller's thread; one scan per event table at most (replayed
 * captures), none for a live run. */
int mrd_timebase_origin(const struct mrd_timebase *tb, sqlite3 *db, int64_t *origin);

#endif
