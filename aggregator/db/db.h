/* The database module: the one home of the SQL that reads a meridian database after the
 * store wrote it, and of the definitions every reader shares.
 *
 * What it owns (aggregator/SCHEMA.md documents each for people and scripts):
 * - every SQL statement of the clock passes, the analysis, the exports, the finalize and
 *   the store's connection setup, as named constants (mrd_db_sql_*, below, each with its
 *   contract: parameters ?N and result columns); callers prepare and step them, nothing
 *   else in aggregator/ or launcher/finalize.c writes SQL text. The writer's per-kind
 *   INSERTs and the schema stay in aggregator/store (write.c, schema.sql), the shard
 *   merge's in launcher/merge*.c;
 * - the table-exists check (mrd_db_has_table) and the one-statement helpers every reader
 *   and the store use (mrd_db_int64: one value; mrd_db_step_text: one step;
 *   mrd_db_write_row: one row written through a prepared statement);
 * - the one valid-interval rule for kernels (MRD_DB_KERNEL_VALID) and the op intervals
 *   that every cross-rank computation uses (mrd_db_op_intervals: TEMP tables mrd_link,
 *   mrd_op_time);
 * - the one cross-rank matching of collectives by (communicator, sequence, function)
 *   (mrd_db_instances_open), which the clock's causality check, the analysis and the
 *   Perfetto export's flows all step through;
 * - the one time origin of every output (mrd_db_time_origin) and the inputs of the
 *   global-time mapping (clock_models, gpu_timer_models: mrd_db_sql_clock_segments,
 *   mrd_db_sql_gpu_models), which aggregator/clock/timebase.c applies, and SQL views of
 *   every event table in global time on that origin (mrd_db_global_views).
 *
 * Where it sits: the ground floor of the aggregator's readers, between SQLite and the
 * clock, analyze and export stages (and launcher/finalize.c); it calls none of them.
 *
 * Workload: a handful of statements per finalize, analysis or export; the op-interval
 * TEMP tables hold one row per NCCL op (spilled to disk by SQLite like any table), the
 * matching query streams every non-p2p NCCL op once in key order. Functions run on the
 * caller's thread, on a connection only that thread uses.
 */
#ifndef MRD_DB_H
#define MRD_DB_H

#include <stdint.h>

#include <sqlite3.h>

#include "db_sql.h" /* the named statements, mrd_db_sql_* */

/* 1 when table `name` exists in db's main schema, 0 when it does not, -MRD_ERR_SQLITE
 * when the query fails (e.g. the file is not a database). A database written by an older
 * or partial run lacks some tables: callers skip what is absent. Any thread that may use
 * db. */
int mrd_db_has_table(sqlite3 *db, const char *name);

/* Adds the number of rows of main.<table> to *n; a table db lacks adds 0. Returns 0,
 * -ENOMEM or -MRD_ERR_SQLITE (the check or the count failed; *n unchanged). For progress
 * totals. Caller's thread. */
int mrd_db_table_rows(sqlite3 *db, const char *table, uint64_t *n);

/* The one-value query: runs sql with text bound to ?1 (when text is not NULL) and reads
 * column 0 of its first row into *v. Returns 1 (an integer was read), 0 (no row, or NULL:
 * *v = 0), -MRD_ERR_CONFIG (the value is REAL, TEXT or BLOB, never converted; *v = 0) or
 * -MRD_ERR_SQLITE (the statement did not prepare or its step failed: sqlite3_errmsg(db)
 * says why; *v = 0). For counts, MIN/MAX and id lookups. Caller's thread. */
int mrd_db_int64(sqlite3 *db, const char *sql, const char *text, int64_t *v);

/* Runs one statement of sql with text bound to ?1 (NULL binds NULL) for one step and
 * finalizes it: returns SQLite's step result (SQLITE_ROW, SQLITE_DONE or its error code),
 * or -MRD_ERR_SQLITE when sql does not prepare. For single-row lookups and one-parameter
 * updates; the row's columns are not readable afterwards. Caller's thread. */
int mrd_db_step_text(sqlite3 *db, const char *sql, const char *text);

/* The one step loop over a query's rows: when `table` is not NULL and db lacks it (or the
 * check fails), returns 0 without a row, as every reader of an optional table does;
 * otherwise prepares sql (no parameters), calls row(st, ctx) for each result row and
 * finalizes. row returns 0 to go on or a negative code, which stops the loop and is
 * returned. Returns 0, row's negative code, or -MRD_ERR_SQLITE (the statement did not
 * prepare or a step failed: sqlite3_errmsg(db) says why). Caller's thread. */
int mrd_db_each_row(sqlite3 *db, const char *table, const char *sql,
                    int (*row)(sqlite3_stmt *st, void *ctx), void *ctx);

/* Runs SQL text without results (several statements allowed). Returns 0 or
 * -MRD_ERR_SQLITE (sqlite3_errmsg(db) says why). */
int mrd_db_exec(sqlite3 *db, const char *sql);

/* One parameter of a row to write: an integer, a real, a text (copied by SQLite; a NULL
 * text binds NULL) or NULL. Made by the MRD_DB_* macros below. */
struct mrd_db_value {
    enum { MRD_DB_V_NULL, MRD_DB_V_INT, MRD_DB_V_REAL, MRD_DB_V_TEXT } type;
    union {
        int64_t i;
        double r;
        const char *s;
    };
};
#define MRD_DB_INT(v)  ((struct mrd_db_value){.type = MRD_DB_V_INT, .i = (int64_t)(v)})
#define MRD_DB_REAL(v) ((struct mrd_db_value){.type = MRD_DB_V_REAL, .r = (v)})
#define MRD_DB_TEXT(v) ((struct mrd_db_value){.type = MRD_DB_V_TEXT, .s = (v)})
/* The integer v where cond holds, else NULL (v is read only where cond holds). */
#define MRD_DB_INT_IF(cond, v)                                                                     \
    ((cond) ? MRD_DB_INT(v) : (struct mrd_db_value){.type = MRD_DB_V_NULL})

/* The one write of a row through a prepared INSERT, UPDATE or DELETE: resets st, binds
 * v[0..n) to ?1..?n and steps it once. Returns 0 (SQLITE_DONE) or -MRD_ERR_SQLITE (the
 * step failed: sqlite3_errmsg of st's connection says why). Through MRD_DB_WRITE_ROW:
 *     rc = MRD_DB_WRITE_ROW(ins, MRD_DB_INT(rank), MRD_DB_REAL(slope), MRD_DB_TEXT(method));
 * For the tables the clock passes, the analysis and the op intervals write; the store's
 * per-event writer binds its own. Caller's thread. */
int mrd_db_write_row(sqlite3_stmt *st, const struct mrd_db_value *v, int n);
#define MRD_DB_WRITE_ROW(st, ...)                                                                  \
    mrd_db_write_row(                                                                              \
        (st), (const struct mrd_db_value[]){__VA_ARGS__},                                          \
        (int)(sizeof((const struct mrd_db_value[]){__VA_ARGS__}) / sizeof(struct mrd_db_value)))

/* The one rule for a kernel (or memcpy/memset) row's interval, as an SQL condition on a
 * row aliased k: usable unless it is CUPTI's lost record (start = end = 0: records lost
 * by the device buffer lose both timestamps) or ends before it starts (a corrupt record
 * that would give a negative duration and a false causality violation). A start of 0
 * with a later end is a valid reading of a local clock and is kept. C code tests the same
 * with mrd_db_kernel_valid. The unary + keeps the condition a filter: it never steers
 * SQLite to an index on the times instead of the join's. */
#define MRD_DB_KERNEL_VALID "(NOT (+k.start_ns = 0 AND +k.end_ns = 0) AND +k.end_ns >= +k.start_ns)"
static inline int mrd_db_kernel_valid(int64_t start_ns, int64_t end_ns)
{
    return !(start_ns == 0 && end_ns == 0) && end_ns >= start_ns;
}

/* Builds the op-interval TEMP tables on db (op_intervals.c: one read of kernels,
 * nccl_channels and nccl_ops in table order, no index needed): with fresh = 0 only when
 * they do not exist yet (the clock passes, the analysis and the exports of one connection
 * share them), and then, where the finalize stored current ones (mrd_db_op_intervals_save),
 * as TEMP views mrd_link and mrd_op_time of those (nothing built; the other two tables
 * absent); with fresh = 1 built again from the current rows (a caller that may run after
 * rows changed on this connection):
 *   mrd_link(rank, correlation_id, op_id): kernels linked to NCCL ops through
 *     external_correlations (nccl_ops.launch_id = external_id);
 *   mrd_op_time(rank, op_id, start_ns, end_ns, source): each NCCL op's interval,
 *     source 1 = MIN(start)/MAX(end) of its linked kernels that pass MRD_DB_KERNEL_VALID
 *     (rank-local host clock), else source 2 = MIN(gpu_start)/MAX(gpu_end) of its
 *     nccl_channels with gpu_start > 0 AND gpu_end >= gpu_start (raw GPU timer: map
 *     with gpu_timer_models first). Ops with neither have no row;
 *   mrd_link_kernel(rank, correlation_id, start_ns, end_ns, device): the kernels of
 *     mrd_link that pass MRD_DB_KERNEL_VALID, indexed by (rank, correlation_id);
 *   mrd_op_gpu(rank, op_id, device, gpu_start, gpu_end): every op of nccl_ops and every
 *     (rank, op_id) of a valid channel: the op's device (its first row's with one),
 *     MIN(gpu_start) / MAX(gpu_end) of its valid channels (NULL without one).
 * The GPU timer calibration's bracket queries read the last two. Memory: O(NCCL ops)
 * while it runs. Works on a read-only database (TEMP only). Returns 0, -ENOMEM or
 * -MRD_ERR_SQLITE; on failure the TEMP tables are left as they were. */
int mrd_db_op_intervals(sqlite3 *db, int fresh);

/* Stores this connection's op intervals in the database (the finalize, after the clock
 * passes): nccl_op_links and nccl_op_intervals get mrd_link's and mrd_op_time's rows,
 * nccl_op_intervals_source the MAX(rowid) of nccl_ops, external_correlations, kernels and
 * nccl_channels they were built from (tables created where absent: aggregator/SCHEMA.md).
 * Afterwards mrd_db_op_intervals(db, 0) on any connection takes them as TEMP views of
 * those tables, without building, as long as no source table gained rows. Builds the op
 * intervals first where this connection has none. Returns 0 or -MRD_ERR_SQLITE / -ENOMEM
 * (nothing stored). Needs a read-write connection; caller's thread. */
int mrd_db_op_intervals_save(sqlite3 *db);

/* The one cross-rank matching: a collective instance is the nccl_ops rows of every rank
 * with equal (comm_hash, seq, func_id), p2p and rows without seq excluded. Prepares the
 * statement that returns one row per such op, ordered by (comm_hash, seq, func_id, rank,
 * op_id), so an instance's rows are adjacent; columns are enum mrd_db_inst_col. Builds
 * the op intervals first (mrd_db_op_intervals with `fresh`). Returns 0 and *out (caller
 * finalizes) or -MRD_ERR_SQLITE. */
int mrd_db_instances_open(sqlite3 *db, int fresh, sqlite3_stmt **out);

enum mrd_db_inst_col {
    MRD_DB_INST_COMM = 0,    /* comm_hash */
    MRD_DB_INST_SEQ,         /* seq */
    MRD_DB_INST_FUNC_ID,     /* func_id (strings id) */
    MRD_DB_INST_RANK,        /* rank */
    MRD_DB_INST_COMM_NRANKS, /* comm_nranks, NULL when unknown */
    MRD_DB_INST_DEVICE,      /* device, 0 when NULL */
    MRD_DB_INST_START,       /* mrd_op_time.start_ns, NULL: no interval */
    MRD_DB_INST_END,         /* mrd_op_time.end_ns */
    MRD_DB_INST_SOURCE,      /* mrd_op_time.source: 1 kernel (local), 2 channels (GPU) */
    MRD_DB_INST_FUNC,        /* the function's name (strings.value), NULL when unknown */
    MRD_DB_INST_IS_ROOT      /* 1 when comm_rank = root (both known), else 0 */
};

/* The time origin of every output (aggregator/SCHEMA.md, "The time origin"): all times
 * an output shows are global-timebase nanoseconds minus this value.
 *   - The run's anchor, runs.anchor_realtime_ns, when the clock probes were answered on
 *     this database's timebase: no clock_samples.t1 before the anchor (the aggregator that
 *     created the run stamps every t1 after it; a merge moves shards' t1 onto the base).
 *   - Otherwise (a replayed capture carries the t1/t2 its recording aggregator stamped;
 *     a merged shard's ranks probed before the base shard's run existed) the earliest
 *     global time of the run: the smallest of the earliest clock_samples.t1 and, for each
 *     rank with a model, map(rank, its earliest event time). No output time is negative.
 *   - Without any clock model (every rank in its local clock) the earliest event time of
 *     any rank.
 * map(ctx, rank, local) maps a rank's local time to the global timebase and returns 1, or
 * returns 0 when the rank has no model (the clock module's timebase, passed in so that
 * this module needs no clock code); have_models says whether any rank has one. An event
 * time is a start_ns > 0 of an event table (kernels also by MRD_DB_KERNEL_VALID).
 * Returns 0 and *origin (0 for an empty database) or -MRD_ERR_SQLITE. */
int mrd_db_time_origin(sqlite3 *db, int have_models,
                       int (*map)(void *ctx, int rank, int64_t local, int64_t *global), void *ctx,
                       int64_t *origin);

/* Creates, on this connection, SQL views of the event tables in global time, built on the
 * one origin and the one mapping (aggregator/SCHEMA.md, "Global-time views"):
 *   temp.mrd_time_origin(origin_ns): the origin given (mrd_timebase_origin's);
 *   temp.<table>_global for kernels, memcpys, memsets, syncs, api_calls, graph_launches,
 *     nvtx, nccl_ops, mpi_calls (those the database has): every column of the table plus
 *     start_global_ns, end_global_ns (clock_models applied exactly as the timebase applies
 *     them: the segment of the last local_begin_ns <= t, else the first; the rank's local
 *     time without a model) and start_at_ns, end_at_ns (global - origin);
 *   temp.enum_* tables naming the enumerations of the schema (nvtx_kind, memcpy_kind,
 *     memory_kind, sync_type, api_domain: value, name).
 * Replaces what an earlier call created. Works on a read-only database (TEMP only).
 * Returns 0 or -MRD_ERR_SQLITE. */
int mrd_db_global_views(sqlite3 *db, int64_t origin);

#endif
