/* clock_relay: a TCP relay that holds each direction's bytes for a chosen time.
 *
 * Where it sits: the clock test bed (tests/clock/testbed.py) puts it between the agents
 * (in their own network namespaces) and meridiand, because this kernel has no netem: it
 * is the "network" whose delay, jitter and asymmetry the clock alignment must cope with.
 * Every chunk read from one side is released to the other side at
 *   max(previous release of that direction, arrival + delay + U(-jitter, +jitter) [+ asym])
 * so byte order is kept (it is TCP) and, for sparse messages such as clock probes, each
 * direction's delay is independent and uniform. asym (may be negative) is added to the
 * agent -> aggregator direction only (or, negative, to the other one).
 *
 * Workload: tens of connections, a few MB/s; one thread, epoll plus one timerfd (ns
 * resolution). Cap: MAX_QUEUED bytes held per direction; at the cap the relay stops
 * reading that side (TCP pushes back on the sender), it never drops bytes.
 *
 * usage: clock_relay --listen ADDR:PORT [--listen ...] --upstream ADDR:PORT
 *                    [--delay-us D] [--jitter-us J] [--asym-us A] [--seed N]
 * Prints "clock_relay: ready" on stdout once listening; runs until SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTEN 64
#define MAX_PAIRS  256
#define CHUNK      65536
#define MAX_QUEUED (8u << 20)

struct chunk {
    struct chunk *next;
    int64_t release;
    size_t len, off;
    char data[];
};

struct dir {
    int src, dst; /* fds */
    struct chunk *head, *tail;
    size_t queued;
    int64_t last_release;
    int eof, shut, reading, want_out;
    int64_t extra_ns; /* asymmetry of this direction */
};

struct pair {
    int used, connected;
    int cfd, ufd;
    uint32_t cmask, umask; /* epoll interest currently registered */
    struct dir d[2];       /* 0: client -> upstream, 1: upstream -> client */
};

static struct pair g_pairs[MAX_PAIRS];
static int g_ep, g_tfd;
static int64_t g_delay, g_jitter;
static uint64_t g_rng = 88172645463325252ULL;
static volatile sig_atomic_t g_stop;
static struct sockaddr_in g_up;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double unif(void) /* [0, 1) */
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *c = strrchr(s, ':');
    if (!c || (size_t)(c - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(c - s));
    host[c - s] = 0;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)atoi(c + 1));
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* epoll data: fd in the low 32 bits, pair index + 1 in the high bits (0: listener). */
static void watch(int fd, int pi, uint32_t ev, int op)
{
    struct epoll_event e = {.events = ev, .data.u64 = ((uint64_t)(pi + 1) << 32) | (uint32_t)fd};
    epoll_ctl(g_ep, op, fd, &e);
}

static void update_events(struct pair *p, int fd)
{
    uint32_t ev = 0;
    for (int k = 0; k < 2; k++) {
        struct dir *d = &p->d[k];
        if (d->src == fd && !d->eof && d->queued < MAX_QUEUED)
            ev |= EPOLLIN;
        if (d->dst == fd && (d->want_out || (fd == p->ufd && !p->connected)))
            ev |= EPOLLOUT;
    }
    uint32_t *cur = fd == p->cfd ? &p->cmask : &p->umask;
    if (ev != *cur) {
        watch(fd, (int)(p - g_pairs), ev, EPOLL_CTL_MOD);
        *cur = ev;
    }
}

static void close_pair(struct pair *p)
{
    for (int k = 0; k < 2; k++) {
        struct chunk *c = p->d[k].head;
        while (c) {
            struct chunk *n = c->next;
            free(c);
            c = n;
        }
    }
    close(p->cfd);
    close(p->ufd);
    memset(p, 0, sizeof *p);
}

/* Writes what is due in direction d. Returns -1 when the pair must close. */
static int flush_dir(struct pair *p, struct dir *d, int64_t now)
{
    if (!p->connected)
        return 0;
    d->want_out = 0;
    while (d->head && d->head->release <= now) {
        struct chunk *c = d->head;
        ssize_t w = write(d->dst, c->data + c->off, c->len - c->off);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                d->want_out = 1;
                break;
            }
            return -1;
        }
        c->off += (size_t)w;
        d->queued -= (size_t)w;
        if (c->off < c->len) {
            d->want_out = 1;
            break;
        }
        d->head = c->next;
        if (!d->head)
            d->tail = NULL;
        free(c);
    }
    if (!d->head && d->eof && !d->shut) {
        shutdown(d->dst, SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

static int read_dir(struct pair *p, struct dir *d, int64_t now)
{
    while (d->queued < MAX_QUEUED) {
        struct chunk *c = malloc(sizeof *c + CHUNK);
        if (!c)
            return -1;
        ssize_t r = read(d->src, c->data, CHUNK);
        if (r <= 0) {
            free(c);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
            if (r < 0)
                return -1;
            d->eof = 1;
            return flush_dir(p, d, now);
        }
        double j = g_jitter ? (2 * unif() - 1) * (double)g_jitter : 0;
        int64_t rel = now + g_delay + d->extra_ns + (int64_t)j;
        if (rel < d->last_release)
            rel = d->last_release;
        d->last_release = rel;
        c->release = rel, c->len = (size_t)r, c->off = 0, c->next = NULL;
        if (d->tail)
            d->tail->next = c;
        else
            d->head = c;
        d->tail = c;
        d->queued += (size_t)r;
        if (flush_dir(p, d, now))
            return -1;
    }
    return 0;
}

static void accept_one(int lfd, int64_t asym)
{
    int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0)
        return;
    int pi = 0;
    while (pi < MAX_PAIRS && g_pairs[pi].used)
        pi++;
    int ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (pi == MAX_PAIRS || ufd < 0) {
        close(cfd);
        if (ufd >= 0)
            close(ufd);
        return;
    }
    int one = 1;
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(ufd, (struct sockaddr *)&g_up, sizeof g_up) < 0 && errno != EINPROGRESS) {
        close(cfd);
        close(ufd);
        return;
    }
    struct pair *p = &g_pairs[pi];
    memset(p, 0, sizeof *p);
    p->used = 1, p->cfd = cfd, p->ufd = ufd;
    p->d[0] = (struct dir){.src = cfd, .dst = ufd, .extra_ns = asym > 0 ? asym : 0};
    p->d[1] = (struct dir){.src = ufd, .dst = cfd, .extra_ns = asym < 0 ? -asym : 0};
    watch(cfd, pi, EPOLLIN, EPOLL_CTL_ADD);
    watch(ufd, pi, EPOLLOUT, EPOLL_CTL_ADD);
    p->cmask = EPOLLIN, p->umask = EPOLLOUT;
}

static void arm_timer(void)
{
    int64_t next = INT64_MAX;
    for (int i = 0; i < MAX_PAIRS; i++)
        for (int k = 0; g_pairs[i].used && k < 2; k++)
            if (g_pairs[i].d[k].head && !g_pairs[i].d[k].want_out &&
                g_pairs[i].d[k].head->release < next)
                next = g_pairs[i].d[k].head->release;
    struct itimerspec its = {0};
    if (next != INT64_MAX) {
        its.it_value.tv_sec = next / 1000000000;
        its.it_value.tv_nsec = next % 1000000000;
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1;
    }
    timerfd_settime(g_tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

int main(int argc, char **argv)
{
    int lfds[MAX_LISTEN], nl = 0;
    int64_t asym = 0;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    g_ep = epoll_create1(EPOLL_CLOEXEC);
    g_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int have_up = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        struct sockaddr_in sa;
        if (!v)
            goto usage;
        i++;
        if (!strcmp(a, "--listen") && nl < MAX_LISTEN && parse_addr(v, &sa) == 0) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
                fprintf(stderr, "clock_relay: cannot listen on %s: %s\n", v, strerror(errno));
                return 1;
            }
            lfds[nl++] = fd;
        } else if (!strcmp(a, "--upstream") && parse_addr(v, &g_up) == 0) {
            have_up = 1;
        } else if (!strcmp(a, "--delay-us")) {
            g_delay = (int64_t)(atof(v) * 1000);
        } else if (!strcmp(a, "--jitter-us")) {
            g_jitter = (int64_t)(atof(v) * 1000);
        } else if (!strcmp(a, "--asym-us")) {
            asym = (int64_t)(atof(v) * 1000);
        } else if (!strcmp(a, "--seed")) {
            g_rng = strtoull(v, NULL, 10) * 2654435761ULL + 1;
        } else {
            goto usage;
        }
    }
    if (!nl || !have_up || g_jitter > g_delay)
        goto usage;
    for (int i = 0; i < nl; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint32_t)lfds[i]};
        epoll_ctl(g_ep, EPOLL_CTL_ADD, lfds[i], &e);
    }
    struct epoll_event te = {.events = EPOLLIN, .data.u64 = (uint32_t)g_tfd};
    epoll_ctl(g_ep, EPOLL_CTL_ADD, g_tfd, &te);
    printf("clock_relay: ready\n");
    fflush(stdout);
    while (!g_stop) {
        struct epoll_event ev[64];
        int n = epoll_wait(g_ep, ev, 64, 1000);
        int64_t now = now_ns();
        for (int i = 0; i < n; i++) {
            int fd = (int)(uint32_t)ev[i].data.u64, pi = (int)(ev[i].data.u64 >> 32) - 1;
            if (fd == g_tfd) {
                uint64_t x;
                (void)!read(g_tfd, &x, sizeof x);
                continue;
            }
            if (pi < 0) {
                accept_one(fd, asym);
                continue;
            }
            struct pair *p = &g_pairs[pi];
            if (!p->used)
                continue;
            if (fd == p->ufd && !p->connected && (ev[i].events & (EPOLLOUT | EPOLLERR))) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    close_pair(p);
                    continue;
                }
                p->connected = 1;
            }
            int bad = 0;
            for (int k = 0; k < 2 && !bad; k++) {
                struct dir *d = &p->d[k];
                if (d->src == fd && (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                    bad = read_dir(p, d, now);
                if (!bad && d->dst == fd && (ev[i].events & EPOLLOUT))
                    bad = flush_dir(p, d, now);
            }
            if (bad || (p->d[0].shut && p->d[1].shut)) {
                close_pair(p);
                continue;
            }
            update_events(p, p->cfd);
            update_events(p, p->ufd);
        }
        now = now_ns();
        for (int i = 0; i < MAX_PAIRS; i++) { /* release what is due */
            struct pair *p = &g_pairs[i];
            if (!p->used)
                continue;
            if (flush_dir(p, &p->d[0], now) || flush_dir(p, &p->d[1], now) ||
                (p->d[0].shut && p->d[1].shut)) {
                close_pair(p);
                continue;
            }
            update_events(p, p->cfd);
            update_events(p, p->ufd);
        }
        arm_timer();
    }
    return 0;
usage:
    fprintf(stderr, "usage: clock_relay --listen ADDR:PORT [--listen ...] --upstream ADDR:PORT\n"
                    "       [--delay-us D] [--jitter-us J <= D] [--asym-us A] [--seed N]\n");
    return 2;
}
