/* GPU samples: NVML readings of every GPU this rank registered (clocks, power,
 * temperature, throttle reasons, utilization), at the rates below, as gpu_sample events.
 *
 * Where it sits: capture, on a thread of its own ("meridian-nvml", started with signals
 * blocked when CUPTI reports the first device, mrd__gpu_sample_add); records go into that
 * thread's ring like any capture source's, and from there the flusher batches them (the
 * kind is a line of proto/kinds.h). NVML is optional: it is loaded with dlopen
 * (libnvidia-ml.so.1) the first time; without it, or when nvmlInit fails, the thread is
 * never started: no samples and no error (only a bad rate is still said, below). A GPU is
 * found in NVML by the PCI bus id of CUPTI's DEVICE record, so CUDA_VISIBLE_DEVICES
 * renumbering does not matter; a reading NVML refuses (not supported on this GPU) is
 * stored as 0. Devices arrive with CUPTI's DEVICE records, and, without CUPTI (the steady
 * tier between windows), with each NCCL communicator's init (mrd__gpu_from_driver: the
 * device current on NCCL's thread, its PCI bus id, UUID and name asked of the CUDA driver
 * the process already loaded).
 *
 * Rates (read once, when the first GPU arrives, NVML or not; a bad value is said once on
 * stderr and that rate is 0):
 *   MERIDIAN_GPU_SAMPLE_HZ         (default 1, 0 to 100) while CUPTI traces: the full
 *                                  tier, and a steady-tier window from its attach to its
 *                                  detach (cupti.c says so: mrd__gpu_sample_tracing);
 *   MERIDIAN_GPU_SAMPLE_STEADY_HZ  (default 1, but never more than MERIDIAN_GPU_SAMPLE_HZ,
 *                                  so HZ=0 alone still means no readings; 0 to 100) while
 *                                  it does not: the steady tier between windows, and a
 *                                  process whose CUPTI is not this agent's (Nsight's, or
 *                                  capture off).
 * A change (CUPTI attached or detached) wakes the sampler and makes a reading due at once:
 * every window gets a reading at its attach, however short, and then its full rate. Both
 * 0 keeps the thread for the fingerprint's identity only, waiting for new devices. Why 1 Hz
 * by default, traced or not: the NVML calls contend with a launching thread in the driver;
 * on a launch-bound storm the sampler at 10 Hz cost it ~0.7% (0.2-2.3%, run 37,
 * tests/bench/overhead/RESULTS-tiers.md), which the steady tier, meant to stay on for the
 * whole job, cannot afford between windows, nor a traced step measured against a bare
 * CUPTI consumer inside them (~0.7 of the ~0.9 points kernel-dense's traced steps cost over
 * it, session 19's prediction); a reading a second still shows sustained throttling, power
 * capping and heat on every rank, and every window has its attach reading (and, while the
 * steady rate is not 0, its detach reading).
 * MERIDIAN_GPU_SAMPLE_HZ=10 gives windows and the full tier the fine readings back.
 *
 * Workload: at most MAX_DEVICES devices x HZ x seven NVML calls (the handle by PCI bus id,
 * six readings; each a driver ioctl, ~32 us a sample on an H200): nothing on application
 * threads. A fork child has no sampler
 * (threads do not survive fork); the thread ends with the process.
 *
 * The same thread reads each device's identity once for the environment fingerprint
 * (env.c): name, UUID, total memory and maximum SM and memory clocks (NVML entry points
 * that are optional: a missing one leaves its key out). mrd__gpu_sample_add also starts
 * the fingerprint's process part (mrd__env_capture): a GPU's arrival means CUDA is up.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "worker.h"

#define DEFAULT_HZ        1
#define DEFAULT_STEADY_HZ 1
#define MAX_HZ            100
#define MAX_DEVICES       16 /* a rank drives one to a few GPUs; more are ignored */

struct device {
    uint32_t device;
    char pci_bus_id[32];
    int identified; /* its fingerprint keys were written */
};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed; /* generation moved (CLOCK_MONOTONIC waits; init_cond) */
static atomic_uint generation; /* +1 at each device added and each CUPTI attach or detach */
static struct device devices[MAX_DEVICES];
static unsigned ndevices;
static long period_ns;        /* while CUPTI traces; 0: no readings then */
static long steady_period_ns; /* while CUPTI does not trace; 0: no readings then */
static atomic_int tracing;    /* mrd__gpu_sample_tracing: CUPTI traces now */

/* The few NVML entry points used, declared here (no NVML headers needed to build). */
typedef struct nvml_device *nvml_device_t;
struct nvml_utilization {
    unsigned gpu, memory;
};
struct nvml_memory {
    unsigned long long total, free, used;
};
enum { NVML_SUCCESS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };

static struct {
    int (*init)(void);
    int (*by_pci)(const char *bus_id, nvml_device_t *dev);
    int (*clock)(nvml_device_t dev, int type, unsigned *mhz);
    int (*power)(nvml_device_t dev, unsigned *mw);
    int (*temperature)(nvml_device_t dev, int sensor, unsigned *c);
    int (*throttle)(nvml_device_t dev, unsigned long long *reasons);
    int (*utilization)(nvml_device_t dev, struct nvml_utilization *u);
    /* optional: the fingerprint's identity of a device */
    int (*name)(nvml_device_t dev, char *buf, unsigned len);
    int (*uuid)(nvml_device_t dev, char *buf, unsigned len);
    int (*memory)(nvml_device_t dev, struct nvml_memory *m);
    int (*max_clock)(nvml_device_t dev, int type, unsigned *mhz);
} nv;

static pthread_once_t once = PTHREAD_ONCE_INIT, cond_once = PTHREAD_ONCE_INIT;

static void init_cond(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&changed, &ca);
    pthread_condattr_destroy(&ca);
}

/* The state changed: the generation moves and the sampler wakes. */
static void bump(void)
{
    pthread_once(&cond_once, init_cond);
    pthread_mutex_lock(&mu);
    atomic_fetch_add(&generation, 1);
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&mu);
}

/* Loads NVML and its entry points; 0, or -1 when any is missing or nvmlInit fails. */
static int load_nvml(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    *(void **)&nv.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv.by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nv.clock = dlsym(h, "nvmlDeviceGetClockInfo");
    *(void **)&nv.power = dlsym(h, "nvmlDeviceGetPowerUsage");
    *(void **)&nv.temperature = dlsym(h, "nvmlDeviceGetTemperature");
    *(void **)&nv.throttle = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&nv.utilization = dlsym(h, "nvmlDeviceGetUtilizationRates");
    *(void **)&nv.name = dlsym(h, "nvmlDeviceGetName");
    *(void **)&nv.uuid = dlsym(h, "nvmlDeviceGetUUID");
    *(void **)&nv.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.max_clock = dlsym(h, "nvmlDeviceGetMaxClockInfo");
    if (!nv.init || !nv.by_pci || !nv.clock || !nv.power || !nv.temperature || !nv.throttle ||
        !nv.utilization || nv.init() != NVML_SUCCESS) {
        dlclose(h);
        return -1;
    }
    return 0; /* kept loaded for the process's life */
}

/* Reads one GPU into a record and writes it to this thread's ring. */
static void sample(const struct device *g)
{
    struct mrd_record r;
    nvml_device_t dev;
    unsigned v = 0;
    unsigned long long reasons = 0;
    struct nvml_utilization u = {0, 0};

    if (!g->pci_bus_id[0] || nv.by_pci(g->pci_bus_id, &dev) != NVML_SUCCESS)
        return;
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_GPU_SAMPLE;
    struct mrd_gpu_sample *e = &r.ev.gpu_sample;
    e->host_ns = mrd_clock_now();
    e->device = g->device;
    e->sm_clock_mhz = nv.clock(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS ? v : 0;
    e->mem_clock_mhz = nv.clock(dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS ? v : 0;
    e->power_mw = nv.power(dev, &v) == NVML_SUCCESS ? v : 0;
    e->temperature_c = nv.temperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS ? v : 0;
    e->throttle_reasons = nv.throttle(dev, &reasons) == NVML_SUCCESS ? reasons : 0;
    e->utilization_pct = nv.utilization(dev, &u) == NVML_SUCCESS ? u.gpu : 0;
    mrd_ring_write(&r); /* a full ring drops and counts it, like any capture record */
}

/* Reads one GPU's identity and writes its fingerprint keys (env.c). */
static void identify(const struct device *g)
{
    struct mrd__gpu_identity id;
    struct nvml_memory m = {0, 0, 0};
    nvml_device_t dev;
    unsigned v = 0;

    if (!g->pci_bus_id[0] || nv.by_pci(g->pci_bus_id, &dev) != NVML_SUCCESS)
        return;
    memset(&id, 0, sizeof id);
    if (nv.name && nv.name(dev, id.name, sizeof id.name) != NVML_SUCCESS)
        id.name[0] = '\0';
    if (nv.uuid && nv.uuid(dev, id.uuid, sizeof id.uuid) != NVML_SUCCESS)
        id.uuid[0] = '\0';
    id.name[sizeof id.name - 1] = id.uuid[sizeof id.uuid - 1] = '\0';
    if (nv.memory && nv.memory(dev, &m) == NVML_SUCCESS)
        id.memory_mib = m.total >> 20;
    if (nv.max_clock && nv.max_clock(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
        id.sm_clock_max_mhz = v;
    if (nv.max_clock && nv.max_clock(dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
        id.mem_clock_max_mhz = v;
    mrd__env_gpu(g->device, &id);
}

/* Sleeps until `until` (CLOCK_MONOTONIC ns; INT64_MAX: no deadline) or a change: a new
 * device, or CUPTI attached or detached (the generation moved past `seen`). */
static void wait_change(int64_t until, unsigned seen)
{
    struct timespec ts = {.tv_sec = until / 1000000000LL, .tv_nsec = until % 1000000000LL};
    pthread_mutex_lock(&mu); /* `changed` is set up: the first device's bump came first */
    while (atomic_load(&generation) == seen) {
        if (until == INT64_MAX)
            pthread_cond_wait(&changed, &mu);
        else if (pthread_cond_timedwait(&changed, &mu, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&mu);
}

/* The loop: identities first, then a reading when one is due at the rate that applies now
 * (CUPTI tracing or not). A change makes a reading due at once, at the new rate. Between
 * readings it sleeps to absolute deadlines (no drift with load), or until a change. */
static void *sampler_main(void *arg)
{
    int64_t due = mrd__mono_ns();
    unsigned seen_gen = ~0u;
    (void)arg;
    for (;;) {
        unsigned gen = atomic_load(&generation); /* before the state it describes is read */
        struct device d[MAX_DEVICES];
        pthread_mutex_lock(&mu);
        unsigned n = ndevices;
        memcpy(d, devices, n * sizeof d[0]);
        pthread_mutex_unlock(&mu);
        for (unsigned i = 0; i < n; i++) {
            if (d[i].identified)
                continue;
            identify(&d[i]);
            pthread_mutex_lock(&mu); /* slots are never reordered; a slot given a new bus id
                                      * meanwhile stays unidentified */
            if (strcmp(devices[i].pci_bus_id, d[i].pci_bus_id) == 0)
                devices[i].identified = 1;
            pthread_mutex_unlock(&mu);
        }
        long p = atomic_load(&tracing) ? period_ns : steady_period_ns;
        int64_t now = mrd__mono_ns();
        if (gen != seen_gen) { /* first time round, or CUPTI attached or detached */
            seen_gen = gen;
            due = now;
        }
        if (p > 0 && now >= due) {
            for (unsigned i = 0; i < n; i++)
                sample(&d[i]);
            due += p;
            if (due <= now)
                due = now + p; /* fell behind */
        }
        wait_change(p > 0 ? due : INT64_MAX, gen);
    }
    return NULL;
}

/* One rate variable -> a period in ns (0: no readings). */
static long read_period(const char *name, unsigned dflt)
{
    unsigned hz = dflt;
    if (mrd__capture_env_uint(name, dflt, 0, MAX_HZ,
                              "GPU samples (NVML) stay off there, the rest of capture goes on",
                              &hz) != 0)
        hz = 0;
    return hz > 0 ? 1000000000L / hz : 0;
}

static void start_once(void)
{
    pthread_t t;
    /* first: a bad value is said even where NVML is absent */
    period_ns = read_period("MERIDIAN_GPU_SAMPLE_HZ", DEFAULT_HZ);
    /* the steady default never reads more often than the traced rate: HZ=0 alone is off */
    steady_period_ns =
        read_period("MERIDIAN_GPU_SAMPLE_STEADY_HZ", period_ns == 0 ? 0 : DEFAULT_STEADY_HZ);
    if (load_nvml() < 0)
        return; /* no NVML: no samples */
    if (mrd_worker_start(&t, "meridian-nvml", sampler_main, NULL) == 0)
        pthread_detach(t);
}

int mrd__gpu_driver_device(void)
{
    typedef int (*ctx_dev_fn)(int *);
    int dev = -1;
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); /* never loads CUDA */
    if (!lib)
        return -1;
    ctx_dev_fn fn = (ctx_dev_fn)dlsym(lib, "cuCtxGetDevice");
    if (!fn || fn(&dev) != 0)
        dev = -1;
    dlclose(lib);
    return dev;
}

void mrd__gpu_from_driver(uint32_t device)
{
    typedef int (*get_fn)(int *, int);
    typedef int (*pci_fn)(char *, int, int);
    typedef int (*name_fn)(char *, int, int);
    typedef int (*uuid_fn)(unsigned char *, int);
    char pci[32] = "", name[96] = "", uuid[48] = "";
    unsigned char u[16];
    int dev = 0;
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); /* never loads CUDA */
    if (!lib)
        return;
    get_fn get = (get_fn)dlsym(lib, "cuDeviceGet");
    pci_fn pcif = (pci_fn)dlsym(lib, "cuDeviceGetPCIBusId");
    name_fn namef = (name_fn)dlsym(lib, "cuDeviceGetName");
    uuid_fn uuidf = (uuid_fn)dlsym(lib, "cuDeviceGetUuid_v2");
    if (get && get(&dev, (int)device) == 0) {
        if (pcif && pcif(pci, (int)sizeof pci, dev) != 0)
            pci[0] = '\0';
        if (namef && namef(name, (int)sizeof name, dev) != 0)
            name[0] = '\0';
        if (uuidf && uuidf(u, dev) == 0) /* the format of CUPTI's DEVICE record */
            snprintf(uuid, sizeof uuid,
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                     u[12], u[13], u[14], u[15]);
    }
    dlclose(lib);
    if (!pci[0])
        return; /* no driver answer: nothing to sample or to name */
    mrd_agent_add_gpu(device, uuid, pci, name);
    mrd__gpu_sample_add(device, pci);
}

void mrd__gpu_sample_tracing(int on)
{
    atomic_store(&tracing, on != 0);
    bump();
}

void mrd__gpu_sample_add(uint32_t device, const char *pci_bus_id)
{
    pthread_mutex_lock(&mu);
    unsigned i = 0;
    while (i < ndevices && devices[i].device != device)
        i++;
    if (i < MAX_DEVICES) {
        devices[i].device = device;
        if (i == ndevices || strcmp(devices[i].pci_bus_id, pci_bus_id ? pci_bus_id : "") != 0)
            devices[i].identified = 0;
        snprintf(devices[i].pci_bus_id, sizeof devices[i].pci_bus_id, "%s",
                 pci_bus_id ? pci_bus_id : "");
        if (i == ndevices)
            ndevices++;
    }
    pthread_mutex_unlock(&mu);
    bump();
    mrd__env_capture(); /* CUDA is up: the fingerprint's process part, once */
    pthread_once(&once, start_once);
}
