/* sampler_ab: does the agent's NVML sampler slow a launch-bound thread? An A/B inside one
 * process, so that the per-process spread of launch speed (about +-12% between processes on
 * the lent H200 host, tests/bench/overhead/RESULTS-tiers.md) does not hide a 1% effect.
 *
 * Where it sits: a GPU-host benchmark of issue 9 (the steady tier's cost outside windows);
 * run by tests/gpu/run_on_gpu_host.sh's `sampler` stage. The steady tier keeps one agent
 * thread busy outside windows that touches the GPU driver: the NVML sampler
 * (agent/capture/gpu_sample.c), which reads clocks, power, temperature, throttle reasons and
 * utilisation of each GPU at 10 Hz. This program runs the same thread (sampler() below: the
 * same seven NVML calls per sample, the device looked up by PCI bus id each time, a sleep to
 * an absolute deadline) while the main thread launches empty kernels back to back, and
 * alternates phases with the sampler on and off (ABBA order, so that a drift over the run
 * cancels), each --phase-ms long; while off the thread waits on a condition variable. (Run
 * 29's version looked the device up once and polled every 200 us in both phases: it bounded
 * the NVML calls, not the thread; RESULTS-tiers.md.)
 *
 * Output: one line per phase (`phase I on|off launches=N us_per_launch=U samples=S`), then
 * `sampler_ab: hz=H pairs=P on_us=.. off_us=.. ratio_median=R ratio_ci95=[L-U]
 * sample_us_median=M added_ns_per_launch=D` (medians over the pairs; the interval a
 * bootstrap of the paired ratios; sample_us: the wall time of one sample's seven calls).
 * Exit 0, 1 on a CUDA error or a bad option, 2 when NVML cannot be loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>

#include <cuda_runtime.h>

#include "ab_stats.h"

__global__ void ab_empty_kernel(int *p)
{
    if (p && threadIdx.x == 0xffff)
        *p = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* NVML, loaded as the agent loads it (names and types of nvml.h, declared here). */
typedef void *nvml_device_t;
struct nvml_utilization {
    unsigned gpu, memory;
};
static struct {
    int (*init)(void);
    int (*by_pci)(const char *bus_id, nvml_device_t *dev);
    int (*clock)(nvml_device_t dev, int type, unsigned *mhz);
    int (*power)(nvml_device_t dev, unsigned *mw);
    int (*temperature)(nvml_device_t dev, int sensor, unsigned *c);
    int (*throttle)(nvml_device_t dev, unsigned long long *reasons);
    int (*utilization)(nvml_device_t dev, struct nvml_utilization *u);
} nv;

static int load_nvml(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    *(void **)&nv.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv.by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nv.clock = dlsym(h, "nvmlDeviceGetClockInfo");
    *(void **)&nv.power = dlsym(h, "nvmlDeviceGetPowerUsage");
    *(void **)&nv.temperature = dlsym(h, "nvmlDeviceGetTemperature");
    *(void **)&nv.throttle = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&nv.utilization = dlsym(h, "nvmlDeviceGetUtilizationRates");
    if (!nv.init || !nv.by_pci || !nv.clock || !nv.power || !nv.temperature ||
        !nv.throttle || !nv.utilization || nv.init() != 0)
        return -1;
    return 0;
}

static std::atomic<int> sampling(0), stop(0);
static std::atomic<long> samples(0);
static long period_ns;
static char pci_bus_id[32]; /* of device 0, as CUPTI's DEVICE record gives it to the agent */
static double sample_us[1 << 16];
static std::atomic<long> nsample_us(0);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;

static void set_sampling(int on)
{
    pthread_mutex_lock(&mu);
    sampling.store(on);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&mu);
}

/* gpu_sample.c's sampler thread: per sample the device looked up by its PCI bus id, then
 * six readings (1 = SM and 2 = MEM clocks, power, sensor 0 = GPU temperature, throttle
 * reasons, utilisation): seven NVML calls; between samples a sleep to an absolute deadline
 * PERIOD later, as the agent's thread does. While off, the thread waits on a condition
 * variable, so the off phases have no thread of ours waking at all (an unprofiled process
 * has none). */
static void *sampler(void *arg)
{
    struct timespec next;
    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &next); /* the first phase may be on before it parks */
    for (;;) {
        pthread_mutex_lock(&mu);
        int parked = 0;
        while (!sampling.load() && !stop.load()) {
            pthread_cond_wait(&wake, &mu);
            parked = 1;
        }
        pthread_mutex_unlock(&mu);
        if (stop.load())
            return NULL;
        if (parked)
            clock_gettime(CLOCK_MONOTONIC, &next); /* a new phase samples at once */
        double t0 = now_s();
        nvml_device_t dev = NULL;
        unsigned v;
        unsigned long long reasons;
        struct nvml_utilization u;
        if (nv.by_pci(pci_bus_id, &dev) == 0) {
            nv.clock(dev, 1, &v);
            nv.clock(dev, 2, &v);
            nv.power(dev, &v);
            nv.temperature(dev, 0, &v);
            nv.throttle(dev, &reasons);
            nv.utilization(dev, &u);
        }
        double t1 = now_s();
        long k = nsample_us.fetch_add(1);
        if (k < (long)(sizeof sample_us / sizeof sample_us[0]))
            sample_us[k] = (t1 - t0) * 1e6;
        samples.fetch_add(1);
        next.tv_nsec += period_ns % 1000000000L;
        next.tv_sec += period_ns / 1000000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }
}

int main(int argc, char **argv)
{
    double hz = 10, phase_ms = 500;
    int pairs = 40, block = 500;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hz") && i + 1 < argc)
            hz = atof(argv[++i]);
        else if (!strcmp(argv[i], "--phase-ms") && i + 1 < argc)
            phase_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: sampler_ab [--hz 10] [--phase-ms 500] [--pairs 40]\n");
            return 1;
        }
    }
    if (hz <= 0 || phase_ms <= 0 || pairs < 2 || pairs > 10000) {
        fprintf(stderr, "sampler_ab: --hz and --phase-ms must be > 0, --pairs 2 to 10000\n");
        return 1;
    }
    period_ns = (long)(1e9 / hz);
    if (load_nvml() != 0) {
        fprintf(stderr, "sampler_ab: cannot load NVML (libnvidia-ml.so.1)\n");
        return 2;
    }
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) {
        fprintf(stderr, "sampler_ab: CUDA: %s\n", cudaGetErrorString(e));
        return 1;
    }
    e = cudaDeviceGetPCIBusId(pci_bus_id, sizeof pci_bus_id, 0);
    if (e != cudaSuccess) {
        fprintf(stderr, "sampler_ab: CUDA: %s\n", cudaGetErrorString(e));
        return 1;
    }
    for (int i = 0; i < 20000; i++) /* warm-up */
        ab_empty_kernel<<<1, 1>>>(NULL);
    cudaDeviceSynchronize();

    pthread_t th;
    pthread_create(&th, NULL, sampler, NULL);
    double *on = (double *)calloc(pairs, sizeof(double));
    double *off = (double *)calloc(pairs, sizeof(double));
    double *ratio = (double *)calloc(pairs, sizeof(double));
    for (int p = 0; p < pairs; p++) {
        for (int half = 0; half < 2; half++) {
            int is_on = (p % 2 == 0) == (half == 0); /* ABBA: on,off / off,on / ... */
            set_sampling(is_on);
            long s0 = samples.load(), n = 0;
            double t0 = now_s(), t;
            do {
                for (int k = 0; k < block; k++)
                    ab_empty_kernel<<<1, 1>>>(NULL);
                e = cudaDeviceSynchronize();
                n += block;
                t = now_s();
            } while (e == cudaSuccess && (t - t0) * 1e3 < phase_ms);
            if (e != cudaSuccess) {
                fprintf(stderr, "sampler_ab: CUDA: %s\n", cudaGetErrorString(e));
                return 1;
            }
            double us = (t - t0) * 1e6 / n;
            (is_on ? on : off)[p] = us;
            printf("phase %d %s launches=%ld us_per_launch=%.4f samples=%ld\n", 2 * p + half,
                   is_on ? "on" : "off", n, us, samples.load() - s0);
        }
        ratio[p] = on[p] / off[p];
    }
    stop.store(1);
    set_sampling(0);
    pthread_join(th, NULL);

    /* bootstrap of the median of the paired ratios: 2000 resamples, fixed seed */
    double lo = 0, hi = 0;
    if (ab_bootstrap_median(ratio, pairs, &lo, &hi) != 0)
        return 1;
    double r = ab_median(ratio, pairs), on_us = ab_median(on, pairs);
    double off_us = ab_median(off, pairs);
    long ns = nsample_us.load();
    double s_us = ab_median(sample_us, ns < (1 << 16) ? (int)ns : (1 << 16));
    printf("sampler_ab: hz=%g pairs=%d phase_ms=%g on_us=%.4f off_us=%.4f ratio_median=%.4f "
           "ratio_ci95=[%.4f-%.4f] sample_us_median=%.1f added_ns_per_launch=%.1f\n",
           hz, pairs, phase_ms, on_us, off_us, r, lo, hi, s_us,
           (on_us - off_us) * 1e3);
    return 0;
}
