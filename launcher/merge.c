/* Merging the shard databases of one run into one database (`meridian merge`, and
 * `meridian profile` when it ran several aggregators).
 *
 * Where it sits: after every shard's meridiand has stopped and before the finalize (clock
 * fit, causality) and the analysis, which need every rank in one database. A shard is what
 * one meridiand (`--shard-id K`) stored for its group of ranks: the same schema, its own
 * strings table and its own timebase anchors (runs.anchor_*). The merge:
 *   1. validates everything before writing: schema version, one run row, one run id and
 *      one aggregator boot (one monotonic clock) across shards, distinct shard ids, each
 *      rank in one shard only (ranks and the rank column of every rank table), the shard's
 *      columns known to this build, and this build's own schema fully classified below;
 *   2. creates a temporary database next to `out` with the store's schema and pragmas
 *      (mrd_store_schema_sql, mrd_store_pragmas: the file is what meridiand would create);
 *   3. attaches one shard at a time (read-only) and copies each table with one
 *      INSERT ... SELECT in one transaction: string ids remapped through a per-shard map,
 *      global-timebase columns shifted onto the first shard's timebase, local clocks as is;
 *   4. renames the temporary file to `out`. Any error removes the temporary file.
 * Clock models and the finalize's tables are not copied: the caller finalizes the result.
 *
 * Workload: shards of tens of millions of rows each; nothing is loaded into memory but
 * the ranks of each shard (for the overlap check; capped at MERGE_MAX_RANKS per shard, a
 * shard with more is refused). SQLite streams each INSERT ... SELECT. Main thread; one
 * connection to the output, one read-only connection per shard while validating.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "store.h"

#define MERGE_MAX_RANKS (1 << 20) /* distinct ranks per shard; more is refused */
#define MERGE_PROGRESS_ROWS 100000 /* a table copy of at least this many rows is logged */

/* What the merge does with each table of the schema. A table of this build's schema that
 * is not listed here makes every merge fail (check_schema): a new table must be decided. */
enum tpolicy {
    T_VERSION, /* schema_version: written fresh */
    T_RUN,     /* runs: one row, the first shard's anchors (write_run) */
    T_STRINGS, /* strings: values inserted, ids mapped per shard */
    T_COPY,    /* rank-keyed rows: copied (ranks are disjoint across shards) */
    T_SUM,     /* aggregator_counters: summed by name */
    T_SKIP,    /* written by the finalize from the merged data: not copied */
};

static const struct {
    const char *name;
    enum tpolicy pol;
} tables[] = {
    {"schema_version", T_VERSION},
    {"runs", T_RUN},
    {"strings", T_STRINGS},
    {"ranks", T_COPY},
    {"gpus", T_COPY},
    {"rank_strings", T_COPY},
    {"batches", T_COPY},
    {"kernels", T_COPY},
    {"memcpys", T_COPY},
    {"memsets", T_COPY},
    {"syncs", T_COPY},
    {"api_calls", T_COPY},
    {"graph_launches", T_COPY},
    {"external_correlations", T_COPY},
    {"nvtx", T_COPY},
    {"nccl_ops", T_COPY},
    {"nccl_channels", T_COPY},
    {"mpi_calls", T_COPY},
    {"clock_samples", T_COPY},
    {"gpu_clock_samples", T_COPY},
    {"agent_counters", T_COPY},
    {"aggregator_counters", T_SUM},
    {"clock_models", T_SKIP},
    {"gpu_timer_models", T_SKIP},
    {"clock_causality", T_SKIP},   /* aggregator/clock creates these two at finalize */
    {"clock_adjustments", T_SKIP},
};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

/* Columns that hold strings.id ("String columns *_id reference strings(id)", schema.sql). */
static const struct {
    const char *table, *column;
} string_cols[] = {
    {"kernels", "name_id"},    {"api_calls", "name_id"},    {"nvtx", "domain_id"},
    {"nvtx", "name_id"},       {"nccl_ops", "func_id"},     {"nccl_ops", "datatype_id"},
    {"nccl_ops", "algo_id"},   {"nccl_ops", "proto_id"},    {"mpi_calls", "call_id"},
    {"rank_strings", "string_id"},
};

/* Columns on the aggregator's global timebase (SCHEMA.md "Time"): shifted by the shard's
 * delta. runs' anchors are the first shard's (write_run). */
static const struct {
    const char *table, *column;
} global_cols[] = {
    {"ranks", "first_seen_ns"}, {"ranks", "last_seen_ns"}, {"batches", "received_ns"},
    {"clock_samples", "t1"},    {"clock_samples", "t2"},
};

/* *_id columns of copied tables that are not string ids (copied as they are). */
static const char *const plain_ids[] = {"correlation_id", "graph_id", "external_id",
                                        "op_id",          "launch_id", "local_id"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct shard {
    const char *path;
    sqlite3 *db; /* read-only; open while validating */
    int64_t shard_id, ar, am, created, world;
    int has_world;
    char *run_id, *boot_id, *command;
    int64_t delta; /* added to its global-timebase columns */
    int64_t *ranks;
    size_t nranks, cap;
};

static int is_string_col(const char *t, const char *c)
{
    for (size_t i = 0; i < N(string_cols); i++)
        if (strcmp(string_cols[i].table, t) == 0 && strcmp(string_cols[i].column, c) == 0)
            return 1;
    return 0;
}

static int is_global_col(const char *t, const char *c)
{
    for (size_t i = 0; i < N(global_cols); i++)
        if (strcmp(global_cols[i].table, t) == 0 && strcmp(global_cols[i].column, c) == 0)
            return 1;
    return 0;
}

static int is_plain_id(const char *c)
{
    for (size_t i = 0; i < N(plain_ids); i++)
        if (strcmp(plain_ids[i], c) == 0)
            return 1;
    return 0;
}

static int policy_of(const char *t)
{
    for (size_t i = 0; i < NTABLES; i++)
        if (strcmp(tables[i].name, t) == 0)
            return (int)tables[i].pol;
    return -1;
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v ? strdup((const char *)v) : NULL;
}

/* Column names of `schema`.`table` (schema "main" or an attached name), in order, into
 * cols[] (at most cap; each strdup'ed). Returns the count (0: no such table) or -1. */
static int table_columns(sqlite3 *db, const char *schema, const char *table, char **cols,
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

static void free_cols(char **cols, int n)
{
    for (int i = 0; i < n; i++)
        free(cols[i]);
}

#define MAX_COLS 64

/* Every table of this build's schema has a policy; every *_id column of a copied table is
 * known to be a string id or not; every listed string/global column exists. This is what
 * fails (every merge, and so the merge tests) when schema.sql gains a table or a string
 * column that the merge would otherwise copy without remapping. On success *schema is an
 * in-memory database with this build's schema (the caller closes it). */
static int check_schema(sqlite3 **schema, FILE *log, const char *who)
{
    sqlite3 *mem = NULL;
    sqlite3_stmt *st = NULL;
    char *cols[MAX_COLS];
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
            fprintf(log, "%s: table %s of this build's schema is unknown to the merge "
                         "(launcher/merge.c, tables[]): cannot merge\n", who, t);
            bad = 1;
            continue;
        }
        if (pol != T_COPY)
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
            if (!is_string_col(t, c) && !is_plain_id(c)) {
                fprintf(log, "%s: column %s.%s is neither a known string id nor a known plain "
                             "id (launcher/merge.c, string_cols[]/plain_ids[]): cannot merge\n",
                        who, t, c);
                bad = 1;
            }
        }
        sqlite3_finalize(q);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < N(string_cols) + N(global_cols); i++) {
        const char *t = i < N(string_cols) ? string_cols[i].table
                                           : global_cols[i - N(string_cols)].table;
        const char *c = i < N(string_cols) ? string_cols[i].column
                                           : global_cols[i - N(string_cols)].column;
        int n = table_columns(mem, "main", t, cols, MAX_COLS), found = 0;
        for (int j = 0; j < n; j++)
            found |= strcmp(cols[j], c) == 0;
        free_cols(cols, n > 0 ? n : 0);
        if (!found) {
            fprintf(log, "%s: launcher/merge.c names %s.%s, which this build's schema does not "
                         "have: cannot merge\n", who, t, c);
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
static int add_ranks(struct shard *s, const char *table, FILE *log, const char *who)
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
            int64_t *nr = nc <= 2 * (size_t)MERGE_MAX_RANKS
                              ? realloc(s->ranks, nc * sizeof(*nr)) : NULL;
            if (!nr) {
                fprintf(log, "%s: %s: too many ranks (cap %d)\n", who, s->path, MERGE_MAX_RANKS);
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
    qsort(s->ranks, s->nranks, sizeof(int64_t), cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < s->nranks; i++)
        if (u == 0 || s->ranks[u - 1] != s->ranks[i])
            s->ranks[u++] = s->ranks[i];
    s->nranks = u;
    if (u > MERGE_MAX_RANKS) {
        fprintf(log, "%s: %s: more than %d ranks\n", who, s->path, MERGE_MAX_RANKS);
        return -1;
    }
    return 0;
}

static int shard_has_table(sqlite3 *db, const char *t)
{
    sqlite3_stmt *st = NULL;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, t, -1, SQLITE_STATIC);
        yes = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return yes;
}

/* Reads and checks one shard on its own read-only connection: version, its one run row,
 * its columns (a subset of this build's), its ranks. */
static int read_shard(struct shard *s, sqlite3 *schema, FILE *log, const char *who)
{
    sqlite3_stmt *st = NULL;
    char *scols[MAX_COLS], *mcols[MAX_COLS];
    int64_t rows = 0;
    if (!(s->db = mrd_cli_open_db(s->path, 1, who)))
        return -1;
    if (!shard_has_table(s->db, "schema_version") ||
        sqlite3_prepare_v2(s->db, "SELECT count(*), max(version) FROM schema_version", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int64(st, 0) != 1 ||
        sqlite3_column_int64(st, 1) != MRD_STORE_SCHEMA_VERSION) {
        fprintf(log, "%s: %s has schema version %s, this meridian merges version %d: open it "
                     "once with this build's meridiand (it migrates older versions) or merge "
                     "with the meridian that wrote it\n", who, s->path,
                st && sqlite3_column_type(st, 1) != SQLITE_NULL
                    ? (const char *)sqlite3_column_text(st, 1) : "(none)",
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
        fprintf(log, "%s: %s holds %" PRId64 " runs, a shard holds exactly one: give "
                     "meridiand's databases of one run\n", who, s->path, rows);
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
    for (size_t i = 0; i < NTABLES; i++) {
        if ((tables[i].pol != T_COPY && tables[i].pol != T_SUM) ||
            !shard_has_table(s->db, tables[i].name))
            continue;
        int ns = table_columns(s->db, "main", tables[i].name, scols, MAX_COLS);
        int nb = table_columns(schema, "main", tables[i].name, mcols, MAX_COLS), bad = -1;
        for (int c = 0; c < ns && nb >= 0; c++) {
            int found = 0;
            for (int m = 0; m < nb; m++)
                found |= strcmp(scols[c], mcols[m]) == 0;
            if (!found && bad < 0)
                bad = c;
        }
        if (ns < 0 || nb < 0)
            fprintf(log, "%s: %s: cannot read the columns of %s\n", who, s->path,
                    tables[i].name);
        else if (bad >= 0)
            fprintf(log, "%s: %s has column %s.%s, which this meridian does not know (a newer "
                         "build wrote the shard?): merge with the meridian that wrote it\n",
                    who, s->path, tables[i].name, scols[bad]);
        free_cols(scols, ns > 0 ? ns : 0);
        free_cols(mcols, nb > 0 ? nb : 0);
        if (ns < 0 || nb < 0 || bad >= 0)
            return -1;
        if (tables[i].pol == T_COPY && add_ranks(s, tables[i].name, log, who) < 0)
            return -1;
    }
    return 0;
}

/* Cross-shard checks: one run, one aggregator boot, distinct shard ids, disjoint ranks. */
static int check_shards(struct shard *sh, int n, FILE *log, const char *who)
{
    for (int k = 1; k < n; k++) {
        if (strcmp(sh[k].run_id, sh[0].run_id) != 0) {
            fprintf(log, "%s: %s belongs to run %s, %s to run %s: merge only the shards of "
                         "one run\n", who, sh[0].path, sh[0].run_id, sh[k].path, sh[k].run_id);
            return -1;
        }
        if (!sh[0].boot_id || !sh[k].boot_id || strcmp(sh[0].boot_id, sh[k].boot_id) != 0) {
            fprintf(log, "%s: %s and %s were written by aggregators on different hosts or "
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
                fprintf(log, "%s: %s and %s both have shard id %" PRId64 " (the same shard "
                             "twice?): give each shard once\n", who, sh[a].path, sh[b].path,
                        sh[a].shard_id);
                return -1;
            }
            size_t i = 0, j = 0;
            while (i < sh[a].nranks && j < sh[b].nranks) {
                if (sh[a].ranks[i] == sh[b].ranks[j]) {
                    fprintf(log, "%s: rank %" PRId64 " is in %s and in %s: each rank must be "
                                 "stored by one shard only (were two shards given the same "
                                 "ranks, or one shard twice?)\n", who, sh[a].ranks[i],
                            sh[a].path, sh[b].path);
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

/* SQLite URI of a file path (for ATTACH ... ?mode=ro): '%', '?' and '#' escaped. */
static char *file_uri(const char *path, const char *query)
{
    size_t n = strlen(path), q = strlen(query);
    char *u = malloc(8 + 3 * n + q + 1), *p = u;
    if (!u)
        return NULL;
    p += sprintf(p, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == '%' || c == '?' || c == '#')
            p += sprintf(p, "%%%02X", c);
        else
            *p++ = (char)c;
    }
    memcpy(p, query, q + 1);
    return u;
}

static int exec_sql(sqlite3 *db, const char *sql, FILE *log, const char *who, const char *what)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    fprintf(log, "%s: %s: %s\n", who, what, sqlite3_errmsg(db));
    return -1;
}

/* The runs row: the first shard's anchors (the merged timebase), largest world size. */
static int write_run(sqlite3 *db, const struct shard *sh, int n, FILE *log, const char *who)
{
    sqlite3_stmt *st = NULL;
    int64_t world = 0;
    int has_world = 0, rc;
    const char *command = NULL;
    for (int k = 0; k < n; k++) {
        if (sh[k].has_world && (!has_world || sh[k].world > world))
            world = sh[k].world;
        has_world |= sh[k].has_world;
        if (!command && sh[k].command)
            command = sh[k].command;
    }
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO runs(run_id, shard_id, world_size, anchor_realtime_ns, "
                           "anchor_monotonic_ns, boot_id, created_ns, command) "
                           "VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7)",
                           -1, &st, NULL) != SQLITE_OK) {
        fprintf(log, "%s: runs: %s\n", who, sqlite3_errmsg(db));
        return -1;
    }
    sqlite3_bind_text(st, 1, sh[0].run_id, -1, SQLITE_STATIC);
    if (has_world)
        sqlite3_bind_int64(st, 2, world);
    sqlite3_bind_int64(st, 3, sh[0].ar);
    sqlite3_bind_int64(st, 4, sh[0].am);
    sqlite3_bind_text(st, 5, sh[0].boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, sh[0].created);
    sqlite3_bind_text(st, 7, command, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        fprintf(log, "%s: runs: %s\n", who, sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

/* Appends to buf (cap bytes); returns -1 when it does not fit. */
static int app(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int app(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= cap - *len)
        return -1;
    *len += (size_t)w;
    return 0;
}

/* Copies table t of attached schema "s" (shard k) into main: one INSERT ... SELECT in one
 * transaction, rows in the shard's rowid order (per rank, the order the agent sent them).
 * identity: the shard's string ids are main's (the first shard). */
static int copy_table(sqlite3 *db, const struct shard *s, const char *t, int identity,
                      int64_t *rows, FILE *log, const char *who)
{
    char *cols[MAX_COLS], *scols[MAX_COLS], sql[8192], what[160];
    size_t len = 0;
    int nm, ns, rc = -1, ordered;
    sqlite3_stmt *st = NULL;
    snprintf(what, sizeof(what), "%s: copying %s", s->path, t);
    nm = table_columns(db, "main", t, cols, MAX_COLS);
    ns = table_columns(db, "s", t, scols, MAX_COLS);
    if (nm <= 0 || ns < 0) {
        fprintf(log, "%s: %s: cannot read the columns\n", who, what);
        goto out;
    }
    *rows = 0;
    if (ns == 0) { /* the shard has no such table (older build): nothing to copy */
        rc = 0;
        goto out;
    }
    /* a WITHOUT ROWID table has no rowid to keep the order by (its key orders it) */
    snprintf(sql, sizeof(sql), "SELECT rowid FROM s.\"%s\" LIMIT 0", t);
    ordered = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK;
    sqlite3_finalize(st);
    st = NULL;
    char sel_list[4096];
    size_t slen = 0;
    sel_list[0] = '\0';
    if (app(sql, sizeof(sql), &len, "INSERT INTO main.\"%s\"(", t) < 0)
        goto toolong;
    int first = 1;
    for (int i = 0; i < nm; i++) {
        int present = 0;
        for (int j = 0; j < ns; j++)
            present |= strcmp(cols[i], scols[j]) == 0;
        if (!present) /* an older shard without this column: the default */
            continue;
        if (app(sql, sizeof(sql), &len, "%s\"%s\"", first ? "" : ", ", cols[i]) < 0)
            goto toolong;
        int r;
        if (is_string_col(t, cols[i]) && !identity)
            r = app(sel_list, sizeof(sel_list), &slen,
                    "%s(SELECT m.new FROM temp.mrd_merge_smap m WHERE m.old = x.\"%s\")",
                    first ? "" : ", ", cols[i]);
        else if (is_global_col(t, cols[i]) && s->delta != 0)
            r = app(sel_list, sizeof(sel_list), &slen, "%sx.\"%s\" + (%" PRId64 ")",
                    first ? "" : ", ", cols[i], s->delta);
        else
            r = app(sel_list, sizeof(sel_list), &slen, "%sx.\"%s\"", first ? "" : ", ",
                    cols[i]);
        if (r < 0)
            goto toolong;
        first = 0;
    }
    if (app(sql, sizeof(sql), &len, ") SELECT %s FROM s.\"%s\" x%s", sel_list, t,
            ordered ? " ORDER BY x.rowid" : "") < 0)
        goto toolong;
    if (exec_sql(db, "BEGIN IMMEDIATE", log, who, what) < 0)
        goto out;
    if (exec_sql(db, sql, log, who, what) < 0) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        goto out;
    }
    *rows = sqlite3_changes64(db);
    if (exec_sql(db, "COMMIT", log, who, what) < 0)
        goto out;
    rc = 0;
    goto out;
toolong:
    fprintf(log, "%s: %s: statement too long\n", who, what);
out:
    free_cols(cols, nm > 0 ? nm : 0);
    free_cols(scols, ns > 0 ? ns : 0);
    return rc;
}

/* Strings of the attached shard into main, and temp.mrd_merge_smap = shard id -> main id.
 * The first shard's ids are kept as they are (main is empty then): identity. */
static int copy_strings(sqlite3 *db, const struct shard *s, int identity, int64_t *rows,
                        FILE *log, const char *who)
{
    char what[160];
    snprintf(what, sizeof(what), "%s: copying strings", s->path);
    if (exec_sql(db, "BEGIN IMMEDIATE", log, who, what) < 0)
        return -1;
    if (identity) {
        if (exec_sql(db, "INSERT INTO main.strings(id, value) SELECT id, value FROM s.strings",
                     log, who, what) < 0)
            goto fail;
        *rows = sqlite3_changes64(db);
    } else {
        if (exec_sql(db,
                     "INSERT OR IGNORE INTO main.strings(value) SELECT value FROM s.strings "
                     "ORDER BY id",
                     log, who, what) < 0)
            goto fail;
        *rows = sqlite3_changes64(db);
        if (exec_sql(db,
                     "DELETE FROM temp.mrd_merge_smap; INSERT INTO temp.mrd_merge_smap(old, new) "
                     "SELECT x.id, m.id FROM s.strings x JOIN main.strings m ON m.value = "
                     "x.value",
                     log, who, what) < 0)
            goto fail;
    }
    return exec_sql(db, "COMMIT", log, who, what);
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* aggregator_counters of the attached shard added into main's by name. */
static int sum_counters(sqlite3 *db, const struct shard *s, int64_t *rows, FILE *log,
                        const char *who)
{
    char what[160];
    snprintf(what, sizeof(what), "%s: adding aggregator_counters", s->path);
    *rows = 0;
    if (exec_sql(db,
                 "INSERT INTO main.aggregator_counters(name, value) SELECT name, value FROM "
                 "s.aggregator_counters WHERE 1 ON CONFLICT(name) DO UPDATE SET value = "
                 "main.aggregator_counters.value + excluded.value",
                 log, who, what) < 0)
        return -1;
    *rows = sqlite3_changes64(db);
    return 0;
}

/* Attaches shard k as "s", copies every table, detaches. */
static int merge_one(sqlite3 *db, const struct shard *s, int first, FILE *log, const char *who)
{
    sqlite3_stmt *st = NULL;
    char *uri = file_uri(s->path, "?mode=ro");
    int64_t total = 0, rows = 0;
    int rc = -1, ntab = 0;
    if (!uri)
        return -1;
    if (sqlite3_prepare_v2(db, "ATTACH DATABASE ?1 AS s", -1, &st, NULL) != SQLITE_OK ||
        (sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC), sqlite3_step(st)) != SQLITE_DONE) {
        fprintf(log, "%s: cannot attach %s: %s\n", who, s->path, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        free(uri);
        return -1;
    }
    sqlite3_finalize(st);
    free(uri);
    for (size_t i = 0; i < NTABLES; i++) {
        const char *t = tables[i].name;
        int r = 0;
        if (tables[i].pol == T_STRINGS)
            r = copy_strings(db, s, first, &rows, log, who);
        else if (tables[i].pol == T_COPY)
            r = copy_table(db, s, t, first, &rows, log, who);
        else if (tables[i].pol == T_SUM)
            r = sum_counters(db, s, &rows, log, who);
        else
            continue;
        if (r < 0)
            goto out;
        if (rows >= MERGE_PROGRESS_ROWS)
            fprintf(log, "%s: %s: %s: %" PRId64 " rows\n", who, s->path, t, rows);
        total += rows;
        ntab += rows > 0;
    }
    fprintf(log, "%s: shard %" PRId64 " (%s): %zu rank(s), %" PRId64 " rows in %d tables%s\n",
            who, s->shard_id, s->path, s->nranks, total, ntab,
            s->delta ? ", global times shifted" : "");
    rc = 0;
out:
    if (sqlite3_exec(db, "DETACH DATABASE s", NULL, NULL, NULL) != SQLITE_OK && rc == 0) {
        fprintf(log, "%s: cannot detach %s: %s\n", who, s->path, sqlite3_errmsg(db));
        rc = -1;
    }
    return rc;
}

static void remove_db_files(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[4200];
    for (size_t i = 0; i < N(sfx); i++) {
        snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
        unlink(p);
    }
}

static int cmp_shard(const void *a, const void *b)
{
    const struct shard *x = a, *y = b;
    return (x->shard_id > y->shard_id) - (x->shard_id < y->shard_id);
}

int mrd_cli_merge_shards(const char *out, const char *const *shards, int nshards,
                         int overwrite, FILE *log, const char *who)
{
    struct shard *sh = NULL;
    sqlite3 *db = NULL, *schema = NULL;
    char tmp[4200];
    int rc = 1, fd, made = 0;
    struct stat so, ss;

    if (nshards < 1 || !out || strlen(out) > 4000) {
        fprintf(log, "%s: give an output path and at least one shard\n", who);
        return 1;
    }
    if (stat(out, &so) == 0 && !overwrite) {
        fprintf(log, "%s: %s exists: give --overwrite to replace it, or another output\n", who,
                out);
        return 1;
    }
    if (check_schema(&schema, log, who) < 0)
        return 1;
    if (!(sh = calloc((size_t)nshards, sizeof(*sh)))) {
        fprintf(log, "%s: out of memory\n", who);
        sqlite3_close(schema);
        return 1;
    }
    for (int k = 0; k < nshards; k++) {
        sh[k].path = shards[k];
        if (stat(out, &so) == 0 && stat(shards[k], &ss) == 0 && so.st_dev == ss.st_dev &&
            so.st_ino == ss.st_ino) {
            fprintf(log, "%s: the output %s is the shard %s: give another output\n", who, out,
                    shards[k]);
            goto fail;
        }
        if (read_shard(&sh[k], schema, log, who) < 0)
            goto fail;
        sqlite3_close(sh[k].db);
        sh[k].db = NULL;
    }
    /* the lowest shard id is the base: its anchors are the merged run's timebase, so the
     * result does not depend on the order the shards were given in */
    qsort(sh, (size_t)nshards, sizeof(*sh), cmp_shard);
    if (check_shards(sh, nshards, log, who) < 0)
        goto fail;
    for (int k = 0; k < nshards; k++)
        sh[k].delta = (sh[0].ar - sh[0].am) - (sh[k].ar - sh[k].am);

    /* the new database, next to out (same file system: the rename is atomic) */
    snprintf(tmp, sizeof(tmp), "%s.merge-XXXXXX", out);
    if ((fd = mkstemp(tmp)) < 0) {
        fprintf(log, "%s: cannot create a file next to %s: %s\n", who, out, strerror(errno));
        goto fail;
    }
    close(fd);
    made = 1;
    if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
        fprintf(log, "%s: cannot open %s: %s\n", who, tmp, db ? sqlite3_errmsg(db) : "no memory");
        goto fail;
    }
    sqlite3_busy_timeout(db, 10000);
    char ver[96];
    snprintf(ver, sizeof(ver), "INSERT INTO schema_version(version) VALUES (%d)",
             MRD_STORE_SCHEMA_VERSION);
    if (exec_sql(db, mrd_store_pragmas(), log, who, "pragmas") < 0 ||
        exec_sql(db, "BEGIN IMMEDIATE", log, who, "schema") < 0 ||
        exec_sql(db, mrd_store_schema_sql(), log, who, "schema") < 0 ||
        exec_sql(db, ver, log, who, "schema") < 0 || write_run(db, sh, nshards, log, who) < 0 ||
        exec_sql(db, "COMMIT", log, who, "schema") < 0 ||
        exec_sql(db,
                 "CREATE TEMP TABLE mrd_merge_smap(old INTEGER PRIMARY KEY, new INTEGER NOT "
                 "NULL)",
                 log, who, "string map") < 0)
        goto fail;
    for (int k = 0; k < nshards; k++)
        if (merge_one(db, &sh[k], k == 0, log, who) < 0)
            goto fail;
    /* a mark that this database is a merge, and of how many shards */
    char mark[128];
    snprintf(mark, sizeof(mark),
             "INSERT OR REPLACE INTO aggregator_counters(name, value) VALUES ('merged_shards', "
             "%d)", nshards);
    if (exec_sql(db, mark, log, who, "aggregator_counters") < 0)
        goto fail;
    if (sqlite3_close(db) != SQLITE_OK) { /* checkpoints the WAL into the file */
        fprintf(log, "%s: closing %s: %s\n", who, tmp, sqlite3_errmsg(db));
        db = NULL;
        goto fail;
    }
    db = NULL;
    /* a WAL or shared-memory file of the database being replaced would be applied to the
     * new one: remove them first */
    if (overwrite) {
        char p[4200];
        snprintf(p, sizeof(p), "%s-wal", out);
        unlink(p);
        snprintf(p, sizeof(p), "%s-shm", out);
        unlink(p);
    }
    if (rename(tmp, out) != 0) {
        fprintf(log, "%s: cannot rename %s to %s: %s\n", who, tmp, out, strerror(errno));
        goto fail;
    }
    made = 0;
    size_t nranks = 0;
    for (int k = 0; k < nshards; k++)
        nranks += sh[k].nranks;
    fprintf(log, "%s: wrote %s: run %s, %zu rank(s) from %d shard(s)\n", who, out, sh[0].run_id,
            nranks, nshards);
    rc = 0;
fail:
    sqlite3_close(db);
    sqlite3_close(schema);
    if (made)
        remove_db_files(tmp);
    for (int k = 0; sh && k < nshards; k++) {
        sqlite3_close(sh[k].db);
        free(sh[k].run_id);
        free(sh[k].boot_id);
        free(sh[k].command);
        free(sh[k].ranks);
    }
    free(sh);
    return rc;
}

static void merge_usage(FILE *f)
{
    fputs("usage: meridian merge -o OUT [options] SHARD.db...\n"
          "\n"
          "Merges the shard databases of one run (one meridiand per group of ranks, each\n"
          "started with the same --run-id and its own --shard-id and --db) into one database\n"
          "OUT, as if one aggregator had stored every rank, then finalizes it (clock fit, GPU\n"
          "timer calibration, causality check over all ranks) like `meridian profile` does.\n"
          "The shards must have this meridian's schema version, the same run id, the same\n"
          "aggregator host boot (runs.boot_id: one monotonic clock), and each rank in one\n"
          "shard only. Shards are opened read-only; global times are put on the timebase of\n"
          "the shard with the lowest shard id; string ids are remapped. On any error nothing\n"
          "is left at OUT. aggregator/SCHEMA.md (\"Shards\") says what is copied and how.\n"
          "\n"
          "  -o, --output OUT  the merged database (required)\n"
          "  --overwrite       replace OUT if it exists (default: refuse)\n"
          "  --no-finalize     do not fit clock models etc. (`meridian finalize OUT` later)\n"
          "  -h, --help        this text\n"
          "\n"
          "Exit status: 0, 1 when a shard is refused or OUT cannot be written (or finalized),\n"
          "2 on a usage error.\n",
          f);
}

int mrd_cli_merge(int argc, char **argv)
{
    enum { O_OVERWRITE = 256, O_NOFIN };
    static const struct option lo[] = {{"output", 1, 0, 'o'},
                                       {"overwrite", 0, 0, O_OVERWRITE},
                                       {"no-finalize", 0, 0, O_NOFIN},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *out = NULL, *who = "meridian merge";
    int overwrite = 0, finalize = 1, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case O_OVERWRITE:
            overwrite = 1;
            break;
        case O_NOFIN:
            finalize = 0;
            break;
        case 'h':
            merge_usage(stdout);
            return 0;
        default:
            return 2;
        }
    }
    if (!out || optind >= argc) {
        fprintf(stderr, "%s: give -o OUT and at least one shard database (see --help)\n", who);
        return 2;
    }
    if (mrd_cli_merge_shards(out, (const char *const *)(argv + optind), argc - optind,
                             overwrite, stderr, who) != 0)
        return 1;
    if (!finalize)
        return 0;
    sqlite3 *db = mrd_cli_open_db(out, 0, who);
    if (!db)
        return 1;
    int rc = mrd_cli_finalize(db, NULL, stderr);
    sqlite3_close(db);
    return rc < 0 ? 1 : 0;
}
