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
 *    per sequence (InternedData in the packet that first uses them), keyed by the
 *    strings table's id (even iids) or our own tables (odd iids).
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

#include "error.h"
#include "pftrace_enc.h"
#include "steps.h"

/* ---- SQL: every statement of the exporter (one place, to move with the others) ---- */

/* GPU work of each stream in (rank, device, stream, start) order: kernels (lost ones,
 * start = end = 0, left out), copies, memsets. Columns: rank, device, stream, start, end,
 * kind (0 kernel, 1 memcpy, 2 memset), name id (kernel) or copy kind, text, correlation id
 * or bytes, grid x y z, block x y z, the kernel's NCCL op (or NULL). */
static const char SQL_STREAMS[] =
    "SELECT k.rank, k.device, k.stream, k.start_ns, k.end_ns, 0, k.name_id, s.value, "
    "k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, "
    "(SELECT l.op_id FROM temp.mrd_link l WHERE l.rank = k.rank AND l.correlation_id = "
    "k.correlation_id LIMIT 1) FROM main.kernels k LEFT JOIN main.strings s ON s.id = "
    "k.name_id WHERE NOT (k.start_ns = 0 AND k.end_ns = 0) "
    "UNION ALL SELECT rank, device, stream, start_ns, end_ns, 1, copy_kind, NULL, bytes, "
    "0, 0, 0, 0, 0, 0, NULL FROM main.memcpys WHERE NOT (start_ns = 0 AND end_ns = 0) "
    "UNION ALL SELECT rank, device, stream, start_ns, end_ns, 2, 0, NULL, bytes, 0, 0, 0, "
    "0, 0, 0, NULL FROM main.memsets WHERE NOT (start_ns = 0 AND end_ns = 0) "
    "ORDER BY 1, 2, 3, 4, 5 DESC";
/* the ops whose first kernel is (rank, correlation id) starting at ?3 */
static const char SQL_LINKS[] =
    "SELECT l.op_id FROM temp.mrd_link l JOIN temp.mrd_op_time t ON t.rank = l.rank AND "
    "t.op_id = l.op_id AND t.source = 1 WHERE l.rank = ?1 AND l.correlation_id = ?2 AND "
    "t.start_ns = ?3";
static const char SQL_GRAPHS[] =
    "SELECT rank, device, stream, start_ns, end_ns, graph_id FROM main.graph_launches "
    "ORDER BY 1, 2, 3, 4, 5 DESC";
/* rank, device, start, end, op_id, seq, func id, func, count, bytes, datatype id,
 * datatype, algo id, algo, proto id, proto, peer, channels, is_p2p, comm_hash, root,
 * has a kernel (mrd_op_time source 1) */
static const char SQL_NCCL[] =
    "SELECT n.rank, n.device, n.start_ns, n.end_ns, n.op_id, n.seq, n.func_id, f.value, "
    "n.count, n.bytes, n.datatype_id, d.value, n.algo_id, a.value, n.proto_id, pr.value, "
    "n.peer, n.channels, n.is_p2p, n.comm_hash, n.root, t.start_ns IS NOT NULL "
    "FROM main.nccl_ops n LEFT JOIN main.strings f ON f.id = n.func_id "
    "LEFT JOIN main.strings d ON d.id = n.datatype_id LEFT JOIN main.strings a ON a.id = "
    "n.algo_id LEFT JOIN main.strings pr ON pr.id = n.proto_id LEFT JOIN temp.mrd_op_time "
    "t ON t.rank = n.rank AND t.op_id = n.op_id AND t.source = 1 "
    "ORDER BY 1, 2, 3, 4 DESC";
/* rank, thread, start, end, kind, name id, name, domain id, domain; ?1: 1 = push/pop
 * ranges and marks, 2 = start/end ranges */
static const char SQL_NVTX[] =
    "SELECT n.rank, n.thread, n.start_ns, n.end_ns, n.kind, n.name_id, s.value, "
    "n.domain_id, d.value FROM main.nvtx n LEFT JOIN main.strings s ON s.id = n.name_id "
    "LEFT JOIN main.strings d ON d.id = n.domain_id WHERE (n.kind = 2) = (?1 = 2) "
    "ORDER BY 1, 2, 3, 4 DESC";
static const char SQL_MPI[] =
    "SELECT m.rank, m.thread, m.start_ns, m.end_ns, m.call_id, s.value, m.bytes, m.peer, "
    "m.tag FROM main.mpi_calls m LEFT JOIN main.strings s ON s.id = m.call_id "
    "ORDER BY 1, 2, 3, 4 DESC";
static const char SQL_SYNCS[] =
    "SELECT rank, 0, start_ns, end_ns, type, stream FROM main.syncs ORDER BY 1, 3, 4 DESC";
static const char SQL_API[] =
    "SELECT c.rank, c.thread, c.start_ns, c.end_ns, c.name_id, s.value, c.cbid, "
    "c.correlation_id FROM main.api_calls c LEFT JOIN main.strings s ON s.id = c.name_id "
    "ORDER BY 1, 2, 3, 4 DESC";
/* already global (the finalize mapped them) */
static const char SQL_WINDOWS[] =
    "SELECT rank, 0, start_ns, end_ns, first_step, last_step, reason, attach_ns, "
    "detach_ns, flush_ns, kernels FROM main.windows ORDER BY 1, 3, 4 DESC";
static const char SQL_STEPS[] =
    "SELECT n.rank, 0, n.start_ns, n.end_ns, s.value FROM main.nvtx n JOIN main.strings s "
    "ON s.id = n.name_id WHERE n.kind = 1 ORDER BY 1, 3, 4 DESC";
static const char SQL_GPU_CLOCK[] =
    "SELECT rank, device, host_ns, gpu_ns FROM main.gpu_clock_samples ORDER BY 1, 2, 3";
static const char SQL_HOST[] = "SELECT host FROM main.ranks WHERE rank = ?1";
static const char SQL_RANK_FIRST[] = "SELECT MIN(start_ns) FROM main.kernels WHERE rank = ?1";
static const char SQL_LOCAL_FIRST[] = "SELECT MIN(start_ns) FROM main.kernels WHERE start_ns > 0";

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

static void stream_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), kind = sqlite3_column_int(q, 5);
    uint64_t key = ((uint64_t)(uint32_t)sqlite3_column_int(q, 1) << 32) | (uint32_t)col64(q, 2);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_STREAM, key);
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 4), 0);
    int lane = mrd__pf_slice_begin(p, ri, s, &e,
                                   kind == 0   ? CAT_KERNEL
                                   : kind == 1 ? CAT_MEMCPY
                                               : CAT_MEMSET);
    if (lane < 0)
        return;
    if (kind == 0) {
        if (sqlite3_column_type(q, 6) != SQLITE_NULL && text(q, 7))
            mrd__pf_name(p, mrd__pf_db_iid(col64(q, 6)), text(q, 7));
        else
            mrd__pf_name(p, mrd__pf_fixed_iid(N_KERNEL), NAMES[N_KERNEL]);
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
    int rank = sqlite3_column_int(q, 0);
    uint64_t key = ((uint64_t)(uint32_t)sqlite3_column_int(q, 1) << 32) | (uint32_t)col64(q, 2);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_GRAPH, key);
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 4), 0);
    int lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_GRAPH);
    if (lane < 0)
        return;
    mrd__pf_name(p, mrd__pf_fixed_iid(N_GRAPH), NAMES[N_GRAPH]);
    mrd__pf_arg_int(p, A_GRAPH_ID, col64(q, 5));
    mrd__pf_slice_commit(p, lane, s, e);
}

static void nccl_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), p2p = sqlite3_column_int(q, 18);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_NCCL, (uint32_t)sqlite3_column_int(q, 1));
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0);
    int lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_NCCL);
    if (lane < 0)
        return;
    if (sqlite3_column_type(q, 6) != SQLITE_NULL && text(q, 7))
        mrd__pf_name(p, mrd__pf_db_iid(col64(q, 6)), text(q, 7));
    else
        mrd__pf_name(p, mrd__pf_fixed_iid(N_COLL), NAMES[N_COLL]);
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
    if (sqlite3_column_type(q, 5) != SQLITE_NULL && text(q, 6))
        mrd__pf_name(p, mrd__pf_db_iid(col64(q, 5)), text(q, 6));
    else
        mrd__pf_name(p, mrd__pf_fixed_iid(N_UNNAMED), NAMES[N_UNNAMED]);
    if (sqlite3_column_type(q, 7) != SQLITE_NULL)
        mrd__pf_arg_str(p, A_DOMAIN, mrd__pf_db_iid(col64(q, 7)), text(q, 8));
    if (kind == 3) {
        mrd__pf_instant_commit(p, s);
    } else {
        mrd__pf_slice_commit(p, lane, s, e);
    }
}

static void mpi_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_MPI, (uint64_t)col64(q, 1));
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0);
    int lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_MPI);
    if (lane < 0)
        return;
    if (text(q, 5))
        mrd__pf_name(p, mrd__pf_db_iid(col64(q, 4)), text(q, 5));
    else
        mrd__pf_name(p, mrd__pf_fixed_iid(N_MPI), NAMES[N_MPI]);
    mrd__pf_arg_int(p, A_BYTES, col64(q, 6));
    mrd__pf_arg_int(p, A_PEER, col64(q, 7));
    mrd__pf_arg_int(p, A_TAG, col64(q, 8));
    mrd__pf_slice_commit(p, lane, s, e);
}

static void sync_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_SYNC, 0);
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0);
    int lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_SYNC);
    if (lane < 0)
        return;
    mrd__pf_name(p, mrd__pf_fixed_iid(N_SYNC), NAMES[N_SYNC]);
    mrd__pf_arg_int(p, A_TYPE, col64(q, 4));
    mrd__pf_arg_int(p, A_STREAM, col64(q, 5));
    mrd__pf_slice_commit(p, lane, s, e);
}

static void api_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_API, (uint64_t)col64(q, 1));
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 0),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 0);
    int lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_API);
    if (lane < 0)
        return;
    if (text(q, 5))
        mrd__pf_name(p, mrd__pf_db_iid(col64(q, 4)), text(q, 5));
    else
        mrd__pf_name(p, mrd__pf_fixed_iid(N_API), NAMES[N_API]);
    mrd__pf_arg_int(p, A_CBID, col64(q, 6));
    mrd__pf_arg_int(p, A_CORR, col64(q, 7));
    mrd__pf_slice_commit(p, lane, s, e);
}

static void window_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = mrd__pf_group(p, rank, C_WINDOW, 0);
    if (!ri)
        return;
    uint64_t s = mrd__pf_wtime(p, ri, rank, col64(q, 2), 1),
             e = mrd__pf_wtime(p, ri, rank, col64(q, 3), 1);
    int lane = mrd__pf_slice_begin(p, ri, s, &e, CAT_WINDOW);
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
    if (!mrd_analyze_has_table(p->db, table))
        return 0;
    if (sqlite3_prepare_v2(p->db, sql, -1, &q, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    if (bind1)
        sqlite3_bind_int(q, 1, bind1);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && !p->err)
        row(p, q);
    sqlite3_finalize(q);
    mrd__pf_close_group(p);
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
        (rc = mrd_analyze_prepare(p->db)) < 0)
        return rc;
    if (sqlite3_prepare_v2(p->db, SQL_LINKS, -1, &p->links, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(p->db, SQL_HOST, -1, &p->host, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(p->db, SQL_RANK_FIRST, -1, &p->rank_first, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    if (mrd_timebase_is_global(p->tb)) {
        p->origin = mrd_timebase_anchor(p->tb);
    } else {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(p->db, SQL_LOCAL_FIRST, -1, &st, NULL) != SQLITE_OK)
            return -MRD_ERR_SQLITE;
        if (sqlite3_step(st) == SQLITE_ROW)
            p->origin = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
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
    if ((rc = run(p, "kernels", SQL_STREAMS, 0, stream_row)) < 0 ||
        (rc = run(p, "graph_launches", SQL_GRAPHS, 0, graph_row)) < 0 ||
        (rc = run(p, "nccl_ops", SQL_NCCL, 0, nccl_row)) < 0 ||
        (rc = run(p, "nvtx", SQL_NVTX, 1, nvtx_row)) < 0 ||
        (rc = run(p, "nvtx", SQL_NVTX, 2, nvtx_row)) < 0 ||
        (rc = run(p, "mpi_calls", SQL_MPI, 0, mpi_row)) < 0 ||
        (rc = run(p, "syncs", SQL_SYNCS, 0, sync_row)) < 0 ||
        (p->o->include_api && (rc = run(p, "api_calls", SQL_API, 0, api_row)) < 0) ||
        (rc = run(p, "windows", SQL_WINDOWS, 0, window_row)) < 0 ||
        (rc = run(p, "nvtx", SQL_STEPS, 0, step_row)) < 0 ||
        (rc = run(p, "gpu_clock_samples", SQL_GPU_CLOCK, 0, gpuclk_row)) < 0)
        goto fail;
    if (mrd__pf_finish(p) < 0 || fflush(f) != 0 || ferror(f)) {
        rc = -EIO;
        goto fail;
    }
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
