/* meridian ingest internals shared by ingest.c (loop, listener, completions, shutdown) and
 * conn.c (one connection: buffers, frames, hello, dispatch). Loop thread only. */
#ifndef MRD_INGEST_INTERNAL_H
#define MRD_INGEST_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include <sys/types.h>

#include "auth.h"
#include "control.h"
#include "frame.h"
#include "ingest.h"

#define MRD__RBUF_SMALL        (64u * 1024u) /* initial read buffer; also the pre-Hello frame cap */
#define MRD__CLOSING_LINGER_MS 1000          /* how long a rejected peer gets to read our reason */
#define MRD__REFUSALS_LOGGED_PER_S 10u           /* refusal lines a second (mrd__ingest_log -1) */

enum mrd__conn_state {
    MRD__CONN_HELLO,   /* waiting for a Hello */
    MRD__CONN_AUTH,    /* Hello kept, Challenge sent: waiting for the Proof (HELLO and AUTH
                          are the unauthenticated states: nprehello, the per-address cap) */
    MRD__CONN_DATA,    /* ROLE_DATA: batches, goodbye, probes */
    MRD__CONN_CLOCK,   /* ROLE_CLOCK: probes only */
    MRD__CONN_CLOSING, /* rejected: reason sent, write side shut, draining until EOF */
};

/* aggregator_counters maintained by the loop, flushed to the store once a second:
 * X(ID, name) makes MRD__CNT_<ID> and the name of its row (never rename one). */
#define MRD__INGEST_COUNTERS(X)                                                                    \
    X(ACCEPTED, connections_accepted)                                                              \
    X(OVER_LIMIT, connections_over_limit)                                                          \
    X(PREHELLO_EVICTED, connections_prehello_evicted)                                              \
    X(REJ_AUTH, rejected_auth)                                                                     \
    X(REJ_VERSION, rejected_version)                                                               \
    X(REJ_RUN, rejected_run_id)                                                                    \
    X(REJ_MALFORMED, rejected_malformed)                                                           \
    X(REJ_TOO_LARGE, rejected_too_large)                                                           \
    X(REJ_PROTOCOL, rejected_protocol)                                                             \
    X(REJ_TIMEOUT, rejected_hello_timeout)                                                         \
    X(REJ_RANK_HELD, rejected_rank_held)                                                           \
    X(OVER_ADDR_LIMIT, connections_over_address_limit)                                             \
    X(REJ_SECRET_LIMIT, rejected_secret_limit)                                                     \
    X(REJ_AFTER_GOODBYE, rejected_after_goodbye)                                                   \
    X(TRUNCATED, connections_truncated)                                                            \
    X(STORAGE_ERRORS, storage_errors)                                                              \
    X(PROBES, clock_probes_answered)
#define MRD__CNT_ENUM(ID, name) MRD__CNT_##ID,
enum {
    MRD__INGEST_COUNTERS(MRD__CNT_ENUM)
    MRD__CNT__COUNT
};

struct mrd__conn {
    int fd;
    uint32_t slot;
    uint64_t token; /* generation << 32 | slot: names it in store items */
    enum mrd__conn_state state;
    char peer[64]; /* "addr:port" */
    char addr[48]; /* the address alone: the per-address cap counts by it */
    uint8_t version; /* the protocol version we answer in: ours, or an older peer's (its
                        first frame's), so that it can read why it was refused */
    int has_rank;
    uint32_t rank;
    uint64_t instance; /* Hello.agent_instance (DATA): the agent process it speaks for */
    uint32_t pid;      /* Hello.pid, for the log line of a refused second process */
    uint8_t nonce[MRD_AUTH_NONCE_BYTES]; /* AUTH: the Challenge's, this connection's only */
    struct mrd_frame_header hello_h;     /* AUTH: the Hello frame's header ... */
    uint8_t *hello;                      /* ... and its payload (at most the pre-Hello cap,
                                            64 KiB), decoded again once the Proof holds */
    int goodbye;                         /* DATA: a Goodbye came; a Batch after it is refused */
    uint8_t *rbuf;
    size_t rcap, rpos, rlen; /* unprocessed bytes are rbuf[rpos..rlen) */
    size_t rbig;             /* bytes of rcap drawn from the global budget */
    int want_big;            /* waiting for budget to grow rbuf */
    int eof;                 /* peer closed its side: not read any more; buffered frames
                                are stored caps or not; closed once its acks went out */
    int64_t t_read;          /* global time of the last read that returned data */
    uint8_t *wbuf;
    size_t wcap, wpos, wlen; /* unsent bytes are wbuf[wpos..wlen) */
    size_t queued;           /* cost of this connection's items not yet completed */
    uint32_t events;         /* epoll interest currently registered */
    int64_t deadline_ms;     /* HELLO: hello timeout; CLOSING: linger end (monotonic) */
    uint64_t batches;
};

/* One client of the control socket (control.c); fd -1 = free slot. */
struct mrd__ctl_client {
    int fd;
    int64_t deadline_ms; /* answered "error" and closed then (monotonic) */
    size_t len;
    char buf[MRD_CONTROL_LINE_MAX + 1];
};

struct mrd_ingest {
    struct mrd_ingest_config cfg; /* secret points at our own copy */
    uint8_t *secret;
    struct mrd_store *store;
    int epfd, lfd, stop_efd;
    uint16_t port;
    int accept_paused;
    struct mrd__conn **conns; /* max_connections slots */
    uint32_t *gens;
    uint32_t nconns;
    uint32_t nprehello; /* connections in HELLO or AUTH (mrd__conn_set_state keeps it) */
    uint32_t nauth;     /* connections in DATA or CLOCK: all hold the run secret (the
                           per-secret cap counts them; mrd__conn_set_state keeps it) */
    uint32_t world_max; /* largest world size an authenticated Hello announced */
    size_t queued; /* cost submitted to the store, not yet completed */
    int global_paused;
    size_t rbig_used;
    int budget_freed; /* rbuf budget returned: retry connections with want_big */
    uint64_t budget_waits;  /* times a connection waited for read budget (tests look) */
    uint64_t global_pauses; /* times reading stopped at queue_cap (tests look) */
    int stopping;
    uint64_t counters[MRD__CNT__COUNT];
    int64_t log_window_ms; /* rejection log rate limit: per second */
    uint32_t log_lines, log_suppressed;
    struct mrd_winctl *winctl; /* window requests (winctl.h) */
    struct mrd_skew *skew;     /* collective skew (skew.h); NULL: no skew trigger */
    struct mrd_skew_counters skew_flushed; /* its counters as last stored */
    int ctl_fd;                /* control socket listener, -1 = none */
    dev_t ctl_dev;             /* the socket file we bound (removed at the end if still ours) */
    ino_t ctl_ino;
    struct mrd__ctl_client ctl[MRD_CONTROL_CLIENTS];
};

/* ingest.c */

/* CLOCK_MONOTONIC now in milliseconds: the clock of every loop deadline (hello timeout,
 * closing linger, the tick). Any thread; never fails. */
int64_t mrd__ingest_mono_ms(void);

/* Writes one line "meridiand: <fmt...>" (at most 1 KiB, longer is cut) to cfg.log, else
 * stderr. level -1: a refused or cut connection: always shown, but at most
 * MRD__REFUSALS_LOGGED_PER_S lines a second, the rest counted and reported as one line
 * "N more refusals suppressed" once the second is over; 0: an error, always shown; 1:
 * per-connection detail, only with cfg.verbose >= 1.
 * Never logs the secret (callers never pass it). Loop thread (the rate limit is not
 * locked). */
void mrd__ingest_log(struct mrd_ingest *g, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 when the loop must not read c now: stopping; c's unsent replies exceed half of
 * wbuf_cap (its peer is not reading its acks); or, for a data connection, reading is
 * paused globally (queue_cap reached) or c's own queued cost reached conn_queue_cap.
 * 0 otherwise (a connection before its Hello, or a clock connection, is held back only by
 * the first two). Pure; loop thread. */
int mrd__ingest_paused(const struct mrd_ingest *g, const struct mrd__conn *c);

/* control.c (all loop thread): the control socket (control.h) */

#define MRD__EV_CONTROL    4u  /* epoll tag of the control listener */
#define MRD__EV_CTL_CLIENT 16u /* + slot: a control client (below any connection token) */

/* Binds and listens on cfg.control_path (a stale socket there is replaced; a live one, or
 * anything that is not a socket, is refused) with mode 0600, and registers it. Returns 0
 * (also without a path), or a negative errno (logged). */
int mrd__control_open(struct mrd_ingest *g);
/* An epoll event with a control tag (listener or client). */
void mrd__control_on_event(struct mrd_ingest *g, uint64_t tag);
/* The earliest client deadline (monotonic ms), or INT64_MAX with no client. */
int64_t mrd__control_deadline(const struct mrd_ingest *g);
/* Answers and closes the clients whose deadline passed. */
void mrd__control_expire(struct mrd_ingest *g, int64_t now);
/* Closes the listener and every client and removes the socket file if it is still the
 * one bound (idempotent). */
void mrd__control_close(struct mrd_ingest *g);

/* conn.c (all loop thread) */

/* Registers accepted socket fd (non-blocking) as connection `slot` in state HELLO with
 * its hello deadline, reading; peer is "addr:port", addr the address alone. Returns 0 and
 * *out (owned by g->conns[slot]); -ENOMEM or the negative errno of epoll_ctl (fd is then
 * still the caller's to close). */
int mrd__conn_open(struct mrd_ingest *g, int fd, uint32_t slot, uint64_t token, const char *peer,
                   const char *addr, struct mrd__conn **out);
/* Closes the socket, returns c's read budget, frees c and its slot. Items of c still in
 * the store complete later and find no connection (their cost is released then). */
void mrd__conn_close(struct mrd_ingest *g, struct mrd__conn *c);
/* Moves c to state st, keeping g->nprehello (HELLO, AUTH) and g->nauth (DATA, CLOCK). */
void mrd__conn_set_state(struct mrd_ingest *g, struct mrd__conn *c, enum mrd__conn_state st);
/* Sets c's epoll interest from its state: EPOLLIN unless paused, waiting for read budget
 * or at EOF; EPOLLOUT while replies are unsent. */
void mrd__conn_update_interest(struct mrd_ingest *g, struct mrd__conn *c);
/* Reads once and processes every complete frame (may close and free c). */
void mrd__conn_on_readable(struct mrd_ingest *g, struct mrd__conn *c);
/* Sends buffered replies (may close and free c on a write error or a finished linger). */
void mrd__conn_on_writable(struct mrd_ingest *g, struct mrd__conn *c);
/* 1 when a connection whose peer sent FIN has nothing left to acknowledge or send. */
int mrd__conn_linger_done(const struct mrd__conn *c);
/* EPOLLHUP / EPOLLERR: stores what is buffered, then closes. */
void mrd__conn_on_hangup(struct mrd_ingest *g, struct mrd__conn *c);
/* Processes complete frames already buffered (after a resume). Returns 0, or -1 when
 * the connection was closed (c is freed). */
int mrd__conn_process(struct mrd_ingest *g, struct mrd__conn *c);
/* Rejects: logs one line (who and why), counts, sends an Error frame (or, during the
 * handshake, a HelloReply with accepted = false and `code`) in c->version, and moves to
 * CLOSING. */
void mrd__conn_reject(struct mrd_ingest *g, struct mrd__conn *c, int counter, uint32_t code,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Queues a message frame; returns 0, or -1 when the connection was closed. */
int mrd__conn_send(struct mrd_ingest *g, struct mrd__conn *c, enum mrd_frame_type type,
                   const ProtobufCMessage *msg);

#endif
