/* The interface libmeridian.so exports for its MPI preload library (agent/mpi/).
 *
 * libmeridian_mpi.so (LD_PRELOADed into MPI jobs) defines the MPI_* wrappers and calls
 * these; libmeridian.so itself never references an MPI symbol, so it loads in processes
 * without MPI (NCCL dlopens it with RTLD_NOW). Exported through agent/libmeridian.map as
 * meridian_mpi_*. All are safe to call from any thread at any time; before the agent
 * started, or in an inert process, they do nothing (records are dropped silently, not
 * counted: there is no agent to count them).
 */
#ifndef MRD_MPI_BRIDGE_H
#define MRD_MPI_BRIDGE_H

#include <stdint.h>

#define MERIDIAN_MPI_BRIDGE_VERSION 1

/* The bridge version of the libmeridian.so actually loaded (MERIDIAN_MPI_BRIDGE_VERSION). */
int meridian_mpi_bridge_version(void);

/* Starts the agent (mrd_agent_start): reads the environment once, decides whether this
 * process is a rank. Returns 1 when active, 0 when inert. Called by the MPI_Init and
 * MPI_Init_thread wrappers after PMPI_Init. */
int meridian_mpi_start(void);

/* 1 when the agent is active (one atomic load). */
int meridian_mpi_active(void);

/* The agent's clock (CLOCK_MONOTONIC_RAW ns), the one every capture source uses. */
int64_t meridian_mpi_now(void);

/* Records one MPI call. call: a string that lives as long as the process (a literal in
 * the preload library, e.g. "MPI_Allreduce"); bytes: bytes this rank sends (receives for
 * receive-only calls), 0 when none; peer/tag: -1 when none; comm_size: size of the
 * communicator (0 when none). Hot path: no lock, no allocation. */
void meridian_mpi_record(const char *call, int64_t start, int64_t end, uint64_t bytes, int32_t peer,
                         int32_t tag, uint32_t comm_size);

/* Runs the agent's exit path (mrd_agent_shutdown): flush hooks (CUPTI), final send within
 * the flush deadline, goodbye, one stderr line. Called by the MPI_Finalize wrapper BEFORE
 * PMPI_Finalize, while the network still works. Idempotent. */
void meridian_mpi_shutdown(void);

#endif
