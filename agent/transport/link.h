/* One agent connection to meridiand, from closed to accepted (internal to agent/transport).
 *
 * The data connection (datalink.c) and the clock connection (clocklink.c) each own one
 * link; the link does what both do the same way: the backoff between attempts (100 ms to
 * 2 s, +-20% jitter), the connect and handshake timeouts, the Hello of its role, the Proof
 * that answers the aggregator's Challenge (proto/auth.h), and the states of the handshake
 * (conn.h: CONNECTING, HELLO, PROOF, READY). What an accepting HelloReply means, and what
 * READY does, stays with the owner: the link hands the reply back.
 *
 * Threads: the flusher thread only. Touches no socket beyond its own connection.
 */
#ifndef MRD_AGENT_LINK_H
#define MRD_AGENT_LINK_H

#include <stdint.h>

#include "config.h"
#include "conn.h"
#include "gpus.h"
#include "meridian.pb-c.h"

#define MRD_BACKOFF_MIN_MS     100u
#define MRD_BACKOFF_MAX_MS     2000u
#define MRD_CONNECT_TIMEOUT_MS 3000u
#define MRD_HELLO_TIMEOUT_MS   5000u

/* Who this process is, as every Hello and Proof says it. Set once at transport start. */
struct mrd_tx_ident {
    const struct mrd_agent_config *cfg; /* valid for the life of the process */
    uint64_t agent_instance;            /* random per process */
    char host[256];
};

/* A Hello with its storage (the GPUs as registered when it was filled). */
struct mrd_hello_buf {
    Meridian__V1__Hello h;
    struct mrd_gpu gpus[MRD_MAX_GPUS];
    Meridian__V1__GpuInfo gi[MRD_MAX_GPUS], *gp[MRD_MAX_GPUS];
    uint64_t gpu_gen; /* the GPU list's generation (gpus.h) the Hello carries */
};

struct mrd_link {
    struct mrd_conn conn;
    int role;                /* MERIDIAN__V1__CONNECTION_ROLE__ROLE_* */
    int64_t next_connect_ns; /* CLOSED: the next attempt, not before (CLOCK_MONOTONIC) */
    uint32_t backoff_ms;     /* the next backoff step; 0 after an accepted Hello */
};

/* What mrd__link_handshake_frame made of a frame. */
enum {
    MRD_LINK_NOT_MINE = 0, /* not a handshake frame in this state: the owner's to handle */
    MRD_LINK_ANSWERED = 1, /* a Challenge: the Proof is queued, state PROOF */
    MRD_LINK_REPLY = 2,    /* a HelloReply the owner acts on: accepted (state PROOF) or
                              refused (HELLO or PROOF); the link's state is unchanged */
};

/* Fills hb->h, a Hello (protocol version 2: no secret) of `role` for this process. */
void mrd__link_fill_hello(const struct mrd_tx_ident *id, int role, struct mrd_hello_buf *hb);

/* A closed link of `role` (no socket). */
void mrd__link_init(struct mrd_link *l, int role);

/* The backoff step to wait now (with jitter), advancing *backoff_ms towards the maximum. */
uint32_t mrd__link_backoff_next(uint32_t *backoff_ms);

/* Closes the connection and schedules the next attempt one backoff step (at least floor_ms)
 * after now. */
void mrd__link_fail(struct mrd_link *l, int64_t now, uint32_t floor_ms);

/* The aggregator refused the Hello: closes, and retries at the slowest pace. */
void mrd__link_refused(struct mrd_link *l, int64_t now);

/* An accepting HelloReply was taken: state READY, backoff reset. */
void mrd__link_ready(struct mrd_link *l, int64_t now);

/* CONNECTING, HELLO or PROOF for too long: returns -ETIMEDOUT with *what ("connect: timed
 * out", "no reply to hello"), after which the owner fails the link; 0 otherwise. */
int mrd__link_check_timeout(const struct mrd_link *l, int64_t now, const char **what);

/* The connect completed (mrd_conn_finish_connect returned 0): queues the Hello, state HELLO,
 * and starts writing it. Returns 0, or a negative code with *what ("hello", "send hello")
 * after which the owner fails the link. *gpu_gen (may be NULL): the generation the Hello
 * carries. */
int mrd__link_send_hello(struct mrd_link *l, const struct mrd_tx_ident *id, int64_t now,
                         const char **what, uint64_t *gpu_gen);

/* A Challenge arrived on c: queues the Proof, the HMAC of the run secret over its nonce and
 * this process's claim (run id, rank, agent_instance, role; proto/auth.h), and moves c to
 * PROOF. Returns 0, or a negative code (a nonce of another size or no secret:
 * -MRD_ERR_MALFORMED / -EINVAL; no room: -ENOBUFS) after which the caller fails the
 * connection. Touches no socket: the Proof goes out when c is flushed. */
int mrd__link_answer_challenge(const struct mrd_tx_ident *id, struct mrd_conn *c, int role,
                               const Meridian__V1__Challenge *ch);

/* One decoded frame of `type`: see MRD_LINK_*. A Challenge in HELLO is answered; a
 * HelloReply in PROOF, or a refusing one in HELLO, is handed back. Returns MRD_LINK_*, or a
 * negative code when the Proof could not be queued (the owner fails the link). */
int mrd__link_handshake_frame(struct mrd_link *l, const struct mrd_tx_ident *id, int type,
                              const ProtobufCMessage *m);

/* What the owner of a link does with one frame that mrd__link_take_frames hands it: a
 * HelloReply the handshake hands back (reply = 1: accepted or refused, the owner acts on
 * it, e.g. mrd__link_ready or mrd__link_refused), or a frame that is not the handshake's
 * (reply = 0). Returns 0 to go on with the next frame, a positive value to stop there, or a
 * negative code after which the owner fails the link. m is freed after it returns. */
typedef int (*mrd_link_frame_fn)(void *arg, int type, const ProtobufCMessage *m, int reply);

/* Takes the complete frames out of l's input buffer, in order, until one of: no complete
 * frame is left (returns 0); a frame that does not decode (its negative code, -MRD_ERR_*);
 * a Challenge whose Proof cannot be queued (its negative code); on_frame returns non-zero
 * (that value: frames after it stay buffered); the link is closed after a frame (returns 0:
 * a refused Hello). A Challenge in HELLO is answered here (mrd__link_handshake_frame);
 * every other frame goes to on_frame(arg, ...). The one frame loop of both connections.
 * Touches no socket. Flusher thread. */
int mrd__link_take_frames(struct mrd_link *l, const struct mrd_tx_ident *id,
                          mrd_link_frame_fn on_frame, void *arg);

/* The poll events of a link that is not READY (CONNECTING: POLLOUT; HELLO, PROOF: POLLIN,
 * and POLLOUT while the output buffer holds bytes); READY: POLLIN (the owner adds what it
 * writes). */
short mrd__link_poll_events(const struct mrd_link *l);

/* POLLOUT in HELLO or PROOF: writes what the handshake queued. Returns 0 (done, or the
 * socket is full), or a negative errno after which the owner fails the link; 0 in any
 * other state. */
int mrd__link_flush_handshake(struct mrd_link *l);

#endif
