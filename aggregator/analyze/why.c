/* Why, and what it cost: straggler cost per step and per run, the cause of every late
 * arrival with its evidence, collective statistics per (communicator, function, message
 * size), and the top kernels per rank (definitions in analyze.h, "why.c"); this file
 * collects the instances, walks the steps (costs, late events) and resolves the causes,
 * why_kernels.c computes the late events' gaps and the shares on the overlap sweep's
 * kernels, why_stats.c the statistics, top kernels and demangling.
 *
 * Where it sits: part of mrd_analyze. mrd__why_begin wraps the options' on_instance so that
 * the one cross-rank matching (match.c) hands every instance here too; mrd__why_prepare
 * then walks the steps (step ranges, gpu_samples) and plans the kernel work: one task per
 * late event's rank (the kernels between its previous collective and its arrival) and per
 * (rank, step) range (the shares); the overlap sweep does the tasks as it reads each
 * rank's kernels; mrd__why_finish turns the gaps into causes, in the order the late events
 * were found, and adds the statistics and the top kernels into a->why. Nothing is
 * written: the results depend on the report's options (step name, local clocks) and on the
 * clock fit, so they are computed when read.
 *
 * Workload: one record per timed instance (its ranks' intervals: 24 bytes a rank), at most
 * MRD_WHY_MAX_ROWS rank intervals; beyond, the instances are counted and a warning says so.
 * Every late event waits for its two gaps (about 250 bytes, and 16 bytes per kernel name a
 * gap saw); the kernels are read once, by the sweep. gpu_samples are copied once into an
 * indexed TEMP table.
 * Measured: 64 ranks, 10 M events (tests/bench/scale/tenmillion.py), about 40,000 late
 * events: the whole report about 5 s CPU, 87 MiB (tests/bench/scale/RESULTS.md).
 * Single thread, the analysis' connection.
 */
#include "why_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"
#include "cmp.h"
#include "error.h"
#include "steps.h"

static const char *const cause_names[MRD_AN_NCAUSES] = {"not evaluated", "compute took longer",
                                                        "launched later (host bound)",
                                                        "communication slower", "unexplained"};

const char *mrd_analyze_cause_name(int cause)
{
    return cause >= 0 && cause < MRD_AN_NCAUSES ? cause_names[cause] : "?";
}

/* ---- collection, through the matching's on_instance ---- */

static int func_index(struct mrd__why *w, const char *func)
{
    for (int i = 0; i < w->nfuncs; i++)
        if (strcmp(w->funcs[i], func) == 0)
            return i;
    if (w->nfuncs == MRD_WHY_MAX_FUNCS)
        return MRD_WHY_MAX_FUNCS - 1; /* the last slot collects the rest */
    snprintf(w->funcs[w->nfuncs], sizeof(w->funcs[0]), "%s", func);
    return w->nfuncs++;
}

static void on_instance(const struct mrd_an_instance *in, void *ctx)
{
    struct mrd__why *w = ctx;
    uint64_t ordinal = w->seen++;
    if (w->user_cb)
        w->user_cb(in, w->user_ctx);
    if (in->ntimed < 2 || in->last_rank < 0 || w->enomem)
        return;
    if (w->nrows + (size_t)in->ntimed > MRD_WHY_MAX_ROWS) {
        w->over_cap++;
        return;
    }
    size_t last_row = w->nrows + (size_t)in->ntimed - 1;
    if (mrd_array_reserve(&w->inst, &w->cap_inst, w->ninst, sizeof(*w->inst), 256, 0) < 0 ||
        mrd_array_reserve(&w->rows, &w->cap_rows, last_row, sizeof(*w->rows), 1024, 0) < 0) {
        w->enomem = 1;
        return;
    }
    struct mrd__why_inst *x = &w->inst[w->ninst++];
    memset(x, 0, sizeof(*x));
    x->comm_hash = in->comm_hash;
    x->seq = in->seq;
    x->ordinal = ordinal;
    x->step = in->step;
    x->func = func_index(w, in->func);
    x->off = (int)w->nrows;
    x->n = in->ntimed;
    x->nranks = in->comm_nranks > 0 ? in->comm_nranks : in->nranks;
    x->last_start = INT64_MIN;
    x->max_end = INT64_MIN;
    for (int i = 0; i < in->ntimed; i++) {
        struct mrd__why_row *r = &w->rows[w->nrows++];
        r->rank = in->ranks[i];
        r->start = in->start[i];
        r->end = in->end[i];
        if (r->start > x->last_start)
            x->last_start = r->start;
        if (r->end > x->max_end)
            x->max_end = r->end;
    }
}

int mrd__why_begin(const struct mrd_analyze_options *o, struct mrd_analyze_options *wrapped,
                   struct mrd__why **out)
{
    struct mrd__why *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    *wrapped = *o;
    w->user_cb = o->on_instance;
    w->user_ctx = o->ctx;
    wrapped->on_instance = on_instance;
    wrapped->ctx = w;
    *out = w;
    return 0;
}

void mrd__why_destroy(struct mrd__why *w)
{
    if (!w)
        return;
    mrd__why_kernels_free(w);
    MRD_ARRAY_FREE_ALL(w->inst, w->rows, w->tally, w->top, w->pending, w);
}

void mrd__why_free(struct mrd_an_why *y)
{
    if (y)
        MRD_ARRAY_FREE_ALL(y->steps, y->late, y->rank_causes, y->kernels, y);
}

/* ---- step ranges per rank, in the comparable timebase ---- */

/* The step ranges of match.c's rule, mapped in place into the comparable timebase
 * (INT64_MIN: a rank without a clock model, not comparable). */
static int load_step_ranges(sqlite3 *db, const struct mrd_timebase *tb,
                            const struct mrd_analyze_options *o, struct mrd_analysis *a,
                            struct mrd__step_ranges *rs)
{
    int rc = mrd__analyze_step_ranges(db, o, a, rs);
    for (int i = 0; rc == 0 && i < a->nranks; i++) {
        int rank = a->ranks[i].rank;
        int comparable = !a->global_timebase || mrd_timebase_rank_fitted(tb, rank);
        for (int j = 0; j < rs[i].n; j++) {
            rs[i].start[j] = comparable ? mrd_timebase_map(tb, rank, rs[i].start[j]) : INT64_MIN;
            rs[i].end[j] = comparable ? mrd_timebase_map(tb, rank, rs[i].end[j]) : INT64_MIN;
        }
    }
    return rc;
}

/* ---- one late event's GPU reading ---- */

static void read_gpu(sqlite3_stmt *st, const struct mrd_timebase *tb, int rank, int64_t t,
                     struct mrd_an_gpu_reading *g)
{
    memset(g, 0, sizeof(*g));
    if (!st)
        return;
    sqlite3_reset(st);
    int64_t local = mrd_timebase_unmap(tb, rank, t);
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, local);
    if (sqlite3_step(st) != SQLITE_ROW)
        return;
    int64_t age = local - sqlite3_column_int64(st, 4);
    if (age > MRD_WHY_GPU_MAX_AGE_NS)
        return; /* too old to say anything of this step */
    g->have = 1;
    g->age_ns = age;
    g->sm_clock_mhz = sqlite3_column_int64(st, 0);
    g->power_mw = sqlite3_column_int64(st, 1);
    g->temperature_c = sqlite3_column_int64(st, 2);
    g->throttle_reasons = sqlite3_column_int64(st, 3);
}

static int cmp_late(const void *x, const void *y)
{
    const struct mrd_an_late *a = x, *b = y;
    return MRD_CMP_KEYS(MRD_CMP(b->late_ns, a->late_ns), MRD_CMP(a->step, b->step));
}

/* ---- the per-step cost and the late events ---- */

/* A late event found by the step walk, waiting for the gaps of its two ranks
 * (gaps[gap] the late rank's, gaps[gap + 1] the reference rank's), which the sweep fills. */
struct mrd__why_pending {
    int64_t step, late_ns, comm_ns;
    uint64_t comm_hash, seq;
    int func; /* index into w->funcs */
    int rank, ref_rank;
    int sets_step_cause; /* the largest late event of its step's straggler */
    size_t gap;
    struct mrd_an_gpu_reading gpu[2];
};

struct step_ctx {
    sqlite3 *db;
    const struct mrd_timebase *tb;
    struct mrd_analysis *a;
    struct mrd__why *w;
    struct mrd_an_why *y;
    struct mrd__step_ranges *rs;
    int64_t *shift;        /* [nranks] */
    int64_t *prev_end;     /* [nranks] end of the previous instance in the step, INT64_MIN */
    int64_t *late_sum;     /* [nranks] lateness summed in the step */
    int64_t *best_late;    /* [nranks] its largest late event in the step, and that event */
    int64_t *best_pending; /* index into w->pending, -1: none */
    sqlite3_stmt *gpu_st;
    int has_kernels;
};

static int rank_index(const struct mrd_analysis *a, int rank)
{
    const struct mrd_an_rank *r = mrd__analyze_rank((struct mrd_analysis *)a, rank);
    return r ? (int)(r - a->ranks) : -1;
}

/* Two empty gaps (nothing traced) at w->gaps[*at]. Returns 0 or -ENOMEM. */
static int gaps_add(struct mrd__why *w, size_t *at)
{
    size_t second = w->ngaps + 1; /* room up to the second gap's index */
    int rc = mrd_array_reserve(&w->gaps, &w->cap_gaps, second, sizeof(*w->gaps), 256, 0);
    if (rc < 0)
        return rc;
    *at = w->ngaps;
    for (int k = 0; k < 2; k++) {
        memset(&w->gaps[w->ngaps], 0, sizeof(w->gaps[0]));
        w->gaps[w->ngaps++].first_kernel = INT64_MAX;
    }
    return 0;
}

/* Records a late event: its boundaries, GPU readings and communication part now, and one
 * gap task per rank for the sweep (the rank's kernels from its previous step's start, or
 * from the boundary, to its arrival). Returns 0 or -ENOMEM. */
static int late_event(struct step_ctx *c, const struct mrd__why_inst *x, int64_t step, int li,
                      int ri, int64_t late_ns)
{
    struct mrd_analysis *a = c->a;
    struct mrd__why *w = c->w;
    const struct mrd__why_row *rows = &w->rows[x->off];
    struct mrd__why_pending *p;
    int idx[2] = {li, ri};
    int64_t boundary[2];
    size_t gap;
    int have_prev = 1, rc;

    if ((rc = mrd_array_reserve(&w->pending, &w->cap_pending, w->npending, sizeof(*w->pending), 64,
                                0)) < 0 ||
        (rc = gaps_add(w, &gap)) < 0)
        return rc;
    p = &w->pending[w->npending];
    memset(p, 0, sizeof(*p));
    p->gap = gap;
    p->step = step;
    p->comm_hash = x->comm_hash;
    p->seq = x->seq;
    p->func = x->func;
    p->rank = rows[li].rank;
    p->ref_rank = rows[ri].rank;
    p->late_ns = late_ns;
    for (int k = 0; k < 2; k++) {
        int rank = rows[idx[k]].rank, ai = rank_index(a, rank);
        const struct mrd__step_ranges *l = &c->rs[ai];
        if (c->prev_end[ai] != INT64_MIN) {
            boundary[k] = c->prev_end[ai];
        } else {
            have_prev = 0;
            boundary[k] = step < l->n ? l->start[step] : rows[idx[k]].start;
        }
        int64_t from =
            l->n > 0 ? l->start[step > 0 && step - 1 < l->n ? step - 1 : 0] : boundary[k];
        if (from == INT64_MIN || from > boundary[k])
            from = boundary[k];
        if (c->has_kernels) {
            struct mrd__why_task t = {.rank_index = ai, .is_gap = 1, .target = gap + (size_t)k};
            int64_t scan_from = mrd_timebase_unmap(c->tb, rank, from);
            t.lo = mrd_timebase_unmap(c->tb, rank, boundary[k]);
            t.hi = mrd_timebase_unmap(c->tb, rank, rows[idx[k]].start);
            t.from = scan_from < t.lo ? scan_from : t.lo;
            t.to = t.hi + 1;
            if ((rc = mrd__why_task_add(w, &t)) < 0)
                return rc;
        }
        read_gpu(c->gpu_st, c->tb, rank, rows[idx[k]].start, &p->gpu[k]);
    }
    p->comm_ns = have_prev ? boundary[0] - boundary[1] : 0;
    int ai = rank_index(a, p->rank);
    if (late_ns > c->best_late[ai]) { /* the cause a step shows: its straggler's largest */
        c->best_late[ai] = late_ns;
        c->best_pending[ai] = (int64_t)w->npending;
    }
    w->npending++;
    return 0;
}

/* A late event's parts and cause from its two gaps, counted and kept among the largest
 * MRD_WHY_MAX_EVENTS (in the order found). Returns 0 or -ENOMEM. */
static int late_resolve(struct mrd__why *w, struct mrd_analysis *a,
                        const struct mrd__why_pending *p, int *cap_late)
{
    struct mrd_an_why *y = w->y;
    const struct mrd__why_gap *g = &w->gaps[p->gap];
    struct mrd_an_late e;
    int64_t late_ns = p->late_ns;
    memset(&e, 0, sizeof(e));
    e.step = p->step;
    e.comm_hash = p->comm_hash;
    e.seq = p->seq;
    snprintf(e.func, sizeof(e.func), "%s", w->funcs[p->func]);
    e.rank = p->rank;
    e.ref_rank = p->ref_rank;
    e.late_ns = late_ns;
    e.comm_ns = p->comm_ns;
    e.gpu[0] = p->gpu[0];
    e.gpu[1] = p->gpu[1];
    for (int k = 0; k < 2; k++) {
        e.busy_ns[k] = g[k].busy;
        e.kernels[k] = g[k].compute_kernels;
    }
    int evaluated = g[0].kernels > 0 && g[1].kernels > 0;
    if (evaluated) {
        e.host_ns = (g[0].first_kernel - g[1].first_kernel) - e.comm_ns;
        e.compute_ns = g[0].busy - g[1].busy;
        /* the compute kernel whose time grew the most on the late rank (a name's dense index
         * is the same on every rank) */
        const struct mrd__why_gap_name *n0 = g[0].nnames ? &w->gap_names[g[0].names_off] : NULL;
        const struct mrd__why_gap_name *n1 = g[1].nnames ? &w->gap_names[g[1].names_off] : NULL;
        for (int i = 0; i < g[0].nnames; i++) {
            const char *name = mrd__why_name_text(w, n0[i].name);
            int64_t d = n0[i].ns;
            for (int k = 0; k < g[1].nnames; k++)
                if (n1[k].name == n0[i].name)
                    d -= n1[k].ns;
            if (d > e.kernel_diff_ns) {
                char shown[256];
                snprintf(shown, sizeof(shown), "%s", name);
                e.kernel_diff_ns = d;
                snprintf(e.kernel, sizeof(e.kernel), "%s", mrd_analyze_demangle_cached(shown));
            }
        }
    }
    int64_t best = e.comm_ns;
    e.cause = MRD_AN_CAUSE_COMM;
    if (evaluated && e.host_ns > best) {
        best = e.host_ns;
        e.cause = MRD_AN_CAUSE_HOST;
    }
    if (evaluated && e.compute_ns > best) {
        best = e.compute_ns;
        e.cause = MRD_AN_CAUSE_COMPUTE;
    }
    if (2 * best < late_ns)
        e.cause = evaluated ? MRD_AN_CAUSE_UNEXPLAINED : MRD_AN_CAUSE_NOT_EVALUATED;
    if (e.cause == MRD_AN_CAUSE_NOT_EVALUATED)
        y->steps_not_evaluated++;
    y->rank_causes[rank_index(a, e.rank)][e.cause]++;
    y->late_total++;
    if (p->sets_step_cause)
        y->steps[e.step].cause = e.cause;
    if (y->nlate == MRD_WHY_MAX_EVENTS) { /* keep the largest: replace the smallest */
        int min = 0;
        for (int k = 1; k < y->nlate; k++)
            if (cmp_late(&y->late[k], &y->late[min]) > 0)
                min = k;
        if (cmp_late(&e, &y->late[min]) < 0)
            y->late[min] = e;
        return 0;
    }
    if (y->nlate == *cap_late) {
        int nc = *cap_late ? *cap_late * 2 : 64;
        if (nc > MRD_WHY_MAX_EVENTS)
            nc = MRD_WHY_MAX_EVENTS;
        struct mrd_an_late *q = realloc(y->late, (size_t)nc * sizeof(*q));
        if (!q)
            return -ENOMEM;
        y->late = q;
        *cap_late = nc;
    }
    y->late[y->nlate++] = e;
    return 0;
}

/* The order a step's instances are propagated in: by step, then last arrival, then the
 * matching's key order. */
struct inst_key {
    int64_t step, last_start;
    uint64_t ordinal;
    size_t idx;
};

static int cmp_inst(const void *x, const void *y)
{
    const struct inst_key *a = x, *b = y;
    return MRD_CMP_KEYS(MRD_CMP(a->step, b->step), MRD_CMP(a->last_start, b->last_start),
                        MRD_CMP(a->ordinal, b->ordinal));
}

static int one_step(struct step_ctx *c, int64_t step, const struct inst_key *order, size_t n)
{
    struct mrd_analysis *a = c->a;
    struct mrd_an_step_cost *sc = &c->y->steps[step];
    int rc;
    for (int i = 0; i < a->nranks; i++) {
        c->shift[i] = 0;
        c->prev_end[i] = INT64_MIN;
        c->late_sum[i] = 0;
        c->best_late[i] = 0;
        c->best_pending[i] = -1;
    }
    for (size_t k = 0; k < n; k++) {
        const struct mrd__why_inst *x = &c->w->inst[order[k].idx];
        const struct mrd__why_row *rows = &c->w->rows[x->off];
        int li = -1, ri = -1;
        int64_t lv = INT64_MIN, rv = INT64_MIN;
        for (int i = 0; i < x->n; i++) { /* latest and next latest shifted arrival */
            int ai = rank_index(a, rows[i].rank);
            int64_t v = rows[i].start - c->shift[ai];
            if (v > lv || (v == lv && li >= 0 && rows[i].rank < rows[li].rank)) {
                ri = li, rv = lv;
                li = i, lv = v;
            } else if (v > rv || (v == rv && ri >= 0 && rows[i].rank < rows[ri].rank)) {
                ri = i, rv = v;
            }
        }
        int64_t saving = lv - rv;
        int64_t new_shift = x->last_start - rv;
        c->late_sum[rank_index(a, rows[li].rank)] += saving;
        if (saving >= MRD_WHY_LATE_NS &&
            (rc = late_event(c, x, step, li, ri, rows[li].start - rows[ri].start)) < 0)
            return rc;
        for (int i = 0; i < x->n; i++) {
            int ai = rank_index(a, rows[i].rank);
            c->shift[ai] = new_shift;
            c->prev_end[ai] = rows[i].end;
        }
    }
    int64_t measured = -1, cf = -1;
    int straggler = -1;
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd__step_ranges *l = &c->rs[i];
        if (step >= l->n || l->start[step] == INT64_MIN)
            continue;
        int64_t len = l->end[step] - l->start[step];
        if (len > measured)
            measured = len;
        if (len - c->shift[i] > cf)
            cf = len - c->shift[i];
        if (c->late_sum[i] >= MRD_WHY_LATE_NS && c->late_sum[i] > sc->straggler_late_ns) {
            sc->straggler_late_ns = c->late_sum[i];
            sc->straggler = a->ranks[i].rank;
            straggler = i;
        }
    }
    if (straggler >= 0 && c->best_pending[straggler] >= 0) /* its cause, once resolved */
        c->w->pending[c->best_pending[straggler]].sets_step_cause = 1;
    sc->measured_ns = measured;
    sc->counterfactual_ns = cf < 0 ? measured : cf;
    sc->cost_ns = measured < 0 ? 0 : measured - sc->counterfactual_ns;
    if (measured >= 0) {
        c->y->measured_ns += measured;
        c->y->counterfactual_ns += sc->counterfactual_ns;
        c->y->cost_ns += sc->cost_ns;
    }
    return 0;
}

/* ---- exposed communication and GPU idle per step ---- */

/* The local range of (rank, step) for the shares: kernels starting in [*qlo, *hi) (from
 * the previous step's start), clipped to [*lo, *hi]. 0 when the step has no range. */
static int share_range(const struct step_ctx *c, const struct mrd__step_ranges *l, int rank, int st,
                       int64_t *qlo, int64_t *lo, int64_t *hi)
{
    if (l->start[st] == INT64_MIN)
        return 0;
    *lo = mrd_timebase_unmap(c->tb, rank, l->start[st]);
    *hi = mrd_timebase_unmap(c->tb, rank, l->end[st]);
    int64_t from = st > 0 && l->start[st - 1] != INT64_MIN
                       ? mrd_timebase_unmap(c->tb, rank, l->start[st - 1])
                       : *lo;
    *qlo = from < *lo ? from : *lo;
    return 1;
}

/* For every rank's step range: the union of its communication kernels not covered by
 * compute kernels (exposed) and the time no kernel ran (idle), clipped to the range in the
 * rank's local clock; summed per step over the ranks that ran a kernel in it. One task per
 * (rank, step) for the sweep, over the kernels from the previous step's start to the
 * step's end. */
static int plan_shares(struct step_ctx *c)
{
    struct mrd_analysis *a = c->a;
    int rc = 0;
    for (int i = 0; i < a->nranks && rc == 0; i++) {
        const struct mrd__step_ranges *l = &c->rs[i];
        int rank = a->ranks[i].rank, nst = l->n < c->y->nsteps ? l->n : c->y->nsteps;
        for (int st = 0; st < nst && rc == 0; st++) {
            struct mrd__why_task t = {.rank_index = i, .is_gap = 0, .target = (size_t)st};
            if (share_range(c, l, rank, st, &t.from, &t.lo, &t.hi)) {
                t.to = t.hi;
                rc = mrd__why_task_add(c->w, &t);
            }
        }
    }
    return rc;
}

/* The step walk: every step's cost, its straggler and late events (their gaps left to the
 * sweep), and the shares' tasks. */
static int plan_steps(sqlite3 *db, const struct mrd_timebase *tb,
                      const struct mrd_analyze_options *o, struct mrd_analysis *a,
                      struct mrd__why *w, struct mrd_an_why *y)
{
    struct step_ctx c;
    struct inst_key *order = NULL;
    size_t n = 0;
    int rc = -ENOMEM;

    memset(&c, 0, sizeof(c));
    c.db = db, c.tb = tb, c.a = a, c.w = w, c.y = y;
    y->nsteps = a->nsteps;
    if (a->nsteps == 0)
        return 0;
    y->steps = calloc((size_t)a->nsteps, sizeof(*y->steps));
    c.rs = calloc((size_t)a->nranks, sizeof(*c.rs));
    c.shift = calloc((size_t)a->nranks, sizeof(int64_t));
    c.prev_end = calloc((size_t)a->nranks, sizeof(int64_t));
    c.late_sum = calloc((size_t)a->nranks, sizeof(int64_t));
    c.best_late = calloc((size_t)a->nranks, sizeof(int64_t));
    c.best_pending = calloc((size_t)a->nranks, sizeof(int64_t));
    order = malloc((w->ninst ? w->ninst : 1) * sizeof(*order));
    if (!y->steps || !c.rs || !c.shift || !c.prev_end || !c.late_sum || !c.best_late ||
        !c.best_pending || !order)
        goto done;
    for (int s = 0; s < a->nsteps; s++) {
        y->steps[s].straggler = -1;
        y->steps[s].cause = -1;
        y->steps[s].measured_ns = -1;
    }
    if ((rc = load_step_ranges(db, tb, o, a, c.rs)) < 0)
        goto done;
    c.has_kernels = mrd_db_has_table(db, "kernels") == 1;
    if (mrd_db_has_table(db, "gpu_samples") == 1 &&
        (sqlite3_exec(db, mrd_db_sql_why_gpu_samples_copy, NULL, NULL, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(db, mrd_db_sql_why_gpu_sample, -1, &c.gpu_st, NULL) != SQLITE_OK)) {
        rc = mrd__analyze_sqlerr(db);
        goto done;
    }
    for (size_t i = 0; i < w->ninst; i++)
        if (w->inst[i].step >= 0 && w->inst[i].step < a->nsteps) {
            struct inst_key *k = &order[n++];
            k->step = w->inst[i].step;
            k->last_start = w->inst[i].last_start;
            k->ordinal = w->inst[i].ordinal;
            k->idx = i;
        }
    if (n > 0)
        qsort(order, n, sizeof(*order), cmp_inst);
    rc = 0;
    for (size_t i = 0, j; i < n && rc == 0; i = j) {
        for (j = i; j < n && order[j].step == order[i].step; j++)
            ;
        rc = one_step(&c, order[i].step, order + i, j - i);
    }
    for (int s = 0; rc == 0 && s < a->nsteps; s++) /* steps without a collective */
        if (y->steps[s].measured_ns < 0) {
            int64_t m = -1;
            for (int i = 0; i < a->nranks; i++)
                if (s < c.rs[i].n && c.rs[i].start[s] != INT64_MIN &&
                    c.rs[i].end[s] - c.rs[i].start[s] > m)
                    m = c.rs[i].end[s] - c.rs[i].start[s];
            y->steps[s].measured_ns = y->steps[s].counterfactual_ns = m;
            if (m >= 0) {
                y->measured_ns += m;
                y->counterfactual_ns += m;
            }
        }
    if (rc == 0 && c.has_kernels)
        rc = plan_shares(&c);
done:
    sqlite3_finalize(c.gpu_st);
    mrd__step_ranges_free(c.rs, a->nranks);
    MRD_ARRAY_FREE_ALL(c.shift, c.prev_end, c.late_sum, c.best_late, c.best_pending, order);
    return rc;
}

int mrd__why_prepare(sqlite3 *db, const struct mrd_timebase *tb,
                     const struct mrd_analyze_options *o, struct mrd__why *w,
                     struct mrd_analysis *a)
{
    struct mrd_an_why *y;
    int rc;
    if (w->enomem)
        return -ENOMEM;
    y = calloc(1, sizeof(*y));
    if (!y)
        return -ENOMEM;
    a->why = y;
    w->y = y;
    w->tb = tb;
    y->nranks = a->nranks;
    y->rank_causes = calloc(a->nranks ? (size_t)a->nranks : 1, sizeof(*y->rank_causes));
    if (!y->rank_causes)
        return -ENOMEM;
    if (w->over_cap)
        mrd__analyze_warn(a,
                          "%llu collective instances beyond %d rank intervals: left out of "
                          "the straggler cost and the collective statistics",
                          (unsigned long long)w->over_cap, MRD_WHY_MAX_ROWS);
    if ((rc = plan_steps(db, tb, o, a, w, y)) < 0) /* also without collectives: shares */
        return rc;
    mrd__why_tasks_sorted(w);
    return 0;
}

int mrd__why_finish(sqlite3 *db, struct mrd__why *w, struct mrd_analysis *a)
{
    struct mrd_an_why *y = w->y;
    int cap_late = 0, rc;
    if ((rc = mrd__why_stats(db, w, y)) < 0)
        return rc;
    for (size_t i = 0; i < w->npending; i++)
        if ((rc = late_resolve(w, a, &w->pending[i], &cap_late)) < 0)
            return rc;
    if (y->nlate > 1) /* the largest first */
        qsort(y->late, (size_t)y->nlate, sizeof(*y->late), cmp_late);
    return mrd__why_top_kernels(db, w, a, y);
}
