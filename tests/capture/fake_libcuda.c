/* A stand-in for the CUDA driver (libcuda.so.1) with the entry points the agent asks of an
 * already loaded driver (agent/capture/gpu_sample.c, env.c): a current context on device 2,
 * whose PCI bus id, name and UUID are fixed, and driver version 13.1 (13010). test_nccl_plugin dlopens it by path before a
 * communicator's init, so that the agent's dlopen("libcuda.so.1", RTLD_NOLOAD) finds it, as
 * it finds the real driver in a CUDA process. */
#include <string.h>

#define FAKE_DEVICE 2

int cuCtxGetDevice(int *dev);
int cuDeviceGet(int *dev, int ordinal);
int cuDeviceGetPCIBusId(char *buf, int len, int dev);
int cuDeviceGetName(char *buf, int len, int dev);
int cuDeviceGetUuid_v2(unsigned char *uuid, int dev);
int cuDriverGetVersion(int *version);

int cuDriverGetVersion(int *version)
{
    *version = 13010;
    return 0;
}

int cuCtxGetDevice(int *dev)
{
    *dev = FAKE_DEVICE;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal != FAKE_DEVICE)
        return 101;        /* CUDA_ERROR_INVALID_DEVICE */
    *dev = 1000 + ordinal; /* a handle, not the ordinal */
    return 0;
}

static int copy_out(char *buf, int len, const char *s)
{
    if (len < (int)strlen(s) + 1)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    strcpy(buf, s);
    return 0;
}

int cuDeviceGetPCIBusId(char *buf, int len, int dev)
{
    return dev == 1000 + FAKE_DEVICE ? copy_out(buf, len, "0000:9A:00.0") : 101;
}

int cuDeviceGetName(char *buf, int len, int dev)
{
    return dev == 1000 + FAKE_DEVICE ? copy_out(buf, len, "Fake H200") : 101;
}

int cuDeviceGetUuid_v2(unsigned char *uuid, int dev)
{
    if (dev != 1000 + FAKE_DEVICE)
        return 101;
    for (int i = 0; i < 16; i++)
        uuid[i] = (unsigned char)(0xa0 + i);
    return 0;
}
