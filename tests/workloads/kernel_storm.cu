/* kernel_storm: the worst case for a kernel tracer, a storm of tiny kernel launches.
 *
 * Where it sits: workload (a) of the overhead benchmark (tests/bench/overhead). It launches
 * --launches empty kernels (1 block x 1 thread) back to back on one stream, after --warmup
 * untimed ones, and reports the wall time of the launch loop plus the final
 * synchronisation. Per-launch cost is what a tracer adds to every kernel of a real job:
 * CUPTI's CONCURRENT_KERNEL tracing alone adds ~1 us to a ~3.5 us launch (CAPTURE-FACTS).
 *
 * Workload: 200,000 launches by default (~1 s untraced on an H200), one host thread, one
 * GPU (--device, default 0). --sync-every K synchronises every K launches (0: only at the
 * end). --pin-cpu C binds the launching thread alone to CPU C once CUDA is up (threads CUDA
 * and a tracer started before keep their own CPUs: with `taskset` around the process this
 * separates the launcher from every other thread). Output, one line: `kernel_storm: launches=N wall_s=S us_per_launch=U stalls=K
 * stall_ms=T max_launch_us=M`: each launch is timed (one vDSO clock read, ~20 ns), and a
 * launch over STALL_US (50 us, ~15 typical launches) counts as a stall: a tracer that blocks
 * the launching thread (a lock held across a callback) shows as few long stalls, one that
 * slows every launch as a higher us_per_launch with none. Exit 0, or 1 on a CUDA error or
 * a bad option.
 *
 * --steps N splits the launches into N steps of launches/N (the remainder is dropped), each
 * an NVTX range "step I" (I from 0) ending with a stream synchronisation, so every kernel
 * of a step has run before the step's range ends: the steady tier's windows (agent/capture/
 * window.h) open on these ranges, and a window of steps A-B must capture exactly
 * (B-A+1)*launches/N kernels. It then also prints
 * `kernel_storm: steps=N launches_per_step=K step_us=T0,T1,...` (each step's wall time,
 * range push to pop, in microseconds).
 *
 * --bare-windows L/P@O (with --steps) runs the bare CUPTI consumer in windows: the library
 * named by BARE_CONSUMER_LIB (tests/gpu/libbare_consumer.so, its kinds from
 * BARE_CONSUMER_KINDS) is dlopened; before step O+kP it is attached, after step O+kP+L-1 it
 * is detached (CUPTI's dynamic detach, completed by the synchronisation that follows), so
 * traced and untraced steps alternate in one process as in meridian's steady tier with
 * MERIDIAN_WINDOWS=L/P@O (tests/bench/overhead/inproc.py). A library that cannot be loaded,
 * attached or detached is an error.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CUDA_CHECK(x)                                                                           \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "kernel_storm: %s: %s\n", #x, cudaGetErrorString(e_));              \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

__global__ void empty_kernel(int *p)
{
    if (p && threadIdx.x == 0xffff) /* never true: keeps the kernel from being trivial */
        *p = 1;
}

#define STALL_US 50.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int arg_long(int argc, char **argv, const char *name, long dflt, long lo, long hi,
                    long *out)
{
    *out = dflt;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            char *end;
            long v = strtol(argv[i + 1], &end, 0);
            if (*end || v < lo || v > hi) {
                fprintf(stderr, "kernel_storm: bad %s %s\n", name, argv[i + 1]);
                return -1;
            }
            *out = v;
        }
    return 0;
}

/* --bare-windows: the bare consumer's entry points, from BARE_CONSUMER_LIB. */
typedef int (*bare_fn)(void);
static bare_fn bare_attach, bare_detach, bare_attached;

static int bare_load(void)
{
    const char *path = getenv("BARE_CONSUMER_LIB");
    void *h = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h) {
        bare_attach = (bare_fn)dlsym(h, "bare_consumer_attach");
        bare_detach = (bare_fn)dlsym(h, "bare_consumer_detach");
        bare_attached = (bare_fn)dlsym(h, "bare_consumer_attached");
    }
    if (!bare_attach || !bare_detach || !bare_attached) {
        fprintf(stderr, "kernel_storm: --bare-windows: cannot load the bare consumer from "
                        "BARE_CONSUMER_LIB=%s: %s\n", path ? path : "(unset)",
                path && *path ? dlerror() : "set it to tests/gpu/libbare_consumer.so");
        return -1;
    }
    return 0;
}

/* Step s's place in the windows L/P@O: 1 its first step, 2 its last, 3 both, else 0. */
static int bare_edge(long s, long len, long period, long offset)
{
    if (len <= 0 || s < offset)
        return 0;
    long k = (s - offset) % period;
    return (k == 0 ? 1 : 0) | (k == len - 1 ? 2 : 0);
}

/* --steps: steps of per_step launches, each its own NVTX range ending in a sync. */
static int run_steps(cudaStream_t st, long per_step, long steps, const long bare[3])
{
    double *us = (double *)calloc((size_t)steps, sizeof(double));
    char name[32];
    if (!us)
        return 1;
    double t0 = now_s();
    for (long s = 0; s < steps; s++) {
        int edge = bare_edge(s, bare[0], bare[1], bare[2]);
        if ((edge & 1) && bare_attach() != 0) {
            fprintf(stderr, "kernel_storm: bare_consumer_attach before step %ld failed\n", s);
            free(us);
            return 1;
        }
        snprintf(name, sizeof name, "step %ld", s);
        double ts = now_s();
        nvtxRangePushA(name);
        for (long i = 0; i < per_step; i++)
            empty_kernel<<<1, 1, 0, st>>>(NULL);
        CUDA_CHECK(cudaStreamSynchronize(st));
        nvtxRangePop();
        us[s] = (now_s() - ts) * 1e6;
        if (edge & 2) {
            int e = bare_detach();
            CUDA_CHECK(cudaStreamSynchronize(st)); /* the API exit that completes it */
            if (e != 0 || bare_attached()) {
                fprintf(stderr, "kernel_storm: bare_consumer_detach after step %ld failed\n", s);
                free(us);
                return 1;
            }
        }
    }
    double wall = now_s() - t0;
    CUDA_CHECK(cudaGetLastError());
    printf("kernel_storm: launches=%ld wall_s=%.6f us_per_launch=%.3f steps=%ld "
           "launches_per_step=%ld\n",
           per_step * steps, wall, wall * 1e6 / (double)(per_step * steps), steps, per_step);
    printf("kernel_storm: step_us=");
    for (long s = 0; s < steps; s++)
        printf("%s%.1f", s ? "," : "", us[s]);
    printf("\n");
    free(us);
    CUDA_CHECK(cudaStreamDestroy(st));
    return 0;
}

int main(int argc, char **argv)
{
    long launches, warmup, sync_every, device, pin_cpu, steps;
    long bare[3] = {0, 1, 0}; /* --bare-windows L/P@O; L 0: none */
    cudaStream_t st;
    double t0, wall, prev, stall_s = 0, max_s = 0;
    long stalls = 0;

    for (int i = 1; i < argc; i += 2)
        if (strcmp(argv[i], "--launches") && strcmp(argv[i], "--warmup") &&
            strcmp(argv[i], "--sync-every") && strcmp(argv[i], "--device") &&
            strcmp(argv[i], "--pin-cpu") && strcmp(argv[i], "--steps") &&
            strcmp(argv[i], "--bare-windows")) {
            fprintf(stderr, "usage: kernel_storm [--launches N] [--warmup N] [--sync-every K] "
                            "[--device D] [--pin-cpu C] [--steps N [--bare-windows L/P@O]]\n");
            return 1;
        }
    if (arg_long(argc, argv, "--launches", 200000, 1, 100000000, &launches) ||
        arg_long(argc, argv, "--warmup", 2000, 0, 1000000, &warmup) ||
        arg_long(argc, argv, "--sync-every", 0, 0, 100000000, &sync_every) ||
        arg_long(argc, argv, "--device", 0, 0, 64, &device) ||
        arg_long(argc, argv, "--pin-cpu", -1, -1, CPU_SETSIZE - 1, &pin_cpu) ||
        arg_long(argc, argv, "--steps", 0, 0, 1000000, &steps))
        return 1;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--bare-windows") == 0) {
            char extra;
            if (sscanf(argv[i + 1], "%ld/%ld@%ld%c", &bare[0], &bare[1], &bare[2], &extra) != 3 ||
                bare[0] < 1 || bare[1] <= bare[0] || bare[2] < 0 || steps == 0) {
                fprintf(stderr, "kernel_storm: --bare-windows %s: want LENGTH/PERIOD@OFFSET, "
                                "LENGTH < PERIOD, with --steps\n", argv[i + 1]);
                return 1;
            }
            if (bare_load() != 0)
                return 1;
        }
    if (steps > launches) {
        fprintf(stderr, "kernel_storm: --steps %ld is more than --launches %ld\n", steps, launches);
        return 1;
    }

    CUDA_CHECK(cudaSetDevice((int)device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int)pin_cpu, &set);
        int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (e) {
            fprintf(stderr, "kernel_storm: cannot pin to CPU %ld: %s\n", pin_cpu, strerror(e));
            return 1;
        }
    }
    for (long i = 0; i < warmup; i++)
        empty_kernel<<<1, 1, 0, st>>>(NULL);
    CUDA_CHECK(cudaStreamSynchronize(st));

    if (steps > 0)
        return run_steps(st, launches / steps, steps, bare);

    nvtxRangePushA("kernel_storm");
    t0 = prev = now_s();
    for (long i = 0; i < launches; i++) {
        empty_kernel<<<1, 1, 0, st>>>(NULL);
        if (sync_every && (i + 1) % sync_every == 0)
            CUDA_CHECK(cudaStreamSynchronize(st));
        double t = now_s(), d = t - prev;
        prev = t;
        if (d > max_s)
            max_s = d;
        if (d > STALL_US * 1e-6) {
            stalls++;
            stall_s += d;
        }
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(st));
    wall = now_s() - t0;
    nvtxRangePop();

    printf("kernel_storm: launches=%ld wall_s=%.6f us_per_launch=%.3f stalls=%ld "
           "stall_ms=%.3f max_launch_us=%.1f\n",
           launches, wall, wall * 1e6 / (double)launches, stalls, stall_s * 1e3, max_s * 1e6);
    CUDA_CHECK(cudaStreamDestroy(st));
    return 0;
}
