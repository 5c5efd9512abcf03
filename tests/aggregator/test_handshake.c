/* aggregator_handshake: protocol version 2 against a real meridiand over loopback: the
 * challenge and response, the caps, and the refusals the log must show.
 *
 *  1. replay: a Hello and Proof recorded from a connection that was accepted, sent again
 *     by a second process on a new connection, meet a new nonce: refused as a wrong
 *     secret, a Batch sent after them is not stored; the secret is in none of the bytes;
 *  2. a version 1 Hello (which carried the secret) is refused in version 1's own framing,
 *     with a reason that says to upgrade;
 *  3. 16 ranks from one address, data and clock connections all opened before any Hello
 *     (32 unauthenticated at once), all accepted, every batch acknowledged;
 *  4. a second claimant of a live rank proves the secret and is still refused (code
 *     MRD_ERR_RANK_HELD), its pipelined Batch is not stored, the log names both; `meridian
 *     replay` of that rank reports the rank as held, not a wrong secret;
 *  5. the per-address cap: 64 silent connections from 127.0.0.1 are held, the 65th is
 *     closed with a log line, while 127.0.0.2 still gets in;
 *  6. the per-secret cap: 2 x world size 16 + 8 = 40 authenticated connections, the 41st
 *     refused (code MRD_ERR_CONN_LIMIT) with a log line;
 *  7. a Batch after the Goodbye on the same connection: refused, not stored, not acked;
 *  8. a connection that ends inside a Batch frame: logged with what was cut;
 *  9. 25 refusals within a second: at most 10 lines, then "N more refusals suppressed".
 * Usage: test_aggregator_handshake PATH/TO/meridiand PATH/TO/meridian
 */
#define SECRET "handshake-secret-0123"
#define RUN    "run-HS"

#include <poll.h>
#include <sys/wait.h>

#include "client.h"

#define RANKS 16

static const char *g_meridian;

static struct mrd_batch_builder *builder(uint32_t rank, uint64_t instance)
{
    struct mrd_batch_builder_config bc = {.run_id = RUN,
                                          .rank = rank,
                                          .agent_instance = instance,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = 1000,
                                          .compress_level = 0};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    return b;
}

/* One batch of rank's process `instance` holding one kernel (caller frees *f). */
static void batch_frame(uint32_t rank, uint64_t instance, uint64_t seq, uint8_t **f, size_t *n)
{
    struct mrd_batch_builder *b = builder(rank, instance);
    struct mrd_kernel k = {.start = (int64_t)seq, .end = (int64_t)seq + 10};
    k.name = mrd_batch_builder_intern(b, "handshake_kernel");
    CHECK_OK(mrd_batch_add_kernel(b, &k));
    CHECK_OK(mrd_batch_builder_finish(b, seq, f, n));
    mrd_batch_builder_free(b);
}

static void send_batch(int fd, uint32_t rank, uint64_t instance, uint64_t seq)
{
    uint8_t *f;
    size_t n;
    batch_frame(rank, instance, seq, &f, &n);
    send_all(fd, f, n);
    free(f);
}

static int connect_from(const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in me = {.sin_family = AF_INET};
    CHECK_EQ(inet_pton(AF_INET, src, &me.sin_addr), 1);
    CHECK_OK(bind(fd, (struct sockaddr *)&me, sizeof(me)));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_OK(connect(fd, (struct sockaddr *)&a, sizeof(a)));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Expects a refusing HelloReply with `code` and a reason containing `has`, then EOF. */
static void expect_refusal(int fd, uint32_t code, const char *has)
{
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_HELLO_REPLY);
    const Meridian__V1__HelloReply *r = (const Meridian__V1__HelloReply *)m;
    CHECK_EQ(r->accepted, 0);
    CHECK_UEQ(r->code, code);
    if (!r->reason || !strstr(r->reason, has))
        CHECK_FAIL_("reason '%s' lacks '%s'", r->reason ? r->reason : "", has);
    protobuf_c_message_free_unpacked(m, NULL);
    expect_eof(fd);
}

/* Waits (5 s at most) until the daemon's log holds `text`; returns the log. */
static const char *log_has(const char *text)
{
    for (int i = 0; i < 500; i++) {
        const char *log = slurp(g_log);
        if (strstr(log, text))
            return log;
        usleep(10000);
    }
    CHECK_FAIL_("the log never showed '%s':\n%s", text, slurp(g_log));
    return NULL;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static int contains(const uint8_t *p, size_t n, const char *s)
{
    return memmem(p, n, s, strlen(s)) != NULL;
}

/* 1: a recorded Hello and Proof, replayed by another process on a new connection. */
static void replayed_proof(void)
{
    uint8_t nonce[MRD_AUTH_NONCE_BYTES], *hello, *proof;
    size_t hello_len, proof_len;
    Meridian__V1__Hello h = MERIDIAN__V1__HELLO__INIT;
    h.protocol_version = MRD_PROTOCOL_VERSION;
    h.run_id = RUN;
    h.rank = 4;
    h.world_size = RANKS;
    h.host = "testhost";
    h.pid = (uint32_t)getpid();
    h.agent_instance = 0x44;
    CHECK_OK(
        mrd_frame_encode(MRD_FRAME_HELLO, &h.base, 0, MRD_FRAME_DEFAULT_MAX, &hello, &hello_len));
    int fd = cl_connect();
    send_all(fd, hello, hello_len);
    expect_challenge(fd, nonce);
    struct mrd_auth_claim claim = {.run_id = RUN, .role = 0, .rank = 4, .agent_instance = 0x44};
    uint8_t mac[MRD_AUTH_MAC_BYTES];
    CHECK_OK(
        mrd_auth_proof((const uint8_t *)SECRET, strlen(SECRET), nonce, sizeof(nonce), &claim, mac));
    Meridian__V1__Proof p = MERIDIAN__V1__PROOF__INIT;
    p.mac.data = mac;
    p.mac.len = sizeof(mac);
    CHECK_OK(
        mrd_frame_encode(MRD_FRAME_PROOF, &p.base, 0, MRD_FRAME_DEFAULT_MAX, &proof, &proof_len));
    send_all(fd, proof, proof_len);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1); /* the original is accepted */
    /* the secret never travels: it is in neither frame the agent sent */
    CHECK(!contains(hello, hello_len, SECRET));
    CHECK(!contains(proof, proof_len, SECRET));
    close(fd); /* rank 4 is free again: only the proof stands between the replay and it */

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* the second process: what it recorded, and a batch */
        int r = cl_connect();
        send_all(r, hello, hello_len);
        send_all(r, proof, proof_len);
        send_batch(r, 4, 0x44, 777);
        uint8_t again[MRD_AUTH_NONCE_BYTES];
        expect_challenge(r, again);
        CHECK(memcmp(again, nonce, sizeof(nonce)) != 0); /* fresh per connection */
        expect_refusal(r, MRD_ERR_AUTH, "wrong run secret");
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free(hello);
    free(proof);
    log_has("(rank 4): wrong run secret (its Proof does not match this connection's challenge)");
}

/* 2: a version 1 Hello, the secret in clear as version 1 sent it. */
static void version1_hello(void)
{
    Meridian__V1__Hello h = MERIDIAN__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.run_id = RUN;
    h.rank = 9;
    uint8_t buf[512];
    size_t n = protobuf_c_message_pack(&h.base, buf + MRD_FRAME_HEADER_BYTES);
    uint8_t *q = buf + MRD_FRAME_HEADER_BYTES + n;
    *q++ = 3 << 3 | 2; /* field 3 (v1: secret), length-delimited */
    *q++ = (uint8_t)strlen(SECRET);
    memcpy(q, SECRET, strlen(SECRET));
    q += strlen(SECRET);
    struct mrd_frame_header fh = {.version = 1,
                                  .type = MRD_FRAME_HELLO,
                                  .length = (uint32_t)(q - buf - MRD_FRAME_HEADER_BYTES)};
    mrd_frame_header_write(buf, &fh);
    int fd = cl_connect();
    send_all(fd, buf, (size_t)(q - buf));
    struct mrd_frame_header rh;
    uint8_t *payload = recv_raw(fd, &rh);
    CHECK(payload != NULL);
    CHECK_EQ(rh.version, 1); /* answered in its own framing, so that it can read why */
    CHECK_EQ(rh.type, MRD_FRAME_HELLO_REPLY);
    rh.version = MRD_PROTOCOL_VERSION; /* the same message in both versions */
    ProtobufCMessage *m = NULL;
    CHECK_OK(mrd_frame_decode(&rh, payload, MRD_FRAME_DEFAULT_MAX, &m));
    const Meridian__V1__HelloReply *r = (const Meridian__V1__HelloReply *)m;
    CHECK_EQ(r->accepted, 0);
    CHECK_UEQ(r->code, MRD_ERR_VERSION);
    CHECK(r->reason && strstr(r->reason, "protocol version 1, this aggregator speaks 2: upgrade "
                                         "libmeridian.so / meridian to the aggregator's version"));
    protobuf_c_message_free_unpacked(m, NULL);
    free(payload);
    expect_eof(fd);
    log_has("upgrade libmeridian.so / meridian to the aggregator's version");
}

/* `meridian replay` of rank 2 (held): its exit status and everything it printed. */
static int replay_held_rank(char *out, size_t cap)
{
    char cmd[1024], secret_file[160];
    snprintf(secret_file, sizeof(secret_file), "%s/secret", g_dir);
    FILE *f = fopen(secret_file, "w");
    CHECK(f != NULL);
    fputs(SECRET "\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "%s replay --aggregator 127.0.0.1:%u --run-id %s --secret-file %s --ranks 1 "
             "--rank-base 2 --world-size %d --events 10 --retry-ms 600 2>&1",
             g_meridian, g_port, RUN, secret_file, RANKS);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 3);
    g_meridian = argv[2];
    setup_dirs(argv[1], "handshake");
    g_world_size = RANKS;
    const char *args[] = {"--run-id", RUN, "--commit-ms", "5", NULL};
    start_daemon_args(args);

    replayed_proof();
    version1_hello();

    /* 3: 16 ranks from one address, both connections each, all connected first */
    int data[RANKS], clk[RANKS];
    for (int r = 0; r < RANKS; r++) {
        data[r] = cl_connect();
        clk[r] = cl_connect();
    }
    for (int r = 0; r < RANKS; r++) {
        send_hello_of(data[r], SECRET, MRD_PROTOCOL_VERSION, RUN, 0, (uint32_t)r, 0x100u + r);
        send_hello_of(clk[r], SECRET, MRD_PROTOCOL_VERSION, RUN,
                      MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK, (uint32_t)r, 0x100u + r);
    }
    for (int r = 0; r < RANKS; r++) {
        CHECK_EQ(expect_hello_reply(data[r], NULL, NULL), 1);
        CHECK_EQ(expect_hello_reply(clk[r], NULL, NULL), 1);
        send_batch(data[r], (uint32_t)r, 0x100u + r, 1000 + (uint64_t)r);
        expect_ack(data[r], 1000 + (uint64_t)r, 0);
    }

    /* 4: a second claimant of live rank 2: proven, refused, its batch not stored */
    int b = cl_connect();
    send_hello_of(b, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 2, 0xB2);
    send_batch(b, 2, 0xB2, 5000); /* pipelined: it does not wait for the HelloReply */
    expect_refusal(b, MRD_ERR_RANK_HELD, "rank 2 is held by another live agent process");
    log_has("(rank 2): rank 2 is held by another live agent process (instance 0000000000000102");
    char out[8192];
    CHECK_NE(replay_held_rank(out, sizeof(out)), 0);
    if (!strstr(out, "rank 2 is held by another live agent process") ||
        !strstr(out, "rank held by another live agent process") || strstr(out, "secret"))
        CHECK_FAIL_("meridian replay of a held rank said:\n%s", out);

    /* 5: the per-address cap (64 by default) */
    int silent[64];
    for (int i = 0; i < 64; i++)
        silent[i] = cl_connect();
    int over = cl_connect();
    uint8_t byte;
    CHECK_EQ(recv(over, &byte, 1, 0), 0); /* closed at once, without a word */
    close(over);
    log_has("64 connections from 127.0.0.1 without a valid Hello yet, the per-address limit");
    int other = connect_from("127.0.0.2"); /* another address is not held back */
    send_hello_of(other, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 20, 0x120);
    CHECK_EQ(expect_hello_reply(other, NULL, NULL), 1);
    for (int i = 0; i < 64; i++)
        close(silent[i]);

    /* 6: the per-secret cap: 33 authenticated now, 7 more fill 2 x 16 + 8 */
    int more[7];
    for (int i = 0; i < 7; i++) {
        more[i] = cl_connect();
        send_hello_of(more[i], SECRET, MRD_PROTOCOL_VERSION, RUN,
                      MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK, (uint32_t)i, 0x100u + i);
        CHECK_EQ(expect_hello_reply(more[i], NULL, NULL), 1);
    }
    int capped = cl_connect();
    send_hello_of(capped, SECRET, MRD_PROTOCOL_VERSION, RUN,
                  MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK, 7, 0x107);
    expect_refusal(capped, MRD_ERR_CONN_LIMIT,
                   "40 connections hold the run secret already, the limit (2 x world size 16 + 8)");
    log_has("the limit (2 x world size 16 + 8)");
    for (int i = 0; i < 7; i++)
        close(more[i]);
    close(other);

    /* 7: a Batch after the Goodbye on the same connection */
    Meridian__V1__Goodbye gb = MERIDIAN__V1__GOODBYE__INIT;
    send_msg(data[0], MRD_FRAME_GOODBYE, &gb.base);
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(data[0], &m), MRD_FRAME_ACK);
    CHECK_EQ(((Meridian__V1__Ack *)m)->goodbye, 1);
    protobuf_c_message_free_unpacked(m, NULL);
    send_batch(data[0], 0, 0x100, 6000);
    expect_error(data[0], MRD_ERR_MALFORMED); /* no Ack before it */
    log_has("(rank 0): Batch seq 6000 after the Goodbye on this connection: not stored, not "
            "acknowledged");

    /* 8: the connection ends inside a Batch frame */
    uint8_t *f;
    size_t n;
    batch_frame(1, 0x101, 7000, &f, &n);
    send_all(data[1], f, n / 2);
    close(data[1]);
    char cut[128];
    snprintf(cut, sizeof(cut), "connection ended inside a Batch frame (%zu of %zu bytes)", n / 2,
             n);
    log_has(cut);
    free(f);
    for (int r = 2; r < RANKS; r++)
        close(data[r]);
    for (int r = 0; r < RANKS; r++)
        close(clk[r]);

    /* 9: 25 refusals within a second ('G' of "GET" read as a protocol version): ten
     * lines, then the count of the rest */
    usleep(1100000); /* a fresh second of the refusal log */
    const char *http = "GET / HTTP/1.1\r\n\r\n";
    int junk[25];
    for (int i = 0; i < 25; i++) {
        junk[i] = cl_connect();
        send_all(junk[i], http, strlen(http));
    }
    for (int i = 0; i < 25; i++)
        close(junk[i]);
    const char *log = log_has("more refusals suppressed (at most 10 logged a second)");
    CHECK_LE(count_of(log, "protocol version 71, this aggregator speaks 2"), 10);
    CHECK_GE(count_of(log, "protocol version 71, this aggregator speaks 2"), 1);

    CHECK_EQ(stop_daemon(), 0);
    log = slurp(g_log);
    CHECK(strstr(log, SECRET) == NULL);
    CHECK_EQ(q1("SELECT count(*) FROM batches WHERE seq IN (777, 5000, 6000, 7000)"), 0);
    CHECK_EQ(q1("SELECT count(*) FROM batches WHERE agent_instance = 178"), 0); /* 0xB2 */
    CHECK_EQ(q1("SELECT count(*) FROM batches WHERE seq BETWEEN 1000 AND 1015"), RANKS);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_auth'"), 1);
    CHECK_GE(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_version'"), 2);
    CHECK_GE(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_rank_held'"), 2);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = "
                "'connections_over_address_limit'"),
             1);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_secret_limit'"), 1);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_after_goodbye'"), 1);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'connections_truncated'"), 1);
    remove_dirs();
    printf("aggregator_handshake: ok\n");
    return 0;
}
