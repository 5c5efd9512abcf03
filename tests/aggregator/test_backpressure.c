/* aggregator_backpressure: when the writer is behind, meridiand stops reading and its
 * memory stays bounded; when the writer catches up, it reads again.
 *
 * Phase A: --queue-mb 1; the test holds SQLite's write lock from its own connection, so
 * the writer is stuck on its first insert (as behind a slow disk). One client pushes 400
 * batches of 4096 kernels (about 230 MB once decoded) as fast as the socket takes them.
 * The socket must stop taking them (the daemon stopped reading) and the daemon's resident
 * memory must stay far below what reading everything would need. Then the lock is
 * released and SIGTERM sent: exactly the batches that were read are committed and
 * acknowledged (in order), and the daemon exits 0.
 * Phase B: restarted with --queue-mb 1 on the same database: the client sends the rest;
 * every batch is acknowledged in order and stored once, so reading resumed after every
 * pause. Usage: test_aggregator_backpressure PATH/TO/meridiand
 */
#define SECRET "bp-secret-0123456789"
#define RUN    "run-BP"

#include <poll.h>

#include "client.h"

#define NB     400
#define EVENTS 4096

static uint8_t *g_f[NB + 1];
static size_t g_n[NB + 1];

static void build_batches(void)
{
    struct mrd_batch_builder_config bc = {.run_id = RUN,
                                          .rank = 5,
                                          .agent_instance = 1,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = EVENTS,
                                          .compress_level = 1};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    uint32_t name = mrd_batch_builder_intern(b, "bp_kernel");
    uint64_t r = 88172645463325252ULL;
    for (int s = 1; s <= NB; s++) {
        for (int i = 0; i < EVENTS; i++) {
            r ^= r << 13; /* xorshift: values that do not compress away */
            r ^= r >> 7;
            r ^= r << 17;
            int64_t t = (int64_t)s * 100000000 + i * 1000 + (int64_t)(r % 1000);
            struct mrd_kernel k = {.start = t,
                                   .end = t + (int64_t)(r >> 40),
                                   .correlation = r >> 20,
                                   .name = name,
                                   .grid = {(uint32_t)r, 1, 1},
                                   .block = {128, 1, 1}};
            CHECK_OK(mrd_batch_add_kernel(b, &k));
        }
        CHECK_OK(mrd_batch_builder_finish(b, (uint64_t)s, &g_f[s], &g_n[s]));
    }
    mrd_batch_builder_free(b);
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static int connect_hello(uint64_t *committed)
{
    int fd = cl_connect();
    send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 5);
    CHECK_EQ(expect_hello_reply(fd, committed, NULL), 1);
    return fd;
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 2);
    setup_dirs(argv[1], "backpressure-test");
    build_batches();

    /* phase A */
    const char *a[] = {"--run-id", RUN, "--queue-mb", "1", NULL};
    start_daemon_args(a);
    uint64_t committed = 0;
    int fd = connect_hello(&committed);
    CHECK_EQ(committed, 0);
    sqlite3 *lock;
    CHECK_EQ(sqlite3_open(g_db, &lock), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int sndbuf = 65536;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    size_t total = 0;
    for (int i = 1; i <= NB; i++)
        total += g_n[i];
    printf("phase A: %d batches, %zu bytes on the wire\n", NB, total);
    int s = 1, blocked = 0;
    size_t off = 0;
    while (s <= NB && !blocked) {
        ssize_t w = send(fd, g_f[s] + off, g_n[s] - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            if (off == g_n[s]) {
                s++;
                off = 0;
            }
            continue;
        }
        CHECK(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 1000) == 0)
            blocked = 1; /* a full second without room: the daemon is not reading */
    }
    CHECK(blocked);
    CHECK_LT(s, NB / 2);
    long kb = rss_kb(g_pid);
    printf("phase A: socket blocked after %d of %d batches; meridiand VmRSS %ld kB\n", s - 1, NB,
           kb);
    CHECK_LT(kb, 120 * 1024); /* reading all would hold > 200 MB of decoded batches */
    CHECK_EQ(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK); /* writer goes on */
    sqlite3_close(lock);
    CHECK_OK(kill(g_pid, SIGTERM));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    uint64_t acked = 0;
    for (;;) {
        ProtobufCMessage *m = NULL;
        int t = recv_msg(fd, &m);
        if (t == 0)
            break;
        CHECK_EQ(t, MRD_FRAME_ACK);
        CHECK_EQ(((Meridian__V1__Ack *)m)->seq, acked + 1);
        CHECK_EQ(((Meridian__V1__Ack *)m)->duplicate, 0);
        acked++;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    close(fd);
    int status;
    CHECK_EQ(waitpid(g_pid, &status, 0), g_pid);
    g_pid = 0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_GE(acked, 1);
    CHECK_LT(acked, (uint64_t)s);
    CHECK_EQ(q1("SELECT count(*) FROM batches"), (int64_t)acked);
    CHECK_EQ(q1("SELECT count(*) FROM kernels"), (int64_t)acked * EVENTS);
    printf("phase A: %llu batches read, committed by SIGTERM and acknowledged\n",
           (unsigned long long)acked);

    /* phase B: the rest, through many pauses and resumes */
    const char *b[] = {"--queue-mb", "1", NULL};
    start_daemon_args(b);
    fd = connect_hello(&committed);
    CHECK_EQ(committed, acked);
    for (int i = (int)acked + 1; i <= NB; i++)
        send_all(fd, g_f[i], g_n[i]);
    for (uint64_t want = acked + 1; want <= NB; want++)
        expect_ack(fd, want, 0);
    close(fd);
    CHECK_EQ(stop_daemon(), 0);
    CHECK_EQ(q1("SELECT count(*) FROM batches"), NB);
    CHECK_EQ(q1("SELECT count(DISTINCT seq) FROM batches WHERE rank = 5"), NB);
    CHECK_EQ(q1("SELECT count(*) FROM kernels"), (int64_t)NB * EVENTS);
    CHECK(strstr(slurp(g_log), "writer behind") != NULL);

    for (int i = 1; i <= NB; i++)
        free(g_f[i]);
    remove_dirs();
    printf("aggregator_backpressure: ok\n");
    return 0;
}
