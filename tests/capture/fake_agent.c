/* Test build of agent/core/agent.h and agent/ring/ring.h (see fake_agent.h).
 *
 * Where this sits: linked instead of the real core, ring and transport into the capture
 * tests, so that what capture code writes can be read back record by record. Workload:
 * unit tests, a few hundred thousand records at most; one mutex guards everything.
 */
#include "fake_agent.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GPUS    16
#define MAX_HOOKS   8
#define MAX_THREADS 512 /* threads holding capture state at once (mrd_ring_thread_state) */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int active;
    int64_t clock_ns; /* < 0: real clock */
    struct mrd_record *store;
    size_t cap, head, count;
    size_t env_records; /* counted, not stored (fake_agent.h) */
    uint64_t dropped[MRD_DROP__COUNT], captured[MRD_EV__COUNT];
    struct fake_gpu gpus[MAX_GPUS];
    size_t ngpus;
    void (*hooks[MAX_HOOKS])(void);
    size_t nhooks;
    unsigned starts, shutdowns;
    struct mrd_agent_config cfg;
    int world_size;
} fk = {.active = 1, .clock_ns = -1, .world_size = -1};

static void ensure_store(void)
{
    if (!fk.store) {
        fk.cap = 1 << 16;
        fk.store = calloc(1 << 18, sizeof(*fk.store)); /* room to raise the cap later */
    }
}

void fake_small_cupti_env(void)
{
    setenv("MERIDIAN_CUPTI_BUFFER_MB", "1", 1);
    setenv("MERIDIAN_CUPTI_BUFFERS", "2", 1);
    setenv("MERIDIAN_CUPTI_FLUSH_MS", "0", 1);
}

void fake_reset(void)
{
    pthread_mutex_lock(&mu);
    ensure_store();
    fk.active = 1;
    fk.clock_ns = -1;
    fk.cap = 1 << 16;
    fk.head = fk.count = fk.env_records = 0;
    memset(fk.dropped, 0, sizeof(fk.dropped));
    memset(fk.captured, 0, sizeof(fk.captured));
    fk.ngpus = fk.nhooks = 0;
    fk.starts = fk.shutdowns = 0;
    pthread_mutex_unlock(&mu);
}

void fake_set_world_size(int n)
{
    pthread_mutex_lock(&mu);
    fk.world_size = n;
    pthread_mutex_unlock(&mu);
}

void fake_set_active(int active)
{
    pthread_mutex_lock(&mu);
    fk.active = active;
    pthread_mutex_unlock(&mu);
}

void fake_clock_set(int64_t ns)
{
    pthread_mutex_lock(&mu);
    fk.clock_ns = ns;
    pthread_mutex_unlock(&mu);
}

void fake_ring_set_capacity(size_t records)
{
    pthread_mutex_lock(&mu);
    ensure_store();
    fk.cap = records < (1 << 18) ? records : (1 << 18);
    pthread_mutex_unlock(&mu);
}

size_t fake_ring_take(struct mrd_record *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&mu);
    while (n < max && fk.count > 0) {
        out[n++] = fk.store[fk.head];
        fk.head = (fk.head + 1) % (1 << 18);
        fk.count--;
    }
    pthread_mutex_unlock(&mu);
    return n;
}

size_t fake_env_records(void)
{
    pthread_mutex_lock(&mu);
    size_t n = fk.env_records;
    pthread_mutex_unlock(&mu);
    return n;
}

size_t fake_ring_count(void)
{
    pthread_mutex_lock(&mu);
    size_t n = fk.count;
    pthread_mutex_unlock(&mu);
    return n;
}

uint64_t fake_dropped(int reason)
{
    pthread_mutex_lock(&mu);
    uint64_t n = reason > 0 && reason < MRD_DROP__COUNT ? fk.dropped[reason] : 0;
    pthread_mutex_unlock(&mu);
    return n;
}

size_t fake_gpus(struct fake_gpu *out, size_t max)
{
    pthread_mutex_lock(&mu);
    size_t n = fk.ngpus < max ? fk.ngpus : max;
    memcpy(out, fk.gpus, n * sizeof(*out));
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned fake_start_calls(void)
{
    pthread_mutex_lock(&mu);
    unsigned n = fk.starts;
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned fake_shutdown_calls(void)
{
    pthread_mutex_lock(&mu);
    unsigned n = fk.shutdowns;
    pthread_mutex_unlock(&mu);
    return n;
}

/* ---- agent.h ---------------------------------------------------------------------- */

int mrd_agent_start(void)
{
    pthread_mutex_lock(&mu);
    fk.starts++;
    int a = fk.active;
    pthread_mutex_unlock(&mu);
    return a;
}

int mrd_agent_active(void)
{
    pthread_mutex_lock(&mu);
    int a = fk.active;
    pthread_mutex_unlock(&mu);
    return a;
}

const struct mrd_agent_config *mrd_agent_config(void)
{
    fk.cfg.rank = fk.cfg.local_rank = -1;
    fk.cfg.world_size = fk.world_size;
    return &fk.cfg;
}

int64_t mrd_clock_now(void)
{
    pthread_mutex_lock(&mu);
    int64_t fixed = fk.clock_ns;
    pthread_mutex_unlock(&mu);
    if (fixed >= 0)
        return fixed;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The timers' clock, as agent/base/clock.c reads it (never the fixed test time). */
int64_t mrd__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void mrd_agent_count_captured(int kind, uint64_t n)
{
    pthread_mutex_lock(&mu);
    if (kind > 0 && kind < MRD_EV__COUNT)
        fk.captured[kind] += n;
    pthread_mutex_unlock(&mu);
}

void mrd_agent_count_drop(int reason, uint64_t n)
{
    pthread_mutex_lock(&mu);
    if (reason > 0 && reason < MRD_DROP__COUNT)
        fk.dropped[reason] += n;
    pthread_mutex_unlock(&mu);
}

void mrd_agent_counters(uint64_t captured[MRD_EV__COUNT], uint64_t dropped[MRD_DROP__COUNT])
{
    pthread_mutex_lock(&mu);
    memcpy(captured, fk.captured, sizeof(fk.captured));
    memcpy(dropped, fk.dropped, sizeof(fk.dropped));
    pthread_mutex_unlock(&mu);
}

static void copy_str(char *dst, size_t n, const char *s)
{
    dst[0] = '\0';
    if (s) {
        strncpy(dst, s, n - 1);
        dst[n - 1] = '\0';
    }
}

void mrd_agent_add_gpu(uint32_t device, const char *uuid, const char *pci_bus_id, const char *name)
{
    pthread_mutex_lock(&mu);
    if (fk.ngpus < MAX_GPUS) {
        struct fake_gpu *g = &fk.gpus[fk.ngpus++];
        g->device = device;
        copy_str(g->uuid, sizeof(g->uuid), uuid);
        copy_str(g->pci, sizeof(g->pci), pci_bus_id);
        copy_str(g->name, sizeof(g->name), name);
    }
    pthread_mutex_unlock(&mu);
}

static size_t (*sources[8])(struct mrd_named_counter *out, size_t max);
static size_t nsources;

void mrd_agent_add_counter_source(size_t (*fn)(struct mrd_named_counter *out, size_t max))
{
    pthread_mutex_lock(&mu);
    if (nsources < 8)
        sources[nsources++] = fn;
    pthread_mutex_unlock(&mu);
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
    size_t (*fns[8])(struct mrd_named_counter *, size_t);
    pthread_mutex_lock(&mu);
    size_t k = nsources;
    memcpy(fns, sources, sizeof(fns));
    pthread_mutex_unlock(&mu);
    size_t n = 0;
    for (size_t i = 0; i < k && n < max; i++)
        n += fns[i](out + n, max - n);
    return n;
}

void mrd_agent_on_flush(void (*fn)(void))
{
    pthread_mutex_lock(&mu);
    if (fk.nhooks < MAX_HOOKS)
        fk.hooks[fk.nhooks++] = fn;
    pthread_mutex_unlock(&mu);
}

void mrd_agent_shutdown(void)
{
    void (*hooks[MAX_HOOKS])(void);
    pthread_mutex_lock(&mu);
    size_t n = fk.nhooks;
    memcpy(hooks, fk.hooks, sizeof(hooks));
    fk.shutdowns++;
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < n; i++)
        hooks[i]();
}

/* ---- ring.h ----------------------------------------------------------------------- */

int mrd_ring_init(unsigned max_threads, unsigned records_per_ring)
{
    (void)max_threads, (void)records_per_ring;
    return 0;
}

int mrd_ring_write(const struct mrd_record *r)
{
    pthread_mutex_lock(&mu);
    ensure_store();
    if (r->kind == MRD_EV_ENV) {
        fk.env_records++;
        pthread_mutex_unlock(&mu);
        return 0;
    }
    if (fk.count >= fk.cap) {
        fk.dropped[MRD_DROP_RING_FULL]++;
        pthread_mutex_unlock(&mu);
        return -11; /* -EAGAIN */
    }
    fk.store[(fk.head + fk.count) % (1 << 18)] = *r;
    fk.count++;
    pthread_mutex_unlock(&mu);
    return 0;
}

int mrd_ring_write_in(void *s, const struct mrd_record *r) { (void)s; return mrd_ring_write(r); }

/* In place as the real ring does it, through a per-thread scratch chunk that
 * mrd_ring_commit writes record by record. */
#define FAKE_RESERVE_MAX 256
static __thread struct mrd_record fake_reserved[FAKE_RESERVE_MAX];

struct mrd_record *mrd_ring_reserve(void *state, size_t want, size_t *n)
{
    size_t space = state ? mrd_ring_space() : 0;
    size_t k = want < space ? want : space;
    *n = k < FAKE_RESERVE_MAX ? k : FAKE_RESERVE_MAX;
    return *n ? fake_reserved : NULL;
}

void mrd_ring_commit(void *state, size_t n)
{
    for (size_t i = 0; state && i < n; i++)
        mrd_ring_write(&fake_reserved[i]);
}

size_t mrd_ring_space(void)
{
    pthread_mutex_lock(&mu);
    ensure_store();
    size_t n = fk.cap > fk.count ? fk.cap - fk.count : 0;
    pthread_mutex_unlock(&mu);
    return n;
}

/* The real ring sleeps on a futex until the flusher frees records; the fake has no
 * flusher: the test frees records (fake_ring_take) or raises the capacity from its own
 * thread, so this polls once a millisecond within timeout_ns. */
size_t mrd_ring_pace(size_t want, int64_t timeout_ns)
{
    size_t space = mrd_ring_space();
    if (space < want && timeout_ns > 0) {
        struct timespec ts = {0, timeout_ns < 1000000 ? (long)timeout_ns : 1000000};
        nanosleep(&ts, NULL);
        space = mrd_ring_space();
    }
    return space;
}

/* Per-thread state as the real ring keeps it: a fixed pool, one slot per live thread,
 * found through a pthread key, zeroed for each new owner, freed at thread exit. */
static _Alignas(64) unsigned char states[MAX_THREADS][MRD_RING_THREAD_STATE_BYTES];
static _Atomic int state_used[MAX_THREADS];
static pthread_key_t state_key;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;

static void state_release(void *v)
{
    atomic_store(&state_used[(unsigned char(*)[MRD_RING_THREAD_STATE_BYTES])v - states], 0);
}

static void state_key_create(void)
{
    pthread_key_create(&state_key, state_release);
}

void *mrd_ring_thread_state(void)
{
    pthread_once(&state_once, state_key_create);
    void *v = pthread_getspecific(state_key);
    if (v)
        return v;
    for (int i = 0; i < MAX_THREADS; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&state_used[i], &expect, 1)) {
            memset(states[i], 0, sizeof(states[i]));
            pthread_setspecific(state_key, states[i]);
            return states[i];
        }
    }
    return NULL;
}

size_t mrd_ring_drain(void (*fn)(const struct mrd_record *r, void *arg), void *arg, size_t max)
{
    struct mrd_record r;
    size_t n = 0;
    while (n < max && fake_ring_take(&r, 1) == 1) {
        fn(&r, arg);
        n++;
    }
    return n;
}

void mrd_ring_dropped(uint64_t dropped[MRD_DROP__COUNT])
{
    pthread_mutex_lock(&mu);
    dropped[MRD_DROP_RING_FULL] += fk.dropped[MRD_DROP_RING_FULL];
    pthread_mutex_unlock(&mu);
}

void mrd_ring_shutdown(void)
{
}
