/* Re-splitting a recorded batch that is too large for the aggregator's frame limit.
 *
 * Where it sits: capture replay (rank.c). A recorded batch is re-encoded as it was; when
 * that frame would be refused under the limit the aggregator announced
 * (HelloReply.max_frame_bytes; meridiand --max-frame), i.e. when mrd_frame_encode under
 * that limit says -MRD_ERR_TOO_LARGE (payload over the limit, or over
 * MRD_FRAME_MAX_EXPANSION times it decompressed: the checks meridiand's decoder makes),
 * rank.c hands the decoded batch to mrd_split_batch, which appends its events to a fresh
 * batch builder (proto/batch.h) set to that limit and finishes them into as many batches as
 * needed, numbered first_seq, first_seq + 1, ... so every recorded event is sent once.
 *
 * String ids: the capture's ids are the recording agent's builder's ids (1, 2, 3, ... in
 * the order it interned them), and the capture's other batches, sent as recorded, use
 * them. The fresh builder is made to hand out the same ids: before an event is appended,
 * every id up to the largest it references is interned in id order with the value the
 * capture defined for it (so the new batches define each id with the value the aggregator
 * already has, or will get, for it). An id the capture never defined up to this batch gets
 * a placeholder no event uses (never sent); an event referencing such an id (a sender bug:
 * the aggregator would store NULL) references "none" (0) instead, which stores the same.
 * Each new batch defines every string it uses (the builder is new: nothing of it is
 * acknowledged), so each decodes on its own.
 *
 * Counters: the recorded batch's cumulative drop counters (reasons this build knows) go
 * with every new batch. Events are regrouped by kind (tables keep no batch order).
 *
 * Workload: rare (a capture recorded for a larger limit than the aggregator it is replayed
 * into); per call one builder, the interned strings (at most the builder's string table
 * cap) and the events of one batch. Single-threaded.
 */
#ifndef MRD_SPLIT_H
#define MRD_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "canon.h"
#include "meridian.pb-c.h"

struct mrd_split_config {
    const char *run_id; /* written into the new batches */
    uint32_t rank;
    uint64_t agent_instance;
    uint32_t max_frame; /* the limit every new frame must fit */
    int compress_level; /* zstd level, 0 = off */
    /* the capture's string definitions so far: value and mrd_canon_str_hash of an id,
     * NULL / 0 when the capture has not defined it */
    mrd_canon_resolve_fn string;
    mrd_canon_strhash_fn string_hash;
    void *string_ctx;
    /* takes one finished batch frame (ownership passes, freed with free() also on error)
     * holding `events` events whose canonical hashes (mrd_canon_hash) sum to `checksum`;
     * returns 0 or a negative errno, which stops the split */
    int (*emit)(void *ctx, uint64_t seq, uint8_t *frame, size_t len, uint64_t events,
                uint64_t checksum);
    void *emit_ctx;
};

struct mrd_split_result {
    uint64_t batches; /* frames emitted */
    uint64_t events;  /* events emitted, and the sum of their hashes */
    uint64_t checksum;
};

/* Re-encodes every event of the checked batch m as batches within cfg->max_frame, emitted
 * in order with seqs first_seq, first_seq + 1, ... (first_seq >= 1). Returns 0 with *res
 * filled (also partly on error: what was emitted); -MRD_ERR_TOO_LARGE when one event with
 * its strings cannot fit even an empty batch under the limit (nothing of it is sent);
 * -ENOSPC when the capture uses more string ids than a builder can intern; -EPROTO when
 * the capture's string ids cannot be reproduced (two ids with one value); -ENOMEM; an error
 * of emit. */
int mrd_split_batch(const struct mrd_split_config *cfg, const Meridian__V1__Batch *m,
                    uint64_t first_seq, struct mrd_split_result *res);

#endif
