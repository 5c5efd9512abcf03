/* aggregator_ingest: the ingest loop and the store in one process (the loop on its own
 * thread, clients on others), with caps small enough that each one is hit: the read
 * budget fits about two large frames at a time (connections wait for it), the writer
 * queue holds about one batch (reading stops and resumes on every commit), a connection
 * may have a quarter of it in flight. Eight clients pipeline twelve ~100 KiB batches each;
 * every batch must be acknowledged in order and stored exactly once, and the loop must
 * show that it did wait for budget and did pause. Also a TSan target for the loop/writer
 * handoff (build with -DMRD_TSAN=ON).
 */
#define SECRET "ingest-secret-0123456789"
#define RUN "run-I"

#include <pthread.h>

#include "client.h"
#include "ingest.h"
#include "ingest_internal.h"
#include "store.h"

#define NCLIENTS 8
#define NBATCH 12
#define MAXF (128u * 1024u)

struct client {
    pthread_t th;
    uint32_t rank;
    uint64_t events;
};

static void *client_main(void *arg)
{
    struct client *cl = arg;
    struct mrd_batch_builder_config bc = {.run_id = RUN, .rank = cl->rank,
                                          .agent_instance = cl->rank, .max_frame = MAXF,
                                          .target_events = 6000, .compress_level = 0};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    uint32_t name = mrd_batch_builder_intern(b, "ingest_kernel");
    uint64_t r = 0x243f6a8885a308d3ULL ^ cl->rank;
    uint8_t *f[NBATCH + 1];
    size_t n[NBATCH + 1];
    for (int s = 1; s <= NBATCH; s++) {
        for (;;) {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            struct mrd_kernel k = {.start = (int64_t)(r >> 20), .end = (int64_t)(r >> 20) + 5,
                                   .correlation = r, .name = name, .grid = {(uint32_t)r, 1, 1}};
            int rc = mrd_batch_add_kernel(b, &k);
            if (rc == -EAGAIN)
                break;
            CHECK_OK(rc);
            cl->events++;
        }
        CHECK_OK(mrd_batch_builder_finish(b, (uint64_t)s, &f[s], &n[s]));
        CHECK_GT(n[s], 64 * 1024); /* larger than the small read buffer */
    }
    int fd = cl_connect();
    send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, 0, cl->rank);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    for (int s = 1; s <= NBATCH; s++)
        send_all(fd, f[s], n[s]); /* pipelined: the acks come back in order below */
    for (int s = 1; s <= NBATCH; s++) {
        expect_ack(fd, (uint64_t)s, 0);
        free(f[s]);
    }
    close(fd);
    mrd_batch_builder_free(b);
    return NULL;
}

static void *loop_main(void *arg)
{
    CHECK_OK(mrd_ingest_run(arg));
    return NULL;
}

int main(void)
{
    setup_dirs("(in-process)", "ingest-test");
    struct mrd_store_config sc = {.db_path = g_db, .run_id = RUN, .commit_ms = 5};
    struct mrd_store *store;
    CHECK_OK(mrd_store_open(&sc, &store));
    struct mrd_ingest_config ic = {.host = "127.0.0.1",
                                   .max_frame = MAXF,
                                   .rbuf_budget = 1, /* raised to one max frame */
                                   .queue_cap = 1u << 20,
                                   .conn_queue_cap = 256u << 10,
                                   .secret = (const uint8_t *)SECRET,
                                   .secret_len = strlen(SECRET)};
    struct mrd_ingest *g;
    CHECK_OK(mrd_ingest_new(&ic, store, &g));
    g_port = mrd_ingest_port(g);
    CHECK_GT(g_port, 0);
    pthread_t loop;
    CHECK_OK(pthread_create(&loop, NULL, loop_main, g));

    struct client cl[NCLIENTS];
    uint64_t total = 0;
    for (int i = 0; i < NCLIENTS; i++) {
        cl[i] = (struct client){.rank = (uint32_t)i};
        CHECK_OK(pthread_create(&cl[i].th, NULL, client_main, &cl[i]));
    }
    for (int i = 0; i < NCLIENTS; i++) {
        CHECK_OK(pthread_join(cl[i].th, NULL));
        total += cl[i].events;
    }
    mrd_ingest_stop(g);
    CHECK_OK(pthread_join(loop, NULL));
    printf("ingest: %d clients x %d batches, %llu events; waits for read budget %llu, "
           "reading paused %llu times\n",
           NCLIENTS, NBATCH, (unsigned long long)total, (unsigned long long)g->budget_waits,
           (unsigned long long)g->global_pauses);
    CHECK_GT(g->budget_waits, 0);
    CHECK_GT(g->global_pauses, 0);
    CHECK_EQ(g->queued, 0);
    CHECK_EQ(g->rbig_used, 0);
    mrd_ingest_free(g);
    mrd_store_close(store);

    CHECK_EQ(q1("SELECT count(*) FROM batches"), NCLIENTS * NBATCH);
    CHECK_EQ(q1("SELECT count(*) FROM kernels"), (int64_t)total);
    CHECK_EQ(q1("SELECT count(DISTINCT rank) FROM kernels"), NCLIENTS);
    CHECK_EQ(q1("SELECT sum(events) FROM batches"), (int64_t)total);
    remove_dirs();
    printf("aggregator_ingest: ok\n");
    return 0;
}
