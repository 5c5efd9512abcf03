/* proto_gpu_sample: the gpu_sample kind, added through proto/kinds.h alone, end to end
 * below the agent: events through the batch builder, a frame, the reader's check and
 * cursor, and the store into the gpu_samples table, every value as sent (host_ns travels
 * as a delta), the canonical form unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "batch.h"
#include "check.h"
#include "frame.h"
#include "store.h"

#define N 1000

static struct mrd_gpu_sample sample(int i)
{
    struct mrd_gpu_sample g = {
        .host_ns = 1700000000000000000ll + (int64_t)i * 100000000, /* 10 Hz */
        .throttle_reasons = i % 7 == 0 ? 0x8000000000000004ull : 0,
        .device = (uint32_t)(i % 8),
        .sm_clock_mhz = 1980 - (uint32_t)(i % 50),
        .mem_clock_mhz = 3201,
        .power_mw = 350000 + (uint32_t)i,
        .temperature_c = 40 + (uint32_t)(i % 30),
        .utilization_pct = (uint32_t)(i % 101),
    };
    return g;
}

int main(void)
{
    char db_path[] = "/tmp/mrd-gpu-sample-XXXXXX";
    int fd = mkstemp(db_path);
    CHECK(fd >= 0);
    close(fd);
    unlink(db_path);

    struct mrd_batch_builder_config bc = {"r", 3, 77, 0, 0, 1};
    struct mrd_batch_builder *b = NULL;
    CHECK_EQ(mrd_batch_builder_new(&bc, &b), 0);
    for (int i = 0; i < N; i++) {
        struct mrd_gpu_sample g = sample(i);
        CHECK_EQ(mrd_batch_add_gpu_sample(b, &g), 0);
    }
    uint8_t *f;
    size_t len;
    CHECK_EQ(mrd_batch_builder_finish(b, 1, &f, &len), 0);
    mrd_batch_builder_free(b);

    struct mrd_frame_header h;
    ProtobufCMessage *msg = NULL;
    CHECK_EQ(mrd_frame_header_parse(f, len, MRD_FRAME_DEFAULT_MAX, &h), 0);
    CHECK_EQ(mrd_frame_decode(&h, f + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &msg), 0);
    free(f);
    Meridian__V1__Batch *m = (Meridian__V1__Batch *)msg;
    CHECK_EQ(mrd_batch_check(m, NULL), 0);
    CHECK_EQ(mrd_batch_count(m, MRD_EV_GPU_SAMPLE), N);
    struct mrd_batch_cursor c;
    struct mrd_gpu_sample got;
    mrd_batch_cursor_init(&c, m);
    for (int i = 0; i < N; i++) {
        struct mrd_gpu_sample want = sample(i);
        memset(&got, 0, sizeof got);
        CHECK_EQ(mrd_batch_next_gpu_sample(&c, &got), 1);
        CHECK(memcmp(&got, &want, sizeof got) == 0);
    }
    CHECK_EQ(mrd_batch_next_gpu_sample(&c, &got), 0);
    CHECK_STREQ(mrd_event_kind_name(MRD_EV_GPU_SAMPLE), "gpu_sample");

    /* into the database, as meridiand stores a batch */
    struct mrd_store_config cfg = {.db_path = db_path, .run_id = "r", .commit_ms = 5};
    struct mrd_store *s = NULL;
    CHECK_EQ(mrd_store_open(&cfg, &s), 0);
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_BATCH);
    CHECK(it != NULL);
    it->rank = 3;
    it->agent_instance = 77;
    it->wire_bytes = (uint32_t)len;
    it->received_ns = 1000;
    it->msg = msg;
    mrd_store_submit(s, it);
    CHECK_EQ(mrd_store_drain(s), 0);
    struct mrd_store_item *done = mrd_store_take_completions(s);
    CHECK(done == it);
    CHECK_EQ(done->status, 0);
    mrd_store_item_free(done);
    mrd_store_close(s);

    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_open(db_path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT rank, device, host_ns, sm_clock_mhz, mem_clock_mhz,"
                                " power_mw, temperature_c, throttle_reasons, utilization_pct"
                                " FROM gpu_samples ORDER BY rowid",
                                -1, &st, NULL),
             SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        struct mrd_gpu_sample want = sample(rows);
        CHECK_EQ(sqlite3_column_int64(st, 0), 3);
        CHECK_EQ(sqlite3_column_int64(st, 1), want.device);
        CHECK_EQ(sqlite3_column_int64(st, 2), want.host_ns);
        CHECK_EQ(sqlite3_column_int64(st, 3), want.sm_clock_mhz);
        CHECK_EQ(sqlite3_column_int64(st, 4), want.mem_clock_mhz);
        CHECK_EQ(sqlite3_column_int64(st, 5), want.power_mw);
        CHECK_EQ(sqlite3_column_int64(st, 6), want.temperature_c);
        CHECK_EQ((uint64_t)sqlite3_column_int64(st, 7), want.throttle_reasons);
        CHECK_EQ(sqlite3_column_int64(st, 8), want.utilization_pct);
        rows++;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    CHECK_EQ(rows, N);
    for (const char *sfx = ""; sfx; sfx = *sfx ? (sfx[1] == 'w' ? "-shm" : NULL) : "-wal") {
        char p[64];
        snprintf(p, sizeof p, "%s%s", db_path, sfx);
        unlink(p);
    }
    printf("proto_gpu_sample: ok (%d rows)\n", rows);
    return 0;
}
