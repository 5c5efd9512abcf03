/* A stand-in for NVML (libnvidia-ml.so.1) for capture_env_e2e: one GPU, PCI bus id
 * 0000:9A:00.0 (fake_libcuda.c's device 2), with a fixed name, UUID, memory and maximum
 * clocks, and readings for the sampler. The agent dlopens "libnvidia-ml.so.1"; the test
 * puts this library's directory on LD_LIBRARY_PATH. fake_nvml_samples counts the sampler's
 * completed readings (its last call per device is the utilization) and fake_nvml_identified
 * its identity reads (the last is the maximum memory clock), so a driver can wait until the
 * sampler has done either instead of sleeping. */
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

typedef struct fake_dev *nvml_device_t;
struct nvml_utilization {
    unsigned gpu, memory;
};
struct nvml_memory {
    unsigned long long total, free, used;
};

static struct fake_dev {
    int unused;
} the_gpu;
static atomic_int samples, identified;

int nvmlInit_v2(void);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvml_device_t *dev);
int nvmlDeviceGetClockInfo(nvml_device_t dev, int type, unsigned *mhz);
int nvmlDeviceGetMaxClockInfo(nvml_device_t dev, int type, unsigned *mhz);
int nvmlDeviceGetPowerUsage(nvml_device_t dev, unsigned *mw);
int nvmlDeviceGetTemperature(nvml_device_t dev, int sensor, unsigned *c);
int nvmlDeviceGetCurrentClocksThrottleReasons(nvml_device_t dev, unsigned long long *r);
int nvmlDeviceGetUtilizationRates(nvml_device_t dev, struct nvml_utilization *u);
int nvmlDeviceGetName(nvml_device_t dev, char *buf, unsigned len);
int nvmlDeviceGetUUID(nvml_device_t dev, char *buf, unsigned len);
int nvmlDeviceGetMemoryInfo(nvml_device_t dev, struct nvml_memory *m);
int fake_nvml_samples(void);
int fake_nvml_identified(void);

int nvmlInit_v2(void)
{
    return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvml_device_t *dev)
{
    if (strcasecmp(bus_id, "0000:9A:00.0") != 0)
        return 6; /* NVML_ERROR_NOT_FOUND */
    *dev = &the_gpu;
    return 0;
}

int nvmlDeviceGetClockInfo(nvml_device_t dev, int type, unsigned *mhz)
{
    *mhz = type == 1 ? 1755 : 3201;
    return 0;
}

int nvmlDeviceGetMaxClockInfo(nvml_device_t dev, int type, unsigned *mhz)
{
    *mhz = type == 1 ? 1980 : 3201; /* NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 */
    if (type == 2)                  /* the identity's last reading */
        atomic_fetch_add(&identified, 1);
    return 0;
}

int nvmlDeviceGetPowerUsage(nvml_device_t dev, unsigned *mw)
{
    *mw = 400000;
    return 0;
}

int nvmlDeviceGetTemperature(nvml_device_t dev, int sensor, unsigned *c)
{
    *c = 45;
    return 0;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(nvml_device_t dev, unsigned long long *r)
{
    *r = 0;
    return 0;
}

int nvmlDeviceGetUtilizationRates(nvml_device_t dev, struct nvml_utilization *u)
{
    u->gpu = 90;
    u->memory = 40;
    atomic_fetch_add(&samples, 1);
    return 0;
}

static int copy_out(char *buf, unsigned len, const char *s)
{
    if (len < strlen(s) + 1)
        return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    strcpy(buf, s);
    return 0;
}

int nvmlDeviceGetName(nvml_device_t dev, char *buf, unsigned len)
{
    return copy_out(buf, len, "NVIDIA H200 (fake)");
}

int nvmlDeviceGetUUID(nvml_device_t dev, char *buf, unsigned len)
{
    return copy_out(buf, len, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
}

int nvmlDeviceGetMemoryInfo(nvml_device_t dev, struct nvml_memory *m)
{
    m->total = 143771ull << 20;
    m->used = 1ull << 20;
    m->free = m->total - m->used;
    return 0;
}

int fake_nvml_samples(void)
{
    return atomic_load(&samples);
}

int fake_nvml_identified(void)
{
    return atomic_load(&identified);
}
