/* A slow name server for tests of the agent's transport (agent_resolve, agent_transport_dns).
 *
 * Linked into programs that contain the agent's transport statically, so this getaddrinfo
 * is the one the agent calls. Names ending in ".meridian-test" are answered here, after
 * MRD_TEST_DNS_DELAY_MS milliseconds (a name server that takes its time): "nx.*" does not
 * exist (EAI_NONAME), "dual.*" is ::1 then 127.0.0.1 (IPv6 listed first, as "localhost"
 * often is), any other is 127.0.0.1. Lookups of those names are counted. Everything else,
 * and every AI_NUMERICHOST call, goes to the C library's getaddrinfo.
 */
#include <dlfcn.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "slow_dns.h"

static _Atomic unsigned long g_lookups;

unsigned long mrd_test_dns_lookups(void)
{
    return atomic_load(&g_lookups);
}

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static const char suffix[] = ".meridian-test";
    gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    size_t n = node ? strlen(node) : 0;
    if (n <= sizeof suffix - 1 || strcmp(node + n - (sizeof suffix - 1), suffix) != 0 ||
        (hints && (hints->ai_flags & AI_NUMERICHOST)))
        return real(node, service, hints, res);
    atomic_fetch_add(&g_lookups, 1);
    const char *d = getenv("MRD_TEST_DNS_DELAY_MS");
    long ms = d ? atol(d) : 0;
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    if (strncmp(node, "nx.", 3) == 0)
        return EAI_NONAME;
    struct addrinfo h = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    if (strncmp(node, "dual.", 5) == 0) {
        struct addrinfo *v6 = NULL, *v4 = NULL, *last;
        int e = real("::1", service, &h, &v6);
        if (e != 0)
            return real("127.0.0.1", service, &h, res);
        if ((e = real("127.0.0.1", service, &h, &v4)) != 0) {
            freeaddrinfo(v6);
            return e;
        }
        for (last = v6; last->ai_next; last = last->ai_next)
            ;
        last->ai_next = v4;
        *res = v6;
        return 0;
    }
    return real("127.0.0.1", service, &h, res);
}
