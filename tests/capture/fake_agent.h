/* A test build of the agent core, base and ring for the capture tests (fake_agent.c).
 *
 * It implements agent/core/agent.h (with agent/base's clock.h and counters.h; the tests
 * build the real agent/base/stepctl.c) and agent/ring/ring.h with observable state: one
 * mutex-protected record store instead of per-thread rings (its capacity can be shrunk
 * to test drops), per-thread capture state from a fixed pool of 512 (mrd_ring_thread_state), counters that tests read back, a settable clock, and the GPUs, flush
 * hooks and shutdown calls the capture code made. Test-only: it locks on the hot path.
 */
#ifndef MRD_TEST_FAKE_AGENT_H
#define MRD_TEST_FAKE_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "record.h"
#include "ring.h"

struct fake_gpu {
    uint32_t device;
    char uuid[64], pci[64], name[128];
};

/* Clears records, counters, GPUs, hooks; active = 1, real clock, capacity 1 << 16. */
void fake_reset(void);

/* The small CUPTI set-up the capture tests run the agent with (cupti.c's variables): a
 * pool of two 1 MiB buffers and no periodic flush thread. */
void fake_small_cupti_env(void);

/* What mrd_agent_start / mrd_agent_active answer (1 active, 0 inert). */
void fake_set_active(int active);

/* The world size mrd_agent_config() reports (-1: unknown, the default). */
void fake_set_world_size(int n);

/* Fixes mrd_clock_now() at ns (>= 0), or back to CLOCK_MONOTONIC_RAW with ns < 0. */
void fake_clock_set(int64_t ns);

/* Records the store can hold before mrd_ring_write drops (counted as ring_full). */
void fake_ring_set_capacity(size_t records);

/* Moves up to max stored records (in write order) into out; returns how many. */
size_t fake_ring_take(struct mrd_record *out, size_t max);

/* Records currently stored. */
size_t fake_ring_count(void);

/* The environment fingerprint's records (kind env, env.c), which mrd_ring_write counts
 * instead of storing: the tests above count exactly the records of the source they drive,
 * and the fingerprint comes along with any GPU or communicator (capture_env_e2e checks it). */
size_t fake_env_records(void);

/* Drop counter for a reason (mrd_agent_count_drop plus ring drops). */
uint64_t fake_dropped(int reason);

/* GPUs registered through mrd_agent_add_gpu (copies), and how many. */
size_t fake_gpus(struct fake_gpu *out, size_t max);

/* Calls of mrd_agent_start and mrd_agent_shutdown so far. */
unsigned fake_start_calls(void);
unsigned fake_shutdown_calls(void);

#endif
