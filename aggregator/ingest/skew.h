/* meridian ingest, collective skew: the arrival skew of every NCCL collective seen from all
 * ranks of its communicator, as batches arrive, and the trigger when one is far over the
 * usual (issue 9: "a collective's skew crosses a threshold relative to its running median").
 *
 * Where it sits: owned by the ingest loop. conn.c hands every accepted Batch in
 * (mrd_skew_batch) before the store gets it; a skew over the threshold is handed back to
 * the caller's on_hit, which opens a trigger window through window control
 * (mrd_winctl_trigger). No sockets, no clock of its own, no logging.
 *
 * The rules:
 *  - clock: the aggregator keeps no clock model while the run goes on (the fit runs at
 *    finalize), so this module keeps its own from the ClockSample rows the agents send in
 *    their batches (t0, t3: the agent's clock; t1, t2: the aggregator's global timebase):
 *    per rank the last MRD_SKEW_CLOCK_KEEP samples, and the one with the smallest round
 *    trip d = (t3 - t0) - (t2 - t1) gives the rank's live offset o = ((t1 - t0) + (t2 -
 *    t3)) / 2 (global = local + o), with error at most d / 2 plus the drift since that
 *    sample (1-2 ppm over the ~1 s the kept samples span: ~2 us). A skew therefore carries
 *    an error of at most (d_earliest + d_latest) / 2 + a few us; on loopback d is tens of
 *    us, across a data-centre network a few hundred;
 *  - an instance is (communicator hash, function, sequence number) of a collective
 *    (point-to-point operations have no sequence number and are skipped); its arrival on a
 *    rank is the op's start (the host time NCCL started the Coll event: the rank entered
 *    the collective), mapped to the global timebase; once every comm_rank of its
 *    comm_nranks has been seen (each once: a resent batch does not count twice), its skew
 *    is the latest minus the earliest arrival, and the latest rank is named;
 *  - a rank without a clock sample yet: its arrivals cannot be mapped; the instance
 *    completes without a skew (counted unaligned);
 *  - the median: per (communicator, function), over its last MRD_SKEW_HISTORY skews. A
 *    completed instance is a hit when at least min_count skews are held, the skew exceeds
 *    factor x that median, and it exceeds its own clock error bound (a skew the clocks
 *    could explain is not one); then the skew joins the history either way;
 *  - bounds: at most max_pending instances wait for their last rank: a new one beyond
 *    evicts the oldest created (counted evicted: a rank that never reports a collective
 *    costs nothing but this); communicators over MRD_SKEW_RANKS_MAX ranks, ranks over
 *    max_ranks, more than MRD_SKEW_GROUPS (communicator, function) pairs: ignored, counted.
 *    A resent batch whose instance already completed may open it again: it then waits
 *    until evicted.
 *
 * Workload: every collective op of every rank (up to tens of thousands a second in all):
 * O(1) per op (a hash probe), O(MRD_SKEW_HISTORY log MRD_SKEW_HISTORY) per completed
 * instance for the median. Memory: ~200 bytes x 2 x max_pending, ~450 bytes per rank seen,
 * ~1 KiB per (communicator, function). Loop thread only.
 */
#ifndef MRD_SKEW_H
#define MRD_SKEW_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "meridian.pb-c.h"

#define MRD_SKEW_MIN_COUNT   20   /* skews of a (communicator, function) before a hit */
#define MRD_SKEW_HISTORY     128  /* skews kept per (communicator, function) */
#define MRD_SKEW_GROUPS      256  /* (communicator, function) pairs tracked */
#define MRD_SKEW_RANKS_MAX   1024 /* communicator size tracked */
#define MRD_SKEW_CLOCK_KEEP  16   /* clock samples kept per rank */
#define MRD_SKEW_PENDING_MAX 4096 /* default max_pending */

struct mrd_skew;

struct mrd_skew_config {
    double factor;        /* > 1 */
    uint32_t min_count;   /* default MRD_SKEW_MIN_COUNT */
    uint32_t max_pending; /* default MRD_SKEW_PENDING_MAX */
    uint32_t max_ranks;   /* job ranks tracked (default 1024) */
};

/* A completed instance over the threshold. */
struct mrd_skew_hit {
    uint64_t comm_hash, seq;
    const char *func; /* NCCL's name (static) */
    int64_t skew_ns, median_ns, error_ns;
    uint32_t latest_rank, earliest_rank; /* job ranks */
    uint32_t nranks;
    size_t held; /* skews the median was taken over */
};

struct mrd_skew_counters {
    uint64_t completed; /* instances seen from every rank */
    uint64_t unaligned; /* ... of which some rank had no clock sample yet */
    uint64_t evicted;   /* instances dropped before their last rank came */
    uint64_t ignored;   /* ops not tracked: unknown function, caps */
    uint64_t hits;
};

/* Creates the tracker (zero fields of cfg take their defaults). Returns 0 and *out (free
 * with mrd_skew_free), -EINVAL (factor not > 1) or -ENOMEM. */
int mrd_skew_new(const struct mrd_skew_config *cfg, struct mrd_skew **out);

/* Frees everything; accepts NULL. */
void mrd_skew_free(struct mrd_skew *s);

/* A clock sample of `rank` (events.h: t0, t3 the agent's clock, t1, t2 global). */
void mrd_skew_clock(struct mrd_skew *s, uint32_t rank, const struct mrd_clock_sample *c);

/* Rank `rank` defined string `id` as `value`: remembered when it names a collective
 * function (the ops refer to their function by string id, per rank). */
void mrd_skew_string(struct mrd_skew *s, uint32_t rank, uint32_t id, const char *value);

/* One NCCL op of `rank`. Returns 1 with *hit filled when it completed an instance over the
 * threshold, else 0. */
int mrd_skew_op(struct mrd_skew *s, uint32_t rank, const struct mrd_nccl_op *op,
                struct mrd_skew_hit *hit);

/* Everything of one checked batch of `rank` (its strings, clock samples, then NCCL ops);
 * on_hit is called for each hit. */
void mrd_skew_batch(struct mrd_skew *s, uint32_t rank, const Meridian__V1__Batch *b,
                    void (*on_hit)(void *ctx, const struct mrd_skew_hit *hit), void *ctx);

/* The median skew of (comm_hash, func) now (0: none) and how many are held (may be NULL).
 * For logs and tests. */
int64_t mrd_skew_median(struct mrd_skew *s, uint64_t comm_hash, const char *func, size_t *held);

void mrd_skew_get_counters(const struct mrd_skew *s, struct mrd_skew_counters *out);

#endif
