/* Cross-rank analysis of one meridian database: per-rank inventory, communication /
 * compute overlap, collectives matched across ranks, stragglers, per-step breakdown.
 *
 * Where it sits: the last stage of the aggregator's data flow, after the store (the
 * tables) and the clock fit (clock_models); the report, HTML, JSON and Perfetto exports
 * (aggregator/export) and the `meridian` CLI consume the struct it fills.
 *
 * Workload: databases of up to hundreds of millions of events from up to 512 ranks,
 * analysed on one machine in bounded memory. Rows are streamed in time or key order with
 * prepared statements, never loaded whole; what is kept is per rank (a few KiB each), per
 * step (MRD_AN_MAX_STEPS at most; later steps are counted, not broken down) and per
 * collective instance (one row per participating rank, for one instance at a time).
 * Helper indexes live in TEMP tables, so a read-only database works.
 *
 * Definitions (also printed by the report):
 * - communication kernels: kernels linked to an nccl_ops row through
 *   external_correlations; as a fallback, kernels whose name (after a C++ mangling
 *   prefix) starts with "nccl". The rank's method says which: "correlation" (all linked),
 *   "kernel-name" (none linked), "correlation+name" (some found only by name).
 * - hidden comm = |union(comm) intersect union(compute)| on the same GPU; exposed = comm
 *   time not covered by any compute kernel; ratio = hidden / |union(comm)| (HTA's
 *   sum|C n M| / sum|M|).
 * - a collective instance = the nccl_ops rows of all ranks with equal (comm_hash, seq,
 *   func) (p2p excluded); each rank's interval is its kernel's (or, without a linked
 *   kernel, its NCCL channels' calibrated GPU times) in the global timebase. Arrival
 *   skew = max start - min start; the last arriver has the latest start; a rank's wait =
 *   last start - own start; the instance's cost = sum of the waits (what the last arriver
 *   cost the others).
 * - straggler ranking: ranks ordered by wait they caused (sum of the costs of instances
 *   they arrived last in), then by how often they arrived last, then by rank. Equal
 *   latest starts make the lowest rank the last arriver. When the run has NVTX step
 *   ranges, the ranking counts only the instances within the steps: from the start of
 *   the first step range to the end of the last (of the last arriver's rank, else of any
 *   rank in the instance), between two steps included (ranked_in_steps). Warm-up and
 *   start-up collectives (the first one can wait tens of ms for a rank's initialisation)
 *   would otherwise outweigh the steady state the question is about; what was left out
 *   is reported (outside_steps*).
 */
#ifndef MRD_ANALYZE_H
#define MRD_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "db.h"
#include "fingerprint.h"
#include "timebase.h"

#define MRD_AN_NKINDS            13   /* event tables counted per rank, see mrd_analyze_kind_name */
#define MRD_AN_MAX_GPUS          16   /* GPUs listed per rank; more are counted in ngpus_total */
#define MRD_AN_MAX_DROPS         16   /* drop reasons kept per rank; more are summed in "other" */
#define MRD_AN_MAX_DEVICES       16   /* devices swept per rank; more are folded into the last */
#define MRD_AN_MAX_STEPS         1024 /* steps broken down; later ones are counted only */
#define MRD_AN_MAX_COLLS         64   /* (communicator, function) summaries; more into "other" */
#define MRD_AN_MAX_WARNINGS      16
#define MRD_AN_MAX_PAIRS         16 /* rank pairs with causality violations listed (the worst) */
#define MRD_AN_HIST_BINS         40 /* skew histogram: bin 0 = [0,1us), bin i = [2^(i-1),2^i) us */
#define MRD_AN_MAX_WINDOW_RANGES 8  /* window step ranges listed per rank; more are counted */

/* How a rank's communication kernels were recognised: all through correlation, all by
 * name, or both (some NCCL-named kernels had no correlation record). */
enum mrd_an_method {
    MRD_AN_METHOD_NONE = 0,
    MRD_AN_METHOD_CORRELATION,
    MRD_AN_METHOD_NAME,
    MRD_AN_METHOD_MIXED
};

struct mrd_an_overlap {
    int64_t comm_ns;    /* |union of communication kernels| */
    int64_t compute_ns; /* |union of compute kernels| */
    int64_t hidden_ns;  /* comm time covered by compute on the same GPU */
    int64_t exposed_ns; /* comm_ns - hidden_ns */
    int64_t busy_ns;    /* |union of all kernels| */
    int64_t span_ns;    /* first kernel start .. last kernel end (summed over devices) */
    uint64_t comm_kernels, compute_kernels;
    uint64_t name_only_kernels; /* comm kernels found by name only, not by correlation */
    uint64_t short_kernels;     /* kernels shorter than MRD_FIND_TINY_NS (findings.h) */
    double ratio;               /* hidden / comm, 0 when comm_ns == 0 */
    int method;                 /* enum mrd_an_method */
};

struct mrd_an_gpu {
    int device;
    char name[64], uuid[64], pci[32];
};

struct mrd_an_drop {
    char reason[32];
    uint64_t n;
};

/* One rank's part in a set of timed collective instances: those it took part in, those
 * it arrived last in, the wait it caused (sum of their costs) and the wait it spent. */
struct mrd_an_wait {
    uint64_t instances, times_last;
    int64_t caused_ns, suffered_ns;
};

struct mrd_an_rank {
    int rank, local_rank, pid, world_size, goodbye;
    char host[128];
    int ngpus, ngpus_total;
    struct mrd_an_gpu gpus[MRD_AN_MAX_GPUS];
    uint64_t events[MRD_AN_NKINDS]; /* rows stored, by table (mrd_analyze_kind_name) */
    uint64_t captured_total;        /* the agent's own count of captured events */
    int ndrops;
    struct mrd_an_drop drops[MRD_AN_MAX_DROPS];
    uint64_t dropped_total;
    /* clock model (clock_models); fitted 0 = "not fitted" */
    int clock_fitted, clock_segments;
    int64_t clock_offset_ns, clock_error_bound_ns, clock_samples;
    double clock_drift_ppm;
    char clock_method[32];
    int clock_adjusted;     /* the causality check moved this rank's offset */
    int64_t clock_shift_ns; /* ... by this much (clock_adjustments.shift_ns) */
    struct mrd_an_overlap ov;
    /* collectives and stragglers */
    uint64_t instances;          /* instances this rank took part in with a timed interval */
    uint64_t times_last;         /* instances in which it arrived last (of >= 2 timed ranks) */
    int64_t wait_caused_ns;      /* sum of costs of those instances */
    int64_t wait_suffered_ns;    /* sum of its own waits */
    uint64_t steps;              /* NVTX step ranges found on this rank */
    struct mrd_an_wait in_steps; /* the four above over instances within the steps */
    /* the agent's own cost (agent_counters, categories agent and cupti): its NVTX and NCCL
     * callbacks sampled one in 64 and the time they took, CUPTI's own overhead records,
     * and the times CUPTI's completion thread waited for ring space (pacing) */
    int has_cost;
    int has_cupti_overhead; /* 0: the agent recorded no OVERHEAD records (SELF_RECORDS=0) */
    uint64_t cost_samples, cost_sampled_ns, cost_calls_est, cupti_overhead_ns;
    uint64_t cupti_pace_waits, cupti_pace_wait_ns;
};

struct mrd_an_coll {
    uint64_t comm_hash;
    char func[32];
    uint64_t instances, complete, timed; /* timed: with >= 2 timed ranks */
    int64_t skew_sum_ns, skew_max_ns, cost_ns;
};

/* One pair of ranks from the clock fit's causality check (clock_causality). */
struct mrd_an_pair {
    int rank_a, rank_b;
    uint64_t instances, violations_before, violations_after;
    int64_t max_violation_before_ns, max_violation_after_ns;
};

struct mrd_an_step {
    int64_t index;            /* ordinal of the step range on each rank, from 0 */
    int64_t start_ns, end_ns; /* earliest start / latest end over ranks (global) */
    uint64_t instances;
    int64_t cost_ns, max_skew_ns;
    int worst_rank; /* rank that caused the most wait in the step, -1 if none */
    int64_t worst_caused_ns;
    int capture; /* MRD_AN_ATTACH | MRD_AN_DETACH: some rank attached / detached CUPTI in it */
};
#define MRD_AN_ATTACH 1
#define MRD_AN_DETACH 2

/* One matched instance, handed to mrd_analyze_options.on_instance (tests, scripts). */
struct mrd_an_instance {
    uint64_t comm_hash, seq;
    const char *func;
    int nranks;                 /* rows found */
    int ntimed;                 /* rows with an interval in the comparable timebase */
    int comm_nranks;            /* communicator size the rows declare (max) */
    const int *ranks;           /* [ntimed] */
    const int64_t *start, *end; /* [ntimed] global (or local) ns */
    int last_rank;              /* -1 when ntimed < 2 */
    int64_t skew_ns, cost_ns;
    int64_t step; /* -1 when no step range holds it */
};

/* One rank's capture windows (the steady tier; table `windows`, derived at finalize). */
struct mrd_an_windows {
    int rank;
    uint64_t windows;
    uint64_t open_at_exit; /* windows still attached when the process exited */
    uint64_t steps;        /* steps inside its windows (sum of last - first + 1) */
    uint64_t kernels;      /* kernels inside its windows */
    int64_t first_step, last_step;
    int64_t attach_median_ns; /* median stall of the application thread by the attach */
    int64_t detach_median_ns; /* median cuptiFinalize time of the closed windows; -1: none */
    int64_t close_mean_ns;    /* mean stall of the window's last step by its close (CUPTI's API
                                 callbacks enabled for the boundary; counters window/close_ns,
                                 window/closes); -1: none counted (an older agent, no
                                 window closed, or the rank's counters never arrived) */
    int nranges;              /* the first MRD_AN_MAX_WINDOW_RANGES windows' steps */
    int64_t ranges[MRD_AN_MAX_WINDOW_RANGES][2];
};

struct mrd_analyze_options {
    int ignore_clock_models; /* use local clocks even when models exist */
    const char *step_name;   /* NVTX step range prefix; NULL = "step", "train_step",
                                "training step", "ProfilerStep#" (see match.c) */
    void (*on_instance)(const struct mrd_an_instance *in, void *ctx);
    void *ctx;
};

struct mrd_analysis {
    char run_id[128];
    char command[512];
    int64_t world_size, anchor_realtime_ns, created_ns;
    int global_timebase; /* 1 when clock models were used */
    /* the origin every output shows times from (mrd_timebase_origin): global ns, or local
     * ns when global_timebase is 0; step and instance times below are absolute */
    int64_t time_origin_ns;
    int nranks;
    struct mrd_an_rank *ranks; /* [nranks], ascending rank */
    /* aggregator-side counters */
    uint64_t duplicates, rejected;
    /* collectives */
    uint64_t instances, complete, partial, untimed, causality_violations;
    int64_t skew_sum_ns, skew_max_ns, cost_ns;
    uint64_t skew_hist[MRD_AN_HIST_BINS];
    uint64_t worst_seq, worst_comm;
    char worst_func[32];
    int worst_last_rank;
    int64_t worst_start_ns, worst_end_ns; /* the instance with the largest skew */
    int ncolls;
    struct mrd_an_coll colls[MRD_AN_MAX_COLLS + 1]; /* last = "other" when overflowing */
    /* the clock fit's causality check (tables clock_causality, clock_adjustments), when run */
    int clock_checked;
    uint64_t clock_violations_before, clock_violations_after;
    int npairs; /* worst pairs by violations before, at most cap */
    struct mrd_an_pair pairs[MRD_AN_MAX_PAIRS];
    /* straggler scope (see the definitions above): 1 when the ranking counts only
     * instances inside step ranges; the timed instances outside them and their cost */
    int ranked_in_steps;
    uint64_t outside_steps;
    int64_t outside_steps_cost_ns;
    /* instances in a capture step (a step in which some rank attached CUPTI for a window or
     * detached it after one: table windows' first_step and detach_step): not ranked either,
     * since the attach (~12 ms) and detach stalls are the profiler's, not the job's */
    uint64_t capture_steps;
    int64_t capture_steps_cost_ns;
    /* steps */
    int nsteps; /* broken-down steps in steps[] */
    uint64_t steps_beyond_cap;
    struct mrd_an_step *steps;
    /* capture windows, one entry per rank that has any, ascending rank; none (0) when
     * the run had no windows or the database was not finalized */
    int nwindow_ranks;
    struct mrd_an_windows *windows;
    /* straggler cost and cause, collective statistics, top kernels (why.c); NULL when the
     * run has no collectives */
    struct mrd_an_why *why;
    /* findings: rules that turn the above into advice (findings.h); NULL only while the
     * analysis runs */
    struct mrd_findings *findings;
    /* the environment fingerprint compared across ranks (fingerprint.h); NULL when the
     * database has none (a capture older than the fingerprint) */
    struct mrd_env_report *env;
    /* why env is NULL although env_records has rows: SQLite's message (a table of another
     * shape); "" otherwise */
    char env_error[128];
    /* warnings, in the order found */
    int nwarnings;
    char warnings[MRD_AN_MAX_WARNINGS][256];
};

/* Analyses the database open on db (read-only is enough). Creates the op-interval TEMP
 * tables (mrd_db_op_intervals) on that connection, which the exports reuse. Returns 0 and
 * *out (caller frees with mrd_analysis_free), -ENOMEM, -E2BIG (a cap that cannot degrade
 * gracefully), or -MRD_ERR_SQLITE (the SQLite message is in *err_msg when err_msg is not
 * NULL; static buffer valid until the next call). Single thread per db connection. */
int mrd_analyze(sqlite3 *db, const struct mrd_analyze_options *opts, struct mrd_analysis **out,
                const char **err_msg);

/* Accepts NULL. */
void mrd_analysis_free(struct mrd_analysis *a);

/* The wait accounting the straggler ranking uses for rank r: r->in_steps when
 * a->ranked_in_steps, else its counts over every timed instance. */
struct mrd_an_wait mrd_analyze_ranked_wait(const struct mrd_analysis *a,
                                           const struct mrd_an_rank *r);

/* Ranks in straggler order (the definition above: wait caused, then last arrivals, then
 * rank, each by mrd_analyze_ranked_wait): a malloc'd array of a->nranks pointers into
 * a->ranks (caller frees; valid while a lives), NULL on -ENOMEM. Pure, any thread. */
const struct mrd_an_rank **mrd_analyze_ranking(const struct mrd_analysis *a);

/* Name of per-rank event table i (0 <= i < MRD_AN_NKINDS): "kernels", "memcpys", ... */
const char *mrd_analyze_kind_name(int i);

/* "correlation", "kernel-name", "correlation+name" or "none". */
const char *mrd_analyze_method_name(int method);
/* The MRD_AN_HIST_BINS bin of a duration (bin 0 = [0,1us), bin i = [2^(i-1),2^i) us, the
 * last one also everything longer): the skew histogram's and the HTML report's. */
int mrd_analyze_hist_bin(int64_t ns);

/* 1 when a kernel name names an NCCL kernel ("nccl..." or "_Z<len>nccl..."), else 0. */
int mrd_analyze_is_nccl_name(const char *name);

/* ---- why.c: what the stragglers cost, why they were late, collective statistics and top
 * kernels, computed at analysis (report) time, never stored (aggregator/SCHEMA.md,
 * "Straggler cost and cause").
 *
 * Straggler cost of a step: measured = the longest NVTX step range over the ranks;
 * counterfactual = the same with every late rank arriving when the next latest rank did,
 * propagated through the step's collectives in the order of their last arrivals: each rank
 * carries a shift S (0 at the step's start); at an instance the shifted arrivals are
 * a - S, the counterfactual last arrival is the second latest of them, and every member
 * leaves the instance A - (that) earlier (A = the measured last arrival), which becomes
 * its S; a rank's step range ends S earlier. cost = measured - counterfactual.
 *
 * A late event: an instance of a step in which the latest shifted arrival is at least
 * MRD_WHY_LATE_NS after the next latest (the late rank and the reference rank). Its
 * lateness d = the difference of the two measured arrivals, split into parts measured on
 * both ranks since the boundary (the end of the rank's previous collective in the step,
 * else its step start):
 *   comm    = previous collective's end on late - on reference (the communication before
 *             finished later: slower transfer after its last arrival);
 *   host    = first kernel start after the boundary, late - reference, minus comm (it
 *             launched its work later);
 *   compute = compute (non-NCCL) kernel busy time between boundary and arrival, late -
 *             reference (its compute took longer).
 * The cause is the largest part when it is at least half of d, "unexplained" otherwise;
 * "not evaluated" when either rank has no kernel between boundary and arrival (kernels not
 * traced: the steady tier outside capture windows) and comm does not explain it. */
#define MRD_WHY_LATE_NS      100000 /* a late event: at least 100 us after the next latest */
#define MRD_WHY_MAX_EVENTS   4096   /* late events kept (the largest); more are counted */
#define MRD_WHY_MAX_STATS    64     /* (communicator, function, bytes) groups; more: "other" */
#define MRD_WHY_TOP_KERNELS  10     /* kernels listed per rank */
#define MRD_WHY_GPU_MAX_AGE_NS 5000000000LL /* an older GPU sample says nothing of the step */
#define MRD_WHY_REPEAT_MIN   3      /* a rank late for one cause this often is named */

enum mrd_an_cause {
    MRD_AN_CAUSE_NOT_EVALUATED = 0,
    MRD_AN_CAUSE_COMPUTE,
    MRD_AN_CAUSE_HOST,
    MRD_AN_CAUSE_COMM,
    MRD_AN_CAUSE_UNEXPLAINED,
    MRD_AN_NCAUSES
};

struct mrd_an_step_cost {
    int64_t measured_ns, counterfactual_ns, cost_ns; /* -1 measured: no step range */
    /* the rank whose late arrivals (latest shifted arrival - next latest) saved the most,
     * when that is at least MRD_WHY_LATE_NS; else -1 */
    int straggler;
    int64_t straggler_late_ns; /* its summed lateness in the step */
    int cause; /* enum mrd_an_cause of the straggler's largest late event, -1: none */
    /* exposed communication (comm kernels not covered by compute kernels) and GPU idle (no
     * kernel running), summed over the ranks that ran a kernel in their step range
     * (kernel_ranks; 0: kernels not traced in this step), and those ranges' total length:
     * the shares are exposed_ns / kernel_span_ns and idle_ns / kernel_span_ns */
    int64_t exposed_ns, idle_ns, kernel_span_ns;
    int kernel_ranks;
};

/* One GPU sample (gpu_samples) nearest an arrival, shown beside a compute cause: the
 * rank's latest at or before it, if at most MRD_WHY_GPU_MAX_AGE_NS before (age_ns: how
 * long before; the agent reads 10 times a second while CUPTI traces and once a second
 * between steady-tier windows, agent/capture/gpu_sample.c). */
struct mrd_an_gpu_reading {
    int have;
    int64_t sm_clock_mhz, power_mw, temperature_c, throttle_reasons, age_ns;
};

struct mrd_an_late {
    int64_t step;
    uint64_t comm_hash, seq;
    char func[32];
    int rank, ref_rank;
    int64_t late_ns;                  /* measured arrival of rank - of ref_rank */
    int64_t comm_ns, host_ns, compute_ns; /* the parts (above); 0 when not evaluated */
    int64_t busy_ns[2];                   /* compute busy time: [0] rank, [1] ref_rank */
    int64_t kernels[2];                   /* compute kernels counted, same order */
    int cause;                            /* enum mrd_an_cause */
    /* the compute kernel (demangled name) whose time between boundary and arrival grew the
     * most on the late rank against the reference rank (same name), and by how much; ""
     * when none grew (or not evaluated) */
    char kernel[160];
    int64_t kernel_diff_ns;
    struct mrd_an_gpu_reading gpu[2];
};

struct mrd_an_coll_stat {
    uint64_t comm_hash;
    char func[32];
    int64_t bytes; /* nccl_ops.bytes (count x type size, NCCL's per-call count) */
    int nranks;
    uint64_t count;           /* timed instances */
    int64_t p50_ns, p90_ns, p99_ns; /* transfer time after the last arrival, nearest rank */
    double algbw_gbs, busbw_gbs;    /* nccl-tests size / p50, x the function's factor */
    /* each rank's most frequent choice: the lowest rank's ("RING/SIMPLE"), then every rank
     * whose choice differs from it ("; rank 2: RING/LL") */
    char algo_proto[96];
    int differ; /* in some instance the ranks chose different algorithms or protocols */
};

struct mrd_an_kernel_top {
    int rank;
    char name[160]; /* demangled when the C++ runtime's demangler is available */
    uint64_t count;
    int64_t total_ns;
    double share; /* of the rank's total kernel time */
};

struct mrd_an_why {
    int nsteps;
    struct mrd_an_step_cost *steps; /* [nsteps], indexed like mrd_analysis.steps */
    int64_t measured_ns, counterfactual_ns, cost_ns; /* summed over the steps with a cost */
    int nlate;
    uint64_t late_total; /* events found; nlate kept (the largest) */
    struct mrd_an_late *late;
    int nranks;
    uint64_t (*rank_causes)[MRD_AN_NCAUSES]; /* [nranks] events per cause, a->ranks order */
    uint64_t steps_not_evaluated; /* late events whose cause could not be evaluated */
    int nstats;
    struct mrd_an_coll_stat stats[MRD_WHY_MAX_STATS];
    uint64_t stats_other; /* instances of groups beyond the cap */
    int nkernels;
    struct mrd_an_kernel_top *kernels; /* by rank, then total descending */
    int demangled;                     /* 1 when names went through __cxa_demangle */
};

/* "compute took longer", "launched later (host bound)", "communication slower",
 * "unexplained", "not evaluated". */
const char *mrd_analyze_cause_name(int cause);

/* Demangles a C++ symbol with the C++ runtime's __cxa_demangle (libstdc++.so.6 loaded with
 * dlopen on first use, so nothing new to link); copies name unchanged when it is not
 * mangled or no runtime is found. Returns 1 when demangled. Thread-safe after the first
 * call. */
int mrd_analyze_demangle(const char *name, char *buf, size_t n);

/* The same for exporters that name every row: the demangled name, remembered per thread
 * (MRD_DEMANGLE_SLOTS names), so each distinct name is demangled about once. Returns name
 * itself when it is not mangled or cannot be demangled; the pointer is valid until the
 * next call on this thread. */
const char *mrd_analyze_demangle_cached(const char *name);

#endif
