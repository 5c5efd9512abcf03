/* nvtx_client.h: an NVTX client simulated for tests of meridian's NVTX injection.
 *
 * Where it sits: tests that call InitializeInjectionNvtx2 as the NVTX headers of an
 * application would (tests/capture/test_nvtx.c, tests/agent/test_noring.c). It plays the
 * NVTX side of the export-table handshake: an export table whose GetModuleFunctionTable
 * hands out tables of pointers to function-pointer slots, as nvtxDetail/nvtxImpl.h does.
 * The injection fills the slots of the client `nvtx_client_cur` points at; the test then
 * calls them (NVTX_CORE / NVTX_CORE2). Include after <nvtx3/nvToolsExt.h> with
 * NVTX_NO_IMPL defined. Header-only, static: one client table set per test binary.
 */
#ifndef MRD_TEST_NVTX_CLIENT_H
#define MRD_TEST_NVTX_CLIENT_H

#include <string.h>

struct nvtx_client {
    NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE], core2[NVTX_CBID_CORE2_SIZE];
    NvtxFunctionPointer *core_tab[NVTX_CBID_CORE_SIZE + 1], *core2_tab[NVTX_CBID_CORE2_SIZE + 1];
};

/* The client whose tables the next InitializeInjectionNvtx2 fills. */
static struct nvtx_client *nvtx_client_cur;

/* Slot `name` of client c as a function of type `type`, e.g.
 * NVTX_CORE(&cl, MarkA, void (*)(const char *))("x"). */
#define NVTX_CORE(c, name, type)  ((type)(c)->core[NVTX_CBID_CORE_##name])
#define NVTX_CORE2(c, name, type) ((type)(c)->core2[NVTX_CBID_CORE2_##name])

static int NVTX_API nvtx_client_get_module(NvtxCallbackModule m, NvtxFunctionTable *out,
                                           unsigned *size)
{
    if (m == NVTX_CB_MODULE_CORE) {
        *out = nvtx_client_cur->core_tab;
        *size = NVTX_CBID_CORE_SIZE;
        return 1;
    }
    if (m == NVTX_CB_MODULE_CORE2) {
        *out = nvtx_client_cur->core2_tab;
        *size = NVTX_CBID_CORE2_SIZE;
        return 1;
    }
    return 0;
}

static const NvtxExportTableCallbacks nvtx_client_callbacks = {sizeof(NvtxExportTableCallbacks),
                                                               nvtx_client_get_module};

/* What the test passes to InitializeInjectionNvtx2. */
static const void *NVTX_API nvtx_client_export_table(uint32_t id)
{
    return id == NVTX_ETID_CALLBACKS ? &nvtx_client_callbacks : NULL;
}

/* The agent's NVTX injection entry point (agent/capture/nvtx.c), which the test calls
 * with nvtx_client_export_table as NVTX's loader would. */
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

/* A push and a pop of range `message` through c's tables, as the application's NVTX
 * calls reach the agent; they return what the agent's handlers return. */
static inline int nvtx_client_push(struct nvtx_client *c, const char *message)
{
    return NVTX_CORE(c, RangePushA, nvtxRangePushA_impl_fntype)(message);
}

static inline int nvtx_client_pop(struct nvtx_client *c)
{
    return NVTX_CORE(c, RangePop, nvtxRangePop_impl_fntype)();
}

/* Empties c's slots, points its tables at them, and makes it the current client. */
static void nvtx_client_init(struct nvtx_client *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 1; i < NVTX_CBID_CORE_SIZE; i++)
        c->core_tab[i] = &c->core[i];
    for (int i = 1; i < NVTX_CBID_CORE2_SIZE; i++)
        c->core2_tab[i] = &c->core2[i];
    nvtx_client_cur = c;
}

#endif
