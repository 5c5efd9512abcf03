/* Per-thread capture rings: single-producer / single-consumer queues of fixed-size records.
 *
 * Where it sits: capture code (CUPTI callbacks, the NCCL plugin, NVTX, MPI wrappers) calls
 * mrd_ring_write() on the application's, CUDA's and NCCL's threads; the agent's one
 * background flusher thread calls mrd_ring_drain() every few milliseconds and turns the
 * records into batches (agent/transport).
 *
 * Workload: up to 50,000 events/s per rank sustained, bursts of 200,000/s, spread over a
 * handful of threads (the application thread, CUPTI's worker, NCCL's proxy thread). A
 * record is 216 bytes; a ring holds `records_per_ring` of them (16384 by default, about
 * 80 ms of a 200,000/s burst), so the flusher has time to come round. CUPTI's worker is
 * the exception: it writes a whole completed CUPTI buffer (up to ~65,000 records) in a few
 * milliseconds, at any rate the application produced them (a launch storm: 400,000/s),
 * and paces itself against its ring (mrd_ring_pace below) rather than overflowing it.
 *
 * Design:
 *  - A fixed array of `max_threads` rings is mapped once at init (MAP_NORESERVE: pages are
 *    committed only when a thread actually writes), so the hot path never allocates.
 *  - Each ring also carries MRD_RING_THREAD_STATE_BYTES of per-thread capture state (the
 *    NVTX push/pop stack, the cached thread id, ...: mrd_ring_thread_state), in the same
 *    mapping, after the records; zeroed by the thread that claims the ring. Capture code
 *    keeps no __thread variables for the same reason as below.
 *  - A thread's first write claims a FREE ring with one compare-and-swap and remembers it
 *    in a pthread key (not __thread: in a dlopen'ed library, TLS is either allocated with
 *    malloc on a thread's first touch or, as initial-exec, can make dlopen fail with
 *    "cannot allocate memory in static TLS block"). pthread_getspecific only reads the
 *    thread descriptor; pthread_setspecific runs on the claim only and allocates at most
 *    once per thread, only when the process already holds 32 keys. The key's destructor
 *    marks the ring ORPHAN when the thread exits; the flusher drains an orphan and hands it
 *    back (FREE), so short-lived threads do not exhaust the array.
 *  - Producer: load head (own), load tail (acquire), copy the record, store head+1
 *    (release). Consumer: load head (acquire), read records, store tail (release). No
 *    lock, no allocation, no system call after the claim.
 *  - Policy at the cap: a full ring drops the new record and counts it (per ring,
 *    MRD_DROP_RING_FULL); a thread that finds no FREE ring (or writes before init) drops
 *    and counts MRD_DROP_NO_THREAD_SLOT, and retries the claim only every 1024 drops.
 *  - mrd_ring_disable() (fork child) makes every write refuse its record, uncounted.
 *  - Paced producers (mrd_ring_pace; CUPTI's completion worker, never an application
 *    thread) write a whole CUPTI buffer (up to ~65,000 records) at once, faster than any
 *    consumer. Instead of overflowing they wake the consumer once their ring is half full
 *    (the consumer's eventfd, through the function it registered) and sleep on a futex
 *    until the consumer frees records of that ring. The consumer releases space every
 *    MRD_RING_RELEASE_EVERY records, and wakes a sleeping producer then (the Dekker pair
 *    `waiting` / `tail` with a full fence on each side, so a wake-up is never missed); it
 *    makes no system call unless a producer sleeps. mrd_ring_write is unchanged by this.
 *  - A paced producer also writes in place: mrd_ring_reserve hands it up to a chunk of free
 *    slots (contiguous, up to the ring's end), it converts its records straight into them,
 *    and mrd_ring_commit publishes the chunk with one release store of head. Per record
 *    that saves the lookup of the thread's ring, a copy of the record and a release store.
 */
#include "ring.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { RING_FREE = 0, RING_OWNED = 1, RING_ORPHAN = 2 };

#define CACHE_LINE        64
#define CLAIM_RETRY_EVERY 1024

struct ring {
    _Alignas(CACHE_LINE) _Atomic uint64_t head; /* written by the producer only */
    _Atomic uint64_t dropped;                   /* written by the producer only */
    _Atomic uint32_t waiting;                   /* producer asleep in mrd_ring_pace */
    uint64_t kicked;                            /* producer only: tail + 1 at its last wake */
    _Alignas(CACHE_LINE) _Atomic uint64_t tail; /* written by the consumer only */
    _Atomic uint32_t released;                  /* futex word: bumped when space is freed
                                                   while the producer waits */
    _Atomic int state;                          /* RING_* */
    struct mrd_record *slots;
};

static struct ring *g_rings;
static unsigned char *g_states; /* g_nrings * MRD_RING_THREAD_STATE_BYTES, after the slots */
static unsigned g_nrings;
static uint64_t g_mask;
static size_t g_map_bytes;
static _Atomic unsigned g_gen; /* bumped by every init: stale TLS claims are retried */
static _Atomic int g_enabled;  /* 0 before init, after shutdown and after disable */
static _Atomic int g_disabled; /* sticky (fork child) */
static _Atomic uint64_t g_drop_noslot;
static unsigned g_drain_start; /* flusher only: rotates which ring drains first */
static void (*_Atomic g_consumer_wake)(void);

/* Per-thread state in two pthread keys (see above):
 *   g_key      (generation & 0xffffff) << 24 | (ring index + 1), 0 when none;
 *   g_try_key  generation of the thread's last failed claim << 32 | refusals since. */
static pthread_key_t g_key, g_try_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static _Atomic int g_keys_ready;

/* Thread exit: the ring keeps its records for the flusher, which frees the ring once it
 * is empty. The key value encodes (generation, index + 1) so a stale value never touches
 * memory of another init. */
static void ring_thread_exit(void *v)
{
    uintptr_t x = (uintptr_t)v;
    unsigned gen = (unsigned)(x >> 24), idx = (unsigned)(x & 0xffffffu) - 1;
    if (gen != (atomic_load(&g_gen) & 0xffffffu) || !atomic_load(&g_enabled) || idx >= g_nrings)
        return;
    int owned = RING_OWNED;
    atomic_compare_exchange_strong(&g_rings[idx].state, &owned, RING_ORPHAN);
}

static void ring_key_create(void)
{
    if (pthread_key_create(&g_key, ring_thread_exit) == 0 &&
        pthread_key_create(&g_try_key, NULL) == 0)
        atomic_store(&g_keys_ready, 1);
}

int mrd_ring_init(unsigned max_threads, unsigned records_per_ring)
{
    if (max_threads == 0 || max_threads > 0xffffffu || records_per_ring < 2 ||
        (records_per_ring & (records_per_ring - 1)) != 0)
        return -EINVAL;
    if (g_rings)
        return -EINVAL; /* already initialised: call mrd_ring_shutdown first */
    pthread_once(&g_key_once, ring_key_create);
    if (!atomic_load(&g_keys_ready))
        return -EAGAIN;

    size_t header = ((size_t)max_threads * sizeof(struct ring) + 4095) & ~(size_t)4095;
    size_t per_ring = (size_t)records_per_ring * sizeof(struct mrd_record);
    if (per_ring / sizeof(struct mrd_record) != records_per_ring ||
        (SIZE_MAX - header - 4096) / max_threads < per_ring + MRD_RING_THREAD_STATE_BYTES)
        return -EINVAL;
    /* page-aligned, so each thread's state is a page of its own */
    size_t states = (header + (size_t)max_threads * per_ring + 4095) & ~(size_t)4095;
    size_t bytes = states + (size_t)max_threads * MRD_RING_THREAD_STATE_BYTES;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;

    struct ring *rings = p; /* zero-filled: every ring FREE, head == tail == 0 */
    for (unsigned i = 0; i < max_threads; i++)
        rings[i].slots = (struct mrd_record *)((char *)p + header + (size_t)i * per_ring);
    g_rings = rings;
    g_states = (unsigned char *)p + states;
    g_nrings = max_threads;
    g_mask = records_per_ring - 1;
    g_map_bytes = bytes;
    g_drain_start = 0;
    atomic_fetch_add(&g_gen, 1);
    atomic_store_explicit(&g_enabled, 1, memory_order_release);
    return 0;
}

/* First write of a thread (or after a re-init): claim a FREE ring. */
static struct ring *ring_claim(unsigned gen)
{
    if (!atomic_load_explicit(&g_enabled, memory_order_acquire))
        return NULL;
    for (unsigned i = 0; i < g_nrings; i++) {
        int expect = RING_FREE;
        if (atomic_load_explicit(&g_rings[i].state, memory_order_relaxed) != RING_FREE)
            continue;
        if (atomic_compare_exchange_strong(&g_rings[i].state, &expect, RING_OWNED)) {
            /* the previous owner's capture state, if any, is not ours */
            memset(g_states + (size_t)i * MRD_RING_THREAD_STATE_BYTES, 0,
                   MRD_RING_THREAD_STATE_BYTES);
            uintptr_t key = ((uintptr_t)(gen & 0xffffffu) << 24) | (uintptr_t)(i + 1);
            (void)pthread_setspecific(g_key, (void *)key);
            return &g_rings[i];
        }
    }
    return NULL;
}

/* The calling thread's ring if it holds one of this generation, else NULL. */
static struct ring *ring_current(unsigned gen)
{
    uintptr_t v = (uintptr_t)pthread_getspecific(g_key);
    unsigned idx = (unsigned)(v & 0xffffffu);
    if (v == 0 || (unsigned)(v >> 24) != (gen & 0xffffffu) || idx > g_nrings)
        return NULL;
    return &g_rings[idx - 1];
}

/* No ring yet: claim at once after an init, then only every CLAIM_RETRY_EVERY refusals
 * (a thread beyond the slots must not scan the array on every write). */
static struct ring *ring_claim_throttled(unsigned gen)
{
    uint64_t v = (uint64_t)(uintptr_t)pthread_getspecific(g_try_key);
    uint32_t tried_gen = (uint32_t)(v >> 32), refusals = (uint32_t)v;
    struct ring *rg = NULL;
    if (tried_gen != gen || refusals % CLAIM_RETRY_EVERY == CLAIM_RETRY_EVERY - 1) {
        rg = ring_claim(gen);
        refusals = 0;
    } else {
        refusals++;
    }
    (void)pthread_setspecific(g_try_key, (void *)(uintptr_t)(((uint64_t)gen << 32) | refusals));
    return rg;
}

/* The lookup-or-claim prologue of mrd_ring_write and mrd_ring_thread_state: the calling
 * thread's ring, claiming one (throttled) when it has none. NULL when the rings are
 * disabled (*counted_loss = 0: a fork child loses nothing it must count) or when the
 * thread has no ring (*counted_loss = 1: before init, or no free ring). */
static inline struct ring *ring_lookup(int *counted_loss)
{
    *counted_loss = 0;
    if (atomic_load_explicit(&g_disabled, memory_order_relaxed))
        return NULL;
    *counted_loss = 1;
    if (!atomic_load_explicit(&g_keys_ready, memory_order_acquire))
        return NULL; /* before init */
    unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
    struct ring *rg = ring_current(gen);
    return rg ? rg : ring_claim_throttled(gen);
}

/* Copies *r into rg (the caller's own ring), or counts it as ring_full. */
static inline int ring_put(struct ring *rg, const struct mrd_record *r)
{
    uint64_t h = atomic_load_explicit(&rg->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&rg->tail, memory_order_acquire);
    if (h - t > g_mask) {
        /* single writer: a plain load + store is enough, no locked instruction */
        uint64_t d = atomic_load_explicit(&rg->dropped, memory_order_relaxed);
        atomic_store_explicit(&rg->dropped, d + 1, memory_order_relaxed);
        return -EAGAIN;
    }
    memcpy(&rg->slots[h & g_mask], r, sizeof *r);
    atomic_store_explicit(&rg->head, h + 1, memory_order_release);
    return 0;
}

/* A record the thread has no ring for: counted (unless the rings are disabled). */
static int ring_refuse(int counted_loss)
{
    if (counted_loss)
        atomic_fetch_add_explicit(&g_drop_noslot, 1, memory_order_relaxed);
    return -EAGAIN;
}

int mrd_ring_write(const struct mrd_record *r)
{
    int counted;
    struct ring *rg = ring_lookup(&counted);
    return rg ? ring_put(rg, r) : ring_refuse(counted);
}

void *mrd_ring_thread_state(void)
{
    int counted;
    struct ring *rg = ring_lookup(&counted);
    return rg ? g_states + (size_t)(rg - g_rings) * MRD_RING_THREAD_STATE_BYTES : NULL;
}

/* The ring a thread's capture state belongs to (state from mrd_ring_thread_state). */
static inline struct ring *ring_of_state(void *state)
{
    size_t idx = (size_t)((unsigned char *)state - g_states) / MRD_RING_THREAD_STATE_BYTES;
    return &g_rings[idx];
}

int mrd_ring_write_in(void *state, const struct mrd_record *r)
{
    if (atomic_load_explicit(&g_disabled, memory_order_relaxed))
        return -EAGAIN;
    if (state == NULL)
        return ring_refuse(1);
    return ring_put(ring_of_state(state), r);
}

struct mrd_record *mrd_ring_reserve(void *state, size_t want, size_t *n)
{
    *n = 0;
    if (state == NULL || atomic_load_explicit(&g_disabled, memory_order_relaxed))
        return NULL;
    struct ring *rg = ring_of_state(state);
    uint64_t h = atomic_load_explicit(&rg->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&rg->tail, memory_order_acquire);
    uint64_t room = g_mask + 1 - (h - t), to_end = g_mask + 1 - (h & g_mask);
    if (room > to_end)
        room = to_end;
    if (room > want)
        room = want;
    *n = (size_t)room;
    return room ? &rg->slots[h & g_mask] : NULL;
}

void mrd_ring_commit(void *state, size_t n)
{
    if (state == NULL || n == 0)
        return;
    struct ring *rg = ring_of_state(state);
    uint64_t h = atomic_load_explicit(&rg->head, memory_order_relaxed);
    atomic_store_explicit(&rg->head, h + n, memory_order_release);
}

/* The calling thread's ring, claiming one if needed; NULL when none. */
static struct ring *ring_self(void)
{
    if (!atomic_load_explicit(&g_keys_ready, memory_order_acquire))
        return NULL;
    unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
    struct ring *rg = ring_current(gen);
    return rg ? rg : ring_claim(gen);
}

size_t mrd_ring_space(void)
{
    if (atomic_load_explicit(&g_disabled, memory_order_relaxed))
        return 0;
    struct ring *rg = ring_self();
    if (rg == NULL)
        return 0;
    uint64_t h = atomic_load_explicit(&rg->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&rg->tail, memory_order_acquire);
    return (size_t)(g_mask + 1 - (h - t));
}

void mrd_ring_set_consumer_wake(void (*fn)(void))
{
    atomic_store(&g_consumer_wake, fn);
}

/* Wakes the consumer once the ring is half full, once per consumer pass (tail moved). */
static void pace_kick(struct ring *rg, uint64_t h, uint64_t t)
{
    if (h - t < (g_mask + 1) / 2 || rg->kicked == t + 1)
        return;
    rg->kicked = t + 1;
    void (*fn)(void) = atomic_load(&g_consumer_wake);
    if (fn)
        fn();
}

size_t mrd_ring_pace(size_t want, int64_t timeout_ns)
{
    if (atomic_load_explicit(&g_disabled, memory_order_relaxed))
        return 0;
    struct ring *rg = ring_self();
    if (rg == NULL)
        return 0;
    uint64_t cap = g_mask + 1;
    uint64_t h = atomic_load_explicit(&rg->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&rg->tail, memory_order_acquire);
    pace_kick(rg, h, t);
    if (cap - (h - t) >= want || timeout_ns <= 0)
        return (size_t)(cap - (h - t));

    uint32_t seen = atomic_load_explicit(&rg->released, memory_order_acquire);
    /* store waiting, then load tail; ring_release stores tail, then loads waiting: all four
     * sequentially consistent, so at least one side sees the other's store (no lost wake).
     * No fence: ThreadSanitizer cannot follow one (gcc -Wtsan). */
    atomic_store_explicit(&rg->waiting, 1, memory_order_seq_cst);
    t = atomic_load_explicit(&rg->tail, memory_order_seq_cst);
    if (cap - (h - t) < want) {
        pace_kick(rg, h, t);
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000),
                              .tv_nsec = (long)(timeout_ns % 1000000000)};
        /* returns at once if `released` moved since `seen` (EAGAIN), on a wake, a signal
         * or the timeout: the caller re-checks in every case */
        syscall(SYS_futex, (uint32_t *)&rg->released, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
    }
    atomic_store_explicit(&rg->waiting, 0, memory_order_relaxed);
    t = atomic_load_explicit(&rg->tail, memory_order_acquire);
    return (size_t)(cap - (h - t));
}

/* Consumer: makes records up to new_tail free again, and wakes a producer sleeping in
 * mrd_ring_pace (no system call when none is). */
static void ring_release(struct ring *rg, uint64_t new_tail)
{
    /* sequentially consistent store and load: the other half of mrd_ring_pace's pair */
    atomic_store_explicit(&rg->tail, new_tail, memory_order_seq_cst);
    if (atomic_load_explicit(&rg->waiting, memory_order_seq_cst)) {
        atomic_fetch_add_explicit(&rg->released, 1, memory_order_release);
        syscall(SYS_futex, (uint32_t *)&rg->released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

size_t mrd_ring_drain(void (*fn)(const struct mrd_record *r, void *arg), void *arg, size_t max)
{
    if (!atomic_load_explicit(&g_enabled, memory_order_acquire) || g_rings == NULL)
        return 0;
    size_t done = 0;
    unsigned n = g_nrings, start = g_drain_start;
    g_drain_start = (start + 1) % n;
    for (unsigned k = 0; k < n && done < max; k++) {
        struct ring *rg = &g_rings[(start + k) % n];
        int state = atomic_load_explicit(&rg->state, memory_order_acquire);
        if (state == RING_FREE)
            continue;
        uint64_t t = atomic_load_explicit(&rg->tail, memory_order_relaxed);
        uint64_t h = atomic_load_explicit(&rg->head, memory_order_acquire);
        uint64_t avail = h - t;
        if (avail > max - done)
            avail = max - done;
        for (uint64_t i = 0; i < avail; i++) {
            fn(&rg->slots[(t + i) & g_mask], arg);
            if ((i + 1) % MRD_RING_RELEASE_EVERY == 0 && i + 1 < avail)
                ring_release(rg, t + i + 1);
        }
        if (avail)
            ring_release(rg, t + avail);
        done += avail;
        /* The owner has exited (ORPHAN was stored after its last write): once empty, the
         * ring may be claimed again. */
        if (state == RING_ORPHAN && t + avail == h) {
            int expect = RING_ORPHAN;
            atomic_compare_exchange_strong(&rg->state, &expect, RING_FREE);
        }
    }
    return done;
}

void mrd_ring_dropped(uint64_t dropped[MRD_DROP__COUNT])
{
    dropped[MRD_DROP_NO_THREAD_SLOT] += atomic_load_explicit(&g_drop_noslot, memory_order_relaxed);
    if (!atomic_load_explicit(&g_enabled, memory_order_acquire) || g_rings == NULL)
        return;
    for (unsigned i = 0; i < g_nrings; i++)
        dropped[MRD_DROP_RING_FULL] +=
            atomic_load_explicit(&g_rings[i].dropped, memory_order_relaxed);
}

void mrd_ring_disable(void)
{
    atomic_store(&g_disabled, 1);
}

void mrd_ring_shutdown(void)
{
    if (g_rings == NULL)
        return;
    atomic_store(&g_enabled, 0);
    atomic_fetch_add(&g_gen, 1); /* every thread's claim is now stale */
    munmap(g_rings, g_map_bytes);
    g_rings = NULL;
    g_states = NULL;
    g_nrings = 0;
    atomic_store(&g_drop_noslot, 0);
}
