/* meridian run configuration shared by every component: the run secret and host:port.
 *
 * Where it sits: the agent (MERIDIAN_SECRET / MERIDIAN_SECRET_FILE, MERIDIAN_AGGREGATOR),
 * meridiand (--secret-file / MERIDIAN_SECRET, --listen), `meridian replay` and
 * `meridian profile` all read the same two things; a secret file that one of them read
 * differently from another would be refused as a wrong secret with nothing to show why.
 * So there is one rule for each, here (documented for users in agent/ENVIRONMENT.md):
 *
 *   secret: the whole file (or the whole MERIDIAN_SECRET value) with every trailing CR
 *     and LF removed; what remains must be 1..MRD_SECRET_MAX bytes and contain no NUL
 *     byte. Inner bytes, newlines included, are part of the secret. A file larger than
 *     MRD_SECRET_FILE_MAX bytes is refused without being read further.
 *   host:port: "host:port" or "[ipv6]:port"; host non-empty (a host containing ':' must
 *     be bracketed); port 1 to 5 decimal digits, 0..65535 (callers that connect refuse 0).
 *
 * Workload: called once per process at start (cold path). No logging: each caller words
 * its own message from the returned reason. Thread-safe, no allocation.
 */
#ifndef MRD_RUNCFG_H
#define MRD_RUNCFG_H

#include <stddef.h>
#include <stdint.h>

#define MRD_SECRET_MAX      255  /* bytes of a run secret (Hello.secret) */
#define MRD_SECRET_FILE_MAX 4096 /* bytes of a secret file, trailing newlines included */

/* Reads the run secret from the file at `path` if path is non-NULL, else from `value`
 * (the text of an environment variable). Writes the secret and a terminating NUL into
 * out[MRD_SECRET_MAX + 1]. Returns its length (1..MRD_SECRET_MAX), or a negative code with
 * *why set to a static reason: -EINVAL (both NULL: "no secret given"), the negative errno
 * of open/read (why: its text), -EFBIG (file over MRD_SECRET_FILE_MAX bytes), -E2BIG
 * (longer than MRD_SECRET_MAX), -ENODATA (empty), -EILSEQ (contains a NUL byte). out is
 * zeroed on failure. Any thread. */
int mrd_secret_read(const char *path, const char *value, char out[MRD_SECRET_MAX + 1],
                    const char **why);

/* Splits "host:port" or "[ipv6]:port" by the rule above: the host (brackets removed) into
 * host[hcap] with a NUL, the port into *port. Returns 0, -EINVAL (not host:port by the
 * rule), or -ENAMETOOLONG (host does not fit hcap); host and *port are untouched on
 * failure. Any thread. */
int mrd_hostport_split(const char *hp, char *host, size_t hcap, uint16_t *port);

#endif
