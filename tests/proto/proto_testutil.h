/* Helpers shared by the proto tests and the fuzz seed generator (header-only):
 * a seeded PRNG, random events of every kind (including extreme values), one fully
 * populated sample of every message type, and "decode this BATCH frame". */
#ifndef MRD_PROTO_TESTUTIL_H
#define MRD_PROTO_TESTUTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "check.h"
#include "error.h"
#include "frame.h"

/* splitmix64: deterministic for a given seed, so a failure reproduces. */
static inline uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t tu_below(uint64_t *s, uint64_t n)
{
    return n ? tu_rand(s) % n : 0;
}

/* A 64-bit value that is often small, sometimes at a boundary, sometimes anything. */
static inline uint64_t tu_u64(uint64_t *s)
{
    static const uint64_t edge[] = {0, 1, 0x7f, 0x80, 0xffffffffull, 0x7fffffffffffffffull,
                                    0x8000000000000000ull, 0xffffffffffffffffull};

    switch (tu_below(s, 4)) {
    case 0:
        return edge[tu_below(s, sizeof(edge) / sizeof(edge[0]))];
    case 1:
        return tu_rand(s);
    default:
        return tu_below(s, 100000);
    }
}

static inline uint32_t tu_u32(uint64_t *s)
{
    return (uint32_t)tu_u64(s);
}

static inline int64_t tu_i64(uint64_t *s)
{
    uint64_t v = tu_u64(s);
    int64_t r;

    memcpy(&r, &v, sizeof(r));
    return r;
}

/* A timestamp pair: mostly realistic (increasing, a few us apart), sometimes anything,
 * including end < start and wrap-around. */
static inline void tu_times(uint64_t *s, int64_t *t, int64_t *start, int64_t *end)
{
    if (tu_below(s, 8) == 0) {
        *start = tu_i64(s);
        *end = tu_i64(s);
        return;
    }
    *t += (int64_t)tu_below(s, 10000);
    *start = *t;
    *end = *t + (int64_t)tu_below(s, 20000);
}

static inline uint32_t tu_id(uint64_t *s, const uint32_t *ids, uint32_t nids)
{
    return nids == 0 || tu_below(s, 10) == 0 ? 0 : ids[tu_below(s, nids)];
}

/* A random event of a kind the hand-written cases of tu_event do not know (one added
 * through proto/kinds.h later): every field by its type; a DUR field after its start. */
#define TU_RAND_OF(x)                                                                          \
    _Generic((x), uint32_t: tu_u32(s), int32_t: (int32_t)tu_u32(s), uint64_t: tu_u64(s),      \
             int64_t: tu_i64(s))
#define TU_FILL_PLAIN(m, arg) e->m = TU_RAND_OF(e->m)
#define TU_FILL_DELTA(m, arg) e->m = TU_RAND_OF(e->m)
#define TU_FILL_STR(m, arg) e->m = tu_id(s, ids, nids)
#define TU_FILL_DUR(m, start) e->m = e->start + (int64_t)tu_below(s, 1000000)
#define TU_FILL_FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep) TU_FILL_##codec(m, arg);
#define TU_FILL_KIND(E, v, fn, T, u, bm, C, d, t_, tag)                                        \
    static inline void tu_fill_##fn(uint64_t *s, const uint32_t *ids, uint32_t nids, T *e)     \
    {                                                                                          \
        (void)ids, (void)nids;                                                                 \
        MRD__FIELDS(fn, TU_FILL_FIELD)                                                         \
    }
MRD_KINDS(TU_FILL_KIND)

static inline void tu_fill_any(uint64_t *s, int kind, const uint32_t *ids, uint32_t nids,
                               union mrd_any_event *ev)
{
    switch (kind) {
#define TU_FILL_CASE(E, v, fn, T, um, bm, C, d, t_, tag)                                       \
    case E:                                                                                    \
        tu_fill_##fn(s, ids, nids, &ev->um);                                                   \
        break;
        MRD_KINDS(TU_FILL_CASE)
    }
}

/* Fills one random event of `kind` into ev (the proto's own union of every event kind);
 * string fields take ids from ids[0..nids) or 0. */
static inline void tu_event(uint64_t *s, int kind, int64_t *t, const uint32_t *ids,
                            uint32_t nids, union mrd_any_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    switch (kind) {
    case MRD_EV_KERNEL:
        tu_times(s, t, &ev->kernel.start, &ev->kernel.end);
        ev->kernel.correlation = tu_u64(s);
        ev->kernel.device = tu_u32(s), ev->kernel.stream = tu_u32(s);
        ev->kernel.context = tu_u32(s);
        ev->kernel.name = tu_id(s, ids, nids);
        for (int i = 0; i < 3; i++)
            ev->kernel.grid[i] = tu_u32(s), ev->kernel.block[i] = tu_u32(s);
        ev->kernel.shared_bytes = tu_u32(s), ev->kernel.registers = tu_u32(s);
        ev->kernel.graph_id = tu_u32(s);
        break;
    case MRD_EV_MEMCPY:
        tu_times(s, t, &ev->memcpy.start, &ev->memcpy.end);
        ev->memcpy.correlation = tu_u64(s), ev->memcpy.bytes = tu_u64(s);
        ev->memcpy.device = tu_u32(s), ev->memcpy.stream = tu_u32(s);
        ev->memcpy.copy_kind = tu_u32(s);
        ev->memcpy.src_kind = tu_u32(s), ev->memcpy.dst_kind = tu_u32(s);
        ev->memcpy.peer_device = tu_u32(s);
        break;
    case MRD_EV_MEMSET:
        tu_times(s, t, &ev->memset.start, &ev->memset.end);
        ev->memset.correlation = tu_u64(s), ev->memset.bytes = tu_u64(s);
        ev->memset.device = tu_u32(s), ev->memset.stream = tu_u32(s), ev->memset.value = tu_u32(s);
        ev->memset.memory_kind = tu_u32(s);
        break;
    case MRD_EV_SYNC:
        tu_times(s, t, &ev->sync.start, &ev->sync.end);
        ev->sync.correlation = tu_u64(s);
        ev->sync.type = tu_u32(s), ev->sync.context = tu_u32(s), ev->sync.stream = tu_u32(s);
        break;
    case MRD_EV_API:
        tu_times(s, t, &ev->api.start, &ev->api.end);
        ev->api.correlation = tu_u64(s);
        ev->api.domain = tu_u32(s), ev->api.cbid = tu_u32(s), ev->api.thread = tu_u32(s);
        ev->api.name = tu_id(s, ids, nids);
        break;
    case MRD_EV_GRAPH:
        tu_times(s, t, &ev->graph.start, &ev->graph.end);
        ev->graph.correlation = tu_u64(s);
        ev->graph.device = tu_u32(s), ev->graph.stream = tu_u32(s), ev->graph.graph_id = tu_u32(s);
        break;
    case MRD_EV_EXTCORR:
        ev->extcorr.correlation = tu_u64(s), ev->extcorr.external_id = tu_u64(s);
        ev->extcorr.kind = tu_u32(s);
        break;
    case MRD_EV_NVTX:
        tu_times(s, t, &ev->nvtx.start, &ev->nvtx.end);
        ev->nvtx.kind = tu_u32(s), ev->nvtx.domain = tu_id(s, ids, nids);
        ev->nvtx.name = tu_id(s, ids, nids), ev->nvtx.thread = tu_u32(s);
        ev->nvtx.depth = tu_u32(s), ev->nvtx.color = tu_u32(s);
        break;
    case MRD_EV_NCCL_OP:
        ev->nccl_op.op_id = tu_u64(s);
        tu_times(s, t, &ev->nccl_op.start, &ev->nccl_op.end);
        ev->nccl_op.comm_hash = tu_rand(s), ev->nccl_op.seq = tu_u64(s);
        ev->nccl_op.count = tu_u64(s);
        ev->nccl_op.bytes = tu_u64(s), ev->nccl_op.launch_id = tu_u64(s);
        ev->nccl_op.comm_rank = tu_u32(s), ev->nccl_op.comm_nranks = tu_u32(s);
        ev->nccl_op.func = tu_id(s, ids, nids), ev->nccl_op.datatype = tu_id(s, ids, nids);
        ev->nccl_op.algo = tu_id(s, ids, nids), ev->nccl_op.proto = tu_id(s, ids, nids);
        ev->nccl_op.channels = tu_u32(s), ev->nccl_op.warps = tu_u32(s);
        ev->nccl_op.is_p2p = tu_u32(s);
        ev->nccl_op.device = tu_u32(s);
        ev->nccl_op.root = (int32_t)tu_u32(s), ev->nccl_op.peer = (int32_t)tu_u32(s);
        break;
    case MRD_EV_NCCL_CHANNEL:
        ev->nccl_channel.op_id = tu_u64(s);
        tu_times(s, t, &ev->nccl_channel.gpu_start, &ev->nccl_channel.gpu_end);
        ev->nccl_channel.host_start = tu_i64(s);
        ev->nccl_channel.channel = tu_u32(s);
        break;
    case MRD_EV_MPI:
        tu_times(s, t, &ev->mpi.start, &ev->mpi.end);
        ev->mpi.bytes = tu_u64(s), ev->mpi.call = tu_id(s, ids, nids);
        ev->mpi.comm_size = tu_u32(s), ev->mpi.thread = tu_u32(s);
        ev->mpi.peer = (int32_t)tu_u32(s), ev->mpi.tag = (int32_t)tu_u32(s);
        break;
    case MRD_EV_CLOCK:
        ev->clock.t0 = tu_i64(s), ev->clock.t1 = tu_i64(s), ev->clock.t2 = tu_i64(s);
        ev->clock.t3 = tu_i64(s);
        break;
    case MRD_EV_GPU_CLOCK:
        ev->gpu_clock.host_ns = tu_i64(s), ev->gpu_clock.gpu_ns = tu_i64(s);
        ev->gpu_clock.uncertainty_ns = tu_u64(s), ev->gpu_clock.device = tu_u32(s);
        break;
    default:
        tu_fill_any(s, kind, ids, nids, ev);
        break;
    }
}

/* The string ids ev (of `kind`) uses, its STR fields in table order, into out (room for
 * TU_MAX_STR_FIELDS); returns how many (0 ids included). From proto/kinds.h, so a kind
 * added there is covered. */
#define TU_MAX_STR_FIELDS 8
#define TU_SID_1(m) out[n++] = e->m;
#define TU_SID_0(m)
#define TU_SID_(is, m) TU_SID_##is(m)
#define TU_SID_X(is, m) TU_SID_(is, m)
#define TU_SID_FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep)                            \
    TU_SID_X(MRD__CODEC_IS_STR(codec), m)
static inline int tu_string_ids(int kind, const union mrd_any_event *ev, uint32_t *out)
{
    int n = 0;
    switch (kind) {
#define TU_SID_CASE(E, v, fn, T, um, bm, C, d, t_, tag)                                        \
    case E: {                                                                                  \
        const T *e = &ev->um;                                                                  \
        (void)e;                                                                               \
        MRD__FIELDS(fn, TU_SID_FIELD)                                                          \
        break;                                                                                 \
    }
        MRD_KINDS(TU_SID_CASE)
    }
    return n;
}

/* Appends ev as `kind` to b (mrd_batch_add_<kind>). */
static inline int tu_add(struct mrd_batch_builder *b, int kind, const union mrd_any_event *ev)
{
    return mrd_batch_add_any(b, kind, ev);
}

/* Reads the next event of `kind` from cursor c into ev (zeroed first). */
static inline int tu_next(struct mrd_batch_cursor *c, int kind, union mrd_any_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    return mrd_batch_next_any(c, kind, ev);
}

/* Size of the struct of `kind` (for memcmp of decoded against sent). */
static inline size_t tu_event_size(int kind)
{
#define TU_SIZE(E, v, fn, T, u, bm, C, d, t_, tag) [E] = sizeof(T),
    static const size_t sz[MRD_EV__COUNT] = {MRD_KINDS(TU_SIZE)};

    return sz[kind];
}

/* Parses, decodes and checks a BATCH frame; fails the test on any error. Free the result
 * with protobuf_c_message_free_unpacked(&m->base, NULL). */
static inline Meridian__V1__Batch *tu_decode_batch(const uint8_t *frame, size_t len,
                                                   uint32_t max_frame)
{
    struct mrd_frame_header h;
    ProtobufCMessage *m = NULL;
    const char *why = NULL;

    CHECK_OK(mrd_frame_header_parse(frame, len, max_frame, &h));
    CHECK_EQ(h.type, MRD_FRAME_BATCH);
    CHECK_UEQ(len, MRD_FRAME_HEADER_BYTES + (size_t)h.length);
    CHECK_OK(mrd_frame_decode(&h, frame + MRD_FRAME_HEADER_BYTES, max_frame, &m));
    if (mrd_batch_check((Meridian__V1__Batch *)m, &why) != 0)
        CHECK_FAIL_("mrd_batch_check: %s", why ? why : "?");
    return (Meridian__V1__Batch *)m;
}

/* One populated message of every non-Batch frame type (Batch frames come from the
 * builder). `big` makes the message large and repetitive so that compression pays.
 * The returned message lives in static storage until the next call. */
static inline const ProtobufCMessage *tu_sample(enum mrd_frame_type type, int big)
{
    static char text[65536];
    static uint8_t bytes32[32];
    static Meridian__V1__GpuInfo gpu[64], *gpup[64];
    static Meridian__V1__Counter cnt[16], *cntp[16];
    static Meridian__V1__Hello hello;
    static Meridian__V1__HelloReply reply;
    static Meridian__V1__ClockProbe probe;
    static Meridian__V1__ClockReply creply;
    static Meridian__V1__Ack ack;
    static Meridian__V1__Goodbye bye;
    static Meridian__V1__Error err;
    static Meridian__V1__Challenge challenge;
    static Meridian__V1__Proof proof;
    size_t tl = big ? sizeof(text) - 1 : 40;

    for (size_t i = 0; i < tl; i++)
        text[i] = "meridian profiler "[i % 18];
    text[tl] = '\0';
    for (size_t i = 0; i < sizeof(bytes32); i++)
        bytes32[i] = (uint8_t)(i * 37 + 11);
    switch (type) {
    case MRD_FRAME_HELLO:
        meridian__v1__hello__init(&hello);
        hello.protocol_version = MRD_PROTOCOL_VERSION;
        hello.run_id = "run-2026-11-03T10:00:00Z";
        hello.rank = 511, hello.local_rank = 7, hello.world_size = 512;
        hello.host = big ? text : "gpu-node-063";
        hello.pid = 4194303;
        hello.n_gpus = big ? 64 : 2;
        for (size_t i = 0; i < hello.n_gpus; i++) {
            meridian__v1__gpu_info__init(&gpu[i]);
            gpu[i].device = (uint32_t)i;
            gpu[i].uuid = "GPU-6c3b8d3e-7e4f-2a1b-9c0d-1234567890ab";
            gpu[i].pci_bus_id = "0000:19:00.0";
            gpu[i].name = "NVIDIA H200";
            gpup[i] = &gpu[i];
        }
        hello.gpus = gpup;
        hello.agent_version = "0.1.0";
        hello.role = MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK;
        hello.shard_id = 3;
        hello.agent_instance = 0xfedcba9876543210ull;
        return &hello.base;
    case MRD_FRAME_HELLO_REPLY:
        meridian__v1__hello_reply__init(&reply);
        reply.accepted = 0;
        reply.reason = big ? text : "wrong secret";
        reply.max_frame_bytes = MRD_FRAME_DEFAULT_MAX;
        reply.committed_seq = 18446744073709551615ull;
        reply.goodbye_acks = 1;
        reply.code = MRD_ERR_RANK_HELD;
        return &reply.base;
    case MRD_FRAME_CLOCK_PROBE:
        meridian__v1__clock_probe__init(&probe);
        probe.probe_id = 77;
        probe.t0 = -5;
        return &probe.base;
    case MRD_FRAME_CLOCK_REPLY:
        meridian__v1__clock_reply__init(&creply);
        creply.probe_id = 77;
        creply.t0 = -5;
        creply.t1 = 1793692800000000000ll;
        creply.t2 = 1793692800000012345ll;
        return &creply.base;
    case MRD_FRAME_ACK:
        meridian__v1__ack__init(&ack);
        ack.seq = big ? 0 : 123456789; /* big: a goodbye's Ack */
        ack.duplicate = !big;
        ack.goodbye = big;
        return &ack.base;
    case MRD_FRAME_GOODBYE:
        meridian__v1__goodbye__init(&bye);
        for (int i = 0; i < 16; i++) {
            meridian__v1__counter__init(&cnt[i]);
            cnt[i].key = (uint32_t)(i % 8 + 1);
            cnt[i].value = (uint64_t)i * 1000003u;
            cntp[i] = &cnt[i];
        }
        bye.captured = cntp;
        bye.n_captured = 8;
        bye.dropped = cntp + 8;
        bye.n_dropped = 8;
        bye.bytes_sent = 1ull << 40;
        bye.batches_sent = 100000;
        bye.batches_resent = 3;
        bye.last_seq = 100000;
        return &bye.base;
    case MRD_FRAME_ERROR:
        meridian__v1__error__init(&err);
        err.code = MRD_ERR_AUTH;
        err.message = big ? text : "missing or wrong run secret";
        return &err.base;
    case MRD_FRAME_CHALLENGE:
        meridian__v1__challenge__init(&challenge);
        challenge.nonce.data = bytes32;
        challenge.nonce.len = sizeof(bytes32);
        return &challenge.base;
    case MRD_FRAME_PROOF:
        meridian__v1__proof__init(&proof);
        proof.mac.data = bytes32;
        proof.mac.len = sizeof(bytes32);
        return &proof.base;
    default:
        return NULL;
    }
}

#endif /* MRD_PROTO_TESTUTIL_H */
