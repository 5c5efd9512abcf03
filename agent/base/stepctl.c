/* Step control (contract in stepctl.h). */
#include "stepctl.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "counters.h"
#include "steps.h"

struct slot {
    _Atomic uint32_t seq; /* odd while the flusher writes the slot */
    _Atomic uint64_t id;  /* 0: empty */
    _Atomic int64_t first, last;
    _Atomic int reason;
};

static struct {
    _Atomic int64_t begun, last_ns, longest_ns;
    struct slot s[MRD_WINDOW_REQUESTS_MAX];
    _Atomic uint64_t accepted, late, full, narrowed_late;
    /* profiler API: effective calls alternate start, stop, ...; odd = started */
    _Atomic uint64_t api_calls, api_start_step, api_stop_step;
    /* the ids last refused (flusher thread only): the aggregator repeats a request in
     * every reply until it is past, and one refusal is counted once */
    uint64_t refused[MRD_WINDOW_REQUESTS_MAX];
    unsigned nrefused;
} sc;

/* Counts a refusal of request id once, however often the aggregator repeats it. */
static void count_refusal(uint64_t id, _Atomic uint64_t *counter)
{
    for (unsigned i = 0; i < MRD_WINDOW_REQUESTS_MAX; i++)
        if (sc.refused[i] == id)
            return;
    sc.refused[sc.nrefused++ % MRD_WINDOW_REQUESTS_MAX] = id;
    atomic_fetch_add(counter, 1);
}

int64_t mrd_stepctl_begin(void)
{
    return atomic_fetch_add(&sc.begun, 1);
}

void mrd_stepctl_end(int64_t step, int64_t duration_ns)
{
    (void)step;
    atomic_store_explicit(&sc.last_ns, duration_ns, memory_order_relaxed);
    int64_t cur = atomic_load_explicit(&sc.longest_ns, memory_order_relaxed);
    while (duration_ns > cur &&
           !atomic_compare_exchange_weak_explicit(&sc.longest_ns, &cur, duration_ns,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

void mrd_stepctl_probe(uint64_t *steps_begun, int64_t *last_ns, int64_t *longest_ns)
{
    mrd_stepctl_snapshot(steps_begun, last_ns);
    *longest_ns = atomic_exchange_explicit(&sc.longest_ns, 0, memory_order_relaxed);
}

void mrd_stepctl_snapshot(uint64_t *steps_begun, int64_t *last_step_ns)
{
    *steps_begun = (uint64_t)atomic_load(&sc.begun);
    *last_step_ns = atomic_load_explicit(&sc.last_ns, memory_order_relaxed);
}

/* Reads slot i consistently: 1 with its fields when it holds a request, else 0. */
static int read_slot(int i, uint64_t *id, int64_t *first, int64_t *last, int *reason)
{
    struct slot *s = &sc.s[i];
    for (;;) {
        uint32_t q0 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q0 & 1)
            continue; /* being written: the flusher finishes in a few stores */
        /* acquire loads keep the second read of seq after them; a field written by a
         * request begun since q0 (release stores after its odd seq) then shows that seq
         * (no fence: ThreadSanitizer cannot follow one; on x86 these are plain loads) */
        *id = atomic_load_explicit(&s->id, memory_order_acquire);
        *first = atomic_load_explicit(&s->first, memory_order_acquire);
        *last = atomic_load_explicit(&s->last, memory_order_acquire);
        *reason = atomic_load_explicit(&s->reason, memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == q0)
            return *id != 0;
    }
}

/* Writes slot i's last under its sequence (flusher thread only; rare, so sequentially
 * consistent stores). */
static void write_last(int i, int64_t last)
{
    struct slot *s = &sc.s[i];
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store(&s->seq, q + 1);
    atomic_store(&s->last, last);
    atomic_store(&s->seq, q + 2);
}

/* A repeat of the request held in slot i (first f, last l): narrows it to `last` when that
 * is smaller (same first). Returns 0 (nothing to narrow), 2 (in time) or 3 (late). */
static int narrow(int i, int64_t f, int64_t l, int64_t first, int64_t last, int64_t begun)
{
    if (first != f || last >= l)
        return 0;
    write_last(i, last);
    if (last >= begun)
        return 2;
    atomic_fetch_add(&sc.narrowed_late, 1);
    return 3;
}

int mrd_stepctl_request(uint64_t id, uint64_t first, uint64_t last, int reason)
{
    if (id == 0 || first > last || last > (uint64_t)MRD_WINDOW_STEP_MAX)
        return -EINVAL;
    int64_t begun = atomic_load(&sc.begun);
    int free_slot = -1;
    for (int i = 0; i < MRD_WINDOW_REQUESTS_MAX; i++) {
        uint64_t sid;
        int64_t f, l;
        int r;
        if (!read_slot(i, &sid, &f, &l, &r)) {
            if (free_slot < 0)
                free_slot = i;
            continue;
        }
        if (sid == id)
            return narrow(i, f, l, (int64_t)first, (int64_t)last, begun);
        if (l + 1 < begun && free_slot < 0) /* past: its slot may be reused */
            free_slot = i;
    }
    if ((int64_t)first < begun) {
        count_refusal(id, &sc.late);
        return -ETIME;
    }
    if (free_slot < 0) {
        count_refusal(id, &sc.full);
        return -ENOSPC;
    }
    struct slot *s = &sc.s[free_slot];
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    /* release stores: none moves before the odd seq (read_slot's acquire loads pair) */
    atomic_store_explicit(&s->first, (int64_t)first, memory_order_release);
    atomic_store_explicit(&s->last, (int64_t)last, memory_order_release);
    atomic_store_explicit(&s->reason, reason, memory_order_release);
    atomic_store_explicit(&s->id, id, memory_order_release);
    atomic_store_explicit(&s->seq, q + 2, memory_order_release);
    atomic_fetch_add(&sc.accepted, 1);
    return 1;
}

int mrd_stepctl_requested(int64_t step, int *reason)
{
    for (int i = 0; i < MRD_WINDOW_REQUESTS_MAX; i++) {
        uint64_t id;
        int64_t f, l;
        int r;
        if (read_slot(i, &id, &f, &l, &r) && step >= f && step <= l) {
            if (reason)
                *reason = r;
            return 1;
        }
    }
    return 0;
}

void mrd_stepctl_profiler_call(int start)
{
    mrd_stepctl_register_counters(); /* a process without NVTX steps reports the calls too */
    uint64_t n = atomic_load(&sc.api_calls);
    for (;;) {
        if ((n & 1) == (start ? 1u : 0u))
            return; /* already started (stopped): CUDA ignores it too */
        if (atomic_compare_exchange_weak(&sc.api_calls, &n, n + 1))
            break;
    }
    atomic_store(start ? &sc.api_start_step : &sc.api_stop_step, (uint64_t)atomic_load(&sc.begun));
}

void mrd_stepctl_profiler_snapshot(uint64_t *starts, uint64_t *start_step, uint64_t *stops,
                                   uint64_t *stop_step)
{
    uint64_t n = atomic_load(&sc.api_calls);
    *starts = (n + 1) / 2;
    *stops = n / 2;
    *start_step = *starts ? atomic_load(&sc.api_start_step) : 0;
    *stop_step = *stops ? atomic_load(&sc.api_stop_step) : 0;
}

static size_t stepctl_counters(struct mrd_named_counter *out, size_t max)
{
    const struct mrd_named_counter c[] = {
        {"window", "steps", (uint64_t)atomic_load(&sc.begun)},
        {"window", "requests_accepted", atomic_load(&sc.accepted)},
        {"window", "requests_late", atomic_load(&sc.late)},
        {"window", "requests_full", atomic_load(&sc.full)},
        {"window", "requests_narrowed_late", atomic_load(&sc.narrowed_late)},
        {"window", "profiler_starts", (atomic_load(&sc.api_calls) + 1) / 2},
        {"window", "profiler_stops", atomic_load(&sc.api_calls) / 2},
    };
    return mrd_agent_put_counters(out, max, c, sizeof(c) / sizeof(c[0]));
}

void mrd_stepctl_register_counters(void)
{
    static atomic_int done;
    if (!atomic_exchange(&done, 1))
        mrd_agent_add_counter_source(stepctl_counters);
}
