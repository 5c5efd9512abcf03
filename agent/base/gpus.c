/* GPUs seen by capture (see gpus.h): a fixed table under a mutex, with a generation
 * number the flusher polls cheaply. A handful of calls per process. */
#include "gpus.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mrd_gpu g_gpus[MRD_MAX_GPUS];
static unsigned g_n;
static _Atomic uint64_t g_gen;

static void copy_trunc(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

void mrd__gpus_add(uint32_t device, const char *uuid, const char *pci_bus_id, const char *name)
{
    pthread_mutex_lock(&g_lock);
    unsigned i = 0;
    while (i < g_n && g_gpus[i].device != device)
        i++;
    if (i < MRD_MAX_GPUS) {
        struct mrd_gpu g = {.device = device};
        copy_trunc(g.uuid, sizeof g.uuid, uuid);
        copy_trunc(g.pci_bus_id, sizeof g.pci_bus_id, pci_bus_id);
        copy_trunc(g.name, sizeof g.name, name);
        if (i == g_n || memcmp(&g, &g_gpus[i], sizeof g) != 0) {
            g_gpus[i] = g;
            if (i == g_n)
                g_n++;
            atomic_fetch_add(&g_gen, 1);
        }
    }
    pthread_mutex_unlock(&g_lock);
}

unsigned mrd__gpus_snapshot(struct mrd_gpu out[MRD_MAX_GPUS], uint64_t *gen)
{
    pthread_mutex_lock(&g_lock);
    unsigned n = g_n;
    memcpy(out, g_gpus, n * sizeof *out);
    *gen = atomic_load(&g_gen);
    pthread_mutex_unlock(&g_lock);
    return n;
}

uint64_t mrd__gpus_generation(void)
{
    return atomic_load_explicit(&g_gen, memory_order_relaxed);
}
