/* aggregator_daemon: a real meridiand process driven by raw-socket clients.
 *
 * One good client (rank 0) stays connected the whole time and keeps sending batches;
 * between its batches, bad clients connect: wrong secret, missing secret, no Hello, wrong
 * frame version, wrong Hello version, wrong run id, an oversized frame, garbage bytes,
 * an undecodable batch, an unexpected frame type. Each must get its reason (HelloReply
 * accepted = false, or an Error frame) and be closed, and the good client's next batch
 * must still be acknowledged. Then: clock probes are answered (t1/t2 exact ns, not on the
 * 256 ns grid of a double); SIGTERM commits a batch that was received but not yet
 * committed (long --commit-ms), acks it and exits 0; a
 * restart on the same database continues the same run, reports the committed seq and
 * acknowledges a resent batch as a duplicate; a Goodbye gets Ack{goodbye}, and only once
 * it is committed (the test holds SQLite's write lock meanwhile: nothing may arrive). The
 * log must name each rejection and never contain the secret.
 * Usage: test_aggregator_daemon PATH/TO/meridiand
 */
#define SECRET    "topsecret-0123456789"
#define RUN       "run-D"
#define MAX_FRAME 65536u

#include <poll.h>

#include "client.h"

static void start_daemon(const char *commit_ms, int with_run_id)
{
    const char *args[] = {"--max-frame",
                          "65536",
                          "--commit-ms",
                          commit_ms,
                          "--hello-timeout-ms",
                          "300",
                          "--max-connections",
                          "8",
                          with_run_id ? "--run-id" : NULL,
                          RUN,
                          NULL};
    start_daemon_args(args);
}

/* the good client: rank 0's builder and its frames (kept for the resend) */
static struct mrd_batch_builder *g_b;
static uint8_t *g_frames[64];
static size_t g_frame_len[64];
static uint64_t g_kernels;

static void make_batch(uint64_t seq, int nk)
{
    for (int i = 0; i < nk; i++) {
        struct mrd_kernel k = {.start = (int64_t)(seq * 1000000 + (uint64_t)i * 100),
                               .end = (int64_t)(seq * 1000000 + (uint64_t)i * 100 + 50),
                               .correlation = seq * 1000 + (uint64_t)i,
                               .device = 0,
                               .stream = 7};
        k.name = mrd_batch_builder_intern(g_b, i % 2 ? "kernel_odd" : "kernel_even");
        CHECK_OK(mrd_batch_add_kernel(g_b, &k));
    }
    CHECK_OK(mrd_batch_builder_finish(g_b, seq, &g_frames[seq], &g_frame_len[seq]));
    g_kernels += (uint64_t)nk;
}

static void good_batch(int fd, uint64_t seq)
{
    make_batch(seq, 100);
    send_all(fd, g_frames[seq], g_frame_len[seq]);
    expect_ack(fd, seq, 0);
    mrd_batch_builder_acked(g_b, seq);
}

static void bad_hello(const char *secret, uint32_t version, const char *run, const char *why)
{
    int fd = cl_connect();
    send_hello(fd, secret, version, run, 0, 1);
    CHECK_EQ(expect_hello_reply(fd, NULL, why), 0);
    expect_eof(fd);
}

static void bad_raw(int hello_first, const void *bytes, size_t n, uint32_t code)
{
    int fd = cl_connect();
    if (hello_first) {
        send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 1);
        CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    }
    send_all(fd, bytes, n);
    if (hello_first) {
        expect_error(fd, code);
    } else {
        CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 0);
        expect_eof(fd);
    }
}

static void expect_goodbye_ack(int fd)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_ACK);
    CHECK_EQ(((Meridian__V1__Ack *)m)->goodbye, 1);
    CHECK_EQ(((Meridian__V1__Ack *)m)->seq, 0);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Ack{goodbye} comes only once the Goodbye is committed: while the test holds SQLite's
 * write lock the writer cannot store it, and nothing may arrive; the Ack comes after the
 * lock is released, and by then the database already shows the goodbye. */
static void goodbye_after_commit(void)
{
    start_daemon("20", 1);
    int fd = cl_connect();
    send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 2);
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_HELLO_REPLY);
    CHECK_EQ(((Meridian__V1__HelloReply *)m)->accepted, 1);
    CHECK_EQ(((Meridian__V1__HelloReply *)m)->goodbye_acks, 1); /* announced */
    protobuf_c_message_free_unpacked(m, NULL);

    sqlite3 *lock;
    CHECK_EQ(sqlite3_open(g_db, &lock), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    Meridian__V1__Goodbye gb = MERIDIAN__V1__GOODBYE__INIT;
    Meridian__V1__Counter k = MERIDIAN__V1__COUNTER__INIT, *kp[1] = {&k};
    k.key = MRD_EV_KERNEL;
    k.value = 4242;
    gb.n_captured = 1;
    gb.captured = kp;
    send_msg(fd, MRD_FRAME_GOODBYE, &gb.base);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 600), 0); /* 30 commit intervals: no Ack while not committed */
    CHECK_EQ(q1("SELECT goodbye FROM ranks WHERE rank = 2"), 0);
    CHECK_EQ(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(lock);
    expect_goodbye_ack(fd);
    CHECK_EQ(q1("SELECT goodbye FROM ranks WHERE rank = 2"), 1);
    CHECK_EQ(q1("SELECT value FROM agent_counters WHERE rank = 2 AND category = 'captured'"
                " AND name = 'kernel'"),
             4242);
    close(fd);
    CHECK_EQ(stop_daemon(), 0);
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 2);
    setup_dirs(argv[1], "daemon-test");
    struct mrd_batch_builder_config bc = {.run_id = RUN,
                                          .rank = 0,
                                          .agent_instance = 1,
                                          .max_frame = MAX_FRAME,
                                          .target_events = 4096,
                                          .compress_level = 1};
    CHECK_OK(mrd_batch_builder_new(&bc, &g_b));

    start_daemon("20", 1);
    int good = cl_connect();
    send_hello(good, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 0);
    uint64_t committed = 99;
    CHECK_EQ(expect_hello_reply(good, &committed, NULL), 1);
    CHECK_EQ(committed, 0);
    uint64_t seq = 1;
    good_batch(good, seq++);

    bad_hello("wrong-secret-0123456", MRD_PROTOCOL_VERSION, RUN, "wrong run secret");
    good_batch(good, seq++);
    bad_hello("", MRD_PROTOCOL_VERSION, RUN, "missing run secret");
    good_batch(good, seq++);
    bad_hello(SECRET, MRD_PROTOCOL_VERSION + 1, RUN, "Hello of protocol version 3");
    good_batch(good, seq++);
    bad_hello(SECRET, MRD_PROTOCOL_VERSION, "run-other", "is not this aggregator's run");
    good_batch(good, seq++);

    /* no Hello: a (small, valid) batch first */
    make_batch(seq, 3);
    bad_raw(0, g_frames[seq], g_frame_len[seq], 0);
    free(g_frames[seq]);
    g_frames[seq] = NULL;
    g_kernels -= 3;
    mrd_batch_builder_reset_unacked(g_b);
    good_batch(good, seq++);

    /* a frame of a newer protocol version, before and after the Hello */
    uint8_t v3[MRD_FRAME_HEADER_BYTES] = {
        MRD_PROTOCOL_VERSION + 1, MRD_FRAME_HELLO, 0, 0, 0, 0, 0, 0};
    bad_raw(0, v3, sizeof(v3), 0);
    v3[1] = MRD_FRAME_BATCH;
    bad_raw(1, v3, sizeof(v3), MRD_ERR_VERSION);
    good_batch(good, seq++);

    /* oversized: a header announcing max_frame + 1 bytes */
    uint8_t big[MRD_FRAME_HEADER_BYTES];
    struct mrd_frame_header bh = {
        .version = MRD_PROTOCOL_VERSION, .type = MRD_FRAME_BATCH, .length = MAX_FRAME + 1};
    mrd_frame_header_write(big, &bh);
    bad_raw(1, big, sizeof(big), MRD_ERR_TOO_LARGE);
    good_batch(good, seq++);

    /* garbage: text before the Hello, and an undecodable batch payload after it */
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    bad_raw(0, http, strlen(http), 0);
    uint8_t junk[MRD_FRAME_HEADER_BYTES + 32];
    bh.length = 32;
    mrd_frame_header_write(junk, &bh);
    for (int i = 0; i < 32; i++)
        junk[MRD_FRAME_HEADER_BYTES + i] = (uint8_t)(0xff - i);
    bad_raw(1, junk, sizeof(junk), MRD_ERR_MALFORMED);
    good_batch(good, seq++);
    usleep(1100000); /* ten refusals so far: the log shows at most ten a second */

    /* no Hello at all, and half a header: closed after --hello-timeout-ms (300) */
    int silent = cl_connect(), partial = cl_connect();
    send_all(partial, "\x01\x01\x00", 3);
    CHECK_EQ(expect_hello_reply(silent, NULL, "no Hello within 300 ms"), 0);
    expect_eof(silent);
    CHECK_EQ(expect_hello_reply(partial, NULL, "no Hello within 300 ms"), 0);
    expect_eof(partial);
    good_batch(good, seq++);

    /* an unexpected frame type on a data connection (an Ack) */
    Meridian__V1__Ack ack = MERIDIAN__V1__ACK__INIT;
    ack.seq = 1;
    uint8_t *af;
    size_t an;
    CHECK_OK(mrd_frame_encode(MRD_FRAME_ACK, &ack.base, 0, MAX_FRAME, &af, &an));
    bad_raw(1, af, an, MRD_ERR_MALFORMED);
    free(af);
    good_batch(good, seq++);

    /* a clock probe on a clock connection */
    int clk = cl_connect();
    send_hello(clk, SECRET, MRD_PROTOCOL_VERSION, RUN, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK,
               0);
    CHECK_EQ(expect_hello_reply(clk, NULL, NULL), 1);
    Meridian__V1__ClockProbe pr = MERIDIAN__V1__CLOCK_PROBE__INIT;
    pr.probe_id = 77;
    pr.t0 = 123456;
    send_msg(clk, MRD_FRAME_CLOCK_PROBE, &pr.base);
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(clk, &m), MRD_FRAME_CLOCK_REPLY);
    Meridian__V1__ClockReply *cr = (Meridian__V1__ClockReply *)m;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t rt = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
    CHECK_EQ(cr->probe_id, 77);
    CHECK_EQ(cr->t0, 123456);
    CHECK_LE(cr->t1, cr->t2);
    CHECK_LT(llabs(cr->t2 - rt), 5000000000LL);
    protobuf_c_message_free_unpacked(m, NULL);
    /* t1/t2 are exact nanoseconds: a trip through a double would put every one on a
     * 256 ns grid (the chance that 64 exact values all are on it is 256^-64) */
    int t1_off = 0, t2_off = 0;
    for (int i = 0; i < 64; i++) {
        send_msg(clk, MRD_FRAME_CLOCK_PROBE, &pr.base);
        CHECK_EQ(recv_msg(clk, &m), MRD_FRAME_CLOCK_REPLY);
        cr = (Meridian__V1__ClockReply *)m;
        CHECK_LE(cr->t1, cr->t2);
        t1_off += cr->t1 % 256 != 0;
        t2_off += cr->t2 % 256 != 0;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    CHECK_GT(t1_off, 0);
    CHECK_GT(t2_off, 0);
    close(clk);
    /* --max-connections 8: nine more connections on top of the good one: at least one is
     * closed at once without a word (EOF, no memory spent on it); the others get the
     * hello timeout's HelloReply. (Connections rejected above may still be draining, so
     * the exact number over the limit is not fixed.) */
    int extra[9], over = 0;
    for (int i = 0; i < 9; i++)
        extra[i] = cl_connect();
    for (int i = 0; i < 9; i++) {
        uint8_t byte;
        ssize_t r = recv(extra[i], &byte, 1, 0); /* SO_RCVTIMEO 10 s */
        CHECK_GE(r, 0);
        over += r == 0;
        close(extra[i]);
    }
    CHECK_GE(over, 1);
    CHECK_LE(over, 9);
    good_batch(good, seq++);

    uint64_t last_before_restart = seq - 1;
    close(good);
    CHECK_EQ(stop_daemon(), 0);

    /* SIGTERM commits what was received: with commit-ms 60 s, nothing would commit on its
     * own, so the ack can only come from the shutdown's commit */
    start_daemon("60000", 1);
    good = cl_connect();
    send_hello(good, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 0);
    CHECK_EQ(expect_hello_reply(good, &committed, NULL), 1);
    make_batch(seq, 100);
    send_all(good, g_frames[seq], g_frame_len[seq]);
    usleep(300000);
    CHECK_OK(kill(g_pid, SIGTERM));
    expect_ack(good, seq, 0);
    mrd_batch_builder_acked(g_b, seq);
    int status;
    CHECK_EQ(waitpid(g_pid, &status, 0), g_pid);
    g_pid = 0;
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    close(good);
    CHECK_EQ(committed, last_before_restart);
    seq++;

    /* restart without --run-id: the same run; committed seq reported; a resend is a dup */
    start_daemon("20", 0);
    good = cl_connect();
    send_hello(good, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 0);
    CHECK_EQ(expect_hello_reply(good, &committed, NULL), 1);
    CHECK_EQ(committed, seq - 1);
    good_batch(good, seq++);
    send_all(good, g_frames[1], g_frame_len[1]);
    expect_ack(good, 1, 1);
    /* a last batch, Goodbye, then only the sending side shut: the ack still arrives */
    make_batch(seq, 100);
    send_all(good, g_frames[seq], g_frame_len[seq]);
    Meridian__V1__Goodbye gb = MERIDIAN__V1__GOODBYE__INIT;
    gb.last_seq = seq;
    gb.batches_sent = seq;
    send_msg(good, MRD_FRAME_GOODBYE, &gb.base);
    CHECK_OK(shutdown(good, SHUT_WR));
    expect_ack(good, seq, 0);
    seq++;
    expect_goodbye_ack(good);
    expect_eof(good); /* and then the daemon closes it */
    CHECK_EQ(stop_daemon(), 0);
    goodbye_after_commit();

    CHECK_EQ(q1("SELECT count(*) FROM runs"), 1);
    CHECK_EQ(q1("SELECT count(*) FROM runs WHERE run_id = '" RUN "'"), 1);
    CHECK_EQ(q1("SELECT count(*) FROM batches WHERE rank = 0"), (int64_t)(seq - 1));
    CHECK_EQ(q1("SELECT max(seq) FROM batches WHERE rank = 0"), (int64_t)(seq - 1));
    CHECK_EQ(q1("SELECT count(*) FROM kernels WHERE rank = 0"), (int64_t)g_kernels);
    CHECK_EQ(q1("SELECT count(*) FROM kernels WHERE rank != 0"), 0);
    CHECK_EQ(q1("SELECT count(*) FROM kernels WHERE name_id IS NULL"), 0);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'duplicate_batches'"), 1);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_auth'"), 2);
    CHECK_GE(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_version'"), 3);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_too_large'"), 1);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_run_id'"), 1);
    CHECK_GE(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_hello_timeout'"), 2);
    CHECK_GE(q1("SELECT value FROM aggregator_counters WHERE name = 'connections_over_limit'"), 1);
    CHECK_EQ(q1("SELECT goodbye FROM ranks WHERE rank = 0"), 1);
    CHECK_EQ(q1("SELECT value FROM agent_counters WHERE rank = 0 AND name = 'last_seq'"),
             (int64_t)(seq - 1));

    const char *log = slurp(g_log);
    CHECK(strstr(log, SECRET) == NULL);
    CHECK(strstr(log, "rejected 127.0.0.1:") != NULL);
    CHECK(strstr(log, "wrong run secret") != NULL);
    CHECK(strstr(log, "missing run secret") != NULL);
    CHECK(strstr(log, "expected Hello first") != NULL);
    CHECK(strstr(log, "over the limit") != NULL);
    CHECK(strstr(log, "undecodable Batch frame") != NULL);
    CHECK(strstr(log, "unexpected Ack frame on a data connection") != NULL);
    CHECK(strstr(log, "(rank 1)") != NULL); /* rejections after a Hello name the rank */

    for (size_t i = 0; i < 64; i++)
        free(g_frames[i]);
    mrd_batch_builder_free(g_b);
    remove_dirs();
    printf("aggregator_daemon: ok\n");
    return 0;
}
