/* meridian store: opening the database, the run and its timebase, and the writer thread.
 *
 * Data flow: ingest's loop thread submits items (decoded Hello / Batch / Goodbye messages)
 * to a FIFO; the writer thread takes the whole FIFO at once, writes each item (write.c)
 * inside one open transaction and commits when the transaction is commit_ms old, holds
 * commit_rows rows, or a drain/close asks for it. Only after COMMIT returned are the
 * items moved to the completion list and the loop woken through an eventfd; the loop
 * then sends the acks. A failed statement or COMMIT rolls the whole transaction back and
 * completes its items with an error (their connections are closed, agents resend).
 *
 * Caps: the FIFO itself never refuses; the submitter bounds it (ingest charges each
 * item's cost against a global and a per-connection cap and stops reading sockets at the
 * cap). One transaction holds at most commit_rows rows (+ one batch).
 *
 * Schema: every refusal (a newer version: an older meridiand cannot write a layout it does
 * not know; no or a non-integer version; several runs; another run) is decided read-only
 * first, before the connection switches the file to WAL mode (which rewrites its header),
 * so a refused file keeps every byte. The version is read and classified by
 * mrd_store_schema_read (readonly.c), the same check `meridian report`, `export` and
 * `finalize` apply before they read. Then one transaction re-checks, creates a new
 * database at MRD_STORE_SCHEMA_VERSION or migrates an older one a version step at a
 * time, and sets up the run row.
 *
 * Threads: see store.h. The writer thread owns the sqlite3 handle from the moment it
 * starts until close joins it; it runs with all signals blocked. WAL checkpoints run on
 * a third thread with its own connection (ckpt.c), so COMMIT never waits for one.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "error.h"
#include "store_internal.h"
#include "worker.h"

extern const char mrd__store_schema_text[]; /* generated from schema.sql at build time */

/* The event tables (write.c, generated from proto/kinds.h) in front of schema.sql, whose
 * indexes name some of them; built once. If that allocation fails, schema.sql alone (the
 * caller's statements on event tables then fail with "no such table"). */
static char *schema_all;
static pthread_once_t schema_all_once = PTHREAD_ONCE_INIT;

static void schema_all_build(void)
{
    size_t a = strlen(mrd__store_event_ddl), b = strlen(mrd__store_schema_text);
    schema_all = malloc(a + b + 1);
    if (!schema_all)
        return;
    memcpy(schema_all, mrd__store_event_ddl, a);
    memcpy(schema_all + a, mrd__store_schema_text, b + 1);
}

const char *mrd_store_schema_sql(void)
{
    pthread_once(&schema_all_once, schema_all_build);
    return schema_all ? schema_all : mrd__store_schema_text;
}

const char *mrd_store_pragmas(void)
{
    return mrd_db_sql_store_pragmas;
}

const char *mrd__store_conn_pragmas(void)
{
    return mrd_db_sql_conn_pragmas;
}

void mrd_store_process_init(void)
{
    /* SQLite's memory statistics take a global mutex around every allocation; the store
     * does not use them (no soft heap limit). Fails harmlessly once SQLite is initialized. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

void mrd__store_log(const struct mrd_store *s, int level, const char *fmt, ...)
{
    if (level > s->verbose + 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    mrd_log_vline(s->log, "meridiand", fmt, ap);
    va_end(ap);
}

int mrd__store_sqlite_err(struct mrd_store *s, int rc, const char *what)
{
    mrd__store_log(s, 0, "database error (%s): %s (%s)", what, sqlite3_errstr(rc),
                   s->db ? sqlite3_errmsg(s->db) : "no handle");
    return -MRD_ERR_SQLITE;
}

int64_t mrd_store_global_now(const struct mrd_store *s)
{
    /* int64 all the way: through a double (53-bit mantissa) a value of ~1.8e18 ns would
     * land on a 256 ns grid (tests: aggregator_store, aggregator_daemon) */
    if (s->global_now)
        return s->global_now(s->global_now_arg);
    return s->anchor_realtime_ns + (mrd_clock_mono_ns() - s->anchor_monotonic_ns);
}

const char *mrd_store_run_id(const struct mrd_store *s)
{
    return s->run_id;
}

int mrd_store_notify_fd(const struct mrd_store *s)
{
    return s->efd;
}

static int exec(struct mrd_store *s, const char *sql, const char *what)
{
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        mrd__store_log(s, 0, "database error (%s): %s", what, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -MRD_ERR_SQLITE;
    }
    return 0;
}

/* First column of the first row of `sql` as text into buf ("" when no row). */
static int query_text(struct mrd_store *s, const char *sql, char *buf, size_t len)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return mrd__store_sqlite_err(s, rc, sql);
    buf[0] = 0;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return mrd__store_sqlite_err(s, rc, sql);
    return 0;
}

static void read_boot_id(char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (fgets(buf, (int)len, f))
        buf[strcspn(buf, "\r\n")] = 0;
    fclose(f);
}

static int valid_run_id(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n >= 128)
        return 0;
    for (; *r; r++)
        if (*r <= ' ' || *r > '~')
            return 0;
    return 1;
}

/* First column of the first row of `sql` as an integer into *v (0 when no row or NULL),
 * logged when it fails. Any other type (REAL, TEXT, BLOB) is refused, not converted:
 * -MRD_ERR_CONFIG. */
static int query_int(struct mrd_store *s, const char *sql, int64_t *v)
{
    int rc = mrd_db_int64(s->db, sql, NULL, v);
    if (rc == -MRD_ERR_CONFIG)
        mrd__store_log(s, 0, "database holds a non-integer where an integer belongs (%s)", sql);
    else if (rc < 0)
        return mrd__store_sqlite_err(s, sqlite3_extended_errcode(s->db), sql);
    return rc < 0 ? rc : 0;
}

/* v1 -> v2: string ids are bound per agent process. rank_strings' key becomes (rank,
 * agent_instance NOT NULL, local_id), its rows going to each rank's latest process
 * (ranks.agent_instance, 0 if none), and batches gains agent_instance (NULL for the rows
 * already there: a process that sent them gets the rank's highest seq as committed_seq).
 * Version 1 exists in two layouts: meridiand builds of one period changed it in place
 * without raising the version. The step tells them apart once, by rank_strings' columns;
 * the later layout is already v2's and needs nothing. The DDL here is v2's as it was
 * released, not schema.sql's (which later versions change). */
static int migrate_v1_v2(struct mrd_store *s)
{
    int64_t later;
    int rc = query_int(s, mrd_db_sql_store_v2_layout, &later);
    if (rc < 0 || later)
        return rc;
    return exec(s, mrd_db_sql_store_migrate_v1_v2, "migrate schema v1 -> v2");
}

/* The migration steps, one per version: steps[v - 1] takes version v to v + 1. */
static const struct {
    int (*run)(struct mrd_store *s);
    const char *what;
} migrations[] = {
    {migrate_v1_v2, "string ids are kept per agent process"},
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == MRD_STORE_SCHEMA_VERSION - 1,
               "one migration step per schema version: add the step that reaches the new one");

/* The database's schema version into *v (0 for a new, empty database) and the refusals
 * it decides, read by mrd_store_schema_read (readonly.c), the check meridian's readers
 * share: a newer version; tables but no version row (meridiand writes the row in the
 * transaction that creates the tables: not its file); a version that is not an integer
 * (REAL 1e30 is no version 1, 2.5 no version 2). */
static int read_version(struct mrd_store *s, long long *v)
{
    struct mrd_store_schema sc;
    *v = 0;
    if (mrd_store_schema_read(s->db, &sc) < 0) {
        mrd__store_log(s, 0, "database error (schema version): %s", sqlite3_errmsg(s->db));
        return -MRD_ERR_SQLITE;
    }
    switch (sc.state) {
    case MRD_STORE_SCHEMA_NEW:
    case MRD_STORE_SCHEMA_SUPPORTED:
        *v = sc.version;
        return 0;
    case MRD_STORE_SCHEMA_NEWER:
        mrd__store_log(s, 0,
                       "database schema version %lld is newer than this meridiand supports"
                       " (%d): use a newer meridian or a new output file",
                       sc.version, MRD_STORE_SCHEMA_VERSION);
        break;
    case MRD_STORE_SCHEMA_NOT_INTEGER:
        mrd__store_log(s, 0,
                       "database schema version %s is not an integer: not a meridian"
                       " database; use a new output file",
                       sc.odd);
        break;
    case MRD_STORE_SCHEMA_UNVERSIONED:
        mrd__store_log(s, 0,
                       "database has tables but no schema version: not a meridian database;"
                       " use a new output file");
        break;
    }
    return -MRD_ERR_CONFIG;
}

/* Every refusal, read-only, inside the caller's transaction: the version (into *v; see
 * read_version: a newer one among them), a database holding several runs or another run
 * than cfg->run_id. Nothing is written before these pass, so a refused file keeps its
 * bytes. */
static int check_file(struct mrd_store *s, const struct mrd_store_config *cfg, long long *v)
{
    int rc = read_version(s, v);
    if (rc < 0)
        return rc;
    if (*v == 0)
        return 0;
    int64_t runs;
    if ((rc = query_int(s, mrd_db_sql_run_count, &runs)) < 0)
        return rc;
    if (runs > 1) {
        mrd__store_log(s, 0, "database holds %lld runs; meridiand writes one run per database",
                       (long long)runs);
        return -MRD_ERR_CONFIG;
    }
    if (runs == 1 && cfg->run_id) {
        char id[128];
        if ((rc = query_text(s, mrd_db_sql_run_id, id, sizeof(id))) < 0)
            return rc;
        if (strcmp(cfg->run_id, id) != 0) {
            mrd__store_log(s, 0, "database belongs to run %s, not %s", id, cfg->run_id);
            return -MRD_ERR_CONFIG;
        }
    }
    return 0;
}

/* The refusals before the connection switches the file to WAL mode (a persistent change
 * of the file's header): one read transaction, ended without a write. */
static int check_before_wal(struct mrd_store *s, const struct mrd_store_config *cfg)
{
    long long v;
    int rc = exec(s, mrd_db_sql_begin, "begin check");
    if (rc < 0)
        return rc;
    rc = check_file(s, cfg, &v);
    int end = exec(s, mrd_db_sql_rollback, "end check"); /* read only: nothing to keep */
    return rc < 0 ? rc : end;
}

static int insert_run(struct mrd_store *s, uint32_t shard, const char *command, const char *boot)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, mrd_db_sql_run_insert, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return mrd__store_sqlite_err(s, rc, "runs");
    sqlite3_bind_text(st, 1, s->run_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, shard);
    sqlite3_bind_int64(st, 3, s->anchor_realtime_ns);
    sqlite3_bind_int64(st, 4, s->anchor_monotonic_ns);
    sqlite3_bind_text(st, 5, boot, -1, SQLITE_STATIC);
    if (command)
        sqlite3_bind_text(st, 6, command, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : mrd__store_sqlite_err(s, rc, "runs");
}

/* The run row, inside apply_schema's transaction after check_file (at most one run, and
 * cfg->run_id's if given): reuse the database's run (continuous timebase: same boot keeps
 * the anchors, another boot re-anchors on realtime), or create it. */
static int setup_run(struct mrd_store *s, const struct mrd_store_config *cfg)
{
    char boot[64];
    int64_t n;
    read_boot_id(boot, sizeof(boot));
    int rc = query_int(s, mrd_db_sql_run_count, &n);
    if (rc < 0)
        return rc;
    int64_t rt, width = mrd_clock_anchor_pair(&s->anchor_monotonic_ns, &rt);
    /* every bracket preempted: how far off UTC the run may sit (unless the uplink's global
     * time, not this realtime read, anchors it) */
    if (width > MRD_CLOCK_ANCHOR_WARN_NS && !s->global_now)
        mrd__store_log(s, 1,
                       "the timebase anchors were read %.1f ms apart (a busy host): global "
                       "time may sit up to %.1f ms off UTC",
                       width / 1e6, width / 2e6);
    s->anchor_realtime_ns =
        s->global_now ? s->global_now(s->global_now_arg) : rt + cfg->test_realtime_offset_ns;
    if (n == 0) {
        if (cfg->run_id) {
            snprintf(s->run_id, sizeof(s->run_id), "%s", cfg->run_id);
        } else {
            uint8_t r[16];
            if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
                return -errno;
            for (int i = 0; i < 16; i++)
                snprintf(s->run_id + 2 * i, 3, "%02x", r[i]);
        }
        if ((rc = insert_run(s, cfg->shard_id, cfg->command, boot)) < 0)
            return rc;
        mrd__store_log(s, 2, "new run %s", s->run_id);
        return 0;
    }
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, mrd_db_sql_run_anchors, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return mrd__store_sqlite_err(s, rc, "runs");
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        return mrd__store_sqlite_err(s, rc, "runs");
    }
    snprintf(s->run_id, sizeof(s->run_id), "%s", (const char *)sqlite3_column_text(st, 0));
    int64_t art = sqlite3_column_int64(st, 1), amono = sqlite3_column_int64(st, 2);
    int same_boot = boot[0] && strcmp(boot, (const char *)sqlite3_column_text(st, 3)) == 0;
    sqlite3_finalize(st);
    if (same_boot) {
        s->anchor_realtime_ns = art;
        s->anchor_monotonic_ns = amono;
        mrd__store_log(s, 2, "continuing run %s (same boot: timebase anchors kept)", s->run_id);
        return 0;
    }
    /* Another boot: the old monotonic anchor means nothing now. Re-anchor so that global
     * time continues from realtime, and record the new anchors. */
    mrd__store_log(s, 1,
                   "continuing run %s after a reboot of this host: timebase re-anchored on "
                   "CLOCK_REALTIME (offset to the previous anchor %lld ns)",
                   s->run_id,
                   (long long)(s->anchor_realtime_ns - s->anchor_monotonic_ns - (art - amono)));
    char sql[256];
    snprintf(sql, sizeof(sql), mrd_db_sql_run_reanchor_fmt, (long long)s->anchor_realtime_ns,
             (long long)s->anchor_monotonic_ns, boot);
    return exec(s, sql, "re-anchor run");
}

/* Schema, version and run, in one transaction (a crash leaves the database as it was):
 * the refusals first (check_file, before anything is written); then a new database gets
 * schema.sql and the version row; an older version is migrated step by step, then
 * schema.sql adds what is new (CREATE ... IF NOT EXISTS) and the version row is raised;
 * then the run row (setup_run). */
static int apply_schema(struct mrd_store *s, const struct mrd_store_config *cfg)
{
    long long v;
    int rc = exec(s, mrd_db_sql_begin_immediate, "begin schema");
    if (rc < 0)
        return rc;
    if ((rc = check_file(s, cfg, &v)) < 0)
        goto fail;
    long long from = v ? v : MRD_STORE_SCHEMA_VERSION;
    for (long long step = from; step < MRD_STORE_SCHEMA_VERSION; step++)
        if ((rc = migrations[step - 1].run(s)) < 0)
            goto fail;
    if ((rc = exec(s, mrd__store_event_ddl, "event tables")) < 0 ||
        (rc = exec(s, mrd__store_schema_text, "schema")) < 0)
        goto fail;
    if (v != MRD_STORE_SCHEMA_VERSION) {
        char sql[96];
        snprintf(sql, sizeof(sql), mrd_db_sql_schema_version_set_fmt, MRD_STORE_SCHEMA_VERSION);
        if ((rc = exec(s, sql, "schema_version")) < 0)
            goto fail;
    }
    if ((rc = setup_run(s, cfg)) < 0 || (rc = exec(s, mrd_db_sql_commit, "commit schema")) < 0)
        goto fail;
    for (long long step = from; step < MRD_STORE_SCHEMA_VERSION; step++)
        mrd__store_log(s, 0, "database migrated from schema version %lld to %lld: %s", step,
                       step + 1, migrations[step - 1].what);
    return 0;
fail:
    if (!sqlite3_get_autocommit(s->db))
        exec(s, mrd_db_sql_rollback, "rollback schema");
    return rc;
}

/* ---- writer thread ---- */

static void complete_txn(struct mrd_store *s, int status)
{
    struct mrd_store_item *head = s->txn_head, *tail = s->txn_tail;
    uint64_t n = 0;
    for (struct mrd_store_item *it = head; it; it = it->next) {
        it->status = status;
        if (it->msg)
            protobuf_c_message_free_unpacked(it->msg, NULL);
        it->msg = NULL;
        n++;
    }
    s->txn_head = s->txn_tail = NULL;
    s->txn_open = 0;
    s->txn_rows = 0;
    if (status == 0) { /* what a failed transaction held was not stored */
        s->wstats.transactions++;
        s->wstats.batches += s->txn.batches;
        s->wstats.duplicates += s->txn.duplicates;
        s->wstats.rows += s->txn.rows;
    } else {
        s->wstats.failed_transactions++;
    }
    memset(&s->txn, 0, sizeof(s->txn));
    pthread_mutex_lock(&s->mu);
    s->commit_soon = 0; /* answered by this end, however the transaction ended */
    if (head) {
        if (s->done_tail)
            s->done_tail->next = head;
        else
            s->done_head = head;
        s->done_tail = tail;
    }
    s->completed += n;
    s->stats = s->wstats;
    pthread_cond_broadcast(&s->cv_done);
    pthread_mutex_unlock(&s->mu);
    if (n) {
        uint64_t one = 1;
        ssize_t w = write(s->efd, &one, sizeof(one));
        (void)w; /* EAGAIN only when the counter is saturated: it is readable anyway */
    }
}

static int step_simple(struct mrd_store *s, int idx)
{
    sqlite3_stmt *st = s->st[idx];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : mrd__store_sqlite_err(s, rc, mrd__store_sql[idx]);
}

/* Ends the open transaction: COMMIT, or ROLLBACK and fail its items. A rollback also
 * empties the string cache (it may hold ids of rolled-back rows). */
static void end_txn(struct mrd_store *s, int failed)
{
    if (!s->txn_open)
        return;
    int64_t t0 = mrd_clock_mono_ns();
    if (!failed && step_simple(s, MRD__ST_COMMIT) == 0) {
        s->wstats.commit_ns += (uint64_t)(mrd_clock_mono_ns() - t0);
        complete_txn(s, 0);
        return;
    }
    if (!sqlite3_get_autocommit(s->db))
        step_simple(s, MRD__ST_ROLLBACK);
    mrd__store_strmap_clear(&s->strmap);
    s->undefined_refs = 0;
    mrd__store_log(s, 0, "transaction rolled back: its batches are not acknowledged");
    complete_txn(s, -MRD_ERR_SQLITE);
}

static void write_one(struct mrd_store *s, struct mrd_store_item *it)
{
    it->next = NULL;
    if (!s->txn_open) {
        if (step_simple(s, MRD__ST_BEGIN) < 0) {
            /* cannot even begin: fail this item alone */
            s->txn_head = s->txn_tail = it;
            s->txn_open = 1;
            end_txn(s, 1);
            return;
        }
        s->txn_open = 1;
    }
    int rc = mrd__store_write_item(s, it);
    if (s->txn_tail)
        s->txn_tail->next = it;
    else
        s->txn_head = it;
    s->txn_tail = it;
    /* the message is not needed once written: free it now, bounding memory by the queue */
    if (it->msg)
        protobuf_c_message_free_unpacked(it->msg, NULL);
    it->msg = NULL;
    if (rc < 0)
        end_txn(s, 1);
    else if (s->txn_rows >= s->commit_rows || it->kind == MRD_STORE_BARRIER ||
             it->kind == MRD_STORE_HELLO)
        end_txn(s, 0); /* a Hello waits for its reply: commit it (and what precedes) now */
}

static void *writer_main(void *arg)
{
    struct mrd_store *s = arg;
    struct timespec deadline = {0};
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int64_t idle0 = mrd_clock_mono_ns();
        while (!s->q_head && !s->stop && !(s->txn_open && (s->flush_req || s->commit_soon))) {
            if (!s->txn_open) {
                pthread_cond_wait(&s->cv_work, &s->mu);
            } else if (pthread_cond_timedwait(&s->cv_work, &s->mu, &deadline) != 0) {
                break; /* commit_ms passed */
            }
        }
        s->wstats.idle_ns += (uint64_t)(mrd_clock_mono_ns() - idle0);
        struct mrd_store_item *list = s->q_head;
        s->q_head = s->q_tail = NULL;
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);

        if (!list && s->txn_open) {
            end_txn(s, 0); /* deadline, flush or stop with nothing new */
        }
        while (list) {
            struct mrd_store_item *next = list->next;
            int was_open = s->txn_open;
            write_one(s, list);
            if (!was_open && s->txn_open) {
                clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_nsec += (long)(s->commit_ms % 1000) * 1000000L;
                deadline.tv_sec += s->commit_ms / 1000 + deadline.tv_nsec / 1000000000L;
                deadline.tv_nsec %= 1000000000L;
            }
            list = next;
        }
        pthread_mutex_lock(&s->mu);
        if (s->txn_open && !s->q_head) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int due = now.tv_sec > deadline.tv_sec ||
                      (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
            if (due || s->flush_req || s->commit_soon || s->stop) {
                pthread_mutex_unlock(&s->mu);
                end_txn(s, 0);
                pthread_mutex_lock(&s->mu);
            }
        }
        if (stop && !s->q_head && !s->txn_open)
            break;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- API ---- */

struct mrd_store_item *mrd_store_item_new(enum mrd_store_item_kind kind)
{
    struct mrd_store_item *it = calloc(1, sizeof(*it));
    if (it)
        it->kind = kind;
    return it;
}

void mrd_store_item_free(struct mrd_store_item *it)
{
    if (!it)
        return;
    if (it->msg)
        protobuf_c_message_free_unpacked(it->msg, NULL);
    free(it);
}

void mrd_store_submit(struct mrd_store *s, struct mrd_store_item *it)
{
    it->next = NULL;
    it->status = 0;
    it->duplicate = 0;
    pthread_mutex_lock(&s->mu);
    if (s->q_tail)
        s->q_tail->next = it;
    else
        s->q_head = it;
    s->q_tail = it;
    s->submitted++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
}

void mrd_store_commit_soon(struct mrd_store *s)
{
    pthread_mutex_lock(&s->mu);
    s->commit_soon = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
}

struct mrd_store_item *mrd_store_take_completions(struct mrd_store *s)
{
    uint64_t v;
    ssize_t r = read(s->efd, &v, sizeof(v)); /* non-blocking: resets the counter */
    (void)r;
    pthread_mutex_lock(&s->mu);
    struct mrd_store_item *head = s->done_head;
    s->done_head = s->done_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    return head;
}

int mrd_store_drain(struct mrd_store *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->submitted, failed_before = s->stats.failed_transactions;
    s->flush_req++;
    pthread_cond_signal(&s->cv_work);
    while (s->completed < target && s->writer_started)
        pthread_cond_wait(&s->cv_done, &s->mu);
    s->flush_req--;
    int failed = s->stats.failed_transactions != failed_before;
    pthread_mutex_unlock(&s->mu);
    return failed ? -MRD_ERR_SQLITE : 0;
}

void mrd_store_get_stats(struct mrd_store *s, struct mrd_store_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    pthread_mutex_unlock(&s->mu);
}

static int start_writer(struct mrd_store *s)
{
    int rc = mrd_worker_start(&s->writer, "mrd-writer", writer_main, s);
    if (rc < 0)
        return rc;
    s->writer_started = 1;
    return 0;
}

void mrd_store_close(struct mrd_store *s)
{
    if (!s)
        return;
    if (s->writer_started) {
        mrd_worker_stop(s->writer, &s->mu, &s->cv_work, &s->stop);
        s->writer_started = 0;
    }
    mrd_store_ckpt_stop(s->ckpt);
    s->ckpt = NULL;
    struct mrd_store_item *it = s->done_head;
    while (it) {
        struct mrd_store_item *next = it->next;
        mrd_store_item_free(it);
        it = next;
    }
    for (int i = 0; i < MRD__ST__COUNT; i++)
        sqlite3_finalize(s->st[i]);
    if (s->db) {
        /* move the WAL into the main file so the database is one file at rest */
        sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close(s->db);
    }
    mrd__store_strmap_free(&s->strmap);
    if (s->efd >= 0)
        close(s->efd);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int mrd_store_open(const struct mrd_store_config *cfg, struct mrd_store **out)
{
    int rc;
    *out = NULL;
    if (!cfg || !cfg->db_path || (cfg->run_id && !valid_run_id(cfg->run_id)))
        return -EINVAL;
    struct mrd_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->efd = -1;
    s->verbose = cfg->verbose;
    s->log = cfg->log;
    s->global_now = cfg->global_now;
    s->global_now_arg = cfg->global_now_arg;
    s->commit_ms = cfg->commit_ms ? cfg->commit_ms : 50;
    s->commit_rows = cfg->commit_rows ? cfg->commit_rows : 200000;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* commit deadlines ignore clock steps */
    pthread_cond_init(&s->cv_work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->cv_done, NULL);
    rc = mrd__store_strmap_init(&s->strmap,
                                cfg->string_cache_max ? cfg->string_cache_max : 1u << 21);
    if (rc < 0)
        goto fail;
    /* refusals first, WAL mode (a change of the file) after them: a refused file keeps
     * every byte, its journal mode included */
    char why[512];
    rc = mrd__store_sqlite_connect(cfg->db_path, cfg->sync_full, &s->db, why, sizeof(why));
    if (rc < 0) {
        mrd__store_log(s, 0, "%s", why);
        goto fail;
    }
    if ((rc = check_before_wal(s, cfg)) < 0)
        goto fail;
    if ((rc = mrd__store_sqlite_wal(s->db, cfg->db_path, why, sizeof(why))) < 0) {
        mrd__store_log(s, 0, "%s", why);
        goto fail;
    }
    if ((rc = apply_schema(s, cfg)) < 0)
        goto fail;
    for (int i = 0; i < MRD__ST__COUNT; i++) {
        int r = sqlite3_prepare_v3(s->db, mrd__store_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                   &s->st[i], NULL);
        if (r != SQLITE_OK) {
            rc = mrd__store_sqlite_err(s, r, mrd__store_sql[i]);
            goto fail;
        }
    }
    /* checkpoints run on their own thread (ckpt.c), not inside our COMMITs */
    struct mrd_store_ckpt_config cc = {.path = cfg->db_path, .log = s->log};
    if ((rc = mrd__store_strmap_load(s)) < 0 ||
        (rc = mrd_store_ckpt_start(s->db, &cc, &s->ckpt)) < 0)
        goto fail;
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0) {
        rc = -errno;
        goto fail;
    }
    if ((rc = start_writer(s)) < 0)
        goto fail;
    *out = s;
    return 0;
fail:
    mrd_store_close(s);
    return rc;
}
