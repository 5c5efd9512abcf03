/* agent_noring: a thread that finds no free ring costs no system call per NVTX mark or MPI
 * call, and every record it loses is counted.
 *
 * The real agent (core, rings, record-only transport) and the real capture sources, one
 * ring (MERIDIAN_RING_THREADS=1) held by the main thread. NVTX reaches the agent as a
 * simulated NVTX client would (InitializeInjectionNvtx2 fills its function tables); MPI
 * through meridian_mpi_record, as libmeridian_mpi.so calls it.
 *   1. The main thread (with the ring) marks M times: M NVTX records reach the flusher
 *      (captured), none is dropped, and its thread id costs one gettid in all.
 *   2. A second thread (no ring) marks N times and records N MPI calls: the
 *      no_thread_slot counter moves by exactly 2N and the thread makes no gettid call
 *      (before: one per mark and one per MPI call). Its push/pop pairs are counted too
 *      (N pushes) and its pops report no open range.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "capture.h"
#include "check.h"
#include "mpi_bridge.h"
#include "nvtx_client.h"
#include "ring.h"

#define M 500
#define N 5000 /* more than the ring's claim retry period (1024 refusals) */

static struct nvtx_client cl;

static void nvtx_mark(const char *s)
{
    NVTX_CORE(&cl, MarkA, void (*)(const char *))(s);
}

static int nvtx_push(const char *s)
{
    return NVTX_CORE(&cl, RangePushA, int (*)(const char *))(s);
}

static int nvtx_pop(void)
{
    return NVTX_CORE(&cl, RangePop, int (*)(void))();
}

static uint64_t counter(int captured_kind, int drop_reason)
{
    uint64_t captured[MRD_EV__COUNT] = {0}, dropped[MRD_DROP__COUNT] = {0};
    mrd_agent_counters(captured, dropped);
    return captured_kind >= 0 ? captured[captured_kind] : dropped[drop_reason];
}

struct ringless {
    int had_state;
    uint64_t gettid_before, gettid_after, drops_before, drops_after;
    int pops_open;
};

static void *ringless_main(void *arg)
{
    struct ringless *o = arg;
    o->had_state = mrd_ring_thread_state() != NULL;
    o->gettid_before = mrd__capture_gettid_calls();
    o->drops_before = counter(-1, MRD_DROP_NO_THREAD_SLOT);
    for (int i = 0; i < N; i++) {
        nvtx_mark("ringless");
        meridian_mpi_record("MPI_Send", 1, 2, 64, 0, 0, 2);
        nvtx_push("range");
        if (nvtx_pop() >= 0)
            o->pops_open++;
    }
    o->gettid_after = mrd__capture_gettid_calls();
    o->drops_after = counter(-1, MRD_DROP_NO_THREAD_SLOT);
    return NULL;
}

int main(void)
{
    setenv("MERIDIAN_FORCE", "1", 1);
    setenv("MERIDIAN_RUN_ID", "noring", 1);
    setenv("MERIDIAN_RECORD_FILE", "/dev/null", 1);
    setenv("MERIDIAN_RING_THREADS", "1", 1);
    setenv("MERIDIAN_FLUSH_DEADLINE_MS", "500", 1);
    unsetenv("MERIDIAN_AGGREGATOR");

    nvtx_client_init(&cl);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);
    CHECK(cl.core[NVTX_CBID_CORE_MarkA] != NULL && cl.core[NVTX_CBID_CORE_RangePop] != NULL);
    CHECK_EQ(mrd_agent_active(), 1);

    /* 1. the main thread holds the only ring */
    CHECK(mrd_ring_thread_state() != NULL);
    uint64_t g0 = mrd__capture_gettid_calls(), d0 = counter(-1, MRD_DROP_NO_THREAD_SLOT);
    for (int i = 0; i < M; i++)
        nvtx_mark("owner");
    CHECK_UEQ(mrd__capture_gettid_calls() - g0, 1);
    CHECK_UEQ(counter(-1, MRD_DROP_NO_THREAD_SLOT), d0);
    for (int i = 0; i < 300 && counter(MRD_EV_NVTX, 0) < M; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK_UEQ(counter(MRD_EV_NVTX, 0), M);

    /* 2. a thread beyond the ring count */
    struct ringless o = {0};
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, ringless_main, &o));
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(o.had_state, 0);
    CHECK_UEQ(o.gettid_after - o.gettid_before, 0);
    /* marks + MPI records (mrd_ring_write_in) and pushes (no stack to keep them) */
    CHECK_UEQ(o.drops_after - o.drops_before, 3 * (uint64_t)N);
    CHECK_EQ(o.pops_open, 0);
    CHECK_UEQ(counter(MRD_EV_NVTX, 0), M); /* nothing of the ringless thread got through */
    CHECK_UEQ(counter(MRD_EV_MPI, 0), 0);

    mrd_agent_shutdown();
    return 0;
}
