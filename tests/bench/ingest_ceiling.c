/* ingest_ceiling: the storage-path ceiling for the ingest benchmark (tests/bench/ingest).
 *
 * What it measures: how fast one thread can insert the rows the aggregator would store for
 * the same synthetic stream, with nothing else in the way: no sockets, no protobuf, no
 * queues. The storage path is meridiand's, taken from the store library rather than
 * copied: the same process settings (mrd_store_process_init: SQLite memory statistics
 * off), the same connection (mrd_store_sqlite_open: open flags, pragmas, WAL), the same
 * schema (mrd_store_schema_sql) and the same WAL checkpoints on a background thread
 * (mrd_store_ckpt_start), so that no storage-level advantage of the daemon is missing
 * here and the ceiling stays a ceiling. Then: the store's own INSERT statements (their
 * SQL text from store.h, never copied), prepared once, and one big transaction per
 * `--txn-rows` event rows (default 200,000, the store's commit_rows). The rows: per rank,
 * the events of launcher/replay's generator (same seed, mix and count as
 * the load generator), one `batches` row per batch of `--batch-events`, and the rank's
 * strings (strings + rank_strings) once; ranks interleaved batch by batch, as the daemon
 * receives them. Generating events costs a few percent of the loop and is included.
 *
 * Output: one line `ceiling: rows=N seconds=S rows_per_s=R checkpoints=B+I` (event rows
 * only; B checkpoints ran on the background thread, I inline at the WAL cap).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "batch.h"
#include "frame.h"
#include "gen.h"
#include "store.h"

/* Statements, prepared from the store's own SQL text (store.h): one per event kind
 * (indexed by enum mrd_event_kind), then the batch row and the string definitions. */
enum { T_BATCH = MRD_EV__COUNT, T_STR_FIND, T_STR_ADD, T_RSTRING, T__COUNT };

static const char *sql_of(int t)
{
    switch (t) {
    case T_BATCH:
        return mrd_store_sql_text(MRD_STORE_SQL_BATCH);
    case T_STR_FIND:
        return mrd_store_sql_text(MRD_STORE_SQL_STRING_FIND);
    case T_STR_ADD:
        return mrd_store_sql_text(MRD_STORE_SQL_STRING_ADD);
    case T_RSTRING:
        return mrd_store_sql_text(MRD_STORE_SQL_RANK_STRING);
    }
    return mrd_store_event_sql(t);
}

struct rank_state {
    struct mrd_batch_builder *b; /* used only to intern the generator's strings */
    struct mrd_gen *g;
    uint64_t seq, done;
};

static sqlite3_stmt *st[T__COUNT];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run(sqlite3_stmt *s, const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        sqlite3_bind_int64(s, i + 1, v[i]);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

#define ROW(t, ...)                                                                                \
    do {                                                                                           \
        const int64_t v_[] = {__VA_ARGS__};                                                        \
        rc = run(st[t], v_, (int)(sizeof v_ / sizeof v_[0]));                                      \
    } while (0)

/* One row of any kind, its columns in table order from proto/kinds.h (string ids as the
 * wire has them; the store maps them, which costs the ceiling nothing here). */
#define CEIL_VAL(K, m, sql, cls, num, wire, codec, arg, pos, sep) (int64_t)x->m,
static int insert_event(int64_t r, const struct mrd_canon_event *e)
{
    int rc = -1;
    switch (e->kind) {
#define CEIL_CASE(E, v, fn, T, um, bm, C, d, t, tag)                                               \
    case E: {                                                                                      \
        const T *x = &e->u.um;                                                                     \
        ROW(E, r, MRD__FIELDS(fn, CEIL_VAL));                                                      \
        break;                                                                                     \
    }
        MRD_KINDS(CEIL_CASE)
    }
    return rc;
}

/* The rank's strings the way the store defines them (find, else add, then bind the wire
 * id to strings.id), with the store's statements. */
static int insert_strings(sqlite3 *db, int64_t r, struct mrd_gen *g)
{
    for (uint32_t id = 1;; id++) {
        const char *s = mrd_gen_string(g, id);
        if (!s)
            return 0;
        sqlite3_bind_text(st[T_STR_FIND], 1, s, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st[T_STR_FIND]);
        int64_t sid = rc == SQLITE_ROW ? sqlite3_column_int64(st[T_STR_FIND], 0) : 0;
        sqlite3_reset(st[T_STR_FIND]);
        if (rc == SQLITE_DONE) {
            sqlite3_bind_text(st[T_STR_ADD], 1, s, -1, SQLITE_STATIC);
            rc = sqlite3_step(st[T_STR_ADD]);
            sqlite3_reset(st[T_STR_ADD]);
            sid = sqlite3_last_insert_rowid(db);
        }
        if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
            const int64_t v[] = {r, 0, id, sid}; /* agent_instance 0 */
            rc = run(st[T_RSTRING], v, 4) == 0 ? SQLITE_DONE : SQLITE_ERROR;
        }
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "ingest_ceiling: strings: %s\n", sqlite3_errmsg(db));
            return -1;
        }
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", 1, 0, 'd'},       {"ranks", 1, 0, 'r'}, {"events", 1, 0, 'e'},
        {"mix", 1, 0, 'm'},      {"seed", 1, 0, 's'},  {"batch-events", 1, 0, 'b'},
        {"txn-rows", 1, 0, 't'}, {"help", 0, 0, 'h'},  {0, 0, 0, 0},
    };
    const char *path = NULL;
    uint64_t ranks = 8, events = 100000, seed = 1, batch = 4096, txn = 200000;
    int mix = MRD_GEN_MIX_TRAINING, c, status = 1;
    sqlite3 *db = NULL;
    struct mrd_store_ckpt *ckpt = NULL;
    char why[512];
    struct rank_state *rs = NULL;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            path = optarg;
            break;
        case 'r':
            ranks = strtoull(optarg, NULL, 10);
            break;
        case 'e':
            events = strtoull(optarg, NULL, 10);
            break;
        case 'm':
            mix = strcmp(optarg, "kernels") == 0 ? MRD_GEN_MIX_KERNELS : MRD_GEN_MIX_TRAINING;
            break;
        case 's':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'b':
            batch = strtoull(optarg, NULL, 10);
            break;
        case 't':
            txn = strtoull(optarg, NULL, 10);
            break;
        default:
            fprintf(
                c == 'h' ? stdout : stderr,
                "usage: ingest_ceiling --db FILE [--ranks N] [--events N per rank]\n"
                "       [--mix training|kernels] [--seed N] [--batch-events N] [--txn-rows N]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (!path || !ranks || ranks > 65536 || !batch || !txn) {
        fprintf(stderr, "ingest_ceiling: --db is required; ranks, batch-events, txn-rows > 0\n");
        return 2;
    }
    /* meridiand's storage path: process settings, connection, schema, checkpointer */
    mrd_store_process_init();
    if (mrd_store_sqlite_open(path, 0, &db, why, sizeof(why)) < 0) {
        fprintf(stderr, "ingest_ceiling: %s\n", why);
        goto done;
    }
    if (sqlite3_exec(db, mrd_store_schema_sql(), NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "ingest_ceiling: %s: %s\n", path, sqlite3_errmsg(db));
        goto done;
    }
    struct mrd_store_ckpt_config cc = {.path = path, .who = "ingest_ceiling"};
    if (mrd_store_ckpt_start(db, &cc, &ckpt) < 0)
        goto done;
    for (int t = MRD_EV_KERNEL; t < T__COUNT; t++)
        if (sqlite3_prepare_v3(db, sql_of(t), -1, SQLITE_PREPARE_PERSISTENT, &st[t], NULL) !=
            SQLITE_OK) {
            fprintf(stderr, "ingest_ceiling: %s: %s\n", sql_of(t), sqlite3_errmsg(db));
            goto done;
        }
    rs = calloc(ranks, sizeof *rs);
    if (!rs)
        goto done;
    for (uint64_t r = 0; r < ranks; r++) {
        struct mrd_batch_builder_config bc = {.run_id = "ceiling",
                                              .rank = (uint32_t)r,
                                              .max_frame = MRD_FRAME_DEFAULT_MAX,
                                              .target_events = 16};
        struct mrd_gen_config gc = {
            .rank = (uint32_t)r, .world_size = (uint32_t)ranks, .seed = seed, .mix = mix};
        if (mrd_batch_builder_new(&bc, &rs[r].b) < 0 || mrd_gen_new(&gc, rs[r].b, &rs[r].g) < 0)
            goto done;
    }

    double t0 = now_s();
    uint64_t rows = 0, in_txn = 0, left = ranks;
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    for (uint64_t r = 0; r < ranks; r++)
        if (insert_strings(db, (int64_t)r, rs[r].g) < 0)
            goto done;
    while (left > 0) {
        left = 0;
        for (uint64_t r = 0; r < ranks; r++) {
            struct rank_state *x = &rs[r];
            uint64_t n = events - x->done < batch ? events - x->done : batch;
            if (n == 0)
                continue;
            for (uint64_t i = 0; i < n; i++) {
                struct mrd_canon_event e;
                mrd_gen_next(x->g, &e);
                if (insert_event((int64_t)r, &e) < 0) {
                    fprintf(stderr, "ingest_ceiling: insert: %s\n", sqlite3_errmsg(db));
                    goto done;
                }
            }
            x->done += n;
            rows += n;
            in_txn += n;
            int rc;
            ROW(T_BATCH, (int64_t)r, (int64_t)++x->seq, (int64_t)n, 0, 0);
            if (rc < 0)
                goto done;
            if (in_txn >= txn) {
                sqlite3_exec(db, "COMMIT; BEGIN", NULL, NULL, NULL);
                in_txn = 0;
            }
            if (x->done < events)
                left++;
        }
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "ingest_ceiling: commit: %s\n", sqlite3_errmsg(db));
        goto done;
    }
    double secs = now_s() - t0;
    struct mrd_store_ckpt_stats cs;
    mrd_store_ckpt_get_stats(ckpt, &cs);
    printf("ceiling: rows=%" PRIu64 " seconds=%.3f rows_per_s=%.0f checkpoints=%" PRIu64 "+%" PRIu64
           "\n",
           rows, secs, secs > 0 ? (double)rows / secs : 0.0, cs.background, cs.inline_runs);
    status = 0;
done:
    mrd_store_ckpt_stop(ckpt);
    for (int t = 0; t < T__COUNT; t++)
        sqlite3_finalize(st[t]);
    if (db)
        sqlite3_close(db);
    for (uint64_t r = 0; rs && r < ranks; r++) {
        mrd_gen_free(rs[r].g);
        mrd_batch_builder_free(rs[r].b);
    }
    free(rs);
    return status;
}
