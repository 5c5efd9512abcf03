/* aggregator_store, schema versions: what mrd_store_open does with databases of other
 * schema versions than its own (MRD_STORE_SCHEMA_VERSION, 2).
 *
 * Each case builds a database file with plain SQL (schema.sql as embedded in the store,
 * then rewound to the older layout where the case needs it), opens it with the store,
 * and reads it back with plain SQL. Checked: a version 1 database of either layout (before
 * and after string ids were bound per agent process) is migrated to version 2 with its
 * rows kept and usable; a migration that fails halfway leaves the version 1 database as it
 * was (one transaction); a database of a newer version, with tables but no version, with
 * a version that is not an integer, of another run or of several runs is refused with a
 * log line that says what to do, and left byte for byte as it was: not migrated, and
 * not switched from the rollback journal to WAL mode either. A migrated database answers
 * a Hello's committed seq (also for rows stored before the migration) through the index
 * the migration added.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "check.h"
#include "check_sql.h"
#include "error.h"
#include "frame.h"
#include "store.h"
#include "test_store_schema.h"

static char g_path[256];
static char g_log[4096];  /* what the last open_logged logged */
static const char *g_run; /* the run id open_logged asks for (NULL: any) */

/* mrd_store_open on g_path (run id g_run) with its log captured in g_log; returns its
 * result. */
static int open_logged(struct mrd_store **s)
{
    FILE *lf = tmpfile();
    CHECK(lf != NULL);
    struct mrd_store_config cfg = {.db_path = g_path, .run_id = g_run, .commit_ms = 5, .log = lf};
    int rc = mrd_store_open(&cfg, s);
    CHECK_EQ(fflush(lf), 0);
    rewind(lf);
    size_t n = fread(g_log, 1, sizeof(g_log) - 1, lf);
    g_log[n] = 0;
    fclose(lf);
    return rc;
}

static sqlite3 *db_open(void)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_path, &db), SQLITE_OK);
    return db;
}

static void db_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "test sql: %s\n", err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    CHECK_EQ(rc, SQLITE_OK);
}

/* A version 1 database. later = 0: the layout before string ids were per agent process
 * (rank_strings keyed by rank and local id, batches without agent_instance); later = 1:
 * the layout meridiand wrote after that change while still calling it version 1. */
static void make_v1(int later)
{
    remove(g_path);
    sqlite3 *db = db_open();
    db_exec(db, "PRAGMA journal_mode=WAL");
    db_exec(db, mrd_store_schema_sql());
    if (!later)
        db_exec(db, "DROP INDEX IF EXISTS batches_rank_instance;"
                    "ALTER TABLE batches DROP COLUMN agent_instance;"
                    "DROP TABLE rank_strings;"
                    "CREATE TABLE rank_strings (rank INTEGER NOT NULL, local_id INTEGER"
                    " NOT NULL, string_id INTEGER NOT NULL, PRIMARY KEY (rank, local_id))"
                    " WITHOUT ROWID;");
    db_exec(db, "INSERT INTO schema_version VALUES(1);"
                "INSERT INTO ranks(rank, agent_instance) VALUES(2, 77);"
                "INSERT INTO strings(id, value) VALUES(40, 'old_kernel'), (41, 'old_nvtx');"
                "INSERT INTO kernels(rank, start_ns, end_ns, name_id) VALUES(2, 1, 2, 40);");
    if (!later)
        db_exec(db, "INSERT INTO rank_strings VALUES(2, 1, 40), (2, 2, 41), (3, 1, 41);"
                    "INSERT INTO batches VALUES(2, 7, 1, 100, 5);");
    else
        db_exec(db, "INSERT INTO rank_strings VALUES(2, 77, 1, 40), (2, 77, 2, 41),"
                    " (3, 0, 1, 41);"
                    "INSERT INTO batches VALUES(2, 7, 1, 100, 5, 77);");
    sqlite3_close(db);
}

static ProtobufCMessage *decode(uint8_t *frame, size_t len)
{
    struct mrd_frame_header h;
    CHECK_OK(mrd_frame_header_parse(frame, len, MRD_FRAME_DEFAULT_MAX, &h));
    ProtobufCMessage *m = NULL;
    CHECK_OK(mrd_frame_decode(&h, frame + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &m));
    free(frame);
    return m;
}

/* Batch seq of rank 2's process 77 with one kernel named "old_kernel", whose id the
 * builder takes as committed (the batch before it defined it): the batch references wire
 * id 1 without defining it, so only the migrated rank_strings row can resolve it. */
static void send_old_kernel(struct mrd_store *s, uint64_t seq)
{
    struct mrd_batch_builder_config bc = {.run_id = "r",
                                          .rank = 2,
                                          .agent_instance = 77,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = 100,
                                          .compress_level = 1};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    uint8_t *f;
    size_t n;
    struct mrd_kernel k = {.start = 10, .end = 20};
    for (uint64_t q = seq - 1; q <= seq; q++) {
        k.name = mrd_batch_builder_intern(b, "old_kernel");
        CHECK_EQ(k.name, 1);
        CHECK_OK(mrd_batch_add_kernel(b, &k));
        CHECK_OK(mrd_batch_builder_finish(b, q, &f, &n));
        if (q < seq) { /* the defining batch: taken as acknowledged, not sent */
            free(f);
            mrd_batch_builder_acked(b, q);
        }
    }
    mrd_batch_builder_free(b);
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_BATCH);
    CHECK(it != NULL);
    it->rank = 2;
    it->agent_instance = 77;
    it->wire_bytes = (uint32_t)n;
    it->msg = decode(f, n);
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0);
    mrd_store_submit(s, it);
    CHECK_OK(mrd_store_drain(s));
    struct mrd_store_item *c = mrd_store_take_completions(s);
    CHECK(c == it && c->next == NULL);
    CHECK_EQ(c->status, 0);
    CHECK_EQ(c->duplicate, 0);
    mrd_store_item_free(c);
}

/* A Hello of rank's process `instance` through the store: its committed_seq. */
static uint64_t hello_committed(struct mrd_store *s, uint32_t rank, uint64_t instance)
{
    Meridian__V1__Hello src = MERIDIAN__V1__HELLO__INIT;
    src.protocol_version = 1;
    src.run_id = "r";
    src.rank = rank;
    src.world_size = 4;
    src.host = "node7";
    src.pid = 4242;
    src.agent_instance = instance;
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_frame_encode(MRD_FRAME_HELLO, &src.base, 0, MRD_FRAME_DEFAULT_MAX, &f, &n));
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_HELLO);
    CHECK(it != NULL);
    it->rank = rank;
    it->agent_instance = instance;
    it->msg = decode(f, n);
    mrd_store_submit(s, it);
    CHECK_OK(mrd_store_drain(s));
    struct mrd_store_item *c = mrd_store_take_completions(s);
    CHECK(c == it && c->next == NULL);
    CHECK_EQ(c->status, 0);
    uint64_t seq = c->committed_seq;
    mrd_store_item_free(c);
    return seq;
}

static int64_t has_column(sqlite3 *db, const char *table, const char *col)
{
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM pragma_table_info('%s') WHERE name = '%s'",
             table, col);
    return check_sql_int(db, sql);
}

/* A version 1 database of either layout opens as version 2 with every row kept: the old
 * bindings go to each rank's latest process (0 when the rank has none), which resolves
 * its committed wire ids through them; a Hello of that process is told seq 7 (the rank's
 * highest: in the older layout the row has no agent_instance), then its own 8; a
 * committed-seq lookup uses the index the migration added; a second open migrates
 * nothing. */
static void check_v1(int later)
{
    make_v1(later);
    struct mrd_store *s = NULL;
    CHECK_OK(open_logged(&s));
    CHECK(strstr(g_log, "database migrated from schema version 1 to 2") != NULL);
    CHECK_EQ(hello_committed(s, 2, 77), 7);
    send_old_kernel(s, 8);
    CHECK_EQ(hello_committed(s, 2, 77), 8);
    CHECK_EQ(hello_committed(s, 2, 78), 8); /* a new process: the rank's highest */
    CHECK_EQ(hello_committed(s, 2, 77), 8); /* back: its own */
    mrd_store_close(s);

    sqlite3 *db = db_open();
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM schema_version"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), 2);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM rank_strings"), 3);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM rank_strings WHERE rank = 2 AND"
                               " agent_instance = 77 AND ((local_id = 1 AND string_id = 40)"
                               " OR (local_id = 2 AND string_id = 41))"),
             2);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM rank_strings WHERE rank = 3 AND"
                               " agent_instance = 0 AND local_id = 1 AND string_id = 41"),
             1);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE"
                               " 'rank_strings_%'"),
             0);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM batches"), 2);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM batches WHERE agent_instance IS NULL"),
             later ? 0 : 1);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM batches WHERE seq = 8"
                               " AND agent_instance = 77"),
             1);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                               " AND name = 'batches_rank_instance'"),
             1);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM strings"), 2);
    /* the kernel stored before and the one after, both named through rank_strings */
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM kernels WHERE rank = 2 AND name_id = 40"), 2);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM kernels"), 2);
    check_seq_index(db); /* test_store.c */
    sqlite3_close(db);

    CHECK_OK(open_logged(&s));
    CHECK(strstr(g_log, "migrated") == NULL);
    mrd_store_close(s);
}

/* The v1 -> v2 step fails after it altered batches (a table in the way of renaming
 * rank_strings): the whole open fails and the database is still version 1 as it was. */
static void check_v1_atomic(void)
{
    make_v1(0);
    sqlite3 *db = db_open();
    db_exec(db, "CREATE TABLE rank_strings_v1 (x INTEGER)");
    sqlite3_close(db);
    struct mrd_store *s = NULL;
    int rc = open_logged(&s);
    CHECK_EQ(rc, -MRD_ERR_SQLITE);
    CHECK(s == NULL);
    db = db_open();
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM schema_version"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), 1);
    CHECK_EQ(has_column(db, "batches", "agent_instance"), 0);
    CHECK_EQ(has_column(db, "rank_strings", "agent_instance"), 0);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM rank_strings"), 3);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM runs"), 0);
    sqlite3_close(db);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK_EQ(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    CHECK_GT(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n);
    CHECK(buf != NULL);
    CHECK_EQ(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The file's journal mode as its header records it (bytes 18 and 19, the read and write
 * format versions): 1 rollback journal, 2 WAL. */
static int header_mode(void)
{
    size_t n;
    char *h = read_all(g_path, &n);
    CHECK_GE(n, 100);
    CHECK_EQ(h[18], h[19]);
    int mode = h[18];
    free(h);
    return mode;
}

/* Switches g_path to the rollback journal (as a file another program wrote may well be),
 * so that a refusal that switched it to WAL mode would show in its bytes. */
static void make_rollback(void)
{
    sqlite3 *db = db_open();
    db_exec(db, "PRAGMA journal_mode=DELETE");
    sqlite3_close(db);
    CHECK_EQ(header_mode(), 1);
}

/* Opening must be refused with -MRD_ERR_CONFIG, the log line `why`, and the file exactly
 * as it was (its journal mode included). */
static void check_refused(const char *why)
{
    size_t n0, n1;
    char *before = read_all(g_path, &n0);
    struct mrd_store *s = NULL;
    CHECK_EQ(open_logged(&s), -MRD_ERR_CONFIG);
    CHECK(s == NULL);
    if (!strstr(g_log, why))
        fprintf(stderr, "expected log line: %s\ngot: %s\n", why, g_log);
    CHECK(strstr(g_log, why) != NULL);
    char *after = read_all(g_path, &n1);
    CHECK_EQ(n0, n1);
    CHECK(memcmp(before, after, n0) == 0);
    free(before);
    free(after);
}

/* A fresh database is version 2; made version 99 (by a future meridiand that also added a
 * table and wrote rows), it is refused and keeps everything. */
static void check_newer(void)
{
    remove(g_path);
    struct mrd_store *s = NULL;
    CHECK_OK(open_logged(&s));
    mrd_store_close(s);
    sqlite3 *db = db_open();
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM schema_version"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), 2);
    CHECK_EQ(has_column(db, "rank_strings", "agent_instance"), 1);
    db_exec(db, "UPDATE schema_version SET version = 99;"
                "CREATE TABLE future_things (x INTEGER);"
                "INSERT INTO future_things VALUES(7);"
                "INSERT INTO kernels(rank, start_ns, end_ns) VALUES(1, 2, 3);");
    sqlite3_close(db); /* the last connection folds the WAL into the file */
    make_rollback();
    check_refused("database schema version 99 is newer than this meridiand supports (2): use"
                  " a newer meridian or a new output file");
    db = db_open();
    CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), 99);
    CHECK_EQ(check_sql_int(db, "SELECT x FROM future_things"), 7);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM kernels"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM runs"), 1);
    sqlite3_close(db);
}

/* A database of something else (tables, no schema_version) is not written into. */
static void check_foreign(void)
{
    remove(g_path);
    sqlite3 *db = db_open();
    db_exec(db, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES('mine')");
    sqlite3_close(db);
    CHECK_EQ(header_mode(), 1); /* rollback journal, SQLite's default */
    check_refused("database has tables but no schema version: not a meridian database");
    db = db_open();
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM sqlite_master"), 1);
    sqlite3_close(db);
}

/* A version 1 database of run A (in either journal mode) opened as run B, or holding two
 * runs, is refused before the migration: still version 1, byte for byte (an older
 * meridiand that wrote it can go on with it). Opened as run A it is migrated. */
static void check_other_run(void)
{
    for (int rollback = 0; rollback < 2; rollback++) {
        make_v1(0);
        sqlite3 *db = db_open();
        db_exec(db, "INSERT INTO runs(run_id, shard_id, anchor_realtime_ns, anchor_monotonic_ns,"
                    " created_ns) VALUES('runA', 0, 1, 1, 1)");
        sqlite3_close(db);
        if (rollback)
            make_rollback();
        g_run = "runB";
        check_refused("database belongs to run runA, not runB");
        g_run = NULL;
        db = db_open();
        CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), 1);
        CHECK_EQ(has_column(db, "batches", "agent_instance"), 0);
        db_exec(db, "INSERT INTO runs(run_id, shard_id, anchor_realtime_ns, anchor_monotonic_ns,"
                    " created_ns) VALUES('runC', 1, 1, 1, 1)");
        sqlite3_close(db);
        check_refused("database holds 2 runs; meridiand writes one run per database");
        db = db_open();
        CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), 1);
        db_exec(db, "DELETE FROM runs WHERE run_id = 'runC'");
        sqlite3_close(db);
    }
    g_run = "runA";
    struct mrd_store *s = NULL;
    CHECK_OK(open_logged(&s));
    g_run = NULL;
    CHECK(strstr(g_log, "database migrated from schema version 1 to 2") != NULL);
    CHECK_STREQ(mrd_store_run_id(s), "runA");
    mrd_store_close(s);
    CHECK_EQ(header_mode(), 2);
}

/* A version that is not an integer is no version: REAL 1e30 is not read as 1 (and
 * migrated), 2.5 not as 2 (atoll on the text did), a TEXT 'v2' not as 0. Refused, byte for byte. */
static void check_odd_version(void)
{
    static const char *const odd[] = {"1e30", "2.5", "'v2'"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        make_v1(0);
        sqlite3 *db = db_open();
        char sql[96];
        snprintf(sql, sizeof(sql), "UPDATE schema_version SET version = %s", odd[i]);
        db_exec(db, sql);
        sqlite3_close(db);
        make_rollback();
        check_refused("is not an integer: not a meridian database; use a new output file");
        db = db_open();
        CHECK_EQ(has_column(db, "batches", "agent_instance"), 0);
        sqlite3_close(db);
    }
}

void check_schema_versions(const char *dir)
{
    snprintf(g_path, sizeof(g_path), "%s/versions.db", dir);
    check_v1(0);
    check_v1(1);
    check_v1_atomic();
    check_newer();
    check_foreign();
    check_other_run();
    check_odd_version();
    remove(g_path);
}
