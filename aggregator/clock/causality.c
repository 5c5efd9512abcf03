/* Causality check of the aligned timeline, and tightening of the offsets it allows.
 *
 * Where it sits: last pass of the clock module's finalize, after the clock fit and the
 * GPU timer calibration. A collective cannot finish on any rank before every rank has
 * started it: for every instance matched across ranks (nccl_ops with equal comm_hash, seq,
 * func_id, not p2p) rank A's kernel end must not precede rank B's kernel start in the
 * global timebase. Each rank's interval comes from its CUPTI kernel record (nccl_ops
 * .launch_id -> external_correlations -> kernels), or, without one, from its NCCL channel
 * times through the GPU timer model; then through the rank's clock model.
 *
 * Tightening: with a constant correction c_r per rank, instance k requires
 * c_b - c_a <= E_a(k) - S_b(k); the smallest right-hand side over all instances is the
 * pair's constraint W_ab. Together with |c_r| <= bound_r (the clock model's bound) this
 * is a system of difference constraints: shortest paths (Bellman-Ford) give each rank's
 * feasible interval [lo_r, hi_r], and the centre of every interval is itself feasible
 * (the feasible set is convex), so each rank moves to its centre and its new bound is
 * half the interval. When the evidence contradicts the bounds (no feasible point), bounds
 * are widened where it costs least (rank by rank, the smallest absolute widening that makes
 * the evidence consistent: one bad clock among good ones is the one that moves) and the
 * factors are reported. When the pair constraints alone are contradictory (constant
 * offsets cancel around a cycle, so the ranks' errors changed during the run: fits whose
 * drift is a few ppm off, within their bounds) the least common slack that makes them
 * consistent is added and the ranks move to the offsets of least largest violation; only a
 * contradiction beyond twice the largest bound (bad data) leaves them unmoved (tighten.c).
 * Ranks that share no instance are solved independently.
 *
 * The instances and each op's interval are the database module's one matching
 * (mrd_db_instances_open, over its op intervals), the same rows the analysis matches.
 *
 * Workload: O(instances x ranks^2) pair checks streamed from one SQL query; the second
 * pass re-checks the members the first one kept (24 bytes per matched op, up to
 * MRD_CAUSALITY_KEEP_MAX of them: 0.24 M ops, 6 MB, on 10 M events; beyond, it steps
 * through the query again). Memory O(ranks^2) plus those members. Fine for the design point's instance counts at tens of ranks per
 * communicator; at 512 ranks per instance it is the slow part of finalize.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array.h"
#include "clock.h"
#include "clock_internal.h"
#include "db.h"
#include "error.h"

#define INF64 INT64_MAX

/* ---- the database pass ------------------------------------------------------------- */

struct pairacc {
    uint64_t inst, vb, va; /* counted at a < b */
    int64_t maxvb, maxva;
    int64_t w; /* min over instances of E_a - S_b (ordered pair) */
};

struct gpumodels {
    struct mrd_gpu_timer_model *m;
    size_t n;
};

struct member {
    int idx;
    int is_root; /* its comm_rank is the instance's root (rooted collectives only) */
    int64_t s, e;
};

/* One instance of pass 1: its members kept[first .. first + n). */
struct kept_instance {
    size_t first, n;
    enum mrd_clock_coll_order order;
};

/* Members kept from pass 1 at most (24 bytes each: 96 MB); beyond, pass 2 queries again. */
#define MRD_CAUSALITY_KEEP_MAX (1u << 22)

struct cctx {
    sqlite3 *db;
    FILE *log;
    struct mrd_clock_models *ms;
    struct gpumodels gm;
    int n;              /* ranks with a model */
    int *idx_of;        /* rank -> index, -1 */
    int *rank_of;       /* index -> rank */
    struct pairacc *pa; /* n x n */
    int64_t *shift;     /* per index, applied in pass 2 */
    struct member *mem;
    size_t nmem, capmem;
    enum mrd_clock_coll_order order; /* of the current instance */
    int fresh_ops; /* build the op intervals afresh (else reuse this connection's) */
    /* pass 1's instances with two members or more, kept for pass 2 while they fit under
     * MRD_CAUSALITY_KEEP_MAX members (else pass 2 steps through the query again) */
    struct member *kept;
    size_t nkept, capkept;
    struct kept_instance *inst;
    size_t ninst, capinst;
    int keep; /* 1 while everything of pass 1 is kept */
    uint64_t instances, unmapped;
};

static const struct mrd_gpu_timer_model *gpu_model(const struct gpumodels *g, int rank, int dev)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i].rank == rank && g->m[i].device == dev)
            return &g->m[i];
    return NULL;
}

static int load_gpu_models(sqlite3 *db, struct gpumodels *g)
{
    sqlite3_stmt *st = NULL;
    int step;
    if (sqlite3_prepare_v2(db, mrd_db_sql_gpu_model_bounds, -1, &st, NULL) != SQLITE_OK)
        return 0; /* no table: channel fallback unavailable */
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_gpu_timer_model *p = realloc(g->m, sizeof(*p) * (g->n + 1));
        if (!p) {
            sqlite3_finalize(st);
            return -ENOMEM;
        }
        g->m = p;
        p[g->n++] = (struct mrd_gpu_timer_model){.rank = sqlite3_column_int(st, 0),
                                                 .device = sqlite3_column_int(st, 1),
                                                 .slope = sqlite3_column_double(st, 2),
                                                 .intercept_ns = sqlite3_column_int64(st, 3),
                                                 .error_bound_ns = sqlite3_column_int64(st, 4)};
    }
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

enum mrd_clock_coll_order mrd_clock_coll_order(const char *func)
{
    static const char *const from_root[] = {"Broadcast", "Scatter"};
    static const char *const to_root[] = {"Reduce", "Gather"};
    for (size_t i = 0; func && i < sizeof(from_root) / sizeof(from_root[0]); i++)
        if (!strcasecmp(func, from_root[i]))
            return MRD_CLOCK_FROM_ROOT;
    for (size_t i = 0; func && i < sizeof(to_root) / sizeof(to_root[0]); i++)
        if (!strcasecmp(func, to_root[i]))
            return MRD_CLOCK_TO_ROOT;
    return MRD_CLOCK_ALL_TO_ALL;
}

/* Checks one instance's members; pass 1 accumulates constraints and "before" counts,
 * pass 2 the "after" counts with the shifts applied. Only what the collective's data flow
 * guarantees is required: "a ends after b began" (a depends on b) for every pair of an
 * AllReduce-like instance; for a Broadcast/Scatter only non-roots depend on the root, for
 * a Reduce/Gather only the root depends on the others (see mrd_clock_coll_order). */
static void check_instance(struct cctx *c, const struct member *mem, size_t m,
                           enum mrd_clock_coll_order order, int pass)
{
    if (m < 2)
        return;
    c->instances += pass == 1;
    for (size_t i = 0; i < m; i++) {
        for (size_t j = i + 1; j < m; j++) {
            const struct member *x = &mem[i], *y = &mem[j];
            int a = x->idx, b = y->idx;
            if (a == b)
                continue;
            int dab = 1, dba = 1; /* a depends on b, b depends on a */
            if (order == MRD_CLOCK_FROM_ROOT)
                dab = y->is_root, dba = x->is_root;
            else if (order == MRD_CLOCK_TO_ROOT)
                dab = x->is_root, dba = y->is_root;
            if (!dab && !dba)
                continue; /* e.g. two non-roots of a Broadcast: no order between them */
            int64_t sa = x->s, ea = x->e, sb = y->s, eb = y->e;
            if (pass == 2) {
                sa += c->shift[a], ea += c->shift[a];
                sb += c->shift[b], eb += c->shift[b];
            }
            int lo = a < b ? a : b, hi = a < b ? b : a;
            struct pairacc *p = &c->pa[lo * c->n + hi];
            int64_t v = INT64_MIN; /* > 0: a violation */
            if (dab)
                v = sb - ea;
            if (dba && sa - eb > v)
                v = sa - eb;
            if (pass == 1) {
                p->inst++;
                if (v > 0)
                    p->vb++;
                if (v > p->maxvb)
                    p->maxvb = v;
                struct pairacc *ab = &c->pa[a * c->n + b], *ba = &c->pa[b * c->n + a];
                if (dab && ea - sb < ab->w)
                    ab->w = ea - sb;
                if (dba && eb - sa < ba->w)
                    ba->w = eb - sa;
            } else {
                if (v > 0)
                    p->va++;
                if (v > p->maxva)
                    p->maxva = v;
            }
        }
    }
}

static int add_member(struct cctx *c, sqlite3_stmt *st)
{
    int rank = sqlite3_column_int(st, MRD_DB_INST_RANK);
    int dev = sqlite3_column_int(st, MRD_DB_INST_DEVICE);
    const struct mrd_clock_model *cm = mrd_clock_models_get(c->ms, rank);
    int64_t s, e;
    if (!cm || sqlite3_column_type(st, MRD_DB_INST_SOURCE) == SQLITE_NULL) {
        c->unmapped++;
        return 0;
    }
    s = sqlite3_column_int64(st, MRD_DB_INST_START), e = sqlite3_column_int64(st, MRD_DB_INST_END);
    if (sqlite3_column_int(st, MRD_DB_INST_SOURCE) == 2) { /* raw GPU timer */
        const struct mrd_gpu_timer_model *g = gpu_model(&c->gm, rank, dev);
        if (!g) {
            c->unmapped++;
            return 0;
        }
        /* the GPU model's own error widens the interval: a host-only calibration (steady
         * tier) is good to ~0.5 ms, and only evidence beyond it may move a clock */
        s = mrd_clock_gpu_map(g, s) - g->error_bound_ns;
        e = mrd_clock_gpu_map(g, e) + g->error_bound_ns;
    }
    s = mrd_clock_map(cm, s), e = mrd_clock_map(cm, e);
    int idx = c->idx_of[rank], is_root = sqlite3_column_int(st, MRD_DB_INST_IS_ROOT) != 0;
    for (size_t i = 0; i < c->nmem; i++) { /* same rank twice: merge */
        if (c->mem[i].idx == idx) {
            c->mem[i].is_root |= is_root;
            if (s < c->mem[i].s)
                c->mem[i].s = s;
            if (e > c->mem[i].e)
                c->mem[i].e = e;
            return 0;
        }
    }
    int rc = mrd_array_reserve(&c->mem, &c->capmem, c->nmem, sizeof(*c->mem), 64, 0);
    if (rc < 0)
        return rc;
    c->mem[c->nmem++] = (struct member){idx, is_root, s, e};
    return 0;
}

/* The instance gathered in c->mem is complete: checked, and in pass 1 kept for pass 2. */
static int end_instance(struct cctx *c, int pass)
{
    check_instance(c, c->mem, c->nmem, c->order, pass);
    if (pass != 1 || !c->keep || c->nmem < 2)
        return 0;
    if (c->nkept + c->nmem > MRD_CAUSALITY_KEEP_MAX) {
        c->keep = 0;
        return 0;
    }
    int rc = mrd_array_reserve(&c->inst, &c->capinst, c->ninst, sizeof(*c->inst), 1024, 0);
    for (size_t i = 0; rc == 0 && i < c->nmem; i++)
        if ((rc = mrd_array_reserve(&c->kept, &c->capkept, c->nkept, sizeof(*c->kept), 4096,
                                    0)) == 0)
            c->kept[c->nkept++] = c->mem[i];
    if (rc < 0)
        return rc;
    c->inst[c->ninst++] = (struct kept_instance){c->nkept - c->nmem, c->nmem, c->order};
    return 0;
}

static int run_pass(struct cctx *c, int pass)
{
    sqlite3_stmt *st = NULL;
    int step, rc = 0, have = 0;
    int64_t kh = 0, ks = 0, kf = 0;
    if (pass == 2 && c->keep) { /* pass 1 kept every instance */
        for (size_t i = 0; i < c->ninst; i++)
            check_instance(c, c->kept + c->inst[i].first, c->inst[i].n, c->inst[i].order, 2);
        return 0;
    }
    c->keep = pass == 1;
    /* pass 2 steps through the intervals pass 1 used */
    if (mrd_db_instances_open(c->db, pass == 1 && c->fresh_ops, &st) < 0)
        return mrd__clock_sqlerr(c->db, c->log, "causality query");
    c->nmem = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t h = sqlite3_column_int64(st, MRD_DB_INST_COMM),
                s = sqlite3_column_int64(st, MRD_DB_INST_SEQ),
                f = sqlite3_column_int64(st, MRD_DB_INST_FUNC_ID);
        if (!have || h != kh || s != ks || f != kf) {
            if ((rc = end_instance(c, pass)) < 0)
                goto fail;
            c->nmem = 0;
            kh = h, ks = s, kf = f, have = 1;
            c->order =
                mrd_clock_coll_order((const char *)sqlite3_column_text(st, MRD_DB_INST_FUNC));
        }
        if ((rc = add_member(c, st)))
            goto fail;
    }
    if (step != SQLITE_DONE) {
        rc = mrd__clock_sqlerr(c->db, c->log, "causality query");
        goto fail;
    }
    rc = end_instance(c, pass);
fail:
    sqlite3_finalize(st);
    return rc;
}

struct prev_shifts {
    const struct cctx *c;
    int64_t *prev;
};

static int prev_shift_row(sqlite3_stmt *st, void *ctx)
{
    struct prev_shifts *p = ctx;
    int rank = sqlite3_column_int(st, 0);
    if (rank >= 0 && rank <= p->c->ms->max_rank && p->c->idx_of[rank] >= 0)
        p->prev[p->c->idx_of[rank]] = sqlite3_column_int64(st, 1);
    return 0;
}

/* Shifts applied by an earlier pass, per rank (0 where none). */
static int load_prev_shifts(sqlite3 *db, const struct cctx *c, int64_t *prev)
{
    struct prev_shifts p = {c, prev};
    return mrd_db_each_row(db, "clock_adjustments", mrd_db_sql_clock_shifts, prev_shift_row, &p);
}

static int64_t model_bound(const struct mrd_clock_model *m)
{
    int64_t b = 0;
    for (uint32_t j = 0; j < m->nseg; j++)
        if (m->seg[j].error_bound_ns > b)
            b = m->seg[j].error_bound_ns;
    return b;
}

struct solution {
    int64_t *bound, *newb, *lo, *hi;
    double *scale;  /* per rank: >= 1 widening factor of its component, 0 contradictory */
    int64_t *slack; /* per rank: slack added to its component's constraints (drift) */
};

static int store_results(struct cctx *c, const struct solution *so, const int64_t *prev)
{
    sqlite3_stmt *pst = NULL, *ast = NULL, *ust = NULL;
    int rc = -MRD_ERR_SQLITE;
    if ((rc = mrd__clock_exec(c->db, c->log, mrd_db_sql_causality_clear)))
        return rc;
    rc = -MRD_ERR_SQLITE;
    if (sqlite3_prepare_v2(c->db, mrd_db_sql_causality_pair_insert, -1, &pst, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, mrd_db_sql_causality_adjustment_insert, -1, &ast, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(c->db, mrd_db_sql_clock_offset_shift, -1, &ust, NULL) != SQLITE_OK)
        goto fail;
    for (int a = 0; a < c->n; a++) {
        uint64_t inst_r = 0;
        for (int b = 0; b < c->n; b++) {
            const struct pairacc *p = &c->pa[(a < b ? a : b) * c->n + (a < b ? b : a)];
            inst_r += a != b ? p->inst : 0;
            if (b <= a || p->inst == 0)
                continue;
            /* c_b - c_a may lie in [-W_ba, W_ab] */
            if (MRD_DB_WRITE_ROW(
                    pst, MRD_DB_INT(c->rank_of[a]), MRD_DB_INT(c->rank_of[b]), MRD_DB_INT(p->inst),
                    MRD_DB_INT(p->vb), MRD_DB_INT(p->va), MRD_DB_INT(p->maxvb > 0 ? p->maxvb : 0),
                    MRD_DB_INT(p->maxva > 0 ? p->maxva : 0), MRD_DB_INT(-c->pa[b * c->n + a].w),
                    MRD_DB_INT(c->pa[a * c->n + b].w)) < 0)
                goto fail;
        }
        int feasible = so->scale[a] > 0;
        if (MRD_DB_WRITE_ROW(ast, MRD_DB_INT(c->rank_of[a]), MRD_DB_INT(c->shift[a]),
                             MRD_DB_INT(so->bound[a]), MRD_DB_INT(so->newb[a]),
                             MRD_DB_INT_IF(feasible, so->lo[a]), MRD_DB_INT_IF(feasible, so->hi[a]),
                             MRD_DB_REAL(so->scale[a]), MRD_DB_INT(inst_r)) < 0 ||
            MRD_DB_WRITE_ROW(ust, MRD_DB_INT(c->rank_of[a]), MRD_DB_INT(c->shift[a] - prev[a])) < 0)
            goto fail;
    }
    rc = 0;
fail:
    if (rc)
        mrd__clock_sqlerr(c->db, c->log, "storing causality results");
    sqlite3_finalize(pst);
    sqlite3_finalize(ast);
    sqlite3_finalize(ust);
    return rc;
}

static void print_results(const struct cctx *c, const struct solution *so,
                          const struct mrd_clock_causality_summary *s)
{
    FILE *f = c->log;
    int lines = 0;
    if (!f)
        return;
    fprintf(f,
            "clock: causality: %llu collective instances over %d ranks (%llu rank records"
            " without a kernel or model); violations %llu before (max %.2f us), %llu after"
            " tightening (max %.2f us); largest offset change %.2f us%s\n",
            (unsigned long long)s->instances, c->n, (unsigned long long)c->unmapped,
            (unsigned long long)s->violations_before, (double)s->max_violation_before_ns / 1e3,
            (unsigned long long)s->violations_after, (double)s->max_violation_after_ns / 1e3,
            (double)s->max_shift_ns / 1e3,
            !s->consistent    ? " (some ranks' evidence is self-contradictory: they were not moved)"
            : s->slack_ns > 0 ? " (no constant offsets are causal for every instance: the"
                                " ranks' errors drifted; least largest violation)"
            : s->bound_scale > 1 ? " (evidence contradicts some probe bounds: widened)"
                                 : "");
    for (int r = 0; r < c->n; r++) {
        if (so->scale[r] > 1)
            fprintf(f, "clock: causality: rank %d: its bound widened x%.3f to fit the evidence\n",
                    c->rank_of[r], so->scale[r]);
        if (so->slack[r] > 0)
            fprintf(f,
                    "clock: causality: rank %d: its instances need %.2f us of slack (its or its"
                    " peers' mapping error changed during the run, within the bounds)\n",
                    c->rank_of[r], (double)so->slack[r] / 1e3);
        if (so->scale[r] == 0)
            fprintf(f,
                    "clock: causality: rank %d: contradictory evidence (its instances cannot"
                    " all be causal with any offsets): not moved\n",
                    c->rank_of[r]);
    }
    for (int a = 0; a < c->n; a++)
        for (int b = a + 1; b < c->n; b++) {
            const struct pairacc *p = &c->pa[a * c->n + b];
            if (!p->vb && !p->va)
                continue;
            if (lines++ == 40) {
                fprintf(f, "clock: causality: (more pairs with violations in clock_causality)\n");
                a = c->n;
                break;
            }
            fprintf(f,
                    "clock: causality: ranks %d-%d: %llu instances, %llu violations before"
                    " (max %.2f us), %llu after\n",
                    c->rank_of[a], c->rank_of[b], (unsigned long long)p->inst,
                    (unsigned long long)p->vb, (double)p->maxvb / 1e3, (unsigned long long)p->va);
        }
    for (int r = 0; r < c->n; r++)
        if (c->shift[r])
            fprintf(f, "clock: causality: rank %d offset moved %+.3f us (bound %.2f -> %.2f us)\n",
                    c->rank_of[r], (double)c->shift[r] / 1e3, (double)so->bound[r] / 1e3,
                    (double)so->newb[r] / 1e3);
}

static void cctx_free(struct cctx *c)
{
    mrd_clock_models_destroy(c->ms);
    MRD_ARRAY_FREE_ALL(c->gm.m, c->idx_of, c->rank_of, c->pa, c->shift, c->mem, c->kept, c->inst);
}

int mrd_clock_causality_db(sqlite3 *db, int flags, struct mrd_clock_causality_summary *sum,
                           FILE *log)
{
    struct cctx c = {.db = db, .log = log, .fresh_ops = !(flags & MRD_CLOCK_CAUSALITY_REUSE_OPS)};
    int apply = (flags & MRD_CLOCK_CAUSALITY_APPLY) != 0;
    struct solution so = {0};
    struct mrd_clock_constraint *cons = NULL;
    struct mrd_clock_causality_summary s = {.bound_scale = 1, .consistent = 1};
    int64_t *prev = NULL;
    size_t ncons = 0;
    int rc, in_tx = 0;
    if (apply) {
        if ((rc = mrd__clock_ensure_tables(db, log)))
            return rc;
        if ((rc = mrd__clock_exec(db, log, mrd_db_sql_begin_immediate)))
            return rc;
        in_tx = 1;
    }
    if ((rc = mrd_clock_models_load(db, &c.ms)) || (rc = load_gpu_models(db, &c.gm)))
        goto fail;
    rc = -ENOMEM;
    c.idx_of = malloc(sizeof(int) * (size_t)(c.ms->max_rank + 1 > 0 ? c.ms->max_rank + 1 : 1));
    c.rank_of = malloc(sizeof(int) * (size_t)(c.ms->max_rank + 1 > 0 ? c.ms->max_rank + 1 : 1));
    if (!c.idx_of || !c.rank_of)
        goto fail;
    for (int r = 0; r <= c.ms->max_rank; r++) {
        c.idx_of[r] = c.ms->by_rank[r] ? c.n : -1;
        if (c.ms->by_rank[r])
            c.rank_of[c.n++] = r;
    }
    size_t n = (size_t)(c.n > 0 ? c.n : 1);
    c.pa = calloc(n * n, sizeof(*c.pa));
    c.shift = calloc(n, sizeof(*c.shift));
    prev = calloc(n, sizeof(*prev));
    so.bound = calloc(n, sizeof(int64_t)), so.newb = calloc(n, sizeof(int64_t));
    so.lo = calloc(n, sizeof(int64_t)), so.hi = calloc(n, sizeof(int64_t));
    so.scale = calloc(n, sizeof(double)), so.slack = calloc(n, sizeof(int64_t));
    cons = malloc(n * n * sizeof(*cons));
    if (!c.pa || !c.shift || !prev || !so.bound || !so.newb || !so.lo || !so.hi || !so.scale ||
        !so.slack || !cons)
        goto fail;
    for (size_t i = 0; i < n * n; i++)
        c.pa[i].w = INF64;
    /* undo an earlier pass's shifts so that "before" means the fitted models */
    if ((rc = load_prev_shifts(db, &c, prev)))
        goto fail;
    for (int r = 0; r < c.n; r++) {
        struct mrd_clock_model *m = c.ms->by_rank[c.rank_of[r]];
        for (uint32_t j = 0; j < m->nseg; j++)
            m->seg[j].offset_ns -= prev[r];
        so.bound[r] = model_bound(m);
    }
    if ((rc = run_pass(&c, 1)))
        goto fail;
    for (int a = 0; a < c.n; a++)
        for (int b = 0; b < c.n; b++)
            if (a != b && c.pa[a * c.n + b].w != INF64)
                cons[ncons++] = (struct mrd_clock_constraint){a, b, c.pa[a * c.n + b].w};
    if (c.n > 0) {
        rc = mrd_clock_tighten(c.n, so.bound, cons, ncons, c.shift, so.newb, so.scale, so.slack);
        if (rc < 0)
            goto fail;
        s.consistent = rc == 0;
        /* the feasible interval of each rank, for the record */
        for (int r = 0; r < c.n; r++) {
            so.lo[r] = c.shift[r] - so.newb[r];
            so.hi[r] = c.shift[r] + so.newb[r];
        }
    }
    uint64_t unmapped = c.unmapped; /* counted once, in the first pass */
    if ((rc = run_pass(&c, 2)))
        goto fail;
    c.unmapped = unmapped;
    s.instances = c.instances;
    s.ranks = c.n;
    for (int r = 0; r < c.n; r++) {
        if (so.scale[r] > s.bound_scale)
            s.bound_scale = so.scale[r];
        if (so.slack[r] > s.slack_ns)
            s.slack_ns = so.slack[r];
    }
    for (int a = 0; a < c.n; a++) {
        for (int b = a + 1; b < c.n; b++) {
            const struct pairacc *p = &c.pa[a * c.n + b];
            s.violations_before += p->vb, s.violations_after += p->va;
            if (p->maxvb > s.max_violation_before_ns)
                s.max_violation_before_ns = p->maxvb;
            if (p->maxva > s.max_violation_after_ns)
                s.max_violation_after_ns = p->maxva;
        }
        int64_t m = c.shift[a] < 0 ? -c.shift[a] : c.shift[a];
        if (m > s.max_shift_ns)
            s.max_shift_ns = m;
    }
    if (apply) {
        if ((rc = store_results(&c, &so, prev)) ||
            (rc = mrd__clock_exec(db, log, mrd_db_sql_commit)))
            goto fail;
        in_tx = 0;
    }
    print_results(&c, &so, &s);
    if (sum)
        *sum = s;
    rc = 0;
fail:
    if (in_tx)
        mrd__clock_exec(db, NULL, mrd_db_sql_rollback);
    cctx_free(&c);
    free(so.bound), free(so.newb), free(so.lo), free(so.hi), free(so.scale), free(so.slack);
    free(cons);
    free(prev);
    return rc;
}
