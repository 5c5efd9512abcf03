/* capture_sample_tiers: the NVML sampler's two rates follow the steady tier's windows
 * (agent/capture/gpu_sample.c), against the fake CUPTI of capture_window and the stand-in
 * NVML of capture_env_e2e (fake_nvml.c, on LD_LIBRARY_PATH; its counters are read, never
 * slept on).
 *
 * MERIDIAN_TRACE=steady, MERIDIAN_WINDOWS=2-3, MERIDIAN_GPU_SAMPLE_HZ=50 (while CUPTI
 * traces) and MERIDIAN_GPU_SAMPLE_STEADY_HZ=0 (between windows: no readings), so each
 * expectation is exact whatever the machine's load:
 *   - the GPU's identity is read, and no reading is taken before the window (300 ms, steps
 *     0 and 1: a sampler that ignored the tier would take ~15);
 *   - the push of step 2 attaches CUPTI (cupti.c tells the sampler); the sampler, looking
 *     every 20 ms (the traced period), reads at once and then at 50 Hz (3 readings are
 *     waited for, 10 s at most: a sampler that kept the steady rate would take none);
 *   - after the detach at most the reading in progress completes, then none for 300 ms.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "capture.h"
#include "check.h"
#include "fake_agent.h"
#include "fake_cupti.h"
#include "nvtx_client.h"

int InitializeInjection(void);

static struct nvtx_client cl;

static int (*samples)(void), (*identified)(void);

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (by observed state, 10 s at most) until counter() >= n; returns the time waited. */
static long wait_count(int (*counter)(void), int n, const char *what)
{
    long ms = 0;
    while (counter() < n) {
        if (ms >= 10000) {
            fprintf(stderr, "capture_sample_tiers: %s: %d after 10 s, want %d\n", what, counter(),
                    n);
            exit(1);
        }
        sleep_ms(1);
        ms++;
    }
    return ms;
}

static void step(const char *name)
{
    CHECK_EQ(nvtx_client_push(&cl, name), 0);
    CHECK_EQ(nvtx_client_pop(&cl), 0);
}

int main(void)
{
    fake_reset();
    setenv("MERIDIAN_TRACE", "steady", 1);
    setenv("MERIDIAN_WINDOWS", "2-3", 1);
    fake_small_cupti_env();
    setenv("MERIDIAN_GPU_SAMPLE_HZ", "50", 1);
    setenv("MERIDIAN_GPU_SAMPLE_STEADY_HZ", "0", 1);

    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml || !(samples = (int (*)(void))dlsym(nvml, "fake_nvml_samples")) ||
        !(identified = (int (*)(void))dlsym(nvml, "fake_nvml_identified"))) {
        fprintf(stderr, "capture_sample_tiers: the stand-in NVML is not on LD_LIBRARY_PATH\n");
        return 1;
    }
    CHECK_EQ(InitializeInjection(), 1);
    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);

    mrd__gpu_sample_add(2, "0000:9A:00.0"); /* as the steady tier's driver query does */
    wait_count(identified, 1, "identity reads");
    step("step 0");
    step("step 1");
    sleep_ms(300);
    CHECK_EQ(samples(), 0); /* between windows, at MERIDIAN_GPU_SAMPLE_STEADY_HZ=0 */

    CHECK_EQ(nvtx_client_push(&cl, "step 2"), 0);
    CHECK_EQ(atomic_load(&subscribed), 1); /* the window attached */
    long first_ms = wait_count(samples, 1, "readings in the window");
    long three_ms = wait_count(samples, 3, "readings in the window");
    CHECK_EQ(nvtx_client_pop(&cl), 0);
    step("step 3");
    api_call(CUPTI_API_ENTER, 500); /* the boundary */
    step("step 4");
    detach(1);
    int after_detach = samples();
    sleep_ms(300);
    CHECK(samples() <= after_detach + 1); /* the reading in progress, if any, and no more */
    printf("capture_sample_tiers: ok: no reading before the window, the first %ld ms after "
           "its attach, 3 within %ld ms, %d after the detach\n",
           first_ms, three_ms, samples() - after_detach);
    return 0;
}
