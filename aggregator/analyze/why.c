/* Why, and what it cost: straggler cost per step and per run, the cause of every late
 * arrival with its evidence, collective statistics per (communicator, function, message
 * size), and the top kernels per rank (definitions in analyze.h, "why.c"); this file
 * collects the instances and computes the costs, causes and shares, why_stats.c the
 * statistics, top kernels and demangling.
 *
 * Where it sits: part of mrd_analyze. mrd__why_begin wraps the options' on_instance so that
 * the one cross-rank matching (match.c) hands every instance here too; mrd__why_finish
 * then reads what it needs from the database (step ranges, kernels between a late rank's
 * previous collective and its arrival, gpu_samples, the per-rank algorithm and protocol,
 * kernel totals) and fills a->why. Nothing is written: the results depend on the report's
 * options (step name, local clocks) and on the clock fit, so they are computed when read.
 *
 * Workload: one record per timed instance (its ranks' intervals: 24 bytes a rank), at most
 * MRD_WHY_MAX_ROWS rank intervals; beyond, the instances are counted and a warning says so.
 * Kernel queries, through the kernels_rank_start index: the late events read each rank's
 * kernels into a per-rank buffer that keeps them from the previous step's start on (a
 * step's late events share it, the next step reads only what is new: memory about two
 * steps of kernels per rank with late events), and the shares read each rank's kernels in
 * one query (per (rank, step) where its ranges do not move forward); names are read from
 * strings once each. The top kernels come from the overlap sweep's reading of every kernel
 * (no pass of their own). gpu_samples are copied once into an indexed TEMP table.
 * Measured: 32 ranks x 300 steps, 77k kernels, 31k NCCL ops: the report's user time 0.37 s
 * without this pass, about 1.0 s with it, 24 MB resident; 64 ranks, 10 M events
 * (tests/bench/scale/tenmillion.py): the whole report 18-21 s CPU, 117 MiB.
 * Single thread, the analysis' connection.
 */
#include "why_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
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
    if (w->ninst == w->cap_inst) {
        size_t nc = w->cap_inst ? w->cap_inst * 2 : 256;
        struct mrd__why_inst *p = realloc(w->inst, nc * sizeof(*p));
        if (!p) {
            w->enomem = 1;
            return;
        }
        w->inst = p;
        w->cap_inst = nc;
    }
    while (w->nrows + (size_t)in->ntimed > w->cap_rows) {
        size_t nc = w->cap_rows ? w->cap_rows * 2 : 1024;
        struct mrd__why_row *p = realloc(w->rows, nc * sizeof(*p));
        if (!p) {
            w->enomem = 1;
            return;
        }
        w->rows = p;
        w->cap_rows = nc;
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
    free(w->inst);
    free(w->rows);
    free(w->tally);
    free(w->top);
    free(w);
}

void mrd__why_free(struct mrd_an_why *y)
{
    if (!y)
        return;
    free(y->steps);
    free(y->late);
    free(y->rank_causes);
    free(y->kernels);
    free(y);
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

/* ---- one late event's evidence ---- */

#define MRD_WHY_GAP_NAMES 16 /* compute kernel names compared per late event */

struct gap {
    int64_t first_kernel; /* first kernel start after the boundary, INT64_MAX: none */
    int64_t busy;         /* union of compute kernels inside [boundary, arrival) */
    int64_t compute_kernels, kernels;
    int nnames; /* time per compute kernel name (clipped), in order of first appearance */
    struct {
        char name[256];
        int64_t ns;
    } names[MRD_WHY_GAP_NAMES];
};

static void gap_name_add(struct gap *g, const char *name, int64_t ns)
{
    if (!name)
        name = "?";
    for (int i = 0; i < g->nnames; i++)
        if (strcmp(g->names[i].name, name) == 0) {
            g->names[i].ns += ns;
            return;
        }
    if (g->nnames == MRD_WHY_GAP_NAMES)
        return;
    snprintf(g->names[g->nnames].name, sizeof(g->names[0].name), "%s", name);
    g->names[g->nnames++].ns = ns;
}

/* ---- kernels of the late events' ranges, read once per rank ---- */

/* A kernel name by name_id, looked up in strings once (name NULL: no such string). */
struct gname {
    int64_t id;
    char *name;
    int used, nccl; /* nccl: mrd_analyze_is_nccl_name(name) */
};

/* The names the kernel query met: an open-addressing table, grown at half full, and the
 * statement that reads a name on first sight (mrd_db_sql_why_string). */
struct gnames {
    struct gname *v;
    size_t n, cap;
    sqlite3_stmt *lookup;
};

/* One rank's buffered kernels, starts ascending: start, end (local ns), 1 = communication,
 * index into gnames (-1: no name). Holds the query's rows for starts in [from, to); entries
 * before `first` are dropped at the next compaction. */
struct gcache {
    int64_t (*k)[4];
    size_t first, n, cap;
    int64_t from, to;
    int valid;
};

static void gnames_free(struct gnames *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->v[i].name);
    free(t->v);
    sqlite3_finalize(t->lookup);
    memset(t, 0, sizeof(*t));
}

static size_t gname_slot(const struct gnames *t, int64_t id)
{
    size_t i = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & (t->cap - 1);
    while (t->v[i].used && t->v[i].id != id)
        i = (i + 1) & (t->cap - 1);
    return i;
}

/* The slot of the kernel query's column `col` (a name_id): -1 for NULL (no name), else
 * the name's slot, read from strings on first sight; < 0 other than -1: an error. */
static int64_t gname_of(sqlite3 *db, struct gnames *t, sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return -1;
    int64_t id = sqlite3_column_int64(st, col);
    if (2 * (t->n + 1) > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        struct gname *nv = calloc(nc, sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        struct gnames g = {nv, t->n, nc, t->lookup};
        for (size_t i = 0; i < t->cap; i++)
            if (t->v[i].used)
                nv[gname_slot(&g, t->v[i].id)] = t->v[i];
        free(t->v);
        *t = g;
    }
    size_t i = gname_slot(t, id);
    if (!t->v[i].used) {
        int rc;
        sqlite3_reset(t->lookup);
        sqlite3_bind_int64(t->lookup, 1, id);
        rc = sqlite3_step(t->lookup);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return mrd__analyze_sqlerr(db);
        const char *text =
            rc == SQLITE_ROW ? (const char *)sqlite3_column_text(t->lookup, 0) : NULL;
        if (text && !(t->v[i].name = strdup(text)))
            return -ENOMEM;
        t->v[i].id = id;
        t->v[i].used = 1;
        t->v[i].nccl = mrd_analyze_is_nccl_name(t->v[i].name);
        t->n++;
    }
    return (int64_t)i;
}

static int gcache_push(struct gcache *b, const int64_t row[4])
{
    if (b->first > 0 && b->n == b->cap) { /* drop what the ranges have passed */
        memmove(b->k, b->k + b->first, (b->n - b->first) * sizeof(*b->k));
        b->n -= b->first;
        b->first = 0;
    }
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        int64_t(*p)[4] = realloc(b->k, nc * sizeof(*p));
        if (!p)
            return -ENOMEM;
        b->k = p;
        b->cap = nc;
    }
    memcpy(b->k[b->n++], row, sizeof(*b->k));
    return 0;
}

/* Makes b hold rank's kernels starting in [from, to): keeps what it holds from `from` on
 * when its range covers `from`, and reads only the starts in [b->to, to) it lacks. The
 * concatenated rows are the rows, in the order, of one query over [from, to): the
 * (rank, start) index returns equal starts together, so no split separates them. */
static int gcache_fill(sqlite3 *db, sqlite3_stmt *st, struct gnames *names, struct gcache *b,
                       int rank, int64_t from, int64_t to)
{
    int rc;
    if (!b->valid || from < b->from || from > b->to) {
        b->first = b->n = 0;
        b->from = b->to = from;
        b->valid = 1;
    }
    while (b->first < b->n && b->k[b->first][0] < from)
        b->first++;
    b->from = from;
    if (to <= b->to)
        return 0;
    sqlite3_reset(st);
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, b->to);
    sqlite3_bind_int64(st, 3, to);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t row[4] = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                          sqlite3_column_int(st, 2), gname_of(db, names, st, 3)};
        if (row[3] < -1) {
            b->valid = 0;
            return (int)row[3];
        }
        if (row[3] >= 0 && names->v[row[3]].nccl)
            row[2] = 1;
        if (gcache_push(b, row) < 0) {
            b->valid = 0;
            return -ENOMEM;
        }
    }
    if (rc != SQLITE_DONE) {
        b->valid = 0;
        return mrd__analyze_sqlerr(db);
    }
    b->to = to;
    return 0;
}

/* Kernels of `rank` that overlap [lo, hi] (comparable timebase; the collective's own
 * kernel, starting at hi, counts as traced): the first moment the GPU was busy after lo
 * (lo itself when a kernel runs across it), and the union of the compute (non-NCCL)
 * kernels clipped to [lo, hi). The scan starts at scan_from (local), the rank's previous
 * step start, so that kernels running across lo are seen through the (rank, start) index.
 * The rows come from the rank's buffer b: the late events of a step share scan_from and
 * the next step's scan_from lies inside the range already read, so each kernel is read
 * from the database about once. */
static int read_gap(sqlite3 *db, sqlite3_stmt *st, struct gnames *names, struct gcache *b,
                    const struct mrd_timebase *tb, int rank, int64_t scan_from, int64_t lo,
                    int64_t hi, struct gap *g)
{
    int64_t llo = mrd_timebase_unmap(tb, rank, lo), lhi = mrd_timebase_unmap(tb, rank, hi);
    int64_t cur_s = 0, cur_e = INT64_MIN, first = INT64_MAX;
    int rc;
    memset(g, 0, sizeof(*g));
    g->first_kernel = INT64_MAX;
    if (!st)
        return 0; /* no kernels table: nothing traced */
    if ((rc = gcache_fill(db, st, names, b, rank, scan_from < llo ? scan_from : llo, lhi + 1)) < 0)
        return rc;
    for (size_t i = b->first; i < b->n && b->k[i][0] < lhi + 1; i++) {
        int64_t s = b->k[i][0], e = b->k[i][1];
        const char *name = b->k[i][3] < 0 ? NULL : names->v[b->k[i][3]].name;
        if (e < llo || (e == llo && s < llo))
            continue; /* ended at or before the boundary (the previous collective) */
        g->kernels++;
        if (s < llo)
            s = llo;
        if (s < first)
            first = s;
        if (b->k[i][2])
            continue;
        if (e > lhi)
            e = lhi;
        if (e <= s)
            continue;
        g->compute_kernels++;
        gap_name_add(g, name, e - s);
        if (s > cur_e) {
            if (cur_e > cur_s)
                g->busy += cur_e - cur_s;
            cur_s = s;
            cur_e = e;
        } else if (e > cur_e) {
            cur_e = e;
        }
    }
    if (cur_e > cur_s)
        g->busy += cur_e - cur_s;
    if (first != INT64_MAX)
        g->first_kernel = mrd_timebase_map(tb, rank, first);
    return 0;
}

static void read_gpu(sqlite3_stmt *st, const struct mrd_timebase *tb, int rank, int64_t t,
                     struct mrd_an_gpu_reading *g)
{
    memset(g, 0, sizeof(*g));
    if (!st)
        return;
    sqlite3_reset(st);
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, mrd_timebase_unmap(tb, rank, t));
    if (sqlite3_step(st) == SQLITE_ROW) {
        g->have = 1;
        g->sm_clock_mhz = sqlite3_column_int64(st, 0);
        g->power_mw = sqlite3_column_int64(st, 1);
        g->temperature_c = sqlite3_column_int64(st, 2);
        g->throttle_reasons = sqlite3_column_int64(st, 3);
    }
}

static int cmp_late(const void *x, const void *y)
{
    const struct mrd_an_late *a = x, *b = y;
    if (a->late_ns != b->late_ns)
        return a->late_ns > b->late_ns ? -1 : 1;
    return a->step < b->step ? -1 : a->step > b->step;
}

/* ---- the per-step cost and the late events ---- */

struct step_ctx {
    sqlite3 *db;
    const struct mrd_timebase *tb;
    struct mrd_analysis *a;
    struct mrd__why *w;
    struct mrd_an_why *y;
    struct mrd__step_ranges *rs;
    int64_t *shift;     /* [nranks] */
    int64_t *prev_end;  /* [nranks] end of the previous instance in the step, INT64_MIN */
    int64_t *late_sum;  /* [nranks] lateness summed in the step */
    int64_t *best_late; /* [nranks] its largest late event in the step, and that cause */
    int *best_cause;
    sqlite3_stmt *gap_st, *gpu_st;
    struct gcache *gap_cache; /* [nranks] read_gap's kernels per rank */
    struct gnames gap_names;
    int cap_late;
};

static int rank_index(const struct mrd_analysis *a, int rank)
{
    const struct mrd_an_rank *r = mrd__analyze_rank((struct mrd_analysis *)a, rank);
    return r ? (int)(r - a->ranks) : -1;
}

static int late_event(struct step_ctx *c, const struct mrd__why_inst *x, int64_t step, int li,
                      int ri, int64_t late_ns)
{
    struct mrd_analysis *a = c->a;
    const struct mrd__why_row *rows = &c->w->rows[x->off];
    struct mrd_an_late e;
    struct gap g[2];
    int idx[2] = {li, ri};
    int64_t boundary[2];
    int have_prev = 1, rc;

    memset(&e, 0, sizeof(e));
    e.step = step;
    e.comm_hash = x->comm_hash;
    e.seq = x->seq;
    snprintf(e.func, sizeof(e.func), "%s", c->w->funcs[x->func]);
    e.rank = rows[li].rank;
    e.ref_rank = rows[ri].rank;
    e.late_ns = late_ns;
    for (int k = 0; k < 2; k++) {
        int ai = rank_index(a, rows[idx[k]].rank);
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
        if ((rc = read_gap(c->db, c->gap_st, &c->gap_names, &c->gap_cache[ai], c->tb,
                           rows[idx[k]].rank, mrd_timebase_unmap(c->tb, rows[idx[k]].rank, from),
                           boundary[k], rows[idx[k]].start, &g[k])) < 0)
            return rc;
        e.busy_ns[k] = g[k].busy;
        e.kernels[k] = g[k].compute_kernels;
        read_gpu(c->gpu_st, c->tb, rows[idx[k]].rank, rows[idx[k]].start, &e.gpu[k]);
    }
    e.comm_ns = have_prev ? boundary[0] - boundary[1] : 0;
    int evaluated = g[0].kernels > 0 && g[1].kernels > 0;
    if (evaluated) {
        e.host_ns = (g[0].first_kernel - g[1].first_kernel) - e.comm_ns;
        e.compute_ns = g[0].busy - g[1].busy;
        /* the compute kernel whose time grew the most on the late rank */
        for (int i = 0; i < g[0].nnames; i++) {
            int64_t d = g[0].names[i].ns;
            for (int k = 0; k < g[1].nnames; k++)
                if (strcmp(g[1].names[k].name, g[0].names[i].name) == 0)
                    d -= g[1].names[k].ns;
            if (d > e.kernel_diff_ns) {
                e.kernel_diff_ns = d;
                snprintf(e.kernel, sizeof(e.kernel), "%s",
                         mrd_analyze_demangle_cached(g[0].names[i].name));
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
        c->y->steps_not_evaluated++;
    c->y->rank_causes[rank_index(a, e.rank)][e.cause]++;
    c->y->late_total++;
    int ai = rank_index(a, e.rank);
    if (late_ns > c->best_late[ai]) { /* the cause a step shows: its straggler's largest */
        c->best_late[ai] = late_ns;
        c->best_cause[ai] = e.cause;
    }
    if (c->y->nlate == MRD_WHY_MAX_EVENTS) { /* keep the largest: replace the smallest */
        int min = 0;
        for (int k = 1; k < c->y->nlate; k++)
            if (cmp_late(&c->y->late[k], &c->y->late[min]) > 0)
                min = k;
        if (cmp_late(&e, &c->y->late[min]) < 0)
            c->y->late[min] = e;
        return 0;
    }
    if (c->y->nlate == c->cap_late) {
        int nc = c->cap_late ? c->cap_late * 2 : 64;
        if (nc > MRD_WHY_MAX_EVENTS)
            nc = MRD_WHY_MAX_EVENTS;
        struct mrd_an_late *p = realloc(c->y->late, (size_t)nc * sizeof(*p));
        if (!p)
            return -ENOMEM;
        c->y->late = p;
        c->cap_late = nc;
    }
    c->y->late[c->y->nlate++] = e;
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
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->last_start != b->last_start)
        return a->last_start < b->last_start ? -1 : 1;
    return a->ordinal < b->ordinal ? -1 : a->ordinal > b->ordinal;
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
        c->best_cause[i] = -1;
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
            sc->cause = c->best_cause[i];
        }
    }
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

struct ivl_list {
    int64_t (*v)[2];
    size_t n, cap;
};

/* Appends [s, e) to a list kept merged (starts arrive in ascending order). */
static int ivl_add(struct ivl_list *l, int64_t s, int64_t e)
{
    if (l->n > 0 && s <= l->v[l->n - 1][1]) {
        if (e > l->v[l->n - 1][1])
            l->v[l->n - 1][1] = e;
        return 0;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        int64_t(*p)[2] = realloc(l->v, nc * sizeof(*p));
        if (!p)
            return -ENOMEM;
        l->v = p;
        l->cap = nc;
    }
    l->v[l->n][0] = s;
    l->v[l->n][1] = e;
    l->n++;
    return 0;
}

static int64_t ivl_len(const struct ivl_list *l)
{
    int64_t t = 0;
    for (size_t i = 0; i < l->n; i++)
        t += l->v[i][1] - l->v[i][0];
    return t;
}

static int64_t ivl_common(const struct ivl_list *a, const struct ivl_list *b)
{
    int64_t t = 0;
    for (size_t i = 0, j = 0; i < a->n && j < b->n;) {
        int64_t s = a->v[i][0] > b->v[j][0] ? a->v[i][0] : b->v[j][0];
        int64_t e = a->v[i][1] < b->v[j][1] ? a->v[i][1] : b->v[j][1];
        if (e > s)
            t += e - s;
        if (a->v[i][1] < b->v[j][1])
            i++;
        else
            j++;
    }
    return t;
}

/* Kernels read for the shares, starts ascending: start, end (local ns), 1 = communication;
 * entries before `first` are no longer needed. */
struct kbuf {
    int64_t (*k)[3];
    size_t first, n, cap;
};

static int kbuf_push(struct kbuf *b, int64_t s, int64_t e, int comm)
{
    if (b->first > 0 && b->n == b->cap) { /* drop what the steps have passed */
        memmove(b->k, b->k + b->first, (b->n - b->first) * sizeof(*b->k));
        b->n -= b->first;
        b->first = 0;
    }
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        int64_t(*p)[3] = realloc(b->k, nc * sizeof(*p));
        if (!p)
            return -ENOMEM;
        b->k = p;
        b->cap = nc;
    }
    b->k[b->n][0] = s;
    b->k[b->n][1] = e;
    b->k[b->n][2] = comm;
    b->n++;
    return 0;
}

/* Reads the next row of the shares' kernel query into b: 1 = a row, 0 = no more, < 0. */
static int kbuf_read(struct step_ctx *c, struct kbuf *b)
{
    int rc = sqlite3_step(c->gap_st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return mrd__analyze_sqlerr(c->db);
    int64_t name = gname_of(c->db, &c->gap_names, c->gap_st, 3);
    if (name < -1)
        return (int)name;
    int comm = sqlite3_column_int(c->gap_st, 2) || (name >= 0 && c->gap_names.v[name].nccl);
    rc = kbuf_push(b, sqlite3_column_int64(c->gap_st, 0), sqlite3_column_int64(c->gap_st, 1), comm);
    return rc < 0 ? rc : 1;
}

/* One (rank, step): the buffered kernels starting in [b->first's, hi), clipped to [lo, hi],
 * into the step's exposed and idle sums (when any kernel ran in it). */
static int share_step(struct mrd_an_step_cost *sc, const struct kbuf *b, int64_t lo, int64_t hi,
                      struct ivl_list *comm, struct ivl_list *comp)
{
    int any = 0, rc = 0;
    comm->n = comp->n = 0;
    for (size_t i = b->first; i < b->n && b->k[i][0] < hi && rc == 0; i++) {
        int64_t ks = b->k[i][0] < lo ? lo : b->k[i][0];
        int64_t ke = b->k[i][1] > hi ? hi : b->k[i][1];
        if (ke <= ks)
            continue;
        any = 1;
        rc = ivl_add(b->k[i][2] ? comm : comp, ks, ke);
    }
    if (rc < 0 || !any)
        return rc;
    int64_t common = ivl_common(comm, comp), lc = ivl_len(comm);
    sc->exposed_ns += lc - common;
    sc->idle_ns += (hi - lo) - (lc + ivl_len(comp) - common);
    sc->kernel_span_ns += hi - lo;
    sc->kernel_ranks++;
    return 0;
}

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
 * rank's local clock; summed per step over the ranks that ran a kernel in it. A step reads
 * the kernels from the previous step's start to its own end. When a rank's ranges move
 * forward (the usual case), one query per rank reads each kernel once and a buffer holds
 * the kernels of about two steps; otherwise one query per step. */
static int step_shares(struct step_ctx *c)
{
    struct mrd_analysis *a = c->a;
    struct ivl_list comm = {0}, comp = {0};
    struct kbuf b = {0};
    int rc = 0;
    for (int i = 0; i < a->nranks && rc == 0; i++) {
        const struct mrd__step_ranges *l = &c->rs[i];
        int rank = a->ranks[i].rank, nst = l->n < c->y->nsteps ? l->n : c->y->nsteps;
        int64_t qlo, lo, hi, first_qlo = 0, prev_qlo = INT64_MIN, prev_hi = INT64_MIN;
        int forward = 1, any = 0;
        for (int st = 0; st < nst; st++) {
            if (!share_range(c, l, rank, st, &qlo, &lo, &hi))
                continue;
            if (!any)
                first_qlo = qlo;
            any = 1;
            forward &= qlo >= prev_qlo && hi >= prev_hi;
            prev_qlo = qlo, prev_hi = hi;
        }
        if (!any)
            continue;
        b.first = b.n = 0;
        if (forward) {
            sqlite3_reset(c->gap_st);
            sqlite3_bind_int(c->gap_st, 1, rank);
            sqlite3_bind_int64(c->gap_st, 2, first_qlo);
            sqlite3_bind_int64(c->gap_st, 3, prev_hi);
        }
        int more = 1;
        for (int st = 0; st < nst && rc == 0; st++) {
            if (!share_range(c, l, rank, st, &qlo, &lo, &hi))
                continue;
            if (!forward) {
                sqlite3_reset(c->gap_st);
                sqlite3_bind_int(c->gap_st, 1, rank);
                sqlite3_bind_int64(c->gap_st, 2, qlo);
                sqlite3_bind_int64(c->gap_st, 3, hi);
                b.first = b.n = 0;
                more = 1;
            }
            while (b.first < b.n && b.k[b.first][0] < qlo)
                b.first++;
            while (more > 0 && (b.n == b.first || b.k[b.n - 1][0] < hi))
                more = kbuf_read(c, &b);
            if (more < 0)
                rc = more;
            if (rc == 0)
                rc = share_step(&c->y->steps[st], &b, lo, hi, &comm, &comp);
        }
    }
    free(b.k);
    free(comm.v);
    free(comp.v);
    return rc;
}

static int step_costs(sqlite3 *db, const struct mrd_timebase *tb,
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
    c.best_cause = calloc((size_t)a->nranks, sizeof(int));
    c.gap_cache = calloc((size_t)a->nranks, sizeof(*c.gap_cache));
    order = malloc((w->ninst ? w->ninst : 1) * sizeof(*order));
    if (!y->steps || !c.rs || !c.shift || !c.prev_end || !c.late_sum || !c.best_late ||
        !c.best_cause || !c.gap_cache || !order)
        goto done;
    for (int s = 0; s < a->nsteps; s++) {
        y->steps[s].straggler = -1;
        y->steps[s].cause = -1;
        y->steps[s].measured_ns = -1;
    }
    if ((rc = load_step_ranges(db, tb, o, a, c.rs)) < 0)
        goto done;
    if (mrd_db_has_table(db, "kernels") == 1 &&
        (sqlite3_prepare_v2(db, mrd_db_sql_why_gap_kernels, -1, &c.gap_st, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(db, mrd_db_sql_why_string, -1, &c.gap_names.lookup, NULL) !=
             SQLITE_OK)) {
        rc = mrd__analyze_sqlerr(db);
        goto done;
    }
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
    if (rc == 0 && c.gap_st)
        rc = step_shares(&c);
    if (rc == 0 && y->nlate > 1) /* the largest first */
        qsort(y->late, (size_t)y->nlate, sizeof(*y->late), cmp_late);
done:
    sqlite3_finalize(c.gap_st);
    sqlite3_finalize(c.gpu_st);
    mrd__step_ranges_free(c.rs, a->nranks);
    free(c.shift);
    free(c.prev_end);
    free(c.late_sum);
    free(c.best_late);
    free(c.best_cause);
    if (c.gap_cache)
        for (int i = 0; i < a->nranks; i++)
            free(c.gap_cache[i].k);
    free(c.gap_cache);
    gnames_free(&c.gap_names);
    free(order);
    return rc;
}

int mrd__why_finish(sqlite3 *db, const struct mrd_timebase *tb, const struct mrd_analyze_options *o,
                    struct mrd__why *w, struct mrd_analysis *a)
{
    struct mrd_an_why *y;
    int rc;
    if (w->enomem)
        return -ENOMEM;
    y = calloc(1, sizeof(*y));
    if (!y)
        return -ENOMEM;
    a->why = y;
    y->nranks = a->nranks;
    y->rank_causes = calloc(a->nranks ? (size_t)a->nranks : 1, sizeof(*y->rank_causes));
    if (!y->rank_causes)
        return -ENOMEM;
    if (w->over_cap)
        mrd__analyze_warn(a,
                          "%llu collective instances beyond %d rank intervals: left out of "
                          "the straggler cost and the collective statistics",
                          (unsigned long long)w->over_cap, MRD_WHY_MAX_ROWS);
    if ((rc = mrd__why_stats(db, w, y)) < 0)
        return rc;
    if ((rc = step_costs(db, tb, o, a, w, y)) < 0) /* also without collectives: shares */
        return rc;
    return mrd__why_top_kernels(db, w, a, y);
}
