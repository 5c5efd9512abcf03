/* capture_nccl_unload: NCCL dlcloses its profiler plugin after the last communicator is
 * destroyed; the agent (threads, rings) lives in the same object, so it must stay mapped.
 *
 * This program does what NCCL does with the plugin (dlopen RTLD_NOW | RTLD_LOCAL, dlsym
 * ncclProfiler_v5, init, finalize, dlclose) on the capture test library, which it does
 * not link, and checks that the library is still loaded afterwards (RTLD_NOLOAD finds it)
 * and its table still callable. Without the pin the dlclose would unmap it.
 */
#include <dlfcn.h>

#include "check.h"
#include "nccl_abi.h"

#ifndef CAPTURE_LIB
#error "CAPTURE_LIB (path of the capture test library) must be defined"
#endif

int main(void)
{
    void *lib = dlopen(CAPTURE_LIB, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    struct mrd_nccl_profiler_v5 *p = dlsym(lib, "ncclProfiler_v5");
    CHECK(p != NULL);
    void *ctx = NULL;
    int mask = 0;
    CHECK_EQ(p->init(&ctx, 1, &mask, "c", 1, 2, 0, NULL), 0);
    CHECK(ctx != NULL);
    CHECK(mask != 0);
    CHECK_EQ(p->finalize(ctx), 0);
    CHECK_OK(dlclose(lib));
    void *still = dlopen(CAPTURE_LIB, RTLD_NOW | RTLD_NOLOAD);
    CHECK(still != NULL);
    CHECK(dlsym(still, "ncclProfiler_v5") == (void *)p);
    printf("capture_nccl_unload: ok\n");
    return 0;
}
