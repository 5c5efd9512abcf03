/* libmeridian.so's side of the MPI wrappers (see mpi_bridge.h).
 *
 * Where this sits: the PMPI wrappers in libmeridian_mpi.so (agent/mpi/) time each MPI call
 * on the application's thread and hand it here; we fill an MRD_EV_MPI record and write it
 * to the calling thread's ring. No MPI header or symbol is used in this file: the MPI
 * types stay in the preload library. Workload: one record per MPI call (thousands a
 * second at most in training jobs); hot-path rules apply (no lock, no allocation).
 */
#include "mpi_bridge.h"

#include <string.h>

#include "agent.h"
#include "capture.h"
#include "ring.h"

#define MRD_EXPORT __attribute__((visibility("default")))

MRD_EXPORT int meridian_mpi_bridge_version(void)
{
    return MERIDIAN_MPI_BRIDGE_VERSION;
}

MRD_EXPORT int meridian_mpi_start(void)
{
    return mrd_agent_start();
}

MRD_EXPORT int meridian_mpi_active(void)
{
    return mrd_agent_active();
}

MRD_EXPORT int64_t meridian_mpi_now(void)
{
    return mrd_clock_now();
}

MRD_EXPORT void meridian_mpi_record(const char *call, int64_t start, int64_t end, uint64_t bytes,
                                    int32_t peer, int32_t tag, uint32_t comm_size)
{
    struct mrd_record r;
    if (!mrd_agent_active())
        return;
    /* one ring lookup; a thread without a ring gets no thread id (no gettid per call), its
     * record is dropped and counted as no_thread_slot by mrd_ring_write_in */
    struct mrd__capture_thread *t = mrd__capture_thread();
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_MPI;
    r.str[0] = call;
    r.ev.mpi.start = start;
    r.ev.mpi.end = end;
    r.ev.mpi.bytes = bytes;
    r.ev.mpi.call = 0;
    r.ev.mpi.comm_size = comm_size;
    r.ev.mpi.thread = t ? mrd__capture_tid_in(t) : 0;
    r.ev.mpi.peer = peer;
    r.ev.mpi.tag = tag;
    mrd_ring_write_in(t, &r);
}

MRD_EXPORT void meridian_mpi_shutdown(void)
{
    mrd_agent_shutdown();
}
