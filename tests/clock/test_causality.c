/* clock_causality: the tightening solver (hand-worked cases, widening, contradictions,
 * independent sets of ranks, a randomized property test against a known truth) and the
 * database pass (violations counted before and after, offsets moved, idempotent rerun,
 * channel-time fallback through the GPU timer model). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "testutil.h"

static void test_solver_cases(void)
{
    int64_t b2[2] = {10, 10}, c[4], nb[4];
    double sc[4];
    /* no binding constraint: nothing moves */
    struct mrd_clock_constraint loose[2] = {{0, 1, 100}, {1, 0, 100}};
    CHECK_EQ(mrd_clock_tighten(2, b2, loose, 2, c, nb, sc, NULL), 0);
    CHECK_EQ(c[0], 0);
    CHECK_EQ(c[1], 0);
    CHECK_EQ(nb[0], 10);
    CHECK_EQ(nb[1], 10);
    CHECK(sc[0] == 1 && sc[1] == 1);
    /* rank 1 must come 6 earlier relative to rank 0: both move half way */
    struct mrd_clock_constraint v[1] = {{0, 1, -6}};
    CHECK_EQ(mrd_clock_tighten(2, b2, v, 1, c, nb, sc, NULL), 0);
    CHECK_EQ(c[0], 3);
    CHECK_EQ(c[1], -3);
    CHECK_LE(c[1] - c[0], -6);
    CHECK_EQ(nb[0], 7);
    CHECK_EQ(nb[1], 7);
    /* a violation larger than both bounds: one rank's bound (not both) doubled */
    struct mrd_clock_constraint big[1] = {{0, 1, -30}};
    CHECK_EQ(mrd_clock_tighten(2, b2, big, 1, c, nb, sc, NULL), 0);
    CHECK((sc[0] > 1.99 && sc[0] < 2.01 && sc[1] == 1) ||
          (sc[1] > 1.99 && sc[1] < 2.01 && sc[0] == 1));
    CHECK_LE(c[1] - c[0], -30);
    /* contradictory: each must precede the other, by more than the errors within bounds
     * of 10 can explain (a slack of 25 > 2 x 10: bad data) */
    struct mrd_clock_constraint bad[2] = {{0, 1, -25}, {1, 0, -25}};
    CHECK_EQ(mrd_clock_tighten(2, b2, bad, 2, c, nb, sc, NULL), 2);
    CHECK_EQ(c[0], 0);
    CHECK_EQ(c[1], 0);
    CHECK(sc[0] == 0);
    CHECK_EQ(nb[0], 10);
    /* two independent sets: the contradiction of {0,1} does not stop {2,3} */
    int64_t b4[4] = {10, 10, 20, 20};
    struct mrd_clock_constraint mix[3] = {{0, 1, -25}, {1, 0, -25}, {2, 3, -8}};
    CHECK_EQ(mrd_clock_tighten(4, b4, mix, 3, c, nb, sc, NULL), 2);
    CHECK(sc[2] == 1 && sc[3] == 1);
    CHECK_EQ(c[2], 4);
    CHECK_EQ(c[3], -4);
    CHECK_EQ(mrd_clock_tighten(0, b4, mix, 3, c, nb, sc, NULL), -EINVAL);
    struct mrd_clock_constraint oob[1] = {{0, 7, 1}};
    CHECK_EQ(mrd_clock_tighten(4, b4, oob, 1, c, nb, sc, NULL), -EINVAL);
}

/* Six ranks agree, rank 3 is 100 off (far beyond its bound of 10): only rank 3 widens,
 * and it moves back; the others stay inside their bounds. */
static void test_solver_one_bad_clock(void)
{
    int64_t b[6] = {10, 10, 10, 10, 10, 10}, c[6], nb[6];
    double sc[6];
    struct mrd_clock_constraint cons[30];
    size_t k = 0;
    for (int a = 0; a < 6; a++)
        for (int z = 0; z < 6; z++) /* kernels +-4 around the instant; rank 3 seen 100 late */
            if (a != z)
                cons[k++] = (struct mrd_clock_constraint){
                    a, z, 8 + (a == 3 ? 100 : 0) - (z == 3 ? 100 : 0)};
    CHECK_EQ(mrd_clock_tighten(6, b, cons, k, c, nb, sc, NULL), 0);
    for (int r = 0; r < 6; r++) {
        if (r == 3)
            continue;
        CHECK(sc[r] == 1);
        CHECK_LE(llabs(c[r]), 10);
    }
    CHECK(sc[3] > 1);
    CHECK_LE(llabs(c[3] + 100), 18);
    for (size_t i = 0; i < k; i++)
        CHECK_LE(c[cons[i].b] - c[cons[i].a], cons[i].w);
}

/* The test bed's failure in miniature (tests/clock/testbed.py under load): kernels +-20
 * around each instant; ranks 0 and 1 have fits whose drift is off, so over the run their
 * errors go from -25 to +25 and from +25 to -25 (within their bounds of 60); rank 3's
 * offset is 200 off. No constant offsets are causal for every instance (pair 0-1 needs a
 * slack of 10: W01 = W10 = 40 - 50), yet rank 3 must still move back. */
static void test_solver_drift(void)
{
    enum { N = 5, K = 11 };
    int64_t b[N] = {60, 60, 60, 60, 60}, c[N], nb[N], sl[N], x[N][K];
    double sc[N];
    struct mrd_clock_constraint cons[N * N];
    size_t k = 0;
    for (int i = 0; i < K; i++)
        for (int r = 0; r < N; r++)
            x[r][i] = r == 0 ? -25 + 5 * i : r == 1 ? 25 - 5 * i : r == 3 ? 200 : 0;
    for (int a = 0; a < N; a++)
        for (int z = 0; z < N; z++) {
            if (a == z)
                continue;
            int64_t w = INT64_MAX; /* min over instances of E_a - S_z */
            for (int i = 0; i < K; i++)
                if (40 + x[a][i] - x[z][i] < w)
                    w = 40 + x[a][i] - x[z][i];
            cons[k++] = (struct mrd_clock_constraint){a, z, w};
        }
    CHECK_EQ(mrd_clock_tighten(N, b, cons, k, c, nb, sc, sl), 0);
    for (int r = 0; r < N; r++) {
        CHECK_EQ(sl[r], r <= 1 ? 10 : 0); /* only the pair 0-1 is relaxed */
        CHECK(sc[r] >= 1);
    }
    CHECK_EQ(c[1] - c[0], 0);        /* the midpoint of what their instances say */
    CHECK_LE(llabs(c[3] + 200), 40); /* all of rank 3's evidence kept: back in the overlap */
    for (int r = 0; r < N; r++)
        if (r != 3)
            CHECK_LE(llabs(c[r]), 60);
    for (size_t i = 0; i < k; i++)
        CHECK_LE(c[cons[i].b] - c[cons[i].a], cons[i].w + (cons[i].a <= 1 && cons[i].b <= 1) * 10);
    /* without the drift (ranks 0 and 1 constant) no slack is needed */
    for (size_t i = 0; i < k; i++)
        if (cons[i].a <= 1 && cons[i].b <= 1)
            cons[i].w = 40;
    CHECK_EQ(mrd_clock_tighten(N, b, cons, k, c, nb, sc, sl), 0);
    for (int r = 0; r < N; r++)
        CHECK_EQ(sl[r], 0);
}

/* Errors that vary from instance to instance, each within its rank's bound (a fit whose
 * drift is off, probes of a loaded machine): never "contradictory", and the offsets leave
 * no instance violated by more than the slack the solver reports. */
static void test_solver_random_drift(void)
{
    enum { N = 8, K = 20 };
    tu_seed(78);
    for (int round = 0; round < 200; round++) {
        int n = 2 + (int)(tu_next() % (N - 1));
        int64_t bound[N], e[N][K], c[N], nb[N], sl[N], bmax = 0;
        int64_t h = 1 + (int64_t)(tu_next() % 100); /* kernel half width */
        double sc[N];
        struct mrd_clock_constraint cons[N * N];
        size_t k = 0;
        for (int r = 0; r < n; r++) {
            bound[r] = 1 + (int64_t)(tu_next() % 1000);
            bmax = bound[r] > bmax ? bound[r] : bmax;
            for (int i = 0; i < K; i++)
                e[r][i] = (int64_t)(tu_next() % (uint64_t)(2 * bound[r] + 1)) - bound[r];
        }
        for (int a = 0; a < n; a++)
            for (int z = 0; z < n; z++) {
                if (a == z)
                    continue;
                int64_t w = INT64_MAX;
                for (int i = 0; i < K; i++)
                    if (2 * h + e[a][i] - e[z][i] < w)
                        w = 2 * h + e[a][i] - e[z][i];
                cons[k++] = (struct mrd_clock_constraint){a, z, w};
            }
        CHECK_EQ(mrd_clock_tighten(n, bound, cons, k, c, nb, sc, sl), 0);
        for (int r = 0; r < n; r++) {
            CHECK(sc[r] >= 1);
            CHECK_LE(sl[r], 2 * bmax);
        }
        /* the oracle: each rank's mean error undone, a constant correction that knows the
         * truth; the solver's offsets leave no larger violation (1 for its rounding) */
        int64_t corr[N], worst = 0, yard = 0;
        for (int r = 0; r < n; r++) {
            int64_t sum = 0;
            for (int i = 0; i < K; i++)
                sum += e[r][i];
            corr[r] = -sum / K;
        }
        for (size_t i = 0; i < k; i++) { /* a constraint's relaxation is within both ranks' */
            int a = cons[i].a, z = cons[i].b;
            int64_t lim = sl[a] < sl[z] ? sl[a] : sl[z];
            CHECK_LE(c[z] - c[a], cons[i].w + lim);
            if (c[z] - c[a] - cons[i].w > worst)
                worst = c[z] - c[a] - cons[i].w;
            if (corr[z] - corr[a] - cons[i].w > yard)
                yard = corr[z] - corr[a] - cons[i].w;
        }
        CHECK_LE(worst, yard + 1);
    }
}

/* Random truths inside random bounds; constraints that the truth satisfies (as real
 * collectives do). The solution must satisfy every constraint and the bounds, and each
 * rank's new interval [c - nb, c + nb] must still contain its truth. */
static void test_solver_random(void)
{
    enum { N = 12 };
    tu_seed(77);
    for (int round = 0; round < 300; round++) {
        int n = 2 + (int)(tu_next() % (N - 1));
        int64_t bound[N], truth[N], c[N], nb[N];
        double sc[N];
        struct mrd_clock_constraint cons[N * N];
        size_t k = 0;
        for (int r = 0; r < n; r++) {
            bound[r] = 1 + (int64_t)(tu_next() % 1000);
            truth[r] = (int64_t)(tu_next() % (uint64_t)(2 * bound[r] + 1)) - bound[r];
        }
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                if (a != b && tu_next() % 3 == 0)
                    cons[k++] = (struct mrd_clock_constraint){
                        a, b, truth[b] - truth[a] + (int64_t)(tu_next() % 50)};
        CHECK_EQ(mrd_clock_tighten(n, bound, cons, k, c, nb, sc, NULL), 0);
        for (size_t i = 0; i < k; i++)
            CHECK_LE(c[cons[i].b] - c[cons[i].a], cons[i].w);
        for (int r = 0; r < n; r++) {
            CHECK(sc[r] == 1);
            CHECK_LE(llabs(c[r]), bound[r]);
            CHECK_LE(nb[r], bound[r]);
            CHECK_LE(llabs(truth[r] - c[r]), nb[r]);
        }
    }
}

/* ---- database pass ---------------------------------------------------------------- */

#define W      20000LL  /* kernels span +-20 us around the instant */
#define X      200000LL /* rank 2's stored offset is 200 us wrong */
#define PERIOD 10000000LL

static void add_model(sqlite3 *db, int rank, int64_t begin, int64_t off, int64_t bound)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO clock_models VALUES (%d, 0, %lld, %lld, %lld, 0.0, %lld, 100, 'test')",
             rank, (long long)begin, (long long)(begin + 100 * PERIOD), (long long)off,
             (long long)bound);
    tu_exec(db, sql);
}

/* Three ranks, local = true global - off_r; 50 AllReduce instances at true T_k. Rank 1
 * reports channel times only (raw GPU timer = local + 1 ms), through a GPU timer model. */
static void fill_db(sqlite3 *db)
{
    const int64_t base = 1000000000000LL, off[3] = {5000000, -7000000, 123456};
    char sql[512];
    tu_exec(db, "BEGIN");
    add_model(db, 0, base - off[0], off[0], 1000);
    add_model(db, 1, base - off[1], off[1], 1000);
    add_model(db, 2, base - off[2], off[2] + X, 300000); /* wrong by X, bound covers it */
    tu_exec(db, "INSERT INTO gpu_timer_models VALUES (1, 0, 1.0, -1000000, 10, 50, 'test')");
    for (int k = 0; k < 50; k++) {
        int64_t t = base + k * PERIOD;
        for (int r = 0; r < 3; r++) {
            int64_t l = t - off[r];
            snprintf(sql, sizeof sql,
                     "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq,"
                     " func_id, launch_id, is_p2p, device) VALUES (%d, %d, %lld, %lld, 42, %d,"
                     " 7, %d, 0, 0)",
                     r, k + 1, (long long)(l - W - 100), (long long)(l - W), k, 1000 + k);
            tu_exec(db, sql);
            if (r == 1) { /* no kernel record: channel times on the raw GPU timer */
                snprintf(sql, sizeof sql,
                         "INSERT INTO nccl_channels VALUES (1, %d, 0, %lld, %lld, %lld)", k + 1,
                         (long long)(l - W + 1000000), (long long)(l + W + 1000000),
                         (long long)(l + W + 50000));
                tu_exec(db, sql);
                continue;
            }
            snprintf(sql, sizeof sql,
                     "INSERT INTO external_correlations VALUES (%d, %d, %d, 2);"
                     "INSERT INTO kernels (rank, device, start_ns, end_ns, correlation_id)"
                     " VALUES (%d, 0, %lld, %lld, %d)",
                     r, 5000 + k, 1000 + k, r, (long long)(l - W), (long long)(l + W), 5000 + k);
            tu_exec(db, sql);
        }
    }
    /* a p2p op and an op of one rank only: never instances */
    tu_exec(db, "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq, func_id,"
                " is_p2p) VALUES (0, 900, 1, 2, 42, NULL, 8, 1), (0, 901, 1, 2, 43, 1, 7, 0)");
    tu_exec(db, "COMMIT");
}

static void test_db(void)
{
    sqlite3 *db = tu_open_db();
    struct mrd_clock_causality_summary s;
    fill_db(db);
    /* count only: nothing written */
    CHECK_OK(mrd_clock_causality_db(db, 0, &s, NULL));
    CHECK_EQ(s.instances, 50);
    CHECK_EQ(s.violations_before, 100); /* pairs (0,2) and (1,2) in every instance */
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name='clock_adjustments'"),
             0);
    /* apply */
    CHECK_OK(mrd_clock_causality_db(db, 1, &s, stderr));
    CHECK_EQ(s.instances, 50);
    CHECK_EQ(s.violations_before, 100);
    CHECK_EQ(s.violations_after, 0);
    CHECK_EQ(s.max_violation_after_ns, 0);
    CHECK(s.consistent && s.bound_scale == 1);
    CHECK_GE(s.max_violation_before_ns, X - 2 * W - 10);
    int64_t c0 = check_sql_int(db, "SELECT shift_ns FROM clock_adjustments WHERE rank = 0");
    int64_t c2 = check_sql_int(db, "SELECT shift_ns FROM clock_adjustments WHERE rank = 2");
    /* rank 2 relative to rank 0 moved back to within the kernels' overlap of the truth */
    CHECK_LE(llabs((c2 - c0) + X), 2 * W);
    CHECK_EQ(check_sql_int(db, "SELECT violations_before FROM clock_causality WHERE rank_a = 0"
                               " AND rank_b = 2"),
             50);
    CHECK_EQ(check_sql_int(db, "SELECT violations_before FROM clock_causality WHERE rank_a = 0"
                               " AND rank_b = 1"),
             0);
    CHECK_EQ(check_sql_int(db, "SELECT sum(violations_after) FROM clock_causality"), 0);
    int64_t off2 = check_sql_int(db, "SELECT offset_ns FROM clock_models WHERE rank = 2");
    CHECK_EQ(off2, 123456 + X + c2);
    /* rerun: the earlier shift is undone first, so the same answer, same models */
    CHECK_OK(mrd_clock_causality_db(db, 1, &s, NULL));
    CHECK_EQ(s.violations_before, 100);
    CHECK_EQ(check_sql_int(db, "SELECT shift_ns FROM clock_adjustments WHERE rank = 2"), c2);
    CHECK_EQ(check_sql_int(db, "SELECT offset_ns FROM clock_models WHERE rank = 2"), off2);
    /* the models as loaded carry the shift */
    struct mrd_clock_models *ms = NULL;
    CHECK_OK(mrd_clock_models_load(db, &ms));
    CHECK_EQ(mrd_clock_models_get(ms, 2)->seg[0].offset_ns, off2);
    CHECK(mrd_clock_models_get(ms, 3) == NULL);
    mrd_clock_models_destroy(ms);
    sqlite3_close(db);
}

/* ---- rooted collectives ----------------------------------------------------------------
 * A Broadcast's root may finish before its peers begin (its data waits in their buffers:
 * PyTorch DDP's first 3840-byte Broadcast on the H200 host, root ended 414 us before the
 * receiver's kernel began); only the peers depend on the root. A Reduce is the mirror. */

/* One op of rank r (comm_rank r) with its kernel [ks, ke]. */
static void rooted_op(sqlite3 *db, int r, int op, int seq, int func_id, int root, int64_t ks,
                      int64_t ke)
{
    char sql[640];
    snprintf(sql, sizeof sql,
             "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, comm_rank,"
             " comm_nranks, seq, func_id, root, launch_id, is_p2p, device) VALUES (%d, %d,"
             " %lld, %lld, 77, %d, 2, %d, %d, %d, %d, 0, 0);"
             "INSERT INTO external_correlations VALUES (%d, %d, %d, 2);"
             "INSERT INTO kernels (rank, device, start_ns, end_ns, correlation_id)"
             " VALUES (%d, 0, %lld, %lld, %d)",
             r, op, (long long)ks - 100, (long long)ks - 50, r, seq, func_id, root, op, r,
             9000 + op, op, r, (long long)ks, (long long)ke, 9000 + op);
    tu_exec(db, sql);
}

static void test_rooted(void)
{
    CHECK_EQ(mrd_clock_coll_order("Broadcast"), MRD_CLOCK_FROM_ROOT);
    CHECK_EQ(mrd_clock_coll_order("scatter"), MRD_CLOCK_FROM_ROOT);
    CHECK_EQ(mrd_clock_coll_order("Reduce"), MRD_CLOCK_TO_ROOT);
    CHECK_EQ(mrd_clock_coll_order("Gather"), MRD_CLOCK_TO_ROOT);
    CHECK_EQ(mrd_clock_coll_order("ReduceScatter"), MRD_CLOCK_ALL_TO_ALL);
    CHECK_EQ(mrd_clock_coll_order("AllReduce"), MRD_CLOCK_ALL_TO_ALL);
    CHECK_EQ(mrd_clock_coll_order(NULL), MRD_CLOCK_ALL_TO_ALL);

    sqlite3 *db = tu_open_db();
    const int64_t t = 1000000000000LL, us = 1000;
    tu_exec(db, "BEGIN; INSERT INTO strings VALUES (15, 'Broadcast'), (16, 'Reduce'),"
                " (34, 'AllReduce')");
    add_model(db, 0, t - 1000 * us, 0, 1000);
    add_model(db, 1, t - 1000 * us, 0, 1000);
    /* Broadcast 0, root 0: the root ends 400 us before rank 1 begins (fine) */
    rooted_op(db, 0, 1, 0, 15, 0, t, t + 100 * us);
    rooted_op(db, 1, 1, 0, 15, 0, t + 500 * us, t + 505 * us);
    /* Broadcast 1, root 1: the same the other way round (fine) */
    rooted_op(db, 1, 2, 1, 15, 1, t + 1000 * us, t + 1100 * us);
    rooted_op(db, 0, 2, 1, 15, 1, t + 1500 * us, t + 1505 * us);
    /* Reduce 0, root 0: rank 1 ends before the root begins (fine) */
    rooted_op(db, 1, 3, 0, 16, 0, t + 2000 * us, t + 2010 * us);
    rooted_op(db, 0, 3, 0, 16, 0, t + 2300 * us, t + 2310 * us);
    tu_exec(db, "COMMIT");
    struct mrd_clock_causality_summary s;
    CHECK_OK(mrd_clock_causality_db(db, 1, &s, stderr));
    CHECK_EQ(s.instances, 3);
    CHECK_EQ(s.violations_before, 0);
    CHECK(s.consistent);
    /* only the dependent direction constrains: c1 - c0 >= -(E1 - S0) = -505 us (rank 1
     * after root 0's Broadcast 0); c1 - c0 <= E0 - S1 = min(505 us of Broadcast 1,
     * 310 us of Reduce 0 whose root is 0). Not used: the roots' early ends (-400 us) */
    CHECK_EQ(check_sql_int(db, "SELECT feasible_lo_ns FROM clock_causality"), -505 * us);
    CHECK_EQ(check_sql_int(db, "SELECT feasible_hi_ns FROM clock_causality"), 310 * us);

    /* real violations: a Broadcast peer ends before its root begins, a Reduce root ends
     * before a peer begins, an AllReduce rank ends before the other begins */
    tu_exec(db, "BEGIN");
    rooted_op(db, 1, 4, 2, 15, 0, t + 3000 * us, t + 3005 * us);
    rooted_op(db, 0, 4, 2, 15, 0, t + 3300 * us, t + 3400 * us);
    rooted_op(db, 0, 5, 1, 16, 0, t + 4000 * us, t + 4010 * us);
    rooted_op(db, 1, 5, 1, 16, 0, t + 4300 * us, t + 4310 * us);
    rooted_op(db, 0, 6, 0, 34, 0, t + 5000 * us, t + 5010 * us);
    rooted_op(db, 1, 6, 0, 34, 0, t + 5300 * us, t + 5310 * us);
    /* a Broadcast whose root no rank claims (comm_rank unknown): nothing to require */
    rooted_op(db, 0, 7, 3, 15, 0, t + 6000 * us, t + 6010 * us);
    rooted_op(db, 1, 7, 3, 15, 0, t + 6300 * us, t + 6310 * us);
    tu_exec(db, "UPDATE nccl_ops SET comm_rank = NULL WHERE op_id = 7; COMMIT");
    CHECK_OK(mrd_clock_causality_db(db, 0, &s, NULL));
    CHECK_EQ(s.instances, 7);
    CHECK_EQ(s.violations_before, 3);
    CHECK_EQ(s.max_violation_before_ns, 295 * us);
    sqlite3_close(db);
}

/* Two ranks with exact clocks; rank 1 reports channel times only, through a host-only GPU
 * timer model 300 us off the truth with a 350 us bound (the steady tier's calibration).
 * The model's error is within what it states: no violation may be counted and no clock
 * moved, however far its mapped intervals look from rank 0's kernels. */
static void test_loose_gpu_model(void)
{
    const int64_t base = 1000000000000LL;
    char sql[512];
    sqlite3 *db = tu_open_db();
    tu_exec(db, "BEGIN");
    add_model(db, 0, base, 0, 1000);
    add_model(db, 1, base, 0, 1000);
    /* raw GPU timer = local + 1 ms; the model maps it 300 us early */
    tu_exec(db, "INSERT INTO gpu_timer_models VALUES (1, 0, 1.0, -1300000, 350000, 50,"
                " 'host-bracket-v1')");
    for (int k = 0; k < 20; k++) {
        int64_t t = base + k * PERIOD;
        for (int r = 0; r < 2; r++) {
            snprintf(sql, sizeof sql,
                     "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq,"
                     " func_id, launch_id, is_p2p, device) VALUES (%d, %d, %lld, %lld, 42, %d,"
                     " 7, %d, 0, 0)",
                     r, k + 1, (long long)(t - W - 100), (long long)(t - W), k, 1000 + k);
            tu_exec(db, sql);
        }
        snprintf(sql, sizeof sql,
                 "INSERT INTO nccl_channels VALUES (1, %d, 0, %lld, %lld, %lld);"
                 "INSERT INTO external_correlations VALUES (0, %d, %d, 2);"
                 "INSERT INTO kernels (rank, device, start_ns, end_ns, correlation_id)"
                 " VALUES (0, 0, %lld, %lld, %d)",
                 k + 1, (long long)(t - W + 1000000), (long long)(t + W + 1000000),
                 (long long)(t + W + 50000), 5000 + k, 1000 + k, (long long)(t - W),
                 (long long)(t + W), 5000 + k);
        tu_exec(db, sql);
    }
    tu_exec(db, "COMMIT");
    struct mrd_clock_causality_summary s;
    CHECK_OK(mrd_clock_causality_db(db, 1, &s, NULL));
    CHECK_EQ(s.instances, 20);
    CHECK_EQ(s.violations_before, 0);
    CHECK_EQ(s.max_shift_ns, 0);
    sqlite3_close(db);
}

int main(void)
{
    test_solver_cases();
    test_solver_one_bad_clock();
    test_solver_drift();
    test_solver_random_drift();
    test_solver_random();
    test_db();
    test_rooted();
    test_loose_gpu_model();
    fprintf(stderr, "clock_causality: ok\n");
    return 0;
}
