/* The agent's counters (agent/base: below core, capture and transport alike).
 *
 * Three kinds:
 *   captured[kind]   events taken out of the rings (and clock samples), counted by the
 *                    flusher for every record it drains: capture code does NOT count the
 *                    records it writes with mrd_ring_write (that would count them twice);
 *   dropped[reason]  losses, by reason: capture counts its own (CUPTI host/device drops,
 *                    the NCCL pool), transport counts what it could not encode, queue or
 *                    send, and the rings count their own (added in by mrd_agent_counters);
 *   named counters   cumulative values outside both lists (CUPTI's own overhead, the
 *                    window requests), pulled from registered sources when the Goodbye is
 *                    built. They land in the database's agent_counters.
 *
 * Threads: the captured/dropped counters are relaxed atomics, safe on hot paths. A counter
 * source runs on the flusher thread: cheap, thread-safe, no lock a capture callback holds.
 */
#ifndef MRD_AGENT_COUNTERS_H
#define MRD_AGENT_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* Count n events captured of a kind / dropped for a reason (an unknown reason counts as
 * reason 0). Lock-free; any thread, hot paths included. */
void mrd_agent_count_captured(int kind, uint64_t n);
void mrd_agent_count_drop(int reason, uint64_t n);

/* The counters so far: the agent's plus the rings' drop counters. Any thread. */
void mrd_agent_counters(uint64_t captured[MRD_EV__COUNT], uint64_t dropped[MRD_DROP__COUNT]);

/* A named counter. Both strings are static and made of [a-z0-9_] (category 1-32 bytes, not
 * captured/dropped/transport; name 1-64). They travel in the Goodbye (Goodbye.named). */
struct mrd_named_counter {
    const char *category, *name;
    uint64_t value;
};
#define MRD_AGENT_NAMED_MAX 32 /* named counters per Goodbye, all sources together */

/* Copies n counters c into out (room for max): the body of every counter source. Returns
 * how many were copied. Any thread. */
size_t mrd_agent_put_counters(struct mrd_named_counter *out, size_t max,
                              const struct mrd_named_counter *c, size_t n);

/* Registers a source of named counters (up to 8 sources; more are ignored, said once on
 * stderr): fn writes up to max entries into out and returns how many. It runs on the
 * flusher thread when the Goodbye is built. Any thread. */
void mrd_agent_add_counter_source(size_t (*fn)(struct mrd_named_counter *out, size_t max));

/* Every registered source's counters, in registration order, at most max in all. Returns
 * how many were written. Any thread. */
size_t mrd_agent_named_counters(struct mrd_named_counter *out, size_t max);

#endif
