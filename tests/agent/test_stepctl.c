/* agent_stepctl: step control's profiler API counts and the narrowing of a held request
 * (agent/base/stepctl.h), on its own:
 *  - effective calls only: starts and stops alternate, repeated starts or stops are not
 *    counted, each latest call keeps the step counter at its time; four threads calling
 *    start and stop at random never let a snapshot show starts - stops outside {0, 1}, and
 *    the end state equals the last effective call of a serial replay of the totals;
 *  - narrowing: a held id sent again with a smaller last (same first) narrows it in time
 *    (2) while the new last step has not begun, late (3) once it has (counted once), and a
 *    larger last, another first or the same last change nothing (0); a past narrowed
 *    request frees its slot for a new id.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "counters.h"
#include "stepctl.h"
#include "steps.h"

static uint64_t named(const char *name)
{
    struct mrd_named_counter c[MRD_AGENT_NAMED_MAX];
    size_t n = mrd_agent_named_counters(c, MRD_AGENT_NAMED_MAX);
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].category, "window") == 0 && strcmp(c[i].name, name) == 0)
            return c[i].value;
    return UINT64_MAX;
}

static void begin_steps(int n)
{
    for (int i = 0; i < n; i++)
        mrd_stepctl_end(mrd_stepctl_begin(), 1000);
}

static void snap(uint64_t *a, uint64_t *as, uint64_t *b, uint64_t *bs)
{
    mrd_stepctl_profiler_snapshot(a, as, b, bs);
}

static void test_profiler_serial(void)
{
    uint64_t a, as, b, bs;
    snap(&a, &as, &b, &bs);
    CHECK_UEQ(a, 0);
    CHECK_UEQ(b, 0);
    mrd_stepctl_profiler_call(0); /* a stop before any start: CUDA ignores it too */
    snap(&a, &as, &b, &bs);
    CHECK_UEQ(b, 0);
    begin_steps(3);
    mrd_stepctl_profiler_call(1); /* at steps_begun 3 */
    begin_steps(2);
    mrd_stepctl_profiler_call(1); /* already started: not counted, its step not taken */
    snap(&a, &as, &b, &bs);
    CHECK_UEQ(a, 1);
    CHECK_UEQ(as, 3);
    CHECK_UEQ(b, 0);
    CHECK_UEQ(bs, 0);
    begin_steps(4);
    mrd_stepctl_profiler_call(0); /* at 9 */
    mrd_stepctl_profiler_call(0);
    snap(&a, &as, &b, &bs);
    CHECK_UEQ(a, 1);
    CHECK_UEQ(b, 1);
    CHECK_UEQ(bs, 9);
    mrd_stepctl_profiler_call(1); /* at 9 again: the second pair */
    snap(&a, &as, &b, &bs);
    CHECK_UEQ(a, 2);
    CHECK_UEQ(as, 9);
    CHECK_UEQ(b, 1);
    mrd_stepctl_profiler_call(0);
    CHECK_UEQ(named("profiler_starts"), 2);
    CHECK_UEQ(named("profiler_stops"), 2);
}

static _Atomic int g_stop;
static _Atomic uint64_t g_bad;

static void *caller(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < 200000; i++)
        mrd_stepctl_profiler_call(rand_r(&seed) & 1);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        uint64_t a, as, b, bs;
        snap(&a, &as, &b, &bs);
        if (a < b || a - b > 1)
            atomic_fetch_add(&g_bad, 1);
    }
    return NULL;
}

static void test_profiler_threads(void)
{
    pthread_t t[4], r;
    uint64_t a0, as, b0, bs, a, b;
    snap(&a0, &as, &b0, &bs);
    CHECK_OK(pthread_create(&r, NULL, reader, NULL));
    for (uintptr_t i = 0; i < 4; i++)
        CHECK_OK(pthread_create(&t[i], NULL, caller, (void *)(i + 1)));
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    atomic_store(&g_stop, 1);
    pthread_join(r, NULL);
    CHECK_UEQ(atomic_load(&g_bad), 0);
    snap(&a, &as, &b, &bs);
    CHECK(a >= a0 && b >= b0);
    CHECK(a - b <= 1);
    /* the state is what the counts say: a start now counts only when stopped */
    int started = a > b;
    mrd_stepctl_profiler_call(1);
    uint64_t a2, b2;
    snap(&a2, &as, &b2, &bs);
    CHECK_UEQ(a2, a + (started ? 0 : 1));
    mrd_stepctl_profiler_call(0);
}

static void test_narrow(void)
{
    uint64_t begun;
    int64_t last_ns;
    mrd_stepctl_snapshot(&begun, &last_ns);
    int64_t b = (int64_t)begun;
    uint64_t f = (uint64_t)b + 5, open_last = f + 99999;
    CHECK_EQ(mrd_stepctl_request(101, f, open_last, MRD_WINDOW_PROFILER_API), 1);
    int reason = 0;
    CHECK_EQ(mrd_stepctl_requested((int64_t)f + 500, &reason), 1);
    CHECK_EQ(reason, MRD_WINDOW_PROFILER_API);
    CHECK_EQ(mrd_stepctl_request(101, f, open_last, MRD_WINDOW_PROFILER_API), 0); /* repeat */
    CHECK_EQ(mrd_stepctl_request(101, f, f + 8, MRD_WINDOW_PROFILER_API), 2);     /* in time */
    CHECK_EQ(mrd_stepctl_requested((int64_t)f + 8, NULL), 1);
    CHECK_EQ(mrd_stepctl_requested((int64_t)f + 9, NULL), 0);
    CHECK_EQ(mrd_stepctl_request(101, f, f + 8, MRD_WINDOW_PROFILER_API), 0);     /* same last */
    CHECK_EQ(mrd_stepctl_request(101, f, f + 20, MRD_WINDOW_PROFILER_API), 0);    /* wider */
    CHECK_EQ(mrd_stepctl_request(101, f + 1, f + 3, MRD_WINDOW_PROFILER_API), 0); /* other first */
    CHECK_EQ(mrd_stepctl_requested((int64_t)f + 8, NULL), 1);
    CHECK_EQ(mrd_stepctl_requested((int64_t)f + 9, NULL), 0);
    /* the step f + 8 has begun here (steps up to f + 10 have): narrowing to it is late */
    uint64_t late0 = named("requests_narrowed_late");
    CHECK_EQ(mrd_stepctl_request(102, f + 2, f + 1000, MRD_WINDOW_PROFILER_API), 1);
    begin_steps(5 + 11); /* steps b .. f + 10 begun */
    CHECK_EQ(mrd_stepctl_request(102, f + 2, f + 8, MRD_WINDOW_PROFILER_API), 3);
    CHECK_EQ(mrd_stepctl_request(102, f + 2, f + 8, MRD_WINDOW_PROFILER_API), 0);
    CHECK_UEQ(named("requests_narrowed_late"), late0 + 1);
    CHECK_EQ(mrd_stepctl_requested((int64_t)f + 10, NULL), 0); /* ends as early as it can */
    /* the narrowed last step equal to steps_begun is still ahead (not begun) */
    CHECK_EQ(mrd_stepctl_request(103, f + 11, f + 1000, MRD_WINDOW_PROFILER_API), 1);
    CHECK_EQ(mrd_stepctl_request(103, f + 11, f + 11, MRD_WINDOW_PROFILER_API), 2);
    /* every slot not yet past is held: past narrowed requests make room for new ids */
    begin_steps(1); /* steps to f + 11 begun: 101, 102 (last f + 8) past, 103 (f + 11) not */
    for (uint64_t id = 200; id < 200 + MRD_WINDOW_REQUESTS_MAX - 1; id++)
        CHECK_EQ(mrd_stepctl_request(id, f + 100, f + 101, MRD_WINDOW_ON_DEMAND), 1);
    CHECK_EQ(mrd_stepctl_request(300, f + 100, f + 101, MRD_WINDOW_ON_DEMAND), -ENOSPC);
}

int main(void)
{
    mrd_stepctl_register_counters();
    test_profiler_serial();
    test_profiler_threads();
    test_narrow();
    printf("agent_stepctl: ok\n");
    return 0;
}
