/* Collective matching across ranks, arrival skew, waits, stragglers and the per-step
 * breakdown.
 *
 * Where it sits: part of mrd_analyze, after mrd_db_op_intervals (TEMP mrd_op_time gives
 * each NCCL op's kernel interval, or its channels' raw GPU interval) and the overlap
 * sweep. Steps through the one (communicator, seq, function) matching of the database
 * module (mrd_db_instances_open) and maps every interval into the global timebase.
 *
 * Workload: one pass over nccl_ops in (comm_hash, seq, func_id) order through the
 * nccl_ops_match index; only the rows of the current instance are held (one per rank,
 * at most MRD_AN_MAX_INSTANCE_ROWS; extra rows are ignored and a warning says so). NVTX
 * step ranges are held per rank (MRD_AN_MAX_STEPS each, later ones counted) so that an
 * instance can be placed in its step by binary search.
 */
#include "analyze_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array.h"
#include "clock.h"
#include "error.h"
#include "steps.h"

#define MRD_AN_MAX_INSTANCE_ROWS 65536
#define MRD_AN_MAX_STEP_CELLS    (1u << 22) /* steps x ranks cells for "worst rank per step" */

struct row {
    int rank;
    int64_t start, end; /* comparable timebase */
    int64_t lstart;     /* rank-local start, for step lookup */
    int is_root;        /* its comm_rank is the op's root */
};

struct matcher {
    struct mrd_analysis *a;
    const struct mrd_timebase *tb;
    const struct mrd_analyze_options *o;
    struct mrd__step_ranges *steps;         /* [a->nranks] */
    uint8_t capture_step[MRD_AN_MAX_STEPS]; /* MRD_AN_ATTACH | MRD_AN_DETACH, per step */
    int64_t *cell_caused;                   /* [nsteps * nranks] or NULL */
    struct row *rows;
    int nrows, cap_rows, comm_nranks, nfound, dup_rows, overflow_rows;
    uint64_t comm_hash, seq;
    int func_id;
    char func[32];
    int have_key;
    int *ranks_buf;
    int64_t *start_buf, *end_buf;
};

static int capture_step_row(sqlite3_stmt *st, void *ctx)
{
    struct matcher *m = ctx;
    for (int c = 0; c < 2; c++) {
        int64_t s = sqlite3_column_int64(st, c);
        if (s >= 0 && s < MRD_AN_MAX_STEPS)
            m->capture_step[s] |= c == 0 ? MRD_AN_ATTACH : MRD_AN_DETACH;
    }
    return 0;
}

/* The capture steps (table windows, derived by the finalize): a window's first step (the
 * attach) and the step after its last (the detach), on any rank. */
static int load_capture_steps(sqlite3 *db, struct matcher *m)
{
    int rc = mrd__analyze_rows(db, "windows", mrd_db_sql_window_steps, capture_step_row, m);
    for (int s = 0; rc == 0 && s < m->a->nsteps; s++)
        m->a->steps[s].capture = m->capture_step[s];
    return rc;
}

struct step_reader {
    const struct mrd_analyze_options *o;
    struct mrd_analysis *a;
    struct mrd__step_ranges *per_rank;
};

static int step_range_row(sqlite3_stmt *st, void *ctx)
{
    struct step_reader *sr = ctx;
    struct mrd_an_rank *r = mrd__analyze_rank(sr->a, sqlite3_column_int(st, 0));
    int64_t s = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
    if (!r || !mrd_step_name_match((const char *)sqlite3_column_text(st, 3), sr->o->step_name))
        return 0;
    struct mrd__step_ranges *l = &sr->per_rank[r - sr->a->ranks];
    if (l->n > 0 && s < l->end[l->n - 1])
        return 0; /* nested in (or overlapping) the previous step: not a new step */
    if (l->total++ == 0)
        l->first_start = s;
    if (e > l->last_end)
        l->last_end = e;
    if (l->n >= MRD_AN_MAX_STEPS)
        return 0;
    if (!l->start) {
        l->start = malloc(MRD_AN_MAX_STEPS * sizeof(int64_t));
        l->end = malloc(MRD_AN_MAX_STEPS * sizeof(int64_t));
        if (!l->start || !l->end)
            return -ENOMEM;
    }
    l->start[l->n] = s;
    l->end[l->n] = e;
    l->n++;
    return 0;
}

int mrd__analyze_step_ranges(sqlite3 *db, const struct mrd_analyze_options *o,
                             struct mrd_analysis *a, struct mrd__step_ranges *per_rank)
{
    struct step_reader sr = {o, a, per_rank};
    sqlite3_stmt *st = NULL;
    int rc;
    if (mrd_db_has_table(db, "nvtx") != 1)
        return 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_step_ranges, -1, &st, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    sqlite3_bind_text(st, 1, o->step_name ? o->step_name : "step", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, o->step_name == NULL);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if ((rc = step_range_row(st, &sr)) < 0)
            break;
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    return rc == SQLITE_DONE ? 0 : mrd__analyze_sqlerr(db);
}

void mrd__step_ranges_free(struct mrd__step_ranges *per_rank, int nranks)
{
    if (per_rank)
        for (int i = 0; i < nranks; i++) {
            free(per_rank[i].start);
            free(per_rank[i].end);
        }
    free(per_rank);
}

/* The step ranges of every rank (its count in ranks[].steps; those past MRD_AN_MAX_STEPS
 * counted in steps_beyond_cap). */
static int load_steps(sqlite3 *db, struct matcher *m)
{
    struct mrd_analysis *a = m->a;
    int rc = mrd__analyze_step_ranges(db, m->o, a, m->steps);
    for (int i = 0; rc == 0 && i < a->nranks; i++) {
        a->ranks[i].steps = (uint64_t)m->steps[i].total;
        a->steps_beyond_cap += m->steps[i].total - m->steps[i].n;
    }
    return rc;
}

/* Builds a->steps from the per-rank lists: step i spans the earliest start and latest end
 * of the i-th step range over the ranks whose times are comparable. */
static int build_steps(struct matcher *m)
{
    struct mrd_analysis *a = m->a;
    int nsteps = 0;
    for (int i = 0; i < a->nranks; i++)
        if (m->steps[i].n > nsteps)
            nsteps = m->steps[i].n;
    if (nsteps == 0)
        return 0;
    a->steps = calloc((size_t)nsteps, sizeof(*a->steps));
    if (!a->steps)
        return -ENOMEM;
    a->nsteps = nsteps;
    for (int s = 0; s < nsteps; s++) {
        struct mrd_an_step *st = &a->steps[s];
        st->index = s;
        st->worst_rank = -1;
        st->start_ns = INT64_MAX;
        st->end_ns = INT64_MIN;
        for (int i = 0; i < a->nranks; i++) {
            int rank = a->ranks[i].rank;
            if (s >= m->steps[i].n ||
                (a->global_timebase && !mrd_timebase_rank_fitted(m->tb, rank)))
                continue;
            int64_t gs = mrd_timebase_map(m->tb, rank, m->steps[i].start[s]);
            int64_t ge = mrd_timebase_map(m->tb, rank, m->steps[i].end[s]);
            if (gs < st->start_ns)
                st->start_ns = gs;
            if (ge > st->end_ns)
                st->end_ns = ge;
        }
        if (st->start_ns > st->end_ns)
            st->start_ns = st->end_ns = 0;
    }
    if ((uint64_t)nsteps * (uint64_t)a->nranks <= MRD_AN_MAX_STEP_CELLS) {
        m->cell_caused = calloc((size_t)nsteps * (size_t)a->nranks, sizeof(int64_t));
        if (!m->cell_caused)
            return -ENOMEM;
    } else {
        mrd__analyze_warn(a, "%d steps x %d ranks: worst rank per step not computed", nsteps,
                          a->nranks);
    }
    return 0;
}

static int64_t step_of(const struct mrd__step_ranges *l, int64_t t)
{
    int lo = 0, hi = l->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (l->start[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || t >= l->end[lo - 1])
        return -1;
    return lo - 1;
}

/* 1 when t (local clock) lies between the start of the rank's first step range and the
 * end of its last one: the straggler ranking's scope (analyze.h), which leaves out the
 * warm-up and start-up before the steps and the teardown after them, and keeps what lies
 * between two steps or past the broken-down MRD_AN_MAX_STEPS. */
static int within_steps(const struct mrd__step_ranges *l, int64_t t)
{
    return l->total > 0 && t >= l->first_start && t < l->last_end;
}

int mrd_analyze_hist_bin(int64_t ns)
{
    int64_t us = ns / 1000;
    int bin = 0;
    while (us > 0 && bin < MRD_AN_HIST_BINS - 1) {
        us >>= 1;
        bin++;
    }
    return bin;
}

static struct mrd_an_coll *coll_entry(struct mrd_analysis *a, uint64_t comm, const char *func)
{
    for (int i = 0; i < a->ncolls; i++)
        if (a->colls[i].comm_hash == comm && strcmp(a->colls[i].func, func) == 0)
            return &a->colls[i];
    if (a->ncolls < MRD_AN_MAX_COLLS) {
        struct mrd_an_coll *c = &a->colls[a->ncolls++];
        c->comm_hash = comm;
        snprintf(c->func, sizeof(c->func), "%s", func);
        return c;
    }
    struct mrd_an_coll *c = &a->colls[MRD_AN_MAX_COLLS];
    if (a->ncolls == MRD_AN_MAX_COLLS) {
        a->ncolls++;
        snprintf(c->func, sizeof(c->func), "other");
    }
    return c;
}

static void flush_instance(struct matcher *m)
{
    struct mrd_analysis *a = m->a;
    struct mrd_an_instance in;
    int last = -1;
    int64_t min_start = INT64_MAX, max_start = INT64_MIN, min_end = INT64_MAX, max_end = 0;

    if (!m->have_key)
        return;
    memset(&in, 0, sizeof(in));
    for (int i = 0; i < m->nrows; i++) {
        struct row *r = &m->rows[i];
        if (r->start < min_start)
            min_start = r->start;
        if (r->start > max_start || (r->start == max_start && r->rank < m->rows[last].rank)) {
            max_start = r->start;
            last = i;
        }
        if (r->end < min_end)
            min_end = r->end;
        if (r->end > max_end)
            max_end = r->end;
        m->ranks_buf[i] = r->rank;
        m->start_buf[i] = r->start;
        m->end_buf[i] = r->end;
    }
    a->instances++;
    struct mrd_an_coll *c = coll_entry(a, m->comm_hash, m->func);
    c->instances++;
    if (m->comm_nranks > 0 && m->nfound < m->comm_nranks)
        a->partial++;
    in.comm_hash = m->comm_hash;
    in.seq = m->seq;
    in.func = m->func;
    in.nranks = m->nfound;
    in.ntimed = m->nrows;
    in.comm_nranks = m->comm_nranks;
    in.ranks = m->ranks_buf;
    in.start = m->start_buf;
    in.end = m->end_buf;
    in.last_rank = -1;
    in.step = -1;
    if (m->nrows < 2) {
        a->untimed++;
        goto done;
    }
    if (m->comm_nranks > 0 && m->nrows == m->comm_nranks) {
        a->complete++;
        c->complete++;
    }
    in.last_rank = m->rows[last].rank;
    in.skew_ns = max_start - min_start;
    int li = (int)(mrd__analyze_rank(a, in.last_rank) - a->ranks); /* rows are known ranks */
    /* the step: the last arriver's, else the first row found inside a step */
    in.step = step_of(&m->steps[li], m->rows[last].lstart);
    for (int i = 0; in.step < 0 && i < m->nrows; i++)
        in.step =
            step_of(&m->steps[mrd__analyze_rank(a, m->rows[i].rank) - a->ranks], m->rows[i].lstart);
    int scoped = in.step >= 0 || within_steps(&m->steps[li], m->rows[last].lstart);
    for (int i = 0; !scoped && i < m->nrows; i++)
        scoped = within_steps(&m->steps[mrd__analyze_rank(a, m->rows[i].rank) - a->ranks],
                              m->rows[i].lstart);
    int capture = in.step >= 0 && in.step < MRD_AN_MAX_STEPS && m->capture_step[in.step];
    if (capture)
        scoped = 0; /* ranked neither in the steps nor as outside them: counted apart */
    for (int i = 0; i < m->nrows; i++) {
        struct mrd_an_rank *r = mrd__analyze_rank(a, m->rows[i].rank);
        int64_t wait = max_start - m->rows[i].start;
        r->instances++;
        r->wait_suffered_ns += wait;
        if (scoped) {
            r->in_steps.instances++;
            r->in_steps.suffered_ns += wait;
        }
        in.cost_ns += wait;
    }
    a->ranks[li].times_last++;
    a->ranks[li].wait_caused_ns += in.cost_ns;
    if (scoped) {
        a->ranks[li].in_steps.times_last++;
        a->ranks[li].in_steps.caused_ns += in.cost_ns;
        a->ranked_in_steps = 1;
    } else if (capture) {
        a->capture_steps++;
        a->capture_steps_cost_ns += in.cost_ns;
    } else {
        a->outside_steps++;
        a->outside_steps_cost_ns += in.cost_ns;
    }
    a->skew_sum_ns += in.skew_ns;
    a->cost_ns += in.cost_ns;
    a->skew_hist[mrd_analyze_hist_bin(in.skew_ns)]++;
    c->timed++;
    c->skew_sum_ns += in.skew_ns;
    c->cost_ns += in.cost_ns;
    if (in.skew_ns > c->skew_max_ns)
        c->skew_max_ns = in.skew_ns;
    if (in.skew_ns > a->skew_max_ns || a->worst_last_rank < 0) {
        a->skew_max_ns = in.skew_ns;
        a->worst_seq = m->seq;
        a->worst_comm = m->comm_hash;
        snprintf(a->worst_func, sizeof(a->worst_func), "%s", m->func);
        a->worst_last_rank = in.last_rank;
        a->worst_start_ns = min_start;
        a->worst_end_ns = max_end;
    }
    /* a rank's kernel ended before one it depends on began (by the data flow of the
     * function: in a Broadcast only the non-roots depend on the root, whose kernel may
     * end before theirs begin; mrd_clock_coll_order) */
    enum mrd_clock_coll_order order = mrd_clock_coll_order(m->func);
    int64_t root_s = INT64_MIN, root_e = INT64_MAX, other_min_end = INT64_MAX;
    int64_t other_max_start = INT64_MIN;
    for (int i = 0; order != MRD_CLOCK_ALL_TO_ALL && i < m->nrows; i++) {
        const struct row *r = &m->rows[i];
        if (r->is_root) {
            root_s = r->start, root_e = r->end;
        } else {
            other_min_end = r->end < other_min_end ? r->end : other_min_end;
            other_max_start = r->start > other_max_start ? r->start : other_max_start;
        }
    }
    if (order == MRD_CLOCK_ALL_TO_ALL  ? min_end < max_start
        : order == MRD_CLOCK_FROM_ROOT ? root_s != INT64_MIN && other_min_end < root_s
                                       : root_e != INT64_MAX && root_e < other_max_start)
        a->causality_violations++;
    if (in.step >= 0 && in.step < a->nsteps) {
        struct mrd_an_step *st = &a->steps[in.step];
        st->instances++;
        st->cost_ns += in.cost_ns;
        if (in.skew_ns > st->max_skew_ns)
            st->max_skew_ns = in.skew_ns;
        if (m->cell_caused)
            m->cell_caused[(size_t)in.step * (size_t)a->nranks + (size_t)li] += in.cost_ns;
    }
done:
    if (m->o->on_instance)
        m->o->on_instance(&in, m->o->ctx);
    m->nrows = 0;
    m->nfound = 0;
    m->comm_nranks = 0;
    m->have_key = 0;
}

static int grow_rows(struct matcher *m)
{
    int ncap = m->cap_rows ? m->cap_rows * 2 : 64;
    struct row *r = realloc(m->rows, (size_t)ncap * sizeof(*r));
    if (r)
        m->rows = r;
    int *rb = realloc(m->ranks_buf, (size_t)ncap * sizeof(int));
    if (rb)
        m->ranks_buf = rb;
    int64_t *sb = realloc(m->start_buf, (size_t)ncap * sizeof(int64_t));
    if (sb)
        m->start_buf = sb;
    int64_t *eb = realloc(m->end_buf, (size_t)ncap * sizeof(int64_t));
    if (eb)
        m->end_buf = eb;
    if (!r || !rb || !sb || !eb)
        return -ENOMEM;
    m->cap_rows = ncap;
    return 0;
}

/* Adds one nccl_ops row (and its interval, if any) to the current instance. */
static int add_row(struct matcher *m, sqlite3_stmt *q)
{
    int rank = sqlite3_column_int(q, MRD_DB_INST_RANK);
    int64_t s, e;
    if (!mrd__analyze_rank(m->a, rank))
        return 0;
    for (int i = 0; i < m->nrows; i++) {
        if (m->rows[i].rank == rank) {
            m->dup_rows++;
            return 0;
        }
    }
    if (sqlite3_column_int(q, MRD_DB_INST_COMM_NRANKS) > m->comm_nranks)
        m->comm_nranks = sqlite3_column_int(q, MRD_DB_INST_COMM_NRANKS);
    m->nfound++;
    if (sqlite3_column_type(q, MRD_DB_INST_SOURCE) == SQLITE_NULL)
        return 0; /* no kernel, no channel times: untimed on this rank */
    s = sqlite3_column_int64(q, MRD_DB_INST_START);
    e = sqlite3_column_int64(q, MRD_DB_INST_END);
    if (sqlite3_column_int(q, MRD_DB_INST_SOURCE) == 2) { /* raw GPU timer: to the local clock */
        int dev = sqlite3_column_int(q, MRD_DB_INST_DEVICE);
        if (mrd_timebase_gpu_to_local(m->tb, rank, dev, s, &s) < 0 ||
            mrd_timebase_gpu_to_local(m->tb, rank, dev, e, &e) < 0)
            return 0;
    }
    if (m->a->global_timebase && !mrd_timebase_rank_fitted(m->tb, rank))
        return 0;
    if (m->nrows >= MRD_AN_MAX_INSTANCE_ROWS) {
        m->overflow_rows++;
        return 0;
    }
    if (m->nrows == m->cap_rows && grow_rows(m) < 0)
        return -ENOMEM;
    struct row *r = &m->rows[m->nrows++];
    r->rank = rank;
    r->is_root = sqlite3_column_int(q, MRD_DB_INST_IS_ROOT) != 0;
    r->lstart = s;
    r->start = mrd_timebase_map(m->tb, rank, s);
    r->end = mrd_timebase_map(m->tb, rank, e);
    return 0;
}

static void finish_steps(struct matcher *m)
{
    struct mrd_analysis *a = m->a;
    if (!m->cell_caused)
        return;
    for (int s = 0; s < a->nsteps; s++) {
        for (int i = 0; i < a->nranks; i++) {
            int64_t v = m->cell_caused[(size_t)s * (size_t)a->nranks + (size_t)i];
            if (v > a->steps[s].worst_caused_ns) {
                a->steps[s].worst_caused_ns = v;
                a->steps[s].worst_rank = a->ranks[i].rank;
            }
        }
    }
}

int mrd__analyze_match(sqlite3 *db, const struct mrd_timebase *tb,
                       const struct mrd_analyze_options *o, struct mrd_analysis *a)
{
    struct matcher m;
    sqlite3_stmt *q = NULL;
    int rc = 0;

    memset(&m, 0, sizeof(m));
    m.a = a;
    m.tb = tb;
    m.o = o;
    if (a->nranks == 0 || mrd_db_has_table(db, "nccl_ops") != 1)
        return 0;
    m.steps = calloc((size_t)a->nranks, sizeof(*m.steps));
    if (!m.steps || grow_rows(&m) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = load_steps(db, &m)) < 0 || (rc = build_steps(&m)) < 0 ||
        (rc = load_capture_steps(db, &m)) < 0)
        goto fail;
    if ((rc = mrd_db_instances_open(db, 0, &q)) < 0) {
        rc = mrd__analyze_sqlerr(db);
        goto fail;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        uint64_t comm = (uint64_t)sqlite3_column_int64(q, MRD_DB_INST_COMM);
        uint64_t seq = (uint64_t)sqlite3_column_int64(q, MRD_DB_INST_SEQ);
        int func_id = sqlite3_column_int(q, MRD_DB_INST_FUNC_ID);
        if (!m.have_key || comm != m.comm_hash || seq != m.seq || func_id != m.func_id) {
            flush_instance(&m);
            const unsigned char *f = sqlite3_column_text(q, MRD_DB_INST_FUNC);
            m.have_key = 1;
            m.comm_hash = comm;
            m.seq = seq;
            m.func_id = func_id;
            snprintf(m.func, sizeof(m.func), "%s", f ? (const char *)f : "?");
        }
        if ((rc = add_row(&m, q)) < 0)
            goto fail;
    }
    if (rc != SQLITE_DONE) {
        rc = mrd__analyze_sqlerr(db);
        goto fail;
    }
    rc = 0;
    flush_instance(&m);
    finish_steps(&m);
    if (m.dup_rows)
        mrd__analyze_warn(a,
                          "%d NCCL op rows repeat a (communicator, seq, function) already "
                          "seen on the same rank: ignored",
                          m.dup_rows);
    if (m.overflow_rows)
        mrd__analyze_warn(a, "%d rows beyond %d per instance ignored", m.overflow_rows,
                          MRD_AN_MAX_INSTANCE_ROWS);
    if (a->untimed)
        mrd__analyze_warn(a,
                          "%llu collective instances have fewer than 2 ranks with a "
                          "timed kernel: no skew computed for them",
                          (unsigned long long)a->untimed);
fail:
    sqlite3_finalize(q);
    mrd__step_ranges_free(m.steps, a->nranks);
    MRD_ARRAY_FREE_ALL(m.cell_caused, m.rows, m.ranks_buf, m.start_buf, m.end_buf);
    return rc;
}
