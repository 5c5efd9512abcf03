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
 *      columns known to this build, this build's schema fully classified (merge_check.c);
 *   2. creates a temporary database next to `out` with the store's schema and pragmas
 *      (mrd_store_schema_sql, mrd_store_pragmas: the file is what meridiand would create);
 *   3. attaches one shard at a time (read-only) and copies each table with one
 *      INSERT ... SELECT in one transaction: string ids remapped through a per-shard map,
 *      global-timebase columns shifted onto the first shard's timebase, local clocks as is;
 *   4. renames the temporary file to `out`. Any error removes the temporary file.
 * Clock models and the finalize's tables are not copied: the caller finalizes the result.
 *
 * Workload: shards of tens of millions of rows each; nothing is loaded into memory but
 * the ranks of each shard (the overlap check; at most MRD__MERGE_MAX_RANKS per shard, a
 * shard with more is refused). SQLite streams each INSERT ... SELECT. Main thread; one
 * connection to the output, one read-only connection per shard while validating.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "db.h"
#include "error.h"
#include "merge.h"
#include "opts.h"
#include "progress.h"
#include "store.h"

#define MERGE_PROGRESS_ROWS 100000 /* a table copy of at least this many rows is logged */
#define N(a)                (sizeof(a) / sizeof((a)[0]))

/* The merge's progress: rows read from the shards, each table's COUNT(*) counted before
 * the merge (count[k * mrd__merge_ntables + i]: shard k, table i) and added when its copy
 * ends. Inside one copied table (one INSERT ... SELECT, however many rows), the SQL function
 * mrd_merge_row() in the SELECT's WHERE counts the rows read (only while progress is shown:
 * otherwise the statement has no such term), every MERGE_TICK_ROWS rows an update, at most
 * to the table's count less one: the table's end is counted when its copy commits. */
#define MERGE_TICK_ROWS 4096

struct merge_progress {
    struct mrd_progress p;
    uint64_t *count, done;
    uint64_t table_rows, table_count; /* rows read of the table being copied, its count */
    uint64_t shown;                   /* the last done given to p */
};

static void merge_show(struct merge_progress *mp, uint64_t done)
{
    if (done > mp->shown) {
        mp->shown = done;
        mrd_progress_set(&mp->p, done);
    }
}

/* mrd_merge_row(): 1 for every row, counting it (user data: the merge_progress). */
static void merge_row_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    struct merge_progress *mp = sqlite3_user_data(ctx);
    (void)argc, (void)argv;
    if (++mp->table_rows % MERGE_TICK_ROWS == 0 && mp->table_count > 1)
        merge_show(mp, mp->done + (mp->table_rows < mp->table_count - 1 ? mp->table_rows
                                                                        : mp->table_count - 1));
    sqlite3_result_int(ctx, 1);
}

static int copied(const struct mrd__merge_table *t)
{
    return t->pol == MRD__MERGE_STRINGS || t->pol == MRD__MERGE_COPY || t->pol == MRD__MERGE_SUM;
}

/* Counts the rows of every copied table of every shard (read-only connections), for the
 * total (a table whose count fails counts 0: the lines only). Returns 0 or -1 (logged). */
static int count_rows(struct merge_progress *mp, const struct mrd__merge_shard *sh, int n,
                      FILE *log, const char *who)
{
    uint64_t total = 0;
    mp->count = calloc((size_t)n * mrd__merge_ntables, sizeof(*mp->count));
    if (!mp->count) {
        fprintf(log, "%s: out of memory\n", who);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        sqlite3 *db = mrd_cli_open_db(sh[k].path, 1, who);
        if (!db)
            return -1;
        for (size_t i = 0; i < mrd__merge_ntables; i++) {
            uint64_t *c = &mp->count[(size_t)k * mrd__merge_ntables + i];
            if (!copied(&mrd__merge_tables[i]))
                continue;
            (void)mrd_db_table_rows(db, mrd__merge_tables[i].name, c);
            total += *c;
        }
        sqlite3_close(db);
    }
    mrd_progress_set_total(&mp->p, total);
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
static int write_run(sqlite3 *db, const struct mrd__merge_shard *sh, int n, FILE *log,
                     const char *who)
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
 * identity: the shard's string ids are main's (the first shard). counted: the SELECT calls
 * mrd_merge_row() for every row (progress inside the table). */
static int copy_table(sqlite3 *db, const struct mrd__merge_shard *s, const char *t, int identity,
                      int counted, int64_t *rows, FILE *log, const char *who)
{
    char *cols[MRD__MERGE_MAX_COLS], *scols[MRD__MERGE_MAX_COLS], sql[8192], what[160];
    size_t len = 0;
    int nm, ns, rc = -1, ordered;
    sqlite3_stmt *st = NULL;
    snprintf(what, sizeof(what), "%s: copying %s", s->path, t);
    nm = mrd__merge_table_columns(db, "main", t, cols, MRD__MERGE_MAX_COLS);
    ns = mrd__merge_table_columns(db, "s", t, scols, MRD__MERGE_MAX_COLS);
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
        if (mrd__merge_is_string_col(t, cols[i]) && !identity)
            r = app(sel_list, sizeof(sel_list), &slen,
                    "%s(SELECT m.new FROM temp.mrd_merge_smap m WHERE m.old = x.\"%s\")",
                    first ? "" : ", ", cols[i]);
        else if (mrd__merge_is_global_col(t, cols[i]) && s->delta != 0)
            r = app(sel_list, sizeof(sel_list), &slen, "%sx.\"%s\" + (%" PRId64 ")",
                    first ? "" : ", ", cols[i], s->delta);
        else
            r = app(sel_list, sizeof(sel_list), &slen, "%sx.\"%s\"", first ? "" : ", ", cols[i]);
        if (r < 0)
            goto toolong;
        first = 0;
    }
    if (app(sql, sizeof(sql), &len, ") SELECT %s FROM s.\"%s\" x%s%s", sel_list, t,
            counted ? " WHERE mrd_merge_row()" : "", ordered ? " ORDER BY x.rowid" : "") < 0)
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
    mrd__merge_free_cols(cols, nm > 0 ? nm : 0);
    mrd__merge_free_cols(scols, ns > 0 ? ns : 0);
    return rc;
}

/* Strings of the attached shard into main, and temp.mrd_merge_smap = shard id -> main id.
 * The first shard's ids are kept as they are (main is empty then): identity. */
static int copy_strings(sqlite3 *db, const struct mrd__merge_shard *s, int identity, int64_t *rows,
                        FILE *log, const char *who)
{
    char what[160];
    snprintf(what, sizeof(what), "%s: copying strings", s->path);
    if (exec_sql(db, "BEGIN IMMEDIATE", log, who, what) < 0)
        return -1;
    if (identity) {
        if (exec_sql(db, "INSERT INTO main.strings(id, value) SELECT id, value FROM s.strings", log,
                     who, what) < 0)
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
static int sum_counters(sqlite3 *db, const struct mrd__merge_shard *s, int64_t *rows, FILE *log,
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
static int merge_one(sqlite3 *db, const struct mrd__merge_shard *s, int k, FILE *log,
                     const char *who, struct merge_progress *mp)
{
    sqlite3_stmt *st = NULL;
    char *uri = file_uri(s->path, "?mode=ro");
    int64_t total = 0, rows = 0;
    int rc = -1, ntab = 0, first = k == 0;
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
    for (size_t i = 0; i < mrd__merge_ntables; i++) {
        const char *t = mrd__merge_tables[i].name;
        int r = 0;
        if (mrd__merge_tables[i].pol == MRD__MERGE_STRINGS) {
            r = copy_strings(db, s, first, &rows, log, who);
        } else if (mrd__merge_tables[i].pol == MRD__MERGE_COPY) {
            mp->table_rows = 0;
            mp->table_count = mp->count[(size_t)k * mrd__merge_ntables + i];
            r = copy_table(db, s, t, first, mp->p.on, &rows, log, who);
        } else if (mrd__merge_tables[i].pol == MRD__MERGE_SUM) {
            r = sum_counters(db, s, &rows, log, who);
        } else {
            continue;
        }
        if (r < 0)
            goto out;
        if (rows >= MERGE_PROGRESS_ROWS)
            fprintf(log, "%s: %s: %s: %" PRId64 " rows\n", who, s->path, t, rows);
        total += rows;
        ntab += rows > 0;
        mp->done += mp->count[(size_t)k * mrd__merge_ntables + i];
        merge_show(mp, mp->done); /* a line only when done moved */
    }
    fprintf(log, "%s: shard %" PRId64 " (%s): %zu rank(s), %" PRId64 " rows in %d tables%s\n", who,
            s->shard_id, s->path, s->nranks, total, ntab, s->delta ? ", global times shifted" : "");
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

/* Writes the merged database into the (empty) file tmp and closes it, which folds its WAL
 * back into the file. */
static int write_merged(const char *tmp, const struct mrd__merge_shard *sh, int n, FILE *log,
                        const char *who, struct merge_progress *mp)
{
    sqlite3 *db = NULL;
    char ver[96], mark[128];
    int rc = -1;
    snprintf(ver, sizeof(ver), "INSERT INTO schema_version(version) VALUES (%d)",
             MRD_STORE_SCHEMA_VERSION);
    /* a mark that this database is a merge, and of how many shards */
    snprintf(mark, sizeof(mark),
             "INSERT OR REPLACE INTO aggregator_counters(name, value) VALUES ('merged_shards', "
             "%d)",
             n);
    if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
        fprintf(log, "%s: cannot open %s: %s\n", who, tmp, db ? sqlite3_errmsg(db) : "no memory");
        goto out;
    }
    sqlite3_busy_timeout(db, 10000);
    if (mp->p.on && sqlite3_create_function(db, "mrd_merge_row", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY,
                                            mp, merge_row_fn, NULL, NULL) != SQLITE_OK) {
        fprintf(log, "%s: %s: %s\n", who, tmp, sqlite3_errmsg(db));
        goto out;
    }
    if (exec_sql(db, mrd_store_pragmas(), log, who, "pragmas") < 0 ||
        exec_sql(db, "BEGIN IMMEDIATE", log, who, "schema") < 0 ||
        exec_sql(db, mrd_store_schema_sql(), log, who, "schema") < 0 ||
        exec_sql(db, ver, log, who, "schema") < 0 || write_run(db, sh, n, log, who) < 0 ||
        exec_sql(db, "COMMIT", log, who, "schema") < 0 ||
        exec_sql(db,
                 "CREATE TEMP TABLE mrd_merge_smap(old INTEGER PRIMARY KEY, new INTEGER NOT "
                 "NULL)",
                 log, who, "string map") < 0)
        goto out;
    for (int k = 0; k < n; k++)
        if (merge_one(db, &sh[k], k, log, who, mp) < 0)
            goto out;
    if (exec_sql(db, mark, log, who, "aggregator_counters") < 0)
        goto out;
    rc = 0;
out:
    if (db && sqlite3_close(db) != SQLITE_OK) {
        fprintf(log, "%s: closing %s: %s\n", who, tmp, sqlite3_errmsg(db));
        sqlite3_close_v2(db);
        rc = -1;
    }
    return rc;
}

int mrd_cli_merge_shards(const char *out, const char *const *shards, int nshards, int overwrite,
                         FILE *log, const char *who)
{
    return mrd_cli_merge_shards_progress(out, shards, nshards, overwrite, log, who,
                                         MRD_PROGRESS_OFF);
}

int mrd_cli_merge_shards_progress(const char *out, const char *const *shards, int nshards,
                                  int overwrite, FILE *log, const char *who, int progress)
{
    struct merge_progress mp;
    struct mrd__merge_shard *sh = NULL;
    char tmp[4200], p[4200];
    int rc = 1, fd, made = 0;
    struct stat so;
    size_t nranks = 0;

    if (nshards < 1 || !out || strlen(out) > 4000) {
        fprintf(log, "%s: give an output path and at least one shard\n", who);
        return 1;
    }
    if (stat(out, &so) == 0 && !overwrite) {
        fprintf(log, "%s: %s exists: give --overwrite to replace it, or another output\n", who,
                out);
        return 1;
    }
    if (!(sh = calloc((size_t)nshards, sizeof(*sh)))) {
        fprintf(log, "%s: out of memory\n", who);
        return 1;
    }
    for (int k = 0; k < nshards; k++)
        sh[k].path = shards[k];
    memset(&mp, 0, sizeof(mp));
    mrd_progress_begin(&mp.p, progress, who, "merging shards", "rows", 0);
    if (mrd__merge_validate(sh, nshards, out, log, who) < 0 ||
        count_rows(&mp, sh, nshards, log, who) < 0)
        goto fail;
    /* the new database, next to out (same file system: the rename is atomic), with the
     * permissions a new file gets (mkstemp's are 0600) */
    snprintf(tmp, sizeof(tmp), "%s.merge-XXXXXX", out);
    if ((fd = mkstemp(tmp)) < 0) {
        fprintf(log, "%s: cannot create a file next to %s: %s\n", who, out, mrd_strerror(-errno));
        goto fail;
    }
    mode_t um = umask(0);
    umask(um);
    if (fchmod(fd, 0666 & ~um) != 0)
        fprintf(log, "%s: note: %s stays readable by its owner only\n", who, out);
    close(fd);
    made = 1;
    if (write_merged(tmp, sh, nshards, log, who, &mp) < 0)
        goto fail;
    mrd_progress_end(&mp.p);
    /* a WAL or shared-memory file of the database being replaced would be applied to the
     * new one: remove them first */
    if (overwrite) {
        snprintf(p, sizeof(p), "%s-wal", out);
        unlink(p);
        snprintf(p, sizeof(p), "%s-shm", out);
        unlink(p);
    }
    if (rename(tmp, out) != 0) {
        fprintf(log, "%s: cannot rename %s to %s: %s\n", who, tmp, out, mrd_strerror(-errno));
        goto fail;
    }
    made = 0;
    for (int k = 0; k < nshards; k++)
        nranks += sh[k].nranks;
    fprintf(log, "%s: wrote %s: run %s, %zu rank(s) from %d shard(s)\n", who, out, sh[0].run_id,
            nranks, nshards);
    rc = 0;
fail:
    if (made)
        remove_db_files(tmp);
    for (int k = 0; k < nshards; k++) {
        sqlite3_close(sh[k].db);
        free(sh[k].run_id);
        free(sh[k].boot_id);
        free(sh[k].command);
        free(sh[k].ranks);
    }
    free(sh);
    free(mp.count);
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
          "  --progress        progress lines on stderr when the merge takes over 2 s: rows\n"
          "                    read from the shards (COUNT(*) of every copied table, counted\n"
          "                    first; counted as they are read, inside a table too), rate,\n"
          "                    time left; then the finalize's rows (see finalize --help);\n"
          "                    the default when stderr is a terminal\n"
          "  --quiet           no progress lines\n"
          "  -h, --help        this text\n"
          "\n"
          "Exit status: 0, 1 when a shard is refused or OUT cannot be written (or finalized),\n"
          "2 on a usage error.\n",
          f);
}

int mrd_cli_merge(int argc, char **argv)
{
    const char *out = NULL, *who = "meridian merge";
    int overwrite = 0, finalize = 1, progress = MRD_PROGRESS_AUTO;
    const struct mrd_opt opts[] = {{.name = "output",
                                    .letter = 'o',
                                    .arg = required_argument,
                                    .apply = mrd_opt_text,
                                    .dest = mrd_opt_text_dest(&out)},
                                   MRD_OPT_SET("overwrite", &overwrite, 1),
                                   MRD_OPT_SET("no-finalize", &finalize, 0),
                                   MRD_OPT_PROGRESS(&progress)};
    int first = mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), 0, who, merge_usage);
    if (first <= 0)
        return first == 0 ? 0 : 2;
    if (!out || first >= argc) {
        fprintf(stderr, "%s: give -o OUT and at least one shard database (see --help)\n", who);
        return 2;
    }
    if (mrd_cli_merge_shards_progress(out, (const char *const *)(argv + first), argc - first,
                                      overwrite, stderr, who, progress) != 0)
        return 1;
    if (!finalize)
        return 0;
    sqlite3 *db = mrd_cli_open_db(out, 0, who);
    if (!db)
        return 1;
    int rc = mrd_cli_finalize_progress(db, NULL, stderr, who, progress);
    sqlite3_close(db);
    return rc < 0 ? 1 : 0;
}
