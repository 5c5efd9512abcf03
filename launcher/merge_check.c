/* Validation for `meridian merge` (merge.c does the copying): before anything is
 * written, every shard is opened read-only and checked against this build and against the
 * other shards, and this build's own schema is checked against the merge's tables (so a
 * new table or string column makes every merge fail until it is classified here).
 *
 * Where it sits: the first half of mrd_cli_merge_shards, after the shards' meridiand have
 * stopped. Reads only; memory: the distinct ranks of each shard (capped at
 * MRD__MERGE_MAX_RANKS). Main thread.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "events.h"
#include "merge.h"
#include "store.h"

/* Each event kind's table name (proto/kinds.h), for the generated entries below. */
#define EVENT_TABLE_NAME(E, v, fn, T, u, bm, C, d, t, tag) static const char tbl_##fn[] = t;
MRD_KINDS(EVENT_TABLE_NAME)
#define MERGE_EVENT_TABLE(E, v, fn, T, u, bm, C, d, t, tag) {tbl_##fn, MRD__MERGE_COPY},

const struct mrd__merge_table mrd__merge_tables[] = {
    {"schema_version", MRD__MERGE_VERSION},
    {"runs", MRD__MERGE_RUN},
    {"strings", MRD__MERGE_STRINGS},
    {"ranks", MRD__MERGE_COPY},
    {"rank_processes", MRD__MERGE_COPY},
    {"gpus", MRD__MERGE_COPY},
    {"rank_strings", MRD__MERGE_COPY},
    {"batches", MRD__MERGE_COPY},
    MRD_KINDS(MERGE_EVENT_TABLE) /* every event table (proto/kinds.h): rank-keyed rows */
    {"agent_counters", MRD__MERGE_COPY},
    {"aggregator_counters", MRD__MERGE_SUM},
    {"clock_models", MRD__MERGE_SKIP},
    {"gpu_timer_models", MRD__MERGE_SKIP},
    /* aggregator/clock creates these two at finalize */
    {"clock_causality", MRD__MERGE_SKIP},
    {"clock_adjustments", MRD__MERGE_SKIP},
};
const size_t mrd__merge_ntables = sizeof(mrd__merge_tables) / sizeof(mrd__merge_tables[0]);

#define STRCOL_1(K, sql) {tbl_##K, sql},
#define STRCOL_0(K, sql)
#define STRCOL_(is, K, sql) STRCOL_##is(K, sql)
#define STRCOL_X(is, K, sql) STRCOL_(is, K, sql)
#define STRCOL(K, m, sql, cls, num, wire, codec, arg, pos, sep)                                    \
    STRCOL_X(MRD__CODEC_IS_STR(codec), K, sql)
#define EVENT_STRING_COLS(E, v, fn, T, u, bm, C, d, t, tag) MRD__FIELDS(fn, STRCOL)
#define GLOBAL_INT(K, sql)
#define GLOBAL_NN(K, sql)
#define GLOBAL_P2PNULL(K, sql)
#define GLOBAL_GNN(K, sql) {tbl_##K, sql},
#define GLOBALCOL(K, m, sql, cls, num, wire, codec, arg, pos, sep) GLOBAL_##cls(K, sql)
#define EVENT_GLOBAL_COLS(E, v, fn, T, u, bm, C, d, t, tag) MRD__FIELDS(fn, GLOBALCOL)

/* Columns that hold strings.id ("String columns *_id reference strings(id)", schema.sql). */
static const struct {
    const char *table, *column;
} string_cols[] = {
    MRD_KINDS(EVENT_STRING_COLS) /* every string-id field of an event kind */
    {"rank_strings", "string_id"},
};

/* Columns on the aggregator's global timebase (SCHEMA.md "Time"): shifted by the shard's
 * delta. runs' anchors are the first shard's (write_run). */
static const struct {
    const char *table, *column;
} global_cols[] = {
    {"ranks", "first_seen_ns"},
    {"ranks", "last_seen_ns"},
    {"batches", "received_ns"},
    {"rank_processes", "first_seen_ns"},
    {"rank_processes", "last_seen_ns"},
    MRD_KINDS(EVENT_GLOBAL_COLS) /* event fields of SQL class GNN (clock_samples t1, t2) */
};

/* *_id columns of copied tables that are not string ids (copied as they are): those of the
 * other tables here; an event table's columns are classified by proto/kinds.h (its string
 * ids are codec STR, every other column is plain). */
static const char *const plain_ids[] = {"local_id"};
#define PLAINCOL_1(K, sql)
#define PLAINCOL_0(K, sql) {tbl_##K, sql},
#define PLAINCOL_(is, K, sql) PLAINCOL_##is(K, sql)
#define PLAINCOL_X(is, K, sql) PLAINCOL_(is, K, sql)
#define PLAINCOL(K, m, sql, cls, num, wire, codec, arg, pos, sep)                                  \
    PLAINCOL_X(MRD__CODEC_IS_STR(codec), K, sql)
#define EVENT_PLAIN_COLS(E, v, fn, T, u, bm, C, d, t, tag) MRD__FIELDS(fn, PLAINCOL)
static const struct {
    const char *table, *column;
} event_plain_cols[] = {MRD_KINDS(EVENT_PLAIN_COLS)};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int mrd__merge_is_string_col(const char *t, const char *c)
{
    for (size_t i = 0; i < N(string_cols); i++)
        if (strcmp(string_cols[i].table, t) == 0 && strcmp(string_cols[i].column, c) == 0)
            return 1;
    return 0;
}

int mrd__merge_is_global_col(const char *t, const char *c)
{
    for (size_t i = 0; i < N(global_cols); i++)
        if (strcmp(global_cols[i].table, t) == 0 && strcmp(global_cols[i].column, c) == 0)
            return 1;
    return 0;
}

static int is_plain_id(const char *t, const char *c)
{
    for (size_t i = 0; i < N(plain_ids); i++)
        if (strcmp(plain_ids[i], c) == 0)
            return 1;
    for (size_t i = 0; i < N(event_plain_cols); i++)
        if (strcmp(event_plain_cols[i].table, t) == 0 && strcmp(event_plain_cols[i].column, c) == 0)
            return 1;
    return 0;
}

static int policy_of(const char *t)
{
    for (size_t i = 0; i < mrd__merge_ntables; i++)
        if (strcmp(mrd__merge_tables[i].name, t) == 0)
            return (int)mrd__merge_tables[i].pol;
    return -1;
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v ? strdup((const char *)v) : NULL;
}

/* Column names of `schema`.`table` (schema "main" or an attached name), in order, into
 * cols[] (at most cap; each strdup'ed). Returns the count (0: no such table) or -1. */
int mrd__merge_table_columns(sqlite3 *db, const char *schema, const char *table, char **cols,
                             int cap)
{
    char sql[256];
    sqlite3_stmt *st = NULL;
    int n = 0;
    snprintf(sql, sizeof(sql), "SELECT name FROM pragma_table_info(?1, ?2)");
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, schema, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap || !(cols[n] = dup_col(st, 0))) {
            n = -1;
            break;
        }
        n++;
    }
    sqlite3_finalize(st);
    if (n < 0)
        return -1;
    return n;
}

void mrd__merge_free_cols(char **cols, int n)
{
    for (int i = 0; i < n; i++)
        free(cols[i]);
}

/* Every table of this build's schema has a policy; every *_id column of a copied table is
 * known to be a string id or not; every listed string/global column exists. This is what
 * fails (every merge, and so the merge tests) when schema.sql gains a table or a string
 * column that the merge would otherwise copy without remapping. On success *schema is an
 * in-memory database with this build's schema (the caller closes it). */
static int check_schema(sqlite3 **schema, FILE *log, const char *who)
{
    sqlite3 *mem = NULL;
    sqlite3_stmt *st = NULL;
    char *cols[MRD__MERGE_MAX_COLS];
    int bad = 0;
    if (sqlite3_open(":memory:", &mem) != SQLITE_OK ||
        sqlite3_exec(mem, mrd_store_schema_sql(), NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(mem,
                           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                           "LIKE 'sqlite_%'",
                           -1, &st, NULL) != SQLITE_OK) {
        fprintf(log, "%s: cannot build this meridian's schema: %s\n", who, sqlite3_errmsg(mem));
        sqlite3_close(mem);
        return -1;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        int pol = policy_of(t);
        if (pol < 0) {
            fprintf(log,
                    "%s: table %s of this build's schema is unknown to the merge "
                    "(launcher/merge_check.c, mrd__merge_tables): cannot merge\n",
                    who, t);
            bad = 1;
            continue;
        }
        if (pol != MRD__MERGE_COPY)
            continue;
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(mem,
                               "SELECT name FROM pragma_table_info(?1) WHERE type = 'INTEGER' "
                               "AND name LIKE '%\\_id' ESCAPE '\\'",
                               -1, &q, NULL) != SQLITE_OK) {
            bad = 1;
            break;
        }
        sqlite3_bind_text(q, 1, t, -1, SQLITE_TRANSIENT);
        while (sqlite3_step(q) == SQLITE_ROW) {
            const char *c = (const char *)sqlite3_column_text(q, 0);
            if (!mrd__merge_is_string_col(t, c) && !is_plain_id(t, c)) {
                fprintf(log,
                        "%s: column %s.%s is neither a known string id nor a known plain "
                        "id (launcher/merge_check.c, string_cols/plain_ids): cannot merge\n",
                        who, t, c);
                bad = 1;
            }
        }
        sqlite3_finalize(q);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < N(string_cols) + N(global_cols); i++) {
        const char *t =
            i < N(string_cols) ? string_cols[i].table : global_cols[i - N(string_cols)].table;
        const char *c =
            i < N(string_cols) ? string_cols[i].column : global_cols[i - N(string_cols)].column;
        int n = mrd__merge_table_columns(mem, "main", t, cols, MRD__MERGE_MAX_COLS), found = 0;
        for (int j = 0; j < n; j++)
            found |= strcmp(cols[j], c) == 0;
        mrd__merge_free_cols(cols, n > 0 ? n : 0);
        if (!found) {
            fprintf(log,
                    "%s: launcher/merge_check.c names %s.%s, which this build's schema does not "
                    "have: cannot merge\n",
                    who, t, c);
            bad = 1;
        }
    }
    if (bad) {
        sqlite3_close(mem);
        return -1;
    }
    *schema = mem;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Adds the distinct ranks of `table` in shard s to s->ranks (kept sorted and unique after
 * read_ranks). */
static int add_ranks(struct mrd__merge_shard *s, const char *table, FILE *log, const char *who)
{
    char sql[160];
    sqlite3_stmt *st = NULL;
    int rc = 0;
    snprintf(sql, sizeof(sql), "SELECT DISTINCT rank FROM \"%s\"", table);
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(log, "%s: %s: cannot read %s: %s\n", who, s->path, table, sqlite3_errmsg(s->db));
        return -1;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (s->nranks == s->cap) {
            size_t nc = s->cap ? 2 * s->cap : 64;
            int64_t *nr =
                nc <= 2 * (size_t)MRD__MERGE_MAX_RANKS ? realloc(s->ranks, nc * sizeof(*nr)) : NULL;
            if (!nr) {
                fprintf(log, "%s: %s: too many ranks (cap %d)\n", who, s->path,
                        MRD__MERGE_MAX_RANKS);
                sqlite3_finalize(st);
                return -1;
            }
            s->ranks = nr;
            s->cap = nc;
        }
        s->ranks[s->nranks++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        fprintf(log, "%s: %s: cannot read %s: %s\n", who, s->path, table, sqlite3_errmsg(s->db));
        return -1;
    }
    /* keep it sorted and unique so the array stays bounded by the distinct ranks */
    if (s->nranks > 1) /* a shard without ranks has no array (qsort(NULL) is undefined) */
        qsort(s->ranks, s->nranks, sizeof(int64_t), cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < s->nranks; i++)
        if (u == 0 || s->ranks[u - 1] != s->ranks[i])
            s->ranks[u++] = s->ranks[i];
    s->nranks = u;
    if (u > MRD__MERGE_MAX_RANKS) {
        fprintf(log, "%s: %s: more than %d ranks\n", who, s->path, MRD__MERGE_MAX_RANKS);
        return -1;
    }
    return 0;
}

static int shard_has_table(sqlite3 *db, const char *t)
{
    sqlite3_stmt *st = NULL;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, t, -1, SQLITE_STATIC);
        yes = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return yes;
}

/* Reads and checks one shard on its own read-only connection: version, its one run row,
 * its columns (a subset of this build's), its ranks. */
static int read_shard(struct mrd__merge_shard *s, sqlite3 *schema, FILE *log, const char *who)
{
    sqlite3_stmt *st = NULL;
    char *scols[MRD__MERGE_MAX_COLS], *mcols[MRD__MERGE_MAX_COLS];
    int64_t rows = 0;
    if (!(s->db = mrd_cli_open_db(s->path, 1, who)))
        return -1;
    if (!shard_has_table(s->db, "schema_version") ||
        sqlite3_prepare_v2(s->db, "SELECT count(*), max(version) FROM schema_version", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int64(st, 0) != 1 ||
        sqlite3_column_int64(st, 1) != MRD_STORE_SCHEMA_VERSION) {
        fprintf(log,
                "%s: %s has schema version %s, this meridian merges version %d: open it "
                "once with this build's meridiand (it migrates older versions) or merge "
                "with the meridian that wrote it\n",
                who, s->path,
                st && sqlite3_column_type(st, 1) != SQLITE_NULL
                    ? (const char *)sqlite3_column_text(st, 1)
                    : "(none)",
                MRD_STORE_SCHEMA_VERSION);
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s->db,
                           "SELECT count(*), max(run_id), max(shard_id), max(anchor_realtime_ns), "
                           "max(anchor_monotonic_ns), max(boot_id), max(created_ns), "
                           "max(command), max(world_size) FROM runs",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        fprintf(log, "%s: %s: cannot read runs: %s\n", who, s->path, sqlite3_errmsg(s->db));
        sqlite3_finalize(st);
        return -1;
    }
    rows = sqlite3_column_int64(st, 0);
    if (rows != 1) {
        fprintf(log,
                "%s: %s holds %" PRId64 " runs, a shard holds exactly one: give "
                "meridiand's databases of one run\n",
                who, s->path, rows);
        sqlite3_finalize(st);
        return -1;
    }
    s->run_id = dup_col(st, 1);
    s->shard_id = sqlite3_column_int64(st, 2);
    s->ar = sqlite3_column_int64(st, 3);
    s->am = sqlite3_column_int64(st, 4);
    s->boot_id = dup_col(st, 5);
    s->created = sqlite3_column_int64(st, 6);
    s->command = dup_col(st, 7);
    s->has_world = sqlite3_column_type(st, 8) != SQLITE_NULL;
    s->world = sqlite3_column_int64(st, 8);
    sqlite3_finalize(st);
    if (!s->run_id) {
        fprintf(log, "%s: %s: runs.run_id is empty\n", who, s->path);
        return -1;
    }
    for (size_t i = 0; i < mrd__merge_ntables; i++) {
        if ((mrd__merge_tables[i].pol != MRD__MERGE_COPY &&
             mrd__merge_tables[i].pol != MRD__MERGE_SUM) ||
            !shard_has_table(s->db, mrd__merge_tables[i].name))
            continue;
        int ns = mrd__merge_table_columns(s->db, "main", mrd__merge_tables[i].name, scols,
                                          MRD__MERGE_MAX_COLS);
        int nb = mrd__merge_table_columns(schema, "main", mrd__merge_tables[i].name, mcols,
                                          MRD__MERGE_MAX_COLS),
            bad = -1;
        for (int c = 0; c < ns && nb >= 0; c++) {
            int found = 0;
            for (int m = 0; m < nb; m++)
                found |= strcmp(scols[c], mcols[m]) == 0;
            if (!found && bad < 0)
                bad = c;
        }
        if (ns < 0 || nb < 0)
            fprintf(log, "%s: %s: cannot read the columns of %s\n", who, s->path,
                    mrd__merge_tables[i].name);
        else if (bad >= 0)
            fprintf(log,
                    "%s: %s has column %s.%s, which this meridian does not know (a newer "
                    "build wrote the shard?): merge with the meridian that wrote it\n",
                    who, s->path, mrd__merge_tables[i].name, scols[bad]);
        mrd__merge_free_cols(scols, ns > 0 ? ns : 0);
        mrd__merge_free_cols(mcols, nb > 0 ? nb : 0);
        if (ns < 0 || nb < 0 || bad >= 0)
            return -1;
        if (mrd__merge_tables[i].pol == MRD__MERGE_COPY &&
            add_ranks(s, mrd__merge_tables[i].name, log, who) < 0)
            return -1;
    }
    return 0;
}

/* Cross-shard checks: one run, one aggregator boot, distinct shard ids, disjoint ranks. */
static int check_shards(struct mrd__merge_shard *sh, int n, FILE *log, const char *who)
{
    for (int k = 1; k < n; k++) {
        if (strcmp(sh[k].run_id, sh[0].run_id) != 0) {
            fprintf(log,
                    "%s: %s belongs to run %s, %s to run %s: merge only the shards of "
                    "one run\n",
                    who, sh[0].path, sh[0].run_id, sh[k].path, sh[k].run_id);
            return -1;
        }
        if (!sh[0].boot_id || !sh[k].boot_id || strcmp(sh[0].boot_id, sh[k].boot_id) != 0) {
            fprintf(log,
                    "%s: %s and %s were written by aggregators on different hosts or "
                    "boots (runs.boot_id %s vs %s): their global timebases are different "
                    "clocks; cross-host shard merging needs aggregator clock alignment, "
                    "which is not built: run every shard's meridiand on one host\n",
                    who, sh[0].path, sh[k].path, sh[0].boot_id ? sh[0].boot_id : "NULL",
                    sh[k].boot_id ? sh[k].boot_id : "NULL");
            return -1;
        }
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            if (sh[a].shard_id == sh[b].shard_id) {
                fprintf(log,
                        "%s: %s and %s both have shard id %" PRId64 " (the same shard "
                        "twice?): give each shard once\n",
                        who, sh[a].path, sh[b].path, sh[a].shard_id);
                return -1;
            }
            size_t i = 0, j = 0;
            while (i < sh[a].nranks && j < sh[b].nranks) {
                if (sh[a].ranks[i] == sh[b].ranks[j]) {
                    fprintf(log,
                            "%s: rank %" PRId64 " is in %s and in %s: each rank must be "
                            "stored by one shard only (were two shards given the same "
                            "ranks, or one shard twice?)\n",
                            who, sh[a].ranks[i], sh[a].path, sh[b].path);
                    return -1;
                }
                if (sh[a].ranks[i] < sh[b].ranks[j])
                    i++;
                else
                    j++;
            }
        }
    return 0;
}

static int cmp_shard(const void *a, const void *b)
{
    const struct mrd__merge_shard *x = a, *y = b;
    return (x->shard_id > y->shard_id) - (x->shard_id < y->shard_id);
}

/* Reads and checks every shard, orders them by shard id (the lowest is the base: its
 * anchors are the merged timebase, whatever order the shards were given in) and computes
 * each one's shift. Nothing is written. */
int mrd__merge_validate(struct mrd__merge_shard *sh, int n, const char *out, FILE *log,
                        const char *who)
{
    sqlite3 *schema = NULL;
    struct stat so, ss;
    int rc = -1;
    if (check_schema(&schema, log, who) < 0)
        return -1;
    for (int k = 0; k < n; k++) {
        if (stat(out, &so) == 0 && stat(sh[k].path, &ss) == 0 && so.st_dev == ss.st_dev &&
            so.st_ino == ss.st_ino) {
            fprintf(log, "%s: the output %s is the shard %s: give another output\n", who, out,
                    sh[k].path);
            goto out;
        }
        int r = read_shard(&sh[k], schema, log, who);
        sqlite3_close(sh[k].db);
        sh[k].db = NULL;
        if (r < 0)
            goto out;
    }
    qsort(sh, (size_t)n, sizeof(*sh), cmp_shard);
    if (check_shards(sh, n, log, who) < 0)
        goto out;
    for (int k = 0; k < n; k++)
        sh[k].delta = (sh[0].ar - sh[0].am) - (sh[k].ar - sh[k].am);
    rc = 0;
out:
    sqlite3_close(schema);
    return rc;
}
