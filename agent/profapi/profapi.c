/* libmeridian_profapi.so: the application's cudaProfilerStart/cudaProfilerStop (and the
 * driver's cuProfilerStart/cuProfilerStop), seen by symbol interposition.
 *
 * Where this sits: `meridian profile` LD_PRELOADs this library into the ranks. In the
 * steady tier CUPTI is detached (no callbacks), so these calls are seen here: each one is
 * forwarded to the real function, and then reported to the agent through its bridge
 * (agent/base/profapi_bridge.h), which counts it at the current step counter; the counts
 * travel in the ClockProbes and the aggregator turns a start and its stop into a
 * profiler_api window on the same steps of every rank (aggregator/ingest/winctl.h).
 *
 * The real function: dlsym(RTLD_NEXT) first; when the CUDA library is not in the global
 * scope (Python loads libtorch with RTLD_LOCAL, and libcudart with it), the loaded objects
 * whose file name starts with libcudart (cuda*) or libcuda. (cu*) are asked by name. Its
 * return value is returned unchanged; where no real function exists at all the call
 * returns 801 (cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED) and is still reported.
 * The agent: the bridge in the global scope (the MPI preload library's dependency, a test
 * program), else libmeridian.so loaded under CUDA_INJECTION64_PATH, NCCL_PROFILER_PLUGIN or
 * NVTX_INJECTION64_PATH (looked up with RTLD_NOLOAD: never loaded here). Without an agent
 * the call is only forwarded. Both lookups are kept once they succeed.
 *
 * Limits: an application linked with the static CUDA runtime (nvcc's default,
 * -cudart=static) calls its own copy of cudaProfilerStart, which no preload can replace:
 * it is not seen (its driver calls go through cuGetProcAddress, not cuProfilerStart).
 * There, mark steps with NVTX and use MERIDIAN_WINDOWS / --windows instead.
 *
 * Exports: exactly the four functions (libmeridian_profapi.map), unversioned, so that they
 * interpose on the versioned definitions of libcudart.so.13 and libcuda.so.1. No
 * constructor, no thread, no allocation of its own; nothing of CUDA is touched before the
 * application's own call. Workload: a handful of calls per run; the first call of each
 * function pays the lookups (dlsym, dl_iterate_phdr).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profapi_bridge.h"

#define NOT_SUPPORTED 801 /* cudaErrorNotSupported == CUDA_ERROR_NOT_SUPPORTED */
#define CANDIDATES    4   /* loaded libraries asked for a real function */

typedef int (*api_fn)(void);
typedef void (*bridge_fn)(int);

struct api {
    const char *name;   /* the function */
    const char *prefix; /* file name prefix of the library that defines it */
    int start;          /* 1: a start, 0: a stop */
    _Atomic(api_fn) real;
};

int cudaProfilerStart(void);
int cudaProfilerStop(void);
int cuProfilerStart(void);
int cuProfilerStop(void);

static struct api rt_start = {"cudaProfilerStart", "libcudart", 1, NULL};
static struct api rt_stop = {"cudaProfilerStop", "libcudart", 0, NULL};
static struct api drv_start = {"cuProfilerStart", "libcuda.", 1, NULL};
static struct api drv_stop = {"cuProfilerStop", "libcuda.", 0, NULL};
static _Atomic(bridge_fn) g_bridge;

struct candidates {
    const char *prefix;
    int n;
    char path[CANDIDATES][512];
};

/* dl_iterate_phdr callback: keeps the paths of loaded objects whose file name starts with
 * c->prefix (dlopen is not called under the loader's iteration lock). */
static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct candidates *c = arg;
    const char *name = info->dlpi_name, *base;
    if (!name || !*name || c->n >= CANDIDATES)
        return 0;
    base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, c->prefix, strlen(c->prefix)) == 0 && strlen(name) < sizeof(c->path[0]))
        snprintf(c->path[c->n++], sizeof(c->path[0]), "%s", name);
    return 0;
}

/* `name` from an already loaded object (never loads one); NULL when none has it. */
static void *loaded_symbol(const char *path, const char *name)
{
    void *h = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return NULL;
    void *f = dlsym(h, name);
    dlclose(h);
    return f;
}

static int is_ours(void *f)
{
    return f == (void *)cudaProfilerStart || f == (void *)cudaProfilerStop ||
           f == (void *)cuProfilerStart || f == (void *)cuProfilerStop;
}

static api_fn real_function(struct api *a)
{
    api_fn f = atomic_load_explicit(&a->real, memory_order_acquire);
    if (f)
        return f;
    void *p = dlsym(RTLD_NEXT, a->name);
    if (!p || is_ours(p)) {
        struct candidates c = {.prefix = a->prefix};
        p = NULL;
        dl_iterate_phdr(collect, &c);
        for (int i = 0; i < c.n && !p; i++) {
            p = loaded_symbol(c.path[i], a->name);
            if (is_ours(p))
                p = NULL;
        }
    }
    if (!p)
        return NULL;
    memcpy(&f, &p, sizeof(f)); /* dlsym's object pointer as a function pointer (POSIX) */
    atomic_store_explicit(&a->real, f, memory_order_release);
    return f;
}

static bridge_fn agent_bridge(void)
{
    static const char *const vars[] = {"CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN",
                                       "NVTX_INJECTION64_PATH"};
    bridge_fn b = atomic_load_explicit(&g_bridge, memory_order_acquire);
    if (b)
        return b;
    void *p = dlsym(RTLD_DEFAULT, MERIDIAN_PROFAPI_BRIDGE);
    for (size_t i = 0; !p && i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *path = getenv(vars[i]);
        if (path && *path)
            p = loaded_symbol(path, MERIDIAN_PROFAPI_BRIDGE);
    }
    if (!p)
        return NULL; /* no agent (yet): asked again at the next call */
    memcpy(&b, &p, sizeof(b));
    atomic_store_explicit(&g_bridge, b, memory_order_release);
    return b;
}

/* Forwards, then reports the call (after it: a first CUDA call has loaded the agent). */
static int call(struct api *a)
{
    api_fn f = real_function(a);
    int rc = f ? f() : NOT_SUPPORTED;
    bridge_fn b = agent_bridge();
    if (b)
        b(a->start);
    return rc;
}

int cudaProfilerStart(void)
{
    return call(&rt_start);
}

int cudaProfilerStop(void)
{
    return call(&rt_stop);
}

int cuProfilerStart(void)
{
    return call(&drv_start);
}

int cuProfilerStop(void)
{
    return call(&drv_stop);
}
