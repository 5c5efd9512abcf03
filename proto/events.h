/* meridian event records: the in-memory form of every event kind that crosses the wire.
 *
 * The same structs are produced by the agent (from CUPTI / NCCL / NVTX / MPI), fed to
 * the batch builder (proto/batch.h), produced again by the batch decoder in the
 * aggregator, and written by the store. One struct per column group of meridian.proto.
 *
 * Units: host times (start, end, t0, t3, host_*) are the agent's local clock
 * (CLOCK_MONOTONIC_RAW ns); t1/t2 are the aggregator's global timebase; gpu_* are raw GPU
 * timer ns. String fields are uint32 ids local to one (run, rank): 0 means "none"; the
 * builder hands them out (mrd_batch_builder_intern) and batches define them.
 */
#ifndef MRD_EVENTS_H
#define MRD_EVENTS_H

#include <stdint.h>

#include "kinds.h"

struct mrd_kernel {
    int64_t start, end;
    uint64_t correlation;
    uint32_t device, stream, context, name;
    uint32_t grid[3], block[3];
    uint32_t shared_bytes, registers, graph_id;
};

struct mrd_memcpy {
    int64_t start, end;
    uint64_t correlation, bytes;
    uint32_t device, stream, copy_kind, src_kind, dst_kind, peer_device;
};

struct mrd_memset {
    int64_t start, end;
    uint64_t correlation, bytes;
    uint32_t device, stream, value, memory_kind;
};

struct mrd_sync {
    int64_t start, end;
    uint64_t correlation;
    uint32_t type, context, stream;
};

enum { MRD_API_RUNTIME = 1, MRD_API_DRIVER = 2 };
struct mrd_api {
    int64_t start, end;
    uint64_t correlation;
    uint32_t domain, cbid, thread, name;
};

struct mrd_graph {
    int64_t start, end;
    uint64_t correlation;
    uint32_t device, stream, graph_id;
};

struct mrd_extcorr {
    uint64_t correlation, external_id;
    uint32_t kind;
};

enum { MRD_NVTX_PUSHPOP = 1, MRD_NVTX_STARTEND = 2, MRD_NVTX_MARK = 3 };
struct mrd_nvtx {
    int64_t start, end; /* end == start for marks */
    uint32_t kind, domain, name, thread, depth, color;
};

struct mrd_nccl_op {
    uint64_t op_id;
    int64_t start, end;
    uint64_t comm_hash, seq, count, bytes, launch_id;
    uint32_t comm_rank, comm_nranks, func, datatype, algo, proto, channels, warps, is_p2p,
        device;
    int32_t root, peer;
};

struct mrd_nccl_channel {
    uint64_t op_id;
    int64_t gpu_start, gpu_end, host_start;
    uint32_t channel;
};

struct mrd_mpi {
    int64_t start, end;
    uint64_t bytes;
    uint32_t call, comm_size, thread;
    int32_t peer, tag;
};

struct mrd_clock_sample {
    int64_t t0, t1, t2, t3;
};

struct mrd_gpu_clock_sample {
    int64_t host_ns, gpu_ns;
    uint64_t uncertainty_ns;
    uint32_t device;
};

/* Event kinds (values equal meridian.proto's EventKind; the list is proto/kinds.table). */
#define MRD__KIND_ENUM(E, v, fn, T, u, bm, C, d, t, tag) E = v,
enum mrd_event_kind {
    MRD_KINDS(MRD__KIND_ENUM)
    MRD_EV__COUNT
};

/* Drop reasons, in the order of their values (1, 2, ...: meridian.proto's DropReason):
 * X(ID, name) makes MRD_DROP_<ID> and its name (mrd_drop_reason_name), which the database
 * and the reports use: never rename one. An older aggregator stores unknown_N for a
 * reason it does not know. */
#define MRD_DROP_REASONS(X)                                                                        \
    X(RING_FULL, ring_full)                                                                        \
    X(CUPTI_HOST, cupti_host)                                                                      \
    X(CUPTI_DEVICE, cupti_device)                                                                  \
    X(QUEUE_FULL, queue_full)                                                                      \
    X(NCCL_POOL, nccl_pool)                                                                        \
    X(UNSENT_AT_EXIT, unsent_at_exit)                                                              \
    X(TOO_LARGE, too_large)                                                                        \
    X(NO_THREAD_SLOT, no_thread_slot)                                                              \
    X(UNENCODABLE, unencodable)                                                                    \
    X(NVTX_CAP, nvtx_cap)
#define MRD__DROP_ENUM(ID, name) MRD_DROP_##ID,
enum mrd_drop_reason {
    MRD__DROP_NONE, /* 0: no reason; the first one is 1 */
    MRD_DROP_REASONS(MRD__DROP_ENUM)
    MRD_DROP__COUNT
};

/* Stable lower-case names ("kernel", "ring_full", ...) for reports and the database.
 * Return "unknown" for values out of range. */
const char *mrd_event_kind_name(int kind);
const char *mrd_drop_reason_name(int reason);

/* Room for one event of any kind: the agent's ring records, mrd_batch_add_any /
 * mrd_batch_next_any (batch.h), replay's canonical events. */
#define MRD__KIND_UNION(E, v, fn, T, u, bm, C, d, t, tag) T u;
union mrd_any_event {
    MRD_KINDS(MRD__KIND_UNION)
};

#endif
