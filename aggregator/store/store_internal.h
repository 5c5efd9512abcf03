/* meridian store internals shared by store.c (open, queue, writer thread) and write.c
 * (what each item writes). Not for other modules: see store.h. */
#ifndef MRD_STORE_INTERNAL_H
#define MRD_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#include "events.h"
#include "store.h"

/* Prepared statements, one per SQL text in write.c's table (same order). */
enum {
    MRD__ST_BEGIN,
    MRD__ST_COMMIT,
    MRD__ST_ROLLBACK,
    MRD__ST_BATCH,
    /* one INSERT per event kind: MRD__ST_EVENT(kind), kinds 1..MRD_EV__COUNT-1 */
    MRD__ST_EVENT_LAST = MRD__ST_BATCH + MRD_EV__COUNT - 1,
    MRD__ST_STR_FIND,
    MRD__ST_STR_INS,
    MRD__ST_RSTR_PUT,
    MRD__ST_RSTR_GET,
    MRD__ST_AGENT_COUNTER,
    MRD__ST_AGG_COUNTER,
    MRD__ST_RANK_HELLO,
    MRD__ST_RANK_PROCESS,
    MRD__ST_GPU_PUT,
    MRD__ST_RUN_WORLD,
    MRD__ST_RANK_SEEN,
    MRD__ST_RANK_GOODBYE,
    MRD__ST_MAX_SEQ,
    MRD__ST_MAX_SEQ_OWN,
    MRD__ST__COUNT
};

/* (rank, local string id) -> strings.id of one agent process, open addressing, linear
 * probing. Each slot keeps the agent instance that owns its binding: a lookup for another
 * instance of the rank misses (and its put takes the slot over), so a rank whose process
 * changed invalidates only its own entries. Value -1 caches "not defined" (a reference to
 * an id no batch defined). Cap: max entries (24 bytes per slot, at most 2 slots per entry
 * plus 1024); at the cap the map is emptied (a cache: misses fall back to rank_strings). */
struct mrd__strslot {
    uint64_t key;  /* 0 = empty slot; key = (rank << 32 | local_id) + 1 is never 0 */
    uint64_t inst; /* Hello.agent_instance of the process whose local id this binds */
    int64_t val;   /* strings.id, or -1 */
};
struct mrd__strmap {
    struct mrd__strslot *slot;
    size_t slots, n, max;
};

struct mrd_store {
    sqlite3 *db;
    sqlite3_stmt *st[MRD__ST__COUNT];
    char run_id[128];
    int64_t anchor_realtime_ns, anchor_monotonic_ns;
    int64_t (*global_now)(void *arg); /* cfg->global_now (NULL: the anchors) */
    void *global_now_arg;
    uint32_t commit_ms, commit_rows;
    int verbose;
    FILE *log;

    /* writer thread private */
    struct mrd__strmap strmap;
    int txn_open;
    uint64_t txn_rows;
    struct mrd_store_stats txn; /* batches, duplicates, rows of the open transaction */
    struct mrd_store_item *txn_head, *txn_tail;
    uint64_t undefined_refs; /* string ids referenced but never defined (this txn) */
    int string_err;          /* a string lookup's SQL error, for the row being bound */
    struct mrd_store_stats wstats;

    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    struct mrd_store_item *q_head, *q_tail;
    struct mrd_store_item *done_head, *done_tail;
    uint64_t submitted, completed;
    int flush_req, commit_soon, stop;
    struct mrd_store_stats stats; /* copied from wstats at each commit */

    pthread_t writer;
    int writer_started;
    int efd;

    struct mrd_store_ckpt *ckpt; /* WAL checkpoints on their own thread (ckpt.c) */
};

/* The INSERT statement of event kind k (enum mrd_event_kind). */
#define MRD__ST_EVENT(k) (MRD__ST_BATCH + (k))

/* write.c */
extern const char *const mrd__store_sql[MRD__ST__COUNT];
/* CREATE TABLE IF NOT EXISTS of every event kind's table, generated from proto/kinds.h;
 * run before schema.sql (whose indexes name some of them). */
extern const char mrd__store_event_ddl[];
int mrd__store_write_item(struct mrd_store *s, struct mrd_store_item *it);
int mrd__store_strmap_init(struct mrd__strmap *m, size_t max);
void mrd__store_strmap_clear(struct mrd__strmap *m);
void mrd__store_strmap_free(struct mrd__strmap *m);
int mrd__store_strmap_load(struct mrd_store *s);

/* ckpt.c: mrd_store_sqlite_open in two halves, so the store can refuse a file before the
 * switch to WAL mode changes it. connect: open (created if missing), extended result
 * codes, mrd__store_conn_pragmas() (+ synchronous=FULL if sync_full); 0 and *out, or
 * -MRD_ERR_SQLITE with err set. wal: journal_mode=WAL, checked; 0 or -MRD_ERR_SQLITE with
 * err set (db stays open). Neither logs. */
int mrd__store_sqlite_connect(const char *path, int sync_full, sqlite3 **out, char *err,
                              size_t errlen);
int mrd__store_sqlite_wal(sqlite3 *db, const char *path, char *err, size_t errlen);

/* store.c */
/* mrd_store_pragmas() less journal_mode=WAL: settings of the connection only, none of
 * which writes to the file. */
const char *mrd__store_conn_pragmas(void);
void mrd__store_log(const struct mrd_store *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mrd__store_sqlite_err(struct mrd_store *s, int rc, const char *what);

#endif
