/* aggregator_rank_held: two agent processes claiming one rank, against a real meridiand.
 *
 * Process A (rank 3) holds a live data connection; process B (same rank, another
 * agent_instance) is refused while A is connected (HelloReply accepted = false naming the
 * holder, one log line, counter rejected_rank_held), while a second connection of A itself
 * and B's clock connection are accepted. Once A closed, B gets the rank; then A is the one
 * refused until B leaves. Each process's string id 1 keeps its own string, and A, back
 * after B, is told its own committed seq (100), not B's higher one (200), so it keeps its
 * queued batches. `meridian report` then flags rank 3 with a warning naming both processes
 * (rank_processes: host and pid per agent_instance). Usage: test_aggregator_rank_held
 * PATH/TO/meridiand PATH/TO/meridian
 */
#define SECRET "rank-held-secret-42"
#define RUN    "run-H"

#include "client.h"

static struct mrd_batch_builder *builder(uint64_t instance)
{
    struct mrd_batch_builder_config bc = {.run_id = RUN,
                                          .rank = 3,
                                          .agent_instance = instance,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = 1000,
                                          .compress_level = 1};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    return b;
}

/* One kernel named `name` as batch seq; checks the Ack; returns the StringDefs it carried. */
static size_t send_named(int fd, struct mrd_batch_builder *b, uint64_t seq, const char *name)
{
    struct mrd_kernel k = {.start = (int64_t)seq, .end = (int64_t)seq + 10};
    k.name = mrd_batch_builder_intern(b, name);
    CHECK_OK(mrd_batch_add_kernel(b, &k));
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_batch_builder_finish(b, seq, &f, &n));
    struct mrd_frame_header h;
    CHECK_OK(mrd_frame_header_parse(f, n, MRD_FRAME_DEFAULT_MAX, &h));
    ProtobufCMessage *m = NULL;
    CHECK_OK(mrd_frame_decode(&h, f + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &m));
    size_t defs = ((Meridian__V1__Batch *)m)->n_strings;
    protobuf_c_message_free_unpacked(m, NULL);
    send_all(fd, f, n);
    free(f);
    expect_ack(fd, seq, 0);
    mrd_batch_builder_acked(b, seq);
    return defs;
}

/* A data Hello of (rank 3, instance): the open fd and *committed if accepted, else -1
 * (the reason must name the holder). */
static int data_hello(uint64_t instance, uint64_t *committed)
{
    int fd = cl_connect();
    send_hello_of(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 3, instance);
    if (expect_hello_reply(fd, committed, NULL))
        return fd;
    expect_eof(fd);
    return -1;
}

/* The holder just closed: the daemon sees its EOF within a few ms; retry for 2 s. */
static int data_hello_after_close(uint64_t instance, uint64_t *committed)
{
    for (int i = 0; i < 100; i++) {
        int fd = data_hello(instance, committed);
        if (fd >= 0)
            return fd;
        usleep(20000);
    }
    CHECK(!"the rank was not given free within 2 s of its holder's close");
    return -1;
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 3);
    setup_dirs(argv[1], "rank-held");
    const char *args[] = {"--run-id", RUN, "--commit-ms", "5", NULL};
    start_daemon_args(args);
    struct mrd_batch_builder *ba = builder(0xA), *bb = builder(0xB);
    uint64_t committed = 99;

    int a = data_hello(0xA, &committed);
    CHECK_GE(a, 0);
    CHECK_EQ(committed, 0);
    CHECK_EQ(send_named(a, ba, 100, "alpha_kernel"), 1);

    /* B while A is live: refused, with the holder named */
    int fd = cl_connect();
    send_hello_of(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, 3, 0xB);
    CHECK_EQ(expect_hello_reply(fd, NULL,
                                "held by another live agent process (instance "
                                "000000000000000a"),
             0);
    expect_eof(fd);
    /* A's own second data connection (a reconnect racing the old one) and B's clock
     * connection are accepted */
    int a2 = data_hello(0xA, &committed);
    CHECK_GE(a2, 0);
    CHECK_EQ(committed, 100);
    close(a2);
    fd = cl_connect();
    send_hello_of(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK,
                  3, 0xB);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    close(fd);

    /* A leaves: B gets the rank (nothing of its own committed: the rank's highest) */
    close(a);
    int b = data_hello_after_close(0xB, &committed);
    CHECK_EQ(committed, 100);
    CHECK_EQ(send_named(b, bb, 200, "beta_kernel"), 1); /* B's id 1 */
    CHECK_EQ(data_hello(0xA, NULL), -1);                /* now A is refused */

    /* B leaves, A is back: its own committed seq, and its id 1 is still its string */
    close(b);
    a = data_hello_after_close(0xA, &committed);
    CHECK_EQ(committed, 100);
    CHECK_EQ(send_named(a, ba, 101, "alpha_kernel"), 0); /* id 1 committed: not defined */
    close(a);
    CHECK_EQ(stop_daemon(), 0);

    CHECK_EQ(q1("SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name_id"
                " WHERE s.value = 'alpha_kernel'"),
             2);
    CHECK_EQ(q1("SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name_id"
                " WHERE s.value = 'beta_kernel'"),
             1);
    CHECK_EQ(q1("SELECT value FROM aggregator_counters WHERE name = 'rejected_rank_held'"), 2);
    const char *log = slurp(g_log);
    CHECK(strstr(log, "(rank 3): rank 3 is held by another live agent process") != NULL);
    /* the report flags rank 3: its data came from two processes, kept apart */
    char cmd[512], out[16384], want[256];
    snprintf(cmd, sizeof(cmd), "%s report %s 2>&1", argv[2], g_db);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    CHECK_EQ(pclose(p), 0);
    snprintf(want, sizeof(want),
             "rank 3: data from 2 agent processes (instance 000000000000000a on testhost pid "
             "%d: 2 batches; instance 000000000000000b on testhost pid %d: 1 batches); kept "
             "apart in batches.agent_instance",
             (int)getpid(), (int)getpid());
    if (!strstr(out, want))
        CHECK_FAIL_("the report lacks '%s':\n%s", want, out);

    mrd_batch_builder_free(ba);
    mrd_batch_builder_free(bb);
    remove_dirs();
    printf("aggregator_rank_held: ok\n");
    return 0;
}
