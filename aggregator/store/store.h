/* meridian store: the aggregator's SQLite database and the writer thread that owns it.
 *
 * Where it sits: ingest (event loop thread) decodes frames and submits items here; the
 * writer thread binds and steps prepared statements inside big transactions, commits, and
 * hands completions back to the loop (notify fd), which then sends the acks. A batch is
 * acknowledged only after the COMMIT that stored it returned.
 *
 * Workload: up to 512 ranks x 50,000 events/s (bursts 200,000) into one database on one
 * writer thread: the hot path is bind+step of integer columns, with no allocation per row.
 *
 * Threads: mrd_store_open/close on the owning thread; mrd_store_submit,
 * mrd_store_take_completions and mrd_store_release on ONE thread (the loop); the writer
 * thread is internal; mrd_store_global_now and the accessors from any thread.
 * Handoff: one mutex + condition variable for the submit queue, the same mutex for the
 * completion list, and an eventfd that becomes readable when completions are pending.
 *
 * Durability: journal_mode=WAL with synchronous=NORMAL. A committed transaction is in
 * the WAL file (written with write(2)) before COMMIT returns, so it survives the daemon
 * being killed (SIGKILL) at any moment; it may be lost on power loss or a kernel crash
 * (the WAL is fsynced only at checkpoints). Pass sync_full for power-loss durability.
 *
 * Checkpoints: the pragmas set wal_autocheckpoint=16384 pages (so does every program that
 * applies mrd_store_pragmas()); the store instead checkpoints at that WAL size on a
 * background thread with its own connection, so a COMMIT (and the acks behind it) never
 * waits for a checkpoint's copying and fsync. If that thread falls behind and the WAL
 * reaches 4 x 16384 pages (256 MiB), the writer checkpoints itself after its commit:
 * the WAL file stays bounded. The connection setup and the checkpointer are exported
 * (end of this file) so that other programs writing a database the way meridiand does
 * (the ingest benchmark's ceiling) take the same storage path from here.
 */
#ifndef MRD_STORE_H
#define MRD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "meridian.pb-c.h"

/* The database schema version this build writes (schema_version.version). Older versions
 * are migrated at open, one step per version; newer ones are refused. History: SCHEMA.md. */
#define MRD_STORE_SCHEMA_VERSION 2

struct mrd_store;

struct mrd_store_config {
    const char *db_path; /* required; created if absent */
    const char *run_id;  /* NULL: reuse the database's run, or generate one */
    uint32_t shard_id;
    const char *command;     /* stored in runs.command for a new run; may be NULL */
    uint32_t commit_ms;      /* commit a transaction at most this long after its first
                                item (default 50) */
    uint32_t commit_rows;    /* ... or once it holds this many rows (default 200000) */
    size_t string_cache_max; /* (rank, local id) entries cached (default 1<<21), each
                                owned by one agent instance: 24 bytes a slot, at most 2
                                slots an entry (96 MiB at the default); at the cap the
                                cache is cleared and refilled from rank_strings */
    int sync_full;           /* 1: synchronous=FULL (power-loss durable, slower) */
    int verbose;             /* 0 errors and notices, 1 more, -1 errors only */
    FILE *log;               /* NULL: stderr; lines start with "meridiand: " */
    /* A node aggregator aligned to a reference (aggregator/uplink): when set, the global
     * timebase is this function (any thread, lock-free) instead of the anchors, and a new
     * run's anchor_realtime_ns is its value at the anchor instant. NULL: the anchors. */
    int64_t (*global_now)(void *arg);
    void *global_now_arg;
    /* TESTS ONLY (meridiand --test-realtime-offset-ns): added to CLOCK_REALTIME when a new
     * run is anchored, so that aggregators on one machine get timebases seconds apart. */
    int64_t test_realtime_offset_ns;
};

/* What an item asks the writer to do. The writer owns the message after submit and
 * frees it with protobuf_c_message_free_unpacked. */
enum mrd_store_item_kind {
    MRD_STORE_HELLO = 1, /* ranks + gpus rows; completion carries committed_seq */
    MRD_STORE_BATCH,     /* events, strings, counters; de-duplicated by (rank, seq); string
                            ids resolved per (rank, agent_instance) */
    MRD_STORE_GOODBYE,   /* agent_counters (max) and ranks.goodbye = 1 */
    MRD_STORE_COUNTER,   /* aggregator_counters[name] += delta (no message) */
    MRD_STORE_BARRIER,   /* nothing: completes once everything before it committed */
};

/* One unit of work, allocated by the submitter (mrd_store_item_new) and returned in the
 * completion list after its transaction committed (or failed). */
struct mrd_store_item {
    struct mrd_store_item *next; /* queue link: owned by the store while submitted */
    enum mrd_store_item_kind kind;
    uint64_t token; /* submitter's tag (the connection), returned as is */
    uint32_t rank;
    uint64_t agent_instance;  /* HELLO, BATCH: the connection's Hello.agent_instance: string
                                 ids and committed_seq are this agent process's */
    uint32_t wire_bytes;      /* frame bytes, stored in batches.wire_bytes */
    size_t cost;              /* bytes charged against the caller's caps */
    int64_t received_ns;      /* global time the frame was read */
    ProtobufCMessage *msg;    /* Hello, Batch or Goodbye; freed by the writer */
    const char *counter_name; /* MRD_STORE_COUNTER: static string */
    int64_t counter_delta;
    /* results, valid in a completion */
    int status;             /* 0 committed; negative error (not stored) */
    int duplicate;          /* BATCH: (rank, seq) had been stored before */
    uint64_t seq;           /* BATCH: its seq */
    uint64_t committed_seq; /* HELLO: max committed seq of this agent instance's batches;
                               if it has none, of the rank's (0 = none): a new process
                               moves past its predecessor's numbers */
};

/* Opens or creates the database at cfg->db_path: pragmas, schema (embedded schema.sql;
 * a database of an older schema version is migrated to MRD_STORE_SCHEMA_VERSION), the run
 * row and its timebase anchor, all in one transaction; the string cache; then starts the
 * writer thread. A database of a newer schema version, one with tables but no schema
 * version (or a version that is not an integer), one holding several runs, or one of
 * another run (cfg->run_id set and different) is refused with -MRD_ERR_CONFIG and a log
 * line saying what to do, before anything is written: the file is left byte for byte as
 * it was, not migrated and not switched to WAL mode (the store sets WAL only after these
 * checks).
 * Returns 0 and *out; -ENOMEM, -MRD_ERR_SQLITE, -MRD_ERR_CONFIG, or a negative errno.
 * Errors are logged. */
int mrd_store_open(const struct mrd_store_config *cfg, struct mrd_store **out);

/* Drains everything submitted, commits, stops the writer, checkpoints and closes the
 * database. Completions still pending are freed (callers wanting them call
 * mrd_store_drain first). Accepts NULL. Owning thread only. */
void mrd_store_close(struct mrd_store *s);

/* The run this database holds (valid until close). */
const char *mrd_store_run_id(const struct mrd_store *s);

/* The global timebase now: anchor_realtime_ns + (CLOCK_MONOTONIC now - anchor_monotonic_ns),
 * or cfg->global_now() when the config set one. Lock-free; any thread. */
int64_t mrd_store_global_now(const struct mrd_store *s);

/* Allocates a zeroed item of `kind` (one malloc). Returns NULL on allocation failure. */
struct mrd_store_item *mrd_store_item_new(enum mrd_store_item_kind kind);

/* Frees a completed item and its message, if any. Accepts NULL. */
void mrd_store_item_free(struct mrd_store_item *it);

/* Queues it for the writer; the store owns it until it comes back as a completion.
 * Never blocks and never refuses: the caller bounds what it submits (item->cost against
 * its own caps, see ingest). Loop thread. */
void mrd_store_submit(struct mrd_store *s, struct mrd_store_item *it);

/* Asks the writer to commit as soon as it has written everything queued, instead of
 * waiting for commit_ms: the submitter stopped reading at its cap and waits for the
 * release that comes with the commit. Cheap; loop thread. */
void mrd_store_commit_soon(struct mrd_store *s);

/* A file descriptor (eventfd) that is readable while completions are pending. */
int mrd_store_notify_fd(const struct mrd_store *s);

/* Takes every pending completion, in submission order, as a list linked by ->next
 * (NULL when none), and resets the notify fd. The caller frees each item with
 * mrd_store_item_free. Loop thread. */
struct mrd_store_item *mrd_store_take_completions(struct mrd_store *s);

/* Blocks until every item submitted so far has completed (committed or failed); the
 * completions stay pending for mrd_store_take_completions. Returns -MRD_ERR_SQLITE when a
 * transaction failed while it waited, else 0: a failure before the call is not reported
 * here; each item's own status (mrd_store_take_completions) is the authority. Loop thread
 * (used at shutdown, for a log line, and in tests). */
int mrd_store_drain(struct mrd_store *s);

/* Statistics of committed transactions (any thread; updated at each commit). */
struct mrd_store_stats {
    uint64_t batches, duplicates, rows, transactions, failed_transactions;
    uint64_t idle_ns;       /* writer time spent waiting for work or for a commit deadline */
    uint64_t commit_ns;     /* writer time spent in COMMIT */
    uint64_t string_hits;   /* wire string ids resolved from the cache ... */
    uint64_t string_misses; /* ... and by a rank_strings query (counted as looked up, also
                               in transactions that later failed) */
};
void mrd_store_get_stats(struct mrd_store *s, struct mrd_store_stats *st);

/* Process-wide SQLite settings for a process whose SQLite work is the store's: turns
 * off SQLite's memory statistics (a global mutex on every allocation). Call once from
 * main before any thread uses SQLite (meridiand does); optional. */
void mrd_store_process_init(void);

/* The schema text (schema.sql, embedded at build time) and the pragma statements the
 * store executes on every connection, so other programs (the ingest benchmark's ceiling)
 * create exactly the same database. Static strings. */
const char *mrd_store_schema_sql(void);
const char *mrd_store_pragmas(void);

/* ---- the storage path, for any program that writes a database like the store ---- */

/* The SQL text of the rows the writer adds for a batch, so that a program writing the same
 * rows (the ingest benchmark's ceiling) prepares exactly the store's statements instead of
 * copies (SQL text lives in one place: write.c). Parameters are numbered ?1.. as noted;
 * every statement is a single INSERT or SELECT to prepare once and bind per row. */
enum mrd_store_sql {
    MRD_STORE_SQL_BATCH,       /* INSERT OR IGNORE a batches row: ?1 rank, ?2 seq, ?3 events,
                                  ?4 wire_bytes, ?5 received_ns, ?6 agent_instance */
    MRD_STORE_SQL_STRING_FIND, /* SELECT strings.id of the text ?1 (no row: not stored yet) */
    MRD_STORE_SQL_STRING_ADD,  /* INSERT the text ?1 into strings (its id: last_insert_rowid) */
    MRD_STORE_SQL_RANK_STRING, /* bind a wire string id: ?1 rank, ?2 agent_instance, ?3 local
                                  id, ?4 strings.id */
};

/* The statement `which` (static string), or NULL for a value outside the enum. Any thread. */
const char *mrd_store_sql_text(enum mrd_store_sql which);

/* The INSERT of one event of `kind` (enum mrd_event_kind, MRD_EV_KERNEL..MRD_EV_GPU_CLOCK)
 * into its table: ?1 is the rank, then one parameter per column in the table's order in
 * schema.sql (string columns take strings.id, NULL for none). Static string, or NULL for
 * an unknown kind. Any thread. */
const char *mrd_store_event_sql(int kind);

struct sqlite3; /* sqlite3.h's handle */

/* Opens (creating if absent) the database at path the way the store opens its writer
 * connection: READWRITE | CREATE | NOMUTEX (one thread owns it), extended result codes,
 * mrd_store_pragmas() (then synchronous=FULL if sync_full), and checks that WAL mode took.
 * WAL mode is recorded in the file itself (its header), so this changes an existing file
 * in rollback-journal mode even if the caller then decides not to use it.
 * It applies no schema and installs no checkpointer (mrd_store_ckpt_start). Returns 0 and
 * *out (the caller closes it with sqlite3_close), or -MRD_ERR_SQLITE with a one-line
 * reason in err[errlen] (nothing is logged). Any thread. */
int mrd_store_sqlite_open(const char *path, int sync_full, struct sqlite3 **out, char *err,
                          size_t errlen);

#define MRD_STORE_CKPT_PAGES 16384 /* = the wal_autocheckpoint of mrd_store_pragmas() */

struct mrd_store_ckpt; /* a WAL checkpointer: one thread with its own connection */
struct mrd_store_ckpt_config {
    const char *path; /* the database file the writer connection has open; required */
    int pages;        /* WAL size (pages) that wakes the checkpointer; 0: MRD_STORE_CKPT_PAGES.
                         At 4 x pages the writer checkpoints inline after its commit. */
    FILE *log;        /* NULL: stderr; only failures are logged */
    const char *who;  /* log line prefix; NULL: "meridiand" */
};

/* Moves the WAL checkpoints of `writer` (a connection from mrd_store_sqlite_open) off its
 * commits: opens a second connection to cfg->path, starts a thread (all signals blocked)
 * and installs a WAL hook on writer that replaces SQLite's automatic checkpoint. Call it
 * on the thread that owns writer, before writer is used by another thread. Returns 0 and
 * *out; -EINVAL, -ENOMEM, -MRD_ERR_SQLITE (logged), or a negative errno. */
int mrd_store_ckpt_start(struct sqlite3 *writer, const struct mrd_store_ckpt_config *cfg,
                         struct mrd_store_ckpt **out);

/* Stops the thread, closes its connection, and gives writer back SQLite's automatic
 * checkpoint (at MRD_STORE_CKPT_PAGES). Call when no thread is using writer; writer stays
 * open. Accepts NULL. */
void mrd_store_ckpt_stop(struct mrd_store_ckpt *c);

/* What the checkpointer did so far. Any thread. */
struct mrd_store_ckpt_stats {
    uint64_t requests;    /* commits that left >= pages (and < 4 x pages) in the WAL */
    uint64_t served;      /* of those, the ones a finished background run came after */
    uint64_t background;  /* background checkpoints run (requests merge into one run) */
    uint64_t inline_runs; /* checkpoints the writer attempted itself at the 4 x pages cap
                           * (one the background run kept BUSY counts too) */
};
void mrd_store_ckpt_get_stats(struct mrd_store_ckpt *c, struct mrd_store_ckpt_stats *st);

/* ---- the read side (readonly.c): the schema check every reader shares with the store ---- */

/* What a database's schema_version says (mrd_store_schema_read). */
enum mrd_store_schema_state {
    MRD_STORE_SCHEMA_NEW,         /* no tables at all: a new (or empty SQLite) database */
    MRD_STORE_SCHEMA_SUPPORTED,   /* version 1..MRD_STORE_SCHEMA_VERSION */
    MRD_STORE_SCHEMA_NEWER,       /* a version above MRD_STORE_SCHEMA_VERSION: refused */
    MRD_STORE_SCHEMA_UNVERSIONED, /* tables but no version row: not written by meridiand */
    MRD_STORE_SCHEMA_NOT_INTEGER, /* a version that is not an integer (1e30, 2.5, text) */
};

struct mrd_store_schema {
    enum mrd_store_schema_state state;
    long long version; /* SUPPORTED, NEWER: the version (the highest row); else 0 */
    char odd[64];      /* NOT_INTEGER: the value as SQL quote() writes it */
};

/* Reads db's schema version and classifies it against MRD_STORE_SCHEMA_VERSION: the one
 * decision, for meridiand (which refuses all but NEW and SUPPORTED before it writes) and
 * for every reader (mrd_store_open_readonly). Runs SELECTs only: call it inside the
 * caller's read transaction or on a read-only connection. Returns 0 and *out, or
 * -MRD_ERR_SQLITE (sqlite3_errmsg(db) says why; a file that is not a database fails
 * here). The thread that owns db. */
int mrd_store_schema_read(struct sqlite3 *db, struct mrd_store_schema *out);

/* Opens the meridian database at path for reading and changes nothing on disk: no byte of
 * the file, no -wal, -shm or -journal file left (a WAL database without a -wal file is
 * opened immutable; see readonly.c for why and the one race that accepts). Before SQLite
 * sees it the file must exist, be a readable, non-empty regular file with SQLite's
 * header; then its schema (mrd_store_schema_read) must be SUPPORTED, a newer version
 * refused, and it must have a runs table. Returns 0 and *out (SQLITE_OPEN_READONLY; the
 * caller closes it with sqlite3_close), or a negative code (-errno of stat/open/read,
 * -EISDIR, -MRD_ERR_CONFIG: not a meridian database or a newer version, -MRD_ERR_SQLITE,
 * -ENOMEM) with a one-line message in why[whylen] that names the path and what to do,
 * e.g. "run.db has schema version 7, newer than this meridian supports (2): use a newer
 * meridian" (nothing is logged). Any thread. */
int mrd_store_open_readonly(const char *path, struct sqlite3 **out, char *why, size_t whylen);

#endif
