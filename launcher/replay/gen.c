/* Synthetic training-job event stream (see gen.h for what and why).
 *
 * The generator builds one "step" at a time into a fixed array and hands events out one by
 * one. Two random streams: `rng` (seeded by seed and rank) varies kernel counts, durations
 * and sizes per rank; `srng` (seeded by seed and step only) decides the collective
 * structure of the step, identical on every rank so (comm, seq) match across ranks.
 * A simulated local clock advances with the events; it is independent of wall time, so a
 * given (seed, rank, event count) always yields the same events and checksum.
 */
#include "gen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


/* ---- names ---- */

static const char *const kernel_names[] = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_"
    "execute_segment_k_off_kernel__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_cluster2x1x1_kernel",
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
    "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align8",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_"
    "T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIN3c108BFloat16ES4_S4_"
    "NS0_15MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIfffNS0_15AddFunctorIfEEEE"
    "St5arrayIPcLm2EEEEviT0_T1_",
    "_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastINS0_13BUnaryFunctor"
    "IfffNS0_15MulFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_",
    "_ZN2at6native43_GLOBAL__N__softmax_warp_forwardIN3c108BFloat16EfLi10ELb0EEEvPT0_PKT_iii",
    "_ZN2at6native43_GLOBAL__N__softmax_warp_backwardIN3c108BFloat16EfLi10ELb0EEEvPT0_PKT_S7_iii",
    "_ZN2at6native53_GLOBAL__N__layer_norm_kernelIN3c108BFloat16EfEEvlfPKT_S6_S6_PT0_S9_PS4_",
    "_ZN2at6native53_GLOBAL__N__layer_norm_grad_input_kernelIN3c108BFloat16EfEEvPKT_S6_PKT0_S9_"
    "S6_PS4_l",
    "_ZN2at6native27GammaBetaBackwardCUDAKernelIN3c108BFloat16EfEEvllPKT_S6_PKT0_S9_PS4_S10_",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfNS0_"
    "15sum_functorIfffEEEEjfLi4EEEEEvT1_",
    "_ZN2at6native24index_elementwise_kernelILi128ELi4EZNS0_20gpu_index_kernelIZNS0_"
    "17index_kernel_implINS0_10OpaqueTypeILi2EEEEEvRNS_18TensorIteratorBaseEEEEEviT1_",
    "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_"
    "14AdamFunctorIfLi4ELNS1_8ADAM_MODEE1EEEJffffffbPfS9_EEEvT_T0_DpT1_",
    "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi1EEENS1_"
    "17L2NormFunctorIfLi1EEEJPfS7_bEEEvT_T0_DpT1_",
    "flash_fwd_kernel_bf16_hdim128_causal",
    "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel_bf16_hdim128",
    "flash_bwd_convert_dq_kernel",
    "_ZN7cutlass7Kernel2I56cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8EEv"
    "NT_6ParamsE",
    "_ZN2at6native27unrolled_elementwise_kernelINS0_22gelu_kernel_impl_cudaERNS_18TensorIterator"
    "BaseENS0_8GeluTypeEENKUlvE_clEvEUlN3c108BFloat16EE_St5arrayIPcLm2EEEEviT_T0_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_23gelu_backward_kernel_implEvEEviT0_",
    "_ZN2at6native16fused_dropout_kernel_vecIN3c108BFloat16EfjLi1ELi4EhEEvNS_4cuda6detail10"
    "TensorInfoIKT_T1_EE",
    "_ZN2at6native40_GLOBAL__N__embedding_backward_feature_kernelIN3c108BFloat16EfEEvPlPKT_PT0_"
    "illl",
    "_ZN2at6native18cross_entropy_loss_forward_kernelIN3c108BFloat16EfEEvPT_PKS4_PKliii",
    "_ZN2at6native25nll_loss_backward_reduce_cuda_kernel_2dIN3c108BFloat16EfEEvPT_PKS5_PKlS8_bli",
    "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, "
    "int>::Policy900>",
    "_ZN2at6native24amp_update_scale_cuda_kernelEPfPiPKfdddi",
};
#define N_KERNEL_NAMES ((int)(sizeof kernel_names / sizeof kernel_names[0]))

enum {
    S_DATA_LOADER,
    S_TRAIN_STEP,
    S_FORWARD,
    S_BACKWARD,
    S_OPTIMIZER,
    S_CHECKPOINT,
    S_DOMAIN,
    S_LAUNCH,
    S_STREAM_SYNC,
    S_MEMCPY_ASYNC,
    S_ALLREDUCE,
    S_ALLGATHER,
    S_SEND,
    S_RECV,
    S_FLOAT32,
    S_BF16,
    S_RING,
    S_TREE,
    S_SIMPLE,
    S_LL,
    S_LL128,
    S_K_ALLREDUCE,
    S_K_ALLGATHER,
    S_K_SENDRECV,
    S_MPI_BARRIER,
    S_MPI_ALLREDUCE,
    S_PERIODIC,
    S_ENV_NCCL_VERSION,
    S_ENV_NCCL_VERSION_VALUE,
    S_ENV_NCCL_ALGO,
    S__COUNT
};
static const char *const other_names[S__COUNT] = {
    "data_loader",
    "train_step",
    "forward",
    "backward",
    "optimizer_step",
    "checkpoint",
    "app",
    "cudaLaunchKernel",
    "cudaStreamSynchronize",
    "cudaMemcpyAsync",
    "AllReduce",
    "AllGather",
    "Send",
    "Recv",
    "ncclFloat32",
    "ncclBfloat16",
    "RING",
    "TREE",
    "SIMPLE",
    "LL",
    "LL128",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "ncclDevKernel_AllGather_RING_LL",
    "ncclDevKernel_SendRecv",
    "MPI_Barrier",
    "MPI_Allreduce",
    "periodic",
    "nccl_version",
    "2.28.5",
    "env:NCCL_ALGO",
};

/* stream ids as CUPTI numbers them: compute, NCCL, copy */
enum { ST_COMPUTE = 7, ST_NCCL = 13, ST_COPY = 14, ST_EXTRA = 21 };

struct mrd_gen {
    struct mrd_gen_config cfg;
    uint32_t kernel_ids[N_KERNEL_NAMES];
    uint32_t ids[S__COUNT];
    struct mrd_canon_strings strings; /* id -> string for the resolver */

    uint64_t rng, srng;
    int64_t now;      /* simulated local clock, ns */
    int64_t gpu_skew; /* raw GPU timer = local - gpu_skew */
    uint64_t correlation, ext_id, op_id, step;
    uint64_t seq_world_ar, seq_pair_ag;
    uint64_t comm_world, comm_pair;
    uint32_t device, thread_main, thread_loader;

    struct mrd_canon_event q[MRD_GEN_STEP_CAP];
    int qlen, qpos;
};

/* splitmix64: tiny, good enough for shaping synthetic data */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static int64_t between(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static struct mrd_canon_event *push(struct mrd_gen *g, int kind)
{
    /* by construction a step stays below the cap; past it, the last slot is reused so
     * memory stays bounded (never reached, see step_*) */
    struct mrd_canon_event *e = &g->q[g->qlen < MRD_GEN_STEP_CAP ? g->qlen++ : g->qlen - 1];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    return e;
}

/* The builder's id of string s (0: it could not intern it) for the resolver. */
static int remember(struct mrd_gen *g, uint32_t id, const char *s)
{
    if (id == 0)
        return -ENOMEM;
    return mrd_canon_strings_put(&g->strings, id, s, UINT32_MAX);
}

const char *mrd_gen_string(void *gen, uint32_t id)
{
    struct mrd_gen *g = gen;
    return mrd_canon_strings_get(&g->strings, id);
}

uint64_t mrd_gen_string_hash(void *gen, uint32_t id)
{
    struct mrd_gen *g = gen;
    return mrd_canon_strings_hash(&g->strings, id);
}

/* a kernel (and, for one in four, its launch API record) at the current time */
static void kernel(struct mrd_gen *g, uint32_t name, uint32_t stream, int64_t dur, int api)
{
    g->now += between(&g->rng, 1500, 9000);
    uint64_t corr = ++g->correlation;
    if (api) {
        struct mrd_api *a = &push(g, MRD_EV_API)->u.api;
        a->start = g->now - between(&g->rng, 3000, 6000);
        a->end = a->start + between(&g->rng, 2500, 4500);
        a->correlation = corr;
        a->domain = MRD_API_RUNTIME;
        a->cbid = 211; /* cudaLaunchKernel_v7000 */
        a->thread = g->thread_main;
        a->name = g->ids[S_LAUNCH];
    }
    struct mrd_kernel *k = &push(g, MRD_EV_KERNEL)->u.kernel;
    k->start = g->now;
    k->end = g->now + dur;
    k->correlation = corr;
    k->device = g->device;
    k->stream = stream;
    k->context = 1;
    k->name = name;
    k->grid[0] = (uint32_t)between(&g->rng, 1, 4096);
    k->grid[1] = (uint32_t)between(&g->rng, 1, 4);
    k->grid[2] = 1;
    k->block[0] = 128u << between(&g->rng, 0, 3);
    k->block[1] = 1;
    k->block[2] = 1;
    k->shared_bytes = (uint32_t)between(&g->rng, 0, 4) * 16384;
    k->registers = (uint32_t)between(&g->rng, 24, 255);
    if (stream == ST_COMPUTE)
        g->now += dur; /* compute kernels on one stream run back to back */
}

static void compute_kernels(struct mrd_gen *g, int n, int lo, int hi)
{
    for (int i = 0; i < n; i++) {
        /* a skewed choice: GEMMs and elementwise kernels dominate real traces */
        uint64_t r = rnd(&g->rng) % 100;
        int idx = r < 40 ? (int)(r % 5) : (int)(5 + r % (N_KERNEL_NAMES - 5));
        kernel(g, g->kernel_ids[idx], ST_COMPUTE, between(&g->rng, lo, hi), (i & 3) == 0);
    }
}

static void nvtx(struct mrd_gen *g, uint32_t kind, uint32_t name, int64_t start, int64_t end,
                 uint32_t depth, uint32_t thread)
{
    struct mrd_nvtx *v = &push(g, MRD_EV_NVTX)->u.nvtx;
    v->start = start;
    v->end = end;
    v->kind = kind;
    v->domain = kind == MRD_NVTX_MARK ? g->ids[S_DOMAIN] : 0;
    v->name = name;
    v->thread = thread;
    v->depth = depth;
    v->color = kind == MRD_NVTX_PUSHPOP ? 0xff00a0e0u : 0;
}

/* one NCCL operation: host start/stop, its kernel, the external correlation and the
 * per-channel GPU timer records */
static void nccl(struct mrd_gen *g, int func, uint64_t comm, uint32_t comm_rank,
                 uint32_t comm_nranks, uint64_t seq, uint64_t bytes, int32_t peer, int channels)
{
    int p2p = func == S_SEND || func == S_RECV;
    int64_t t = g->now + between(&g->rng, 1000, 5000);
    int64_t enqueue = between(&g->rng, 4000, 15000);
    int64_t gpu_dur = 5000 + (int64_t)(bytes / 200); /* ~200 GB/s */
    uint64_t corr = ++g->correlation, launch = ++g->ext_id, op = ++g->op_id;
    int bf16 = (seq & 1) != 0;

    struct mrd_nccl_op *o = &push(g, MRD_EV_NCCL_OP)->u.nccl_op;
    o->op_id = op;
    o->start = t;
    o->end = t + enqueue;
    o->comm_hash = comm;
    o->comm_rank = comm_rank;
    o->comm_nranks = comm_nranks;
    o->seq = p2p ? 0 : seq;
    o->func = g->ids[func];
    o->datatype = g->ids[bf16 ? S_BF16 : S_FLOAT32];
    o->count = bytes / (bf16 ? 2 : 4);
    o->bytes = bytes;
    o->root = -1;
    o->peer = peer;
    o->algo = p2p ? 0 : g->ids[bytes > (1u << 20) ? S_RING : S_TREE];
    o->proto = p2p ? 0 : g->ids[bytes > (4u << 20) ? S_SIMPLE : bytes > 65536 ? S_LL128 : S_LL];
    o->channels = (uint32_t)channels;
    o->warps = 16;
    o->launch_id = launch;
    o->is_p2p = (uint32_t)p2p;
    o->device = g->device;

    struct mrd_extcorr *x = &push(g, MRD_EV_EXTCORR)->u.extcorr;
    x->correlation = corr;
    x->external_id = launch;
    x->kind = 6; /* CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 */

    uint32_t kname = g->ids[func == S_ALLREDUCE   ? S_K_ALLREDUCE
                            : func == S_ALLGATHER ? S_K_ALLGATHER
                                                  : S_K_SENDRECV];
    int64_t saved = g->now;
    g->now = t + enqueue / 2;
    g->correlation--; /* kernel() takes the next id: make it the one correlated above */
    kernel(g, kname, ST_NCCL, gpu_dur, 0);
    int64_t kstart = g->now;
    g->now = saved;

    for (int c = 0; c < channels; c++) {
        struct mrd_nccl_channel *h = &push(g, MRD_EV_NCCL_CHANNEL)->u.nccl_channel;
        int64_t gs = kstart - g->gpu_skew + between(&g->rng, 0, 800);
        h->op_id = op;
        h->channel = (uint32_t)c;
        h->gpu_start = gs;
        h->gpu_end = gs + gpu_dur - between(&g->rng, 0, 1500);
        h->host_start = kstart + between(&g->rng, 41000, 900000); /* reported late */
    }
}

static void step_training(struct mrd_gen *g)
{
    uint64_t step = ++g->step;
    g->srng = g->cfg.seed * 0x2545f4914f6cdd1dull + step; /* same on every rank */
    uint32_t r = g->cfg.rank, w = g->cfg.world_size;
    int64_t step_start = g->now;

    /* data loader thread: copy the next batch to the GPU */
    int64_t dl = g->now;
    struct mrd_memcpy *m = &push(g, MRD_EV_MEMCPY)->u.memcpy;
    m->start = g->now + 2000;
    m->end = m->start + between(&g->rng, 80000, 400000);
    m->correlation = ++g->correlation;
    m->bytes = (uint64_t)between(&g->rng, 1, 16) << 20;
    m->device = m->peer_device = g->device;
    m->stream = ST_COPY;
    m->copy_kind = 1; /* HtoD */
    m->src_kind = 2;  /* pinned */
    m->dst_kind = 3;  /* device */
    g->now = m->end;
    nvtx(g, MRD_NVTX_STARTEND, g->ids[S_DATA_LOADER], dl, g->now, 0, g->thread_loader);

    struct mrd_memset *z = &push(g, MRD_EV_MEMSET)->u.memset;
    z->start = g->now + 1000;
    z->end = z->start + between(&g->rng, 2000, 30000);
    z->correlation = ++g->correlation;
    z->bytes = (uint64_t)between(&g->rng, 1, 64) << 20;
    z->device = g->device;
    z->stream = ST_COMPUTE;
    z->memory_kind = 3;
    g->now = z->end;

    /* forward, with tensor-parallel AllGathers on the pair communicator */
    int64_t f0 = g->now;
    int gathers = (int)between(&g->srng, 1, 3);
    for (int i = 0; i < gathers; i++) {
        compute_kernels(g, (int)between(&g->rng, 10, 25), 4000, 250000);
        if (w >= 2) {
            uint32_t pair_n = (r / 2 * 2 + 1 < w) ? 2 : 1;
            nccl(g, S_ALLGATHER, g->comm_pair, r % 2, pair_n, ++g->seq_pair_ag,
                 (uint64_t)between(&g->srng, 1, 64) << 16, -1, (int)between(&g->srng, 2, 4));
        }
    }
    nvtx(g, MRD_NVTX_PUSHPOP, g->ids[S_FORWARD], f0, g->now, 1, g->thread_main);

    /* pipeline hand-off to the neighbours */
    if (w >= 2) {
        uint64_t bytes = (uint64_t)between(&g->srng, 1, 8) << 20;
        nccl(g, S_SEND, g->comm_world, r, w, 0, bytes, (int32_t)((r + 1) % w), 1);
        nccl(g, S_RECV, g->comm_world, r, w, 0, bytes, (int32_t)((r + w - 1) % w), 1);
    }

    /* backward with bucketed AllReduce on the world communicator */
    int64_t b0 = g->now;
    int buckets = (int)between(&g->srng, 2, 6);
    for (int i = 0; i < buckets; i++) {
        compute_kernels(g, (int)between(&g->rng, 15, 30), 5000, 400000);
        nccl(g, S_ALLREDUCE, g->comm_world, r, w, ++g->seq_world_ar,
             (uint64_t)between(&g->srng, 1, 25) << 20, -1, (int)between(&g->srng, 4, 16));
    }
    nvtx(g, MRD_NVTX_PUSHPOP, g->ids[S_BACKWARD], b0, g->now, 1, g->thread_main);

    /* optimizer; every third step it is a captured CUDA graph */
    int64_t o0 = g->now;
    if (step % 3 == 0) {
        struct mrd_graph *gr = &push(g, MRD_EV_GRAPH)->u.graph;
        gr->start = g->now + 3000;
        gr->end = gr->start + between(&g->rng, 200000, 900000);
        gr->correlation = ++g->correlation;
        gr->device = g->device;
        gr->stream = ST_COMPUTE;
        gr->graph_id = (uint32_t)(1 + step % 4);
        g->now = gr->end;
    } else {
        compute_kernels(g, (int)between(&g->rng, 8, 20), 3000, 60000);
    }
    struct mrd_sync *s = &push(g, MRD_EV_SYNC)->u.sync;
    s->start = g->now;
    s->end = g->now + between(&g->rng, 1000, 80000);
    s->correlation = ++g->correlation;
    s->type = 3; /* stream synchronize */
    s->context = 1;
    s->stream = ST_COMPUTE;
    g->now = s->end;
    struct mrd_api *a = &push(g, MRD_EV_API)->u.api;
    a->start = s->start - 500;
    a->end = s->end + 700;
    a->correlation = s->correlation;
    a->domain = MRD_API_RUNTIME;
    a->cbid = 131; /* cudaStreamSynchronize_v3020 */
    a->thread = g->thread_main;
    a->name = g->ids[S_STREAM_SYNC];
    nvtx(g, MRD_NVTX_PUSHPOP, g->ids[S_OPTIMIZER], o0, g->now, 1, g->thread_main);

    if (step % 10 == 0) {
        struct mrd_mpi *mp = &push(g, MRD_EV_MPI)->u.mpi;
        mp->start = g->now + 1000;
        mp->end = mp->start + between(&g->rng, 5000, 300000);
        mp->call = g->ids[step % 20 == 0 ? S_MPI_BARRIER : S_MPI_ALLREDUCE];
        mp->bytes = step % 20 == 0 ? 0 : 8;
        mp->peer = -1;
        mp->tag = -1;
        mp->comm_size = w;
        mp->thread = g->thread_main;
        g->now = mp->end;
    }
    if (step % 50 == 0)
        nvtx(g, MRD_NVTX_MARK, g->ids[S_CHECKPOINT], g->now, g->now, 0, g->thread_main);
    nvtx(g, MRD_NVTX_PUSHPOP, g->ids[S_TRAIN_STEP], step_start, g->now, 0, g->thread_main);

    /* a completed clock probe per step, a GPU timer sample and a GPU reading every 5 */
    struct mrd_clock_sample *c = &push(g, MRD_EV_CLOCK)->u.clock;
    int64_t rtt = between(&g->rng, 30000, 90000), off = 1700000000000000000ll;
    c->t0 = g->now;
    c->t1 = g->now + off + rtt / 2 - 2000;
    c->t2 = c->t1 + 2000;
    c->t3 = g->now + rtt;
    if (step % 5 == 0) {
        struct mrd_gpu_clock_sample *u = &push(g, MRD_EV_GPU_CLOCK)->u.gpu_clock;
        u->device = g->device;
        u->host_ns = g->now;
        u->gpu_ns = g->now - g->gpu_skew + between(&g->rng, -1400, 1400);
        u->uncertainty_ns = 1400;
        /* and an NVML reading (no random draws: the stream of the other kinds stays as
         * it was) */
        struct mrd_gpu_sample *p = &push(g, MRD_EV_GPU_SAMPLE)->u.gpu_sample;
        p->device = g->device;
        p->host_ns = g->now;
        p->sm_clock_mhz = 1980 - (uint32_t)(step % 7) * 15;
        p->mem_clock_mhz = 3201;
        p->power_mw = 550000 + (uint32_t)(step % 13) * 1000;
        p->temperature_c = 55 + (uint32_t)(step % 9);
        p->throttle_reasons = step % 35 == 0 ? 0x4 : 0; /* SW power cap, now and then */
        p->utilization_pct = 97;
    }
    if (step % 20 == 0) { /* a capture window of the 10 steps before, recorded at its end
                           * (no random draws either) */
        struct mrd_window_record *wr = &push(g, MRD_EV_WINDOW)->u.window;
        wr->start = step_start;
        wr->end = g->now;
        wr->first_step = (int64_t)step - 10;
        wr->last_step = (int64_t)step - 1;
        wr->reason = g->ids[S_PERIODIC];
        wr->attach_ns = 11000000 + (int64_t)(step % 7) * 100000;
        wr->detach_ns = 2500000;
        wr->flush_ns = 900000;
    }
    if (step == 1) { /* the environment fingerprint, once (no random draws either) */
        static const int pairs[][2] = {{S_ENV_NCCL_VERSION, S_ENV_NCCL_VERSION_VALUE},
                                       {S_ENV_NCCL_ALGO, S_RING}};
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            struct mrd_env_record *e = &push(g, MRD_EV_ENV)->u.env;
            e->key = g->ids[pairs[i][0]];
            e->value = g->ids[pairs[i][1]];
        }
    }
    g->now += between(&g->rng, 20000, 200000);
}

static void step_kernels(struct mrd_gen *g)
{
    g->step++;
    for (int i = 0; i < 256; i++) {
        uint32_t stream = ST_COMPUTE + (uint32_t)(rnd(&g->rng) % 4);
        int idx = (int)(rnd(&g->rng) % N_KERNEL_NAMES);
        kernel(g, g->kernel_ids[idx], stream == ST_COMPUTE ? ST_COMPUTE : stream + ST_EXTRA,
               between(&g->rng, 2000, 40000), 0);
    }
}

void mrd_gen_next(struct mrd_gen *g, struct mrd_canon_event *e)
{
    while (g->qpos >= g->qlen) {
        g->qlen = g->qpos = 0;
        if (g->cfg.mix == MRD_GEN_MIX_KERNELS)
            step_kernels(g);
        else
            step_training(g);
    }
    *e = g->q[g->qpos++];
}

void mrd_gen_free(struct mrd_gen *g)
{
    if (!g)
        return;
    mrd_canon_strings_free(&g->strings);
    free(g);
}

int mrd_gen_new(const struct mrd_gen_config *cfg, struct mrd_batch_builder *b, struct mrd_gen **out)
{
    struct mrd_gen *g = NULL;
    int rc = -EINVAL;
    if (!cfg || !b || cfg->world_size == 0 || cfg->rank >= cfg->world_size ||
        (cfg->mix != MRD_GEN_MIX_TRAINING && cfg->mix != MRD_GEN_MIX_KERNELS))
        goto fail;
    rc = -ENOMEM;
    g = calloc(1, sizeof *g);
    if (!g)
        goto fail;
    g->cfg = *cfg;
    for (int i = 0; i < N_KERNEL_NAMES; i++) {
        g->kernel_ids[i] = mrd_batch_builder_intern(b, kernel_names[i]);
        if (remember(g, g->kernel_ids[i], kernel_names[i]) < 0)
            goto fail;
    }
    for (int i = 0; i < S__COUNT; i++) {
        g->ids[i] = mrd_batch_builder_intern(b, other_names[i]);
        if (remember(g, g->ids[i], other_names[i]) < 0)
            goto fail;
    }
    g->rng = cfg->seed ^ (0x9e3779b97f4a7c15ull * (cfg->rank + 1));
    /* a node-local monotonic clock: about an hour after boot, different per node */
    g->now = 3600000000000ll + (int64_t)(cfg->rank / 8) * 7919000000ll +
             (int64_t)(rnd(&g->rng) % 1000000);
    g->gpu_skew = 97000 + (int64_t)(rnd(&g->rng) % 170000);
    g->device = cfg->rank % 8;
    g->thread_main = 40000 + cfg->rank * 16;
    g->thread_loader = g->thread_main + 3;
    g->comm_world = cfg->seed * 0x100000001b3ull ^ 0x6e63636c776f726cull;
    g->comm_pair = (cfg->seed + cfg->rank / 2 + 1) * 0xff51afd7ed558ccdull;
    *out = g;
    return 0;
fail:
    mrd_gen_free(g);
    return rc;
}
