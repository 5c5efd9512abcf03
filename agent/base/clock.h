/* The agent's clocks (agent/base: below core, capture and transport alike).
 *
 * Two clocks, one each for events and for timers:
 *   mrd_clock_now()  the event clock: CLOCK_MONOTONIC_RAW ns, with the test-only rate knob
 *                    (MERIDIAN_TEST_CLOCK_PPM) applied. Every source in the process stamps
 *                    with it (CUPTI is handed it through its timestamp callback), and the
 *                    clock probes' t0 and t3 come from it.
 *   mrd__mono_ns()   the timers' clock: CLOCK_MONOTONIC ns (deadlines, backoff, batch age);
 *                    never stamped into an event.
 * Both are vDSO reads: safe on hot paths (no lock, no allocation, no system call).
 */
#ifndef MRD_AGENT_CLOCK_H
#define MRD_AGENT_CLOCK_H

#include <stdint.h>

/* The event clock (see above). Any thread. */
int64_t mrd_clock_now(void);

/* The timers' clock (see above). Any thread. */
int64_t mrd__mono_ns(void);

/* Sets the test-only rate knob: mrd_clock_now() = raw * (1 + ppm / 1e6), anchored at raw 0
 * so a test can compute the true raw time of any local stamp. 0 (the default) leaves the
 * clock alone. Called once by the agent core at start; any thread. */
void mrd_clock_set_test_ppm(double ppm);

#endif
