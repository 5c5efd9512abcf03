/* Capture tiers and full-detail windows: the step counter and the window state machine
 * (contract and design in window.h; CUPTI's attach and detach in cupti.c).
 *
 * State (one per process): OFF (full tier, or windows impossible: another CUPTI owner)
 * -> DETACHED -> ATTACHING (one thread wins the compare-and-swap and attaches) ->
 * ATTACHED -> CLOSING (the last window step ended) -> DETACHING (the step after it ended;
 * cupti.c finishes the detach on a CUDA API exit) -> DETACHED. Only the thread that moved
 * the state writes the window's fields; readers see them through the state's
 * release/acquire pair.
 */
#include "window.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "collstep.h"
#include "ring.h"
#include "stepctl.h"
#include "steps.h"

enum { W_OFF, W_DETACHED, W_ATTACHING, W_ATTACHED, W_CLOSING, W_DETACHING };


static struct {
    pthread_once_t once;
    int result; /* mrd__window_config's answer */
    struct mrd_windows spec;
    char step_name[128]; /* "" = the default names */
    struct mrd_collstep_rule coll; /* MERIDIAN_STEP_COLLECTIVE (mode OFF: NVTX steps) */
    _Atomic int state;
    /* the current window; written by the thread that moved the state */
    int64_t first, last, t_attach;
    int64_t attach_ns;
    int reason;
    _Atomic uint64_t opened, skipped, failed, outside;
    _Atomic uint64_t closes, close_ns; /* the closes (mrd__cupti_close) and their time */
} w = {.once = PTHREAD_ONCE_INIT, .state = W_OFF};

static void read_config(void)
{
    const char *tier = getenv("MERIDIAN_TRACE");
    const char *spec = getenv("MERIDIAN_WINDOWS");
    const char *name = getenv("MERIDIAN_STEP_NAME");
    char why[256];

    w.result = 0;
    if (tier && *tier && strcmp(tier, "full") != 0 && strcmp(tier, "steady") != 0) {
        fprintf(stderr, "meridian: MERIDIAN_TRACE=%s is not steady or full; CUDA capture stays off\n",
                tier);
        w.result = -EINVAL;
        return;
    }
    if (mrd_windows_parse(spec, &w.spec, why, sizeof(why)) != 0) {
        fprintf(stderr, "meridian: MERIDIAN_WINDOWS=%s: %s; CUDA capture stays off\n", spec, why);
        w.result = -EINVAL;
        return;
    }
    if (name && strlen(name) >= sizeof(w.step_name)) {
        fprintf(stderr, "meridian: MERIDIAN_STEP_NAME is longer than %zu bytes; CUDA capture "
                        "stays off\n", sizeof(w.step_name) - 1);
        w.result = -EINVAL;
        return;
    }
    const char *coll = getenv("MERIDIAN_STEP_COLLECTIVE");
    if (mrd_collstep_parse(coll, &w.coll, why, sizeof(why)) != 0) {
        fprintf(stderr, "meridian: MERIDIAN_STEP_COLLECTIVE=%s: %s; CUDA capture stays off\n",
                coll, why);
        w.result = -EINVAL;
        return;
    }
    snprintf(w.step_name, sizeof(w.step_name), "%s", name ? name : "");
    w.result = tier && strcmp(tier, "steady") == 0;
}

static size_t window_counters(struct mrd_named_counter *out, size_t max)
{
    const struct mrd_named_counter c[] = {
        {"window", "opened", atomic_load(&w.opened)},
        {"window", "skipped", atomic_load(&w.skipped)},
        {"window", "failed", atomic_load(&w.failed)},
        {"window", "records_outside", atomic_load(&w.outside)},
        {"window", "closes", atomic_load(&w.closes)},
        {"window", "close_ns", atomic_load(&w.close_ns)},
    };
    return mrd_agent_put_counters(out, max, c, sizeof(c) / sizeof(c[0]));
}

/* Writes the window record (see window.h) on the calling thread's ring. */
static void emit(int64_t end, int64_t detach_ns, int64_t flush_ns)
{
    struct mrd_record r;
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_WINDOW;
    r.str[0] = mrd_window_reason_name(w.reason); /* a static string: lives as long as we do */
    r.ev.window.start = w.t_attach;
    r.ev.window.end = end;
    r.ev.window.first_step = w.first;
    r.ev.window.last_step = w.last;
    r.ev.window.attach_ns = w.attach_ns;
    r.ev.window.detach_ns = detach_ns < 0 ? -1 : detach_ns;
    r.ev.window.flush_ns = flush_ns;
    mrd_ring_write(&r);
}

/* Exit path: a window still attached (or closing) is recorded up to now. */
static void window_exit_hook(void)
{
    int st = atomic_load(&w.state);
    if (st == W_ATTACHED || st == W_CLOSING || st == W_DETACHING) {
        if (st == W_ATTACHED) {
            uint64_t begun;
            int64_t last_ns;
            mrd_stepctl_snapshot(&begun, &last_ns);
            w.last = (int64_t)begun - 1;
        }
        emit(mrd_clock_now(), -1, 0);
    }
}

int mrd__window_config(void)
{
    pthread_once(&w.once, read_config);
    return w.result;
}

/* A step of a window: of the agent's own specification or of an aggregator's request. */
static int holds(int64_t step, int *reason)
{
    return mrd_windows_holds(&w.spec, step, reason) || mrd_stepctl_requested(step, reason);
}

void mrd__window_cupti_ready(void)
{
    static atomic_int done;
    if (mrd__window_config() != 1 || atomic_exchange(&done, 1))
        return;
    mrd_agent_add_counter_source(window_counters);
    mrd_agent_on_flush(window_exit_hook);
    atomic_store(&w.state, W_DETACHED); /* with no own window, the aggregator may ask */
}

const struct mrd_collstep_rule *mrd__window_step_collective(void)
{
    return mrd__window_config() >= 0 && w.coll.mode != MRD_COLLSTEP_OFF ? &w.coll : NULL;
}

uint64_t mrd__window_step_push(const char *message)
{
    if (mrd__window_config() < 0 || w.coll.mode != MRD_COLLSTEP_OFF ||
        !mrd_step_name_match(message, w.step_name))
        return 0;
    return mrd__window_step_begin();
}

uint64_t mrd__window_step_begin(void)
{
    int tier = mrd__window_config();
    if (tier < 0)
        return 0;
    mrd_stepctl_register_counters();
    int64_t step = mrd_stepctl_begin(); /* counted in both tiers: the aggregator reads it */
    int reason = 0;
    if (tier != 1 || !holds(step, &reason))
        return (uint64_t)step + 1;
    int expect = W_DETACHED;
    if (atomic_compare_exchange_strong(&w.state, &expect, W_ATTACHING)) {
        int64_t t0 = mrd_clock_now();
        int e = mrd__cupti_attach();
        w.t_attach = t0;
        w.attach_ns = mrd_clock_now() - t0;
        w.first = step;
        w.last = step;
        w.reason = reason;
        if (e == 0) {
            atomic_fetch_add(&w.opened, 1);
            atomic_store(&w.state, W_ATTACHED);
        } else {
            atomic_fetch_add(&w.failed, 1);
            /* another CUPTI owner will not go away: no further attempt */
            atomic_store(&w.state, e == -EBUSY ? W_OFF : W_DETACHED);
        }
    } else if (expect != W_ATTACHED) {
        /* the first step of a window found the previous one not yet detached */
        if (holds(step - 1, NULL) == 0)
            atomic_fetch_add(&w.skipped, 1);
    }
    return (uint64_t)step + 1;
}

void mrd__window_step_pop(uint64_t tag, int64_t duration_ns)
{
    int64_t step = (int64_t)tag - 1;
    mrd_stepctl_end(step, duration_ns);
    int st = atomic_load(&w.state);
    if (st == W_ATTACHED && !holds(step + 1, NULL) && step >= w.first) {
        w.last = step;
        atomic_store(&w.state, W_CLOSING);
        /* timed: it runs at the end of the window's last step, inside the application's
         * step (CUPTI's API callbacks enabled for the boundary); its cost is the window's */
        int64_t t0 = mrd_clock_now();
        if (mrd__cupti_close()) { /* only a close that enabled the callbacks is counted */
            atomic_fetch_add(&w.close_ns, (uint64_t)(mrd_clock_now() - t0));
            atomic_fetch_add(&w.closes, 1);
        }
    } else if (st == W_CLOSING && step > w.last) {
        atomic_store(&w.state, W_DETACHING);
        mrd__cupti_detach_request();
    }
}

void mrd__window_detached(int64_t end, int64_t detach_ns, int64_t flush_ns)
{
    if (atomic_load(&w.state) != W_DETACHING)
        return;
    emit(end, detach_ns, flush_ns);
    atomic_store(&w.state, W_DETACHED);
}

void mrd__window_count_outside(uint64_t n)
{
    atomic_fetch_add_explicit(&w.outside, n, memory_order_relaxed);
}
