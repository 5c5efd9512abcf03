/* The ROLE_CLOCK connection: NTP-style probes that never wait behind batches.
 *
 * Where it sits: called by the flusher loop. The clock connection is opened once the data
 * connection has been accepted (so an absent aggregator costs one failing connect per
 * backoff step, not two). Probes go out in rounds: MRD_PROBE_BURST at connect,
 * MRD_PROBE_ROUND every MERIDIAN_PROBE_INTERVAL_MS, MRD_PROBE_BURST before the goodbye.
 * Each probe is sent, then its reply is awaited on this socket alone (up to
 * MRD_PROBE_TIMEOUT_MS), so t0 is stamped right before send() and t3 right after recv(),
 * with nothing else of the flusher's in between. A round stops at the first timeout;
 * replies that arrive later are recognised by probe_id and ignored. Completed samples
 * (t0, t1, t2, t3) travel in the next batch's clock_samples; every sample is sent (the
 * aggregator's fit chooses the lowest round trips). Every probe also carries the step
 * counter and the application's profiler API calls (agent/base/stepctl.h), and every
 * reply's window requests go to stepctl: the aggregator opens windows on the same steps of
 * every rank through this channel.
 *
 * Workload: 8 probes every 500 ms by default: ~16 small frames a second each way; a round
 * holds the flusher for 8 round trips (well under a millisecond on a LAN).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include "error.h"
#include "flusher_int.h"
#include "stepctl.h"
#include "steps.h"

static void clock_fail(struct mrd_flusher *f, int64_t now)
{
    mrd__link_fail(&f->clk.link, now, 0);
}

short mrd__clock_poll_events(const struct mrd_flusher *f)
{
    return mrd__link_poll_events(&f->clk.link);
}

/* One frame of the clock connection outside a probe round (mrd_link_frame_fn). */
static int on_idle_frame(void *arg, int type, const ProtobufCMessage *m, int reply)
{
    const struct mrd__tx_frame_ctx *x = arg;
    struct mrd_clocklink *k = &x->f->clk;
    if (reply && ((const Meridian__V1__HelloReply *)m)->accepted) {
        mrd__link_ready(&k->link, x->now);
        k->probe_burst = MRD_PROBE_BURST;
        k->next_probe_ns = x->now;
        return 0;
    }
    if (reply) {
        mrd__link_refused(&k->link, x->now);
        return 0;
    }
    /* a ClockReply in READY came after its round gave up: ignored */
    if (type == MRD_FRAME_CLOCK_REPLY && k->link.conn.state == MRD_CONN_READY)
        return 0;
    return -MRD_ERR_MALFORMED;
}

/* Handles the frames in the input buffer outside a probe round (contract in
 * flusher_int.h). */
void mrd__clock_process_frames(struct mrd_flusher *f, int64_t now)
{
    struct mrd__tx_frame_ctx x = {f, now};
    if (mrd__link_take_frames(&f->clk.link, &f->id, on_idle_frame, &x) < 0)
        clock_fail(f, now);
}

void mrd__clock_step(struct mrd_flusher *f, int64_t now)
{
    struct mrd_clocklink *k = &f->clk;
    const char *why = "";
    switch (k->link.conn.state) {
    case MRD_CONN_CLOSED:
        if (f->data.link.conn.state != MRD_CONN_READY || now < k->link.next_connect_ns ||
            f->data.goodbye_state != 0)
            return;
        {
            struct mrd_addrs a; /* the data connection's, already resolved */
            if (mrd_resolver_addrs(f->res, &a, now, &why) != 0 ||
                mrd_conn_open(&k->link.conn, &a, &why) != 0)
                clock_fail(f, now);
            return;
        }
    case MRD_CONN_CONNECTING:
    case MRD_CONN_HELLO:
    case MRD_CONN_PROOF:
        if (mrd__link_check_timeout(&k->link, now, &why) != 0)
            clock_fail(f, now);
        return;
    case MRD_CONN_READY:
        if (f->stopping || now < k->next_probe_ns)
            return;
        unsigned n = k->probe_burst ? k->probe_burst : MRD_PROBE_ROUND;
        k->probe_burst = 0;
        mrd__clock_round(f, n, now + 250 * 1000000ll);
        k->next_probe_ns = mrd__mono_ns() + (int64_t)f->id.cfg->probe_interval_ms * 1000000;
        return;
    }
}

void mrd__clock_on_poll(struct mrd_flusher *f, short revents, int64_t now)
{
    struct mrd_link *l = &f->clk.link;
    const char *what = "";
    if (l->conn.state == MRD_CONN_CONNECTING) {
        int e = mrd_conn_finish_connect(&l->conn);
        if (e == -EAGAIN)
            return;
        if (e == 0)
            e = mrd__link_send_hello(l, &f->id, now, &what, NULL);
        if (e < 0)
            clock_fail(f, now);
        return;
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        int rd = mrd_conn_read(&l->conn);
        mrd__clock_process_frames(f, now);
        if (rd < 0 && l->conn.state != MRD_CONN_CLOSED)
            clock_fail(f, now);
        if (l->conn.state == MRD_CONN_CLOSED)
            return;
    }
    if ((revents & POLLOUT) && mrd__link_flush_handshake(l) != 0)
        clock_fail(f, now);
}

/* The aggregator's window requests (any reply carries them): handed to stepctl, which
 * acts once per id. */
static void take_windows(const Meridian__V1__ClockReply *cr)
{
    for (size_t i = 0; i < cr->n_windows && i < MRD_WINDOW_REQUESTS_MAX * 2; i++) {
        const Meridian__V1__WindowRequest *w = cr->windows[i];
        if (w)
            mrd_stepctl_request(w->id, w->first_step, w->last_step, (int)w->reason);
    }
}

/* Sends one probe (with the step counter); returns 0 or a negative errno. */
static int send_probe(struct mrd_flusher *f, uint64_t id, int64_t *t0)
{
    Meridian__V1__ClockProbe p = MERIDIAN__V1__CLOCK_PROBE__INIT;
    uint8_t buf[192]; /* nine varints: at most 9 x 11 bytes, plus the frame header */
    p.probe_id = id;
    mrd_stepctl_probe(&p.steps_begun, &p.last_step_ns, &p.longest_step_ns);
    mrd_stepctl_profiler_snapshot(&p.profiler_starts, &p.profiler_start_step, &p.profiler_stops,
                                  &p.profiler_stop_step);
    *t0 = mrd_clock_now();
    p.t0 = *t0;
    size_t len = 0;
    int e = mrd_frame_encode_into(MRD_FRAME_CLOCK_PROBE, MRD_PROTOCOL_VERSION, &p.base, buf,
                                  sizeof buf, &len);
    if (e != 0)
        return e;
    ssize_t n = mrd_conn_write(&f->clk.link.conn, buf, len);
    if (n < 0)
        return (int)n;
    return (size_t)n == len ? 0 : -EAGAIN;
}

/* Waits for the reply to probe `id`. Returns 1 with *s filled, 0 on timeout, negative on
 * a connection error. */
static int await_reply(struct mrd_flusher *f, uint64_t id, int64_t t0, int64_t until,
                       struct mrd_clock_sample *s)
{
    for (;;) {
        int64_t left = until - mrd__mono_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = f->clk.link.conn.fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (r <= 0)
            return 0;
        ssize_t n = mrd_conn_read_once(&f->clk.link.conn);
        int64_t t3 = mrd_clock_now();
        if (n < 0)
            return (int)n;
        int e = mrd__clock_take_replies(f, id, t0, t3, s);
        if (e != 0)
            return e;
    }
}

struct probe_reply_ctx {
    uint64_t id;
    int64_t t0, t3;
    struct mrd_clock_sample *s;
};

/* One frame of the clock connection inside a probe round (mrd_link_frame_fn): READY, so
 * the handshake hands every frame on. */
static int on_round_frame(void *arg, int type, const ProtobufCMessage *m, int reply)
{
    struct probe_reply_ctx *x = arg;
    if (reply || type != MRD_FRAME_CLOCK_REPLY)
        return -MRD_ERR_MALFORMED;
    const Meridian__V1__ClockReply *cr = (const Meridian__V1__ClockReply *)m;
    take_windows(cr);
    if (cr->probe_id != x->id || cr->t0 != x->t0)
        return 0;
    *x->s = (struct mrd_clock_sample){.t0 = x->t0, .t1 = cr->t1, .t2 = cr->t2, .t3 = x->t3};
    return 1;
}

/* The complete frames in the input buffer during a probe round (contract in
 * flusher_int.h). */
int mrd__clock_take_replies(struct mrd_flusher *f, uint64_t id, int64_t t0, int64_t t3,
                            struct mrd_clock_sample *s)
{
    struct probe_reply_ctx x = {id, t0, t3, s};
    return mrd__link_take_frames(&f->clk.link, &f->id, on_round_frame, &x);
}

void mrd__clock_round(struct mrd_flusher *f, unsigned n, int64_t until_ns)
{
    for (unsigned i = 0; i < n && f->clk.link.conn.state == MRD_CONN_READY; i++) {
        int64_t now = mrd__mono_ns();
        if (now >= until_ns)
            return;
        uint64_t id = ++f->clk.probe_id;
        int64_t t0 = 0;
        struct mrd_clock_sample s;
        int e = send_probe(f, id, &t0);
        if (e != 0) {
            clock_fail(f, now);
            return;
        }
        int64_t wait_until = now + (int64_t)MRD_PROBE_TIMEOUT_MS * 1000000;
        e = await_reply(f, id, t0, wait_until < until_ns ? wait_until : until_ns, &s);
        if (e < 0) {
            clock_fail(f, mrd__mono_ns());
            return;
        }
        if (e == 0)
            return; /* timed out: try again next round */
        mrd__tx_add_clock_sample(f, &s);
    }
}
