/* proto_frame: framing under hostile input. Truncated headers and payloads, oversized
 * and garbage frames, other versions, unknown types and flags, zstd bombs over the
 * expansion cap, broken zstd, protobuf that would blow up when unpacked; and the
 * encoder's own limits. Every case asserts the exact error the contract names. */
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "proto_testutil.h"

static const uint32_t MAX = MRD_FRAME_DEFAULT_MAX;

static int decode_raw(uint8_t type, uint16_t flags, const uint8_t *p, size_t n, uint32_t max,
                      ProtobufCMessage **out)
{
    struct mrd_frame_header h = {MRD_PROTOCOL_VERSION, type, flags, (uint32_t)n};

    *out = NULL;
    return mrd_frame_decode(&h, p, max, out);
}

static void test_header(void)
{
    uint8_t b[8] = {MRD_PROTOCOL_VERSION, 5, 1, 0, 0x10, 0x20, 0x30, 0x00}, w[8];
    struct mrd_frame_header h;

    for (size_t n = 0; n < 8; n++)
        CHECK_EQ(mrd_frame_header_parse(b, n, MAX, &h), -EAGAIN);
    CHECK_OK(mrd_frame_header_parse(b, 8, MAX, &h));
    CHECK_EQ(h.version, MRD_PROTOCOL_VERSION);
    CHECK_EQ(h.type, MRD_FRAME_BATCH);
    CHECK_EQ(h.flags, MRD_FRAME_FLAG_ZSTD);
    CHECK_EQ(h.length, 0x302010);
    mrd_frame_header_write(w, &h);
    CHECK(memcmp(w, b, 8) == 0);

    /* Another version wins over every other defect. */
    for (int v = 0; v < 256; v++) {
        uint8_t x[8] = {(uint8_t)v, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

        if (v == MRD_PROTOCOL_VERSION)
            continue;
        CHECK_EQ(mrd_frame_header_parse(x, 8, MAX, &h), -MRD_ERR_VERSION);
    }
    /* Unknown types. */
    for (int t = 0; t < 256; t++) {
        uint8_t x[8] = {MRD_PROTOCOL_VERSION, (uint8_t)t, 0, 0, 0, 0, 0, 0};
        int want = t >= 1 && t <= MRD_FRAME__MAX ? 0 : -MRD_ERR_MALFORMED;

        CHECK_EQ(mrd_frame_header_parse(x, 8, MAX, &h), want);
        CHECK_EQ(mrd_frame_descriptor((enum mrd_frame_type)t) != NULL, want == 0);
    }
    /* Unknown flag bits, each one alone. */
    for (int bit = 1; bit < 16; bit++) {
        uint8_t x[8] = {
            MRD_PROTOCOL_VERSION, 1, (uint8_t)(1u << bit), (uint8_t)((1u << bit) >> 8), 0, 0, 0, 0};

        CHECK_EQ(mrd_frame_header_parse(x, 8, MAX, &h), -MRD_ERR_MALFORMED);
    }
    /* Length limit: exactly max is fine, one more is not; 0xffffffff is not. */
    {
        uint8_t x[8] = {MRD_PROTOCOL_VERSION, 1, 0, 0};
        struct mrd_frame_header lim = {MRD_PROTOCOL_VERSION, 1, 0, MRD_FRAME_MIN_MAX};

        mrd_frame_header_write(x, &lim);
        CHECK_OK(mrd_frame_header_parse(x, 8, MRD_FRAME_MIN_MAX, &h));
        lim.length++;
        mrd_frame_header_write(x, &lim);
        CHECK_EQ(mrd_frame_header_parse(x, 8, MRD_FRAME_MIN_MAX, &h), -MRD_ERR_TOO_LARGE);
        lim.length = 0xffffffffu;
        mrd_frame_header_write(x, &lim);
        CHECK_EQ(mrd_frame_header_parse(x, 8, MAX, &h), -MRD_ERR_TOO_LARGE);
    }
    /* decode() checks a hand-made header again. */
    {
        ProtobufCMessage *m;
        uint8_t p[4] = {0};
        const uint8_t v = MRD_PROTOCOL_VERSION;
        struct mrd_frame_header bad[] = {{v + 1, 1, 0, 0}, {v - 1, 1, 0, 0},
                                         {v, 0, 0, 0},     {v, MRD_FRAME__MAX + 1, 0, 0},
                                         {v, 1, 4, 0},     {v, 1, 0, MAX + 1}};
        int want[] = {-MRD_ERR_VERSION,   -MRD_ERR_VERSION,   -MRD_ERR_MALFORMED,
                      -MRD_ERR_MALFORMED, -MRD_ERR_MALFORMED, -MRD_ERR_TOO_LARGE};

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
            CHECK_EQ(mrd_frame_decode(&bad[i], p, MAX, &m), want[i]);
    }
    /* Recorded frames (capture files): every version from MRD_PROTOCOL_VERSION_READ_MIN
     * to ours, and only those; a connection takes ours alone. */
    for (int v = 0; v < 256; v++) {
        uint8_t x[8] = {(uint8_t)v, MRD_FRAME_BATCH, 0, 0, 4, 0, 0, 0};
        int known = v >= MRD_PROTOCOL_VERSION_READ_MIN && v <= MRD_PROTOCOL_VERSION;

        CHECK_EQ(mrd_frame_header_parse_recorded(x, 8, MAX, &h), known ? 0 : -MRD_ERR_VERSION);
        if (known)
            CHECK_EQ(h.version, v);
        CHECK_EQ(mrd_frame_header_parse(x, 8, MAX, &h),
                 v == MRD_PROTOCOL_VERSION ? 0 : -MRD_ERR_VERSION);
    }
}

static void test_truncated_payload(void)
{
    const ProtobufCMessage *msg = tu_sample(MRD_FRAME_HELLO, 0);
    uint8_t *f;
    size_t len;
    ProtobufCMessage *m;
    const uint8_t *host;

    /* Raw: a cut inside the "host" string field cannot decode. */
    CHECK_OK(mrd_frame_encode(MRD_FRAME_HELLO, msg, 0, MAX, &f, &len));
    host = memmem(f + 8, len - 8, "gpu-node-063", 12);
    CHECK(host != NULL);
    for (size_t cut = (size_t)(host - f - 8); cut < (size_t)(host - f - 8) + 12; cut++)
        CHECK_EQ(decode_raw(MRD_FRAME_HELLO, 0, f + 8, cut, MAX, &m), -MRD_ERR_MALFORMED);
    /* Every prefix either fails or decodes to a message that differs from the original
     * (protobuf has no end marker, so a cut at a field boundary is a shorter message). */
    for (size_t cut = 0; cut < len - 8; cut++) {
        int rc = decode_raw(MRD_FRAME_HELLO, 0, f + 8, cut, MAX, &m);

        CHECK(rc == 0 || rc == -MRD_ERR_MALFORMED);
        if (rc == 0) {
            CHECK(protobuf_c_message_get_packed_size(m) < len - 8);
            protobuf_c_message_free_unpacked(m, NULL);
        }
    }
    free(f);

    /* Compressed: every cut fails. */
    msg = tu_sample(MRD_FRAME_ERROR, 1);
    CHECK_OK(mrd_frame_encode(MRD_FRAME_ERROR, msg, 1, MAX, &f, &len));
    CHECK_EQ(f[2], MRD_FRAME_FLAG_ZSTD);
    for (size_t cut = 0; cut < len - 8; cut++)
        CHECK_EQ(decode_raw(MRD_FRAME_ERROR, 1, f + 8, cut, MAX, &m), -MRD_ERR_MALFORMED);
    CHECK_OK(decode_raw(MRD_FRAME_ERROR, 1, f + 8, len - 8, MAX, &m));
    protobuf_c_message_free_unpacked(m, NULL);
    free(f);
}

static void test_oversized_encode(void)
{
    Meridian__V1__Error e = MERIDIAN__V1__ERROR__INIT;
    char *text = malloc(20001);
    uint8_t *f = NULL;
    size_t len;
    ProtobufCMessage *m;
    struct mrd_frame_header h;

    CHECK(text != NULL);
    memset(text, 'x', 20000);
    text[20000] = '\0';
    e.message = text;
    /* Raw over the limit fails; compressed under it (and under 8x on decode) works. */
    CHECK_EQ(mrd_frame_encode(MRD_FRAME_ERROR, &e.base, 0, MRD_FRAME_MIN_MAX, &f, &len),
             -MRD_ERR_TOO_LARGE);
    CHECK_OK(mrd_frame_encode(MRD_FRAME_ERROR, &e.base, 1, MRD_FRAME_MIN_MAX, &f, &len));
    CHECK_ULE(len, 8 + MRD_FRAME_MIN_MAX);
    CHECK_OK(mrd_frame_header_parse(f, len, MRD_FRAME_MIN_MAX, &h));
    CHECK_OK(mrd_frame_decode(&h, f + 8, MRD_FRAME_MIN_MAX, &m));
    CHECK_EQ(strlen(((Meridian__V1__Error *)m)->message), 20000);
    protobuf_c_message_free_unpacked(m, NULL);
    /* The same frame read by a peer whose limit makes 20000 > 8 x max. */
    h.length = (uint32_t)(len - 8);
    CHECK_EQ(mrd_frame_decode(&h, f + 8, 2048, &m), -MRD_ERR_TOO_LARGE);
    free(f);
    /* A message over 8 x max cannot be sent even compressed. */
    CHECK_EQ(mrd_frame_encode(MRD_FRAME_ERROR, &e.base, 1, 2048, &f, &len), -MRD_ERR_TOO_LARGE);
    /* Descriptor and type must agree. */
    CHECK_EQ(mrd_frame_encode(MRD_FRAME_ACK, &e.base, 0, MAX, &f, &len), -EINVAL);
    CHECK_EQ(mrd_frame_encode((enum mrd_frame_type)9, &e.base, 0, MAX, &f, &len), -EINVAL);
    free(text);
}

static void test_zstd_bombs(void)
{
    size_t big = (size_t)MAX * MRD_FRAME_MAX_EXPANSION + 1; /* one byte over the cap */
    uint8_t *zeros = calloc(1, big), *z;
    size_t zcap = ZSTD_compressBound(big), zn;
    ProtobufCMessage *m;
    ZSTD_CCtx *cc;
    ZSTD_inBuffer in;
    ZSTD_outBuffer out;

    CHECK(zeros != NULL);
    z = malloc(zcap);
    CHECK(z != NULL);
    /* Declared content size over MAX_EXPANSION x max: refused before allocating. */
    zn = ZSTD_compress(z, zcap, zeros, big, 1);
    CHECK(!ZSTD_isError(zn));
    CHECK_ULE(zn, MAX);
    CHECK_EQ(decode_raw(MRD_FRAME_BATCH, 1, z, zn, MAX, &m), -MRD_ERR_TOO_LARGE);
    /* Exactly at the cap passes the size check (and then fails as protobuf: all zeros
     * is field number 0, which is invalid). */
    zn = ZSTD_compress(z, zcap, zeros, big - 1, 1);
    CHECK_EQ(decode_raw(MRD_FRAME_BATCH, 1, z, zn, MAX, &m), -MRD_ERR_MALFORMED);

    /* No declared content size: refused. */
    cc = ZSTD_createCCtx();
    CHECK(cc != NULL);
    CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
    in = (ZSTD_inBuffer){zeros, 4096, 0};
    out = (ZSTD_outBuffer){z, zcap, 0};
    CHECK_EQ(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end), 0);
    CHECK_EQ(ZSTD_getFrameContentSize(z, out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    CHECK_EQ(decode_raw(MRD_FRAME_BATCH, 1, z, out.pos, MAX, &m), -MRD_ERR_MALFORMED);
    ZSTD_freeCCtx(cc);

    /* Two frames back to back: the second one's size was never declared up front. */
    {
        const ProtobufCMessage *ack = tu_sample(MRD_FRAME_ACK, 0);
        uint8_t raw[64], two[256];
        size_t rn = protobuf_c_message_pack(ack, raw), n1, n2;

        n1 = ZSTD_compress(two, sizeof(two), raw, rn, 1);
        CHECK(!ZSTD_isError(n1));
        CHECK_OK(decode_raw(MRD_FRAME_ACK, 1, two, n1, MAX, &m));
        protobuf_c_message_free_unpacked(m, NULL);
        n2 = ZSTD_compress(two + n1, sizeof(two) - n1, raw, rn, 1);
        CHECK(!ZSTD_isError(n2));
        CHECK_EQ(decode_raw(MRD_FRAME_ACK, 1, two, n1 + n2, MAX, &m), -MRD_ERR_MALFORMED);
        /* Trailing garbage after one frame. */
        two[n1] = 0xab;
        CHECK_EQ(decode_raw(MRD_FRAME_ACK, 1, two, n1 + 1, MAX, &m), -MRD_ERR_MALFORMED);
        /* Not zstd at all, and an empty payload flagged as zstd. */
        CHECK_EQ(decode_raw(MRD_FRAME_ACK, 1, raw, rn, MAX, &m), -MRD_ERR_MALFORMED);
        CHECK_EQ(decode_raw(MRD_FRAME_ACK, 1, raw, 0, MAX, &m), -MRD_ERR_MALFORMED);
        /* Broken magic number. */
        n1 = ZSTD_compress(two, sizeof(two), raw, rn, 1);
        two[0] ^= 0x01;
        CHECK_EQ(decode_raw(MRD_FRAME_ACK, 1, two, n1, MAX, &m), -MRD_ERR_MALFORMED);
    }
    free(z);
    free(zeros);
}

/* Flip every byte of a compressed batch frame in turn: decode must never crash and must
 * either fail cleanly or produce something mrd_batch_check can judge. */
static void test_bad_zstd_bytes(void)
{
    struct mrd_batch_builder_config cfg = {"flip", 1, 1, 0, 1024, 1};
    struct mrd_batch_builder *b;
    uint64_t seed = 7;
    int64_t t = 0;
    uint32_t id;
    uint8_t *f;
    size_t len;
    int failures = 0;

    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    id = mrd_batch_builder_intern(b, "kernel");
    for (int i = 0; i < 200; i++) {
        union mrd_any_event ev;

        tu_event(&seed, MRD_EV_KERNEL, &t, &id, 1, &ev);
        CHECK_OK(tu_add(b, MRD_EV_KERNEL, &ev));
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    CHECK_EQ(f[2], MRD_FRAME_FLAG_ZSTD);
    for (size_t i = 8; i < len; i++) {
        ProtobufCMessage *m;
        int rc;

        f[i] ^= 0x5a;
        rc = decode_raw(MRD_FRAME_BATCH, 1, f + 8, len - 8, MAX, &m);
        CHECK(rc == 0 || rc == -MRD_ERR_MALFORMED || rc == -MRD_ERR_TOO_LARGE);
        if (rc == 0) {
            (void)mrd_batch_check((Meridian__V1__Batch *)m, NULL);
            protobuf_c_message_free_unpacked(m, NULL);
        } else {
            failures++;
        }
        f[i] ^= 0x5a;
    }
    CHECK_GT(failures, 0); /* the header and block structure at least are checked */
    free(f);
    mrd_batch_builder_free(b);
}

/* Random payloads for every type, raw: 0 or MALFORMED, never a crash or a leak. */
static void test_garbage(void)
{
    uint64_t seed = 99;
    uint8_t buf[512];
    int ok = 0, bad = 0;

    for (int it = 0; it < 20000; it++) {
        uint8_t type = (uint8_t)(1 + tu_below(&seed, MRD_FRAME__MAX));
        size_t n = tu_below(&seed, sizeof(buf));
        ProtobufCMessage *m;
        int rc;

        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)tu_rand(&seed);
        rc = decode_raw(type, 0, buf, n, MAX, &m);
        CHECK(rc == 0 || rc == -MRD_ERR_MALFORMED);
        if (rc == 0) {
            ok++;
            if (type == MRD_FRAME_BATCH &&
                mrd_batch_check((Meridian__V1__Batch *)m, NULL) == 0) {
                for (int k = 1; k < MRD_EV__COUNT; k++) {
                    struct mrd_batch_cursor c;
                    union mrd_any_event ev;
                    size_t cnt = 0;

                    mrd_batch_cursor_init(&c, (Meridian__V1__Batch *)m);
                    while (tu_next(&c, k, &ev))
                        cnt++;
                    CHECK_UEQ(cnt, mrd_batch_count((Meridian__V1__Batch *)m, k));
                }
            }
            protobuf_c_message_free_unpacked(m, NULL);
        } else {
            bad++;
        }
    }
    CHECK_GT(bad, 1000);
    CHECK_GT(ok, 10); /* empty and tiny payloads are valid messages */
}

/* A payload of 100,000 empty StringDefs is 200 KB on the wire but ~24x that unpacked:
 * the unpack budget refuses it. A legitimate batch of 60,000 short strings decodes. */
static void test_unpack_budget(void)
{
    size_t n = 100000;
    uint8_t *p = malloc(2 * n);
    ProtobufCMessage *m;
    struct mrd_batch_builder_config cfg = {"budget", 1, 1, 0, 65536, 1};
    struct mrd_batch_builder *b;
    uint8_t *f;
    size_t len;
    Meridian__V1__Batch *bm;

    CHECK(p != NULL);
    for (size_t i = 0; i < n; i++)
        p[2 * i] = 0x2a, p[2 * i + 1] = 0x00; /* field 5 (strings), length 0 */
    CHECK_EQ(decode_raw(MRD_FRAME_BATCH, 0, p, 2 * n, MAX, &m), -MRD_ERR_TOO_LARGE);
    CHECK_OK(decode_raw(MRD_FRAME_BATCH, 0, p, 2 * 100, MAX, &m)); /* a few are fine */
    protobuf_c_message_free_unpacked(m, NULL);
    free(p);

    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    for (uint32_t i = 0; i < 60000; i++) {
        char s[16];
        struct mrd_api a = {.name = 0};

        snprintf(s, sizeof(s), "%u", i);
        a.name = mrd_batch_builder_intern(b, s);
        CHECK_EQ(a.name, i + 1);
        CHECK_OK(mrd_batch_add_api(b, &a));
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    bm = tu_decode_batch(f, len, MAX);
    CHECK_UEQ(bm->n_strings, 60000);
    CHECK_STREQ(bm->strings[59999]->value, "59999");
    protobuf_c_message_free_unpacked(&bm->base, NULL);
    free(f);
    mrd_batch_builder_free(b);
}

/* Field number 0 is invalid; protobuf-c lets it through when the key is overlong
 * (found by fuzz_frame_batch). Unknown positive field numbers stay accepted: that is how
 * additive changes stay compatible. */
static void test_field_zero(void)
{
    const uint8_t ok[] = {0x08, 0x01};
    const uint8_t unknown[] = {0x08, 0x01, 0xa2, 0x06, 0x00};    /* field 100, empty */
    const uint8_t short0[] = {0x08, 0x01, 0x02, 0x00};           /* field 0, 1-byte key */
    const uint8_t long0[] = {0x08, 0x01, 0x82, 0x00, 0x00};      /* field 0, 2-byte key */
    const uint8_t nested0[] = {0x18, 0x01, 0x2a, 0x03, 0x82, 0x00, 0x00}; /* in a StringDef */
    ProtobufCMessage *m;

    CHECK_OK(decode_raw(MRD_FRAME_ACK, 0, ok, sizeof(ok), MAX, &m));
    protobuf_c_message_free_unpacked(m, NULL);
    CHECK_OK(decode_raw(MRD_FRAME_ACK, 0, unknown, sizeof(unknown), MAX, &m));
    CHECK_EQ(m->n_unknown_fields, 1);
    protobuf_c_message_free_unpacked(m, NULL);
    CHECK_EQ(decode_raw(MRD_FRAME_ACK, 0, short0, sizeof(short0), MAX, &m), -MRD_ERR_MALFORMED);
    CHECK_EQ(decode_raw(MRD_FRAME_ACK, 0, long0, sizeof(long0), MAX, &m), -MRD_ERR_MALFORMED);
    CHECK_EQ(decode_raw(MRD_FRAME_BATCH, 0, nested0, sizeof(nested0), MAX, &m),
             -MRD_ERR_MALFORMED);
}

/* mrd_frame_encode_into writes the bytes mrd_frame_encode writes uncompressed, with the
 * version it is given; a buffer one byte short is refused whole; the header peek reads the
 * fields back as written. */
static void test_encode_into(void)
{
    for (int t = 1; t <= MRD_FRAME__MAX; t++) {
        if (t == MRD_FRAME_BATCH)
            continue; /* no sample: batches come from the builder (proto_roundtrip) */
        const ProtobufCMessage *msg = tu_sample((enum mrd_frame_type)t, 0);
        uint8_t *f = NULL, buf[1 << 16];
        size_t len = 0, n = 0;
        CHECK_OK(mrd_frame_encode((enum mrd_frame_type)t, msg, 0, MAX, &f, &len));
        CHECK_UEQ(mrd_frame_encoded_size(msg), len);
        CHECK(len <= sizeof(buf));
        CHECK_OK(mrd_frame_encode_into((enum mrd_frame_type)t, MRD_PROTOCOL_VERSION, msg, buf,
                                       sizeof(buf), &n));
        CHECK_UEQ(n, len);
        CHECK(memcmp(buf, f, len) == 0);
        memset(buf, 0xAB, sizeof(buf));
        CHECK_EQ(mrd_frame_encode_into((enum mrd_frame_type)t, MRD_PROTOCOL_VERSION, msg, buf,
                                       len - 1, &n),
                 -ENOBUFS);
        CHECK_EQ(buf[0], 0xAB);
        CHECK_OK(mrd_frame_encode_into((enum mrd_frame_type)t, 1, msg, buf, len, &n));
        struct mrd_frame_header h;
        mrd_frame_header_peek(buf, &h);
        CHECK_EQ(h.version, 1);
        CHECK_EQ(h.type, t);
        CHECK_EQ(h.flags, 0);
        CHECK_UEQ(h.length, len - MRD_FRAME_HEADER_BYTES);
        CHECK(memcmp(buf + 1, f + 1, len - 1) == 0);
        free(f);
        if (t > 1) /* a message of another type than the frame says */
            CHECK_EQ(mrd_frame_encode_into(MRD_FRAME_HELLO, MRD_PROTOCOL_VERSION, msg, buf,
                                           sizeof(buf), &n),
                     -EINVAL);
    }
}

int main(void)
{
    test_field_zero();
    test_encode_into();
    test_header();
    test_truncated_payload();
    test_oversized_encode();
    test_zstd_bombs();
    test_bad_zstd_bytes();
    test_garbage();
    test_unpack_budget();
    return 0;
}
