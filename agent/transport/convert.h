/* Ring record -> batch event conversion (internal to the agent's transport). */
#ifndef MRD_AGENT_CONVERT_H
#define MRD_AGENT_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "record.h"

struct mrd_convert {
    struct mrd_batch_builder *b;
    uint32_t target_events;  /* the builder's target: full at this many pending events */
    uint32_t max_id;         /* highest string id seen (ids grow by one per new string) */
    size_t new_string_bytes; /* bytes of strings first seen since the caller last reset it */
};

/* Adds record *r to cv->b. Returns 0; -EAGAIN when the batch is full (nothing added:
 * finish the batch and call again); -EINVAL for an unknown kind (dropped: the caller
 * counts it); -ENOMEM. Flusher thread only. */
int mrd__convert_record(struct mrd_convert *cv, const struct mrd_record *r);

#endif
