/* meridian store, the storage path's SQLite setup: the writer connection and WAL
 * checkpoints off the commit path. Exported (store.h) so that every program writing a
 * meridian database the way meridiand does (the store itself, and the ingest benchmark's
 * ceiling, tests/bench/ingest_ceiling.c) opens it the same way, from one place.
 *
 * The connection (mrd_store_sqlite_open): one thread owns it (NOMUTEX), extended result
 * codes, the connection's pragmas, then WAL mode, checked (a file system that cannot do
 * WAL is refused, not silently run in rollback mode). The two halves are separate for the
 * store (mrd__store_sqlite_connect, mrd__store_sqlite_wal): WAL mode is written into the
 * file's header, so the store switches only after it checked it will not refuse the file.
 *
 * Checkpoints (mrd_store_ckpt_start): in WAL mode every commit appends pages to the -wal
 * file; a checkpoint copies them back into the database file and fsyncs it. SQLite's
 * automatic checkpoint runs inside the COMMIT that crosses the threshold, so that commit
 * (and every ack waiting for it) would wait for the copy and two fsyncs. Here the writer's
 * connection gets a WAL hook instead (which replaces the automatic checkpoint): after a
 * commit that leaves >= `pages` pages in the WAL it wakes the checkpointer thread, which
 * runs a PASSIVE checkpoint on its own connection while the writer goes on.
 *
 * Cap: a passive checkpoint never blocks the writer, so under continuous writes it may
 * not finish backfilling before new frames arrive, and the WAL would only grow. When the
 * WAL reaches 4 x `pages` the writer checkpoints inline right after its commit (nothing
 * else writes then, so that one completes and the WAL restarts from its start at the next
 * transaction). Most frames are already backfilled by then, so it is short. While a
 * background checkpoint is still running (copying, or in fsync) the inline one returns
 * SQLITE_BUSY at once and the next commit tries again: the WAL can pass the cap by what
 * is committed during one background checkpoint.
 *
 * Threads: the hook runs on the writer thread (inside its COMMIT); the checkpointer
 * thread only touches its own connection; the two share req/stop/counters under mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "error.h"
#include "store_internal.h"
#include "worker.h"

struct mrd_store_ckpt {
    sqlite3 *writer; /* the hooked connection (not owned) */
    sqlite3 *db;     /* the checkpointer's own connection */
    int pages;
    FILE *log;
    char who[32];
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* guards req, stop and the counters */
    pthread_cond_t cv;
    int req, stop;
    struct mrd_store_ckpt_stats st;
};

static void ckpt_log(const struct mrd_store_ckpt *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ckpt_log(const struct mrd_store_ckpt *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mrd_log_vline(c->log, c->who, fmt, ap);
    va_end(ap);
}

int mrd__store_sqlite_connect(const char *path, int sync_full, sqlite3 **out, char *err,
                              size_t errlen)
{
    sqlite3 *db = NULL;
    char *msg = NULL;
    *out = NULL;
    int rc = sqlite3_open_v2(
        path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "cannot open database %s: %s", path,
                 db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(db, 1);
    rc = sqlite3_exec(db, mrd__store_conn_pragmas(), NULL, NULL, &msg);
    if (rc == SQLITE_OK && sync_full)
        rc = sqlite3_exec(db, mrd_db_sql_sync_full, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "database error (pragmas): %s", msg ? msg : sqlite3_errstr(rc));
        goto fail;
    }
    *out = db;
    return 0;
fail:
    sqlite3_free(msg);
    sqlite3_close(db);
    return -MRD_ERR_SQLITE;
}

int mrd__store_sqlite_wal(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    char mode[16] = "";
    int rc = sqlite3_prepare_v2(db, mrd_db_sql_wal, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(mode, sizeof(mode), "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (strcmp(mode, "wal") != 0) {
        snprintf(err, errlen, "database %s: cannot use WAL mode (journal_mode=%s)", path,
                 mode[0] ? mode : sqlite3_errmsg(db));
        return -MRD_ERR_SQLITE;
    }
    return 0;
}

int mrd_store_sqlite_open(const char *path, int sync_full, sqlite3 **out, char *err, size_t errlen)
{
    int rc = mrd__store_sqlite_connect(path, sync_full, out, err, errlen);
    if (rc < 0)
        return rc;
    if ((rc = mrd__store_sqlite_wal(*out, path, err, errlen)) < 0) {
        sqlite3_close(*out);
        *out = NULL;
    }
    return rc;
}

static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct mrd_store_ckpt *c = arg;
    (void)name;
    if (pages >= 4 * c->pages) {
        int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            ckpt_log(c, "checkpoint failed: %s", sqlite3_errstr(rc));
        pthread_mutex_lock(&c->mu);
        c->st.inline_runs++; /* attempts: BUSY (the background run holds it) counts too */
        pthread_mutex_unlock(&c->mu);
    } else if (pages >= c->pages) {
        pthread_mutex_lock(&c->mu);
        c->st.requests++;
        c->req = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    return SQLITE_OK;
}

static void *ckpt_main(void *arg)
{
    struct mrd_store_ckpt *c = arg;
    int logged = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->req && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop)
            break;
        c->req = 0;
        uint64_t covered = c->st.requests; /* this run backfills what they asked for */
        pthread_mutex_unlock(&c->mu);
        int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY && !logged++)
            ckpt_log(c, "background checkpoint failed: %s (the writer will checkpoint itself)",
                     sqlite3_errmsg(c->db));
        pthread_mutex_lock(&c->mu);
        c->st.background++;
        c->st.served = covered;
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void mrd_store_ckpt_stop(struct mrd_store_ckpt *c)
{
    if (!c)
        return;
    if (c->writer) /* back to SQLite's own automatic checkpoint at the pragma's size */
        sqlite3_wal_autocheckpoint(c->writer, MRD_STORE_CKPT_PAGES);
    if (c->started)
        mrd_worker_stop(c->thread, &c->mu, &c->cv, &c->stop);
    sqlite3_close(c->db);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int mrd_store_ckpt_start(sqlite3 *writer, const struct mrd_store_ckpt_config *cfg,
                         struct mrd_store_ckpt **out)
{
    *out = NULL;
    if (!writer || !cfg || !cfg->path || cfg->pages < 0)
        return -EINVAL;
    struct mrd_store_ckpt *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->pages = cfg->pages ? cfg->pages : MRD_STORE_CKPT_PAGES;
    c->log = cfg->log;
    snprintf(c->who, sizeof(c->who), "%s", cfg->who ? cfg->who : "meridiand");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    int rc = sqlite3_open_v2(cfg->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, mrd_store_pragmas(), NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        ckpt_log(c, "cannot open the checkpoint connection: %s",
                 c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        rc = -MRD_ERR_SQLITE;
        goto fail;
    }
    sqlite3_wal_autocheckpoint(c->db, 0); /* it never writes; checkpoints on request */
    if ((rc = mrd_worker_start(&c->thread, "mrd-checkpoint", ckpt_main, c)) < 0)
        goto fail;
    c->started = 1;
    /* replaces the writer's automatic checkpoint (wal_autocheckpoint is a WAL hook too) */
    c->writer = writer;
    sqlite3_wal_hook(writer, wal_hook, c);
    *out = c;
    return 0;
fail:
    mrd_store_ckpt_stop(c);
    return rc;
}

void mrd_store_ckpt_get_stats(struct mrd_store_ckpt *c, struct mrd_store_ckpt_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = c->st;
    pthread_mutex_unlock(&c->mu);
}
