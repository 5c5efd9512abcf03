/* The flusher thread's state, internal to agent/transport, split by owner:
 *   struct mrd_tx_ident   who this process is (link.h), set at start;
 *   struct mrd_tx_limit   the builder's frame limit and the re-split (resplit.c);
 *   struct mrd_datalink   the ROLE_DATA connection: handshake, batches, acks, goodbye
 *                         (datalink.c);
 *   struct mrd_clocklink  the ROLE_CLOCK connection: probes (clocklink.c);
 *   struct mrd_flusher    the rest, holding one of each above: batches, the unacked queue
 *                         and the record file (batches.c), the loop and the exit flush
 *                         (flusher.c).
 * Calls point one way: flusher.c -> datalink.c, clocklink.c -> resplit.c -> batches.c ->
 * link.c, conn.c (datalink.c and clocklink.c call link.c and batches.c too).
 * Each part writes its own fields and reads the others'. Everything here runs on the
 * flusher thread except the atomics in struct mrd_tx_shared.
 */
#ifndef MRD_AGENT_FLUSHER_INT_H
#define MRD_AGENT_FLUSHER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "batch.h"
#include "clock.h"
#include "config.h"
#include "counters.h"
#include "conn.h"
#include "convert.h"
#include "gpus.h"
#include "link.h"
#include "meridian.pb-c.h"
#include "resolve.h"
#include "transport.h"
#include "txqueue.h"

#define MRD_PROBE_TIMEOUT_MS     100u
#define MRD_PROBE_BURST          16u        /* probes at connect and before goodbye */
#define MRD_PROBE_ROUND          8u         /* probes per periodic round */
#define MRD_NEW_STRING_BYTES_MAX (1u << 20) /* finish a batch once it defines this much */
/* the goodbye (its send, its Ack, resends after a reconnect) may use this much past the
 * deadline */
#define MRD_GOODBYE_GRACE_MS 150u

/* Totals readable from any thread (the exit line, tests). */
struct mrd_tx_shared {
    _Atomic uint64_t events_acked, batches_acked, batches_sent, batches_resent, bytes_sent;
    _Atomic uint64_t events_queued, clock_samples, connects;
    _Atomic int finished;
    _Atomic int goodbye;      /* MRD_TX_GOODBYE_* (transport.h) */
    pthread_mutex_t err_lock; /* guards last_error */
    char last_error[128];
};

/* The builder's frame limit (resplit.c). */
struct mrd_tx_limit {
    uint32_t peer_max_frame;    /* HelloReply.max_frame_bytes (payload bytes) */
    uint32_t builder_max_frame; /* the limit the builder applies now ... */
    uint32_t builder_max_ever;  /* ... and the largest it ever applied */
    uint64_t builder_limit_seq; /* first batch seq built under builder_max_frame */
    unsigned limit_failures;    /* passes in a row the builder could not take the peer's */
    int resplitting;            /* batches finished now hold a re-split frame's events */
};

/* The data connection (datalink.c). */
struct mrd_datalink {
    struct mrd_link link;
    size_t write_off; /* bytes of the cursor entry already written */
    int ever_connected;
    int refusal_logged;
    uint64_t hello_gpu_gen; /* the GPU list's generation the last Hello carried */
    int64_t hello_ns;
    int goodbye_state;       /* enum mrd_gb_state */
    int goodbye_shut;        /* SENT: the Goodbye is written and our side shut ... */
    int64_t goodbye_shut_ns; /* ... at this time */
    int peer_acks_goodbye;   /* the last HelloReply had goodbye_acks set */
};

/* The clock connection (clocklink.c). */
struct mrd_clocklink {
    struct mrd_link link;
    int64_t next_probe_ns;
    unsigned probe_burst; /* probes owed as a burst (connect) */
    uint64_t probe_id;
};

struct mrd_flusher {
    struct mrd_tx_ident id;
    struct mrd_tx_shared *sh;
    int record_only;

    /* batches */
    struct mrd_batch_builder *b;
    struct mrd_convert cv;
    uint64_t next_seq, first_seq;
    int64_t batch_first_ns; /* CLOCK_MONOTONIC of the first pending event, 0 if none */
    int64_t last_batch_ns;
    uint64_t drops_in_last_batch;           /* sum of drop counters the last batch carried */
    uint64_t captured_local[MRD_EV__COUNT]; /* per drain pass, folded into the agent's */
    struct mrd_tx_limit lim;

    /* the unacked queue and the connections */
    struct mrd_resolver *res; /* the aggregator's address (resolve.h); NULL record-only */
    struct mrd_txq q;
    struct mrd_datalink data;
    struct mrd_clocklink clk;

    /* record file */
    _Atomic int rec_fd;
    int rec_hello_done;

    /* exit */
    int stopping;
    int64_t deadline_ns;
    int final_probes_done;
    int exit_rehello; /* the exit flush said hello again for new GPUs */
};

/* The Goodbye's way through the exit flush (f->goodbye_state). */
enum mrd_gb_state {
    MRD_GB_NONE = 0, /* not sent yet */
    MRD_GB_SENT,     /* on the current data connection: waiting for Ack{goodbye}, or for
                        the EOF of an aggregator that does not acknowledge goodbyes */
    MRD_GB_RESEND,   /* its connection broke before the Ack: send it again once reconnected
                        (until the deadline + MRD_GOODBYE_GRACE_MS) */
    MRD_GB_DONE,     /* acknowledged, or given up: the exit flush is over */
};

/* A Goodbye message with its storage. */
struct mrd_goodbye_buf {
    Meridian__V1__Goodbye g;
    Meridian__V1__Counter cc[MRD_EV__COUNT], dc[MRD_DROP__COUNT];
    Meridian__V1__Counter *cp[MRD_EV__COUNT], *dp[MRD_DROP__COUNT];
    struct mrd_named_counter named[MRD_AGENT_NAMED_MAX];
    Meridian__V1__NamedCounter nc[MRD_AGENT_NAMED_MAX], *np[MRD_AGENT_NAMED_MAX];
};

/* batches.c */
/* Counts n events lost for `reason` (nothing when n is 0). */
void mrd__tx_count_drop(int reason, uint64_t n);
/* Opens the record file of the configuration, if any, and writes its magic. */
void mrd__tx_record_open(struct mrd_flusher *f);
/* Appends the Goodbye (totals as of now) to the record file, if one is open. */
void mrd__tx_record_goodbye(struct mrd_flusher *f);
/* Fills *gb with the Goodbye: every counter (agent/base) as of now and the batch totals. */
void mrd__tx_fill_goodbye(struct mrd_flusher *f, struct mrd_goodbye_buf *gb);
/* Sets the last error the exit line shows ("" when the aggregator is reachable again).
 * Takes err_lock. */
void mrd__tx_set_error(struct mrd_flusher *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends a frame to the record file (the Hello first, once), if one is open; a write
 * error stops recording (one stderr line). */
void mrd__tx_record_frame(struct mrd_flusher *f, const uint8_t *frame, size_t len);
/* Adds a completed clock probe to the pending batch and counts it. */
void mrd__tx_add_clock_sample(struct mrd_flusher *f, const struct mrd_clock_sample *s);

/* Encodes the pending events (and current drop counters) as the next batch and queues it
 * (and records it, unless re-splitting). Returns 0, or a negative code when the builder
 * could not finish (the events stay pending). */
int mrd__tx_finish_batch(struct mrd_flusher *f, int64_t now);
/* Appends one event of `kind` (a union mrd_any_event member) to the pending batch; when
 * the batch is full, finishes it and tries once more (a failed finish is the event's loss,
 * as in mrd__convert_add). A loss is counted by its reason (mrd__convert_drop_reason).
 * Returns 0 when added. */
int mrd__tx_add_event(struct mrd_flusher *f, int kind, const void *ev, int64_t now);

/* resplit.c: the builder takes the limit a HelloReply announced (0: the default), finishing
 * the pending batch first if it was sized for a larger one. */
void mrd__tx_apply_peer_limit(struct mrd_flusher *f, uint32_t announced, int64_t now);
/* Tests only: the next N builder-limit changes in mrd__tx_apply_peer_limit fail with
 * -ENOMEM (0 in production). */
extern _Atomic int mrd__tx_test_limit_nomem;
/* The unsent frame at the queue's cursor would be refused by the aggregator (over its
 * limit; write_batches). Applies the peer's limit to the builder again if an earlier
 * change failed (e.g. -ENOMEM), then re-splits the frame (mrd__tx_resplit) when the builder
 * applies the peer's limit; keeps it queued when the change still fails (retried on the
 * next pass: nothing is lost); drops and counts it as too_large only when no builder limit
 * can satisfy the peer (below MRD_FRAME_MIN_MAX). Returns 1 when the caller should end
 * this writing pass, 0 when it may go on with the next frame. */
/* Passes of the flusher loop an oversized frame waits for the builder's limit change
 * (failing for want of memory) before it is dropped as too_large (resplit.c). */
#define MRD_TX_LIMIT_RETRIES 16u
int mrd__tx_oversized(struct mrd_flusher *f, int64_t now);
/* 1 when the aggregator takes this queued frame as it is (decodes it under the peer's
 * limit, as the aggregator does); 0 when it would refuse it. */
int mrd__tx_frame_fits(struct mrd_flusher *f, const struct mrd_txq_entry *en);
/* The unsent frame at the queue's cursor is over the peer's limit: takes it out and queues
 * its events again in batches within the limit (new seqs). Returns 0, or a negative code
 * when it could not be decoded (its events are counted as unencodable). */
int mrd__tx_resplit(struct mrd_flusher *f, int64_t now);

/* What the data and clock connections' frame callbacks (mrd_link_frame_fn, link.h) are
 * given: the flusher and the time of the poll that read the frames. */
struct mrd__tx_frame_ctx {
    struct mrd_flusher *f;
    int64_t now;
};

/* datalink.c */
void mrd__data_step(struct mrd_flusher *f, int64_t now);
void mrd__data_on_poll(struct mrd_flusher *f, short revents, int64_t now);
short mrd__data_poll_events(const struct mrd_flusher *f);
/* Queues the Goodbye (totals as of now) on the READY data connection: state SENT. */
void mrd__data_goodbye(struct mrd_flusher *f, int64_t now);
/* SENT: shuts our sending side once the Goodbye is completely written. */
void mrd__data_goodbye_progress(struct mrd_flusher *f, int64_t now);
/* Takes every complete frame out of f->data's input buffer (what mrd_conn_read put there)
 * and acts on each as the data connection does. HelloReply in state HELLO: accepted, the
 * queue loses what committed_seq covers (or, when committed_seq is not below next_seq,
 * the numbering moves past it, up to MRD_TX_SEQ_MAX in datalink.c), is rewound, the
 * builder takes max_frame_bytes, state READY; refused, f->data is closed with the slowest
 * backoff. Ack in state READY: moves the unacked queue, or ends a SENT Goodbye. Error:
 * -ECONNABORTED. Returns 0 when no complete frame is left or the Hello was refused
 * (f->data closed); a negative code for a protocol error (-MRD_ERR_* from framing, or a
 * frame the aggregator never sends in this state), after which the caller fails the
 * connection (mrd__data_on_poll: data_fail). Challenge in state HELLO: the Proof is queued
 * (mrd__link_answer_challenge), state PROOF; a HelloReply that accepts before the Proof was
 * sent is a protocol error (a refusal is taken in HELLO or PROOF). Touches no socket: only
 * f, its builder and queue, and f->data's output buffer. Flusher thread
 * (tests/fuzz/fuzz_agent_input.c drives it with bytes alone). */
int mrd__data_process_frames(struct mrd_flusher *f, int64_t now);

/* clocklink.c */
void mrd__clock_step(struct mrd_flusher *f, int64_t now);
void mrd__clock_on_poll(struct mrd_flusher *f, short revents, int64_t now);
short mrd__clock_poll_events(const struct mrd_flusher *f);
void mrd__clock_round(struct mrd_flusher *f, unsigned n, int64_t until_ns);
/* Outside a probe round: takes every complete frame out of f->clk's input buffer. A
 * Challenge in state HELLO queues the Proof (state PROOF); a HelloReply in state PROOF
 * makes the connection READY (accepted) or, in HELLO or PROOF, closes it with the slowest
 * backoff (refused); a ClockReply in state READY is a late reply and ignored (its
 * windows come again in the next reply); anything else, or a framing error, closes f->clk
 * (clock_fail). Touches no socket beyond closing it. Flusher thread (and the fuzz
 * target). */
void mrd__clock_process_frames(struct mrd_flusher *f, int64_t now);
/* During a probe round, after a read (t3 stamped right after it): takes complete frames
 * out of f->clk's input buffer; every ClockReply's window requests go to
 * mrd_stepctl_request (at most 2 * MRD_WINDOW_REQUESTS_MAX per reply); the reply whose
 * probe_id and t0 are the probe's (id, t0) fills *s (t0, t1, t2, t3). Returns 1 with *s
 * at that reply (frames after it stay buffered), 0 when no complete frame is left without
 * it, or a negative code (framing error, or a frame other than ClockReply:
 * -MRD_ERR_MALFORMED); the caller then fails the clock connection. Touches no socket.
 * Flusher thread (and the fuzz target). */
int mrd__clock_take_replies(struct mrd_flusher *f, uint64_t id, int64_t t0, int64_t t3,
                            struct mrd_clock_sample *s);

#endif
