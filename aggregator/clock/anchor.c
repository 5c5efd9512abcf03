/* The (CLOCK_MONOTONIC, CLOCK_REALTIME) anchor pair a daemon's own timebase starts from.
 *
 * Where it sits: read once when meridiand's store opens a run (store.c setup_run) and when
 * its uplink starts (uplink.c); global time is then realtime_anchor + (CLOCK_MONOTONIC -
 * monotonic_anchor). Not on any hot path.
 *
 * Contract: the pair is read bracketed, monotonic - realtime - monotonic, up to
 * MRD_ANCHOR_TRIES times, keeping the tightest bracket; the monotonic anchor is the
 * bracket's midpoint, so the two values describe one instant to within half the returned
 * width. Two plain reads in a row (what store.c and uplink.c did before) carry any
 * preemption between them into the wall-clock anchor unseen. Clock alignment does not
 * depend on this (it uses the agents' probes); what does is where the run's global time sits
 * against UTC, and how far apart two daemons' anchors are before alignment.
 */
#include <time.h>

#include "clock_internal.h"

static int64_t read_ns(clockid_t id, void *arg)
{
    struct timespec ts;
    (void)arg;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t mrd_clock_mono_ns(void)
{
    return read_ns(CLOCK_MONOTONIC, NULL);
}

int64_t mrd__clock_anchor_pair_read(int64_t (*read)(clockid_t, void *), void *arg,
                                    int64_t *monotonic_ns, int64_t *realtime_ns)
{
    int64_t best = -1;
    for (int i = 0; i < MRD_ANCHOR_TRIES; i++) {
        int64_t m0 = read(CLOCK_MONOTONIC, arg);
        int64_t rt = read(CLOCK_REALTIME, arg);
        int64_t m1 = read(CLOCK_MONOTONIC, arg);
        if (best < 0 || m1 - m0 < best) {
            best = m1 - m0;
            *monotonic_ns = m0 + (m1 - m0) / 2;
            *realtime_ns = rt;
        }
    }
    return best;
}

int64_t mrd_clock_anchor_pair(int64_t *monotonic_ns, int64_t *realtime_ns)
{
    return mrd__clock_anchor_pair_read(read_ns, NULL, monotonic_ns, realtime_ns);
}
