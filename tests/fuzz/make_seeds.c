/* make_seeds: writes the seed corpus of fuzz_frame_batch: one valid frame of every type,
 * raw and zstd-compressed, batches with every event kind and string definitions, and one
 * multi-frame stream (hello, batch, ack, goodbye). Deterministic (fixed PRNG seed).
 * Usage: make_seeds DIR   (then commit DIR; see tests/fuzz/COVERAGE.md) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "proto_testutil.h"

static const char *dir;

static void put(const char *name, const uint8_t *p, size_t n)
{
    char path[4096];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/seed_%s", dir, name);
    fp = fopen(path, "wb");
    if (!fp || fwrite(p, 1, n, fp) != n || fclose(fp) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static void put_frame(const char *name, enum mrd_frame_type type, const ProtobufCMessage *m,
                      int level)
{
    uint8_t *f;
    size_t n;

    CHECK_OK(mrd_frame_encode(type, m, level, MRD_FRAME_DEFAULT_MAX, &f, &n));
    put(name, f, n);
    free(f);
}

/* A zstd frame even where compression does not pay (the encoder would send it raw), so
 * that the fuzzer starts from a compressed payload of every type. */
static void put_zstd(const char *name, enum mrd_frame_type type, const ProtobufCMessage *m)
{
    size_t rn = protobuf_c_message_get_packed_size(m), cap = ZSTD_compressBound(rn), zn;
    uint8_t *raw = malloc(rn + 1), *f = malloc(8 + cap);
    struct mrd_frame_header h = {MRD_PROTOCOL_VERSION, (uint8_t)type, MRD_FRAME_FLAG_ZSTD, 0};

    CHECK(raw && f);
    protobuf_c_message_pack(m, raw);
    zn = ZSTD_compress(f + 8, cap, raw, rn, 19);
    CHECK(!ZSTD_isError(zn));
    h.length = (uint32_t)zn;
    mrd_frame_header_write(f, &h);
    put(name, f, 8 + zn);
    free(raw);
    free(f);
}

/* A batch of `events` random events cycling over `kinds` kinds, with 6 strings. */
static void batch(uint8_t **f, size_t *n, int events, int kinds, int level, uint64_t seed)
{
    struct mrd_batch_builder_config cfg = {"seed-run", 3, 77, 0, 100000, level};
    struct mrd_batch_builder *b;
    static const char *const names[] = {"sgemm_128x64_nn", "ncclDevKernel_AllReduce_Sum_f32",
                                        "AllReduce", "ncclFloat32", "RING", "MPI_Allreduce"};
    uint32_t ids[6];
    uint64_t dropped[MRD_DROP__COUNT] = {0, 3, 0, 0, 9};
    int64_t t = 1700000000000000000ll;

    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    for (int i = 0; i < 6; i++)
        ids[i] = mrd_batch_builder_intern(b, names[i]);
    mrd_batch_builder_set_dropped(b, dropped);
    for (int i = 0; i < events; i++) {
        union tu_event ev;
        int kind = 1 + i % kinds;

        tu_event(&seed, kind, &t, ids, 6, &ev);
        CHECK_OK(tu_add(b, kind, &ev));
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1 + seed % 5, f, n));
    mrd_batch_builder_free(b);
}

int main(int argc, char **argv)
{
    static const char *const tname[] = {"", "hello", "hello_reply", "clock_probe",
                                        "clock_reply", "batch", "ack", "goodbye", "error"};
    uint8_t *f, *stream;
    size_t n, sn = 0;
    char name[64];

    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    for (int t = 1; t <= MRD_FRAME__MAX; t++) {
        if (t == MRD_FRAME_BATCH)
            continue;
        snprintf(name, sizeof(name), "%s_raw", tname[t]);
        put_frame(name, (enum mrd_frame_type)t, tu_sample((enum mrd_frame_type)t, 0), 0);
        snprintf(name, sizeof(name), "%s_zstd", tname[t]);
        put_zstd(name, (enum mrd_frame_type)t, tu_sample((enum mrd_frame_type)t, 0));
    }
    /* the big variants compress: keep one, it is a few hundred bytes */
    put_frame("hello_big_zstd", MRD_FRAME_HELLO, tu_sample(MRD_FRAME_HELLO, 1), 3);
    /* the goodbye's Ack (Ack.goodbye, added to v1) */
    put_frame("ack_goodbye_raw", MRD_FRAME_ACK, tu_sample(MRD_FRAME_ACK, 1), 0);

    batch(&f, &n, 13, 13, 0, 1);
    put("batch_each_kind_raw", f, n);
    free(f);
    batch(&f, &n, 130, 13, 0, 2);
    put("batch_all_kinds_raw", f, n);
    free(f);
    batch(&f, &n, 390, 13, 1, 3);
    put("batch_all_kinds_zstd", f, n);
    free(f);
    batch(&f, &n, 200, 1, 1, 4);
    put("batch_kernels_zstd", f, n);
    free(f);
    batch(&f, &n, 60, 1, 0, 5);
    put("batch_kernels_raw", f, n);
    free(f);

    /* A connection's worth: hello, batch, ack, goodbye back to back. */
    stream = malloc(1 << 16);
    CHECK(stream != NULL);
    {
        const enum mrd_frame_type seq[] = {MRD_FRAME_HELLO, MRD_FRAME_BATCH, MRD_FRAME_ACK,
                                           MRD_FRAME_GOODBYE};

        for (int i = 0; i < 4; i++) {
            if (seq[i] == MRD_FRAME_BATCH)
                batch(&f, &n, 26, 13, 0, 6);
            else
                CHECK_OK(mrd_frame_encode(seq[i], tu_sample(seq[i], 0), 0,
                                          MRD_FRAME_DEFAULT_MAX, &f, &n));
            CHECK(sn + n <= (1 << 16));
            memcpy(stream + sn, f, n);
            sn += n;
            free(f);
        }
    }
    put("stream_hello_batch_ack_goodbye", stream, sn);
    free(stream);
    return 0;
}
