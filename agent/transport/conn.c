/* One agent -> meridiand TCP connection: non-blocking connect, control-frame output buffer,
 * raw batch writes, and an input buffer that yields decoded frames. See conn.h.
 *
 * Workload: two connections per rank (data, clock), a reconnect every few seconds at most
 * (backoff is the flusher's business), a few hundred frames per second each way. Opening
 * takes resolved addresses (resolve.h): nothing here waits for DNS.
 */
#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "clock.h"

void mrd_conn_init(struct mrd_conn *c)
{
    c->fd = -1;
    atomic_store(&c->fd_mirror, -1);
    c->state = MRD_CONN_CLOSED;
    c->in_len = c->out_len = c->out_off = 0;
    c->bytes_written = 0;
}

void mrd_conn_close(struct mrd_conn *c)
{
    atomic_store(&c->fd_mirror, -1);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = MRD_CONN_CLOSED;
    c->state_since_ns = mrd__mono_ns();
    c->in_len = c->out_len = c->out_off = 0;
}

/* Tries one address: 0 with c->fd set (connecting or connected), or -errno. */
static int try_connect(struct mrd_conn *c, const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, sa, len) != 0 && errno != EINPROGRESS) {
        int e = -errno;
        close(fd);
        return e;
    }
    c->fd = fd;
    atomic_store(&c->fd_mirror, fd);
    return 0;
}

int mrd_conn_open(struct mrd_conn *c, const struct mrd_addrs *a, const char **why)
{
    int err = -EHOSTUNREACH;

    mrd_conn_close(c);
    /* in the resolver's order (IPv4 first); no name resolution here, ever (resolve.h) */
    for (unsigned i = 0; i < a->n && c->fd < 0; i++)
        err = try_connect(c, (const struct sockaddr *)&a->a[i].sa, a->a[i].len);
    if (c->fd < 0) {
        *why = a->n ? mrd_strerror(err) : "no address";
        return err;
    }
    c->state = MRD_CONN_CONNECTING;
    c->state_since_ns = mrd__mono_ns();
    return 0;
}

int mrd_conn_finish_connect(struct mrd_conn *c)
{
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        soerr = errno;
    if (soerr == EINPROGRESS || soerr == EALREADY)
        return -EAGAIN;
    if (soerr != 0) {
        mrd_conn_close(c);
        return -soerr;
    }
    return 0;
}

int mrd_conn_queue(struct mrd_conn *c, enum mrd_frame_type type, const ProtobufCMessage *msg)
{
    size_t len = mrd_frame_encoded_size(msg);
    if (len > MRD_CONN_OUT_CAP)
        return -MRD_ERR_TOO_LARGE;
    if (c->out_off > 0 && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (len > sizeof c->out - c->out_len && c->out_off > 0) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    /* straight into the output buffer: -ENOBUFS when it has no room */
    int e = mrd_frame_encode_into(type, MRD_PROTOCOL_VERSION, msg, c->out + c->out_len,
                                  sizeof c->out - c->out_len, &len);
    if (e != 0)
        return e;
    c->out_len += len;
    return 0;
}

ssize_t mrd_conn_write(struct mrd_conn *c, const uint8_t *buf, size_t len)
{
    if (c->fd < 0)
        return -ENOTCONN;
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno == EINTR)
            return 0;
        return -errno;
    }
    c->bytes_written += (uint64_t)n;
    return n;
}

int mrd_conn_flush(struct mrd_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = mrd_conn_write(c, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0)
            return (int)n;
        if (n == 0)
            return -EAGAIN;
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

int mrd_conn_read(struct mrd_conn *c)
{
    if (c->fd < 0)
        return -ENOTCONN;
    while (c->in_len < sizeof c->in) {
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            continue;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -errno;
    }
    return 0; /* buffer full: the caller takes frames out, then reads again */
}

ssize_t mrd_conn_read_once(struct mrd_conn *c)
{
    if (c->fd < 0)
        return -ENOTCONN;
    if (c->in_len == sizeof c->in)
        return 0;
    ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
    if (n > 0) {
        c->in_len += (size_t)n;
        return n;
    }
    if (n == 0)
        return -ECONNRESET;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return -errno;
}

int mrd_conn_next_frame(struct mrd_conn *c, int *type, ProtobufCMessage **msg)
{
    struct mrd_frame_header h;
    int e = mrd_frame_header_parse(c->in, c->in_len, MRD_CONN_IN_CAP, &h);
    if (e == -EAGAIN)
        return 0;
    if (e != 0)
        return e;
    size_t total = MRD_FRAME_HEADER_BYTES + (size_t)h.length;
    if (c->in_len < total)
        return 0;
    e = mrd_frame_decode(&h, c->in + MRD_FRAME_HEADER_BYTES, MRD_CONN_IN_CAP, msg);
    if (e != 0)
        return e;
    *type = h.type;
    memmove(c->in, c->in + total, c->in_len - total);
    c->in_len -= total;
    return 1;
}
