/* Steps counted from a collective (MERIDIAN_STEP_COLLECTIVE; the rule, and why every rank
 * numbers steps alike, in proto/collstep.h).
 *
 * Where it sits: the NCCL plugin (nccl_plugin.c) asks at each communicator's init whether
 * it is the step communicator (mrd__collsteps_claim) and hands every Coll start event of
 * that communicator in (mrd__collsteps_coll), before any pool allocation, so that a full
 * op pool never hides a step boundary. A collective that begins a step ends the previous
 * one and begins the next through window.c's step path, exactly as an NVTX step's pop and
 * push do: the window attaches at a window's first step, closes at its last and detaches
 * one step later (window.h).
 *
 * The step communicator: the first communicator whose init matches the rule's COMM (for
 * "world", the first whose size is the job's world size, any size when that is unknown).
 * Communicators spanning the job are created collectively in one order on every rank, so
 * every rank claims the same one; it is identified by NCCL's hash, the same on every rank.
 *
 * Threads: NCCL starts a communicator's Coll events in sequence order, one at a time (the
 * enqueueing application thread, or CUDA's host-callback thread for graph plans). The
 * state is guarded by a busy flag taken with one exchange, never waited on: a Coll event
 * finding it taken (two threads at once on the step communicator, which NCCL's ordering
 * rules out) is not fed and is counted (collstep/concurrent), since the rule can no longer
 * promise the same numbers everywhere. No allocation, no lock, no log on these paths.
 *
 * Each step that ended is recorded as an NVTX push/pop range "step N" in domain
 * "meridian.step" (from its first collective's start event to the next step's), so that the
 * analysis, which finds steps by the NVTX step-name rule, numbers the steps as the agent
 * did; the step in progress at exit has no record.
 *
 * Counters (category "collstep", in the Goodbye): period (the DDP rule's locked period in
 * AllReduces; 0 while searching or for an explicit rule), boundaries (steps begun here),
 * concurrent.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "capture.h"
#include "collstep.h"
#include "nccl_abi.h"
#include "ring.h"
#include "window.h"

static const char step_domain[] = "meridian.step";

static struct {
    atomic_int claimed;
    atomic_int busy;
    struct mrd_collstep_detect det; /* under busy */
    uint64_t open_tag;              /* under busy: the step in progress (0: none) */
    int64_t open_start;
    _Atomic uint64_t boundaries, concurrent, period;
} cs;

static size_t collstep_counters(struct mrd_named_counter *out, size_t max)
{
    const struct mrd_named_counter c[] = {
        {"collstep", "period", atomic_load(&cs.period)},
        {"collstep", "boundaries", atomic_load(&cs.boundaries)},
        {"collstep", "concurrent", atomic_load(&cs.concurrent)},
    };
    return mrd_agent_put_counters(out, max, c, sizeof(c) / sizeof(c[0]));
}

static int comm_matches(const struct mrd_collstep_rule *r, uint64_t comm_hash,
                        const char *comm_name, int nranks)
{
    if (r->comm == MRD_COLLSTEP_HASH)
        return comm_hash == r->comm_hash;
    if (r->comm == MRD_COLLSTEP_NAMED)
        return comm_name && strcmp(comm_name, r->comm_name) == 0;
    const struct mrd_agent_config *cfg = mrd_agent_config();
    return !cfg || cfg->world_size <= 0 || nranks == cfg->world_size;
}

int mrd__collsteps_claim(uint64_t comm_hash, const char *comm_name, int nranks)
{
    const struct mrd_collstep_rule *r = mrd__window_step_collective();
    if (!r || !comm_matches(r, comm_hash, comm_name, nranks))
        return 0;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&cs.claimed, &expect, 1))
        return 0;
    mrd_agent_add_counter_source(collstep_counters);
    return 1;
}

/* The step tagged `tag` (window.h) ended at `end`: its record, then window.c's pop (which
 * may close a window or ask for the detach). */
static void step_end(uint64_t tag, int64_t start, int64_t end)
{
    struct mrd_record r;
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_NVTX;
    r.str[0] = step_domain;
    snprintf(r.inline_str, sizeof(r.inline_str), "step %" PRIu64, tag - 1);
    r.ev.nvtx.start = start;
    r.ev.nvtx.end = end;
    r.ev.nvtx.kind = MRD_NVTX_PUSHPOP;
    r.ev.nvtx.thread = mrd__capture_tid();
    mrd_ring_write(&r);
    mrd__window_step_pop(tag, end - start);
}

void mrd__collsteps_coll(const struct mrd_nccl_coll_v5 *c)
{
    const struct mrd_collstep_rule *r = mrd__window_step_collective();
    if (!r || !mrd_collstep_func_is(r, c->func))
        return;
    if (atomic_exchange_explicit(&cs.busy, 1, memory_order_acquire)) {
        atomic_fetch_add_explicit(&cs.concurrent, 1, memory_order_relaxed);
        return;
    }
    int begins;
    if (r->mode == MRD_COLLSTEP_EXPLICIT) {
        begins = c->seq % r->every == 0;
    } else {
        begins = mrd_collstep_detect_feed(&cs.det, c->seq, mrd_collstep_key(c->count, c->datatype));
        atomic_store_explicit(&cs.period, cs.det.period, memory_order_relaxed);
    }
    if (begins) {
        if (cs.open_tag)
            step_end(cs.open_tag, cs.open_start, mrd_clock_now());
        cs.open_tag = mrd__window_step_begin();
        cs.open_start = mrd_clock_now(); /* after a window's attach, as for NVTX steps */
        atomic_fetch_add_explicit(&cs.boundaries, 1, memory_order_relaxed);
    }
    atomic_store_explicit(&cs.busy, 0, memory_order_release);
}
