/* ref_workload: meridian's reference MPI + NCCL + CUDA job (one process per GPU).
 *
 * Where it sits: the job meridian profiles on the GPU host (tests/gpu/run_on_gpu_host.sh,
 * stages workloads/capture/overhead). It is not part of meridian; it exists so that what
 * meridian captures can be checked against what the job itself knows it did.
 *
 * What a step does (per rank, one GPU each, chosen by the local rank):
 *   nvtxRangePush("step N")
 *   compute stream: K FMA-loop kernels (--kernels-per-step, together ~--compute-us);
 *                   on a slow step of the slow rank a spin kernel of --slow-us goes first
 *   comm stream:    C all-reduces of --bytes each (--colls-per-step); bucket c waits for
 *                   the compute kernel that "produced" it, so all but the last overlap
 *                   with the remaining compute (like DDP's gradient buckets)
 *   nvtxMarkA("step N enqueued"); wait for both streams; nvtxRangePop()
 * Warm-up steps (--warmup) run the same body first and are not timed (the first NCCL
 * collective of a communicator takes hundreds of milliseconds).
 *
 * Output (stdout, one line each, prefixed "ref_workload:"): per rank the number of NCCL
 * collectives it issued (warm-up included: everything a profiler can see), the step time
 * statistics, and on rank 0 the measured wall time and the result check. --print-steps
 * adds one line per step. --parse-only prints the parsed options and exits (no MPI, no
 * GPU): CI tests the option parser with it.
 *
 * Workload size: defaults 100 steps x (4 kernels, 2 ms; 2 x 16 MiB all-reduce), about a
 * second per run on an H200 pair. Memory: 2 x C x --bytes of device memory per rank.
 * Exit status: 0 on success, 1 on bad options or a CUDA/NCCL/MPI failure, 2 when the
 * all-reduce result is wrong.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

#define MAX_RANGES 64
#define MAX_COLLS 16
#define MAX_KERNELS 64

struct range {
    int lo, hi;
};

struct opts {
    int steps, warmup;
    size_t bytes;
    int slow_rank;
    long slow_us;
    int slow_every; /* > 0: every k-th step (0, k, 2k, ...) */
    int nranges;    /* else: explicit steps */
    struct range ranges[MAX_RANGES];
    long compute_us;
    int colls_per_step, kernels_per_step;
    int parse_only, print_steps;
};

#define CUDA_CHECK(x)                                                                           \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "ref_workload: %s:%d %s: %s\n", __FILE__, __LINE__, #x,             \
                    cudaGetErrorString(e_));                                                    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
        }                                                                                       \
    } while (0)

#define NCCL_CHECK(x)                                                                           \
    do {                                                                                        \
        ncclResult_t r_ = (x);                                                                  \
        if (r_ != ncclSuccess) {                                                                \
            fprintf(stderr, "ref_workload: %s:%d %s: %s\n", __FILE__, __LINE__, #x,             \
                    ncclGetErrorString(r_));                                                    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
        }                                                                                       \
    } while (0)

/* Matmul-like arithmetic without memory traffic: two dependent FMA chains per thread. */
__global__ void fma_kernel(float *out, int iters, float a, float b)
{
    float x = threadIdx.x * 1e-3f, y = blockIdx.x * 1e-3f;
    for (int i = 0; i < iters; i++) {
        x = fmaf(x, a, b);
        y = fmaf(y, b, a);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x + y;
}

/* The straggler: one thread spins on the GPU's global timer for ns nanoseconds. */
__global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

__global__ void fill_kernel(float *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 0);
    if (errno || end == s || (*end && strcmp(end, "K") && strcmp(end, "M") && strcmp(end, "G")))
        return -EINVAL;
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    else if (*end == 'G')
        v <<= 30;
    if (v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

/* "3,5-7,12" or "every:K" or "all" or "none". */
static int parse_slow_steps(const char *s, struct opts *o)
{
    o->slow_every = 0;
    o->nranges = 0;
    if (strcmp(s, "none") == 0)
        return 0;
    if (strcmp(s, "all") == 0) {
        o->slow_every = 1;
        return 0;
    }
    if (strncmp(s, "every:", 6) == 0) {
        long k;
        if (parse_long(s + 6, 1, 1 << 30, &k))
            return -EINVAL;
        o->slow_every = (int)k;
        return 0;
    }
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0 || o->nranges == MAX_RANGES)
            return -EINVAL;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo)
                return -EINVAL;
            s = end;
        }
        o->ranges[o->nranges].lo = (int)lo;
        o->ranges[o->nranges].hi = (int)hi;
        o->nranges++;
        if (*s == ',')
            s++;
        else if (*s)
            return -EINVAL;
    }
    return 0;
}

static int is_slow_step(const struct opts *o, int step)
{
    if (o->slow_every > 0)
        return step % o->slow_every == 0;
    for (int i = 0; i < o->nranges; i++)
        if (step >= o->ranges[i].lo && step <= o->ranges[i].hi)
            return 1;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: ref_workload [--steps N] [--warmup N] [--bytes B[K|M|G]] [--compute-us U]\n"
            "         [--kernels-per-step K] [--colls-per-step C] [--slow-rank R]\n"
            "         [--slow-us U] [--slow-steps LIST|every:K|all|none] [--print-steps]\n"
            "         [--parse-only]\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    o->steps = 100;
    o->warmup = 10;
    o->bytes = 16u << 20;
    o->slow_rank = -1;
    o->compute_us = 2000;
    o->colls_per_step = 2;
    o->kernels_per_step = 4;
    o->slow_every = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        int rc = 0;

        if (strcmp(a, "--parse-only") == 0) {
            o->parse_only = 1;
            continue;
        }
        if (strcmp(a, "--print-steps") == 0) {
            o->print_steps = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "ref_workload: %s needs a value\n", a);
            return -EINVAL;
        }
        i++;
        if (strcmp(a, "--steps") == 0 && !(rc = parse_long(v, 1, 1000000, &x)))
            o->steps = (int)x;
        else if (strcmp(a, "--warmup") == 0 && !(rc = parse_long(v, 0, 100000, &x)))
            o->warmup = (int)x;
        else if (strcmp(a, "--bytes") == 0 && !(rc = parse_long(v, 4, 1l << 34, &x)))
            o->bytes = (size_t)x & ~(size_t)3;
        else if (strcmp(a, "--compute-us") == 0 && !(rc = parse_long(v, 0, 10000000, &x)))
            o->compute_us = x;
        else if (strcmp(a, "--kernels-per-step") == 0 &&
                 !(rc = parse_long(v, 1, MAX_KERNELS, &x)))
            o->kernels_per_step = (int)x;
        else if (strcmp(a, "--colls-per-step") == 0 && !(rc = parse_long(v, 0, MAX_COLLS, &x)))
            o->colls_per_step = (int)x;
        else if (strcmp(a, "--slow-rank") == 0 && !(rc = parse_long(v, -1, 1 << 20, &x)))
            o->slow_rank = (int)x;
        else if (strcmp(a, "--slow-us") == 0 && !(rc = parse_long(v, 0, 10000000, &x)))
            o->slow_us = x;
        else if (strcmp(a, "--slow-steps") == 0)
            rc = parse_slow_steps(v, o);
        else if (!rc)
            rc = -EINVAL;
        if (rc) {
            fprintf(stderr, "ref_workload: bad option %s %s\n", a, v);
            return rc;
        }
    }
    if (o->colls_per_step > o->kernels_per_step) {
        fprintf(stderr, "ref_workload: --colls-per-step must not exceed --kernels-per-step\n");
        return -EINVAL;
    }
    return 0;
}

static void print_options(const struct opts *o)
{
    int n = 0;

    printf("ref_workload: options steps=%d warmup=%d bytes=%zu compute_us=%ld "
           "kernels_per_step=%d colls_per_step=%d slow_rank=%d slow_us=%ld slow_steps=",
           o->steps, o->warmup, o->bytes, o->compute_us, o->kernels_per_step,
           o->colls_per_step, o->slow_rank, o->slow_us);
    for (int s = 0; s < o->steps && o->slow_rank >= 0 && o->slow_us > 0; s++)
        if (is_slow_step(o, s))
            printf("%s%d", n++ ? "," : "", s);
    printf("%s\n", n ? "" : "none");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int local_rank_of(int rank)
{
    const char *s = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    MPI_Comm node;
    int lr;

    if (s && *s)
        return atoi(s);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lr);
    MPI_Comm_free(&node);
    return lr;
}

/* Iterations of fma_kernel per microsecond on this GPU at the given grid. */
static double calibrate(float *out, int blocks, int threads, cudaStream_t st)
{
    const int iters = 1 << 15;
    cudaEvent_t e0, e1;
    float ms = 0;

    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    fma_kernel<<<blocks, threads, 0, st>>>(out, iters, 0.999f, 0.001f);
    CUDA_CHECK(cudaEventRecord(e0, st));
    for (int i = 0; i < 4; i++)
        fma_kernel<<<blocks, threads, 0, st>>>(out, iters, 0.999f, 0.001f);
    CUDA_CHECK(cudaEventRecord(e1, st));
    CUDA_CHECK(cudaEventSynchronize(e1));
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return ms > 0 ? 4.0 * iters / (ms * 1000.0) : 1000.0;
}

struct ctx {
    const struct opts *o;
    int rank;
    ncclComm_t comm;
    cudaStream_t compute, comm_st;
    cudaEvent_t ready[MAX_COLLS];
    float *send, *recv, *scratch;
    size_t count;
    int blocks, threads, iters;
    long collectives;
};

/* One step: compute kernels, gated all-reduces, NVTX range and mark, wait for both streams. */
static void run_step(struct ctx *c, int step, int measured)
{
    const struct opts *o = c->o;
    char name[64];
    int bucket = 0;

    snprintf(name, sizeof(name), "%s %d", measured ? "step" : "warmup", step);
    nvtxRangePushA(name);
    if (measured && c->rank == o->slow_rank && o->slow_us > 0 && is_slow_step(o, step))
        spin_kernel<<<1, 1, 0, c->compute>>>((unsigned long long)o->slow_us * 1000ull);
    for (int k = 0; k < o->kernels_per_step; k++) {
        fma_kernel<<<c->blocks, c->threads, 0, c->compute>>>(c->scratch, c->iters, 0.999f,
                                                             0.001f);
        /* bucket b is ready after kernel (b+1)*K/C - 1 */
        while (bucket < o->colls_per_step &&
               k == (bucket + 1) * o->kernels_per_step / o->colls_per_step - 1) {
            CUDA_CHECK(cudaEventRecord(c->ready[bucket], c->compute));
            CUDA_CHECK(cudaStreamWaitEvent(c->comm_st, c->ready[bucket], 0));
            NCCL_CHECK(ncclAllReduce(c->send + bucket * c->count, c->recv + bucket * c->count,
                                     c->count, ncclFloat, ncclSum, c->comm, c->comm_st));
            c->collectives++;
            bucket++;
        }
    }
    CUDA_CHECK(cudaGetLastError());
    snprintf(name, sizeof(name), "step %d enqueued", step);
    nvtxMarkA(name);
    CUDA_CHECK(cudaStreamSynchronize(c->comm_st));
    CUDA_CHECK(cudaStreamSynchronize(c->compute));
    nvtxRangePop();
}

int main(int argc, char **argv)
{
    struct opts o;
    struct ctx c;
    ncclUniqueId id;
    int rank, world, ndev = 0, dev, sms = 0, nslow = 0;
    double *times, t0, wall, total = 0;
    float check = 0;
    cudaDeviceProp prop;

    setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast stays off on shared hosts */
    if (parse_args(argc, argv, &o)) {
        usage();
        return 1;
    }
    if (o.parse_only) {
        print_options(&o);
        return 0;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (rank == 0)
        print_options(&o);

    memset(&c, 0, sizeof(c));
    c.o = &o;
    c.rank = rank;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    dev = local_rank_of(rank) % (ndev > 0 ? ndev : 1);
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    sms = prop.multiProcessorCount;
    CUDA_CHECK(cudaStreamCreateWithFlags(&c.compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c.comm_st, cudaStreamNonBlocking));
    for (int b = 0; b < MAX_COLLS; b++)
        CUDA_CHECK(cudaEventCreateWithFlags(&c.ready[b], cudaEventDisableTiming));
    c.count = o.bytes / sizeof(float);
    c.threads = 256;
    c.blocks = sms * 2;
    {
        size_t nbuf = c.count * (o.colls_per_step > 0 ? o.colls_per_step : 1);
        CUDA_CHECK(cudaMalloc(&c.send, nbuf * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&c.recv, nbuf * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&c.scratch, (size_t)c.blocks * c.threads * sizeof(float)));
        fill_kernel<<<sms * 4, 256, 0, c.compute>>>(c.send, nbuf, (float)(rank + 1));
        CUDA_CHECK(cudaMemsetAsync(c.recv, 0, nbuf * sizeof(float), c.compute));
    }
    {
        double per_us = calibrate(c.scratch, c.blocks, c.threads, c.compute);
        double it = per_us * (double)o.compute_us / o.kernels_per_step;
        c.iters = it < 1 ? 1 : it > 2e9 ? 2000000000 : (int)it;
    }

    if (rank == 0)
        NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_CHECK(ncclCommInitRank(&c.comm, world, id, rank));

    for (int s = 0; s < o.warmup; s++)
        run_step(&c, s, 0);
    times = (double *)calloc((size_t)o.steps, sizeof(double));
    if (!times)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int s = 0; s < o.steps; s++) {
        double ts = now_s();
        run_step(&c, s, 1);
        times[s] = (now_s() - ts) * 1e3;
        total += times[s];
        nslow += rank == o.slow_rank && o.slow_us > 0 && is_slow_step(&o, s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    wall = now_s() - t0;

    if (o.colls_per_step > 0)
        CUDA_CHECK(cudaMemcpy(&check, c.recv, sizeof(float), cudaMemcpyDeviceToHost));
    if (o.print_steps)
        for (int s = 0; s < o.steps; s++)
            printf("ref_workload: rank %d step %d ms=%.3f\n", rank, s, times[s]);
    printf("ref_workload: rank %d nccl_collectives=%ld steps=%d warmup=%d colls_per_step=%d "
           "bytes=%zu device=%d\n",
           rank, c.collectives, o.steps, o.warmup, o.colls_per_step, o.bytes, dev);
    {
        double mean = total / o.steps;
        qsort(times, (size_t)o.steps, sizeof(double), cmp_double);
        printf("ref_workload: rank %d step_ms median=%.3f mean=%.3f p10=%.3f p90=%.3f "
               "min=%.3f max=%.3f slowed_steps=%d iters_per_kernel=%d\n",
               rank, times[o.steps / 2], mean, times[o.steps / 10],
               times[(o.steps * 9) / 10 < o.steps ? (o.steps * 9) / 10 : o.steps - 1],
               times[0], times[o.steps - 1], nslow, c.iters);
    }
    fflush(stdout);
    {
        float expect = (float)world * (world + 1) / 2.0f;
        int bad = o.colls_per_step > 0 && check != expect, any_bad = 0;
        MPI_Reduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("ref_workload: world=%d measured_wall_s=%.6f check=%s\n", world, wall,
                   any_bad ? "FAILED" : "ok");
            fflush(stdout);
        }
        MPI_Bcast(&any_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
        bad = any_bad;
        NCCL_CHECK(ncclCommDestroy(c.comm));
        cudaFree(c.send);
        cudaFree(c.recv);
        cudaFree(c.scratch);
        free(times);
        MPI_Finalize();
        return bad ? 2 : 0;
    }
}
