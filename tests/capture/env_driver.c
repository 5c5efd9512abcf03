/* capture_env_e2e's driver: one rank whose environment fingerprint the real libmeridian.so
 * captures and sends to meridiand (env_e2e.py checks the stored rows).
 *
 * `env_driver /abs/libmeridian.so FAKE_LIBCUDA|-`: this program exports the version entry
 * points of the libraries a job loads (ncclGetVersion, cudaRuntimeGetVersion,
 * MPI_Get_library_version: found by the agent in the global scope, as in a process linked
 * against NCCL, the CUDA runtime and MPI). With FAKE_LIBCUDA (fake_libcuda.c: device 2,
 * driver 13.1) loaded RTLD_GLOBAL first, and fake_nvml.c on LD_LIBRARY_PATH, one NCCL
 * communicator's init brings the GPU: the driver waits until the NVML sampler has read its
 * identity and then ENV_DRIVER_SAMPLES readings (default 1; 0: it waits 300 ms more and
 * fails if any reading was taken, for rates that take none), then finalizes and exits
 * normally, so the agent's exit path delivers everything. ENV_DRIVER_NO_NVML=1: the GPU
 * without the stand-in NVML (nothing waited for). With "-" there is no driver and no GPU:
 * only the process keys, from the communicator's init.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_abi.h"

int ncclGetVersion(int *version);
int cudaRuntimeGetVersion(int *version);
int MPI_Get_library_version(char *version, int *len);

int ncclGetVersion(int *version)
{
    *version = 22805;
    return 0;
}

int cudaRuntimeGetVersion(int *version)
{
    *version = 13000;
    return 0;
}

int MPI_Get_library_version(char *version, int *len)
{
    static const char v[] = "Open MPI v5.0.99, package: meridian test stand-in\n"
                            "second line: not part of the key";
    strcpy(version, v);
    *len = (int)strlen(v);
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "env_driver: %s\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    int (*samples)(void) = NULL, (*identified)(void) = NULL;
    const char *want_env = getenv("ENV_DRIVER_SAMPLES");
    int want = want_env ? atoi(want_env) : 1;
    if (argc != 3)
        return fail("usage: env_driver /abs/libmeridian.so FAKE_LIBCUDA|-");
    const char *no_nvml = getenv("ENV_DRIVER_NO_NVML");
    int with_nvml = !(no_nvml && strcmp(no_nvml, "1") == 0);
    if (strcmp(argv[2], "-") != 0) {
        if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL))
            return fail(dlerror());
        void *nvml = with_nvml ? dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
        if (with_nvml && (!nvml ||
                          !(samples = (int (*)(void))dlsym(nvml, "fake_nvml_samples")) ||
                          !(identified = (int (*)(void))dlsym(nvml, "fake_nvml_identified"))))
            return fail("fake NVML not on LD_LIBRARY_PATH");
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return fail(dlerror());
    struct mrd_nccl_profiler_v5 *p = dlsym(lib, "ncclProfiler_v5");
    void *ctx = NULL;
    int mask = 0;
    if (!p)
        return fail("no ncclProfiler_v5");
    p->init(&ctx, 0x5eed, &mask, "world", 1, 1, 0, NULL);
    if (!ctx)
        return fail("NCCL plugin inactive");
    /* the sampler's identity read, then WANT readings (observed, not slept on) */
    for (int i = 0; identified && (identified() < 1 || samples() < want); i++) {
        if (i == 3000)
            return fail("the NVML sampler never identified or read the GPU within 30 s");
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (samples && want == 0) { /* no readings wanted: a 10 Hz sampler would take ~3 here */
        nanosleep(&(struct timespec){0, 300000000}, NULL);
        if (samples() != 0)
            return fail("the NVML sampler read the GPU although no readings were wanted");
    }
    p->finalize(ctx);
    dlclose(lib);
    printf("env_driver: done\n");
    return 0;
}
