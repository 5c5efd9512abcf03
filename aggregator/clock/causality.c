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
 * factors are reported; when the pair constraints alone are contradictory nothing moves.
 * Ranks that share no instance are solved independently.
 *
 * Workload: O(instances x ranks^2) pair checks streamed from one SQL query (two passes),
 * memory O(ranks^2). Fine for the design point's instance counts at tens of ranks per
 * communicator; at 512 ranks per instance it is the slow part of finalize.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "clock_internal.h"
#include "error.h"

#define INF64 INT64_MAX

/* ---- pure solver ------------------------------------------------------------------- */

/* Bellman-Ford over nodes 0..n-1 plus the anchor n. rev = 0: distances from the anchor
 * (hi); rev = 1: distances to the anchor (-lo). Returns 0, or -EDOM on a negative cycle. */
static int bellman_ford(int n, const int64_t *bnd, const struct mrd_clock_constraint *cons,
                        size_t ncons, int rev, int64_t *dist)
{
    for (int i = 0; i < n; i++)
        dist[i] = INF64;
    dist[n] = 0;
    for (int it = 0; it <= n + 1; it++) {
        int changed = 0;
        for (int r = 0; r < n; r++) { /* anchor <-> r, weight bnd[r] both ways */
            if (dist[n] != INF64 && dist[n] + bnd[r] < dist[r])
                dist[r] = dist[n] + bnd[r], changed = 1;
            if (dist[r] != INF64 && dist[r] + bnd[r] < dist[n])
                dist[n] = dist[r] + bnd[r], changed = 1;
        }
        for (size_t k = 0; k < ncons; k++) { /* edge a -> b weight w (reversed: b -> a) */
            int from = rev ? cons[k].b : cons[k].a, to = rev ? cons[k].a : cons[k].b;
            if (dist[from] != INF64 && dist[from] + cons[k].w < dist[to])
                dist[to] = dist[from] + cons[k].w, changed = 1;
        }
        if (!changed)
            return dist[n] < 0 ? -EDOM : 0;
    }
    return -EDOM;
}

/* Feasibility with rank r's bound scaled by lam[r] (bounds of 0 count as 1 ns when
 * widened); fills lo/hi when feasible. */
static int feasible(int n, const int64_t *bound, const double *lam,
                    const struct mrd_clock_constraint *cons, size_t ncons, int64_t *bnd,
                    int64_t *lo, int64_t *hi)
{
    for (int r = 0; r < n; r++) {
        double b = lam[r] == 1 ? (double)bound[r]
                               : floor((double)(bound[r] > 0 ? bound[r] : 1) * lam[r]);
        bnd[r] = b > 4e17 ? (int64_t)4e17 : (int64_t)b;
    }
    if (bellman_ford(n, bnd, cons, ncons, 0, hi) || bellman_ford(n, bnd, cons, ncons, 1, lo))
        return 0;
    for (int r = 0; r <= n; r++)
        lo[r] = -lo[r];
    return 1;
}

#define LAM_MAX 1e12

/* Smallest factor (to 0.1%) for the ranks with which[r] set, the others' factors as in lam,
 * that makes the set feasible; LAM_MAX + 1 when none does. lam is restored. */
static double min_widening(int n, const int64_t *bound, double *lam, const int *which,
                           const struct mrd_clock_constraint *cons, size_t ncons, int64_t *bnd,
                           int64_t *lo, int64_t *hi)
{
    double *save = malloc(sizeof(double) * (size_t)n), a = 1, z = 2;
    if (!save)
        return LAM_MAX + 1;
    memcpy(save, lam, sizeof(double) * (size_t)n);
#define SET(f)                                                                                 \
    for (int r = 0; r < n; r++)                                                                \
        lam[r] = which[r] ? save[r] * (f) : save[r]
    SET(z);
    while (z < LAM_MAX && !feasible(n, bound, lam, cons, ncons, bnd, lo, hi)) {
        a = z, z *= 4;
        SET(z);
    }
    if (z >= LAM_MAX)
        z = LAM_MAX + 1;
    while (z <= LAM_MAX && z - a > 1e-3 * a) {
        double mid = 0.5 * (a + z);
        SET(mid);
        if (feasible(n, bound, lam, cons, ncons, bnd, lo, hi))
            z = mid;
        else
            a = mid;
    }
#undef SET
    memcpy(lam, save, sizeof(double) * (size_t)n);
    free(save);
    return z;
}

/* Largest set handled by the rank-by-rank widening (n bisections per step); larger sets
 * widen every bound by one common factor. */
#define GREEDY_MAX_RANKS 64

/* One connected set of ranks: see mrd_clock_tighten. When the evidence contradicts the
 * bounds, the bounds are widened where that costs least: repeatedly the one rank whose
 * bound alone needs the smallest absolute widening to make everything consistent (a
 * single bad clock is then the only one that moves far; its bound is then widened to
 * whatever the other ranks' instances allow on each side, so that it lands in the middle
 * of the evidence rather than at the edge nearest its wrong fit); if no single rank can, all remaining factors are scaled together.
 * Returns 0, -EDOM (contradictory constraints), -ENOMEM. */
static int solve_component(int n, const int64_t *bound, const struct mrd_clock_constraint *cons,
                           size_t ncons, int64_t *c, int64_t *new_bound, double *scale)
{
    int64_t *bnd = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *lo = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *hi = malloc(sizeof(int64_t) * (size_t)(n + 1));
    double *lam = malloc(sizeof(double) * (size_t)n);
    int *which = malloc(sizeof(int) * (size_t)n), *alone = calloc((size_t)n, sizeof(int));
    int rc = -ENOMEM, anchored = 0;
    if (!bnd || !lo || !hi || !lam || !which || !alone)
        goto fail;
    for (int r = 0; r < n; r++)
        lam[r] = 1, which[r] = 1;
    if (!feasible(n, bound, lam, cons, ncons, bnd, lo, hi)) {
        if (min_widening(n, bound, lam, which, cons, ncons, bnd, lo, hi) > LAM_MAX) {
            memcpy(new_bound, bound, sizeof(*bound) * (size_t)n);
            memset(c, 0, sizeof(*c) * (size_t)n);
            rc = -EDOM; /* contradictory constraints: nothing moves */
            goto fail;
        }
        for (int step = 0; step < n && !feasible(n, bound, lam, cons, ncons, bnd, lo, hi);
             step++) {
            int best = -1;
            double best_cost = 0, best_lam = 0;
            for (int r = 0; n <= GREEDY_MAX_RANKS && r < n; r++) {
                memset(which, 0, sizeof(int) * (size_t)n);
                which[r] = 1;
                double l = min_widening(n, bound, lam, which, cons, ncons, bnd, lo, hi);
                double cost = (l * lam[r] - lam[r]) * (double)(bound[r] > 0 ? bound[r] : 1);
                if (l <= LAM_MAX && (best < 0 || cost < best_cost))
                    best = r, best_cost = cost, best_lam = l * lam[r];
            }
            if (best >= 0) {
                lam[best] = best_lam;
                alone[best] = 1;
                continue;
            }
            for (int r = 0; r < n; r++)
                which[r] = 1;
            double l = min_widening(n, bound, lam, which, cons, ncons, bnd, lo, hi);
            for (int r = 0; r < n; r++)
                lam[r] *= l;
        }
        /* A clock whose bound the evidence refutes keeps no bound: its interval is what the
         * other ranks' instances say (its minimal widening would pin it to the edge nearest
         * its wrong fit). Only while some rank still anchors the set to the probes. */
        for (int r = 0; r < n; r++)
            anchored |= lam[r] == 1;
        if (anchored) {
            double *lam2 = malloc(sizeof(double) * (size_t)n);
            if (!lam2)
                goto fail;
            for (int r = 0; r < n; r++)
                lam2[r] = alone[r] ? LAM_MAX : lam[r];
            /* where the evidence bounds such a rank on a side, its bound must reach that far */
            if (feasible(n, bound, lam2, cons, ncons, bnd, lo, hi)) {
                for (int r = 0; r < n; r++) {
                    if (!alone[r])
                        continue;
                    double b = (double)(bound[r] > 0 ? bound[r] : 1), need = lam[r] * b;
                    /* a side still at the released bound is not limited by evidence */
                    if (hi[r] < bnd[r] && fabs((double)hi[r]) > need)
                        need = fabs((double)hi[r]);
                    if (lo[r] > -bnd[r] && fabs((double)lo[r]) > need)
                        need = fabs((double)lo[r]);
                    lam[r] = need / b;
                }
            }
            free(lam2);
        }
        if (!feasible(n, bound, lam, cons, ncons, bnd, lo, hi)) { /* rounding: one more 0.1% */
            for (int r = 0; r < n; r++)
                lam[r] *= 1.001;
            if (!feasible(n, bound, lam, cons, ncons, bnd, lo, hi)) {
                rc = -EDOM;
                goto fail;
            }
        }
    }
    for (int r = 0; r < n; r++) {
        /* floor of the midpoint keeps every difference constraint (integers) */
        int64_t s = lo[r] + hi[r];
        c[r] = s >= 0 ? s / 2 : -((-s + 1) / 2);
        new_bound[r] = (hi[r] - lo[r] + 1) / 2;
        scale[r] = lam[r];
    }
    rc = 0;
fail:
    free(bnd), free(lo), free(hi), free(lam), free(which), free(alone);
    return rc;
}

static int uf_find(int *parent, int x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

int mrd_clock_tighten(int n, const int64_t *bound, const struct mrd_clock_constraint *cons,
                      size_t ncons, int64_t *c, int64_t *new_bound, double *scale)
{
    int *parent = NULL, *local = NULL, *members = NULL, contradicted = 0, rc = -ENOMEM;
    struct mrd_clock_constraint *sub = NULL;
    int64_t *sb = NULL, *sc = NULL, *snb = NULL;
    double *ssc = NULL;
    if (n <= 0 || !bound || !c || !new_bound || !scale || (ncons && !cons))
        return -EINVAL;
    for (size_t k = 0; k < ncons; k++)
        if (cons[k].a < 0 || cons[k].a >= n || cons[k].b < 0 || cons[k].b >= n)
            return -EINVAL;
    parent = malloc(sizeof(int) * (size_t)n), local = malloc(sizeof(int) * (size_t)n);
    members = malloc(sizeof(int) * (size_t)n);
    sub = malloc(sizeof(*sub) * (ncons ? ncons : 1));
    sb = malloc(sizeof(int64_t) * (size_t)n), sc = malloc(sizeof(int64_t) * (size_t)n);
    snb = malloc(sizeof(int64_t) * (size_t)n), ssc = malloc(sizeof(double) * (size_t)n);
    if (!parent || !local || !members || !sub || !sb || !sc || !snb || !ssc)
        goto fail;
    for (int r = 0; r < n; r++)
        parent[r] = r;
    for (size_t k = 0; k < ncons; k++)
        parent[uf_find(parent, cons[k].a)] = uf_find(parent, cons[k].b);
    for (int root = 0; root < n; root++) {
        if (uf_find(parent, root) != root)
            continue;
        int m = 0;
        size_t ns = 0;
        for (int r = 0; r < n; r++)
            if (uf_find(parent, r) == root) {
                local[r] = m;
                members[m] = r;
                sb[m++] = bound[r];
            }
        for (size_t k = 0; k < ncons; k++)
            if (uf_find(parent, cons[k].a) == root)
                sub[ns++] = (struct mrd_clock_constraint){local[cons[k].a], local[cons[k].b],
                                                          cons[k].w};
        int e = solve_component(m, sb, sub, ns, sc, snb, ssc);
        if (e == -ENOMEM)
            goto fail;
        for (int i = 0; i < m; i++) {
            c[members[i]] = e ? 0 : sc[i];
            new_bound[members[i]] = e ? bound[members[i]] : snb[i];
            scale[members[i]] = e ? 0 : ssc[i];
        }
        contradicted += e ? m : 0;
    }
    rc = contradicted;
fail:
    free(parent), free(local), free(members), free(sub), free(sb), free(sc), free(snb);
    free(ssc);
    return rc;
}

/* ---- the database pass ------------------------------------------------------------- */

struct pairacc {
    uint64_t inst, vb, va;   /* counted at a < b */
    int64_t maxvb, maxva;
    int64_t w;               /* min over instances of E_a - S_b (ordered pair) */
};

struct gpumodels {
    struct mrd_gpu_timer_model *m;
    size_t n;
};

struct member {
    int idx;
    int64_t s, e;
};

struct cctx {
    sqlite3 *db;
    FILE *log;
    struct mrd_clock_models *ms;
    struct gpumodels gm;
    int n;             /* ranks with a model */
    int *idx_of;       /* rank -> index, -1 */
    int *rank_of;      /* index -> rank */
    struct pairacc *pa; /* n x n */
    int64_t *shift;    /* per index, applied in pass 2 */
    struct member *mem;
    size_t nmem, capmem;
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
    if (sqlite3_prepare_v2(db, "SELECT rank, device, slope, intercept_ns, error_bound_ns"
                               " FROM gpu_timer_models", -1, &st, NULL) != SQLITE_OK)
        return 0; /* no table: channel fallback unavailable */
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_gpu_timer_model *p = realloc(g->m, sizeof(*p) * (g->n + 1));
        if (!p) {
            sqlite3_finalize(st);
            return -ENOMEM;
        }
        g->m = p;
        p[g->n++] = (struct mrd_gpu_timer_model){
            .rank = sqlite3_column_int(st, 0), .device = sqlite3_column_int(st, 1),
            .slope = sqlite3_column_double(st, 2), .intercept_ns = sqlite3_column_int64(st, 3),
            .error_bound_ns = sqlite3_column_int64(st, 4)};
    }
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

/* One row per (rank, op): kernel interval (local clock) or channel interval (GPU timer). */
static const char instances_sql[] =
    "SELECT o.comm_hash, o.seq, o.func_id, o.rank, COALESCE(o.device, 0),"
    "       MIN(k.start_ns), MAX(k.end_ns), ch.gs, ch.ge"
    " FROM nccl_ops o"
    " LEFT JOIN external_correlations x ON x.rank = o.rank AND x.external_id = o.launch_id"
    " LEFT JOIN kernels k ON k.rank = x.rank AND k.correlation_id = x.correlation_id"
    "      AND +k.start_ns > 0 AND +k.end_ns >= k.start_ns" /* + : search by correlation */
    " LEFT JOIN (SELECT rank, op_id, MIN(gpu_start) AS gs, MAX(gpu_end) AS ge"
    "            FROM nccl_channels WHERE gpu_start > 0 AND gpu_end >= gpu_start"
    "            GROUP BY rank, op_id) ch ON ch.rank = o.rank AND ch.op_id = o.op_id"
    " WHERE o.is_p2p = 0 AND o.seq IS NOT NULL"
    " GROUP BY o.rank, o.op_id"
    " ORDER BY o.comm_hash, o.seq, o.func_id, o.rank";

/* Checks one instance's members; pass 1 accumulates constraints and "before" counts,
 * pass 2 the "after" counts with the shifts applied. */
static void check_instance(struct cctx *c, int pass)
{
    size_t m = c->nmem;
    if (m < 2)
        return;
    c->instances += pass == 1;
    for (size_t i = 0; i < m; i++) {
        for (size_t j = i + 1; j < m; j++) {
            const struct member *x = &c->mem[i], *y = &c->mem[j];
            int a = x->idx, b = y->idx;
            if (a == b)
                continue;
            int64_t sa = x->s, ea = x->e, sb = y->s, eb = y->e;
            if (pass == 2) {
                sa += c->shift[a], ea += c->shift[a];
                sb += c->shift[b], eb += c->shift[b];
            }
            int lo = a < b ? a : b, hi = a < b ? b : a;
            struct pairacc *p = &c->pa[lo * c->n + hi];
            int64_t v = sb - ea > sa - eb ? sb - ea : sa - eb; /* > 0: a violation */
            if (pass == 1) {
                p->inst++;
                if (v > 0)
                    p->vb++;
                if (v > p->maxvb)
                    p->maxvb = v;
                struct pairacc *ab = &c->pa[a * c->n + b], *ba = &c->pa[b * c->n + a];
                if (ea - sb < ab->w)
                    ab->w = ea - sb;
                if (eb - sa < ba->w)
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
    int rank = sqlite3_column_int(st, 3), dev = sqlite3_column_int(st, 4);
    const struct mrd_clock_model *cm = mrd_clock_models_get(c->ms, rank);
    int64_t s, e;
    if (!cm) {
        c->unmapped++;
        return 0;
    }
    if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
        s = sqlite3_column_int64(st, 5), e = sqlite3_column_int64(st, 6);
    } else {
        const struct mrd_gpu_timer_model *g = gpu_model(&c->gm, rank, dev);
        if (!g || sqlite3_column_type(st, 7) == SQLITE_NULL) {
            c->unmapped++;
            return 0;
        }
        s = mrd_clock_gpu_map(g, sqlite3_column_int64(st, 7));
        e = mrd_clock_gpu_map(g, sqlite3_column_int64(st, 8));
    }
    s = mrd_clock_map(cm, s), e = mrd_clock_map(cm, e);
    int idx = c->idx_of[rank];
    for (size_t i = 0; i < c->nmem; i++) { /* same rank twice: merge */
        if (c->mem[i].idx == idx) {
            if (s < c->mem[i].s)
                c->mem[i].s = s;
            if (e > c->mem[i].e)
                c->mem[i].e = e;
            return 0;
        }
    }
    if (c->nmem == c->capmem) {
        size_t nc = c->capmem ? c->capmem * 2 : 64;
        struct member *p = realloc(c->mem, nc * sizeof(*p));
        if (!p)
            return -ENOMEM;
        c->mem = p, c->capmem = nc;
    }
    c->mem[c->nmem++] = (struct member){idx, s, e};
    return 0;
}

static int run_pass(struct cctx *c, int pass)
{
    sqlite3_stmt *st = NULL;
    int step, rc = 0, have = 0;
    int64_t kh = 0, ks = 0, kf = 0;
    if (sqlite3_prepare_v2(c->db, instances_sql, -1, &st, NULL) != SQLITE_OK)
        return mrd__clock_sqlerr(c->db, c->log, "causality query");
    c->nmem = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t h = sqlite3_column_int64(st, 0), s = sqlite3_column_int64(st, 1),
                f = sqlite3_column_int64(st, 2);
        if (!have || h != kh || s != ks || f != kf) {
            check_instance(c, pass);
            c->nmem = 0;
            kh = h, ks = s, kf = f, have = 1;
        }
        if ((rc = add_member(c, st)))
            goto fail;
    }
    if (step != SQLITE_DONE) {
        rc = mrd__clock_sqlerr(c->db, c->log, "causality query");
        goto fail;
    }
    check_instance(c, pass);
fail:
    sqlite3_finalize(st);
    return rc;
}

/* Shifts applied by an earlier pass, per rank (0 where none). */
static int load_prev_shifts(sqlite3 *db, const struct cctx *c, int64_t *prev)
{
    sqlite3_stmt *st = NULL;
    int step;
    if (mrd__clock_table_exists(db, "clock_adjustments") != 1)
        return 0;
    if (sqlite3_prepare_v2(db, "SELECT rank, shift_ns FROM clock_adjustments", -1, &st,
                           NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int rank = sqlite3_column_int(st, 0);
        if (rank >= 0 && rank <= c->ms->max_rank && c->idx_of[rank] >= 0)
            prev[c->idx_of[rank]] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
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
    double *scale; /* per rank: >= 1 widening factor of its component, 0 contradictory */
};

static int store_results(struct cctx *c, const struct solution *so, const int64_t *prev)
{
    sqlite3_stmt *pst = NULL, *ast = NULL, *ust = NULL;
    int rc = -MRD_ERR_SQLITE;
    if ((rc = mrd__clock_exec(c->db, c->log,
                              "DELETE FROM clock_causality; DELETE FROM clock_adjustments")))
        return rc;
    rc = -MRD_ERR_SQLITE;
    if (sqlite3_prepare_v2(c->db, "INSERT INTO clock_causality VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                           -1, &pst, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, "INSERT INTO clock_adjustments VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
                           -1, &ast, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, "UPDATE clock_models SET offset_ns = offset_ns + ?2"
                                  " WHERE rank = ?1", -1, &ust, NULL) != SQLITE_OK)
        goto fail;
    for (int a = 0; a < c->n; a++) {
        uint64_t inst_r = 0;
        for (int b = 0; b < c->n; b++) {
            const struct pairacc *p = &c->pa[(a < b ? a : b) * c->n + (a < b ? b : a)];
            inst_r += a != b ? p->inst : 0;
            if (b <= a || p->inst == 0)
                continue;
            sqlite3_reset(pst);
            sqlite3_bind_int(pst, 1, c->rank_of[a]);
            sqlite3_bind_int(pst, 2, c->rank_of[b]);
            sqlite3_bind_int64(pst, 3, (int64_t)p->inst);
            sqlite3_bind_int64(pst, 4, (int64_t)p->vb);
            sqlite3_bind_int64(pst, 5, (int64_t)p->va);
            sqlite3_bind_int64(pst, 6, p->maxvb > 0 ? p->maxvb : 0);
            sqlite3_bind_int64(pst, 7, p->maxva > 0 ? p->maxva : 0);
            /* c_b - c_a may lie in [-W_ba, W_ab] */
            sqlite3_bind_int64(pst, 8, -c->pa[b * c->n + a].w);
            sqlite3_bind_int64(pst, 9, c->pa[a * c->n + b].w);
            if (sqlite3_step(pst) != SQLITE_DONE)
                goto fail;
        }
        sqlite3_reset(ast);
        sqlite3_bind_int(ast, 1, c->rank_of[a]);
        sqlite3_bind_int64(ast, 2, c->shift[a]);
        sqlite3_bind_int64(ast, 3, so->bound[a]);
        sqlite3_bind_int64(ast, 4, so->newb[a]);
        if (so->scale[a] > 0) {
            sqlite3_bind_int64(ast, 5, so->lo[a]);
            sqlite3_bind_int64(ast, 6, so->hi[a]);
        } else {
            sqlite3_bind_null(ast, 5);
            sqlite3_bind_null(ast, 6);
        }
        sqlite3_bind_double(ast, 7, so->scale[a]);
        sqlite3_bind_int64(ast, 8, (int64_t)inst_r);
        if (sqlite3_step(ast) != SQLITE_DONE)
            goto fail;
        sqlite3_reset(ust);
        sqlite3_bind_int(ust, 1, c->rank_of[a]);
        sqlite3_bind_int64(ust, 2, c->shift[a] - prev[a]);
        if (sqlite3_step(ust) != SQLITE_DONE)
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
    fprintf(f, "clock: causality: %llu collective instances over %d ranks (%llu rank records"
               " without a kernel or model); violations %llu before (max %.2f us), %llu after"
               " tightening (max %.2f us); largest offset change %.2f us%s\n",
            (unsigned long long)s->instances, c->n, (unsigned long long)c->unmapped,
            (unsigned long long)s->violations_before, (double)s->max_violation_before_ns / 1e3,
            (unsigned long long)s->violations_after, (double)s->max_violation_after_ns / 1e3,
            (double)s->max_shift_ns / 1e3,
            !s->consistent ? " (some ranks' evidence is self-contradictory: they were not moved)"
            : s->bound_scale > 1 ? " (evidence contradicts some probe bounds: widened)" : "");
    for (int r = 0; r < c->n; r++) {
        if (so->scale[r] > 1)
            fprintf(f, "clock: causality: rank %d: its bound widened x%.3f to fit the evidence\n",
                    c->rank_of[r], so->scale[r]);
        else if (so->scale[r] == 0)
            fprintf(f, "clock: causality: rank %d: contradictory evidence (its instances cannot"
                       " all be causal with any offsets): not moved\n", c->rank_of[r]);
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
            fprintf(f, "clock: causality: ranks %d-%d: %llu instances, %llu violations before"
                       " (max %.2f us), %llu after\n", c->rank_of[a], c->rank_of[b],
                    (unsigned long long)p->inst, (unsigned long long)p->vb,
                    (double)p->maxvb / 1e3, (unsigned long long)p->va);
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
    free(c->gm.m);
    free(c->idx_of);
    free(c->rank_of);
    free(c->pa);
    free(c->shift);
    free(c->mem);
}

int mrd_clock_causality_db(sqlite3 *db, int apply, struct mrd_clock_causality_summary *sum,
                           FILE *log)
{
    struct cctx c = {.db = db, .log = log};
    struct solution so = {0};
    struct mrd_clock_constraint *cons = NULL;
    struct mrd_clock_causality_summary s = {.bound_scale = 1, .consistent = 1};
    int64_t *prev = NULL;
    size_t ncons = 0;
    int rc, in_tx = 0;
    if (apply) {
        if ((rc = mrd__clock_ensure_tables(db, log)))
            return rc;
        if ((rc = mrd__clock_exec(db, log, "BEGIN IMMEDIATE")))
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
    so.scale = calloc(n, sizeof(double));
    cons = malloc(n * n * sizeof(*cons));
    if (!c.pa || !c.shift || !prev || !so.bound || !so.newb || !so.lo || !so.hi || !so.scale ||
        !cons)
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
        rc = mrd_clock_tighten(c.n, so.bound, cons, ncons, c.shift, so.newb, so.scale);
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
    for (int r = 0; r < c.n; r++)
        if (so.scale[r] > s.bound_scale)
            s.bound_scale = so.scale[r];
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
        if ((rc = store_results(&c, &so, prev)) || (rc = mrd__clock_exec(db, log, "COMMIT")))
            goto fail;
        in_tx = 0;
    }
    print_results(&c, &so, &s);
    if (sum)
        *sum = s;
    rc = 0;
fail:
    if (in_tx)
        mrd__clock_exec(db, NULL, "ROLLBACK");
    cctx_free(&c);
    free(so.bound), free(so.newb), free(so.lo), free(so.hi), free(so.scale);
    free(cons);
    free(prev);
    return rc;
}
