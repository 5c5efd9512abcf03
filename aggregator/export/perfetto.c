/* Perfetto / Chrome trace export: the whole run as trace event JSON.
 *
 * Where it sits: export stage; streams the event tables of the database once each (no
 * ordering needed: trace viewers sort), maps every timestamp into the global timebase
 * (aggregator/clock/timebase.h) and writes one JSON object per row.
 *
 * Layout: pid = rank + 1 (named "rank N (host)"; pid 0 is avoided because some importers
 * treat it as the idle process), one thread per (GPU, stream) for kernels, memcpy and
 * memset (serialised by the stream, so they never overlap), one per (GPU, stream) for graph
 * launches, "NCCL ops" threads per GPU (host enqueue interval of each collective or p2p),
 * one NVTX thread per host thread (push/pop ranges, which nest, and marks), "NVTX
 * start/end" threads per host thread, one MPI thread per host thread, "CUDA
 * synchronization" threads. Slices of one thread must nest (Perfetto drops the others),
 * so the classes that may overlap are spread over lanes (see struct lanes). Flow arrows (ph s/f, id
 * per op) and args link each NCCL op to its kernel. Times: microseconds with exactly three
 * decimals, printed from integers, after the run's time origin (mrd_timebase_origin; a rank
 * without a clock model in a global trace: after its own first kernel).
 *
 * Workload: hundreds of millions of rows stream through; memory is the track table only
 * (open addressing, MRD_EXPORT_MAX_TRACKS entries; beyond, a process's further rows go to
 * its "other" track and are counted in stats.folded).
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jsonw.h"
#include "report_int.h"

enum track_class {
    TR_PROCESS = 0,
    TR_STREAM,
    TR_NCCL,
    TR_NVTX,
    TR_NVTX_SE,
    TR_MPI,
    TR_SYNC,
    TR_API,
    TR_GRAPH
};

/* The tracks keyed by one host thread: "<what> (thread <tid>)" */
static const char *const thread_track_what[] = {
    [TR_NVTX] = "NVTX", [TR_MPI] = "MPI", [TR_API] = "CUDA API"};

/* Lanes: slices of one track must nest perfectly in trace viewers, but NCCL enqueue
 * intervals (grouped collectives), host synchronizations of several threads and NVTX
 * start/end ranges may overlap. Their rows are read in start order per (rank, key) and
 * each goes to the first lane free at its start (lane = one more thread track). Beyond
 * MAX_LANES the earliest-ending lane is reused and the overlap counted. */
#define MAX_LANES 32

struct lanes {
    int rank, n;
    uint64_t key;
    int64_t end[MAX_LANES];
};

struct track {
    int used, rank, cls, tid;
    uint64_t id;
    int next_tid;   /* TR_PROCESS entries: next free tid of the process */
    int64_t origin; /* TR_PROCESS entries: the origin subtracted from this rank's times */
};

struct pf {
    FILE *f;
    sqlite3 *db;
    struct mrd_timebase *tb;
    const struct mrd_perfetto_options *o;
    struct mrd_perfetto_stats st;
    sqlite3_stmt *links; /* the NCCL ops a kernel launched, and each op's first kernel */
    int select_none;     /* a step range that holds no step: nothing is selected */
    struct lanes lanes;  /* of the query being exported */
    uint64_t overlapped; /* slices placed over another in a full set of lanes */
    struct track *tracks;
    size_t nslots, ntracks;
    int64_t origin;
    int64_t window_from_ns, window_to_ns; /* the options' window, or the steps' */
    int first;
    struct mrd__export_rows rows; /* progress, when the caller asked for it */
};

static int64_t col64(sqlite3_stmt *q, int col)
{
    return (int64_t)sqlite3_column_int64(q, col);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The lane (0..MAX_LANES-1) for a slice [start, end) of (rank, key); rows must come in
 * start order per (rank, key). */
static uint64_t lane_for(struct pf *p, int rank, uint64_t key, int64_t start, int64_t end)
{
    struct lanes *l = &p->lanes;
    int best = 0;
    if (l->n == 0 || l->rank != rank || l->key != key) {
        l->rank = rank;
        l->key = key;
        l->n = 0;
    }
    for (int i = 0; i < l->n; i++) {
        if (l->end[i] <= start) {
            l->end[i] = end;
            return (uint64_t)i;
        }
        if (l->end[i] < l->end[best])
            best = i;
    }
    if (l->n < MAX_LANES) {
        l->end[l->n] = end;
        return (uint64_t)l->n++;
    }
    p->overlapped++;
    if (end > l->end[best])
        l->end[best] = end;
    return (uint64_t)best;
}

/* Track ids of laned classes: key * 64 + lane. */
static uint64_t laned(uint64_t key, uint64_t lane)
{
    return key * 64 + lane;
}

static void begin_event(struct pf *p)
{
    fputs(p->first ? "\n" : ",\n", p->f);
    p->first = 0;
    p->st.events++;
}

static struct track *lookup(struct pf *p, int rank, int cls, uint64_t id, int create)
{
    uint64_t h = mix(mix((uint64_t)(uint32_t)rank * 16u + (uint64_t)cls) ^ id);
    for (size_t i = 0; i < p->nslots; i++) {
        struct track *t = &p->tracks[(h + i) & (p->nslots - 1)];
        if (!t->used) {
            if (!create || p->ntracks >= MRD_EXPORT_MAX_TRACKS)
                return NULL;
            t->used = 1;
            t->rank = rank;
            t->cls = cls;
            t->id = id;
            p->ntracks++;
            return t;
        }
        if (t->rank == rank && t->cls == cls && t->id == id)
            return t;
    }
    return NULL;
}

static void meta(struct pf *p, int rank, int tid, const char *what, const char *name, int sort)
{
    begin_event(p);
    fprintf(p->f,
            "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":", rank + 1,
            tid, what);
    mrd__json_str(p->f, name);
    fputs("}}", p->f);
    begin_event(p);
    fprintf(p->f,
            "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s_sort_index\",\"args\":"
            "{\"sort_index\":%d}}",
            rank + 1, tid, strncmp(what, "process", 7) == 0 ? "process" : "thread", sort);
}

/* The origin for a rank: the run's anchor when the rank is aligned, else its own first
 * kernel (its times cannot be placed against other ranks). */
static int64_t rank_origin(struct pf *p, int rank, int *aligned)
{
    *aligned = !mrd_timebase_is_global(p->tb) || mrd_timebase_rank_fitted(p->tb, rank);
    if (*aligned)
        return p->origin;
    int64_t o = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db, mrd_db_sql_first_kernel_of_rank, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int(st, 1, rank);
        if (sqlite3_step(st) == SQLITE_ROW)
            o = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return o;
}

static struct track *process(struct pf *p, int rank)
{
    struct track *t = lookup(p, rank, TR_PROCESS, 0, 0);
    if (t)
        return t;
    t = lookup(p, rank, TR_PROCESS, 0, 1);
    if (!t)
        return NULL;
    char name[256], host[160] = "";
    int aligned;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db, mrd_db_sql_rank_host, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int(st, 1, rank);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            snprintf(host, sizeof(host), "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    t->origin = rank_origin(p, rank, &aligned);
    t->next_tid = 1;
    snprintf(name, sizeof(name), "rank %d%s%s%s%s", rank, host[0] ? " (" : "", host,
             host[0] ? ")" : "", aligned ? "" : " [clock not fitted: own local time]");
    meta(p, rank, 0, "process_name", name, rank);
    return t;
}

/* The tid of a track, created (with its name) on first use; 0 = the process's "other"
 * track once the table is full. */
static int track_tid(struct pf *p, int rank, int cls, uint64_t id, int64_t *origin)
{
    struct track *proc = process(p, rank);
    *origin = proc ? proc->origin : p->origin;
    struct track *t = lookup(p, rank, cls, id, 0);
    if (t)
        return t->tid;
    t = proc ? lookup(p, rank, cls, id, 1) : NULL;
    if (!t) {
        p->st.folded++;
        return 0;
    }
    t->tid = proc->next_tid++;
    p->st.tracks++;
    char name[96], lane[16] = "";
    uint32_t lo = (uint32_t)id, hi = (uint32_t)(id >> 32);
    if ((cls == TR_NCCL || cls == TR_NVTX_SE || cls == TR_SYNC) && id % 64)
        snprintf(lane, sizeof(lane), " #%u", (unsigned)(id % 64) + 1);
    switch (cls) {
    case TR_STREAM:
    case TR_GRAPH:
        snprintf(name, sizeof(name), "GPU %u stream %u%s", hi, lo,
                 cls == TR_GRAPH ? " CUDA graphs" : "");
        break;
    case TR_NCCL:
        snprintf(name, sizeof(name), "NCCL ops (GPU %" PRIu64 ", host enqueue)%s", id / 64, lane);
        break;
    case TR_NVTX_SE:
        snprintf(name, sizeof(name), "NVTX start/end (thread %" PRIu64 ")%s", id / 64, lane);
        break;
    case TR_NVTX:
    case TR_MPI:
    case TR_API:
        snprintf(name, sizeof(name), "%s (thread %" PRIu64 ")", thread_track_what[cls], id);
        break;
    default:
        snprintf(name, sizeof(name), "CUDA synchronization%s", lane);
        break;
    }
    meta(p, rank, t->tid, "thread_name", name, cls * 100000 + t->tid);
    return t->tid;
}

/* 1 when [gs, ge] (global) meets the requested window (always without one); counts the
 * row into the run's span (stats first_ns, last_ns) and, when selected, into selected. */
static int in_window(struct pf *p, int rank, int64_t gs, int64_t ge)
{
    struct track *proc = process(p, rank);
    int64_t origin = proc ? proc->origin : p->origin;
    if (!p->st.rows || gs - origin < p->st.first_ns)
        p->st.first_ns = gs - origin;
    if (!p->st.rows || ge - origin > p->st.last_ns)
        p->st.last_ns = ge - origin;
    p->st.rows++;
    if (p->select_none)
        return 0;
    if (p->window_to_ns && !(ge - origin >= p->window_from_ns && gs - origin <= p->window_to_ns))
        return 0;
    p->st.selected++;
    return 1;
}

/* Starts an event on rank's track (cls, track) over [gs, ge] (global): writes the
 * separator and returns the track's tid, *origin the rank's time origin; -1 (nothing
 * written) when the event is outside the window. */
static int event_begin(struct pf *p, int rank, int cls, uint64_t track, int64_t gs, int64_t ge,
                       int64_t *origin)
{
    if (!in_window(p, rank, gs, ge))
        return -1;
    int tid = track_tid(p, rank, cls, track, origin);
    begin_event(p);
    return tid;
}

/* Writes the common head of an X (complete) event and returns 1; the caller adds args and
 * "}". Returns 0 (nothing written) for a slice outside the window. */
static int slice(struct pf *p, int rank, int cls, uint64_t track, const char *cat, const char *name,
                 int64_t start, int64_t end)
{
    int64_t origin;
    int64_t gs = mrd_timebase_map(p->tb, rank, start), ge = mrd_timebase_map(p->tb, rank, end);
    int tid = event_begin(p, rank, cls, track, gs, ge, &origin);
    if (tid < 0)
        return 0;
    fprintf(p->f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"cat\":\"%s\",\"name\":", rank + 1, tid,
            cat);
    mrd__json_str(p->f, name);
    fputs(",\"ts\":", p->f);
    mrd__json_us(p->f, gs - origin);
    fputs(",\"dur\":", p->f);
    mrd__json_us(p->f, ge > gs ? ge - gs : 0);
    return 1;
}

static uint64_t flow_id(int rank, int64_t op_id)
{
    return mix(((uint64_t)(uint32_t)rank << 40) ^ (uint64_t)op_id) & ((1ull << 53) - 1);
}

static void flow(struct pf *p, int rank, int cls, uint64_t track, int64_t t, int64_t op_id,
                 int start)
{
    int64_t origin, g = mrd_timebase_map(p->tb, rank, t);
    int tid = event_begin(p, rank, cls, track, g, g, &origin);
    if (tid < 0)
        return;
    fprintf(p->f,
            "{\"ph\":\"%s\",%s\"pid\":%d,\"tid\":%d,\"cat\":\"nccl\",\"name\":\"nccl launch\","
            "\"id\":%" PRIu64 ",\"ts\":",
            start ? "s" : "f", start ? "" : "\"bp\":\"e\",", rank + 1, tid, flow_id(rank, op_id));
    mrd__json_us(p->f, g - origin);
    fputc('}', p->f);
    if (start)
        p->st.flows++;
}

static const char *copy_kind(int k)
{
    static const char *const names[] = {"memcpy",      "memcpy HtoD", "memcpy DtoH", "memcpy HtoA",
                                        "memcpy AtoH", "memcpy AtoA", "memcpy AtoD", "memcpy DtoA",
                                        "memcpy DtoD", "memcpy HtoH", "memcpy PtoP"};
    return k > 0 && k <= 10 ? names[k] : names[0];
}

static uint64_t stream_key(sqlite3_stmt *q, int dev_col, int stream_col)
{
    return ((uint64_t)(uint32_t)sqlite3_column_int(q, dev_col) << 32) |
           (uint32_t)col64(q, stream_col);
}

static const char *text(sqlite3_stmt *q, int col, const char *dflt)
{
    const unsigned char *t = sqlite3_column_text(q, col);
    return t ? (const char *)t : dflt;
}

static int run_query(struct pf *p, const char *table, const char *sql,
                     void (*row)(struct pf *, sqlite3_stmt *))
{
    sqlite3_stmt *q = NULL;
    int rc;
    uint64_t n = 0;
    mrd__export_rows_pass(&p->rows);
    if (table && mrd_db_has_table(p->db, table) != 1)
        return 0;
    if (sqlite3_prepare_v2(p->db, sql, -1, &q, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    p->lanes.n = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        row(p, q);
        if (++n % MRD__EXPORT_ROWS_EVERY == 0)
            mrd__export_rows_tick(&p->rows, n);
    }
    sqlite3_finalize(q);
    mrd__export_rows_pass_end(&p->rows);
    if (rc != SQLITE_DONE)
        return -MRD_ERR_SQLITE;
    return ferror(p->f) ? -EIO : 0;
}

static void kernel_row(struct pf *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    if (!mrd_db_kernel_valid(col64(q, 3), col64(q, 4)))
        return; /* lost by CUPTI's device buffer, or corrupt */
    if (!slice(p, rank, TR_STREAM, stream_key(q, 1, 2), "kernel",
               mrd_analyze_demangle_cached(text(q, 6, "kernel")), col64(q, 3), col64(q, 4)))
        return;
    fprintf(
        p->f, ",\"args\":{\"correlation\":%" PRId64 ",\"grid\":\"%d,%d,%d\",\"block\":\"%d,%d,%d\"",
        col64(q, 5), sqlite3_column_int(q, 7), sqlite3_column_int(q, 8), sqlite3_column_int(q, 9),
        sqlite3_column_int(q, 10), sqlite3_column_int(q, 11), sqlite3_column_int(q, 12));
    if (sqlite3_column_type(q, 13) != SQLITE_NULL)
        fprintf(p->f, ",\"nccl_op\":%" PRId64, col64(q, 13));
    fputs("}}", p->f);
    if (sqlite3_column_type(q, 13) == SQLITE_NULL)
        return;
    /* the flow arrow of each op ends at its first kernel (one primary-key probe) */
    sqlite3_reset(p->links);
    sqlite3_bind_int(p->links, 1, rank);
    sqlite3_bind_int64(p->links, 2, col64(q, 5));
    while (sqlite3_step(p->links) == SQLITE_ROW)
        if (col64(p->links, 1) == col64(q, 3))
            flow(p, rank, TR_STREAM, stream_key(q, 1, 2), col64(q, 3), col64(p->links, 0), 0);
}

static void memcpy_row(struct pf *p, sqlite3_stmt *q)
{
    if (!slice(p, sqlite3_column_int(q, 0), TR_STREAM, stream_key(q, 1, 2), "memcpy",
               copy_kind(sqlite3_column_int(q, 6)), col64(q, 3), col64(q, 4)))
        return;
    fprintf(p->f, ",\"args\":{\"bytes\":%" PRId64 ",\"copy_kind\":%d}}", col64(q, 5),
            sqlite3_column_int(q, 6));
}

static void memset_row(struct pf *p, sqlite3_stmt *q)
{
    if (!slice(p, sqlite3_column_int(q, 0), TR_STREAM, stream_key(q, 1, 2), "memset", "memset",
               col64(q, 3), col64(q, 4)))
        return;
    fprintf(p->f, ",\"args\":{\"bytes\":%" PRId64 "}}", col64(q, 5));
}

static void graph_row(struct pf *p, sqlite3_stmt *q)
{
    if (!slice(p, sqlite3_column_int(q, 0), TR_GRAPH, stream_key(q, 1, 2), "graph", "CUDA graph",
               col64(q, 3), col64(q, 4)))
        return;
    fprintf(p->f, ",\"args\":{\"graph_id\":%" PRId64 "}}", col64(q, 5));
}

static void nccl_row(struct pf *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    int64_t op = col64(q, 1), start = col64(q, 2);
    char name[96];
    int p2p = sqlite3_column_int(q, 13);
    uint64_t dev =
        laned((uint32_t)sqlite3_column_int(q, 14),
              lane_for(p, rank, (uint32_t)sqlite3_column_int(q, 14), start, col64(q, 3)));
    if (p2p)
        snprintf(name, sizeof(name), "%s peer %d", text(q, 5, "p2p"), sqlite3_column_int(q, 11));
    else
        snprintf(name, sizeof(name), "%s", text(q, 5, "collective")); /* seq: in args */
    if (!slice(p, rank, TR_NCCL, dev, "nccl", name, start, col64(q, 3)))
        return;
    fprintf(p->f, ",\"args\":{\"op_id\":%" PRId64 ",\"comm\":\"%016" PRIx64 "\"", op,
            (uint64_t)col64(q, 15));
    if (!p2p)
        fprintf(p->f, ",\"seq\":%" PRId64, col64(q, 4));
    fprintf(p->f, ",\"count\":%" PRId64 ",\"bytes\":%" PRId64 ",\"datatype\":", col64(q, 6),
            col64(q, 7));
    mrd__json_str(p->f, text(q, 8, ""));
    fputs(",\"algo\":", p->f);
    mrd__json_str(p->f, text(q, 9, ""));
    fputs(",\"proto\":", p->f);
    mrd__json_str(p->f, text(q, 10, ""));
    fprintf(p->f, ",\"channels\":%d,\"root\":%d", sqlite3_column_int(q, 12),
            sqlite3_column_int(q, 16));
    if (sqlite3_column_type(q, 17) != SQLITE_NULL) {
        int64_t origin;
        track_tid(p, rank, TR_NCCL, dev, &origin);
        fputs(",\"kernel_start_us\":", p->f);
        mrd__json_us(p->f, mrd_timebase_map(p->tb, rank, col64(q, 17)) - origin);
        fputs(",\"kernel_end_us\":", p->f);
        mrd__json_us(p->f, mrd_timebase_map(p->tb, rank, col64(q, 18)) - origin);
    }
    fputs("}}", p->f);
    if (sqlite3_column_type(q, 17) != SQLITE_NULL)
        flow(p, rank, TR_NCCL, dev, start, op, 1);
}

static void nvtx_row(struct pf *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0), kind = sqlite3_column_int(q, 4);
    uint64_t thread = (uint64_t)col64(q, 1);
    const char *name = text(q, 5, "(unnamed)");
    if (kind == 3) { /* mark: an instant event */
        int64_t origin, g = mrd_timebase_map(p->tb, rank, col64(q, 2));
        int tid = event_begin(p, rank, TR_NVTX, thread, g, g, &origin);
        if (tid < 0)
            return;
        fprintf(p->f,
                "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,\"cat\":\"nvtx\","
                "\"name\":",
                rank + 1, tid);
        mrd__json_str(p->f, name);
        fputs(",\"ts\":", p->f);
        mrd__json_us(p->f, mrd_timebase_map(p->tb, rank, col64(q, 2)) - origin);
    } else {
        uint64_t track =
            kind == 2 ? laned(thread, lane_for(p, rank, thread, col64(q, 2), col64(q, 3))) : thread;
        if (!slice(p, rank, kind == 2 ? TR_NVTX_SE : TR_NVTX, track, "nvtx", name, col64(q, 2),
                   col64(q, 3)))
            return;
    }
    fputs(",\"args\":{\"domain\":", p->f);
    mrd__json_str(p->f, text(q, 6, ""));
    fputs("}}", p->f);
}

static void mpi_row(struct pf *p, sqlite3_stmt *q)
{
    char name[64];
    if (sqlite3_column_type(q, 4) == SQLITE_TEXT)
        snprintf(name, sizeof(name), "%s", text(q, 4, "MPI"));
    else
        snprintf(name, sizeof(name), "MPI call %d", sqlite3_column_int(q, 5));
    if (!slice(p, sqlite3_column_int(q, 0), TR_MPI, (uint64_t)col64(q, 1), "mpi", name, col64(q, 2),
               col64(q, 3)))
        return;
    fprintf(p->f, ",\"args\":{\"bytes\":%" PRId64 ",\"peer\":%d,\"tag\":%d}}", col64(q, 6),
            sqlite3_column_int(q, 7), sqlite3_column_int(q, 8));
}

static void sync_row(struct pf *p, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, 0);
    if (!slice(p, rank, TR_SYNC, laned(0, lane_for(p, rank, 0, col64(q, 1), col64(q, 2))), "sync",
               "CUDA synchronize", col64(q, 1), col64(q, 2)))
        return;
    fprintf(p->f, ",\"args\":{\"type\":%d,\"stream\":%" PRId64 "}}", sqlite3_column_int(q, 3),
            col64(q, 4));
}

static void api_row(struct pf *p, sqlite3_stmt *q)
{
    char name[64];
    snprintf(name, sizeof(name), "%s", text(q, 4, "CUDA API"));
    if (!slice(p, sqlite3_column_int(q, 0), TR_API, (uint64_t)col64(q, 1), "api", name, col64(q, 2),
               col64(q, 3)))
        return;
    fprintf(p->f, ",\"args\":{\"cbid\":%d,\"correlation\":%" PRId64 "}}", sqlite3_column_int(q, 5),
            col64(q, 6));
}

int mrd_export_steps_window(sqlite3 *db, const struct mrd_perfetto_options *o, int64_t origin,
                            int64_t *from_ns, int64_t *to_ns, uint64_t *nsteps)
{
    struct mrd_analyze_options ao;
    struct mrd_analysis *a = NULL;
    int64_t from = INT64_MAX, to = INT64_MIN;
    int rc;
    memset(&ao, 0, sizeof(ao));
    ao.ignore_clock_models = o->ignore_clock_models;
    ao.step_name = o->step_name;
    if ((rc = mrd_analyze(db, &ao, &a, NULL)) < 0)
        return rc;
    *nsteps = (uint64_t)a->nsteps;
    for (int i = 0; i < a->nsteps; i++) {
        const struct mrd_an_step *st = &a->steps[i];
        if (st->index < o->step_first || st->index > o->step_last)
            continue;
        from = st->start_ns < from ? st->start_ns : from;
        to = st->end_ns > to ? st->end_ns : to;
    }
    mrd_analysis_free(a);
    if (from > to) { /* no step in the range: a window no event meets */
        *from_ns = INT64_MAX - 1;
        *to_ns = INT64_MAX;
        return 1;
    }
    *from_ns = from - origin;
    *to_ns = to - origin > *from_ns ? to - origin : *from_ns + 1;
    if (*to_ns == 0) /* 0 would mean "no window" */
        *to_ns = 1;
    return 0;
}

/* The options' step range as the window (ns after the origin); fills stats.steps. */
static int steps_window(struct pf *p)
{
    int rc = mrd_export_steps_window(p->db, p->o, p->origin, &p->window_from_ns, &p->window_to_ns,
                                     &p->st.steps);
    if (rc == 1)
        p->select_none = 1;
    return rc < 0 ? rc : 0;
}

int mrd_export_perfetto(FILE *f, sqlite3 *db, const struct mrd_perfetto_options *opts,
                        struct mrd_perfetto_stats *stats)
{
    static const struct mrd_perfetto_options defaults;
    struct pf p;
    int rc;

    memset(&p, 0, sizeof(p));
    p.f = f;
    p.db = db;
    p.o = opts ? opts : &defaults;
    p.first = 1;
    p.nslots = 2 * (size_t)MRD_EXPORT_MAX_TRACKS; /* power of two, load <= 1/2 */
    p.tracks = calloc(p.nslots, sizeof(*p.tracks));
    if (!p.tracks) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = mrd_timebase_load(db, p.o->ignore_clock_models, &p.tb)) < 0 ||
        (rc = mrd_timebase_origin(p.tb, db, &p.origin)) < 0)
        goto fail;
    p.window_from_ns = p.o->window_from_ns;
    p.window_to_ns = p.o->window_to_ns;
    if (p.o->by_steps && (rc = steps_window(&p)) < 0)
        goto fail;
    if ((rc = mrd_db_op_intervals(db, 0)) < 0)
        goto fail;
    static const char *const passes[] = {"kernels",  "memcpys",  "memsets", "graph_launches",
                                         "nccl_ops", "nvtx",     "nvtx",    "mpi_calls",
                                         "syncs",    "api_calls"};
    int npass = (int)(sizeof(passes) / sizeof(passes[0])) - (p.o->include_api ? 0 : 1);
    if ((rc = mrd__export_rows_begin(&p.rows, db, p.o->progress, passes, npass)) < 0)
        goto fail;
    if (sqlite3_prepare_v2(db, mrd_db_sql_kernel_ops, -1, &p.links, NULL) != SQLITE_OK) {
        rc = -MRD_ERR_SQLITE;
        goto fail;
    }
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"meridian export\","
          "\"timebase\":",
          f);
    fprintf(f, "\"%s\",\"origin_ns\":%" PRId64 "},\"traceEvents\":[",
            mrd_timebase_is_global(p.tb) ? "global" : "local", p.origin);
    if ((rc = run_query(&p, "kernels", mrd_db_sql_export_kernels, kernel_row)) < 0 ||

        (rc = run_query(&p, "memcpys", mrd_db_sql_export_memcpys, memcpy_row)) < 0 ||
        (rc = run_query(&p, "memsets", mrd_db_sql_export_memsets, memset_row)) < 0 ||
        (rc = run_query(&p, "graph_launches", mrd_db_sql_export_graphs, graph_row)) < 0 ||
        (rc = run_query(&p, "nccl_ops", mrd_db_sql_export_nccl_ops, nccl_row)) < 0 ||
        (rc = run_query(&p, "nvtx", mrd_db_sql_export_nvtx, nvtx_row)) < 0 ||
        (rc = run_query(&p, "nvtx", mrd_db_sql_export_nvtx_start_end, nvtx_row)) < 0 ||
        (rc = run_query(&p, "mpi_calls", mrd_db_sql_export_mpi, mpi_row)) < 0 ||
        (rc = run_query(&p, "syncs", mrd_db_sql_export_syncs, sync_row)) < 0)
        goto fail;
    if (p.o->include_api && (rc = run_query(&p, "api_calls", mrd_db_sql_export_api, api_row)) < 0)
        goto fail;
    fputs("\n]}\n", f);
    fflush(f);
    rc = ferror(f) ? -EIO : 0;
    p.st.overlapped = p.overlapped;
    if (stats)
        *stats = p.st;
fail:
    sqlite3_finalize(p.links);
    mrd_timebase_destroy(p.tb);
    free(p.tracks);
    return rc;
}

/* ---- progress (export.h, struct mrd__export_rows) ---- */

static void rows_report(struct mrd__export_rows *r, uint64_t done)
{
    if (!r->pr || !r->pr->on_rows || done == r->reported)
        return;
    r->reported = done;
    r->pr->on_rows(r->pr->ctx, done, r->total);
}

int mrd__export_rows_begin(struct mrd__export_rows *r, sqlite3 *db,
                           const struct mrd_export_progress *pr, const char *const *tables, int n)
{
    memset(r, 0, sizeof(*r));
    if (!pr || !pr->on_rows)
        return 0;
    if (n > MRD__EXPORT_ROWS_MAX_PASSES)
        return -EINVAL;
    r->pr = pr;
    r->npass = n;
    for (int i = 0; i < n; i++) {
        /* one entry: the tables of one query, separated by spaces */
        for (const char *t = tables[i]; *t;) {
            char name[64];
            size_t len = strcspn(t, " ");
            if (len == 0 || len >= sizeof(name))
                return -EINVAL;
            memcpy(name, t, len);
            name[len] = '\0';
            int rc = mrd_db_table_rows(db, name, &r->count[i]);
            if (rc < 0)
                return rc;
            t += len;
            t += *t == ' ';
        }
        r->total += r->count[i];
    }
    r->pass = -1;
    return 0;
}

void mrd__export_rows_pass(struct mrd__export_rows *r)
{
    if (r->pr && r->pass + 1 < r->npass)
        r->pass++;
}

void mrd__export_rows_tick(struct mrd__export_rows *r, uint64_t rows)
{
    if (!r->pr || r->pass < 0)
        return;
    uint64_t c = r->count[r->pass];
    rows_report(r, r->base + (rows < c ? rows : c));
}

void mrd__export_rows_pass_end(struct mrd__export_rows *r)
{
    if (!r->pr || r->pass < 0)
        return;
    r->base += r->count[r->pass];
    r->count[r->pass] = 0; /* a second pass_end of the same query adds nothing */
    rows_report(r, r->base);
}
