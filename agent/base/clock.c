/* The agent's clocks (contract in clock.h).
 *
 * Where it sits: agent/base, called by every other part of the agent. Workload: up to
 * ~200,000 mrd_clock_now() calls/s on application threads: one vDSO read and one relaxed
 * atomic load each.
 */
#include "clock.h"

#include <stdatomic.h>
#include <time.h>

static _Atomic double g_rate_minus_1; /* MERIDIAN_TEST_CLOCK_PPM * 1e-6; 0 normally */

static int64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mrd_clock_now(void)
{
    int64_t raw = read_ns(CLOCK_MONOTONIC_RAW);
    double k = atomic_load_explicit(&g_rate_minus_1, memory_order_relaxed);
    if (k != 0.0)
        raw += (int64_t)((double)raw * k);
    return raw;
}

int64_t mrd__mono_ns(void)
{
    return read_ns(CLOCK_MONOTONIC);
}

void mrd_clock_set_test_ppm(double ppm)
{
    atomic_store(&g_rate_minus_1, ppm * 1e-6);
}
