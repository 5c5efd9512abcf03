/* meridian error strings and stable names for event kinds and drop reasons.
 *
 * Every component reports errors as 0 / negative errno / -MRD_ERR_*; this file turns
 * them into text for logs (mrd_strerror) and gives the lower-case names that the
 * database and reports use for event kinds and drop reasons. Called wherever an error
 * is logged (cold paths only); all tables are static and read-only, so every function
 * here is thread-safe and allocation-free.
 */
#include <errno.h>
#include <stddef.h>

#include "error.h"
#include "events.h"
#include "meridian.pb-c.h"

/* meridian's one error-text function, used instead of strerror() everywhere: strerror is
 * not guaranteed thread-safe, and one function keeps every message alike. The table holds
 * the codes meridian produces or sees from sockets, files, processes and allocation;
 * anything else prints as "unknown error". */
static const char *const errno_text[] = {
    [EPERM] = "operation not permitted",
    [ENOENT] = "no such file or directory",
    [ESRCH] = "no such process",
    [EINTR] = "interrupted system call",
    [EIO] = "input/output error",
    [ENXIO] = "no such device or address",
    [E2BIG] = "argument list too long",
    [EBADF] = "bad file descriptor",
    [ECHILD] = "no child processes",
    [EAGAIN] = "resource temporarily unavailable (try again)",
    [ENOMEM] = "out of memory",
    [EACCES] = "permission denied",
    [EFAULT] = "bad address",
    [EBUSY] = "device or resource busy",
    [EEXIST] = "file exists",
    [ENODEV] = "no such device",
    [ENOTDIR] = "not a directory",
    [EISDIR] = "is a directory",
    [EINVAL] = "invalid argument",
    [ENFILE] = "too many open files in system",
    [EMFILE] = "too many open files",
    [EFBIG] = "file too large",
    [ENOSPC] = "no space left on device",
    [ESPIPE] = "illegal seek",
    [EROFS] = "read-only file system",
    [EPIPE] = "broken pipe",
    [ERANGE] = "result out of range",
    [EDEADLK] = "resource deadlock avoided",
    [ENAMETOOLONG] = "file name too long",
    [ENOSYS] = "function not implemented",
    [ENOTSUP] = "operation not supported",
    [EOVERFLOW] = "value too large for defined data type",
    [EPROTO] = "protocol error",
    [EMSGSIZE] = "message too long",
    [EADDRINUSE] = "address already in use",
    [EADDRNOTAVAIL] = "cannot assign requested address",
    [ENETDOWN] = "network is down",
    [ENETUNREACH] = "network is unreachable",
    [ECONNABORTED] = "software caused connection abort",
    [ECONNRESET] = "connection reset by peer",
    [ENOBUFS] = "no buffer space available",
    [EISCONN] = "transport endpoint is already connected",
    [ENOTCONN] = "transport endpoint is not connected",
    [ETIMEDOUT] = "connection timed out",
    [ECONNREFUSED] = "connection refused",
    [EHOSTUNREACH] = "no route to host",
    [EALREADY] = "operation already in progress",
    [EINPROGRESS] = "operation now in progress",
    [ECANCELED] = "operation canceled",
    [ENOTSOCK] = "socket operation on non-socket",
    [EAFNOSUPPORT] = "address family not supported by protocol",
    [EPROTONOSUPPORT] = "protocol not supported",
    [ELOOP] = "too many levels of symbolic links",
    [ENOTEMPTY] = "directory not empty",
    [EDQUOT] = "disk quota exceeded",
    [ETXTBSY] = "text file busy",
    [ENOEXEC] = "exec format error",
};

static const char *const mrd_err_text[] = {
    [MRD_ERR_VERSION - MRD__ERR_BASE] = "peer speaks another protocol version",
    [MRD_ERR_AUTH - MRD__ERR_BASE] = "missing or wrong run secret",
    [MRD_ERR_MALFORMED - MRD__ERR_BASE] = "malformed frame or message",
    [MRD_ERR_TOO_LARGE - MRD__ERR_BASE] = "frame or payload over its size limit",
    [MRD_ERR_SQLITE - MRD__ERR_BASE] = "SQLite error",
    [MRD_ERR_CUPTI - MRD__ERR_BASE] = "CUPTI error",
    [MRD_ERR_BUSY_PROFILER - MRD__ERR_BASE] = "another profiler already owns CUPTI",
    [MRD_ERR_CONFIG - MRD__ERR_BASE] = "invalid configuration value",
    [MRD_ERR_RANK_HELD - MRD__ERR_BASE] = "rank held by another live agent process",
    [MRD_ERR_CONN_LIMIT - MRD__ERR_BASE] = "refused by a connection limit of the aggregator",
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Returns static text for 0, -errno or -MRD_ERR_* (a positive value is read as its
 * negation, so callers that forgot the sign still get a message). Never NULL;
 * thread-safe. */
const char *mrd_strerror(int err)
{
    unsigned int e;

    if (err == 0)
        return "success";
    /* -(INT_MIN) overflows: go through unsigned arithmetic. */
    e = err < 0 ? 0u - (unsigned int)err : (unsigned int)err;
    if (e > MRD__ERR_BASE && e - MRD__ERR_BASE < COUNT_OF(mrd_err_text) &&
        mrd_err_text[e - MRD__ERR_BASE])
        return mrd_err_text[e - MRD__ERR_BASE];
    if (e < COUNT_OF(errno_text) && errno_text[e])
        return errno_text[e];
    return "unknown error";
}

/* the kind's union member in events.h (proto/kinds.h) */
#define KIND_NAME(E, v, fn, T, u, bm, C, d, t, tag) [E] = #u,
static const char *const kind_names[MRD_EV__COUNT] = {MRD_KINDS(KIND_NAME)};

#define DROP_NAME(ID, name) [MRD_DROP_##ID] = #name,
static const char *const drop_names[MRD_DROP__COUNT] = {MRD_DROP_REASONS(DROP_NAME)};

/* each reason's value is its value on the wire */
#define DROP_ON_WIRE(ID, name)                                                                     \
    _Static_assert((int)MRD_DROP_##ID == (int)MERIDIAN__V1__DROP_REASON__DROP_##ID, #ID);
MRD_DROP_REASONS(DROP_ON_WIRE)

/* Stable lower-case name of an event kind (enum mrd_event_kind); "unknown" when out of
 * range. These names are stored in the database: never rename one. Thread-safe. */
const char *mrd_event_kind_name(int kind)
{
    if (kind <= 0 || kind >= MRD_EV__COUNT || !kind_names[kind])
        return "unknown";
    return kind_names[kind];
}

/* Stable lower-case name of a drop reason (enum mrd_drop_reason); "unknown" when out of
 * range. Stored in the database: never rename one. Thread-safe. */
const char *mrd_drop_reason_name(int reason)
{
    if (reason <= 0 || reason >= MRD_DROP__COUNT || !drop_names[reason])
        return "unknown";
    return drop_names[reason];
}

void mrd_log_vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    fprintf(f ? f : stderr, "%s: %s\n", prefix, line);
}
