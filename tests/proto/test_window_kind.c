/* proto_window_kind: the window kind (a steady-tier capture window, proto/kinds.table), end to
 * end below the agent: events through the batch builder (the reason interned as a string),
 * a frame, the reader's check and cursor, and the store into the window_records table,
 * every value as sent (a detach of -1 for a window open at exit, reasons as text). The kind
 * is its rows in kinds.table, its struct (kinds.h) and its producer (agent/capture/window.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "kind_store.h"

#define N 300

static const char *const reasons[] = {"range", "periodic", "on_demand", "trigger", "delay"};

static struct mrd_window_record window(int i, uint32_t reason_id)
{
    struct mrd_window_record w = {
        .start = 1000000000ll * (i + 1),
        .end = 1000000000ll * (i + 1) + 400000000 + i,
        .first_step = 200ll * i + 10,
        .last_step = 200ll * i + 19 + i % 3,
        .attach_ns = 11000000 + i,
        .detach_ns = i == N - 1 ? -1 : 2500000 + i, /* the last one open at exit */
        .flush_ns = 900000 + i,
        .reason = reason_id,
    };
    return w;
}

int main(void)
{
    char db_path[] = "/tmp/mrd-window-kind-XXXXXX";
    ks_tmp_db(db_path);

    struct mrd_batch_builder_config bc = {"r", 2, 55, 0, 0, 1};
    struct mrd_batch_builder *b = NULL;
    CHECK_EQ(mrd_batch_builder_new(&bc, &b), 0);
    uint32_t ids[5];
    for (int r = 0; r < 5; r++)
        CHECK((ids[r] = mrd_batch_builder_intern(b, reasons[r])) != 0);
    for (int i = 0; i < N; i++) {
        struct mrd_window_record w = window(i, ids[i % 5]);
        CHECK_EQ(mrd_batch_add_window(b, &w), 0);
    }
    size_t len;
    Meridian__V1__Batch *m = ks_finish(b, &len);
    mrd_batch_builder_free(b);
    CHECK_EQ(mrd_batch_count(m, MRD_EV_WINDOW), N);
    struct mrd_batch_cursor c;
    struct mrd_window_record got;
    mrd_batch_cursor_init(&c, m);
    for (int i = 0; i < N; i++) {
        struct mrd_window_record want = window(i, ids[i % 5]);
        memset(&got, 0, sizeof got);
        CHECK_EQ(mrd_batch_next_window(&c, &got), 1);
        /* field by field: the struct has tail padding, which a copy need not keep */
        CHECK_EQ(got.start, want.start);
        CHECK_EQ(got.end, want.end);
        CHECK_EQ(got.first_step, want.first_step);
        CHECK_EQ(got.last_step, want.last_step);
        CHECK_EQ(got.attach_ns, want.attach_ns);
        CHECK_EQ(got.detach_ns, want.detach_ns);
        CHECK_EQ(got.flush_ns, want.flush_ns);
        CHECK_EQ(got.reason, want.reason);
    }
    CHECK_EQ(mrd_batch_next_window(&c, &got), 0);
    CHECK_STREQ(mrd_event_kind_name(MRD_EV_WINDOW), "window");

    /* into the database, as meridiand stores a batch */
    ks_store(db_path, 2, 55, m, len);

    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_open(db_path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT w.rank, w.start_ns, w.end_ns, w.first_step, w.last_step,"
                                " s.value, w.attach_ns, w.detach_ns, w.flush_ns"
                                " FROM window_records w JOIN strings s ON s.id = w.reason_id"
                                " ORDER BY w.start_ns",
                                -1, &st, NULL),
             SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        struct mrd_window_record want = window(rows, 0);
        CHECK_EQ(sqlite3_column_int64(st, 0), 2);
        CHECK_EQ(sqlite3_column_int64(st, 1), want.start);
        CHECK_EQ(sqlite3_column_int64(st, 2), want.end);
        CHECK_EQ(sqlite3_column_int64(st, 3), want.first_step);
        CHECK_EQ(sqlite3_column_int64(st, 4), want.last_step);
        CHECK_STREQ((const char *)sqlite3_column_text(st, 5), reasons[rows % 5]);
        CHECK_EQ(sqlite3_column_int64(st, 6), want.attach_ns);
        CHECK_EQ(sqlite3_column_int64(st, 7), want.detach_ns);
        CHECK_EQ(sqlite3_column_int64(st, 8), want.flush_ns);
        rows++;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    CHECK_EQ(rows, N);
    ks_rm_db(db_path);
    printf("proto_window_kind: ok (%d rows)\n", rows);
    return 0;
}
