/* A simulated rank's DATA connection: the at-least-once sender (contract in client.h).
 *
 * The queue is a ring of `window` entries in seq order. `nsent` counts the entries at the
 * front that were completely written on the current connection; the entry after them may
 * be partly written (`off`). An Ack for seq S pops every fully-sent entry with seq <= S
 * (acks are cumulative per connection). After a reconnect every entry is unsent again and
 * is written again from its first byte: a frame is self-contained (its string definitions
 * cover everything not yet acknowledged), so resending the same bytes is valid.
 *
 * I/O: a non-blocking socket driven by poll(); Hello/HelloReply and Goodbye use bounded
 * blocking helpers. No threads, no signals (SIGPIPE is avoided with MSG_NOSIGNAL).
 *
 * Goodbye: written, then our side shut; an aggregator that announced goodbye_acks answers
 * with Ack{goodbye} once it is committed. Until that Ack the Goodbye is not known to be
 * stored: if the connection ends first (the aggregator died), the client reconnects and
 * sends it again, until its timeout.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "error.h"
#include "frame.h"

#define RBUF_CAP       (64u * 1024u)
#define IO_TIMEOUT_MS  10000
#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 1000

struct qent {
    uint64_t seq, events, checksum;
    uint8_t *frame;
    size_t len, off;
    int ever_sent;
};

struct mrd_client {
    struct mrd_client_config cfg;
    int fd;
    struct qent *q;
    uint32_t head, count, nsent;
    uint8_t rbuf[RBUF_CAP];
    size_t rlen;
    uint64_t last_seq, jitter;
    struct mrd_client_stats st;
    void (*on_ack)(void *ctx, uint64_t seq, int dup);
    void *ack_ctx;
    int peer_acks_goodbye; /* the last HelloReply had goodbye_acks set */
    int refusal_logged;    /* a retried refusal (rank held, a cap) was printed once */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static struct qent *ent(struct mrd_client *c, uint32_t i)
{
    return &c->q[(c->head + i) % c->cfg.window];
}

static void logf_(const struct mrd_client *c, const char *what, int err)
{
    if (!c->cfg.quiet)
        fprintf(stderr, "meridian-replay: rank %u: %s: %s\n", c->cfg.rank, what, mrd_strerror(err));
}

static void close_fd(struct mrd_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->rlen = 0;
    c->nsent = 0;
    for (uint32_t i = 0; i < c->count; i++)
        ent(c, i)->off = 0;
}

/* Waits until c's socket is ready for `events` (POLLIN or POLLOUT), or a signal or the
 * deadline (a now_ms() time) comes. Returns 0, or -ETIMEDOUT once the deadline has
 * passed. */
static int wait_ready(const struct mrd_client *c, short events, int64_t deadline)
{
    int left = (int)(deadline - now_ms());
    if (left <= 0)
        return -ETIMEDOUT;
    struct pollfd p = {c->fd, events, 0};
    poll(&p, 1, left);
    return 0;
}

/* Writes all of buf within IO_TIMEOUT_MS (blocking helper for control frames), shown to
 * the tap unless tap is 0 (the Proof: it belongs to its connection's challenge only). */
static int write_some_frame(struct mrd_client *c, const uint8_t *buf, size_t len, int tap)
{
    int64_t deadline = now_ms() + IO_TIMEOUT_MS;
    size_t off = 0;
    if (c->cfg.tap && tap)
        c->cfg.tap(c->cfg.tap_ctx, buf, len);
    while (off < len) {
        ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            c->st.bytes_sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_ready(c, POLLOUT, deadline);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Reads until one complete frame is in rbuf[0..]; returns its header via *h and total size
 * via *flen. -ETIMEDOUT, -ECONNRESET on EOF, -MRD_ERR_* for a bad header. */
static int read_frame(struct mrd_client *c, int timeout_ms, struct mrd_frame_header *h,
                      size_t *flen)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int rc = mrd_frame_header_parse(c->rbuf, c->rlen, RBUF_CAP - MRD_FRAME_HEADER_BYTES, h);
        if (rc == 0 && c->rlen >= MRD_FRAME_HEADER_BYTES + (size_t)h->length) {
            *flen = MRD_FRAME_HEADER_BYTES + (size_t)h->length;
            return 0;
        }
        if (rc < 0 && rc != -EAGAIN)
            return rc;
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, RBUF_CAP - c->rlen, 0);
        if (n > 0) {
            c->rlen += (size_t)n;
            continue;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        if ((rc = wait_ready(c, POLLIN, deadline)) < 0)
            return rc;
    }
}

static void consume(struct mrd_client *c, size_t n)
{
    memmove(c->rbuf, c->rbuf + n, c->rlen - n);
    c->rlen -= n;
}

/* Reads one complete frame within timeout_ms (read_frame), decodes it into *msg (the
 * caller frees it with protobuf_c_message_free_unpacked) and drops its bytes from rbuf,
 * also when it does not decode. Returns 0 and *type, or read_frame's or
 * mrd_frame_decode's negative code. */
static int read_message(struct mrd_client *c, int timeout_ms, int *type, ProtobufCMessage **msg)
{
    struct mrd_frame_header h;
    size_t flen = 0;
    int rc = read_frame(c, timeout_ms, &h, &flen);
    if (rc < 0)
        return rc;
    rc = mrd_frame_decode(&h, c->rbuf + MRD_FRAME_HEADER_BYTES, RBUF_CAP, msg);
    consume(c, flen);
    if (rc < 0)
        return rc;
    *type = h.type;
    return 0;
}

static void pop_front(struct mrd_client *c, int dup)
{
    struct qent *e = ent(c, 0);
    c->st.batches_acked++;
    c->st.acked_events += e->events;
    c->st.acked_checksum += e->checksum;
    if (c->on_ack)
        c->on_ack(c->ack_ctx, e->seq, dup);
    free(e->frame);
    memset(e, 0, sizeof *e);
    c->head = (c->head + 1) % c->cfg.window;
    c->count--;
    if (c->nsent > 0)
        c->nsent--;
}

static int write_all(struct mrd_client *c, const uint8_t *buf, size_t len)
{
    return write_some_frame(c, buf, len, 1);
}

static int open_socket(struct mrd_client *c)
{
    struct addrinfo hints = {0}, *res = NULL;
    int fd = -1, rc;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(c->cfg.host, c->cfg.port, &hints, &res);
    if (rc != 0 || !res) {
        rc = -EHOSTUNREACH;
        goto fail;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto fail;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            rc = -errno;
            goto fail;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 2000) <= 0) {
            rc = -ETIMEDOUT;
            goto fail;
        }
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            rc = -err;
            goto fail;
        }
    }
    freeaddrinfo(res);
    c->fd = fd;
    return 0;
fail:
    if (res)
        freeaddrinfo(res);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The Challenge's answer: the Proof (proto/auth.h) of the Hello's claim, written at once
 * and never to the tap. 0 or a negative code. */
static int send_proof(struct mrd_client *c, const Meridian__V1__Challenge *ch)
{
    struct mrd_auth_claim claim = {.run_id = c->cfg.run_id,
                                   .role = MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA,
                                   .rank = c->cfg.rank,
                                   .agent_instance = c->cfg.agent_instance};
    uint8_t mac[MRD_AUTH_MAC_BYTES], *buf = NULL;
    size_t len = 0;
    if (ch->nonce.len != MRD_AUTH_NONCE_BYTES)
        return -MRD_ERR_MALFORMED;
    int rc = mrd_auth_proof(c->cfg.secret, c->cfg.secret_len, ch->nonce.data, ch->nonce.len, &claim,
                            mac);
    if (rc < 0)
        return rc;
    Meridian__V1__Proof p = MERIDIAN__V1__PROOF__INIT;
    p.mac.data = mac;
    p.mac.len = sizeof mac;
    rc = mrd_frame_encode(MRD_FRAME_PROOF, &p.base, 0, MRD_FRAME_DEFAULT_MAX, &buf, &len);
    if (rc == 0)
        rc = write_some_frame(c, buf, len, 0);
    free(buf);
    return rc;
}

/* A refused handshake (HelloReply.accepted false, or an Error): what it means for us.
 * A rank held by another live process, or a connection cap, may clear (the holder is
 * going away): retried like a lost connection, printed once; anything else is final. */
static int refused(struct mrd_client *c, uint32_t code, const char *what, const char *why)
{
    int rc = code == MRD_ERR_RANK_HELD || code == MRD_ERR_CONN_LIMIT || code == MRD_ERR_VERSION
                 ? -(int)code
                 : -MRD_ERR_AUTH;
    int retried = rc == -MRD_ERR_RANK_HELD || rc == -MRD_ERR_CONN_LIMIT;
    if (!retried || !c->refusal_logged++)
        fprintf(stderr, "meridian-replay: rank %u: %s: %s%s\n", c->cfg.rank, what,
                why ? why : "(no reason)", retried ? " (retrying)" : "");
    return rc;
}

/* One attempt: socket, Hello, Challenge, Proof, HelloReply. 0; -MRD_ERR_AUTH,
 * -MRD_ERR_VERSION or -MRD_ERR_TOO_LARGE (final); -MRD_ERR_RANK_HELD or -MRD_ERR_CONN_LIMIT
 * (refused for now); or another retryable error. */
static int try_connect(struct mrd_client *c)
{
    Meridian__V1__Hello hello = MERIDIAN__V1__HELLO__INIT;
    uint8_t *buf = NULL;
    size_t len = 0;
    ProtobufCMessage *msg = NULL;
    int type = 0;
    char host[256] = "localhost";
    int proved = 0;
    int rc = open_socket(c);
    if (rc < 0)
        goto fail;
    if (c->cfg.hostname)
        snprintf(host, sizeof host, "%s", c->cfg.hostname);
    else
        gethostname(host, sizeof host - 1);
    hello.protocol_version = MRD_PROTOCOL_VERSION;
    hello.run_id = (char *)c->cfg.run_id;
    hello.rank = c->cfg.rank;
    hello.local_rank = c->cfg.local_rank;
    hello.world_size = c->cfg.world_size;
    hello.host = host;
    hello.pid = c->cfg.pid ? c->cfg.pid : (uint32_t)getpid();
    hello.n_gpus = c->cfg.n_gpus;
    hello.gpus = c->cfg.gpus;
    hello.agent_version = "meridian-replay/0.1";
    hello.role = MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA;
    hello.agent_instance = c->cfg.agent_instance;
    hello.shard_id = c->cfg.shard_id;
    rc = mrd_frame_encode(MRD_FRAME_HELLO, &hello.base, 0, MRD_FRAME_DEFAULT_MAX, &buf, &len);
    if (rc < 0)
        goto fail;
    rc = write_all(c, buf, len);
    if (rc < 0)
        goto fail;
    for (;;) { /* the Challenge (answered once), then the HelloReply */
        rc = read_message(c, IO_TIMEOUT_MS, &type, &msg);
        if (rc < 0)
            goto fail;
        if (type != MRD_FRAME_CHALLENGE || proved)
            break;
        proved = 1;
        rc = send_proof(c, (Meridian__V1__Challenge *)msg);
        protobuf_c_message_free_unpacked(msg, NULL);
        msg = NULL;
        if (rc < 0)
            goto fail;
    }
    if (type == MRD_FRAME_ERROR) {
        Meridian__V1__Error *e = (Meridian__V1__Error *)msg;
        rc = refused(c, e->code, "hello refused", e->message);
        goto fail;
    }
    if (type != MRD_FRAME_HELLO_REPLY) {
        rc = -MRD_ERR_MALFORMED;
        goto fail;
    }
    Meridian__V1__HelloReply *r = (Meridian__V1__HelloReply *)msg;
    if (!r->accepted) {
        rc = refused(c, r->code, "hello rejected", r->reason);
        goto fail;
    }
    if (!proved) { /* accepted without our Proof: not an aggregator of this version */
        rc = -MRD_ERR_MALFORMED;
        goto fail;
    }
    c->refusal_logged = 0;
    c->st.last_committed_seq = r->committed_seq;
    c->peer_acks_goodbye = r->goodbye_acks;
    c->st.peer_max_frame = r->max_frame_bytes ? r->max_frame_bytes : MRD_FRAME_DEFAULT_MAX;
    /* a frame queued for a larger limit (an earlier aggregator's) would be refused again on
     * every connection: stop instead of resending it until retry_ms */
    for (uint32_t i = 0; i < c->count; i++) {
        struct mrd_frame_header fh;
        if (ent(c, i)->seq > r->committed_seq &&
            mrd_frame_header_parse(ent(c, i)->frame, ent(c, i)->len, c->st.peer_max_frame, &fh) ==
                -MRD_ERR_TOO_LARGE) {
            fprintf(stderr,
                    "meridian-replay: rank %u: batch %llu is over the aggregator's "
                    "frame limit of %u bytes\n",
                    c->cfg.rank, (unsigned long long)ent(c, i)->seq, c->st.peer_max_frame);
            rc = -MRD_ERR_TOO_LARGE;
            goto fail;
        }
    }
    /* batches the aggregator already committed need not be sent again */
    while (c->count > 0 && ent(c, 0)->seq <= r->committed_seq) {
        c->st.committed_on_hello++;
        pop_front(c, 1);
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    free(buf);
    return 0;
fail:
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
    free(buf);
    close_fd(c);
    return rc;
}

int mrd_client_connect(struct mrd_client *c)
{
    int64_t deadline = now_ms() + c->cfg.retry_ms;
    int backoff = BACKOFF_MIN_MS, attempts = 0, rc;
    close_fd(c);
    for (;;) {
        rc = try_connect(c);
        if (rc == 0 || rc == -MRD_ERR_AUTH || rc == -MRD_ERR_VERSION || rc == -MRD_ERR_TOO_LARGE)
            return rc;
        int refusal = rc == -MRD_ERR_RANK_HELD || rc == -MRD_ERR_CONN_LIMIT;
        if (attempts++ == 0 && !refusal) /* a refusal was printed with its reason */
            logf_(c, "connect", rc);
        if (now_ms() >= deadline) {
            logf_(c, "giving up", rc);
            return refusal ? rc : -ETIMEDOUT; /* still refused: say why, not "timed out" */
        }
        if (refusal) /* the holder is not going away within milliseconds: the slowest pace */
            backoff = BACKOFF_MAX_MS;
        c->jitter = c->jitter * 6364136223846793005ull + 1442695040888963407ull;
        sleep_ms(backoff + (int)((c->jitter >> 33) % (uint64_t)(backoff / 2 + 1)));
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
}

static int reconnect(struct mrd_client *c, int err)
{
    logf_(c, "connection lost, reconnecting", err);
    c->st.reconnects++;
    return mrd_client_connect(c);
}

static void handle_ack(struct mrd_client *c, const Meridian__V1__Ack *a)
{
    if (a->duplicate)
        c->st.dup_acks++;
    while (c->count > 0 && c->nsent > 0 && ent(c, 0)->seq <= a->seq)
        pop_front(c, a->duplicate && ent(c, 0)->seq == a->seq);
}

/* Writes queued frames until the socket would block. 0 or a negative errno. */
static int send_some(struct mrd_client *c)
{
    while (c->nsent < c->count) {
        struct qent *e = ent(c, c->nsent);
        if (e->off == 0) {
            if (e->ever_sent)
                c->st.batches_resent++;
            e->ever_sent = 1;
            if (c->cfg.tap)
                c->cfg.tap(c->cfg.tap_ctx, e->frame, e->len);
        }
        ssize_t n = send(c->fd, e->frame + e->off, e->len - e->off, MSG_NOSIGNAL);
        if (n < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
        e->off += (size_t)n;
        c->st.bytes_sent += (uint64_t)n;
        if (e->off == e->len)
            c->nsent++;
    }
    return 0;
}

/* Reads and handles every complete frame available. 1 if anything was acked, 0, or a
 * negative errno (connection must be dropped). */
static int recv_some(struct mrd_client *c)
{
    uint64_t before = c->st.batches_acked + c->st.dup_acks;
    for (;;) {
        ProtobufCMessage *msg = NULL;
        int type = 0;
        int rc = read_message(c, 0, &type, &msg);
        if (rc == -ETIMEDOUT)
            break;
        if (rc < 0)
            return rc;
        if (type == MRD_FRAME_ACK) {
            handle_ack(c, (Meridian__V1__Ack *)msg);
        } else if (type == MRD_FRAME_ERROR) {
            Meridian__V1__Error *e = (Meridian__V1__Error *)msg;
            if (!c->cfg.quiet)
                fprintf(stderr, "meridian-replay: rank %u: aggregator error %u: %s\n", c->cfg.rank,
                        e->code, e->message ? e->message : "");
            protobuf_c_message_free_unpacked(msg, NULL);
            return -ECONNABORTED;
        }
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    return c->st.batches_acked + c->st.dup_acks != before;
}

int mrd_client_pump(struct mrd_client *c, int timeout_ms)
{
    int rc;
    if (c->fd < 0 && (rc = reconnect(c, -ENOTCONN)) < 0)
        return rc;
    rc = send_some(c);
    if (rc < 0)
        return reconnect(c, rc);
    struct pollfd p = {c->fd, POLLIN, 0};
    if (c->nsent < c->count)
        p.events |= POLLOUT;
    if (c->count == 0 && c->rlen == 0 && timeout_ms > 0)
        timeout_ms = timeout_ms < 50 ? timeout_ms : 50; /* nothing to wait for */
    if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
        return -errno;
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
        rc = recv_some(c);
        if (rc < 0)
            return reconnect(c, rc);
    }
    if (p.revents & POLLOUT) {
        rc = send_some(c);
        if (rc < 0)
            return reconnect(c, rc);
    }
    return 0;
}

int mrd_client_submit(struct mrd_client *c, uint64_t seq, uint8_t *frame, size_t len,
                      uint64_t events, uint64_t checksum)
{
    if (c->count >= c->cfg.window)
        return -EAGAIN;
    if (seq <= c->last_seq)
        return -EINVAL;
    struct mrd_frame_header fh;
    if (c->st.peer_max_frame &&
        mrd_frame_header_parse(frame, len, c->st.peer_max_frame, &fh) == -MRD_ERR_TOO_LARGE)
        return -MRD_ERR_TOO_LARGE;
    struct qent *e = ent(c, c->count);
    memset(e, 0, sizeof *e);
    e->seq = seq;
    e->frame = frame;
    e->len = len;
    e->events = events;
    e->checksum = checksum;
    c->count++;
    c->last_seq = seq;
    c->st.batches_sent++;
    /* a send error only closes the socket: the frame is queued, pump reconnects */
    if (c->fd >= 0 && send_some(c) < 0)
        close_fd(c);
    return 0;
}

size_t mrd_client_unacked(const struct mrd_client *c)
{
    return c->count;
}

int mrd_client_drain(struct mrd_client *c, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (c->count > 0) {
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            return -ETIMEDOUT;
        int rc = mrd_client_pump(c, left < 100 ? left : 100);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void mrd_client_disconnect(struct mrd_client *c)
{
    close_fd(c);
}

int mrd_client_send_raw(struct mrd_client *c, const uint8_t *frame, size_t len)
{
    if (c->fd < 0)
        return -ENOTCONN;
    return write_all(c, frame, len);
}

/* Writes the Goodbye (transport fields filled here, its own bytes counted) and shuts our
 * sending side: the aggregator reads everything before it sees EOF; closing instead with
 * unread acks in our receive queue would send RST and could discard the Goodbye. */
static int send_goodbye(struct mrd_client *c, Meridian__V1__Goodbye *bye)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    bye->batches_sent = c->st.batches_sent;
    bye->batches_resent = c->st.batches_resent;
    bye->last_seq = c->last_seq;
    bye->bytes_sent = c->st.bytes_sent;
    int rc = mrd_frame_encode(MRD_FRAME_GOODBYE, &bye->base, 0, MRD_FRAME_DEFAULT_MAX, &buf, &len);
    if (rc < 0)
        return rc;
    bye->bytes_sent += len; /* count the goodbye itself */
    free(buf);
    buf = NULL;
    rc = mrd_frame_encode(MRD_FRAME_GOODBYE, &bye->base, 0, MRD_FRAME_DEFAULT_MAX, &buf, &len);
    if (rc < 0)
        return rc;
    c->st.goodbyes_sent++;
    rc = write_all(c, buf, len);
    free(buf);
    if (rc == 0)
        shutdown(c->fd, SHUT_WR);
    return rc;
}

/* After send_goodbye: 0 once Ack{goodbye} arrives (late batch acks are handled on the
 * way), -ETIMEDOUT at `deadline`, or a negative errno when the connection ended first (the
 * Goodbye may be lost). An aggregator that does not acknowledge goodbyes (no goodbye_acks
 * in its HelloReply): 0 at its EOF or after at most 1 s. */
static int wait_goodbye_ack(struct mrd_client *c, int64_t deadline)
{
    if (!c->peer_acks_goodbye) {
        int64_t until = now_ms() + 1000 < deadline ? now_ms() + 1000 : deadline;
        for (;;) {
            ssize_t n = recv(c->fd, c->rbuf, RBUF_CAP, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                return 0;
            int left = (int)(until - now_ms());
            if (left <= 0)
                return 0;
            if (n < 0) {
                struct pollfd p = {c->fd, POLLIN, 0};
                poll(&p, 1, left);
            }
        }
    }
    for (;;) {
        ProtobufCMessage *msg = NULL;
        int type = 0;
        int left = (int)(deadline - now_ms());
        int rc = read_message(c, left > 0 ? left : 0, &type, &msg);
        if (rc < 0)
            return rc;
        int acked = 0;
        if (type == MRD_FRAME_ACK && ((Meridian__V1__Ack *)msg)->goodbye)
            acked = 1;
        else if (type == MRD_FRAME_ACK)
            handle_ack(c, (Meridian__V1__Ack *)msg);
        else if (type == MRD_FRAME_ERROR)
            rc = -ECONNABORTED;
        protobuf_c_message_free_unpacked(msg, NULL);
        if (acked || rc < 0)
            return rc;
    }
}

int mrd_client_goodbye(struct mrd_client *c, Meridian__V1__Goodbye *bye, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int backoff = BACKOFF_MIN_MS, rc = -ETIMEDOUT;
    for (;;) {
        if (c->fd < 0) {
            rc = try_connect(c);
            if (rc == -MRD_ERR_AUTH || rc == -MRD_ERR_VERSION)
                return rc;
        } else {
            rc = 0;
        }
        if (rc == 0) {
            rc = send_goodbye(c, bye);
            if (rc == 0)
                rc = wait_goodbye_ack(c, deadline);
            close_fd(c);
            if (rc == 0) {
                c->st.goodbye_acked = c->peer_acks_goodbye;
                return 0;
            }
            logf_(c, "goodbye not acknowledged, sending it again", rc);
            c->st.reconnects++;
        }
        /* lost with its connection (or no connection): reconnect and say it again */
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            return -ETIMEDOUT;
        c->jitter = c->jitter * 6364136223846793005ull + 1442695040888963407ull;
        int pause = backoff + (int)((c->jitter >> 33) % (uint64_t)(backoff / 2 + 1));
        sleep_ms(pause < left ? pause : left);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
}

void mrd_client_get_stats(const struct mrd_client *c, struct mrd_client_stats *out)
{
    *out = c->st;
}

void mrd_client_on_ack(struct mrd_client *c, void (*fn)(void *ctx, uint64_t seq, int dup),
                       void *ctx)
{
    c->on_ack = fn;
    c->ack_ctx = ctx;
}

void mrd_client_free(struct mrd_client *c)
{
    if (!c)
        return;
    close_fd(c);
    for (uint32_t i = 0; i < c->count; i++)
        free(ent(c, i)->frame);
    free(c->q);
    free(c);
}

int mrd_client_new(const struct mrd_client_config *cfg, struct mrd_client **out)
{
    struct mrd_client *c = NULL;
    if (!cfg || !cfg->host || !cfg->port || !cfg->run_id || cfg->window == 0)
        return -EINVAL;
    c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->cfg = *cfg;
    c->fd = -1;
    c->jitter = cfg->agent_instance ^ ((uint64_t)cfg->rank << 32) ^ (uint64_t)getpid();
    c->q = calloc(cfg->window, sizeof *c->q);
    if (!c->q) {
        free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}
