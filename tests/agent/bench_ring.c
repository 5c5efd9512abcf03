/* bench_agent_ring: the cost of the agent's hot path, measured (not a test).
 *
 *   mrd_clock_now()               ns per call
 *   mrd_ring_write() + clock      ns per record while a consumer thread drains
 *   mrd_ring_write() refused      ns per record when the ring is full (drop and count)
 *
 * Usage: bench_agent_ring [records]   (default 5,000,000; prints one line per figure)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "ring.h"

static _Atomic int g_stop;
static uint64_t g_drained;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void count(const struct mrd_record *r, void *arg)
{
    (void)arg;
    g_drained += r->ev.kernel.correlation != 0;
}

static void *consumer(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        if (mrd_ring_drain(count, NULL, 65536) == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    mrd_ring_drain(count, NULL, SIZE_MAX);
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
    struct mrd_record r;
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_KERNEL;
    r.str[0] = "kernel";

    int64_t t0 = mono_ns();
    int64_t sink = 0;
    for (uint64_t i = 0; i < n; i++)
        sink += mrd_clock_now();
    int64_t t1 = mono_ns();
    printf("mrd_clock_now: %.1f ns/call (%d)\n", (double)(t1 - t0) / (double)n, (int)(sink & 1));

    if (mrd_ring_init(4, 16384) != 0)
        return 1;
    pthread_t th;
    pthread_create(&th, NULL, consumer, NULL);
    uint64_t ok = 0;
    t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++) {
        r.ev.kernel.correlation = i + 1;
        r.ev.kernel.start = mrd_clock_now();
        r.ev.kernel.end = r.ev.kernel.start + 100;
        ok += mrd_ring_write(&r) == 0;
    }
    t1 = mono_ns();
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    printf("mrd_ring_write with a draining consumer: %.1f ns/record (clock read included), "
           "%.1f M records/s, accepted %llu of %llu, drained %llu\n",
           (double)(t1 - t0) / (double)n, (double)n * 1e3 / (double)(t1 - t0),
           (unsigned long long)ok, (unsigned long long)n, (unsigned long long)g_drained);

    /* full ring: every write is refused and counted */
    for (int i = 0; i < 20000; i++)
        mrd_ring_write(&r);
    t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        mrd_ring_write(&r);
    t1 = mono_ns();
    printf("mrd_ring_write on a full ring (drop + count): %.1f ns/record\n",
           (double)(t1 - t0) / (double)n);
    mrd_ring_shutdown();
    return 0;
}
