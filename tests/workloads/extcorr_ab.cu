/* extcorr_ab: what does a CUPTI external-correlation push and pop around a kernel launch
 * cost the launching thread? An A/B inside one process (the per-process spread of launch
 * speed on the lent H200 host is about +-12%, tests/bench/overhead/RESULTS-tiers.md).
 *
 * Where it sits: a GPU-host benchmark of issue 9, run by tests/gpu/run_on_gpu_host.sh's
 * `extcorr` stage. Why: inside a window meridian's traced GPT-2 step costs 1.18x what a bare
 * kernels-only CUPTI consumer's costs (runs 40-41, in the same processes), about 0.4 ms a
 * step, and kernel-dense's does not (1.00x). One thing the agent does only inside windows,
 * and per collective rather than per launch, is push and pop a CUPTI external correlation
 * id around each NCCL kernel launch (agent/capture/nccl_plugin.c ->
 * mrd__cupti_extcorr_push/pop), about 20 times a GPT-2 step (its DDP gradient buckets), once
 * or twice a kernel-dense one. This program measures that pair's cost directly.
 *
 * CUPTI is set up as the agent sets it up in a window (a pool of pre-zeroed buffers handed
 * out by the request callback, CONCURRENT_KERNEL records; completed buffers are dropped),
 * then phases of --launches empty-kernel launches each, in the order plain, pp, pp_ext,
 * pp_ext, pp, plain, ... (so that a drift over the run cancels):
 *   plain   the launch alone
 *   pp      cuptiActivityPushExternalCorrelationId, the launch, ...PopExternalCorrelationId,
 *           with the EXTERNAL_CORRELATION kind off (a one-rank job: CUPTI discards the id)
 *   pp_ext  the same with EXTERNAL_CORRELATION on (two or more ranks: the id becomes a record)
 * Output: one line a phase (`phase I NAME launches=N us_per_launch=U`), then
 * `extcorr_ab: cycles=C launches=N plain_us=.. pp_added_ns=D [L-U] pp_ext_added_ns=E [L-U]
 * dropped=K` (medians over the cycles of each phase's time a launch minus the plain phase's
 * of the same cycle, in ns, with a bootstrap interval; dropped: CUPTI's dropped records).
 * Exit 0; 1 on a CUDA or CUPTI error or a bad option.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cuda_runtime.h>
#include <cupti.h>

#include "ab_stats.h"

#define POOL 16
#define BUF_BYTES (8u << 20)

__global__ void ec_empty_kernel(int *p)
{
    if (p && threadIdx.x == 0xffff)
        *p = 1;
}

static uint8_t *pool;
static int busy[POOL];

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    for (int i = 0; i < POOL; i++)
        if (!__atomic_exchange_n(&busy[i], 1, __ATOMIC_ACQ_REL)) {
            *buffer = pool + (size_t)i * BUF_BYTES;
            *size = BUF_BYTES;
            return;
        }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    memset(buffer, 0, valid); /* pre-zeroed again, as CUPTI was promised */
    __atomic_store_n(&busy[(buffer - pool) / BUF_BYTES], 0, __ATOMIC_RELEASE);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cupti_ok(CUptiResult r, const char *what)
{
    if (r == CUPTI_SUCCESS)
        return 1;
    const char *s = NULL;
    cuptiGetResultString(r, &s);
    fprintf(stderr, "extcorr_ab: %s: %s\n", what, s ? s : "?");
    return 0;
}

/* One phase: n launches, each between a push and a pop when pp; returns us a launch, or -1. */
static double phase(long n, int pp)
{
    uint64_t id = 1;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if (pp)
            cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, id++);
        ec_empty_kernel<<<1, 1>>>(NULL);
        if (pp)
            cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &id);
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "extcorr_ab: CUDA: %s\n", cudaGetErrorString(e));
        return -1;
    }
    return (now_s() - t0) * 1e6 / (double)n;
}

int main(int argc, char **argv)
{
    long launches = 20000;
    int cycles = 30;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--launches") && i + 1 < argc)
            launches = atol(argv[++i]);
        else if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
            cycles = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: extcorr_ab [--launches 20000] [--cycles 30]\n");
            return 1;
        }
    }
    if (launches < 100 || launches > 10000000 || cycles < 3 || cycles > 10000) {
        fprintf(stderr, "extcorr_ab: --launches 100 to 10000000, --cycles 3 to 10000\n");
        return 1;
    }
    pool = (uint8_t *)mmap(NULL, (size_t)POOL * BUF_BYTES, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (pool == MAP_FAILED) {
        perror("extcorr_ab: mmap");
        return 1;
    }
    uint8_t one = 1;
    size_t sz = sizeof one;
    if (!cupti_ok(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                                            &sz, &one), "zeroed-buffer attribute") ||
        !cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                  "buffer callbacks") ||
        !cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "kernel records"))
        return 1;
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) {
        fprintf(stderr, "extcorr_ab: CUDA: %s\n", cudaGetErrorString(e));
        return 1;
    }
    if (phase(launches, 1) < 0) /* warm-up, both paths */
        return 1;

    static const char *names[3] = {"plain", "pp", "pp_ext"};
    double *us[3], *added[2];
    for (int k = 0; k < 3; k++)
        us[k] = (double *)calloc(cycles, sizeof(double));
    for (int k = 0; k < 2; k++)
        added[k] = (double *)calloc(cycles, sizeof(double));
    int ext_on = 0, nphase = 0;
    for (int c = 0; c < cycles; c++) {
        for (int j = 0; j < 3; j++) {
            int k = c % 2 == 0 ? j : 2 - j; /* plain, pp, pp_ext / pp_ext, pp, plain */
            int want_ext = k == 2;
            if (want_ext != ext_on) {
                CUptiResult r = want_ext
                    ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
                    : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
                if (!cupti_ok(r, "EXTERNAL_CORRELATION on/off"))
                    return 1;
                ext_on = want_ext;
            }
            double u = phase(launches, k != 0);
            if (u < 0)
                return 1;
            us[k][c] = u;
            printf("phase %d %s launches=%ld us_per_launch=%.4f\n", nphase++, names[k],
                   launches, u);
        }
        added[0][c] = (us[1][c] - us[0][c]) * 1e3;
        added[1][c] = (us[2][c] - us[0][c]) * 1e3;
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
    double lo[2], hi[2];
    for (int k = 0; k < 2; k++)
        if (ab_bootstrap_median(added[k], cycles, &lo[k], &hi[k]) != 0)
            return 1;
    double plain_us = ab_median(us[0], cycles);
    double pp = ab_median(added[0], cycles), ppx = ab_median(added[1], cycles);
    printf("extcorr_ab: cycles=%d launches=%ld plain_us=%.4f pp_added_ns=%.1f [%.1f-%.1f] "
           "pp_ext_added_ns=%.1f [%.1f-%.1f] dropped=%zu\n",
           cycles, launches, plain_us, pp, lo[0], hi[0], ppx, lo[1], hi[1], dropped);
    return 0;
}
