/* Capture tiers and full-detail windows (capture-internal).
 *
 * Two tiers, one agent (agent/ENVIRONMENT.md, "Tiers and windows"):
 *  - full (MERIDIAN_TRACE=full): CUPTI attached for the whole run (cupti.c, as set up in
 *    InitializeInjection).
 *  - steady (MERIDIAN_TRACE=steady): CUPTI detached; the NCCL plugin, NVTX and MPI capture
 *    run for the whole job. CUPTI is attached only for windows: ranges of step numbers
 *    (MERIDIAN_WINDOWS, the grammar of proto/steps.h), the same numbers on every rank.
 *
 * Steps: the NVTX push/pop ranges whose message matches MERIDIAN_STEP_NAME (proto/steps.h's
 * rule; default "step", "train_step", "training step", "ProfilerStep#N"), numbered from 0
 * per process in push order, in both tiers, by the agent's step counter
 * (agent/base/stepctl.h, which the ClockProbes report). nvtx.c calls mrd__window_step_push
 * for every push and keeps the returned tag in the range's frame; mrd__window_step_pop
 * with that tag at its pop.
 * Or, with MERIDIAN_STEP_COLLECTIVE set (proto/collstep.h's rule), steps counted from a
 * collective instead: the NCCL plugin (collsteps.c) calls mrd__window_step_begin at each
 * collective that begins a step and mrd__window_step_pop for the step before it, and NVTX
 * ranges are not steps.
 *
 * Windows come from MERIDIAN_WINDOWS and from the aggregator (ClockReply.windows, kept by
 * stepctl: on demand, triggers, a delay, the application's profiler API calls); a step
 * belongs to a window when either holds it.
 *
 * A window of steps A..B (consecutive window steps form one window):
 *  - push of step A: CUPTI is attached on that thread (mrd__cupti_attach, ~11-12 ms on an
 *    H200), so every kernel launched from then on is traced;
 *  - pop of step B: the window closes (mrd__cupti_close): the first CUDA launch after it
 *    (or copy or set, when traced; any API call with MERIDIAN_CUPTI_CLOSE=domains)
 *    gives the correlation boundary, and records of launches at or after it are not
 *    stored (a kernel belongs to the step in which it was launched);
 *  - pop of step B+1: the detach is requested (mrd__cupti_detach_request): CUPTI's helper
 *    thread force-flushes, and the next CUDA API exit callback calls cuptiFinalize (CUPTI's
 *    documented dynamic detach), after which mrd__window_detached records the window.
 *    Step B+1 runs attached so that step B's kernels, still on the GPU at its pop, are
 *    complete before the flush; its records are dropped by the boundary.
 * The steps in which a rank attached (A) and detached (B+1) are in the window record.
 *
 * The record: a `window` event (proto/kinds.h, table window_records) from the attach's
 * start to the detach's end, with the steps, the reason and the attach, detach and flush
 * costs (the finalize step derives the windows table from it; aggregator/SCHEMA.md;
 * agents before it wrote an NVTX range in domain "meridian.window", which is still read).
 * A window still open at exit is recorded by the exit path with detach_ns = -1. Counters (category "window", the Goodbye):
 * opened, skipped (a window step found CUPTI busy attaching or detaching), failed
 * (attach refused), records_outside (CUPTI records dropped by the boundary), closes and
 * close_ns (the closes at step B's pop and their summed time: the stall the close adds to
 * the window's last step, in none of the record's costs); stepctl adds
 * steps and the aggregator's requests (accepted, late, full).
 *
 * Threads: push/pop run on application threads (once per step: a few atomics, and the
 * attach itself in a window's first step); mrd__window_detached runs in CUPTI's API exit
 * callback on whatever thread made that call.
 */
#ifndef MRD_WINDOW_H
#define MRD_WINDOW_H

#include <stdint.h>

#include "capture.h"

/* Reads MERIDIAN_TRACE, MERIDIAN_WINDOWS, MERIDIAN_STEP_NAME and MERIDIAN_STEP_COLLECTIVE
 * once (later calls return the first answer). Returns 1 for the steady tier, 0 for full, -EINVAL on a bad value
 * (said once on stderr: CUDA capture then stays off). Any thread. */
int mrd__window_config(void);

/* The steady tier's CUPTI side is ready (InitializeInjection ran and kept CUPTI detached):
 * windows may attach from now on. */
void mrd__window_cupti_ready(void);

/* A push/pop range was pushed with this message (may be NULL). Returns 0 when it is not a
 * step (also while steps come from a collective), else a tag (step number + 1) for the pop.
 * May attach CUPTI when the step opens a window. Application threads. */
uint64_t mrd__window_step_push(const char *message);

/* A step begins (whatever its source): counts it, and may attach CUPTI when it opens a
 * window. Returns the tag for mrd__window_step_pop (step number + 1), 0 when the
 * configuration is bad. Application threads (NCCL's, for collective steps). */
uint64_t mrd__window_step_begin(void);

/* The collective step rule (MERIDIAN_STEP_COLLECTIVE), or NULL when steps are NVTX ranges
 * (or the configuration is bad). Any thread. */
struct mrd_collstep_rule;
const struct mrd_collstep_rule *mrd__window_step_collective(void);

/* The step range tagged `tag` (non-zero) was popped after duration_ns. May close the
 * window or request the detach. Application threads. */
void mrd__window_step_pop(uint64_t tag, int64_t duration_ns);

/* CUPTI was finalized in an API exit callback (cupti.c): records the window. end: when the
 * detach finished (agent clock); detach_ns: cuptiFinalize's own time on the calling
 * thread; flush_ns: the forced flush on the helper thread before it. Any thread. */
void mrd__window_detached(int64_t end, int64_t detach_ns, int64_t flush_ns);

/* Counts a CUPTI record dropped by the window's boundary. Any thread. */
void mrd__window_count_outside(uint64_t n);

#endif
