/* The agent's counters (contract in counters.h).
 *
 * Where it sits: agent/base. Capture and transport count here; the flusher reads every
 * counter into each batch (drops) and into the Goodbye (all of them); the core's exit line
 * reads them once.
 *
 * Workload: the captured/dropped counters take up to ~200,000 relaxed atomic adds a second
 * from application threads; the named sources are read a few times per process.
 */
#include "counters.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ring.h"

#define MAX_COUNTER_SOURCES 8

static _Atomic uint64_t g_captured[MRD_EV__COUNT];
static _Atomic uint64_t g_dropped[MRD_DROP__COUNT];

typedef size_t (*counter_source_fn)(struct mrd_named_counter *out, size_t max);
static _Atomic counter_source_fn g_sources[MAX_COUNTER_SOURCES];
static _Atomic unsigned g_nsources;

void mrd_agent_count_captured(int kind, uint64_t n)
{
    if (kind > 0 && kind < MRD_EV__COUNT)
        atomic_fetch_add_explicit(&g_captured[kind], n, memory_order_relaxed);
}

void mrd_agent_count_drop(int reason, uint64_t n)
{
    if (reason > 0 && reason < MRD_DROP__COUNT)
        atomic_fetch_add_explicit(&g_dropped[reason], n, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&g_dropped[0], n, memory_order_relaxed);
}

void mrd_agent_counters(uint64_t captured[MRD_EV__COUNT], uint64_t dropped[MRD_DROP__COUNT])
{
    for (int i = 0; i < MRD_EV__COUNT; i++)
        captured[i] = atomic_load_explicit(&g_captured[i], memory_order_relaxed);
    for (int i = 0; i < MRD_DROP__COUNT; i++)
        dropped[i] = atomic_load_explicit(&g_dropped[i], memory_order_relaxed);
    mrd_ring_dropped(dropped);
}

void mrd_agent_add_counter_source(size_t (*fn)(struct mrd_named_counter *out, size_t max))
{
    if (fn == NULL)
        return;
    unsigned i = atomic_fetch_add(&g_nsources, 1);
    if (i < MAX_COUNTER_SOURCES)
        atomic_store(&g_sources[i], fn);
    else if (i == MAX_COUNTER_SOURCES)
        fprintf(stderr, "meridian: more than %d counter sources; the rest are ignored\n",
                MAX_COUNTER_SOURCES);
}

size_t mrd_agent_put_counters(struct mrd_named_counter *out, size_t max,
                              const struct mrd_named_counter *c, size_t n)
{
    size_t k = n < max ? n : max;
    memcpy(out, c, k * sizeof(*c));
    return k;
}

size_t mrd_agent_named_counters(struct mrd_named_counter *out, size_t max)
{
    size_t n = 0;
    unsigned k = atomic_load(&g_nsources);
    for (unsigned i = 0; i < k && i < MAX_COUNTER_SOURCES && n < max; i++) {
        counter_source_fn fn = atomic_load(&g_sources[i]);
        if (fn) {
            size_t got = fn(out + n, max - n);
            n += got < max - n ? got : max - n;
        }
    }
    return n;
}
