/* analysis_match: collective matching, skew, last arriver, waits, straggler ranking,
 * causality count, per-step breakdown and clock-model mapping on the hand-built fixture
 * of fixture.c (fx_build_match). Every expected number is derived in the comments from
 * the fixture's global start times:
 *
 *   inst  key               starts (r0 r1 r2 r3)             skew last cost  step
 *   I1    H AllReduce 0     1000 1200 1100 1500              500  r3   1200  0
 *   I2    H AllReduce 1     5000 5000 5900 5100              900  r2   2600  0
 *   I3    H AllReduce 2     9000 9050 9000 (r3 missing)      50   r1   100   0
 *   I4    G AllGather 0     20000 (r1 untimed)               -    -    -     -
 *   I5    H AllReduce 3     30000 30200 30000 30000          200  r1   600   1 (violation)
 *   I6    H AllReduce 4     1500500000 x3, r3 1500500003     3    r3   9     2
 *   I7    G Broadcast 0     50000, r1 50040 (GPU timer)      40   r1   40    1
 */
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "check.h"
#include "fixture.h"

struct seen {
    int n;
    char func[8][16];
    int64_t seq[8], skew[8], cost[8], step[8];
    int last[8], ntimed[8];
};

static void on_instance(const struct mrd_an_instance *in, void *ctx)
{
    struct seen *s = ctx;
    CHECK_LT(s->n, 8);
    snprintf(s->func[s->n], sizeof(s->func[0]), "%s", in->func);
    s->seq[s->n] = (int64_t)in->seq;
    s->skew[s->n] = in->skew_ns;
    s->cost[s->n] = in->cost_ns;
    s->step[s->n] = in->step;
    s->last[s->n] = in->last_rank;
    s->ntimed[s->n] = in->ntimed;
    s->n++;
}

static int find(const struct seen *s, const char *func, int64_t seq)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->func[i], func) == 0 && s->seq[i] == seq)
            return i;
    CHECK_FAIL_("instance %s %lld not reported", func, (long long)seq);
    return -1;
}

static void check_instances(const struct seen *s)
{
    static const struct {
        const char *func;
        int seq, last, ntimed;
        int64_t skew, cost, step;
    } want[] = {
        {"AllReduce", 0, 3, 4, 500, 1200, 0}, {"AllReduce", 1, 2, 4, 900, 2600, 0},
        {"AllReduce", 2, 1, 3, 50, 100, 0},   {"AllGather", 0, -1, 1, 0, 0, -1},
        {"AllReduce", 3, 1, 4, 200, 600, 1},  {"AllReduce", 4, 3, 4, 3, 9, 2},
        {"Broadcast", 0, 1, 2, 40, 40, 1},
    };
    CHECK_EQ(s->n, 7);
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        int i = find(s, want[k].func, want[k].seq);
        CHECK_EQ(s->last[i], want[k].last);
        CHECK_EQ(s->ntimed[i], want[k].ntimed);
        CHECK_EQ(s->skew[i], want[k].skew);
        CHECK_EQ(s->cost[i], want[k].cost);
        CHECK_EQ(s->step[i], want[k].step);
    }
}

static void check_totals(const struct mrd_analysis *a)
{
    CHECK_EQ(a->global_timebase, 1);
    CHECK_EQ(a->nranks, 4);
    CHECK_EQ(a->instances, 7);
    CHECK_EQ(a->complete, 5); /* I1 I2 I5 I6 I7 */
    CHECK_EQ(a->partial, 1);  /* I3 */
    CHECK_EQ(a->untimed, 1);  /* I4 */
    CHECK_EQ(a->causality_violations, 1);
    CHECK_EQ(a->skew_max_ns, 900);
    CHECK_EQ(a->worst_last_rank, 2);
    CHECK_EQ(a->worst_seq, 1);
    CHECK_STREQ(a->worst_func, "AllReduce");
    CHECK_EQ(a->skew_sum_ns, 500 + 900 + 50 + 200 + 3 + 40);
    CHECK_EQ(a->cost_ns, 1200 + 2600 + 100 + 600 + 9 + 40);
    CHECK_EQ(a->skew_hist[0], 6); /* every skew is below 1 us */
    /* per (communicator, function) */
    CHECK_EQ(a->ncolls, 3);
    int seen_ar = 0;
    for (int i = 0; i < a->ncolls; i++) {
        const struct mrd_an_coll *c = &a->colls[i];
        if (strcmp(c->func, "AllReduce") == 0) {
            seen_ar = 1;
            CHECK_UEQ(c->comm_hash, 0x1234);
            CHECK_EQ(c->instances, 5);
            CHECK_EQ(c->complete, 4);
            CHECK_EQ(c->skew_max_ns, 900);
            CHECK_EQ(c->cost_ns, 1200 + 2600 + 100 + 600 + 9);
        } else {
            CHECK_UEQ(c->comm_hash, (uint64_t)(int64_t)-5);
        }
    }
    CHECK(seen_ar);
}

static void check_ranks(const struct mrd_analysis *a)
{
    /* instances timed, times last, wait caused, wait suffered (see the table above) */
    static const int64_t want[4][4] = {
        {6, 0, 0, 500 + 900 + 50 + 200 + 3 + 40},
        {6, 3, 100 + 600 + 40, 300 + 900 + 0 + 0 + 3 + 0},
        {5, 1, 2600, 400 + 0 + 50 + 200 + 3},
        {4, 2, 1200 + 9, 0 + 800 + 200 + 0},
    };
    for (int r = 0; r < 4; r++) {
        const struct mrd_an_rank *k = &a->ranks[r];
        CHECK_EQ(k->rank, r);
        CHECK_EQ(k->instances, want[r][0]);
        CHECK_EQ(k->times_last, want[r][1]);
        CHECK_EQ(k->wait_caused_ns, want[r][2]);
        CHECK_EQ(k->wait_suffered_ns, want[r][3]);
        CHECK_EQ(k->clock_fitted, 1);
        CHECK_EQ(k->steps, r < 3 ? 3 : 2); /* nested, "stepper" and the mark are not steps */
    }
    /* every timed instance lies in a step: the ranking's counts are the same */
    CHECK_EQ(a->ranked_in_steps, 1);
    CHECK_EQ(a->outside_steps, 0);
    for (int r = 0; r < 4; r++) {
        struct mrd_an_wait w = mrd_analyze_ranked_wait(a, &a->ranks[r]);
        CHECK_EQ(w.instances, want[r][0]);
        CHECK_EQ(w.times_last, want[r][1]);
        CHECK_EQ(w.caused_ns, want[r][2]);
        CHECK_EQ(w.suffered_ns, want[r][3]);
    }
    CHECK_EQ(a->ranks[3].clock_segments, 2);
    CHECK_EQ(a->ranks[3].clock_error_bound_ns, 400);
    CHECK_EQ(a->ranks[2].clock_offset_ns, -2000);
    CHECK_STREQ(a->ranks[0].host, "nodeA");
    CHECK_EQ(a->ranks[0].dropped_total, 5);
    CHECK_STREQ(a->ranks[0].drops[0].reason, "ring_full");
    /* events: rank 0 has 1 compute + 7 collective kernels + 1 p2p kernel */
    CHECK_EQ(a->ranks[0].events[0], 9);
    CHECK_EQ(a->ranks[0].events[8], 8); /* nccl_ops: I1..I7 rows of rank 0 + Send */
}

static void check_steps(const struct mrd_analysis *a)
{
    CHECK_EQ(a->nsteps, 3);
    /* step 0: I1 I2 I3; worst rank 2 (2600 of 3900) */
    CHECK_EQ(a->steps[0].start_ns, 0);
    CHECK_EQ(a->steps[0].end_ns, 10000);
    CHECK_EQ(a->steps[0].instances, 3);
    CHECK_EQ(a->steps[0].cost_ns, 3900);
    CHECK_EQ(a->steps[0].max_skew_ns, 900);
    CHECK_EQ(a->steps[0].worst_rank, 2);
    CHECK_EQ(a->steps[0].worst_caused_ns, 2600);
    /* step 1: I5 I7, both caused by rank 1 */
    CHECK_EQ(a->steps[1].instances, 2);
    CHECK_EQ(a->steps[1].cost_ns, 640);
    CHECK_EQ(a->steps[1].max_skew_ns, 200);
    CHECK_EQ(a->steps[1].worst_rank, 1);
    /* step 2: I6 (rank 3 has no step 2: placed by rank 0's range), caused by rank 3 */
    CHECK_EQ(a->steps[2].start_ns, 1500000000);
    CHECK_EQ(a->steps[2].end_ns, 1600000000);
    CHECK_EQ(a->steps[2].instances, 1);
    CHECK_EQ(a->steps[2].worst_rank, 3);
    CHECK_EQ(a->steps[2].worst_caused_ns, 9);
}

static void check_overlap(const struct mrd_analysis *a)
{
    /* rank 0, device 0: compute sgemm [500,1800); linked comm kernels I1 [1000,2000),
     * I2 [5000,6000), I3 [9000,9500), I4 [20000,20100), I5 [30000,30100), Send
     * [40000,40500), I7 [50000,50100), I6 [1500500000,1500501000): comm = 1000 + 1000 +
     * 500 + 100 + 100 + 500 + 100 + 1000 = 4300; hidden = [1000,1800) = 800 */
    const struct mrd_an_overlap *o = &a->ranks[0].ov;
    CHECK_EQ(o->method, MRD_AN_METHOD_CORRELATION);
    CHECK_EQ(o->comm_ns, 4300);
    CHECK_EQ(o->compute_ns, 1300);
    CHECK_EQ(o->hidden_ns, 800);
    CHECK_EQ(o->exposed_ns, 3500);
    CHECK_EQ(o->comm_kernels, 8);
    CHECK_EQ(o->compute_kernels, 1);
    CHECK(o->ratio > 800.0 / 4300 - 1e-12 && o->ratio < 800.0 / 4300 + 1e-12);
}

static void check_local(sqlite3 *db)
{
    /* Ignoring the models, I1's local starts are 1000, 2200, 3100, 4500: rank 3 last with
     * a skew of 3500, and the report must warn that times are not aligned. */
    struct mrd_analyze_options o;
    struct mrd_analysis *a = NULL;
    struct seen s;
    memset(&o, 0, sizeof(o));
    memset(&s, 0, sizeof(s));
    o.ignore_clock_models = 1;
    o.on_instance = on_instance;
    o.ctx = &s;
    CHECK_OK(mrd_analyze(db, &o, &a, NULL));
    CHECK_EQ(a->global_timebase, 0);
    int i = find(&s, "AllReduce", 0);
    CHECK_EQ(s.skew[i], 3500);
    CHECK_EQ(s.last[i], 3);
    CHECK_GE(a->nwarnings, 1);
    CHECK(strstr(a->warnings[0], "local clock") != NULL);
    mrd_analysis_free(a);
}

/* A database of its own for one sub-test (path + suffix, the schema created); its path in
 * p2[cap]. */
static sqlite3 *sub_db(const char *path, const char *suffix, char *p2, size_t cap)
{
    snprintf(p2, cap, "%s%s", path, suffix);
    return fx_create(p2);
}

/* Analyses the database at p2 on a connection of its own (the analysis keeps TEMP tables
 * per connection: rows added after one analysis need a new one) with default options but
 * step_name. The caller frees the result. */
static struct mrd_analysis *analyze_path(const char *p2, const char *step_name)
{
    sqlite3 *db;
    struct mrd_analyze_options o;
    struct mrd_analysis *a = NULL;
    memset(&o, 0, sizeof(o));
    o.step_name = step_name;
    CHECK_EQ(sqlite3_open(p2, &db), SQLITE_OK);
    CHECK_OK(mrd_analyze(db, &o, &a, NULL));
    sqlite3_close(db);
    return a;
}

static void check_step_names(const char *path)
{
    /* Which NVTX ranges are steps: "train_step", "training step 2", "ProfilerStep#3" are;
     * "optimizer_step" (nested or not) and "stepper" are not. With a prefix given, only
     * ranges named by it are. */
    char p2[1024];
    sqlite3 *db = sub_db(path, ".names", p2, sizeof(p2));
    struct mrd_analysis *a;
    fx_nvtx(db, 0, 0, 100, 1, "train_step");
    fx_nvtx(db, 0, 50, 60, 1, "optimizer_step");
    fx_nvtx(db, 0, 100, 200, 2, "training step 2");
    fx_nvtx(db, 0, 300, 400, 1, "stepper");
    fx_nvtx(db, 0, 400, 500, 1, "ProfilerStep#3");
    fx_nvtx(db, 0, 600, 700, 1, "optimizer_step");
    fx_op(db, 0, 1, 9, 0, "AllReduce", 1, 10, 20, 0);
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->ranks[0].steps, 3);
    CHECK_EQ(a->nsteps, 3);
    mrd_analysis_free(a);
    a = analyze_path(p2, "optimizer_step");
    CHECK_EQ(a->ranks[0].steps, 2);
    mrd_analysis_free(a);
    sqlite3_close(db);
}

static void check_rooted(const char *path)
{
    /* A Broadcast's root may end before its peer begins (PyTorch DDP on the H200 host:
     * 414 us): only the peers depend on the root, so that is not a causality violation;
     * a peer ending before its root began is one. Reduce: the mirror. */
    char p2[1024];
    sqlite3 *db = sub_db(path, ".rooted", p2, sizeof(p2));
    struct mrd_analysis *a;
    fx_op(db, 0, 1, 9, 0, "Broadcast", 2, 1000, 1100, 0); /* root 0 ends first: fine */
    fx_op(db, 1, 1, 9, 0, "Broadcast", 2, 1500, 1505, 0);
    fx_op(db, 0, 2, 9, 0, "Reduce", 2, 2300, 2310, 0); /* peer ends first: fine */
    fx_op(db, 1, 2, 9, 0, "Reduce", 2, 2000, 2010, 0);
    fx_exec(db, "UPDATE nccl_ops SET root = 0");
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->instances, 2);
    CHECK_EQ(a->causality_violations, 0);
    mrd_analysis_free(a);
    fx_op(db, 0, 3, 9, 1, "Broadcast", 2, 3300, 3400, 0); /* peer ends before the root */
    fx_op(db, 1, 3, 9, 1, "Broadcast", 2, 3000, 3005, 0);
    fx_op(db, 0, 4, 9, 1, "Reduce", 2, 4000, 4010, 0); /* root ends before the peer */
    fx_op(db, 1, 4, 9, 1, "Reduce", 2, 4300, 4310, 0);
    fx_exec(db, "UPDATE nccl_ops SET root = 0");
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->instances, 4);
    CHECK_EQ(a->causality_violations, 2);
    mrd_analysis_free(a);
    sqlite3_close(db);
}

static void check_scope(const char *path)
{
    /* A warm-up collective outside the step ranges where rank 0 arrives 1 ms late (as the
     * H200 quick start's first all-reduce: 31.6 ms), then two in steps where rank 1 is
     * late by 100 and 200 ns: the ranking counts the steps only and puts rank 1 first;
     * the warm-up is reported as left out. Without step ranges everything counts. */
    char p2[1024];
    sqlite3 *db = sub_db(path, ".scope", p2, sizeof(p2));
    struct mrd_analysis *a;
    fx_op(db, 0, 1, 9, 0, "AllReduce", 2, 1000000, 1000100, 0);
    fx_op(db, 1, 1, 9, 0, "AllReduce", 2, 0, 1000100, 0);
    fx_op(db, 0, 2, 9, 1, "AllReduce", 2, 2000000, 2000300, 0);
    fx_op(db, 1, 2, 9, 1, "AllReduce", 2, 2000100, 2000300, 0);
    fx_op(db, 0, 3, 9, 2, "AllReduce", 2, 3000000, 3000300, 0);
    fx_op(db, 1, 3, 9, 2, "AllReduce", 2, 3000200, 3000300, 0);
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->ranked_in_steps, 0); /* no step ranges yet: all three count */
    CHECK_EQ(mrd_analyze_ranked_wait(a, &a->ranks[0]).caused_ns, 1000000);
    CHECK_EQ(mrd_analyze_ranked_wait(a, &a->ranks[1]).caused_ns, 300);
    mrd_analysis_free(a);
    for (int r = 0; r < 2; r++) {
        fx_nvtx(db, r, 1500000, 2500000, 1, "step 0");
        fx_nvtx(db, r, 2500000, 3500000, 1, "step 1");
    }
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->ranked_in_steps, 1);
    CHECK_EQ(a->outside_steps, 1);
    CHECK_EQ(a->outside_steps_cost_ns, 1000000);
    CHECK_EQ(a->ranks[0].wait_caused_ns, 1000000); /* the all-instance counts stay */
    struct mrd_an_wait w0 = mrd_analyze_ranked_wait(a, &a->ranks[0]);
    struct mrd_an_wait w1 = mrd_analyze_ranked_wait(a, &a->ranks[1]);
    CHECK_EQ(w0.instances, 2);
    CHECK_EQ(w0.times_last, 0);
    CHECK_EQ(w0.caused_ns, 0);
    CHECK_EQ(w0.suffered_ns, 300);
    CHECK_EQ(w1.times_last, 2);
    CHECK_EQ(w1.caused_ns, 300);
    CHECK_EQ(w1.suffered_ns, 0);
    mrd_analysis_free(a);
    sqlite3_close(db);
}

static void check_scope_past_cap(const char *path)
{
    /* More steps than are broken down (MRD_AN_MAX_STEPS): the collectives of the later
     * steps, and one between two steps, are still within the steps and ranked; only the
     * one after the last step (teardown) is left out. Rank 1 is late by 100 ns in every
     * step, rank 0 by 1 ms at teardown. */
    char p2[1024];
    sqlite3 *db = sub_db(path, ".cap", p2, sizeof(p2));
    struct mrd_analysis *a;
    const int nsteps = MRD_AN_MAX_STEPS + 76;
    fx_exec(db, "BEGIN");
    for (int s = 0; s < nsteps; s++) {
        int64_t t0 = (int64_t)s * 10000;
        for (int r = 0; r < 2; r++) {
            fx_nvtx(db, r, t0, t0 + 9000, 1, "step");
            fx_op(db, r, s + 1, 9, s, "AllReduce", 2, t0 + 100 + 100 * r, t0 + 500, 0);
        }
    }
    int64_t gap = (int64_t)(nsteps / 2) * 10000 + 9500; /* between two steps */
    fx_op(db, 0, nsteps + 1, 9, nsteps, "AllReduce", 2, gap, gap + 100, 0);
    fx_op(db, 1, nsteps + 1, 9, nsteps, "AllReduce", 2, gap + 100, gap + 200, 0);
    int64_t end = (int64_t)nsteps * 10000 + 5000; /* teardown, after the last step */
    fx_op(db, 0, nsteps + 2, 9, nsteps + 1, "AllReduce", 2, end + 1000000, end + 1000100, 0);
    fx_op(db, 1, nsteps + 2, 9, nsteps + 1, "AllReduce", 2, end, end + 1000100, 0);
    fx_exec(db, "COMMIT");
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->nsteps, MRD_AN_MAX_STEPS);
    CHECK_EQ(a->ranked_in_steps, 1);
    CHECK_EQ(a->outside_steps, 1);
    CHECK_EQ(a->outside_steps_cost_ns, 1000000);
    struct mrd_an_wait w1 = mrd_analyze_ranked_wait(a, &a->ranks[1]);
    CHECK_EQ(w1.times_last, nsteps + 1);
    CHECK_EQ(w1.caused_ns, (int64_t)(nsteps + 1) * 100);
    CHECK_EQ(mrd_analyze_ranked_wait(a, &a->ranks[0]).caused_ns, 0);
    mrd_analysis_free(a);
    sqlite3_close(db);
}

static void check_capture_steps(const char *path)
{
    /* A steady-tier run: four steps, a window of steps 1-1 (attach in step 1, detach in
     * step 2). Rank 0 is 12 ms late in step 1 (its attach) and 2 ms late in step 2 (its
     * detach); rank 1 is 100 ns late in steps 0 and 3. The two capture steps are not ranked
     * (counted apart, with their cost), so rank 1 is the straggler; without the windows
     * table rank 0 would be, by 14 ms. */
    char p2[1024];
    sqlite3 *db = sub_db(path, ".capture", p2, sizeof(p2));
    struct mrd_analysis *a;
    const int64_t late0[4] = {0, 12000000, 2000000, 0}, late1[4] = {100, 0, 0, 100};
    for (int st = 0; st < 4; st++) {
        int64_t t0 = (int64_t)st * 100000000;
        for (int r = 0; r < 2; r++) {
            int64_t late = r == 0 ? late0[st] : late1[st];
            fx_nvtx(db, r, t0, t0 + 90000000, 1, "step");
            fx_op(db, r, st + 1, 9, st, "AllReduce", 2, t0 + 1000 + late, t0 + 20000000, 0);
        }
    }
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->capture_steps, 0);
    CHECK_EQ(mrd_analyze_ranked_wait(a, &a->ranks[0]).caused_ns, 14000000);
    mrd_analysis_free(a);
    /* the finalize's table (aggregator/SCHEMA.md, "Capture windows") */
    fx_exec(db, "CREATE TABLE windows (rank INTEGER NOT NULL, first_step INTEGER NOT NULL, "
                "last_step INTEGER NOT NULL, detach_step INTEGER NOT NULL, reason TEXT NOT "
                "NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, attach_ns INTEGER "
                "NOT NULL, detach_ns INTEGER, flush_ns INTEGER NOT NULL, kernels INTEGER NOT "
                "NULL)");
    fx_exec(db, "INSERT INTO windows VALUES (0, 1, 1, 2, 'range', 100000000, 290000000, "
                "12000000, 2000000, 1000000, 50), (1, 1, 1, 2, 'range', 100000000, 290000000, "
                "11000000, 1500000, 1000000, 50)");
    a = analyze_path(p2, NULL);
    CHECK_EQ(a->capture_steps, 2);
    CHECK_EQ(a->capture_steps_cost_ns, 14000000);
    CHECK_EQ(a->outside_steps, 0);
    struct mrd_an_wait w0 = mrd_analyze_ranked_wait(a, &a->ranks[0]);
    struct mrd_an_wait w1 = mrd_analyze_ranked_wait(a, &a->ranks[1]);
    CHECK_EQ(w0.caused_ns, 0);
    CHECK_EQ(w1.times_last, 2);
    CHECK_EQ(w1.caused_ns, 200);
    CHECK_EQ(a->ranks[0].wait_caused_ns, 14000000); /* the all-instance counts stay */
    CHECK_EQ(a->nsteps, 4);
    CHECK_EQ(a->steps[0].capture, 0);
    CHECK_EQ(a->steps[1].capture, MRD_AN_ATTACH);
    CHECK_EQ(a->steps[2].capture, MRD_AN_DETACH);
    CHECK_EQ(a->steps[3].capture, 0);
    mrd_analysis_free(a);
    sqlite3_close(db);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "analysis_match.db";
    sqlite3 *db = fx_create(path);
    struct mrd_analyze_options o;
    struct mrd_analysis *a = NULL;
    struct seen s;
    fx_build_match(db);
    sqlite3_close(db);
    /* read-only, as `meridian report` opens it */
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    memset(&o, 0, sizeof(o));
    memset(&s, 0, sizeof(s));
    o.on_instance = on_instance;
    o.ctx = &s;
    CHECK_OK(mrd_analyze(db, &o, &a, NULL));
    check_instances(&s);
    check_totals(a);
    check_ranks(a);
    check_steps(a);
    check_overlap(a);
    mrd_analysis_free(a);
    check_local(db);
    sqlite3_close(db);
    check_step_names(path);
    check_rooted(path);
    check_scope(path);
    check_scope_past_cap(path);
    check_capture_steps(path);
    printf("analysis_match: ok\n");
    return 0;
}
