/* CUDA capture through CUPTI's activity API: the CUDA injection entry point.
 *
 * Where this sits: CUDA_INJECTION64_PATH=/abs/libmeridian.so makes the driver dlopen the
 * agent while CUDA initialises and call InitializeInjection() once, on the initialising
 * thread, before any context exists. That call decides (mrd_agent_start) whether this
 * process is a rank, claims CUPTI, and enables the activity kinds. CUPTI then fills
 * buffers from our pool; completed buffers arrive on CUPTI's worker thread (or the thread
 * running cuptiActivityFlushAll), where cupti_convert.c turns every record into a
 * capture record written to that thread's ring. A small helper thread asks CUPTI to flush
 * every MERIDIAN_CUPTI_FLUSH_MS so records reach the aggregator while the job runs (CUPTI
 * otherwise returns a buffer only when it is full); the exit path (mrd_agent_shutdown,
 * from the MPI_Finalize wrapper or atexit) runs our flush hook for the rest.
 *
 * Set-up order (CAPTURE-FACTS.md): version check, cuptiSubscribe_v2 (fails when another
 * tool owns CUPTI: Nsight, cuda-gdb; we then say so once and stay inert), timestamp
 * callback = mrd_clock_now (before any kind), ZEROED_OUT_ACTIVITY_BUFFER = 1 with a
 * pre-zeroed pool, buffer callbacks, then the kinds: CONCURRENT_KERNEL (never KERNEL),
 * MEMCPY, MEMCPY2, MEMSET, SYNCHRONIZATION, EXTERNAL_CORRELATION, GRAPH_TRACE (unless
 * MERIDIAN_GRAPH_NODES=1 asks for per-node kernels), OVERHEAD, DEVICE, and API records for
 * the whitelist in cupti_convert.c only. A step that fails undoes the earlier ones on one
 * cleanup path (kinds off, cuptiUnsubscribe, pool unmapped): CUPTI is left free for
 * another tool and the 128 MiB pool is not kept for nothing.
 *
 * Workload: up to a few hundred thousand records a second. Caps and policies:
 *  - buffer pool: MERIDIAN_CUPTI_BUFFERS buffers (default 16, at most 64) of
 *    MERIDIAN_CUPTI_BUFFER_MB MiB (default 8), mapped and pre-faulted once. When every
 *    buffer is out, the request callback returns none: CUPTI drops those records and
 *    counts them; we read that count (cuptiActivityGetNumDroppedRecords) after every
 *    buffer and at exit and add it to MRD_DROP_CUPTI_HOST.
 *  - the completion thread writes into its own ring, a whole buffer at once, converting
 *    each record in place into slots reserved a chunk at a time (an 8 MiB
 *    buffer of a launch storm holds ~65,000 kernel + API records; the ring 16,384). It
 *    paces itself every PACE_CHUNK records (mrd_ring_pace): past half full it wakes the
 *    flusher, and when fewer than PACE_CHUNK records are free it sleeps until the flusher
 *    frees some. It keeps waiting as long as the flusher makes progress, up to
 *    PACE_BUFFER_MAX_MS per buffer; PACE_STALL_MS without any progress means the flusher
 *    is gone: the rest is dropped and counted (ring_full) and later buffers of that thread
 *    do not wait until space shows up again. Waiting there only delays buffer reuse (the
 *    pool absorbs it; past the pool CUPTI drops and counts), never an application thread.
 *  - at exit the buffers still open arrive through cuptiActivityFlushAll on the exiting
 *    thread (the flusher still runs then: the flush hooks come before the transport's
 *    exit flush): they are paced the same way, but only until half of
 *    MERIDIAN_FLUSH_DEADLINE_MS has passed (the other half is the transport's), and a
 *    buffer already being paced when the exit begins stops waiting then too. The exit's
 *    overall bound (the deadline plus a small margin) is unchanged.
 *
 * MERIDIAN_CUPTI_ALTERNATE (a diagnostic for issue 9's benchmark, agent/ENVIRONMENT.md):
 * every second window of the steady tier (the 2nd, 4th, ... attach) changes one mechanism
 * to what the bare consumer (tests/gpu/bare_consumer.c) does, so that one process holds
 * windows with and without it: `kinds` (CONCURRENT_KERNEL alone), `subscribe` (no CUPTI
 * subscriber held through the window: dropped after the attach, taken again at its close),
 * `flush` (no periodic flush while attached). Each attach says on stderr which it was
 * ("meridian: attach N alternate WHAT default|changed"; inproc.py reads it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cupti.h>

#include "agent.h"
#include "capture.h"
#include "close_cbids.h"
#include "cupti_convert.h"
#include "ring.h"
#include "window.h"
#include "worker.h"

#define MRD_EXPORT __attribute__((visibility("default")))

#define POOL_MAX           64
#define PACE_CHUNK         256  /* records converted between ring-space checks */
#define PACE_STALL_MS      200  /* no progress for this long: the flusher is gone */
#define PACE_BUFFER_MAX_MS 1000 /* longest one buffer may hold the completion thread */
#define GATE_WAIT_MS       50   /* longest a detach waits for gated CUPTI calls to leave */

/* MERIDIAN_CUPTI_ALTERNATE's mechanisms (the top of this file) */
enum { ALT_NONE, ALT_KINDS, ALT_SUBSCRIBE, ALT_FLUSH };
static const char *const alt_names[] = {"", "kinds", "subscribe", "flush", NULL};

/* Trace kinds (MERIDIAN_TRACE_KINDS). DEVICE and OVERHEAD records are on unless
 * MERIDIAN_CUPTI_SELF_RECORDS=0 (a diagnostic: the bare consumer's kinds exactly). */
enum {
    TK_KERNEL = 1 << 0, /* CONCURRENT_KERNEL (always: a trace without kernels is no trace) */
    TK_GRAPH = 1 << 1,  /* GRAPH_TRACE: one record per graph launch */
    TK_NCCL = 1 << 2,   /* EXTERNAL_CORRELATION + the driver's launch records NCCL links by */
    TK_MEMCPY = 1 << 3, /* MEMCPY, MEMCPY2 */
    TK_MEMSET = 1 << 4,
    TK_SYNC = 1 << 5, /* SYNCHRONIZATION */
    TK_API = 1 << 6,  /* runtime/driver API records of the whole whitelist */
    TK_DEFAULT = TK_KERNEL | TK_GRAPH | TK_NCCL,
    TK_ALL = 0x7f,
};
static const struct {
    const char *name;
    unsigned bit;
} trace_kinds[] = {
    {"kernel", TK_KERNEL}, {"graph", TK_GRAPH}, {"nccl", TK_NCCL}, {"memcpy", TK_MEMCPY},
    {"memset", TK_MEMSET}, {"sync", TK_SYNC},   {"api", TK_API},   {"all", TK_ALL},
};

MRD_EXPORT int InitializeInjection(void);

/* Weak: the newest CUPTI entry we use. A libcupti.so.13 without it must not keep the agent
 * from loading (NCCL loads it with RTLD_NOW); we then subscribe the old way. */
#pragma weak cuptiSubscribe_v2

static struct {
    _Atomic int called, owned, exiting, ready;
    _Atomic int64_t exit_until; /* CLOCK_MONOTONIC ns: no pacing wait past this at exit */
    uint8_t *pool;
    size_t buf_bytes;
    unsigned nbufs;
    _Atomic uint8_t busy[POOL_MAX];
    _Atomic uint64_t pool_misses, buffers;
    _Atomic uint64_t pace_waits, pace_wait_ns; /* chunks that waited for ring space; time */
    unsigned flush_ms, opt_nbufs;
    int no_pace;            /* MERIDIAN_CUPTI_PACE=0; zero (pacing on) until read_options runs */
    int no_self;            /* MERIDIAN_CUPTI_SELF_RECORDS=0: no OVERHEAD and DEVICE records */
    _Atomic int self_named; /* no_self: the attaching device was named by the driver */
    size_t opt_buf_bytes;
    int print_kinds;
    unsigned kinds;          /* TK_* of MERIDIAN_TRACE_KINDS */
    int alt;                 /* ALT_* of MERIDIAN_CUPTI_ALTERNATE */
    int close_domains;       /* MERIDIAN_CUPTI_CLOSE=domains: a close enables whole domains */
    _Atomic int alt_changed; /* the current (or last) attach is a changed one */
    int steady;              /* steady tier: CUPTI attached only inside windows (window.h) */
    /* The gate: a CUPTI call that may race a detach (external correlation, flushes, device
     * queries) enters only while `attached` is set, counted in `users`; the detach clears
     * `attached` first and then waits for `users` to drain (both sequentially consistent,
     * so one of the two sees the other). */
    _Atomic int attached, users;
    _Atomic uint64_t gen; /* attach generation, 1 for the first */
    CUpti_SubscriberHandle sub;
    /* window close and detach (window.h): boundary = correlation id of the first CUDA API
     * entry after the close; detach_req 1 = flush asked, 2 = flushed, waiting for an API
     * exit; teardown 1 = the next API exit callback finalizes, 2 = one is doing it */
    _Atomic int closing, detach_req, teardown;
    _Atomic int nccl_link; /* a communicator of >= 2 ranks exists (mrd__cupti_nccl_comm) */
    _Atomic uint32_t boundary;
    _Atomic int64_t flush_ns;
    pthread_t flusher;
    int flusher_started;
    pthread_mutex_t lock; /* only the helper thread's sleep; never taken by callbacks */
    pthread_cond_t wake;
    int stop;
} cu = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static const char *cupti_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        return "unknown CUPTI error";
    return s;
}

/* One decimal option (mrd__capture_env_uint): a bad value turns CUDA capture off. */
static int env_uint(const char *name, unsigned dflt, unsigned lo, unsigned hi, unsigned *out)
{
    return mrd__capture_env_uint(name, dflt, lo, hi, "CUDA capture stays off", out);
}

/* MERIDIAN_TRACE_KINDS: names of trace_kinds[] separated by ','; unset or "" is the
 * default (kernel,graph,nccl). kernel is always on. Returns 0 or -EINVAL (said once). */
static int parse_kinds(const char *s, unsigned *out)
{
    *out = TK_DEFAULT;
    if (!s || !*s)
        return 0;
    *out = TK_KERNEL;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t i, n = sizeof(trace_kinds) / sizeof(trace_kinds[0]);
        for (i = 0; i < n; i++)
            if (strlen(trace_kinds[i].name) == len && strncmp(p, trace_kinds[i].name, len) == 0)
                break;
        if (i == n) {
            fprintf(stderr,
                    "meridian: MERIDIAN_TRACE_KINDS=%s: '%.*s' is not one of kernel, graph, "
                    "nccl, memcpy, memset, sync, api, all; CUDA capture stays off\n",
                    s, (int)len, p);
            return -EINVAL;
        }
        *out |= trace_kinds[i].bit;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* One option naming one of `choices` (mrd__capture_env_choice): a bad value turns CUDA
 * capture off. *out = the index, -1 when unset or empty. */
static int env_choice(const char *name, const char *const *choices, int *out)
{
    return mrd__capture_env_choice(name, choices, "CUDA capture stays off", out);
}

/* This attach's kinds and whether it leaves CUPTI's own records out: the options, except in
 * MERIDIAN_CUPTI_ALTERNATE=kinds's changed windows (kernel records alone). */
static unsigned attach_kinds(void)
{
    return cu.alt == ALT_KINDS && atomic_load(&cu.alt_changed) ? TK_KERNEL : cu.kinds;
}

static int attach_no_self(void)
{
    return cu.no_self || (cu.alt == ALT_KINDS && atomic_load(&cu.alt_changed));
}

/* Whether a window traced with `kinds` closes with callbacks chosen by name (close_cbids.h)
 * rather than the two whole API domains: not with MERIDIAN_CUPTI_CLOSE=domains, nor when
 * sync or api records are traced (they come from calls of every sort). */
static int close_by_name(unsigned kinds)
{
    return !cu.close_domains && !(kinds & (TK_SYNC | TK_API));
}

/* The capture options (read once, here; documented in agent/ENVIRONMENT.md and
 * agent/capture/README.md). */
static int read_options(void)
{
    static const char *const api_names[] = {"all", "nccl", NULL};
    static const char *const close_names[] = {"launches", "domains", NULL};
    unsigned mb, pace, self;
    int api, close, alt;
    if (env_uint("MERIDIAN_CUPTI_BUFFER_MB", 8, 1, 64, &mb) ||
        env_uint("MERIDIAN_CUPTI_BUFFERS", 16, 2, POOL_MAX, &cu.opt_nbufs) ||
        env_uint("MERIDIAN_CUPTI_FLUSH_MS", 500, 0, 60000, &cu.flush_ms) ||
        env_uint("MERIDIAN_CUPTI_PACE", 1, 0, 1, &pace) ||
        env_uint("MERIDIAN_CUPTI_SELF_RECORDS", 1, 0, 1, &self))
        return -EINVAL;
    cu.no_pace = pace == 0;
    cu.no_self = self == 0;
    cu.opt_buf_bytes = (size_t)mb << 20;
    if (env_choice("MERIDIAN_CUPTI_API", api_names, &api) ||
        parse_kinds(getenv("MERIDIAN_TRACE_KINDS"), &cu.kinds))
        return -EINVAL;
    if (api == 0)
        cu.kinds |= TK_API; /* the older switch, `all`: the whole whitelist */
    const char *print = getenv("MERIDIAN_PRINT_KINDS");
    cu.print_kinds = print && strcmp(print, "1") == 0;
    if (env_choice("MERIDIAN_CUPTI_CLOSE", close_names, &close))
        return -EINVAL;
    cu.close_domains = close == 1;
    /* alt_names[ALT_NONE] is skipped: the choices are alt_names from ALT_KINDS on */
    int bad = env_choice("MERIDIAN_CUPTI_ALTERNATE", alt_names + ALT_KINDS, &alt);
    cu.alt = alt < 0 ? ALT_NONE : ALT_KINDS + alt;
    return bad ? -EINVAL : 0;
}

static uint64_t CUPTIAPI timestamp_cb(void)
{
    return (uint64_t)mrd_clock_now();
}

static int driver_current_device(void);

static int gate_enter(void)
{
    atomic_fetch_add(&cu.users, 1);
    if (atomic_load(&cu.attached))
        return 1;
    atomic_fetch_sub(&cu.users, 1);
    return 0;
}

static void gate_leave(void)
{
    atomic_fetch_sub(&cu.users, 1);
}

/* The dynamic detach, inside a CUDA API exit callback (CUPTI's documented way): closes the
 * gate, waits (at most GATE_WAIT_MS) for gated calls on other threads to leave, then
 * unsubscribes and finalizes. If a gated call is still inside, the gate reopens and a
 * later API exit tries again. */
static void finalize_in_callback(void)
{
    atomic_store(&cu.attached, 0);
    int64_t until = mrd__mono_ns() + (int64_t)GATE_WAIT_MS * 1000000;
    while (atomic_load(&cu.users) != 0) {
        if (mrd__mono_ns() > until) {
            atomic_store(&cu.attached, 1);
            atomic_store(&cu.teardown, 1);
            return;
        }
        sched_yield();
    }
    int64_t t0 = mrd_clock_now();
    cuptiUnsubscribe(cu.sub);
    cuptiFinalize();
    int64_t t1 = mrd_clock_now();
    cu.sub = NULL;
    atomic_store(&cu.owned, 0);
    atomic_store(&cu.closing, 0);
    atomic_store(&cu.detach_req, 0);
    atomic_store(&cu.teardown, 0);
    mrd__gpu_sample_tracing(0);
    mrd__window_detached(t1, t1 - t0, atomic_load(&cu.flush_ns));
}

/* Enabled only while a window closes (mrd__cupti_close): the first API entry sets the
 * boundary; an API exit after the forced flush finalizes. */
static void CUPTIAPI subscriber_cb(void *userdata, CUpti_CallbackDomain domain,
                                   CUpti_CallbackId cbid, const void *data)
{
    (void)userdata, (void)cbid;
    if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) || !data)
        return;
    const CUpti_CallbackData *cb = data;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        if (atomic_load_explicit(&cu.closing, memory_order_relaxed) &&
            atomic_load_explicit(&cu.boundary, memory_order_relaxed) == 0) {
            uint32_t expect = 0;
            atomic_compare_exchange_strong(&cu.boundary, &expect,
                                           cb->correlationId ? cb->correlationId : 1);
        }
        return;
    }
    int one = 1;
    if (atomic_load_explicit(&cu.teardown, memory_order_relaxed) == 1 &&
        atomic_compare_exchange_strong(&cu.teardown, &one, 2))
        finalize_in_callback();
}

static void count_host_drops(CUcontext ctx, uint32_t stream)
{
    size_t n = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &n) == CUPTI_SUCCESS && n > 0)
        mrd_agent_count_drop(MRD_DROP_CUPTI_HOST, n);
}

/* Request callback: may run on application threads, so it only claims a free slot. */
void CUPTIAPI mrd__cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    for (unsigned i = 0; i < cu.nbufs; i++) {
        uint8_t expect = 0;
        if (atomic_compare_exchange_strong(&cu.busy[i], &expect, 1)) {
            *buffer = cu.pool + (size_t)i * cu.buf_bytes;
            *size = cu.buf_bytes;
            return;
        }
    }
    atomic_fetch_add_explicit(&cu.pool_misses, 1, memory_order_relaxed);
    *buffer = NULL;
    *size = 0;
}

/* Before each chunk of records: waits (bounded, see the top of this file) until this
 * thread's ring (t: its capture state) can take the chunk. limit_ns: when this buffer
 * stops waiting (earlier once the exit flush has begun). A completion thread whose last
 * wait saw no progress for PACE_STALL_MS (the flusher is gone) stops waiting until it
 * sees space again, so a dead consumer costs one wait, not one per buffer: the flag is
 * its capture state's cupti_pace_stalled (capture.h says why not a __thread variable).
 * A thread without capture state has no ring: it never waits. */
static void pace(struct mrd__capture_thread *t, int64_t limit_ns)
{
    if (cu.no_pace)
        return; /* MERIDIAN_CUPTI_PACE=0: never wait; what does not fit is ring_full */
    if (atomic_load_explicit(&cu.exiting, memory_order_acquire)) {
        int64_t until = atomic_load(&cu.exit_until);
        if (until < limit_ns)
            limit_ns = until;
    }
    if (t == NULL)
        return; /* no ring (none free, fork child): its records are dropped, not waited for */
    int *stalled = &t->cupti_pace_stalled;
    size_t space = mrd_ring_pace(PACE_CHUNK, 0);
    if (space >= PACE_CHUNK) {
        *stalled = 0;
        return;
    }
    if (*stalled)
        return;
    int64_t now = mrd__mono_ns(), start = now, progress_ns = now;
    int64_t stall = (int64_t)PACE_STALL_MS * 1000000;
    int waited = 0; /* counted only when it did wait: a buffer past its limit does not */
    while (space < PACE_CHUNK) {
        if (now >= limit_ns)
            break; /* this buffer's time is up: the rest that does not fit is dropped */
        if (now - progress_ns >= stall) {
            *stalled = 1;
            break;
        }
        int64_t until = progress_ns + stall < limit_ns ? progress_ns + stall : limit_ns;
        size_t before = space;
        waited = 1;
        space = mrd_ring_pace(PACE_CHUNK, until - now);
        if (space <= before) { /* timed out, woken early, or no ring at all: never spin */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        now = mrd__mono_ns();
        if (space > before)
            progress_ns = now;
    }
    if (waited) {
        atomic_fetch_add_explicit(&cu.pace_waits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&cu.pace_wait_ns, (uint64_t)(now - start), memory_order_relaxed);
    }
}

/* The correlation id of a record tied to an API call (0 for the others). */
static uint32_t record_correlation(const CUpti_Activity *rec)
{
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
        return ((const CUpti_ActivityKernel10 *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return ((const CUpti_ActivityMemcpy6 *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
        return ((const CUpti_ActivityMemcpyPtoP4 *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return ((const CUpti_ActivityMemset4 *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return ((const CUpti_ActivitySynchronization2 *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return ((const CUpti_ActivityAPI *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
        return ((const CUpti_ActivityGraphTrace2 *)rec)->correlationId;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        return ((const CUpti_ActivityExternalCorrelation *)rec)->correlationId;
    default:
        return 0;
    }
}

/* Records are converted straight into ring slots reserved a chunk at a time
 * (mrd_ring_reserve) and published once per chunk (mrd_ring_commit): per record there is
 * no ring lookup, no copy of the record and no release store. A record that finds no slot
 * (ring full, or this thread has no ring) goes through mrd__cupti_emit, which drops and
 * counts it as mrd_ring_write does; the chunk reserved so far is committed first, so the
 * ring keeps the buffer's order. */
size_t mrd__cupti_process_buffer(uint8_t *buffer, size_t valid)
{
    CUpti_Activity *rec = NULL;
    size_t n = 0, written = 0, used = 0, room = 0;
    struct mrd_record *slots = NULL;
    uint64_t outside = 0;
    int64_t limit = mrd__mono_ns() + (int64_t)PACE_BUFFER_MAX_MS * 1000000;
    struct mrd__capture_thread *t = valid > 0 ? mrd__capture_thread() : NULL;

    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (n++ % PACE_CHUNK == 0) {
            mrd_ring_commit(t, used);
            used = room = 0;
            pace(t, limit);
        }
        /* a closing window: launches from its boundary on belong to later steps */
        uint32_t b = atomic_load_explicit(&cu.boundary, memory_order_relaxed);
        if (b != 0) {
            uint32_t c = record_correlation(rec);
            if (c >= b) {
                outside++;
                continue;
            }
        }
        if (used == room) {
            mrd_ring_commit(t, used);
            used = 0;
            slots = mrd_ring_reserve(t, PACE_CHUNK, &room);
            if (room == 0) {
                written += (size_t)mrd__cupti_emit(rec);
                continue;
            }
        }
        if (mrd__cupti_convert(rec, &slots[used])) {
            used++;
            written++;
        }
    }
    mrd_ring_commit(t, used);
    if (outside)
        mrd__window_count_outside(outside);
    return written;
}

void CUPTIAPI mrd__cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                          size_t size, size_t valid)
{
    atomic_fetch_add_explicit(&cu.buffers, 1, memory_order_relaxed);
    if (buffer)
        mrd__cupti_process_buffer(buffer, valid);
    count_host_drops(ctx, stream);
    if (buffer < cu.pool || buffer >= cu.pool + (size_t)cu.nbufs * cu.buf_bytes)
        return; /* not ours (cannot happen: CUPTI only has our buffers) */
    /* Re-zero what CUPTI wrote (plus slack for a partly written record) before reuse. */
    size_t dirty = ((valid + 4095) & ~(size_t)4095) + 65536;
    memset(buffer, 0, dirty < size ? dirty : size);
    size_t i = (size_t)(buffer - cu.pool) / cu.buf_bytes;
    atomic_store(&cu.busy[i], 0);
}

/* The helper thread: every MERIDIAN_CUPTI_FLUSH_MS asks CUPTI to flush completed
 * buffers (while attached), and does the first half of a window's detach: the forced
 * flush, after which the next API exit callback finalizes (teardown). While a detach is
 * pending it leaves CUPTI alone. */
static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cu.lock);
    while (!cu.stop) {
        if (cu.flush_ms == 0 && atomic_load(&cu.detach_req) != 1) {
            pthread_cond_wait(&cu.wake, &cu.lock);
        } else {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += cu.flush_ms / 1000;
            until.tv_nsec += (long)(cu.flush_ms % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            if (atomic_load(&cu.detach_req) != 1)
                pthread_cond_timedwait(&cu.wake, &cu.lock, &until);
        }
        if (cu.stop)
            break;
        pthread_mutex_unlock(&cu.lock);
        int req = atomic_load(&cu.detach_req);
        if (req == 1 && gate_enter()) {
            int64_t t0 = mrd__mono_ns();
            cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            atomic_store(&cu.flush_ns, mrd__mono_ns() - t0);
            gate_leave();
            atomic_store(&cu.detach_req, 2);
            atomic_store(&cu.teardown, 1);
        } else if (req == 0 && cu.flush_ms && gate_enter()) {
            /* inside the gate alt_changed is this attach's (set before the gate opened) */
            if (!(cu.alt == ALT_FLUSH && atomic_load(&cu.alt_changed)))
                cuptiActivityFlushAll(0);
            gate_leave();
        }
        pthread_mutex_lock(&cu.lock);
    }
    pthread_mutex_unlock(&cu.lock);
    return NULL;
}

/* Exit hook (mrd_agent_shutdown): deliver everything CUPTI still holds. */
void mrd__cupti_exit_begin(void)
{
    const struct mrd_agent_config *c = mrd_agent_config();
    int64_t half = c ? (int64_t)c->flush_deadline_ms * 1000000 / 2 : 0;
    atomic_store(&cu.exit_until, mrd__mono_ns() + half);
    atomic_store(&cu.exiting, 1);
}

static void cupti_flush_hook(void)
{
    pthread_mutex_lock(&cu.lock);
    cu.stop = 1;
    pthread_cond_signal(&cu.wake);
    pthread_mutex_unlock(&cu.lock);
    if (!gate_enter())
        return; /* detached (steady tier between windows): CUPTI holds nothing */
    mrd__cupti_exit_begin();
    cuptiActivityFlushAll(0);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    count_host_drops(NULL, 0);
    gate_leave();
}

static void start_flusher(void)
{
    if (cu.flush_ms == 0 && !cu.steady)
        return;
    if (mrd_worker_start(&cu.flusher, "meridian-cupti", flusher_main, NULL) == 0) {
        cu.flusher_started = 1;
        pthread_detach(cu.flusher);
    }
}

int mrd__cupti_pool_create(size_t buf_bytes, unsigned nbufs)
{
    if (cu.pool || buf_bytes == 0 || buf_bytes % 8 || nbufs < 1 || nbufs > POOL_MAX)
        return -EINVAL;
    cu.buf_bytes = buf_bytes;
    cu.nbufs = nbufs;
    size_t total = cu.buf_bytes * cu.nbufs;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return -errno;
    memset(mem, 0, total); /* pre-fault now, not on an application thread later */
    cu.pool = mem;
    return 0;
}

/* Claims CUPTI: 0 with *sub our subscriber (the caller unsubscribes it if set-up fails
 * later), or 1 when another tool owns CUPTI or this CUPTI is not the one we were built
 * for (said once on stderr; no subscriber then). */
static int claim_cupti(CUpti_SubscriberHandle *sub)
{
    uint32_t version = 0;
    if (getenv("NSYS_PROFILING_SESSION_ID")) {
        fprintf(stderr, "meridian: Nsight Systems is profiling this process "
                        "(NSYS_PROFILING_SESSION_ID); meridian's CUDA capture stays off\n");
        return 1;
    }
    /* The soname (libcupti.so.13) already pins the major version; 0 means "not known yet"
     * (seen without a driver), not a mismatch. */
    if (cuptiGetVersion(&version) == CUPTI_SUCCESS && version != 0 &&
        version / 10000 != CUPTI_API_VERSION / 10000) {
        fprintf(stderr, "meridian: CUPTI API version %u, built for %u; CUDA capture stays off\n",
                version, (unsigned)CUPTI_API_VERSION);
        return 1;
    }
    char owner[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
    CUpti_SubscriberParams p = {0};
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "meridian";
    p.oldSubscriberName = owner;
    p.oldSubscriberSize = sizeof(owner) - 1;
    CUptiResult r = cuptiSubscribe_v2 ? cuptiSubscribe_v2(sub, subscriber_cb, NULL, &p)
                                      : cuptiSubscribe(sub, subscriber_cb, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        fprintf(stderr,
                "meridian: CUPTI is already in use by %s; meridian's CUDA capture "
                "stays off\n",
                owner[0] ? owner : "another profiler");
        return 1;
    }
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "meridian: cuptiSubscribe: %s; CUDA capture stays off\n", cupti_err(r));
        return 1;
    }
    return 0;
}

static void append(char *dst, size_t n, const char *name)
{
    size_t len = strlen(dst);
    snprintf(dst + len, n - len, "%s%s", len ? "," : "", name);
}

static void enable(CUpti_ActivityKind kind, const char *name, char *ok, char *bad, size_t n)
{
    CUptiResult r = cuptiActivityEnable(kind);
    append(r == CUPTI_SUCCESS ? ok : bad, n, name);
}

/* API records for the whitelist; "nccl" keeps only the launch calls NCCL's external
 * correlation needs. Returns the counts enabled per domain. */
static void enable_api(int nccl_only, unsigned *rt, unsigned *drv)
{
    *rt = *drv = 0;
    for (size_t i = 0; i < mrd__cupti_api_count; i++) {
        const struct mrd_cupti_api *a = &mrd__cupti_api_list[i];
        if (nccl_only &&
            !(a->domain == MRD_API_DRIVER && strncmp(a->name, "cuLaunchKernel", 14) == 0))
            continue;
        if (a->domain == MRD_API_RUNTIME) {
            if (cuptiActivityEnableRuntimeApi(a->cbid, 1) == CUPTI_SUCCESS)
                (*rt)++;
        } else if (cuptiActivityEnableDriverApi(a->cbid, 1) == CUPTI_SUCCESS) {
            (*drv)++;
        }
    }
}

static int enable_kinds(const struct mrd_agent_config *cfg)
{
    char ok[512] = "", bad[512] = "";
    unsigned rt, drv;
    unsigned kinds = attach_kinds();

    enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", ok, bad, sizeof(ok));
    if (strstr(bad, "CONCURRENT_KERNEL")) {
        fprintf(stderr, "meridian: cannot enable CUPTI kernel records; CUDA capture stays off\n");
        return -EIO;
    }
    if (kinds & TK_MEMCPY) {
        enable(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", ok, bad, sizeof(ok));
        enable(CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", ok, bad, sizeof(ok));
    }
    if (kinds & TK_MEMSET)
        enable(CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", ok, bad, sizeof(ok));
    if (kinds & TK_SYNC)
        enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION", ok, bad, sizeof(ok));
    if ((kinds & TK_GRAPH) && !cfg->graph_nodes)
        enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "GRAPH_TRACE", ok, bad, sizeof(ok));
    /* NCCL's link costs one API record per launch: only once a communicator needs it */
    int link = (kinds & TK_API) || ((kinds & TK_NCCL) && atomic_load(&cu.nccl_link));
    if (link)
        enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", ok, bad,
               sizeof(ok));
    rt = drv = 0;
    if (link)
        enable_api(!(kinds & TK_API), &rt, &drv);
    if (rt)
        append(ok, sizeof(ok), "RUNTIME");
    if (drv)
        append(ok, sizeof(ok), "DRIVER");
    if (!attach_no_self()) { /* CUPTI's own cost; the GPUs (else: the attach) */
        enable(CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD", ok, bad, sizeof(ok));
        enable(CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", ok, bad, sizeof(ok));
    }
    if (bad[0])
        fprintf(stderr, "meridian: CUPTI kinds that could not be enabled: %s\n", bad);
    if (cu.print_kinds) {
        fprintf(stderr, "meridian: kinds=%s\n", ok);
        fprintf(stderr,
                "meridian: config buffer_bytes=%zu pool=%u flush_ms=%u pace=%u "
                "runtime_cbids=%u driver_cbids=%u zeroed_out=1 timestamp=agent tier=%s\n",
                cu.buf_bytes, cu.nbufs, cu.flush_ms, !cu.no_pace, rt, drv,
                cu.steady ? "steady" : "full");
    }
    return 0;
}

void mrd__cupti_pool_destroy(void)
{
    if (cu.pool)
        munmap(cu.pool, cu.buf_bytes * cu.nbufs);
    cu.pool = NULL;
    cu.nbufs = 0; /* the request callback hands out nothing from now on */
    cu.buf_bytes = 0;
    for (unsigned i = 0; i < POOL_MAX; i++) /* a new pool starts with every buffer free */
        atomic_store(&cu.busy[i], 0);
}

/* After claim_cupti: the timestamp callback, pre-zeroed buffers, the buffer callbacks and
 * the kinds. Returns 0 or a negative code (said once on stderr); the caller undoes. */
static int configure(void)
{
    uint8_t one = 1;
    size_t sz = sizeof(one);
    CUptiResult r = cuptiActivityRegisterTimestampCallback(timestamp_cb);
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "meridian: CUPTI timestamp callback: %s; CUDA capture stays off\n",
                cupti_err(r));
        return -EIO;
    }
    r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
    if (r != CUPTI_SUCCESS)
        fprintf(stderr, "meridian: CUPTI zeroed-buffer attribute: %s\n", cupti_err(r));
    r = cuptiActivityRegisterCallbacks(mrd__cupti_buffer_requested, mrd__cupti_buffer_completed);
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "meridian: CUPTI buffer callbacks: %s; CUDA capture stays off\n",
                cupti_err(r));
        return -EIO;
    }
    return enable_kinds(mrd_agent_config());
}

/* The gate opens on a new attach generation with subscriber sub. */
static void open_gate(CUpti_SubscriberHandle sub)
{
    cu.sub = sub;
    atomic_store(&cu.boundary, 0);
    atomic_store(&cu.closing, 0);
    atomic_fetch_add(&cu.gen, 1);
    atomic_store(&cu.owned, 1);
    atomic_store(&cu.attached, 1);
    mrd__gpu_sample_tracing(1); /* the NVML sampler's traced rate from now on */
}

int mrd__cupti_setup(void)
{
    CUpti_SubscriberHandle sub = NULL;
    int e;

    if (read_options())
        return -EINVAL;
    if (cu.alt != ALT_NONE)
        fprintf(stderr, "meridian: MERIDIAN_CUPTI_ALTERNATE alternates the steady tier's "
                        "windows; the full tier has none: ignored\n");
    if (claim_cupti(&sub))
        return -EBUSY; /* nothing claimed, nothing to undo */
    e = mrd__cupti_pool_create(cu.opt_buf_bytes, cu.opt_nbufs);
    if (e != 0) {
        fprintf(stderr, "meridian: cannot map CUPTI buffers; CUDA capture stays off\n");
        goto fail;
    }
    e = configure();
    if (e != 0)
        goto fail;
    open_gate(sub);
    return 0;

fail:
    /* Leave CUPTI as we found it: our subscriber gone (another tool, or a later
     * InitializeInjection of someone else, may take it), the pool unmapped. No kind is on:
     * every failure comes before enable_kinds turns one on, and enable_kinds fails only
     * on its first kind. The buffer callbacks cannot be unregistered; with no pool they
     * hand out nothing. */
    cuptiUnsubscribe(sub);
    mrd__cupti_pool_destroy();
    return e;
}

/* CUPTI's own counters for the Goodbye (category "cupti"; agent.h): its OVERHEAD records
 * and the time they report, records of kinds this agent does not convert, requests the
 * pool could not serve, and the completion threads' waits for ring space (pace: chunks
 * that waited, and how long in all). */
static size_t cupti_counters(struct mrd_named_counter *out, size_t max)
{
    uint64_t n = 0, ns = 0, unknown = 0;
    mrd__cupti_convert_stats(&n, &ns, &unknown);
    const struct mrd_named_counter c[] = {
        {"cupti", "overhead_records", n},
        {"cupti", "overhead_ns", ns},
        {"cupti", "unknown_records", unknown},
        {"cupti", "pool_misses", mrd__cupti_pool_misses()},
        {"cupti", "pace_waits", atomic_load_explicit(&cu.pace_waits, memory_order_relaxed)},
        {"cupti", "pace_wait_ns", atomic_load_explicit(&cu.pace_wait_ns, memory_order_relaxed)},
    };
    size_t skip = cu.no_self ? 2 : 0; /* no OVERHEAD records asked for: no figure, not a 0 */
    return mrd_agent_put_counters(out, max, c + skip, sizeof(c) / sizeof(c[0]) - skip);
}

void mrd__cupti_register_counters(void)
{
    static atomic_int done;
    if (!atomic_exchange(&done, 1))
        mrd_agent_add_counter_source(cupti_counters);
}

/* Steady tier's start (InitializeInjection): the options and the pool, CUPTI left
 * untouched (detached: no subscriber, no kind). Nsight is detected here already. */
static int steady_setup(void)
{
    if (read_options())
        return -EINVAL;
    if (getenv("NSYS_PROFILING_SESSION_ID")) {
        fprintf(stderr, "meridian: Nsight Systems is profiling this process "
                        "(NSYS_PROFILING_SESSION_ID); meridian's CUDA capture stays off\n");
        return -EBUSY;
    }
    if (mrd__cupti_pool_create(cu.opt_buf_bytes, cu.opt_nbufs) != 0) {
        fprintf(stderr, "meridian: cannot map CUPTI buffers; CUDA capture stays off\n");
        return -ENOMEM;
    }
    return 0;
}

/* MERIDIAN_CUPTI_ALTERNATE, before an attach's configure(): whether this attach is a
 * changed one (every second; attach_kinds() follows it), and the stderr line inproc.py
 * reads. */
static int alternate_begin(void)
{
    if (cu.alt == ALT_NONE)
        return 0;
    uint64_t n = atomic_load(&cu.gen) + 1; /* open_gate makes it this attach's generation */
    int changed = n % 2 == 0;
    atomic_store(&cu.alt_changed, changed);
    fprintf(stderr, "meridian: attach %llu alternate %s %s\n", (unsigned long long)n,
            alt_names[cu.alt], changed ? "changed" : "default");
    return changed;
}

int mrd__cupti_attach(void)
{
    CUpti_SubscriberHandle sub = NULL;
    if (!cu.steady || !atomic_load(&cu.ready))
        return -EAGAIN;
    if (claim_cupti(&sub))
        return -EBUSY;
    for (unsigned i = 0; i < POOL_MAX; i++) /* the last detach delivered every buffer */
        atomic_store(&cu.busy[i], 0);
    int changed = alternate_begin();
    int e = configure();
    if (e != 0) {
        cuptiUnsubscribe(sub);
        cuptiFinalize();
        return e;
    }
    if (cu.no_self && !atomic_exchange(&cu.self_named, 1)) {
        /* no DEVICE record will name the GPU (nor start the NVML sampler): the driver does */
        int dev = driver_current_device();
        if (dev >= 0)
            mrd__gpu_from_driver((uint32_t)dev);
    }
    open_gate(sub);
    if (close_by_name(attach_kinds()))
        mrd__close_cbids_prepare(cu.print_kinds); /* once: the callbacks the close enables */
    if (changed && cu.alt == ALT_SUBSCRIBE) { /* held by nobody until the close */
        cuptiUnsubscribe(sub);
        cu.sub = NULL;
    }
    return 0;
}

/* The callbacks a close needs (close_cbids.h): the launches, and the copies and sets when
 * those kinds are traced; -1 for the whole runtime and driver domains instead, which
 * MERIDIAN_CUPTI_CLOSE=domains asks for, and the sync and api kinds need (their records
 * come from calls of every sort), and which stand in when no launch callback was found. */
static int close_callbacks(void)
{
    unsigned k = attach_kinds();
    if (!close_by_name(k))
        return -1;
    unsigned classes = MRD_CLOSE_LAUNCH | (k & TK_MEMCPY ? MRD_CLOSE_MEMCPY : 0) |
                       (k & TK_MEMSET ? MRD_CLOSE_MEMSET : 0);
    return mrd__close_enable_cbids(cu.sub, classes);
}

/* The callbacks stay on from here to the finalize, although only the first API entry (the
 * boundary) and one API exit after the forced flush are needed: runs 36 and 37 (session
 * 10, tests/bench/overhead/RESULTS-tiers.md) turned them off once the boundary was set and
 * on again for the finalize, from the boundary's own callback and then from the helper
 * thread; both crashed multi-threaded PyTorch jobs (SIGSEGV; "corrupted double-linked
 * list") in 5 of 5 and 2 of 6 runs, while this way has never crashed. Toggling callback
 * domains while other threads are inside CUDA calls is not safe with CUPTI 13.0. */
int mrd__cupti_close(void)
{
    if (!gate_enter())
        return 0;
    if (!cu.sub) { /* MERIDIAN_CUPTI_ALTERNATE=subscribe's changed window: as the bare consumer */
        CUpti_SubscriberHandle sub = NULL;
        CUptiResult r = cuptiSubscribe(&sub, subscriber_cb, NULL);
        if (r != CUPTI_SUCCESS) {
            fprintf(stderr,
                    "meridian: MERIDIAN_CUPTI_ALTERNATE=subscribe: cuptiSubscribe at "
                    "the window's close: %s; CUPTI stays attached\n",
                    cupti_err(r));
            gate_leave();
            return 0;
        }
        cu.sub = sub;
    }
    atomic_store(&cu.boundary, 0);
    atomic_store(&cu.closing, 1);
    if (close_callbacks() < 0) {
        cuptiEnableDomain(1, cu.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
        cuptiEnableDomain(1, cu.sub, CUPTI_CB_DOMAIN_DRIVER_API);
    }
    gate_leave();
    return 1;
}

void mrd__cupti_detach_request(void)
{
    pthread_mutex_lock(&cu.lock);
    atomic_store(&cu.detach_req, 1);
    pthread_cond_signal(&cu.wake);
    pthread_mutex_unlock(&cu.lock);
}

/* The CUDA driver's injection entry: called once, on the thread initialising CUDA,
 * before any context exists. Decides whether this process is a rank, then, in the full
 * tier, claims CUPTI and enables the activity kinds (see the top of this file); in the
 * steady tier only prepares the pool and the helper thread: windows attach later
 * (window.h). Always returns 1 (0 would make CUDA report a failed injection to the
 * application); on any problem it says why once on stderr and leaves CUDA capture off. A
 * second call does nothing. */
MRD_EXPORT int InitializeInjection(void)
{
    if (atomic_exchange(&cu.called, 1))
        return 1;
    if (!mrd_agent_start())
        return 1;
    int tier = mrd__window_config();
    if (tier < 0)
        return 1;
    cu.steady = tier == 1;
    if ((cu.steady ? steady_setup() : mrd__cupti_setup()) != 0)
        return 1; /* inert for CUDA; NCCL/NVTX capture may still run */
    mrd_agent_on_flush(cupti_flush_hook);
    mrd__cupti_register_counters();
    start_flusher();
    atomic_store(&cu.ready, 1);
    if (cu.steady)
        mrd__window_cupti_ready();
    return 1;
}

int mrd__cupti_extcorr_push(uint64_t id)
{
    if (!gate_enter())
        return 0;
    CUptiResult r =
        cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, id);
    struct mrd__capture_thread *t = mrd__capture_thread();
    if (t && r == CUPTI_SUCCESS)
        t->cupti_pushed_gen = atomic_load(&cu.gen);
    gate_leave();
    return r == CUPTI_SUCCESS ? 0 : -EIO;
}

/* Pops only what this thread pushed in the current attach generation: an id pushed
 * before a detach died with that CUPTI instance (popping it would re-initialize CUPTI or
 * pop another's). */
int mrd__cupti_extcorr_pop(void)
{
    uint64_t last = 0;
    struct mrd__capture_thread *t = mrd__capture_thread();
    uint64_t pushed = t ? t->cupti_pushed_gen : 0;
    if (t)
        t->cupti_pushed_gen = 0;
    if ((t && pushed == 0) || !gate_enter())
        return 0;
    CUptiResult r = CUPTI_SUCCESS;
    if (!t || pushed == atomic_load(&cu.gen))
        r = cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &last);
    gate_leave();
    return r == CUPTI_SUCCESS ? 0 : -EIO;
}

void mrd__cupti_nccl_comm(int nranks)
{
    unsigned rt, drv;
    if (nranks < 2 || atomic_exchange(&cu.nccl_link, 1))
        return;
    unsigned kinds = attach_kinds();
    if (!(kinds & TK_NCCL) || (kinds & TK_API) || !gate_enter())
        return; /* not attached now: the next attach's configure() enables it */
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    enable_api(1, &rt, &drv);
    gate_leave();
}

/* Without CUPTI attached (steady tier between windows) the driver answers: asking CUPTI
 * would initialize it again. libcuda is already loaded in any process that has a context. */
static int driver_current_device(void)
{
    typedef int (*ctx_get_device_fn)(int *);
    static ctx_get_device_fn fn;
    if (!fn) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        fn = h ? (ctx_get_device_fn)dlsym(h, "cuCtxGetDevice") : NULL;
        if (!fn)
            return -1;
    }
    int dev = -1;
    return fn(&dev) == 0 ? dev : -1;
}

int mrd__cupti_current_device(void)
{
    uint32_t dev = 0;
    if (!gate_enter())
        return atomic_load(&cu.ready) ? driver_current_device() : -1;
    CUptiResult r = cuptiGetDeviceId(NULL, &dev);
    gate_leave();
    return r == CUPTI_SUCCESS ? (int)dev : -1;
}

uint64_t mrd__cupti_pool_misses(void)
{
    return atomic_load_explicit(&cu.pool_misses, memory_order_relaxed);
}

void mrd__cupti_pace_stats(uint64_t *waits, uint64_t *wait_ns)
{
    *waits = atomic_load_explicit(&cu.pace_waits, memory_order_relaxed);
    *wait_ns = atomic_load_explicit(&cu.pace_wait_ns, memory_order_relaxed);
}
