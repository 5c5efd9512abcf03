/* meridian batch reader: validation of a decoded Batch and cursors that undo the deltas.
 *
 * Runs in meridiand after mrd_frame_decode() has produced a Meridian__V1__Batch: the
 * ingest stage calls mrd_batch_check() once per batch (anything it accepts is safe to
 * index), then the store walks each kind with a cursor and writes rows. Workload: up to
 * 512 ranks x 50,000 events/s (bursts of 200,000) on the aggregator, so the cursors are
 * plain typed code with no allocation, and a batch is never copied.
 *
 * This file also holds the column layout table (batch_internal.h) that the builder
 * (batch.c) fills batches through, so writer and reader cannot disagree.
 * Thread-safe: no shared mutable state; a cursor belongs to one thread.
 */
#include <string.h>

#include "batch.h"
#include "batch_internal.h"
#include "error.h"

#define COL(T, f) {offsetof(T, n_##f), offsetof(T, f), (uint8_t)sizeof(*((T *)NULL)->f)}
#define GROUP(d, member) .desc = &d, .batch_off = offsetof(Meridian__V1__Batch, member)

typedef Meridian__V1__KernelColumns KC;
typedef Meridian__V1__MemcpyColumns CC;
typedef Meridian__V1__MemsetColumns SC;
typedef Meridian__V1__SyncColumns YC;
typedef Meridian__V1__ApiColumns AC;
typedef Meridian__V1__GraphColumns GC;
typedef Meridian__V1__ExternalCorrelationColumns XC;
typedef Meridian__V1__NvtxColumns NC;
typedef Meridian__V1__NcclOpColumns OC;
typedef Meridian__V1__NcclChannelColumns HC;
typedef Meridian__V1__MpiColumns MC;
typedef Meridian__V1__ClockSampleColumns TC;
typedef Meridian__V1__GpuClockSampleColumns QC;

const struct mrd__groupspec mrd__batch_groups[MRD_EV__COUNT] = {
    [MRD_EV_KERNEL] = {GROUP(meridian__v1__kernel_columns__descriptor, kernels), .ncols = 16,
                       .nstr = 1, .strcol = {5},
                       .col = {COL(KC, start), COL(KC, duration), COL(KC, device),
                               COL(KC, stream), COL(KC, correlation), COL(KC, name),
                               COL(KC, grid_x), COL(KC, grid_y), COL(KC, grid_z),
                               COL(KC, block_x), COL(KC, block_y), COL(KC, block_z),
                               COL(KC, shared_bytes), COL(KC, registers), COL(KC, graph_id),
                               COL(KC, context)}},
    [MRD_EV_MEMCPY] = {GROUP(meridian__v1__memcpy_columns__descriptor, memcpys), .ncols = 10,
                       .col = {COL(CC, start), COL(CC, duration), COL(CC, device),
                               COL(CC, stream), COL(CC, correlation), COL(CC, bytes),
                               COL(CC, copy_kind), COL(CC, src_kind), COL(CC, dst_kind),
                               COL(CC, peer_device)}},
    [MRD_EV_MEMSET] = {GROUP(meridian__v1__memset_columns__descriptor, memsets), .ncols = 8,
                       .col = {COL(SC, start), COL(SC, duration), COL(SC, device),
                               COL(SC, stream), COL(SC, correlation), COL(SC, bytes),
                               COL(SC, value), COL(SC, memory_kind)}},
    [MRD_EV_SYNC] = {GROUP(meridian__v1__sync_columns__descriptor, syncs), .ncols = 6,
                     .col = {COL(YC, start), COL(YC, duration), COL(YC, type), COL(YC, context),
                             COL(YC, stream), COL(YC, correlation)}},
    [MRD_EV_API] = {GROUP(meridian__v1__api_columns__descriptor, api_calls), .ncols = 7,
                    .nstr = 1, .strcol = {6},
                    .col = {COL(AC, start), COL(AC, duration), COL(AC, domain), COL(AC, cbid),
                            COL(AC, correlation), COL(AC, thread), COL(AC, name)}},
    [MRD_EV_GRAPH] = {GROUP(meridian__v1__graph_columns__descriptor, graphs), .ncols = 6,
                      .col = {COL(GC, start), COL(GC, duration), COL(GC, device),
                              COL(GC, stream), COL(GC, correlation), COL(GC, graph_id)}},
    [MRD_EV_EXTCORR] = {GROUP(meridian__v1__external_correlation_columns__descriptor,
                              ext_correlations),
                        .ncols = 3,
                        .col = {COL(XC, correlation), COL(XC, external_id), COL(XC, kind)}},
    [MRD_EV_NVTX] = {GROUP(meridian__v1__nvtx_columns__descriptor, nvtx), .ncols = 8, .nstr = 2,
                     .strcol = {3, 4},
                     .col = {COL(NC, start), COL(NC, duration), COL(NC, kind), COL(NC, domain),
                             COL(NC, name), COL(NC, thread), COL(NC, depth), COL(NC, color)}},
    [MRD_EV_NCCL_OP] = {GROUP(meridian__v1__nccl_op_columns__descriptor, nccl_ops), .ncols = 20,
                        .nstr = 4, .strcol = {7, 9, 13, 14},
                        .col = {COL(OC, op_id), COL(OC, start), COL(OC, duration),
                                COL(OC, comm_hash), COL(OC, comm_rank), COL(OC, comm_nranks),
                                COL(OC, seq), COL(OC, func), COL(OC, count), COL(OC, datatype),
                                COL(OC, bytes), COL(OC, root), COL(OC, peer), COL(OC, algo),
                                COL(OC, proto), COL(OC, channels), COL(OC, warps),
                                COL(OC, launch_id), COL(OC, is_p2p), COL(OC, device)}},
    [MRD_EV_NCCL_CHANNEL] = {GROUP(meridian__v1__nccl_channel_columns__descriptor,
                                   nccl_channels),
                             .ncols = 5,
                             .col = {COL(HC, op_id), COL(HC, channel), COL(HC, gpu_start),
                                     COL(HC, gpu_duration), COL(HC, host_start)}},
    [MRD_EV_MPI] = {GROUP(meridian__v1__mpi_columns__descriptor, mpi), .ncols = 8, .nstr = 1,
                    .strcol = {2},
                    .col = {COL(MC, start), COL(MC, duration), COL(MC, call), COL(MC, bytes),
                            COL(MC, peer), COL(MC, tag), COL(MC, comm_size), COL(MC, thread)}},
    [MRD_EV_CLOCK] = {GROUP(meridian__v1__clock_sample_columns__descriptor, clock_samples),
                      .ncols = 4, .col = {COL(TC, t0), COL(TC, t1), COL(TC, t2), COL(TC, t3)}},
    [MRD_EV_GPU_CLOCK] = {GROUP(meridian__v1__gpu_clock_sample_columns__descriptor,
                                gpu_clock_samples),
                          .ncols = 4,
                          .col = {COL(QC, device), COL(QC, host_ns), COL(QC, gpu_ns),
                                  COL(QC, uncertainty_ns)}},
};

static int bad(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return -MRD_ERR_MALFORMED;
}

static int check_strings(const Meridian__V1__Batch *m, const char **why)
{
    uint32_t last = 0;

    if (m->n_strings > MRD__BATCH_MAX_DEFS)
        return bad(why, "more than 65536 string definitions");
    for (size_t i = 0; i < m->n_strings; i++) {
        const Meridian__V1__StringDef *d = m->strings[i];

        if (!d || !d->value)
            return bad(why, "string definition without value");
        if (d->id == 0 || d->id > MRD__BATCH_MAX_STRING_ID)
            return bad(why, "string definition id 0 or >= 2^31");
        if (d->id <= last)
            return bad(why, "string definitions not in strictly increasing id order");
        if (strnlen(d->value, MRD__BATCH_MAX_STRLEN + 1) > MRD__BATCH_MAX_STRLEN)
            return bad(why, "string value longer than 4096 bytes");
        last = d->id;
    }
    return 0;
}

static int check_group(const Meridian__V1__Batch *m, int kind, const char **why)
{
    const struct mrd__groupspec *s = &mrd__batch_groups[kind];
    const ProtobufCMessage *g = mrd__batch_group(m, kind);
    size_t n;

    if (!g)
        return 0;
    if (g->descriptor != s->desc)
        return bad(why, "column group of the wrong message type");
    n = mrd__batch_col_len(g, &s->col[0]);
    if (n > MRD__BATCH_MAX_EVENTS)
        return bad(why, "more than 1000000 events of one kind");
    for (int c = 1; c < s->ncols; c++)
        if (mrd__batch_col_len(g, &s->col[c]) != n)
            return bad(why, "columns of one group have different lengths");
    for (int k = 0; k < s->nstr; k++) {
        const uint32_t *ids = *(uint32_t *const *)((const char *)g + s->col[s->strcol[k]].p_off);

        for (size_t i = 0; i < n; i++)
            if (ids[i] > MRD__BATCH_MAX_STRING_ID)
                return bad(why, "string id >= 2^31");
    }
    return 0;
}

/* Validates a decoded batch (see batch.h): seq >= 1, run_id <= 256 bytes, string
 * definitions (<= 65536, ids in 1..2^31-1 strictly increasing, values <= 4096 bytes),
 * every column group (equal column lengths, <= 1,000,000 events, string ids < 2^31) and
 * <= 256 counters. Returns 0 or -MRD_ERR_MALFORMED with a static reason in *why.
 * Thread-safe. */
int mrd_batch_check(const Meridian__V1__Batch *m, const char **why)
{
    int rc;

    if (!m || m->base.descriptor != &meridian__v1__batch__descriptor)
        return bad(why, "not a Batch message");
    if (m->seq == 0)
        return bad(why, "batch seq 0 (sequences start at 1)");
    if (!m->run_id || strnlen(m->run_id, MRD__BATCH_MAX_RUN_ID + 1) > MRD__BATCH_MAX_RUN_ID)
        return bad(why, "run_id missing or longer than 256 bytes");
    rc = check_strings(m, why);
    if (rc)
        return rc;
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        rc = check_group(m, k, why);
        if (rc)
            return rc;
    }
    if (m->n_dropped > MRD__BATCH_MAX_COUNTERS)
        return bad(why, "more than 256 counters");
    for (size_t i = 0; i < m->n_dropped; i++)
        if (!m->dropped[i])
            return bad(why, "empty counter");
    if (why)
        *why = NULL;
    return 0;
}

/* Number of events of `kind` in a checked batch; 0 for an absent group or unknown kind.
 * Thread-safe. */
size_t mrd_batch_count(const Meridian__V1__Batch *m, int kind)
{
    const ProtobufCMessage *g;

    if (!m || kind <= 0 || kind >= MRD_EV__COUNT)
        return 0;
    g = mrd__batch_group(m, kind);
    return g ? mrd__batch_col_len(g, &mrd__batch_groups[kind].col[0]) : 0;
}

/* Points c at the start of m. One cursor walks one kind; init again before walking
 * another. m must have passed mrd_batch_check and outlive the cursor. */
void mrd_batch_cursor_init(struct mrd_batch_cursor *c, const Meridian__V1__Batch *m)
{
    memset(c, 0, sizeof(*c));
    c->m = m;
}

/* Adds a delta to a running value with wrapping (modulo 2^64) arithmetic. */
static int64_t undelta(int64_t *prev, int64_t delta)
{
    *prev = mrd__u2s((uint64_t)*prev + (uint64_t)delta);
    return *prev;
}

static int64_t add_dur(int64_t start, uint64_t duration)
{
    return mrd__u2s((uint64_t)start + duration);
}

/* Shared head of every *_next: the group, or return 0 at its end. */
#define CURSOR_HEAD(member, first)                                                             \
    const __typeof__(*c->m->member) *g = c->m->member;                                         \
    size_t i;                                                                                  \
    if (!g || c->i >= g->n_##first)                                                           \
        return 0;                                                                              \
    i = c->i++

/* Each mrd_batch_next_<kind> returns 1 and fills *e with the next event of that kind
 * (deltas undone, durations turned back into end times), or 0 at the end. */
int mrd_batch_next_kernel(struct mrd_batch_cursor *c, struct mrd_kernel *e)
{
    CURSOR_HEAD(kernels, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->correlation = (uint64_t)undelta(&c->prev[1], g->correlation[i]);
    e->device = g->device[i];
    e->stream = g->stream[i];
    e->context = g->context[i];
    e->name = g->name[i];
    e->grid[0] = g->grid_x[i];
    e->grid[1] = g->grid_y[i];
    e->grid[2] = g->grid_z[i];
    e->block[0] = g->block_x[i];
    e->block[1] = g->block_y[i];
    e->block[2] = g->block_z[i];
    e->shared_bytes = g->shared_bytes[i];
    e->registers = g->registers[i];
    e->graph_id = g->graph_id[i];
    return 1;
}

/* Next memcpy of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_memcpy(struct mrd_batch_cursor *c, struct mrd_memcpy *e)
{
    CURSOR_HEAD(memcpys, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->correlation = (uint64_t)undelta(&c->prev[1], g->correlation[i]);
    e->bytes = g->bytes[i];
    e->device = g->device[i];
    e->stream = g->stream[i];
    e->copy_kind = g->copy_kind[i];
    e->src_kind = g->src_kind[i];
    e->dst_kind = g->dst_kind[i];
    e->peer_device = g->peer_device[i];
    return 1;
}

/* Next memset of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_memset(struct mrd_batch_cursor *c, struct mrd_memset *e)
{
    CURSOR_HEAD(memsets, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->correlation = (uint64_t)undelta(&c->prev[1], g->correlation[i]);
    e->bytes = g->bytes[i];
    e->device = g->device[i];
    e->stream = g->stream[i];
    e->value = g->value[i];
    e->memory_kind = g->memory_kind[i];
    return 1;
}

/* Next synchronization of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_sync(struct mrd_batch_cursor *c, struct mrd_sync *e)
{
    CURSOR_HEAD(syncs, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->correlation = (uint64_t)undelta(&c->prev[1], g->correlation[i]);
    e->type = g->type[i];
    e->context = g->context[i];
    e->stream = g->stream[i];
    return 1;
}

/* Next API call of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_api(struct mrd_batch_cursor *c, struct mrd_api *e)
{
    CURSOR_HEAD(api_calls, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->correlation = (uint64_t)undelta(&c->prev[1], g->correlation[i]);
    e->domain = g->domain[i];
    e->cbid = g->cbid[i];
    e->thread = g->thread[i];
    e->name = g->name[i];
    return 1;
}

/* Next graph launch of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_graph(struct mrd_batch_cursor *c, struct mrd_graph *e)
{
    CURSOR_HEAD(graphs, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->correlation = (uint64_t)undelta(&c->prev[1], g->correlation[i]);
    e->device = g->device[i];
    e->stream = g->stream[i];
    e->graph_id = g->graph_id[i];
    return 1;
}

/* Next external correlation of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_extcorr(struct mrd_batch_cursor *c, struct mrd_extcorr *e)
{
    CURSOR_HEAD(ext_correlations, correlation);
    e->correlation = (uint64_t)undelta(&c->prev[0], g->correlation[i]);
    e->external_id = g->external_id[i];
    e->kind = g->kind[i];
    return 1;
}

/* Next NVTX range or mark of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_nvtx(struct mrd_batch_cursor *c, struct mrd_nvtx *e)
{
    CURSOR_HEAD(nvtx, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->kind = g->kind[i];
    e->domain = g->domain[i];
    e->name = g->name[i];
    e->thread = g->thread[i];
    e->depth = g->depth[i];
    e->color = g->color[i];
    return 1;
}

/* Next NCCL operation of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_nccl_op(struct mrd_batch_cursor *c, struct mrd_nccl_op *e)
{
    CURSOR_HEAD(nccl_ops, op_id);
    e->op_id = g->op_id[i];
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->comm_hash = g->comm_hash[i];
    e->comm_rank = g->comm_rank[i];
    e->comm_nranks = g->comm_nranks[i];
    e->seq = g->seq[i];
    e->func = g->func[i];
    e->count = g->count[i];
    e->datatype = g->datatype[i];
    e->bytes = g->bytes[i];
    e->root = g->root[i];
    e->peer = g->peer[i];
    e->algo = g->algo[i];
    e->proto = g->proto[i];
    e->channels = g->channels[i];
    e->warps = g->warps[i];
    e->launch_id = g->launch_id[i];
    e->is_p2p = g->is_p2p[i];
    e->device = g->device[i];
    return 1;
}

/* Next NCCL channel timing of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_nccl_channel(struct mrd_batch_cursor *c, struct mrd_nccl_channel *e)
{
    CURSOR_HEAD(nccl_channels, op_id);
    e->op_id = g->op_id[i];
    e->channel = g->channel[i];
    e->gpu_start = undelta(&c->prev[0], g->gpu_start[i]);
    e->gpu_end = add_dur(e->gpu_start, g->gpu_duration[i]);
    e->host_start = undelta(&c->prev[1], g->host_start[i]);
    return 1;
}

/* Next MPI call of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_mpi(struct mrd_batch_cursor *c, struct mrd_mpi *e)
{
    CURSOR_HEAD(mpi, start);
    e->start = undelta(&c->prev[0], g->start[i]);
    e->end = add_dur(e->start, g->duration[i]);
    e->bytes = g->bytes[i];
    e->call = g->call[i];
    e->comm_size = g->comm_size[i];
    e->thread = g->thread[i];
    e->peer = g->peer[i];
    e->tag = g->tag[i];
    return 1;
}

/* Next clock probe sample of the batch: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_clock_sample(struct mrd_batch_cursor *c, struct mrd_clock_sample *e)
{
    CURSOR_HEAD(clock_samples, t0);
    e->t0 = g->t0[i];
    e->t1 = g->t1[i];
    e->t2 = g->t2[i];
    e->t3 = g->t3[i];
    return 1;
}

/* Next GPU timer calibration sample: 1 and *e filled, or 0 at the end. Cursor thread. */
int mrd_batch_next_gpu_clock_sample(struct mrd_batch_cursor *c, struct mrd_gpu_clock_sample *e)
{
    CURSOR_HEAD(gpu_clock_samples, device);
    e->device = g->device[i];
    e->host_ns = g->host_ns[i];
    e->gpu_ns = g->gpu_ns[i];
    e->uncertainty_ns = g->uncertainty_ns[i];
    return 1;
}

/* One reader per kind, indexed by enum mrd_event_kind (batch.h: mrd_batch_next_any). */
#define NEXT_ANY(k, fn, type)                                                                      \
    static int any_##fn(struct mrd_batch_cursor *c, void *e)                                       \
    {                                                                                              \
        return mrd_batch_next_##fn(c, (type *)e);                                                  \
    }
MRD__EVENT_KINDS(NEXT_ANY)
#define NEXT_ENTRY(k, fn, type) [k] = any_##fn,
static int (*const next_any[MRD_EV__COUNT])(struct mrd_batch_cursor *, void *) = {
    MRD__EVENT_KINDS(NEXT_ENTRY)};

int mrd_batch_next_any(struct mrd_batch_cursor *c, int kind, void *e)
{
    if (kind <= 0 || kind >= MRD_EV__COUNT || !next_any[kind])
        return 0;
    return next_any[kind](c, e);
}
