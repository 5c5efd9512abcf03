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

#include <zlib.h>

#include "error.h"
#include "meridian_pftrace.pb-c.h"
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
static const char SQL_LOCAL_FIRST[] =
    "SELECT MIN(start_ns) FROM main.kernels WHERE start_ns > 0";

/* ---- vocabulary: fixed names, categories, argument names (odd / small iids) ---- */

enum cls { C_STREAM = 1, C_GRAPH, C_NCCL, C_NVTX, C_NVTX_SE, C_MPI, C_SYNC, C_API, C_WINDOW,
           C_STEP, C_GPUCLK };

static const char *const CATEGORIES[] = {"", "kernel", "memcpy", "memset", "graph", "nccl",
                                         "nvtx", "mpi", "sync", "api", "window"};
enum cat { CAT_KERNEL = 1, CAT_MEMCPY, CAT_MEMSET, CAT_GRAPH, CAT_NCCL, CAT_NVTX, CAT_MPI,
           CAT_SYNC, CAT_API, CAT_WINDOW };

static const char *const ARG_NAMES[] = {
    "",         "correlation", "grid",    "block", "nccl_op", "bytes",  "copy_kind", "graph_id",
    "op_id",    "seq",         "comm",    "count", "datatype", "algo",  "proto",     "channels",
    "peer",     "root",        "domain",  "tag",   "type",     "stream", "cbid",     "first_step",
    "last_step", "reason",     "attach_ns", "detach_ns", "flush_ns", "kernels"};
enum arg { A_CORR = 1, A_GRID, A_BLOCK, A_NCCL_OP, A_BYTES, A_COPY_KIND, A_GRAPH_ID, A_OP_ID,
           A_SEQ, A_COMM, A_COUNT, A_DATATYPE, A_ALGO, A_PROTO, A_CHANNELS, A_PEER, A_ROOT,
           A_DOMAIN, A_TAG, A_TYPE, A_STREAM, A_CBID, A_FIRST, A_LAST, A_REASON, A_ATTACH,
           A_DETACH, A_FLUSH, A_KERNELS, A_COUNT_ };

/* fixed event names: iid 2 * index + 1 */
static const char *const NAMES[] = {
    "memcpy",      "memcpy HtoD", "memcpy DtoH", "memcpy HtoA", "memcpy AtoH", "memcpy AtoA",
    "memcpy AtoD", "memcpy DtoA", "memcpy DtoD", "memcpy HtoH", "memcpy PtoP", "memset",
    "CUDA graph",  "CUDA synchronize", "kernel", "(unnamed)", "collective", "MPI",
    "CUDA API",    "step time",   "timer offset"};
enum { N_MEMSET = 11, N_GRAPH, N_SYNC, N_KERNEL, N_UNNAMED, N_COLL, N_MPI, N_API };

#define MAX_LANES 32
#define MAX_DEPTH 32
#define MAX_ANN   12
#define MAX_TERMS 16 /* ops ending their link flow on one kernel (grouped launch) */
#define SEEN_SLOTS (1u << 15) /* interning keys per sequence: cap at half */
#define SHAPE_SLOTS (1u << 16) /* distinct (x, y, z) launch shapes: cap at half */
#define OUTBUF (1u << 16)
#define CLOCK_INCREMENTAL 64
#define CLOCK_BOOTTIME 6

struct lane {
    uint64_t uuid;
    int depth;
    uint64_t end[MAX_DEPTH]; /* open slices' ends (written clock), innermost last */
};

/* The sequence being written: one track group. */
struct group {
    int open;    /* its first packet is out */
    int rank, cls;
    uint64_t key;
    uint32_t seq; /* trusted_packet_sequence_id */
    uint64_t last;
    int nlanes;
    struct lane lane[MAX_LANES];
};

struct rankinfo {
    int seen, aligned;
    int64_t origin;
    uint64_t uuid;
    int ntracks;
};

struct shape {
    uint32_t x, y, z, used;
};

struct px {
    FILE *f;
    sqlite3 *db;
    struct mrd_timebase *tb;
    const struct mrd_perfetto_options *o;
    struct mrd_pftrace_stats st;
    int64_t origin;
    sqlite3_stmt *links, *host, *rank_first;
    z_stream z;
    int zinit, err;
    unsigned char *in, *out;
    size_t nin;
    struct rankinfo *ranks;
    size_t nranks;
    uint32_t next_seq;
    struct group g;
    int64_t step_end;     /* step counter: end of the group's previous step (nesting) */
    int64_t gpuclk_first; /* GPU timer counter: the group's first offset */
    /* interning: keys (space << 56 | iid) sent on the current sequence */
    uint64_t *seen;
    uint32_t *seen_gen, gen, nseen;
    struct shape *shapes;
    uint32_t nshapes;
    /* the packet being built */
    Pftrace__TrackEvent te;
    Pftrace__DebugAnnotation ann[MAX_ANN], *annp[MAX_ANN];
    uint64_t cats[1], flows[2], terms[MAX_TERMS];
    Pftrace__InternedData idata;
    Pftrace__EventName en[1], *enp[1];
    Pftrace__EventCategory ec[1], *ecp[1];
    Pftrace__DebugAnnotationName an[MAX_ANN], *anp[MAX_ANN];
    Pftrace__InternedString is[MAX_ANN], *isp[MAX_ANN];
    ProtobufCBuffer sink;
};

/* ---- output: framing, deflate ---- */

static void deflate_out(struct px *p, int flush)
{
    p->z.next_in = p->in;
    p->z.avail_in = (uInt)p->nin;
    do {
        p->z.next_out = p->out;
        p->z.avail_out = OUTBUF;
        if (deflate(&p->z, flush) == Z_STREAM_ERROR) {
            p->err = -EIO;
            return;
        }
        size_t n = OUTBUF - p->z.avail_out;
        if (n && fwrite(p->out, 1, n, p->f) != n)
            p->err = -EIO;
        p->st.gz_bytes += n;
    } while (p->z.avail_out == 0);
    p->nin = 0;
}

static void put(struct px *p, const void *data, size_t n)
{
    const unsigned char *d = data;
    p->st.raw_bytes += n;
    while (n) {
        size_t k = OUTBUF - p->nin < n ? OUTBUF - p->nin : n;
        memcpy(p->in + p->nin, d, k);
        p->nin += k;
        d += k;
        n -= k;
        if (p->nin == OUTBUF)
            deflate_out(p, Z_NO_FLUSH);
    }
}

static void sink_append(ProtobufCBuffer *b, size_t n, const uint8_t *data)
{
    struct px *p = (struct px *)((char *)b - offsetof(struct px, sink));
    put(p, data, n);
}

/* Writes one packet as Trace field 1. */
static void emit(struct px *p, const Pftrace__TracePacket *pk)
{
    unsigned char hdr[11];
    size_t n = pftrace__trace_packet__get_packed_size(pk), h = 0;
    hdr[h++] = 0x0a;
    do {
        hdr[h++] = (unsigned char)((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
        n >>= 7;
    } while (n);
    put(p, hdr, h);
    pftrace__trace_packet__pack_to_buffer(pk, &p->sink);
    p->st.packets++;
}

/* ---- helpers ---- */

static int64_t col64(sqlite3_stmt *q, int c)
{
    return (int64_t)sqlite3_column_int64(q, c);
}

static const char *text(sqlite3_stmt *q, int c)
{
    return (const char *)sqlite3_column_text(q, c);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int64_t one_int(sqlite3_stmt *st, int rank, int64_t dflt)
{
    int64_t v = dflt;
    sqlite3_reset(st);
    sqlite3_bind_int(st, 1, rank);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(st, 0);
    return v;
}

/* ---- interning (per sequence) ---- */

/* 1 when key was already sent on this sequence; else records it (0), or -1 when the set
 * is full (the caller writes the string inline). */
static int seen(struct px *p, uint64_t key)
{
    uint64_t h = mix(key);
    for (uint32_t i = 0; i < SEEN_SLOTS; i++) {
        uint32_t s = (uint32_t)(h + i) & (SEEN_SLOTS - 1);
        if (p->seen_gen[s] != p->gen) {
            if (p->nseen >= SEEN_SLOTS / 2)
                return -1;
            p->seen_gen[s] = p->gen;
            p->seen[s] = key;
            p->nseen++;
            return 0;
        }
        if (p->seen[s] == key)
            return 1;
    }
    return -1;
}

/* The event's name: by iid, interned in this packet on first use. */
static void set_name(struct px *p, uint64_t iid, const char *name)
{
    int s = seen(p, (2ull << 56) | iid);
    if (s < 0) {
        p->te.name = (char *)name;
        return;
    }
    if (s == 0) {
        p->en[0].has_iid = 1;
        p->en[0].iid = iid;
        p->en[0].name = (char *)name;
        p->idata.n_event_names = 1;
    }
    p->te.has_name_iid = 1;
    p->te.name_iid = iid;
}

static uint64_t db_iid(int64_t string_id)
{
    return 2 * (uint64_t)string_id + 2;
}

static uint64_t fixed_iid(int k)
{
    return 2 * (uint64_t)k + 1;
}

static void set_cat(struct px *p, int cat)
{
    if (seen(p, (1ull << 56) | (uint64_t)cat) == 0) {
        p->ec[0].has_iid = 1;
        p->ec[0].iid = (uint64_t)cat;
        p->ec[0].name = (char *)CATEGORIES[cat];
        p->idata.n_event_categories = 1;
    }
    p->cats[0] = (uint64_t)cat;
    p->te.n_category_iids = 1;
}

static Pftrace__DebugAnnotation *arg(struct px *p, int name)
{
    if (p->te.n_debug_annotations >= MAX_ANN)
        return NULL;
    Pftrace__DebugAnnotation *a = &p->ann[p->te.n_debug_annotations++];
    pftrace__debug_annotation__init(a);
    a->has_name_iid = 1;
    a->name_iid = (uint64_t)name;
    int s = seen(p, (3ull << 56) | (uint64_t)name);
    if (s == 0 || s < 0) { /* argument names are few: always interned */
        Pftrace__DebugAnnotationName *n = &p->an[p->idata.n_debug_annotation_names++];
        pftrace__debug_annotation_name__init(n);
        n->has_iid = 1;
        n->iid = (uint64_t)name;
        n->name = (char *)ARG_NAMES[name];
    }
    return a;
}

static void arg_int(struct px *p, int name, int64_t v)
{
    Pftrace__DebugAnnotation *a = arg(p, name);
    if (a) {
        a->has_int_value = 1;
        a->int_value = v;
    }
}

static void arg_uint(struct px *p, int name, uint64_t v)
{
    Pftrace__DebugAnnotation *a = arg(p, name);
    if (a) {
        a->has_uint_value = 1;
        a->uint_value = v;
    }
}

/* A string argument whose value repeats: interned by iid (0: written inline). */
static void arg_str(struct px *p, int name, uint64_t iid, const char *v)
{
    Pftrace__DebugAnnotation *a = arg(p, name);
    if (!a)
        return;
    int s = iid ? seen(p, (4ull << 56) | iid) : -1;
    if (s < 0) {
        a->string_value = (char *)(v ? v : "");
        return;
    }
    if (s == 0) {
        Pftrace__InternedString *is = &p->is[p->idata.n_debug_annotation_string_values++];
        pftrace__interned_string__init(is);
        is->has_iid = 1;
        is->iid = iid;
        is->has_str = 1;
        is->str.data = (uint8_t *)(v ? v : "");
        is->str.len = strlen(v ? v : "");
    }
    a->has_string_value_iid = 1;
    a->string_value_iid = iid;
}

/* "x,y,z" of a launch shape, interned through a table of distinct shapes (odd iids). */
static void arg_shape(struct px *p, int name, sqlite3_stmt *q, int col)
{
    uint32_t x = (uint32_t)sqlite3_column_int(q, col), y = (uint32_t)sqlite3_column_int(q, col + 1),
             z = (uint32_t)sqlite3_column_int(q, col + 2);
    char buf[40];
    uint64_t iid = 0;
    snprintf(buf, sizeof(buf), "%u,%u,%u", x, y, z);
    uint64_t h = mix(((uint64_t)x << 32 | y) ^ mix(z));
    for (uint32_t i = 0; i < SHAPE_SLOTS; i++) {
        uint32_t s = (uint32_t)(h + i) & (SHAPE_SLOTS - 1);
        struct shape *e = &p->shapes[s];
        if (!e->used) {
            if (p->nshapes >= SHAPE_SLOTS / 2)
                break;
            e->used = ++p->nshapes;
            e->x = x;
            e->y = y;
            e->z = z;
        }
        if (e->x == x && e->y == y && e->z == z) {
            iid = 2 * (uint64_t)e->used + 1;
            break;
        }
    }
    arg_str(p, name, iid, buf);
}

/* ---- ranks and tracks ---- */

static struct rankinfo *rank_info(struct px *p, int rank);

static uint64_t track_uuid(int rank, int cls, uint64_t key, int lane)
{
    return mix(mix(((uint64_t)(uint32_t)rank << 8 | (uint64_t)cls) ^ mix(key)) + (uint64_t)lane) |
           1;
}

static void describe(struct px *p, Pftrace__TrackDescriptor *td)
{
    Pftrace__TracePacket pk = PFTRACE__TRACE_PACKET__INIT;
    pk.track_descriptor = td;
    pk.has_trusted_packet_sequence_id = 1;
    pk.trusted_packet_sequence_id = 1;
    emit(p, &pk);
    p->st.tracks++;
}

static struct rankinfo *rank_info(struct px *p, int rank)
{
    if (rank < 0 || rank >= MRD_PFTRACE_MAX_RANKS)
        return NULL;
    if ((size_t)rank >= p->nranks) {
        size_t n = p->nranks ? p->nranks : 64;
        while (n <= (size_t)rank)
            n *= 2;
        struct rankinfo *r = realloc(p->ranks, n * sizeof(*r));
        if (!r) {
            p->err = -ENOMEM;
            return NULL;
        }
        memset(r + p->nranks, 0, (n - p->nranks) * sizeof(*r));
        p->ranks = r;
        p->nranks = n;
    }
    struct rankinfo *ri = &p->ranks[rank];
    if (ri->seen)
        return ri;
    ri->seen = 1;
    ri->aligned = !mrd_timebase_is_global(p->tb) || mrd_timebase_rank_fitted(p->tb, rank);
    ri->origin = ri->aligned ? p->origin : one_int(p->rank_first, rank, 0);
    ri->uuid = track_uuid(rank, 0, 0, 0);
    char name[256], host[160] = "";
    sqlite3_reset(p->host);
    sqlite3_bind_int(p->host, 1, rank);
    if (sqlite3_step(p->host) == SQLITE_ROW && text(p->host, 0))
        snprintf(host, sizeof(host), "%s", text(p->host, 0));
    snprintf(name, sizeof(name), "rank %d%s%s%s%s", rank, host[0] ? " (" : "", host,
             host[0] ? ")" : "", ri->aligned ? "" : " [clock not fitted: own local time]");
    Pftrace__TrackDescriptor td = PFTRACE__TRACK_DESCRIPTOR__INIT;
    Pftrace__ProcessDescriptor pd = PFTRACE__PROCESS_DESCRIPTOR__INIT;
    td.has_uuid = 1;
    td.uuid = ri->uuid;
    td.has_child_ordering = 1;
    td.child_ordering = PFTRACE__TRACK_DESCRIPTOR__CHILD_TRACKS_ORDERING__EXPLICIT;
    pd.has_pid = 1;
    pd.pid = rank + 1;
    pd.process_name = name;
    td.process = &pd;
    describe(p, &td);
    return ri;
}

/* The written time of a rank-local timestamp (global, or the rank's own clock moved to
 * start at the origin when it has no model). */
static uint64_t wtime(struct px *p, const struct rankinfo *ri, int rank, int64_t local, int mapped)
{
    int64_t g = mapped ? local : mrd_timebase_map(p->tb, rank, local);
    int64_t t = g - ri->origin + p->origin;
    return t > 0 ? (uint64_t)t : 0;
}

/* 1 when [s, e] (written times) meets the requested window (always without one). */
static int in_window(struct px *p, uint64_t s, uint64_t e)
{
    if (!p->o->window_to_ns)
        return 1;
    return (int64_t)e - p->origin >= p->o->window_from_ns &&
           (int64_t)s - p->origin <= p->o->window_to_ns;
}

static void track_name(char *b, size_t n, int cls, uint64_t key, int lane)
{
    unsigned hi = (unsigned)(key >> 32), lo = (unsigned)key;
    char l[16] = "";
    if (lane)
        snprintf(l, sizeof(l), " #%d", lane + 1);
    switch (cls) {
    case C_STREAM:
        snprintf(b, n, "GPU %u stream %u%s", hi, lo, l);
        break;
    case C_GRAPH:
        snprintf(b, n, "GPU %u stream %u CUDA graphs%s", hi, lo, l);
        break;
    case C_NCCL:
        snprintf(b, n, "NCCL GPU %" PRIu64 " (host enqueue)%s", key, l);
        break;
    case C_NVTX:
        snprintf(b, n, "NVTX thread %" PRIu64 "%s", key, l);
        break;
    case C_NVTX_SE:
        snprintf(b, n, "NVTX start/end thread %" PRIu64 "%s", key, l);
        break;
    case C_MPI:
        snprintf(b, n, "MPI thread %" PRIu64 "%s", key, l);
        break;
    case C_API:
        snprintf(b, n, "CUDA API thread %" PRIu64 "%s", key, l);
        break;
    case C_WINDOW:
        snprintf(b, n, "capture windows%s", l);
        break;
    case C_STEP:
        snprintf(b, n, "step time (ms)");
        break;
    case C_GPUCLK:
        snprintf(b, n, "GPU %" PRIu64 " timer - host clock (ns, from first sample)", key);
        break;
    default:
        snprintf(b, n, "CUDA synchronization%s", l);
        break;
    }
}

/* Describes lane `lane` of the current group (a new track under the rank's process). */
static void new_lane(struct px *p, struct rankinfo *ri)
{
    struct group *g = &p->g;
    struct lane *l = &g->lane[g->nlanes];
    char name[128];
    l->uuid = track_uuid(g->rank, g->cls, g->key, g->nlanes);
    l->depth = 0;
    track_name(name, sizeof(name), g->cls, g->key, g->nlanes);
    Pftrace__TrackDescriptor td = PFTRACE__TRACK_DESCRIPTOR__INIT;
    Pftrace__CounterDescriptor cd = PFTRACE__COUNTER_DESCRIPTOR__INIT;
    td.has_uuid = 1;
    td.uuid = l->uuid;
    td.has_parent_uuid = 1;
    td.parent_uuid = ri->uuid;
    td.name = name;
    td.has_sibling_order_rank = 1;
    td.sibling_order_rank = g->cls * 1000000 + ri->ntracks++ % 1000000;
    if (g->cls == C_STEP || g->cls == C_GPUCLK) {
        cd.has_unit = g->cls == C_GPUCLK;
        cd.unit = PFTRACE__COUNTER_DESCRIPTOR__UNIT__UNIT_TIME_NS;
        td.counter = &cd;
    }
    describe(p, &td);
    g->nlanes++;
}

static void open_sequence(struct px *p, uint64_t t)
{
    struct group *g = &p->g;
    Pftrace__TracePacket pk = PFTRACE__TRACE_PACKET__INIT;
    Pftrace__TracePacketDefaults d = PFTRACE__TRACE_PACKET_DEFAULTS__INIT;
    Pftrace__TrackEventDefaults ted = PFTRACE__TRACK_EVENT_DEFAULTS__INIT;
    Pftrace__ClockSnapshot cs = PFTRACE__CLOCK_SNAPSHOT__INIT;
    Pftrace__ClockSnapshot__Clock c[2], *cp[2] = {&c[0], &c[1]};
    g->seq = p->next_seq++;
    g->open = 1;
    g->last = t;
    p->gen++;
    p->nseen = 0;
    p->st.sequences++;
    for (int i = 0; i < 2; i++) {
        pftrace__clock_snapshot__clock__init(&c[i]);
        c[i].has_clock_id = c[i].has_timestamp = 1;
        c[i].timestamp = t;
    }
    c[0].clock_id = CLOCK_BOOTTIME;
    c[1].clock_id = CLOCK_INCREMENTAL;
    c[1].has_is_incremental = c[1].is_incremental = 1;
    cs.n_clocks = 2;
    cs.clocks = cp;
    ted.has_track_uuid = 1;
    ted.track_uuid = g->lane[0].uuid;
    d.has_timestamp_clock_id = 1;
    d.timestamp_clock_id = CLOCK_INCREMENTAL;
    d.track_event_defaults = &ted;
    pk.has_timestamp = pk.has_timestamp_clock_id = 1;
    pk.timestamp = t;
    pk.timestamp_clock_id = CLOCK_BOOTTIME;
    pk.has_trusted_packet_sequence_id = 1;
    pk.trusted_packet_sequence_id = g->seq;
    pk.has_sequence_flags = 1;
    pk.sequence_flags = 1; /* SEQ_INCREMENTAL_STATE_CLEARED */
    pk.has_first_packet_on_sequence = pk.first_packet_on_sequence = 1;
    pk.trace_packet_defaults = &d;
    pk.clock_snapshot = &cs;
    emit(p, &pk);
}

/* Starts the packet of one event at written time t on lane `lane` of the current group,
 * opening the group's sequence first if needed (its interning set starts empty). */
static void begin_packet(struct px *p, int type, int lane, uint64_t t)
{
    if (!p->g.open)
        open_sequence(p, t);
    memset(&p->te, 0, sizeof(p->te));
    pftrace__track_event__init(&p->te);
    pftrace__interned_data__init(&p->idata);
    p->te.has_type = 1;
    p->te.type = type;
    if (lane) {
        p->te.has_track_uuid = 1;
        p->te.track_uuid = p->g.lane[lane].uuid;
    }
    p->te.category_iids = p->cats;
    p->te.debug_annotations = p->annp;
    p->te.flow_ids = p->flows;
    p->te.terminating_flow_ids = p->terms;
    p->idata.event_names = p->enp;
    p->idata.event_categories = p->ecp;
    p->idata.debug_annotation_names = p->anp;
    p->idata.debug_annotation_string_values = p->isp;
}

/* Writes the packet begun with begin_packet at written time t. */
static void end_packet(struct px *p, uint64_t t)
{
    struct group *g = &p->g;
    Pftrace__TracePacket pk = PFTRACE__TRACE_PACKET__INIT;
    if (t < g->last)
        t = g->last; /* a clock model's segment boundary may step back a few ns */
    pk.has_timestamp = 1;
    pk.timestamp = t - g->last;
    g->last = t;
    pk.has_trusted_packet_sequence_id = 1;
    pk.trusted_packet_sequence_id = g->seq;
    pk.has_sequence_flags = 1;
    pk.sequence_flags = 2; /* SEQ_NEEDS_INCREMENTAL_STATE */
    pk.track_event = &p->te;
    for (size_t i = 0; i < p->te.n_debug_annotations; i++)
        p->annp[i] = &p->ann[i];
    p->enp[0] = &p->en[0];
    p->ecp[0] = &p->ec[0];
    for (int i = 0; i < MAX_ANN; i++) {
        p->anp[i] = &p->an[i];
        p->isp[i] = &p->is[i];
    }
    if (p->idata.n_event_names || p->idata.n_event_categories ||
        p->idata.n_debug_annotation_names || p->idata.n_debug_annotation_string_values)
        pk.interned_data = &p->idata;
    emit(p, &pk);
}

/* Writes the END of every open slice of the group ending at or before t, earliest first. */
static void drain(struct px *p, uint64_t t)
{
    struct group *g = &p->g;
    for (;;) {
        int best = -1;
        for (int i = 0; i < g->nlanes; i++)
            if (g->lane[i].depth &&
                (best < 0 ||
                 g->lane[i].end[g->lane[i].depth - 1] < g->lane[best].end[g->lane[best].depth - 1]))
                best = i;
        if (best < 0)
            return;
        struct lane *l = &g->lane[best];
        uint64_t e = l->end[l->depth - 1];
        if (e > t)
            return;
        l->depth--;
        begin_packet(p, PFTRACE__TRACK_EVENT__TYPE__TYPE_SLICE_END, best, e);
        end_packet(p, e);
    }
}

/* Moves to the group (rank, cls, key), closing the previous one. */
static struct rankinfo *group(struct px *p, int rank, int cls, uint64_t key)
{
    struct group *g = &p->g;
    struct rankinfo *ri = rank_info(p, rank);
    if (!ri) {
        p->st.skipped++;
        return NULL;
    }
    if (g->nlanes && g->rank == rank && g->cls == cls && g->key == key)
        return ri;
    drain(p, UINT64_MAX);
    memset(g, 0, sizeof(*g));
    g->rank = rank;
    g->cls = cls;
    g->key = key;
    new_lane(p, ri);
    return ri;
}

/* Places a slice [s, *e] of the current group: the first lane where it nests; a new lane;
 * or, every lane busy, the lane ending last, shortened to nest. Returns the lane or -1. */
static int place(struct px *p, struct rankinfo *ri, uint64_t s, uint64_t *e)
{
    struct group *g = &p->g;
    int best = -1;
    drain(p, s);
    for (int i = 0; i < g->nlanes; i++) {
        struct lane *l = &g->lane[i];
        if (l->depth == 0 || (l->depth < MAX_DEPTH && l->end[l->depth - 1] >= *e))
            return i;
        if (l->depth < MAX_DEPTH && (best < 0 || l->end[l->depth - 1] > g->lane[best].end[g->lane[best].depth - 1]))
            best = i;
    }
    if (g->nlanes < MAX_LANES) {
        new_lane(p, ri);
        return g->nlanes - 1;
    }
    if (best < 0)
        return -1;
    *e = g->lane[best].end[g->lane[best].depth - 1];
    p->st.overlapped++;
    return best;
}

/* Starts a slice's BEGIN packet (the caller adds name, args, flows, then calls
 * slice_commit). Returns the lane, or -1 (nothing to write: outside the window, full). */
static int slice_begin(struct px *p, struct rankinfo *ri, uint64_t s, uint64_t *e, int cat)
{
    if (*e < s)
        *e = s;
    if (!in_window(p, s, *e))
        return -1;
    int lane = place(p, ri, s, e);
    if (lane < 0) {
        p->st.skipped++;
        return -1;
    }
    begin_packet(p, PFTRACE__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, lane, s);
    set_cat(p, cat);
    return lane;
}

static void slice_commit(struct px *p, int lane, uint64_t s, uint64_t e)
{
    struct lane *l = &p->g.lane[lane];
    end_packet(p, s);
    l->end[l->depth++] = e;
    p->st.rows++;
}

static uint64_t coll_flow(uint64_t comm, int64_t seq, int64_t func)
{
    return mix(mix(comm) ^ mix((uint64_t)seq * 31 + (uint64_t)func)) | (1ull << 63);
}

static uint64_t link_flow(int rank, int64_t op)
{
    return (mix(((uint64_t)(uint32_t)rank << 40) ^ (uint64_t)op) >> 1) | 1;
}

/* ---- rows ---- */

static void stream_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), kind = sqlite3_column_int(q, 5);
    uint64_t key = ((uint64_t)(uint32_t)sqlite3_column_int(q, 1) << 32) | (uint32_t)col64(q, 2);
    struct rankinfo *ri = group(p, rank, C_STREAM, key);
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 3), 0), e = wtime(p, ri, rank, col64(q, 4), 0);
    int lane = slice_begin(p, ri, s, &e, kind == 0 ? CAT_KERNEL : kind == 1 ? CAT_MEMCPY : CAT_MEMSET);
    if (lane < 0)
        return;
    if (kind == 0) {
        if (sqlite3_column_type(q, 6) != SQLITE_NULL && text(q, 7))
            set_name(p, db_iid(col64(q, 6)), text(q, 7));
        else
            set_name(p, fixed_iid(N_KERNEL), NAMES[N_KERNEL]);
        if (p->o->include_api) /* links the kernel to its launch call; ~2.5 bytes a kernel */
            arg_int(p, A_CORR, col64(q, 8));
        arg_shape(p, A_GRID, q, 9);
        arg_shape(p, A_BLOCK, q, 12);
        if (sqlite3_column_type(q, 15) != SQLITE_NULL) {
            arg_int(p, A_NCCL_OP, col64(q, 15));
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
        set_name(p, fixed_iid(k > 0 && k <= 10 ? k : 0), NAMES[k > 0 && k <= 10 ? k : 0]);
        arg_int(p, A_BYTES, col64(q, 8));
    } else {
        set_name(p, fixed_iid(N_MEMSET), NAMES[N_MEMSET]);
        arg_int(p, A_BYTES, col64(q, 8));
    }
    slice_commit(p, lane, s, e);
}

static void graph_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    uint64_t key = ((uint64_t)(uint32_t)sqlite3_column_int(q, 1) << 32) | (uint32_t)col64(q, 2);
    struct rankinfo *ri = group(p, rank, C_GRAPH, key);
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 3), 0), e = wtime(p, ri, rank, col64(q, 4), 0);
    int lane = slice_begin(p, ri, s, &e, CAT_GRAPH);
    if (lane < 0)
        return;
    set_name(p, fixed_iid(N_GRAPH), NAMES[N_GRAPH]);
    arg_int(p, A_GRAPH_ID, col64(q, 5));
    slice_commit(p, lane, s, e);
}

static void nccl_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), p2p = sqlite3_column_int(q, 18);
    struct rankinfo *ri = group(p, rank, C_NCCL, (uint32_t)sqlite3_column_int(q, 1));
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 0), e = wtime(p, ri, rank, col64(q, 3), 0);
    int lane = slice_begin(p, ri, s, &e, CAT_NCCL);
    if (lane < 0)
        return;
    if (sqlite3_column_type(q, 6) != SQLITE_NULL && text(q, 7))
        set_name(p, db_iid(col64(q, 6)), text(q, 7));
    else
        set_name(p, fixed_iid(N_COLL), NAMES[N_COLL]);
    arg_int(p, A_OP_ID, col64(q, 4));
    if (!p2p)
        arg_int(p, A_SEQ, col64(q, 5));
    arg_uint(p, A_COMM, (uint64_t)col64(q, 19));
    arg_int(p, A_COUNT, col64(q, 8));
    arg_int(p, A_BYTES, col64(q, 9));
    if (sqlite3_column_type(q, 10) != SQLITE_NULL)
        arg_str(p, A_DATATYPE, db_iid(col64(q, 10)), text(q, 11));
    if (sqlite3_column_type(q, 12) != SQLITE_NULL)
        arg_str(p, A_ALGO, db_iid(col64(q, 12)), text(q, 13));
    if (sqlite3_column_type(q, 14) != SQLITE_NULL)
        arg_str(p, A_PROTO, db_iid(col64(q, 14)), text(q, 15));
    arg_int(p, A_CHANNELS, col64(q, 17));
    if (p2p)
        arg_int(p, A_PEER, col64(q, 16));
    else if (col64(q, 20) >= 0)
        arg_int(p, A_ROOT, col64(q, 20));
    if (!p2p && sqlite3_column_type(q, 5) != SQLITE_NULL) {
        p->flows[p->te.n_flow_ids++] = coll_flow((uint64_t)col64(q, 19), col64(q, 5), col64(q, 6));
        p->st.coll_flows++;
    }
    if (sqlite3_column_int(q, 21)) {
        p->flows[p->te.n_flow_ids++] = link_flow(rank, col64(q, 4));
        p->st.link_flows++;
    }
    slice_commit(p, lane, s, e);
}

static void nvtx_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), kind = sqlite3_column_int(q, 4);
    struct rankinfo *ri = group(p, rank, kind == 2 ? C_NVTX_SE : C_NVTX, (uint64_t)col64(q, 1));
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 0), e = wtime(p, ri, rank, col64(q, 3), 0);
    int lane = 0;
    if (kind == 3) { /* a mark: an instant on the thread's first track */
        if (!in_window(p, s, s))
            return;
        drain(p, s);
        begin_packet(p, PFTRACE__TRACK_EVENT__TYPE__TYPE_INSTANT, 0, s);
        set_cat(p, CAT_NVTX);
    } else if ((lane = slice_begin(p, ri, s, &e, CAT_NVTX)) < 0) {
        return;
    }
    if (sqlite3_column_type(q, 5) != SQLITE_NULL && text(q, 6))
        set_name(p, db_iid(col64(q, 5)), text(q, 6));
    else
        set_name(p, fixed_iid(N_UNNAMED), NAMES[N_UNNAMED]);
    if (sqlite3_column_type(q, 7) != SQLITE_NULL)
        arg_str(p, A_DOMAIN, db_iid(col64(q, 7)), text(q, 8));
    if (kind == 3) {
        end_packet(p, s);
        p->st.rows++;
    } else {
        slice_commit(p, lane, s, e);
    }
}

static void mpi_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = group(p, rank, C_MPI, (uint64_t)col64(q, 1));
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 0), e = wtime(p, ri, rank, col64(q, 3), 0);
    int lane = slice_begin(p, ri, s, &e, CAT_MPI);
    if (lane < 0)
        return;
    if (text(q, 5))
        set_name(p, db_iid(col64(q, 4)), text(q, 5));
    else
        set_name(p, fixed_iid(N_MPI), NAMES[N_MPI]);
    arg_int(p, A_BYTES, col64(q, 6));
    arg_int(p, A_PEER, col64(q, 7));
    arg_int(p, A_TAG, col64(q, 8));
    slice_commit(p, lane, s, e);
}

static void sync_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = group(p, rank, C_SYNC, 0);
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 0), e = wtime(p, ri, rank, col64(q, 3), 0);
    int lane = slice_begin(p, ri, s, &e, CAT_SYNC);
    if (lane < 0)
        return;
    set_name(p, fixed_iid(N_SYNC), NAMES[N_SYNC]);
    arg_int(p, A_TYPE, col64(q, 4));
    arg_int(p, A_STREAM, col64(q, 5));
    slice_commit(p, lane, s, e);
}

static void api_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = group(p, rank, C_API, (uint64_t)col64(q, 1));
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 0), e = wtime(p, ri, rank, col64(q, 3), 0);
    int lane = slice_begin(p, ri, s, &e, CAT_API);
    if (lane < 0)
        return;
    if (text(q, 5))
        set_name(p, db_iid(col64(q, 4)), text(q, 5));
    else
        set_name(p, fixed_iid(N_API), NAMES[N_API]);
    arg_int(p, A_CBID, col64(q, 6));
    arg_int(p, A_CORR, col64(q, 7));
    slice_commit(p, lane, s, e);
}

static void window_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    struct rankinfo *ri = group(p, rank, C_WINDOW, 0);
    if (!ri)
        return;
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 1), e = wtime(p, ri, rank, col64(q, 3), 1);
    int lane = slice_begin(p, ri, s, &e, CAT_WINDOW);
    if (lane < 0)
        return;
    char name[96];
    snprintf(name, sizeof(name), "window %" PRId64 "-%" PRId64 " %s", col64(q, 4), col64(q, 5),
             text(q, 6) ? text(q, 6) : "");
    p->te.name = name; /* a few per rank: not interned */
    arg_int(p, A_FIRST, col64(q, 4));
    arg_int(p, A_LAST, col64(q, 5));
    arg_str(p, A_REASON, 0, text(q, 6));
    arg_int(p, A_ATTACH, col64(q, 7));
    if (sqlite3_column_type(q, 8) != SQLITE_NULL)
        arg_int(p, A_DETACH, col64(q, 8));
    arg_int(p, A_FLUSH, col64(q, 9));
    arg_int(p, A_KERNELS, col64(q, 10));
    slice_commit(p, lane, s, e);
}

static void counter(struct px *p, uint64_t t, double v)
{
    if (!in_window(p, t, t))
        return;
    begin_packet(p, PFTRACE__TRACK_EVENT__TYPE__TYPE_COUNTER, 0, t);
    p->te.has_double_counter_value = 1;
    p->te.double_counter_value = v;
    end_packet(p, t);
    p->st.rows++;
}

/* Step time: one sample per top-level step range, at its start, of its length in ms. */
static void step_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    if (!mrd_step_name_match(text(q, 4), NULL))
        return;
    int fresh = !(p->g.nlanes && p->g.rank == rank && p->g.cls == C_STEP);
    struct rankinfo *ri = group(p, rank, C_STEP, 0);
    if (!ri)
        return;
    if (!fresh && col64(q, 2) < p->step_end)
        return; /* nested in the previous step: not a step of its own */
    p->step_end = col64(q, 3);
    uint64_t s = wtime(p, ri, rank, col64(q, 2), 0), e = wtime(p, ri, rank, col64(q, 3), 0);
    counter(p, s, e > s ? (double)(e - s) / 1e6 : 0);
}

static void gpuclk_row(struct px *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    int fresh = !(p->g.nlanes && p->g.rank == rank && p->g.cls == C_GPUCLK &&
                  p->g.key == (uint32_t)sqlite3_column_int(q, 1));
    struct rankinfo *ri = group(p, rank, C_GPUCLK, (uint32_t)sqlite3_column_int(q, 1));
    if (!ri)
        return;
    int64_t off = col64(q, 3) - col64(q, 2);
    if (fresh)
        p->gpuclk_first = off;
    counter(p, wtime(p, ri, rank, col64(q, 2), 0), (double)(off - p->gpuclk_first));
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
    drain(p, UINT64_MAX);
    memset(&p->g, 0, sizeof(p->g));
    if (p->err)
        return p->err;
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -MRD_ERR_SQLITE;
}

static int setup(struct px *p)
{
    int rc;
    p->in = malloc(OUTBUF);
    p->out = malloc(OUTBUF);
    p->seen = calloc(SEEN_SLOTS, sizeof(*p->seen));
    p->seen_gen = calloc(SEEN_SLOTS, sizeof(*p->seen_gen));
    p->shapes = calloc(SHAPE_SLOTS, sizeof(*p->shapes));
    if (!p->in || !p->out || !p->seen || !p->seen_gen || !p->shapes)
        return -ENOMEM;
    if (deflateInit2(&p->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    p->zinit = 1;
    p->sink.append = sink_append;
    pftrace__event_name__init(&p->en[0]);
    pftrace__event_category__init(&p->ec[0]);
    p->next_seq = 2; /* 1: the track descriptors */
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
    deflate_out(p, Z_FINISH);
    if (p->err || fflush(f) != 0 || ferror(f)) {
        rc = -EIO;
        goto fail;
    }
    if (stats)
        *stats = p->st;
fail:
    if (p->zinit)
        deflateEnd(&p->z);
    sqlite3_finalize(p->links);
    sqlite3_finalize(p->host);
    sqlite3_finalize(p->rank_first);
    mrd_timebase_destroy(p->tb);
    free(p->ranks);
    free(p->in);
    free(p->out);
    free(p->seen);
    free(p->seen_gen);
    free(p->shapes);
    free(p);
    return rc;
}
