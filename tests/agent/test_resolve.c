/* agent_resolve: the aggregator's address is resolved off the flusher thread (resolve.h).
 *
 * With a name server that takes 1.5 s (slow_dns.c, linked in: the agent's getaddrinfo):
 *   - a numeric address is ready at once, and never looked up, whatever fails;
 *   - a name: mrd_resolver_init returns at once (well under the lookup's 1.5 s), the
 *     addresses are "not yet" (-EAGAIN, without waiting) until the helper thread has them;
 *   - again only after 3 failed connection attempts in a row and 30 s after the last lookup
 *     (the clock is the caller's, so the test moves it); a success resets the count;
 *   - an unknown name: "unknown host", retried at most every 2 s;
 *   - IPv4 first when a name has both (meridiand listens on 127.0.0.1 by default);
 *   - a malformed address: -EINVAL;
 *   - initialised again (a transport restart) while a lookup is in flight: the restart
 *     does not wait, and the old lookup's answer never lands in the new configuration.
 * Built twice: plain (agent_resolve) and with ThreadSanitizer (agent_resolve_tsan: the
 * mutex must not be re-initialised while an old helper thread holds it).
 * Before, the flusher thread called getaddrinfo itself at every connection attempt and
 * stopped draining the rings for as long as DNS took.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "resolve.h"
#include "slow_dns.h"

#define S 1000000000LL

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

/* Waits (up to 3 s) until the resolver has no lookup running; returns its addresses' rc. */
static int settle(struct mrd_resolver *r, struct mrd_addrs *a, int64_t now, const char **why)
{
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&r->lock);
        int running = r->running;
        pthread_mutex_unlock(&r->lock);
        if (!running)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return mrd_resolver_addrs(r, a, now, why);
}

static struct mrd_resolver r; /* static, as the transport's: lookups may outlive a scope */

int main(void)
{
    struct mrd_addrs a;
    const char *why = "";
    setenv("MRD_TEST_DNS_DELAY_MS", "1500", 1);

    /* numeric: at once, no lookup ever */
    CHECK_OK(mrd_resolver_init(&r, "127.0.0.1:4750", 1, &why));
    CHECK_OK(mrd_resolver_addrs(&r, &a, 1, &why));
    CHECK_EQ(a.n, 1);
    CHECK_EQ(((struct sockaddr_in *)&a.a[0].sa)->sin_port, htons(4750));
    for (int i = 0; i < 10; i++)
        mrd_resolver_failed(&r, 100 * S);
    CHECK_UEQ(mrd_resolver_lookups(&r), 0);
    CHECK_UEQ(mrd_test_dns_lookups(), 0);
    CHECK_EQ(mrd_resolver_init(&r, "nocolon", 1, &why), -EINVAL);
    CHECK_EQ(mrd_resolver_init(&r, "h:0", 1, &why), -EINVAL);

    /* a name: the lookup runs elsewhere; nobody waits for it */
    int64_t t0 = mono_ns();
    CHECK_OK(mrd_resolver_init(&r, "agg.meridian-test:4751", 1000 * S, &why));
    CHECK_EQ(mrd_resolver_addrs(&r, &a, 1000 * S, &why), -EAGAIN);
    CHECK(strstr(why, "resolving") != NULL);
    CHECK_LE(mono_ns() - t0, 750 * 1000000LL); /* half the lookup (TSan at load 15: 145 ms) */
    CHECK_OK(settle(&r, &a, 1000 * S, &why));
    CHECK_EQ(a.n, 1);
    CHECK_EQ(a.a[0].sa.ss_family, AF_INET);
    CHECK_UEQ(mrd_resolver_lookups(&r), 1);
    CHECK_UEQ(mrd_test_dns_lookups(), 1);

    /* failures: a lookup again only after 3 in a row and 30 s after the last one */
    mrd_resolver_failed(&r, 1001 * S);
    mrd_resolver_failed(&r, 1001 * S);
    mrd_resolver_connected(&r); /* the count starts again */
    mrd_resolver_failed(&r, 1001 * S);
    mrd_resolver_failed(&r, 1001 * S);
    CHECK_UEQ(mrd_resolver_lookups(&r), 1);
    mrd_resolver_failed(&r, 1001 * S); /* 3 in a row, but only 1 s after the lookup */
    CHECK_UEQ(mrd_resolver_lookups(&r), 1);
    mrd_resolver_failed(&r, 1031 * S); /* 31 s after: the address may have moved */
    CHECK_UEQ(mrd_resolver_lookups(&r), 2);
    CHECK_OK(mrd_resolver_addrs(&r, &a, 1031 * S, &why)); /* the old ones meanwhile */
    mrd_resolver_failed(&r, 1032 * S);
    CHECK_UEQ(mrd_resolver_lookups(&r), 2); /* running, then rate-limited */
    CHECK_OK(settle(&r, &a, 1032 * S, &why));
    mrd_resolver_failed(&r, 1040 * S);
    CHECK_UEQ(mrd_resolver_lookups(&r), 2);
    CHECK_UEQ(mrd_test_dns_lookups(), 2);

    /* an unknown name: said so, retried at most every 2 s */
    CHECK_OK(mrd_resolver_init(&r, "nx.meridian-test:4752", 2000 * S, &why));
    CHECK_EQ(settle(&r, &a, 2000 * S, &why), -EAGAIN);
    CHECK_STREQ(why, "unknown host");
    CHECK_UEQ(mrd_resolver_lookups(&r), 1);
    CHECK_EQ(mrd_resolver_addrs(&r, &a, 2001 * S, &why), -EAGAIN);
    CHECK_UEQ(mrd_resolver_lookups(&r), 1);
    CHECK_EQ(mrd_resolver_addrs(&r, &a, 2003 * S, &why), -EAGAIN);
    CHECK_UEQ(mrd_resolver_lookups(&r), 2);
    (void)settle(&r, &a, 2003 * S, &why);

    /* both families: IPv4 first */
    CHECK_OK(mrd_resolver_init(&r, "dual.meridian-test:4753", 3000 * S, &why));
    CHECK_OK(settle(&r, &a, 3000 * S, &why));
    CHECK_EQ(a.n, 2);
    CHECK_EQ(a.a[0].sa.ss_family, AF_INET);
    CHECK_EQ(a.a[1].sa.ss_family, AF_INET6);
    /* a restart while a lookup is in flight: the old lookup's answer lands nowhere, the
     * lock is not re-initialised under its thread (agent_resolve_tsan), nothing waits */
    CHECK_OK(mrd_resolver_init(&r, "old.meridian-test:4761", 4000 * S, &why));
    t0 = mono_ns();
    CHECK_OK(mrd_resolver_init(&r, "nx.meridian-test:4762", 4000 * S, &why));
    CHECK_LE(mono_ns() - t0, 750 * 1000000LL); /* the restart did not wait for DNS */
    CHECK_EQ(mrd_resolver_addrs(&r, &a, 4000 * S, &why), -EAGAIN);
    CHECK(strstr(why, "resolving") != NULL); /* the new name's lookup, not the old one's */
    CHECK_UEQ(mrd_resolver_lookups(&r), 1);
    CHECK_EQ(settle(&r, &a, 4000 * S, &why), -EAGAIN);
    struct timespec margin = {0, 300000000}; /* the old lookup has certainly ended */
    nanosleep(&margin, NULL);
    CHECK_EQ(mrd_resolver_addrs(&r, &a, 4001 * S, &why), -EAGAIN); /* not old's 4761 */
    CHECK_STREQ(why, "unknown host");
    /* and to a numeric address while a name is being looked up */
    CHECK_OK(mrd_resolver_init(&r, "old.meridian-test:4763", 5000 * S, &why));
    CHECK_OK(mrd_resolver_init(&r, "127.0.0.1:4764", 5000 * S, &why));
    nanosleep(&margin, NULL);
    nanosleep(&margin, NULL);
    CHECK_OK(mrd_resolver_addrs(&r, &a, 5000 * S, &why));
    CHECK_EQ(a.n, 1);
    CHECK_EQ(((struct sockaddr_in *)&a.a[0].sa)->sin_port, htons(4764));
    CHECK_UEQ(mrd_resolver_lookups(&r), 0);

    printf("agent_resolve: ok (%lu lookups)\n", mrd_test_dns_lookups());
    return 0;
}
