/* Capture-internal interface shared by the capture sources (CUPTI, NCCL plugin, NVTX, MPI
 * bridge). Nothing here is exported from libmeridian.so (the version script keeps the
 * mrd__ names local); tests link the capture objects statically and may call these.
 *
 * Where this sits: capture code runs on the application's, CUDA's and NCCL's threads,
 * fills a struct mrd_record on the stack and hands it to mrd_ring_write (agent/ring).
 * The helpers below are hot-path safe: no lock, no allocation, no system call after a
 * thread's first use (mrd__capture_tid caches gettid() per thread).
 */
#ifndef MRD_CAPTURE_H
#define MRD_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* Fixed pool sizes of the NCCL plugin (nccl_plugin.c): Coll/P2p ops and KernelCh
 * channels in flight. */
#define MRD_NCCL_OP_SLOTS 8192
#define MRD_NCCL_CH_SLOTS 4096

/* Makes this shared object impossible to unload (RTLD_NODELETE), once. NCCL dlcloses
 * its profiler plugin after the last communicator is destroyed, and NVTX dlcloses an
 * injection whose init returned 0: either would unmap the agent under its own threads.
 * Called by those entry points when the agent is active. Not for hot paths. */
void mrd__capture_pin(void);

/* The calling thread's OS thread id (gettid), cached per thread after the first call. */
uint32_t mrd__capture_tid(void);

/* Copies at most cap - 1 bytes of s (NULL = empty) into dst, always NUL-terminated (cap
 * > 0). Cuts at a UTF-8 character boundary so a truncated copy stays valid UTF-8. */
void mrd__capture_copy_str(char *dst, size_t cap, const char *s);

/* CUPTI external correlation for NCCL kernel launches (cupti.c). Push/pop an id of kind
 * CUSTOM2 on the calling thread; no-ops (returning 0) unless this agent owns CUPTI.
 * Hot-path safe apart from the CUPTI call itself. */
int mrd__cupti_extcorr_push(uint64_t id);
int mrd__cupti_extcorr_pop(void);

/* The CUDA device ordinal current on the calling thread, or -1 when unknown (CUPTI not
 * owned by this agent, or no context). Not for hot paths (asks CUPTI). */
int mrd__cupti_current_device(void);

/* Number of NVTX clients (copies of NVTX state) this agent has served (nvtx.c). */
uint64_t mrd__nvtx_clients(void);

/* Byte size of an NCCL datatype name ("ncclFloat32" -> 4, "ncclBfloat16" -> 2,
 * "ncclFloat8e4m3" -> 1); 0 for NULL or an unknown name. Pure; any thread. */
uint32_t mrd__nccl_datatype_size(const char *name);

#endif
