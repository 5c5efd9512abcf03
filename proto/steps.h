/* Steps and capture windows: the rules every component reads alike.
 *
 * Where it sits: the agent counts steps and opens full-detail windows (CUPTI attached) on
 * step numbers; `meridian profile` refuses a bad window specification before the job
 * starts; the analysis finds step ranges by the same name rule. One rule each, here, so
 * that the step an agent called 120 is the step the report calls 120.
 *
 *   step name: an NVTX push/pop range is a step when its message starts with `prefix`
 *     (case-insensitive) followed by the end, a separator (space # : = - [ or () or a
 *     digit. Without a prefix (NULL or ""): "step", "train_step", "training step" (same
 *     rule), or PyTorch's "ProfilerStep#N"; "optimizer_step" and "stepper" are not steps.
 *     Steps are numbered per process from 0 in the order their ranges are pushed.
 *
 *   window specification (MERIDIAN_WINDOWS, `meridian profile --windows`): terms
 *     separated by ',' (blanks around a term ignored), at most MRD_WINDOW_TERMS:
 *       A-B       steps A to B (inclusive), A <= B
 *       A         step A alone
 *       L/P       L steps every P steps, from step 0: steps kP .. kP+L-1 (1 <= L <= P)
 *       L/P@S     the same from step S: steps S+kP .. S+kP+L-1
 *       none      no window (the steady tier alone)
 *     Numbers are decimal, at most MRD_WINDOW_STEP_MAX. A step belongs to a window when
 *     any term holds it; consecutive window steps form one window (one attach, one
 *     detach).
 *
 * Workload: parsing once per process (cold); mrd_windows_holds is a few compares per term
 * (called once per step). Pure functions, any thread, no allocation, no logging: callers
 * word their own message from why[].
 */
#ifndef MRD_STEPS_H
#define MRD_STEPS_H

#include <stddef.h>
#include <stdint.h>

#define MRD_WINDOW_TERMS    16
#define MRD_WINDOW_STEP_MAX 1000000000000LL /* 10^12 steps */

/* The aggregator's window triggers and delay windows, as meridiand takes them and
 * `meridian profile` checks them before anything starts: a trigger factor is over 1 and at
 * most MRD_TRIGGER_FACTOR_MAX; window seconds are at least MRD_WINDOW_SECONDS_MIN (one
 * whole ms) and at most MRD_WINDOW_SECONDS_MAX. */
#define MRD_TRIGGER_FACTOR_MAX 1000
#define MRD_WINDOW_SECONDS_MIN 0.001
#define MRD_WINDOW_SECONDS_MAX 1e7

/* Values equal meridian.proto's WindowReason. */
enum mrd_window_reason {
    MRD_WINDOW_RANGE = 1,     /* a term A-B or A */
    MRD_WINDOW_PERIODIC = 2,  /* a term L/P[@S] */
    MRD_WINDOW_ON_DEMAND = 3, /* the aggregator, asked by `meridian window` */
    MRD_WINDOW_TRIGGER = 4,   /* the aggregator, a rank's step time over the threshold */
    MRD_WINDOW_DELAY = 5,     /* the aggregator, a delay and duration converted to steps */
    MRD_WINDOW_PROFILER_API = 6, /* the aggregator, the application's cudaProfilerStart/Stop */
};

/* Window requests an aggregator keeps and sends at once (ClockReply.windows), and an
 * agent keeps (the oldest finished ones make room). */
#define MRD_WINDOW_REQUESTS_MAX 16

struct mrd_window_term {
    int reason;              /* enum mrd_window_reason */
    int64_t first, last;     /* RANGE */
    int64_t length, period, start; /* PERIODIC */
};

struct mrd_windows {
    int n; /* 0: no window */
    struct mrd_window_term t[MRD_WINDOW_TERMS];
};

/* 1 when `name` is a step range's message under the rule above (prefix NULL or "" for the
 * default names), else 0 (also for NULL). */
int mrd_step_name_match(const char *name, const char *prefix);

/* Parses a window specification into *w. Returns 0, or -EINVAL with why[] saying what is
 * wrong and where (e.g. "term 2 \"10/5\": the length 10 is longer than the period 5").
 * NULL or "" parses as no window. */
int mrd_windows_parse(const char *spec, struct mrd_windows *w, char *why, size_t why_len);

/* 1 when step belongs to a window, with *reason (may be NULL) the reason of the first
 * term that holds it; 0 otherwise (also for a negative step). */
int mrd_windows_holds(const struct mrd_windows *w, int64_t step, int *reason);

/* Stable lower-case name of a reason ("range", "periodic", "on_demand", "trigger",
 * "delay", "profiler_api"; "unknown" otherwise). */
const char *mrd_window_reason_name(int reason);

/* Writes the specification back in its canonical form (for logs and --help). */
void mrd_windows_format(const struct mrd_windows *w, char *out, size_t n);

#endif
