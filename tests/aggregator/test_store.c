/* aggregator_store: the store on its own, driven the way the ingest loop drives it.
 *
 * Batches are built with the real builder, framed, decoded with the real decoder, and
 * submitted; the test then reads the database back with plain SQL and compares every
 * stored row with the events it generated (a differential check against the input), and
 * checks: duplicates are acknowledged as such, counted and not stored; string ids resolve
 * across batches and across a reopen (the cache is rebuilt from rank_strings); a reopen
 * continues the same run with the same timebase; a foreign run id is refused; agent
 * counters keep the largest value; Hello reports the committed seq; the global time is
 * exact int64 nanoseconds (no 256 ns grid of a double); string ids and committed seq are
 * per agent process of a rank; a rank whose agent process changed loses only its own
 * cached string ids (the other ranks' lookups still hit the cache) and never resolves
 * through its predecessor's; a string lookup's SQL error fails its batch (not stored
 * without the name). Schema versions and migrations: test_store_schema.c.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "check.h"
#include "check_sql.h"
#include "error.h"
#include "frame.h"
#include "store.h"
#include "test_store_schema.h"

static char g_db[256];
static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static size_t g_cache_max; /* 0 = default */

static struct mrd_store *open_store(const char *run_id)
{
    struct mrd_store_config cfg = {
        .db_path = g_db, .run_id = run_id, .commit_ms = 5, .string_cache_max = g_cache_max};
    struct mrd_store *s = NULL;
    CHECK_OK(mrd_store_open(&cfg, &s));
    return s;
}

static ProtobufCMessage *decode(uint8_t *frame, size_t len)
{
    struct mrd_frame_header h;
    CHECK_OK(mrd_frame_header_parse(frame, len, MRD_FRAME_DEFAULT_MAX, &h));
    CHECK_EQ(h.length + MRD_FRAME_HEADER_BYTES, len);
    ProtobufCMessage *m = NULL;
    CHECK_OK(mrd_frame_decode(&h, frame + MRD_FRAME_HEADER_BYTES, MRD_FRAME_DEFAULT_MAX, &m));
    free(frame);
    return m;
}

/* Submits the items in order, waits for their commit, checks they come back in order. */
static void run_items(struct mrd_store *s, struct mrd_store_item **items, int n)
{
    for (int i = 0; i < n; i++)
        mrd_store_submit(s, items[i]);
    CHECK_OK(mrd_store_drain(s));
    struct mrd_store_item *c = mrd_store_take_completions(s);
    for (int i = 0; i < n; i++) {
        CHECK(c == items[i]);
        CHECK_EQ(c->status, 0);
        c = c->next;
    }
    CHECK(c == NULL);
}

static struct mrd_store_item *batch_item(struct mrd_batch_builder *b, uint32_t rank, uint64_t seq)
{
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_batch_builder_finish(b, seq, &f, &n));
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_BATCH);
    CHECK(it != NULL);
    it->rank = rank;
    it->wire_bytes = (uint32_t)n;
    it->received_ns = 1000;
    it->msg = decode(f, n);
    return it;
}

static struct mrd_store_item *hello_of(uint32_t rank, uint64_t instance)
{
    /* a decoded message is what the store receives: encode + decode a real one */
    Meridian__V1__Hello src = MERIDIAN__V1__HELLO__INIT;
    Meridian__V1__GpuInfo gpu = MERIDIAN__V1__GPU_INFO__INIT, *gpus[1] = {&gpu};
    src.protocol_version = 1;
    src.run_id = "r";
    src.rank = rank;
    src.world_size = 4;
    src.host = "node7";
    src.pid = 4242;
    src.agent_instance = instance;
    src.n_gpus = 1;
    src.gpus = gpus;
    gpu.device = 0;
    gpu.uuid = "GPU-1234";
    gpu.name = "NVIDIA H200";
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_frame_encode(MRD_FRAME_HELLO, &src.base, 0, MRD_FRAME_DEFAULT_MAX, &f, &n));
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_HELLO);
    it->rank = rank;
    it->agent_instance = instance;
    it->received_ns = 500;
    it->msg = decode(f, n);
    return it;
}

static struct mrd_store_item *hello_item(uint32_t rank)
{
    return hello_of(rank, 0);
}

#define NK 3000
#define NN 500
static struct mrd_kernel g_k[NK];
static struct mrd_nccl_op g_n[NN];
static const char *g_kname[NK];
static const char *const names[] = {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "gemm_128x128",
                                    "elementwise_add", "softmax_fwd", "layernorm_bwd"};

/* kernels [from, to) and nccl ops [nfrom, nto) into the builder */
static void add_events(struct mrd_batch_builder *b, int from, int to, int nfrom, int nto)
{
    for (int i = from; i < to; i++) {
        struct mrd_kernel *k = &g_k[i];
        memset(k, 0, sizeof(*k));
        k->start = (int64_t)(rnd() % 1000000000000ULL);
        k->end = k->start + (int64_t)(rnd() % 5000000);
        k->correlation = rnd() % 100000000;
        k->device = (uint32_t)(rnd() % 8);
        k->stream = (uint32_t)(rnd() % 64);
        k->context = 1;
        g_kname[i] = names[rnd() % 5];
        k->name = mrd_batch_builder_intern(b, g_kname[i]);
        for (int d = 0; d < 3; d++) {
            k->grid[d] = (uint32_t)(rnd() % 4096);
            k->block[d] = (uint32_t)(rnd() % 1024);
        }
        k->shared_bytes = (uint32_t)(rnd() % 65536);
        k->registers = (uint32_t)(rnd() % 255);
        k->graph_id = (uint32_t)(rnd() % 3);
        CHECK_OK(mrd_batch_add_kernel(b, k));
    }
    for (int i = nfrom; i < nto; i++) {
        struct mrd_nccl_op *o = &g_n[i];
        memset(o, 0, sizeof(*o));
        o->op_id = (uint64_t)i + 1;
        o->start = (int64_t)(rnd() % 1000000000000ULL);
        o->end = o->start + 1000;
        o->comm_hash = rnd(); /* full 64 bits: stored as signed */
        o->is_p2p = (uint32_t)(i % 2);
        o->seq = o->is_p2p ? 0 : (uint64_t)i;
        o->func = mrd_batch_builder_intern(b, o->is_p2p ? "Send" : "AllReduce");
        o->datatype = mrd_batch_builder_intern(b, "ncclFloat32");
        o->algo = o->is_p2p ? 0 : mrd_batch_builder_intern(b, "RING");
        o->count = rnd() % 100000;
        o->bytes = o->count * 4;
        o->root = -1;
        o->peer = o->is_p2p ? 3 : -1;
        o->launch_id = rnd() % 1000;
        CHECK_OK(mrd_batch_add_nccl_op(b, o));
    }
}

static void check_kernels(sqlite3 *db, uint32_t rank, int n)
{
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT start_ns, end_ns, correlation_id, device, stream, context,"
                                " (SELECT value FROM strings WHERE id = name_id), grid_x, grid_y,"
                                " grid_z, block_x, block_y, block_z, shared_bytes, registers,"
                                " graph_id FROM kernels WHERE rank = ?1 ORDER BY rowid",
                                -1, &st, NULL),
             SQLITE_OK);
    sqlite3_bind_int(st, 1, (int)rank);
    int i = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        CHECK_LT(i, n);
        const struct mrd_kernel *k = &g_k[i];
        CHECK_EQ(sqlite3_column_int64(st, 0), k->start);
        CHECK_EQ(sqlite3_column_int64(st, 1), k->end);
        CHECK_EQ(sqlite3_column_int64(st, 2), (int64_t)k->correlation);
        CHECK_EQ(sqlite3_column_int64(st, 3), k->device);
        CHECK_EQ(sqlite3_column_int64(st, 4), k->stream);
        CHECK_EQ(sqlite3_column_int64(st, 5), k->context);
        CHECK_STREQ((const char *)sqlite3_column_text(st, 6), g_kname[i]);
        for (int d = 0; d < 3; d++) {
            CHECK_EQ(sqlite3_column_int64(st, 7 + d), k->grid[d]);
            CHECK_EQ(sqlite3_column_int64(st, 10 + d), k->block[d]);
        }
        CHECK_EQ(sqlite3_column_int64(st, 13), k->shared_bytes);
        CHECK_EQ(sqlite3_column_int64(st, 14), k->registers);
        CHECK_EQ(sqlite3_column_int64(st, 15), k->graph_id);
        i++;
    }
    sqlite3_finalize(st);
    CHECK_EQ(i, n);
}

static void check_nccl(sqlite3 *db, int n)
{
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT op_id, start_ns, end_ns, comm_hash, seq,"
                                " (SELECT value FROM strings WHERE id = func_id),"
                                " (SELECT value FROM strings WHERE id = algo_id),"
                                " algo_id IS NULL, bytes, root, peer, launch_id, is_p2p"
                                " FROM nccl_ops ORDER BY rowid",
                                -1, &st, NULL),
             SQLITE_OK);
    int i = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const struct mrd_nccl_op *o = &g_n[i];
        CHECK_EQ(sqlite3_column_int64(st, 0), (int64_t)o->op_id);
        CHECK_EQ(sqlite3_column_int64(st, 1), o->start);
        CHECK_EQ(sqlite3_column_int64(st, 2), o->end);
        CHECK_UEQ((uint64_t)sqlite3_column_int64(st, 3), o->comm_hash);
        if (o->is_p2p) {
            CHECK_EQ(sqlite3_column_type(st, 4), SQLITE_NULL);
            CHECK_STREQ((const char *)sqlite3_column_text(st, 5), "Send");
            CHECK_EQ(sqlite3_column_int(st, 7), 1);
        } else {
            CHECK_EQ(sqlite3_column_int64(st, 4), (int64_t)o->seq);
            CHECK_STREQ((const char *)sqlite3_column_text(st, 5), "AllReduce");
            CHECK_STREQ((const char *)sqlite3_column_text(st, 6), "RING");
        }
        CHECK_EQ(sqlite3_column_int64(st, 8), (int64_t)o->bytes);
        CHECK_EQ(sqlite3_column_int64(st, 9), o->root);
        CHECK_EQ(sqlite3_column_int64(st, 10), o->peer);
        CHECK_EQ(sqlite3_column_int64(st, 11), (int64_t)o->launch_id);
        CHECK_EQ(sqlite3_column_int64(st, 12), o->is_p2p);
        i++;
    }
    sqlite3_finalize(st);
    CHECK_EQ(i, n);
}

static struct mrd_store_item *goodbye_item(uint32_t rank, uint64_t kernels, uint64_t ring_drops)
{
    Meridian__V1__Goodbye gb = MERIDIAN__V1__GOODBYE__INIT;
    Meridian__V1__Counter c1 = MERIDIAN__V1__COUNTER__INIT, c2 = MERIDIAN__V1__COUNTER__INIT;
    Meridian__V1__Counter *cap[1] = {&c1}, *drop[1] = {&c2};
    c1.key = MRD_EV_KERNEL;
    c1.value = kernels;
    c2.key = MRD_DROP_RING_FULL;
    c2.value = ring_drops;
    gb.n_captured = 1;
    gb.captured = cap;
    gb.n_dropped = 1;
    gb.dropped = drop;
    gb.bytes_sent = 12345;
    uint8_t *f;
    size_t n;
    CHECK_OK(mrd_frame_encode(MRD_FRAME_GOODBYE, &gb.base, 0, MRD_FRAME_DEFAULT_MAX, &f, &n));
    struct mrd_store_item *it = mrd_store_item_new(MRD_STORE_GOODBYE);
    it->rank = rank;
    it->msg = decode(f, n);
    return it;
}

/* The global time is exact int64 ns: anchor_realtime + (monotonic now - anchor_monotonic)
 * never passes through a double (at ~1.8e18 ns a double holds only multiples of 256 ns,
 * which would quantize every clock probe reply). Consecutive calls, tens of ns apart, must
 * differ by less than 256 ns somewhere, and the values must not all be multiples of 256. */
static void check_global_now_exact(const struct mrd_store *s)
{
    int64_t prev = mrd_store_global_now(s), min_step = INT64_MAX;
    int off_grid = 0;
    for (int i = 0; i < 1000; i++) {
        int64_t v = mrd_store_global_now(s);
        CHECK_GE(v, prev); /* monotonic */
        if (v > prev && v - prev < min_step)
            min_step = v - prev;
        off_grid += v % 256 != 0;
        prev = v;
    }
    CHECK_LT(min_step, 256);
    CHECK_GT(off_grid, 0);
}

/* One kernel named `name` into builder b, finished as batch seq of (rank, instance). */
static struct mrd_store_item *named_batch(struct mrd_batch_builder *b, uint32_t rank,
                                          uint64_t instance, uint64_t seq, const char *name)
{
    struct mrd_kernel k = {.start = (int64_t)seq, .end = (int64_t)seq + 10};
    k.name = mrd_batch_builder_intern(b, name);
    CHECK_OK(mrd_batch_add_kernel(b, &k));
    struct mrd_store_item *it = batch_item(b, rank, seq);
    it->agent_instance = instance;
    return it;
}

static uint64_t hello_committed(struct mrd_store *s, uint32_t rank, uint64_t instance)
{
    struct mrd_store_item *it[1] = {hello_of(rank, instance)};
    run_items(s, it, 1);
    uint64_t c = it[0]->committed_seq;
    mrd_store_item_free(it[0]);
    return c;
}

static void run_one(struct mrd_store *s, struct mrd_store_item *item)
{
    struct mrd_store_item *it[1] = {item};
    run_items(s, it, 1);
    mrd_store_item_free(item);
}

static struct mrd_batch_builder *builder(const char *run, uint32_t rank, uint64_t instance)
{
    struct mrd_batch_builder_config bc = {.run_id = run,
                                          .rank = rank,
                                          .agent_instance = instance,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = 1000,
                                          .compress_level = 1};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    return b;
}

/* A Hello's committed-seq lookup (write.c, MRD__ST_MAX_SEQ_OWN) uses the (rank,
 * agent_instance, seq) index: without it, a restarted process's lookup walks every batch
 * of its rank. */
void check_seq_index(sqlite3 *db)
{
    sqlite3_stmt *st;
    int used = 0;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "EXPLAIN QUERY PLAN SELECT seq FROM batches WHERE rank = 1 AND"
                                " agent_instance = 2 ORDER BY seq DESC LIMIT 1",
                                -1, &st, NULL),
             SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text(st, 3);
        if (detail && strstr(detail, "batches_rank_instance"))
            used = 1;
    }
    sqlite3_finalize(st);
    CHECK(used);
}

/* Two agent processes of one rank, one after the other and back (the ingest refuses them
 * side by side): each one's string id 1 keeps its own string, and each one's HelloReply
 * committed_seq is its own highest batch, so the older one keeps its queued batches below
 * the newer one's numbers; a process with nothing committed gets the rank's highest. */
static void check_agent_processes(const char *dir)
{
    snprintf(g_db, sizeof(g_db), "%s/procs.db", dir);
    g_cache_max = 0;
    struct mrd_store *s = open_store("run-P");
    struct mrd_batch_builder *a = builder("run-P", 5, 0xA), *b = builder("run-P", 5, 0xB);
    CHECK_EQ(hello_committed(s, 5, 0xA), 0);
    run_one(s, named_batch(a, 5, 0xA, 100, "alpha_kernel")); /* defines A's id 1 */
    mrd_batch_builder_acked(a, 100);
    CHECK_EQ(hello_committed(s, 5, 0xB), 100); /* new process: moves past A's numbers */
    run_one(s, named_batch(b, 5, 0xB, 200, "beta_kernel")); /* defines B's id 1 */
    mrd_batch_builder_acked(b, 200);
    CHECK_EQ(hello_committed(s, 5, 0xA), 100); /* A is back: its own, not B's 200 */
    struct mrd_store_item *it = named_batch(a, 5, 0xA, 101, "alpha_kernel");
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0); /* id 1 is committed for A */
    run_one(s, it);
    CHECK_EQ(hello_committed(s, 5, 0xA), 101);
    CHECK_EQ(hello_committed(s, 5, 0xC), 200);
    mrd_store_close(s);
    /* and after a reopen (the cache loaded from rank_strings holds the latest process's) */
    g_cache_max = 2;
    s = open_store(NULL);
    CHECK_EQ(hello_committed(s, 5, 0xB), 200);
    it = named_batch(b, 5, 0xB, 201, "beta_kernel");
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0);
    run_one(s, it);
    it = named_batch(a, 5, 0xA, 102, "alpha_kernel");
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0);
    run_one(s, it);
    mrd_store_close(s);
    g_cache_max = 0;
    mrd_batch_builder_free(a);
    mrd_batch_builder_free(b);

    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    const char *by_name = "SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name_id"
                          " WHERE k.rank = 5 AND s.value = '%s'";
    char sql[256];
    snprintf(sql, sizeof(sql), by_name, "alpha_kernel");
    CHECK_EQ(check_sql_int(db, sql), 3);
    snprintf(sql, sizeof(sql), by_name, "beta_kernel");
    CHECK_EQ(check_sql_int(db, sql), 2);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM kernels WHERE name_id IS NULL"), 0);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM batches WHERE agent_instance = 10"), 3);
    check_seq_index(db);
    sqlite3_close(db);
}

/* One kernel per name into builder b, finished as batch seq of (rank, instance). */
static struct mrd_store_item *kernels_batch(struct mrd_batch_builder *b, uint32_t rank,
                                            uint64_t instance, uint64_t seq, const char *const *kn,
                                            int n)
{
    for (int i = 0; i < n; i++) {
        struct mrd_kernel k = {.start = (int64_t)seq * 100 + i, .end = (int64_t)seq * 100 + 50};
        k.name = mrd_batch_builder_intern(b, kn[i]);
        CHECK_OK(mrd_batch_add_kernel(b, &k));
    }
    struct mrd_store_item *it = batch_item(b, rank, seq);
    it->agent_instance = instance;
    return it;
}

/* The kernels of rank, in the order stored, are named want[0..n) (NULL: no name). */
static void check_kernel_names(sqlite3 *db, uint32_t rank, const char *const *want, int n)
{
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT s.value FROM kernels k LEFT JOIN strings s"
                                " ON s.id = k.name_id WHERE k.rank = ?1 ORDER BY k.rowid",
                                -1, &st, NULL),
             SQLITE_OK);
    sqlite3_bind_int(st, 1, (int)rank);
    int i = 0;
    for (; sqlite3_step(st) == SQLITE_ROW; i++) {
        CHECK_LT(i, n);
        const char *got = (const char *)sqlite3_column_text(st, 0);
        if (!want[i] || !got)
            CHECK(want[i] == got);
        else
            CHECK_STREQ(got, want[i]);
    }
    sqlite3_finalize(st);
    CHECK_EQ(i, n);
}

/* The string cache keeps its entries per agent process: rank 1's process restarting
 * leaves rank 0's cached ids in place (rank 0's next batch resolves every id from the
 * cache, without one rank_strings query), and the new process of rank 1 never resolves
 * through its predecessor's ids: an id only the old process defined names nothing, and
 * the new process's own binding of an id is stored even where the old process had bound
 * the same id to the same text. */
static void check_string_cache(const char *dir)
{
    static const char *const r0[] = {"r0_gemm", "r0_softmax"};
    static const char *const r1[] = {"r1_gemm", "r1_copy", "r1_norm"};
    static const char *const r1b[] = {"r1_restarted", "r1_copy"};
    snprintf(g_db, sizeof(g_db), "%s/cache.db", dir);
    g_cache_max = 0;
    struct mrd_store *s = open_store("run-C");
    struct mrd_batch_builder *a0 = builder("run-C", 0, 0xA0), *a1 = builder("run-C", 1, 0xA1);
    struct mrd_batch_builder *b1 = builder("run-C", 1, 0xB1);
    run_one(s, kernels_batch(a0, 0, 0xA0, 1, r0, 2));
    mrd_batch_builder_acked(a0, 1);
    run_one(s, kernels_batch(a1, 1, 0xA1, 1, r1, 3));
    /* rank 1's process restarts: ids 1 and 2 are its own now (2 is "r1_copy" again) */
    run_one(s, kernels_batch(b1, 1, 0xB1, 2, r1b, 2));
    mrd_batch_builder_acked(b1, 2);
    /* the new process's id 3, defined in a batch that never arrived (acknowledged to its
     * builder without being stored): the old process's id 3 must not stand in for it */
    static const char *const lost[] = {"b1_lost"};
    struct mrd_store_item *it = kernels_batch(b1, 1, 0xB1, 3, lost, 1);
    mrd_store_item_free(it);
    mrd_batch_builder_acked(b1, 3);
    CHECK_EQ(mrd_batch_builder_intern(b1, "b1_lost"), 3); /* A1's id 3 is "r1_norm" */
    it = kernels_batch(b1, 1, 0xB1, 4, lost, 1);
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0);
    run_one(s, it);

    struct mrd_store_stats st0, st1;
    mrd_store_get_stats(s, &st0);
    CHECK_GT(st0.string_hits, 0);
    it = kernels_batch(a0, 0, 0xA0, 2, r0, 2);
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0); /* ids 1, 2 committed */
    run_one(s, it);
    mrd_store_get_stats(s, &st1);
    CHECK_UEQ(st1.string_misses, st0.string_misses);
    CHECK_UEQ(st1.string_hits - st0.string_hits, 2);
    mrd_store_close(s);
    mrd_batch_builder_free(a0);
    mrd_batch_builder_free(a1);
    mrd_batch_builder_free(b1);

    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    const char *const want0[] = {"r0_gemm", "r0_softmax", "r0_gemm", "r0_softmax"};
    const char *const want1[] = {"r1_gemm", "r1_copy", "r1_norm", "r1_restarted", "r1_copy", NULL};
    check_kernel_names(db, 0, want0, 4);
    check_kernel_names(db, 1, want1, 6);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM rank_strings WHERE rank = 1"
                               " AND agent_instance = 177"), /* 0xB1 */
             2);
    CHECK_EQ(check_sql_int(db, "SELECT value FROM aggregator_counters"
                               " WHERE name = 'undefined_string_refs'"),
             1);
    sqlite3_close(db);
}

/* A string lookup that fails (a SQL error, here a rank_strings view whose row for the
 * looked-up id raises one) fails the batch: its transaction is rolled back and the item
 * completes with an error, instead of the id being taken as undefined and the kernel
 * stored without its name. */
static void check_string_lookup_error(const char *dir)
{
    snprintf(g_db, sizeof(g_db), "%s/lookup.db", dir);
    mrd_store_close(open_store("run-L"));
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db,
                          "ALTER TABLE rank_strings RENAME TO rs_real;"
                          "CREATE VIEW rank_strings AS SELECT rank, agent_instance, local_id,"
                          " CASE WHEN local_id = 1 THEN json('{') ELSE string_id END AS string_id"
                          " FROM rs_real;"
                          "CREATE TRIGGER rs_put INSTEAD OF INSERT ON rank_strings BEGIN"
                          " INSERT OR REPLACE INTO rs_real VALUES(NEW.rank, NEW.agent_instance,"
                          " NEW.local_id, NEW.string_id); END;"
                          "INSERT INTO strings(id, value) VALUES(40, 'k');"
                          "INSERT INTO rs_real VALUES(2, 78, 1, 40);",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);
    struct mrd_store *s = open_store("run-L");
    struct mrd_batch_builder *b = builder("run-L", 2, 78);
    mrd_store_item_free(named_batch(b, 2, 78, 1, "k")); /* defines id 1: taken as acked */
    mrd_batch_builder_acked(b, 1);
    struct mrd_store_item *it = named_batch(b, 2, 78, 2, "k");
    CHECK_EQ(((Meridian__V1__Batch *)it->msg)->n_strings, 0); /* id 1 only referenced */
    mrd_store_submit(s, it);
    (void)mrd_store_drain(s); /* its result covers failures while it waited only: racy */
    struct mrd_store_item *c = mrd_store_take_completions(s);
    CHECK(c == it && c->next == NULL);
    CHECK_EQ(c->status, -MRD_ERR_SQLITE);
    mrd_store_item_free(c);
    mrd_store_close(s);
    mrd_batch_builder_free(b);
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM kernels"), 0);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM batches"), 0);
    sqlite3_close(db);
}

int main(void)
{
    char dir[] = "/tmp/mrd-store-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(g_db, sizeof(g_db), "%s/t.db", dir);

    /* schema text and pragmas are exported for the benchmark's ceiling program */
    CHECK(strstr(mrd_store_schema_sql(), "CREATE TABLE IF NOT EXISTS kernels") != NULL);
    CHECK(strstr(mrd_store_pragmas(), "journal_mode=WAL") != NULL);
    /* ... and so is the SQL of its rows: every statement prepares against the schema, with
     * one parameter per column it names (the rank first for events) */
    sqlite3 *mem;
    CHECK_EQ(sqlite3_open(":memory:", &mem), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(mem, mrd_store_schema_sql(), NULL, NULL, NULL), SQLITE_OK);
    static const int nparams[] = {6, 1, 1, 4};
    for (int k = 0; k < MRD_EV__COUNT + 4; k++) {
        enum mrd_store_sql which = (enum mrd_store_sql)(k - MRD_EV__COUNT);
        const char *sql = k < MRD_EV__COUNT ? mrd_store_event_sql(k) : mrd_store_sql_text(which);
        if (k == 0) {
            CHECK(sql == NULL);
            continue;
        }
        sqlite3_stmt *ps = NULL;
        CHECK_EQ(sqlite3_prepare_v2(mem, sql, -1, &ps, NULL), SQLITE_OK);
        if (k < MRD_EV__COUNT)
            CHECK(strncmp(sql, "INSERT INTO ", 12) == 0 && strstr(sql, "(rank, ") != NULL);
        else
            CHECK_EQ(sqlite3_bind_parameter_count(ps), nparams[k - MRD_EV__COUNT]);
        sqlite3_finalize(ps);
    }
    CHECK(mrd_store_event_sql(MRD_EV__COUNT) == NULL);
    CHECK(mrd_store_sql_text((enum mrd_store_sql)99) == NULL);
    sqlite3_close(mem);

    struct mrd_store *s = open_store("run-A");
    CHECK_STREQ(mrd_store_run_id(s), "run-A");
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    int64_t now_rt = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec;
    int64_t g1 = mrd_store_global_now(s);
    CHECK_LT(llabs(g1 - now_rt), 1000000000LL); /* global time starts at realtime */
    check_global_now_exact(s);

    struct mrd_batch_builder_config bc = {.run_id = "run-A",
                                          .rank = 3,
                                          .agent_instance = 9,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = 100000,
                                          .compress_level = 1};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));

    /* batch 1: hello, then kernels 0..999 and nccl ops 0..199 */
    struct mrd_store_item *it[4];
    it[0] = hello_item(3);
    add_events(b, 0, 1000, 0, 200);
    it[1] = batch_item(b, 3, 1);
    run_items(s, it, 2);
    CHECK_EQ(it[0]->committed_seq, 0);
    CHECK_EQ(it[1]->duplicate, 0);
    CHECK_EQ(it[1]->seq, 1);
    mrd_store_item_free(it[0]);
    mrd_store_item_free(it[1]);
    mrd_batch_builder_acked(b, 1);

    /* batch 2 uses the same strings without defining them again */
    add_events(b, 1000, 2000, 200, 300);
    it[0] = batch_item(b, 3, 2);
    CHECK_EQ(((Meridian__V1__Batch *)it[0]->msg)->n_strings, 0);
    /* a resend of batch 2 in the same transaction: acknowledged as duplicate */
    uint8_t *f2;
    size_t n2;
    Meridian__V1__Batch *b2 = (Meridian__V1__Batch *)it[0]->msg;
    n2 = protobuf_c_message_get_packed_size(&b2->base);
    CHECK_OK(mrd_frame_encode(MRD_FRAME_BATCH, &b2->base, 1, MRD_FRAME_DEFAULT_MAX, &f2, &n2));
    it[1] = mrd_store_item_new(MRD_STORE_BATCH);
    it[1]->rank = 3;
    it[1]->msg = decode(f2, n2);
    run_items(s, it, 2);
    CHECK_EQ(it[0]->duplicate, 0);
    CHECK_EQ(it[1]->duplicate, 1);
    CHECK_EQ(it[1]->seq, 2);
    mrd_store_item_free(it[0]);
    mrd_store_item_free(it[1]);
    mrd_batch_builder_acked(b, 2);

    /* counters: goodbye keeps the largest value per counter */
    it[0] = goodbye_item(3, 2000, 7);
    it[1] = goodbye_item(3, 1500, 9);
    run_items(s, it, 2);
    mrd_store_item_free(it[0]);
    mrd_store_item_free(it[1]);
    struct mrd_store_stats st;
    mrd_store_get_stats(s, &st);
    CHECK_EQ(st.batches, 2);
    CHECK_EQ(st.duplicates, 1);
    CHECK_EQ(st.rows, 2300);
    int64_t anchor_probe = mrd_store_global_now(s);
    mrd_store_close(s);

    /* a foreign run id is refused */
    struct mrd_store_config bad = {.db_path = g_db, .run_id = "run-B"};
    struct mrd_store *sb = NULL;
    CHECK_EQ(mrd_store_open(&bad, &sb), -MRD_ERR_CONFIG);
    CHECK(sb == NULL);

    /* reopen (no run id given): same run, continuous timebase, strings from rank_strings;
     * with a string cache of 2 entries, most lookups miss and go to rank_strings */
    g_cache_max = 2;
    s = open_store(NULL);
    CHECK_STREQ(mrd_store_run_id(s), "run-A");
    int64_t g2 = mrd_store_global_now(s);
    CHECK_GE(g2, anchor_probe);
    CHECK_LT(g2 - anchor_probe, 5000000000LL);
    it[0] = hello_item(3);
    add_events(b, 2000, NK, 300, NN);
    it[1] = batch_item(b, 3, 3);
    CHECK_EQ(((Meridian__V1__Batch *)it[1]->msg)->n_strings, 0); /* all known: none defined */
    run_items(s, it, 2);
    CHECK_EQ(it[0]->committed_seq, 2);
    CHECK_EQ(it[1]->duplicate, 0);
    mrd_store_item_free(it[0]);
    mrd_store_item_free(it[1]);
    mrd_store_close(s);
    mrd_batch_builder_free(b);

    sqlite3 *db;
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    check_kernels(db, 3, NK);
    check_nccl(db, NN);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM batches"), 3);
    CHECK_EQ(check_sql_int(db, "SELECT sum(events) FROM batches"), NK + NN);
    CHECK_EQ(check_sql_int(db, "SELECT value FROM aggregator_counters WHERE name = 'duplicate_batches'"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM runs"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT version FROM schema_version"), MRD_STORE_SCHEMA_VERSION);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM strings"), 9); /* 5 kernels + 4 nccl strings */
    CHECK_EQ(check_sql_int(db, "SELECT value FROM agent_counters WHERE rank = 3 AND category = 'captured'"
                    " AND name = 'kernel'"),
             2000);
    CHECK_EQ(check_sql_int(db, "SELECT value FROM agent_counters WHERE rank = 3 AND category = 'dropped'"
                    " AND name = 'ring_full'"),
             9);
    CHECK_EQ(check_sql_int(db, "SELECT goodbye FROM ranks WHERE rank = 3"), 0); /* hello after goodbye */
    CHECK_EQ(check_sql_int(db, "SELECT pid FROM ranks WHERE rank = 3"), 4242);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM gpus WHERE rank = 3 AND uuid = 'GPU-1234'"), 1);
    CHECK_EQ(check_sql_int(db, "SELECT world_size FROM runs"), 4);
    /* the database as if written before a reboot of this host: the anchors are replaced
     * (global time restarts from realtime), the boot id updated, the run kept */
    CHECK_EQ(sqlite3_exec(db,
                          "UPDATE runs SET boot_id = 'another-boot', anchor_realtime_ns = 5,"
                          " anchor_monotonic_ns = 7",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);
    s = open_store("run-A");
    clock_gettime(CLOCK_REALTIME, &rt);
    now_rt = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec;
    CHECK_LT(llabs(mrd_store_global_now(s) - now_rt), 1000000000LL);
    mrd_store_close(s);
    CHECK_EQ(sqlite3_open(g_db, &db), SQLITE_OK);
    CHECK_GT(check_sql_int(db, "SELECT anchor_realtime_ns FROM runs"), 5);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM runs WHERE boot_id = 'another-boot'"), 0);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM runs WHERE run_id = 'run-A'"), 1);
    sqlite3_close(db);

    check_agent_processes(dir);
    check_string_cache(dir);
    check_string_lookup_error(dir);
    check_schema_versions(dir); /* test_store_schema.c */

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
    printf("aggregator_store: ok\n");
    return 0;
}
