/* The op intervals (db.h, mrd_db_op_intervals): which kernels each NCCL op launched, each
 * op's channel extremes and each op's interval, as TEMP tables on one connection.
 *
 * Where it sits: the database module's ground floor, under the GPU timer calibration (its
 * kernel brackets), the causality check and the analysis (the intervals and the links),
 * and the exports (the links). aggregator/SCHEMA.md, "An operation's interval", has the
 * rule for people.
 *
 * How: the links (nccl_ops.launch_id = external_correlations.external_id) are one SQL
 * join of two tables of one row per op. The linked kernels are a few percent of all
 * kernels and nothing indexes kernels by correlation id at ingest, so kernels are read
 * ONCE in table order and each row's (rank, correlation_id) is looked up in the links'
 * sorted keys kept here, with a cursor per rank (no index over every kernel to create
 * first, no random row fetch per link); the hits go to mrd_link_kernel. nccl_channels is
 * read once too, its valid rows folded into each op's MIN(gpu_start) / MAX(gpu_end) found
 * the same way in the sorted keys of nccl_ops (with each op's device); the result is
 * mrd_op_gpu. mrd_op_time is then two small SQL statements over those TEMP tables.
 *
 * The finalize stores mrd_link and mrd_op_time (mrd_db_op_intervals_save) with the
 * MAX(rowid) of the source tables; a later connection takes them as TEMP views while the
 * sources gained no rows (they are only appended to), else builds as above.
 *
 * Workload: one sequential read of kernels, nccl_channels and two of nccl_ops (10 M-event
 * run: 5.6 M, 1.9 M, 0.3 M rows; the build is ~2.5 s CPU of the finalize's ~5, half of it
 * SQLite's TEMP inserts); memory: the sorted keys, O(NCCL ops) (16 bytes per link, ~50 per
 * op), plus SQLite's TEMP tables (one row per link, linked kernel and op). Caller's
 * thread, on a connection only that thread uses.
 */
#include "db.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cmp.h"
#include "error.h"

/* ---- sorted (rank, id) keys, looked up with a cursor per rank ---------------------------
 * The rows read (kernels, channels) come in table order: batch after batch of one rank,
 * ids mostly rising within a rank. So each rank keeps a cursor into its sorted keys and a
 * lookup moves it forwards (galloping) or, rarely, back (binary search): a few compares
 * on memory read in order, where a hash probe is a cache miss per row (measured: the hash
 * probes of the 5.6 M kernels were a fifth of the finalize). */

struct key {
    int64_t rank, id;
};

struct rankseg {
    int64_t rank;
    size_t begin, end, cur;
};

struct keyset {
    struct key *k; /* sorted, unique */
    size_t n, cap;
    struct rankseg *seg; /* one per rank, sorted */
    size_t nseg, last;
};

static int cmp_key(const void *x, const void *y)
{
    const struct key *a = x, *b = y;
    return MRD_CMP_KEYS(MRD_CMP(a->rank, b->rank), MRD_CMP(a->id, b->id));
}

static int ks_push(struct keyset *s, int64_t rank, int64_t id)
{
    int rc = mrd_array_reserve(&s->k, &s->cap, s->n, sizeof(*s->k), 1024, 0);
    if (rc < 0)
        return rc;
    s->k[s->n++] = (struct key){rank, id};
    return 0;
}

/* Sorts the pushed keys, drops repeats and builds the rank segments. */
static int ks_seal(struct keyset *s)
{
    size_t m = 0, cap = 0;
    if (s->n > 1)
        qsort(s->k, s->n, sizeof(*s->k), cmp_key);
    for (size_t i = 0; i < s->n; i++)
        if (m == 0 || cmp_key(&s->k[i], &s->k[m - 1]) != 0)
            s->k[m++] = s->k[i];
    s->n = m;
    for (size_t i = 0; i < s->n; i++) {
        if (s->nseg && s->seg[s->nseg - 1].rank == s->k[i].rank) {
            s->seg[s->nseg - 1].end = i + 1;
            continue;
        }
        int rc = mrd_array_reserve(&s->seg, &cap, s->nseg, sizeof(*s->seg), 64, 0);
        if (rc < 0)
            return rc;
        s->seg[s->nseg++] = (struct rankseg){s->k[i].rank, i, i + 1, i};
    }
    return 0;
}

/* The first index in [lo, hi) whose id is >= id (hi when none). */
static size_t lower_bound(const struct key *k, size_t lo, size_t hi, int64_t id)
{
    return lo + mrd_array_lower_bound_int64(k + lo, hi - lo, sizeof(*k), offsetof(struct key, id),
                                            id);
}

/* The index of (rank, id), SIZE_MAX when absent. Moves that rank's cursor. */
static size_t ks_find(struct keyset *s, int64_t rank, int64_t id)
{
    if (s->nseg == 0)
        return SIZE_MAX;
    if (s->seg[s->last].rank != rank) {
        size_t lo = mrd_array_lower_bound_int64(s->seg, s->nseg, sizeof(*s->seg),
                                                offsetof(struct rankseg, rank), rank);
        if (lo == s->nseg || s->seg[lo].rank != rank)
            return SIZE_MAX;
        s->last = lo;
    }
    struct rankseg *g = &s->seg[s->last];
    size_t p = g->cur;
    if (p < g->end && s->k[p].id < id) { /* forwards: gallop, then search the last step */
        size_t step = 1, from = p + 1;
        while (p + step < g->end && s->k[p + step].id < id) {
            from = p + step + 1;
            step *= 2;
        }
        p = lower_bound(s->k, from, p + step < g->end ? p + step : g->end, id);
    } else if (p > g->begin && s->k[p - 1].id >= id) { /* back */
        p = lower_bound(s->k, g->begin, p - 1, id);
    }
    g->cur = p;
    return p < g->end && s->k[p].id == id ? p : SIZE_MAX;
}

static void ks_free(struct keyset *s)
{
    free(s->k);
    free(s->seg);
}

/* ---- the passes ----------------------------------------------------------------------- */

/* One op's row of mrd_op_gpu being gathered. */
struct opgpu {
    int64_t device, gpu_start, gpu_end;
    int has_device, has_gpu;
};

/* A valid channel of a (rank, op_id) that has no nccl_ops row. */
struct orphan {
    struct key key;
    int64_t gpu_start, gpu_end;
};

struct build {
    sqlite3 *db;
    struct keyset links; /* (rank, correlation_id) of mrd_link */
    struct keyset ops;   /* (rank, op_id) of nccl_ops */
    struct opgpu *gpu;   /* parallel to ops.k */
    struct orphan *orphans;
    size_t norphans, orphancap;
    sqlite3_stmt *ins;
};

static int link_key_row(sqlite3_stmt *st, void *ctx)
{
    struct build *b = ctx;
    return ks_push(&b->links, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
}

/* A kernel whose (rank, correlation_id) is a link and whose interval is valid goes to
 * mrd_link_kernel. */
static int kernel_row(sqlite3_stmt *st, void *ctx)
{
    struct build *b = ctx;
    if (sqlite3_column_type(st, 1) == SQLITE_NULL)
        return 0;
    int64_t rank = sqlite3_column_int64(st, 0), corr = sqlite3_column_int64(st, 1);
    if (ks_find(&b->links, rank, corr) == SIZE_MAX)
        return 0;
    int64_t s = sqlite3_column_int64(st, 2), e = sqlite3_column_int64(st, 3);
    if (!mrd_db_kernel_valid(s, e))
        return 0;
    int has_device = sqlite3_column_type(st, 4) != SQLITE_NULL;
    return MRD_DB_WRITE_ROW(b->ins, MRD_DB_INT(rank), MRD_DB_INT(corr), MRD_DB_INT(s),
                            MRD_DB_INT(e), MRD_DB_INT_IF(has_device, sqlite3_column_int64(st, 4)));
}

static int op_key_row(sqlite3_stmt *st, void *ctx)
{
    struct build *b = ctx;
    return ks_push(&b->ops, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
}

/* The first nccl_ops row of an op with a device gives it (in table order). */
static int op_device_row(sqlite3_stmt *st, void *ctx)
{
    struct build *b = ctx;
    size_t i = ks_find(&b->ops, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
    if (i != SIZE_MAX && !b->gpu[i].has_device && sqlite3_column_type(st, 2) != SQLITE_NULL) {
        b->gpu[i].device = sqlite3_column_int64(st, 2);
        b->gpu[i].has_device = 1;
    }
    return 0;
}

static void widen(int64_t *lo, int64_t *hi, int *have, int64_t s, int64_t e)
{
    if (!*have || s < *lo)
        *lo = s;
    if (!*have || e > *hi)
        *hi = e;
    *have = 1;
}

/* A valid channel (the statement's WHERE) widens its op's GPU extremes. */
static int channel_row(sqlite3_stmt *st, void *ctx)
{
    struct build *b = ctx;
    int64_t rank = sqlite3_column_int64(st, 0), op = sqlite3_column_int64(st, 1);
    int64_t s = sqlite3_column_int64(st, 2), e = sqlite3_column_int64(st, 3);
    size_t i = ks_find(&b->ops, rank, op);
    if (i != SIZE_MAX) {
        widen(&b->gpu[i].gpu_start, &b->gpu[i].gpu_end, &b->gpu[i].has_gpu, s, e);
        return 0;
    }
    int rc = mrd_array_reserve(&b->orphans, &b->orphancap, b->norphans, sizeof(*b->orphans),
                               64, 0);
    if (rc < 0)
        return rc;
    b->orphans[b->norphans++] = (struct orphan){{rank, op}, s, e};
    return 0;
}

static int insert_op_gpu(struct build *b, const struct key *k, const int64_t *device,
                         const int64_t *gpu)
{
    return MRD_DB_WRITE_ROW(b->ins, MRD_DB_INT(k->rank), MRD_DB_INT(k->id),
                            MRD_DB_INT_IF(device, *device), MRD_DB_INT_IF(gpu, gpu[0]),
                            MRD_DB_INT_IF(gpu, gpu[1]));
}

static int cmp_orphan(const void *x, const void *y)
{
    return cmp_key(&((const struct orphan *)x)->key, &((const struct orphan *)y)->key);
}

/* Every op, then each (rank, op_id) that only channels name, folded. */
static int store_op_gpu(struct build *b)
{
    int rc;
    for (size_t i = 0; i < b->ops.n; i++) {
        const struct opgpu *g = &b->gpu[i];
        int64_t gpu[2] = {g->gpu_start, g->gpu_end};
        if ((rc = insert_op_gpu(b, &b->ops.k[i], g->has_device ? &g->device : NULL,
                                g->has_gpu ? gpu : NULL)) < 0)
            return rc;
    }
    if (b->norphans > 1)
        qsort(b->orphans, b->norphans, sizeof(*b->orphans), cmp_orphan);
    for (size_t i = 0; i < b->norphans;) {
        int64_t gpu[2] = {0, 0};
        int have = 0;
        size_t j = i;
        for (; j < b->norphans && cmp_key(&b->orphans[j].key, &b->orphans[i].key) == 0; j++)
            widen(&gpu[0], &gpu[1], &have, b->orphans[j].gpu_start, b->orphans[j].gpu_end);
        if ((rc = insert_op_gpu(b, &b->orphans[i].key, NULL, gpu)) < 0)
            return rc;
        i = j;
    }
    return 0;
}

static int prepare_insert(struct build *b, const char *sql)
{
    sqlite3_finalize(b->ins);
    b->ins = NULL;
    return sqlite3_prepare_v2(b->db, sql, -1, &b->ins, NULL) == SQLITE_OK ? 0 : -MRD_ERR_SQLITE;
}

/* Fills the four TEMP tables (created empty by the caller). */
static int fill(struct build *b)
{
    sqlite3 *db = b->db;
    int rc;
    int have_ops = mrd_db_has_table(db, "nccl_ops") == 1;
    int have_ec = mrd_db_has_table(db, "external_correlations") == 1;
    int have_k = mrd_db_has_table(db, "kernels") == 1;
    int have_ch = mrd_db_has_table(db, "nccl_channels") == 1;
    if (have_ops && have_ec && (rc = mrd_db_exec(db, mrd_db_sql_op_links)) < 0)
        return rc;
    if (have_ops && have_ec && have_k) {
        if ((rc = mrd_db_each_row(db, NULL, mrd_db_sql_op_link_keys, link_key_row, b)) < 0 ||
            (rc = ks_seal(&b->links)) < 0)
            return rc;
        if (b->links.n > 0 &&
            ((rc = prepare_insert(b, mrd_db_sql_op_link_kernel_insert)) < 0 ||
             (rc = mrd_db_each_row(db, NULL, mrd_db_sql_op_kernel_scan, kernel_row, b)) < 0))
            return rc;
    }
    if ((rc = mrd_db_exec(db, mrd_db_sql_op_link_kernel_index)) < 0 ||
        (rc = mrd_db_exec(db, mrd_db_sql_op_kernel_time)) < 0)
        return rc;
    if (have_ops) {
        if ((rc = mrd_db_each_row(db, NULL, mrd_db_sql_op_scan, op_key_row, b)) < 0 ||
            (rc = ks_seal(&b->ops)) < 0)
            return rc;
        b->gpu = calloc(b->ops.n ? b->ops.n : 1, sizeof(*b->gpu));
        if (!b->gpu)
            return -ENOMEM;
        if ((rc = mrd_db_each_row(db, NULL, mrd_db_sql_op_scan, op_device_row, b)) < 0)
            return rc;
    }
    if (have_ch && (rc = mrd_db_each_row(db, NULL, mrd_db_sql_op_channel_scan, channel_row, b)) < 0)
        return rc;
    if ((rc = prepare_insert(b, mrd_db_sql_op_gpu_insert)) < 0 || (rc = store_op_gpu(b)) < 0)
        return rc;
    return mrd_db_exec(db, mrd_db_sql_op_channel_time);
}

/* The tables the op intervals are built from, and whose MAX(rowid) at the build tells a
 * later reader whether stored op intervals are still current (rows are only appended). */
static const char *const source_tables[] = {"nccl_ops", "external_correlations", "kernels",
                                            "nccl_channels"};
#define NSOURCES (sizeof(source_tables) / sizeof(source_tables[0]))

/* MAX(rowid) of each source table, -1 where db lacks it. */
static int source_rowids(sqlite3 *db, int64_t *out)
{
    for (size_t i = 0; i < NSOURCES; i++) {
        int has = mrd_db_has_table(db, source_tables[i]);
        out[i] = -1;
        if (has < 0)
            return has;
        if (!has)
            continue;
        char *sql = mrd_db_sql_max_rowid(source_tables[i]);
        sqlite3_stmt *st = NULL;
        if (!sql)
            return -ENOMEM;
        int ok = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
                 sqlite3_step(st) == SQLITE_ROW;
        if (ok)
            out[i] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_free(sql);
        if (!ok)
            return -MRD_ERR_SQLITE;
    }
    return 0;
}

static int record_sources(sqlite3 *db, const int64_t *rowids)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_op_source_insert, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    for (size_t i = 0; i < NSOURCES && rc == 0; i++)
        rc = MRD_DB_WRITE_ROW(st, MRD_DB_TEXT(source_tables[i]), MRD_DB_INT(rowids[i]));
    sqlite3_finalize(st);
    return rc;
}

struct stored_check {
    const int64_t *now;
    size_t matched;
};

static int stored_source_row(sqlite3_stmt *st, void *ctx)
{
    struct stored_check *c = ctx;
    const char *name = (const char *)sqlite3_column_text(st, 0);
    for (size_t i = 0; name && i < NSOURCES; i++)
        if (strcmp(name, source_tables[i]) == 0 && sqlite3_column_int64(st, 1) == c->now[i])
            c->matched++;
    return 0;
}

/* 1 when db holds op intervals stored by a finalize from the rows it has now. */
static int stored_current(sqlite3 *db)
{
    int64_t now[NSOURCES];
    struct stored_check c = {now, 0};
    if (mrd_db_has_table(db, "nccl_op_links") != 1 ||
        mrd_db_has_table(db, "nccl_op_intervals") != 1 || source_rowids(db, now) < 0 ||
        mrd_db_each_row(db, "nccl_op_intervals_source", mrd_db_sql_op_stored_source,
                        stored_source_row, &c) < 0)
        return 0;
    return c.matched == NSOURCES;
}

/* The op intervals' TEMP objects: 1 when mrd_op_time is a table (built on this
 * connection), 2 when a view (of the stored tables), 0 when absent; with `drop` each one
 * is dropped. */
static int temp_objects(sqlite3 *db, int drop)
{
    sqlite3_stmt *st = NULL;
    int found = 0, rc = 0, step;
    if (sqlite3_prepare_v2(db, mrd_db_sql_op_temp_objects, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    /* the names are read first: dropping while the statement steps over the schema would
     * change what it reads */
    char kinds[5][8], names[5][32];
    int n = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW && n < 5) {
        snprintf(kinds[n], sizeof(kinds[n]), "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(names[n], sizeof(names[n]), "%s", (const char *)sqlite3_column_text(st, 1));
        if (strcmp(names[n], "mrd_op_time") == 0)
            found = kinds[n][0] == 'v' ? 2 : 1;
        n++;
    }
    sqlite3_finalize(st);
    if (step != SQLITE_DONE && step != SQLITE_ROW)
        return -MRD_ERR_SQLITE;
    for (int i = 0; drop && i < n && rc == 0; i++) {
        char *sql = mrd_db_sql_op_temp_drop(kinds[i], names[i]);
        rc = sql ? mrd_db_exec(db, sql) : -ENOMEM;
        sqlite3_free(sql);
    }
    return rc < 0 ? rc : found;
}

int mrd_db_op_intervals(sqlite3 *db, int fresh)
{
    struct build b = {.db = db};
    int64_t rowids[NSOURCES];
    int rc = temp_objects(db, 0);
    if (rc < 0)
        return rc;
    if (!fresh && rc > 0)
        return 0;
    if (!fresh && stored_current(db))
        return mrd_db_exec(db, mrd_db_sql_op_stored_views);
    /* one savepoint: the TEMP rows are written in one transaction (inside the caller's,
     * when one is open), and a failure leaves the TEMP objects as they were */
    if ((rc = mrd_db_exec(db, mrd_db_sql_op_build_begin)) < 0)
        return rc;
    if ((rc = temp_objects(db, 1)) < 0 || (rc = mrd_db_exec(db, mrd_db_sql_op_tables)) < 0 ||
        (rc = source_rowids(db, rowids)) < 0 || (rc = fill(&b)) < 0 ||
        (rc = record_sources(db, rowids)) < 0)
        goto fail;
    sqlite3_finalize(b.ins);
    b.ins = NULL;
    rc = mrd_db_exec(db, mrd_db_sql_op_build_commit);
fail:
    sqlite3_finalize(b.ins);
    if (rc < 0)
        mrd_db_exec(db, mrd_db_sql_op_build_rollback);
    ks_free(&b.links);
    ks_free(&b.ops);
    free(b.gpu);
    free(b.orphans);
    return rc;
}

int mrd_db_op_intervals_save(sqlite3 *db)
{
    /* the ones built on this connection, else built now (or views of stored ones that are
     * current: nothing to store) */
    int rc = mrd_db_op_intervals(db, 0);
    if (rc < 0 || (rc = temp_objects(db, 0)) != 1)
        return rc < 0 ? rc : 0;
    if ((rc = mrd_db_exec(db, mrd_db_sql_op_build_begin)) < 0)
        return rc;
    if ((rc = mrd_db_exec(db, mrd_db_sql_op_store)) < 0) {
        mrd_db_exec(db, mrd_db_sql_op_build_rollback);
        return rc;
    }
    return mrd_db_exec(db, mrd_db_sql_op_build_commit);
}
