/* agent_txqueue: the unacknowledged-batch queue against a trivial model (an array of
 * entries and a cursor index) under random pushes, sends, acks, reconnects (rewind),
 * committed_seq trims and removals; checks the byte cap policy (newest refused) and that
 * every entry leaves exactly once, through an ack callback or a removal. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "txqueue.h"

#define MAXE 4096

struct ment {
    uint64_t seq;
    uint32_t events;
    size_t len;
    uint32_t sent_count;
};

static struct ment model[MAXE];
static size_t mlen, mcursor; /* entries [0, mcursor) were written on this connection */
static uint64_t mbytes;
static uint64_t acked_events_q, acked_events_m;

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void model_pop_head(void)
{
    acked_events_m += model[0].events;
    mbytes -= model[0].len;
    memmove(model, model + 1, (mlen - 1) * sizeof model[0]);
    mlen--;
    if (mcursor > 0)
        mcursor--;
}

static void on_acked(uint64_t seq, uint32_t events, void *arg)
{
    (void)arg;
    CHECK_GT(mlen, 0);
    CHECK_UEQ(seq, model[0].seq); /* leaves oldest first, exactly the model's head */
    CHECK_UEQ(events, model[0].events);
    acked_events_q += events;
    model_pop_head(); /* the model follows, one entry per callback */
}

static void compare(const struct mrd_txq *q)
{
    CHECK_UEQ(q->count, mlen);
    CHECK_UEQ(q->bytes, mbytes);
    uint64_t ev = 0;
    size_t i = 0;
    const struct mrd_txq_entry *e = q->head;
    for (; e; e = e->next, i++) {
        CHECK_LT(i, mlen);
        CHECK_UEQ(e->seq, model[i].seq);
        CHECK_UEQ(e->len, model[i].len);
        CHECK_UEQ(e->sent_count, model[i].sent_count);
        CHECK((e == q->cursor) == (i == mcursor));
        ev += e->events;
    }
    CHECK_UEQ(i, mlen);
    CHECK_UEQ(q->events, ev);
    CHECK((q->cursor == NULL) == (mcursor == mlen));
    CHECK_UEQ(acked_events_q, acked_events_m);
}

int main(void)
{
    struct mrd_txq q;
    uint64_t cap = 100000, next_seq = 1000, refused = 0;
    mrd_txq_init(&q, cap);
    for (int op = 0; op < 200000; op++) {
        unsigned r = (unsigned)(rnd() % 100);
        if (r < 40) { /* push */
            size_t len = 1 + (size_t)(rnd() % 9000);
            uint32_t events = (uint32_t)(rnd() % 5000);
            uint8_t *frame = malloc(len);
            CHECK(frame != NULL);
            int e = mrd_txq_push(&q, next_seq, events, frame, len);
            CHECK_EQ(e, mbytes + len > cap ? -ENOBUFS : 0);
            if (e != 0) {
                free(frame);
                refused++;
            } else {
                CHECK_LT(mlen, MAXE);
                model[mlen++] = (struct ment){next_seq, events, len, 0};
                mbytes += len;
            }
            next_seq += 1 + rnd() % 2; /* gaps happen when the newest is refused */
        } else if (r < 70) {           /* write the next one */
            struct mrd_txq_entry *e = mrd_txq_peek_unsent(&q);
            CHECK((e == NULL) == (mcursor == mlen));
            if (e) {
                CHECK_UEQ(e->seq, model[mcursor].seq);
                mrd_txq_mark_sent(&q);
                model[mcursor++].sent_count++;
            }
        } else if (r < 90) { /* ack: a seq somewhere around what was written */
            uint64_t seq = mcursor ? model[rnd() % mcursor].seq : next_seq - 1;
            if (rnd() % 4 == 0)
                seq = next_seq + 5; /* larger than anything: still only the written ones */
            size_t expect = 0;
            while (expect < mcursor && model[expect].seq <= seq)
                expect++;
            CHECK_UEQ(mrd_txq_ack(&q, seq, on_acked, NULL), expect);
        } else if (r < 95) { /* reconnect */
            mrd_txq_rewind(&q);
            mcursor = 0;
            if (mlen && rnd() % 2) { /* HelloReply.committed_seq */
                uint64_t committed = model[rnd() % mlen].seq;
                size_t expect = 0;
                while (expect < mlen && model[expect].seq <= committed)
                    expect++;
                CHECK_UEQ(mrd_txq_drop_committed(&q, committed, on_acked, NULL), expect);
            }
        } else { /* remove the unsent entry at the cursor (too large for the peer) */
            uint32_t ev = mrd_txq_remove_cursor(&q);
            if (mcursor == mlen) {
                CHECK_UEQ(ev, 0);
            } else {
                CHECK_UEQ(ev, model[mcursor].events);
                mbytes -= model[mcursor].len;
                memmove(model + mcursor, model + mcursor + 1,
                        (mlen - mcursor - 1) * sizeof model[0]);
                mlen--;
            }
        }
        compare(&q);
    }
    CHECK_GT(refused, 0); /* the cap was exercised */
    CHECK_GT(acked_events_m, 0);
    mrd_txq_clear(&q);
    CHECK_UEQ(q.count, 0);
    CHECK(q.head == NULL && q.cursor == NULL);
    mrd_txq_clear(&q); /* twice is fine */
    return 0;
}
