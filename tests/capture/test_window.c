/* capture_window: the steady tier's windows, attach to detach, against a fake CUPTI.
 *
 * This program defines the CUPTI entry points cupti.c calls (as test_cupti_setup.c does:
 * the executable's definitions take precedence over libcupti's), keeps the subscriber
 * callback cupti.c registers so it can play CUDA API entries and exits, and drives steps
 * as an application does: NVTX ranges "step N" pushed and popped through the agent's NVTX
 * injection (a simulated NVTX client, tests/common/nvtx_client.h). MERIDIAN_WINDOWS=2-3,6 and one
 * aggregator request (stepctl, as ClockReply.windows delivers it) for steps 9-10:
 *   - InitializeInjection leaves CUPTI untouched (no subscriber, no kind);
 *   - the push of a window's first step attaches (subscribe, callbacks, kinds) and nothing
 *     else does; its last step's pop enables API callbacks; the next API entry they see
 *     sets the correlation boundary: records of launches at or after it are dropped;
 *   - the close enables only the callbacks it needs (close_cbids.h), found by name at the
 *     first attach and only then: the launches (cudaLaunchKernel, cuLaunchKernel), so a
 *     cudaGetDevice after the close is not seen and the next launch sets the boundary;
 *   - each close (the pop of a window's last step) is counted and timed (window/closes,
 *     window/close_ns; the fake's enables take 0.2 ms each);
 *   - the pop of the step after the window asks the helper thread for a forced flush, and
 *     the next API exit finalizes (unsubscribe + cuptiFinalize), then the window record
 *     ("2-3 range a=.. d=.. f=..", domain meridian.window) is in the ring;
 *   - an external correlation id pushed before a detach is not popped after it;
 *   - CUPTI re-attaches for the next window; the aggregator's request opens 9-10
 *     ("on_demand"); a request for a step already begun is refused as late.
 * The mode (argv[1]) sets what the close enables:
 *   launches  the default, as above;
 *   domains   MERIDIAN_CUPTI_CLOSE=domains: the two whole domains (the way before session
 *             21), no name read; the cudaGetDevice sets the boundary;
 *   memcpy    MERIDIAN_TRACE_KINDS=kernel,memcpy: the launches and the copies;
 *   sync      MERIDIAN_TRACE_KINDS=kernel,sync: the whole domains (sync records come from
 *             calls of every sort), no name read;
 *   unknown   a CUPTI whose callback names show no launch: the whole domains;
 *   bad       MERIDIAN_CUPTI_CLOSE=sometimes: CUDA capture stays off (said on stderr), the
 *             steps are still counted.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "check.h"
#include "cupti_convert.h"
#include "fake_agent.h"
#include "fake_cupti.h"
#include "nvtx_client.h"
#include "stepctl.h"
#include "steps.h"
#include "window.h"

int InitializeInjection(void);

static struct nvtx_client cl;
#define PUSH(s) nvtx_client_push(&cl, s)
#define POP()   nvtx_client_pop(&cl)

static void step(int64_t expect)
{
    char name[32];
    uint64_t begun = 0;
    int64_t last_ns = 0;
    snprintf(name, sizeof(name), "step %lld", (long long)expect);
    CHECK_EQ(PUSH(name), 0);
    mrd_stepctl_snapshot(&begun, &last_ns);
    CHECK_EQ(begun, (uint64_t)expect + 1);
    CHECK_EQ(POP(), 0);
}

/* Kernel records with correlation ids c0..c0+n-1 completed in one buffer; returns how many
 * reached the ring. */
static size_t deliver_kernels(uint32_t c0, int n)
{
    static uint8_t buf[1 << 16] __attribute__((aligned(8)));
    CUpti_ActivityKernel10 k;
    size_t used = 0;
    memset(buf, 0, sizeof(buf));
    for (int i = 0; i < n; i++) {
        memset(&k, 0, sizeof(k));
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 1000 + (uint64_t)i;
        k.end = 2000 + (uint64_t)i;
        k.correlationId = c0 + (uint32_t)i;
        k.name = "k";
        memcpy(buf + used, &k, sizeof(k));
        used += sizeof(k);
    }
    size_t before = fake_ring_count();
    mrd__cupti_process_buffer(buf, used);
    return fake_ring_count() - before;
}

static const char *mode = "launches";

static int is(const char *m)
{
    return strcmp(mode, m) == 0;
}

/* What the close enabled, by mode: the whole domains or the launch callbacks (and the
 * copies' with memcpy traced), never both. */
static void check_close_callbacks(void)
{
    int domains = is("domains") || is("sync") || is("unknown");
    CHECK_EQ(atomic_load(&domains_on), domains ? 2 : 0);
    CHECK_EQ(atomic_load(&cbids_on), domains ? 0 : is("memcpy") ? 3 : 2);
    if (!domains) {
        CHECK(cbid_on("cudaLaunchKernel_v7000") && cbid_on("cuLaunchKernel"));
        CHECK(!cbid_on("cudaGetDevice_v3020") && !cbid_on("cuCtxGetDevice"));
        CHECK_EQ(cbid_on("cudaMemcpyAsync_v3020"), is("memcpy"));
    }
}

/* MERIDIAN_CUPTI_CLOSE=sometimes: refused before any window; the steps still count. */
static int bad_close_option(void)
{
    CHECK_EQ(PUSH("step 0"), 0);
    CHECK_EQ(POP(), 0);
    for (int i = 1; i <= 4; i++)
        step(i);
    CHECK_EQ(atomic_load(&subscribed), 0); /* windows 2-3 never attached */
    CHECK_EQ(atomic_load(&names_asked), 0);
    printf("capture_window: bad MERIDIAN_CUPTI_CLOSE: capture off, steps counted\n");
    return 0;
}

int main(int argc, char **argv)
{
    char rec[8][64];
    if (argc > 1)
        mode = argv[1];
    CHECK(is("launches") || is("domains") || is("memcpy") || is("sync") || is("unknown") ||
          is("bad"));
    fake_reset();
    setenv("MERIDIAN_TRACE", "steady", 1);
    setenv("MERIDIAN_WINDOWS", "2-3,6", 1);
    if (is("domains") || is("bad"))
        setenv("MERIDIAN_CUPTI_CLOSE", is("bad") ? "sometimes" : "domains", 1);
    if (is("memcpy") || is("sync"))
        setenv("MERIDIAN_TRACE_KINDS", is("memcpy") ? "kernel,memcpy" : "kernel,sync", 1);
    atomic_store(&names_unknown, is("unknown"));
    atomic_store(&enable_delay_ns, 200000); /* each close: two enables of 0.2 ms */
    fake_small_cupti_env();

    CHECK_EQ(InitializeInjection(), 1);
    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);
    if (is("bad"))
        return bad_close_option();
    CHECK_EQ(atomic_load(&subscribed), 0); /* steady: CUPTI untouched until a window */
    CHECK_EQ(mrd__cupti_extcorr_push(5), 0);
    CHECK_EQ(atomic_load(&pushes), 0); /* detached: nothing reaches CUPTI */

    step(0);
    step(1);
    CHECK_EQ(atomic_load(&subscribed), 0);
    CHECK_EQ(PUSH("step 2"), 0);
    CHECK_EQ(atomic_load(&subscribed), 1); /* attached in the window's first step */
    CHECK(atomic_load(&kernel_on));
    CHECK_EQ(mrd__cupti_extcorr_push(7), 0); /* pushed in attach generation 1 */
    CHECK_EQ(atomic_load(&pushes), 1);
    CHECK_EQ(POP(), 0);
    int asked = atomic_load(&names_asked); /* the names are read at the first attach */
    CHECK(is("domains") || is("sync") ? asked == 0 : asked > CUPTI_RUNTIME_TRACE_CBID_SIZE);
    CHECK_EQ(atomic_load(&domains_on), 0);
    CHECK_EQ(atomic_load(&cbids_on), 0);
    step(3);
    check_close_callbacks(); /* closing */
    /* a call that is not a launch: seen (and the boundary) only with the whole domains */
    CHECK_EQ(api_call_other(CUPTI_API_ENTER, 500), atomic_load(&domains_on) == 2);
    CHECK_EQ(api_call(CUPTI_API_ENTER, 501), 1); /* the first launch after the close */
    check_close_callbacks(); /* on until the finalize (cupti.c says why) */
    CHECK_EQ(api_call(CUPTI_API_ENTER, 502), 1); /* a later entry does not move it */
    /* domains: 497-499 kept, 500-502 dropped; launches: the boundary is the launch's 501 */
    CHECK_EQ(deliver_kernels(497, 6), atomic_load(&domains_on) == 2 ? 3u : 4u);
    CHECK_EQ(atomic_load(&finalized), 0);
    CHECK_EQ(api_call(CUPTI_API_EXIT, 501), 1); /* no detach before the flush was asked for */
    CHECK_EQ(atomic_load(&finalized), 0);
    step(4);
    wait_for(&flush_forced, 1);
    check_close_callbacks(); /* never turned off between close and finalize */
    detach(1); /* the helper thread's forced flush, then the next API exit finalizes */
    CHECK_EQ(atomic_load(&unsubscribed), 1);
    CHECK_EQ(window_records(rec, 8), 1);
    CHECK(strncmp(rec[0], "2-3 range a=", 12) == 0);
    CHECK(strstr(rec[0], " d=") && strstr(rec[0], " f=") && !strstr(rec[0], "d=-1"));
    CHECK_EQ(mrd__cupti_extcorr_pop(), 0);
    CHECK_EQ(atomic_load(&pops), 0); /* pushed before the detach: not popped after it */
    CHECK_EQ(deliver_kernels(10, 2), 2u); /* the boundary is gone with the detach */
    printf("capture_window: window 2-3: %s\n", rec[0]);

    step(5);
    CHECK_EQ(PUSH("step 6"), 0);
    CHECK_EQ(atomic_load(&subscribed), 2); /* re-attached */
    CHECK_EQ(atomic_load(&names_asked), asked); /* not read again */
    CHECK_EQ(POP(), 0);
    check_close_callbacks();
    api_call(CUPTI_API_ENTER, 20);
    step(7);
    detach(2);
    CHECK_EQ(window_records(rec, 8), 1);
    CHECK(strncmp(rec[0], "6-6 range a=", 12) == 0);
    printf("capture_window: window 6: %s\n", rec[0]);

    /* the aggregator's requests, as ClockReply.windows hands them in */
    CHECK_EQ(mrd_stepctl_request(1, 9, 10, MRD_WINDOW_ON_DEMAND), 1);
    CHECK_EQ(mrd_stepctl_request(1, 9, 10, MRD_WINDOW_ON_DEMAND), 0); /* once per id */
    CHECK_EQ(mrd_stepctl_request(2, 5, 6, MRD_WINDOW_TRIGGER), -ETIME); /* step 5 has begun */
    CHECK_EQ(mrd_stepctl_request(2, 5, 6, MRD_WINDOW_TRIGGER), -ETIME); /* repeated: ... */
    struct mrd_named_counter late[32];
    size_t nlate = mrd_agent_named_counters(late, 32);
    int seen_late = 0;
    for (size_t i = 0; i < nlate; i++) /* ... counted once */
        if (strcmp(late[i].category, "window") == 0 &&
            strcmp(late[i].name, "requests_late") == 0) {
            CHECK_EQ(late[i].value, 1u);
            seen_late = 1;
        }
    CHECK(seen_late);
    CHECK_EQ(mrd_stepctl_request(3, 12, 11, MRD_WINDOW_TRIGGER), -EINVAL);
    step(8);
    CHECK_EQ(atomic_load(&subscribed), 2);
    step(9);
    CHECK_EQ(atomic_load(&subscribed), 3);
    step(10);
    api_call(CUPTI_API_ENTER, 30);
    step(11);
    detach(3);
    CHECK_EQ(window_records(rec, 8), 1);
    CHECK(strncmp(rec[0], "9-10 on_demand a=", 17) == 0);
    printf("capture_window: window 9-10: %s\n", rec[0]);

    uint64_t begun = 0;
    int64_t last_ns = 0;
    mrd_stepctl_snapshot(&begun, &last_ns);
    CHECK_EQ(begun, 12u);
    CHECK(last_ns > 0);
    CHECK_EQ(mrd__window_step_push("optimizer_step"), 0u); /* not a step */

    /* the sampled cost of the callbacks: every 64th NVTX push or pop of a thread is timed */
    for (int i = 0; i < 640; i++) {
        CHECK_EQ(PUSH("forward"), 0);
        CHECK_EQ(POP(), 0);
    }
    struct mrd_named_counter nc[32];
    size_t n = mrd_agent_named_counters(nc, 32);
    uint64_t sampled = 0, est = 0, ns = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(nc[i].category, "agent") == 0 && strcmp(nc[i].name, "callbacks_sampled") == 0)
            sampled = nc[i].value;
        if (strcmp(nc[i].category, "agent") == 0 && strcmp(nc[i].name, "callbacks_est") == 0)
            est = nc[i].value;
        if (strcmp(nc[i].category, "agent") == 0 && strcmp(nc[i].name, "callback_sampled_ns") == 0)
            ns = nc[i].value;
    }
    /* the three closes are counted and timed around their two enables (domains or launches) */
    uint64_t closes = 0, close_ns = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(nc[i].category, "window") == 0 && strcmp(nc[i].name, "closes") == 0)
            closes = nc[i].value;
        if (strcmp(nc[i].category, "window") == 0 && strcmp(nc[i].name, "close_ns") == 0)
            close_ns = nc[i].value;
    }
    CHECK_EQ(closes, 3u);
    CHECK(close_ns >= 3u * 2u * 200000u && close_ns < 1000000000u);
    printf("capture_window: 3 closes, %llu ns\n", (unsigned long long)close_ns);
    /* 12 steps + 640 ranges: 1,304 pushes and pops, 20 of them timed; the attaches (> 1 ms)
     * may leave one or two out */
    CHECK(sampled >= 18 && sampled <= 20);
    CHECK_EQ(est, sampled * 64);
    CHECK(ns > 0);
    printf("capture_window: cost: %llu of ~%llu callbacks timed, %llu ns\n",
           (unsigned long long)sampled, (unsigned long long)est, (unsigned long long)ns);
    printf("capture_window: ok\n");
    return 0;
}
