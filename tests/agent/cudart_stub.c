/* libmrd_cudart_stub.so: stands in for libcudart's and libcuda's profiler API in
 * meridian-agent-synth, which links it after libmeridian_profapi.so, so that the synth's
 * calls bind to the interposers and reach these through their forwarding. Each function
 * counts its calls and returns 1000 + that count, so a caller can tell that the value came
 * back unchanged. No CUDA anywhere.
 */
#include <stdatomic.h>

#include "cudart_stub.h"

static _Atomic int g_calls[4];

static int count(int which)
{
    return 1000 + atomic_fetch_add(&g_calls[which], 1) + 1;
}

int cudaProfilerStart(void)
{
    return count(MRD_STUB_RT_START);
}

int cudaProfilerStop(void)
{
    return count(MRD_STUB_RT_STOP);
}

int cuProfilerStart(void)
{
    return count(MRD_STUB_DRV_START);
}

int cuProfilerStop(void)
{
    return count(MRD_STUB_DRV_STOP);
}

int mrd_stub_calls(int which)
{
    return which >= 0 && which < 4 ? atomic_load(&g_calls[which]) : -1;
}
