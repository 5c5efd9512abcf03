/* One TCP connection from the agent to meridiand (internal to the agent's transport).
 *
 * Non-blocking socket, framing on top of proto/frame.h: a small output buffer for control
 * frames (Hello, Proof, ClockProbe, Goodbye), raw writes for batch frames (the flusher writes them
 * straight from the unacked queue), and an input buffer that yields whole decoded frames.
 * Connection code never builds batches; the flusher decides what to send.
 *
 * Caps: the input buffer holds one control frame (MRD_CONN_IN_CAP; the aggregator only
 * sends Challenge, HelloReply, Ack, ClockReply and Error, all tiny): a larger frame is a protocol
 * error and closes the connection. The output buffer holds MRD_CONN_OUT_CAP bytes of
 * control frames: a frame that does not fit is refused with -ENOBUFS (the caller retries
 * later or gives up on it). Single-threaded (the flusher thread).
 */
#ifndef MRD_AGENT_CONN_H
#define MRD_AGENT_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"
#include "resolve.h"

#define MRD_CONN_IN_CAP  (64u << 10)
#define MRD_CONN_OUT_CAP (64u << 10)

enum mrd_conn_state {
    MRD_CONN_CLOSED = 0,
    MRD_CONN_CONNECTING, /* non-blocking connect in progress: wait for POLLOUT */
    MRD_CONN_HELLO,      /* Hello queued (no secret), waiting for the Challenge */
    MRD_CONN_PROOF,      /* Proof queued (proto/auth.h), waiting for the HelloReply */
    MRD_CONN_READY,      /* accepted */
};

struct mrd_conn {
    int fd;                /* -1 when closed */
    _Atomic int fd_mirror; /* fd for a fork child to close: set after open, -1 before close */
    enum mrd_conn_state state;
    int64_t state_since_ns; /* CLOCK_MONOTONIC when the state was entered */
    uint8_t in[MRD_CONN_IN_CAP + MRD_FRAME_HEADER_BYTES];
    size_t in_len;
    uint8_t out[MRD_CONN_OUT_CAP];
    size_t out_off, out_len;
    uint64_t bytes_written;
};

void mrd_conn_init(struct mrd_conn *c);

/* Starts a non-blocking connect to the first of the addresses (resolve.h; in order) that
 * takes one; no name resolution. Returns 0 with state CONNECTING (see
 * mrd_conn_finish_connect), or a negative errno (connection closed; *why set to a static
 * description). */
int mrd_conn_open(struct mrd_conn *c, const struct mrd_addrs *a, const char **why);

/* After POLLOUT in CONNECTING: 0 when connected, negative errno otherwise (closed). */
int mrd_conn_finish_connect(struct mrd_conn *c);

/* Encodes a control frame (uncompressed) straight into the output buffer, allocating
 * nothing. Returns 0, -ENOBUFS (no room now), -MRD_ERR_TOO_LARGE (over MRD_CONN_OUT_CAP),
 * -EINVAL (msg is not of `type`). */
int mrd_conn_queue(struct mrd_conn *c, enum mrd_frame_type type, const ProtobufCMessage *msg);

/* Writes what the output buffer holds. Returns 0 when empty, -EAGAIN when the socket is
 * full, another negative errno on failure. */
int mrd_conn_flush(struct mrd_conn *c);

/* Writes raw bytes (after the output buffer is empty). Returns the number written (0 when
 * the socket is full) or a negative errno. */
ssize_t mrd_conn_write(struct mrd_conn *c, const uint8_t *buf, size_t len);

/* Reads what the socket has (without blocking). Returns 0, or a negative errno
 * (-ECONNRESET on EOF). */
int mrd_conn_read(struct mrd_conn *c);

/* One recv() into the input buffer (clock probes stamp t3 right after it). Returns the
 * bytes read (> 0), 0 when nothing is there (or the buffer is full), or a negative errno
 * (-ECONNRESET on EOF). */
ssize_t mrd_conn_read_once(struct mrd_conn *c);

/* Takes the next complete frame out of the input buffer: returns 1 with *type and *msg
 * (free with protobuf_c_message_free_unpacked), 0 when none is complete, or a negative
 * code for a protocol error (-MRD_ERR_*). */
int mrd_conn_next_frame(struct mrd_conn *c, int *type, ProtobufCMessage **msg);

/* Closes the socket (if open) and resets buffers. */
void mrd_conn_close(struct mrd_conn *c);

#endif
