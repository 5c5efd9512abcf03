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
 * batches within the limit under new sequence numbers. Policy, chosen so that `meridiand --max-frame` below 4 MiB loses nothing:
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
 *    counted as too_large instead: re-splitting could not make them fit.
 *
 * Workload: rare (the first batches of a run against an aggregator with a small limit,
 * or after reconnecting to a different one). One frame (up to MERIDIAN_BATCH_EVENTS events)
 * is re-split per pass of the flusher loop, which drains the rings between two: a queue
 * full of old frames never holds the drain up for more than one frame's decoding and
 * re-encoding (milliseconds); capture threads never wait for it.
 */
#include <errno.h>
#include <stdlib.h>

#include "error.h"
#include "flusher_int.h"
#include "frame.h"

void mrd__tx_apply_peer_limit(struct mrd_flusher *f, uint32_t announced, int64_t now)
{
    uint32_t limit = announced ? announced : MRD_FRAME_DEFAULT_MAX;
    f->peer_max_frame = limit;
    if (limit < MRD_FRAME_MIN_MAX)
        limit = MRD_FRAME_MIN_MAX; /* not a valid announcement: the builder's floor */
    if (limit == f->builder_max_frame)
        return;
    int e = mrd_batch_builder_set_max_frame(f->b, limit);
    if (e == -EBUSY && mrd__tx_finish_batch(f, now) == 0) /* pending: sized for the old one */
        e = mrd_batch_builder_set_max_frame(f->b, limit);
    if (e != 0)
        return; /* later frames over the limit are re-split or dropped in write_batches */
    /* Lowered: every frame queued so far was built under a larger limit and is checked
     * (write_batches). Raised: they all fit the new one; checking them would decompress
     * and unpack each queued frame for nothing. */
    if (limit < f->builder_max_frame)
        f->builder_limit_seq = f->next_seq;
    f->builder_max_frame = limit;
    if (limit > f->builder_max_ever)
        f->builder_max_ever = limit;
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

int mrd__tx_frame_fits(struct mrd_flusher *f, const struct mrd_txq_entry *en)
{
    struct mrd_frame_header h;
    ProtobufCMessage *msg = NULL;
    if (mrd_frame_header_parse(en->frame, en->len, f->peer_max_frame, &h) != 0 ||
        en->len < MRD_FRAME_HEADER_BYTES + h.length)
        return 0;
    /* the aggregator's own check: payload within its limit, and decompressed within
     * MRD_FRAME_MAX_EXPANSION times it (a batch built for 4 MiB compresses below a small
     * limit and still expands past that) */
    int e = mrd_frame_decode(&h, en->frame + MRD_FRAME_HEADER_BYTES, f->peer_max_frame, &msg);
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
    e = mrd_frame_header_parse(en->frame, en->len, f->builder_max_ever, &h);
    if (e == 0 && (h.type != MRD_FRAME_BATCH || en->len < MRD_FRAME_HEADER_BYTES + h.length))
        e = -MRD_ERR_MALFORMED;
    if (e == 0)
        e = mrd_frame_decode(&h, en->frame + MRD_FRAME_HEADER_BYTES, f->builder_max_ever, &msg);
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
    f->resplitting = 1;
    readd(f, (const Meridian__V1__Batch *)msg, now);
    if (mrd_batch_builder_pending(f->b) > 0)
        (void)mrd__tx_finish_batch(f, now); /* a failure keeps them pending: sent later */
    f->resplitting = 0;
done:
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
    atomic_store(&f->sh->events_queued, f->q.events);
    return e;
}
