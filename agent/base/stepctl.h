/* Step control: the process's step counter and the windows the aggregator asks for.
 *
 * Where it sits: in agent/base, below capture, core and transport, so that capture and
 * transport both reach it by plain calls and neither calls the other. Capture
 * (agent/capture/window.c) counts steps here as they begin and end (the application's NVTX
 * step ranges, or with MERIDIAN_STEP_COLLECTIVE the collectives that begin steps,
 * agent/capture/collsteps.c) and asks here whether a step belongs to a window the
 * aggregator requested; transport
 * (agent/transport/clocklink.c) reads the counter into every ClockProbe and hands every
 * ClockReply's WindowRequests in. Test programs that drive the agent without capture
 * (tests/agent/agent_synth.c) use the same calls.
 *
 * Requests: at most MRD_WINDOW_REQUESTS_MAX (proto/steps.h) kept; a request is acted on
 * once per id. One whose first step this process has already begun is refused and
 * counted as late (opening it part-way would give ranks different steps); when every slot
 * holds a request that is not yet past, a new one is refused and counted as full. Both
 * counts (each refused id once, however often the aggregator repeats it) travel in the
 * Goodbye (category "window": requests_late, requests_full) with requests_accepted,
 * requests_narrowed_late, profiler_starts and profiler_stops.
 *
 * Narrowing: the aggregator sends a profiler_api window (the application's
 * cudaProfilerStart) open-ended, and sends the same id again with a smaller `last` once the
 * application's stop is reported. A request for an id held with a smaller last (same
 * first) narrows the slot: in time when the new last step has not begun here; otherwise
 * the window still ends as early as it can (the step in progress is its last here) and
 * the narrowing is counted as late (requests_narrowed_late). A larger last for a held id
 * is ignored. An older agent ignored every repeat of an id it held: its profiler_api
 * window runs to the open-ended last (first + MRD_WINCTL_LENGTH_MAX - 1) or its exit.
 *
 * Profiler API: libmeridian_profapi.so (agent/profapi/) reports the application's
 * cudaProfilerStart/Stop and cuProfilerStart/Stop calls here. Only effective calls count
 * (a start while started, a stop while stopped, changes nothing, as in CUDA), so starts
 * and stops alternate; the counts and the step counter at the latest of each travel in
 * every ClockProbe, and the aggregator turns them into profiler_api windows.
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

/* A window the aggregator asks for (ClockReply.windows). Returns 1 accepted, 2 a held id
 * narrowed in time, 3 a held id narrowed late (its new last step has begun here: the
 * window ends with the step in progress), 0 already known (same id, nothing to narrow),
 * -ETIME late (its first step has begun here), -ENOSPC no free slot, -EINVAL (first >
 * last or id 0). */
int mrd_stepctl_request(uint64_t id, uint64_t first, uint64_t last, int reason);

/* 1 when step belongs to an accepted request, *reason (may be NULL) its reason. */
int mrd_stepctl_requested(int64_t step, int *reason);

/* The application called cudaProfilerStart (start = 1) or cudaProfilerStop (start = 0),
 * or their driver forms. Counted only when it changes the state (see above); registers
 * the "window" counters (so a process without steps reports its calls too). Any
 * thread: a few atomics, no lock. */
void mrd_stepctl_profiler_call(int start);

/* For a clock probe: the effective starts and stops so far and steps_begun at the latest
 * of each (0 when none). Any thread. */
void mrd_stepctl_profiler_snapshot(uint64_t *starts, uint64_t *start_step, uint64_t *stops,
                                   uint64_t *stop_step);

/* Registers the "window" request counters with the agent's named counters, once. */
void mrd_stepctl_register_counters(void);

#endif
