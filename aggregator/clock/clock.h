/* Clock alignment: per-rank clock models, GPU timer calibration, causality check.
 *
 * Where it sits: after ingest. Agents store their NTP-style probes (t0/t3 in the rank's
 * local clock, CLOCK_MONOTONIC_RAW of its node; t1/t2 in the global timebase) in
 * `clock_samples`. The finalize step (`meridian profile`, `meridian report`) runs, in order:
 *   1. mrd_clock_fit_db        clock_samples            -> clock_models
 *   2. mrd_clock_gpu_fit_db    kernels + nccl_channels  -> gpu_timer_models (and the
 *                              op intervals' TEMP tables, aggregator/db, which the
 *                              finalize lets 3 reuse)
 *   3. mrd_clock_causality_db  nccl_ops + kernels       -> clock_causality, clock_adjustments
 *                                                          (and tightened clock_models)
 * after which any analysis maps a rank's local timestamp with mrd_clock_map().
 *
 * Workload: up to 512 ranks, a few thousand probes per rank, up to millions of NCCL
 * operations; everything streams from SQLite, memory is O(ranks^2 + samples of one rank).
 * Single-threaded; a model set is read-only after loading and may then be shared by
 * threads. Formulas, assumptions and the meaning of every bound: aggregator/clock/README.md.
 */
#ifndef MRD_CLOCK_H
#define MRD_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "events.h"

/* One piece of a rank's model: for local in [local_begin, local_end]
 *   global = local + offset_ns + drift_ppm * (local - local_begin) / 1e6
 * error_bound_ns bounds |true global - mapped| inside the piece (see README.md). */
struct mrd_clock_segment {
    int64_t local_begin, local_end;
    int64_t offset_ns;
    double drift_ppm;
    int64_t error_bound_ns;
    uint32_t samples; /* probes that carried the fit of this piece */
};

/* A rank's piecewise-linear model, continuous at segment boundaries. Segments are sorted
 * and contiguous. Owned by whoever received it; free with mrd_clock_model_destroy. */
struct mrd_clock_model {
    int rank;
    uint32_t nseg;
    struct mrd_clock_segment *seg;
    char method[32];
};

/* The default allowance for the probe path's own asymmetry (the kernel's send and receive
 * paths are not equally long: +0.1 to +0.4 us of bias measured on loopback and veth,
 * tests/bench/RESULTS.md; a statistical bound tighter than that, on a quiet machine, did
 * not cover it: multinode_aggregation, 2026-12-03). README.md, "What the bound means". */
#define MRD_CLOCK_FLOOR_ASYM_NS 500

struct mrd_clock_fit_options {
    int64_t window_ns;            /* probe selection window (default 2 s) */
    double keep_fraction;         /* lowest-round-trip fraction kept per window (0.2) */
    uint32_t keep_min;            /* but at least this many per window (2) */
    int64_t segment_ns;           /* target segment length (default 60 s) */
    uint32_t segment_min_samples; /* fewer kept probes than this merges segments (12) */
    double bound_z;               /* statistical part of the bound: z * standard error (3) */
    int64_t floor_asym_ns;        /* assumed asymmetry of the fastest path, added to the
                                     bound (default MRD_CLOCK_FLOOR_ASYM_NS: README.md) */
    double floor_asym_frac;       /* ... plus this fraction of half the fastest round trip
                                     (default 0) */
};

/* Fills *o with the defaults above. */
void mrd_clock_fit_options_default(struct mrd_clock_fit_options *o);

/* Fits one rank's model from its probes (any order; the array is not modified).
 * o NULL means defaults. Returns 0 and a new model in *out (caller owns), -ENODATA when
 * fewer than 2 usable probes exist, -EINVAL, -ENOMEM. Pure: no I/O. Any thread. */
int mrd_clock_fit_samples(const struct mrd_clock_sample *s, size_t n,
                          const struct mrd_clock_fit_options *o, struct mrd_clock_model **out);

/* Maps a local timestamp of the model's rank into the global timebase. Outside the fitted
 * span the nearest segment's line is extended. NULL model or no segment: returns local. */
int64_t mrd_clock_map(const struct mrd_clock_model *m, int64_t local);

/* The stored error bound that applies to local (nearest segment). 0 for NULL/empty. */
int64_t mrd_clock_bound(const struct mrd_clock_model *m, int64_t local);

/* Frees a model. NULL is fine. */
void mrd_clock_model_destroy(struct mrd_clock_model *m);

/* Fits every rank found in clock_samples and replaces its clock_models rows (one
 * transaction); clears clock_adjustments left by an earlier causality pass. One line per
 * rank is written to log (may be NULL). Returns the number of ranks fitted (>= 0), or
 * -MRD_ERR_SQLITE / -ENOMEM. Ranks with too few probes are skipped and logged. */
int mrd_clock_fit_db(sqlite3 *db, const struct mrd_clock_fit_options *o, FILE *log);

/* All ranks' models as stored in clock_models (tightened ones included). */
struct mrd_clock_models {
    int max_rank;                     /* models are indexed 0..max_rank */
    struct mrd_clock_model **by_rank; /* NULL where a rank has no model */
};

/* Loads every rank's model. Returns 0 and *out (caller owns; free with
 * mrd_clock_models_destroy), -MRD_ERR_SQLITE, -ENOMEM. A database without clock_models
 * gives an empty set. */
int mrd_clock_models_load(sqlite3 *db, struct mrd_clock_models **out);

/* The model of a rank, or NULL (no model, rank out of range, NULL set). */
const struct mrd_clock_model *mrd_clock_models_get(const struct mrd_clock_models *ms, int rank);

void mrd_clock_models_destroy(struct mrd_clock_models *ms);

/* ---- GPU timer calibration ------------------------------------------------------------
 * Per (rank, device): local = gpu_ns * slope + intercept_ns, fitted so that NCCL's
 * channel times fall inside what bounds them: CUPTI's record of their kernel (the chain
 * nccl_channels.op_id -> nccl_ops.launch_id -> external_correlations -> kernels), and
 * host times alone: the kernel's launch before and NCCL's KernelCh callback after (from
 * gpu_clock_samples, which the agent sends without CUPTI, or the launch's api_calls row
 * with nccl_channels.host_start_ns). README.md, "GPU timer calibration". */
struct mrd_gpu_timer_model {
    int rank, device;
    double slope;
    int64_t intercept_ns;
    int64_t error_bound_ns;
    uint32_t samples, rejected;
};

/* One calibration constraint: the GPU time g_lo maps to a local time >= lo (kernel start,
 * kernel launch, or sample - uncertainty) and g_hi to a local time <= hi (kernel end,
 * NCCL's callback, or sample + uncertainty). */
struct mrd_gpu_bracket {
    int64_t g_lo, lo; /* slope * g_lo + intercept >= lo */
    int64_t g_hi, hi; /* slope * g_hi + intercept <= hi */
};

/* Fits one GPU's map from n brackets; up to 1% of them (the most contradictory) may be
 * rejected as outliers. m->error_bound_ns bounds |true - mapped| over the span of the
 * brackets' GPU times for any line satisfying the kept brackets (slope uncertainty
 * included). Returns 0 and fills *m (rank/device left as given), 1 (relaxed: no line
 * satisfies the kept brackets; the bound is then the least maximal violation), -ENODATA
 * when n == 0, -ENOMEM. Pure. */
int mrd_clock_gpu_fit(const struct mrd_gpu_bracket *b, size_t n, struct mrd_gpu_timer_model *m);

/* Maps a raw GPU timer value to the rank's local clock. */
int64_t mrd_clock_gpu_map(const struct mrd_gpu_timer_model *m, int64_t gpu_ns);

/* Fits every (rank, device) with data and replaces gpu_timer_models (method: which evidence
 * the fit used, SCHEMA.md). Builds the op intervals' TEMP tables afresh on db first
 * (mrd_db_op_intervals(db, 1): the brackets read them), which the causality check may
 * then reuse (MRD_CLOCK_CAUSALITY_REUSE_OPS). Returns the number of GPUs fitted, or -MRD_ERR_SQLITE / -ENOMEM. Logs one line
 * per GPU to log (may be NULL). */
int mrd_clock_gpu_fit_db(sqlite3 *db, FILE *log);

/* ---- causality check --------------------------------------------------------------------
 * For every collective instance matched across ranks (nccl_ops with equal comm_hash, seq,
 * func_id; not p2p), each rank's kernel interval in the global timebase; a violation is
 * rank A's kernel ending before rank B's kernel of the same instance began, where A
 * depends on B's data (any pair, except in rooted collectives: mrd_clock_coll_order
 * below). Violations are
 * counted per pair of ranks, then each rank's offset is shifted by the constant that keeps
 * every instance causal while staying inside the ranks' error bounds (the centre of its
 * feasible interval; where the evidence contradicts the bounds, the bounds of the fewest
 * ranks are widened by the least that makes it consistent), and counted again. */
struct mrd_clock_causality_summary {
    uint64_t instances;         /* matched instances with >= 2 ranks */
    uint64_t violations_before; /* (instance, rank pair) violations */
    uint64_t violations_after;
    int64_t max_violation_before_ns, max_violation_after_ns;
    int64_t max_shift_ns; /* largest |offset change| of any rank */
    double bound_scale;   /* 1 when the evidence fits the stored bounds, else the
                             largest widening factor needed */
    int consistent;       /* 0: some ranks' evidence cannot be satisfied by any
                             offsets (those ranks were not moved) */
    int64_t slack_ns;     /* > 0: no constant offsets make every instance causal (the
                             ranks' errors drifted within their bounds); the largest
                             relaxation of a pair constraint (mrd_clock_tighten) */
    int ranks;
};

/* What mrd_clock_causality_db does besides counting (flags, or-ed). */
enum {
    MRD_CLOCK_CAUSALITY_APPLY = 1,      /* write the results and apply the shifts */
    MRD_CLOCK_CAUSALITY_REUSE_OPS = 2,  /* use the op intervals already built on this
                                           connection (the finalize: mrd_clock_gpu_fit_db
                                           built them just before) instead of afresh */
};

/* Runs the check over db's NCCL data with the stored clock and GPU timer models; with
 * MRD_CLOCK_CAUSALITY_APPLY writes clock_causality (per pair) and clock_adjustments (per
 * rank) and applies the shifts to clock_models (an earlier pass's shifts are undone first,
 * so running it twice gives the same result); without it only counts (nothing is written).
 * Prints a summary and per-pair table to log (may be NULL). The op intervals are built
 * afresh from the current rows (mrd_db_op_intervals(db, 1)), or with
 * MRD_CLOCK_CAUSALITY_REUSE_OPS taken as this connection has them (built when absent).
 * Returns 0 (*sum filled when non-NULL), -MRD_ERR_SQLITE, -ENOMEM. */
int mrd_clock_causality_db(sqlite3 *db, int flags, struct mrd_clock_causality_summary *sum,
                           FILE *log);

/* What a collective's data flow guarantees about the order of its ranks' kernels, by
 * NCCL function name (nccl_ops.func_id's string):
 *   ALL_TO_ALL  every rank's output depends on every rank's input: no rank's kernel can end
 *               before another's began (AllReduce, AllGather, ReduceScatter, AlltoAll, and
 *               any name not listed below, NULL included);
 *   FROM_ROOT   only the non-roots depend on the root (Broadcast, Scatter): the root can
 *               finish before a peer starts (its data waits in the peer's buffers; seen on
 *               the H200 host: a 3840-byte Broadcast's root ended 414 us before the
 *               receiver's kernel began);
 *   TO_ROOT     only the root depends on the others (Reduce, Gather).
 * The root is the rank whose nccl_ops.comm_rank equals nccl_ops.root. Case-insensitive;
 * pure, any thread. */
enum mrd_clock_coll_order { MRD_CLOCK_ALL_TO_ALL, MRD_CLOCK_FROM_ROOT, MRD_CLOCK_TO_ROOT };
enum mrd_clock_coll_order mrd_clock_coll_order(const char *func);

/* One rank's pair constraint for the pure solver: c[b] - c[a] <= w. */
struct mrd_clock_constraint {
    int a, b;
    int64_t w;
};

/* Pure solver behind mrd_clock_causality_db, exposed for tests: n ranks with bounds
 * bound[r] >= 0 and constraints, solved separately per connected set of ranks. Writes per
 * rank the shift c[r] (the centre of its feasible interval), new_bound[r] (half that
 * interval) and scale[r]: 1 when the evidence fits its bound, > 1 the factor by which its
 * bound had to be widened (the rank whose widening costs least, repeatedly), 0 when its
 * set's constraints contradict each other by more than errors within the bounds explain
 * (then c[r] = 0 and new_bound[r] = bound[r]). A set whose constraints contradict each
 * other by less (the ranks' errors varied during the run within their bounds: drift) is
 * relaxed first: each contradicting pair to the midpoint of its own evidence, longer
 * cycles by the least common slack; slack[r] (may be NULL) is the largest relaxation of
 * any of r's constraints, 0 where none was needed. Returns the number of ranks in
 * contradictory sets (>= 0), -ENOMEM, -EINVAL. Pure. */
int mrd_clock_tighten(int n, const int64_t *bound, const struct mrd_clock_constraint *cons,
                      size_t ncons, int64_t *c, int64_t *new_bound, double *scale, int64_t *slack);

/* A daemon's own timebase anchors: CLOCK_MONOTONIC and CLOCK_REALTIME read as one instant
 * (bracketed, the tightest of a few tries; anchor.c). Returns the bracket's width in ns: the
 * pair describes one instant to within half of it. */
int64_t mrd_clock_anchor_pair(int64_t *monotonic_ns, int64_t *realtime_ns);
#define MRD_CLOCK_ANCHOR_WARN_NS 1000000 /* a wider bracket is logged by its reader */

/* The daemon's CLOCK_MONOTONIC in ns (anchor.c): the clock the anchors' monotonic half is
 * read on, and the one its timers (store commits, uplink liveness) measure with. */
int64_t mrd_clock_mono_ns(void);

#endif
