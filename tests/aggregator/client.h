/* Helpers for the aggregator tests that drive a real meridiand over raw sockets: start
 * and stop the daemon, connect, send and receive frames, expect replies, query the
 * database. Header-only (static functions); one test program per process. The including
 * file defines SECRET and calls setup_dirs(argv[1]) first. */
#ifndef MRD_TEST_AGGREGATOR_CLIENT_H
#define MRD_TEST_AGGREGATOR_CLIENT_H

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

#include "auth.h"
#include "batch.h"
#include "check.h"
#include "check_sql.h"
#include "error.h"
#include "frame.h"

static char g_dir[64], g_db[128], g_log[128], g_portfile[128];
static const char *g_meridiand;
static pid_t g_pid;
static uint16_t g_port;

static inline void kill_daemon_at_exit(void)
{
    if (g_pid > 0 && waitpid(g_pid, NULL, WNOHANG) == 0) {
        kill(g_pid, SIGKILL);
        waitpid(g_pid, NULL, 0);
    }
}

/* Starts meridiand on 127.0.0.1:0 with MERIDIAN_SECRET=SECRET, --db, --port-file, --verbose
 * and the NULL-terminated extra arguments; waits (10 s at most) for the port file. */
static inline void start_daemon_args(const char *const *extra)
{
    unlink(g_portfile);
    g_pid = fork();
    CHECK(g_pid >= 0);
    if (g_pid == 0) {
        int fd = open(g_log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("MERIDIAN_SECRET", SECRET, 1);
        const char *argv[32] = {g_meridiand,   "--db",        g_db,       "--listen",
                                "127.0.0.1:0", "--port-file", g_portfile, "--verbose"};
        int n = 8;
        for (int i = 0; extra && extra[i] && n < 31; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(g_meridiand, (char *const *)argv);
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

static inline int stop_daemon(void)
{
    CHECK_OK(kill(g_pid, SIGTERM));
    int status = 0;
    CHECK_EQ(waitpid(g_pid, &status, 0), g_pid);
    g_pid = 0;
    CHECK(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static inline int cl_connect(void)
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

static inline void send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        CHECK(w > 0);
        b += w;
        n -= (size_t)w;
    }
}

static inline void send_msg(int fd, enum mrd_frame_type t, const ProtobufCMessage *m)
{
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_frame_encode(t, m, 0, MRD_FRAME_DEFAULT_MAX, &f, &n));
    send_all(fd, f, n);
    free(f);
}

static inline int recv_all(int fd, void *p, size_t n)
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

/* One frame read ahead by send_hello_of and not yet taken (a refusal instead of a
 * Challenge): recv_msg returns it first. */
static int g_pushed_fd = -1, g_pushed_type;
static ProtobufCMessage *g_pushed;

/* Next frame: its type and decoded message (caller frees), or 0 at EOF. */
static inline int recv_msg(int fd, ProtobufCMessage **m)
{
    if (g_pushed && g_pushed_fd == fd) {
        *m = g_pushed;
        g_pushed = NULL;
        g_pushed_fd = -1;
        return g_pushed_type;
    }
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

static inline void expect_eof(int fd)
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

/* The world size test Hellos announce (the per-secret connection cap follows it). */
static uint32_t g_world_size = 2;

/* A Hello (no secret: protocol version 2) of agent process `instance`. */
static inline void send_bare_hello(int fd, uint32_t version, const char *run, int role,
                                   uint32_t rank, uint64_t instance)
{
    Meridian__V1__Hello h = MERIDIAN__V1__HELLO__INIT;
    h.agent_instance = instance;
    h.protocol_version = version;
    h.run_id = (char *)run;
    h.rank = rank;
    h.world_size = g_world_size;
    h.host = "testhost";
    h.pid = (uint32_t)getpid();
    h.role = role;
    send_msg(fd, MRD_FRAME_HELLO, &h.base);
}

/* Expects a Challenge; copies its nonce (MRD_AUTH_NONCE_BYTES) to nonce. */
static inline void expect_challenge(int fd, uint8_t nonce[MRD_AUTH_NONCE_BYTES])
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_CHALLENGE);
    const Meridian__V1__Challenge *ch = (const Meridian__V1__Challenge *)m;
    CHECK_UEQ(ch->nonce.len, MRD_AUTH_NONCE_BYTES);
    memcpy(nonce, ch->nonce.data, MRD_AUTH_NONCE_BYTES);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* The Proof of `secret` over nonce for the claim (an empty secret sends an empty Proof). */
static inline void send_proof(int fd, const char *secret, const uint8_t *nonce, const char *run,
                              int role, uint32_t rank, uint64_t instance)
{
    struct mrd_auth_claim claim = {
        .run_id = run, .role = (uint32_t)role, .rank = rank, .agent_instance = instance};
    uint8_t mac[MRD_AUTH_MAC_BYTES];
    Meridian__V1__Proof p = MERIDIAN__V1__PROOF__INIT;
    if (secret[0]) {
        CHECK_OK(mrd_auth_proof((const uint8_t *)secret, strlen(secret), nonce,
                                MRD_AUTH_NONCE_BYTES, &claim, mac));
        p.mac.data = mac;
        p.mac.len = sizeof(mac);
    }
    send_msg(fd, MRD_FRAME_PROOF, &p.base);
}

/* What an agent does: a Hello of agent process `instance`, then, when meridiand answers
 * with a Challenge, the Proof of `secret` over it. Anything else meridiand answered (a
 * refusal of the Hello itself) is left for the next recv_msg. */
static inline void send_hello_of(int fd, const char *secret, uint32_t version, const char *run,
                                 int role, uint32_t rank, uint64_t instance)
{
    send_bare_hello(fd, version, run, role, rank, instance);
    ProtobufCMessage *m = NULL;
    int type = recv_msg(fd, &m);
    if (type != MRD_FRAME_CHALLENGE) {
        g_pushed = m;
        g_pushed_type = type;
        g_pushed_fd = fd;
        return;
    }
    const Meridian__V1__Challenge *ch = (const Meridian__V1__Challenge *)m;
    CHECK_UEQ(ch->nonce.len, MRD_AUTH_NONCE_BYTES);
    send_proof(fd, secret, ch->nonce.data, run, role, rank, instance);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Reads one frame of any version: its header into *h and its payload (caller frees), or
 * NULL at EOF. */
static inline uint8_t *recv_raw(int fd, struct mrd_frame_header *h)
{
    uint8_t hb[MRD_FRAME_HEADER_BYTES];
    if (recv_all(fd, hb, sizeof(hb)) < 0)
        return NULL;
    h->version = hb[0];
    h->type = hb[1];
    h->flags = (uint16_t)(hb[2] | hb[3] << 8);
    h->length =
        (uint32_t)hb[4] | (uint32_t)hb[5] << 8 | (uint32_t)hb[6] << 16 | (uint32_t)hb[7] << 24;
    CHECK(h->length < (1u << 20));
    uint8_t *p = malloc(h->length + 1);
    CHECK_OK(recv_all(fd, p, h->length));
    return p;
}

static inline void send_hello(int fd, const char *secret, uint32_t version, const char *run,
                              int role, uint32_t rank)
{
    send_hello_of(fd, secret, version, run, role, rank, 0);
}

/* Expects a HelloReply; returns accepted and its committed_seq. */
static inline int expect_hello_reply(int fd, uint64_t *committed, const char *reason_has)
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

static inline void expect_error(int fd, uint32_t code)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_ERROR);
    CHECK_EQ(((Meridian__V1__Error *)m)->code, code);
    protobuf_c_message_free_unpacked(m, NULL);
    expect_eof(fd);
}

static inline void expect_ack(int fd, uint64_t seq, int dup)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_ACK);
    CHECK_EQ(((Meridian__V1__Ack *)m)->seq, seq);
    CHECK_EQ(((Meridian__V1__Ack *)m)->duplicate, dup);
    protobuf_c_message_free_unpacked(m, NULL);
}

static inline int64_t q1(const char *sql)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    int64_t v = check_sql_int(db, sql);
    sqlite3_close(db);
    return v;
}

static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Creates the test's directory and file names; registers the daemon's cleanup. */
static inline void setup_dirs(const char *meridiand, const char *name)
{
    g_meridiand = meridiand;
    snprintf(g_dir, sizeof(g_dir), "/tmp/mrd-%s-XXXXXX", name);
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_db, sizeof(g_db), "%s/t.db", g_dir);
    snprintf(g_log, sizeof(g_log), "%s/log", g_dir);
    snprintf(g_portfile, sizeof(g_portfile), "%s/port", g_dir);
    atexit(kill_daemon_at_exit); /* a failed CHECK exits: leave no daemon behind */
}

static inline void remove_dirs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    CHECK_EQ(system(cmd), 0);
}

#endif
