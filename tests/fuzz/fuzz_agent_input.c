/* fuzz_agent_input: libFuzzer target for everything the agent does with bytes from
 * meridiand (the other side of fuzz_frame_batch, which covers what meridiand reads).
 *
 * The input is what the aggregator sent on one connection. It goes through the agent's
 * own code, not a copy of it: the bytes are put into a struct mrd_conn's input buffer the
 * way mrd_conn_read does (at most the buffer's room at a time), and the transport's frame
 * handlers take them out with mrd_conn_next_frame (framing, zstd, decode) and act on each
 * frame (flusher_int.h): mrd__data_process_frames (Challenge: the Proof is queued by
 * mrd__link_answer_challenge; HelloReply: committed_seq trims the unacked queue,
 * max_frame_bytes goes to the batch builder, refusals close; Ack: moves the queue or ends
 * the Goodbye; Error), mrd__clock_process_frames (the clock connection's handshake, late
 * replies outside a probe round) and mrd__clock_take_replies (inside a round: every
 * ClockReply's WindowRequests go to mrd_stepctl_request, the reply matching the probe
 * becomes a clock sample, added to the builder as the round does). Only the socket is left
 * out: where the agent would write (batches, after a HelloReply) the target marks the
 * queue as written, and where it would reconnect after a failure it starts a new
 * connection on the rest of the input.
 *
 * Every input runs through four passes, each on a fresh flusher holding QUEUED real
 * batches (seqs SEQ0 ..., built by the builder with one string each, so acks reach the
 * builder's string log) and PENDING events not yet finished (in A with ~5 KB of new
 * strings, so that a HelloReply's limit below that makes the builder finish them first):
 *   A. data connection from its Hello on (Challenge, HelloReply, Acks), fed one byte at a
 *      time (each frame handled alone, as when the aggregator answers one thing at a time;
 *      every split point of a frame);
 *   B. data connection already READY, every batch written, Goodbye SENT to an aggregator
 *      that acknowledges goodbyes, the input delivered as one read would (all at once);
 *   C. clock connection from its Hello on, outside a round;
 *   D. clock connection READY, one round of MRD_PROBE_BURST probes: probe k has probe_id k
 *      and t0 = k * PROBE_T0_NS (fixed, so a seed can answer it), one step begun per
 *      probe; frames left after the round go to mrd__clock_process_frames.
 * After every handler call the target checks what must hold whatever the aggregator sent:
 * the queue's links and totals; no event lost or invented (queued + pending + acked +
 * counted drops is constant); the next batch seq above every queued seq, never 0, at most
 * INT64_MAX; the builder's limit the peer's (floored at MRD_FRAME_MIN_MAX) once READY;
 * nothing queued to send before a Challenge, exactly one Proof (a MAC of the right size)
 * after it; a full input buffer always holds a complete frame (the conn.h cap); only the
 * Goodbye's Ack ends the Goodbye; a sample is the probe's; every window slot in stepctl
 * well-formed, ids unique.
 *
 * stepctl keeps process-wide state (its request slots). To run every input from the same
 * state (a crash input reproduces alone), this file includes agent/base/stepctl.c itself
 * and clears that state before each input; the linker then takes stepctl from here, not
 * from mrd_agent_core. The rest of the agent's global state here is counters (read as
 * differences).
 *
 * Built as a libFuzzer binary when MRD_FUZZ=ON; always built with replay_main.c as
 * fuzz_replay_agent, which CTest runs over tests/fuzz/corpus_agent (fuzz_replay_agent_corpus).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "error.h"
#include "flusher_int.h"
#include "stepctl.c" /* see above: the real source, so its state can be cleared */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEQ0        1000u /* first queued batch */
#define QUEUED      6     /* batches in the queue at the start of a pass */
#define PENDING     3     /* events in the builder, not yet a batch */
#define PROBE_T0_NS 1000  /* pass D: probe k carries t0 = k * PROBE_T0_NS */
#define STEPS0      4     /* pass D: steps begun before the round */

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_agent_input: %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

struct pass {
    struct mrd_flusher *f;
    struct mrd_tx_shared sh;
    struct mrd_agent_config cfg;
    uint64_t events; /* every event given to the builder */
    uint64_t drops0; /* the agent's drop counters (all reasons) at the start */
    int64_t now;
};

static uint64_t drops_total(void)
{
    uint64_t captured[MRD_EV__COUNT] = {0}, dropped[MRD_DROP__COUNT] = {0}, n = 0;
    mrd_agent_counters(captured, dropped);
    for (int i = 0; i < MRD_DROP__COUNT; i++)
        n += dropped[i];
    return n;
}

static void add_kernel(struct pass *p, uint32_t name, uint64_t corr)
{
    union mrd_any_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kernel.start = (int64_t)corr * 1000;
    ev.kernel.end = ev.kernel.start + 500;
    ev.kernel.correlation = corr;
    ev.kernel.device = 1;
    ev.kernel.name = name;
    REQUIRE(mrd__tx_add_event(p->f, MRD_EV_KERNEL, &ev, p->now) == 0);
    p->events++;
}

/* A flusher as mrd__transport_start makes it (no thread, no socket, no resolver), with
 * QUEUED finished batches (one new string each) and PENDING events; with long_names, the
 * pending events define over MRD_FRAME_MIN_MAX bytes of strings, so that a HelloReply's
 * smaller limit makes the builder finish them first (resplit.c; only pass A applies a
 * HelloReply's limit). */
static void pass_init(struct pass *p, int long_names)
{
    static const char *const names[QUEUED] = {"sgemm",      "ncclAllReduce", "memcpyHtoD",
                                              "fused_adam", "softmax_bwd",   "layer_norm"};
    /* one flusher for every pass: it holds both connections' buffers (~260 KiB), which a
     * fresh allocation per pass would page in again every time (most of the run time) */
    static struct mrd_flusher flusher;
    struct mrd_flusher *f = &flusher;

    memset(f, 0, sizeof *f);
    memset(p, 0, sizeof *p);
    p->f = f;
    p->now = 1000000000;
    snprintf(p->cfg.aggregator, sizeof p->cfg.aggregator, "fuzz:1");
    snprintf(p->cfg.run_id, sizeof p->cfg.run_id, "fuzz-agent");
    snprintf(p->cfg.secret, sizeof p->cfg.secret, "fuzz-secret");
    p->cfg.rank = 3;
    p->cfg.queue_bytes = 1ull << 30;
    p->cfg.batch_events = 16384;
    p->cfg.probe_interval_ms = 500;
    REQUIRE(pthread_mutex_init(&p->sh.err_lock, NULL) == 0);
    f->id.cfg = &p->cfg;
    f->sh = &p->sh;
    f->id.agent_instance = 77;
    atomic_store(&f->rec_fd, -1);
    mrd__link_init(&f->data.link, MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA);
    mrd__link_init(&f->clk.link, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK);
    mrd_txq_init(&f->q, p->cfg.queue_bytes);
    struct mrd_batch_builder_config bc = {.run_id = p->cfg.run_id,
                                          .rank = 3,
                                          .agent_instance = f->id.agent_instance,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = p->cfg.batch_events,
                                          .compress_level = 0}; /* raw: zstd per input is slow */
    REQUIRE(mrd_batch_builder_new(&bc, &f->b) == 0);
    f->cv = (struct mrd_convert){.b = f->b, .target_events = p->cfg.batch_events};
    f->first_seq = f->next_seq = SEQ0;
    f->lim.peer_max_frame = f->lim.builder_max_frame = f->lim.builder_max_ever =
        MRD_FRAME_DEFAULT_MAX;
    p->drops0 = drops_total();
    for (int i = 0; i < QUEUED; i++) {
        uint32_t id = mrd_batch_builder_intern(f->b, names[i]);
        REQUIRE(id != 0);
        add_kernel(p, id, 2 * (uint64_t)i + 1);
        add_kernel(p, id, 2 * (uint64_t)i + 2);
        REQUIRE(mrd__tx_finish_batch(f, p->now) == 0);
    }
    REQUIRE(f->q.count == QUEUED);
    char name[2500];
    for (int i = 0; i < PENDING; i++) {
        const char *s = names[i % QUEUED];
        if (long_names) {
            memset(name, 'a' + i % 2, sizeof name - 1);
            name[sizeof name - 1] = '\0';
            s = name;
        }
        uint32_t id = mrd_batch_builder_intern(f->b, s);
        REQUIRE(id != 0);
        add_kernel(p, id, 100 + (uint64_t)i);
    }
}

static void pass_free(struct pass *p)
{
    mrd_txq_clear(&p->f->q);
    mrd_batch_builder_free(p->f->b);
    pthread_mutex_destroy(&p->sh.err_lock);
}

/* What write_batches would have done with a writable socket: every queued batch sent. */
static void write_all(struct mrd_flusher *f)
{
    while (mrd_txq_peek_unsent(&f->q) != NULL)
        mrd_txq_mark_sent(&f->q);
}

/* mrd_conn_read, without a socket: as much of the input as the buffer has room for (at
 * most max). Returns the bytes taken. */
static size_t feed(struct mrd_conn *c, const uint8_t *data, size_t size, size_t *off, size_t max)
{
    size_t room = sizeof c->in - c->in_len, n = size - *off;

    if (n > room)
        n = room;
    if (n > max)
        n = max;
    memcpy(c->in + c->in_len, data + *off, n);
    c->in_len += n;
    *off += n;
    return n;
}

/* A connection that has just sent its Hello (connect + queue_hello, without a socket). */
static void hello_sent(struct mrd_conn *c, int64_t now)
{
    mrd_conn_close(c);
    c->state = MRD_CONN_HELLO;
    c->state_since_ns = now;
}

/* The handshake's output: nothing before a Challenge (the harness's Hello is not in the
 * buffer), then exactly one Proof frame holding a MAC, until the connection is READY or
 * closed (a new connection starts with an empty buffer). */
static void check_handshake(const struct mrd_conn *c)
{
    struct mrd_frame_header h;
    ProtobufCMessage *m = NULL;

    if (c->state == MRD_CONN_HELLO)
        REQUIRE(c->out_len == c->out_off);
    if (c->state != MRD_CONN_PROOF)
        return;
    REQUIRE(mrd_frame_header_parse(c->out + c->out_off, c->out_len - c->out_off, MRD_CONN_OUT_CAP,
                                   &h) == 0);
    REQUIRE(h.type == MRD_FRAME_PROOF && c->out_len - c->out_off == 8 + (size_t)h.length);
    REQUIRE(mrd_frame_decode(&h, c->out + c->out_off + 8, MRD_CONN_OUT_CAP, &m) == 0);
    REQUIRE(((const Meridian__V1__Proof *)m)->mac.len == MRD_AUTH_MAC_BYTES);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* What holds after any frame from any aggregator. */
static void check_flusher(const struct pass *p)
{
    const struct mrd_flusher *f = p->f;
    const struct mrd_txq *q = &f->q;
    const struct mrd_txq_entry *e, *last = NULL;
    uint64_t count = 0, bytes = 0, events = 0;
    int cursor_seen = q->cursor == NULL;

    for (e = q->head; e; e = e->next) {
        REQUIRE(last == NULL || e->seq > last->seq);
        REQUIRE(e->seq != 0 && e->frame != NULL && e->len > MRD_FRAME_HEADER_BYTES);
        cursor_seen |= e == q->cursor;
        count++;
        bytes += e->len;
        events += e->events;
        last = e;
    }
    REQUIRE(q->tail == last && count == q->count && bytes == q->bytes && events == q->events);
    REQUIRE(cursor_seen);
    /* every event is queued, pending, acknowledged or counted as dropped */
    REQUIRE(q->events + mrd_batch_builder_pending(f->b) + atomic_load(&p->sh.events_acked) +
                (drops_total() - p->drops0) ==
            p->events);
    /* the next batch gets a valid seq above every queued one (txqueue.h: push), with room
     * to go on (seqs are int64 in the aggregator's store; datalink.c: MRD_TX_SEQ_MAX) */
    REQUIRE(f->next_seq != 0 && f->next_seq <= (uint64_t)INT64_MAX);
    REQUIRE(last == NULL || f->next_seq > last->seq);
    REQUIRE(f->data.link.conn.in_len <= sizeof f->data.link.conn.in &&
            f->clk.link.conn.in_len <= sizeof f->clk.link.conn.in);
    check_handshake(&f->data.link.conn);
    check_handshake(&f->clk.link.conn);
    REQUIRE(f->data.goodbye_state == MRD_GB_NONE || f->data.goodbye_state == MRD_GB_SENT ||
            f->data.goodbye_state == MRD_GB_DONE);
    /* only the Goodbye's Ack ends the Goodbye here, and says so */
    REQUIRE(f->data.goodbye_state != MRD_GB_DONE ||
            atomic_load(&p->sh.goodbye) == MRD_TX_GOODBYE_ACKED);
    if (f->data.link.conn.state == MRD_CONN_READY) {
        uint32_t want =
            f->lim.peer_max_frame < MRD_FRAME_MIN_MAX ? MRD_FRAME_MIN_MAX : f->lim.peer_max_frame;
        REQUIRE(f->lim.peer_max_frame != 0 && f->lim.builder_max_frame == want);
        REQUIRE(f->lim.builder_max_ever >= f->lim.builder_max_frame);
    }
}

/* stepctl's request slots: well-formed, no id twice. */
static void check_windows(void)
{
    for (int i = 0; i < MRD_WINDOW_REQUESTS_MAX; i++) {
        const struct slot *s = &sc.s[i];
        uint64_t id = atomic_load(&s->id);

        REQUIRE((atomic_load(&s->seq) & 1) == 0);
        if (id == 0)
            continue;
        REQUIRE(atomic_load(&s->first) >= 0 && atomic_load(&s->first) <= atomic_load(&s->last));
        REQUIRE(atomic_load(&s->last) <= MRD_WINDOW_STEP_MAX);
        for (int j = 0; j < i; j++)
            REQUIRE(atomic_load(&sc.s[j].id) != id);
    }
}

/* The input buffer is full and nothing came out: conn.h promises that cannot happen (it
 * holds one frame of MRD_CONN_IN_CAP; a larger one is an error). */
static void check_progress(const struct mrd_conn *c, size_t took)
{
    REQUIRE(took > 0 || c->in_len < sizeof c->in || c->state == MRD_CONN_CLOSED);
}

/* A: the data connection from its Hello, one byte per read. */
static void pass_data_bytewise(const uint8_t *data, size_t size)
{
    struct pass p;
    size_t off = 0;

    pass_init(&p, 1);
    hello_sent(&p.f->data.link.conn, p.now);
    while (off < size) {
        if (p.f->data.link.conn.state ==
            MRD_CONN_CLOSED) /* refused or failed: the next connection */
            hello_sent(&p.f->data.link.conn, p.now);
        feed(&p.f->data.link.conn, data, size, &off, 1);
        int e = mrd__data_process_frames(p.f, p.now);
        REQUIRE(e <= 0);
        if (e < 0 ||
            p.f->data.link.conn.in_len == 0) /* a frame was handled (or the connection ended) */
            check_flusher(&p);
        if (e < 0)
            mrd_conn_close(&p.f->data.link.conn); /* data_fail */
        else if (p.f->data.link.conn.state == MRD_CONN_READY)
            write_all(p.f);
        p.now += 1000000;
    }
    pass_free(&p);
}

/* B: READY, everything written, Goodbye SENT; the input as large reads deliver it. */
static void pass_data_ready(const uint8_t *data, size_t size)
{
    struct pass p;
    size_t off = 0;

    pass_init(&p, 0);
    hello_sent(&p.f->data.link.conn, p.now);
    p.f->data.link.conn.state = MRD_CONN_READY;
    p.f->data.ever_connected = 1;
    p.f->data.peer_acks_goodbye = 1;
    p.f->data.goodbye_state = MRD_GB_SENT;
    write_all(p.f);
    while (off < size && p.f->data.link.conn.state == MRD_CONN_READY) {
        size_t took = feed(&p.f->data.link.conn, data, size, &off, SIZE_MAX);
        int e = mrd__data_process_frames(p.f, p.now);
        REQUIRE(e <= 0);
        check_flusher(&p);
        if (e < 0)
            break; /* data_fail */
        check_progress(&p.f->data.link.conn, took);
        if (took == 0)
            break;
        p.now += 1000000;
    }
    pass_free(&p);
}

/* C: the clock connection from its Hello, outside probe rounds. */
static void pass_clock_idle(const uint8_t *data, size_t size)
{
    struct pass p;
    size_t off = 0;

    pass_init(&p, 0);
    hello_sent(&p.f->clk.link.conn, p.now);
    while (off < size && p.f->clk.link.conn.state != MRD_CONN_CLOSED) {
        size_t took = feed(&p.f->clk.link.conn, data, size, &off, SIZE_MAX);
        mrd__clock_process_frames(p.f, p.now);
        check_flusher(&p);
        REQUIRE(p.f->clk.link.conn.state == MRD_CONN_CLOSED ||
                p.f->clk.link.conn.state == MRD_CONN_HELLO ||
                p.f->clk.link.conn.state == MRD_CONN_PROOF ||
                p.f->clk.link.conn.state == MRD_CONN_READY);
        check_progress(&p.f->clk.link.conn, took);
        if (took == 0)
            break;
        p.now += 1000000;
    }
    pass_free(&p);
}

/* D: the clock connection READY, one burst round, then idle. */
static void pass_clock_round(const uint8_t *data, size_t size)
{
    struct pass p;
    size_t off = 0;
    unsigned samples = 0;

    pass_init(&p, 0);
    hello_sent(&p.f->clk.link.conn, p.now);
    p.f->clk.link.conn.state = MRD_CONN_READY;
    for (int i = 0; i < STEPS0; i++)
        mrd_stepctl_begin();
    for (uint64_t id = 1; id <= MRD_PROBE_BURST;) {
        struct mrd_clock_sample s;
        int64_t t0 = (int64_t)id * PROBE_T0_NS, t3 = t0 + 777;
        int e = mrd__clock_take_replies(p.f, id, t0, t3, &s);

        check_windows();
        check_flusher(&p);
        if (e < 0) {
            mrd_conn_close(&p.f->clk.link.conn); /* clock_fail */
            break;
        }
        if (e == 1) {
            REQUIRE(s.t0 == t0 && s.t3 == t3);
            mrd__tx_add_clock_sample(p.f, &s);
            p.events++;
            samples++;
            mrd_stepctl_begin(); /* the application goes on between probes */
            id++;
            continue;
        }
        size_t took = feed(&p.f->clk.link.conn, data, size, &off, SIZE_MAX);
        check_progress(&p.f->clk.link.conn, took);
        if (took == 0)
            break; /* no reply: the round times out */
    }
    REQUIRE(atomic_load(&p.sh.clock_samples) == samples);
    if (p.f->clk.link.conn.state ==
        MRD_CONN_READY) { /* replies after the round: mrd__clock_on_poll */
        mrd__clock_process_frames(p.f, p.now);
        check_flusher(&p);
    }
    check_windows();
    pass_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&sc, 0, sizeof sc); /* stepctl as at process start */
    pass_data_bytewise(data, size);
    pass_data_ready(data, size);
    pass_clock_idle(data, size);
    pass_clock_round(data, size);
    return 0;
}
