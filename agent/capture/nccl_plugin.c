/* NCCL capture: meridian as NCCL's profiler plugin (ncclProfiler_v4 / v5 / v6).
 *
 * Where this sits: NCCL_PROFILER_PLUGIN=/abs/libmeridian.so makes NCCL dlopen the agent
 * (the same instance the CUDA injection loaded) and look up ncclProfiler_v6, _v5, then
 * _v4 (2.29, 2.28 and 2.27 respectively). init() runs per communicator; the event
 * callbacks run on the threads NCCL uses: the application's thread (API events, kernel
 * launch, Coll/P2p start/stop in the usual case), CUDA's host-callback thread (Coll/P2p
 * start/stop for graph-captured plans) and NCCL's proxy threads (KernelCh). Each callback
 * fills a record on the stack and writes it to the calling thread's ring.
 *
 * What is recorded:
 *  - one MRD_EV_NCCL_OP per Coll or P2p event, written at its stopEvent ("enqueued", not
 *    "finished"): communicator hash, rank, nranks, sequence number (collectives; 0 for
 *    p2p as the wire contract says), function, count, datatype, bytes, algorithm,
 *    protocol, channels, warps, root/peer, device, and launch_id;
 *  - one MRD_EV_NCCL_CHANNEL per KernelCh event, written at its stop (state 22 gives the
 *    GPU stop timer): the op_id of its parent op, the channel, the raw GPU start/stop
 *    timer values and the host time the (late) start callback ran;
 *  - per op whose kernel launch this thread saw, up to two MRD_EV_GPU_CLOCK samples, the
 *    host-only evidence of the GPU timer calibration (aggregator/clock/gpu.c) that needs
 *    no CUPTI: the first channel's GPU start lies between the KernelLaunch start (before
 *    cuLaunchKernelEx) and its KernelCh start callback, the first stopped channel's GPU
 *    end between the launch and the KernelChStop state callback (NCCL's proxy reports
 *    both only after reading the times the GPU wrote). Sample: that GPU time, the host
 *    time half-way, half the interval as uncertainty; on the op's device (unknown: none).
 * Kernel linkage: KernelLaunch start (application thread, right before cuLaunchKernelEx)
 * takes a fresh launch id and pushes it as CUPTI external correlation id (kind CUSTOM2);
 * its stop pops it, so CUPTI emits an EXTERNAL_CORRELATION record tying the id to the
 * launch's correlation id, hence to the kernel. The ops of that launch carry the same id:
 * NCCL starts them on the launching thread right after the launch (the thread remembers
 * its last launch per communicator) or, for plans run from CUDA's host callback, they find
 * it through their CollApi/P2pApi parent's GroupApi event, where the launch recorded it.
 *
 * Handles and pools (CAPTURE-FACTS.md "Handle rule"): every handle starts with a uint64_t
 * tag; all handles live in fixed static pools, claimed with one compare-and-swap, never
 * allocated. Caps and policies:
 *  - ops (Coll/P2p): OP_SLOTS. A stopped op stays readable for REUSE_GRACE_NS so late
 *    KernelCh children still find its op_id; a slot is reused only after that grace and
 *    when no child is in flight. No free slot: startEvent returns a NULL handle (NCCL
 *    skips the event) and MRD_DROP_NCCL_POOL is counted, for the op and each of its
 *    channels.
 *  - channels (KernelCh): CH_SLOTS, released at their stop. Full: NULL handle + count.
 *  - API events (GroupApi/CollApi/P2pApi): API_SLOTS with the same grace. Full: NULL
 *    handle; nothing is lost but the fallback route of the launch id.
 * Steps from a collective (MERIDIAN_STEP_COLLECTIVE): the step communicator's Coll start
 * events go to collsteps.c first.
 * Errors never reach NCCL: every entry point returns ncclSuccess.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "capture.h"
#include "nccl_abi.h"
#include "ring.h"

#define MRD_EXPORT __attribute__((visibility("default")))

#define OP_SLOTS       MRD_NCCL_OP_SLOTS
#define CH_SLOTS       MRD_NCCL_CH_SLOTS
#define API_SLOTS      2048
#define PROBES         16
#define REUSE_GRACE_NS 20000000LL /* 20 ms: KernelCh callbacks were seen up to 7 ms late */

#define TAG_OP     0x6d72646e63636f70ULL /* "mrdnccop" */
#define TAG_CH     0x6d72646e63636368ULL /* "mrdnccch" */
#define TAG_GROUP  0x6d72646e63636770ULL /* "mrdnccgp" */
#define TAG_API    0x6d72646e63636170ULL /* "mrdnccap" */
#define TAG_LAUNCH 0x6d72646e63636c6eULL /* "mrdnccln" */

#define MASK_V5                                                                                    \
    (MRD_NCCL_EV_COLL | MRD_NCCL_EV_P2P | MRD_NCCL_EV_KERNEL_CH | MRD_NCCL_EV_KERNEL_LAUNCH |      \
     MRD_NCCL_EV_GROUP_API | MRD_NCCL_EV_COLL_API | MRD_NCCL_EV_P2P_API)
#define MASK_V4 (MRD_NCCL_EV_COLL | MRD_NCCL_EV_P2P | MRD_NCCL_EV_KERNEL_CH)

enum { SLOT_FREE = 0, SLOT_LIVE = 1, SLOT_DONE = 2 };
enum { SAMPLED_START = 1, SAMPLED_END = 2 };

/* One communicator (init .. finalize). */
struct comm_ctx {
    uint64_t id; /* unique per init: contexts are freed and their addresses reused */
    uint64_t comm_hash;
    uint32_t rank, nranks, device;
    int steps; /* the step communicator of MERIDIAN_STEP_COLLECTIVE (collsteps.c) */
};

struct op_slot {
    uint64_t tag;
    _Atomic uint32_t state;
    _Atomic uint32_t children; /* KernelCh events started and not stopped */
    _Atomic int64_t done_at;
    _Atomic uint32_t sampled; /* SAMPLED_START | SAMPLED_END: its clock samples are sent */
    int64_t launch_at;        /* local time its KernelLaunch started (0: unknown) */
    struct mrd_nccl_op ev;
    const char *str[4];
};

struct ch_slot {
    uint64_t tag;
    _Atomic uint32_t state;
    uint32_t channel;
    struct op_slot *op;
    uint64_t op_id;
    int64_t gpu_start, gpu_end, host_start, host_end;
};

struct api_slot {
    uint64_t tag; /* TAG_GROUP or TAG_API */
    _Atomic uint32_t state;
    _Atomic int64_t done_at;
    _Atomic uint64_t launch_id; /* GroupApi: the last kernel launch under it ... */
    _Atomic int64_t launch_at;  /* ... and when it started */
    struct api_slot *group;     /* CollApi/P2pApi: its GroupApi */
    int graph_captured;         /* CollApi/P2pApi captured into a CUDA graph */
};

static struct op_slot ops[OP_SLOTS];
static struct ch_slot chans[CH_SLOTS];
static struct api_slot apis[API_SLOTS];
static _Atomic uint64_t op_cursor, ch_cursor, api_cursor, next_op_id, next_launch_id, next_ctx;
static const uint64_t launch_token = TAG_LAUNCH; /* the handle of every KernelLaunch */

/* The launching thread's last kernel launch (a plan's ops follow it on that thread) is
 * kept in its capture state (nccl_ctx_id, nccl_launch_id; capture.h says why not in a
 * __thread variable). A thread without one (no free ring) finds its launch through the
 * GroupApi parent instead, as CUDA's host-callback thread does. */

/* NCCL names its types ncclInt8 .. ncclFloat64, ncclBfloat16, ncclFloat8e4m3/e5m2: the
 * width is in the name. */
uint32_t mrd__nccl_datatype_size(const char *name)
{
    if (!name || strncmp(name, "ncc", 3) != 0)
        return 0;
    if (strncmp(name, "ncclFloat8", 10) == 0 || strcmp(name, "ncclInt8") == 0 ||
        strcmp(name, "ncclUint8") == 0 || strcmp(name, "ncclChar") == 0)
        return 1;
    size_t n = strlen(name);
    const char *tail = n >= 2 ? name + n - 2 : "";
    if (strcmp(tail, "16") == 0)
        return 2;
    if (strcmp(tail, "32") == 0)
        return 4;
    if (strcmp(tail, "64") == 0)
        return 8;
    return 0;
}

/* Claims a slot of a pool whose slots become reusable once DONE for the grace period
 * (and, for ops, without children in flight). Returns the index or -1. */
/* A slot in state s (done at done_at, children in flight) may be claimed now. */
static int reusable(uint32_t s, int64_t done_at, uint32_t children, int64_t now)
{
    if (s == SLOT_FREE)
        return 1;
    return s == SLOT_DONE && now - done_at >= REUSE_GRACE_NS && children == 0;
}

static struct op_slot *op_alloc(int64_t now)
{
    uint64_t start = atomic_fetch_add_explicit(&op_cursor, 1, memory_order_relaxed);
    for (unsigned p = 0; p < PROBES; p++) {
        struct op_slot *op = &ops[(start + p) % OP_SLOTS];
        uint32_t s = atomic_load_explicit(&op->state, memory_order_acquire);
        if (reusable(s, atomic_load_explicit(&op->done_at, memory_order_relaxed),
                     atomic_load_explicit(&op->children, memory_order_acquire), now) &&
            atomic_compare_exchange_strong(&op->state, &s, SLOT_LIVE))
            return op;
    }
    return NULL;
}

static struct api_slot *api_alloc(int64_t now)
{
    uint64_t start = atomic_fetch_add_explicit(&api_cursor, 1, memory_order_relaxed);
    for (unsigned p = 0; p < PROBES; p++) {
        struct api_slot *a = &apis[(start + p) % API_SLOTS];
        uint32_t s = atomic_load_explicit(&a->state, memory_order_acquire);
        if (reusable(s, atomic_load_explicit(&a->done_at, memory_order_relaxed), 0, now) &&
            atomic_compare_exchange_strong(&a->state, &s, SLOT_LIVE))
            return a;
    }
    return NULL;
}

static struct ch_slot *ch_alloc(void)
{
    uint64_t start = atomic_fetch_add_explicit(&ch_cursor, 1, memory_order_relaxed);
    for (unsigned p = 0; p < PROBES; p++) {
        struct ch_slot *c = &chans[(start + p) % CH_SLOTS];
        uint32_t s = SLOT_FREE;
        if (atomic_compare_exchange_strong(&c->state, &s, SLOT_LIVE))
            return c;
    }
    return NULL;
}

/* Handles NCCL hands back are ours only if they point at a slot of the right pool. */
static struct op_slot *as_op(void *h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)ops;
    if (p < b || p >= b + sizeof(ops) || (p - b) % sizeof(ops[0]) != 0)
        return NULL;
    return ((struct op_slot *)h)->tag == TAG_OP ? h : NULL;
}

static struct api_slot *as_api(void *h, uint64_t tag)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)apis;
    if (p < b || p >= b + sizeof(apis) || (p - b) % sizeof(apis[0]) != 0)
        return NULL;
    return ((struct api_slot *)h)->tag == tag ? h : NULL;
}

static struct ch_slot *as_ch(void *h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)chans;
    if (p < b || p >= b + sizeof(chans) || (p - b) % sizeof(chans[0]) != 0)
        return NULL;
    return ((struct ch_slot *)h)->tag == TAG_CH ? h : NULL;
}

static void drop(void)
{
    mrd_agent_count_drop(MRD_DROP_NCCL_POOL, 1);
}

/* The launch id for an op started on this thread under parent (a CollApi/P2pApi): the
 * thread's last launch on this communicator; else (CUDA's host-callback thread) the last
 * launch of the parent's group, if the parent is still the one NCCL meant (stopped less
 * than the reuse grace ago). Graph-captured ops replay long after their capture and have
 * no launch of their own: 0. */
static uint64_t launch_of(const struct comm_ctx *ctx, void *parent, int64_t now, int64_t *at)
{
    struct api_slot *api = as_api(parent, TAG_API);
    *at = 0;
    if (api && api->graph_captured)
        return 0;
    const struct mrd__capture_thread *t = mrd__capture_thread();
    if (t && t->nccl_ctx_id == ctx->id && t->nccl_launch_id) {
        *at = t->nccl_launch_at;
        return t->nccl_launch_id;
    }
    if (!api || !api->group)
        return 0;
    if (atomic_load_explicit(&api->state, memory_order_acquire) == SLOT_DONE &&
        now - atomic_load_explicit(&api->done_at, memory_order_relaxed) >= REUSE_GRACE_NS)
        return 0;
    *at = atomic_load_explicit(&api->group->launch_at, memory_order_relaxed);
    return atomic_load_explicit(&api->group->launch_id, memory_order_relaxed);
}

static void *op_start(const struct comm_ctx *ctx, const struct mrd_nccl_descr_v5 *d, int p2p)
{
    int64_t now = mrd_clock_now();
    struct op_slot *op = op_alloc(now);
    if (!op) {
        drop();
        return NULL;
    }
    struct mrd_nccl_op *e = &op->ev;
    memset(e, 0, sizeof(*e));
    memset(op->str, 0, sizeof(op->str));
    atomic_store_explicit(&op->children, 0, memory_order_relaxed);
    atomic_store_explicit(&op->sampled, 0, memory_order_relaxed);
    op->tag = TAG_OP;
    e->op_id = atomic_fetch_add_explicit(&next_op_id, 1, memory_order_relaxed) + 1;
    e->start = now;
    e->comm_hash = ctx->comm_hash;
    e->comm_rank = ctx->rank;
    e->comm_nranks = ctx->nranks;
    e->device = ctx->device;
    e->launch_id = launch_of(ctx, d->parent, now, &op->launch_at);
    if (!p2p) {
        const struct mrd_nccl_coll_v5 *c = &d->u.coll;
        e->seq = c->seq;
        e->count = c->count;
        e->bytes = (uint64_t)c->count * mrd__nccl_datatype_size(c->datatype);
        e->root = c->root;
        e->peer = -1;
        e->channels = c->n_channels;
        e->warps = c->n_warps;
        op->str[0] = c->func;
        op->str[1] = c->datatype;
        op->str[2] = c->algo;
        op->str[3] = c->proto;
    } else {
        const struct mrd_nccl_p2p_v5 *q = &d->u.p2p;
        e->is_p2p = 1;
        e->count = q->count;
        e->bytes = (uint64_t)q->count * mrd__nccl_datatype_size(q->datatype);
        e->root = -1;
        e->peer = q->peer;
        e->channels = q->n_channels;
        op->str[0] = q->func;
        op->str[1] = q->datatype;
    }
    return op;
}

static void op_stop(struct op_slot *op)
{
    uint32_t live = SLOT_LIVE;
    struct mrd_record r;
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_NCCL_OP;
    r.ev.nccl_op = op->ev;
    r.ev.nccl_op.end = mrd_clock_now();
    memcpy(r.str, op->str, sizeof(r.str));
    atomic_store_explicit(&op->done_at, r.ev.nccl_op.end, memory_order_relaxed);
    if (atomic_compare_exchange_strong(&op->state, &live, SLOT_DONE))
        mrd_ring_write(&r);
}

/* The op's clock sample for GPU time gpu, seen by the host at seen_at (a KernelCh
 * callback), once per op and which (SAMPLED_START or SAMPLED_END). */
static void clock_sample(struct op_slot *op, uint32_t which, int64_t gpu, int64_t seen_at)
{
    int64_t lo = op->launch_at;
    if (lo <= 0 || gpu <= 0 || seen_at < lo || op->ev.device == UINT32_MAX ||
        (atomic_fetch_or_explicit(&op->sampled, which, memory_order_relaxed) & which))
        return;
    struct mrd_record r;
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_GPU_CLOCK;
    r.ev.gpu_clock.device = op->ev.device;
    r.ev.gpu_clock.gpu_ns = gpu;
    r.ev.gpu_clock.uncertainty_ns = (uint64_t)(seen_at - lo + 1) / 2; /* covers [lo, seen_at] */
    r.ev.gpu_clock.host_ns = lo + (seen_at - lo) / 2;
    mrd_ring_write(&r);
}

static void *ch_start(const struct mrd_nccl_descr_v5 *d)
{
    struct op_slot *op = as_op(d->parent);
    struct ch_slot *c = op ? ch_alloc() : NULL;
    if (!c) {
        drop();
        return NULL;
    }
    c->tag = TAG_CH;
    c->op = op;
    atomic_fetch_add_explicit(&op->children, 1, memory_order_acq_rel);
    c->op_id = op->ev.op_id;
    c->channel = d->u.kernel_ch.channel;
    c->gpu_start = (int64_t)d->u.kernel_ch.ptimer;
    c->gpu_end = 0;
    c->host_end = 0;
    c->host_start = mrd_clock_now();
    clock_sample(op, SAMPLED_START, c->gpu_start, c->host_start);
    return c;
}

static void ch_stop(struct ch_slot *c)
{
    struct mrd_record r;
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_NCCL_CHANNEL;
    r.ev.nccl_channel.op_id = c->op_id;
    r.ev.nccl_channel.channel = c->channel;
    r.ev.nccl_channel.gpu_start = c->gpu_start;
    r.ev.nccl_channel.gpu_end = c->gpu_end >= c->gpu_start ? c->gpu_end : c->gpu_start;
    r.ev.nccl_channel.host_start = c->host_start;
    mrd_ring_write(&r);
    if (c->host_end)
        clock_sample(c->op, SAMPLED_END, c->gpu_end, c->host_end);
    atomic_fetch_sub_explicit(&c->op->children, 1, memory_order_acq_rel);
    atomic_store_explicit(&c->state, SLOT_FREE, memory_order_release);
}

static void *api_start(const struct mrd_nccl_descr_v5 *d)
{
    struct api_slot *a = api_alloc(mrd_clock_now());
    if (!a)
        return NULL;
    if (d->type == MRD_NCCL_EV_GROUP_API) {
        a->tag = TAG_GROUP;
        a->group = NULL;
        a->graph_captured = d->u.group_api.graph_captured;
        struct mrd__capture_thread *t = mrd__capture_thread();
        if (t)
            t->nccl_launch_id = 0; /* a new group: the next ops follow a new launch */
    } else {
        a->tag = TAG_API;
        a->group = as_api(d->parent, TAG_GROUP);
        a->graph_captured = d->type == MRD_NCCL_EV_COLL_API ? d->u.coll_api.graph_captured
                                                            : d->u.p2p_api.graph_captured;
    }
    atomic_store_explicit(&a->launch_id, 0, memory_order_relaxed);
    atomic_store_explicit(&a->launch_at, 0, memory_order_relaxed);
    return a;
}

static void *launch_start(const struct comm_ctx *ctx, const struct mrd_nccl_descr_v5 *d)
{
    uint64_t id = atomic_fetch_add_explicit(&next_launch_id, 1, memory_order_relaxed) + 1;
    struct api_slot *g = as_api(d->parent, TAG_GROUP);
    int64_t now = mrd_clock_now();
    if (g) {
        atomic_store_explicit(&g->launch_at, now, memory_order_relaxed);
        atomic_store_explicit(&g->launch_id, id, memory_order_relaxed);
    }
    struct mrd__capture_thread *t = mrd__capture_thread();
    if (t) {
        t->nccl_ctx_id = ctx->id;
        t->nccl_launch_id = id;
        t->nccl_launch_at = now;
    }
    mrd__cupti_extcorr_push(id);
    return (void *)&launch_token;
}

static mrd_nccl_result_t start_event_body(void *context, void **handle,
                                          struct mrd_nccl_descr_v5 *d);
static mrd_nccl_result_t stop_event_body(void *handle);

/* The sampled cost (capture.h) wraps the two callbacks NCCL makes for every event. */
static mrd_nccl_result_t start_event(void *context, void **handle, struct mrd_nccl_descr_v5 *d)
{
    int64_t c0 = mrd_agent_active() ? mrd__cost_begin(mrd__capture_thread()) : 0;
    mrd_nccl_result_t r = start_event_body(context, handle, d);
    mrd__cost_end(c0);
    return r;
}

static mrd_nccl_result_t stop_event(void *handle)
{
    int64_t c0 = handle ? mrd__cost_begin(mrd__capture_thread()) : 0;
    mrd_nccl_result_t r = stop_event_body(handle);
    mrd__cost_end(c0);
    return r;
}

static mrd_nccl_result_t start_event_body(void *context, void **handle,
                                          struct mrd_nccl_descr_v5 *d)
{
    const struct comm_ctx *ctx = context;
    *handle = NULL;
    if (!ctx || !d || !mrd_agent_active())
        return MRD_NCCL_SUCCESS;
    switch (d->type) {
    case MRD_NCCL_EV_COLL:
        if (ctx->steps) /* first: a full op pool must not hide a step boundary */
            mrd__collsteps_coll(&d->u.coll);
        *handle = op_start(ctx, d, 0);
        break;
    case MRD_NCCL_EV_P2P:
        *handle = op_start(ctx, d, 1);
        break;
    case MRD_NCCL_EV_KERNEL_CH:
        *handle = ch_start(d);
        break;
    case MRD_NCCL_EV_KERNEL_LAUNCH:
        *handle = launch_start(ctx, d);
        break;
    case MRD_NCCL_EV_GROUP_API:
    case MRD_NCCL_EV_COLL_API:
    case MRD_NCCL_EV_P2P_API:
        *handle = api_start(d);
        break;
    default: /* legacy Group, proxy, net, copy-engine events: not used */
        break;
    }
    return MRD_NCCL_SUCCESS;
}

static mrd_nccl_result_t stop_event_body(void *handle)
{
    if (!handle)
        return MRD_NCCL_SUCCESS;
    if (handle == &launch_token) {
        mrd__cupti_extcorr_pop();
        return MRD_NCCL_SUCCESS;
    }
    struct op_slot *op = as_op(handle);
    if (op) {
        op_stop(op);
        return MRD_NCCL_SUCCESS;
    }
    struct ch_slot *c = as_ch(handle);
    if (c) {
        ch_stop(c);
        return MRD_NCCL_SUCCESS;
    }
    struct api_slot *a = as_api(handle, TAG_GROUP);
    if (!a)
        a = as_api(handle, TAG_API);
    if (a) {
        uint32_t live = SLOT_LIVE;
        atomic_store_explicit(&a->done_at, mrd_clock_now(), memory_order_relaxed);
        atomic_compare_exchange_strong(&a->state, &live, SLOT_DONE);
    }
    return MRD_NCCL_SUCCESS;
}

static mrd_nccl_result_t record_event_state(void *handle, int state,
                                            union mrd_nccl_state_args *args)
{
    struct ch_slot *c;
    if (state == MRD_NCCL_STATE_KERNEL_CH_STOP && args && (c = as_ch(handle))) {
        c->gpu_end = (int64_t)args->kernel_ch.ptimer;
        c->host_end = mrd_clock_now(); /* after the GPU wrote gpu_end */
    }
    return MRD_NCCL_SUCCESS;
}

static mrd_nccl_result_t init_common(void **context, uint64_t comm_hash, const char *comm_name,
                                     int *mask, int nranks, int rank, int want_mask)
{
    *context = NULL;
    if (!mrd_agent_start()) {
        if (mask)
            *mask = 0; /* the whole process is inert: NCCL need not call us at all */
        return MRD_NCCL_SUCCESS;
    }
    mrd__capture_pin(); /* NCCL dlcloses the plugin after its last communicator */
    struct comm_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return MRD_NCCL_SUCCESS; /* this communicator goes unrecorded (NULL context) */
    int dev = mrd__cupti_current_device();
    if (dev < 0) /* CUPTI never set up here (no CUDA injection): ask the driver */
        dev = mrd__gpu_driver_device();
    if (dev >= 0)
        mrd__gpu_from_driver((uint32_t)dev); /* without CUPTI, NCCL tells the devices */
    mrd__cupti_nccl_comm(nranks);
    mrd__env_capture(); /* NCCL is loaded now: its version, and the rest if no GPU came */
    ctx->id = atomic_fetch_add(&next_ctx, 1) + 1;
    ctx->comm_hash = comm_hash;
    ctx->rank = (uint32_t)rank;
    ctx->nranks = (uint32_t)nranks;
    ctx->device = dev < 0 ? UINT32_MAX : (uint32_t)dev;
    ctx->steps = mrd__collsteps_claim(comm_hash, comm_name, nranks);
    if (mask)
        *mask = want_mask;
    *context = ctx;
    return MRD_NCCL_SUCCESS;
}

static mrd_nccl_result_t init_v5(void **context, uint64_t comm_id, int *mask, const char *comm_name,
                                 int n_nodes, int nranks, int rank, mrd_nccl_logger_t log)
{
    (void)n_nodes, (void)log;
    return init_common(context, comm_id, comm_name, mask, nranks, rank, MASK_V5);
}

static mrd_nccl_result_t finalize(void *context)
{
    free(context);
    return MRD_NCCL_SUCCESS;
}

/* v4 (NCCL 2.27): other init argument order, uint8_t type, no parentGroup. */
static mrd_nccl_result_t init_v4(void **context, int *mask, const char *comm_name,
                                 uint64_t comm_hash, int n_nodes, int nranks, int rank,
                                 mrd_nccl_logger_t log)
{
    (void)n_nodes, (void)log;
    return init_common(context, comm_hash, comm_name, mask, nranks, rank, MASK_V4);
}

static mrd_nccl_result_t start_event_v4(void *context, void **handle, struct mrd_nccl_descr_v4 *d4)
{
    struct mrd_nccl_descr_v5 d;
    *handle = NULL;
    if (!d4)
        return MRD_NCCL_SUCCESS;
    memset(&d, 0, sizeof(d));
    d.type = d4->type;
    d.parent = d4->parent;
    d.rank = d4->rank;
    switch (d4->type) {
    case MRD_NCCL_EV_COLL:
        memcpy(&d.u.coll, &d4->u.coll, sizeof(d4->u.coll));
        d.parent = NULL; /* v4's parent is the legacy Group event, not a CollApi */
        break;
    case MRD_NCCL_EV_P2P:
        memcpy(&d.u.p2p, &d4->u.p2p, sizeof(d4->u.p2p));
        d.parent = NULL;
        break;
    case MRD_NCCL_EV_KERNEL_CH:
        d.u.kernel_ch = d4->u.kernel_ch;
        break;
    default:
        return MRD_NCCL_SUCCESS;
    }
    return start_event(context, handle, &d);
}

MRD_EXPORT mrd_nccl_profiler_v6 ncclProfiler_v6 = {
    "meridian", init_v5, start_event, stop_event, record_event_state, finalize,
};

MRD_EXPORT struct mrd_nccl_profiler_v5 ncclProfiler_v5 = {
    "meridian", init_v5, start_event, stop_event, record_event_state, finalize,
};

MRD_EXPORT struct mrd_nccl_profiler_v4 ncclProfiler_v4 = {
    "meridian", init_v4, start_event_v4, stop_event, record_event_state, finalize,
};
