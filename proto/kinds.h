/* meridian event kinds: one table that every per-kind piece of code is generated from.
 *
 * Each event kind is one line of MRD_KINDS and one field list MRD__F_<fn>. From them come:
 * the kind enum and union mrd_any_event (events.h), the batch builder's mrd_batch_add_<fn>
 * and the reader's column layout and mrd_batch_next_<fn> (proto/batch*.c), the store's
 * CREATE TABLE, INSERT text and binds (aggregator/store/write.c), the merge's table and
 * string-column classification (launcher/merge_check.c), the canonical hash and text
 * (launcher/replay/canon.c) and the verifier's row reader (tests/integration/verify.c).
 * test_proto_kinds checks every field against the protobuf-c descriptors (name, number,
 * wire type) and every SQL column against the database the store creates.
 *
 * Kind: X(ENUM, value, fn, struct type, union member / stable name, Batch member,
 *         Columns message type, its descriptor, SQL table, canonical text tag)
 *   value equals meridian.proto's EventKind; fn names mrd_batch_add_<fn>/next_<fn>; the
 *   union member is also the kind's stable name (mrd_event_kind_name, agent counters).
 * Field: F(K, member, SQL column, SQL class, wire number, wire column, codec, arg, canonical
 *         position, canonical text separator), listed in the SQL table's column order
 *   (column 1 is always rank). K is the kind's fn, passed through to the consumer.
 *   SQL class: INT ("INTEGER"), NN ("INTEGER NOT NULL"), GNN (NOT NULL, on the aggregator's
 *   global timebase: `meridian merge` shifts it), P2PNULL (INTEGER, stored NULL and hashed
 *   0 for a point-to-point operation: nccl_ops.seq).
 *   codec, how the value travels: PLAIN (as is), STR (a string id: mapped through strings
 *   in the database, hashed as its value), DELTA (difference to the previous event's value
 *   in the batch; arg = running slot 0 or 1), DUR (end time sent as end - arg, arg being
 *   the start member listed before it).
 *   The canonical position orders the fields in the canonical hash and text (canon.h);
 *   the separator ('|' or ',') precedes the field in the text.
 *
 * Adding a field: a line here, the field in meridian.proto (a new field number at the end
 * of its Columns message), the member in the kind's struct (events.h for the kinds below
 * up to gpu_clock, beside the list here for later ones) and the capture code that fills it.
 * A new SQL column of an existing table needs a store migration (store.c) for databases
 * that already hold the table.
 * Adding a kind: its struct and field list here, a line in MRD_KINDS, its Columns message,
 * Batch field and EventKind value in meridian.proto, and the capture code that produces it:
 * three files beside tests and documentation. Its table appears in every database the
 * store opens (CREATE TABLE IF NOT EXISTS, like any new table within a schema version).
 */
#ifndef MRD_KINDS_H
#define MRD_KINDS_H

#include <stdint.h>

/* clang-format off */
#define MRD_KINDS(X)                                                                               \
    X(MRD_EV_KERNEL, 1, kernel, struct mrd_kernel, kernel, kernels,                                \
      Meridian__V1__KernelColumns, meridian__v1__kernel_columns__descriptor, "kernels", "K")     \
    X(MRD_EV_MEMCPY, 2, memcpy, struct mrd_memcpy, memcpy, memcpys,                                \
      Meridian__V1__MemcpyColumns, meridian__v1__memcpy_columns__descriptor, "memcpys", "C")     \
    X(MRD_EV_MEMSET, 3, memset, struct mrd_memset, memset, memsets,                                \
      Meridian__V1__MemsetColumns, meridian__v1__memset_columns__descriptor, "memsets", "S")     \
    X(MRD_EV_SYNC, 4, sync, struct mrd_sync, sync, syncs,                                          \
      Meridian__V1__SyncColumns, meridian__v1__sync_columns__descriptor, "syncs", "Y")           \
    X(MRD_EV_API, 5, api, struct mrd_api, api, api_calls,                                          \
      Meridian__V1__ApiColumns, meridian__v1__api_columns__descriptor, "api_calls", "A")         \
    X(MRD_EV_GRAPH, 6, graph, struct mrd_graph, graph, graphs,                                     \
      Meridian__V1__GraphColumns, meridian__v1__graph_columns__descriptor, "graph_launches", "G")\
    X(MRD_EV_EXTCORR, 7, extcorr, struct mrd_extcorr, extcorr, ext_correlations,                   \
      Meridian__V1__ExternalCorrelationColumns,                                                    \
      meridian__v1__external_correlation_columns__descriptor, "external_correlations", "X")      \
    X(MRD_EV_NVTX, 8, nvtx, struct mrd_nvtx, nvtx, nvtx,                                           \
      Meridian__V1__NvtxColumns, meridian__v1__nvtx_columns__descriptor, "nvtx", "N")            \
    X(MRD_EV_NCCL_OP, 9, nccl_op, struct mrd_nccl_op, nccl_op, nccl_ops,                           \
      Meridian__V1__NcclOpColumns, meridian__v1__nccl_op_columns__descriptor, "nccl_ops", "O")   \
    X(MRD_EV_NCCL_CHANNEL, 10, nccl_channel, struct mrd_nccl_channel, nccl_channel,                \
      nccl_channels, Meridian__V1__NcclChannelColumns,                                             \
      meridian__v1__nccl_channel_columns__descriptor, "nccl_channels", "H")                      \
    X(MRD_EV_MPI, 11, mpi, struct mrd_mpi, mpi, mpi,                                               \
      Meridian__V1__MpiColumns, meridian__v1__mpi_columns__descriptor, "mpi_calls", "M")         \
    X(MRD_EV_CLOCK, 12, clock_sample, struct mrd_clock_sample, clock, clock_samples,               \
      Meridian__V1__ClockSampleColumns, meridian__v1__clock_sample_columns__descriptor,            \
      "clock_samples", "T")                                                                        \
    X(MRD_EV_GPU_CLOCK, 13, gpu_clock_sample, struct mrd_gpu_clock_sample, gpu_clock,              \
      gpu_clock_samples, Meridian__V1__GpuClockSampleColumns,                                      \
      meridian__v1__gpu_clock_sample_columns__descriptor, "gpu_clock_samples", "U")            \
    X(MRD_EV_GPU_SAMPLE, 14, gpu_sample, struct mrd_gpu_sample, gpu_sample, gpu_samples,           \
      Meridian__V1__GpuSampleColumns, meridian__v1__gpu_sample_columns__descriptor,                \
      "gpu_samples", "P")                                                                          \
    X(MRD_EV_WINDOW, 15, window, struct mrd_window_record, window, window_records,                 \
      Meridian__V1__WindowColumns, meridian__v1__window_columns__descriptor, "window_records", "W")\
    X(MRD_EV_ENV, 16, env, struct mrd_env_record, env, env_records,                               \
      Meridian__V1__EnvColumns, meridian__v1__env_columns__descriptor, "env_records", "E")

/*          K  member        SQL column         class    # wire column    codec  arg    pos sep */
#define MRD__F_kernel(F, K)                                                                        \
    F(K, device,       "device",         INT,     3, device,       PLAIN, _,     3, '|')           \
    F(K, stream,       "stream",         INT,     4, stream,       PLAIN, _,     4, '|')           \
    F(K, context,      "context",        INT,    16, context,      PLAIN, _,     5, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, correlation,  "correlation_id", INT,     5, correlation,  DELTA, 1,     2, '|')           \
    F(K, name,         "name_id",        INT,     6, name,         STR,   _,     6, '|')           \
    F(K, grid[0],      "grid_x",         INT,     7, grid_x,       PLAIN, _,     7, '|')           \
    F(K, grid[1],      "grid_y",         INT,     8, grid_y,       PLAIN, _,     8, ',')           \
    F(K, grid[2],      "grid_z",         INT,     9, grid_z,       PLAIN, _,     9, ',')           \
    F(K, block[0],     "block_x",        INT,    10, block_x,      PLAIN, _,    10, '|')           \
    F(K, block[1],     "block_y",        INT,    11, block_y,      PLAIN, _,    11, ',')           \
    F(K, block[2],     "block_z",        INT,    12, block_z,      PLAIN, _,    12, ',')           \
    F(K, shared_bytes, "shared_bytes",   INT,    13, shared_bytes, PLAIN, _,    13, '|')           \
    F(K, registers,    "registers",      INT,    14, registers,    PLAIN, _,    14, '|')           \
    F(K, graph_id,     "graph_id",       INT,    15, graph_id,     PLAIN, _,    15, '|')

/* memcpy and memset begin alike: the same columns, field numbers and canonical places */
#define MRD__F_MEMOP(F, K)                                                                         \
    F(K, device,       "device",         INT,     3, device,       PLAIN, _,     4, '|')           \
    F(K, stream,       "stream",         INT,     4, stream,       PLAIN, _,     5, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, correlation,  "correlation_id", INT,     5, correlation,  DELTA, 1,     2, '|')           \
    F(K, bytes,        "bytes",          INT,     6, bytes,        PLAIN, _,     3, '|')

#define MRD__F_memcpy(F, K)                                                                        \
    MRD__F_MEMOP(F, K)                                                                             \
    F(K, copy_kind,    "copy_kind",      INT,     7, copy_kind,    PLAIN, _,     6, '|')           \
    F(K, src_kind,     "src_kind",       INT,     8, src_kind,     PLAIN, _,     7, '|')           \
    F(K, dst_kind,     "dst_kind",       INT,     9, dst_kind,     PLAIN, _,     8, '|')           \
    F(K, peer_device,  "peer_device",    INT,    10, peer_device,  PLAIN, _,     9, '|')

#define MRD__F_memset(F, K)                                                                        \
    MRD__F_MEMOP(F, K)                                                                             \
    F(K, value,        "value",          INT,     7, value,        PLAIN, _,     6, '|')           \
    F(K, memory_kind,  "memory_kind",    INT,     8, memory_kind,  PLAIN, _,     7, '|')

#define MRD__F_sync(F, K)                                                                          \
    F(K, context,      "context",        INT,     4, context,      PLAIN, _,     4, '|')           \
    F(K, stream,       "stream",         INT,     5, stream,       PLAIN, _,     5, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, correlation,  "correlation_id", INT,     6, correlation,  DELTA, 1,     2, '|')           \
    F(K, type,         "type",           INT,     3, type,         PLAIN, _,     3, '|')

#define MRD__F_api(F, K)                                                                           \
    F(K, thread,       "thread",         INT,     6, thread,       PLAIN, _,     5, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, correlation,  "correlation_id", INT,     5, correlation,  DELTA, 1,     2, '|')           \
    F(K, domain,       "domain",         INT,     3, domain,       PLAIN, _,     3, '|')           \
    F(K, cbid,         "cbid",           INT,     4, cbid,         PLAIN, _,     4, '|')           \
    F(K, name,         "name_id",        INT,     7, name,         STR,   _,     6, '|')

#define MRD__F_graph(F, K)                                                                         \
    F(K, device,       "device",         INT,     3, device,       PLAIN, _,     3, '|')           \
    F(K, stream,       "stream",         INT,     4, stream,       PLAIN, _,     4, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, correlation,  "correlation_id", INT,     5, correlation,  DELTA, 1,     2, '|')           \
    F(K, graph_id,     "graph_id",       INT,     6, graph_id,     PLAIN, _,     5, '|')

#define MRD__F_extcorr(F, K)                                                                       \
    F(K, correlation,  "correlation_id", NN,      1, correlation,  DELTA, 0,     0, '|')           \
    F(K, external_id,  "external_id",    NN,      2, external_id,  PLAIN, _,     1, '|')           \
    F(K, kind,         "kind",           INT,     3, kind,         PLAIN, _,     2, '|')

#define MRD__F_nvtx(F, K)                                                                          \
    F(K, thread,       "thread",         INT,     6, thread,       PLAIN, _,     5, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, kind,         "kind",           INT,     3, kind,         PLAIN, _,     2, '|')           \
    F(K, domain,       "domain_id",      INT,     4, domain,       STR,   _,     3, '|')           \
    F(K, name,         "name_id",        INT,     5, name,         STR,   _,     4, '|')           \
    F(K, depth,        "depth",          INT,     7, depth,        PLAIN, _,     6, '|')           \
    F(K, color,        "color",          INT,     8, color,        PLAIN, _,     7, '|')

#define MRD__F_nccl_op(F, K)                                                                       \
    F(K, op_id,        "op_id",          NN,      1, op_id,        PLAIN, _,     0, '|')           \
    F(K, start,        "start_ns",       NN,      2, start,        DELTA, 0,     1, '|')           \
    F(K, end,          "end_ns",         NN,      3, duration,     DUR,   start, 2, '|')           \
    F(K, comm_hash,    "comm_hash",      NN,      4, comm_hash,    PLAIN, _,     3, '|')           \
    F(K, comm_rank,    "comm_rank",      INT,     5, comm_rank,    PLAIN, _,     4, '|')           \
    F(K, comm_nranks,  "comm_nranks",    INT,     6, comm_nranks,  PLAIN, _,     5, '|')           \
    F(K, seq,          "seq",            P2PNULL, 7, seq,          PLAIN, _,     6, '|')           \
    F(K, func,         "func_id",        INT,     8, func,         STR,   _,     7, '|')           \
    F(K, count,        "count",          INT,     9, count,        PLAIN, _,     8, '|')           \
    F(K, datatype,     "datatype_id",    INT,    10, datatype,     STR,   _,     9, '|')           \
    F(K, bytes,        "bytes",          INT,    11, bytes,        PLAIN, _,    10, '|')           \
    F(K, root,         "root",           INT,    12, root,         PLAIN, _,    11, '|')           \
    F(K, peer,         "peer",           INT,    13, peer,         PLAIN, _,    12, '|')           \
    F(K, algo,         "algo_id",        INT,    14, algo,         STR,   _,    13, '|')           \
    F(K, proto,        "proto_id",       INT,    15, proto,        STR,   _,    14, '|')           \
    F(K, channels,     "channels",       INT,    16, channels,     PLAIN, _,    15, '|')           \
    F(K, warps,        "warps",          INT,    17, warps,        PLAIN, _,    16, '|')           \
    F(K, launch_id,    "launch_id",      INT,    18, launch_id,    PLAIN, _,    17, '|')           \
    F(K, is_p2p,       "is_p2p",         NN,     19, is_p2p,       PLAIN, _,    18, '|')           \
    F(K, device,       "device",         INT,    20, device,       PLAIN, _,    19, '|')

#define MRD__F_nccl_channel(F, K)                                                                  \
    F(K, op_id,        "op_id",          NN,      1, op_id,        PLAIN, _,     0, '|')           \
    F(K, channel,      "channel",        NN,      2, channel,      PLAIN, _,     1, '|')           \
    F(K, gpu_start,    "gpu_start",      INT,     3, gpu_start,    DELTA, 0,     2, '|')           \
    F(K, gpu_end,      "gpu_end",        INT,     4, gpu_duration, DUR, gpu_start, 3, '|')         \
    F(K, host_start,   "host_start_ns",  INT,     5, host_start,   DELTA, 1,     4, '|')

#define MRD__F_mpi(F, K)                                                                           \
    F(K, thread,       "thread",         INT,     8, thread,       PLAIN, _,     5, '|')           \
    F(K, start,        "start_ns",       NN,      1, start,        DELTA, 0,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, duration,     DUR,   start, 1, '|')           \
    F(K, call,         "call_id",        INT,     3, call,         STR,   _,     3, '|')           \
    F(K, bytes,        "bytes",          INT,     4, bytes,        PLAIN, _,     2, '|')           \
    F(K, peer,         "peer",           INT,     5, peer,         PLAIN, _,     6, '|')           \
    F(K, tag,          "tag",            INT,     6, tag,          PLAIN, _,     7, '|')           \
    F(K, comm_size,    "comm_size",      INT,     7, comm_size,    PLAIN, _,     4, '|')

#define MRD__F_clock_sample(F, K)                                                                  \
    F(K, t0,           "t0",             NN,      1, t0,           PLAIN, _,     0, '|')           \
    F(K, t1,           "t1",             GNN,     2, t1,           PLAIN, _,     1, '|')           \
    F(K, t2,           "t2",             GNN,     3, t2,           PLAIN, _,     2, '|')           \
    F(K, t3,           "t3",             NN,      4, t3,           PLAIN, _,     3, '|')

#define MRD__F_gpu_clock_sample(F, K)                                                              \
    F(K, device,       "device",         NN,      1, device,       PLAIN, _,     0, '|')           \
    F(K, host_ns,      "host_ns",        NN,      2, host_ns,      PLAIN, _,     1, '|')           \
    F(K, gpu_ns,       "gpu_ns",         NN,      3, gpu_ns,       PLAIN, _,     2, '|')           \
    F(K, uncertainty_ns, "uncertainty_ns", INT,   4, uncertainty_ns, PLAIN, _,   3, '|')

/* gpu_sample: NVML readings of each GPU the rank uses, ~10 per second (capture: the NVML
 * sampler of agent/capture/cupti.c; none where NVML cannot be loaded). */
struct mrd_gpu_sample {
    int64_t host_ns;           /* local clock when read */
    uint64_t throttle_reasons; /* nvmlDeviceGetCurrentClocksThrottleReasons bitmask */
    uint32_t device;           /* CUDA device ordinal */
    uint32_t sm_clock_mhz, mem_clock_mhz;
    uint32_t power_mw, temperature_c, utilization_pct;
};
#define MRD__F_gpu_sample(F, K)                                                                    \
    F(K, device,       "device",         NN,      1, device,       PLAIN, _,     0, '|')           \
    F(K, host_ns,      "host_ns",        NN,      2, host_ns,      DELTA, 0,     1, '|')           \
    F(K, sm_clock_mhz, "sm_clock_mhz",   INT,     3, sm_clock_mhz, PLAIN, _,     2, '|')           \
    F(K, mem_clock_mhz, "mem_clock_mhz", INT,     4, mem_clock_mhz, PLAIN, _,    3, '|')           \
    F(K, power_mw,     "power_mw",       INT,     5, power_mw,     PLAIN, _,     4, '|')           \
    F(K, temperature_c, "temperature_c", INT,     6, temperature_c, PLAIN, _,    5, '|')           \
    F(K, throttle_reasons, "throttle_reasons", INT, 7, throttle_reasons, PLAIN, _, 6, '|')         \
    F(K, utilization_pct, "utilization_pct", INT, 8, utilization_pct, PLAIN, _,  7, '|')

/* window: one full-detail capture window of the steady tier, written by the agent when the
 * window ends (capture: agent/capture/window.c, its detach or the exit path). start/end:
 * local clock, the attach's start to the detach's end (or the exit); steps inclusive;
 * reason: a string id ("range", "periodic", "on_demand", ...: proto/steps.h's names, so an
 * older aggregator keeps a newer agent's reason); CUPTI's costs in ns, detach_ns -1 when
 * the window was still open at exit. The finalize step derives the `windows` table from
 * these rows (aggregator/analyze/window_table.h). */
struct mrd_window_record {
    int64_t start, end;
    int64_t first_step, last_step;
    int64_t attach_ns, detach_ns, flush_ns;
    uint32_t reason;
};
#define MRD__F_window(F, K)                                                                        \
    F(K, start,        "start_ns",       NN,      1, start,        PLAIN, _,     0, '|')           \
    F(K, end,          "end_ns",         NN,      2, end,          PLAIN, _,     1, '|')           \
    F(K, first_step,   "first_step",     NN,      3, first_step,   PLAIN, _,     2, '|')           \
    F(K, last_step,    "last_step",      NN,      4, last_step,    PLAIN, _,     3, '|')           \
    F(K, reason,       "reason_id",      INT,     5, reason,       STR,   _,     4, '|')           \
    F(K, attach_ns,    "attach_ns",      INT,     6, attach_ns,    PLAIN, _,     5, '|')           \
    F(K, detach_ns,    "detach_ns",      INT,     7, detach_ns,    PLAIN, _,     6, '|')           \
    F(K, flush_ns,     "flush_ns",       INT,     8, flush_ns,     PLAIN, _,     7, '|')

/* env: one (key, value) pair of the rank's environment fingerprint, written once per process
 * (capture: agent/capture/env.c): library versions as loaded, the GPU's model, UUID, memory
 * and maximum clocks, the host name and allowlisted environment variables; the key list is
 * in aggregator/SCHEMA.md. Both are string ids; an empty value is id 0. The report compares
 * the ranks (aggregator/analyze/fingerprint.h). */
struct mrd_env_record {
    uint32_t key, value;
};
#define MRD__F_env(F, K)                                                                           \
    F(K, key,          "key_id",         INT,     1, key,          STR,   _,     0, '|')           \
    F(K, value,        "value_id",       INT,     2, value,        STR,   _,     1, '|')
/* clang-format on */

/* Helpers for consumers: the field list of kind fn, and per-field dispatch on the codec or
 * SQL class by token pasting (MRD__CODEC_IS_STR(codec) is 1 for STR, else 0). */
#define MRD__FIELDS(fn, F) MRD__F_##fn(F, fn)
#define MRD__IS_STR_STR 1
#define MRD__IS_STR_PLAIN 0
#define MRD__IS_STR_DELTA 0
#define MRD__IS_STR_DUR 0
#define MRD__CODEC_IS_STR(codec) MRD__IS_STR_##codec
#define MRD__SQL_DECL_INT "INTEGER"
#define MRD__SQL_DECL_NN "INTEGER NOT NULL"
#define MRD__SQL_DECL_GNN "INTEGER NOT NULL"
#define MRD__SQL_DECL_P2PNULL "INTEGER"
#define MRD__SQL_DECL(cls) MRD__SQL_DECL_##cls

#endif
