/* meridian ingest, the control socket (control.h has the protocol and its limits).
 *
 * Where it sits: in the ingest loop, beside the agents' listener. A client's line is read
 * into a fixed buffer, parsed here and handed to window control (winctl.h), whose choice
 * (or refusal) goes back as one line; the connection is then closed. Every socket is
 * non-blocking; the loop wakes for the earliest client deadline (mrd__control_deadline).
 *
 * Workload: a person or a script asking for a window now and then; at most
 * MRD_CONTROL_CLIENTS clients of MRD_CONTROL_LINE_MAX bytes each at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "ingest_internal.h"
#include "steps.h"
#include "winctl.h"

int mrd_control_sockaddr(const char *path, struct sockaddr_un *sa, socklen_t *len, int *dirfd)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    *dirfd = -1;
    size_t n = strlen(path);
    if (n > 0 && n < sizeof(sa->sun_path)) {
        memcpy(sa->sun_path, path, n);
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
        return 0;
    }
    /* too long for sun_path: name the directory through a descriptor */
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!*name || strlen(name) + 32 >= sizeof(sa->sun_path))
        return -ENAMETOOLONG;
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else
        return -ENAMETOOLONG;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int w = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", fd, name);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)w + 1);
    *dirfd = fd;
    return 0;
}

/* ---- the listener ---- */

/* What is at path now: 0 nothing (or a stale socket, removed), else a negative errno with
 * why[] set. */
static int clear_path(const char *path, char *why, size_t n)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        int e = -errno;
        if (e == -ENOENT)
            return 0;
        snprintf(why, n, "%s", mrd_strerror(e));
        return e;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(why, n, "it exists and is not a socket (not removed)");
        return -EEXIST;
    }
    struct sockaddr_un sa;
    socklen_t len;
    int dirfd, rc = mrd_control_sockaddr(path, &sa, &len, &dirfd);
    if (rc < 0) {
        snprintf(why, n, "%s", mrd_strerror(rc));
        return rc;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) == 0;
    if (fd >= 0)
        close(fd);
    if (dirfd >= 0)
        close(dirfd);
    if (live) {
        snprintf(why, n, "another process (a meridiand still running?) listens on it");
        return -EADDRINUSE;
    }
    unlink(path); /* left by a meridiand that was killed */
    return 0;
}

int mrd__control_open(struct mrd_ingest *g)
{
    const char *path = g->cfg.control_path;
    char why[160] = "";
    struct sockaddr_un sa;
    socklen_t len;
    int dirfd = -1, rc;
    if (!path)
        return 0;
    if ((rc = clear_path(path, why, sizeof(why))) < 0)
        goto fail;
    if ((rc = mrd_control_sockaddr(path, &sa, &len, &dirfd)) < 0) {
        snprintf(why, sizeof(why), "%s", mrd_strerror(rc));
        goto fail;
    }
    g->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->ctl_fd < 0 || bind(g->ctl_fd, (struct sockaddr *)&sa, len) < 0) {
        rc = -errno;
        snprintf(why, sizeof(why), "%s", mrd_strerror(-errno));
        goto fail;
    }
    struct stat st;
    /* 0600 right after bind; peers of another uid are refused anyway (SO_PEERCRED) */
    if (chmod(path, 0600) < 0 || stat(path, &st) < 0 || listen(g->ctl_fd, 16) < 0) {
        rc = -errno;
        snprintf(why, sizeof(why), "%s", mrd_strerror(-errno));
        unlink(path);
        goto fail;
    }
    g->ctl_dev = st.st_dev;
    g->ctl_ino = st.st_ino;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = MRD__EV_CONTROL};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->ctl_fd, &ev) < 0) {
        rc = -errno;
        snprintf(why, sizeof(why), "epoll: %s", mrd_strerror(-errno));
        unlink(path);
        goto fail;
    }
    if (dirfd >= 0)
        close(dirfd);
    mrd__ingest_log(g, 1, "control socket %s: `meridian window` asks for windows there", path);
    return 0;
fail:
    mrd__ingest_log(g, 0, "cannot use the control socket %s: %s", path, why);
    if (g->ctl_fd >= 0)
        close(g->ctl_fd);
    g->ctl_fd = -1;
    if (dirfd >= 0)
        close(dirfd);
    return rc < 0 ? rc : -EINVAL;
}

/* ---- clients ---- */

static void client_close(struct mrd_ingest *g, struct mrd__ctl_client *k)
{
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, k->fd, NULL);
    close(k->fd);
    k->fd = -1;
    k->len = 0;
}

/* Sends one line (fd non-blocking; a line this short fits an empty socket buffer). */
static void reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(int fd, const char *fmt, ...)
{
    char line[MRD_CONTROL_LINE_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
}

/* "window [LENGTH]": answers k and returns. */
static void serve_line(struct mrd_ingest *g, struct mrd__ctl_client *k, char *line)
{
    char why[256], shown[64];
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
        line[--n] = '\0';
    char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    unsigned long long length = MRD_CONTROL_DEFAULT_LENGTH;
    int bad = strncmp(p, "window", 6) != 0 || (p[6] && p[6] != ' ' && p[6] != '\t');
    if (!bad) {
        p += 6;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p) {
            char *end;
            errno = 0;
            length = strtoull(p, &end, 10);
            bad = *p < '0' || *p > '9' || *end || errno;
        }
    }
    if (bad) {
        size_t i;
        for (i = 0; line[i] && i < sizeof(shown) - 1; i++) /* printable, for the log */
            shown[i] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
        shown[i] = '\0';
        mrd__ingest_log(g, -1, "control: bad request \"%s\"", shown);
        reply(k->fd, "error bad request \"%s\": the request is \"window [LENGTH]\"", shown);
        return;
    }
    struct mrd_winctl_choice ch;
    int rc = mrd_winctl_open(g->winctl, MRD_WINDOW_ON_DEMAND, length, "asked by meridian window",
                             mrd__ingest_mono_ms(), &ch, why, sizeof(why));
    if (rc < 0) {
        mrd__ingest_log(g, 0, "control: window of %llu steps refused: %s", length, why);
        reply(k->fd, "error %s", why);
        return;
    }
    reply(k->fd, "ok id=%llu steps=%llu-%llu margin=%llu ranks=%u", (unsigned long long)ch.req.id,
          (unsigned long long)ch.req.first, (unsigned long long)ch.req.last,
          (unsigned long long)ch.margin, ch.ranks);
}

static void on_client(struct mrd_ingest *g, struct mrd__ctl_client *k)
{
    /* one byte more than a line may hold, to tell "too long" */
    ssize_t r = recv(k->fd, k->buf + k->len, MRD_CONTROL_LINE_MAX + 1 - k->len, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (r <= 0) {
        if (r == 0 && k->len)
            reply(k->fd, "error the request ended without a newline");
        client_close(g, k);
        return;
    }
    k->len += (size_t)r;
    char *nl = memchr(k->buf, '\n', k->len);
    if (nl && (size_t)(nl - k->buf) < MRD_CONTROL_LINE_MAX) {
        *nl = '\0';
        if (memchr(k->buf, '\0', (size_t)(nl - k->buf))) {
            mrd__ingest_log(g, -1, "control: a request with a NUL byte");
            reply(k->fd, "error bad request: a NUL byte");
        } else {
            serve_line(g, k, k->buf);
        }
        client_close(g, k);
    } else if (k->len >= MRD_CONTROL_LINE_MAX) {
        mrd__ingest_log(g, -1, "control: a request longer than %d bytes", MRD_CONTROL_LINE_MAX);
        reply(k->fd, "error the request is longer than %d bytes", MRD_CONTROL_LINE_MAX);
        client_close(g, k);
    }
}

static void on_accept(struct mrd_ingest *g)
{
    for (int i = 0; i < 16; i++) {
        int fd = accept4(g->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
            (cred.uid != geteuid() && cred.uid != 0)) {
            mrd__ingest_log(g, -1, "control: refused a client of another user");
            reply(fd, "error permission denied: not meridiand's user");
            close(fd);
            continue;
        }
        struct mrd__ctl_client *k = NULL;
        for (int s = 0; s < MRD_CONTROL_CLIENTS && !k; s++)
            if (g->ctl[s].fd < 0)
                k = &g->ctl[s];
        if (!k) {
            mrd__ingest_log(g, -1, "control: refused a client: %d already connected",
                            MRD_CONTROL_CLIENTS);
            reply(fd, "error busy: %d control clients are connected already, try again",
                  MRD_CONTROL_CLIENTS);
            close(fd);
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN,
                                 .data.u64 = MRD__EV_CTL_CLIENT + (uint64_t)(k - g->ctl)};
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            continue;
        }
        k->fd = fd;
        k->len = 0;
        k->deadline_ms = mrd__ingest_mono_ms() + MRD_CONTROL_IDLE_MS;
    }
}

void mrd__control_on_event(struct mrd_ingest *g, uint64_t tag)
{
    if (tag == MRD__EV_CONTROL) {
        if (g->ctl_fd >= 0)
            on_accept(g);
        return;
    }
    uint64_t s = tag - MRD__EV_CTL_CLIENT;
    if (s < MRD_CONTROL_CLIENTS && g->ctl[s].fd >= 0)
        on_client(g, &g->ctl[s]);
}

int64_t mrd__control_deadline(const struct mrd_ingest *g)
{
    int64_t d = INT64_MAX;
    for (int i = 0; i < MRD_CONTROL_CLIENTS; i++)
        if (g->ctl[i].fd >= 0 && g->ctl[i].deadline_ms < d)
            d = g->ctl[i].deadline_ms;
    return d;
}

void mrd__control_expire(struct mrd_ingest *g, int64_t now)
{
    for (int i = 0; i < MRD_CONTROL_CLIENTS; i++) {
        struct mrd__ctl_client *k = &g->ctl[i];
        if (k->fd < 0 || now < k->deadline_ms)
            continue;
        mrd__ingest_log(g, -1, "control: a client sent no request within %d ms",
                        MRD_CONTROL_IDLE_MS);
        reply(k->fd, "error no request line within %d ms", MRD_CONTROL_IDLE_MS);
        client_close(g, k);
    }
}

void mrd__control_close(struct mrd_ingest *g)
{
    for (int i = 0; i < MRD_CONTROL_CLIENTS; i++)
        if (g->ctl[i].fd >= 0)
            client_close(g, &g->ctl[i]);
    if (g->ctl_fd < 0)
        return;
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->ctl_fd, NULL);
    close(g->ctl_fd);
    g->ctl_fd = -1;
    struct stat st; /* remove it only if it is still ours (not a later meridiand's) */
    if (stat(g->cfg.control_path, &st) == 0 && st.st_dev == g->ctl_dev && st.st_ino == g->ctl_ino)
        unlink(g->cfg.control_path);
}
