/* Small helpers every capture source uses on the hot path (see capture.h).
 *
 * The thread id is cached in the thread's capture state (struct mrd__capture_thread, in
 * its ring's state area; not a __thread variable, see capture.h): the first call on a
 * thread makes one gettid system call, every later call is a load. Capture runs on threads
 * we do not own, so there is no thread-start hook to fill it earlier. A thread without a
 * ring has nowhere to cache it; the sources that write a record (NVTX marks and ranges,
 * MPI calls) do not ask for its id at all (the record is dropped and counted anyway), so
 * such a thread makes no system call on them (capture_noring in tests/agent).
 */
#include "capture.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int pinned;
static _Atomic uint64_t cost_samples, cost_ns; /* mrd__cost_end */
static _Atomic uint64_t gettid_calls; /* test hook: mrd__capture_gettid_calls */

void mrd__capture_pin(void)
{
    Dl_info info;
    if (atomic_exchange(&pinned, 1))
        return;
    /* dladdr on one of our own functions names the object we live in; re-opening it with
     * RTLD_NOLOAD | RTLD_NODELETE marks the loaded instance as never unloadable. */
    if (dladdr((void *)mrd__capture_pin, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

/* The system call every cached thread id comes from (counted for tests). */
static uint32_t slow_gettid(void)
{
    atomic_fetch_add_explicit(&gettid_calls, 1, memory_order_relaxed);
    return (uint32_t)syscall(SYS_gettid);
}

struct mrd__capture_thread *mrd__capture_thread(void)
{
    return mrd_ring_thread_state();
}

uint32_t mrd__capture_tid_in(struct mrd__capture_thread *t)
{
    if (t->tid == 0)
        t->tid = slow_gettid();
    return t->tid;
}

uint32_t mrd__capture_tid(void)
{
    struct mrd__capture_thread *t = mrd__capture_thread();
    return t ? mrd__capture_tid_in(t) : slow_gettid();
}

uint64_t mrd__capture_gettid_calls(void)
{
    return atomic_load_explicit(&gettid_calls, memory_order_relaxed);
}

void mrd__capture_copy_str(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    if (s) {
        while (n < cap - 1 && s[n])
            n++;
        /* Cut before an incomplete UTF-8 sequence: back up over continuation bytes when
         * the string went on past the cut. */
        if (s[n] && n > 0) {
            size_t k = n;
            while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
                k--;
            n = k;
        }
        memcpy(dst, s, n);
    }
    dst[n] = '\0';
}

static size_t cost_counters(struct mrd_named_counter *out, size_t max)
{
    uint64_t n = atomic_load_explicit(&cost_samples, memory_order_relaxed);
    const struct mrd_named_counter c[] = {
        {"agent", "callbacks_sampled", n},
        {"agent", "callback_sampled_ns", atomic_load_explicit(&cost_ns, memory_order_relaxed)},
        {"agent", "callbacks_est", n * MRD_COST_EVERY},
    };
    return mrd_agent_put_counters(out, max, c, sizeof(c) / sizeof(c[0]));
}

void mrd__cost_end(int64_t t0)
{
    static atomic_int registered;
    if (t0 == 0)
        return;
    int64_t d = mrd_clock_now() - t0;
    if (d > 1000000)
        return; /* a window's attach (~12 ms) is reported on its own, not scaled up 64 times */
    atomic_fetch_add_explicit(&cost_ns, (uint64_t)(d > 0 ? d : 0), memory_order_relaxed);
    if (atomic_fetch_add_explicit(&cost_samples, 1, memory_order_relaxed) == 0 &&
        !atomic_exchange(&registered, 1))
        mrd_agent_add_counter_source(cost_counters);
}

int mrd__capture_env_uint(const char *name, unsigned dflt, unsigned lo, unsigned hi,
                          const char *off, unsigned *out)
{
    const char *s = getenv(name);
    char *end = NULL;
    *out = dflt;
    if (!s || !*s)
        return 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "meridian: %s=%s is not a number in %u..%u; %s\n", name, s, lo, hi, off);
        return -EINVAL;
    }
    *out = (unsigned)v;
    return 0;
}

int mrd__capture_env_choice(const char *name, const char *const *choices, const char *off,
                            int *out)
{
    const char *s = getenv(name);
    *out = -1;
    if (!s || !*s)
        return 0;
    int n = 0;
    for (; choices[n]; n++)
        if (strcmp(s, choices[n]) == 0) {
            *out = n;
            return 0;
        }
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                i == 0 ? "" : i == n - 1 ? " or " : ", ", choices[i]);
    fprintf(stderr, "meridian: %s=%s is not %s; %s\n", name, s, list, off);
    return -EINVAL;
}
