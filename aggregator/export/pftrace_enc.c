/* The encoder of the native Perfetto trace: packet sequences, lanes, interning, gzip.
 *
 * Where it sits: under pftrace.c, which reads the database (all the SQL) and calls in here
 * once per row; this file knows Perfetto's format and nothing of the tables. It builds
 * each TracePacket as a protobuf-c message of our subset (pftrace/meridian_pftrace.proto),
 * frames it as field 1 of Trace and deflates it into the caller's FILE as it goes.
 * The encoding (sequences, incremental clock, lanes, interning) is described at the top
 * of pftrace.c.
 *
 * Workload: two packets per slice, a few hundred thousand to tens of millions; memory is
 * fixed: one group's lanes (MAX_LANES x MAX_DEPTH), the per-sequence interning set
 * (SEEN_SLOTS; full: strings inline), the launch-shape table (SHAPE_SLOTS; full: inline),
 * 2 x OUTBUF of buffers, and the rank table (MRD_PFTRACE_MAX_RANKS at most).
 */
#include "pftrace_enc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"

static const char *const CATEGORIES[] = {"",     "kernel", "memcpy", "memset", "graph", "nccl",
                                         "nvtx", "mpi",    "sync",   "api",    "window"};
static const char *const ARG_NAMES[] = {
    "",          "correlation", "grid",      "block",     "nccl_op",  "bytes",
    "copy_kind", "graph_id",    "op_id",     "seq",       "comm",     "count",
    "datatype",  "algo",        "proto",     "channels",  "peer",     "root",
    "domain",    "tag",         "type",      "stream",    "cbid",     "first_step",
    "last_step", "reason",      "attach_ns", "detach_ns", "flush_ns", "kernels"};
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

/* Writes one packet as Trace field 1. The packet is packed into pk_buf first, grown to its
 * size (a packet over PACKET_MAX, a name of megabytes, is dropped and counted). */
static void emit(struct px *p, const Pftrace__TracePacket *pk)
{
    unsigned char hdr[11];
    size_t n = pftrace__trace_packet__get_packed_size(pk), h = 0;
    if (n > p->pk_cap) {
        size_t cap = p->pk_cap ? p->pk_cap : 4096;
        while (cap < n)
            cap *= 2;
        unsigned char *b = n <= PACKET_MAX ? realloc(p->pk_buf, cap) : NULL;
        if (!b) {
            p->st.skipped++;
            return;
        }
        p->pk_buf = b;
        p->pk_cap = cap;
    }
    hdr[h++] = 0x0a;
    do {
        hdr[h++] = (unsigned char)((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
        n >>= 7;
    } while (n);
    put(p, hdr, h);
    put(p, p->pk_buf, pftrace__trace_packet__pack(pk, p->pk_buf));
    p->st.packets++;
}

uint64_t mrd__pf_mix(uint64_t x)
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
static int seen_cap(struct px *p, uint64_t key, uint32_t cap)
{
    uint64_t h = mrd__pf_mix(key);
    for (uint32_t i = 0; i < SEEN_SLOTS; i++) {
        uint32_t s = (uint32_t)(h + i) & (SEEN_SLOTS - 1);
        if (p->seen_gen[s] != p->gen) {
            if (p->nseen >= cap)
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

/* Names, categories, argument names and the database's strings may fill half the set;
 * launch shapes (as many as kernels in a workload that sizes grids by its data) a quarter,
 * so that they never crowd the names out. */
static int seen(struct px *p, uint64_t key)
{
    return seen_cap(p, key, SEEN_SLOTS / 2);
}

/* The event's name: by iid, interned in this packet on first use. */
void mrd__pf_name(struct px *p, uint64_t iid, const char *name)
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

static void set_cat(struct px *p, int cat)
{
    if (seen(p, (1ull << 56) | (uint64_t)cat) != 1) {
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

void mrd__pf_arg_int(struct px *p, int name, int64_t v)
{
    Pftrace__DebugAnnotation *a = arg(p, name);
    if (a) {
        a->has_int_value = 1;
        a->int_value = v;
    }
}

void mrd__pf_arg_uint(struct px *p, int name, uint64_t v)
{
    Pftrace__DebugAnnotation *a = arg(p, name);
    if (a) {
        a->has_uint_value = 1;
        a->uint_value = v;
    }
}

/* A string argument whose value repeats: interned by iid (0: written inline). */
static void arg_str_cap(struct px *p, int name, uint64_t iid, const char *v, uint32_t cap)
{
    Pftrace__DebugAnnotation *a = arg(p, name);
    if (!a)
        return;
    int s = iid ? seen_cap(p, (4ull << 56) | iid, cap) : -1;
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

void mrd__pf_arg_str(struct px *p, int name, uint64_t iid, const char *v)
{
    arg_str_cap(p, name, iid, v, SEEN_SLOTS / 2);
}

/* "x,y,z" of a launch shape, interned through a table of distinct shapes (odd iids). */
void mrd__pf_arg_shape(struct px *p, int name, uint32_t x, uint32_t y, uint32_t z)
{
    char *buf = p->shape_txt[name == A_GRID ? 0 : 1]; /* lives until the packet is out */
    uint64_t iid = 0;
    snprintf(buf, sizeof(p->shape_txt[0]), "%u,%u,%u", x, y, z);
    uint64_t h = mrd__pf_mix(((uint64_t)x << 32 | y) ^ mrd__pf_mix(z));
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
            /* interned from its second use on the sequence: a shape used once (a
             * workload that sizes grids by its data) costs less inline */
            if (seen_cap(p, (5ull << 56) | iid, SEEN_SLOTS / 4) != 1)
                iid = 0;
            break;
        }
    }
    arg_str_cap(p, name, iid, buf, SEEN_SLOTS / 4);
}

/* ---- ranks and tracks ---- */

static uint64_t track_uuid(int rank, int cls, uint64_t key, int lane)
{
    return mrd__pf_mix(
               mrd__pf_mix(((uint64_t)(uint32_t)rank << 8 | (uint64_t)cls) ^ mrd__pf_mix(key)) +
               (uint64_t)lane) |
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
    if (sqlite3_step(p->host) == SQLITE_ROW && sqlite3_column_text(p->host, 0))
        snprintf(host, sizeof(host), "%s", (const char *)sqlite3_column_text(p->host, 0));
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
uint64_t mrd__pf_wtime(struct px *p, const struct rankinfo *ri, int rank, int64_t local, int mapped)
{
    int64_t g = mapped ? local : mrd_timebase_map(p->tb, rank, local);
    int64_t t = g - ri->origin + p->origin;
    return t > 0 ? (uint64_t)t : 0;
}

/* 1 when [s, e] (written times) meets the requested window (always without one); the
 * row's times widen the run's span in the stats either way. */
int mrd__pf_in_window(struct px *p, uint64_t s, uint64_t e)
{
    int64_t a = (int64_t)s - p->origin, b = (int64_t)e - p->origin;
    if (!p->st.spanned || a < p->st.first_ns)
        p->st.first_ns = a;
    if (!p->st.spanned || b > p->st.last_ns)
        p->st.last_ns = b;
    p->st.spanned = 1;
    if (!p->o->window_to_ns)
        return 1;
    return (int64_t)e - p->origin >= p->o->window_from_ns &&
           (int64_t)s - p->origin <= p->o->window_to_ns;
}

/* The tracks keyed by a host thread: "<what> thread <tid>" */
static const char *const thread_track_what[] = {
    [C_NVTX] = "NVTX", [C_NVTX_SE] = "NVTX start/end", [C_MPI] = "MPI", [C_API] = "CUDA API"};

static void track_name(char *b, size_t n, int cls, uint64_t key, int lane)
{
    unsigned hi = (unsigned)(key >> 32), lo = (unsigned)key;
    char l[16] = "";
    if (lane)
        snprintf(l, sizeof(l), " #%d", lane + 1);
    switch (cls) {
    case C_STREAM:
    case C_GRAPH:
        snprintf(b, n, "GPU %u stream %u%s%s", hi, lo, cls == C_GRAPH ? " CUDA graphs" : "", l);
        break;
    case C_NCCL:
        snprintf(b, n, "NCCL GPU %" PRIu64 " (host enqueue)%s", key, l);
        break;
    case C_NVTX:
    case C_NVTX_SE:
    case C_MPI:
    case C_API:
        snprintf(b, n, "%s thread %" PRIu64 "%s", thread_track_what[cls], key, l);
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
            if (g->lane[i].depth && (best < 0 || g->lane[i].end[g->lane[i].depth - 1] <
                                                     g->lane[best].end[g->lane[best].depth - 1]))
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
struct rankinfo *mrd__pf_group(struct px *p, int rank, int cls, uint64_t key)
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
        if (l->depth < MAX_DEPTH &&
            (best < 0 || l->end[l->depth - 1] > g->lane[best].end[g->lane[best].depth - 1]))
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
int mrd__pf_slice_begin(struct px *p, struct rankinfo *ri, uint64_t s, uint64_t *e, int cat)
{
    if (*e < s)
        *e = s;
    if (!mrd__pf_in_window(p, s, *e))
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

void mrd__pf_slice_commit(struct px *p, int lane, uint64_t s, uint64_t e)
{
    struct lane *l = &p->g.lane[lane];
    end_packet(p, s);
    l->end[l->depth++] = e;
    p->st.rows++;
}

void mrd__pf_counter(struct px *p, uint64_t t, double v)
{
    if (!mrd__pf_in_window(p, t, t))
        return;
    begin_packet(p, PFTRACE__TRACK_EVENT__TYPE__TYPE_COUNTER, 0, t);
    p->te.has_double_counter_value = 1;
    p->te.double_counter_value = v;
    end_packet(p, t);
    p->st.rows++;
}

/* An instant (NVTX mark) at t on the group's first track: starts its packet (the caller adds
 * name and args, then mrd__pf_instant_commit). Returns 0, or -1 outside the window. */
int mrd__pf_instant_begin(struct px *p, uint64_t t, int cat)
{
    if (!mrd__pf_in_window(p, t, t))
        return -1;
    drain(p, t);
    begin_packet(p, PFTRACE__TRACK_EVENT__TYPE__TYPE_INSTANT, 0, t);
    set_cat(p, cat);
    return 0;
}

void mrd__pf_instant_commit(struct px *p, uint64_t t)
{
    end_packet(p, t);
    p->st.rows++;
}

void mrd__pf_close_group(struct px *p)
{
    drain(p, UINT64_MAX);
    memset(&p->g, 0, sizeof(p->g));
}

int mrd__pf_init(struct px *p)
{
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
    pftrace__event_name__init(&p->en[0]);
    pftrace__event_category__init(&p->ec[0]);
    p->next_seq = 2; /* 1: the track descriptors */
    return 0;
}

int mrd__pf_finish(struct px *p)
{
    deflate_out(p, Z_FINISH);
    return p->err;
}

void mrd__pf_release(struct px *p)
{
    if (p->zinit)
        deflateEnd(&p->z);
    MRD_ARRAY_FREE_ALL(p->ranks, p->in, p->out, p->seen, p->seen_gen, p->shapes, p->pk_buf);
}
