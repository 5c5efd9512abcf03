/* meridian error codes and messages, shared by every component.
 *
 * Convention (see STYLE.md): functions return int, 0 on success or a negative
 * errno-style code. -EAGAIN ("full / need more, try later") is not a failure.
 * meridian-specific conditions use codes above MRD__ERR_BASE so they never collide
 * with errno values.
 */
#ifndef MRD_ERROR_H
#define MRD_ERROR_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#define MRD__ERR_BASE 10000
enum {
    MRD_ERR_VERSION = MRD__ERR_BASE + 1, /* peer speaks another protocol version */
    MRD_ERR_AUTH,                        /* missing or wrong run secret */
    MRD_ERR_MALFORMED,                   /* frame or message does not decode / fails checks */
    MRD_ERR_TOO_LARGE,                   /* frame or decompressed payload over its limit */
    MRD_ERR_SQLITE,                      /* SQLite reported an error (details logged) */
    MRD_ERR_CUPTI,                       /* CUPTI reported an error (details logged) */
    MRD_ERR_BUSY_PROFILER,               /* another profiler already owns CUPTI */
    MRD_ERR_CONFIG,                      /* invalid configuration / environment value */
    MRD_ERR_RANK_HELD,                   /* another live agent process holds the rank */
    MRD_ERR_CONN_LIMIT,                  /* a connection cap of the aggregator refused it */
};

/* Returns a static, human-readable string for a 0 / negative code (errno or MRD_ERR_*).
 * Thread-safe; never returns NULL. */
const char *mrd_strerror(int err);

/* Writes one log line "<prefix>: <message>\n" to f (stderr when f is NULL), the message
 * formatted from fmt and ap and cut at 1023 bytes, with one stdio call so that the lines
 * of threads sharing f never interleave. The aggregator's modules log through it. Any
 * thread; ap is consumed. */
void mrd_log_vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif
