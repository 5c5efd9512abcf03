/* agent_ring: the per-thread rings against a trivial model.
 *
 * 1. Differential, one writer: random writes and drains (random batch sizes, random ring
 *    sizes, many rounds) on the real ring and on a plain array FIFO of the same capacity;
 *    every drained record and the drop count must equal the model's.
 * 2. Concurrent: W writer threads write numbered records in random bursts while the
 *    consumer drains; each writer keeps its own model (the list of records the ring
 *    accepted). Drained records must be exactly each writer's accepted list, in order, and
 *    the ring's MRD_DROP_RING_FULL count must equal the writers' refusals.
 * 3. Thread slots: more threads than rings are refused and counted as NO_THREAD_SLOT; a
 *    ring whose thread exited is drained and handed to a new thread.
 * 4. Before init and after mrd_ring_disable(): writes are refused.
 * 5. Paced producer (mrd_ring_pace, what CUPTI's completion worker uses): a thread writes
 *    200,000 records flat out into a 4096-record ring, asking mrd_ring_pace for room when
 *    it is full; the consumer drains only when the producer's wake function tells it to
 *    (its own timeout is 10 s). Nothing may be dropped, every record arrives in order, no
 *    wait may run into its 2 s timeout (a lost wake-up, of the consumer or of the sleeping
 *    producer, would), and the wakes are far fewer than the records. Without a consumer
 *    a wait ends at its timeout.
 * 6. Per-thread capture state (mrd_ring_thread_state): one area per ring, 64-byte aligned,
 *    zeroed for each new owner (also when a ring is handed from an exited thread to a new
 *    one), the same on every call of a thread, private to it (THREADS_STATE threads fill
 *    theirs at once and find only their own bytes), NULL for a thread without a ring,
 *    before init and after mrd_ring_disable.
 * 7. mrd_ring_write_in (a write through the state the caller already looked up): the same
 *    ring as mrd_ring_write's (mixed writes arrive in order, the same full policy), another
 *    thread's state is its own ring, NULL is counted as NO_THREAD_SLOT, nothing after
 *    mrd_ring_disable.
 * 8. In-place writes (mrd_ring_reserve / mrd_ring_commit, what CUPTI's completion worker
 *    uses): against the same array-FIFO model, a reservation gives exactly
 *    min(want, free, slots to the ring's end), only committed records reach the consumer,
 *    in order, mixed with mrd_ring_write; NULL state and a disabled ring give none. And a
 *    producer thread filling reserved chunks while the consumer drains concurrently: every
 *    record arrives once, in order, unchanged (under TSan: the chunk's one release store
 *    publishes every slot in it).
 * Built twice: plain (agent_ring) and with ThreadSanitizer (agent_ring_tsan).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ring.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void make_record(struct mrd_record *r, uint32_t writer, uint64_t n)
{
    memset(r, 0, sizeof *r);
    r->kind = MRD_EV_KERNEL;
    r->reserved = writer;
    r->ev.kernel.correlation = n;
    r->ev.kernel.start = (int64_t)(n * 3 + writer);
    r->ev.kernel.end = r->ev.kernel.start + 7;
}

static uint64_t ring_drops(int reason)
{
    uint64_t d[MRD_DROP__COUNT] = {0};
    mrd_ring_dropped(d);
    return d[reason];
}

/* ---- 1. single-writer differential ---- */

struct model {
    uint64_t *buf;
    size_t cap, head, len;
    uint64_t drops;
};

struct drain_check {
    struct model *m;
    size_t n;
};

/* The model's side of an accepted record. */
static void model_push(struct model *m, uint64_t v)
{
    m->buf[(m->head + m->len) % m->cap] = v;
    m->len++;
}

/* One mrd_ring_write of record v, checked against the model: refused with -EAGAIN exactly
 * when the model is full (a drop), else accepted. Returns 1 when accepted. */
static int model_write(struct model *m, uint64_t v)
{
    struct mrd_record r;
    make_record(&r, 0, v);
    int e = mrd_ring_write(&r);
    if (m->len == m->cap) {
        CHECK_EQ(e, -EAGAIN);
        m->drops++;
        return 0;
    }
    CHECK_OK(e);
    model_push(m, v);
    return 1;
}

static void check_against_model(const struct mrd_record *r, void *arg)
{
    struct drain_check *dc = arg;
    struct model *m = dc->m;
    CHECK_GT(m->len, 0);
    uint64_t want = m->buf[m->head];
    m->head = (m->head + 1) % m->cap;
    m->len--;
    CHECK_UEQ(r->ev.kernel.correlation, want);
    CHECK_EQ(r->ev.kernel.start, (int64_t)(want * 3));
    CHECK_EQ(r->kind, MRD_EV_KERNEL);
    dc->n++;
}

static void test_differential(void)
{
    for (int round = 0; round < 200; round++) {
        unsigned cap = 2u << (rnd() % 10); /* 2 .. 1024 */
        CHECK_OK(mrd_ring_init(1 + (unsigned)(rnd() % 4), cap));
        struct model m = {.buf = calloc(cap, sizeof(uint64_t)), .cap = cap};
        CHECK(m.buf != NULL);
        uint64_t next = 1;
        for (int op = 0; op < 400; op++) {
            if (rnd() % 3 != 0) {
                unsigned burst = (unsigned)(rnd() % (cap * 2 + 1));
                for (unsigned i = 0; i < burst; i++)
                    model_write(&m, next++);
            } else {
                size_t max = (size_t)(rnd() % (cap + 3));
                size_t expect = m.len < max ? m.len : max;
                struct drain_check dc = {.m = &m};
                CHECK_UEQ(mrd_ring_drain(check_against_model, &dc, max), expect);
                CHECK_UEQ(dc.n, expect);
            }
            CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), m.drops);
        }
        struct drain_check dc = {.m = &m};
        mrd_ring_drain(check_against_model, &dc, SIZE_MAX);
        CHECK_UEQ(m.len, 0);
        CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), 0);
        free(m.buf);
        mrd_ring_shutdown();
    }
}

/* ---- 2. concurrent writers ---- */

#define WRITERS    4
#define PER_WRITER 200000

struct writer_model {
    uint32_t id;
    uint64_t seed;
    uint64_t *accepted; /* the records the ring took, in order */
    size_t n_accepted, n_refused;
    size_t next_check; /* consumer: position in accepted[] */
};

static struct writer_model wm[WRITERS];
static _Atomic int writers_done;

static void *writer_main(void *arg)
{
    struct writer_model *w = arg;
    uint64_t local = w->seed; /* per-thread generator: rnd() is not thread-safe */
    for (uint64_t n = 1; n <= PER_WRITER; n++) {
        struct mrd_record r;
        make_record(&r, w->id, n);
        if (mrd_ring_write(&r) == 0)
            w->accepted[w->n_accepted++] = n;
        else
            w->n_refused++;
        local = local * 6364136223846793005ull + 1442695040888963407ull;
        if ((local >> 60) == 0) { /* now and then, let the consumer catch up */
            for (volatile int spin = 0; spin < 2000; spin++)
                ;
        }
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

struct concurrent_check {
    size_t total;
    size_t checked_upto[WRITERS];
};

static void check_concurrent(const struct mrd_record *r, void *arg)
{
    struct concurrent_check *cc = arg;
    uint32_t w = r->reserved;
    CHECK_LT(w, WRITERS);
    /* A record is drained only after its writer published it, and the writer appended it
     * to accepted[] right after the write returned; compare once the writer is done. */
    uint64_t n = r->ev.kernel.correlation;
    CHECK_EQ(r->ev.kernel.start, (int64_t)(n * 3 + w));
    size_t k = cc->checked_upto[w]++;
    CHECK_LT(k, PER_WRITER);
    /* store the drained order in the upper half of the writer's array for later */
    wm[w].accepted[PER_WRITER + k] = n;
    cc->total++;
}

static void test_concurrent(void)
{
    CHECK_OK(mrd_ring_init(WRITERS, 1024));
    pthread_t th[WRITERS];
    struct concurrent_check cc = {0};
    atomic_store(&writers_done, 0);
    for (uint32_t i = 0; i < WRITERS; i++) {
        wm[i] =
            (struct writer_model){.id = i, .seed = rnd(), .accepted = calloc(2 * PER_WRITER, 8)};
        CHECK(wm[i].accepted != NULL);
        CHECK_OK(pthread_create(&th[i], NULL, writer_main, &wm[i]));
    }
    while (atomic_load(&writers_done) < WRITERS)
        mrd_ring_drain(check_concurrent, &cc, (size_t)(rnd() % 700));
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    mrd_ring_drain(check_concurrent, &cc, SIZE_MAX);

    size_t refused = 0, accepted = 0;
    for (int i = 0; i < WRITERS; i++) {
        struct writer_model *w = &wm[i];
        CHECK_UEQ(w->n_accepted + w->n_refused, PER_WRITER);
        CHECK_UEQ(cc.checked_upto[i], w->n_accepted);
        CHECK(memcmp(w->accepted, w->accepted + PER_WRITER, w->n_accepted * 8) == 0);
        refused += w->n_refused;
        accepted += w->n_accepted;
        free(w->accepted);
    }
    CHECK_UEQ(cc.total, accepted);
    CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), refused);
    CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), 0);
    mrd_ring_shutdown();
}

/* ---- 3. thread slots ---- */

static void *write_one(void *arg)
{
    struct mrd_record r;
    make_record(&r, 0, (uint64_t)(uintptr_t)arg);
    return (void *)(intptr_t)mrd_ring_write(&r);
}

static void count_records(const struct mrd_record *r, void *arg)
{
    (void)r;
    (*(size_t *)arg)++;
}

static void test_slots(void)
{
    CHECK_OK(mrd_ring_init(2, 16));
    /* this thread takes one ring, a helper thread (kept alive) the other */
    struct mrd_record r;
    make_record(&r, 0, 1);
    CHECK_OK(mrd_ring_write(&r));
    CHECK_UEQ(mrd_ring_space(), 15);

    pthread_t t;
    void *res;
    CHECK_OK(pthread_create(&t, NULL, write_one, (void *)2));
    pthread_join(t, &res);
    CHECK_EQ((intptr_t)res, 0);
    /* the helper exited before its record was drained: its ring is an orphan, not free */
    CHECK_OK(pthread_create(&t, NULL, write_one, (void *)3));
    pthread_join(t, &res);
    CHECK_EQ((intptr_t)res, -EAGAIN);
    CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), 1);

    size_t n = 0;
    CHECK_UEQ(mrd_ring_drain(count_records, &n, SIZE_MAX), 2);
    /* drained and orphaned: the ring is free again for a new thread */
    CHECK_OK(pthread_create(&t, NULL, write_one, (void *)4));
    pthread_join(t, &res);
    CHECK_EQ((intptr_t)res, 0);
    n = 0;
    CHECK_UEQ(mrd_ring_drain(count_records, &n, SIZE_MAX), 1);
    mrd_ring_shutdown();
}

/* ---- 6. per-thread capture state ---- */

#define THREADS_STATE 16

static pthread_barrier_t state_barrier;

static int all_bytes(const unsigned char *p, unsigned char v)
{
    for (size_t i = 0; i < MRD_RING_THREAD_STATE_BYTES; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* Fills its state with its own byte, waits for every other thread to do the same, checks
 * nothing else wrote there, and returns the area (or NULL when it got none). */
static void *fill_state(void *arg)
{
    unsigned char mark = (unsigned char)(uintptr_t)arg;
    unsigned char *st = mrd_ring_thread_state();
    if (st != NULL) {
        CHECK(all_bytes(st, 0));
        CHECK_EQ((uintptr_t)st % 64, 0);
        memset(st, mark, MRD_RING_THREAD_STATE_BYTES);
    }
    pthread_barrier_wait(&state_barrier);
    if (st != NULL) {
        CHECK(mrd_ring_thread_state() == st);
        CHECK(all_bytes(st, mark));
    }
    pthread_barrier_wait(&state_barrier);
    return st;
}

static void test_thread_state(void)
{
    CHECK_OK(mrd_ring_init(THREADS_STATE + 1, 16));
    unsigned char *mine = mrd_ring_thread_state();
    CHECK(mine != NULL && all_bytes(mine, 0));
    mine[0] = 42;
    struct mrd_record r;
    make_record(&r, 0, 1);
    CHECK_OK(mrd_ring_write(&r)); /* the ring behind the state is this thread's ring */
    CHECK_UEQ(mrd_ring_space(), 15);
    CHECK(mrd_ring_thread_state() == mine && mine[0] == 42);

    /* THREADS_STATE threads at once: each its own area */
    pthread_t t[THREADS_STATE];
    void *got[THREADS_STATE];
    CHECK_OK(pthread_barrier_init(&state_barrier, NULL, THREADS_STATE));
    for (uintptr_t i = 0; i < THREADS_STATE; i++)
        CHECK_OK(pthread_create(&t[i], NULL, fill_state, (void *)(i + 1)));
    for (int i = 0; i < THREADS_STATE; i++) {
        pthread_join(t[i], &got[i]);
        CHECK(got[i] != NULL && got[i] != (void *)mine);
        for (int j = 0; j < i; j++)
            CHECK(got[j] != got[i]);
    }
    CHECK(mine[0] == 42);

    /* their rings (no records) are orphans; once the consumer has passed, new threads get
     * them back, zeroed: the old owners' bytes are gone */
    size_t n = 0;
    CHECK_UEQ(mrd_ring_drain(count_records, &n, SIZE_MAX), 1);
    CHECK_OK(pthread_barrier_destroy(&state_barrier));
    CHECK_OK(pthread_barrier_init(&state_barrier, NULL, THREADS_STATE));
    for (uintptr_t i = 0; i < THREADS_STATE; i++)
        CHECK_OK(pthread_create(&t[i], NULL, fill_state, (void *)(i + 100)));
    for (int i = 0; i < THREADS_STATE; i++) {
        void *again;
        pthread_join(t[i], &again);
        int reused = 0;
        for (int j = 0; j < THREADS_STATE; j++)
            reused |= again == got[j];
        CHECK(reused); /* fill_state found it zeroed */
    }
    CHECK_OK(pthread_barrier_destroy(&state_barrier));
    mrd_ring_shutdown();

    /* more threads than rings: no state for the one without a ring */
    CHECK_OK(mrd_ring_init(1, 16));
    CHECK(mrd_ring_thread_state() != NULL);
    CHECK_OK(pthread_barrier_init(&state_barrier, NULL, 1));
    void *none = (void *)1;
    CHECK_OK(pthread_create(&t[0], NULL, fill_state, (void *)7));
    pthread_join(t[0], &none);
    CHECK(none == NULL);
    CHECK_OK(pthread_barrier_destroy(&state_barrier));
    mrd_ring_shutdown();
}

/* ---- 4. before init, disabled ---- */

/* ---- 7. mrd_ring_write_in: the write through a state the caller already holds ---- */

struct seen {
    uint64_t ids[64];
    uint32_t writers[64];
    size_t n;
};

static void collect(const struct mrd_record *r, void *arg)
{
    struct seen *s = arg;
    if (s->n < 64) {
        s->ids[s->n] = r->ev.kernel.correlation;
        s->writers[s->n] = r->reserved;
    }
    s->n++;
}

/* A second thread writes 3 records through its own state; returns the state. */
static void *write_in_thread(void *arg)
{
    (void)arg;
    void *st = mrd_ring_thread_state();
    struct mrd_record r;
    for (uint64_t i = 1; i <= 3 && st; i++) {
        make_record(&r, 7, 100 + i);
        CHECK_OK(mrd_ring_write_in(st, &r));
    }
    return st;
}

static void test_write_in(void)
{
    CHECK_OK(mrd_ring_init(2, 16));
    uint64_t noslot0 = ring_drops(MRD_DROP_NO_THREAD_SLOT);
    void *st = mrd_ring_thread_state();
    CHECK(st != NULL);
    struct mrd_record r;
    /* the same ring as mrd_ring_write's: mixed writes arrive in order, the 17th is full */
    for (uint64_t i = 1; i <= 16; i++) {
        make_record(&r, 1, i);
        CHECK_OK(i % 2 ? mrd_ring_write_in(st, &r) : mrd_ring_write(&r));
    }
    make_record(&r, 1, 17);
    CHECK_EQ(mrd_ring_write_in(st, &r), -EAGAIN);
    CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), 1);
    CHECK_UEQ(mrd_ring_space(), 0);
    /* another thread's state is another ring */
    pthread_t t;
    void *other = NULL;
    CHECK_OK(pthread_create(&t, NULL, write_in_thread, NULL));
    CHECK_OK(pthread_join(t, &other));
    CHECK(other != NULL && other != st);
    struct seen s = {.n = 0};
    CHECK_UEQ(mrd_ring_drain(collect, &s, SIZE_MAX), 19);
    uint64_t mine = 0, theirs = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.writers[i] == 1)
            CHECK_UEQ(s.ids[i], ++mine);
        else
            CHECK_UEQ(s.ids[i], 100 + ++theirs);
    }
    CHECK_UEQ(mine, 16);
    CHECK_UEQ(theirs, 3);
    /* no state (a thread without a ring): dropped and counted, as mrd_ring_write would */
    CHECK_EQ(mrd_ring_write_in(NULL, &r), -EAGAIN);
    CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), noslot0 + 1);
    mrd_ring_shutdown();
}

static void test_before_init_and_disable(void)
{
    struct mrd_record r;
    make_record(&r, 0, 1);
    CHECK_EQ(mrd_ring_write(&r), -EAGAIN); /* no rings yet */
    CHECK(mrd_ring_thread_state() == NULL);
    CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), 1);
    CHECK_EQ(mrd_ring_write_in(mrd_ring_thread_state(), &r), -EAGAIN);
    CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), 2);
    CHECK_EQ(mrd_ring_init(3, 100), -EINVAL); /* not a power of two */
    CHECK_EQ(mrd_ring_init(0, 64), -EINVAL);
    CHECK_OK(mrd_ring_init(1, 64));
    CHECK_OK(mrd_ring_write(&r));
    void *st = mrd_ring_thread_state();
    CHECK(st != NULL);
    mrd_ring_disable();
    CHECK_EQ(mrd_ring_write(&r), -EAGAIN);
    CHECK_EQ(mrd_ring_write_in(st, &r), -EAGAIN);
    CHECK_EQ(mrd_ring_write_in(NULL, &r), -EAGAIN);
    size_t got = 7;
    CHECK(mrd_ring_reserve(st, 4, &got) == NULL); /* a disabled ring reserves nothing */
    CHECK_UEQ(got, 0);
    CHECK_UEQ(ring_drops(MRD_DROP_NO_THREAD_SLOT), 2); /* neither was counted */
    CHECK(mrd_ring_thread_state() == NULL);
    CHECK_UEQ(mrd_ring_space(), 0);
    CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), 0);
    size_t n = 0;
    CHECK_UEQ(mrd_ring_drain(count_records, &n, SIZE_MAX), 1);
    mrd_ring_shutdown();
}

/* ---- 5. paced producer ---- */

#define PACE_RECORDS 200000
#define PACE_RING    4096

static int pace_pipe[2];
static _Atomic uint64_t pace_kicks;
static _Atomic int pace_done;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pace_wake(void)
{
    char c = 1;
    atomic_fetch_add(&pace_kicks, 1);
    ssize_t r = write(pace_pipe[1], &c, 1);
    (void)r;
}

struct pace_stats {
    uint64_t written, timeouts;
    int64_t max_wait_ns;
};

static void *paced_writer(void *arg)
{
    struct pace_stats *ps = arg;
    struct mrd_record r;
    for (uint64_t n = 1; n <= PACE_RECORDS; n++) {
        if (mrd_ring_pace(1, 0) == 0) {
            int64_t t0 = mono_ns();
            size_t space = 0;
            while (space == 0 && mono_ns() - t0 < 2000000000) /* early returns: re-wait */
                space = mrd_ring_pace(1, 2000000000 - (mono_ns() - t0));
            int64_t w = mono_ns() - t0;
            if (w > ps->max_wait_ns)
                ps->max_wait_ns = w;
            ps->timeouts += space == 0;
        }
        make_record(&r, 9, n);
        ps->written += mrd_ring_write(&r) == 0;
    }
    atomic_store(&pace_done, 1);
    pace_wake();
    return NULL;
}

static void check_paced(const struct mrd_record *r, void *arg)
{
    uint64_t *next = arg;
    CHECK_UEQ(r->ev.kernel.correlation, *next);
    (*next)++;
}

static void test_paced(void)
{
    CHECK_OK(mrd_ring_init(2, PACE_RING));
    CHECK_OK(pipe(pace_pipe));
    mrd_ring_set_consumer_wake(pace_wake);
    struct pace_stats ps = {0};
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, paced_writer, &ps));
    uint64_t next = 1, passes = 0;
    while (!atomic_load(&pace_done)) {
        struct pollfd p = {.fd = pace_pipe[0], .events = POLLIN};
        char buf[256];
        if (poll(&p, 1, 10000) > 0) {
            ssize_t r = read(pace_pipe[0], buf, sizeof buf);
            (void)r;
        }
        mrd_ring_drain(check_paced, &next, SIZE_MAX);
        passes++;
    }
    pthread_join(t, NULL);
    mrd_ring_drain(check_paced, &next, SIZE_MAX);
    CHECK_UEQ(ps.written, PACE_RECORDS);
    CHECK_UEQ(next - 1, PACE_RECORDS);
    CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), 0);
    CHECK_UEQ(ps.timeouts, 0);
    CHECK_LT(ps.max_wait_ns, 1000000000);
    uint64_t kicks = atomic_load(&pace_kicks);
    CHECK_GT(kicks, 0);
    CHECK_LT(kicks, PACE_RECORDS / 64);
    printf("agent_ring paced: %llu records, %llu wakes, %llu passes, longest wait %.1f ms\n",
           (unsigned long long)PACE_RECORDS, (unsigned long long)kicks, (unsigned long long)passes,
           (double)ps.max_wait_ns / 1e6);

    /* No consumer: the wait ends at its timeout, with the ring still full. */
    struct mrd_record r;
    make_record(&r, 0, 1);
    while (mrd_ring_write(&r) == 0)
        ;
    int64_t t0 = mono_ns();
    CHECK_UEQ(mrd_ring_pace(1, 50000000), 0);
    int64_t took = mono_ns() - t0;
    CHECK_GE(took, 40000000);
    CHECK_LT(took, 1000000000);
    mrd_ring_set_consumer_wake(NULL);
    CHECK_UEQ(mrd_ring_pace(1, 0), 0); /* no consumer registered: no wake, no crash */
    size_t n = 0;
    CHECK_UEQ(mrd_ring_drain(count_records, &n, SIZE_MAX), PACE_RING);
    CHECK_UEQ(mrd_ring_pace(1, 0), PACE_RING);
    close(pace_pipe[0]);
    close(pace_pipe[1]);
    mrd_ring_shutdown();
}

/* ---- 8. in-place writes: mrd_ring_reserve / mrd_ring_commit ---- */

static void test_reserve_differential(void)
{
    for (int round = 0; round < 200; round++) {
        unsigned cap = 2u << (rnd() % 10); /* 2 .. 1024 */
        CHECK_OK(mrd_ring_init(1, cap));
        void *st = mrd_ring_thread_state();
        CHECK(st != NULL);
        struct model m = {.buf = calloc(cap, sizeof(uint64_t)), .cap = cap};
        CHECK(m.buf != NULL);
        uint64_t next = 1, accepted = 0;
        for (int op = 0; op < 400; op++) {
            unsigned what = (unsigned)(rnd() % 4);
            if (what <= 1) {
                size_t want = (size_t)(rnd() % (cap * 2 + 1)), n = 99;
                struct mrd_record *slots = mrd_ring_reserve(st, want, &n);
                size_t room = m.cap - m.len, to_end = m.cap - (size_t)(accepted % m.cap);
                size_t expect = want < room ? want : room;
                expect = expect < to_end ? expect : to_end;
                CHECK_UEQ(n, expect);
                CHECK(n == 0 ? slots == NULL : slots != NULL);
                size_t fill = n ? (size_t)(rnd() % (n + 1)) : 0;
                for (size_t i = 0; i < fill; i++) {
                    make_record(&slots[i], 0, next);
                    model_push(&m, next++);
                }
                /* nothing is visible before the commit */
                CHECK_UEQ(mrd_ring_space(), m.cap - (m.len - fill));
                mrd_ring_commit(st, fill);
                accepted += fill;
                CHECK_UEQ(mrd_ring_space(), m.cap - m.len);
            } else if (what == 2) {
                accepted += (uint64_t)model_write(&m, next++);
            } else {
                size_t max = (size_t)(rnd() % (cap + 3));
                size_t expect = m.len < max ? m.len : max;
                struct drain_check dc = {.m = &m};
                CHECK_UEQ(mrd_ring_drain(check_against_model, &dc, max), expect);
            }
            CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), m.drops);
        }
        struct drain_check dc = {.m = &m};
        mrd_ring_drain(check_against_model, &dc, SIZE_MAX);
        CHECK_UEQ(m.len, 0);
        size_t n = 7;
        CHECK(mrd_ring_reserve(NULL, 4, &n) == NULL);
        CHECK_UEQ(n, 0);
        mrd_ring_commit(NULL, 3); /* nothing */
        free(m.buf);
        mrd_ring_shutdown();
    }
}

#define RESERVE_RECORDS 100000

static _Atomic int reserve_done;

static void *reserving_writer(void *arg)
{
    (void)arg;
    void *st = mrd_ring_thread_state();
    CHECK(st != NULL);
    uint64_t next = 1;
    while (next <= RESERVE_RECORDS) {
        size_t n = 0, want = 1 + (size_t)(next * 7919 % 300);
        struct mrd_record *slots = mrd_ring_reserve(st, want, &n);
        if (n == 0) {
            sched_yield();
            continue;
        }
        size_t k = 0;
        for (; k < n && next <= RESERVE_RECORDS; k++)
            make_record(&slots[k], 3, next++);
        mrd_ring_commit(st, k);
    }
    atomic_store(&reserve_done, 1);
    return NULL;
}

static void check_reserved(const struct mrd_record *r, void *arg)
{
    uint64_t *expect = arg;
    CHECK_UEQ(r->ev.kernel.correlation, *expect);
    CHECK_EQ(r->ev.kernel.start, (int64_t)(*expect * 3 + 3));
    CHECK_UEQ(r->reserved, 3);
    (*expect)++;
}

static void test_reserve_concurrent(void)
{
    CHECK_OK(mrd_ring_init(2, 1024));
    atomic_store(&reserve_done, 0);
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, reserving_writer, NULL));
    uint64_t expect = 1;
    while (!atomic_load(&reserve_done) || expect <= RESERVE_RECORDS) {
        if (mrd_ring_drain(check_reserved, &expect, SIZE_MAX) == 0)
            sched_yield();
    }
    CHECK_OK(pthread_join(t, NULL));
    CHECK_UEQ(expect, RESERVE_RECORDS + 1);
    CHECK_UEQ(ring_drops(MRD_DROP_RING_FULL), 0);
    mrd_ring_shutdown();
}

int main(void)
{
    test_differential();
    test_concurrent();
    test_slots();
    test_paced();
    test_thread_state();
    test_write_in();
    test_reserve_differential();
    test_reserve_concurrent();
    test_before_init_and_disable(); /* last: disabling is permanent */
    return 0;
}
