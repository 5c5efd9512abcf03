/* aggregator_ckpt: the exported storage path (store.h): mrd_store_sqlite_open and the WAL
 * checkpointer that meridiand and the ingest benchmark's ceiling share.
 *
 * Checks: the connection is in WAL mode with the store's pragmas, and an unopenable path
 * gives -MRD_ERR_SQLITE with a reason; with a checkpointer of 8 pages, 120 commits of ~4
 * pages each keep the WAL file small (without the hook the WAL would hold all ~480 pages:
 * SQLite's own automatic checkpoint is replaced and would only act at 16384), and the
 * checkpoints ran on the background thread; while a reader pins a snapshot (nothing can be
 * backfilled past it) the WAL grows and the writer checkpoints inline at 4 x 8 pages;
 * after mrd_store_ckpt_stop the writer connection keeps working.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "check_sql.h"
#include "error.h"
#include "store.h"

/* One transaction of four 3,000-byte rows (about 4 pages of 4,096 bytes). */
static void commit_one(sqlite3 *db, sqlite3_stmt *ins)
{
    static char blob[3000];
    CHECK_EQ(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    for (int i = 0; i < 4; i++) {
        blob[0]++;
        sqlite3_bind_blob(ins, 1, blob, sizeof(blob), SQLITE_STATIC);
        CHECK_EQ(sqlite3_step(ins), SQLITE_DONE);
        sqlite3_reset(ins);
    }
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
}

static int64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/* Waits until every checkpoint request so far was followed by a finished background run. */
static void wait_served(struct mrd_store_ckpt *c)
{
    struct mrd_store_ckpt_stats st;
    for (int i = 0; i < 1000; i++) {
        mrd_store_ckpt_get_stats(c, &st);
        if (st.served == st.requests)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(st.served, st.requests);
}

int main(void)
{
    char dir[] = "/tmp/mrd-ckpt-test-XXXXXX", path[256], wal[300], bad[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/c.db", dir);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    snprintf(bad, sizeof(bad), "%s/no/such/dir/c.db", dir);

    char why[256] = "";
    sqlite3 *db = NULL;
    CHECK_EQ(mrd_store_sqlite_open(bad, 0, &db, why, sizeof(why)), -MRD_ERR_SQLITE);
    CHECK(db == NULL);
    CHECK(strstr(why, "cannot open database") != NULL);

    CHECK_OK(mrd_store_sqlite_open(path, 0, &db, why, sizeof(why)));
    CHECK_EQ(check_sql_int(db, "PRAGMA synchronous"), 1); /* NORMAL */
    CHECK_EQ(check_sql_int(db, "PRAGMA wal_autocheckpoint"), MRD_STORE_CKPT_PAGES);
    CHECK_EQ(sqlite3_exec(db, "CREATE TABLE t(v BLOB)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_stmt *ins;
    CHECK_EQ(sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES(?)", -1, &ins, NULL), SQLITE_OK);

    struct mrd_store_ckpt *c = NULL;
    struct mrd_store_ckpt_config bc = {.path = NULL};
    CHECK_EQ(mrd_store_ckpt_start(db, &bc, &c), -EINVAL);
    struct mrd_store_ckpt_config cc = {.path = path, .pages = 8, .who = "aggregator_ckpt"};
    CHECK_OK(mrd_store_ckpt_start(db, &cc, &c));

    /* steady writes, each checkpoint request given time to be served: the background
     * thread alone keeps the WAL small, the writer never checkpoints inline */
    struct mrd_store_ckpt_stats st;
    int64_t page = check_sql_int(db, "PRAGMA page_size"), max_wal = 0;
    for (int i = 0; i < 120; i++) {
        commit_one(db, ins);
        int64_t w = file_size(wal);
        max_wal = w > max_wal ? w : max_wal;
        wait_served(c);
    }
    mrd_store_ckpt_get_stats(c, &st);
    CHECK_GE(st.requests, 20);
    CHECK_GE(st.background, 20);
    CHECK_EQ(st.inline_runs, 0);
    /* WAL frames are page + 24 bytes after a 32-byte header. Without the checkpointer all
     * ~600 frames would stay in it (SQLite's own checkpoint is replaced, and would act
     * only at 16384); with it the WAL restarts after each checkpoint: below 4 x 8 frames */
    CHECK_LT(max_wal, 4 * 8 * (page + 24) + 32);

    /* a reader pins its snapshot: nothing can be backfilled past it, the WAL grows until
     * the writer's inline checkpoint at the 4 x 8 cap runs */
    sqlite3 *reader;
    CHECK_EQ(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    int64_t rows_seen = check_sql_int(reader, "SELECT count(*) FROM t");
    CHECK_EQ(rows_seen, 480);
    for (int i = 0; i < 12; i++)
        commit_one(db, ins);
    mrd_store_ckpt_get_stats(c, &st);
    CHECK_GT(st.inline_runs, 0);
    CHECK_EQ(check_sql_int(reader, "SELECT count(*) FROM t"), rows_seen); /* its snapshot held */
    CHECK_EQ(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(reader);

    /* stopped: the writer connection goes on with SQLite's own checkpoint */
    mrd_store_ckpt_stop(c);
    mrd_store_ckpt_stop(NULL);
    commit_one(db, ins);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM t"), 4 * 133);
    sqlite3_finalize(ins);
    CHECK_EQ(sqlite3_close(db), SQLITE_OK);

    unlink(wal);
    snprintf(wal, sizeof(wal), "%s-shm", path);
    unlink(wal);
    unlink(path);
    rmdir(dir);
    printf("aggregator_ckpt: ok (max WAL %lld bytes, %llu requests, %llu background + %llu"
           " inline checkpoints)\n",
           (long long)max_wal, (unsigned long long)st.requests, (unsigned long long)st.background,
           (unsigned long long)st.inline_runs);
    return 0;
}
