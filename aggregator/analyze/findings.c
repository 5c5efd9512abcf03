/* Findings: the rule table and the rules (contract in findings.h, definitions and
 * thresholds in aggregator/SCHEMA.md, "Findings").
 *
 * Each rule reads what mrd_analyze left in a (never recomputing why.c's results) or runs
 * one aggregate query, then appends findings with add() and sets its status. "Not
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
#include "db_sql.h"
#include "steps.h"

#define KIND_KERNELS 0 /* indexes of a->ranks[].events (mrd_analyze_kind_name) */
#define KIND_MEMCPYS 1
#define KIND_SYNCS   3

/* SQL of the rules (one aggregate pass each). Host side pageable: the source of a copy
 * from the host or the destination of a copy to it (CUpti_ActivityMemoryKind 1). */
static const char sql_pageable[] =
    "SELECT rank, count(*), sum(bytes), sum(end_ns - start_ns) FROM main.memcpys "
    "WHERE src_kind = 1 OR dst_kind = 1 GROUP BY rank ORDER BY rank";
static const char sql_tiny[] =
    "SELECT rank, count(*), sum(end_ns - start_ns < ?1) FROM main.kernels k "
    "WHERE " MRD_DB_KERNEL_VALID " GROUP BY rank ORDER BY rank";
/* host-blocking synchronizations: event (1), stream (3), context (4); a stream wait event
 * (2) blocks a stream, not the host */
static const char sql_syncs[] = "SELECT rank, start_ns, end_ns FROM main.syncs "
                                "WHERE type IN (1, 3, 4) ORDER BY rank, start_ns";
static const char sql_gpu_bound[] =
    "SELECT rank, max(error_bound_ns) FROM main.gpu_timer_models GROUP BY rank";
static const char sql_env[] =
    "SELECT k.value, e.rank, coalesce(v.value, '') FROM main.env_records e "
    "JOIN main.strings k ON k.id = e.key_id LEFT JOIN main.strings v ON v.id = e.value_id "
    "ORDER BY k.value, e.rank";

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
    switch (status) {
    case MRD_FIND_FIRED:
        return "fired";
    case MRD_FIND_NOT_EVALUATED:
        return "not evaluated";
    default:
        return "not fired";
    }
}

const char *mrd_findings_severity_name(int severity)
{
    switch (severity) {
    case MRD_FIND_HIGH:
        return "high";
    case MRD_FIND_MEDIUM:
        return "medium";
    default:
        return "low";
    }
}

void mrd_findings_free(struct mrd_findings *f)
{
    free(f);
}

/* ---- building findings ---------------------------------------------------------------- */

struct ctx {
    sqlite3 *db;
    const struct mrd_analyze_options *o;
    struct mrd_analysis *a;
    struct mrd_findings *out;
};

static void set_status(struct ctx *c, int rule, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_status(struct ctx *c, int rule, int status, const char *fmt, ...)
{
    va_list ap;
    c->out->status[rule] = status;
    va_start(ap, fmt);
    vsnprintf(c->out->note[rule], sizeof(c->out->note[rule]), fmt, ap);
    va_end(ap);
}

/* A new finding of rule, or NULL when MRD_FIND_MAX are kept (counted in dropped). */
static struct mrd_finding *add(struct ctx *c, int rule, int severity)
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

static void add_rank(struct mrd_finding *f, int rank)
{
    if (f->nranks < MRD_FIND_MAX_RANKS)
        f->ranks[f->nranks++] = rank;
    f->ranks_total++;
}

static void add_number(struct mrd_finding *f, const char *name, double v)
{
    if (f->nnumbers < MRD_FIND_MAX_NUMBERS) {
        f->numbers[f->nnumbers].name = name;
        f->numbers[f->nnumbers++].value = v;
    }
}

static int sqlerr(struct ctx *c, sqlite3_stmt *st)
{
    sqlite3_finalize(st);
    return mrd__analyze_sqlerr(c->db);
}

static uint64_t total_events(const struct mrd_analysis *a, int kind)
{
    uint64_t n = 0;
    for (int i = 0; i < a->nranks; i++)
        n += a->ranks[i].events[kind];
    return n;
}

/* Steps in which kernels of rank r were traced: its steps inside windows in the steady
 * tier (a run with windows), else all its NVTX step ranges. */
static uint64_t traced_steps(const struct mrd_analysis *a, const struct mrd_an_rank *r)
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

static int rule_step_share(struct ctx *c, int rule, double threshold)
{
    const struct mrd_analysis *a = c->a;
    const struct mrd_an_why *w = a->why;
    int idle = rule == MRD_FIND_GPU_IDLE;
    if (!w) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED,
                   "no collectives: the step shares were "
                   "not computed");
        return 0;
    }
    if (w->nsteps == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no NVTX step ranges");
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
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "kernel was not traced in any of the %d steps",
                   w->nsteps);
        return 0;
    }
    double mean = (double)sum / (double)span;
    if (2 * over <= n) {
        free(v);
        set_status(c, rule, MRD_FIND_NOT_FIRED,
                   "%d of %d steps with kernels (of %d) above %.0f%% (overall %.1f%%)", over, n,
                   w->nsteps, 100.0 * threshold, 100.0 * mean);
        return 0;
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_share_desc);
    struct mrd_finding *f = add(c, rule, mean >= 2 * threshold ? MRD_FIND_HIGH : MRD_FIND_MEDIUM);
    set_status(c, rule, MRD_FIND_FIRED, "%d of %d steps with kernels (of %d) above %.0f%%", over, n,
               w->nsteps, 100.0 * threshold);
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
                add_rank(f, a->ranks[i].rank);
        }
        add_number(f, "share", mean);
        add_number(f, "worst_share", v[0].share);
        add_number(f, "steps_over", over);
        add_number(f, "steps_evaluated", n);
        snprintf(f->detail, sizeof(f->detail),
                 "%s share of the step ranges (ranks with kernels): %.1f%% overall, worst "
                 "step %d at %.1f%%; ranks listed exceed %.0f%% over their whole kernel span",
                 idle ? "no kernel running" : "comm kernels not covered by compute", 100.0 * mean,
                 v[0].index, 100.0 * v[0].share, 100.0 * threshold);
    }
    free(v);
    return 0;
}

/* ---- rule 2: copies from pageable memory ------------------------------------------------ */

static int rule_pageable(struct ctx *c)
{
    const int rule = MRD_FIND_PAGEABLE;
    if (total_events(c->a, KIND_MEMCPYS) == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED,
                   "memcpy was not traced: no copy records (profile with --trace memcpy)");
        return 0;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql_pageable, -1, &st, NULL) != SQLITE_OK)
        return sqlerr(c, st);
    struct mrd_finding *f = NULL;
    int64_t copies = 0, bytes = 0, ns = 0, any = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t n = sqlite3_column_int64(st, 1), b = sqlite3_column_int64(st, 2);
        any += n;
        if (b < MRD_FIND_PAGEABLE_BYTES && n < MRD_FIND_PAGEABLE_COPIES)
            continue;
        if (!f && !(f = add(c, rule, MRD_FIND_MEDIUM)))
            break;
        add_rank(f, sqlite3_column_int(st, 0));
        copies += n;
        bytes += b;
        ns += sqlite3_column_int64(st, 3);
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sqlerr(c, st);
    sqlite3_finalize(st);
    if (!f) {
        if (c->out->status[rule] != MRD_FIND_FIRED)
            set_status(c, rule, MRD_FIND_NOT_FIRED,
                       "%" PRId64 " pageable copies, no rank at %d copies or %d bytes", any,
                       MRD_FIND_PAGEABLE_COPIES, MRD_FIND_PAGEABLE_BYTES);
        return 0;
    }
    if (bytes >= 64 * (int64_t)MRD_FIND_PAGEABLE_BYTES)
        f->severity = MRD_FIND_HIGH;
    snprintf(f->title, sizeof(f->title),
             "%" PRId64 " copies (%" PRId64 " bytes) from or to "
             "pageable host memory on %d rank(s)",
             copies, bytes, f->ranks_total);
    add_number(f, "copies", (double)copies);
    add_number(f, "bytes", (double)bytes);
    add_number(f, "time_ns", (double)ns);
    snprintf(f->detail, sizeof(f->detail),
             "memcpy rows whose host side is pageable (src_kind or dst_kind 1) on ranks with "
             ">= %d copies or >= %d bytes; each blocks the calling thread",
             MRD_FIND_PAGEABLE_COPIES, MRD_FIND_PAGEABLE_BYTES);
    set_status(c, rule, MRD_FIND_FIRED, "pageable copies on %d rank(s)", f->ranks_total);
    return 0;
}

/* ---- rule 3: storms of tiny kernels ---------------------------------------------------- */

static int rule_tiny(struct ctx *c)
{
    const int rule = MRD_FIND_TINY_KERNELS;
    if (total_events(c->a, KIND_KERNELS) == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "kernel was not traced: no kernel records");
        return 0;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql_tiny, -1, &st, NULL) != SQLITE_OK)
        return sqlerr(c, st);
    sqlite3_bind_int64(st, 1, MRD_FIND_TINY_NS);
    struct mrd_finding *f = NULL;
    int64_t tiny_sum = 0, all_sum = 0;
    double worst_rate = 0;
    int evaluated = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const struct mrd_an_rank *r = mrd__analyze_rank(c->a, sqlite3_column_int(st, 0));
        int64_t n = sqlite3_column_int64(st, 1), tiny = sqlite3_column_int64(st, 2);
        uint64_t steps = r ? traced_steps(c->a, r) : 0;
        if (steps == 0)
            continue;
        evaluated++;
        double rate = (double)tiny / (double)steps;
        /* median below the threshold: more than half the kernels are tiny */
        if (2 * tiny <= n || rate <= MRD_FIND_TINY_PER_STEP)
            continue;
        if (!f && !(f = add(c, rule, MRD_FIND_MEDIUM)))
            break;
        add_rank(f, r->rank);
        tiny_sum += tiny;
        all_sum += n;
        if (rate > worst_rate)
            worst_rate = rate;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sqlerr(c, st);
    sqlite3_finalize(st);
    if (evaluated == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED,
                   c->a->nsteps == 0 ? "no NVTX step ranges"
                                     : "kernel was not traced in any rank's steps");
        return 0;
    }
    if (!f) {
        if (c->out->status[rule] != MRD_FIND_FIRED)
            set_status(c, rule, MRD_FIND_NOT_FIRED, "%d rank(s) evaluated", evaluated);
        return 0;
    }
    if (worst_rate > 4 * MRD_FIND_TINY_PER_STEP)
        f->severity = MRD_FIND_HIGH;
    snprintf(f->title, sizeof(f->title),
             "up to %.0f kernels shorter than %d us per step on %d "
             "rank(s)",
             worst_rate, MRD_FIND_TINY_NS / 1000, f->ranks_total);
    add_number(f, "tiny_kernels", (double)tiny_sum);
    add_number(f, "kernels", (double)all_sum);
    add_number(f, "tiny_per_step", worst_rate);
    snprintf(f->detail, sizeof(f->detail),
             "ranks whose median kernel runs < %d us and that launch > %d such kernels per "
             "traced step; launch overhead (a few us each) dominates their work",
             MRD_FIND_TINY_NS / 1000, MRD_FIND_TINY_PER_STEP);
    set_status(c, rule, MRD_FIND_FIRED, "%d of %d rank(s)", f->ranks_total, evaluated);
    return 0;
}

/* ---- rule 4: host synchronisation inside steps ----------------------------------------- */

struct local_steps {
    int n, cap;
    int64_t (*v)[2];
    int64_t last_end;
};

/* Each rank's step ranges in its local clock, by the analysis's rule (match.c: the step-name
 * rule, a range nested in the previous one is not a new step). */
static int load_local_steps(struct ctx *c, struct local_steps *ls)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (mrd_db_has_table(c->db, "nvtx") != 1)
        return 0;
    if (sqlite3_prepare_v2(c->db, mrd_db_sql_step_ranges, -1, &st, NULL) != SQLITE_OK)
        return sqlerr(c, st);
    sqlite3_bind_text(st, 1, c->o->step_name ? c->o->step_name : "step", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, c->o->step_name == NULL);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_an_rank *r = mrd__analyze_rank(c->a, sqlite3_column_int(st, 0));
        int64_t s = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
        if (!r || !mrd_step_name_match((const char *)sqlite3_column_text(st, 3), c->o->step_name))
            continue;
        struct local_steps *l = &ls[r - c->a->ranks];
        if ((l->n > 0 && s < l->last_end) || l->n >= MRD_AN_MAX_STEPS)
            continue;
        if (l->n == l->cap) {
            int nc = l->cap ? 2 * l->cap : 64;
            void *p = realloc(l->v, (size_t)nc * sizeof(*l->v));
            if (!p) {
                sqlite3_finalize(st);
                return -ENOMEM;
            }
            l->v = p;
            l->cap = nc;
        }
        l->v[l->n][0] = s;
        l->v[l->n][1] = e;
        l->last_end = e;
        l->n++;
    }
    if (rc != SQLITE_DONE)
        return sqlerr(c, st);
    sqlite3_finalize(st);
    return 0;
}

/* Index of the step range holding t (start <= t < end), -1 if none. */
static int step_holding(const struct local_steps *l, int64_t t)
{
    int lo = 0, hi = l->n - 1, found = -1;
    while (lo <= hi) { /* the last step starting at or before t */
        int mid = lo + (hi - lo) / 2;
        if (l->v[mid][0] <= t) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found >= 0 && t < l->v[found][1] ? found : -1;
}

struct sync_rank {
    uint64_t syncs, steps_with;
    int64_t blocked_ns;
    int last_step;
};

static int cmp_i64_pair_desc(const void *x, const void *y)
{
    const int64_t *p = x, *q = y;
    if (p[1] != q[1])
        return p[1] > q[1] ? -1 : 1;
    return p[0] < q[0] ? -1 : p[0] > q[0];
}

static int rule_sync(struct ctx *c)
{
    const int rule = MRD_FIND_SYNC_IN_STEPS;
    struct mrd_analysis *a = c->a;
    if (total_events(a, KIND_SYNCS) == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED,
                   "sync was not traced: no synchronization records (profile with --trace "
                   "sync)");
        return 0;
    }
    struct local_steps *ls = calloc((size_t)a->nranks + 1, sizeof(*ls));
    struct sync_rank *sr = calloc((size_t)a->nranks + 1, sizeof(*sr));
    int64_t(*step_blocked)[2] = calloc(MRD_AN_MAX_STEPS, sizeof(*step_blocked));
    sqlite3_stmt *st = NULL;
    int rc = -ENOMEM, nsteps_any = 0;
    if (!ls || !sr || !step_blocked)
        goto done;
    if ((rc = load_local_steps(c, ls)) < 0)
        goto done;
    for (int i = 0; i < a->nranks; i++) {
        nsteps_any += ls[i].n;
        sr[i].last_step = -1;
    }
    if (nsteps_any == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no NVTX step ranges");
        goto done;
    }
    for (int s = 0; s < MRD_AN_MAX_STEPS; s++)
        step_blocked[s][0] = s;
    if (sqlite3_prepare_v2(c->db, sql_syncs, -1, &st, NULL) != SQLITE_OK) {
        rc = sqlerr(c, st);
        st = NULL;
        goto done;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_an_rank *r = mrd__analyze_rank(a, sqlite3_column_int(st, 0));
        if (!r)
            continue;
        int i = (int)(r - a->ranks);
        int64_t s = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
        int k = step_holding(&ls[i], s);
        if (k < 0)
            continue;
        sr[i].syncs++;
        sr[i].blocked_ns += e - s;
        step_blocked[k][1] += e - s;
        if (k != sr[i].last_step) {
            sr[i].steps_with++;
            sr[i].last_step = k;
        }
    }
    if (rc != SQLITE_DONE) {
        rc = sqlerr(c, st);
        st = NULL;
        goto done;
    }
    rc = 0;
    struct mrd_finding *f = NULL;
    uint64_t syncs = 0, with = 0, evaluated_steps = 0;
    int64_t blocked = 0;
    int evaluated = 0;
    for (int i = 0; i < a->nranks; i++) {
        uint64_t steps = traced_steps(a, &a->ranks[i]);
        if (steps == 0)
            continue;
        evaluated++;
        if ((double)sr[i].steps_with <= MRD_FIND_SYNC_STEP_SHARE * (double)steps)
            continue;
        if (!f && !(f = add(c, rule, MRD_FIND_MEDIUM)))
            break;
        add_rank(f, a->ranks[i].rank);
        syncs += sr[i].syncs;
        with += sr[i].steps_with;
        evaluated_steps += steps;
        blocked += sr[i].blocked_ns;
    }
    if (evaluated == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "sync was not traced in any step");
        goto done;
    }
    if (!f) {
        if (c->out->status[rule] != MRD_FIND_FIRED)
            set_status(c, rule, MRD_FIND_NOT_FIRED, "%d rank(s) evaluated", evaluated);
        goto done;
    }
    qsort(step_blocked, MRD_AN_MAX_STEPS, sizeof(*step_blocked), cmp_i64_pair_desc);
    for (int k = 0; k < MRD_AN_MAX_STEPS && f->nsteps < MRD_FIND_MAX_STEPS; k++)
        if (step_blocked[k][1] > 0)
            f->steps[f->nsteps++] = step_blocked[k][0];
    snprintf(f->title, sizeof(f->title),
             "host synchronisation in %" PRIu64 " of %" PRIu64 " traced steps on %d rank(s)", with,
             evaluated_steps, f->ranks_total);
    add_number(f, "syncs", (double)syncs);
    add_number(f, "blocked_ns", (double)blocked);
    add_number(f, "steps_with_sync", (double)with);
    add_number(f, "steps_evaluated", (double)evaluated_steps);
    snprintf(f->detail, sizeof(f->detail),
             "event, stream and context synchronizations starting inside the rank's step "
             "ranges, in more than %.0f%% of its traced steps; steps listed by time blocked",
             100.0 * MRD_FIND_SYNC_STEP_SHARE);
    set_status(c, rule, MRD_FIND_FIRED, "%d of %d rank(s)", f->ranks_total, evaluated);
done:
    sqlite3_finalize(st);
    if (ls)
        for (int i = 0; i < a->nranks; i++)
            free(ls[i].v);
    free(ls);
    free(sr);
    free(step_blocked);
    return rc;
}

/* ---- rule 6: stragglers and their cause (why.c's per-step straggler) ------------------- */

static int rule_straggler(struct ctx *c)
{
    const int rule = MRD_FIND_STRAGGLER;
    const struct mrd_analysis *a = c->a;
    const struct mrd_an_why *w = a->why;
    if (!w) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no collectives");
        return 0;
    }
    if (w->nsteps == 0 || w->measured_ns <= 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no NVTX step ranges");
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
        struct mrd_finding *f = add(c, rule, share >= 0.10 ? MRD_FIND_HIGH : MRD_FIND_MEDIUM);
        if (!f)
            continue;
        add_rank(f, rank);
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
        add_number(f, "straggler_steps", nsteps);
        add_number(f, "cost_ns", (double)cost);
        add_number(f, "cost_share", share);
        add_number(f, "late_ns", (double)late);
        snprintf(f->detail, sizeof(f->detail),
                 "straggler cost %.1f%% of the measured step time; cause: %s (the most "
                 "frequent cause of its steps)",
                 100.0 * share, mrd_analyze_cause_name(cause));
    }
    if (fired)
        set_status(c, rule, MRD_FIND_FIRED, "%d rank(s) cost >= %.0f%% of step time", fired,
                   100.0 * MRD_FIND_STRAGGLER_SHARE);
    else
        set_status(c, rule, MRD_FIND_NOT_FIRED, "no rank cost >= %.0f%% of step time",
                   100.0 * MRD_FIND_STRAGGLER_SHARE);
    return 0;
}

/* ---- rule 7: algorithm or protocol differing across ranks (why_stats' flag) ------------ */

static int rule_algo(struct ctx *c)
{
    const int rule = MRD_FIND_ALGO_DIFFER;
    const struct mrd_an_why *w = c->a->why;
    if (!w || w->nstats == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no collectives");
        return 0;
    }
    int fired = 0;
    for (int i = 0; i < w->nstats; i++) {
        const struct mrd_an_coll_stat *s = &w->stats[i];
        if (!s->differ)
            continue;
        fired++;
        struct mrd_finding *f = add(c, rule, MRD_FIND_MEDIUM);
        if (!f)
            continue;
        /* the ranks named in "A/P; rank 2: B/Q; rank 5: ..." */
        for (const char *p = strstr(s->algo_proto, "; rank "); p; p = strstr(p + 1, "; rank "))
            add_rank(f, atoi(p + 7));
        snprintf(f->title, sizeof(f->title),
                 "%s of %" PRId64 " bytes on communicator %016" PRIx64
                 ": ranks chose different algorithms or protocols",
                 s->func, s->bytes, s->comm_hash);
        add_number(f, "bytes", (double)s->bytes);
        add_number(f, "instances", (double)s->count);
        snprintf(f->detail, sizeof(f->detail), "each rank's most frequent choice: %s",
                 s->algo_proto);
    }
    if (fired)
        set_status(c, rule, MRD_FIND_FIRED, "%d collective group(s)", fired);
    else
        set_status(c, rule, MRD_FIND_NOT_FIRED, "%d collective group(s) agree", w->nstats);
    return 0;
}

/* ---- rule 8: environment mismatches (table env_records) ------------------------------- */

/* Keys that differ between ranks by nature: not mismatches. */
static int per_rank_key(const char *key)
{
    static const char *const parts[] = {"uuid",     "pci", "bus_id", "serial",
                                        "hostname", "pid", "rank",   "visible_devices"};
    char low[128];
    size_t n = 0;
    for (; key[n] && n < sizeof(low) - 1; n++)
        low[n] = (char)(key[n] >= 'A' && key[n] <= 'Z' ? key[n] - 'A' + 'a' : key[n]);
    low[n] = '\0';
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (strstr(low, parts[i]))
            return 1;
    return 0;
}

struct env_row {
    int rank;
    char *value;
};

static int cmp_env_value(const void *x, const void *y)
{
    const struct env_row *p = x, *q = y;
    int d = strcmp(p->value, q->value);
    return d ? d : p->rank - q->rank;
}

/* One key's rows (rank order): the majority value (most ranks; a tie goes to the smallest
 * value), then a finding naming every rank with another value. */
static void env_key(struct ctx *c, const char *key, struct env_row *rows, int n, int *fired)
{
    if (n < 2 || per_rank_key(key))
        return;
    qsort(rows, (size_t)n, sizeof(*rows), cmp_env_value);
    int best = 0, best_n = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && strcmp(rows[j].value, rows[i].value) == 0)
            j++;
        if (j - i > best_n) {
            best = i;
            best_n = j - i;
        }
        i = j;
    }
    if (best_n == n)
        return;
    (*fired)++;
    struct mrd_finding *f = add(c, MRD_FIND_ENV_MISMATCH, MRD_FIND_MEDIUM);
    if (!f)
        return;
    const char *maj = rows[best].value;
    int odd[MRD_FIND_MAX_RANKS], nodd = 0;
    int min_rank = -1;
    for (;;) { /* pick the differing ranks in ascending rank order */
        int pick = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(rows[i].value, maj) != 0 && rows[i].rank > min_rank &&
                (pick < 0 || rows[i].rank < rows[pick].rank))
                pick = i;
        if (pick < 0)
            break;
        add_rank(f, rows[pick].rank);
        if (nodd < MRD_FIND_MAX_RANKS)
            odd[nodd++] = pick;
        min_rank = rows[pick].rank;
    }
    snprintf(f->title, sizeof(f->title), "%s differs on %d of %d rank(s)", key, n - best_n, n);
    add_number(f, "ranks_majority", best_n);
    add_number(f, "ranks_differ", n - best_n);
    int off = snprintf(f->detail, sizeof(f->detail), "majority '%s' on %d rank(s)", maj, best_n);
    for (int i = 0; i < nodd && off > 0 && (size_t)off < sizeof(f->detail); i++)
        off += snprintf(f->detail + off, sizeof(f->detail) - (size_t)off, "; rank %d: '%s'",
                        rows[odd[i]].rank, rows[odd[i]].value);
}

static int rule_env(struct ctx *c)
{
    const int rule = MRD_FIND_ENV_MISMATCH;
    if (mrd_db_has_table(c->db, "env_records") != 1) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED,
                   "env was not traced: no env_records table (an older capture)");
        return 0;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql_env, -1, &st, NULL) != SQLITE_OK)
        return sqlerr(c, st);
    struct env_row *rows = NULL;
    char *key = NULL;
    int n = 0, cap = 0, keys = 0, fired = 0, rc, total = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 2);
        if (!k)
            continue;
        total++;
        if (!key || strcmp(key, k) != 0) {
            if (key)
                env_key(c, key, rows, n, &fired);
            for (int i = 0; i < n; i++)
                free(rows[i].value);
            n = 0;
            free(key);
            keys++;
            if (!(key = strdup(k))) {
                rc = -ENOMEM;
                break;
            }
        }
        if (n == cap) {
            int nc = cap ? 2 * cap : 64;
            void *p = realloc(rows, (size_t)nc * sizeof(*rows));
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            rows = p;
            cap = nc;
        }
        rows[n].rank = sqlite3_column_int(st, 1);
        if (!(rows[n].value = strdup(v ? v : ""))) {
            rc = -ENOMEM;
            break;
        }
        n++;
    }
    if (rc == SQLITE_DONE && key)
        env_key(c, key, rows, n, &fired);
    for (int i = 0; i < n; i++)
        free(rows[i].value);
    free(rows);
    free(key);
    if (rc == -ENOMEM) {
        sqlite3_finalize(st);
        return rc;
    }
    if (rc != SQLITE_DONE)
        return sqlerr(c, st);
    sqlite3_finalize(st);
    if (total == 0)
        set_status(c, rule, MRD_FIND_NOT_EVALUATED,
                   "env was not traced: env_records is empty (an older capture)");
    else if (fired)
        set_status(c, rule, MRD_FIND_FIRED, "%d of %d key(s) differ", fired, keys);
    else
        set_status(c, rule, MRD_FIND_NOT_FIRED, "%d key(s) agree on every rank", keys);
    return 0;
}

/* ---- rule 9: clock error bound too wide for the lateness it explains ------------------- */

static int cmp_i64(const void *x, const void *y)
{
    int64_t p = *(const int64_t *)x, q = *(const int64_t *)y;
    return p < q ? -1 : p > q;
}

static int rule_clock(struct ctx *c)
{
    const int rule = MRD_FIND_CLOCK_BOUND;
    struct mrd_analysis *a = c->a;
    const struct mrd_an_why *w = a->why;
    if (!a->global_timebase) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no clock models (local clocks)");
        return 0;
    }
    if (!w || w->nlate == 0) {
        set_status(c, rule, MRD_FIND_NOT_EVALUATED, "no late arrival of %d us or more to explain",
                   MRD_WHY_LATE_NS / 1000);
        return 0;
    }
    /* bound of a rank: its clock model's largest bound, plus its GPU timer model's where
     * arrivals may come from NCCL's GPU timer (no kernel rows, or a run with windows) */
    int64_t *bound = calloc((size_t)a->nranks + 1, sizeof(int64_t));
    int64_t *late = malloc((size_t)w->nlate * sizeof(int64_t));
    sqlite3_stmt *st = NULL;
    int rc = -ENOMEM, fired = 0, evaluated = 0;
    if (!bound || !late)
        goto done;
    for (int i = 0; i < a->nranks; i++)
        bound[i] = a->ranks[i].clock_error_bound_ns;
    if (mrd_db_has_table(c->db, "gpu_timer_models") == 1) {
        if (sqlite3_prepare_v2(c->db, sql_gpu_bound, -1, &st, NULL) != SQLITE_OK) {
            rc = sqlerr(c, st);
            st = NULL;
            goto done;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            struct mrd_an_rank *r = mrd__analyze_rank(a, sqlite3_column_int(st, 0));
            if (r && (r->events[KIND_KERNELS] == 0 || a->nwindow_ranks > 0))
                bound[r - a->ranks] += sqlite3_column_int64(st, 1);
        }
        if (rc != SQLITE_DONE) {
            rc = sqlerr(c, st);
            st = NULL;
            goto done;
        }
    }
    rc = 0;
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
        qsort(late, (size_t)n, sizeof(int64_t), cmp_i64);
        int64_t median = late[(n - 1) / 2];
        if ((double)pair <= MRD_FIND_CLOCK_SKEW_RATIO * (double)median)
            continue;
        fired++;
        struct mrd_finding *f = add(c, rule, pair >= median ? MRD_FIND_HIGH : MRD_FIND_MEDIUM);
        if (!f)
            continue;
        add_rank(f, rank);
        snprintf(f->title, sizeof(f->title),
                 "rank %d: clock error bound %.1f us against a median lateness of %.1f us", rank,
                 (double)pair / 1e3, (double)median / 1e3);
        add_number(f, "bound_ns", (double)pair);
        add_number(f, "median_late_ns", (double)median);
        add_number(f, "late_events", n);
        snprintf(f->detail, sizeof(f->detail),
                 "bound = the rank's clock bound + its reference rank's (largest over its late "
                 "events, GPU timer bounds added where arrivals may come from them) > %.0f%% "
                 "of the median lateness",
                 100.0 * MRD_FIND_CLOCK_SKEW_RATIO);
    }
    if (fired)
        set_status(c, rule, MRD_FIND_FIRED, "%d of %d late rank(s)", fired, evaluated);
    else
        set_status(c, rule, MRD_FIND_NOT_FIRED,
                   "%d late rank(s): bounds well below their "
                   "lateness",
                   evaluated);
done:
    sqlite3_finalize(st);
    free(bound);
    free(late);
    return rc;
}

int mrd_findings_evaluate(sqlite3 *db, const struct mrd_analyze_options *o, struct mrd_analysis *a)
{
    static const struct mrd_analyze_options defaults;
    struct ctx c = {db, o ? o : &defaults, a, calloc(1, sizeof(struct mrd_findings))};
    int rc;
    if (!c.out)
        return -ENOMEM;
    if ((rc = rule_step_share(&c, MRD_FIND_GPU_IDLE, MRD_FIND_IDLE_SHARE)) < 0 ||
        (rc = rule_pageable(&c)) < 0 || (rc = rule_tiny(&c)) < 0 || (rc = rule_sync(&c)) < 0 ||
        (rc = rule_step_share(&c, MRD_FIND_EXPOSED_COMM, MRD_FIND_EXPOSED_SHARE)) < 0 ||
        (rc = rule_straggler(&c)) < 0 || (rc = rule_algo(&c)) < 0 || (rc = rule_env(&c)) < 0 ||
        (rc = rule_clock(&c)) < 0) {
        free(c.out);
        return rc;
    }
    mrd_findings_free(a->findings);
    a->findings = c.out;
    return 0;
}
