/* meridian error strings and stable names for event kinds and drop reasons.
 *
 * Every component reports errors as 0 / negative errno / -MRD_ERR_*; this file turns
 * them into text for logs (mrd_strerror) and gives the lower-case names that the
 * database and reports use for event kinds and drop reasons. Called wherever an error
 * is logged (cold paths only); the tables are static and read-only, libc's lower-cased
 * error words are written once under pthread_once, so every function here is thread-safe
 * and allocation-free.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "events.h"
#include "meridian.pb-c.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* meridian's one error-text function, used instead of strerror() everywhere: strerror is
 * not guaranteed thread-safe, and one function keeps every message alike. An errno reads
 * as libc's description (strerrordesc_np, glibc >= 2.32) with its first letter lower-cased,
 * as every meridian message is ("cannot read x: no such file or directory"), except the few
 * codes whose words meridian chooses itself, below. A code libc does not describe prints as
 * "unknown error". */
static const char *const own_errno_words[] = {
    [EAGAIN] = "resource temporarily unavailable (try again)", /* -EAGAIN is not a failure */
    [ENOMEM] = "out of memory",
    [ERANGE] = "result out of range",
};

/* Linux's highest errno; libc's descriptions of codes below it, lower-cased once. The
 * longest description is 49 bytes: a longer one would be cut, never overrun. */
#define ERRNO_LIMIT (EHWPOISON + 1)
static char lowered_libc_words[ERRNO_LIMIT][64];
static pthread_once_t lowered_once = PTHREAD_ONCE_INIT;

static void lower_libc_words(void)
{
    for (int e = 1; e < ERRNO_LIMIT; e++) {
        const char *words = strerrordesc_np(e);
        if (!words)
            continue;
        snprintf(lowered_libc_words[e], sizeof(lowered_libc_words[e]), "%s", words);
        lowered_libc_words[e][0] = (char)tolower((unsigned char)words[0]);
    }
}

/* The words for errno e (> 0), NULL when neither meridian nor libc has any. */
static const char *errno_words(unsigned int e)
{
    if (e < COUNT_OF(own_errno_words) && own_errno_words[e])
        return own_errno_words[e];
    if (e >= ERRNO_LIMIT)
        return NULL;
    pthread_once(&lowered_once, lower_libc_words);
    return lowered_libc_words[e][0] ? lowered_libc_words[e] : NULL;
}

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

/* Returns static text for 0, -errno or -MRD_ERR_* (a positive value is read as its
 * negation, so callers that forgot the sign still get a message). Never NULL;
 * thread-safe. */
const char *mrd_strerror(int err)
{
    unsigned int e;
    const char *words;

    if (err == 0)
        return "success";
    /* -(INT_MIN) overflows: go through unsigned arithmetic. */
    e = err < 0 ? 0u - (unsigned int)err : (unsigned int)err;
    if (e > MRD__ERR_BASE && e - MRD__ERR_BASE < COUNT_OF(mrd_err_text) &&
        mrd_err_text[e - MRD__ERR_BASE])
        return mrd_err_text[e - MRD__ERR_BASE];
    words = errno_words(e);
    return words ? words : "unknown error";
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
