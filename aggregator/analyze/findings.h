/* Findings: rules that turn the analysis into advice. Each rule looks at what the analysis
 * already computed (a->why's per-step shares, straggler costs and causes, collective
 * statistics; a->ranks' overlap) or at a few aggregate queries over the tables, and gives
 * zero or more findings, each with its evidence (ranks, steps, numbers) and what to try.
 * Every rule ends in one status: fired, not fired, or not evaluated (the kind it needs was
 * not traced, or not in the steps concerned; the note says which).
 *
 * Where it sits: the end of mrd_analyze (a->findings); the text, JSON and HTML reports
 * render it (aggregator/export/report_findings.c). Thresholds are the MRD_FIND_* constants
 * below, documented with their reasons in aggregator/SCHEMA.md ("Findings").
 *
 * Workload: one aggregate pass over kernels and memcpys per rank (GROUP BY rank), one
 * ordered pass over host synchronizations, the env_records table; memory O(ranks + steps).
 * Single thread per db connection.
 */
#ifndef MRD_FINDINGS_H
#define MRD_FINDINGS_H

#include <stdint.h>

#include <sqlite3.h>

#include "analyze.h"

#define MRD_FIND_IDLE_SHARE       0.20 /* GPU idle > 20% of a step: a fifth of the GPU wasted */
#define MRD_FIND_EXPOSED_SHARE    0.10 /* exposed comm > 10% of a step: worth overlapping */
#define MRD_FIND_PAGEABLE_BYTES   (1 << 20) /* pageable copies >= 1 MiB per rank ... */
#define MRD_FIND_PAGEABLE_COPIES  100       /* ... or >= 100 of them: each blocks the host thread */
#define MRD_FIND_TINY_NS          10000     /* a tiny kernel runs < 10 us: launch cost dominates */
#define MRD_FIND_TINY_PER_STEP    200       /* > 200 tiny kernels per step: ~1 ms of launches */
#define MRD_FIND_SYNC_STEP_SHARE  0.5       /* host syncs in more than half the steps: a pattern */
#define MRD_FIND_STRAGGLER_SHARE  0.02      /* a straggler costing >= 2% of step time is named */
#define MRD_FIND_CLOCK_SKEW_RATIO 0.5       /* clock bound > half the median lateness: uncertain */

#define MRD_FIND_MAX         32 /* findings kept; more are counted in dropped */
#define MRD_FIND_MAX_RANKS   16 /* ranks listed per finding; ranks_total counts all */
#define MRD_FIND_MAX_STEPS   8  /* steps listed per finding (the worst) */
#define MRD_FIND_MAX_NUMBERS 6

enum mrd_find_rule {
    MRD_FIND_GPU_IDLE = 0,
    MRD_FIND_PAGEABLE,
    MRD_FIND_TINY_KERNELS,
    MRD_FIND_SYNC_IN_STEPS,
    MRD_FIND_EXPOSED_COMM,
    MRD_FIND_STRAGGLER,
    MRD_FIND_ALGO_DIFFER,
    MRD_FIND_ENV_MISMATCH,
    MRD_FIND_CLOCK_BOUND,
    MRD_FIND_NRULES
};

enum mrd_find_status { MRD_FIND_NOT_FIRED = 0, MRD_FIND_FIRED, MRD_FIND_NOT_EVALUATED };
enum mrd_find_severity { MRD_FIND_LOW = 1, MRD_FIND_MEDIUM, MRD_FIND_HIGH };

struct mrd_find_number {
    const char *name; /* static: "share", "cost_ns", ... */
    double value;
};

struct mrd_finding {
    int rule;     /* enum mrd_find_rule */
    int severity; /* enum mrd_find_severity */
    char title[160];
    int nranks, ranks_total;
    int ranks[MRD_FIND_MAX_RANKS];
    int nsteps;
    int64_t steps[MRD_FIND_MAX_STEPS]; /* step indexes, worst first */
    int nnumbers;
    struct mrd_find_number numbers[MRD_FIND_MAX_NUMBERS];
    char detail[256]; /* the evidence in words */
};

struct mrd_findings {
    int status[MRD_FIND_NRULES];     /* enum mrd_find_status */
    char note[MRD_FIND_NRULES][160]; /* not evaluated: why; else what was looked at */
    int n;
    uint64_t dropped; /* findings beyond MRD_FIND_MAX */
    struct mrd_finding f[MRD_FIND_MAX];
};

/* Evaluates every rule on a (filled by mrd_analyze from db with options o) and stores the
 * result in a->findings. A rule whose query fails is "not evaluated" with SQLite's message
 * (the others go on). Returns 0 or -ENOMEM. Single thread per db. */
int mrd_findings_evaluate(sqlite3 *db, const struct mrd_analyze_options *o, struct mrd_analysis *a);

/* Accepts NULL. */
void mrd_findings_free(struct mrd_findings *f);

/* Rule id ("gpu_idle", ...), its name in words, and what to try when it fires. */
const char *mrd_findings_rule_id(int rule);
const char *mrd_findings_rule_name(int rule);
const char *mrd_findings_rule_advice(int rule);

/* "fired", "not fired", "not evaluated"; "low", "medium", "high". */
const char *mrd_findings_status_name(int status);
const char *mrd_findings_severity_name(int severity);

#endif
