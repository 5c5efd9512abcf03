/* meridian-agent-burst: CUPTI's buffer-completion pattern, without a GPU, through the real
 * agent (core, rings, flusher) and the real CUPTI completion path (agent/capture/cupti.c,
 * cupti_convert.c), into a real meridiand.
 *
 * Why: a storm of tiny kernel launches on the H200 host (issue 3) reaches the agent as
 * CUPTI buffers that complete one after another on CUPTI's worker thread: each holds tens
 * of thousands of records (an 8 MiB buffer holds 32,768 kernel + runtime-API record pairs)
 * that the completion callback converts as fast as it can into ONE ring, and at exit the
 * buffer still open is delivered by cuptiActivityFlushAll on the exiting thread. This
 * program reproduces exactly that: a "CUPTI worker" thread fills pool buffers (from
 * mrd__cupti_buffer_requested) with CUpti_ActivityAPI (cudaLaunchKernel) and
 * CUpti_ActivityKernel10 records, and completes one (mrd__cupti_buffer_completed) every
 * time the simulated application has produced --burst records at --rate records/s; at exit
 * a flush hook (registered like cupti.c's) marks the exit (mrd__cupti_exit_begin) and
 * completes the last, partly filled buffer of --exit-left records on the exiting thread.
 *
 * Launch i (1-based) gives one API record and one kernel record, both with correlation id
 * i, so a test can check that the database holds every record exactly once. Every buffer
 * (the exit buffer too) also carries one CUPTI OVERHEAD record of 2,500 ns, whose count and
 * sum must reach the database's agent_counters (category cupti) through the Goodbye.
 *
 * Environment: as libmeridian.so (MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, a rank variable or
 * MERIDIAN_FORCE=1, ...). Output on stdout, when the bursts are over and after the exit
 * buffer:
 *   burst: records=R launches=L buffers=B elapsed_ms=E rate=ACHIEVED hold_max_ms=H
 *          hold_sum_ms=S late_max_ms=T flusher_cpu_ms=C
 *   burst-exit: records=X hold_ms=H
 * (hold: time a completion call held the worker, i.e. the pacing waits plus conversion;
 * late_max: the most the worker was behind the schedule when a buffer was due, i.e. how
 * long CUPTI would have had to keep that buffer (and the ones after it) in its pool;
 * flusher_cpu_ms: CPU time of the agent's flusher thread so far, 10 ms resolution).
 * The agent's own exit line on stderr says what was sent and lost.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "agent.h"
#include "cupti_convert.h"

static double o_rate = 400000, o_seconds = 1.0;
static uint64_t o_burst = 30000, o_exit_left = 30000;
static unsigned o_buffer_mb = 8;

static uint8_t *g_exit_buf;
static size_t g_exit_valid, g_exit_size;
static uint64_t g_exit_records;

static const char *const k_names[] = {
    "_Z12empty_kernelPi",
    "ampere_sgemm_128x64_nn",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "vectorized_elementwise_kernel",
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

#define OVERHEAD_NS 2500 /* each buffer carries one CUPTI OVERHEAD record this long */

/* Appends one OVERHEAD record (a buffer flush costing OVERHEAD_NS), as CUPTI reports its
 * own cost, to buf at *off. */
static void fill_overhead(uint8_t *buf, size_t size, size_t *off)
{
    CUpti_ActivityOverhead3 o;
    if (*off + sizeof o > size) {
        fprintf(stderr, "burst: buffer too small\n");
        exit(2);
    }
    memset(&o, 0, sizeof o);
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o.start = (uint64_t)mrd_clock_now();
    o.end = o.start + OVERHEAD_NS;
    memcpy(buf + *off, &o, sizeof o);
    *off += sizeof o;
}

/* Appends the records of launches first..first+n-1 (API + kernel each) to buf at *off. */
static void fill(uint8_t *buf, size_t size, size_t *off, uint64_t first, uint64_t n)
{
    for (uint64_t id = first; id < first + n; id++) {
        uint64_t now = (uint64_t)mrd_clock_now();
        CUpti_ActivityAPI a;
        CUpti_ActivityKernel10 k;
        if (*off + sizeof a + sizeof k > size) {
            fprintf(stderr, "burst: buffer too small\n");
            exit(2);
        }
        memset(&a, 0, sizeof a);
        a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        a.start = now;
        a.end = now + 3500;
        a.processId = 1;
        a.threadId = 1;
        a.correlationId = (uint32_t)id;
        memcpy(buf + *off, &a, sizeof a);
        *off += sizeof a;
        memset(&k, 0, sizeof k);
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = now + 8000;
        k.end = now + 9500;
        k.correlationId = (uint32_t)id;
        k.name = k_names[id % (sizeof k_names / sizeof k_names[0])];
        k.gridX = k.gridY = k.gridZ = 1;
        k.blockX = k.blockY = k.blockZ = 1;
        k.streamId = 13;
        k.contextId = 1;
        memcpy(buf + *off, &k, sizeof k);
        *off += sizeof k;
    }
}

static uint8_t *take_buffer(size_t *size)
{
    uint8_t *b = NULL;
    size_t maxrec = 0;
    mrd__cupti_buffer_requested(&b, size, &maxrec);
    if (b == NULL) {
        fprintf(stderr, "burst: no free pool buffer\n");
        exit(2);
    }
    return b;
}

/* CPU time (ms) used so far by this process's thread named `comm` (the flusher is
 * "meridian"), from /proc; -1 when not found. */
static double thread_cpu_ms(const char *comm)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    double ms = -1;
    while (d && (e = readdir(d)) != NULL) {
        char path[300], buf[512], name[64] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(name, sizeof name, f))
            name[strcspn(name, "\n")] = '\0';
        fclose(f);
        if (strcmp(name, comm) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (f && fgets(buf, sizeof buf, f)) {
            /* fields after the ")" of comm: state is field 3, utime 14, stime 15 */
            const char *p = strrchr(buf, ')');
            unsigned long ut = 0, st = 0;
            if (p &&
                sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
                ms = (double)(ut + st) * 1000.0 / 100.0; /* USER_HZ */
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return ms;
}

struct stats {
    uint64_t launches, buffers;
    int64_t hold_max, hold_sum, late, elapsed; /* late: the largest lag behind schedule */
};

/* The "CUPTI worker": one completed buffer per --burst records of the schedule. */
static void *worker(void *arg)
{
    struct stats *st = arg;
    uint64_t total = (uint64_t)(o_rate * o_seconds) / 2; /* launches */
    uint64_t per_buf = o_burst / 2, next = 1;
    int64_t t0 = mono_ns();
    while (next <= total) {
        uint64_t n = total - next + 1 < per_buf ? total - next + 1 : per_buf;
        size_t size = 0, off = 0;
        uint8_t *b = take_buffer(&size);
        fill(b, size, &off, next, n);
        fill_overhead(b, size, &off);
        next += n;
        /* the buffer completes when the application has produced its records */
        int64_t due = t0 + (int64_t)((double)(next - 1) * 2 * 1e9 / o_rate);
        int64_t now = mono_ns();
        if (now - due > st->late)
            st->late = now - due;
        if (now < due)
            sleep_until(due);
        int64_t h0 = mono_ns();
        mrd__cupti_buffer_completed(NULL, 0, b, size, off);
        int64_t hold = mono_ns() - h0;
        st->hold_sum += hold;
        if (hold > st->hold_max)
            st->hold_max = hold;
        st->buffers++;
    }
    st->launches = next - 1;
    st->elapsed = mono_ns() - t0;
    /* what CUPTI still holds when the application exits: one partly filled buffer */
    uint64_t left = o_exit_left / 2;
    g_exit_buf = take_buffer(&g_exit_size);
    fill(g_exit_buf, g_exit_size, &g_exit_valid, next, left);
    fill_overhead(g_exit_buf, g_exit_size, &g_exit_valid);
    g_exit_records = left * 2;
    return NULL;
}

/* The exit flush, as cupti.c's hook runs it: exit marked, then the open buffer delivered
 * on this (the exiting) thread. */
static void exit_hook(void)
{
    mrd__cupti_exit_begin();
    int64_t h0 = mono_ns();
    if (g_exit_buf)
        mrd__cupti_buffer_completed(NULL, 0, g_exit_buf, g_exit_size, g_exit_valid);
    printf("burst-exit: records=%" PRIu64 " hold_ms=%.1f\n", g_exit_records,
           (double)(mono_ns() - h0) / 1e6);
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr, "usage: meridian-agent-burst [--rate R] [--seconds S] [--burst N]\n"
                    "       [--exit-left N] [--buffer-mb MB]\n"
                    "  --rate R       records per second the application produces (400000)\n"
                    "  --seconds S    how long (1.0)\n"
                    "  --burst N      records per completed CUPTI buffer (30000)\n"
                    "  --exit-left N  records in the buffer still open at exit (30000)\n"
                    "  --buffer-mb MB pool buffer size (8)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--rate"))
            o_rate = strtod(v, NULL);
        else if (!strcmp(a, "--seconds"))
            o_seconds = strtod(v, NULL);
        else if (!strcmp(a, "--burst"))
            o_burst = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--exit-left"))
            o_exit_left = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--buffer-mb"))
            o_buffer_mb = (unsigned)strtoul(v, NULL, 10);
        else
            usage();
        i++;
    }
    if (o_rate < 1000 || o_seconds <= 0 || o_burst < 2 || o_buffer_mb < 1 || o_buffer_mb > 64)
        usage();
    if (!mrd_agent_start()) {
        fprintf(stderr, "burst: the agent is not active (environment?)\n");
        return 1;
    }
    /* --buffer-mb of launch records, plus room for the buffer's OVERHEAD record */
    if (mrd__cupti_pool_create(((size_t)o_buffer_mb << 20) + 4096, 2) != 0) {
        fprintf(stderr, "burst: cannot map the buffer pool\n");
        return 1;
    }
    mrd_agent_on_flush(exit_hook);
    mrd__cupti_register_counters(); /* as InitializeInjection does */

    struct stats st = {0};
    pthread_t t;
    if (pthread_create(&t, NULL, worker, &st) != 0)
        return 1;
    pthread_join(t, NULL);
    printf("burst: records=%" PRIu64 " launches=%" PRIu64 " buffers=%" PRIu64
           " elapsed_ms=%.1f rate=%.0f hold_max_ms=%.1f hold_sum_ms=%.1f late_max_ms=%.1f"
           " flusher_cpu_ms=%.0f\n",
           st.launches * 2, st.launches, st.buffers, (double)st.elapsed / 1e6,
           (double)st.launches * 2 / ((double)st.elapsed / 1e9), (double)st.hold_max / 1e6,
           (double)st.hold_sum / 1e6, (double)st.late / 1e6, thread_cpu_ms("meridian"));
    fflush(stdout);
    return 0; /* exit(): the agent's atexit flush runs exit_hook, then reports */
}
