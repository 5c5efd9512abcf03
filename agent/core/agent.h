/* The agent's one shared state: configuration, identity, clock, counters, lifecycle.
 *
 * Every entry point (CUDA injection, NCCL profiler plugin, NVTX injection, MPI
 * wrappers) calls mrd_agent_start() first; the first call reads the environment (once),
 * decides whether this process is a rank (inert otherwise), allocates the rings and
 * starts the single background flusher thread (signals blocked). Later calls return
 * the same answer. Nothing heavy runs in constructors.
 *
 * Environment contract (documented in agent/ENVIRONMENT.md):
 *   MERIDIAN_AGGREGATOR   host:port of meridiand (required to be active)
 *   MERIDIAN_RUN_ID       run id (required)
 *   MERIDIAN_SECRET / MERIDIAN_SECRET_FILE   per-run secret (required with an aggregator)
 *   MERIDIAN_QUEUE_BYTES  cap of the unacknowledged-batch queue (default 64 MiB)
 *   MERIDIAN_FLUSH_DEADLINE_MS  exit flush deadline (default 5000)
 *   MERIDIAN_RING_RECORDS records per thread ring (default 16384), MERIDIAN_RING_THREADS
 *   MERIDIAN_GRAPH_NODES=1  per-node kernels inside CUDA graphs
 *   MERIDIAN_DISABLE=1      stay inert
 *   MERIDIAN_FORCE=1        be active even without a rank variable (rank 0)
 *   MERIDIAN_RECORD_FILE    also append every frame produced to this capture file
 *   MERIDIAN_BATCH_EVENTS, MERIDIAN_BATCH_MS, MERIDIAN_PROBE_INTERVAL_MS, MERIDIAN_SHARD_ID
 *   MERIDIAN_TEST_CLOCK_PPM test-only rate knob applied inside mrd_clock_now()
 *   Sharded aggregation: MERIDIAN_AGGREGATOR may be a comma-separated list of host:port
 *   (1 to MRD_AGGREGATORS_MAX); rank r connects to entry r % N, its shard id (config.c).
 * Rank: OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, RANK (first set wins).
 * CUDA capture (agent/capture/cupti.c): MERIDIAN_CUPTI_BUFFER_MB, MERIDIAN_CUPTI_BUFFERS,
 *   MERIDIAN_CUPTI_FLUSH_MS, MERIDIAN_CUPTI_API, MERIDIAN_PRINT_KINDS;
 *   NSYS_PROFILING_SESSION_ID is detected. Full list and memory: config.c, ENVIRONMENT.md.
 */
#ifndef MRD_AGENT_H
#define MRD_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "runcfg.h" /* MRD_AGGREGATORS_MAX, the aggregator list rule */

struct mrd_agent_config {
    char aggregator[256];      /* "host:port" */
    char run_id[128];
    char secret[256];
    uint64_t queue_bytes;
    uint32_t flush_deadline_ms;
    uint32_t ring_records, ring_threads;
    int graph_nodes;
    int rank, local_rank, world_size; /* -1 when unknown */
    double test_clock_ppm;
    /* added after v1 of this contract (additive) */
    int force;                 /* MERIDIAN_FORCE=1 */
    char record_file[512];     /* "" = none; %r and %p already substituted */
    uint32_t batch_events;     /* finish a batch at this many events (default 16384) */
    uint32_t batch_ms;         /* ... or this long after its first event (default 150) */
    uint32_t probe_interval_ms; /* periodic clock probe rounds (default 500) */
    uint32_t shard_id;
    /* Added for sharded aggregation (additive). With a list in MERIDIAN_AGGREGATOR,
     * aggregator[] above holds the one entry this rank uses (entry rank % shard_count,
     * blanks around it removed) and shard_id == shard_index. A single address: count 1,
     * index 0 (shard_id stays MERIDIAN_SHARD_ID or 0). Record-only mode: both 0. */
    uint32_t shard_index;      /* the entry of MERIDIAN_AGGREGATOR this rank connects to */
    uint32_t shard_count;      /* entries in MERIDIAN_AGGREGATOR */
};


/* Idempotent, thread-safe. Returns 1 if the agent is active in this process, 0 if inert
 * (not a rank, disabled, or misconfigured: then one line on stderr says why). */
int mrd_agent_start(void);

/* 1 when active. Cheap (one atomic load); usable on hot paths. */
int mrd_agent_active(void);

/* The configuration read at start (valid once mrd_agent_start returned 1). */
const struct mrd_agent_config *mrd_agent_config(void);

/* The agent's local clock: CLOCK_MONOTONIC_RAW ns (with the test rate knob applied).
 * One clock for every source in the process (CUPTI is handed this via its timestamp
 * callback). Hot-path safe (vDSO). */
int64_t mrd_clock_now(void);

/* Count n events captured of a kind / dropped for a reason. Lock-free atomics.
 * "Captured" is counted by the flusher for every record it drains from the rings (and
 * every clock sample): capture code does NOT call mrd_agent_count_captured for records it
 * writes with mrd_ring_write (that would count them twice); it reports its own losses
 * (CUPTI host/device drops, NCCL pool) with mrd_agent_count_drop.
 * mrd_agent_counters returns the agent's counters plus the rings' drop counters. */
void mrd_agent_count_captured(int kind, uint64_t n);
void mrd_agent_count_drop(int reason, uint64_t n);
void mrd_agent_counters(uint64_t captured[MRD_EV__COUNT], uint64_t dropped[MRD_DROP__COUNT]);

/* A cumulative counter outside the captured/dropped lists, e.g. CUPTI's own overhead
 * (category "cupti": overhead_records, overhead_ns, ...). Both strings are static and
 * made of [a-z0-9_] (category 1-32 bytes, not captured/dropped/transport; name 1-64). They
 * travel in the Goodbye (Goodbye.named) and land in the database's agent_counters.
 * Added after v1 of this contract (additive). */
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
 * flusher thread when the Goodbye is built (after the flush hooks): cheap, thread-safe,
 * no lock a capture callback holds. Any thread. Added after v1 (additive). */
void mrd_agent_add_counter_source(size_t (*fn)(struct mrd_named_counter *out, size_t max));

/* Every registered source's counters, in registration order, at most max in all. Returns
 * how many were written. Any thread. Added after v1 (additive). */
size_t mrd_agent_named_counters(struct mrd_named_counter *out, size_t max);

/* Registers a GPU seen by capture (uuid, PCI id) so the hello carries it. Any thread. */
void mrd_agent_add_gpu(uint32_t device, const char *uuid, const char *pci_bus_id,
                       const char *name);

/* Capture modules register a flush hook run by the exit path before the final send
 * (e.g. cuptiActivityFlushAll). Up to 8 hooks. */
void mrd_agent_on_flush(void (*fn)(void));

/* Exit path (atexit, MPI_Finalize wrapper): run flush hooks, send what is left within the
 * flush deadline, say goodbye, report losses in one stderr line. Idempotent. */
void mrd_agent_shutdown(void);

#endif
