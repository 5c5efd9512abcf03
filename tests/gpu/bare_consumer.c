/* bare_consumer: the floor for any CUPTI-based tool, as a CUDA injection library.
 *
 * Where it sits: not part of meridian's data flow. The overhead benchmark
 * (tests/bench/overhead) runs each workload unprofiled, under this library, and under
 * meridian; what this library costs is what CUPTI itself costs when it is configured as well
 * as CUPTI allows, so "meridian's added time / this library's added time" measures
 * meridian's own work. Loaded with CUDA_INJECTION64_PATH=/abs/libbare_consumer.so: the CUDA
 * driver dlopens it while initialising and calls InitializeInjection() once, on the
 * initialising thread, before any context exists. Or loaded by the workload itself
 * (dlopen, ctypes), which then calls bare_consumer_attach() and bare_consumer_detach()
 * between steps: the same set-up part-way through the run, and CUPTI's dynamic detach
 * (cuptiFinalize from an API exit callback), so that traced and untraced steps alternate
 * in one process (tests/bench/overhead/inproc.py).
 *
 * What it does: enables the same activity kinds as meridian's agent (CONCURRENT_KERNEL,
 * MEMCPY, MEMCPY2, MEMSET, SYNCHRONIZATION, GRAPH_TRACE, EXTERNAL_CORRELATION, RUNTIME and
 * DRIVER records for the agent's whitelist of callback ids, OVERHEAD, DEVICE), with the
 * same set-up: a
 * CLOCK_MONOTONIC_RAW timestamp callback registered first, 8 MiB host buffers handed out
 * from a pool zeroed and pre-faulted at start, CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER
 * set so CUPTI never clears a buffer on the application's thread. Completed buffers are
 * walked only to count records (on CUPTI's worker thread), re-zeroed over their valid bytes
 * and returned to the pool: the records themselves are discarded.
 *
 * Workload: up to a few hundred thousand records a second per process (a storm of empty
 * kernels gives ~250k/s), a handful of application threads asking for buffers.
 *
 * Cap and policy: the pool holds BARE_CONSUMER_POOL buffers (default 16 x 8 MiB, all
 * allocated at start, never grown). When it is empty the request callback returns no
 * buffer, CUPTI drops the records it could not store and counts them; both that count
 * (cuptiActivityGetNumDroppedRecords, read at each detach before cuptiFinalize and at exit
 * while attached: a count a finalized CUPTI cannot give later) and the pool misses are
 * printed at exit.
 *
 * Environment (read once, in InitializeInjection):
 *   BARE_CONSUMER_KINDS        comma list of kind names (default: the list above; names as
 *                              printed: CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET,
 *                              SYNCHRONIZATION, GRAPH_TRACE, EXTERNAL_CORRELATION, DRIVER,
 *                              RUNTIME,
 *                              OVERHEAD, DEVICE, CONTEXT, STREAM, MARKER, RUNTIME_ALL,
 *                              DRIVER_ALL), or "none" (the library loads and does nothing)
 *   BARE_CONSUMER_DRIVER_CBIDS comma list of driver callback ids for DRIVER (default below)
 *   BARE_CONSUMER_RUNTIME_CBIDS comma list of runtime callback ids for RUNTIME (default
 *                              below)
 *   BARE_CONSUMER_BUFFER_BYTES host buffer size (default 8 MiB)
 *   BARE_CONSUMER_POOL         number of pooled buffers (default 16, 1..256)
 *   BARE_CONSUMER_DEVICE_BUFFER_BYTES  CUPTI device buffer size (default: CUPTI's own)
 * Output (stderr, prefixed "bare_consumer:"): one `kinds=...` line and one `config ...` line
 * at start, one `exit ...` line with the record counts at exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "bare_walk.h"

#define BC_EXPORT __attribute__((visibility("default")))
#define BC_MAX_POOL 256
#define BC_MAX_CBIDS 64
#define BC_ALIGN 8

BC_EXPORT int InitializeInjection(void);
BC_EXPORT int bare_consumer_attach(void);
BC_EXPORT int bare_consumer_detach(void);
BC_EXPORT int bare_consumer_attached(void);

/* Launches, synchronisations, allocations and copies: the same whitelist as the agent's
 * (agent/capture/cupti_convert.c, mrd__cupti_api_list); keep the two in step. */
static const uint32_t default_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,       CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,  CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,        CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,       CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
};

/* The runtime half of the same whitelist (the runtime's launches give no driver-API
 * record on CUDA 13: seen on the H200 host, tests/gpu/RESULTS.md). */
static const uint32_t default_rt_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
};

struct kind_name {
    const char *name;
    CUpti_ActivityKind kind; /* CUPTI_ACTIVITY_KIND_INVALID for the pseudo-kinds */
};

static const struct kind_name kind_names[] = {
    {"CONCURRENT_KERNEL", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"MEMCPY", CUPTI_ACTIVITY_KIND_MEMCPY},
    {"MEMCPY2", CUPTI_ACTIVITY_KIND_MEMCPY2},
    {"MEMSET", CUPTI_ACTIVITY_KIND_MEMSET},
    {"SYNCHRONIZATION", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {"GRAPH_TRACE", CUPTI_ACTIVITY_KIND_GRAPH_TRACE},
    {"EXTERNAL_CORRELATION", CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION},
    {"DRIVER", CUPTI_ACTIVITY_KIND_INVALID}, /* whitelist of cbids, not the whole kind */
    {"RUNTIME", CUPTI_ACTIVITY_KIND_INVALID}, /* likewise */
    {"OVERHEAD", CUPTI_ACTIVITY_KIND_OVERHEAD},
    {"DEVICE", CUPTI_ACTIVITY_KIND_DEVICE},
    {"CONTEXT", CUPTI_ACTIVITY_KIND_CONTEXT},
    {"STREAM", CUPTI_ACTIVITY_KIND_STREAM},
    {"MARKER", CUPTI_ACTIVITY_KIND_MARKER},
    {"RUNTIME_ALL", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"DRIVER_ALL", CUPTI_ACTIVITY_KIND_DRIVER},
};
#define BC_NKINDS (sizeof(kind_names) / sizeof(kind_names[0]))

/* The agent's set and order (agent/capture/cupti.c, enable_kinds). */
static const char default_kinds[] = "CONCURRENT_KERNEL,MEMCPY,MEMCPY2,MEMSET,SYNCHRONIZATION,"
                                    "GRAPH_TRACE,EXTERNAL_CORRELATION,RUNTIME,DRIVER,OVERHEAD,"
                                    "DEVICE";

static struct {
    int initialized, usable;
    const char *kinds; /* BARE_CONSUMER_KINDS or the default list */
    size_t dev_bytes;
    int attached, detaching; /* atomics: set by attach, cleared by the detach callback */
    unsigned attaches, detaches;
    size_t buffer_bytes;
    unsigned pool_size;
    uint8_t *pool_mem;
    uint8_t *free_list[BC_MAX_POOL];
    unsigned free_count;
    pthread_mutex_t lock; /* guards free_list/free_count only; no CUPTI call under it */
    uint32_t cbids[BC_MAX_CBIDS], rt_cbids[BC_MAX_CBIDS];
    unsigned ncbids, nrt_cbids;
    /* Counters, updated on CUPTI's worker thread and the request path. */
    uint64_t records_by_kind[CUPTI_ACTIVITY_KIND_COUNT];
    uint64_t records, zero_ts_kernels, buffers_completed, pool_misses;
    size_t dropped_before_detach; /* CUPTI's host-side drops read at each detach (atomics:
                                   * a detach may finish on another thread) */
} bc = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t CUPTIAPI timestamp_cb(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Runs on the thread that needs a buffer (often the application's): pop, never allocate. */
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = NULL;

    pthread_mutex_lock(&bc.lock);
    if (bc.free_count > 0)
        b = bc.free_list[--bc.free_count];
    pthread_mutex_unlock(&bc.lock);
    if (!b)
        __atomic_add_fetch(&bc.pool_misses, 1, __ATOMIC_RELAXED);
    *buffer = b;
    *size = b ? bc.buffer_bytes : 0;
    *max_records = 0;
}

/* Runs on CUPTI's worker thread: count, re-zero what CUPTI wrote, return to the pool. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    uint64_t by_kind[CUPTI_ACTIVITY_KIND_COUNT] = {0};
    uint64_t zero_ts = 0; /* device buffer exhausted: lost timings */

    /* Usually CUPTI's worker thread, but cuptiActivityFlushAll at exit delivers on the
     * caller's thread: count locally, publish with atomics. */
    uint64_t n = bare_walk(buffer, valid, by_kind, &zero_ts);
    for (unsigned i = 0; i < CUPTI_ACTIVITY_KIND_COUNT; i++)
        if (by_kind[i])
            __atomic_add_fetch(&bc.records_by_kind[i], by_kind[i], __ATOMIC_RELAXED);
    __atomic_add_fetch(&bc.records, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bc.zero_ts_kernels, zero_ts, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bc.buffers_completed, 1, __ATOMIC_RELAXED);
    if (!buffer)
        return;
    memset(buffer, 0, valid < size ? valid : size);
    pthread_mutex_lock(&bc.lock);
    if (bc.free_count < BC_MAX_POOL)
        bc.free_list[bc.free_count++] = buffer;
    pthread_mutex_unlock(&bc.lock);
}

static const char *cupti_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        return "unknown CUPTI error";
    return s;
}

static unsigned long env_ulong(const char *name, unsigned long dflt, unsigned long lo,
                               unsigned long hi)
{
    const char *s = getenv(name);
    char *end = NULL;
    unsigned long v;

    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtoul(s, &end, 0);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "bare_consumer: ignoring %s=%s (want %lu..%lu)\n", name, s, lo, hi);
        return dflt;
    }
    return v;
}

/* Fills out[] from the comma list in env var name, or from dflt when it is unset. */
static unsigned parse_cbids(const char *name, const uint32_t *dflt, size_t ndflt,
                            uint32_t *out)
{
    const char *s = getenv(name);
    unsigned n = 0;
    char *end;

    if (!s || !*s) {
        for (size_t i = 0; i < ndflt && n < BC_MAX_CBIDS; i++)
            out[n++] = dflt[i];
        return n;
    }
    while (*s && n < BC_MAX_CBIDS) {
        unsigned long v = strtoul(s, &end, 0);
        if (end == s)
            break;
        out[n++] = (uint32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void cbid_list(char *dst, size_t n, const uint32_t *ids, unsigned count)
{
    dst[0] = 0;
    for (unsigned i = 0; i < count; i++)
        snprintf(dst + strlen(dst), n - strlen(dst), "%s%u", i ? "," : "", ids[i]);
}

static int pool_create(void)
{
    size_t total = bc.buffer_bytes * bc.pool_size;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (mem == MAP_FAILED)
        return -errno;
    memset(mem, 0, total); /* pre-fault here, not on the application's thread later */
    bc.pool_mem = mem;
    for (unsigned i = 0; i < bc.pool_size; i++)
        bc.free_list[i] = bc.pool_mem + (size_t)i * bc.buffer_bytes;
    bc.free_count = bc.pool_size;
    return 0;
}

/* Enables (on = 1) or disables one named kind; appends its name to ok or bad. Returns 0 or
 * -1. */
static int enable_kind(const struct kind_name *kn, uint8_t on, char *ok, size_t okn, char *bad,
                       size_t badn)
{
    CUptiResult r = CUPTI_SUCCESS;
    char *dst = ok;
    size_t dn = okn;

    if (strcmp(kn->name, "DRIVER") == 0) {
        for (unsigned i = 0; i < bc.ncbids && r == CUPTI_SUCCESS; i++)
            r = cuptiActivityEnableDriverApi(bc.cbids[i], on);
    } else if (strcmp(kn->name, "RUNTIME") == 0) {
        for (unsigned i = 0; i < bc.nrt_cbids && r == CUPTI_SUCCESS; i++)
            r = cuptiActivityEnableRuntimeApi(bc.rt_cbids[i], on);
    } else {
        r = on ? cuptiActivityEnable(kn->kind) : cuptiActivityDisable(kn->kind);
    }
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "bare_consumer: %s %s failed: %s\n", on ? "enabling" : "disabling",
                kn->name, cupti_err(r));
        dst = bad;
        dn = badn;
    }
    if (dst[0])
        strncat(dst, ",", dn - strlen(dst) - 1);
    strncat(dst, kn->name, dn - strlen(dst) - 1);
    return r == CUPTI_SUCCESS ? 0 : -1;
}

/* Every kind of the comma list `kinds` on or off; the names enabled go to ok, failures to
 * bad. */
static void enable_kinds(const char *kinds, uint8_t on, char *ok, size_t okn, char *bad,
                         size_t badn)
{
    char tok[64];

    for (const char *p = kinds; *p;) {
        size_t n = strcspn(p, ",");
        size_t i;

        snprintf(tok, sizeof(tok), "%.*s", (int)(n < sizeof(tok) ? n : sizeof(tok) - 1), p);
        for (i = 0; i < BC_NKINDS && strcmp(kind_names[i].name, tok) != 0; i++)
            ;
        if (i < BC_NKINDS)
            enable_kind(&kind_names[i], on, ok, okn, bad, badn);
        else if (tok[0] && on)
            fprintf(stderr, "bare_consumer: unknown kind %s\n", tok);
        p += n;
        if (*p == ',')
            p++;
    }
}

static void at_exit(void)
{
    size_t dropped = 0;
    CUptiResult r;

    /* after a detach CUPTI is finalized: asking it anything would start it again */
    if (__atomic_load_n(&bc.attached, __ATOMIC_ACQUIRE)) {
        r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        if (r != CUPTI_SUCCESS)
            fprintf(stderr, "bare_consumer: flush failed: %s\n", cupti_err(r));
        if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) != CUPTI_SUCCESS)
            dropped = 0;
    }
    fprintf(stderr,
            "bare_consumer: exit pid=%d records=%llu kernels=%llu memcpy=%llu memset=%llu "
            "sync=%llu graph=%llu extcorr=%llu driver_api=%llu runtime_api=%llu "
            "overhead=%llu device=%llu "
            "zero_ts_kernels=%llu dropped=%zu buffers=%llu pool_misses=%llu attaches=%u "
            "detaches=%u\n",
            (int)getpid(), (unsigned long long)bc.records,
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_MEMCPY],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_MEMSET],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_GRAPH_TRACE],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_DRIVER],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_RUNTIME],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_OVERHEAD],
            (unsigned long long)bc.records_by_kind[CUPTI_ACTIVITY_KIND_DEVICE],
            (unsigned long long)bc.zero_ts_kernels,
            dropped + __atomic_load_n(&bc.dropped_before_detach, __ATOMIC_RELAXED),
            (unsigned long long)bc.buffers_completed, (unsigned long long)bc.pool_misses,
            bc.attaches, bc.detaches);
}

/* Reads the environment and makes the pool: once per process. Returns 0, or -1 when this
 * library stays inactive (kinds=none, no memory). */
static int init_once(void)
{
    if (__atomic_exchange_n(&bc.initialized, 1, __ATOMIC_ACQ_REL))
        return bc.usable ? 0 : -1;
    bc.kinds = getenv("BARE_CONSUMER_KINDS");
    if (!bc.kinds || !*bc.kinds)
        bc.kinds = default_kinds;
    if (strcmp(bc.kinds, "none") == 0) {
        fprintf(stderr, "bare_consumer: kinds=none\n");
        return -1;
    }
    bc.buffer_bytes = env_ulong("BARE_CONSUMER_BUFFER_BYTES", 8ul << 20, 64ul << 10, 256ul << 20);
    bc.buffer_bytes &= ~(size_t)(BC_ALIGN - 1);
    bc.pool_size = (unsigned)env_ulong("BARE_CONSUMER_POOL", 16, 1, BC_MAX_POOL);
    bc.dev_bytes = env_ulong("BARE_CONSUMER_DEVICE_BUFFER_BYTES", 0, 0, 1ul << 30);
    bc.ncbids = parse_cbids("BARE_CONSUMER_DRIVER_CBIDS", default_cbids,
                            sizeof(default_cbids) / sizeof(default_cbids[0]), bc.cbids);
    bc.nrt_cbids = parse_cbids("BARE_CONSUMER_RUNTIME_CBIDS", default_rt_cbids,
                               sizeof(default_rt_cbids) / sizeof(default_rt_cbids[0]),
                               bc.rt_cbids);
    if (pool_create() != 0) {
        fprintf(stderr, "bare_consumer: cannot allocate %u x %zu bytes: inactive\n",
                bc.pool_size, bc.buffer_bytes);
        return -1;
    }
    bc.usable = 1;
    return 0;
}

/* CUPTI's set-up and the kinds, as at the top of the file. Returns 0 when at least one kind
 * was enabled. */
static int attach(void)
{
    char ok[512] = "", bad[256] = "";
    uint32_t version = 0;
    uint8_t zeroed = 1;
    CUptiResult r;

    if (cuptiGetVersion(&version) != CUPTI_SUCCESS || version < CUPTI_API_VERSION)
        fprintf(stderr, "bare_consumer: CUPTI version %u older than built against (%u)\n",
                version, (unsigned)CUPTI_API_VERSION);
    r = cuptiActivityRegisterTimestampCallback(timestamp_cb);
    if (r != CUPTI_SUCCESS)
        fprintf(stderr, "bare_consumer: timestamp callback: %s\n", cupti_err(r));
    r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                                  &(size_t){sizeof(zeroed)}, &zeroed);
    if (r != CUPTI_SUCCESS)
        fprintf(stderr, "bare_consumer: ZEROED_OUT attribute: %s\n", cupti_err(r));
    if (bc.dev_bytes) {
        r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE,
                                      &(size_t){sizeof(bc.dev_bytes)}, &bc.dev_bytes);
        if (r != CUPTI_SUCCESS)
            fprintf(stderr, "bare_consumer: DEVICE_BUFFER_SIZE: %s\n", cupti_err(r));
    }
    r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "bare_consumer: buffer callbacks: %s: inactive\n", cupti_err(r));
        return -1;
    }
    enable_kinds(bc.kinds, 1, ok, sizeof(ok), bad, sizeof(bad));
    if (bc.attaches == 0 || !ok[0])
        fprintf(stderr, "bare_consumer: kinds=%s%s%s\n", ok, bad[0] ? " failed=" : "", bad);
    if (!ok[0])
        return -1;
    if (!bc.attaches++)
        atexit(at_exit); /* nothing to flush or count when no kind could be enabled */
    __atomic_store_n(&bc.attached, 1, __ATOMIC_RELEASE);
    if (bc.attaches > 1)
        return 0; /* the config line was printed by the first attach */
    {
        char cb[BC_MAX_CBIDS * 6], rt[BC_MAX_CBIDS * 6], dev_txt[32] = "cupti_default";
        if (bc.dev_bytes)
            snprintf(dev_txt, sizeof(dev_txt), "%zu", bc.dev_bytes);
        cbid_list(cb, sizeof(cb), bc.cbids, bc.ncbids);
        cbid_list(rt, sizeof(rt), bc.rt_cbids, bc.nrt_cbids);
        fprintf(stderr,
                "bare_consumer: config cupti_version=%u timestamp=CLOCK_MONOTONIC_RAW "
                "zeroed_out_buffers=1 buffer_bytes=%zu pool=%u prefaulted=1 "
                "per_thread_buffers=cupti_default flush_period=cupti_default "
                "device_buffer_bytes=%s driver_cbids=%s runtime_cbids=%s%s\n",
                version, bc.buffer_bytes, bc.pool_size, dev_txt, cb, rt,
                strstr(ok, "RUNTIME") ? "" : "(unused)");
    }
    return 0;
}

/* Sets up CUPTI as described at the top of the file. Called once by the CUDA driver on the
 * thread initialising CUDA; a second call is ignored. Always returns 1 (CUDA treats 0 as a
 * failed injection, and this library must never break the host process): on any set-up
 * error it prints one line and leaves CUPTI as it found it where it can. */
BC_EXPORT int InitializeInjection(void)
{
    static int called;

    if (!__atomic_exchange_n(&called, 1, __ATOMIC_ACQ_REL) && init_once() == 0)
        attach();
    return 1;
}

/* The same set-up on demand, for a workload that loads this library itself (dlopen,
 * ctypes) and attaches it part-way through its run, after CUDA is up: the in-process
 * comparison of tests/bench/overhead/inproc.py. Call it between steps, when no other
 * thread is inside CUDA. Returns 0 when at least one kind was enabled, -1 otherwise (and
 * while attached already). */
BC_EXPORT int bare_consumer_attach(void)
{
    if (init_once() != 0 || __atomic_load_n(&bc.attached, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&bc.detaching, __ATOMIC_ACQUIRE))
        return -1;
    return attach();
}

/* The dynamic detach CUPTI documents (CAPTURE-FACTS.md): the kinds off, then, inside the next
 * runtime or driver API exit callback on any thread, a forced flush (every buffer comes back
 * to the pool) and cuptiFinalize. */
static void CUPTIAPI detach_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id,
                               const void *data)
{
    const CUpti_CallbackData *cb = data;

    (void)ud;
    (void)id;
    if ((dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) ||
        cb->callbackSite != CUPTI_API_EXIT ||
        !__atomic_exchange_n(&bc.detaching, 0, __ATOMIC_ACQ_REL))
        return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t dropped = 0; /* the finalize forgets it: read it now (the detach step, untimed) */
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
        __atomic_add_fetch(&bc.dropped_before_detach, dropped, __ATOMIC_RELAXED);
    cuptiFinalize();
    bc.detaches++;
    __atomic_store_n(&bc.attached, 0, __ATOMIC_RELEASE);
}

/* Asks for the detach; it completes inside the next CUDA API call (the caller makes one, a
 * synchronisation, then may check bare_consumer_attached()). Returns 0, or -1 when not
 * attached or the callback could not be set up. */
BC_EXPORT int bare_consumer_detach(void)
{
    char ok[512] = "", bad[256] = "";
    CUpti_SubscriberHandle sub;

    if (!__atomic_load_n(&bc.attached, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&bc.detaching, __ATOMIC_ACQUIRE))
        return -1;
    enable_kinds(bc.kinds, 0, ok, sizeof(ok), bad, sizeof(bad));
    if (cuptiSubscribe(&sub, detach_cb, NULL) != CUPTI_SUCCESS)
        return -1;
    __atomic_store_n(&bc.detaching, 1, __ATOMIC_RELEASE);
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    return 0;
}

/* 1 while attached (a detach asked for but not yet done included), else 0. */
BC_EXPORT int bare_consumer_attached(void)
{
    return __atomic_load_n(&bc.attached, __ATOMIC_ACQUIRE);
}
