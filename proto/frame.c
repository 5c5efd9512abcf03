/* meridian framing: protobuf-c messages <-> length-prefixed, optionally zstd frames.
 *
 * Sits between the protocol's messages and the byte streams: the agent's flusher and
 * clock threads encode (mrd_frame_encode) before writing to a socket; meridiand's event
 * loop parses each header as soon as 8 bytes are buffered (mrd_frame_header_parse), waits
 * for the payload, then decodes it (mrd_frame_decode). Workload: a few BATCH frames per
 * second per rank of up to max_frame bytes (default 4 MiB) plus many tiny clock frames;
 * on the aggregator, up to 512 ranks' worth on one thread.
 *
 * Everything that comes from the wire is untrusted. The limits, checked before any use:
 *   - header: known version, known type, no unknown flag bits, length <= max_frame;
 *   - zstd payload: exactly one zstd frame that declares its content size, the size at
 *     most MRD_FRAME_MAX_EXPANSION * max_frame, decompressed into a buffer of exactly that
 *     size (a frame that tries to write more fails inside zstd);
 *   - a message with a field number 0 anywhere (protobuf-c lets an overlong key through)
 *     is malformed;
 *   - protobuf-c unpack runs with a counting allocator that refuses to allocate more than
 *     UNPACK_FACTOR bytes per payload byte (plus a small constant), so a hostile frame
 *     made of thousands of empty sub-messages cannot turn 32 MiB into gigabytes.
 * No shared state: every function is thread-safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "error.h"
#include "frame.h"

/* Unpacked protobuf-c structures are at most ~8x their encoding for any legitimate
 * message (a 1-byte varint becomes an 8-byte integer; a short StringDef becomes a
 * 40-byte struct plus a pointer). Hostile input can reach ~24x (empty sub-messages), so
 * this cap only bites on input no encoder of ours produces. */
#define UNPACK_FACTOR 16u
#define UNPACK_SLACK (64u << 10)

static const ProtobufCMessageDescriptor *const descriptors[MRD_FRAME__MAX + 1] = {
    [MRD_FRAME_HELLO] = &meridian__v1__hello__descriptor,
    [MRD_FRAME_HELLO_REPLY] = &meridian__v1__hello_reply__descriptor,
    [MRD_FRAME_CLOCK_PROBE] = &meridian__v1__clock_probe__descriptor,
    [MRD_FRAME_CLOCK_REPLY] = &meridian__v1__clock_reply__descriptor,
    [MRD_FRAME_BATCH] = &meridian__v1__batch__descriptor,
    [MRD_FRAME_ACK] = &meridian__v1__ack__descriptor,
    [MRD_FRAME_GOODBYE] = &meridian__v1__goodbye__descriptor,
    [MRD_FRAME_ERROR] = &meridian__v1__error__descriptor,
    [MRD_FRAME_CHALLENGE] = &meridian__v1__challenge__descriptor,
    [MRD_FRAME_PROOF] = &meridian__v1__proof__descriptor,
};

/* Returns the descriptor of the message a frame of `type` carries; NULL when the type is
 * unknown. Thread-safe. */
const ProtobufCMessageDescriptor *mrd_frame_descriptor(enum mrd_frame_type type)
{
    if ((int)type <= 0 || (int)type > MRD_FRAME__MAX)
        return NULL;
    return descriptors[type];
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* The checks shared by header parsing and decoding (decode may get a header that the
 * caller filled in by hand). */
static int header_check(const struct mrd_frame_header *h, uint32_t max_frame, uint8_t oldest)
{
    if (h->version < oldest || h->version > MRD_PROTOCOL_VERSION)
        return -MRD_ERR_VERSION;
    if (!mrd_frame_descriptor((enum mrd_frame_type)h->type))
        return -MRD_ERR_MALFORMED;
    if (h->flags & ~MRD_FRAME_FLAG_ZSTD)
        return -MRD_ERR_MALFORMED;
    if (h->length > max_frame)
        return -MRD_ERR_TOO_LARGE;
    return 0;
}

/* Parses the 8-byte header at buf (see frame.h for the layout and results). The version
 * is checked first so that a peer of another version always gets MRD_ERR_VERSION, even
 * if its types or flags differ. Thread-safe. */
static int parse_since(const uint8_t *buf, size_t avail, uint32_t max_frame, uint8_t oldest,
                       struct mrd_frame_header *h)
{
    struct mrd_frame_header t;
    int rc;

    if (avail < MRD_FRAME_HEADER_BYTES)
        return -EAGAIN;
    t.version = buf[0];
    t.type = buf[1];
    t.flags = (uint16_t)(buf[2] | buf[3] << 8);
    t.length = get_le32(buf + 4);
    rc = header_check(&t, max_frame, oldest);
    if (rc)
        return rc;
    *h = t;
    return 0;
}

int mrd_frame_header_parse(const uint8_t *buf, size_t avail, uint32_t max_frame,
                           struct mrd_frame_header *h)
{
    return parse_since(buf, avail, max_frame, MRD_PROTOCOL_VERSION, h);
}

/* Recorded frames (capture files): any version this build still reads. Thread-safe. */
int mrd_frame_header_parse_recorded(const uint8_t *buf, size_t avail, uint32_t max_frame,
                                    struct mrd_frame_header *h)
{
    return parse_since(buf, avail, max_frame, MRD_PROTOCOL_VERSION_READ_MIN, h);
}

/* Writes h into out[0..7] (little-endian flags and length). Thread-safe. */
void mrd_frame_header_write(uint8_t out[MRD_FRAME_HEADER_BYTES], const struct mrd_frame_header *h)
{
    out[0] = h->version;
    out[1] = h->type;
    out[2] = (uint8_t)h->flags;
    out[3] = (uint8_t)(h->flags >> 8);
    put_le32(out + 4, h->length);
}

/* The fields as written (contract in frame.h). Thread-safe. */
void mrd_frame_header_peek(const uint8_t buf[MRD_FRAME_HEADER_BYTES], struct mrd_frame_header *h)
{
    h->version = buf[0];
    h->type = buf[1];
    h->flags = (uint16_t)(buf[2] | buf[3] << 8);
    h->length = get_le32(buf + 4);
}

size_t mrd_frame_encoded_size(const ProtobufCMessage *msg)
{
    return MRD_FRAME_HEADER_BYTES + protobuf_c_message_get_packed_size(msg);
}

/* Uncompressed, into the caller's buffer (contract in frame.h). Thread-safe. */
int mrd_frame_encode_into(enum mrd_frame_type type, uint8_t version, const ProtobufCMessage *msg,
                          uint8_t *buf, size_t cap, size_t *out_len)
{
    const ProtobufCMessageDescriptor *d = mrd_frame_descriptor(type);
    if (!d || !msg || msg->descriptor != d || !buf || !out_len)
        return -EINVAL;
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > UINT32_MAX || n > cap || cap - n < MRD_FRAME_HEADER_BYTES)
        return -ENOBUFS;
    struct mrd_frame_header h = {version, (uint8_t)type, 0, (uint32_t)n};
    mrd_frame_header_write(buf, &h);
    protobuf_c_message_pack(msg, buf + MRD_FRAME_HEADER_BYTES);
    *out_len = MRD_FRAME_HEADER_BYTES + n;
    return 0;
}

/* Compresses raw[0..raw_len) into frame+8. Returns the compressed length when it is
 * smaller than raw_len and fits max_frame, 0 when compression does not pay (the caller
 * then sends raw), or -ENOMEM. */
static long compress_payload(const uint8_t *raw, size_t raw_len, int level, uint32_t max_frame,
                             uint8_t *dst, size_t dst_cap)
{
    size_t n = ZSTD_compress(dst, dst_cap, raw, raw_len, level);

    if (ZSTD_isError(n)) {
        /* dst_cap < raw_len: "does not fit" means "does not pay". */
        if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall)
            return 0;
        return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : 0;
    }
    if (n >= raw_len || n > max_frame)
        return 0;
    return (long)n;
}

/* Encodes msg as a complete frame of `type` (see frame.h). The payload is compressed only
 * when compress_level > 0 and compression makes it smaller; otherwise it travels raw with
 * the ZSTD flag clear. Returns 0 with *out (malloc'd, caller frees) and *out_len; -EINVAL
 * when msg's descriptor does not match type; -ENOMEM; -MRD_ERR_TOO_LARGE when even the
 * best payload exceeds max_frame. Thread-safe. */
int mrd_frame_encode(enum mrd_frame_type type, const ProtobufCMessage *msg, int compress_level,
                     uint32_t max_frame, uint8_t **out, size_t *out_len)
{
    const ProtobufCMessageDescriptor *d = mrd_frame_descriptor(type);
    struct mrd_frame_header h = {MRD_PROTOCOL_VERSION, (uint8_t)type, 0, 0};
    uint8_t *raw = NULL, *frame = NULL;
    size_t raw_len, cap;
    long zlen = 0;
    int rc;

    if (!d || !msg || msg->descriptor != d || !out || !out_len)
        return -EINVAL;
    raw_len = protobuf_c_message_get_packed_size(msg);
    if (raw_len > (size_t)max_frame * MRD_FRAME_MAX_EXPANSION ||
        (compress_level <= 0 && raw_len > max_frame))
        return -MRD_ERR_TOO_LARGE;

    if (compress_level > 0 && raw_len > 0) {
        raw = malloc(raw_len);
        if (!raw) {
            rc = -ENOMEM;
            goto fail;
        }
        if (protobuf_c_message_pack(msg, raw) != raw_len) {
            rc = -EINVAL;
            goto fail;
        }
        /* The frame buffer must hold the raw payload in case compression does not pay. */
        cap = raw_len < max_frame ? raw_len : max_frame;
        frame = malloc(MRD_FRAME_HEADER_BYTES + (raw_len > cap ? raw_len : cap));
        if (!frame) {
            rc = -ENOMEM;
            goto fail;
        }
        zlen = compress_payload(raw, raw_len, compress_level, max_frame,
                                frame + MRD_FRAME_HEADER_BYTES, cap);
        if (zlen < 0) {
            rc = (int)zlen;
            goto fail;
        }
        if (zlen == 0) {
            if (raw_len > max_frame) {
                rc = -MRD_ERR_TOO_LARGE;
                goto fail;
            }
            memcpy(frame + MRD_FRAME_HEADER_BYTES, raw, raw_len);
        }
        free(raw);
        raw = NULL;
    } else {
        frame = malloc(MRD_FRAME_HEADER_BYTES + raw_len);
        if (!frame) {
            rc = -ENOMEM;
            goto fail;
        }
        if (protobuf_c_message_pack(msg, frame + MRD_FRAME_HEADER_BYTES) != raw_len) {
            rc = -EINVAL;
            goto fail;
        }
    }
    if (zlen > 0) {
        h.flags = MRD_FRAME_FLAG_ZSTD;
        h.length = (uint32_t)zlen;
    } else {
        h.length = (uint32_t)raw_len;
    }
    mrd_frame_header_write(frame, &h);
    *out = frame;
    *out_len = MRD_FRAME_HEADER_BYTES + (size_t)h.length;
    return 0;

fail:
    free(raw);
    free(frame);
    return rc;
}

/* Counting allocator for protobuf_c_message_unpack: plain malloc/free (so the result can
 * be freed with protobuf_c_message_free_unpacked(m, NULL)), but refuses to hand out more
 * than `left` bytes in total. */
struct budget {
    size_t left;
    int refused; /* 1 once a request went over the budget, 2 once malloc failed */
};

static void *budget_alloc(void *data, size_t size)
{
    struct budget *b = data;

    void *p;

    if (size > b->left) {
        b->refused = 1;
        return NULL;
    }
    p = malloc(size ? size : 1);
    if (!p) {
        b->refused = 2;
        return NULL;
    }
    b->left -= size;
    return p;
}

static void budget_free(void *data, void *p)
{
    free(p);
}

/* protobuf-c (1.4) rejects field number 0 only when the key is one byte long: an
 * overlong key (0x82 0x00) slips through as an unknown field with tag 0, which re-encodes
 * as a message protobuf-c itself refuses. Field number 0 is invalid in protobuf, so the
 * whole message is malformed. Walks every sub-message (the schema nests 2 deep). */
static int has_tag0(const ProtobufCMessage *m, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        if (m->unknown_fields[i].tag == 0)
            return 1;
    if (depth > 8)
        return 0;
    for (unsigned f = 0; f < d->n_fields; f++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[f];
        const char *base = (const char *)m + fd->offset;

        if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)((const char *)m + fd->quantifier_offset);
            ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)base;

            for (size_t j = 0; j < n; j++)
                if (v[j] && has_tag0(v[j], depth + 1))
                    return 1;
        } else {
            const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)base;

            if (sub && has_tag0(sub, depth + 1))
                return 1;
        }
    }
    return 0;
}

/* Decompresses a zstd payload into a new buffer of exactly its declared size. */
static int inflate_payload(const uint8_t *src, size_t len, uint32_t max_frame, uint8_t **dst,
                           size_t *dst_len)
{
    unsigned long long want;
    size_t got;
    uint8_t *buf;

    want = ZSTD_getFrameContentSize(src, len);
    if (want == ZSTD_CONTENTSIZE_UNKNOWN || want == ZSTD_CONTENTSIZE_ERROR)
        return -MRD_ERR_MALFORMED;
    if (want > (unsigned long long)max_frame * MRD_FRAME_MAX_EXPANSION)
        return -MRD_ERR_TOO_LARGE;
    /* Exactly one frame, no trailing bytes: a second frame would hide content whose size
     * was never declared. */
    got = ZSTD_findFrameCompressedSize(src, len);
    if (ZSTD_isError(got) || got != len)
        return -MRD_ERR_MALFORMED;
    buf = malloc(want ? (size_t)want : 1);
    if (!buf)
        return -ENOMEM;
    got = ZSTD_decompress(buf, (size_t)want, src, len);
    if (ZSTD_isError(got) || got != want) {
        free(buf);
        return ZSTD_isError(got) && ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation
                   ? -ENOMEM
                   : -MRD_ERR_MALFORMED;
    }
    *dst = buf;
    *dst_len = (size_t)want;
    return 0;
}

/* Decodes the payload of a frame whose header is h (see frame.h). The header is checked
 * again here, so a caller may pass one it built itself. Returns 0 with *out (free with
 * protobuf_c_message_free_unpacked(*out, NULL)); -MRD_ERR_VERSION; -MRD_ERR_MALFORMED;
 * -MRD_ERR_TOO_LARGE; -ENOMEM. Thread-safe. */
int mrd_frame_decode(const struct mrd_frame_header *h, const uint8_t *payload, uint32_t max_frame,
                     ProtobufCMessage **out)
{
    const uint8_t *data = payload;
    uint8_t *inflated = NULL;
    size_t len;
    struct budget bud;
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &bud};
    ProtobufCMessage *m;
    int rc;

    if (!h || !out || (h->length && !payload))
        return -EINVAL;
    rc = header_check(h, max_frame, MRD_PROTOCOL_VERSION);
    if (rc)
        return rc;
    len = h->length;
    if (h->flags & MRD_FRAME_FLAG_ZSTD) {
        rc = inflate_payload(payload, len, max_frame, &inflated, &len);
        if (rc)
            return rc;
        data = inflated;
    }
    bud.left = len * UNPACK_FACTOR + UNPACK_SLACK;
    bud.refused = 0;
    m = protobuf_c_message_unpack(mrd_frame_descriptor((enum mrd_frame_type)h->type), &alloc,
                                  len, data);
    free(inflated);
    if (!m)
        return bud.refused == 1 ? -MRD_ERR_TOO_LARGE
               : bud.refused == 2 ? -ENOMEM
                                  : -MRD_ERR_MALFORMED;
    if (has_tag0(m, 0)) {
        protobuf_c_message_free_unpacked(m, NULL);
        return -MRD_ERR_MALFORMED;
    }
    *out = m;
    return 0;
}
