/* Ring record -> batch event conversion (internal to the agent's transport). */
#ifndef MRD_AGENT_CONVERT_H
#define MRD_AGENT_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "record.h"

#define MRD_CONVERT_PTR_CACHE 1024 /* entries of the pointer -> string id cache (power of 2) */

struct mrd_convert {
    struct mrd_batch_builder *b;
    uint32_t target_events;  /* the builder's target: full at this many pending events */
    uint32_t max_id;         /* highest string id seen (ids grow by one per new string) */
    size_t new_string_bytes; /* bytes of strings first seen since the caller last reset it */
    /* Ids of process-lifetime strings (a record's str[], record.h) by address: a known
     * address skips hashing and comparing the string. The ids are b's: zero-initialised
     * with the rest, emptied by mrd__convert_bind when b changes. */
    struct {
        const char *p;
        uint32_t id;
    } cache[MRD_CONVERT_PTR_CACHE];
};

/* Points cv at builder b (a new string table): the address cache and max_id start over.
 * Use it whenever cv->b changes after cv was first filled. Flusher thread. */
void mrd__convert_bind(struct mrd_convert *cv, struct mrd_batch_builder *b);

/* Adds record *r to cv->b. Returns 0; -EAGAIN when the batch is full (nothing added:
 * finish the batch and call again); -MRD_ERR_TOO_LARGE when the event with its strings
 * cannot fit even an empty batch; -EINVAL for a kind this agent cannot encode (or a
 * string id the builder never handed out); -ENOMEM. Any error but -EAGAIN means the
 * record is dropped: the caller counts it (mrd__convert_drop_reason). Flusher thread. */
int mrd__convert_record(struct mrd_convert *cv, const struct mrd_record *r);

/* Adds record *r; when the batch is full (-EAGAIN), calls finish(arg) to encode and queue
 * it, then tries once more. Returns 0, or the error that lost the record: the add's, or
 * finish's own when the full batch could not be encoded (e.g. -ENOMEM: the record never
 * got a batch, and that is not its size). Flusher thread. */
int mrd__convert_add(struct mrd_convert *cv, const struct mrd_record *r, int (*finish)(void *),
                     void *arg);

/* The drop reason (enum mrd_drop_reason) under which a record is counted when adding it
 * failed with `err` for good (mrd__convert_add's result):
 *   -MRD_ERR_TOO_LARGE, and -EAGAIN after the batch was finished (even an empty batch had
 *   no room) -> MRD_DROP_TOO_LARGE;
 *   -EINVAL (a record this agent cannot encode: unknown kind, bad string id), -ENOMEM (the
 *   builder or the encoder ran out of memory) and anything else -> MRD_DROP_UNENCODABLE
 *   ("unencodable"). Never 0: reason 0 ("unknown") does not travel with batches.
 * Pure; any thread. */
int mrd__convert_drop_reason(int err);

#endif
