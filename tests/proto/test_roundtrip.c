/* proto_roundtrip: every message type survives encode -> header parse -> decode intact,
 * raw and zstd-compressed. "Intact" is checked field by field in full: the decoded
 * message re-packs to exactly the bytes of the original (protobuf-c packs
 * deterministically), plus direct checks of fields that matter to the peer. */
#include <stdlib.h>
#include <string.h>

#include "proto_testutil.h"

static ProtobufCMessage *roundtrip(enum mrd_frame_type type, const ProtobufCMessage *msg,
                                   int level, int want_flags)
{
    uint8_t *frame = NULL, *orig, *again;
    size_t len, n1, n2;
    struct mrd_frame_header h;
    ProtobufCMessage *out = NULL;

    CHECK_OK(mrd_frame_encode(type, msg, level, MRD_FRAME_DEFAULT_MAX, &frame, &len));
    CHECK_OK(mrd_frame_header_parse(frame, len, MRD_FRAME_DEFAULT_MAX, &h));
    CHECK_EQ(h.version, MRD_PROTOCOL_VERSION);
    CHECK_EQ(h.type, type);
    if (want_flags >= 0)
        CHECK_EQ(h.flags, want_flags);
    CHECK_UEQ(len, MRD_FRAME_HEADER_BYTES + (size_t)h.length);
    CHECK_OK(mrd_frame_decode(&h, frame + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &out));
    CHECK(out->descriptor == mrd_frame_descriptor(type));

    n1 = protobuf_c_message_get_packed_size(msg);
    n2 = protobuf_c_message_get_packed_size(out);
    CHECK_UEQ(n1, n2);
    orig = malloc(n1 + 1);
    again = malloc(n2 + 1);
    CHECK(orig && again);
    protobuf_c_message_pack(msg, orig);
    protobuf_c_message_pack(out, again);
    CHECK(memcmp(orig, again, n1) == 0);
    if (h.flags & MRD_FRAME_FLAG_ZSTD)
        CHECK_LT(h.length, n1); /* compression only when it pays */
    free(orig);
    free(again);
    free(frame);
    return out;
}

int main(void)
{
    for (int type = 1; type <= MRD_FRAME__MAX; type++) {
        if (type == MRD_FRAME_BATCH)
            continue; /* below, through the builder */
        for (int big = 0; big <= 1; big++) {
            const ProtobufCMessage *msg = tu_sample((enum mrd_frame_type)type, big);
            ProtobufCMessage *out;
            int tiny, grows;

            CHECK(msg != NULL);
            out = roundtrip((enum mrd_frame_type)type, msg, 0, 0);
            protobuf_c_message_free_unpacked(out, NULL);
            /* Tiny messages do not compress: the encoder must send them raw; big
             * repetitive ones must be compressed. */
            tiny = type == MRD_FRAME_CLOCK_PROBE || type == MRD_FRAME_CLOCK_REPLY ||
                   type == MRD_FRAME_ACK || type == MRD_FRAME_CHALLENGE || type == MRD_FRAME_PROOF;
            grows = type == MRD_FRAME_HELLO || type == MRD_FRAME_HELLO_REPLY ||
                    type == MRD_FRAME_ERROR; /* `big` makes these 64 KiB of text */
            out = roundtrip((enum mrd_frame_type)type, msg, 3,
                            big && grows ? (int)MRD_FRAME_FLAG_ZSTD : tiny ? 0 : -1);
            if (type == MRD_FRAME_HELLO) {
                const Meridian__V1__Hello *hl = (const Meridian__V1__Hello *)out;

                CHECK_EQ(hl->rank, 511);
                CHECK_UEQ(hl->base.n_unknown_fields, 0); /* no secret field since v2 */
                CHECK_UEQ(hl->n_gpus, big ? 64 : 2);
                CHECK_STREQ(hl->gpus[1]->pci_bus_id, "0000:19:00.0");
                CHECK_EQ(hl->role, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK);
                CHECK_UEQ(hl->agent_instance, 0xfedcba9876543210ull);
            } else if (type == MRD_FRAME_CLOCK_REPLY) {
                CHECK_EQ(((const Meridian__V1__ClockReply *)out)->t0, -5);
                CHECK_EQ(((const Meridian__V1__ClockReply *)out)->t2, 1793692800000012345ll);
            } else if (type == MRD_FRAME_HELLO_REPLY) {
                CHECK_UEQ(((const Meridian__V1__HelloReply *)out)->committed_seq, UINT64_MAX);
                CHECK_EQ(((const Meridian__V1__HelloReply *)out)->goodbye_acks, 1);
                CHECK_EQ(((const Meridian__V1__HelloReply *)out)->code, MRD_ERR_RANK_HELD);
            } else if (type == MRD_FRAME_CHALLENGE) {
                const Meridian__V1__Challenge *ch = (const Meridian__V1__Challenge *)out;

                CHECK_UEQ(ch->nonce.len, 32);
                CHECK_EQ(ch->nonce.data[31], (uint8_t)(31 * 37 + 11));
            } else if (type == MRD_FRAME_ACK) {
                const Meridian__V1__Ack *ak = (const Meridian__V1__Ack *)out;

                CHECK_EQ(ak->goodbye, big);
                CHECK_UEQ(ak->seq, big ? 0 : 123456789);
            }
            protobuf_c_message_free_unpacked(out, NULL);
        }
    }

    /* Empty messages are legal frames of length 0. */
    {
        Meridian__V1__Ack ack = MERIDIAN__V1__ACK__INIT;
        ProtobufCMessage *out = roundtrip(MRD_FRAME_ACK, &ack.base, 1, 0);

        CHECK_UEQ(((Meridian__V1__Ack *)out)->seq, 0);
        protobuf_c_message_free_unpacked(out, NULL);
    }

    /* A Batch with every kind, through the builder, raw and compressed. */
    for (int level = 0; level <= 1; level++) {
        struct mrd_batch_builder_config cfg = {"rt", 9, 5, 0, 4096, level};
        struct mrd_batch_builder *b;
        uint64_t seed = 42, dropped[MRD_DROP__COUNT] = {0, 5, 0, 7};
        int64_t t = 1000;
        uint32_t ids[3];
        uint8_t *frame;
        size_t len;
        Meridian__V1__Batch *m;

        CHECK_OK(mrd_batch_builder_new(&cfg, &b));
        ids[0] = mrd_batch_builder_intern(b, "AllReduce");
        ids[1] = mrd_batch_builder_intern(b, "ncclFloat32");
        ids[2] = mrd_batch_builder_intern(b, "RING");
        mrd_batch_builder_set_dropped(b, dropped);
        for (int i = 0; i < 300; i++) {
            union mrd_any_event ev;
            int kind = 1 + i % (MRD_EV__COUNT - 1);

            tu_event(&seed, kind, &t, ids, 3, &ev);
            CHECK_OK(tu_add(b, kind, &ev));
        }
        CHECK_OK(mrd_batch_builder_finish(b, 1, &frame, &len));
        CHECK_EQ(frame[2], level ? 1 : 0);
        m = tu_decode_batch(frame, len, MRD_FRAME_DEFAULT_MAX);
        CHECK_STREQ(m->run_id, "rt");
        CHECK_EQ(m->rank, 9);
        CHECK_UEQ(m->seq, 1);
        CHECK_UEQ(m->agent_instance, 5);
        CHECK_UEQ(m->n_strings, 3);
        CHECK_STREQ(m->strings[2]->value, "RING");
        CHECK_UEQ(m->n_dropped, 2);
        CHECK_EQ(m->dropped[0]->key, MRD_DROP_RING_FULL);
        CHECK_UEQ(m->dropped[0]->value, 5);
        CHECK_EQ(m->dropped[1]->key, MRD_DROP_CUPTI_DEVICE);
        CHECK_UEQ(m->dropped[1]->value, 7);
        for (int k = 1; k < MRD_EV__COUNT; k++)
            CHECK_UEQ(mrd_batch_count(m, k), 300 / (MRD_EV__COUNT - 1) + (k <= 300 % (MRD_EV__COUNT - 1)));
        protobuf_c_message_free_unpacked(&m->base, NULL);
        free(frame);
        mrd_batch_builder_free(b);
    }
    return 0;
}
