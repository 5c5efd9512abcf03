/* Findings: the rule table, the helpers of every rule (findings_int.h), the rules on the
 * analysis' own results (GPU idle and exposed communication per step, stragglers,
 * algorithm / protocol, clock bound) and the evaluation in rule order; the rules that read
 * event tables are in findings_tables.c. Contract in findings.h, definitions and thresholds
 * in aggregator/SCHEMA.md, "Findings".
 *
 * Each rule reads what mrd_analyze left in a (never recomputing why.c's results) or runs
 * one aggregate query, then appends findings with mrd__find_add() and sets its status. "Not
 * evaluated" means the rows the rule needs are absent: the kind was not traced (memcpy,
 * sync and env are opt-in or new), or kernels were not traced in any step (the steady tier
 * outside its windows), or the run has no collectives, steps or clock models.
 */
#include "findings.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"
#include "cmp.h"
#include "db_sql.h"
#include "error.h"
#include "findings_int.h"

static const struct {
    const char *id, *name, *advice;
} rules[MRD_FIND_NRULES] = {
    {"gpu_idle", "GPU idle between bursts",
     "overlap data loading and host work with the GPU (more DataLoader workers, pinned "
     "memory, prefetch), capture the step in a CUDA graph, or look at the timeline for the "
     "host work between kernels"},
    {"pageable_copies", "copies from pageable memory",
     "allocate the host buffers pinned (cudaHostAlloc / tensor.pin_memory(), DataLoader "
     "pin_memory=True) so copies run asynchronously at full bandwidth"},
    {"tiny_kernels", "storms of tiny kernels",
     "capture the step in a CUDA graph (torch.cuda.graphs, CUDA Graphs), fuse elementwise "
     "kernels (torch.compile, fused optimizers), or batch more work per kernel"},
    {"sync_in_steps", "synchronisation inside steps",
     "remove host synchronisations from the step (.item(), .cpu(), printing tensors, "
     "cudaDeviceSynchronize, blocking copies); keep values on the GPU and read them after "
     "the step or every N steps"},
    {"exposed_comm", "exposed communication",
     "overlap communication with compute (bucketed gradient all-reduce, DDP/FSDP overlap "
     "settings, prefetching parameters), or reduce its volume (gradient compression, "
     "larger buckets, fewer collectives)"},
    {"straggler", "stragglers and their cause",
     "compute: look for thermal or power throttling and slower GPUs on that rank, unequal "
     "work per rank; host: CPU contention, data loading, pinning of the rank's threads; "
     "communication: the rank's links (NVLink, network interface)"},
    {"algo_differ", "algorithm or protocol differing across ranks",
     "make the ranks agree: the same NCCL version and NCCL_ALGO / NCCL_PROTO / tuner "
     "settings on every node, the same topology; a mismatch can hang or slow collectives"},
    {"env_mismatch", "environment mismatches",
     "make the nodes identical in what differs: the same driver, CUDA, NCCL and library "
     "versions, the same NCCL_* environment on every rank"},
    {"clock_bound", "clock error bound too wide",
     "the straggler verdicts on these ranks are uncertain: run longer (more clock probes), "
     "keep the aggregator on a lightly loaded host near the ranks, or profile with "
     "--full so kernels bracket the GPU timer fit"},
};

const char *mrd_findings_rule_id(int rule)
{
    return rule >= 0 && rule < MRD_FIND_NRULES ? rules[rule].id : "unknown";
}

const char *mrd_findings_rule_name(int rule)
{
    return rule >= 0 && rule < MRD_FIND_NRULES ? rules[rule].name : "unknown";
}

const char *mrd_findings_rule_advice(int rule)
{
    return rule >= 0 && rule < MRD_FIND_NRULES ? rules[rule].advice : "";
}

const char *mrd_findings_status_name(int status)
{
    static const char *const names[] = {[MRD_FIND_NOT_FIRED] = "not fired",
                                        [MRD_FIND_FIRED] = "fired",
                                        [MRD_FIND_NOT_EVALUATED] = "not evaluated"};
    return status > 0 && status <= MRD_FIND_NOT_EVALUATED ? names[status] : names[0];
}

const char *mrd_findings_severity_name(int severity)
{
    static const char *const names[] = {
        [MRD_FIND_LOW] = "low", [MRD_FIND_MEDIUM] = "medium", [MRD_FIND_HIGH] = "high"};
    return severity >= MRD_FIND_LOW && severity <= MRD_FIND_HIGH ? names[severity]
                                                                 : names[MRD_FIND_LOW];
}

void mrd_findings_free(struct mrd_findings *f)
{
    free(f);
}

/* ---- building findings ---------------------------------------------------------------- */

void mrd__find_status(struct mrd__find_ctx *c, int rule, int status, const char *fmt, ...)
{
    va_list ap;
    c->out->status[rule] = status;
    va_start(ap, fmt);
    vsnprintf(c->out->note[rule], sizeof(c->out->note[rule]), fmt, ap);
    va_end(ap);
}

/* A new finding of rule, or NULL when MRD_FIND_MAX are kept (counted in dropped). */
struct mrd_finding *mrd__find_add(struct mrd__find_ctx *c, int rule, int severity)
{
    c->out->status[rule] = MRD_FIND_FIRED;
    if (c->out->n >= MRD_FIND_MAX) {
        c->out->dropped++;
        return NULL;
    }
    struct mrd_finding *f = &c->out->f[c->out->n++];
    memset(f, 0, sizeof(*f));
    f->rule = rule;
    f->severity = severity;
    return f;
}

void mrd__find_rank(struct mrd_finding *f, int rank)
{
    if (f->nranks < MRD_FIND_MAX_RANKS)
        f->ranks[f->nranks++] = rank;
    f->ranks_total++;
}

void mrd__find_numbers(struct mrd_finding *f, const struct mrd_find_number *v, size_t n)
{
    for (size_t i = 0; i < n && f->nnumbers < MRD_FIND_MAX_NUMBERS; i++) {
        f->numbers[f->nnumbers].name = v[i].name;
        f->numbers[f->nnumbers++].value = v[i].value;
    }
}

int mrd__find_sqlerr(struct mrd__find_ctx *c, sqlite3_stmt *st)
{
    snprintf(c->err, sizeof(c->err), "%s", sqlite3_errmsg(c->db));
    sqlite3_finalize(st);
    return mrd__analyze_sqlerr(c->db);
}

uint64_t mrd__find_events(const struct mrd_analysis *a, int kind)
{
    uint64_t n = 0;
    for (int i = 0; i < a->nranks; i++)
        n += a->ranks[i].events[kind];
    return n;
}

/* Steps in which kernels of rank r were traced: its steps inside windows in the steady
 * tier (a run with windows), else all its NVTX step ranges. */
uint64_t mrd__find_traced_steps(const struct mrd_analysis *a, const struct mrd_an_rank *r)
{
    if (a->nwindow_ranks == 0)
        return r->steps;
    for (int i = 0; i < a->nwindow_ranks; i++)
        if (a->windows[i].rank == r->rank)
            return a->windows[i].steps < r->steps ? a->windows[i].steps : r->steps;
    return 0;
}

/* ---- rules 1 and 5: GPU idle and exposed communication per step (why.c's shares) ------ */

struct step_share {
    int index;
    double share;
};

static int cmp_share_desc(const void *x, const void *y)
{
    const struct step_share *p = x, *q = y;
    if (p->share != q->share)
        return p->share > q->share ? -1 : 1;
    return p->index - q->index;
}

static int rule_step_share(struct mrd__find_ctx *c, int rule, double threshold)
{
    const struct mrd_analysis *a = c->a;
    const struct mrd_an_why *w = a->why;
    int idle = rule == MRD_FIND_GPU_IDLE;
    if (!w) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED,
                         "no collectives: the step shares were not computed");
        return 0;
    }
    if (w->nsteps == 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "no NVTX step ranges");
        return 0;
    }
    struct step_share *v = malloc((size_t)w->nsteps * sizeof(*v));
    if (!v)
        return -ENOMEM;
    int n = 0, over = 0;
    int64_t sum = 0, span = 0;
    for (int s = 0; s < w->nsteps; s++) {
        const struct mrd_an_step_cost *sc = &w->steps[s];
        if (sc->kernel_ranks == 0 || sc->kernel_span_ns <= 0)
            continue;
        int64_t part = idle ? sc->idle_ns : sc->exposed_ns;
        v[n].index = s;
        v[n].share = (double)part / (double)sc->kernel_span_ns;
        over += v[n].share > threshold;
        sum += part;
        span += sc->kernel_span_ns;
        n++;
    }
    if (n == 0) {
        free(v);
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED,
                         "kernel was not traced in any of the %d steps", w->nsteps);
        return 0;
    }
    double mean = (double)sum / (double)span;
    if (2 * over <= n) {
        free(v);
        mrd__find_status(c, rule, MRD_FIND_NOT_FIRED,
                         "%d of %d steps with kernels (of %d) above %.0f%% (overall %.1f%%)", over,
                         n, w->nsteps, 100.0 * threshold, 100.0 * mean);
        return 0;
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_share_desc);
    struct mrd_finding *f =
        mrd__find_add(c, rule, mean >= 2 * threshold ? MRD_FIND_HIGH : MRD_FIND_MEDIUM);
    mrd__find_status(c, rule, MRD_FIND_FIRED, "%d of %d steps with kernels (of %d) above %.0f%%",
                     over, n, w->nsteps, 100.0 * threshold);
    if (f) {
        snprintf(f->title, sizeof(f->title), "%s %.1f%% of step time on %d of %d steps",
                 idle ? "GPU idle" : "communication exposed", 100.0 * mean, over, n);
        for (int k = 0; k < n && k < MRD_FIND_MAX_STEPS && v[k].share > threshold; k++)
            f->steps[f->nsteps++] = v[k].index;
        /* ranks whose own share over their whole kernel span is above the threshold */
        for (int i = 0; i < a->nranks; i++) {
            const struct mrd_an_overlap *ov = &a->ranks[i].ov;
            if (ov->span_ns <= 0)
                continue;
            int64_t part = idle ? ov->span_ns - ov->busy_ns : ov->exposed_ns;
            if ((double)part / (double)ov->span_ns > threshold)
                mrd__find_rank(f, a->ranks[i].rank);
        }
        MRD__FIND_NUMBERS(f, {"share", mean}, {"worst_share", v[0].share}, {"steps_over", over},
                          {"steps_evaluated", n});
        snprintf(f->detail, sizeof(f->detail),
                 "%s share of the step ranges (ranks with kernels): %.1f%% overall, worst "
                 "step %d at %.1f%%; ranks listed exceed %.0f%% over their whole kernel span",
                 idle ? "no kernel running" : "comm kernels not covered by compute", 100.0 * mean,
                 v[0].index, 100.0 * v[0].share, 100.0 * threshold);
    }
    free(v);
    return 0;
}

/* ---- rule 6: stragglers and their cause (why.c's per-step straggler) ------------------- */

static int rule_straggler(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_STRAGGLER;
    const struct mrd_analysis *a = c->a;
    const struct mrd_an_why *w = a->why;
    if (!w) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "no collectives");
        return 0;
    }
    if (w->nsteps == 0 || w->measured_ns <= 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "no NVTX step ranges");
        return 0;
    }
    int fired = 0;
    for (int i = 0; i < a->nranks; i++) {
        int rank = a->ranks[i].rank, nsteps = 0;
        int64_t cost = 0, late = 0;
        uint64_t causes[MRD_AN_NCAUSES] = {0};
        for (int s = 0; s < w->nsteps; s++) {
            const struct mrd_an_step_cost *sc = &w->steps[s];
            if (sc->straggler != rank)
                continue;
            nsteps++;
            cost += sc->cost_ns;
            late += sc->straggler_late_ns;
            if (sc->cause >= 0 && sc->cause < MRD_AN_NCAUSES)
                causes[sc->cause]++;
        }
        double share = (double)cost / (double)w->measured_ns;
        if (nsteps == 0 || share < MRD_FIND_STRAGGLER_SHARE)
            continue;
        int cause = MRD_AN_CAUSE_NOT_EVALUATED;
        for (int k = 1; k < MRD_AN_NCAUSES; k++)
            if (causes[k] > causes[cause])
                cause = k;
        fired++;
        struct mrd_finding *f =
            mrd__find_add(c, rule, share >= 0.10 ? MRD_FIND_HIGH : MRD_FIND_MEDIUM);
        if (!f)
            continue;
        mrd__find_rank(f, rank);
        /* the costliest steps it was the straggler of */
        for (int k = 0; k < MRD_FIND_MAX_STEPS; k++) {
            int best = -1;
            for (int s = 0; s < w->nsteps; s++) {
                int taken = 0;
                for (int j = 0; j < f->nsteps; j++)
                    taken |= f->steps[j] == s;
                if (w->steps[s].straggler == rank && !taken &&
                    (best < 0 || w->steps[s].cost_ns > w->steps[best].cost_ns))
                    best = s;
            }
            if (best < 0)
                break;
            f->steps[f->nsteps++] = best;
        }
        snprintf(f->title, sizeof(f->title),
                 "rank %d held the others back in %d step(s); cause: %s", rank, nsteps,
                 mrd_analyze_cause_name(cause));
        MRD__FIND_NUMBERS(f, {"straggler_steps", nsteps}, {"cost_ns", cost}, {"cost_share", share},
                          {"late_ns", late});
        snprintf(f->detail, sizeof(f->detail),
                 "straggler cost %.1f%% of the measured step time; cause: %s (the most "
                 "frequent cause of its steps)",
                 100.0 * share, mrd_analyze_cause_name(cause));
    }
    if (fired)
        mrd__find_status(c, rule, MRD_FIND_FIRED, "%d rank(s) cost >= %.0f%% of step time", fired,
                         100.0 * MRD_FIND_STRAGGLER_SHARE);
    else
        mrd__find_status(c, rule, MRD_FIND_NOT_FIRED, "no rank cost >= %.0f%% of step time",
                         100.0 * MRD_FIND_STRAGGLER_SHARE);
    return 0;
}

/* ---- rule 7: algorithm or protocol differing across ranks (why_stats' flag) ------------ */

static int rule_algo(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_ALGO_DIFFER;
    const struct mrd_an_why *w = c->a->why;
    if (!w || w->nstats == 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "no collectives");
        return 0;
    }
    int fired = 0;
    for (int i = 0; i < w->nstats; i++) {
        const struct mrd_an_coll_stat *s = &w->stats[i];
        if (!s->differ)
            continue;
        fired++;
        struct mrd_finding *f = mrd__find_add(c, rule, MRD_FIND_MEDIUM);
        if (!f)
            continue;
        /* the ranks named in "A/P; rank 2: B/Q; rank 5: ..." */
        for (const char *p = strstr(s->algo_proto, "; rank "); p; p = strstr(p + 1, "; rank "))
            mrd__find_rank(f, atoi(p + 7));
        snprintf(f->title, sizeof(f->title),
                 "%s of %" PRId64 " bytes on communicator %016" PRIx64
                 ": ranks chose different algorithms or protocols",
                 s->func, s->bytes, s->comm_hash);
        MRD__FIND_NUMBERS(f, {"bytes", s->bytes}, {"instances", s->count});
        snprintf(f->detail, sizeof(f->detail), "each rank's most frequent choice: %s",
                 s->algo_proto);
    }
    if (fired)
        mrd__find_status(c, rule, MRD_FIND_FIRED, "%d collective group(s)", fired);
    else
        mrd__find_status(c, rule, MRD_FIND_NOT_FIRED, "%d collective group(s) agree", w->nstats);
    return 0;
}

/* ---- rule 9: clock error bound too wide for the lateness it explains ------------------- */

/* A rank's GPU timer model bound adds to its clock bound where its arrivals may come from
 * NCCL's GPU timer: no kernel rows, or a run with windows. */
struct gpu_bounds {
    struct mrd_analysis *a;
    int64_t *bound; /* [a->nranks] */
};

static int gpu_bound_row(sqlite3_stmt *st, void *ctx)
{
    struct gpu_bounds *gb = ctx;
    struct mrd_an_rank *r = mrd__analyze_rank(gb->a, sqlite3_column_int(st, 0));
    if (r && (r->events[KIND_KERNELS] == 0 || gb->a->nwindow_ranks > 0))
        gb->bound[r - gb->a->ranks] += sqlite3_column_int64(st, 1);
    return 0;
}

static int rule_clock(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_CLOCK_BOUND;
    struct mrd_analysis *a = c->a;
    const struct mrd_an_why *w = a->why;
    if (!a->global_timebase) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "no clock models (local clocks)");
        return 0;
    }
    if (!w || w->nlate == 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED,
                         "no late arrival of %d us or more to explain", MRD_WHY_LATE_NS / 1000);
        return 0;
    }
    /* bound of a rank: its clock model's largest bound, plus its GPU timer model's where
     * arrivals may come from NCCL's GPU timer (no kernel rows, or a run with windows) */
    int64_t *bound = calloc((size_t)a->nranks + 1, sizeof(int64_t));
    int64_t *late = malloc((size_t)w->nlate * sizeof(int64_t));
    int rc = -ENOMEM, fired = 0, evaluated = 0;
    if (!bound || !late)
        goto done;
    for (int i = 0; i < a->nranks; i++)
        bound[i] = a->ranks[i].clock_error_bound_ns;
    struct gpu_bounds gb = {a, bound};
    if ((rc = mrd_db_each_row(c->db, "gpu_timer_models", mrd_db_sql_find_gpu_bound, gpu_bound_row,
                              &gb)) < 0) {
        if (rc == -MRD_ERR_SQLITE)
            rc = mrd__find_sqlerr(c, NULL);
        goto done;
    }
    for (int i = 0; i < a->nranks; i++) {
        int rank = a->ranks[i].rank, n = 0;
        int64_t pair = 0;
        for (int e = 0; e < w->nlate; e++) {
            if (w->late[e].rank != rank)
                continue;
            const struct mrd_an_rank *ref = mrd__analyze_rank(a, w->late[e].ref_rank);
            int64_t b = bound[i] + (ref ? bound[ref - a->ranks] : 0);
            if (b > pair)
                pair = b;
            late[n++] = w->late[e].late_ns;
        }
        if (n == 0)
            continue;
        evaluated++;
        qsort(late, (size_t)n, sizeof(int64_t), mrd_cmp_int64);
        int64_t median = late[(n - 1) / 2];
        if ((double)pair <= MRD_FIND_CLOCK_SKEW_RATIO * (double)median)
            continue;
        fired++;
        struct mrd_finding *f =
            mrd__find_add(c, rule, pair >= median ? MRD_FIND_HIGH : MRD_FIND_MEDIUM);
        if (!f)
            continue;
        mrd__find_rank(f, rank);
        snprintf(f->title, sizeof(f->title),
                 "rank %d: clock error bound %.1f us against a median lateness of %.1f us", rank,
                 (double)pair / 1e3, (double)median / 1e3);
        MRD__FIND_NUMBERS(f, {"bound_ns", pair}, {"median_late_ns", median}, {"late_events", n});
        snprintf(f->detail, sizeof(f->detail),
                 "bound = the rank's clock bound + its reference rank's (largest over its late "
                 "events, GPU timer bounds added where arrivals may come from them) > %.0f%% "
                 "of the median lateness",
                 100.0 * MRD_FIND_CLOCK_SKEW_RATIO);
    }
    if (fired)
        mrd__find_status(c, rule, MRD_FIND_FIRED, "%d of %d late rank(s)", fired, evaluated);
    else
        mrd__find_status(c, rule, MRD_FIND_NOT_FIRED,
                         "%d late rank(s): bounds well below their "
                         "lateness",
                         evaluated);
done:
    free(bound);
    free(late);
    return rc;
}

static int rule_idle(struct mrd__find_ctx *c)
{
    return rule_step_share(c, MRD_FIND_GPU_IDLE, MRD_FIND_IDLE_SHARE);
}

static int rule_exposed(struct mrd__find_ctx *c)
{
    return rule_step_share(c, MRD_FIND_EXPOSED_COMM, MRD_FIND_EXPOSED_SHARE);
}

/* The rules, indexed by enum mrd_find_rule. */
static int (*const rule_fn[MRD_FIND_NRULES])(struct mrd__find_ctx *c) = {
    rule_idle,      mrd__find_pageable, mrd__find_tiny, mrd__find_sync, rule_exposed,
    rule_straggler, rule_algo,          mrd__find_env,  rule_clock,
};

/* A rule whose query fails (a table of an unexpected shape: the env kind of another
 * version, a damaged file) is "not evaluated" with SQLite's message and its findings are
 * withdrawn; the report goes on. Only -ENOMEM ends the evaluation. */
int mrd_findings_evaluate(sqlite3 *db, const struct mrd_analyze_options *o, struct mrd_analysis *a)
{
    static const struct mrd_analyze_options defaults;
    struct mrd__find_ctx c = {db, o ? o : &defaults, a, calloc(1, sizeof(struct mrd_findings)), ""};
    if (!c.out)
        return -ENOMEM;
    for (int rule = 0; rule < MRD_FIND_NRULES; rule++) {
        int kept = c.out->n;
        uint64_t dropped = c.out->dropped;
        c.err[0] = '\0';
        int rc = rule_fn[rule](&c);
        if (rc == -ENOMEM) {
            free(c.out);
            return rc;
        }
        if (rc < 0) {
            c.out->n = kept;
            c.out->dropped = dropped;
            mrd__find_status(&c, rule, MRD_FIND_NOT_EVALUATED, "query failed: %s",
                             c.err[0] ? c.err : mrd_strerror(rc));
        }
    }
    mrd_findings_free(a->findings);
    a->findings = c.out;
    return 0;
}
