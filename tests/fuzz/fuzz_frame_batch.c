/* fuzz_frame_batch: libFuzzer target for everything meridiand does with bytes from the
 * wire before they reach the store.
 *
 * The input is a byte stream of frames, as a connection would deliver it. For each frame:
 * mrd_frame_header_parse, mrd_frame_decode (any type, raw or zstd), and for a BATCH
 * mrd_batch_check and a full cursor walk of every kind, the way ingest and store use
 * them. Two properties are checked on whatever decodes, so the fuzzer finds wrong
 * results, not only crashes:
 *   - re-encoding a decoded message (raw or compressed) and decoding it again gives the
 *     same bytes;
 *   - a checked batch fed event by event into a fresh builder (batch.c) comes back, after
 *     finish, decode and check, with identical events (string ids mapped through their
 *     definitions), so builder and reader agree on every value the fuzzer can express.
 * Built as a libFuzzer binary when MRD_FUZZ=ON; always built with replay_main.c as
 * fuzz_replay, which CTest runs over tests/fuzz/corpus (fuzz_replay_corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "error.h"
#include "frame.h"

#define MAX_FRAME MRD_FRAME_DEFAULT_MAX

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_frame_batch: %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* Batch string id -> builder id, through the batch's own (sorted) definitions; ids the
 * batch does not define map to 0 (an aggregator would look them up in committed state). */
struct idmap {
    const Meridian__V1__Batch *m;
    uint32_t *to;
};

static uint32_t map_id(const struct idmap *im, uint32_t id)
{
    size_t lo = 0, hi = im->m->n_strings;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t v = im->m->strings[mid]->id;

        if (v == id)
            return im->to[mid];
        if (v < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Reads the next event of `kind` (mrd_batch_next_any, which the per-kind readers serve);
 * with im, maps its string ids. */
static int next(struct mrd_batch_cursor *c, int kind, union mrd_any_event *e,
                const struct idmap *im)
{
    memset(e, 0, sizeof(*e)); /* padding too: events are compared with memcmp */
    int r = mrd_batch_next_any(c, kind, e);
    if (!r || !im)
        return r;
    switch (kind) {
    case MRD_EV_KERNEL: e->kernel.name = map_id(im, e->kernel.name); break;
    case MRD_EV_API: e->api.name = map_id(im, e->api.name); break;
    case MRD_EV_NVTX:
        e->nvtx.domain = map_id(im, e->nvtx.domain);
        e->nvtx.name = map_id(im, e->nvtx.name);
        break;
    case MRD_EV_NCCL_OP:
        e->nccl_op.func = map_id(im, e->nccl_op.func);
        e->nccl_op.datatype = map_id(im, e->nccl_op.datatype);
        e->nccl_op.algo = map_id(im, e->nccl_op.algo);
        e->nccl_op.proto = map_id(im, e->nccl_op.proto);
        break;
    case MRD_EV_MPI: e->mpi.call = map_id(im, e->mpi.call); break;
    }
    return r;
}

static Meridian__V1__Batch *decode_checked(const uint8_t *f, size_t len)
{
    struct mrd_frame_header h;
    ProtobufCMessage *m = NULL;

    REQUIRE(mrd_frame_header_parse(f, len, 8 * MAX_FRAME, &h) == 0);
    REQUIRE(h.type == MRD_FRAME_BATCH && len == 8 + (size_t)h.length);
    REQUIRE(mrd_frame_decode(&h, f + 8, 8 * MAX_FRAME, &m) == 0);
    REQUIRE(mrd_batch_check((Meridian__V1__Batch *)m, NULL) == 0);
    return (Meridian__V1__Batch *)m;
}

/* Feeds a checked batch into a builder and compares what comes back. */
static void rebuild(const Meridian__V1__Batch *m)
{
    struct mrd_batch_builder_config cfg = {m->run_id, m->rank, m->agent_instance,
                                           8 * MAX_FRAME, 1000000, (int)(m->seq & 1)};
    struct mrd_batch_builder *b = NULL;
    struct idmap im = {m, NULL};
    Meridian__V1__Batch *m2 = NULL;
    uint8_t *f = NULL;
    size_t len;

    if (mrd_batch_builder_new(&cfg, &b) != 0)
        return;
    im.to = calloc(m->n_strings + 1, sizeof(uint32_t));
    if (!im.to)
        goto done;
    for (size_t i = 0; i < m->n_strings; i++) {
        im.to[i] = mrd_batch_builder_intern(b, m->strings[i]->value);
        if (im.to[i] == 0)
            goto done; /* over the string table's byte cap */
    }
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;
        union mrd_any_event e;

        mrd_batch_cursor_init(&c, m);
        while (next(&c, k, &e, &im))
            if (mrd_batch_add_any(b, k, &e) != 0)
                goto done; /* over the builder's caps: nothing to compare */
    }
    REQUIRE(mrd_batch_builder_finish(b, m->seq, &f, &len) == 0);
    m2 = decode_checked(f, len);
    REQUIRE(strcmp(m2->run_id, m->run_id) == 0 && m2->seq == m->seq && m2->rank == m->rank);
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c1, c2;
        union mrd_any_event e1, e2;

        REQUIRE(mrd_batch_count(m2, k) == mrd_batch_count(m, k));
        mrd_batch_cursor_init(&c1, m);
        mrd_batch_cursor_init(&c2, m2);
        while (next(&c1, k, &e1, &im)) {
            REQUIRE(next(&c2, k, &e2, NULL) == 1);
            REQUIRE(memcmp(&e1, &e2, sizeof(e1)) == 0);
        }
        REQUIRE(next(&c2, k, &e2, NULL) == 0);
    }
done:
    if (m2)
        protobuf_c_message_free_unpacked(&m2->base, NULL);
    free(f);
    free(im.to);
    mrd_batch_builder_free(b);
}

static void walk_batch(const Meridian__V1__Batch *m)
{
    const char *why = NULL;

    if (mrd_batch_check(m, &why) != 0) {
        REQUIRE(why != NULL);
        return;
    }
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;
        union mrd_any_event e;
        size_t n = 0;

        mrd_batch_cursor_init(&c, m);
        while (next(&c, k, &e, NULL))
            n++;
        REQUIRE(n == mrd_batch_count(m, k));
    }
    rebuild(m);
}

static void reencode(uint8_t type, const ProtobufCMessage *m, int level)
{
    uint8_t *f = NULL, *a = NULL, *b = NULL;
    size_t len, n1, n2;
    struct mrd_frame_header h;
    ProtobufCMessage *m2 = NULL;

    if (mrd_frame_encode((enum mrd_frame_type)type, m, level, MAX_FRAME, &f, &len) != 0)
        return;
    REQUIRE(mrd_frame_header_parse(f, len, MAX_FRAME, &h) == 0);
    REQUIRE(mrd_frame_decode(&h, f + 8, MAX_FRAME, &m2) == 0);
    n1 = protobuf_c_message_get_packed_size(m);
    n2 = protobuf_c_message_get_packed_size(m2);
    REQUIRE(n1 == n2);
    a = malloc(n1 + 1);
    b = malloc(n2 + 1);
    if (a && b) {
        protobuf_c_message_pack(m, a);
        protobuf_c_message_pack(m2, b);
        REQUIRE(memcmp(a, b, n1) == 0);
    }
    free(a);
    free(b);
    protobuf_c_message_free_unpacked(m2, NULL);
    free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;

    while (size - off >= MRD_FRAME_HEADER_BYTES) {
        struct mrd_frame_header h;
        ProtobufCMessage *m = NULL;
        int rc = mrd_frame_header_parse(data + off, size - off, MAX_FRAME, &h);

        if (rc) {
            REQUIRE(rc == -MRD_ERR_VERSION || rc == -MRD_ERR_MALFORMED ||
                    rc == -MRD_ERR_TOO_LARGE);
            break; /* the connection would be closed here */
        }
        off += MRD_FRAME_HEADER_BYTES;
        if (h.length > size - off)
            break; /* incomplete frame: wait for more */
        rc = mrd_frame_decode(&h, data + off, MAX_FRAME, &m);
        off += h.length;
        if (rc) {
            REQUIRE(rc == -MRD_ERR_MALFORMED || rc == -MRD_ERR_TOO_LARGE || rc == -ENOMEM);
            break;
        }
        if (h.type == MRD_FRAME_BATCH)
            walk_batch((const Meridian__V1__Batch *)m);
        reencode(h.type, m, (int)(h.length & 1)); /* raw or zstd, whichever pays */
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return 0;
}
