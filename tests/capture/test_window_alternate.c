/* capture_window_alternate_*: MERIDIAN_CUPTI_ALTERNATE against a fake CUPTI.
 *
 * The diagnostic changes one of meridian's window mechanisms to the bare consumer's way in
 * every second window (cupti.c, the top), so that one process measures a window with and
 * without it (tests/bench/overhead/inproc.py's window_alt_* variants). Three windows,
 * MERIDIAN_WINDOWS=2-3,6-7,10-11, driven through the agent's NVTX injection as in
 * test_window.c; the mode is the first argument:
 *   kinds      windows 1 and 3 enable the default kinds (kernels, GRAPH_TRACE, OVERHEAD,
 *              DEVICE), window 2 CONCURRENT_KERNEL alone;
 *   subscribe  windows 1 and 3 hold the subscriber from the attach to the finalize; window 2
 *              drops it right after the attach and subscribes again at its close, and still
 *              detaches the documented way (forced flush, finalize in an API exit);
 *   flush      with MERIDIAN_CUPTI_FLUSH_MS=5, windows 1 and 3 get periodic flushes, window 2
 *              none in 100 ms (the detach's forced flush still comes);
 *   bad        MERIDIAN_CUPTI_ALTERNATE=sometimes: refused with a message that names the
 *              choices, CUDA capture off (no attach at all);
 *   subscribe_refused  `subscribe`, but CUPTI refuses window 2's subscribe at its close:
 *              the agent says so, enables nothing, and counts only window 1's close
 *              (window/closes 1); the test ends there (no subscriber: no detach).
 * Each attach's stderr line ("meridian: attach N alternate WHAT default|changed", which
 * inproc.py reads) is checked too.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_agent.h"
#include "fake_cupti.h"
#include "nvtx_client.h"

int InitializeInjection(void);

static struct nvtx_client cl;
static const char *mode;
static char captured[] = "/tmp/mrd-alternate-XXXXXX"; /* the agent's stderr, for the checks */
static int saved_stderr = -1;

/* Puts stderr back; at exit (a failed check) also shows what was captured, then removes it. */
static void restore_stderr(void)
{
    if (saved_stderr < 0)
        return;
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    saved_stderr = -1;
}

static void at_exit(void)
{
    if (saved_stderr < 0)
        return;
    restore_stderr();
    char line[512];
    FILE *f = fopen(captured, "r");
    while (f && fgets(line, sizeof(line), f))
        fputs(line, stderr);
    if (f)
        fclose(f);
    unlink(captured);
}

static int subscribe_mode(void)
{
    return strcmp(mode, "subscribe") == 0 || strcmp(mode, "subscribe_refused") == 0;
}

/* The agent's counter window/NAME now (0 when absent). */
static uint64_t window_counter(const char *name)
{
    struct mrd_named_counter nc[32];
    size_t n = mrd_agent_named_counters(nc, 32);
    for (size_t i = 0; i < n; i++)
        if (strcmp(nc[i].category, "window") == 0 && strcmp(nc[i].name, name) == 0)
            return nc[i].value;
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void step(int n)
{
    char name[32];
    snprintf(name, sizeof(name), "step %d", n);
    CHECK_EQ(nvtx_client_push(&cl, name), 0);
    CHECK_EQ(nvtx_client_pop(&cl), 0);
}

/* Waits (up to 2 s) until the helper thread's periodic flushes pass `than`. */
static void wait_flush_past(int than)
{
    for (int i = 0; i < 2000 && atomic_load(&flush_plain) <= than; i++)
        sleep_ms(1);
    CHECK(atomic_load(&flush_plain) > than);
}

/* Inside window k (1-based), right after its attach: what the mode promises. */
static void check_attached(int k)
{
    int changed = k % 2 == 0;
    CHECK(atomic_load(&kernel_on));
    if (strcmp(mode, "kinds") == 0) {
        CHECK_EQ(kind_on(CUPTI_ACTIVITY_KIND_GRAPH_TRACE), !changed);
        CHECK_EQ(kind_on(CUPTI_ACTIVITY_KIND_OVERHEAD), !changed);
        CHECK_EQ(kind_on(CUPTI_ACTIVITY_KIND_DEVICE), !changed);
    } else if (subscribe_mode()) {
        /* each earlier window subscribed and unsubscribed once, a changed one twice */
        int before = (k - 1) + (k - 1) / 2;
        CHECK_EQ(atomic_load(&subscribed), before + 1);
        CHECK_EQ(atomic_load(&unsubscribed), before + changed); /* changed: dropped at once */
    } else if (strcmp(mode, "flush") == 0) {
        int at = atomic_load(&flush_plain);
        if (changed) {
            sleep_ms(100); /* 20 periods of 5 ms */
            CHECK_EQ(atomic_load(&flush_plain), at);
        } else {
            wait_flush_past(at);
        }
    }
}

/* Window k (1-based) of steps first..first+1, attach to finalize, then one untraced step:
 * steps first..first+3. The agent counts steps by their pushes, not by their names. */
static void window(int first, int k)
{
    char name[32];
    snprintf(name, sizeof(name), "step %d", first);
    CHECK_EQ(nvtx_client_push(&cl, name), 0);
    check_attached(k);
    CHECK_EQ(nvtx_client_pop(&cl), 0);
    int subs = atomic_load(&subscribed);
    step(first + 1); /* its pop closes the window: the API callbacks on */
    CHECK(close_callbacks_on()); /* the launch callbacks (close_cbids.h) */
    if (subscribe_mode())
        CHECK_EQ(atomic_load(&subscribed), subs + (k % 2 == 0)); /* the late subscriber */
    CHECK_EQ(api_call(CUPTI_API_ENTER, 100u * (uint32_t)k), 1);  /* the boundary */
    step(first + 2);                                             /* asks for the detach */
    detach(k);
    CHECK_EQ(atomic_load(&unsubscribed), k + (subscribe_mode() ? k / 2 : 0));
    step(first + 3);
}

/* The agent's stderr lines, read back from the file stderr was sent to. */
static void check_stderr(const char *path)
{
    char text[8192] = "", want[128];
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = 0;
    fclose(f);
    if (strcmp(mode, "bad") == 0) {
        CHECK(strstr(text, "MERIDIAN_CUPTI_ALTERNATE=sometimes is not kinds, subscribe or "
                           "flush; CUDA capture stays off") != NULL);
        CHECK(strstr(text, "meridian: attach ") == NULL);
        return;
    }
    int refused = strcmp(mode, "subscribe_refused") == 0, windows = refused ? 2 : 3;
    for (int k = 1; k <= windows; k++) {
        snprintf(want, sizeof(want), "meridian: attach %d alternate %s %s\n", k,
                 refused ? "subscribe" : mode, k % 2 == 0 ? "changed" : "default");
        CHECK(strstr(text, want) != NULL);
    }
    snprintf(want, sizeof(want), "meridian: attach %d", windows + 1);
    CHECK(strstr(text, want) == NULL);
    CHECK((strstr(text, "meridian: MERIDIAN_CUPTI_ALTERNATE=subscribe: cuptiSubscribe at the "
                        "window's close: ") != NULL) == refused);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    mode = argv[1];
    int bad = strcmp(mode, "bad") == 0, refused = strcmp(mode, "subscribe_refused") == 0;
    CHECK(bad || refused || strcmp(mode, "kinds") == 0 || strcmp(mode, "subscribe") == 0 ||
          strcmp(mode, "flush") == 0);
    int fd = mkstemp(captured);
    CHECK(fd >= 0);
    saved_stderr = dup(STDERR_FILENO);
    CHECK(saved_stderr >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    atexit(at_exit);

    fake_reset();
    setenv("MERIDIAN_TRACE", "steady", 1);
    setenv("MERIDIAN_WINDOWS", "2-3,6-7,10-11", 1);
    fake_small_cupti_env();
    setenv("MERIDIAN_CUPTI_ALTERNATE", bad ? "sometimes" : refused ? "subscribe" : mode, 1);
    if (strcmp(mode, "flush") == 0)
        setenv("MERIDIAN_CUPTI_FLUSH_MS", "5", 1);
    CHECK_EQ(InitializeInjection(), 1);
    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);

    step(0);
    step(1);
    if (bad) {
        step(2); /* a window step: CUDA capture is off, nothing attaches */
        CHECK_EQ(atomic_load(&subscribed), 0);
        CHECK_EQ(atomic_load(&kernel_on), 0);
    } else if (refused) {
        window(2, 1); /* steps 2-5 */
        CHECK_EQ(window_counter("closes"), 1);
        CHECK(window_counter("close_ns") > 0);
        /* window 2's attach subscribes (and drops it: changed), its close's is refused */
        atomic_store(&subscribe_refuse_at, atomic_load(&subscribed) + 2);
        CHECK_EQ(nvtx_client_push(&cl, "step 6"), 0);
        check_attached(2);
        CHECK_EQ(nvtx_client_pop(&cl), 0);
        uint64_t ns = window_counter("close_ns");
        step(7); /* its pop closes: refused, nothing enabled, nothing counted */
        CHECK(!close_callbacks_on());
        CHECK_EQ(atomic_load(&subscribe_refuse_at), 0); /* the refusal happened */
        CHECK_EQ(window_counter("closes"), 1);
        CHECK_EQ(window_counter("close_ns"), ns);
    } else {
        window(2, 1); /* steps 2-5 */
        window(6, 2);
        window(10, 3);
        char rec[8][64];
        CHECK_EQ(window_records(rec, 8), 3);
        CHECK(strncmp(rec[0], "2-3 range", 9) == 0 && strncmp(rec[1], "6-7 range", 9) == 0 &&
              strncmp(rec[2], "10-11 range", 11) == 0);
    }
    restore_stderr();
    check_stderr(captured);
    unlink(captured);
    printf("capture_window_alternate %s: ok (subscribed %d, unsubscribed %d, periodic flushes "
           "%d)\n",
           mode, atomic_load(&subscribed), atomic_load(&unsubscribed), atomic_load(&flush_plain));
    return 0;
}
