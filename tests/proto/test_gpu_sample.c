/* proto_gpu_sample: the gpu_sample kind, described by proto/kinds.table alone, end to end
 * below the agent: events through the batch builder, a frame, the reader's check and
 * cursor, and the store into the gpu_samples table, every value as sent (host_ns travels
 * as a delta), the canonical form unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "kind_store.h"

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
    ks_tmp_db(db_path);

    struct mrd_batch_builder_config bc = {"r", 3, 77, 0, 0, 1};
    struct mrd_batch_builder *b = NULL;
    CHECK_EQ(mrd_batch_builder_new(&bc, &b), 0);
    for (int i = 0; i < N; i++) {
        struct mrd_gpu_sample g = sample(i);
        CHECK_EQ(mrd_batch_add_gpu_sample(b, &g), 0);
    }
    size_t len;
    Meridian__V1__Batch *m = ks_finish(b, &len);
    mrd_batch_builder_free(b);
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
    ks_store(db_path, 3, 77, m, len);

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
    ks_rm_db(db_path);
    printf("proto_gpu_sample: ok (%d rows)\n", rows);
    return 0;
}
