/* A stand-alone NVTX v3 client for capture_nvtx_multi, built twice (CLIENT = a, b) into two
 * shared objects. NVTX v3 is header-only: each object gets its own private NVTX state and
 * initialises it on its first call by loading NVTX_INJECTION64_PATH and calling its
 * InitializeInjectionNvtx2, exactly like libtorch's NVTX bindings and NCCL in one process.
 */
#include <nvtx3/nvToolsExt.h>

#define CAT2(a, b) a##b
#define CAT(a, b)  CAT2(a, b)
#define FN(name)   CAT(CAT(nvtx_client_, CLIENT), CAT(_, name))

int FN(push)(const char *msg);
int FN(pop)(void);
void FN(mark)(const char *msg);
unsigned long long FN(start)(const char *msg);
void FN(end)(unsigned long long id);

int FN(push)(const char *msg)
{
    return nvtxRangePushA(msg);
}

int FN(pop)(void)
{
    return nvtxRangePop();
}

void FN(mark)(const char *msg)
{
    nvtxMarkA(msg);
}

unsigned long long FN(start)(const char *msg)
{
    return nvtxRangeStartA(msg);
}

void FN(end)(unsigned long long id)
{
    nvtxRangeEnd(id);
}
