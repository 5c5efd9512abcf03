/* The aggregator's address, resolved off the flusher thread (internal to the transport).
 *
 * getaddrinfo() blocks for as long as DNS takes (seconds when a name server is slow or
 * gone); the flusher thread, which drains the rings every few milliseconds, must never
 * wait for it. A numeric address (127.0.0.1, [::1]) is taken at once; a name is looked up
 * by a short-lived helper thread (signals blocked) when the transport starts, and again
 * only after MRD_RESOLVE_AFTER_FAILURES connection attempts in a row failed, at most once
 * every MRD_RESOLVE_MIN_INTERVAL_MS (and one lookup at a time). Until a lookup has
 * succeeded there is no address and the connection waits (the flusher keeps draining and
 * queueing); a later lookup that fails keeps the addresses it had.
 *
 * Threads: the flusher thread calls everything here; the helper thread only publishes its
 * result under the resolver's mutex (held for a copy, never across a lookup). A helper
 * works on its own copy of the name and publishes only if the resolver has not been
 * initialised again meanwhile (generation), so a restart never waits for DNS and a late
 * lookup never lands in the new configuration (or on a re-initialised mutex).
 */
#ifndef MRD_AGENT_RESOLVE_H
#define MRD_AGENT_RESOLVE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#define MRD_ADDRS_MAX               8
#define MRD_RESOLVE_AFTER_FAILURES  3u
#define MRD_RESOLVE_MIN_INTERVAL_MS 30000u

/* Addresses to try, in order (IPv4 first: "localhost" often lists ::1 first while
 * meridiand listens on 127.0.0.1 by default). */
struct mrd_addrs {
    unsigned n;
    struct {
        struct sockaddr_storage sa;
        socklen_t len;
    } a[MRD_ADDRS_MAX];
};

struct mrd_resolver {
    char host[256], port[8];
    int numeric;            /* an address, not a name: never looked up again */
    unsigned failures;      /* connection attempts failed in a row (flusher thread) */
    int lock_ready;         /* lock initialised (by the first mrd_resolver_init; flusher) */
    pthread_mutex_t lock;   /* guards what follows (flusher thread <-> helper thread) */
    uint64_t gen;           /* bumped by every mrd_resolver_init: older lookups are stale */
    struct mrd_addrs addrs; /* n == 0: none yet */
    int running;            /* a lookup is in flight */
    int last_error;         /* EAI_* of the last lookup, 0 when it succeeded */
    int64_t last_start_ns;  /* CLOCK_MONOTONIC of the last lookup's start, 0 = never */
    uint64_t lookups;       /* lookups started (tests, diagnostics) */
};

/* Parses "host:port" / "[v6]:port" into r (which must outlive every lookup: the transport
 * keeps it for the life of the process) and starts resolving: a numeric address is taken
 * at once; a name starts a lookup on a helper thread. r must be zero-filled before its
 * first init (static storage is); it may be initialised again (a restart) while a lookup
 * of the earlier configuration is still in flight: the mutex is initialised once only,
 * and that lookup's result is discarded when it ends (its thread is left to finish).
 * Returns 0, -EINVAL for a malformed address (*why set; r then has no address), or -errno
 * when the helper thread cannot start (a later mrd_resolver_addrs retries). */
int mrd_resolver_init(struct mrd_resolver *r, const char *hostport, int64_t now_ns,
                      const char **why);

/* Copies the current addresses into *out. Returns 0, or -EAGAIN when there are none yet
 * (*why: "resolving <host>" while a lookup runs, "unknown host" / "name resolution
 * failed" after a failed one, which it then retries within the rate limit). Never blocks
 * for DNS. Flusher thread. */
int mrd_resolver_addrs(struct mrd_resolver *r, struct mrd_addrs *out, int64_t now_ns,
                       const char **why);

/* A connection attempt to the resolved addresses failed (refused, unreachable, timed out).
 * After MRD_RESOLVE_AFTER_FAILURES in a row a name is looked up again (rate-limited). */
void mrd_resolver_failed(struct mrd_resolver *r, int64_t now_ns);

/* A connection attempt succeeded: the failure count starts again. */
void mrd_resolver_connected(struct mrd_resolver *r);

/* Lookups started so far. Any thread. */
uint64_t mrd_resolver_lookups(struct mrd_resolver *r);

#endif
