/* proto_batch_resend: batches survive reconnects. A tiny aggregator model keeps the
 * string table of committed batches only; every frame it receives (fresh, resent after
 * mrd_batch_builder_reset_unacked, or received alone because earlier ones were lost)
 * must resolve every string id it uses from its own definitions plus that table, to the
 * string the agent interned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testutil.h"

#define NSTR 8

struct agg {
    char *str[NSTR + 1]; /* committed definitions, by id */
};

static const char *const names[NSTR + 1] = {
    NULL, "sgemm_128x64", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "cudaLaunchKernel",
    "elementwise_add", "layer_norm_fwd", "AllReduce", "ncclFloat32", "RING"};

/* Decodes frame, checks every string id resolves; commits its definitions if asked.
 * Returns the number of definitions the frame carried. */
static size_t deliver(struct agg *a, const uint8_t *f, size_t len, int commit)
{
    Meridian__V1__Batch *m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
    const char *local[NSTR + 1] = {NULL};
    struct mrd_batch_cursor c;
    struct mrd_kernel k;
    struct mrd_api api;
    size_t n = m->n_strings, used = 0;

    for (size_t i = 0; i < m->n_strings; i++) {
        CHECK(m->strings[i]->id >= 1 && m->strings[i]->id <= NSTR);
        CHECK_STREQ(m->strings[i]->value, names[m->strings[i]->id]);
        local[m->strings[i]->id] = m->strings[i]->value;
    }
#define RESOLVE(id)                                                                            \
    do {                                                                                       \
        const char *v_ = local[id] ? local[id] : a->str[id];                                   \
        if (!v_)                                                                               \
            CHECK_FAIL_("batch %llu: string id %u unresolvable", (unsigned long long)m->seq,   \
                        (unsigned)(id));                                                       \
        CHECK_STREQ(v_, names[id]);                                                            \
        used++;                                                                                \
    } while (0)
    mrd_batch_cursor_init(&c, m);
    while (mrd_batch_next_kernel(&c, &k))
        RESOLVE(k.name);
    mrd_batch_cursor_init(&c, m);
    while (mrd_batch_next_api(&c, &api))
        RESOLVE(api.name);
    CHECK_GT(used, 0);
    if (commit)
        for (size_t i = 0; i < m->n_strings; i++)
            if (!a->str[m->strings[i]->id])
                a->str[m->strings[i]->id] = strdup(m->strings[i]->value);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return n;
}

static void add(struct mrd_batch_builder *b, const uint32_t *ids, int kernel_name, int api_name)
{
    struct mrd_kernel k = {.start = 100, .end = 200, .name = ids[kernel_name]};
    struct mrd_api a = {.start = 90, .end = 95, .name = ids[api_name]};

    CHECK_OK(mrd_batch_add_kernel(b, &k));
    CHECK_OK(mrd_batch_add_api(b, &a));
}

static void agg_free(struct agg *a)
{
    for (int i = 0; i <= NSTR; i++)
        free(a->str[i]);
    memset(a, 0, sizeof(*a));
}

int main(void)
{
    struct mrd_batch_builder_config cfg = {"resend", 4, 1, 0, 1024, 1};
    struct mrd_batch_builder *b;
    uint32_t ids[NSTR + 1] = {0};
    uint8_t *f[8];
    size_t len[8];
    struct agg a = {{NULL}};

    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    for (int i = 1; i <= NSTR; i++)
        CHECK_EQ(ids[i] = mrd_batch_builder_intern(b, names[i]), i);

    /* Connection 1: batches 1..3 sent. 1 commits and its ack arrives; 2 commits but the
     * connection drops before its ack; 3 is lost in flight. */
    add(b, ids, 1, 3);
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f[1], &len[1]));
    add(b, ids, 1, 2);
    add(b, ids, 4, 3);
    CHECK_OK(mrd_batch_builder_finish(b, 2, &f[2], &len[2]));
    add(b, ids, 4, 5);
    CHECK_OK(mrd_batch_builder_finish(b, 3, &f[3], &len[3]));
    CHECK_EQ(deliver(&a, f[1], len[1], 1), 2); /* defines 1 and 3 */
    mrd_batch_builder_acked(b, 1);
    /* 2 was built before 1's ack: it must define 1, 2, 3, 4 itself. */
    CHECK_EQ(deliver(&a, f[2], len[2], 1), 4);
    /* 3 likewise defines 4 (its first definer, 2, is unacknowledged) and 5. */

    /* Reconnect. The aggregator says committed_seq = 2: the agent acks it and resends 3
     * unchanged; 3 must resolve with 1 and 2 committed. */
    mrd_batch_builder_reset_unacked(b);
    mrd_batch_builder_acked(b, 2);
    CHECK_EQ(deliver(&a, f[3], len[3], 1), 2);
    mrd_batch_builder_acked(b, 3);

    /* New batches after all acks: nothing left to define, yet all resolve. */
    add(b, ids, 1, 5);
    CHECK_OK(mrd_batch_builder_finish(b, 4, &f[4], &len[4]));
    CHECK_EQ(deliver(&a, f[4], len[4], 1), 0);
    mrd_batch_builder_acked(b, 4);

    /* Connection 2 to an aggregator that lost everything unacknowledged: batches 5 and 6
     * use new strings 6 and 7; neither is acked; the aggregator receives only 6 after
     * the reconnect (5 dropped by the agent's queue cap). 6 must stand alone. */
    add(b, ids, 6, 7);
    CHECK_OK(mrd_batch_builder_finish(b, 5, &f[5], &len[5]));
    add(b, ids, 7, 6);
    add(b, ids, 8, 1);
    CHECK_OK(mrd_batch_builder_finish(b, 6, &f[6], &len[6]));
    mrd_batch_builder_reset_unacked(b);
    CHECK_EQ(deliver(&a, f[6], len[6], 1), 3); /* 6, 7, 8 */
    mrd_batch_builder_acked(b, 6);
    /* 5 arrives late (resent): still resolves, and commits nothing new. */
    CHECK_EQ(deliver(&a, f[5], len[5], 1), 2);
    mrd_batch_builder_acked(b, 5);
    /* Batch 7 after acks that arrived out of order: defines nothing. */
    add(b, ids, 8, 7);
    CHECK_OK(mrd_batch_builder_finish(b, 7, &f[7], &len[7]));
    CHECK_EQ(deliver(&a, f[7], len[7], 0), 0);

    /* A fresh aggregator model with only batch 1 committed: the resent frames 2 and 3
     * decode on their own (3 needs 4 from 2, which it defines itself). */
    agg_free(&a);
    CHECK_EQ(deliver(&a, f[1], len[1], 1), 2);
    CHECK_EQ(deliver(&a, f[3], len[3], 0), 2);
    CHECK_EQ(deliver(&a, f[2], len[2], 0), 4);

    for (int i = 1; i <= 7; i++)
        free(f[i]);
    agg_free(&a);
    mrd_batch_builder_free(b);
    printf("resend scenarios passed\n");
    return 0;
}
