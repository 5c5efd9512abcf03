/* Frame limit of the aggregator: applying HelloReply.max_frame_bytes, and re-splitting a
 * queued batch frame that is larger than it.
 *
 * Where it sits: the flusher thread. On every HelloReply the batch builder takes the
 * announced limit (mrd__tx_apply_peer_limit), so every batch built from then on fits it.
 * A batch built before the limit was known (before the first HelloReply the agent builds
 * for the 4 MiB default) or for an earlier aggregator with a larger limit may still be in
 * the unacknowledged queue: when the data connection reaches such a frame, it is checked
 * as the aggregator checks it (mrd__tx_frame_fits: the payload within the limit, and
 * decompressed within MRD_FRAME_MAX_EXPANSION times it: a compressed frame can pass the
 * first and fail the second); one that would be refused, mrd__tx_resplit takes out of the
 * queue, decodes and appends its events again to the builder, which finishes them into
 * batches within the limit under new sequence numbers. Policy, chosen so that `meridiand
 * --max-frame` below 4 MiB loses nothing:
 *  - the old sequence number is never sent: this aggregator cannot have committed that
 *    frame (it refuses frames over its limit, and committed_seq has already trimmed what
 *    any earlier one committed), so the new batches duplicate nothing;
 *  - string ids are the builder's own, so the new batches define the strings they use;
 *  - the record file keeps the original frame only (its events are in the file once);
 *  - an event that cannot fit even an empty batch is dropped and counted (too_large); a
 *    frame that cannot be decoded, or a re-added event the builder refuses for another
 *    reason, is dropped and counted (unencodable); a new batch the queue cannot take is
 *    queue_full as usual.
 *  - when the builder cannot use the peer's limit (an announcement below
 *    MRD_FRAME_MIN_MAX, which no aggregator may make), oversized frames are dropped and
 *    counted as too_large instead: re-splitting could not make them fit;
 *  - when changing the builder's limit failed for want of memory (finishing the batch
 *    pending under the old limit: -ENOMEM), the builder keeps the old limit and nothing
 *    is dropped: an oversized frame stays queued (and the connection waits) while each
 *    pass of the flusher loop tries the change again (mrd__tx_oversized); once it
 *    succeeds the frame is re-split as above. After MRD_TX_LIMIT_RETRIES failing passes
 *    in a row the frame is dropped and counted (too_large), as before this retry existed:
 *    the loop asks for POLLOUT while a frame is unsent, so an unbounded retry would spin
 *    the flusher at full CPU and hold every later frame back for the rest of the run.
 *
 * Workload: rare (the first batches of a run against an aggregator with a small limit,
 * or after reconnecting to a different one). One frame (up to MERIDIAN_BATCH_EVENTS events)
 * is re-split per pass of the flusher loop, which drains the rings between two: a queue
 * full of old frames never holds the drain up for more than one frame's decoding and
 * re-encoding (milliseconds); capture threads never wait for it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "error.h"
#include "flusher_int.h"
#include "frame.h"

_Atomic int mrd__tx_test_limit_nomem;

void mrd__tx_apply_peer_limit(struct mrd_flusher *f, uint32_t announced, int64_t now)
{
    uint32_t limit = announced ? announced : MRD_FRAME_DEFAULT_MAX;
    f->lim.peer_max_frame = limit;
    if (limit < MRD_FRAME_MIN_MAX)
        limit = MRD_FRAME_MIN_MAX; /* not a valid announcement: the builder's floor */
    if (limit == f->lim.builder_max_frame)
        return;
    int e, fault = atomic_load_explicit(&mrd__tx_test_limit_nomem, memory_order_relaxed);
    if (fault > 0) { /* tests: this change fails as an allocation would */
        atomic_store_explicit(&mrd__tx_test_limit_nomem, fault - 1, memory_order_relaxed);
        e = -ENOMEM;
    } else {
        e = mrd_batch_builder_set_max_frame(f->b, limit);
        if (e == -EBUSY) { /* pending: sized for the old limit, finish it first */
            int fe = mrd__tx_finish_batch(f, now);
            e = fe == 0 ? mrd_batch_builder_set_max_frame(f->b, limit) : fe;
        }
    }
    if (e != 0)
        return; /* the builder keeps the old limit: mrd__tx_oversized applies it again */
    /* Lowered: every frame queued so far was built under a larger limit and is checked
     * (write_batches). Raised: they all fit the new one; checking them would decompress
     * and unpack each queued frame for nothing. */
    if (limit < f->lim.builder_max_frame)
        f->lim.builder_limit_seq = f->next_seq;
    f->lim.builder_max_frame = limit;
    if (limit > f->lim.builder_max_ever)
        f->lim.builder_max_ever = limit;
}

/* Appends every event of a checked batch to the builder, finishing batches as they fill;
 * an event the builder refuses is counted as lost. */
static void readd(struct mrd_flusher *f, const Meridian__V1__Batch *m, int64_t now)
{
    union mrd_any_event ev;
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;
        mrd_batch_cursor_init(&c, m);
        while (mrd_batch_next_any(&c, k, &ev))
            (void)mrd__tx_add_event(f, k, &ev, now);
    }
}

int mrd__tx_oversized(struct mrd_flusher *f, int64_t now)
{
    /* an earlier change of the builder's limit failed (no memory to finish the batch
     * pending then): try again now, before deciding anything about this frame */
    if (f->lim.builder_max_frame != f->lim.peer_max_frame &&
        f->lim.peer_max_frame >= MRD_FRAME_MIN_MAX)
        mrd__tx_apply_peer_limit(f, f->lim.peer_max_frame, now);
    if (f->lim.builder_max_frame == f->lim.peer_max_frame) {
        f->lim.limit_failures = 0;
        mrd__tx_resplit(f, now);
        return 1; /* one frame per pass: the loop drains the rings in between */
    }
    if (f->lim.peer_max_frame >= MRD_FRAME_MIN_MAX &&
        ++f->lim.limit_failures < MRD_TX_LIMIT_RETRIES)
        return 1; /* still failing: the frame stays queued, and the next pass retries */
    /* the builder cannot go as low as this aggregator asks (an announcement below
     * MRD_FRAME_MIN_MAX), or could not take the limit in MRD_TX_LIMIT_RETRIES passes:
     * re-splitting would not make it fit */
    f->lim.limit_failures = 0;
    mrd_agent_count_drop(MRD_DROP_TOO_LARGE, mrd_txq_remove_cursor(&f->q));
    return 0;
}

int mrd__tx_frame_fits(struct mrd_flusher *f, const struct mrd_txq_entry *en)
{
    struct mrd_frame_header h;
    ProtobufCMessage *msg = NULL;
    if (mrd_frame_header_parse(en->frame, en->len, f->lim.peer_max_frame, &h) != 0 ||
        en->len < MRD_FRAME_HEADER_BYTES + h.length)
        return 0;
    /* the aggregator's own check: payload within its limit, and decompressed within
     * MRD_FRAME_MAX_EXPANSION times it (a batch built for 4 MiB compresses below a small
     * limit and still expands past that) */
    int e = mrd_frame_decode(&h, en->frame + MRD_FRAME_HEADER_BYTES, f->lim.peer_max_frame, &msg);
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
    return e == 0;
}

int mrd__tx_resplit(struct mrd_flusher *f, int64_t now)
{
    struct mrd_txq_entry *en = mrd_txq_peek_unsent(&f->q);
    ProtobufCMessage *msg = NULL;
    struct mrd_frame_header h;
    const char *why = NULL;
    int e;

    if (en == NULL)
        return 0;
    /* the builder made this frame under a limit of at most builder_max_ever */
    e = mrd_frame_header_parse(en->frame, en->len, f->lim.builder_max_ever, &h);
    if (e == 0 && (h.type != MRD_FRAME_BATCH || en->len < MRD_FRAME_HEADER_BYTES + h.length))
        e = -MRD_ERR_MALFORMED;
    if (e == 0)
        e = mrd_frame_decode(&h, en->frame + MRD_FRAME_HEADER_BYTES, f->lim.builder_max_ever, &msg);
    if (e == 0)
        e = mrd_batch_check((const Meridian__V1__Batch *)msg, &why);
    uint32_t events = mrd_txq_remove_cursor(&f->q);
    if (e != 0) {
        mrd_agent_count_drop(MRD_DROP_UNENCODABLE, events);
        goto done;
    }
    /* What is pending is new: it goes out as a batch of its own (and into the record file),
     * so that the batches finished while re-splitting hold the old events only. */
    if (mrd_batch_builder_pending(f->b) > 0 && mrd__tx_finish_batch(f, now) != 0) {
        e = -ENOMEM;
        mrd_agent_count_drop(MRD_DROP_UNENCODABLE, events);
        goto done;
    }
    f->lim.resplitting = 1;
    readd(f, (const Meridian__V1__Batch *)msg, now);
    if (mrd_batch_builder_pending(f->b) > 0)
        (void)mrd__tx_finish_batch(f, now); /* a failure keeps them pending: sent later */
    f->lim.resplitting = 0;
done:
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
    atomic_store(&f->sh->events_queued, f->q.events);
    return e;
}
