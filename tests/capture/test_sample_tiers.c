/* capture_sample_tiers: the NVML sampler's two rates follow CUPTI's attach and detach
 * (agent/capture/gpu_sample.c, told by cupti.c), against the fake CUPTI of capture_window
 * and the stand-in NVML of capture_env_e2e (fake_nvml.c, on LD_LIBRARY_PATH; its counters
 * are read, never slept on).
 *
 * MERIDIAN_TRACE=steady, MERIDIAN_WINDOWS=2-3, MERIDIAN_GPU_SAMPLE_HZ=1 (while CUPTI
 * traces) and MERIDIAN_GPU_SAMPLE_STEADY_HZ=0 (between windows: no readings), so each
 * expectation is exact whatever the machine's load:
 *   - the GPU's identity is read, and no reading is taken before the window (300 ms, steps
 *     0 and 1: a sampler that ignored the tier would take one at once);
 *   - the push of step 2 attaches CUPTI, which wakes the sampler: a reading at once
 *     (waited for, 10 s at most; without the wake the sampler, with no period between
 *     windows, would sleep on), then a second one a traced period (1 s) later;
 *   - after the detach at most the reading in progress completes, then none until two
 *     traced periods after the second reading.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Waits (by observed state, 10 s at most) until counter() >= n; returns the ms waited. */
static long wait_count(int (*counter)(void), int n, const char *what)
{
    long t0 = now_ms();
    while (counter() < n) {
        if (now_ms() - t0 >= 10000) {
            fprintf(stderr, "capture_sample_tiers: %s: %d after 10 s, want %d\n", what, counter(),
                    n);
            exit(1);
        }
        sleep_ms(1);
    }
    return now_ms() - t0;
}

static void step(const char *name)
{
    CHECK_EQ(nvtx_client_push(&cl, name), 0);
    CHECK_EQ(nvtx_client_pop(&cl), 0);
}

/* `self-off` (test capture_sample_tiers_selfoff): MERIDIAN_CUPTI_SELF_RECORDS=0 leaves no
 * DEVICE record to name the GPU, so the window's first attach asks the driver (the
 * stand-in libcuda, loaded as CUDA would be): the GPU it names is registered once and the
 * sampler starts reading its identity; before the attach no GPU is known. */
static int self_records_off(void)
{
    setenv("MERIDIAN_CUPTI_SELF_RECORDS", "0", 1);
    setenv("MERIDIAN_TRACE_KINDS", "kernel", 1);
    CHECK(dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL) != NULL);
    CHECK_EQ(InitializeInjection(), 1);
    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);
    struct fake_gpu g[4];
    step("step 0");
    step("step 1");
    CHECK_EQ(fake_gpus(g, 4), 0);
    CHECK_EQ(nvtx_client_push(&cl, "step 2"), 0);
    CHECK_EQ(atomic_load(&subscribed), 1); /* the window attached */
    CHECK_EQ(fake_gpus(g, 4), 1);
    CHECK_EQ(g[0].device, 2);
    CHECK_STREQ(g[0].pci, "0000:9A:00.0");
    CHECK_STREQ(g[0].name, "Fake H200");
    wait_count(identified, 1, "the driver-named GPU's identity");
    CHECK_EQ(nvtx_client_pop(&cl), 0);
    printf("capture_sample_tiers: self-off ok: the GPU named at the attach\n");
    return 0;
}

/* `defaults` (test capture_sample_tiers_defaults): neither rate set, so 1 Hz traced and
 * untraced (session 19: the traced default was 10 Hz), over six windows of two steps.
 * Counted, with margins no scheduling delay of a loaded machine reaches:
 *   - the first window, held open 1.5 s (or however long the sleep took), takes at most one
 *     reading a whole second of it plus one besides its attach's (10 Hz would take ~15);
 *   - each detach wakes the sampler for a reading: in windows 2-6 the detach comes a few ms
 *     after the attach's reading, so without the wake the next reading would wait for the
 *     period (1 s after it, the sampler is never early): five such waits take >= ~5 s,
 *     with the wake a few ms; they must take under 2.5 s in all.
 */
static int defaults(void)
{
    unsetenv("MERIDIAN_GPU_SAMPLE_HZ");
    unsetenv("MERIDIAN_GPU_SAMPLE_STEADY_HZ");
    setenv("MERIDIAN_WINDOWS", "2-3,6-7,10-11,14-15,18-19,22-23", 1);
    CHECK_EQ(InitializeInjection(), 1);
    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);
    mrd__gpu_sample_add(2, "0000:9A:00.0");
    wait_count(identified, 1, "identity reads");
    wait_count(samples, 1, "the first reading (1 Hz untraced)");
    step("step 0");
    step("step 1");
    long held = 0, held_ms = 0, detach_wait_ms = 0;
    for (int k = 0; k < 6; k++) {
        char name[32];
        int first = 2 + 4 * k, before = samples();
        snprintf(name, sizeof(name), "step %d", first);
        CHECK_EQ(nvtx_client_push(&cl, name), 0);
        CHECK_EQ(atomic_load(&subscribed), k + 1); /* the window attached */
        wait_count(samples, before + 1, "a reading at the window's attach");
        if (k == 0) {
            int at_attach = samples();
            long t0 = now_ms();
            sleep_ms(1500);
            held_ms = now_ms() - t0;
            held = samples() - at_attach;
            CHECK(held <= held_ms / 1000 + 1); /* 1 Hz while CUPTI traces, not 10 */
        }
        CHECK_EQ(nvtx_client_pop(&cl), 0);
        snprintf(name, sizeof(name), "step %d", first + 1);
        step(name);
        api_call(CUPTI_API_ENTER, 500); /* the boundary */
        snprintf(name, sizeof(name), "step %d", first + 2);
        step(name);
        int c = samples();
        long t0 = now_ms();
        detach(k + 1);
        wait_count(samples, c + 1, "a reading at the window's detach");
        if (k > 0)
            detach_wait_ms += now_ms() - t0;
        snprintf(name, sizeof(name), "step %d", first + 3);
        step(name);
    }
    CHECK(detach_wait_ms < 2500); /* the detaches' wakes, not five periods */
    printf("capture_sample_tiers: defaults ok: %ld readings in the first window's %ld ms "
           "besides the attach's; five detach readings in %ld ms in all\n", held, held_ms,
           detach_wait_ms);
    return 0;
}

int main(int argc, char **argv)
{
    fake_reset();
    setenv("MERIDIAN_TRACE", "steady", 1);
    setenv("MERIDIAN_WINDOWS", "2-3", 1);
    fake_small_cupti_env();
    setenv("MERIDIAN_GPU_SAMPLE_HZ", "1", 1);
    setenv("MERIDIAN_GPU_SAMPLE_STEADY_HZ", "0", 1);

    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml || !(samples = (int (*)(void))dlsym(nvml, "fake_nvml_samples")) ||
        !(identified = (int (*)(void))dlsym(nvml, "fake_nvml_identified"))) {
        fprintf(stderr, "capture_sample_tiers: the stand-in NVML is not on LD_LIBRARY_PATH\n");
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "self-off") == 0)
        return self_records_off();
    if (argc > 1 && strcmp(argv[1], "defaults") == 0)
        return defaults();
    CHECK_EQ(InitializeInjection(), 1);
    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);

    mrd__gpu_sample_add(2, "0000:9A:00.0"); /* as the steady tier's driver query does */
    wait_count(identified, 1, "identity reads");
    step("step 0");
    step("step 1");
    sleep_ms(300);
    CHECK_EQ(samples(), 0); /* between windows, at MERIDIAN_GPU_SAMPLE_STEADY_HZ=0 */

    long t_attach = now_ms();
    CHECK_EQ(nvtx_client_push(&cl, "step 2"), 0);
    CHECK_EQ(atomic_load(&subscribed), 1); /* the window attached */
    long first_ms = wait_count(samples, 1, "a reading at the window's attach");
    wait_count(samples, 2, "a second reading in the window");
    long t_second = now_ms(), second_ms = t_second - t_attach;
    CHECK_EQ(nvtx_client_pop(&cl), 0);
    step("step 3");
    api_call(CUPTI_API_ENTER, 500); /* the boundary */
    step("step 4");
    detach(1);
    int after_detach = samples();
    sleep_ms(t_second + 2200 - now_ms() > 300 ? t_second + 2200 - now_ms() : 300);
    /* two traced periods after the second reading: the reading in progress, if any, and
     * no more (a sampler still at the traced rate would have taken two) */
    CHECK(samples() <= after_detach + 1);
    CHECK(second_ms >= 999); /* a traced period after the first: the sampler is never early */
    printf("capture_sample_tiers: ok: no reading before the window, the first %ld ms after "
           "its attach, the second %ld ms after it, %d after the detach\n",
           first_ms, second_ms, samples() - after_detach);
    return 0;
}
