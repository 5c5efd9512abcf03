/* Helpers of the tests that take one event kind end to end below the agent (builder ->
 * frame -> reader -> store): proto_gpu_sample, proto_window_kind. */
#ifndef MRD_TEST_KIND_STORE_H
#define MRD_TEST_KIND_STORE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "batch.h"
#include "check.h"
#include "frame.h"
#include "store.h"

/* A fresh database path from the mkstemp pattern in path (the file itself removed). */
static inline void ks_tmp_db(char *path)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    unlink(path);
}

/* Finishes b's batch 1 into a frame, decodes and checks it; *len gets the frame's size. */
static inline Meridian__V1__Batch *ks_finish(struct mrd_batch_builder *b, size_t *len)
{
    uint8_t *f;
    struct mrd_frame_header h;
    ProtobufCMessage *msg = NULL;
    CHECK_EQ(mrd_batch_builder_finish(b, 1, &f, len), 0);
    CHECK_EQ(mrd_frame_header_parse(f, *len, MRD_FRAME_DEFAULT_MAX, &h), 0);
    CHECK_EQ(mrd_frame_decode(&h, f + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &msg), 0);
    free(f);
    CHECK_EQ(mrd_batch_check((Meridian__V1__Batch *)msg, NULL), 0);
    return (Meridian__V1__Batch *)msg;
}

/* Stores m (taken) as rank's batch into the database at path, as meridiand does. */
static inline void ks_store(const char *path, uint32_t rank, uint64_t instance,
                            Meridian__V1__Batch *m, size_t len)
{
    struct mrd_store_config cfg = {.db_path = path, .run_id = "r", .commit_ms = 5};
    struct mrd_store *s = NULL;
    CHECK_EQ(mrd_store_open(&cfg, &s), 0);
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_BATCH);
    CHECK(it != NULL);
    it->rank = rank;
    it->agent_instance = instance;
    it->wire_bytes = (uint32_t)len;
    it->received_ns = 1000;
    it->msg = &m->base;
    mrd_store_submit(s, it);
    CHECK_EQ(mrd_store_drain(s), 0);
    struct mrd_store_item *done = mrd_store_take_completions(s);
    CHECK(done == it);
    CHECK_EQ(done->status, 0);
    mrd_store_item_free(done);
    mrd_store_close(s);
}

/* Removes the database at path and its -wal / -shm files. */
static inline void ks_rm_db(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

#endif
