/* meridian store, WAL checkpoints off the commit path.
 *
 * In WAL mode every commit appends pages to the -wal file; a checkpoint copies them back
 * into the database file and fsyncs it. SQLite's automatic checkpoint runs inside the
 * COMMIT that crosses the threshold, so that commit (and every ack waiting for it) would
 * wait for the copy and two fsyncs. Here the writer's connection gets a WAL hook instead:
 * after a commit that leaves >= MRD__CKPT_PAGES pages in the WAL it wakes the checkpointer
 * thread, which runs a PASSIVE checkpoint on its own connection while the writer goes on.
 *
 * Cap: a passive checkpoint never blocks the writer, so under continuous writes it may
 * not finish backfilling before new frames arrive, and the WAL would only grow. When the
 * WAL reaches 4 x MRD__CKPT_PAGES the writer checkpoints inline right after its commit
 * (nothing else writes then, so that one completes and the WAL restarts from its start
 * at the next transaction). Most frames are already backfilled by then, so it is short.
 *
 * Threads: the hook runs on the writer thread; the checkpointer thread only touches
 * ckpt_db; the two share ckpt_req/ckpt_stop under ckpt_mu.
 */
#include <signal.h>

#include "error.h"
#include "store_internal.h"

int mrd__store_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct mrd_store *s = arg;
    (void)name;
    if (pages >= 4 * MRD__CKPT_PAGES) {
        int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            mrd__store_log(s, 0, "checkpoint failed: %s", sqlite3_errstr(rc));
    } else if (pages >= MRD__CKPT_PAGES && s->ckpt_started) {
        pthread_mutex_lock(&s->ckpt_mu);
        s->ckpt_req = 1;
        pthread_cond_signal(&s->ckpt_cv);
        pthread_mutex_unlock(&s->ckpt_mu);
    }
    return SQLITE_OK;
}

static void *ckpt_main(void *arg)
{
    struct mrd_store *s = arg;
    int logged = 0;
    pthread_mutex_lock(&s->ckpt_mu);
    for (;;) {
        while (!s->ckpt_req && !s->ckpt_stop)
            pthread_cond_wait(&s->ckpt_cv, &s->ckpt_mu);
        if (s->ckpt_stop)
            break;
        s->ckpt_req = 0;
        pthread_mutex_unlock(&s->ckpt_mu);
        int rc = sqlite3_wal_checkpoint_v2(s->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY && !logged++)
            mrd__store_log(s, 0,
                           "background checkpoint failed: %s (the writer will "
                           "checkpoint itself)",
                           sqlite3_errmsg(s->ckpt_db));
        pthread_mutex_lock(&s->ckpt_mu);
    }
    pthread_mutex_unlock(&s->ckpt_mu);
    return NULL;
}

int mrd__store_ckpt_start(struct mrd_store *s, const char *path)
{
    pthread_mutex_init(&s->ckpt_mu, NULL);
    pthread_cond_init(&s->ckpt_cv, NULL);
    int rc = sqlite3_open_v2(path, &s->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->ckpt_db, mrd_store_pragmas(), NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        mrd__store_log(s, 0, "cannot open the checkpoint connection: %s",
                       s->ckpt_db ? sqlite3_errmsg(s->ckpt_db) : sqlite3_errstr(rc));
        return -MRD_ERR_SQLITE;
    }
    sqlite3_wal_autocheckpoint(s->ckpt_db, 0); /* it never writes; checkpoints on request */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&s->ckpt_thread, NULL, ckpt_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_setname_np(s->ckpt_thread, "mrd-checkpoint");
    s->ckpt_started = 1;
    return 0;
}

void mrd__store_ckpt_stop(struct mrd_store *s)
{
    if (s->ckpt_started) {
        pthread_mutex_lock(&s->ckpt_mu);
        s->ckpt_stop = 1;
        pthread_cond_signal(&s->ckpt_cv);
        pthread_mutex_unlock(&s->ckpt_mu);
        pthread_join(s->ckpt_thread, NULL);
        s->ckpt_started = 0;
    }
    if (s->ckpt_db) {
        sqlite3_close(s->ckpt_db);
        s->ckpt_db = NULL;
        pthread_cond_destroy(&s->ckpt_cv);
        pthread_mutex_destroy(&s->ckpt_mu);
    }
}
