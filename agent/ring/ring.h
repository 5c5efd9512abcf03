/* Per-thread capture rings: the only thing capture code touches on the hot path.
 *
 * mrd_ring_write() copies one record into the calling thread's single-producer /
 * single-consumer ring and returns. No lock, no allocation, no system call after the
 * thread's first write (which claims a pre-allocated ring with one atomic operation).
 * Policy at the cap: a full ring, or no free ring for a new thread, drops the record and
 * counts it (MRD_DROP_RING_FULL / MRD_DROP_NO_THREAD_SLOT). The flusher thread is the only
 * consumer (mrd_ring_drain).
 */
#ifndef MRD_AGENT_RING_H
#define MRD_AGENT_RING_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

#define MRD_RING_RELEASE_EVERY 1024

/* Bytes of per-thread capture state carried by every ring for the thread that owns it
 * (mrd_ring_thread_state). */
#define MRD_RING_THREAD_STATE_BYTES 4096

/* Allocates `max_threads` rings of `records_per_ring` records each (power of two).
 * Call once, before any writer, from the agent's init. Returns 0, -EINVAL, -ENOMEM. */
int mrd_ring_init(unsigned max_threads, unsigned records_per_ring);

/* Hot path, any thread: copy *r into this thread's ring. Returns 0, or -EAGAIN when the
 * record was dropped (counted). Safe to call before mrd_ring_init (drops, counted). */
int mrd_ring_write(const struct mrd_record *r);

/* Hot path, any thread: the calling thread's capture state, MRD_RING_THREAD_STATE_BYTES
 * bytes (64-byte aligned) that belong to the ring it owns, claiming a ring as
 * mrd_ring_write does when it has none yet. Capture code keeps its per-thread variables
 * here instead of in __thread ones (which glibc allocates with malloc on each thread's
 * first touch in a dlopen'ed library). Zero-filled when the thread claims its ring; only
 * that thread uses it; it goes with the ring when the thread exits (and is zeroed again for
 * the next owner). NULL when disabled, before init, or when no ring is free (the caller
 * then does without and counts what it loses as MRD_DROP_NO_THREAD_SLOT). No lock, no
 * allocation, no system call after the thread's claim. */
void *mrd_ring_thread_state(void);

/* Hot path, any thread: mrd_ring_write for a caller that already looked up its thread's
 * capture state (state: what mrd_ring_thread_state returned on this thread, in this call):
 * writes into the ring that state belongs to without looking the ring up again. state NULL
 * (no ring for this thread) drops the record and counts it as MRD_DROP_NO_THREAD_SLOT, as
 * mrd_ring_write would, without another claim attempt. Returns 0 or -EAGAIN (dropped;
 * uncounted after mrd_ring_disable). */
int mrd_ring_write_in(void *state, const struct mrd_record *r);

/* Paced producers only (see mrd_ring_pace; CUPTI's buffer-completion worker): up to `want`
 * free slots of the ring that `state` belongs to (what mrd_ring_thread_state returned on
 * this thread), contiguous in memory, for the caller to fill in place; *n says how many
 * (fewer than want when the ring is nearly full or the free slots wrap around its end; 0
 * when it is full, state is NULL or the rings are disabled, and then NULL is returned). The
 * consumer sees none of them until mrd_ring_commit; until then the caller writes no record
 * to this ring any other way. No lock, no allocation, no system call. */
struct mrd_record *mrd_ring_reserve(void *state, size_t want, size_t *n);

/* Publishes the first n slots of the last mrd_ring_reserve on this thread (n no more than
 * it gave; 0 or state NULL: nothing) to the consumer, in order, with one release store. */
void mrd_ring_commit(void *state, size_t n);

/* Free records in the calling thread's ring (claiming one if the thread has none yet;
 * 0 when disabled or no ring is free). Lets a producer that writes in bursts from its own
 * thread (CUPTI's buffer-completion worker, not an application thread) pace itself instead
 * of overflowing. No lock, no allocation, no system call. */
size_t mrd_ring_space(void);

/* Paced producers only: a thread that writes bursts on its own time, never an application,
 * CUDA or NCCL callback thread (CUPTI's buffer-completion worker, which converts a whole
 * CUPTI buffer at once). May make system calls and sleep. Once the calling thread's ring
 * is at least half full it wakes the consumer (the function given to
 * mrd_ring_set_consumer_wake; at most once per consumer pass over this ring); then, if
 * fewer than `want` records are free and timeout_ns > 0, sleeps until the consumer frees
 * records of this ring or timeout_ns (relative) has passed. Returns the free records
 * afterwards (0 when disabled or no ring could be claimed). */
size_t mrd_ring_pace(size_t want, int64_t timeout_ns);

/* Consumer: how mrd_ring_pace wakes it (e.g. a write to the flusher's eventfd); NULL
 * removes it. The function must be cheap and safe from any thread. */
void mrd_ring_set_consumer_wake(void (*fn)(void));

/* Flusher thread only: hands every pending record of every ring to fn (in per-ring
 * order), up to max records in all. Returns the number handed over. Space is released to
 * the producer every MRD_RING_RELEASE_EVERY records of a ring (a paced producer refills
 * while the rest is converted). */
size_t mrd_ring_drain(void (*fn)(const struct mrd_record *r, void *arg), void *arg, size_t max);

/* Adds the ring drop counters into dropped[MRD_DROP__COUNT] (any thread). */
void mrd_ring_dropped(uint64_t dropped[MRD_DROP__COUNT]);

/* Makes every later mrd_ring_write refuse its record with -EAGAIN, uncounted (a fork
 * child is inert and reports nothing). Async-signal-safe (one atomic store). */
void mrd_ring_disable(void);

/* Frees every ring (at exit, after writers have stopped). */
void mrd_ring_shutdown(void);

#endif
