/* agent_peer_limit: an aggregator's smaller frame limit never loses queued events when the
 * builder cannot take the limit at once for want of memory (resplit.c).
 *
 * The flusher's batch side (builder, unacknowledged queue, re-split) driven directly, no
 * thread, no socket: a batch of EVENTS incompressible kernel events is queued under the
 * 4 MiB default, then a HelloReply announces MRD_FRAME_MIN_MAX (4 KiB).
 *   1. The builder's limit change fails twice with -ENOMEM (mrd__tx_test_limit_nomem): the
 *      builder keeps its old limit, the oversized frame stays queued (same seq, same
 *      events) while write_batches' step (mrd__tx_oversized) retries, nothing is counted
 *      as lost. Before, the frame was dropped as too_large at the first pass.
 *   2. The third attempt succeeds: the frame is re-split; the queue holds every event
 *      (the queued batch plus the pending ones) in frames the aggregator takes, none lost.
 *   3. The cases where a frame is still dropped: an announcement below the builder's
 *      floor, and a limit change that keeps failing for MRD_TX_LIMIT_RETRIES passes (the
 *      loop asks for POLLOUT while a frame is unsent: unbounded retries spun the flusher
 *      at full CPU and held every later frame back): every event it held is counted as
 *      too_large, none silently, and only after the last retry.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flusher_int.h"
#include "frame.h"

#define EVENTS  2000
#define PENDING 10

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void add_kernel(struct mrd_flusher *f, uint64_t corr)
{
    union mrd_any_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kernel.start = (int64_t)(rnd() >> 2);
    ev.kernel.end = ev.kernel.start + (int64_t)(rnd() & 0xffffff);
    ev.kernel.correlation = corr;
    ev.kernel.device = 1;
    ev.kernel.stream = (uint32_t)rnd();
    ev.kernel.grid[0] = (uint32_t)rnd();
    ev.kernel.block[0] = (uint32_t)rnd();
    CHECK_OK(mrd__tx_add_event(f, MRD_EV_KERNEL, &ev, 1));
}

static uint64_t lost(void)
{
    uint64_t captured[MRD_EV__COUNT] = {0}, dropped[MRD_DROP__COUNT] = {0}, n = 0;
    mrd_agent_counters(captured, dropped);
    for (int i = 0; i < MRD_DROP__COUNT; i++)
        n += dropped[i];
    return n;
}

static uint64_t dropped_as(int reason)
{
    uint64_t captured[MRD_EV__COUNT] = {0}, dropped[MRD_DROP__COUNT] = {0};
    mrd_agent_counters(captured, dropped);
    return dropped[reason];
}

static struct mrd_agent_config cfg = {.run_id = "peerlimit", .rank = 0};
static struct mrd_tx_shared sh = {.err_lock = PTHREAD_MUTEX_INITIALIZER};

static struct mrd_flusher *flusher_new(void)
{
    struct mrd_flusher *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->id.cfg = &cfg;
    f->sh = &sh;
    atomic_store(&f->rec_fd, -1);
    mrd_txq_init(&f->q, 1ull << 30);
    struct mrd_batch_builder_config bc = {.run_id = cfg.run_id,
                                          .agent_instance = 7,
                                          .max_frame = MRD_FRAME_DEFAULT_MAX,
                                          .target_events = 16384,
                                          .compress_level = 1};
    CHECK_OK(mrd_batch_builder_new(&bc, &f->b));
    f->next_seq = f->first_seq = 1;
    f->lim.peer_max_frame = f->lim.builder_max_frame = f->lim.builder_max_ever =
        MRD_FRAME_DEFAULT_MAX;
    return f;
}

static void flusher_free(struct mrd_flusher *f)
{
    mrd_txq_clear(&f->q);
    mrd_batch_builder_free(f->b);
    free(f);
}

/* Every unsent frame: does the peer take it? Returns the events they hold (and marks them
 * sent); *all_fit 0 when one would be refused. */
static uint64_t walk_unsent(struct mrd_flusher *f, int *all_fit)
{
    uint64_t events = 0;
    struct mrd_txq_entry *en;
    *all_fit = 1;
    while ((en = mrd_txq_peek_unsent(&f->q)) != NULL) {
        if (!mrd__tx_frame_fits(f, en))
            *all_fit = 0;
        events += en->events;
        mrd_txq_mark_sent(&f->q);
    }
    return events;
}

int main(void)
{
    struct mrd_flusher *f = flusher_new();
    for (uint64_t i = 1; i <= EVENTS; i++)
        add_kernel(f, i);
    CHECK_OK(mrd__tx_finish_batch(f, 1));
    for (uint64_t i = 1; i <= PENDING; i++)
        add_kernel(f, EVENTS + i); /* pending under the old limit */
    CHECK_UEQ(f->q.events, EVENTS);
    struct mrd_txq_entry *en = mrd_txq_peek_unsent(&f->q);
    CHECK(en != NULL);
    uint64_t seq = en->seq;
    CHECK_UEQ(lost(), 0);

    /* 1. the limit change fails for want of memory, twice */
    atomic_store(&mrd__tx_test_limit_nomem, 2);
    mrd__tx_apply_peer_limit(f, MRD_FRAME_MIN_MAX, 2);
    CHECK_UEQ(f->lim.peer_max_frame, MRD_FRAME_MIN_MAX);
    CHECK_UEQ(f->lim.builder_max_frame, MRD_FRAME_DEFAULT_MAX); /* the old limit, kept */
    CHECK(!mrd__tx_frame_fits(f, en));                          /* the peer would refuse it */
    CHECK_EQ(mrd__tx_oversized(f, 3), 1);                       /* retried, failed: kept */
    en = mrd_txq_peek_unsent(&f->q);
    CHECK(en != NULL);
    CHECK_UEQ(en->seq, seq);
    CHECK_UEQ(en->events, EVENTS);
    CHECK_UEQ(f->q.events, EVENTS);
    CHECK_UEQ(lost(), 0);
    CHECK_UEQ(atomic_load(&mrd__tx_test_limit_nomem), 0);

    /* 2. the next attempt succeeds: re-split, nothing lost */
    CHECK_EQ(mrd__tx_oversized(f, 4), 1);
    CHECK_UEQ(f->lim.builder_max_frame, MRD_FRAME_MIN_MAX);
    CHECK_UEQ(lost(), 0);
    CHECK_UEQ(f->q.events + mrd_batch_builder_pending(f->b), EVENTS + PENDING);
    if (mrd_batch_builder_pending(f->b) > 0)
        CHECK_OK(mrd__tx_finish_batch(f, 5));
    int all_fit = 0;
    CHECK_UEQ(walk_unsent(f, &all_fit), EVENTS + PENDING);
    CHECK_EQ(all_fit, 1);
    flusher_free(f);

    /* 3. an announcement below the builder's floor: dropped, but counted */
    f = flusher_new();
    for (uint64_t i = 1; i <= EVENTS; i++)
        add_kernel(f, i);
    CHECK_OK(mrd__tx_finish_batch(f, 1));
    mrd__tx_apply_peer_limit(f, 1000, 2);
    CHECK_UEQ(f->lim.builder_max_frame, MRD_FRAME_MIN_MAX);
    en = mrd_txq_peek_unsent(&f->q);
    CHECK(en != NULL && !mrd__tx_frame_fits(f, en));
    CHECK_EQ(mrd__tx_oversized(f, 3), 0);
    CHECK_UEQ(dropped_as(MRD_DROP_TOO_LARGE), EVENTS);
    CHECK_UEQ(f->q.events, 0);
    flusher_free(f);

    /* 3b. the limit change never succeeds: kept for MRD_TX_LIMIT_RETRIES - 1 passes, then
     * dropped and counted; the next oversized frame gets its own retries */
    f = flusher_new();
    for (uint64_t i = 1; i <= EVENTS; i++)
        add_kernel(f, i);
    CHECK_OK(mrd__tx_finish_batch(f, 1));
    atomic_store(&mrd__tx_test_limit_nomem, 1000000);
    mrd__tx_apply_peer_limit(f, MRD_FRAME_MIN_MAX, 2);
    CHECK_UEQ(f->lim.builder_max_frame, MRD_FRAME_DEFAULT_MAX);
    uint64_t before = dropped_as(MRD_DROP_TOO_LARGE);
    for (unsigned i = 1; i < MRD_TX_LIMIT_RETRIES; i++) {
        CHECK_EQ(mrd__tx_oversized(f, 3), 1);
        CHECK_UEQ(f->q.events, EVENTS);
    }
    CHECK_EQ(mrd__tx_oversized(f, 3), 0);
    CHECK_UEQ(dropped_as(MRD_DROP_TOO_LARGE) - before, EVENTS);
    CHECK_UEQ(f->q.events, 0);
    CHECK_UEQ(f->lim.limit_failures, 0);
    atomic_store(&mrd__tx_test_limit_nomem, 0);
    flusher_free(f);
    return 0;
}
