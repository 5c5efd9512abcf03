/* The ROLE_DATA connection: connect with backoff, Hello/HelloReply, batch frames from the
 * unacked queue, Acks, and the Goodbye.
 *
 * Where it sits: called by the flusher loop (flusher.c) on its thread. The aggregator's
 * address comes from the resolver (resolve.h: looked up off this thread, once, and again
 * only after repeated connection failures, rate-limited). Reconnects use
 * exponential backoff from 100 ms to 2 s with +-20% jitter. The handshake (protocol version 2):
 * Hello (no secret), the aggregator's Challenge, our Proof (link.c), then
 * the HelloReply; after an accepting HelloReply the queue is
 * trimmed to what the aggregator has not committed (committed_seq) and everything left is
 * sent again, oldest first (at-least-once; the aggregator de-duplicates by (run, rank,
 * seq)). A refused Hello (wrong secret, wrong run) is logged once and retried at the
 * slowest pace. A GPU registered after the Hello makes the agent say hello again once the
 * queue is idle, so the aggregator's gpus table learns it. The HelloReply's frame limit
 * applies to every batch built afterwards; a queued frame over it is re-split (resplit.c).
 *
 * Goodbye: queued like any control frame, then our sending side is shut (the aggregator
 * reads everything before it sees EOF). An aggregator that announced goodbye_acks in its
 * HelloReply answers with Ack{goodbye} once the Goodbye is committed; if the connection
 * breaks before that Ack, the Goodbye is sent again after the next successful Hello
 * (the flusher's exit flush drives this until its deadline + MRD_GOODBYE_GRACE_MS). With
 * an older aggregator the Goodbye is done once it is written and the aggregator closed.
 *
 * Workload: a few batch frames per second per rank (up to ~16k events, tens to hundreds of
 * KiB each), one Ack per batch.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "error.h"
#include "flusher_int.h"
#include "gpus.h"

static void goodbye_over(struct mrd_flusher *f, int outcome)
{
    f->data.goodbye_state = MRD_GB_DONE;
    atomic_store(&f->sh->goodbye, outcome);
}

static void data_fail(struct mrd_flusher *f, int64_t now, const char *what, int err)
{
    if (f->data.goodbye_state == MRD_GB_SENT) {
        if (f->data.peer_acks_goodbye) {
            f->data.goodbye_state = MRD_GB_RESEND; /* not committed as far as we know */
        } else { /* an older aggregator: the Goodbye was all we had to say */
            goodbye_over(f, MRD_TX_GOODBYE_SENT_ONLY);
            mrd_conn_close(&f->data.link.conn);
            return;
        }
    }
    if (err != 0)
        mrd__tx_set_error(f, "%s: %s", what, mrd_strerror(err));
    else
        mrd__tx_set_error(f, "%s", what);
    mrd__link_fail(&f->data.link, now, 0);
    f->data.write_off = 0;
}

/* The highest batch seq the agent numbers up to: the aggregator keeps seqs as SQLite
 * integers (int64), and the numbering must go on without wrapping to 0 (not a valid seq:
 * every later batch would fail to encode and its events be lost). No batch of an agent
 * carries a higher one (they start at CLOCK_REALTIME in microseconds); a committed_seq at
 * or above it (a faulty peer, a corrupt capture replayed into the run) cannot be moved
 * past, so this process keeps its own numbering, unique per process anyway. */
#define MRD_TX_SEQ_MAX ((uint64_t)INT64_MAX)

static void on_acked(uint64_t seq, uint32_t events, void *arg)
{
    struct mrd_flusher *f = arg;
    mrd_batch_builder_acked(f->b, seq);
    atomic_fetch_add(&f->sh->events_acked, events);
    atomic_fetch_add(&f->sh->batches_acked, 1);
}

static void sync_stats(struct mrd_flusher *f)
{
    atomic_store(&f->sh->events_queued, f->q.events);
    atomic_store(&f->sh->bytes_sent,
                 f->data.link.conn.bytes_written + f->clk.link.conn.bytes_written);
}

static void on_hello_reply(struct mrd_flusher *f, const Meridian__V1__HelloReply *r, int64_t now)
{
    if (!r->accepted) {
        if (!f->data.refusal_logged++)
            /* the reason is the aggregator's text: at most 300 bytes reach the job's stderr */
            fprintf(stderr, "meridian: rank %d: aggregator %s refused the connection: %.300s\n",
                    f->id.cfg->rank, f->id.cfg->aggregator, r->reason ? r->reason : "(no reason)");
        mrd__tx_set_error(f, "refused: %.100s", r->reason ? r->reason : "");
        mrd__link_refused(&f->data.link, now);
        return;
    }
    f->data.peer_acks_goodbye = r->goodbye_acks;
    if (r->committed_seq >= MRD_TX_SEQ_MAX) {
        fprintf(stderr,
                "meridian: rank %d: the aggregator holds batch %llu of this rank, past any "
                "sequence number; keeping this process's numbering\n",
                f->id.cfg->rank, (unsigned long long)r->committed_seq);
    } else if (r->committed_seq >= f->next_seq) {
        /* Not ours: another process used this rank in this run with later sequence
         * numbers. Ours would be taken for duplicates: move past them. */
        fprintf(stderr,
                "meridian: rank %d: the aggregator already holds batch %llu of this "
                "rank from another process; continuing after it\n",
                f->id.cfg->rank, (unsigned long long)r->committed_seq);
        f->next_seq = r->committed_seq + 1;
    } else {
        mrd_txq_drop_committed(&f->q, r->committed_seq, on_acked, f);
    }
    if (f->data.ever_connected)
        mrd_batch_builder_reset_unacked(f->b);
    mrd_txq_rewind(&f->q);
    /* batches built from now on fit this aggregator's limit; queued ones over it are
     * re-split when the cursor reaches them (write_batches) */
    mrd__tx_apply_peer_limit(f, r->max_frame_bytes, now);
    f->data.write_off = 0;
    f->data.ever_connected = 1;
    f->data.hello_ns = now;
    mrd__link_ready(&f->data.link, now);
    atomic_fetch_add(&f->sh->connects, 1);
    mrd__tx_set_error(f, "%s", "");
    sync_stats(f);
}

/* One frame of the data connection (mrd_link_frame_fn). */
static int on_data_frame(void *arg, int type, const ProtobufCMessage *m, int reply)
{
    const struct mrd__tx_frame_ctx *x = arg;
    struct mrd_flusher *f = x->f;
    if (reply) {
        on_hello_reply(f, (const Meridian__V1__HelloReply *)m, x->now);
        return 0;
    }
    if (type == MRD_FRAME_ACK && f->data.link.conn.state == MRD_CONN_READY) {
        const Meridian__V1__Ack *a = (const Meridian__V1__Ack *)m;
        if (a->goodbye) {
            if (f->data.goodbye_state == MRD_GB_SENT)
                goodbye_over(f, MRD_TX_GOODBYE_ACKED);
        } else {
            mrd_txq_ack(&f->q, a->seq, on_acked, f);
            sync_stats(f);
        }
        return 0;
    }
    if (type == MRD_FRAME_ERROR) {
        const Meridian__V1__Error *er = (const Meridian__V1__Error *)m;
        mrd__tx_set_error(f, "aggregator error %u: %.90s", er->code,
                          er->message ? er->message : "");
        return -ECONNABORTED;
    }
    return -MRD_ERR_MALFORMED; /* a frame the aggregator never sends in this state */
}

/* Handles every complete frame in the input buffer (contract in flusher_int.h). */
int mrd__data_process_frames(struct mrd_flusher *f, int64_t now)
{
    struct mrd__tx_frame_ctx x = {f, now};
    return mrd__link_take_frames(&f->data.link, &f->id, on_data_frame, &x);
}

/* Writes control frames, then batch frames from the queue, until the socket is full. */
static void write_batches(struct mrd_flusher *f, int64_t now)
{
    int e = mrd_conn_flush(&f->data.link.conn);
    if (e == -EAGAIN)
        return;
    if (e < 0) {
        data_fail(f, now, "send", e);
        return;
    }
    struct mrd_txq_entry *en;
    while ((en = mrd_txq_peek_unsent(&f->q)) != NULL) {
        /* built before this aggregator's limit applied (resplit.c): does it take it? */
        if (f->data.write_off == 0 &&
            (en->seq < f->lim.builder_limit_seq ||
             f->lim.builder_max_frame != f->lim.peer_max_frame) &&
            !mrd__tx_frame_fits(f, en)) {
            if (mrd__tx_oversized(f, now)) /* re-split, or kept for the next pass */
                break;
            continue; /* dropped (counted): no limit the builder can apply fits the peer */
        }
        ssize_t n = mrd_conn_write(&f->data.link.conn, en->frame + f->data.write_off,
                                   en->len - f->data.write_off);
        if (n < 0) {
            data_fail(f, now, "send", (int)n);
            break;
        }
        if (n == 0)
            break;
        f->data.write_off += (size_t)n;
        if (f->data.write_off < en->len)
            break;
        atomic_fetch_add(en->sent_count ? &f->sh->batches_resent : &f->sh->batches_sent, 1);
        mrd_txq_mark_sent(&f->q);
        f->data.write_off = 0;
    }
    sync_stats(f);
}

short mrd__data_poll_events(const struct mrd_flusher *f)
{
    const struct mrd_conn *c = &f->data.link.conn;
    short ev = mrd__link_poll_events(&f->data.link);
    if (c->state == MRD_CONN_READY && (c->out_len > c->out_off || mrd_txq_peek_unsent(&f->q)))
        ev |= POLLOUT;
    return ev;
}

void mrd__data_step(struct mrd_flusher *f, int64_t now)
{
    struct mrd_conn *c = &f->data.link.conn;
    const char *why = "";
    int e;
    if (f->data.goodbye_state == MRD_GB_DONE)
        return;
    switch (c->state) {
    case MRD_CONN_CLOSED:
        if (now < f->data.link.next_connect_ns)
            return;
        {
            /* addresses resolved off this thread (resolve.h): a slow DNS never stalls the
             * drain; until there is one, batches queue and the attempt comes back later */
            struct mrd_addrs a;
            e = mrd_resolver_addrs(f->res, &a, now, &why);
            if (e == 0 && (e = mrd_conn_open(c, &a, &why)) != 0)
                mrd_resolver_failed(f->res, now);
            if (e != 0) {
                mrd__tx_set_error(f, "connect: %s", why);
                mrd__link_fail(&f->data.link, now, 0);
            }
            return;
        }
    case MRD_CONN_CONNECTING:
    case MRD_CONN_HELLO:
    case MRD_CONN_PROOF:
        if (mrd__link_check_timeout(&f->data.link, now, &why) != 0) {
            if (c->state == MRD_CONN_CONNECTING)
                mrd_resolver_failed(f->res, now);
            data_fail(f, now, why, 0);
        }
        return;
    case MRD_CONN_READY:
        if (!f->stopping && mrd__gpus_generation() != f->data.hello_gpu_gen &&
            f->q.head == f->q.cursor && f->data.write_off == 0 &&
            now - f->data.hello_ns > 1000000000ll) {
            /* new GPUs since the hello and nothing in flight: say hello again */
            mrd_conn_close(c);
            f->data.link.next_connect_ns = now;
            return;
        }
        write_batches(f, now);
        return;
    }
}

void mrd__data_on_poll(struct mrd_flusher *f, short revents, int64_t now)
{
    struct mrd_conn *c = &f->data.link.conn;
    if (c->state == MRD_CONN_CONNECTING) {
        int e = mrd_conn_finish_connect(c);
        if (e == -EAGAIN)
            return;
        if (e < 0) {
            mrd_resolver_failed(f->res, now);
            data_fail(f, now, "connect", e);
            return;
        }
        mrd_resolver_connected(f->res);
        const char *what = "";
        e = mrd__link_send_hello(&f->data.link, &f->id, now, &what, &f->data.hello_gpu_gen);
        if (e != 0)
            data_fail(f, now, what, e);
        return;
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        int rd = mrd_conn_read(c);
        int e = mrd__data_process_frames(f, now);
        if (e == -MRD_ERR_VERSION && !f->data.refusal_logged++) /* its refusal is unreadable */
            fprintf(stderr,
                    "meridian: rank %d: aggregator %s speaks another protocol version than "
                    "this agent (%d): use libmeridian.so and meridiand of one meridian "
                    "version\n",
                    f->id.cfg->rank, f->id.cfg->aggregator, MRD_PROTOCOL_VERSION);
        if (e < 0) {
            data_fail(f, now, "protocol", e);
            return;
        }
        if (rd < 0 && c->state != MRD_CONN_CLOSED) {
            if (f->data.goodbye_state == MRD_GB_DONE) { /* the aggregator closes after the Ack */
                mrd_conn_close(c);
                return;
            }
            data_fail(f, now, rd == -ECONNRESET ? "connection closed by the aggregator" : "receive",
                      rd == -ECONNRESET ? 0 : rd);
            return;
        }
    }
    if ((revents & POLLOUT) && (c->state == MRD_CONN_HELLO || c->state == MRD_CONN_PROOF)) {
        int e = mrd__link_flush_handshake(&f->data.link);
        if (e != 0)
            data_fail(f, now, "send hello", e);
    } else if ((revents & POLLOUT) && c->state == MRD_CONN_READY) {
        write_batches(f, now);
    }
}

void mrd__data_goodbye(struct mrd_flusher *f, int64_t now)
{
    struct mrd_conn *c = &f->data.link.conn;
    struct mrd_goodbye_buf gb;

    mrd__tx_fill_goodbye(f, &gb);
    if (mrd_conn_queue(c, MRD_FRAME_GOODBYE, &gb.g.base) != 0) {
        goodbye_over(f, MRD_TX_GOODBYE_NONE); /* cannot even encode it: nothing to wait for */
        return;
    }
    f->data.goodbye_state = MRD_GB_SENT;
    f->data.goodbye_shut = 0;
    atomic_store(&f->sh->goodbye, MRD_TX_GOODBYE_UNACKED);
    mrd__data_goodbye_progress(f, now);
}

void mrd__data_goodbye_progress(struct mrd_flusher *f, int64_t now)
{
    struct mrd_conn *c = &f->data.link.conn;
    if (f->data.goodbye_state != MRD_GB_SENT || c->state != MRD_CONN_READY)
        return;
    if (f->data.goodbye_shut) {
        /* an older aggregator never answers: done once it closed, or after 100 ms */
        if (!f->data.peer_acks_goodbye && now - f->data.goodbye_shut_ns > 100 * 1000000ll) {
            goodbye_over(f, MRD_TX_GOODBYE_SENT_ONLY);
            mrd_conn_close(c);
        }
        return;
    }
    int e = mrd_conn_flush(c);
    sync_stats(f);
    if (e == -EAGAIN)
        return; /* POLLOUT finishes it (write_batches) */
    if (e != 0) {
        data_fail(f, now, "send goodbye", e);
        return;
    }
    /* Shut our side: the aggregator reads everything before it sees EOF, answers, and then
     * closes. Closing instead with unread input would make TCP send a reset, which can
     * discard the Goodbye on its side before it is read. */
    shutdown(c->fd, SHUT_WR);
    f->data.goodbye_shut = 1;
    f->data.goodbye_shut_ns = now;
}
