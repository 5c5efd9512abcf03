/* The aggregator's address, resolved off the flusher thread: see resolve.h.
 *
 * Where it sits: the flusher thread asks for addresses before each connection attempt
 * (datalink.c, clocklink.c) and reports whether the attempt failed; lookups run on a
 * detached helper thread created for each one, with every signal blocked (the agent's rule
 * for its threads), which publishes under the mutex and ends. A helper gets its own copy
 * of the name (struct lookup_job, freed by the helper) and the resolver's generation; a
 * re-init (restart) bumps the generation, so a helper still in getaddrinfo then publishes
 * nothing, and the mutex, initialised by the first init only, is never re-initialised
 * under it. Nobody waits for such a helper: it ends when its lookup does.
 *
 * Workload: one lookup per process normally; after failures, at most one every
 * MRD_RESOLVE_MIN_INTERVAL_MS (one every MRD_RESOLVE_RETRY_MS while no lookup has ever
 * succeeded). The flusher's side is a mutex-protected copy of at most 8 addresses.
 */
#include "resolve.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runcfg.h"
#include "worker.h"

#define MRD_RESOLVE_RETRY_MS 2000u /* no address yet: look up again this often */

/* Resolves host:port into *out, IPv4 addresses first. Returns 0 or an EAI_* code. */
static int lookup(const char *host, const char *port, int numeric_only, struct mrd_addrs *out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (numeric_only ? AI_NUMERICHOST : 0)};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0)
        return gai;
    out->n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (struct addrinfo *ai = res; ai && out->n < MRD_ADDRS_MAX; ai = ai->ai_next) {
            if ((ai->ai_family == AF_INET) != (pass == 0) ||
                ai->ai_addrlen > sizeof out->a[0].sa)
                continue;
            memcpy(&out->a[out->n].sa, ai->ai_addr, ai->ai_addrlen);
            out->a[out->n].len = ai->ai_addrlen;
            out->n++;
        }
    }
    freeaddrinfo(res);
    return out->n ? 0 : EAI_NONAME;
}

/* One lookup: its own copy of the name, and the generation it was started for. */
struct lookup_job {
    struct mrd_resolver *r;
    uint64_t gen;
    char host[256], port[8];
};

static void *lookup_main(void *arg)
{
    struct lookup_job *j = arg;
    struct mrd_resolver *r = j->r;
    struct mrd_addrs a;
    int err = lookup(j->host, j->port, 0, &a);
    pthread_mutex_lock(&r->lock);
    if (j->gen == r->gen) { /* else: re-initialised meanwhile, this answer is for nobody */
        if (err == 0)
            r->addrs = a; /* a failed lookup keeps what an earlier one found */
        r->last_error = err;
        r->running = 0;
    }
    pthread_mutex_unlock(&r->lock);
    free(j);
    return NULL;
}

/* Starts a lookup on a helper thread unless one is running. Returns 0 or -errno. */
static int start_lookup(struct mrd_resolver *r, int64_t now_ns)
{
    struct lookup_job *j = malloc(sizeof *j);
    if (j == NULL)
        return -ENOMEM;
    j->r = r;
    memcpy(j->host, r->host, sizeof j->host); /* host, port: the flusher's own (init) */
    memcpy(j->port, r->port, sizeof j->port);
    pthread_mutex_lock(&r->lock);
    int busy = r->running;
    if (!busy) {
        r->running = 1;
        r->last_start_ns = now_ns;
        r->lookups++;
    }
    j->gen = r->gen;
    pthread_mutex_unlock(&r->lock);
    if (busy) {
        free(j);
        return 0;
    }

    pthread_t t;
    int e = mrd_worker_start(&t, "meridian-dns", lookup_main, j);
    if (e == 0)
        pthread_detach(t);
    if (e != 0) {
        free(j);
        pthread_mutex_lock(&r->lock);
        r->running = 0;
        pthread_mutex_unlock(&r->lock);
        return -e;
    }
    return 0;
}

int mrd_resolver_init(struct mrd_resolver *r, const char *hostport, int64_t now_ns,
                      const char **why)
{
    uint16_t port;
    if (!r->lock_ready) { /* once: a helper of an earlier init may be holding it right now */
        pthread_mutex_init(&r->lock, NULL);
        r->lock_ready = 1;
    }
    /* A new generation: a lookup still in flight for the earlier configuration publishes
     * nothing (lookup_main); everything the helpers read is copied into their job. */
    pthread_mutex_lock(&r->lock);
    r->gen++;
    memset(&r->addrs, 0, sizeof r->addrs);
    r->running = 0;
    r->last_error = 0;
    r->last_start_ns = 0;
    r->lookups = 0;
    pthread_mutex_unlock(&r->lock);
    r->numeric = 0;
    r->failures = 0;
    r->host[0] = r->port[0] = '\0';
    *why = "bad address";
    if (mrd_hostport_split(hostport, r->host, sizeof r->host, &port) != 0 || port == 0)
        return -EINVAL;
    snprintf(r->port, sizeof r->port, "%u", (unsigned)port);
    struct mrd_addrs a;
    if (lookup(r->host, r->port, 1, &a) == 0) { /* an address: no DNS, never again */
        r->numeric = 1;
        pthread_mutex_lock(&r->lock);
        r->addrs = a;
        pthread_mutex_unlock(&r->lock);
        return 0;
    }
    return start_lookup(r, now_ns);
}

int mrd_resolver_addrs(struct mrd_resolver *r, struct mrd_addrs *out, int64_t now_ns,
                       const char **why)
{
    pthread_mutex_lock(&r->lock);
    *out = r->addrs;
    int running = r->running, err = r->last_error;
    int64_t since = now_ns - r->last_start_ns;
    pthread_mutex_unlock(&r->lock);
    if (out->n > 0)
        return 0;
    if (running) {
        *why = "resolving the aggregator's name";
    } else {
        *why = err == EAI_NONAME ? "unknown host" : "name resolution failed";
        if (since >= (int64_t)MRD_RESOLVE_RETRY_MS * 1000000)
            (void)start_lookup(r, now_ns);
    }
    return -EAGAIN;
}

void mrd_resolver_failed(struct mrd_resolver *r, int64_t now_ns)
{
    if (r->numeric || ++r->failures < MRD_RESOLVE_AFTER_FAILURES)
        return;
    pthread_mutex_lock(&r->lock);
    int64_t since = now_ns - r->last_start_ns;
    pthread_mutex_unlock(&r->lock);
    if (since >= (int64_t)MRD_RESOLVE_MIN_INTERVAL_MS * 1000000) /* the address may have moved */
        (void)start_lookup(r, now_ns);
}

void mrd_resolver_connected(struct mrd_resolver *r)
{
    r->failures = 0;
}

uint64_t mrd_resolver_lookups(struct mrd_resolver *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t n = r->lookups;
    pthread_mutex_unlock(&r->lock);
    return n;
}
