/* aggregator_prehello: peers that never say Hello cannot take the agents' connection slots.
 *
 * A real meridiand with --max-connections 8 and --max-unauthenticated 3: three silent
 * connections fill the unauthenticated slots; an agent connecting next is accepted and the
 * oldest silent one is closed at once (EOF long before the 10 s hello timeout). Then ten
 * more silent connections arrive (more than the 8 slots): a second agent is still accepted,
 * the first still answers, and the closures are counted (connections_prehello_evicted) and
 * logged. Usage: test_aggregator_prehello PATH/TO/meridiand
 */
#define SECRET "prehello-secret-7"
#define RUN    "run-P"

#include <poll.h>

#include "client.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 when fd was closed by the daemon within ms (EOF or reset), 0 when still open. */
static int closed_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    uint8_t b;
    ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

static int agent(uint32_t rank)
{
    int fd = cl_connect();
    send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, rank);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    return fd;
}

static void probe(int fd)
{
    Meridian__V1__ClockProbe pr = MERIDIAN__V1__CLOCK_PROBE__INIT;
    pr.probe_id = 5;
    send_msg(fd, MRD_FRAME_CLOCK_PROBE, &pr.base);
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_CLOCK_REPLY);
    CHECK_EQ(((Meridian__V1__ClockReply *)m)->probe_id, 5);
    protobuf_c_message_free_unpacked(m, NULL);
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 2);
    setup_dirs(argv[1], "prehello");
    const char *args[] = {"--run-id",
                          RUN,
                          "--max-connections",
                          "8",
                          "--hello-timeout-ms",
                          "10000",
                          "--max-unauthenticated",
                          "3",
                          NULL};
    start_daemon_args(args);

    int silent[3];
    for (int i = 0; i < 3; i++) {
        silent[i] = cl_connect();
        usleep(20000); /* accepted in this order: silent[0] is the oldest */
    }
    double t0 = now_s();
    int a = agent(0);
    CHECK_EQ(closed_within(silent[0], 2000), 1);
    CHECK_LT(now_s() - t0, 2.0); /* not the 10 s hello timeout */
    CHECK_EQ(closed_within(silent[1], 100), 0);
    CHECK_EQ(closed_within(silent[2], 100), 0);

    int flood[10];
    for (int i = 0; i < 10; i++)
        flood[i] = cl_connect();
    usleep(200000);
    int b = agent(1); /* 2 agents + at most 3 unauthenticated: within the 8 slots */
    probe(a);
    probe(b);
    int open_flood = 0;
    for (int i = 0; i < 10; i++)
        open_flood += !closed_within(flood[i], 50);
    CHECK_LE(open_flood, 3);
    CHECK_EQ(closed_within(silent[1], 0) + closed_within(silent[2], 0), 2);
    for (int i = 0; i < 10; i++)
        close(flood[i]);
    for (int i = 0; i < 3; i++)
        close(silent[i]);
    close(a);
    close(b);
    CHECK_EQ(stop_daemon(), 0);

    CHECK_GE(q1("SELECT value FROM aggregator_counters WHERE"
                " name = 'connections_prehello_evicted'"),
             10);
    CHECK_EQ(q1("SELECT count(*) FROM ranks"), 2);
    const char *log = slurp(g_log);
    CHECK(strstr(log, "(before hello, open ") != NULL);
    CHECK(strstr(log, "connections without a valid Hello, the limit") != NULL);
    remove_dirs();
    printf("aggregator_prehello: ok\n");
    return 0;
}
