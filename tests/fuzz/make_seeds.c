/* make_seeds: writes the seed corpus of fuzz_frame_batch: one valid frame of every type,
 * raw and zstd-compressed, batches with every event kind and string definitions, and two
 * multi-frame streams (hello, batch, ack, goodbye; and the same with the hello reply
 * and the goodbye's Ack). The fields added to v1 additively have seeds of their own, raw
 * and zstd: Ack.goodbye, HelloReply.goodbye_acks (in the hello_reply seeds), Goodbye.named
 * and the drop reasons UNENCODABLE and NVTX_CAP (in a Goodbye and in a Batch).
 * Protocol version 2's handshake frames (Challenge, Proof) have theirs among "every type".
 * Deterministic (fixed PRNG seed).
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

/* A batch of `events` random events cycling over `kinds` kinds, with 6 strings and the
 * drop counters `dropped` (NULL: two of the original reasons). */
static void batch_drops(uint8_t **f, size_t *n, int events, int kinds, int level,
                        uint64_t seed, const uint64_t *drops)
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
    if (drops)
        memcpy(dropped, drops, sizeof(dropped));
    mrd_batch_builder_set_dropped(b, dropped);
    for (int i = 0; i < events; i++) {
        union mrd_any_event ev;
        int kind = 1 + i % kinds;

        tu_event(&seed, kind, &t, ids, 6, &ev);
        CHECK_OK(tu_add(b, kind, &ev));
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1 + seed % 5, f, n));
    mrd_batch_builder_free(b);
}

static void batch(uint8_t **f, size_t *n, int events, int kinds, int level, uint64_t seed)
{
    batch_drops(f, n, events, kinds, level, seed, NULL);
}

/* A Goodbye with every drop reason (UNENCODABLE and NVTX_CAP, added to v1, among them),
 * a few captured kinds and named counters (Goodbye.named, added to v1), as an agent with
 * CUPTI sends it. Static storage, like tu_sample's. */
static const ProtobufCMessage *goodbye_named(void)
{
    static const struct {
        const char *category, *name;
        uint64_t value;
    } nv[] = {{"cupti", "overhead_records", 412},
              {"cupti", "overhead_ns", 98765432},
              {"cupti", "unknown_records", 0},
              {"cupti", "pool_misses", 7},
              {"nccl_profiler", "pool_grows", 18446744073709551615ull}};
    static Meridian__V1__NamedCounter named[5], *namedp[5];
    static Meridian__V1__Counter cnt[MRD_EV__COUNT + MRD_DROP__COUNT], *cap[MRD_EV__COUNT],
        *drop[MRD_DROP__COUNT];
    static Meridian__V1__Goodbye bye;
    size_t nc = 0, nd = 0;

    meridian__v1__goodbye__init(&bye);
    for (int k = MRD_EV_KERNEL; k <= MRD_EV_NVTX; k += 3) {
        meridian__v1__counter__init(&cnt[nc]);
        cnt[nc].key = (uint32_t)k;
        cnt[nc].value = 1000u * (uint64_t)k;
        cap[nc] = &cnt[nc];
        nc++;
    }
    for (int r = 1; r < MRD_DROP__COUNT; r++) {
        Meridian__V1__Counter *c = &cnt[nc + nd];

        meridian__v1__counter__init(c);
        c->key = (uint32_t)r;
        c->value = r >= MRD_DROP_UNENCODABLE ? 100000u + (uint64_t)r : (uint64_t)r;
        drop[nd++] = c;
    }
    for (size_t i = 0; i < 5; i++) {
        meridian__v1__named_counter__init(&named[i]);
        named[i].category = (char *)nv[i].category;
        named[i].name = (char *)nv[i].name;
        named[i].value = nv[i].value;
        namedp[i] = &named[i];
    }
    bye.captured = cap;
    bye.n_captured = nc;
    bye.dropped = drop;
    bye.n_dropped = nd;
    bye.named = namedp;
    bye.n_named = 5;
    bye.bytes_sent = 123456789;
    bye.batches_sent = 42;
    bye.batches_resent = 1;
    bye.last_seq = 1764460800000000ull;
    return &bye.base;
}

/* Appends one encoded frame (raw) of `m`, or the batch in f/n when m is NULL. */
static void append(uint8_t *stream, size_t *sn, size_t cap, enum mrd_frame_type type,
                   const ProtobufCMessage *m, uint8_t *f, size_t n)
{
    if (m)
        CHECK_OK(mrd_frame_encode(type, m, 0, MRD_FRAME_DEFAULT_MAX, &f, &n));
    CHECK(*sn + n <= cap);
    memcpy(stream + *sn, f, n);
    *sn += n;
    free(f);
}

int main(int argc, char **argv)
{
    static const char *const tname[] = {
        "",    "hello",   "hello_reply", "clock_probe", "clock_reply", "batch",
        "ack", "goodbye", "error",       "challenge",   "proof"};
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
    put_zstd("ack_goodbye_zstd", MRD_FRAME_ACK, tu_sample(MRD_FRAME_ACK, 1));
    /* Goodbye.named and the drop reasons added to v1 */
    put_frame("goodbye_named_raw", MRD_FRAME_GOODBYE, goodbye_named(), 0);
    put_zstd("goodbye_named_zstd", MRD_FRAME_GOODBYE, goodbye_named());

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
    {
        /* every drop reason, UNENCODABLE and NVTX_CAP (added to v1) among them */
        uint64_t drops[MRD_DROP__COUNT];

        for (int r = 0; r < MRD_DROP__COUNT; r++)
            drops[r] = r == 0 ? 0 : 1000u * (uint64_t)r + (uint64_t)r;
        batch_drops(&f, &n, 26, 13, 0, 7, drops);
        put("batch_drops_all_reasons_raw", f, n);
        free(f);
        batch_drops(&f, &n, 52, 13, 1, 8, drops);
        put("batch_drops_all_reasons_zstd", f, n);
        free(f);
    }

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

    /* The same connection against an aggregator that acknowledges goodbyes: hello,
     * reply (goodbye_acks), batch, ack, goodbye with named counters, the goodbye's Ack. */
    sn = 0;
    append(stream, &sn, 1 << 16, MRD_FRAME_HELLO, tu_sample(MRD_FRAME_HELLO, 0), NULL, 0);
    {
        Meridian__V1__HelloReply reply = MERIDIAN__V1__HELLO_REPLY__INIT;

        reply.accepted = 1;
        reply.max_frame_bytes = MRD_FRAME_DEFAULT_MAX;
        reply.committed_seq = 0;
        reply.goodbye_acks = 1;
        append(stream, &sn, 1 << 16, MRD_FRAME_HELLO_REPLY, &reply.base, NULL, 0);
    }
    batch(&f, &n, 26, 13, 0, 9);
    append(stream, &sn, 1 << 16, MRD_FRAME_BATCH, NULL, f, n);
    append(stream, &sn, 1 << 16, MRD_FRAME_ACK, tu_sample(MRD_FRAME_ACK, 0), NULL, 0);
    append(stream, &sn, 1 << 16, MRD_FRAME_GOODBYE, goodbye_named(), NULL, 0);
    append(stream, &sn, 1 << 16, MRD_FRAME_ACK, tu_sample(MRD_FRAME_ACK, 1), NULL, 0);
    put("stream_goodbye_acked", stream, sn);
    free(stream);
    return 0;
}
