/* The tightening solver of the causality check: per-rank constant corrections that make
 * every matched collective instance causal while staying inside the ranks' error bounds.
 *
 * Where it sits: called by causality.c (the database pass) after it has reduced all
 * instances to one constraint per ordered pair of ranks, c_b - c_a <= w; pure, exposed as
 * mrd_clock_tighten for tests. The method (difference constraints, Bellman-Ford, centres
 * of the feasible intervals, widening where the evidence refutes a bound) is described
 * in causality.c and README.md.
 *
 * Drift, not bad data: constant corrections cancel around every cycle of constraints, so
 * a negative cycle means the ranks' mapping errors changed during the run. A fit whose
 * drift is off by a few ppm (within its bound: a loaded machine's probes) moves its rank
 * by tens of microseconds over a 20 s run, more than short kernels overlap; no constant
 * offsets are then causal for every instance, though a wrong offset elsewhere is still
 * plain to see. Such a set is relaxed (relax()): each pair whose own two constraints
 * contradict each other is relaxed to the midpoint of its evidence, what longer cycles
 * still contradict by the least common slack, as long as every relaxation is within what
 * honest bounds explain: an error within +-b moves a pair constraint by at most b_a + b_b.
 * Beyond that the data is bad and nothing moves.
 *
 * Workload: n ranks, up to n^2 constraints; each feasibility test is a Bellman-Ford
 * (O(n x constraints), early exit); widening adds bisections (x n for sets up to
 * GREEDY_MAX_RANKS ranks), the common slack a bisection over 64 bits. Any thread; allocates
 * O(n^2) per call.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define INF64 INT64_MAX

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
        double b =
            lam[r] == 1 ? (double)bound[r] : floor((double)(bound[r] > 0 ? bound[r] : 1) * lam[r]);
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
#define SET(f)                                                                                     \
    for (int r = 0; r < n; r++)                                                                    \
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

/* The least t >= 0 such that every constraint relaxed to w + max(rel[k], t) is
 * consistent (no negative cycle; the bounds released to LAM_MAX times), -1 when not even
 * max_t does, -ENOMEM. */
static int64_t least_slack(int n, const int64_t *bound, const struct mrd_clock_constraint *cons,
                           const int64_t *rel, size_t ncons, int64_t max_t)
{
    struct mrd_clock_constraint *relaxed = malloc(sizeof(*relaxed) * (ncons ? ncons : 1));
    int64_t *bnd = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *lo = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *hi = malloc(sizeof(int64_t) * (size_t)(n + 1));
    double *lam = malloc(sizeof(double) * (size_t)n);
    int64_t a = -1, z = max_t; /* infeasible at a, feasible at z */
    if (!relaxed || !bnd || !lo || !hi || !lam) {
        a = -ENOMEM;
        goto out;
    }
    for (int r = 0; r < n; r++)
        lam[r] = LAM_MAX;
    for (int64_t t = z;; t = a + (z - a) / 2) {
        for (size_t k = 0; k < ncons; k++)
            relaxed[k] = (struct mrd_clock_constraint){cons[k].a, cons[k].b,
                                                       cons[k].w + (rel[k] > t ? rel[k] : t)};
        if (feasible(n, bound, lam, relaxed, ncons, bnd, lo, hi))
            z = t;
        else if (t == max_t)
            goto out; /* a = -1: not even the largest slack */
        else
            a = t;
        if (z - a <= 1)
            break;
    }
    a = z;
out:
    free(relaxed), free(bnd), free(lo), free(hi), free(lam);
    return a;
}

/* Relaxes a set whose pair constraints contradict each other (see the top of the file):
 * each pair whose two constraints contradict each other (w_ab + w_ba = -d < 0: their
 * relative error changed by d more than their kernels overlap) gets d split over its two
 * constraints (rel), which leaves that pair the midpoint of what its instances said; the
 * other pairs keep their evidence (a rank whose offset alone is wrong keeps all of it)
 * except for the least common slack t that longer cycles still need: each constraint is
 * relaxed by max(rel, t). No pair is then violated by more than the best constant offsets
 * leave: any offsets leave a pair at least d/2, and the least common slack alone suffices.
 * rs[r]: the largest relaxation of any of r's constraints. Returns 0 (relaxed), -EDOM (a
 * relaxation beyond what errors within the bounds explain: bad data), -ENOMEM. */
static int relax(int n, const int64_t *bound, struct mrd_clock_constraint *cons, size_t ncons,
                 int64_t *rs)
{
    size_t *at = malloc(sizeof(size_t) * (size_t)n * (size_t)n);
    int64_t *rel = calloc(ncons ? ncons : 1, sizeof(int64_t));
    int64_t bmax = 0, t;
    int rc = -ENOMEM;
    if (!at || !rel)
        goto out;
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
        at[i] = SIZE_MAX;
    for (size_t k = 0; k < ncons; k++)
        at[(size_t)cons[k].a * (size_t)n + (size_t)cons[k].b] = k;
    for (int r = 0; r < n; r++) {
        rs[r] = 0;
        bmax = bound[r] > bmax ? bound[r] : bmax;
    }
    rc = -EDOM;
    for (size_t k = 0; k < ncons; k++) {
        int a = cons[k].a, b = cons[k].b;
        size_t back = at[(size_t)b * (size_t)n + (size_t)a];
        if (a > b || back == SIZE_MAX || cons[k].w + cons[back].w >= 0)
            continue;
        int64_t d = -(cons[k].w + cons[back].w);
        if (d - d / 2 > bound[a] + bound[b]) /* errors within +-b move it by b_a + b_b */
            goto out;
        rel[k] = d - d / 2, rel[back] = d / 2;
    }
    t = least_slack(n, bound, cons, rel, ncons, 2 * bmax);
    if (t < 0) {
        rc = t == -ENOMEM ? -ENOMEM : -EDOM;
        goto out;
    }
    for (size_t k = 0; k < ncons; k++) {
        int64_t x = rel[k] > t ? rel[k] : t;
        cons[k].w += x;
        rs[cons[k].a] = x > rs[cons[k].a] ? x : rs[cons[k].a];
        rs[cons[k].b] = x > rs[cons[k].b] ? x : rs[cons[k].b];
    }
    rc = 0;
out:
    free(at), free(rel);
    return rc;
}

/* One connected set of ranks: see mrd_clock_tighten. When the evidence contradicts the
 * bounds, the bounds are widened where that costs least: repeatedly the one rank whose
 * bound alone needs the smallest absolute widening to make everything consistent (a
 * single bad clock is then the only one that moves far; its bound is then widened to
 * whatever the other ranks' instances allow on each side, so that it lands in the middle
 * of the evidence rather than at the edge nearest its wrong fit); if no single rank can, all
 * remaining factors are scaled together. Returns 0, -EDOM (contradictory constraints), -ENOMEM. */
static int solve_component(int n, const int64_t *bound, const struct mrd_clock_constraint *cons,
                           size_t ncons, int64_t *c, int64_t *new_bound, double *scale)
{
    int64_t *bnd = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *lo = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *hi = malloc(sizeof(int64_t) * (size_t)(n + 1));
    double *lam = calloc((size_t)n, sizeof(double));
    int *which = calloc((size_t)n, sizeof(int)), *alone = calloc((size_t)n, sizeof(int));
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
        for (int step = 0; step < n && !feasible(n, bound, lam, cons, ncons, bnd, lo, hi); step++) {
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
                      size_t ncons, int64_t *c, int64_t *new_bound, double *scale, int64_t *slack)
{
    int *parent = NULL, *local = NULL, *members = NULL, contradicted = 0, rc = -ENOMEM;
    struct mrd_clock_constraint *sub = NULL;
    int64_t *sb = NULL, *sc = NULL, *snb = NULL, *rs = NULL;
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
    rs = calloc((size_t)n, sizeof(int64_t));
    if (!parent || !local || !members || !sub || !sb || !sc || !snb || !ssc || !rs)
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
                sub[ns++] =
                    (struct mrd_clock_constraint){local[cons[k].a], local[cons[k].b], cons[k].w};
        int e = solve_component(m, sb, sub, ns, sc, snb, ssc);
        if (e == -EDOM) { /* drift within the bounds, or bad data: see the top of the file */
            int r2 = relax(m, sb, sub, ns, rs);
            if (r2 == -ENOMEM)
                goto fail;
            if (r2 == 0)
                e = solve_component(m, sb, sub, ns, sc, snb, ssc);
        }
        if (e == -ENOMEM)
            goto fail;
        for (int i = 0; i < m; i++) {
            c[members[i]] = e ? 0 : sc[i];
            new_bound[members[i]] = e ? bound[members[i]] : snb[i];
            scale[members[i]] = e ? 0 : ssc[i];
            if (slack)
                slack[members[i]] = e ? 0 : rs[i];
        }
        contradicted += e ? m : 0;
    }
    rc = contradicted;
fail:
    free(parent), free(local), free(members), free(sub), free(sb), free(sc), free(snb), free(rs);
    free(ssc);
    return rc;
}
