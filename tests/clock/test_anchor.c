/* clock_anchor: the daemon's (CLOCK_MONOTONIC, CLOCK_REALTIME) anchor pair is read as one
 * instant (aggregator/clock/anchor.c). Scripted clocks: a preemption inside the first
 * brackets must not reach the pair (the tightest bracket wins, the monotonic anchor is its
 * midpoint); then the real clocks: the monotonic anchor lies between reads taken before
 * and after the call.
 */
#include <stdio.h>
#include <time.h>

#include "check.h"
#include "clock_internal.h"

/* A scripted pair of clocks: realtime = monotonic + 1000 s exactly; each read advances
 * monotonic time by 20 ns, plus gap[k] before the k-th read. */
struct script {
    int64_t now;
    int k;
    int64_t gap[3 * MRD_ANCHOR_TRIES];
};

static int64_t scripted(clockid_t id, void *arg)
{
    struct script *s = arg;
    if (s->k < 3 * MRD_ANCHOR_TRIES)
        s->now += s->gap[s->k];
    s->k++;
    s->now += 20;
    return id == CLOCK_REALTIME ? s->now + 1000000000000LL : s->now;
}

int main(void)
{
    /* 1: preempted for 5 ms between the realtime read and the second monotonic read of
     * tries 1-3, and for 2 ms before the realtime read of try 5: try 4 is the tightest, and
     * its midpoint is exact (the midpoint of a preempted try would be 2.5 ms off). */
    struct script s = {.now = 5000000000LL};
    for (int t = 0; t < 3; t++)
        s.gap[3 * t + 2] = 5000000;
    s.gap[3 * 4 + 1] = 2000000;
    int64_t mono = 0, rt = 0;
    int64_t width = mrd__clock_anchor_pair_read(scripted, &s, &mono, &rt);
    CHECK(s.k == 3 * MRD_ANCHOR_TRIES);
    CHECK_EQ(width, 40);
    CHECK_EQ(rt - mono, 1000000000000LL); /* the midpoint of 20 ns on each side */

    /* 2: every bracket preempted the same way: the first of the tightest is kept, and its
     * width says how far the pair may be off. */
    struct script p = {.now = 1};
    for (int t = 0; t < MRD_ANCHOR_TRIES; t++)
        p.gap[3 * t + 1] = 1000000;
    width = mrd__clock_anchor_pair_read(scripted, &p, &mono, &rt);
    CHECK_EQ(width, 1000040);
    CHECK(rt - mono > 1000000000000LL && rt - mono - 1000000000000LL <= width / 2 + 20);

    /* 3: the real clocks */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    width = mrd_clock_anchor_pair(&mono, &rt);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK(width >= 0);
    CHECK(mono >= (int64_t)a.tv_sec * 1000000000LL + a.tv_nsec);
    CHECK(mono <= (int64_t)b.tv_sec * 1000000000LL + b.tv_nsec);
    CHECK(rt > 1600000000LL * 1000000000LL); /* a realtime clock after 2020 */
    printf("clock_anchor: ok (real clocks: bracket %lld ns)\n", (long long)width);
    return 0;
}
