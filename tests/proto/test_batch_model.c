/* proto_batch_model: the batch builder and reader against a trivial model, under random
 * operations: events of every kind with extreme values, new and repeated strings, batches
 * finished at random points or when the builder says -EAGAIN, acks of random finished
 * batches in random order (repeats and never-acked ones included), reconnects, drop
 * counters. Each finished frame is decoded and compared field by field with what the
 * model says was appended; its string definitions must be exactly the strings it uses
 * that no acknowledged batch had defined when first used, so every batch is resolvable
 * from its own definitions plus acknowledged ones, and never carries a needless one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testutil.h"

#define MAX_STR 400
#define MAX_EV 3000
#define MAX_BATCHES 4000

struct model {
    char str[MAX_STR + 1][24]; /* by id */
    uint32_t nstr;
    uint8_t committed[MAX_STR + 1]; /* defined by an acknowledged batch */
    uint8_t in_defs[MAX_STR + 1];   /* expected to be defined by the pending batch */
    uint8_t used[MAX_STR + 1];      /* used by the pending batch */
    int kind[MAX_EV];
    union mrd_any_event ev[MAX_EV];
    size_t nev;
    uint64_t dropped[MRD_DROP__COUNT];
    /* ids each finished batch defined, for acks */
    uint32_t *defs[MAX_BATCHES + 1];
    size_t ndefs[MAX_BATCHES + 1];
    uint64_t seq; /* last finished */
    uint8_t acked[MAX_BATCHES + 2];
    uint64_t next_ack;
};

static struct model M;
static struct {
    uint64_t defs, omitted, events, batches;
} stats;

static void check_batch(const uint8_t *f, size_t len, uint32_t max_frame, const char *run,
                        uint32_t rank)
{
    Meridian__V1__Batch *m = tu_decode_batch(f, len, max_frame);
    size_t cnt[MRD_EV__COUNT] = {0}, nd = 0, di = 0;
    struct mrd_batch_cursor cur[MRD_EV__COUNT];

    CHECK_STREQ(m->run_id, run);
    CHECK_EQ(m->rank, rank);
    CHECK_UEQ(m->seq, M.seq);
    CHECK_UEQ(m->agent_instance, 0xabcdef);
    for (int k = 1; k < MRD_EV__COUNT; k++)
        mrd_batch_cursor_init(&cur[k], m);
    for (size_t i = 0; i < M.nev; i++) {
        union mrd_any_event got;
        int k = M.kind[i];

        CHECK_EQ(tu_next(&cur[k], k, &got), 1);
        if (memcmp(&got, &M.ev[i], tu_event_size(k)) != 0)
            CHECK_FAIL_("event %zu (kind %s) differs after decode", i, mrd_event_kind_name(k));
        cnt[k]++;
    }
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        union mrd_any_event got;

        CHECK_UEQ(mrd_batch_count(m, k), cnt[k]);
        CHECK_EQ(tu_next(&cur[k], k, &got), 0);
    }
    /* Definitions: exactly the expected set, sorted, with the right values. */
    for (uint32_t id = 1; id <= M.nstr; id++) {
        if (!M.in_defs[id]) {
            /* not defined here: it must not be used here unless committed */
            CHECK(!M.used[id] || M.committed[id]);
            continue;
        }
        CHECK(M.used[id]);
        CHECK(di < m->n_strings);
        CHECK_EQ(m->strings[di]->id, id);
        CHECK_STREQ(m->strings[di]->value, M.str[id]);
        di++;
        nd++;
    }
    CHECK_UEQ(m->n_strings, nd);
    stats.defs += nd;
    for (uint32_t id = 1; id <= M.nstr; id++)
        stats.omitted += M.used[id] && !M.in_defs[id]; /* resolved by an acked batch */
    /* Counters: the non-zero cumulative ones, in reason order. */
    di = 0;
    for (int r = 1; r < MRD_DROP__COUNT; r++) {
        if (!M.dropped[r])
            continue;
        CHECK(di < m->n_dropped);
        CHECK_EQ(m->dropped[di]->key, r);
        CHECK_UEQ(m->dropped[di]->value, M.dropped[r]);
        di++;
    }
    CHECK_UEQ(m->n_dropped, di);
    protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void finish(struct mrd_batch_builder *b, uint32_t max_frame, const char *run,
                   uint32_t rank)
{
    uint8_t *f;
    size_t len, nd = 0;

    CHECK(M.seq < MAX_BATCHES);
    M.seq++;
    CHECK_OK(mrd_batch_builder_finish(b, M.seq, &f, &len));
    CHECK_ULE(len, MRD_FRAME_HEADER_BYTES + (size_t)max_frame);
    check_batch(f, len, max_frame, run, rank);
    free(f);
    M.defs[M.seq] = malloc((M.nstr + 1) * sizeof(uint32_t));
    CHECK(M.defs[M.seq] != NULL);
    for (uint32_t id = 1; id <= M.nstr; id++)
        if (M.in_defs[id])
            M.defs[M.seq][nd++] = id;
    M.ndefs[M.seq] = nd;
    memset(M.in_defs, 0, sizeof(M.in_defs));
    memset(M.used, 0, sizeof(M.used));
    M.nev = 0;
    CHECK_UEQ(mrd_batch_builder_pending(b), 0);
    stats.batches++;
}

static void random_string(uint64_t *s, char *out)
{
    size_t n = 1 + tu_below(s, 22);

    for (size_t i = 0; i < n; i++)
        out[i] = (char)('a' + tu_below(s, 3)); /* small alphabet: repeats happen */
    out[n] = '\0';
}

static void run(uint64_t seed, int ops)
{
    uint64_t s = seed;
    uint32_t max_frame = tu_below(&s, 2) ? MRD_FRAME_MIN_MAX + (uint32_t)tu_below(&s, 20000)
                                          : MRD_FRAME_DEFAULT_MAX;
    uint32_t target = 1 + (uint32_t)tu_below(&s, 700);
    struct mrd_batch_builder_config cfg = {"model-run", (uint32_t)seed, 0xabcdef, max_frame,
                                           target, (int)tu_below(&s, 3)};
    struct mrd_batch_builder *b;
    int64_t t = tu_i64(&s);
    uint32_t ids[MAX_STR];

    memset(&M, 0, sizeof(M));
    M.next_ack = 1;
    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    for (int op = 0; op < ops; op++) {
        uint64_t r = M.nstr ? tu_below(&s, 100) : 75; /* first a string */

        if (r < 70) {
            int kind = 1 + (int)tu_below(&s, MRD_EV__COUNT - 1);
            union mrd_any_event ev;
            uint32_t used[TU_MAX_STR_FIELDS];
            int rc, nu = 0;

            uint32_t w = (uint32_t)tu_below(&s, M.nstr), nw = 1 + (uint32_t)tu_below(&s, 4);

            /* a few neighbouring strings per event, so that most strings appear in only
             * some batches and acks of other batches must not commit them */
            for (uint32_t i = 0; i < M.nstr; i++)
                ids[i] = i + 1;
            tu_event(&s, kind, &t, ids + w, w + nw <= M.nstr ? nw : M.nstr - w, &ev);
            rc = tu_add(b, kind, &ev);
            if (rc == -EAGAIN) {
                CHECK(M.nev == target || M.nev > 0);
                finish(b, max_frame, cfg.run_id, cfg.rank);
                rc = tu_add(b, kind, &ev);
            }
            CHECK_OK(rc);
            CHECK(M.nev < MAX_EV);
            M.kind[M.nev] = kind;
            M.ev[M.nev++] = ev;
            stats.events++;
            /* the string ids this event uses */
            nu = tu_string_ids(kind, &ev, used);
            for (int i = 0; i < nu; i++) {
                if (!used[i])
                    continue;
                M.used[used[i]] = 1;
                if (!M.committed[used[i]])
                    M.in_defs[used[i]] = 1;
            }
            CHECK_UEQ(mrd_batch_builder_pending(b), M.nev);
        } else if (r < 80) {
            char str[24];
            uint32_t want = 0, got;

            random_string(&s, str);
            for (uint32_t id = 1; id <= M.nstr; id++)
                if (strcmp(M.str[id], str) == 0)
                    want = id;
            if (!want) {
                CHECK(M.nstr < MAX_STR);
                want = ++M.nstr;
                strcpy(M.str[want], str);
            }
            got = mrd_batch_builder_intern(b, str);
            CHECK_EQ(got, want);
        } else if (r < 87) {
            finish(b, max_frame, cfg.run_id, cfg.rank);
        } else if (r < 97) {
            /* ack: mostly the oldest unacknowledged batch (as on one connection), else
             * a random one (again, out of order, or one never finished) */
            uint64_t seq = 1 + tu_below(&s, M.seq + 2);

            if (tu_below(&s, 2)) {
                while (M.next_ack <= M.seq && M.acked[M.next_ack])
                    M.next_ack++;
                seq = M.next_ack;
            }
            if (seq <= MAX_BATCHES)
                M.acked[seq] = 1;

            mrd_batch_builder_acked(b, seq);
            if (seq <= M.seq)
                for (size_t i = 0; i < M.ndefs[seq]; i++)
                    M.committed[M.defs[seq][i]] = 1;
        } else if (r < 98) {
            mrd_batch_builder_reset_unacked(b);
        } else {
            for (int d = 1; d < MRD_DROP__COUNT; d++)
                if (tu_below(&s, 2))
                    M.dropped[d] += tu_below(&s, 1000);
            mrd_batch_builder_set_dropped(b, M.dropped);
        }
    }
    finish(b, max_frame, cfg.run_id, cfg.rank);
    for (uint64_t q = 1; q <= M.seq; q++)
        free(M.defs[q]);
    mrd_batch_builder_free(b);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 40;

    for (int i = 0; i < runs; i++)
        run(1000 + (uint64_t)i, 2500);
    printf("%d random runs: %llu events in %llu batches, %llu string definitions checked, "
           "%llu uses resolved by acknowledged batches\n",
           runs, (unsigned long long)stats.events, (unsigned long long)stats.batches,
           (unsigned long long)stats.defs, (unsigned long long)stats.omitted);
    /* the run must have exercised both sides of the definition rule */
    CHECK_GT(stats.defs, 1000);
    CHECK_GT(stats.omitted, 1000);
    return 0;
}
