/* aggregator_skew_daemon: the collective-skew trigger through a real meridiand
 * (--trigger-skew 4 --trigger-length 5), driven by 4 synthetic agents over the real wire:
 * each rank a clock connection (ClockProbes with its step counter: ranks report 100, 101,
 * 102, 103 steps begun, no step times, so the margin is the least margin 2) and a data
 * connection with one Batch: a ClockSample and 30 AllReduces (seq 0-29) of one 4-rank
 * communicator. Every rank's clock is the global timebase + its own offset (rank r: r x
 * 1.5 s, sampled with a 20 us round trip), so the arrivals only line up once mapped.
 *   A. rank 2 enters AllReduce 25 5 ms late (every other arrival within 33 us): exactly
 *      one TRIGGER window, steps 105-109 = highest step counter 103 + margin 2, in every
 *      rank's next ClockReply; the log line names AllReduce seq 25, rank 2, the skew and
 *      the median;
 *   B. the same traffic with no rank late: no window, no such log line.
 * The batches are acknowledged (committed) before the probes that read the window, so
 * nothing here waits on time. Usage: test_aggregator_skew_daemon MERIDIAND
 */
#define SECRET "skew-secret-7"
#define RUN    "run-S"

#include "client.h"
#include "steps.h"

#define NR   4
#define NOPS 30
#define LATE 25
#define COMM 0x5eedc0ffee123ull
#define US   1000LL
#define MS   1000000LL

static int clock_conn(uint32_t rank)
{
    int fd = cl_connect();
    send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK,
               rank);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    return fd;
}

/* One probe with a step counter; returns the number of windows in the reply and the first
 * one's fields in w[4] (id, first, last, reason). */
static size_t probe(int fd, uint64_t begun, uint64_t w[4])
{
    static uint64_t id = 1;
    Meridian__V1__ClockProbe p = MERIDIAN__V1__CLOCK_PROBE__INIT;
    p.probe_id = ++id;
    p.t0 = 777;
    p.steps_begun = begun;
    send_msg(fd, MRD_FRAME_CLOCK_PROBE, &p.base);
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_CLOCK_REPLY);
    Meridian__V1__ClockReply *r = (Meridian__V1__ClockReply *)m;
    CHECK_UEQ(r->probe_id, id);
    size_t n = r->n_windows;
    if (n) {
        w[0] = r->windows[0]->id;
        w[1] = r->windows[0]->first_step;
        w[2] = r->windows[0]->last_step;
        w[3] = (uint64_t)r->windows[0]->reason;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return n;
}

/* Rank r's batch: a clock sample, then NOPS AllReduces; rank 2 `late_ns` late at LATE. */
static void send_batch(uint32_t r, int64_t late_ns)
{
    const int64_t off = (int64_t)r * 1500 * MS; /* local = global + off */
    const int64_t g0 = 50LL * 1000 * MS;        /* global time of the first AllReduce */
    int fd = cl_connect();
    send_hello_of(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA,
                  r, 1000 + r);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    struct mrd_batch_builder_config bc = {
        .run_id = RUN, .rank = r, .agent_instance = 1000 + r, .target_events = 1000};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    /* symmetric 10 us each way: the sample's offset is exact, its round trip 20 us */
    struct mrd_clock_sample c = {.t0 = g0 - 10 * MS + off,
                                 .t1 = g0 - 10 * MS + 10 * US,
                                 .t2 = g0 - 10 * MS + 10 * US,
                                 .t3 = g0 - 10 * MS + 20 * US + off};
    CHECK_OK(mrd_batch_add_clock_sample(b, &c));
    uint32_t fn = mrd_batch_builder_intern(b, "AllReduce");
    uint32_t dt = mrd_batch_builder_intern(b, "ncclFloat32");
    for (int k = 0; k < NOPS; k++) {
        int64_t arrive = g0 + k * 20 * MS + (int64_t)r * 10 * US + (k % 4) * US;
        if (r == 2 && k == LATE)
            arrive += late_ns;
        struct mrd_nccl_op op = {.op_id = (uint64_t)k + 1,
                                 .start = arrive + off,
                                 .end = arrive + off + 50 * US,
                                 .comm_hash = COMM,
                                 .seq = (uint64_t)k,
                                 .count = 1 << 20,
                                 .bytes = 4 << 20,
                                 .comm_rank = r,
                                 .comm_nranks = NR,
                                 .func = fn,
                                 .datatype = dt,
                                 .root = -1,
                                 .peer = -1};
        CHECK_OK(mrd_batch_add_nccl_op(b, &op));
    }
    uint8_t *frame;
    size_t len;
    CHECK_OK(mrd_batch_builder_finish(b, 1, &frame, &len));
    send_all(fd, frame, len);
    expect_ack(fd, 1, 0); /* committed: the tracker saw it before the store did */
    free(frame);
    mrd_batch_builder_free(b);
    close(fd);
}

/* Runs one daemon with the 4 ranks; returns the windows every rank's reply carried (all
 * must agree) in w. */
static size_t scenario(const char *db, int64_t late_ns, uint64_t w[4])
{
    snprintf(g_db, sizeof(g_db), "%s/%s", g_dir, db);
    const char *args[] = {"--run-id",         RUN, "--commit-ms", "5", "--trigger-skew", "4",
                          "--trigger-length", "5", NULL};
    start_daemon_args(args);
    int cfd[NR];
    uint64_t none[4];
    for (uint32_t r = 0; r < NR; r++) {
        cfd[r] = clock_conn(r);
        CHECK_EQ(probe(cfd[r], 100 + r, none), 0u);
    }
    for (uint32_t r = 0; r < NR; r++)
        send_batch(r, late_ns);
    size_t n = 0;
    for (uint32_t r = 0; r < NR; r++) {
        uint64_t got[4] = {0};
        size_t k = probe(cfd[r], 100 + r, got);
        if (r == 0) {
            n = k;
            memcpy(w, got, sizeof(got));
        }
        CHECK_EQ(k, n);
        if (k)
            CHECK(memcmp(got, w, sizeof(got)) == 0);
        close(cfd[r]);
    }
    CHECK_EQ(stop_daemon(), 0);
    return n;
}

int main(int argc, char **argv)
{
    uint64_t w[4] = {0};
    CHECK_EQ(argc, 2);
    g_world_size = NR;
    setup_dirs(argv[1], "skew");

    /* A: rank 2 late by 5 ms at AllReduce 25 */
    CHECK_EQ(scenario("late.db", 5 * MS, w), 1u);
    CHECK_UEQ(w[0], 1u);
    CHECK_UEQ(w[1], 105u); /* highest step counter 103 + least margin 2 */
    CHECK_UEQ(w[2], 109u); /* 5 steps */
    CHECK_UEQ(w[3], (uint64_t)MRD_WINDOW_TRIGGER);
    const char *log = slurp(g_log);
    const char *line = strstr(log, "window 1 (trigger): steps 105-109 (5 steps) = highest step "
                                   "counter 103 (of 4 ranks) + margin 2");
    CHECK(line != NULL);
    CHECK(strstr(line, "collective skew: AllReduce seq 25 on communicator 0005eedc0ffee123 (4 "
                       "ranks): rank 2 arrived 5.0"));
    CHECK(strstr(line, "over 4.00 x the median skew 0.03"));
    const char *first = strstr(log, "collective skew");
    CHECK(first > line && strstr(first + 1, "collective skew") == NULL); /* one skew line */
    printf("aggregator_skew_daemon: A: %.*s\n", (int)strcspn(line, "\n"), line);
    /* the tracker's counts, stored at shutdown: 30 instances matched, one trigger */
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'skew_instances_completed'"),
             NOPS);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'skew_triggers'"), 1);
    CHECK_EQ(q1("SELECT count(*) FROM aggregator_counters WHERE name = 'skew_instances_evicted'"),
             0);
    CHECK_OK(truncate(g_log, 0));

    /* B: nobody late */
    CHECK_EQ(scenario("ontime.db", 0, w), 0u);
    log = slurp(g_log);
    CHECK(strstr(log, "collective skew") == NULL);
    CHECK(strstr(log, "window 1") == NULL);
    printf("aggregator_skew_daemon: B: no window, no skew line\n");
    remove_dirs();
    printf("aggregator_skew_daemon: ok\n");
    return 0;
}
