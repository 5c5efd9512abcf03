/* capture_nccl_plugin: the NCCL profiler plugin driven the way NCCL drives it.
 *
 * The tables are looked up with dlopen(RTLD_NOW | RTLD_LOCAL) + dlsym("ncclProfiler_vN") as
 * NCCL does, then called with descriptors laid out like NCCL 2.27 (v4), 2.28 (v5) and 2.29
 * (v6) fill them, in NCCL's order: GroupApi, CollApi, KernelLaunch around the launch, then
 * Coll start/stop, then (late, on another thread) KernelCh start, state 22, stop. Checked:
 * the op and channel records that reach the ring, the launch id shared by an op and its
 * kernel launch (the id pushed as CUPTI external correlation), the host-callback route
 * (op started on another thread), p2p, pool exhaustion (NULL handle, counted), the reuse
 * grace for late KernelCh events, the v4 adapter, v6 copy-engine events ignored, an
 * inert agent switching NCCL's events off, and (with a stand-in CUDA driver loaded, as
 * without CUPTI in the steady tier) the communicator's device taken from the driver and
 * registered, and the host-time clock samples that bracket an op's channel GPU times
 * between its kernel launch and the KernelCh callbacks.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "fake_agent.h"
#include "nccl_abi.h"

#ifndef CAPTURE_LIB
#error "CAPTURE_LIB (path of the capture test library) must be defined"
#endif

/* Fixed test times, far above any real CLOCK_MONOTONIC_RAW value. */
#define BASE 4000000000000000000LL

static struct mrd_nccl_profiler_v5 *v5;
static mrd_nccl_profiler_v6 *v6;
static struct mrd_nccl_profiler_v4 *v4;

static void load_tables(void)
{
    void *lib = dlopen(CAPTURE_LIB, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    v5 = dlsym(lib, "ncclProfiler_v5");
    v6 = dlsym(lib, "ncclProfiler_v6");
    v4 = dlsym(lib, "ncclProfiler_v4");
    CHECK(v5 && v6 && v4);
    CHECK_STREQ(v5->name, "meridian");
    CHECK_STREQ(v4->name, "meridian");
}

static struct mrd_record take_one(uint32_t kind)
{
    struct mrd_record r;
    CHECK_EQ(fake_ring_count(), 1);
    CHECK_EQ(fake_ring_take(&r, 1), 1);
    CHECK_EQ(r.kind, kind);
    return r;
}

static void *start(void *ctx, struct mrd_nccl_descr_v5 *d)
{
    void *h = (void *)1;
    CHECK_EQ(v5->start_event(ctx, &h, d), MRD_NCCL_SUCCESS);
    return h;
}

static struct mrd_nccl_descr_v5 coll_descr(void *parent, uint64_t seq)
{
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.parent = parent;
    d.rank = 1;
    d.u.coll.seq = seq;
    d.u.coll.func = "AllReduce";
    d.u.coll.count = 1 << 20;
    d.u.coll.root = 0;
    d.u.coll.datatype = "ncclFloat32";
    d.u.coll.n_channels = 24;
    d.u.coll.n_warps = 16;
    d.u.coll.algo = "RING";
    d.u.coll.proto = "SIMPLE";
    return d;
}

/* The whole sequence NCCL 2.28 runs for one all-reduce, on this thread. */
static void test_v5_collective(void *ctx)
{
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    void *group = start(ctx, &d);
    CHECK(group != NULL);

    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL_API;
    d.parent = group;
    d.u.coll_api.func = "AllReduce";
    void *coll_api = start(ctx, &d);
    CHECK(coll_api != NULL);
    CHECK_EQ(v5->stop_event(coll_api), 0);

    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_LAUNCH;
    d.parent = group;
    void *launch = start(ctx, &d);
    CHECK(launch != NULL);
    CHECK_EQ(v5->stop_event(launch), 0);

    fake_clock_set(BASE + 1000000);
    d = coll_descr(coll_api, 41);
    void *op = start(ctx, &d);
    CHECK(op != NULL);
    CHECK_EQ(*(uint64_t *)op != 0, 1); /* handles start with a non-zero 64-bit tag */
    fake_clock_set(BASE + 1003000);
    CHECK_EQ(v5->stop_event(op), 0);
    struct mrd_record r = take_one(MRD_EV_NCCL_OP);
    const struct mrd_nccl_op *e = &r.ev.nccl_op;
    CHECK(e->op_id != 0);
    CHECK_EQ(e->start, BASE + 1000000);
    CHECK_EQ(e->end, BASE + 1003000);
    CHECK_UEQ(e->comm_hash, 0xfeedface12345678ULL);
    CHECK_EQ(e->comm_rank, 1);
    CHECK_EQ(e->comm_nranks, 4);
    CHECK_EQ(e->seq, 41);
    CHECK_EQ(e->count, 1 << 20);
    CHECK_EQ(e->bytes, 4 << 20);
    CHECK_EQ(e->root, 0);
    CHECK_EQ(e->peer, -1);
    CHECK_EQ(e->channels, 24);
    CHECK_EQ(e->warps, 16);
    CHECK_EQ(e->is_p2p, 0);
    CHECK_UEQ(e->device, 0xFFFFFFFFu); /* CUPTI not owned in this test: unknown device */
    CHECK(e->launch_id != 0);
    CHECK_STREQ(r.str[0], "AllReduce");
    CHECK_STREQ(r.str[1], "ncclFloat32");
    CHECK_STREQ(r.str[2], "RING");
    CHECK_STREQ(r.str[3], "SIMPLE");
    uint64_t op_id = e->op_id, launch_id = e->launch_id;

    /* KernelCh arrives after the op stopped, on NCCL's proxy thread, with GPU timers. */
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_CH;
    d.parent = op;
    d.u.kernel_ch.channel = 3;
    d.u.kernel_ch.ptimer = 777000111;
    fake_clock_set(BASE + 1009000);
    void *ch = start(ctx, &d);
    CHECK(ch != NULL);
    union mrd_nccl_state_args a;
    memset(&a, 0, sizeof(a));
    a.kernel_ch.ptimer = 777004111;
    CHECK_EQ(v5->record_event_state(ch, MRD_NCCL_STATE_KERNEL_CH_STOP, &a), 0);
    CHECK_EQ(fake_ring_count(), 0); /* channel records are written at their stop */
    CHECK_EQ(v5->stop_event(ch), 0);
    r = take_one(MRD_EV_NCCL_CHANNEL);
    CHECK_UEQ(r.ev.nccl_channel.op_id, op_id);
    CHECK_EQ(r.ev.nccl_channel.channel, 3);
    CHECK_EQ(r.ev.nccl_channel.gpu_start, 777000111);
    CHECK_EQ(r.ev.nccl_channel.gpu_end, 777004111);
    CHECK_EQ(r.ev.nccl_channel.host_start, BASE + 1009000);
    CHECK_EQ(v5->stop_event(group), 0);

    /* A second group launches again: a new, larger launch id for its op. */
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    group = start(ctx, &d);
    d.type = MRD_NCCL_EV_COLL_API;
    d.parent = group;
    coll_api = start(ctx, &d);
    v5->stop_event(coll_api);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_LAUNCH;
    d.parent = group;
    launch = start(ctx, &d);
    v5->stop_event(launch);
    d = coll_descr(coll_api, 42);
    op = start(ctx, &d);
    v5->stop_event(op);
    r = take_one(MRD_EV_NCCL_OP);
    CHECK_EQ(r.ev.nccl_op.seq, 42);
    CHECK(r.ev.nccl_op.launch_id > launch_id);
    CHECK(r.ev.nccl_op.op_id > op_id);
    v5->stop_event(group);
}

struct cb_arg {
    void *ctx, *coll_api;
    uint64_t launch_id;
};

static void *host_callback_thread(void *p)
{
    struct cb_arg *arg = p;
    struct mrd_nccl_descr_v5 d = coll_descr(arg->coll_api, 7);
    void *op = start(arg->ctx, &d);
    CHECK(op != NULL);
    v5->stop_event(op);
    struct mrd_record r = take_one(MRD_EV_NCCL_OP);
    arg->launch_id = r.ev.nccl_op.launch_id;
    return NULL;
}

/* Graph-captured plans run Coll start/stop from CUDA's host-callback thread: the launch id
 * comes through the CollApi's GroupApi, where the launch recorded it. */
static void test_v5_host_callback(void *ctx)
{
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    void *group = start(ctx, &d);
    d.type = MRD_NCCL_EV_COLL_API;
    d.parent = group;
    void *coll_api = start(ctx, &d);
    v5->stop_event(coll_api);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_LAUNCH;
    d.parent = group;
    void *launch = start(ctx, &d);
    v5->stop_event(launch);
    v5->stop_event(group);

    /* The launch id this thread just used, read back through an op on this thread. */
    d = coll_descr(coll_api, 6);
    void *op = start(ctx, &d);
    v5->stop_event(op);
    uint64_t here = take_one(MRD_EV_NCCL_OP).ev.nccl_op.launch_id;
    CHECK(here != 0);

    struct cb_arg arg = {ctx, coll_api, 0};
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, host_callback_thread, &arg));
    CHECK_OK(pthread_join(t, NULL));
    CHECK_UEQ(arg.launch_id, here);
}

static void test_v5_p2p(void *ctx)
{
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_P2P;
    d.u.p2p.func = "Send";
    d.u.p2p.count = 256;
    d.u.p2p.datatype = "ncclBfloat16";
    d.u.p2p.peer = 2;
    d.u.p2p.n_channels = 2;
    void *op = start(ctx, &d);
    CHECK(op != NULL);
    v5->stop_event(op);
    struct mrd_record r = take_one(MRD_EV_NCCL_OP);
    CHECK_EQ(r.ev.nccl_op.is_p2p, 1);
    CHECK_EQ(r.ev.nccl_op.peer, 2);
    CHECK_EQ(r.ev.nccl_op.root, -1);
    CHECK_EQ(r.ev.nccl_op.seq, 0); /* p2p has no sequence number */
    CHECK_EQ(r.ev.nccl_op.count, 256);
    CHECK_EQ(r.ev.nccl_op.bytes, 512);
    CHECK_EQ(r.ev.nccl_op.channels, 2);
    CHECK_STREQ(r.str[0], "Send");
    CHECK_STREQ(r.str[1], "ncclBfloat16");
    CHECK(r.str[2] == NULL && r.str[3] == NULL);
}

/* Fixed pools: the op pool holds MRD_NCCL_OP_SLOTS live ops; one more gets a NULL handle
 * and is counted; a stopped op's slot is reused only after the grace period and once no
 * KernelCh child is in flight. Claims probe a window that moves one slot per attempt, so
 * finding the single free slot of an otherwise full pool takes up to OP_SLOTS attempts. */
static size_t attempts_until_claim(void *ctx, struct mrd_nccl_descr_v5 *d, void **got, size_t max)
{
    size_t i = 0;
    *got = NULL;
    while (i < max && !(*got = start(ctx, d)))
        i++;
    return i;
}

static void test_pool_exhaustion(void *ctx)
{
    static void *live[MRD_NCCL_OP_SLOTS];
    const int64_t t = BASE + 1000000000000LL; /* long after every earlier op */
    const size_t sweep = MRD_NCCL_OP_SLOTS + 32;
    fake_clock_set(t);
    uint64_t dropped = fake_dropped(MRD_DROP_NCCL_POOL);
    struct mrd_nccl_descr_v5 d = coll_descr(NULL, 1);
    size_t n = 0;
    for (; n < MRD_NCCL_OP_SLOTS; n++) {
        live[n] = start(ctx, &d);
        if (!live[n])
            break;
    }
    CHECK_EQ(n, MRD_NCCL_OP_SLOTS);
    CHECK(start(ctx, &d) == NULL);
    CHECK_UEQ(fake_dropped(MRD_DROP_NCCL_POOL), dropped + 1);

    /* A KernelCh whose op was dropped (NULL parent) is lost too, and counted. */
    struct mrd_nccl_descr_v5 k;
    memset(&k, 0, sizeof(k));
    k.type = MRD_NCCL_EV_KERNEL_CH;
    CHECK(start(ctx, &k) == NULL);
    CHECK_UEQ(fake_dropped(MRD_DROP_NCCL_POOL), dropped + 2);

    /* Stop one op: within the grace period its slot is never handed out ... */
    v5->stop_event(live[0]);
    uint64_t first_id = take_one(MRD_EV_NCCL_OP).ev.nccl_op.op_id;
    void *got;
    CHECK_EQ(attempts_until_claim(ctx, &d, &got, sweep), sweep);
    CHECK_UEQ(fake_dropped(MRD_DROP_NCCL_POOL), dropped + 2 + sweep);
    /* ... a late KernelCh still finds the stopped op ... */
    k.parent = live[0];
    void *ch = start(ctx, &k);
    CHECK(ch != NULL);
    /* ... and while that child is in flight, not even after the grace period. */
    fake_clock_set(t + 25000000LL);
    CHECK_EQ(attempts_until_claim(ctx, &d, &got, sweep), sweep);
    v5->stop_event(ch);
    struct mrd_record r = take_one(MRD_EV_NCCL_CHANNEL);
    CHECK_UEQ(r.ev.nccl_channel.op_id, first_id);
    /* Child done and grace over: the one free slot is found, and it is that op's slot. */
    size_t tries = attempts_until_claim(ctx, &d, &got, sweep);
    CHECK(tries < sweep);
    CHECK(got == live[0]);
    live[0] = got;
    for (size_t i = 0; i < n; i++)
        v5->stop_event(live[i]);
    CHECK_EQ(fake_ring_count(), n);
    static struct mrd_record drain[MRD_NCCL_OP_SLOTS];
    CHECK_EQ(fake_ring_take(drain, n), n);
    for (size_t i = 1; i < n; i++)
        CHECK(drain[i].ev.nccl_op.op_id != drain[i - 1].ev.nccl_op.op_id);
    fake_clock_set(t + 60000000LL); /* past the grace: the pool is free again */
    void *op = start(ctx, &d);
    CHECK(op != NULL);
    v5->stop_event(op);
    (void)take_one(MRD_EV_NCCL_OP);
}

static void test_bad_handles(void *ctx)
{
    uint64_t junk[8] = {0};
    CHECK_EQ(v5->stop_event(NULL), 0);
    CHECK_EQ(v5->stop_event(junk), 0);
    CHECK_EQ(v5->record_event_state(junk, MRD_NCCL_STATE_KERNEL_CH_STOP, NULL), 0);
    CHECK_EQ(v5->record_event_state(NULL, 23, NULL), 0);
    /* Events meridian does not use get a NULL handle and write nothing. */
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    uint64_t unused[] = {MRD_NCCL_EV_GROUP, MRD_NCCL_EV_PROXY_OP, MRD_NCCL_EV_PROXY_STEP,
                         MRD_NCCL_EV_PROXY_CTRL, MRD_NCCL_EV_NET_PLUGIN};
    for (size_t i = 0; i < sizeof(unused) / sizeof(unused[0]); i++) {
        d.type = unused[i];
        CHECK(start(ctx, &d) == NULL);
    }
    /* NULL context (a communicator we could not set up) records nothing. */
    d = coll_descr(NULL, 3);
    CHECK(start(NULL, &d) == NULL);
    CHECK_EQ(fake_ring_count(), 0);
}

static void test_v6(void)
{
    void *ctx = NULL;
    int mask = 0;
    CHECK_EQ(v6->init(&ctx, 77, &mask, "c6", 1, 2, 0, NULL), 0);
    CHECK(ctx != NULL);
    CHECK(mask & MRD_NCCL_EV_KERNEL_LAUNCH);
    CHECK_EQ(mask & (MRD_NCCL_EV_CE_COLL | MRD_NCCL_EV_CE_SYNC | MRD_NCCL_EV_CE_BATCH), 0);
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_CE_COLL;
    d.u.ce_coll.func = "AllGather";
    void *h = (void *)1;
    CHECK_EQ(v6->start_event(ctx, &h, &d), 0);
    CHECK(h == NULL);
    d = coll_descr(NULL, 9);
    CHECK_EQ(v6->start_event(ctx, &h, &d), 0);
    CHECK(h != NULL);
    CHECK_EQ(v6->stop_event(h), 0);
    struct mrd_record r = take_one(MRD_EV_NCCL_OP);
    CHECK_UEQ(r.ev.nccl_op.comm_hash, 77);
    CHECK_EQ(r.ev.nccl_op.comm_nranks, 2);
    CHECK_EQ(r.ev.nccl_op.seq, 9);
    CHECK_EQ(v6->finalize(ctx), 0);
}

/* NCCL 2.27: init(ctx, mask, name, hash, ...), 8-bit type, v4 coll layout, no launches. */
static void test_v4(void)
{
    void *ctx = NULL;
    int mask = 0;
    CHECK_EQ(v4->init(&ctx, &mask, "c4", 0xabcdef, 1, 8, 5, NULL), 0);
    CHECK(ctx != NULL);
    CHECK_EQ(mask, MRD_NCCL_EV_COLL | MRD_NCCL_EV_P2P | MRD_NCCL_EV_KERNEL_CH);
    struct mrd_nccl_descr_v4 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.parent = (void *)0x1234; /* the legacy Group event: not ours, must not be touched */
    d.rank = 5;
    d.u.coll.seq = 300;
    d.u.coll.func = "ReduceScatter";
    d.u.coll.count = 1000;
    d.u.coll.root = 0;
    d.u.coll.datatype = "ncclInt64";
    d.u.coll.n_channels = 8;
    d.u.coll.n_warps = 8;
    d.u.coll.algo = "RING";
    d.u.coll.proto = "LL128";
    void *op = NULL;
    CHECK_EQ(v4->start_event(ctx, &op, &d), 0);
    CHECK(op != NULL);
    struct mrd_nccl_descr_v4 k;
    memset(&k, 0, sizeof(k));
    k.type = MRD_NCCL_EV_KERNEL_CH;
    k.parent = op;
    k.u.kernel_ch.channel = 7;
    k.u.kernel_ch.ptimer = 100;
    void *ch = NULL;
    CHECK_EQ(v4->start_event(ctx, &ch, &k), 0);
    CHECK(ch != NULL);
    union mrd_nccl_state_args a = {.kernel_ch = {250}};
    CHECK_EQ(v4->record_event_state(ch, MRD_NCCL_STATE_KERNEL_CH_STOP, &a), 0);
    CHECK_EQ(v4->stop_event(op), 0);
    struct mrd_record r = take_one(MRD_EV_NCCL_OP);
    CHECK_UEQ(r.ev.nccl_op.comm_hash, 0xabcdef);
    CHECK_EQ(r.ev.nccl_op.comm_rank, 5);
    CHECK_EQ(r.ev.nccl_op.comm_nranks, 8);
    CHECK_EQ(r.ev.nccl_op.seq, 300);
    CHECK_EQ(r.ev.nccl_op.bytes, 8000);
    CHECK_EQ(r.ev.nccl_op.channels, 8);
    CHECK_EQ(r.ev.nccl_op.launch_id, 0);
    CHECK_STREQ(r.str[0], "ReduceScatter");
    CHECK_STREQ(r.str[3], "LL128");
    uint64_t op_id = r.ev.nccl_op.op_id;
    CHECK_EQ(v4->stop_event(ch), 0);
    r = take_one(MRD_EV_NCCL_CHANNEL);
    CHECK_UEQ(r.ev.nccl_channel.op_id, op_id);
    CHECK_EQ(r.ev.nccl_channel.channel, 7);
    CHECK_EQ(r.ev.nccl_channel.gpu_end - r.ev.nccl_channel.gpu_start, 150);
    /* v4 Group events (type 1) are not used. */
    d.type = MRD_NCCL_EV_GROUP;
    CHECK_EQ(v4->start_event(ctx, &op, &d), 0);
    CHECK(op == NULL);
    CHECK_EQ(v4->finalize(ctx), 0);
}

static void test_datatypes(void)
{
    CHECK_EQ(mrd__nccl_datatype_size("ncclInt8"), 1);
    CHECK_EQ(mrd__nccl_datatype_size("ncclUint8"), 1);
    CHECK_EQ(mrd__nccl_datatype_size("ncclFloat16"), 2);
    CHECK_EQ(mrd__nccl_datatype_size("ncclBfloat16"), 2);
    CHECK_EQ(mrd__nccl_datatype_size("ncclInt32"), 4);
    CHECK_EQ(mrd__nccl_datatype_size("ncclUint32"), 4);
    CHECK_EQ(mrd__nccl_datatype_size("ncclFloat32"), 4);
    CHECK_EQ(mrd__nccl_datatype_size("ncclInt64"), 8);
    CHECK_EQ(mrd__nccl_datatype_size("ncclFloat64"), 8);
    CHECK_EQ(mrd__nccl_datatype_size("ncclFloat8e4m3"), 1);
    CHECK_EQ(mrd__nccl_datatype_size("ncclFloat8e5m2"), 1);
    CHECK_EQ(mrd__nccl_datatype_size("Unknown"), 0);
    CHECK_EQ(mrd__nccl_datatype_size(NULL), 0);
}

static void test_inert(void)
{
    fake_set_active(0);
    void *ctx = (void *)1;
    int mask = 12345;
    CHECK_EQ(v5->init(&ctx, 1, &mask, "x", 1, 2, 0, NULL), 0);
    CHECK(ctx == NULL);
    CHECK_EQ(mask, 0);
    fake_set_active(1);
}

/* Takes every record in the ring; returns how many of kind `kind` went into out[]. */
static size_t take_kind(uint32_t kind, struct mrd_record *out, size_t max)
{
    struct mrd_record all[16];
    size_t n = fake_ring_take(all, 16), k = 0;
    for (size_t i = 0; i < n; i++)
        if (all[i].kind == kind && k < max)
            out[k++] = all[i];
    return k;
}

/* A sample's interval [host - u, host + u] must hold [lo, hi] (the host times that bracket
 * its GPU time) and be at most 1 ns wider. */
static void check_sample(const struct mrd_record *r, int64_t gpu, int64_t lo, int64_t hi)
{
    const struct mrd_gpu_clock_sample *g = &r->ev.gpu_clock;
    CHECK_EQ(g->device, 2);
    CHECK_EQ(g->gpu_ns, gpu);
    CHECK_LE(g->host_ns - (int64_t)g->uncertainty_ns, lo);
    CHECK_GE(g->host_ns + (int64_t)g->uncertainty_ns, hi);
    CHECK_LE(2 * (int64_t)g->uncertainty_ns, hi - lo + 1);
}

static void test_driver_device_and_clock_samples(void)
{
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
    CHECK(cuda != NULL);
    void *ctx = NULL;
    int mask = 0;
    CHECK_EQ(v5->init(&ctx, 0x1234ULL, &mask, "dev2", 1, 2, 0, NULL), 0);
    struct fake_gpu g[4];
    CHECK_EQ(fake_gpus(g, 4), 1); /* registered from the driver: Hello and NVML sampler */
    CHECK_EQ(g[0].device, 2);
    CHECK_STREQ(g[0].pci, "0000:9A:00.0");
    CHECK_STREQ(g[0].name, "Fake H200");
    CHECK_STREQ(g[0].uuid, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");

    const int64_t T0 = BASE + 1000000000000000LL, /* after every earlier test's times */
        G0 = 1796021813673207712LL;
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    void *group = start(ctx, &d);
    d.type = MRD_NCCL_EV_COLL_API;
    d.parent = group;
    void *coll_api = start(ctx, &d);
    v5->stop_event(coll_api);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_LAUNCH;
    d.parent = group;
    fake_clock_set(T0); /* the launch: nothing on the GPU can start before this */
    void *launch = start(ctx, &d);
    fake_clock_set(T0 + 4000);
    v5->stop_event(launch);
    fake_clock_set(T0 + 6000);
    d = coll_descr(coll_api, 7);
    void *op = start(ctx, &d);
    v5->stop_event(op);
    struct mrd_record r = take_one(MRD_EV_NCCL_OP);
    CHECK_EQ(r.ev.nccl_op.device, 2);

    /* two channels start; the first callback (at T0 + 50 us) gives the op's start sample */
    void *ch[2];
    for (int c = 0; c < 2; c++) {
        memset(&d, 0, sizeof(d));
        d.type = MRD_NCCL_EV_KERNEL_CH;
        d.parent = op;
        d.u.kernel_ch.channel = (uint8_t)c;
        d.u.kernel_ch.ptimer = (uint64_t)(G0 + c * 300);
        fake_clock_set(T0 + 50000 + c * 10000);
        ch[c] = start(ctx, &d);
        CHECK(ch[c] != NULL);
    }
    struct mrd_record s[4];
    CHECK_EQ(take_kind(MRD_EV_GPU_CLOCK, s, 4), 1);
    check_sample(&s[0], G0, T0, T0 + 50000);

    /* channel 1 stops first: its state callback (T0 + 80 us, not the later stopEvent)
     * bounds its GPU end; channel 0's stop adds no second end sample */
    union mrd_nccl_state_args a;
    memset(&a, 0, sizeof(a));
    a.kernel_ch.ptimer = (uint64_t)(G0 + 20000);
    fake_clock_set(T0 + 80000);
    v5->record_event_state(ch[1], MRD_NCCL_STATE_KERNEL_CH_STOP, &a);
    fake_clock_set(T0 + 95000);
    v5->stop_event(ch[1]);
    CHECK_EQ(fake_ring_count(), 2); /* the channel record and the end sample */
    CHECK_EQ(take_kind(MRD_EV_GPU_CLOCK, s, 4), 1);
    check_sample(&s[0], G0 + 20000, T0, T0 + 80000);
    a.kernel_ch.ptimer = (uint64_t)(G0 + 21000);
    fake_clock_set(T0 + 99000);
    v5->record_event_state(ch[0], MRD_NCCL_STATE_KERNEL_CH_STOP, &a);
    v5->stop_event(ch[0]);
    CHECK_EQ(take_kind(MRD_EV_GPU_CLOCK, s, 4), 0);
    v5->stop_event(group);

    /* a group whose op has no kernel launch of its own (as when captured in a graph): its
     * channels give no sample (no lower host bound) */
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    group = start(ctx, &d);
    d.type = MRD_NCCL_EV_COLL_API;
    d.parent = group;
    coll_api = start(ctx, &d);
    v5->stop_event(coll_api);
    d = coll_descr(coll_api, 8);
    op = start(ctx, &d);
    v5->stop_event(op);
    take_one(MRD_EV_NCCL_OP);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_CH;
    d.parent = op;
    d.u.kernel_ch.ptimer = (uint64_t)(G0 + 900000);
    fake_clock_set(T0 + 1000000);
    void *c2 = start(ctx, &d);
    a.kernel_ch.ptimer = (uint64_t)(G0 + 950000);
    v5->record_event_state(c2, MRD_NCCL_STATE_KERNEL_CH_STOP, &a);
    v5->stop_event(c2);
    CHECK_EQ(take_kind(MRD_EV_GPU_CLOCK, s, 4), 0);
    v5->stop_event(group);
    CHECK_EQ(v5->finalize(ctx), 0);
}

int main(void)
{
    fake_reset();
    fake_clock_set(BASE);
    load_tables();
    test_datatypes();

    void *ctx = NULL;
    int mask = 0;
    CHECK_EQ(fake_env_records(), 0);
    CHECK_EQ(v5->init(&ctx, 0xfeedface12345678ULL, &mask, "world", 1, 4, 1, NULL), 0);
    CHECK(ctx != NULL);
    size_t env = fake_env_records(); /* the fingerprint comes with the first communicator: */
    CHECK(env >= 1);                 /* the host name at least (no CUDA, NCCL or MPI here) */
    CHECK_EQ(mask, MRD_NCCL_EV_COLL | MRD_NCCL_EV_P2P | MRD_NCCL_EV_KERNEL_CH |
                       MRD_NCCL_EV_KERNEL_LAUNCH | MRD_NCCL_EV_GROUP_API | MRD_NCCL_EV_COLL_API |
                       MRD_NCCL_EV_P2P_API);
    test_v5_collective(ctx);
    test_v5_host_callback(ctx);
    test_v5_p2p(ctx);
    test_bad_handles(ctx);
    test_pool_exhaustion(ctx);
    CHECK_EQ(v5->finalize(ctx), 0);
    test_v6();
    CHECK_EQ(fake_env_records(), env); /* once per process, not per communicator */
    test_v4();
    test_inert();
    test_driver_device_and_clock_samples(); /* last: the stand-in driver stays loaded */
    printf("capture_nccl_plugin: ok\n");
    return 0;
}
