/* aggregator_daemon: a real meridiand process driven by raw-socket clients.
 *
 * One good client (rank 0) stays connected the whole time and keeps sending batches;
 * between its batches, bad clients connect: wrong secret, missing secret, no Hello, wrong
 * frame version, wrong Hello version, wrong run id, an oversized frame, garbage bytes,
 * an undecodable batch, an unexpected frame type. Each must get its reason (HelloReply
 * accepted = false, or an Error frame) and be closed, and the good client's next batch
 * must still be acknowledged. Then: a clock probe is answered; SIGTERM commits a batch
 * that was received but not yet committed (long --commit-ms), acks it and exits 0; a
 * restart on the same database continues the same run, reports the committed seq and
 * acknowledges a resent batch as a duplicate. The log must name each rejection and never
 * contain the secret. Usage: test_aggregator_daemon PATH/TO/meridiand
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "check.h"
#include "error.h"
#include "frame.h"

#define SECRET "topsecret-0123456789"
#define RUN "run-D"
#define MAX_FRAME 65536u

static char g_dir[64], g_db[128], g_log[128], g_portfile[128];
static const char *g_meridiand;
static pid_t g_pid;
static uint16_t g_port;

static void kill_daemon_at_exit(void)
{
    if (g_pid > 0 && waitpid(g_pid, NULL, WNOHANG) == 0) {
        kill(g_pid, SIGKILL);
        waitpid(g_pid, NULL, 0);
    }
}

static void start_daemon(const char *commit_ms, int with_run_id)
{
    unlink(g_portfile);
    g_pid = fork();
    CHECK(g_pid >= 0);
    if (g_pid == 0) {
        int fd = open(g_log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("MERIDIAN_SECRET", SECRET, 1);
        char mf[16];
        snprintf(mf, sizeof(mf), "%u", MAX_FRAME);
        execl(g_meridiand, g_meridiand, "--db", g_db, "--listen", "127.0.0.1:0", "--port-file",
              g_portfile, "--max-frame", mf, "--commit-ms", commit_ms, "--verbose",
              with_run_id ? "--run-id" : NULL, RUN, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(g_portfile, "r");
        if (f) {
            unsigned p = 0;
            int ok = fscanf(f, "%u", &p) == 1;
            fclose(f);
            if (ok && p) {
                g_port = (uint16_t)p;
                return;
            }
        }
        usleep(10000);
    }
    CHECK(!"meridiand did not write its port file within 10 s");
}

static int stop_daemon(void)
{
    CHECK_OK(kill(g_pid, SIGTERM));
    int status = 0;
    CHECK_EQ(waitpid(g_pid, &status, 0), g_pid);
    g_pid = 0;
    CHECK(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static int cl_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_OK(connect(fd, (struct sockaddr *)&a, sizeof(a)));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        CHECK(w > 0);
        b += w;
        n -= (size_t)w;
    }
}

static void send_msg(int fd, enum mrd_frame_type t, const ProtobufCMessage *m)
{
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_frame_encode(t, m, 0, MRD_FRAME_DEFAULT_MAX, &f, &n));
    send_all(fd, f, n);
    free(f);
}

static int recv_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = recv(fd, b, n, 0);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Next frame: its type and decoded message (caller frees), or 0 at EOF. */
static int recv_msg(int fd, ProtobufCMessage **m)
{
    uint8_t hb[MRD_FRAME_HEADER_BYTES];
    if (recv_all(fd, hb, sizeof(hb)) < 0)
        return 0;
    struct mrd_frame_header h;
    CHECK_OK(mrd_frame_header_parse(hb, sizeof(hb), MRD_FRAME_DEFAULT_MAX, &h));
    uint8_t *payload = malloc(h.length + 1);
    CHECK_OK(recv_all(fd, payload, h.length));
    CHECK_OK(mrd_frame_decode(&h, payload, MRD_FRAME_DEFAULT_MAX, m));
    free(payload);
    return h.type;
}

static void expect_eof(int fd)
{
    uint8_t b[256];
    for (;;) {
        ssize_t r = recv(fd, b, sizeof(b), 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            break;
        CHECK(r > 0); /* r < 0 with EAGAIN: not closed within 10 s */
    }
    close(fd);
}

static void send_hello(int fd, const char *secret, uint32_t version, const char *run,
                       int role, uint32_t rank)
{
    Meridian__V1__Hello h = MERIDIAN__V1__HELLO__INIT;
    h.protocol_version = version;
    h.run_id = (char *)run;
    h.secret.data = (uint8_t *)secret;
    h.secret.len = strlen(secret);
    h.rank = rank;
    h.world_size = 2;
    h.host = "testhost";
    h.pid = (uint32_t)getpid();
    h.role = role;
    send_msg(fd, MRD_FRAME_HELLO, &h.base);
}

/* Expects a HelloReply; returns accepted and its committed_seq. */
static int expect_hello_reply(int fd, uint64_t *committed, const char *reason_has)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_HELLO_REPLY);
    Meridian__V1__HelloReply *r = (Meridian__V1__HelloReply *)m;
    int ok = r->accepted;
    if (committed)
        *committed = r->committed_seq;
    if (reason_has)
        CHECK(r->reason && strstr(r->reason, reason_has));
    protobuf_c_message_free_unpacked(m, NULL);
    return ok;
}

static void expect_error(int fd, uint32_t code)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_ERROR);
    CHECK_EQ(((Meridian__V1__Error *)m)->code, code);
    protobuf_c_message_free_unpacked(m, NULL);
    expect_eof(fd);
}

static void expect_ack(int fd, uint64_t seq, int dup)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_ACK);
    CHECK_EQ(((Meridian__V1__Ack *)m)->seq, seq);
    CHECK_EQ(((Meridian__V1__Ack *)m)->duplicate, dup);
    protobuf_c_message_free_unpacked(m, NULL);
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
                               .correlation = seq * 1000 + (uint64_t)i, .device = 0,
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
        send_hello(fd, SECRET, 1, RUN, 0, 1);
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

static int64_t q1(const char *sql)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    int64_t v = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 2);
    g_meridiand = argv[1];
    atexit(kill_daemon_at_exit); /* a failed CHECK exits: leave no daemon behind */
    snprintf(g_dir, sizeof(g_dir), "/tmp/mrd-daemon-test-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_db, sizeof(g_db), "%s/t.db", g_dir);
    snprintf(g_log, sizeof(g_log), "%s/log", g_dir);
    snprintf(g_portfile, sizeof(g_portfile), "%s/port", g_dir);
    struct mrd_batch_builder_config bc = {.run_id = RUN, .rank = 0, .agent_instance = 1,
                                          .max_frame = MAX_FRAME, .target_events = 4096,
                                          .compress_level = 1};
    CHECK_OK(mrd_batch_builder_new(&bc, &g_b));

    start_daemon("20", 1);
    int good = cl_connect();
    send_hello(good, SECRET, 1, RUN, 0, 0);
    uint64_t committed = 99;
    CHECK_EQ(expect_hello_reply(good, &committed, NULL), 1);
    CHECK_EQ(committed, 0);
    uint64_t seq = 1;
    good_batch(good, seq++);

    bad_hello("wrong-secret-0123456", 1, RUN, "wrong run secret");
    good_batch(good, seq++);
    bad_hello("", 1, RUN, "missing run secret");
    good_batch(good, seq++);
    bad_hello(SECRET, 2, RUN, "protocol version 2");
    good_batch(good, seq++);
    bad_hello(SECRET, 1, "run-other", "is not this aggregator's run");
    good_batch(good, seq++);

    /* no Hello: a (small, valid) batch first */
    make_batch(seq, 3);
    bad_raw(0, g_frames[seq], g_frame_len[seq], 0);
    free(g_frames[seq]);
    g_frames[seq] = NULL;
    g_kernels -= 3;
    mrd_batch_builder_reset_unacked(g_b);
    good_batch(good, seq++);

    /* a frame of another protocol version, before and after the Hello */
    uint8_t v2[MRD_FRAME_HEADER_BYTES] = {2, MRD_FRAME_HELLO, 0, 0, 0, 0, 0, 0};
    bad_raw(0, v2, sizeof(v2), 0);
    v2[1] = MRD_FRAME_BATCH;
    bad_raw(1, v2, sizeof(v2), MRD_ERR_VERSION);
    good_batch(good, seq++);

    /* oversized: a header announcing max_frame + 1 bytes */
    uint8_t big[MRD_FRAME_HEADER_BYTES];
    struct mrd_frame_header bh = {.version = 1, .type = MRD_FRAME_BATCH,
                                  .length = MAX_FRAME + 1};
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
    send_hello(clk, SECRET, 1, RUN, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK, 0);
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
    close(clk);
    uint64_t last_before_restart = seq - 1;
    close(good);
    CHECK_EQ(stop_daemon(), 0);

    /* SIGTERM commits what was received: with commit-ms 60 s, nothing would commit on its
     * own, so the ack can only come from the shutdown's commit */
    start_daemon("60000", 1);
    good = cl_connect();
    send_hello(good, SECRET, 1, RUN, 0, 0);
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
    send_hello(good, SECRET, 1, RUN, 0, 0);
    CHECK_EQ(expect_hello_reply(good, &committed, NULL), 1);
    CHECK_EQ(committed, seq - 1);
    good_batch(good, seq++);
    send_all(good, g_frames[1], g_frame_len[1]);
    expect_ack(good, 1, 1);
    Meridian__V1__Goodbye gb = MERIDIAN__V1__GOODBYE__INIT;
    gb.last_seq = seq - 1;
    gb.batches_sent = seq - 1;
    send_msg(good, MRD_FRAME_GOODBYE, &gb.base);
    close(good);
    usleep(100000);
    CHECK_EQ(stop_daemon(), 0);

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
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    CHECK_EQ(system(cmd), 0);
    printf("aggregator_daemon: ok\n");
    return 0;
}
