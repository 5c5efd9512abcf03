/* meridian batches: building a Batch from event records, and reading one back.
 *
 * Builder (agent flusher thread, load generator): append events of any kind, intern
 * strings, then finish into a complete, compressed BATCH frame. Columns are
 * delta-encoded (see meridian.proto). String definitions: a batch carries the definition
 * of every string id it uses unless the batch that first defined it has been
 * acknowledged (mrd_batch_builder_acked), so any batch decodes on its own given what
 * the aggregator has committed, also when it is resent after a reconnect.
 * One builder per sender; not thread-safe.
 *
 * Reader (aggregator): mrd_batch_check() validates a decoded Meridian__V1__Batch
 * (equal column lengths, string ids < 2^31, counts within limits) before anything uses
 * it; a cursor (mrd_batch_cursor_init, then mrd_batch_next_<kind>()) then yields the
 * events of one kind in order, undoing the deltas, so a batch is never copied.
 */
#ifndef MRD_BATCH_H
#define MRD_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "meridian.pb-c.h"

struct mrd_batch_builder;

struct mrd_batch_builder_config {
    const char *run_id;
    uint32_t rank;
    uint64_t agent_instance;
    uint32_t max_frame;       /* frame limit of the peer (MRD_FRAME_DEFAULT_MAX) */
    uint32_t target_events;   /* finish when this many events are pending (e.g. 16384) */
    int compress_level;       /* zstd level, 0 = off; 1 is the default */
};

/* Creates a builder. Returns 0 and *out, or -ENOMEM / -EINVAL. */
int mrd_batch_builder_new(const struct mrd_batch_builder_config *cfg,
                          struct mrd_batch_builder **out);
/* Accepts NULL. */
void mrd_batch_builder_free(struct mrd_batch_builder *b);

/* Returns the id of string s (copied; interned once per builder), never 0 for a
 * non-NULL s; 0 for NULL or on allocation failure. Strings longer than 4096 bytes are
 * truncated. */
uint32_t mrd_batch_builder_intern(struct mrd_batch_builder *b, const char *s);

/* Append one event. Return 0, or -EAGAIN when the batch already holds target_events
 * or the event would push the encoded batch over max_frame (finish it, then append
 * again), or -ENOMEM. Also -MRD_ERR_TOO_LARGE when the event, with the string
 * definitions it needs, cannot fit even an empty batch (drop it, count DROP_TOO_LARGE),
 * and -EINVAL for a string id this builder never handed out. */
#define MRD__BATCH_ADD_DECL(E, v, fn, T, u, bm, C, d, t, tag)                                     \
    int mrd_batch_add_##fn(struct mrd_batch_builder *b, const T *e);
MRD_KINDS(MRD__BATCH_ADD_DECL) /* mrd_batch_add_kernel, ..._memcpy, ... (proto/kinds.h) */

/* Sets the frame limit for events appended from now on (the peer announced its own:
 * HelloReply.max_frame_bytes); 0 means MRD_FRAME_DEFAULT_MAX. Returns 0; -EINVAL below
 * MRD_FRAME_MIN_MAX; -EBUSY, changing nothing, when the events already pending need more
 * than the new limit (finish the batch first, then set it). Builder thread. Added after
 * v1 (additive). */
int mrd_batch_builder_set_max_frame(struct mrd_batch_builder *b, uint32_t max_frame);

/* Sets the cumulative drop counters (indexed by enum mrd_drop_reason) sent with the next
 * batch. */
void mrd_batch_builder_set_dropped(struct mrd_batch_builder *b,
                                   const uint64_t dropped[MRD_DROP__COUNT]);

/* Number of events pending in the current batch. */
size_t mrd_batch_builder_pending(const struct mrd_batch_builder *b);

/* Encodes the pending events as batch `seq` into a complete BATCH frame (malloc'd,
 * caller frees) and resets the builder for the next batch. Returns 0; -ENOMEM;
 * -MRD_ERR_TOO_LARGE if the frame would exceed max_frame (the builder then keeps the
 * events: lower target_events; not expected, since appends keep the encoded size within
 * max_frame); -EINVAL for seq 0. An empty batch is allowed (it may carry counters). */
int mrd_batch_builder_finish(struct mrd_batch_builder *b, uint64_t seq, uint8_t **frame,
                             size_t *frame_len);

/* Records that batch `seq` was acknowledged: strings it defined need not be sent again. */
void mrd_batch_builder_acked(struct mrd_batch_builder *b, uint64_t seq);

/* Records a reconnect to an aggregator that may have lost unacknowledged state: every
 * string whose defining batch is not acknowledged is defined again in the next batch. */
void mrd_batch_builder_reset_unacked(struct mrd_batch_builder *b);

/* ---- reading ---- */

/* Validates a decoded batch. Returns 0, or -MRD_ERR_MALFORMED with a static reason in
 * *why (may be NULL). Must succeed before mrd_batch_count or a cursor reads the batch. */
int mrd_batch_check(const Meridian__V1__Batch *m, const char **why);

/* Number of events of `kind` (enum mrd_event_kind) in a checked batch. */
size_t mrd_batch_count(const Meridian__V1__Batch *m, int kind);

/* Sequential cursor over one kind: decodes the deltas in order. Reset with
 * mrd_batch_cursor_init; each *_next returns 1 and fills *e, or 0 at the end. */
struct mrd_batch_cursor {
    const Meridian__V1__Batch *m;
    size_t i;
    int64_t prev[4]; /* running values of the delta columns */
};
void mrd_batch_cursor_init(struct mrd_batch_cursor *c, const Meridian__V1__Batch *m);
#define MRD__BATCH_NEXT_DECL(E, v, fn, T, u, bm, C, d, t, tag)                                    \
    int mrd_batch_next_##fn(struct mrd_batch_cursor *c, T *e);
MRD_KINDS(MRD__BATCH_NEXT_DECL) /* mrd_batch_next_kernel, ... (proto/kinds.h) */

/* ---- any kind (for code that moves events without looking at them: re-splitting,
 * replay) ---- */

/* mrd_batch_next_<kind> for `kind` (enum mrd_event_kind); e points at that kind's struct
 * (events.h), e.g. a union mrd_any_event. 0 for an unknown kind. */
int mrd_batch_next_any(struct mrd_batch_cursor *c, int kind, void *e);

/* mrd_batch_add_<kind> for `kind`; -EINVAL for an unknown kind. */
int mrd_batch_add_any(struct mrd_batch_builder *b, int kind, const void *e);

#endif
