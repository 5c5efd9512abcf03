/* meridian framing: how one protobuf message travels on a byte stream.
 *
 * Frame = 8-byte header + payload.
 *   byte 0     protocol version (MRD_PROTOCOL_VERSION)
 *   byte 1     message type (enum mrd_frame_type)
 *   bytes 2-3  flags, little-endian (MRD_FRAME_FLAG_*; unknown bits are an error)
 *   bytes 4-7  payload length, little-endian, <= the receiver's max frame size
 * The payload is the protobuf encoding of the message the type names, zstd-compressed
 * when MRD_FRAME_FLAG_ZSTD is set; a compressed payload must declare its content size and
 * decompress to at most MRD_FRAME_MAX_EXPANSION times the max frame size.
 *
 * This module never touches sockets: it turns messages into bytes and back, and checks
 * every length before use. Thread-safe (no shared state).
 */
#ifndef MRD_FRAME_H
#define MRD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "meridian.pb-c.h"

#define MRD_PROTOCOL_VERSION 2
/* The oldest version whose frames a capture file (.mrdcap) may hold and still be read:
 * version 2 changed only the handshake (Challenge, Proof, Hello.secret reserved), so a
 * version 1 capture's Hello, Batch and Goodbye mean what they meant. Never accepted on a
 * connection (mrd_frame_header_parse takes MRD_PROTOCOL_VERSION only). */
#define MRD_PROTOCOL_VERSION_READ_MIN 1
#define MRD_FRAME_HEADER_BYTES 8
#define MRD_FRAME_DEFAULT_MAX (4u << 20) /* 4 MiB */
#define MRD_FRAME_MIN_MAX 4096u          /* smallest max a peer may configure */
#define MRD_FRAME_MAX_EXPANSION 8u
#define MRD_FRAME_FLAG_ZSTD 0x0001u

enum mrd_frame_type {
    MRD_FRAME_HELLO = 1,
    MRD_FRAME_HELLO_REPLY = 2,
    MRD_FRAME_CLOCK_PROBE = 3,
    MRD_FRAME_CLOCK_REPLY = 4,
    MRD_FRAME_BATCH = 5,
    MRD_FRAME_ACK = 6,
    MRD_FRAME_GOODBYE = 7,
    MRD_FRAME_ERROR = 8,
    MRD_FRAME_CHALLENGE = 9, /* meridiand's nonce, the answer to a Hello (version >= 2) */
    MRD_FRAME_PROOF = 10,    /* the agent's HMAC over it (proto/auth.h; version >= 2) */
    MRD_FRAME__MAX = 10
};

struct mrd_frame_header {
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint32_t length;
};

/* Parses a header from the first bytes of buf.
 * Returns 0 and fills *h; -EAGAIN when avail < MRD_FRAME_HEADER_BYTES; MRD_ERR_VERSION
 * (negated) for another version; -MRD_ERR_MALFORMED for an unknown type or flag bits;
 * -MRD_ERR_TOO_LARGE when length > max_frame. */
int mrd_frame_header_parse(const uint8_t *buf, size_t avail, uint32_t max_frame,
                           struct mrd_frame_header *h);

/* As mrd_frame_header_parse, but a version from MRD_PROTOCOL_VERSION_READ_MIN to
 * MRD_PROTOCOL_VERSION is accepted (h->version tells which): for frames read back from a
 * capture file, never from a connection. Decode such a frame with h->version set to
 * MRD_PROTOCOL_VERSION (the payloads mean the same, see above). */
int mrd_frame_header_parse_recorded(const uint8_t *buf, size_t avail, uint32_t max_frame,
                                    struct mrd_frame_header *h);

/* Writes h into out[0..7]. */
void mrd_frame_header_write(uint8_t out[MRD_FRAME_HEADER_BYTES], const struct mrd_frame_header *h);

/* Reads the header's fields from buf[0..7] as they stand, without checking any: only to
 * describe a frame that mrd_frame_header_parse refused (its version, type and length in a
 * log line or a refusal). */
void mrd_frame_header_peek(const uint8_t buf[MRD_FRAME_HEADER_BYTES], struct mrd_frame_header *h);

/* The bytes mrd_frame_encode_into needs for msg (header included). */
size_t mrd_frame_encoded_size(const ProtobufCMessage *msg);

/* Encodes msg (whose protobuf-c descriptor must match `type`) uncompressed into a complete
 * frame at buf, which has room for cap bytes, with `version` in its header
 * (MRD_PROTOCOL_VERSION, or an older peer's own version for a refusal it must read).
 * Allocates nothing. Returns 0 and sets *out_len; -ENOBUFS when the frame is larger than
 * cap (nothing written); -EINVAL for a message of another type. The bytes are those of
 * mrd_frame_encode at compress_level 0 (with the same version). Thread-safe. */
int mrd_frame_encode_into(enum mrd_frame_type type, uint8_t version, const ProtobufCMessage *msg,
                          uint8_t *buf, size_t cap, size_t *out_len);

/* Encodes msg (whose protobuf-c descriptor must match `type`) into a complete frame in a
 * newly malloc'd buffer. compress_level > 0 zstd-compresses the payload at that level
 * (0 = never). Returns 0 and sets *out (caller frees) and *out_len; -ENOMEM;
 * -MRD_ERR_TOO_LARGE when the payload would exceed max_frame. */
int mrd_frame_encode(enum mrd_frame_type type, const ProtobufCMessage *msg, int compress_level,
                     uint32_t max_frame, uint8_t **out, size_t *out_len);

/* Decodes the payload of a frame whose header was parsed into h into a protobuf-c
 * message of the type h->type names (decompressing if flagged), after checking sizes.
 * Returns 0 and sets *out (free with protobuf_c_message_free_unpacked(*out, NULL));
 * -MRD_ERR_MALFORMED; -MRD_ERR_TOO_LARGE; -ENOMEM. */
int mrd_frame_decode(const struct mrd_frame_header *h, const uint8_t *payload, uint32_t max_frame,
                     ProtobufCMessage **out);

/* The protobuf-c descriptor for a frame type, or NULL for an unknown type. */
const ProtobufCMessageDescriptor *mrd_frame_descriptor(enum mrd_frame_type type);

#endif
