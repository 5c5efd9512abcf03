/* Native Perfetto trace export: protobuf TracePackets (TrackEvent), gzip-compressed.
 *
 * Where it sits: export stage, beside the Chrome JSON writer (perfetto.c), on the same
 * global timebase (timebase.h) and options. Packets are protobuf-c messages of our subset
 * of Perfetto's format (pftrace/meridian_pftrace.proto, Perfetto's names and numbers);
 * each is framed as field 1 of Trace and deflated (gzip) as it is written.
 *
 * Layout, as ui.perfetto.dev shows it: one process per rank ("rank N (host)", pid N + 1),
 * and under it named tracks: "GPU d stream s" (kernels, memcpy, memset), "GPU d stream s
 * CUDA graphs", "NCCL GPU d" (host enqueue interval of each op, named by its function,
 * "AllReduce", with seq, communicator, bytes... in args), "NVTX thread t" (push/pop ranges,
 * marks), "NVTX start/end thread t", "MPI thread t", "CUDA synchronization", "CUDA API
 * thread t" (--api), "capture windows" (table windows), and counters "step time" (NVTX
 * step ranges, the rule of proto/steps.h) and "GPU d timer - host clock" (gpu_clock_samples).
 * Flows: one per collective instance (comm_hash, seq, func), through the op of every rank
 * that took part; one from each NCCL op to its first kernel.
 *
 * Encoding, chosen for size (<= 20 bytes per row gzipped, tests/bench/export/RESULTS.md):
 *  - one packet sequence per track group (a query's rows of one (rank, key): a stream, a
 *    thread...). Its first packet clears the incremental state, sets the group's first
 *    track as the default track_uuid and defines clock 64 as incremental (ClockSnapshot
 *    against BOOTTIME), so every later packet carries only the nanoseconds since the
 *    previous packet of its sequence;
 *  - slices are SLICE_BEGIN / SLICE_END pairs: rows are read in start order per group and
 *    each END is written when time passes it. Slices of one track must nest: a row that
 *    would cross an open slice goes to the group's next lane (another track, "#2"...),
 *    MAX_LANES at most; past that it is shortened to nest and counted (overlapped);
 *  - event names, categories, argument names and repeated argument strings are interned
 *    per sequence (InternedData in the packet that first uses them), keyed by the strings
 *    table's id (even iids) or our own tables (odd iids); kernel names are written
 *    demangled (mrd_analyze_demangle_cached), under their string's id.
 * Times: the global timebase in nanoseconds (Unix epoch); a rank without a clock model
 * (its times cannot be placed against the others) starts at the run's anchor, like the
 * JSON export. Without any model, every rank's local clock.
 *
 * Workload: tens of millions of rows in one pass per table group, ORDER BY (rank, key,
 * start) (SQLite sorts the streams' union); memory is bounded: one group's lanes, the rank
 * table (MRD_PFTRACE_MAX_RANKS), the interning set (SEEN_SLOTS, per sequence; past its
 * cap names are written inline) and the launch-shape table (SHAPE_SLOTS; same policy).
 */
#include "pftrace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "db.h"
#include "error.h"
#include "pftrace_enc.h"
#include "steps.h"

/* fixed event names: iid 2 * index + 1 */
static const char *const NAMES[] = {
    "memcpy",      "memcpy HtoD", "memcpy DtoH", "memcpy HtoA",      "memcpy AtoH",
    "memcpy AtoA", "memcpy AtoD", "memcpy DtoA", "memcpy DtoD",      "memcpy HtoH",
    "memcpy PtoP", "memset",      "CUDA graph",  "CUDA synchronize", "kernel",
    "(unnamed)",   "collective",  "MPI",         "CUDA API"};
enum { N_MEMSET = 11, N_GRAPH, N_SYNC, N_KERNEL, N_UNNAMED, N_COLL, N_MPI, N_API };

static int64_t col64(sqlite3_stmt *q, int c)
{
    return (int64_t)sqlite3_column_int64(q, c);
}

static const char *text(sqlite3_stmt *q, int c)
{
    return (const char *)sqlite3_column_text(q, c);
}

static uint64_t coll_flow(uint64_t comm, int64_t seq, int64_t func)
{
    return mrd__pf_mix(mrd__pf_mix(comm) ^ mrd__pf_mix((uint64_t)seq * 31 + (uint64_t)func)) |
           (1ull << 63);
}

static uint64_t link_flow(int rank, int64_t op)
{
    return (mrd__pf_mix(((uint64_t)(uint32_t)rank << 40) ^ (uint64_t)op) >> 1) | 1;
}

/* ---- rows ---- */

/* Opens the slice of a row on the track group (cls, key) of its rank (column 0), from
 * the local start and end at columns tcol and tcol + 1 (mapped as mrd__pf_wtime's), in
 * category cat; *s and *e get its written times. Returns its lane, or -1 when the row is
 * not written (group refused, outside the window, or an error kept in p). */
static int row_slice(struct px *p, sqlite3_stmt *q, int cls, uint64_t key, int tcol, int mapped,
                     int cat, uint64_t *s, uint64_t *e)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = mrd__pf_group(p, rank, cls, key);
    if (!ri)
        return -1;
    *s = mrd__pf_wtime(p, ri, rank, col64(q, tcol), mapped);
    *e = mrd__pf_wtime(p, ri, rank, col64(q, tcol + 1), mapped);
    return mrd__pf_slice_begin(p, ri, *s, e, cat);
}

/* Names the current event by its string (id at column idc, text at idc + 1, from a LEFT
 * JOIN on strings) or, when the row has none, by fixed name n. demangle: a kernel's name,
 * shown as the analysis layer demangles it (mrd_analyze_demangle_cached, as every other
 * output); the iid stays the string's id, whose demangled text is always the same. */
static void row_name(struct px *p, sqlite3_stmt *q, int idc, int n, int demangle)
{
    const char *name = text(q, idc + 1);
    if (sqlite3_column_type(q, idc) != SQLITE_NULL && name)
        mrd__pf_name(p, mrd__pf_db_iid(col64(q, idc)),
                     demangle ? mrd_analyze_demangle_cached(name) : name);
    else
        mrd__pf_name(p, mrd__pf_fixed_iid(n), NAMES[n]);
}

static void stream_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), kind = sqlite3_column_int(q, 5);
    uint64_t key = ((uint64_t)(uint32_t)sqlite3_column_int(q, 1) << 32) | (uint32_t)col64(q, 2);
    uint64_t s, e;
    int lane = row_slice(p, q, C_STREAM, key, 3, 0,
                         kind == 0   ? CAT_KERNEL
                         : kind == 1 ? CAT_MEMCPY
                                     : CAT_MEMSET,
                         &s, &e);
    if (lane < 0)
        return;
    if (kind == 0) {
        row_name(p, q, 6, N_KERNEL, 1);
        if (p->o->include_api) /* links the kernel to its launch call; ~2.5 bytes a kernel */
            mrd__pf_arg_int(p, A_CORR, col64(q, 8));
        mrd__pf_arg_shape(p, A_GRID, (uint32_t)sqlite3_column_int(q, 9),
                          (uint32_t)sqlite3_column_int(q, 10), (uint32_t)sqlite3_column_int(q, 11));
        mrd__pf_arg_shape(p, A_BLOCK, (uint32_t)sqlite3_column_int(q, 12),
                          (uint32_t)sqlite3_column_int(q, 13), (uint32_t)sqlite3_column_int(q, 14));
        if (sqlite3_column_type(q, 15) != SQLITE_NULL) {
            mrd__pf_arg_int(p, A_NCCL_OP, col64(q, 15));
            /* the link flows of the ops whose first kernel this is */
            sqlite3_reset(p->links);
            sqlite3_bind_int(p->links, 1, rank);
            sqlite3_bind_int64(p->links, 2, col64(q, 8));
            sqlite3_bind_int64(p->links, 3, col64(q, 3));
            while (sqlite3_step(p->links) == SQLITE_ROW && p->te.n_terminating_flow_ids < MAX_TERMS)
                p->terms[p->te.n_terminating_flow_ids++] = link_flow(rank, col64(p->links, 0));
        }
    } else if (kind == 1) {
        int k = sqlite3_column_int(q, 6);
        mrd__pf_name(p, mrd__pf_fixed_iid(k > 0 && k <= 10 ? k : 0),
                     NAMES[k > 0 && k <= 10 ? k : 0]);
        mrd__pf_arg_int(p, A_BYTES, col64(q, 8));
    } else {
        mrd__pf_name(p, mrd__pf_fixed_iid(N_MEMSET), NAMES[N_MEMSET]);
        mrd__pf_arg_int(p, A_BYTES, col64(q, 8));
    }
    mrd__pf_slice_commit(p, lane, s, e);
}

static void graph_row(struct px *p, sqlite3_stmt *q)
{
    uint64_t key = ((uint64_t)(uint32_t)sqlite3_column_int(q, 1) << 32) | (uint32_t)col64(q, 2);
    uint64_t s, e;
    int lane = row_slice(p, q, C_GRAPH, key, 3, 0, CAT_GRAPH, &s, &e);
    if (lane < 0)
        return;
    mrd__pf_name(p, mrd__pf_fixed_iid(N_GRAPH), NAMES[N_GRAPH]);
    mrd__pf_arg_int(p, A_GRAPH_ID, col64(q, 5));
    mrd__pf_slice_commit(p, lane, s, e);
}

static void nccl_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), p2p = sqlite3_column_int(q, 18);
    uint64_t s, e;
    int lane = row_slice(p, q, C_NCCL, (uint32_t)sqlite3_column_int(q, 1), 2, 0, CAT_NCCL, &s, &e);
    if (lane < 0)
        return;
    row_name(p, q, 6, N_COLL, 0);
    mrd__pf_arg_int(p, A_OP_ID, col64(q, 4));
    if (!p2p)
        mrd__pf_arg_int(p, A_SEQ, col64(q, 5));
    mrd__pf_arg_uint(p, A_COMM, (uint64_t)col64(q, 19));
    mrd__pf_arg_int(p, A_COUNT, col64(q, 8));
    mrd__pf_arg_int(p, A_BYTES, col64(q, 9));
    if (sqlite3_column_type(q, 10) != SQLITE_NULL)
        mrd__pf_arg_str(p, A_DATATYPE, mrd__pf_db_iid(col64(q, 10)), text(q, 11));
    if (sqlite3_column_type(q, 12) != SQLITE_NULL)
        mrd__pf_arg_str(p, A_ALGO, mrd__pf_db_iid(col64(q, 12)), text(q, 13));
    if (sqlite3_column_type(q, 14) != SQLITE_NULL)
        mrd__pf_arg_str(p, A_PROTO, mrd__pf_db_iid(col64(q, 14)), text(q, 15));
    mrd__pf_arg_int(p, A_CHANNELS, col64(q, 17));
    if (p2p)
        mrd__pf_arg_int(p, A_PEER, col64(q, 16));
    else if (col64(q, 20) >= 0)
        mrd__pf_arg_int(p, A_ROOT, col64(q, 20));
    if (!p2p && sqlite3_column_type(q, 5) != SQLITE_NULL) {
        p->flows[p->te.n_flow_ids++] = coll_flow((uint64_t)col64(q, 19), col64(q, 5), col64(q, 6));
        p->st.coll_flows++;
    }
    if (sqlite3_column_int(q, 21)) {
        p->flows[p->te.n_flow_ids++] = link_flow(rank, col64(q, 4));
        p->st.link_flows++;
    }
    mrd__pf_slice_commit(p, lane, s, e);
}

static void nvtx_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), kind = sqlite3_column_int(q, 4);
    struct rankinfo *ri =
        mrd__pf_group(p, rank, kind == 2 ? C_NVTX_SE : C_NVTX, (uint64_t)col64(q, 1));
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0);
    int lane = 0;
    if (kind == 3) { /* a mark: an instant on the thread's first track */
        if (mrd__pf_instant_begin(p, s, CAT_NVTX) < 0)
            return;
    } else if ((lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_NVTX)) < 0) {
        return;
    }
    row_name(p, q, 5, N_UNNAMED, 0);
    if (sqlite3_column_type(q, 7) != SQLITE_NULL)
        mrd__pf_arg_str(p, A_DOMAIN, mrd__pf_db_iid(col64(q, 7)), text(q, 8));
    if (kind == 3) {
        mrd__pf_instant_commit(p, s);
    } else {
        mrd__pf_slice_commit(p, lane, s, e);
    }
}

/* The tables whose rows are plain slices on a host thread's track (or the rank's one
 * track): rank at column 0, start and end at 2 and 3, then a name and integer arguments. */
struct plain_rows {
    int cls, cat;
    int thread_col; /* the thread key's column; -1: one track per rank */
    int name_col;   /* the name's string id (text in the next column); -1: always `name` */
    int name;       /* the fixed name without a string */
    int nargs;
    struct {
        int arg, col;
    } args[3];
};

static const struct plain_rows MPI_ROWS = {
    C_MPI, CAT_MPI, 1, 4, N_MPI, 3, {{A_BYTES, 6}, {A_PEER, 7}, {A_TAG, 8}}};
static const struct plain_rows SYNC_ROWS = {
    C_SYNC, CAT_SYNC, -1, -1, N_SYNC, 2, {{A_TYPE, 4}, {A_STREAM, 5}}};
static const struct plain_rows API_ROWS = {
    C_API, CAT_API, 1, 4, N_API, 2, {{A_CBID, 6}, {A_CORR, 7}}};

static void plain_row(struct px *p, sqlite3_stmt *q, const struct plain_rows *t)
{
    uint64_t key = t->thread_col < 0 ? 0 : (uint64_t)col64(q, t->thread_col), s, e;
    int lane = row_slice(p, q, t->cls, key, 2, 0, t->cat, &s, &e);
    if (lane < 0)
        return;
    if (t->name_col < 0)
        mrd__pf_name(p, mrd__pf_fixed_iid(t->name), NAMES[t->name]);
    else
        row_name(p, q, t->name_col, t->name, 0);
    for (int i = 0; i < t->nargs; i++)
        mrd__pf_arg_int(p, t->args[i].arg, col64(q, t->args[i].col));
    mrd__pf_slice_commit(p, lane, s, e);
}

static void mpi_row(struct px *p, sqlite3_stmt *q)
{
    plain_row(p, q, &MPI_ROWS);
}

static void sync_row(struct px *p, sqlite3_stmt *q)
{
    plain_row(p, q, &SYNC_ROWS);
}

static void api_row(struct px *p, sqlite3_stmt *q)
{
    plain_row(p, q, &API_ROWS);
}

static void window_row(struct px *p, sqlite3_stmt *q)
{
    uint64_t s, e;
    int lane = row_slice(p, q, C_WINDOW, 0, 2, 1, CAT_WINDOW, &s, &e);
    if (lane < 0)
        return;
    char name[96];
    snprintf(name, sizeof(name), "window %" PRId64 "-%" PRId64 " %s", col64(q, 4), col64(q, 5),
             text(q, 6) ? text(q, 6) : "");
    p->te.name = name; /* a few per rank: not interned */
    mrd__pf_arg_int(p, A_FIRST, col64(q, 4));
    mrd__pf_arg_int(p, A_LAST, col64(q, 5));
    mrd__pf_arg_str(p, A_REASON, 0, text(q, 6));
    mrd__pf_arg_int(p, A_ATTACH, col64(q, 7));
    if (sqlite3_column_type(q, 8) != SQLITE_NULL)
        mrd__pf_arg_int(p, A_DETACH, col64(q, 8));
    mrd__pf_arg_int(p, A_FLUSH, col64(q, 9));
    mrd__pf_arg_int(p, A_KERNELS, col64(q, 10));
    mrd__pf_slice_commit(p, lane, s, e);
}

/* Step time: one sample per top-level step range, at its start, of its length in ms. */
static void step_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    if (!mrd_step_name_match(text(q, 4), NULL))
        return;
    int fresh = !(p->g.nlanes && p->g.rank == rank && p->g.cls == C_STEP);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_STEP, 0);
    if (!ri)
        return;
    if (!fresh && col64(q, 2) < p->step_end)
        return; /* nested in the previous step: not a step of its own */
    p->step_end = col64(q, 3);
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0);
    mrd__pf_counter(p, s, e > s ? (double)(e - s) / 1e6 : 0);
}

static void gpuclk_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    int fresh = !(p->g.nlanes && p->g.rank == rank && p->g.cls == C_GPUCLK &&
                  p->g.key == (uint32_t)sqlite3_column_int(q, 1));
    struct rankinfo *ri = mrd__pf_group(p, rank, C_GPUCLK, (uint32_t)sqlite3_column_int(q, 1));
    if (!ri)
        return;
    int64_t off = col64(q, 3) - col64(q, 2);
    if (fresh)
        p->gpuclk_first = off;
    mrd__pf_counter(p, mrd__pf_wtime(p, ri, rank, col64(q, 2), 0), (double)(off - p->gpuclk_first));
}

/* Runs one query (skipped when its table is absent), one callback per row. */
static int run(struct px *p, const char *table, const char *sql, int bind1,
               void (*row)(struct px *, sqlite3_stmt *))
{
    sqlite3_stmt *q = NULL;
    int rc;
    uint64_t n = 0;
    mrd__export_rows_pass(&p->rows);
    if ((rc = mrd_db_has_table(p->db, table)) <= 0)
        return rc;
    if (sqlite3_prepare_v2(p->db, sql, -1, &q, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    if (bind1)
        sqlite3_bind_int(q, 1, bind1);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && !p->err) {
        row(p, q);
        if (++n % MRD__EXPORT_ROWS_EVERY == 0)
            mrd__export_rows_tick(&p->rows, n);
    }
    sqlite3_finalize(q);
    mrd__pf_close_group(p);
    mrd__export_rows_pass_end(&p->rows);
    if (p->err)
        return p->err;
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -MRD_ERR_SQLITE;
}

static int setup(struct px *p)
{
    int rc;
    if ((rc = mrd__pf_init(p)) < 0)
        return rc;
    if ((rc = mrd_timebase_load(p->db, p->o->ignore_clock_models, &p->tb)) < 0 ||
        (rc = mrd_timebase_origin(p->tb, p->db, &p->origin)) < 0 ||
        (rc = mrd_db_op_intervals(p->db, 0)) < 0)
        return rc;
    if (p->o->by_steps) { /* the step range as a window, as the JSON export does */
        int64_t from, to;
        if ((rc = mrd_export_steps_window(p->db, p->o, p->origin, &from, &to, &p->steps_in_run)) <
            0)
            return rc;
        p->opts = *p->o;
        p->opts.window_from_ns = from;
        p->opts.window_to_ns = to;
        p->o = &p->opts;
    }
    /* the tables of the queries of mrd_export_pftrace, in their order (the streams' query
     * reads kernels, memcpys and memsets) */
    static const char *const passes[] = {"kernels memcpys memsets",
                                         "graph_launches",
                                         "nccl_ops",
                                         "nvtx",
                                         "nvtx",
                                         "mpi_calls",
                                         "syncs",
                                         "api_calls",
                                         "windows",
                                         "nvtx",
                                         "gpu_clock_samples"};
    const char *picked[sizeof(passes) / sizeof(passes[0])];
    int npass = 0;
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++)
        if (p->o->include_api || strcmp(passes[i], "api_calls") != 0)
            picked[npass++] = passes[i];
    if ((rc = mrd__export_rows_begin(&p->rows, p->db, p->o->progress, picked, npass)) < 0)
        return rc;
    if (sqlite3_prepare_v2(p->db, mrd_db_sql_pftrace_links, -1, &p->links, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(p->db, mrd_db_sql_rank_host, -1, &p->host, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(p->db, mrd_db_sql_first_kernel_of_rank, -1, &p->rank_first, NULL) !=
            SQLITE_OK)
        return -MRD_ERR_SQLITE;
    return 0;
}

int mrd_export_pftrace(FILE *f, sqlite3 *db, const struct mrd_perfetto_options *opts,
                       struct mrd_pftrace_stats *stats)
{
    static const struct mrd_perfetto_options defaults;
    struct px *p = calloc(1, sizeof(*p));
    int rc;
    if (!p)
        return -ENOMEM;
    p->f = f;
    p->db = db;
    p->o = opts ? opts : &defaults;
    if ((rc = setup(p)) < 0)
        goto fail;
    if ((rc = run(p, "kernels", mrd_db_sql_pftrace_streams, 0, stream_row)) < 0 ||
        (rc = run(p, "graph_launches", mrd_db_sql_pftrace_graphs, 0, graph_row)) < 0 ||
        (rc = run(p, "nccl_ops", mrd_db_sql_pftrace_nccl, 0, nccl_row)) < 0 ||
        (rc = run(p, "nvtx", mrd_db_sql_pftrace_nvtx, 1, nvtx_row)) < 0 ||
        (rc = run(p, "nvtx", mrd_db_sql_pftrace_nvtx, 2, nvtx_row)) < 0 ||
        (rc = run(p, "mpi_calls", mrd_db_sql_pftrace_mpi, 0, mpi_row)) < 0 ||
        (rc = run(p, "syncs", mrd_db_sql_pftrace_syncs, 0, sync_row)) < 0 ||
        (p->o->include_api && (rc = run(p, "api_calls", mrd_db_sql_pftrace_api, 0, api_row)) < 0) ||
        (rc = run(p, "windows", mrd_db_sql_pftrace_windows, 0, window_row)) < 0 ||
        (rc = run(p, "nvtx", mrd_db_sql_pftrace_steps, 0, step_row)) < 0 ||
        (rc = run(p, "gpu_clock_samples", mrd_db_sql_pftrace_gpu_clock, 0, gpuclk_row)) < 0)
        goto fail;
    if (mrd__pf_finish(p) < 0 || fflush(f) != 0 || ferror(f)) {
        rc = -EIO;
        goto fail;
    }
    p->st.steps = p->steps_in_run;
    if (stats)
        *stats = p->st;
fail:
    sqlite3_finalize(p->links);
    sqlite3_finalize(p->host);
    sqlite3_finalize(p->rank_first);
    mrd_timebase_destroy(p->tb);
    mrd__pf_release(p);
    free(p);
    return rc;
}
