/* The NCCL profiler plugin ABI, versions 4, 5 and 6, declared for meridian.
 *
 * NCCL does not install its profiler plugin headers. These declarations were written for
 * meridian from the layouts NCCL defines in src/include/plugin/profiler/profiler_v{4,5,6}.h
 * and src/include/plugin/nccl_profiler.h (NCCL v2.27.7, v2.28.3/v2.28.9, v2.29.7), and from
 * how src/plugin/profiler.cc fills them. The names are ours; the layouts, the numeric event
 * bits and the numeric state values are NCCL's and must not change. The static asserts at
 * the end pin the sizes and offsets on LP64 (x86-64, aarch64).
 *
 * Versions:
 *   v4 (NCCL 2.27): uint8_t type; init(ctx, mask, commName, commHash, nNodes, nranks, rank,
 *                   log); Coll/P2p have no parentGroup; no API-level or KernelLaunch events.
 *   v5 (NCCL 2.28): uint64_t type; init(ctx, commId, mask, commName, nNodes, nranks, rank,
 *                   log); GroupApi/CollApi/P2pApi/KernelLaunch events; Coll/P2p carry
 *                   parentGroup (the legacy Group event) while parentObj is the Coll/P2pApi.
 *   v6 (NCCL 2.29+): v5's signatures; the descriptor union gains copy-engine members (same
 *                   union size on LP64) and event bits 4096/8192/16384.
 */
#ifndef MRD_NCCL_ABI_H
#define MRD_NCCL_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int mrd_nccl_result_t; /* ncclResult_t: 0 = ncclSuccess */
#define MRD_NCCL_SUCCESS 0

/* ncclDebugLogger_t: level, subsystem flags, file, line, printf format. */
typedef void (*mrd_nccl_logger_t)(int level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

/* Event type bits (descriptor .type and the activation mask). */
enum {
    MRD_NCCL_EV_GROUP = 1 << 0,
    MRD_NCCL_EV_COLL = 1 << 1,
    MRD_NCCL_EV_P2P = 1 << 2,
    MRD_NCCL_EV_PROXY_OP = 1 << 3,
    MRD_NCCL_EV_PROXY_STEP = 1 << 4,
    MRD_NCCL_EV_PROXY_CTRL = 1 << 5,
    MRD_NCCL_EV_KERNEL_CH = 1 << 6,
    MRD_NCCL_EV_NET_PLUGIN = 1 << 7,
    MRD_NCCL_EV_GROUP_API = 1 << 8,      /* v5+ */
    MRD_NCCL_EV_COLL_API = 1 << 9,       /* v5+ */
    MRD_NCCL_EV_P2P_API = 1 << 10,       /* v5+ */
    MRD_NCCL_EV_KERNEL_LAUNCH = 1 << 11, /* v5+ */
    MRD_NCCL_EV_CE_COLL = 1 << 12,       /* v6+ */
    MRD_NCCL_EV_CE_SYNC = 1 << 13,       /* v6+ */
    MRD_NCCL_EV_CE_BATCH = 1 << 14,      /* v6+ */
};

/* recordEventState states we use (NCCL's headers disagree on the names of 23/24, so only
 * numeric values are relied on). */
enum {
    MRD_NCCL_STATE_KERNEL_CH_STOP = 22, /* args->kernelCh.pTimer = GPU stop timer */
};

/* Member lists NCCL's versions share: each version's struct below spells out only what it
 * adds, so a member shared by two versions is declared once. */

/* The collective's identity and buffers: Coll (v4, v5) and CeColl (v6) begin with these. */
#define MRD_NCCL_COLL_HEAD_MEMBERS                                                                 \
    uint64_t seq;                                                                                  \
    const char *func;                                                                              \
    const void *send_buff;                                                                         \
    void *recv_buff;                                                                               \
    size_t count;                                                                                  \
    int root;                                                                                      \
    const char *datatype;

/* Coll as v4 has it; v5 appends parentGroup. */
#define MRD_NCCL_COLL_V4_MEMBERS                                                                   \
    MRD_NCCL_COLL_HEAD_MEMBERS                                                                     \
    uint8_t n_channels;                                                                            \
    uint8_t n_warps;                                                                               \
    const char *algo;                                                                              \
    const char *proto;

/* P2p as v4 has it; v5 appends parentGroup. */
#define MRD_NCCL_P2P_V4_MEMBERS                                                                    \
    const char *func;                                                                              \
    void *buff;                                                                                    \
    const char *datatype;                                                                          \
    size_t count;                                                                                  \
    int peer;                                                                                      \
    uint8_t n_channels;

/* The descriptor union's members for the proxy, kernel-channel and network events, alike in
 * every version. */
#define MRD_NCCL_DESCR_PROXY_NET_MEMBERS                                                           \
    struct mrd_nccl_proxy_op proxy_op;                                                             \
    struct {                                                                                       \
        int step;                                                                                  \
    } proxy_step;                                                                                  \
    struct mrd_nccl_kernel_ch kernel_ch;                                                           \
    struct {                                                                                       \
        int64_t id;                                                                                \
        void *data;                                                                                \
    } net_plugin;

/* The profiler table's event functions, alike in every version but for the descriptor. */
#define MRD_NCCL_PROFILER_EVENT_FNS(descr)                                                         \
    mrd_nccl_result_t (*start_event)(void *ctx, void **handle, descr *d);                          \
    mrd_nccl_result_t (*stop_event)(void *handle);                                                 \
    mrd_nccl_result_t (*record_event_state)(void *handle, int state,                               \
                                            union mrd_nccl_state_args *args);                      \
    mrd_nccl_result_t (*finalize)(void *ctx);

struct mrd_nccl_coll_v4 {
    MRD_NCCL_COLL_V4_MEMBERS
};

struct mrd_nccl_coll_v5 {
    MRD_NCCL_COLL_V4_MEMBERS
    void *parent_group;
};

struct mrd_nccl_p2p_v4 {
    MRD_NCCL_P2P_V4_MEMBERS
};

struct mrd_nccl_p2p_v5 {
    MRD_NCCL_P2P_V4_MEMBERS
    void *parent_group;
};

struct mrd_nccl_proxy_op {
    pid_t pid;
    uint8_t channel;
    int peer, n_steps, chunk_size, is_send;
};

struct mrd_nccl_kernel_ch {
    uint8_t channel;
    uint64_t ptimer; /* GPU globaltimer at the channel's start */
};

struct mrd_nccl_coll_api {
    const char *func;
    size_t count;
    const char *datatype;
    int root;
    void *stream;
    bool graph_captured;
};

struct mrd_nccl_p2p_api {
    const char *func;
    size_t count;
    const char *datatype;
    void *stream;
    bool graph_captured;
};

struct mrd_nccl_ce_coll_v6 {
    MRD_NCCL_COLL_HEAD_MEMBERS
    const char *sync_strategy;
    bool intra_batch_sync;
    uint32_t batch_size, num_batches, ce_seq;
    void *stream;
};

/* v5 and v6 descriptor (v6 only adds union members; same layout of the shared ones). */
struct mrd_nccl_descr_v5 {
    uint64_t type;
    void *parent;
    int rank;
    union {
        struct {
            bool graph_captured;
            int group_depth;
        } group_api;
        struct mrd_nccl_coll_api coll_api;
        struct mrd_nccl_p2p_api p2p_api;
        struct {
            void *stream;
        } kernel_launch;
        struct mrd_nccl_coll_v5 coll;
        struct mrd_nccl_p2p_v5 p2p;
        MRD_NCCL_DESCR_PROXY_NET_MEMBERS
        struct mrd_nccl_ce_coll_v6 ce_coll; /* v6 */
        struct {
            bool is_complete;
            int nranks;
        } ce_sync; /* v6 */
        struct {
            int num_ops;
            size_t total_bytes;
            bool use_intra_sync;
        } ce_batch; /* v6 */
    } u;
};

struct mrd_nccl_descr_v4 {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct mrd_nccl_coll_v4 coll;
        struct mrd_nccl_p2p_v4 p2p;
        MRD_NCCL_DESCR_PROXY_NET_MEMBERS
    } u;
};

/* recordEventState arguments (identical in v4, v5, v6). */
union mrd_nccl_state_args {
    struct {
        size_t trans_size;
    } proxy_step;
    struct {
        int appended_proxy_ops;
    } proxy_ctrl;
    struct {
        void *data;
    } net_plugin;
    struct {
        uint64_t ptimer;
    } kernel_ch;
};

struct mrd_nccl_profiler_v5 {
    const char *name;
    mrd_nccl_result_t (*init)(void **ctx, uint64_t comm_id, int *mask, const char *comm_name,
                              int n_nodes, int nranks, int rank, mrd_nccl_logger_t log);
    MRD_NCCL_PROFILER_EVENT_FNS(struct mrd_nccl_descr_v5)
};

/* v6: the same function signatures as v5 (its descriptor is struct mrd_nccl_descr_v5). */
typedef struct mrd_nccl_profiler_v5 mrd_nccl_profiler_v6;

struct mrd_nccl_profiler_v4 {
    const char *name;
    mrd_nccl_result_t (*init)(void **ctx, int *mask, const char *comm_name, uint64_t comm_hash,
                              int n_nodes, int nranks, int rank, mrd_nccl_logger_t log);
    MRD_NCCL_PROFILER_EVENT_FNS(struct mrd_nccl_descr_v4)
};

#if defined(__LP64__)
_Static_assert(offsetof(struct mrd_nccl_descr_v5, parent) == 8, "v5 parentObj");
_Static_assert(offsetof(struct mrd_nccl_descr_v5, rank) == 16, "v5 rank");
_Static_assert(offsetof(struct mrd_nccl_descr_v5, u) == 24, "v5 union");
_Static_assert(offsetof(struct mrd_nccl_coll_v5, count) == 32, "v5 coll.count");
_Static_assert(offsetof(struct mrd_nccl_coll_v5, datatype) == 48, "v5 coll.datatype");
_Static_assert(offsetof(struct mrd_nccl_coll_v5, n_channels) == 56, "v5 coll.nChannels");
_Static_assert(offsetof(struct mrd_nccl_coll_v5, n_warps) == 57, "v5 coll.nWarps");
_Static_assert(offsetof(struct mrd_nccl_coll_v5, algo) == 64, "v5 coll.algo");
_Static_assert(offsetof(struct mrd_nccl_coll_v5, parent_group) == 80, "v5 coll.parentGroup");
_Static_assert(sizeof(struct mrd_nccl_coll_v5) == 88, "v5 coll size");
_Static_assert(offsetof(struct mrd_nccl_p2p_v5, peer) == 32, "v5 p2p.peer");
_Static_assert(offsetof(struct mrd_nccl_p2p_v5, n_channels) == 36, "v5 p2p.nChannels");
_Static_assert(offsetof(struct mrd_nccl_kernel_ch, ptimer) == 8, "kernelCh.pTimer");
_Static_assert(offsetof(struct mrd_nccl_coll_api, graph_captured) == 40, "collApi.graph");
_Static_assert(sizeof(struct mrd_nccl_ce_coll_v6) == 88, "v6 ceColl size");
_Static_assert(sizeof(struct mrd_nccl_descr_v5) == 112, "v5/v6 descriptor size");
_Static_assert(offsetof(struct mrd_nccl_descr_v4, u) == 24, "v4 union");
_Static_assert(sizeof(struct mrd_nccl_coll_v4) == 80, "v4 coll size");
_Static_assert(sizeof(struct mrd_nccl_descr_v4) == 104, "v4 descriptor size");
_Static_assert(sizeof(union mrd_nccl_state_args) == 8, "state args size");
_Static_assert(sizeof(struct mrd_nccl_profiler_v5) == 48, "v5 table size");
_Static_assert(offsetof(struct mrd_nccl_profiler_v5, record_event_state) == 32, "v5 table");
#endif

#endif
