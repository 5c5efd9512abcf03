/* The environment fingerprint: what this rank runs on and with, as `env` events (one
 * (key, value) pair each, proto/kinds.h), so that the report can flag the rank whose
 * driver, library, GPU or NCCL setting differs from the others'
 * (aggregator/analyze/fingerprint.h).
 *
 * Where it sits: capture. mrd__env_capture runs on the thread that first tells the agent
 * of a GPU (mrd__gpu_sample_add: CUPTI's DEVICE record, or an NCCL communicator's init) and
 * at every NCCL communicator's init: by then CUDA, and in an NCCL job NCCL, are loaded.
 * It writes the process's keys once (pthread_once), and nccl_version once NCCL answers.
 * The GPU keys come from the NVML sampler thread (gpu_sample.c owns NVML) through
 * mrd__env_gpu, once per device. Records go into the calling thread's ring like any
 * capture record (a full ring drops and counts them).
 *
 * Versions are read from the libraries already loaded, never loading one: the CUDA driver
 * and NCCL by dlopen(RTLD_NOLOAD), the CUDA runtime by dlsym in the global scope or its
 * loaded sonames, CUPTI from the library the agent links, MPI by dlsym in the global scope
 * (MPI_Get_library_version, which MPI allows before MPI_Init). What is not loaded is absent.
 *
 * Variables: those whose name starts with one of `prefixes` or equals one of `exact`
 * below; a name that contains TOKEN, KEY, SECRET or PASSWORD (any case), or is one of
 * `denied`, is never read.
 * Caps: MAX_VARS variables, values cut to MAX_VALUE bytes; what a cap leaves out is counted
 * in the key `env_dropped`.
 *
 * Workload: once per process, tens of records and one allocation (the strings, kept for
 * the process's life as record.h requires). Never on a hot path; nothing printed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cupti.h>

#include "capture.h"

extern char **environ;

#define MAX_VARS        256
#define MAX_VALUE       1024
#define MAX_MPI_VERSION 8192 /* Open MPI's MPI_MAX_LIBRARY_VERSION_STRING is 256, MPICH 8192 */

/* Variables that change what CUDA, NCCL, MPI and the frameworks do. */
static const char *const prefixes[] = {
    "NCCL_",    "CUDA_",   "OMPI_MCA_", "UCX_",   "TORCH_",
    "PYTORCH_", "NVIDIA_", "CUBLAS_",   "CUDNN_", "MERIDIAN_",
};
/* Exact names beyond the prefixes: CPU threads per rank (OMP_NUM_THREADS, MKL_NUM_THREADS:
 * a rank with more threads competes for its cores differently); which libraries a rank
 * loads (LD_LIBRARY_PATH, LD_PRELOAD: the usual way two nodes end up with different
 * CUDA or NCCL builds); XLA_FLAGS (JAX/XLA's compiler and collective options). */
static const char *const exact[] = {
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_LIBRARY_PATH", "LD_PRELOAD", "XLA_FLAGS",
};
static const char *const forbidden[] = {"TOKEN", "KEY", "SECRET", "PASSWORD"};
/* Listed by a prefix but never read: Open MPI's per-job transport key (PSM/OFI keep jobs
 * apart with it; a credential whose name does not say so). */
static const char *const denied[] = {"OMPI_MCA_orte_precondition_transports"};

int mrd__env_allowed(const char *name, size_t len)
{
    char upper[256];
    int listed = 0;
    if (len == 0 || len >= sizeof upper)
        return 0;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] && !listed; i++)
        listed = strncmp(name, prefixes[i], strlen(prefixes[i])) == 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0] && !listed; i++)
        listed = strlen(exact[i]) == len && strncmp(name, exact[i], len) == 0;
    for (size_t i = 0; i < sizeof denied / sizeof denied[0] && listed; i++)
        listed = !(strlen(denied[i]) == len && strncmp(name, denied[i], len) == 0);
    if (!listed)
        return 0;
    for (size_t i = 0; i < len; i++)
        upper[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
    upper[len] = '\0';
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++)
        if (strstr(upper, forbidden[i]))
            return 0;
    return 1;
}

/* Writes one pair; both strings must live for the process's life. */
static void emit(const char *key, const char *value)
{
    struct mrd_record r;
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_ENV;
    r.str[0] = key;
    r.str[1] = value;
    mrd_ring_write(&r);
}

/* Every string kept: a chain from a static head, so that they stay reachable (a leak
 * checker at exit sees them in use, as they are until the flusher has sent them). */
struct kept {
    struct kept *next;
    char s[];
};
static struct kept *_Atomic kept_head;

/* prefix + b[0..blen), kept for the process's life (record.h), or NULL without memory. */
static const char *keep(const char *prefix, const char *b, size_t blen)
{
    size_t alen = strlen(prefix);
    struct kept *k = malloc(sizeof *k + alen + blen + 1);
    if (!k)
        return NULL;
    memcpy(k->s, prefix, alen);
    memcpy(k->s + alen, b, blen);
    k->s[alen + blen] = '\0';
    k->next = atomic_load(&kept_head);
    while (!atomic_compare_exchange_weak(&kept_head, &k->next, k))
        ;
    return k->s;
}

static void emit_kept(const char *key, const char *value, size_t len)
{
    const char *v = keep("", value, len);
    if (v)
        emit(key, v);
}

/* "13.1" from CUDA's 13010. */
static void emit_cuda_version(const char *key, int v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
    emit_kept(key, buf, (size_t)n);
}

/* A symbol of a library already loaded: the global scope first, then each soname given
 * (RTLD_NOLOAD: found only when loaded). The handle is kept (dlclose would drop the
 * reference RTLD_NOLOAD took; the library is loaded anyway). */
static void *loaded_sym(const char *name, const char *const *sonames)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    for (int i = 0; !f && sonames && sonames[i]; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h)
            f = dlsym(h, name);
    }
    return f;
}

static atomic_int nccl_done;

static void capture_nccl(void)
{
    static const char *const sonames[] = {"libnccl.so.2", "libnccl.so", NULL};
    if (atomic_load(&nccl_done))
        return;
    int (*get)(int *) = (int (*)(int *))loaded_sym("ncclGetVersion", sonames);
    int v = 0;
    if (!get || get(&v) != 0 || v <= 0)
        return; /* not loaded yet: asked again at the next communicator's init */
    if (atomic_exchange(&nccl_done, 1))
        return;
    char buf[32];
    int n = v >= 10000 ? snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100)
                       : snprintf(buf, sizeof buf, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    emit_kept("nccl_version", buf, (size_t)n);
}

static void capture_mpi(void)
{
    int (*get)(char *, int *) = (int (*)(char *, int *))loaded_sym("MPI_Get_library_version", NULL);
    if (!get)
        return;
    char *buf = calloc(1, MAX_MPI_VERSION + 1);
    int len = 0;
    if (buf && get(buf, &len) == 0) {
        size_t n = strcspn(buf, "\r\n");
        while (n > 0 && buf[n - 1] == ' ')
            n--;
        if (n > 0)
            emit_kept("mpi_library", buf, n > MAX_VALUE ? MAX_VALUE : n);
    }
    free(buf);
}

static void capture_variables(void)
{
    unsigned dropped = 0, kept = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !mrd__env_allowed(*e, (size_t)(eq - *e)))
            continue;
        size_t vlen = strlen(eq + 1);
        if (kept == MAX_VARS || vlen > MAX_VALUE) {
            dropped++;
            continue;
        }
        const char *key = keep("env:", *e, (size_t)(eq - *e));
        if (key) {
            emit_kept(key, eq + 1, vlen);
            kept++;
        }
    }
    if (dropped) {
        char buf[16];
        int n = snprintf(buf, sizeof buf, "%u", dropped);
        emit_kept("env_dropped", buf, (size_t)n);
    }
}

static void capture_process(void)
{
    static const char *const cudart[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                         NULL};
    char host[256];
    int v = 0;

    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        emit_kept("hostname", host, strlen(host));
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); /* never loads CUDA */
    int (*drv)(int *) = cuda ? (int (*)(int *))dlsym(cuda, "cuDriverGetVersion") : NULL;
    if (drv && drv(&v) == 0 && v > 0)
        emit_cuda_version("driver_version", v);
    int (*rt)(int *) = (int (*)(int *))loaded_sym("cudaRuntimeGetVersion", cudart);
    v = 0;
    if (rt && rt(&v) == 0 && v > 0)
        emit_cuda_version("cuda_runtime_version", v);
    uint32_t cv = 0;
    if (cuptiGetVersion(&cv) == CUPTI_SUCCESS && cv > 0) { /* the CUPTI the agent links */
        char buf[16];
        int n = snprintf(buf, sizeof buf, "%u", cv);
        emit_kept("cupti_version", buf, (size_t)n);
    }
    capture_mpi();
    capture_variables();
}

static pthread_once_t process_once = PTHREAD_ONCE_INIT;

void mrd__env_capture(void)
{
    if (!mrd_agent_active())
        return;
    pthread_once(&process_once, capture_process);
    capture_nccl();
}

/* Writes gpu<device>.<field> = value[0..len). */
static void emit_gpu(uint32_t device, const char *field, const char *value, size_t len)
{
    char key[64];
    int n = snprintf(key, sizeof key, "gpu%u.%s", device, field);
    const char *k = keep("", key, (size_t)n);
    if (k)
        emit_kept(k, value, len);
}

static void emit_gpu_number(uint32_t device, const char *field, unsigned long long v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", v);
    if (v)
        emit_gpu(device, field, num, (size_t)n);
}

void mrd__env_gpu(uint32_t device, const struct mrd__gpu_identity *g)
{
    if (!mrd_agent_active())
        return;
    if (g->name[0])
        emit_gpu(device, "name", g->name, strnlen(g->name, sizeof g->name));
    if (g->uuid[0])
        emit_gpu(device, "uuid", g->uuid, strnlen(g->uuid, sizeof g->uuid));
    emit_gpu_number(device, "memory_mib", g->memory_mib);
    emit_gpu_number(device, "sm_clock_max_mhz", g->sm_clock_max_mhz);
    emit_gpu_number(device, "mem_clock_max_mhz", g->mem_clock_max_mhz);
}
