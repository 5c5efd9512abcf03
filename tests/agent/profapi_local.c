/* meridian-profapi-local: the profiler API bridge as a rank meets it. libmeridian.so is
 * loaded the way CUDA loads its injection library (dlopen of CUDA_INJECTION64_PATH, here
 * RTLD_LOCAL, so its symbols are not in the global scope) and started through its MPI
 * bridge (meridian_mpi_start, as the MPI_Init wrapper does); the program then calls
 * cudaProfilerStart and cudaProfilerStop, which bind to libmeridian_profapi.so (linked
 * ahead of the CUDA stub, as LD_PRELOAD would put it) and must find the agent through
 * CUDA_INJECTION64_PATH. meridian_mpi_shutdown sends the Goodbye, whose window counters
 * (profiler_starts, profiler_stops) the test reads from the database. Prints
 *   profapi-local: started=S rc_start=A rc_stop=B forwarded=F
 * (A and B the stub's values, 1001 each; F the calls the stub received).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudart_stub.h"

int main(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    void *agent = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!agent) {
        fprintf(stderr, "profapi-local: cannot load %s: %s\n", path ? path : "(unset)", dlerror());
        return 2;
    }
    int (*start)(void) = NULL;
    void (*shutdown)(void) = NULL;
    void *p = dlsym(agent, "meridian_mpi_start"), *q = dlsym(agent, "meridian_mpi_shutdown");
    memcpy(&start, &p, sizeof(start));
    memcpy(&shutdown, &q, sizeof(shutdown));
    if (!start || !shutdown)
        return 2;
    int started = start();
    int a = cudaProfilerStart();
    int b = cudaProfilerStop();
    shutdown();
    printf("profapi-local: started=%d rc_start=%d rc_stop=%d forwarded=%d\n", started, a, b,
           mrd_stub_calls(MRD_STUB_RT_START) + mrd_stub_calls(MRD_STUB_RT_STOP));
    return 0;
}
