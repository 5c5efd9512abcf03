/* The agent's lifecycle: start, identity, inertness, GPUs, flush hooks, fork handling and
 * the exit path with a deadline.
 *
 * Where it sits: every entry point of libmeridian.so (CUDA injection, NCCL profiler plugin,
 * NVTX injection, MPI wrappers) calls mrd_agent_start(); the first call reads the
 * environment once (config.c), maps the rings, starts the flusher thread (transport/) and
 * registers atexit and pthread_atfork handlers. Capture code then only calls the hot-path
 * function here (mrd_agent_active), the clock and counters of agent/base and mrd_ring_write.
 * Dependencies point down: core -> transport, ring, base; transport -> ring, base.
 *
 * Workload: mrd_agent_active runs on application threads at up to ~200,000 calls/s (one
 * atomic load). Everything else runs once per process (start, shutdown) or a few times
 * (GPUs, hooks).
 *
 * Exit: mrd_agent_shutdown (atexit, or the MPI_Finalize wrapper before PMPI_Finalize) runs
 * the flush hooks, asks the flusher to deliver what is left until the deadline
 * (MERIDIAN_FLUSH_DEADLINE_MS after the call), then prints exactly one line on stderr.
 * It never waits longer than the deadline plus a small margin, whatever the aggregator does.
 *
 * Fork: the child of a fork is inert (its parent's flusher does not exist there): the
 * atfork child handler clears the active flag, disables the rings and closes the flusher's
 * descriptors; its exit path does nothing.
 */
#include "agent.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "gpus.h"
#include "ring.h"
#include "transport.h"

#define MAX_FLUSH_HOOKS 8

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct mrd_agent_config g_cfg;
static _Atomic int g_active;
static _Atomic int g_shutdown_started;
static _Atomic int g_forked_child;
static void (*_Atomic g_hooks[MAX_FLUSH_HOOKS])(void);
static _Atomic unsigned g_nhooks;


static const char *env_get(const char *name, void *arg)
{
    (void)arg;
    return getenv(name);
}

static void agent_atexit(void)
{
    mrd_agent_shutdown();
}

static void agent_atfork_child(void)
{
    atomic_store(&g_forked_child, 1);
    atomic_store(&g_active, 0);
    atomic_store(&g_shutdown_started, 1);
    mrd_ring_disable();
    mrd__transport_atfork_child();
}

static void agent_start_once(void)
{
    char why[256];
    int r = mrd__config_parse(&g_cfg, env_get, NULL, why, sizeof why);
    if (r < 0) {
        fprintf(stderr, "meridian: inactive in pid %ld: %s\n", (long)getpid(), why);
        return;
    }
    if (r == 0)
        return;
    mrd_clock_set_test_ppm(g_cfg.test_clock_ppm);
    int e = mrd_ring_init(g_cfg.ring_threads, g_cfg.ring_records);
    if (e != 0) {
        fprintf(stderr, "meridian: rank %d: inactive: cannot map %u rings of %u records: %s\n",
                g_cfg.rank, g_cfg.ring_threads, g_cfg.ring_records, mrd_strerror(e));
        return;
    }
    e = mrd__transport_start(&g_cfg);
    if (e != 0) {
        fprintf(stderr, "meridian: rank %d: inactive: cannot start the flusher thread: %s\n",
                g_cfg.rank, mrd_strerror(e));
        mrd_ring_disable();
        return;
    }
    pthread_atfork(NULL, NULL, agent_atfork_child);
    atexit(agent_atexit);
    atomic_store_explicit(&g_active, 1, memory_order_release);
}

int mrd_agent_start(void)
{
    if (atomic_load(&g_forked_child))
        return 0;
    pthread_once(&g_once, agent_start_once);
    return mrd_agent_active();
}

int mrd_agent_active(void)
{
    return atomic_load_explicit(&g_active, memory_order_acquire);
}

const struct mrd_agent_config *mrd_agent_config(void)
{
    return &g_cfg;
}

void mrd_agent_add_gpu(uint32_t device, const char *uuid, const char *pci_bus_id, const char *name)
{
    mrd__gpus_add(device, uuid, pci_bus_id, name);
}

void mrd_agent_on_flush(void (*fn)(void))
{
    if (fn == NULL)
        return;
    unsigned i = atomic_fetch_add(&g_nhooks, 1);
    if (i < MAX_FLUSH_HOOKS)
        atomic_store(&g_hooks[i], fn);
    else
        fprintf(stderr, "meridian: more than %d flush hooks; one is ignored\n", MAX_FLUSH_HOOKS);
}

/* Sum of every drop reason: what the exit line calls "lost". */
static uint64_t format_loss(const uint64_t dropped[MRD_DROP__COUNT], char *buf, size_t cap)
{
    uint64_t total = 0;
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < MRD_DROP__COUNT; i++) {
        if (dropped[i] == 0)
            continue;
        total += dropped[i];
        int n = snprintf(buf + o, o < cap ? cap - o : 0, "%s%s %llu", o ? ", " : "",
                         mrd_drop_reason_name(i), (unsigned long long)dropped[i]);
        if (n > 0 && (size_t)n < cap - o)
            o += (size_t)n;
    }
    return total;
}

void mrd_agent_shutdown(void)
{
    if (!mrd_agent_active())
        return;
    if (atomic_exchange(&g_shutdown_started, 1)) {
        /* Another thread is flushing (e.g. MPI_Finalize while a thread calls exit()):
         * wait for it, within the same bound, so the process does not exit under it. */
        int64_t until = mrd__mono_ns() + ((int64_t)g_cfg.flush_deadline_ms + 500) * 1000000;
        while (mrd_agent_active() && !atomic_load(&g_forked_child) && mrd__mono_ns() < until) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
        return;
    }
    int64_t t0 = mrd__mono_ns();
    unsigned n = atomic_load(&g_nhooks);
    for (unsigned i = 0; i < n && i < MAX_FLUSH_HOOKS; i++) {
        void (*fn)(void) = atomic_load(&g_hooks[i]);
        if (fn)
            fn();
    }
    int e = mrd__transport_stop(t0 + (int64_t)g_cfg.flush_deadline_ms * 1000000);

    struct mrd_transport_stats st;
    uint64_t captured[MRD_EV__COUNT], dropped[MRD_DROP__COUNT];
    mrd__transport_stats(&st);
    mrd_agent_counters(captured, dropped);
    if (e != 0) /* the flusher did not finish: what it still held is lost too */
        dropped[MRD_DROP_UNSENT_AT_EXIT] += st.events_queued;
    char loss[512];
    uint64_t lost = format_loss(dropped, loss, sizeof loss);
    char tail[sizeof g_cfg.aggregator + sizeof st.last_error + 64] = "";
    if (lost && st.last_error[0])
        snprintf(tail, sizeof tail, "; aggregator %s: %s", g_cfg.aggregator, st.last_error);
    else if (st.goodbye == MRD_TX_GOODBYE_UNACKED) /* the totals may be missing there */
        snprintf(tail, sizeof tail, "; goodbye not acknowledged by aggregator %s",
                 g_cfg.aggregator);
    fprintf(stderr, "meridian: rank %d: %s %llu events in %llu batches; lost %llu%s%s%s%s\n",
            g_cfg.rank, st.record_only ? "recorded" : "sent", (unsigned long long)st.events_acked,
            (unsigned long long)st.batches_acked, (unsigned long long)lost, lost ? " (" : "", loss,
            lost ? ")" : "", tail);
    atomic_store(&g_active, 0);
}
