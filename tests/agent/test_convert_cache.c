/* agent_convert_cache: the flusher's string-id cache by address (convert.c) never changes
 * what a batch says.
 *
 * Real records go through mrd__convert_record into real batch builders; every batch is
 * finished, decoded as meridiand decodes it, and each event's string id is checked
 * against the builder's own id for the string's value:
 *  - one value at two addresses gets one id (and counts as one new string);
 *  - the same address many times gets its first id, and costs no new string;
 *  - after the builder is replaced (mrd__convert_bind: a new string table), an address
 *    cached under the old builder gets the new builder's id, not the stale one;
 *  - an NVTX name copied into the record (inline_str) is never cached by address: two
 *    records whose inline names differ at the same address get different ids;
 *  - NCCL's four strings and MPI's call name come out right through the cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "convert.h"
#include "frame.h"

/* Finishes b's pending batch and returns it decoded (caller frees with
 * protobuf_c_message_free_unpacked). */
static Meridian__V1__Batch *finish_decode(struct mrd_batch_builder *b, uint64_t seq)
{
    uint8_t *frame;
    size_t len;
    struct mrd_frame_header h;
    ProtobufCMessage *m = NULL;
    if (mrd_batch_builder_finish(b, seq, &frame, &len) != 0)
        return NULL;
    if (mrd_frame_header_parse(frame, len, MRD_FRAME_DEFAULT_MAX, &h) != 0 ||
        mrd_frame_decode(&h, frame + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &m) != 0)
        m = NULL;
    free(frame);
    return (Meridian__V1__Batch *)m;
}

static struct mrd_record kernel(const char *name)
{
    struct mrd_record r = {.kind = MRD_EV_KERNEL};
    r.str[0] = name;
    r.ev.kernel.start = 1000;
    r.ev.kernel.end = 2000;
    return r;
}

int main(void)
{
    struct mrd_batch_builder_config bc = {
        .run_id = "cache-test", .rank = 0, .max_frame = MRD_FRAME_DEFAULT_MAX, .target_events = 64};
    struct mrd_batch_builder *b1, *b2;
    CHECK_OK(mrd_batch_builder_new(&bc, &b1));
    CHECK_OK(mrd_batch_builder_new(&bc, &b2));
    struct mrd_convert *cv = calloc(1, sizeof *cv); /* 16 KiB of cache: not on the stack */
    CHECK(cv != NULL);
    cv->b = b1;
    cv->target_events = 64;

    static char a1[] = "void at::native::vectorized_elementwise_kernel<4>(int)";
    static char a2[] = "void at::native::vectorized_elementwise_kernel<4>(int)"; /* same value */
    static const char other[] = "ampere_sgemm_128x64_nn";

    /* b1: a1, a2 (same value, other address), a1 x 3, other */
    const char *seq1[] = {a1, a2, a1, a1, a1, other};
    for (size_t i = 0; i < sizeof seq1 / sizeof seq1[0]; i++) {
        struct mrd_record r = kernel(seq1[i]);
        CHECK_OK(mrd__convert_record(cv, &r));
    }
    CHECK_EQ(cv->max_id, 2); /* two distinct values */
    CHECK_EQ(cv->new_string_bytes, strlen(a1) + strlen(other));
    Meridian__V1__Batch *m = finish_decode(b1, 1);
    CHECK(m != NULL);
    struct mrd_batch_cursor c;
    struct mrd_kernel k;
    mrd_batch_cursor_init(&c, m);
    uint32_t want1 = mrd_batch_builder_intern(b1, a1), want_other = mrd_batch_builder_intern(b1, other);
    CHECK(want1 != want_other);
    for (size_t i = 0; i < sizeof seq1 / sizeof seq1[0]; i++) {
        CHECK_EQ(mrd_batch_next_kernel(&c, &k), 1);
        CHECK_EQ(k.name, seq1[i] == other ? want_other : want1);
    }
    CHECK_EQ(mrd_batch_next_kernel(&c, &k), 0);
    protobuf_c_message_free_unpacked(&m->base, NULL);

    /* b2 (a new string table): `other` first, so a1's stale id from b1 would name it */
    mrd__convert_bind(cv, b2);
    const char *seq2[] = {other, a1, a1};
    for (size_t i = 0; i < 3; i++) {
        struct mrd_record r = kernel(seq2[i]);
        CHECK_OK(mrd__convert_record(cv, &r));
    }
    /* NVTX: one stack buffer, two different inline names; MPI and NCCL through the cache */
    char inl[MRD_RECORD_INLINE_STR];
    uint32_t nvtx_ids[2];
    for (int i = 0; i < 2; i++) {
        struct mrd_record r = {.kind = MRD_EV_NVTX};
        strcpy(inl, i ? "step 2" : "step 1");
        memcpy(r.inline_str, inl, sizeof inl);
        r.str[0] = "meridian-test-domain";
        CHECK_OK(mrd__convert_record(cv, &r));
    }
    struct mrd_record op = {.kind = MRD_EV_NCCL_OP};
    op.str[0] = "AllReduce";
    op.str[1] = "ncclFloat32";
    op.str[2] = "RING";
    op.str[3] = "LL";
    CHECK_OK(mrd__convert_record(cv, &op));
    CHECK_OK(mrd__convert_record(cv, &op));
    struct mrd_record mpi = {.kind = MRD_EV_MPI};
    mpi.str[0] = "MPI_Allreduce";
    CHECK_OK(mrd__convert_record(cv, &mpi));

    m = finish_decode(b2, 2);
    CHECK(m != NULL);
    mrd_batch_cursor_init(&c, m);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ(mrd_batch_next_kernel(&c, &k), 1);
        CHECK_EQ(k.name, mrd_batch_builder_intern(b2, seq2[i]));
    }
    CHECK_EQ(want1, mrd_batch_builder_intern(b2, other)); /* the stale id would name `other` */
    struct mrd_nvtx n;
    mrd_batch_cursor_init(&c, m); /* a cursor walks one kind */
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(mrd_batch_next_nvtx(&c, &n), 1);
        nvtx_ids[i] = n.name;
        CHECK_EQ(n.name, mrd_batch_builder_intern(b2, i ? "step 2" : "step 1"));
        CHECK_EQ(n.domain, mrd_batch_builder_intern(b2, "meridian-test-domain"));
    }
    CHECK(nvtx_ids[0] != nvtx_ids[1]);
    struct mrd_nccl_op o;
    mrd_batch_cursor_init(&c, m);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(mrd_batch_next_nccl_op(&c, &o), 1);
        CHECK_EQ(o.func, mrd_batch_builder_intern(b2, "AllReduce"));
        CHECK_EQ(o.datatype, mrd_batch_builder_intern(b2, "ncclFloat32"));
        CHECK_EQ(o.algo, mrd_batch_builder_intern(b2, "RING"));
        CHECK_EQ(o.proto, mrd_batch_builder_intern(b2, "LL"));
    }
    struct mrd_mpi mp;
    mrd_batch_cursor_init(&c, m);
    CHECK_EQ(mrd_batch_next_mpi(&c, &mp), 1);
    CHECK_EQ(mp.call, mrd_batch_builder_intern(b2, "MPI_Allreduce"));
    protobuf_c_message_free_unpacked(&m->base, NULL);

    free(cv);
    mrd_batch_builder_free(b1);
    mrd_batch_builder_free(b2);
    printf("agent_convert_cache: ok\n");
    return 0;
}
