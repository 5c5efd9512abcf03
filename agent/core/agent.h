/* The agent's lifecycle: start, inertness, GPUs, flush hooks, the exit path.
 *
 * The clock, the counters and the configuration it reads live in agent/base (clock.h,
 * counters.h, config.h), below core, capture and transport alike; this header includes
 * them so that capture code needs one include.
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
 *   MERIDIAN_CUPTI_FLUSH_MS, MERIDIAN_CUPTI_API, MERIDIAN_PRINT_KINDS; the NVML sampler
 *   (agent/capture/gpu_sample.c): MERIDIAN_GPU_SAMPLE_HZ, MERIDIAN_GPU_SAMPLE_STEADY_HZ;
 *   NSYS_PROFILING_SESSION_ID is detected. Full list and memory: config.c, ENVIRONMENT.md.
 */
#ifndef MRD_AGENT_H
#define MRD_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"    /* mrd_clock_now: the event clock */
#include "config.h"   /* struct mrd_agent_config */
#include "counters.h" /* captured/dropped/named counters */
#include "events.h"

/* Idempotent, thread-safe. Returns 1 if the agent is active in this process, 0 if inert
 * (not a rank, disabled, or misconfigured: then one line on stderr says why). */
int mrd_agent_start(void);

/* 1 when active. Cheap (one atomic load); usable on hot paths. */
int mrd_agent_active(void);

/* The configuration read at start (valid once mrd_agent_start returned 1). */
const struct mrd_agent_config *mrd_agent_config(void);

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
