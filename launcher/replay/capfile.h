/* .mrdcap capture files: frames exactly as an agent sent them, for replay.
 *
 * Format: the 8 bytes "MRDCAP1\n", then complete frames (proto/frame.h: 8-byte header +
 * payload) back to back: a Hello, Batches (resends included, in the order written),
 * a Goodbye. The agent writes one when MERIDIAN_RECORD_FILE is set; `meridian replay
 * --record` writes one of what it sends. Frames are of the protocol version that wrote
 * them; the reader takes every version from MRD_PROTOCOL_VERSION_READ_MIN on (frame.h: a
 * version 1 capture replays unchanged). A writer never stores the run secret: a Hello is
 * re-encoded with only the fields it knows (a version 1 Hello's secret field is dropped),
 * and a Challenge or Proof is not written (they belong to one connection).
 *
 * Where it sits: launcher/replay reads captures to re-send them through the real protocol
 * (rewriting run id and rank). Files are read sequentially with one frame in memory at a
 * time (a frame is capped by max_frame). Not thread-safe per handle.
 */
#ifndef MRD_CAPFILE_H
#define MRD_CAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define MRD_CAPFILE_MAGIC     "MRDCAP1\n"
#define MRD_CAPFILE_MAGIC_LEN 8

struct mrd_capfile;

/* Opens a capture for reading and checks its magic. Returns 0 and *out; -errno;
 * -MRD_ERR_MALFORMED when the magic is wrong. */
int mrd_capfile_open(const char *path, struct mrd_capfile **out);

/* Reads the next frame and decodes it. Returns 1 and sets *type and *msg (free with
 * protobuf_c_message_free_unpacked) and, when raw/raw_len are not NULL, the frame's bytes
 * (valid until the next call); 0 at a clean end of file; -MRD_ERR_MALFORMED for a
 * truncated or undecodable frame; -MRD_ERR_TOO_LARGE past max_frame; -ENOMEM; -errno. */
int mrd_capfile_next(struct mrd_capfile *f, uint32_t max_frame, int *type, ProtobufCMessage **msg,
                     const uint8_t **raw, size_t *raw_len);

/* Creates (truncates) a capture for writing and writes the magic. 0 and *out, or -errno. */
int mrd_capfile_create(const char *path, struct mrd_capfile **out);

/* Appends one complete frame (a Hello without a secret; a Challenge or Proof not at all).
 * 0 or -errno;
 * -MRD_ERR_MALFORMED when frame is not one complete frame. */
int mrd_capfile_write(struct mrd_capfile *f, const uint8_t *frame, size_t len);

/* Flushes and closes (writers report a failed flush). Accepts NULL. */
int mrd_capfile_close(struct mrd_capfile *f);

#endif
