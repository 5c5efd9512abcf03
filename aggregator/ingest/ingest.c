/* meridian ingest, the loop: listener, epoll dispatch, writer completions (acks), the
 * once-a-second tick (hello timeouts, lingering closes, counters) and the shutdown.
 *
 * Where it sits: between the agents' sockets and the store's writer thread (store.h).
 * Per-connection work lives in conn.c; the control socket (`meridian window`) in control.c,
 * served by the same loop, which wakes for its clients' deadlines; the tick also lets
 * window control (winctl.h) expire requests and open the delayed window. Replies that
 * wait for a commit go out here: the HelloReply (after the rank row), an Ack per batch,
 * and Ack{goodbye} per Goodbye.
 * Backpressure: every submitted item carries a cost charged to its connection and to the
 * loop; at conn_queue_cap a connection is not read, at queue_cap no data connection is
 * read (until the queue falls to 3/4 of the cap); a commit's completions release the cost
 * and resume whoever can go on.
 *
 * Workload: one thread, hundreds of connections, tens of thousands of frames a second;
 * per wakeup at most 64 events, per listener event at most 64 accepts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "ingest_internal.h"
#include "store.h"
#include "winctl.h"

#define EV_LISTEN        1u
#define EV_STOP          2u
#define EV_STORE         3u

#define COUNTER_NAME(ID, name) [MRD__CNT_##ID] = #name,
static const char *const counter_names[MRD__CNT__COUNT] = {MRD__INGEST_COUNTERS(COUNTER_NAME)};

int64_t mrd__ingest_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Refusals are logged at most MRD__REFUSALS_LOGGED_PER_S a second; the rest are counted
 * and the count is logged as one line when the second is over (here, or from the tick):
 * a flood of bad peers costs ten lines and a count a second, not a line each. */
static void log_window(struct mrd_ingest *g, int64_t now)
{
    if (now - g->log_window_ms < 1000)
        return;
    if (g->log_suppressed)
        fprintf(g->cfg.log ? g->cfg.log : stderr,
                "meridiand: %u more refusals suppressed (at most %u logged a second)\n",
                g->log_suppressed, MRD__REFUSALS_LOGGED_PER_S);
    g->log_window_ms = now;
    g->log_lines = 0;
    g->log_suppressed = 0;
}

/* One "meridiand: ..." line. level -1: a rejected connection (always shown, rate-limited);
 * 0: an error (always shown); 1: per-connection detail (only with --verbose). */
void mrd__ingest_log(struct mrd_ingest *g, int level, const char *fmt, ...)
{
    if (level > 0 && g->cfg.verbose < 1)
        return;
    if (level < 0) {
        log_window(g, mrd__ingest_mono_ms());
        if (++g->log_lines > MRD__REFUSALS_LOGGED_PER_S) {
            g->log_suppressed++;
            return;
        }
    }
    va_list ap;
    va_start(ap, fmt);
    mrd_log_vline(g->cfg.log, "meridiand", fmt, ap);
    va_end(ap);
}

int mrd__ingest_paused(const struct mrd_ingest *g, const struct mrd__conn *c)
{
    if (g->stopping)
        return 1;
    if (c->wlen - c->wpos > g->cfg.wbuf_cap / 2)
        return 1;
    if (c->state == MRD__CONN_DATA)
        return g->global_paused || c->queued >= g->cfg.conn_queue_cap;
    return 0;
}

static struct mrd__conn *conn_by_token(struct mrd_ingest *g, uint64_t token)
{
    uint32_t slot = (uint32_t)token;
    if (slot >= g->cfg.max_connections)
        return NULL;
    struct mrd__conn *c = g->conns[slot];
    return c && c->token == token ? c : NULL;
}

/* "addr:port" into out, the address alone into addr[INET6_ADDRSTRLEN]. */
static void format_peer(const struct sockaddr_storage *ss, char *out, size_t len,
                        char addr[INET6_ADDRSTRLEN])
{
    unsigned port = 0;
    snprintf(addr, INET6_ADDRSTRLEN, "?");
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, addr, INET6_ADDRSTRLEN);
        port = ntohs(a->sin_port);
        snprintf(out, len, "%s:%u", addr, port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, addr, INET6_ADDRSTRLEN);
        port = ntohs(a->sin6_port);
        snprintf(out, len, "[%s]:%u", addr, port);
    } else {
        snprintf(out, len, "?");
    }
}

static int unauthenticated(const struct mrd__conn *c)
{
    return c->state == MRD__CONN_HELLO || c->state == MRD__CONN_AUTH;
}

/* Connections from `addr` that have not authenticated yet. A scan of the table, only when
 * the total could reach the cap at all. */
static uint32_t prehello_from(const struct mrd_ingest *g, const char *addr)
{
    uint32_t n = 0;
    if (g->nprehello < g->cfg.max_prehello_per_addr)
        return g->nprehello;
    for (uint32_t i = 0; i < g->cfg.max_connections; i++) {
        const struct mrd__conn *c = g->conns[i];
        n += c && unauthenticated(c) && strcmp(c->addr, addr) == 0;
    }
    return n;
}

static void set_listen_interest(struct mrd_ingest *g, int on)
{
    struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.u64 = EV_LISTEN};
    epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->lfd, &ev);
    g->accept_paused = !on;
}

/* A peer whose host vanished (crashed, cut off) is found within about a minute, idle or
 * not: keepalive probes after 10 s of silence (3 misses, 5 s apart), and a 60 s limit on
 * unacknowledged data we sent. Its connection is then closed, which also frees its rank
 * for the process that replaces it (conn.c lets one live agent process hold a rank). */
static void set_keepalive(int fd)
{
    int one = 1, idle = 10, intvl = 5, cnt = 3;
    unsigned user_timeout_ms = 60000;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

/* At the max_prehello cap: makes room for one more connection without a Hello. The
 * oldest such connection is read first (its Hello may be waiting in the kernel, as after a
 * burst of agents connecting); if it still has none it is closed at once. Returns 0, or
 * -EAGAIN when none could be freed (the new connection is then refused). */
static int make_prehello_room(struct mrd_ingest *g)
{
    for (int tries = 0; tries < 4 && g->nprehello >= g->cfg.max_prehello; tries++) {
        struct mrd__conn *old = NULL;
        for (uint32_t i = 0; i < g->cfg.max_connections; i++) {
            struct mrd__conn *c = g->conns[i];
            if (c && unauthenticated(c) && (!old || c->deadline_ms < old->deadline_ms))
                old = c;
        }
        if (!old)
            return -EAGAIN;
        uint64_t token = old->token;
        mrd__conn_on_readable(g, old);
        old = conn_by_token(g, token);
        if (!old || !unauthenticated(old))
            continue; /* it proved itself (or was rejected, or closed): room made */
        g->counters[MRD__CNT_PREHELLO_EVICTED]++;
        mrd__ingest_log(g, -1,
                        "closed %s (before hello, open %lld ms): %u connections without a "
                        "valid Hello, the limit",
                        old->peer,
                        (long long)(mrd__ingest_mono_ms() -
                                    (old->deadline_ms - g->cfg.hello_timeout_ms)),
                        g->nprehello);
        mrd__conn_close(g, old);
    }
    return g->nprehello < g->cfg.max_prehello ? 0 : -EAGAIN;
}

static void on_accept(struct mrd_ingest *g)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss = {0};
        socklen_t sl = sizeof(ss);
        int fd = accept4(g->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                mrd__ingest_log(g, 0, "cannot accept (%s): pausing accepts for a second",
                                mrd_strerror(-errno));
                set_listen_interest(g, 0);
            }
            return; /* EAGAIN and transient errors (ECONNABORTED...) */
        }
        char peer[64], addr[INET6_ADDRSTRLEN];
        format_peer(&ss, peer, sizeof(peer), addr);
        if (g->nconns >= g->cfg.max_connections) {
            g->counters[MRD__CNT_OVER_LIMIT]++;
            mrd__ingest_log(g, -1, "rejected %s (before hello): %u connections already open", peer,
                            g->nconns);
            close(fd);
            continue;
        }
        /* before the global cap's eviction: one address cannot push out everybody else's
         * connections that are still in their handshake */
        uint32_t from = prehello_from(g, addr);
        if (from >= g->cfg.max_prehello_per_addr) {
            g->counters[MRD__CNT_OVER_ADDR_LIMIT]++;
            mrd__ingest_log(g, -1,
                            "rejected %s (before hello): %u connections from %s without a "
                            "valid Hello yet, the per-address limit "
                            "(--max-unauthenticated-per-address)",
                            peer, from, addr);
            close(fd);
            continue;
        }
        if (g->nprehello >= g->cfg.max_prehello && make_prehello_room(g) < 0) {
            g->counters[MRD__CNT_OVER_LIMIT]++;
            mrd__ingest_log(g, -1, "rejected %s (before hello): %u connections without a Hello",
                            peer, g->nprehello);
            close(fd);
            continue;
        }
        uint32_t slot = 0;
        while (g->conns[slot])
            slot++;
        g->gens[slot]++;
        uint64_t token = ((uint64_t)g->gens[slot] << 32) | slot;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        set_keepalive(fd);
        struct mrd__conn *c;
        if (mrd__conn_open(g, fd, slot, token, peer, addr, &c) < 0) {
            close(fd);
            continue;
        }
        g->counters[MRD__CNT_ACCEPTED]++;
    }
}

/* Resumes connections that may go on after caps were released. */
static void resume_all(struct mrd_ingest *g)
{
    g->budget_freed = 0;
    for (uint32_t i = 0; i < g->cfg.max_connections; i++) {
        struct mrd__conn *c = g->conns[i];
        if (!c || c->state == MRD__CONN_CLOSING)
            continue;
        if (c->eof) { /* lingering after FIN until its acks are out */
            if (mrd__conn_linger_done(c))
                mrd__conn_close(g, c);
            continue;
        }
        if (mrd__ingest_paused(g, c)) {
            mrd__conn_update_interest(g, c);
            continue;
        }
        c->want_big = 0;
        if (c->rlen - c->rpos >= MRD_FRAME_HEADER_BYTES) {
            if (mrd__conn_process(g, c) < 0)
                continue;
        } else {
            mrd__conn_update_interest(g, c);
        }
    }
}

static void on_completions(struct mrd_ingest *g)
{
    struct mrd_store_item *it = mrd_store_take_completions(g->store);
    while (it) {
        struct mrd_store_item *next = it->next;
        g->queued -= it->cost;
        struct mrd__conn *c = it->token ? conn_by_token(g, it->token) : NULL;
        if (c)
            c->queued -= it->cost;
        if (it->status < 0)
            g->counters[MRD__CNT_STORAGE_ERRORS]++;
        if (c && c->state != MRD__CONN_CLOSING) {
            if (it->status < 0 && it->kind != MRD_STORE_COUNTER) {
                mrd__conn_reject(g, c, MRD__CNT_STORAGE_ERRORS, MRD_ERR_SQLITE,
                                 "storage error: %s not stored",
                                 it->kind == MRD_STORE_BATCH ? "batch" : "message");
            } else if (it->kind == MRD_STORE_HELLO) {
                Meridian__V1__HelloReply r = MERIDIAN__V1__HELLO_REPLY__INIT;
                r.accepted = 1;
                r.max_frame_bytes = g->cfg.max_frame;
                r.committed_seq = it->committed_seq;
                r.goodbye_acks = 1;
                mrd__conn_send(g, c, MRD_FRAME_HELLO_REPLY, &r.base);
            } else if (it->kind == MRD_STORE_BATCH) {
                Meridian__V1__Ack a = MERIDIAN__V1__ACK__INIT;
                a.seq = it->seq;
                a.duplicate = it->duplicate != 0;
                mrd__conn_send(g, c, MRD_FRAME_ACK, &a.base);
            } else if (it->kind == MRD_STORE_GOODBYE) {
                /* its counters and ranks.goodbye are committed: the agent may stop waiting
                 * (it resends the Goodbye on a new connection until this Ack comes) */
                Meridian__V1__Ack a = MERIDIAN__V1__ACK__INIT;
                a.goodbye = 1;
                mrd__conn_send(g, c, MRD_FRAME_ACK, &a.base);
            }
        }
        mrd_store_item_free(it);
        it = next;
    }
    if (g->global_paused && g->queued <= g->cfg.queue_cap / 4 * 3) {
        g->global_paused = 0;
        mrd__ingest_log(g, 1, "writer caught up (%zu bytes queued): resuming reads", g->queued);
    }
    resume_all(g);
}

/* The skew tracker's counts since the last flush, as aggregator_counters deltas. */
static void flush_skew_counters(struct mrd_ingest *g)
{
    struct mrd_skew_counters now;
    mrd_skew_get_counters(g->skew, &now);
    const struct {
        const char *name;
        uint64_t now, *flushed;
    } c[] = {
        {"skew_instances_completed", now.completed, &g->skew_flushed.completed},
        {"skew_instances_unaligned", now.unaligned, &g->skew_flushed.unaligned},
        {"skew_instances_evicted", now.evicted, &g->skew_flushed.evicted},
        {"skew_ops_ignored", now.ignored, &g->skew_flushed.ignored},
        {"skew_triggers", now.hits, &g->skew_flushed.hits},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        if (c[i].now == *c[i].flushed)
            continue;
        struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_COUNTER);
        if (!it)
            return; /* kept for the next tick */
        it->counter_name = c[i].name;
        it->counter_delta = (int64_t)(c[i].now - *c[i].flushed);
        it->cost = sizeof(*it);
        g->queued += it->cost;
        *c[i].flushed = c[i].now;
        mrd_store_submit(g->store, it);
    }
}

static void flush_counters(struct mrd_ingest *g)
{
    if (g->skew)
        flush_skew_counters(g);
    for (int i = 0; i < MRD__CNT__COUNT; i++) {
        if (!g->counters[i])
            continue;
        struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_COUNTER);
        if (!it)
            return; /* kept for the next tick */
        it->counter_name = counter_names[i];
        it->counter_delta = (int64_t)g->counters[i];
        it->cost = sizeof(*it);
        g->queued += it->cost;
        g->counters[i] = 0;
        mrd_store_submit(g->store, it);
    }
}

static void tick(struct mrd_ingest *g)
{
    int64_t now = mrd__ingest_mono_ms();
    log_window(g, now);
    for (uint32_t i = 0; i < g->cfg.max_connections; i++) {
        struct mrd__conn *c = g->conns[i];
        if (!c || now < c->deadline_ms)
            continue;
        if (c->state == MRD__CONN_HELLO)
            mrd__conn_reject(g, c, MRD__CNT_REJ_TIMEOUT, MRD_ERR_AUTH, "no Hello within %u ms",
                             g->cfg.hello_timeout_ms);
        else if (c->state == MRD__CONN_AUTH)
            mrd__conn_reject(g, c, MRD__CNT_REJ_TIMEOUT, MRD_ERR_AUTH,
                             "no Proof within %u ms of connecting", g->cfg.hello_timeout_ms);
        else if (c->state == MRD__CONN_CLOSING)
            mrd__conn_close(g, c);
    }
    if (g->accept_paused && !g->stopping)
        set_listen_interest(g, 1);
    mrd_winctl_tick(g->winctl, now);
    flush_counters(g);
}

static void dispatch(struct mrd_ingest *g, const struct epoll_event *ev)
{
    uint64_t tag = ev->data.u64;
    if (tag == EV_LISTEN) {
        on_accept(g);
        return;
    }
    if (tag == EV_STOP) {
        g->stopping = 1;
        return;
    }
    if (tag == EV_STORE) {
        on_completions(g);
        return;
    }
    if (tag == MRD__EV_CONTROL ||
        (tag >= MRD__EV_CTL_CLIENT && tag < MRD__EV_CTL_CLIENT + MRD_CONTROL_CLIENTS)) {
        mrd__control_on_event(g, tag);
        return;
    }
    struct mrd__conn *c = conn_by_token(g, tag);
    if (!c)
        return;
    if (ev->events & EPOLLOUT) {
        uint64_t token = c->token;
        mrd__conn_on_writable(g, c);
        if (!(c = conn_by_token(g, token)))
            return;
    }
    if (ev->events & EPOLLIN)
        mrd__conn_on_readable(g, c);
    else if (ev->events & (EPOLLHUP | EPOLLERR))
        mrd__conn_on_hangup(g, c);
}

static void shutdown_loop(struct mrd_ingest *g)
{
    mrd__control_close(g); /* no more window requests; the socket file goes */
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->lfd, NULL);
    close(g->lfd);
    g->lfd = -1;
    for (uint32_t i = 0; i < g->cfg.max_connections; i++)
        if (g->conns[i])
            mrd__conn_update_interest(g, g->conns[i]); /* stopping: no more reading */
    flush_counters(g);
    if (mrd_store_drain(g->store) < 0)
        mrd__ingest_log(g, 0, "shutdown: some batches could not be stored (not acknowledged)");
    on_completions(g);
    /* send the last acks, for at most 2 s */
    int64_t end = mrd__ingest_mono_ms() + 2000;
    for (;;) {
        int pending = 0;
        for (uint32_t i = 0; i < g->cfg.max_connections; i++)
            if (g->conns[i] && g->conns[i]->wpos < g->conns[i]->wlen)
                pending = 1;
        int64_t left = end - mrd__ingest_mono_ms();
        if (!pending || left <= 0)
            break;
        struct epoll_event evs[64];
        int n = epoll_wait(g->epfd, evs, 64, (int)left);
        for (int i = 0; i < n; i++) {
            struct mrd__conn *c = conn_by_token(g, evs[i].data.u64);
            if (c && (evs[i].events & EPOLLOUT))
                mrd__conn_on_writable(g, c);
            else if (c && (evs[i].events & (EPOLLHUP | EPOLLERR)))
                mrd__conn_close(g, c);
        }
    }
    for (uint32_t i = 0; i < g->cfg.max_connections; i++)
        if (g->conns[i])
            mrd__conn_close(g, g->conns[i]);
}

int mrd_ingest_run(struct mrd_ingest *g)
{
    int64_t next_tick = mrd__ingest_mono_ms() + 1000;
    while (!g->stopping) {
        int64_t wake = next_tick, ctl = mrd__control_deadline(g);
        if (ctl < wake)
            wake = ctl; /* a silent control client is answered on time */
        int64_t wait = wake - mrd__ingest_mono_ms();
        struct epoll_event evs[64];
        int n = epoll_wait(g->epfd, evs, 64, wait < 0 ? 0 : (int)wait);
        if (n < 0 && errno != EINTR) {
            int e = errno;
            mrd__ingest_log(g, 0, "epoll_wait: %s", mrd_strerror(-e));
            return -e;
        }
        for (int i = 0; i < n; i++)
            dispatch(g, &evs[i]);
        if (g->budget_freed)
            resume_all(g);
        mrd__control_expire(g, mrd__ingest_mono_ms());
        if (mrd__ingest_mono_ms() >= next_tick) {
            tick(g);
            next_tick = mrd__ingest_mono_ms() + 1000;
        }
    }
    shutdown_loop(g);
    return 0;
}

void mrd_ingest_stop(struct mrd_ingest *g)
{
    uint64_t one = 1;
    ssize_t w = write(g->stop_efd, &one, sizeof(one));
    (void)w;
}

uint16_t mrd_ingest_port(const struct mrd_ingest *g)
{
    return g->port;
}

static int listen_on(struct mrd_ingest *g)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM},
                    *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", g->cfg.port);
    int rc = getaddrinfo(g->cfg.host, port, &hints, &ai);
    if (rc != 0) {
        mrd__ingest_log(g, 0, "cannot listen on '%s': not a numeric address (%s)", g->cfg.host,
                        gai_strerror(rc));
        return -EINVAL;
    }
    g->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->lfd < 0) {
        rc = -errno;
        goto fail;
    }
    int one = 1;
    setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (g->cfg.sock_rcvbuf > 0) /* set before listen: inherited, and sizes the TCP window */
        setsockopt(g->lfd, SOL_SOCKET, SO_RCVBUF, &g->cfg.sock_rcvbuf, sizeof(int));
    if (bind(g->lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(g->lfd, 1024) < 0) {
        rc = -errno;
        goto fail;
    }
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof(ss);
    if (getsockname(g->lfd, (struct sockaddr *)&ss, &sl) < 0) {
        rc = -errno;
        goto fail;
    }
    g->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    freeaddrinfo(ai);
    return 0;
fail:
    mrd__ingest_log(g, 0, "cannot listen on %s:%u: %s", g->cfg.host, g->cfg.port, mrd_strerror(rc));
    freeaddrinfo(ai);
    return rc;
}

/* Window control's lines: always shown (a window is rare and the user wants to see it). */
static void winctl_log(void *ctx, const char *line)
{
    mrd__ingest_log(ctx, 0, "%s", line);
}

static int add_fd(struct mrd_ingest *g, int fd, uint64_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
    return epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void mrd_ingest_free(struct mrd_ingest *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; g->conns && i < g->cfg.max_connections; i++)
        if (g->conns[i])
            mrd__conn_close(g, g->conns[i]);
    mrd__control_close(g);
    free((char *)g->cfg.control_path);
    mrd_winctl_free(g->winctl);
    mrd_skew_free(g->skew);
    if (g->lfd >= 0)
        close(g->lfd);
    if (g->stop_efd >= 0)
        close(g->stop_efd);
    if (g->epfd >= 0)
        close(g->epfd);
    if (g->secret) {
        explicit_bzero(g->secret, g->cfg.secret_len);
        free(g->secret);
    }
    free(g->conns);
    free(g->gens);
    free(g);
}

int mrd_ingest_new(const struct mrd_ingest_config *cfg, struct mrd_store *store,
                   struct mrd_ingest **out)
{
    int rc;
    *out = NULL;
    if (!cfg || !store || !cfg->secret || cfg->secret_len == 0)
        return -EINVAL;
    struct mrd_ingest *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->cfg = *cfg;
    g->cfg.control_path = NULL; /* our copy, below */
    g->store = store;
    g->epfd = g->lfd = g->stop_efd = g->ctl_fd = -1;
    for (int i = 0; i < MRD_CONTROL_CLIENTS; i++)
        g->ctl[i].fd = -1;
    if (!g->cfg.host)
        g->cfg.host = "127.0.0.1";
    if (!g->cfg.max_frame)
        g->cfg.max_frame = MRD_FRAME_DEFAULT_MAX;
    if (g->cfg.max_frame < MRD_FRAME_MIN_MAX)
        g->cfg.max_frame = MRD_FRAME_MIN_MAX;
    if (!g->cfg.max_connections)
        g->cfg.max_connections = 1024;
    if (!g->cfg.max_prehello)
        g->cfg.max_prehello = 128;
    if (g->cfg.max_prehello > g->cfg.max_connections)
        g->cfg.max_prehello = g->cfg.max_connections;
    if (!g->cfg.max_prehello_per_addr)
        g->cfg.max_prehello_per_addr = 64;
    if (!g->cfg.queue_cap)
        g->cfg.queue_cap = 256u << 20;
    if (!g->cfg.conn_queue_cap) {
        g->cfg.conn_queue_cap = 4 * (size_t)g->cfg.max_frame;
        if (g->cfg.conn_queue_cap < (16u << 20))
            g->cfg.conn_queue_cap = 16u << 20;
    }
    if (!g->cfg.rbuf_budget)
        g->cfg.rbuf_budget = 256u << 20;
    if (g->cfg.rbuf_budget < (size_t)g->cfg.max_frame + MRD_FRAME_HEADER_BYTES)
        g->cfg.rbuf_budget = (size_t)g->cfg.max_frame + MRD_FRAME_HEADER_BYTES; /* one fits */
    if (!g->cfg.wbuf_cap)
        g->cfg.wbuf_cap = 1u << 20;
    if (!g->cfg.sock_rcvbuf)
        g->cfg.sock_rcvbuf = 1 << 20;
    if (!g->cfg.hello_timeout_ms)
        g->cfg.hello_timeout_ms = 10000;
    g->secret = malloc(cfg->secret_len);
    g->conns = calloc(g->cfg.max_connections, sizeof(*g->conns));
    g->gens = calloc(g->cfg.max_connections, sizeof(*g->gens));
    if (!g->secret || !g->conns || !g->gens ||
        (cfg->control_path && !(g->cfg.control_path = strdup(cfg->control_path)))) {
        rc = -ENOMEM;
        goto fail;
    }
    struct mrd_winctl_config wc = cfg->windows;
    wc.max_ranks = g->cfg.max_connections; /* a rank reports over one of them */
    wc.log = winctl_log;
    wc.log_ctx = g;
    if ((rc = mrd_winctl_new(&wc, &g->winctl)) < 0) {
        mrd__ingest_log(g, 0, "invalid window control settings");
        goto fail;
    }
    if (cfg->trigger_skew != 0) {
        struct mrd_skew_config sc = {.factor = cfg->trigger_skew,
                                     .max_ranks = g->cfg.max_connections};
        if ((rc = mrd_skew_new(&sc, &g->skew)) < 0) {
            mrd__ingest_log(g, 0, "invalid collective skew trigger settings");
            goto fail;
        }
    }
    memcpy(g->secret, cfg->secret, cfg->secret_len);
    g->cfg.secret = g->secret;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g->epfd < 0 || g->stop_efd < 0) {
        rc = -errno;
        goto fail;
    }
    if ((rc = listen_on(g)) < 0)
        goto fail;
    if ((rc = add_fd(g, g->lfd, EV_LISTEN)) < 0 || (rc = add_fd(g, g->stop_efd, EV_STOP)) < 0 ||
        (rc = add_fd(g, mrd_store_notify_fd(store), EV_STORE)) < 0 ||
        (rc = mrd__control_open(g)) < 0)
        goto fail;
    *out = g;
    return 0;
fail:
    mrd_ingest_free(g);
    return rc;
}
