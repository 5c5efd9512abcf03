/* meridian store, the read side: what a database's schema_version says, and opening a
 * database for reading without changing it.
 *
 * Where it sits: beside the writer. meridiand's store reads the version through
 * mrd_store_schema_read before it writes anything (store.c), and every meridian command
 * that reads a database (report, export, the check before finalize) opens it through
 * mrd_store_open_readonly, so the rule "a newer schema version is refused" is decided in
 * one place for the writer and the readers.
 *
 * Leaving no trace: a reader must leave the file and its directory as it found them. A
 * database meridiand wrote is in WAL mode (recorded in the file's header), and SQLite
 * opens a WAL database, even on a SQLITE_OPEN_READONLY connection, by creating its -wal
 * and -shm files next to it; only a connection that can write may checkpoint and delete
 * them when it closes, so a read-only reader leaves both behind. Two cases:
 *   - no -wal file exists: then no connection has the database open (SQLite deletes the
 *     -wal when the last one closes) and the main file holds every committed page. The
 *     reader opens it immutable (URI immutable=1): no locks, no -wal, no -shm. The one
 *     risk is a writer that opens the file while we read (meridiand starting on it,
 *     another `meridian finalize`): we take no lock, so we could read a page it is
 *     rewriting and fail with a corruption error or report a mix; the file itself is
 *     safe (the connection cannot write). Reports run after a run, so that is accepted
 *     for leaving nothing behind;
 *   - a -wal file exists (meridiand still running, or killed before its last checkpoint):
 *     committed pages may be only in the -wal, so the reader opens the database normally
 *     (SQLITE_OPEN_READONLY, with locks) to see them. The files were there before; the
 *     reader adds none.
 * A database in rollback-journal mode (hand-built fixtures, sqlite3's default) is opened
 * normally read-only: SQLite creates no file for a reader there.
 *
 * Workload: one open per command; the checks read the file's first 100 bytes and run a
 * few queries on sqlite_master and schema_version. Any thread (no shared state).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db.h"
#include "error.h"
#include "store.h"

/* The value of a count or MAX query on db (0 when NULL); < 0 on failure. */
static int query_int(sqlite3 *db, const char *sql, int64_t *v)
{
    int rc = mrd_db_int64(db, sql, NULL, v);
    return rc < 0 ? rc : 0;
}

int mrd_store_schema_read(struct sqlite3 *db, struct mrd_store_schema *out)
{
    int64_t tables, rows = 0, odd = 0, version;
    int rc;
    memset(out, 0, sizeof(*out));
    if ((rc = mrd_db_has_table(db, "schema_version")) < 0)
        return rc;
    if (!rc) {
        if ((rc = query_int(db, mrd_db_sql_schema_user_tables, &tables)) < 0)
            return rc;
        out->state = tables ? MRD_STORE_SCHEMA_UNVERSIONED : MRD_STORE_SCHEMA_NEW;
        return 0;
    }
    if ((rc = query_int(db, mrd_db_sql_schema_version_rows, &rows)) < 0 ||
        (rc = query_int(db, mrd_db_sql_schema_version_odd_rows, &odd)) < 0)
        return rc;
    if (odd) { /* REAL 1e30 is no version 1, 2.5 no version 2: not converted */
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, mrd_db_sql_schema_version_odd, -1, &st, NULL) != SQLITE_OK)
            return -MRD_ERR_SQLITE;
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            snprintf(out->odd, sizeof(out->odd), "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        out->state = MRD_STORE_SCHEMA_NOT_INTEGER;
        return 0;
    }
    if ((rc = query_int(db, mrd_db_sql_schema_version_max, &version)) < 0)
        return rc;
    out->version = version;
    if (rows == 0 || out->version < 1) {
        out->version = 0;
        out->state = MRD_STORE_SCHEMA_UNVERSIONED;
    } else {
        out->state = out->version > MRD_STORE_SCHEMA_VERSION ? MRD_STORE_SCHEMA_NEWER
                                                             : MRD_STORE_SCHEMA_SUPPORTED;
    }
    return 0;
}

/* "file:" URI of path with immutable=1; '%', '?', '#' and bytes outside printable ASCII
 * percent-encoded. An absolute path gets an empty authority ("file:///abs"), a relative
 * one none ("file:rel", which cannot start with '/'). Returns 0 or -ENAMETOOLONG. */
static int immutable_uri(const char *path, char *uri, size_t len)
{
    size_t n = (size_t)snprintf(uri, len, path[0] == '/' ? "file://" : "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (n + 4 >= len)
            return -ENAMETOOLONG;
        if (*p == '%' || *p == '?' || *p == '#' || *p <= ' ' || *p > '~')
            n += (size_t)snprintf(uri + n, len - n, "%%%02X", *p);
        else
            uri[n++] = (char)*p;
    }
    if (n + sizeof("?immutable=1") > len)
        return -ENAMETOOLONG;
    memcpy(uri + n, "?immutable=1", sizeof("?immutable=1"));
    return 0;
}

/* The checks that need no SQLite: exists, a regular file, readable, not empty, SQLite's
 * header. *wal: the header says WAL mode. Returns 0, or a negative code with why set. */
static int check_header(const char *path, int *wal, char *why, size_t whylen)
{
    static const char magic[16] = "SQLite format 3"; /* with its NUL: 16 bytes */
    unsigned char hdr[100];
    struct stat st;
    ssize_t n;
    int fd, rc;
    if (stat(path, &st) != 0) {
        rc = -errno;
        snprintf(why, whylen, "cannot read %s: %s", path, mrd_strerror(-errno));
        return rc;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s is a directory, not a meridian database", path);
        return -EISDIR;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s is not a regular file: not a meridian database", path);
        return -MRD_ERR_CONFIG;
    }
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = -errno;
        snprintf(why, whylen, "cannot read %s: %s%s", path, mrd_strerror(-errno),
                 errno == EACCES ? " (check the file's permissions)" : "");
        return rc;
    }
    do
        n = read(fd, hdr, sizeof(hdr));
    while (n < 0 && errno == EINTR);
    rc = n < 0 ? -errno : 0;
    close(fd);
    if (rc < 0) {
        snprintf(why, whylen, "cannot read %s: %s", path, mrd_strerror(rc));
        return rc;
    }
    if (n == 0) {
        snprintf(why, whylen,
                 "%s is empty: not a meridian database (was the run stopped before meridiand "
                 "created it?)",
                 path);
        return -MRD_ERR_CONFIG;
    }
    if (n < (ssize_t)sizeof(hdr) || memcmp(hdr, magic, sizeof(magic)) != 0) {
        snprintf(why, whylen, "%s is not a meridian database: not an SQLite database file", path);
        return -MRD_ERR_CONFIG;
    }
    *wal = hdr[18] == 2 || hdr[19] == 2; /* file format read/write versions: 2 = WAL */
    return 0;
}

/* What the schema says, as a refusal for a reader (why set), or 0. */
static int check_schema(sqlite3 *db, const char *path, char *why, size_t whylen)
{
    struct mrd_store_schema sc;
    int runs;
    if (mrd_store_schema_read(db, &sc) < 0) {
        snprintf(why, whylen, "%s is not a meridian database: %s", path, sqlite3_errmsg(db));
        return -MRD_ERR_SQLITE;
    }
    switch (sc.state) {
    case MRD_STORE_SCHEMA_SUPPORTED:
        break;
    case MRD_STORE_SCHEMA_NEWER:
        snprintf(why, whylen,
                 "%s has schema version %lld, newer than this meridian supports (%d): use a "
                 "newer meridian",
                 path, sc.version, MRD_STORE_SCHEMA_VERSION);
        return -MRD_ERR_CONFIG;
    case MRD_STORE_SCHEMA_NEW:
        snprintf(why, whylen, "%s is not a meridian database: an SQLite database without tables",
                 path);
        return -MRD_ERR_CONFIG;
    case MRD_STORE_SCHEMA_UNVERSIONED:
        snprintf(why, whylen,
                 "%s is not a meridian database: it has tables but no schema version "
                 "(meridiand writes one)",
                 path);
        return -MRD_ERR_CONFIG;
    case MRD_STORE_SCHEMA_NOT_INTEGER:
        snprintf(why, whylen,
                 "%s is not a meridian database: its schema version %s is not an integer", path,
                 sc.odd);
        return -MRD_ERR_CONFIG;
    }
    if ((runs = mrd_db_has_table(db, "runs")) < 0) {
        snprintf(why, whylen, "%s is not a meridian database: %s", path, sqlite3_errmsg(db));
        return -MRD_ERR_SQLITE;
    }
    if (!runs) {
        snprintf(why, whylen, "%s is not a meridian database: it has no runs table", path);
        return -MRD_ERR_CONFIG;
    }
    return 0;
}

int mrd_store_open_readonly(const char *path, struct sqlite3 **out, char *why, size_t whylen)
{
    char walpath[4096], uri[3 * 4096 + 32];
    struct stat st;
    sqlite3 *db = NULL;
    int wal = 0, rc;
    *out = NULL;
    if ((rc = check_header(path, &wal, why, whylen)) < 0)
        return rc;
    /* immutable only for a WAL database without a -wal (see the top of this file) */
    int immutable = 0;
    if (wal) {
        if ((size_t)snprintf(walpath, sizeof(walpath), "%s-wal", path) >= sizeof(walpath) ||
            immutable_uri(path, uri, sizeof(uri)) < 0) {
            snprintf(why, whylen, "cannot read %s: %s", path, mrd_strerror(-ENAMETOOLONG));
            return -ENAMETOOLONG;
        }
        immutable = stat(walpath, &st) != 0 && errno == ENOENT;
    }
    int flags = SQLITE_OPEN_READONLY | (immutable ? SQLITE_OPEN_URI : 0);
    if (sqlite3_open_v2(immutable ? uri : path, &db, flags, NULL) != SQLITE_OK) {
        snprintf(why, whylen, "cannot open %s: %s", path,
                 db ? sqlite3_errmsg(db) : "out of memory");
        rc = db ? -MRD_ERR_SQLITE : -ENOMEM;
        goto fail;
    }
    sqlite3_busy_timeout(db, 5000);
    if ((rc = check_schema(db, path, why, whylen)) < 0)
        goto fail;
    *out = db;
    return 0;
fail:
    sqlite3_close(db);
    return rc;
}
