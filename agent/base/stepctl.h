/* Step control: the process's step counter and the windows the aggregator asks for.
 *
 * Where it sits: in agent/base, below capture, core and transport, so that capture and
 * transport both reach it by plain calls and neither calls the other. Capture (agent/capture/window.c) counts steps here as the application
 * pushes and pops its NVTX step ranges and asks here whether a step belongs to a window the
 * aggregator requested; transport (agent/transport/clocklink.c) reads the counter into
 * every ClockProbe and hands every ClockReply's WindowRequests in. Test programs that
 * drive the agent without capture (tests/agent/agent_synth.c) use the same calls.
 *
 * Requests: at most MRD_WINDOW_REQUESTS_MAX (proto/steps.h) kept; a request is acted on
 * once per id. One whose first step this process has already begun is refused and
 * counted as late (opening it part-way would give ranks different steps); when every slot
 * holds a request that is not yet past, a new one is refused and counted as full. Both
 * counts (each refused id once, however often the aggregator repeats it) travel in the
 * Goodbye (category "window": requests_late, requests_full) with
 * requests_accepted.
 *
 * Threads: mrd_stepctl_begin/end and mrd_stepctl_requested run on application threads
 * (a few atomics; no lock, no allocation); mrd_stepctl_request and mrd_stepctl_snapshot on
 * the flusher thread. Request slots are published with a per-slot sequence (a seqlock):
 * a reader that sees a slot change while reading retries.
 */
#ifndef MRD_AGENT_STEPCTL_H
#define MRD_AGENT_STEPCTL_H

#include <stdint.h>

/* A step began: returns its number (0, 1, ...). */
int64_t mrd_stepctl_begin(void);

/* Step `step` ended after duration_ns. */
void mrd_stepctl_end(int64_t step, int64_t duration_ns);

/* The steps begun so far and the duration of the last step that ended (0: none). */
void mrd_stepctl_snapshot(uint64_t *steps_begun, int64_t *last_step_ns);

/* For a clock probe: the steps begun so far, the last completed step's duration, and the
 * longest step that ended since the previous call (0: none ended), so that a slow step
 * between two probes is reported even when faster ones ended after it. Resets that
 * maximum. One caller (the flusher). */
void mrd_stepctl_probe(uint64_t *steps_begun, int64_t *last_ns, int64_t *longest_ns);

/* A window the aggregator asks for (ClockReply.windows). Returns 1 accepted, 0 already
 * known (same id), -ETIME late (its first step has begun here), -ENOSPC no free slot,
 * -EINVAL (first > last or id 0). */
int mrd_stepctl_request(uint64_t id, uint64_t first, uint64_t last, int reason);

/* 1 when step belongs to an accepted request, *reason (may be NULL) its reason. */
int mrd_stepctl_requested(int64_t step, int *reason);

/* Registers the "window" request counters with the agent's named counters, once. */
void mrd_stepctl_register_counters(void);

#endif
