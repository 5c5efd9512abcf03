/* meridian ingest, one connection: read buffer, frame cutting, the handshake (Hello,
 * Challenge, Proof), dispatch of Batch / Goodbye / ClockProbe frames, rejections and the
 * write buffer.
 *
 * Where it sits: called by the loop (ingest.c) when a socket is readable or writable, or
 * when a connection may resume after the writer committed. Frames are cut from the read
 * buffer with mrd_frame_header_parse, decoded with mrd_frame_decode and handed to the
 * store as items; clock probes are answered right here, before anything else is read.
 * Every frame sent is encoded by mrd_frame_encode_into: this file neither packs protobuf
 * nor writes a header itself (proto/frame.h does both).
 *
 * Caps (see ingest.h): a frame is at most 64 KiB before a valid Hello and max_frame after;
 * the read buffer grows beyond 64 KiB only for one frame and only from the global budget,
 * and shrinks back once that frame is consumed; the write buffer is capped (wbuf_cap) and
 * a peer that lets it fill is closed. A rejected peer gets its reason (Error frame, or a
 * HelloReply with accepted = false), then the write side is shut and the connection is
 * drained for at most MRD__CLOSING_LINGER_MS so the reason is not destroyed by a reset.
 *
 * Handshake (proto/auth.h, COMPATIBILITY.md section 10): a Hello is answered with a
 * Challenge carrying a nonce fresh for this connection; the Hello's bytes are kept (at
 * most the 64 KiB pre-Hello frame cap, freed at the Proof or the close) and decoded again
 * once the Proof matches, so an unauthenticated peer holds no decoded message. The run
 * secret never travels; the MAC is compared in constant time. A peer of an older protocol
 * version is answered in its own version (c->version), so that it can read the reason:
 * upgrade. Every refusal is one rate-limited log line (mrd__ingest_log -1): a Batch after
 * the Goodbye on the same connection, a connection that ends inside a frame, too.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "batch.h"
#include "error.h"
#include "ingest_internal.h"
#include "steps.h"
#include "store.h"
#include "winctl.h"

#define SEND_STACK 512

static const char *type_name(uint32_t t)
{
    static const char *const names[] = {"?",          "Hello",     "HelloReply", "ClockProbe",
                                        "ClockReply", "Batch",     "Ack",        "Goodbye",
                                        "Error",      "Challenge", "Proof"};
    return t <= MRD_FRAME__MAX ? names[t] : "?";
}

int mrd__conn_open(struct mrd_ingest *g, int fd, uint32_t slot, uint64_t token, const char *peer,
                   const char *addr, struct mrd__conn **out)
{
    struct mrd__conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->fd = fd;
    c->slot = slot;
    c->token = token;
    c->state = MRD__CONN_HELLO;
    c->version = MRD_PROTOCOL_VERSION;
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    c->deadline_ms = mrd__ingest_mono_ms() + g->cfg.hello_timeout_ms;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = token};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int e = errno;
        free(c);
        return -e;
    }
    c->events = EPOLLIN;
    g->conns[slot] = c;
    g->nconns++;
    g->nprehello++;
    *out = c;
    return 0;
}

static void rbuf_release(struct mrd_ingest *g, struct mrd__conn *c)
{
    if (c->rbig) {
        g->rbig_used -= c->rbig;
        c->rbig = 0;
        g->budget_freed = 1;
    }
    free(c->rbuf);
    c->rbuf = NULL;
    c->rcap = c->rpos = c->rlen = 0;
}

static int unauthenticated(enum mrd__conn_state st)
{
    return st == MRD__CONN_HELLO || st == MRD__CONN_AUTH;
}

static int authenticated(enum mrd__conn_state st)
{
    return st == MRD__CONN_DATA || st == MRD__CONN_CLOCK;
}

void mrd__conn_set_state(struct mrd_ingest *g, struct mrd__conn *c, enum mrd__conn_state st)
{
    if (unauthenticated(c->state) && !unauthenticated(st))
        g->nprehello--;
    else if (!unauthenticated(c->state) && unauthenticated(st))
        g->nprehello++;
    if (authenticated(c->state) && !authenticated(st))
        g->nauth--;
    else if (!authenticated(c->state) && authenticated(st))
        g->nauth++;
    c->state = st;
}

void mrd__conn_close(struct mrd_ingest *g, struct mrd__conn *c)
{
    mrd__conn_set_state(g, c, MRD__CONN_CLOSING);
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    rbuf_release(g, c);
    free(c->wbuf);
    free(c->hello);
    g->conns[c->slot] = NULL;
    g->nconns--;
    free(c);
}

void mrd__conn_update_interest(struct mrd_ingest *g, struct mrd__conn *c)
{
    /* CLOSING: read (and discard) until the peer's EOF; otherwise read while nothing
     * holds the connection back and there is room */
    int readable =
        c->state == MRD__CONN_CLOSING || (!c->eof && !mrd__ingest_paused(g, c) && !c->want_big &&
                                          (c->rcap == 0 || c->rlen < c->rcap));
    uint32_t ev = readable ? EPOLLIN : 0;
    if (c->wpos < c->wlen)
        ev |= EPOLLOUT;
    if (ev == c->events)
        return;
    struct epoll_event e = {.events = ev, .data.u64 = c->token};
    epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &e);
    c->events = ev;
}

/* ---- writing ---- */

static int conn_write(struct mrd_ingest *g, struct mrd__conn *c, const uint8_t *p, size_t n)
{
    if (c->wpos == c->wlen) {
        c->wpos = c->wlen = 0;
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            mrd__ingest_log(g, 1, "%s: write failed (%s): closing", c->peer, mrd_strerror(-errno));
            mrd__conn_close(g, c);
            return -1;
        }
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        }
        if (n == 0)
            return 0;
    }
    size_t pending = c->wlen - c->wpos;
    if (pending + n > g->cfg.wbuf_cap) {
        mrd__ingest_log(g, 0, "%s%s: peer does not read its acks (%zu bytes pending): closing",
                        c->peer, c->has_rank ? "" : " (no hello)", pending);
        mrd__conn_close(g, c);
        return -1;
    }
    if (c->wlen + n > c->wcap) {
        if (c->wpos) {
            memmove(c->wbuf, c->wbuf + c->wpos, pending);
            c->wlen = pending;
            c->wpos = 0;
        }
        if (c->wlen + n > c->wcap) {
            size_t cap = c->wcap ? c->wcap : 4096;
            while (cap < c->wlen + n)
                cap *= 2;
            if (cap > g->cfg.wbuf_cap)
                cap = g->cfg.wbuf_cap;
            uint8_t *nb = realloc(c->wbuf, cap);
            if (!nb) {
                mrd__ingest_log(g, 0, "%s: out of memory for the write buffer: closing", c->peer);
                mrd__conn_close(g, c);
                return -1;
            }
            c->wbuf = nb;
            c->wcap = cap;
        }
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
    mrd__conn_update_interest(g, c);
    return 0;
}

int mrd__conn_send(struct mrd_ingest *g, struct mrd__conn *c, enum mrd_frame_type type,
                   const ProtobufCMessage *msg)
{
    uint8_t stackbuf[SEND_STACK], *buf = stackbuf;
    size_t cap = mrd_frame_encoded_size(msg), n = 0;
    if (cap > sizeof(stackbuf)) {
        buf = malloc(cap);
        if (!buf) {
            mrd__conn_close(g, c);
            return -1;
        }
    } else {
        cap = sizeof(stackbuf);
    }
    if (mrd_frame_encode_into(type, c->version, msg, buf, cap, &n) != 0) {
        if (buf != stackbuf)
            free(buf);
        mrd__conn_close(g, c);
        return -1;
    }
    int rc = conn_write(g, c, buf, n);
    if (buf != stackbuf)
        free(buf);
    return rc;
}

void mrd__conn_on_writable(struct mrd_ingest *g, struct mrd__conn *c)
{
    while (c->wpos < c->wlen) {
        ssize_t w = send(c->fd, c->wbuf + c->wpos, c->wlen - c->wpos, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                break;
            mrd__ingest_log(g, 1, "%s: write failed (%s): closing", c->peer, mrd_strerror(-errno));
            mrd__conn_close(g, c);
            return;
        }
        c->wpos += (size_t)w;
    }
    if (c->wpos == c->wlen) {
        c->wpos = c->wlen = 0;
        if (c->wcap > 65536) {
            free(c->wbuf);
            c->wbuf = NULL;
            c->wcap = 0;
        }
        if (c->state == MRD__CONN_CLOSING)
            shutdown(c->fd, SHUT_WR);
        if (c->state != MRD__CONN_CLOSING && mrd__conn_linger_done(c)) {
            mrd__conn_close(g, c);
            return;
        }
    }
    mrd__conn_update_interest(g, c);
}

/* ---- rejecting ---- */

void mrd__conn_reject(struct mrd_ingest *g, struct mrd__conn *c, int counter, uint32_t code,
                      const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    g->counters[counter]++;
    if (c->has_rank)
        mrd__ingest_log(g, -1, "rejected %s (rank %u): %s", c->peer, c->rank, why);
    else
        mrd__ingest_log(g, -1, "rejected %s (before hello): %s", c->peer, why);
    int in_hello = unauthenticated(c->state);
    mrd__conn_set_state(g, c, MRD__CONN_CLOSING);
    c->deadline_ms = mrd__ingest_mono_ms() + MRD__CLOSING_LINGER_MS;
    rbuf_release(g, c);
    free(c->hello);
    c->hello = NULL;
    int rc;
    if (in_hello) {
        Meridian__V1__HelloReply r = MERIDIAN__V1__HELLO_REPLY__INIT;
        r.accepted = 0;
        r.reason = why;
        r.code = code;
        r.max_frame_bytes = g->cfg.max_frame;
        rc = mrd__conn_send(g, c, MRD_FRAME_HELLO_REPLY, &r.base);
    } else {
        Meridian__V1__Error e = MERIDIAN__V1__ERROR__INIT;
        e.code = code;
        e.message = why;
        rc = mrd__conn_send(g, c, MRD_FRAME_ERROR, &e.base);
    }
    if (rc < 0)
        return; /* closed */
    if (c->wpos == c->wlen)
        shutdown(c->fd, SHUT_WR);
    mrd__conn_update_interest(g, c);
}

static int reject_code(int err, int *counter)
{
    switch (err) {
    case -MRD_ERR_VERSION:
        *counter = MRD__CNT_REJ_VERSION;
        return MRD_ERR_VERSION;
    case -MRD_ERR_TOO_LARGE:
        *counter = MRD__CNT_REJ_TOO_LARGE;
        return MRD_ERR_TOO_LARGE;
    default:
        *counter = MRD__CNT_REJ_MALFORMED;
        return MRD_ERR_MALFORMED;
    }
}

/* ---- frames ---- */

static int charge(struct mrd_ingest *g, struct mrd__conn *c, struct mrd_store_item *it)
{
    it->token = c->token;
    c->queued += it->cost;
    g->queued += it->cost;
    int stall = 0;
    if (!g->global_paused && g->queued >= g->cfg.queue_cap) {
        g->global_paused = 1;
        g->global_pauses++;
        stall = 1;
        mrd__ingest_log(g, 1, "writer behind (%zu bytes queued): pausing reads", g->queued);
    }
    stall |= c->queued >= g->cfg.conn_queue_cap;
    mrd_store_submit(g->store, it);
    if (stall) /* reading waits for this commit: do not let it wait for commit_ms too */
        mrd_store_commit_soon(g->store);
    return 0;
}

/* The live data connection of another agent process for `rank`, or NULL. Live: it said
 * a valid Hello and neither closed its side nor was rejected (a vanished host's connection
 * is ended by TCP keepalive, see ingest.c). Loop thread; a scan of the connection table,
 * once per data Hello. */
static const struct mrd__conn *rank_holder(const struct mrd_ingest *g, const struct mrd__conn *c,
                                           uint32_t rank, uint64_t instance)
{
    for (uint32_t i = 0; i < g->cfg.max_connections; i++) {
        const struct mrd__conn *o = g->conns[i];
        if (o && o != c && o->state == MRD__CONN_DATA && !o->eof && o->rank == rank &&
            o->instance != instance)
            return o;
    }
    return NULL;
}

/* What to tell a peer of protocol version `peer` (not ours) to do. */
static const char *version_advice(uint32_t peer)
{
    return peer < MRD_PROTOCOL_VERSION
               ? "upgrade libmeridian.so / meridian to the aggregator's version"
               : "this meridiand is older: use a meridiand of the agents' version";
}

/* The connection cap of the run secret (ingest.h, max_per_secret): what it is now and
 * how it was set, for the refusal line. */
static uint32_t secret_cap(const struct mrd_ingest *g, char *how, size_t n)
{
    if (g->cfg.max_per_secret) {
        snprintf(how, n, "--max-connections-per-secret");
        return g->cfg.max_per_secret;
    }
    if (!g->world_max) {
        snprintf(how, n, "no world size known: --max-connections");
        return g->cfg.max_connections;
    }
    uint64_t cap = 2 * (uint64_t)g->world_max + 8;
    snprintf(how, n, "2 x world size %u + 8", g->world_max);
    return cap < g->cfg.max_connections ? (uint32_t)cap : g->cfg.max_connections;
}

/* A Hello: its claim is kept until the Proof (its bytes, not the decoded message) and a
 * Challenge with a nonce fresh for this connection goes out. */
static int on_hello(struct mrd_ingest *g, struct mrd__conn *c, const struct mrd_frame_header *fh,
                    const uint8_t *payload, ProtobufCMessage *m)
{
    Meridian__V1__Hello *h = (Meridian__V1__Hello *)m;
    c->has_rank = 1; /* claimed, not yet proven: named in a rejection's log line */
    c->rank = h->rank;
    if (h->protocol_version != MRD_PROTOCOL_VERSION) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_VERSION, MRD_ERR_VERSION,
                         "Hello of protocol version %u, this aggregator speaks %d: %s",
                         h->protocol_version, MRD_PROTOCOL_VERSION,
                         version_advice(h->protocol_version));
        goto drop;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    int rc = mrd_auth_nonce(c->nonce);
    if (rc < 0) {
        mrd__ingest_log(g, 0, "%s: no random bytes for its challenge (%s): closing", c->peer,
                        mrd_strerror(rc));
        mrd__conn_close(g, c);
        return -1;
    }
    c->hello = malloc(fh->length ? fh->length : 1);
    if (!c->hello) {
        mrd__ingest_log(g, 0, "%s: out of memory: closing", c->peer);
        mrd__conn_close(g, c);
        return -1;
    }
    memcpy(c->hello, payload, fh->length);
    c->hello_h = *fh;
    mrd__conn_set_state(g, c, MRD__CONN_AUTH);
    Meridian__V1__Challenge ch = MERIDIAN__V1__CHALLENGE__INIT;
    ch.nonce.data = c->nonce;
    ch.nonce.len = sizeof(c->nonce);
    return mrd__conn_send(g, c, MRD_FRAME_CHALLENGE, &ch.base);
drop:
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

/* A store item of `kind` for message m; without memory, m is freed and the connection
 * closed (one log line) and NULL returned: the caller returns -1. */
static struct mrd_store_item *item_new(struct mrd_ingest *g, struct mrd__conn *c,
                                       enum mrd_store_item_kind kind, ProtobufCMessage *m)
{
    struct mrd_store_item *it = mrd_store_item_new(kind);
    if (!it) {
        mrd__ingest_log(g, 0, "%s: out of memory: closing", c->peer);
        protobuf_c_message_free_unpacked(m, NULL);
        mrd__conn_close(g, c);
    }
    return it;
}

/* The Proof: checked against the kept Hello's claim; then the run, the role, the caps and
 * the rank of the Hello it proves. */
static int on_proof(struct mrd_ingest *g, struct mrd__conn *c, ProtobufCMessage *pm)
{
    ProtobufCMessage *m = NULL;
    int rc = mrd_frame_decode(&c->hello_h, c->hello, MRD__RBUF_SMALL, &m);
    free(c->hello);
    c->hello = NULL;
    if (rc < 0) { /* it decoded a round trip ago: only -ENOMEM can get here */
        protobuf_c_message_free_unpacked(pm, NULL);
        mrd__ingest_log(g, 0, "%s: %s: closing", c->peer, mrd_strerror(rc));
        mrd__conn_close(g, c);
        return -1;
    }
    Meridian__V1__Hello *h = (Meridian__V1__Hello *)m;
    const Meridian__V1__Proof *p = (const Meridian__V1__Proof *)pm;
    struct mrd_auth_claim claim = {.run_id = h->run_id,
                                   .role = (uint32_t)h->role,
                                   .rank = h->rank,
                                   .agent_instance = h->agent_instance};
    int proven = p->mac.len == 0
                     ? 0
                     : mrd_auth_check(g->secret, g->cfg.secret_len, c->nonce, sizeof(c->nonce),
                                      &claim, p->mac.data, p->mac.len);
    int empty = p->mac.len == 0;
    protobuf_c_message_free_unpacked(pm, NULL);
    explicit_bzero(c->nonce, sizeof(c->nonce)); /* answered once: never again */
    if (empty) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_AUTH, MRD_ERR_AUTH,
                         "missing run secret (an empty Proof)");
        goto drop;
    }
    if (proven != 1) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_AUTH, MRD_ERR_AUTH,
                         "wrong run secret (its Proof does not match this connection's "
                         "challenge)");
        goto drop;
    }
    const char *run = mrd_store_run_id(g->store);
    if (!h->run_id || strcmp(h->run_id, run) != 0) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_RUN, MRD_ERR_AUTH,
                         "run id '%.64s' is not this aggregator's run '%s'",
                         h->run_id ? h->run_id : "", run);
        goto drop;
    }
    if (h->role != MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK &&
        h->role != MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_PROTOCOL, MRD_ERR_MALFORMED, "unknown role %d",
                         (int)h->role);
        goto drop;
    }
    /* every authenticated connection holds the one run secret: a holder of it (a rank, or
     * anything that read the secret file) cannot take every slot and lock the ranks out */
    if (h->world_size > g->world_max)
        g->world_max = h->world_size;
    char how[64];
    uint32_t cap = secret_cap(g, how, sizeof(how));
    if (g->nauth >= cap) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_SECRET_LIMIT, MRD_ERR_CONN_LIMIT,
                         "%u connections hold the run secret already, the limit (%s)", g->nauth,
                         how);
        goto drop;
    }
    if (h->role == MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK) {
        mrd__conn_set_state(g, c, MRD__CONN_CLOCK);
        mrd__ingest_log(g, 1, "rank %u clock connection from %s", h->rank, c->peer);
        protobuf_c_message_free_unpacked(m, NULL);
        Meridian__V1__HelloReply r = MERIDIAN__V1__HELLO_REPLY__INIT;
        r.accepted = 1;
        r.max_frame_bytes = g->cfg.max_frame;
        return mrd__conn_send(g, c, MRD_FRAME_HELLO_REPLY, &r.base);
    }
    /* one agent process per rank at a time: a second one's batches would mix two event
     * streams into one rank's rows and race the first one's sequence numbers */
    const struct mrd__conn *holder = rank_holder(g, c, h->rank, h->agent_instance);
    if (holder) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_RANK_HELD, MRD_ERR_RANK_HELD,
                         "rank %u is held by another live agent process (instance %016llx, "
                         "pid %u, %s); this one is instance %016llx, pid %u, host %.64s",
                         h->rank, (unsigned long long)holder->instance, holder->pid, holder->peer,
                         (unsigned long long)h->agent_instance, h->pid, h->host ? h->host : "?");
        goto drop;
    }
    struct mrd_store_item *it = item_new(g, c, MRD_STORE_HELLO, m);
    if (!it)
        return -1;
    mrd__conn_set_state(g, c, MRD__CONN_DATA);
    c->instance = h->agent_instance;
    c->pid = h->pid;
    mrd__ingest_log(g, 1, "rank %u data connection from %s (host %s, pid %u)", h->rank, c->peer,
                    h->host ? h->host : "?", h->pid);
    it->rank = h->rank;
    it->agent_instance = h->agent_instance;
    it->received_ns = c->t_read;
    it->cost = 1024;
    it->msg = m;
    return charge(g, c, it); /* HelloReply goes out when the rank row is committed */
drop:
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

/* A collective's arrival skew over the threshold (skew.h): a trigger window (winctl.h),
 * whose log line names the collective, the skew, the median and the latest rank. */
static void on_skew_hit(void *ctx, const struct mrd_skew_hit *h)
{
    struct mrd_ingest *g = ctx;
    char cause[320];
    snprintf(cause, sizeof(cause),
             "collective skew: %s seq %llu on communicator %016llx (%u ranks): rank %u "
             "arrived %.3f ms after rank %u, over %.2f x the median skew %.3f ms of its last "
             "%zu (clock error at most %.3f ms)",
             h->func, (unsigned long long)h->seq, (unsigned long long)h->comm_hash, h->nranks,
             h->latest_rank, (double)h->skew_ns / 1e6, h->earliest_rank, g->cfg.trigger_skew,
             (double)h->median_ns / 1e6, h->held, (double)h->error_ns / 1e6);
    mrd_winctl_trigger(g->winctl, cause, mrd__ingest_mono_ms(), NULL);
}

static int on_batch(struct mrd_ingest *g, struct mrd__conn *c, const struct mrd_frame_header *fh,
                    ProtobufCMessage *m)
{
    Meridian__V1__Batch *b = (Meridian__V1__Batch *)m;
    const char *why = NULL;
    if (mrd_batch_check(b, &why) < 0) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_MALFORMED, MRD_ERR_MALFORMED,
                         "invalid batch (seq %llu): %s", (unsigned long long)b->seq,
                         why ? why : "check failed");
        goto drop;
    }
    if (!b->run_id || strcmp(b->run_id, mrd_store_run_id(g->store)) != 0) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_RUN, MRD_ERR_MALFORMED,
                         "batch seq %llu for another run", (unsigned long long)b->seq);
        goto drop;
    }
    if (c->goodbye) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_AFTER_GOODBYE, MRD_ERR_MALFORMED,
                         "Batch seq %llu after the Goodbye on this connection: not stored, "
                         "not acknowledged",
                         (unsigned long long)b->seq);
        goto drop;
    }
    if (b->rank != c->rank || b->seq == 0) {
        mrd__conn_reject(g, c, MRD__CNT_REJ_PROTOCOL, MRD_ERR_MALFORMED,
                         "batch of rank %u seq %llu on this connection", b->rank,
                         (unsigned long long)b->seq);
        goto drop;
    }
    if (g->skew) /* read here, on the loop thread, before the writer owns the batch */
        mrd_skew_batch(g->skew, c->rank, b, on_skew_hit, g);
    struct mrd_store_item *it = item_new(g, c, MRD_STORE_BATCH, m);
    if (!it)
        return -1;
    /* cost: an estimate of the decoded message (columns are 4-8 bytes per value, up to 21
     * values per event) plus the strings and the item */
    size_t events = 0, strbytes = 0;
    for (int k = 1; k < MRD_EV__COUNT; k++)
        events += mrd_batch_count(b, k);
    for (size_t i = 0; i < b->n_strings; i++)
        strbytes += 64 + (b->strings[i]->value ? strlen(b->strings[i]->value) : 0);
    it->rank = c->rank;
    it->agent_instance = c->instance; /* the Hello's: what this connection authenticated */
    it->seq = b->seq;
    it->wire_bytes = MRD_FRAME_HEADER_BYTES + fh->length;
    it->received_ns = c->t_read;
    it->cost = sizeof(*it) + 512 + fh->length + 128 * events + strbytes;
    it->msg = m;
    c->batches++;
    return charge(g, c, it);
drop:
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

static int on_goodbye(struct mrd_ingest *g, struct mrd__conn *c, ProtobufCMessage *m)
{
    struct mrd_store_item *it = item_new(g, c, MRD_STORE_GOODBYE, m);
    if (!it)
        return -1;
    mrd__ingest_log(g, 1, "rank %u said goodbye after %llu batches on this connection", c->rank,
                    (unsigned long long)c->batches);
    c->goodbye = 1;
    it->rank = c->rank;
    it->received_ns = c->t_read;
    it->cost = 1024;
    it->msg = m;
    return charge(g, c, it);
}

/* Answers a probe at once. Its step counter goes to window control first (it may open a
 * trigger or delayed window), and the reply carries every active window request: at most
 * MRD_WINDOW_REQUESTS_MAX of ~40 bytes, far under the agent's 64 KiB input cap. */
static int on_probe(struct mrd_ingest *g, struct mrd__conn *c, ProtobufCMessage *m)
{
    const Meridian__V1__ClockProbe *p = (const Meridian__V1__ClockProbe *)m;
    Meridian__V1__ClockReply r = MERIDIAN__V1__CLOCK_REPLY__INIT;
    Meridian__V1__WindowRequest wr[MRD_WINDOW_REQUESTS_MAX];
    Meridian__V1__WindowRequest *wp[MRD_WINDOW_REQUESTS_MAX];
    r.probe_id = p->probe_id;
    r.t0 = p->t0;
    r.t1 = c->t_read;
    if (p->steps_begun || p->last_step_ns) /* both 0: an older agent, or no step yet */
        mrd_winctl_report(g->winctl, c->rank, p->steps_begun, p->last_step_ns, p->longest_step_ns,
                          mrd__ingest_mono_ms());
    if (p->profiler_starts) /* 0: no cudaProfilerStart seen, or an older agent */
        mrd_winctl_report_profiler(g->winctl, c->rank, p->profiler_starts,
                                   p->profiler_start_step, p->profiler_stops,
                                   p->profiler_stop_step, mrd__ingest_mono_ms());
    protobuf_c_message_free_unpacked(m, NULL);
    const struct mrd_winctl_request *q;
    size_t n = mrd_winctl_active(g->winctl, &q);
    for (size_t i = 0; i < n && i < MRD_WINDOW_REQUESTS_MAX; i++) {
        meridian__v1__window_request__init(&wr[i]);
        wr[i].id = q[i].id;
        wr[i].first_step = q[i].first;
        wr[i].last_step = q[i].last;
        wr[i].reason = (Meridian__V1__WindowReason)q[i].reason;
        wp[i] = &wr[i];
    }
    r.n_windows = n < MRD_WINDOW_REQUESTS_MAX ? n : MRD_WINDOW_REQUESTS_MAX;
    r.windows = r.n_windows ? wp : NULL;
    g->counters[MRD__CNT_PROBES]++;
    r.t2 = mrd_store_global_now(g->store);
    return mrd__conn_send(g, c, MRD_FRAME_CLOCK_REPLY, &r.base);
}

/* Returns 0 (c alive, maybe CLOSING) or -1 (c closed and freed). */
static int handle_frame(struct mrd_ingest *g, struct mrd__conn *c, const struct mrd_frame_header *h,
                        const uint8_t *payload)
{
    ProtobufCMessage *m = NULL;
    uint32_t limit = unauthenticated(c->state) ? MRD__RBUF_SMALL : g->cfg.max_frame;
    int rc = mrd_frame_decode(h, payload, limit, &m);
    if (rc < 0) {
        int counter;
        uint32_t code = reject_code(rc, &counter);
        mrd__conn_reject(g, c, counter, code, "undecodable %s frame of %u bytes: %s",
                         type_name(h->type), h->length, mrd_strerror(rc));
        return 0;
    }
    switch (c->state) {
    case MRD__CONN_HELLO:
        if (h->type == MRD_FRAME_HELLO)
            return on_hello(g, c, h, payload, m);
        break;
    case MRD__CONN_AUTH:
        if (h->type == MRD_FRAME_PROOF)
            return on_proof(g, c, m);
        break;
    case MRD__CONN_DATA:
        if (h->type == MRD_FRAME_BATCH)
            return on_batch(g, c, h, m);
        if (h->type == MRD_FRAME_GOODBYE)
            return on_goodbye(g, c, m);
        if (h->type == MRD_FRAME_CLOCK_PROBE)
            return on_probe(g, c, m);
        break;
    case MRD__CONN_CLOCK:
        if (h->type == MRD_FRAME_CLOCK_PROBE)
            return on_probe(g, c, m);
        if (h->type == MRD_FRAME_GOODBYE) {
            protobuf_c_message_free_unpacked(m, NULL);
            return 0;
        }
        break;
    case MRD__CONN_CLOSING:
        protobuf_c_message_free_unpacked(m, NULL);
        return 0;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (c->state == MRD__CONN_HELLO)
        mrd__conn_reject(g, c, MRD__CNT_REJ_PROTOCOL, MRD_ERR_AUTH,
                         "expected Hello first, got a %s frame", type_name(h->type));
    else if (c->state == MRD__CONN_AUTH)
        mrd__conn_reject(g, c, MRD__CNT_REJ_PROTOCOL, MRD_ERR_AUTH,
                         "expected the Proof after the Challenge, got a %s frame",
                         type_name(h->type));
    else
        mrd__conn_reject(g, c, MRD__CNT_REJ_PROTOCOL, MRD_ERR_MALFORMED,
                         "unexpected %s frame on a %s connection", type_name(h->type),
                         c->state == MRD__CONN_DATA ? "data" : "clock");
    return 0;
}

/* ---- reading ---- */

/* Makes room for a frame of `need` bytes at rbuf[0]. Returns 0, or -EAGAIN when the
 * global budget is exhausted (c->want_big is set; retried when budget is freed). */
static int rbuf_reserve(struct mrd_ingest *g, struct mrd__conn *c, size_t need)
{
    if (c->rpos) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    if (need <= c->rcap)
        return 0;
    size_t big = need > MRD__RBUF_SMALL ? need - MRD__RBUF_SMALL : 0;
    if (big > c->rbig && g->rbig_used - c->rbig + big > g->cfg.rbuf_budget) {
        g->budget_waits += !c->want_big;
        c->want_big = 1;
        return -EAGAIN;
    }
    uint8_t *nb = realloc(c->rbuf, need);
    if (!nb) {
        c->want_big = 1;
        return -EAGAIN;
    }
    g->rbig_used = g->rbig_used - c->rbig + big;
    c->rbig = big;
    c->rbuf = nb;
    c->rcap = need;
    c->want_big = 0;
    return 0;
}

/* After processing: keep the unprocessed tail at the front; give a grown buffer back
 * once what is left fits the small one. */
static void rbuf_settle(struct mrd_ingest *g, struct mrd__conn *c)
{
    if (c->rpos == c->rlen) {
        c->rpos = c->rlen = 0;
    } else if (c->rpos && (c->rcap > MRD__RBUF_SMALL || c->rlen == c->rcap)) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    struct mrd_frame_header h;
    if (c->rlen - c->rpos >= MRD_FRAME_HEADER_BYTES &&
        mrd_frame_header_parse(c->rbuf + c->rpos, c->rlen - c->rpos, g->cfg.max_frame, &h) == 0 &&
        MRD_FRAME_HEADER_BYTES + (size_t)h.length > MRD__RBUF_SMALL)
        return; /* the next frame needs the big buffer anyway */
    if (c->rcap > MRD__RBUF_SMALL && c->rlen - c->rpos <= MRD__RBUF_SMALL && !c->want_big) {
        if (c->rpos) {
            memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        uint8_t *nb = realloc(c->rbuf, MRD__RBUF_SMALL);
        if (nb) {
            c->rbuf = nb;
            c->rcap = MRD__RBUF_SMALL;
            g->rbig_used -= c->rbig;
            c->rbig = 0;
            g->budget_freed = 1;
        }
    }
}

int mrd__conn_process(struct mrd_ingest *g, struct mrd__conn *c)
{
    while (c->state != MRD__CONN_CLOSING) {
        if (!c->eof && mrd__ingest_paused(g, c))
            break;
        size_t avail = c->rlen - c->rpos;
        struct mrd_frame_header h;
        uint32_t limit =
            unauthenticated(c->state) ? MRD__RBUF_SMALL - MRD_FRAME_HEADER_BYTES : g->cfg.max_frame;
        int rc = mrd_frame_header_parse(c->rbuf + c->rpos, avail, limit, &h);
        if (rc == -EAGAIN)
            break;
        if (rc < 0) {
            int counter;
            uint32_t code = reject_code(rc, &counter);
            struct mrd_frame_header seen;
            mrd_frame_header_peek(c->rbuf + c->rpos, &seen);
            uint8_t peer_version = seen.version;
            /* an older peer we know reads our answer only in its own version (the header
             * is the same; HelloReply and Error carry the same fields) */
            if (rc == -MRD_ERR_VERSION && c->state == MRD__CONN_HELLO &&
                peer_version >= MRD_PROTOCOL_VERSION_READ_MIN &&
                peer_version < MRD_PROTOCOL_VERSION)
                c->version = peer_version;
            if (rc == -MRD_ERR_VERSION)
                mrd__conn_reject(g, c, counter, code,
                                 "protocol version %u, this aggregator speaks %d: %s", peer_version,
                                 MRD_PROTOCOL_VERSION, version_advice(peer_version));
            else if (rc == -MRD_ERR_TOO_LARGE)
                mrd__conn_reject(g, c, counter, code, "frame of %u bytes over the limit of %u",
                                 seen.length, limit);
            else
                mrd__conn_reject(g, c, counter, code, "malformed frame header");
            return 0;
        }
        size_t need = MRD_FRAME_HEADER_BYTES + (size_t)h.length;
        if (avail < need) {
            if (c->rpos + need > c->rcap)
                rbuf_reserve(g, c, need); /* may set want_big: retried when budget frees */
            break;                        /* read the rest */
        }
        const uint8_t *payload = c->rbuf + c->rpos + MRD_FRAME_HEADER_BYTES;
        c->rpos += need; /* the frame stays valid in rbuf until the next read */
        if (handle_frame(g, c, &h, payload) < 0)
            return -1;
    }
    if (c->state != MRD__CONN_CLOSING)
        rbuf_settle(g, c);
    mrd__conn_update_interest(g, c);
    return 0;
}

/* The peer closed its side (linger = 1: a FIN, it may still read) or the connection broke.
 * Complete frames already buffered are stored either way (caps or not: bounded by the
 * buffer already held). After a FIN the connection stays, not read any more, until the
 * acks of what it sent went out (mrd__conn_linger_done), so an agent that shuts down its
 * sending side still learns what was committed. */
/* The peer's stream ended with `left` bytes of an unfinished frame in the buffer: one
 * refusal line (what was cut: which frame, how much of it came) and a count. */
static void log_truncated(struct mrd_ingest *g, const struct mrd__conn *c, size_t left,
                          const char *how)
{
    char who[96];
    if (c->has_rank)
        snprintf(who, sizeof(who), "rank %u (%s)", c->rank, c->peer);
    else
        snprintf(who, sizeof(who), "%s (before hello)", c->peer);
    g->counters[MRD__CNT_TRUNCATED]++;
    if (left < MRD_FRAME_HEADER_BYTES) {
        mrd__ingest_log(g, -1,
                        "%s: connection ended%s inside a frame header (%zu of %d bytes): "
                        "discarded",
                        who, how, left, MRD_FRAME_HEADER_BYTES);
        return;
    }
    struct mrd_frame_header h;
    mrd_frame_header_peek(c->rbuf + c->rpos, &h);
    mrd__ingest_log(g, -1,
                    "%s: connection ended%s inside a %s frame (%zu of %llu bytes): "
                    "discarded",
                    who, how, type_name(h.type), left,
                    (unsigned long long)MRD_FRAME_HEADER_BYTES + h.length);
}

static void conn_eof(struct mrd_ingest *g, struct mrd__conn *c, const char *how, int linger)
{
    if (c->state != MRD__CONN_CLOSING) {
        c->eof = 1;
        if (mrd__conn_process(g, c) < 0)
            return;
        if (c->state != MRD__CONN_CLOSING && c->rlen > c->rpos)
            log_truncated(g, c, c->rlen - c->rpos, how);
        if (c->has_rank)
            mrd__ingest_log(g, 1, "rank %u (%s) disconnected%s", c->rank, c->peer, how);
        else
            mrd__ingest_log(g, 1, "%s disconnected before hello%s", c->peer, how);
        if (linger && c->state != MRD__CONN_CLOSING && !mrd__conn_linger_done(c)) {
            rbuf_release(g, c);
            mrd__conn_update_interest(g, c);
            return;
        }
    }
    mrd__conn_close(g, c);
}

int mrd__conn_linger_done(const struct mrd__conn *c)
{
    return c->eof && c->queued == 0 && c->wpos == c->wlen;
}

void mrd__conn_on_hangup(struct mrd_ingest *g, struct mrd__conn *c)
{
    conn_eof(g, c, " (hang-up)", 0);
}

void mrd__conn_on_readable(struct mrd_ingest *g, struct mrd__conn *c)
{
    if (c->state == MRD__CONN_CLOSING) {
        uint8_t sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            mrd__conn_close(g, c);
        return;
    }
    if (!c->rbuf) {
        c->rbuf = malloc(MRD__RBUF_SMALL);
        if (!c->rbuf) {
            mrd__ingest_log(g, 0, "%s: out of memory: closing", c->peer);
            mrd__conn_close(g, c);
            return;
        }
        c->rcap = MRD__RBUF_SMALL;
    }
    if (c->rlen == c->rcap) {
        mrd__conn_process(g, c); /* full: nothing to read into until frames are consumed */
        return;
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
    if (n == 0) {
        conn_eof(g, c, "", 1);
        return;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        char how[96];
        snprintf(how, sizeof(how), " (%s)", mrd_strerror(-errno));
        conn_eof(g, c, how, 0);
        return;
    }
    c->t_read = mrd_store_global_now(g->store);
    c->rlen += (size_t)n;
    mrd__conn_process(g, c);
}
