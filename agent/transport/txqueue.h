/* The unacknowledged-batch queue (internal to the agent's transport).
 *
 * Holds finished BATCH frames, oldest first, from the moment they are built until the
 * aggregator acknowledges them, so they can be resent after a reconnect. A send cursor
 * marks the first frame not yet written on the current connection.
 *
 * Cap and policy: the sum of frame bytes never exceeds cap_bytes (MERIDIAN_QUEUE_BYTES).
 * A frame that does not fit is refused (-ENOBUFS): the caller frees it and counts its
 * events as MRD_DROP_QUEUE_FULL. Dropping the NEWEST batch, not the oldest, was chosen
 * because the oldest may already be committed by an aggregator that is merely slow to
 * acknowledge: dropping it would count a loss that did not happen and could tear a frame
 * that is half-written on the socket. The newest was never sent, so its loss is exact.
 * Single-threaded (the flusher thread).
 */
#ifndef MRD_AGENT_TXQUEUE_H
#define MRD_AGENT_TXQUEUE_H

#include <stddef.h>
#include <stdint.h>

struct mrd_txq_entry {
    struct mrd_txq_entry *next;
    uint64_t seq;
    uint32_t events;
    uint32_t sent_count; /* how many times it was written to a socket */
    size_t len;
    uint8_t *frame; /* owned by the queue */
};

struct mrd_txq {
    struct mrd_txq_entry *head, *tail;
    struct mrd_txq_entry *cursor; /* next to send on this connection (NULL: all sent) */
    uint64_t cap_bytes, bytes;
    uint64_t count, events;
};

/* Called for every entry leaving the queue by acknowledgement (seq, events). */
typedef void (*mrd_txq_acked_fn)(uint64_t seq, uint32_t events, void *arg);

void mrd_txq_init(struct mrd_txq *q, uint64_t cap_bytes);

/* Frees every entry (accepts a zeroed or initialised queue). */
void mrd_txq_clear(struct mrd_txq *q);

/* Appends a frame (ownership passes to the queue on success). seq must be larger than
 * every queued seq. Returns 0; -ENOBUFS when it does not fit under the cap (ownership stays
 * with the caller); -ENOMEM. */
int mrd_txq_push(struct mrd_txq *q, uint64_t seq, uint32_t events, uint8_t *frame, size_t len);

/* The next entry to write on this connection, or NULL. */
struct mrd_txq_entry *mrd_txq_peek_unsent(const struct mrd_txq *q);

/* The entry returned by peek has been written completely: advance the cursor. */
void mrd_txq_mark_sent(struct mrd_txq *q);

/* Acknowledgement of `seq` on this connection: removes every entry with seq <= `seq` that
 * was written on it (acks are cumulative per connection), calling fn for each.
 * Returns the number removed. */
size_t mrd_txq_ack(struct mrd_txq *q, uint64_t seq, mrd_txq_acked_fn fn, void *arg);

/* New connection: every entry is unsent again (the cursor goes back to the head). */
void mrd_txq_rewind(struct mrd_txq *q);

/* HelloReply.committed_seq: removes every entry with seq <= committed (sent or not),
 * calling fn for each. Returns the number removed. */
size_t mrd_txq_drop_committed(struct mrd_txq *q, uint64_t committed, mrd_txq_acked_fn fn,
                              void *arg);

/* Removes the unsent entry at the cursor (e.g. larger than the peer's frame limit).
 * Returns its events, 0 if there was none. */
uint32_t mrd_txq_remove_cursor(struct mrd_txq *q);

#endif
