/* Analysis driver: the run and rank inventory, then the collective matching (match.c), the
 * why pass's step walk (why.c) and the overlap sweep (overlap.c), which reads every kernel
 * once for itself and for the why pass, into one struct mrd_analysis.
 *
 * Where it sits: reads the tables the store wrote and the clock fit completed; its result
 * feeds the report, HTML, JSON and Perfetto exports and the `meridian` CLI.
 *
 * Workload: per-table counts are one scan each (never a scan per rank): GROUP BY rank
 * through an index led by rank, else the ranks of the rows tallied in C; the
 * helper TEMP tables hold one row per NCCL op or linked kernel (spilled to disk by
 * SQLite like any table); per-rank results are an array of at most MRD_AN_MAX_RANKS.
 */
#include "analyze_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "db.h"
#include "error.h"
#include "findings.h"

#define MRD_AN_MAX_RANKS 65536 /* distinct ranks tracked; rows of other ranks are ignored */

static const char *const kind_tables[MRD_AN_NKINDS] = {
    "kernels",
    "memcpys",
    "memsets",
    "syncs",
    "api_calls",
    "graph_launches",
    "external_correlations",
    "nvtx",
    "nccl_ops",
    "nccl_channels",
    "mpi_calls",
    "clock_samples",
    "gpu_clock_samples",
};

static char sql_msg[512];

const char *mrd_analyze_kind_name(int i)
{
    return i >= 0 && i < MRD_AN_NKINDS ? kind_tables[i] : "unknown";
}

const char *mrd_analyze_method_name(int method)
{
    static const char *const names[] = {[MRD_AN_METHOD_NONE] = "none",
                                        [MRD_AN_METHOD_CORRELATION] = "correlation",
                                        [MRD_AN_METHOD_NAME] = "kernel-name",
                                        [MRD_AN_METHOD_MIXED] = "correlation+name"};
    return method > 0 && method <= MRD_AN_METHOD_MIXED ? names[method] : names[0];
}

int mrd__analyze_sqlerr(sqlite3 *db)
{
    snprintf(sql_msg, sizeof(sql_msg), "%s", sqlite3_errmsg(db));
    return -MRD_ERR_SQLITE;
}

int mrd__analyze_rows(sqlite3 *db, const char *table, const char *sql,
                      int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
    int rc = mrd_db_each_row(db, table, sql, row, ctx);
    return rc == -MRD_ERR_SQLITE ? mrd__analyze_sqlerr(db) : rc;
}

void mrd__analyze_warn(struct mrd_analysis *a, const char *fmt, ...)
{
    va_list ap;
    if (a->nwarnings >= MRD_AN_MAX_WARNINGS)
        return;
    if (a->nwarnings == MRD_AN_MAX_WARNINGS - 1) {
        snprintf(a->warnings[a->nwarnings++], sizeof(a->warnings[0]),
                 "more warnings were left out");
        return;
    }
    va_start(ap, fmt);
    vsnprintf(a->warnings[a->nwarnings++], sizeof(a->warnings[0]), fmt, ap);
    va_end(ap);
}

void mrd__analyze_warn_at(struct mrd_analysis *a, int pos, const char *fmt, ...)
{
    va_list ap;
    int n = a->nwarnings;
    if (pos < 0 || pos > n)
        return;
    if (pos >= MRD_AN_MAX_WARNINGS - 1) { /* past the cap where it would have been appended */
        if (n == MRD_AN_MAX_WARNINGS - 1)
            mrd__analyze_warn(a, "%s", "");
        return;
    }
    if (n >= MRD_AN_MAX_WARNINGS - 1) { /* the list becomes MAX - 1 entries and the note */
        n = MRD_AN_MAX_WARNINGS - 2;
        snprintf(a->warnings[MRD_AN_MAX_WARNINGS - 1], sizeof(a->warnings[0]),
                 "more warnings were left out");
        a->nwarnings = MRD_AN_MAX_WARNINGS;
    } else {
        a->nwarnings = n + 1;
    }
    memmove(a->warnings[pos + 1], a->warnings[pos], (size_t)(n - pos) * sizeof(a->warnings[0]));
    va_start(ap, fmt);
    vsnprintf(a->warnings[pos], sizeof(a->warnings[0]), fmt, ap);
    va_end(ap);
}

struct mrd_an_rank *mrd__analyze_rank(struct mrd_analysis *a, int rank)
{
    size_t n = (size_t)a->nranks;
    size_t lo = mrd_array_lower_bound_int(a->ranks, n, sizeof(*a->ranks),
                                          offsetof(struct mrd_an_rank, rank), rank);
    return lo < n && a->ranks[lo].rank == rank ? &a->ranks[lo] : NULL;
}

/* Finds or inserts `rank` (kept sorted). Returns NULL on -ENOMEM or past the cap. */
static struct mrd_an_rank *add_rank(struct mrd_analysis *a, int rank, size_t *cap)
{
    struct mrd_an_rank *r = mrd__analyze_rank(a, rank);
    if (r)
        return r;
    if (a->nranks >= MRD_AN_MAX_RANKS || rank < 0)
        return NULL;
    if (mrd_array_reserve(&a->ranks, cap, (size_t)a->nranks, sizeof(*a->ranks), 16, 0) < 0)
        return NULL;
    int pos = 0;
    while (pos < a->nranks && a->ranks[pos].rank < rank)
        pos++;
    memmove(&a->ranks[pos + 1], &a->ranks[pos], (size_t)(a->nranks - pos) * sizeof(*a->ranks));
    r = &a->ranks[pos];
    memset(r, 0, sizeof(*r));
    r->rank = rank;
    r->local_rank = -1;
    r->pid = -1;
    r->world_size = -1;
    a->nranks++;
    return r;
}

static void copy_text(char *dst, size_t n, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, n, "%s", t ? (const char *)t : "");
}

static int load_run(sqlite3 *db, struct mrd_analysis *a)
{
    sqlite3_stmt *st = NULL;
    if (mrd_db_has_table(db, "runs") != 1)
        return 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_run_info, -1, &st, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    if (sqlite3_step(st) == SQLITE_ROW) {
        copy_text(a->run_id, sizeof(a->run_id), st, 0);
        a->world_size =
            sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 1);
        a->anchor_realtime_ns = sqlite3_column_int64(st, 2);
        a->created_ns = sqlite3_column_int64(st, 3);
        copy_text(a->command, sizeof(a->command), st, 4);
    }
    sqlite3_finalize(st);
    return 0;
}

/* What the per-rank row readers add to: the analysis, its ranks' capacity, and the event
 * kind whose counts are read. */
struct rank_rows {
    struct mrd_analysis *a;
    size_t *cap;
    int kind;
};

static int rank_row(sqlite3_stmt *st, void *ctx)
{
    struct rank_rows *rr = ctx;
    struct mrd_an_rank *r = add_rank(rr->a, sqlite3_column_int(st, 0), rr->cap);
    if (!r)
        return 0;
    if (sqlite3_column_type(st, 1) != SQLITE_NULL)
        r->local_rank = sqlite3_column_int(st, 1);
    if (sqlite3_column_type(st, 2) != SQLITE_NULL)
        r->world_size = sqlite3_column_int(st, 2);
    copy_text(r->host, sizeof(r->host), st, 3);
    if (sqlite3_column_type(st, 4) != SQLITE_NULL)
        r->pid = sqlite3_column_int(st, 4);
    r->goodbye = sqlite3_column_int(st, 5);
    return 0;
}

static int gpu_row(sqlite3_stmt *st, void *ctx)
{
    struct rank_rows *rr = ctx;
    struct mrd_an_rank *r = add_rank(rr->a, sqlite3_column_int(st, 0), rr->cap);
    if (!r)
        return 0;
    r->ngpus_total++;
    if (r->ngpus >= MRD_AN_MAX_GPUS)
        return 0;
    struct mrd_an_gpu *g = &r->gpus[r->ngpus++];
    g->device = sqlite3_column_int(st, 1);
    copy_text(g->name, sizeof(g->name), st, 2);
    copy_text(g->uuid, sizeof(g->uuid), st, 3);
    copy_text(g->pci, sizeof(g->pci), st, 4);
    return 0;
}

static int load_ranks(sqlite3 *db, struct mrd_analysis *a, size_t *cap)
{
    struct rank_rows rr = {a, cap, 0};
    int rc = mrd__analyze_rows(db, "ranks", mrd_db_sql_ranks, rank_row, &rr);
    return rc < 0 ? rc : mrd__analyze_rows(db, "gpus", mrd_db_sql_gpus, gpu_row, &rr);
}

/* One warning per rank whose batches came from more than one agent process
 * (batches.agent_instance; host and pid from rank_processes where recorded): a second
 * process held the rank at some point of the run (a restart, or something else holding
 * the run secret). Their rows stay apart by agent_instance in batches. One GROUP BY over
 * batches; the warning names at most the first 3 processes (a warning is one line). */
static int warn_rank_processes(sqlite3 *db, struct mrd_analysis *a)
{
    sqlite3_stmt *st = NULL;
    char line[512], one[160];
    int rc, rank = -1, n = 0;
    size_t len = 0;

    if (mrd_db_has_table(db, "batches") != 1)
        return 0;
    if (sqlite3_prepare_v2(db,
                           mrd_db_has_table(db, "rank_processes") == 1
                               ? mrd_db_sql_rank_processes_hosts
                               : mrd_db_sql_rank_processes,
                           -1, &st, NULL) != SQLITE_OK)
        return 0; /* a file without batches.agent_instance (schema 1): nothing to tell */
    for (;;) {
        rc = sqlite3_step(st);
        int r = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
        if (n && r != rank) { /* the previous rank is complete */
            mrd__analyze_warn(a,
                              "rank %d: data from %d agent processes (%s%s); kept apart in "
                              "batches.agent_instance",
                              rank, n, line, n > 3 ? "; ..." : "");
            n = 0;
            len = 0;
        }
        if (rc != SQLITE_ROW)
            break;
        rank = r;
        const unsigned char *host = sqlite3_column_text(st, 3);
        int64_t batches = sqlite3_column_int64(st, 2);
        if (host)
            snprintf(one, sizeof(one), "instance %016llx on %.40s pid %lld: %lld batches",
                     (unsigned long long)sqlite3_column_int64(st, 1), (const char *)host,
                     (long long)sqlite3_column_int64(st, 4), (long long)batches);
        else
            snprintf(one, sizeof(one), "instance %016llx: %lld batches",
                     (unsigned long long)sqlite3_column_int64(st, 1), (long long)batches);
        if (n < 3) {
            int w = snprintf(line + len, sizeof(line) - len, "%s%s", n ? "; " : "", one);
            if (w > 0)
                len = len + (size_t)w < sizeof(line) ? len + (size_t)w : sizeof(line) - 1;
        }
        n++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : mrd__analyze_sqlerr(db);
}

/* Rows per rank of one table, ranks ascending; the rows of a NULL rank in `null_rows`. */
struct rank_tally {
    int64_t (*v)[2]; /* rank, rows */
    size_t n, cap, last;
    uint64_t null_rows;
    int have_null;
};

static int tally_add(struct rank_tally *t, int64_t rank, int64_t rows)
{
    if (t->last < t->n && t->v[t->last][0] == rank) { /* rows come in runs of one rank */
        t->v[t->last][1] += rows;
        return 0;
    }
    size_t lo = mrd_array_lower_bound_int64(t->v, t->n, sizeof(*t->v), 0, rank);
    if (lo < t->n && t->v[lo][0] == rank) {
        t->v[lo][1] += rows;
        t->last = lo;
        return 0;
    }
    if (mrd_array_reserve(&t->v, &t->cap, t->n, sizeof(*t->v), 64, 0) < 0)
        return -ENOMEM;
    memmove(&t->v[lo + 1], &t->v[lo], (t->n - lo) * sizeof(*t->v));
    t->v[lo][0] = rank;
    t->v[lo][1] = rows;
    t->n++;
    t->last = lo;
    return 0;
}

/* 1 when `table` has an index led by rank (GROUP BY rank then walks it without a sort), 0
 * when not, or -MRD_ERR_SQLITE. */
static int has_rank_index(sqlite3 *db, const char *table)
{
    int rc = mrd_db_step_text(db, mrd_db_sql_rank_led_index, table);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    return rc == SQLITE_ROW;
}

/* Each rank's rows per event table: GROUP BY rank where an index led by rank gives the rows
 * in rank order, else one scan of the table's ranks tallied here; the ranks are added in
 * ascending order (a NULL rank first, as rank 0), as GROUP BY rank would. */
static int count_events(sqlite3 *db, struct mrd_analysis *a, size_t *cap)
{
    struct rank_tally t = {0};
    int rc = 0;
    for (int k = 0; k < MRD_AN_NKINDS && rc == 0; k++) {
        char sql[160];
        sqlite3_stmt *st = NULL;
        if (mrd_db_has_table(db, kind_tables[k]) != 1)
            continue;
        int grouped = has_rank_index(db, kind_tables[k]);
        if (grouped < 0) {
            rc = grouped;
            break;
        }
        snprintf(sql, sizeof(sql),
                 grouped ? mrd_db_sql_rows_per_rank_fmt : mrd_db_sql_rank_of_rows_fmt,
                 kind_tables[k]);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
            rc = mrd__analyze_sqlerr(db);
            break;
        }
        t.n = t.last = 0;
        t.null_rows = 0;
        t.have_null = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t rows = grouped ? sqlite3_column_int64(st, 1) : 1;
            if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
                t.have_null = 1;
                t.null_rows += (uint64_t)rows;
            } else if (tally_add(&t, sqlite3_column_int64(st, 0), rows) < 0) {
                break;
            }
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW) {
            rc = -ENOMEM;
            break;
        }
        if (rc != SQLITE_DONE) {
            rc = mrd__analyze_sqlerr(db);
            break;
        }
        rc = 0;
        if (t.have_null) {
            struct mrd_an_rank *r = add_rank(a, 0, cap);
            if (r)
                r->events[k] = t.null_rows;
        }
        for (size_t i = 0; i < t.n; i++) {
            struct mrd_an_rank *r = add_rank(a, (int)t.v[i][0], cap);
            if (r)
                r->events[k] = (uint64_t)t.v[i][1];
        }
    }
    free(t.v);
    return rc;
}

static void add_drop(struct mrd_an_rank *r, const char *reason, uint64_t n)
{
    r->dropped_total += n;
    for (int i = 0; i < r->ndrops; i++) {
        if (strcmp(r->drops[i].reason, reason) == 0) {
            r->drops[i].n += n;
            return;
        }
    }
    if (r->ndrops == MRD_AN_MAX_DROPS - 1 && strcmp(reason, "other") != 0) {
        add_drop(r, "other", n);
        r->dropped_total -= n;
        return;
    }
    if (r->ndrops >= MRD_AN_MAX_DROPS)
        return;
    snprintf(r->drops[r->ndrops].reason, sizeof(r->drops[0].reason), "%s", reason);
    r->drops[r->ndrops++].n = n;
}

/* One counter of the agent's own cost (categories agent and cupti). */
static void add_cost(struct mrd_an_rank *r, const char *cat, const char *name, uint64_t v)
{
    if (!name)
        return;
    if (strcmp(cat, "cupti") == 0) {
        if (strcmp(name, "overhead_ns") == 0)
            r->cupti_overhead_ns = v, r->has_cupti_overhead = 1, r->has_cost = 1;
        else if (strcmp(name, "pace_waits") == 0)
            r->cupti_pace_waits = v, r->has_cost = 1;
        else if (strcmp(name, "pace_wait_ns") == 0)
            r->cupti_pace_wait_ns = v;
        return;
    }
    if (strcmp(name, "callbacks_sampled") == 0)
        r->cost_samples = v, r->has_cost = 1;
    else if (strcmp(name, "callback_sampled_ns") == 0)
        r->cost_sampled_ns = v;
    else if (strcmp(name, "callbacks_est") == 0)
        r->cost_calls_est = v;
}

static int agent_counter_row(sqlite3_stmt *st, void *ctx)
{
    struct rank_rows *rr = ctx;
    struct mrd_an_rank *r = add_rank(rr->a, sqlite3_column_int(st, 0), rr->cap);
    const char *cat = (const char *)sqlite3_column_text(st, 1);
    const char *name = (const char *)sqlite3_column_text(st, 2);
    uint64_t v = (uint64_t)sqlite3_column_int64(st, 3);
    if (!r || !cat)
        return 0;
    if (strcmp(cat, "captured") == 0)
        r->captured_total += v;
    else if (strcmp(cat, "agent") == 0 || strcmp(cat, "cupti") == 0)
        add_cost(r, cat, name, v);
    else if (v > 0)
        add_drop(r, name ? name : "unknown", v);
    return 0;
}

static int aggregator_counter_row(sqlite3_stmt *st, void *ctx)
{
    struct mrd_analysis *a = ctx;
    const char *name = (const char *)sqlite3_column_text(st, 0);
    uint64_t v = (uint64_t)sqlite3_column_int64(st, 1);
    if (name && strstr(name, "dup"))
        a->duplicates += v;
    else if (name && strstr(name, "reject"))
        a->rejected += v;
    return 0;
}

static int load_counters(sqlite3 *db, struct mrd_analysis *a, size_t *cap)
{
    struct rank_rows rr = {a, cap, 0};
    int rc =
        mrd__analyze_rows(db, "agent_counters", mrd_db_sql_agent_counters, agent_counter_row, &rr);
    return rc < 0 ? rc
                  : mrd__analyze_rows(db, "aggregator_counters", mrd_db_sql_aggregator_counters,
                                      aggregator_counter_row, a);
}

static int clock_summary_row(sqlite3_stmt *st, void *ctx)
{
    struct mrd_an_rank *r = mrd__analyze_rank(ctx, sqlite3_column_int(st, 0));
    if (!r)
        return 0;
    int64_t bound = sqlite3_column_int64(st, 4);
    if (!r->clock_fitted) { /* the first segment gives offset, drift and method */
        r->clock_fitted = 1;
        r->clock_offset_ns = sqlite3_column_int64(st, 2);
        r->clock_drift_ppm = sqlite3_column_double(st, 3);
        copy_text(r->clock_method, sizeof(r->clock_method), st, 6);
    }
    r->clock_segments++;
    if (bound > r->clock_error_bound_ns)
        r->clock_error_bound_ns = bound;
    r->clock_samples += sqlite3_column_int64(st, 5);
    return 0;
}

static int causality_pair_row(sqlite3_stmt *st, void *ctx)
{
    struct mrd_analysis *a = ctx;
    uint64_t before = (uint64_t)sqlite3_column_int64(st, 3);
    a->clock_violations_before += before;
    a->clock_violations_after += (uint64_t)sqlite3_column_int64(st, 4);
    if (a->npairs >= MRD_AN_MAX_PAIRS || before == 0)
        return 0;
    struct mrd_an_pair *p = &a->pairs[a->npairs++];
    p->rank_a = sqlite3_column_int(st, 0);
    p->rank_b = sqlite3_column_int(st, 1);
    p->instances = (uint64_t)sqlite3_column_int64(st, 2);
    p->violations_before = before;
    p->violations_after = (uint64_t)sqlite3_column_int64(st, 4);
    p->max_violation_before_ns = sqlite3_column_int64(st, 5);
    p->max_violation_after_ns = sqlite3_column_int64(st, 6);
    return 0;
}

static int clock_shift_row(sqlite3_stmt *st, void *ctx)
{
    struct mrd_an_rank *r = mrd__analyze_rank(ctx, sqlite3_column_int(st, 0));
    if (r) {
        r->clock_adjusted = 1;
        r->clock_shift_ns = sqlite3_column_int64(st, 1);
    }
    return 0;
}

/* The clock fit's causality check, as it stored it: totals, the worst pairs, per-rank
 * offset shifts. Absent tables mean the check did not run. */
static int load_causality(sqlite3 *db, struct mrd_analysis *a)
{
    if (mrd_db_has_table(db, "clock_causality") != 1)
        return 0;
    a->clock_checked = 1;
    int rc = mrd__analyze_rows(db, NULL, mrd_db_sql_causality_pairs, causality_pair_row, a);
    return rc < 0 ? rc
                  : mrd__analyze_rows(db, "clock_adjustments", mrd_db_sql_clock_shifts,
                                      clock_shift_row, a);
}

void mrd_analysis_free(struct mrd_analysis *a)
{
    if (!a)
        return;
    mrd__why_free(a->why);
    mrd_findings_free(a->findings);
    mrd_env_report_free(a->env);
    MRD_ARRAY_FREE_ALL(a->ranks, a->steps, a->windows, a);
}

int mrd_analyze(sqlite3 *db, const struct mrd_analyze_options *opts, struct mrd_analysis **out,
                const char **err_msg)
{
    static const struct mrd_analyze_options defaults;
    const struct mrd_analyze_options *o = opts ? opts : &defaults;
    struct mrd_analysis *a = calloc(1, sizeof(*a));
    struct mrd_timebase *tb = NULL;
    struct mrd__why *why = NULL;
    struct mrd_analyze_options wo;
    size_t cap = 0;
    int rc = -ENOMEM;

    sql_msg[0] = '\0';
    if (!a)
        goto fail;
    a->world_size = -1;
    a->worst_last_rank = -1;
    sqlite3_exec(db, mrd_db_sql_analysis_cache_size, NULL, NULL, NULL); /* 16 MiB page cache */
    if ((rc = load_run(db, a)) < 0 || (rc = load_ranks(db, a, &cap)) < 0 ||
        (rc = count_events(db, a, &cap)) < 0 || (rc = load_counters(db, a, &cap)) < 0 ||
        (rc = mrd__analyze_rows(db, "clock_models", mrd_db_sql_clock_summary, clock_summary_row,
                                a)) < 0 ||
        (rc = load_causality(db, a)) < 0 || (rc = warn_rank_processes(db, a)) < 0 ||
        (rc = mrd__analyze_windows(db, a)) < 0)
        goto fail;
    /* the fingerprints are one section and one finding: unreadable ones (a table of another
     * shape) are reported there and in a warning, the rest of the analysis goes on */
    if ((rc = mrd_analyze_env(db, &a->env)) == -ENOMEM)
        goto fail;
    if (rc < 0) {
        snprintf(a->env_error, sizeof(a->env_error), "%s", sqlite3_errmsg(db));
        mrd__analyze_warn(a, "environment fingerprints (env_records) not read: %s", a->env_error);
    }
    if ((rc = mrd_timebase_load(db, o->ignore_clock_models, &tb)) < 0) {
        if (rc == -MRD_ERR_SQLITE)
            mrd__analyze_sqlerr(db);
        goto fail;
    }
    a->global_timebase = mrd_timebase_is_global(tb);
    if ((rc = mrd_timebase_origin(tb, db, &a->time_origin_ns)) < 0) {
        mrd__analyze_sqlerr(db);
        goto fail;
    }
    if (!a->global_timebase)
        mrd__analyze_warn(a,
                          "%s: cross-rank times use each rank's local clock (valid only "
                          "for ranks on one host)",
                          o->ignore_clock_models ? "clock models ignored on request"
                                                 : "no clock model fitted");
    else {
        int unfitted = 0;
        for (int i = 0; i < a->nranks; i++)
            unfitted += !mrd_timebase_rank_fitted(tb, a->ranks[i].rank);
        if (unfitted)
            mrd__analyze_warn(a,
                              "%d rank(s) have no clock model: left out of cross-rank "
                              "timing",
                              unfitted);
    }
    /* the sweep reads every kernel once for the overlap, the top kernels and the why pass's
     * late events and shares, so it runs after the matching found them; its warnings keep
     * their place before the matching's */
    int warn_at = a->nwarnings;
    if ((rc = mrd_db_op_intervals(db, 0)) < 0 || (rc = mrd__why_begin(o, &wo, &why)) < 0 ||
        (rc = mrd__analyze_match(db, tb, &wo, a)) < 0 ||
        (rc = mrd__why_prepare(db, tb, o, why, a)) < 0 ||
        (rc = mrd__analyze_overlap(db, a, why, warn_at)) < 0 ||
        (rc = mrd__why_finish(db, why, a)) < 0 || (rc = mrd_findings_evaluate(db, o, a)) < 0)
        goto fail;
    mrd__why_destroy(why);
    mrd_timebase_destroy(tb);
    *out = a;
    return 0;
fail:
    if (err_msg)
        *err_msg = sql_msg[0] ? sql_msg : mrd_strerror(rc);
    mrd__why_destroy(why);
    mrd_timebase_destroy(tb);
    mrd_analysis_free(a);
    return rc;
}
