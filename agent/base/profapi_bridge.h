/* The interface libmeridian.so exports for its profiler API preload library
 * (agent/profapi/, libmeridian_profapi.so).
 *
 * libmeridian_profapi.so defines cudaProfilerStart/cudaProfilerStop and
 * cuProfilerStart/cuProfilerStop, forwards each call to the real function and then reports
 * it here; it links nothing of meridian's and finds this function at run time in whichever
 * loaded object exports it (libmeridian.so as CUDA injection, NCCL plugin, NVTX injection
 * or MPI preload dependency; a test program that links the agent core). Exported through
 * agent/libmeridian.map as meridian_profapi_*.
 */
#ifndef MRD_PROFAPI_BRIDGE_H
#define MRD_PROFAPI_BRIDGE_H

#define MERIDIAN_PROFAPI_BRIDGE "meridian_profapi_call"

/* The application called cudaProfilerStart or cuProfilerStart (start = 1), or
 * cudaProfilerStop or cuProfilerStop (start = 0). Counted by step control
 * (mrd_stepctl_profiler_call) at the current step counter. Any thread, any time, also
 * before the agent started or in an inert process (the counts are then never sent). */
void meridian_profapi_call(int start);

#endif
