/* capture_nvtx_multi: two real NVTX v3 clients in one process, as in PyTorch jobs.
 *
 * libtorch's Python bindings (torch.cuda.nvtx -> nvtxRangePushA/Pop, nvtxRangeStartA/End,
 * nvtxMarkA) and NCCL each carry their own copy of NVTX v3's header-only state; each copy
 * loads NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2 on its own first call.
 * Here two shared objects built from nvtx_client.c play those two parts, with
 * NVTX_INJECTION64_PATH pointing at the capture test library (set by CTest). Checked: both
 * copies are served (two InitializeInjectionNvtx2 calls), NVTX's own dlopen of the path
 * lands in the instance this process already uses, and every range and mark from both
 * clients arrives with its name, in order, properly nested.
 */
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "fake_agent.h"

int nvtx_client_a_push(const char *msg);
int nvtx_client_a_pop(void);
void nvtx_client_a_mark(const char *msg);
unsigned long long nvtx_client_a_start(const char *msg);
void nvtx_client_a_end(unsigned long long id);
int nvtx_client_b_push(const char *msg);
int nvtx_client_b_pop(void);
void nvtx_client_b_mark(const char *msg);

static const char *name_of(const struct mrd_record *r)
{
    return r->inline_str[0] ? r->inline_str : r->str[1];
}

int main(void)
{
    const char *path = getenv("NVTX_INJECTION64_PATH");
    CHECK(path != NULL && path[0] == '/');
    fake_reset();
    CHECK_EQ(mrd__nvtx_clients(), 0);

    /* Client b (say, NCCL) initialises first, then a (say, torch). */
    nvtx_client_b_mark("nccl-init");
    CHECK_EQ(mrd__nvtx_clients(), 1);
    CHECK_EQ(nvtx_client_a_push("step 0"), 0);
    CHECK_EQ(mrd__nvtx_clients(), 2);
    /* Push/pop stacks are per thread, shared by the clients of the thread. */
    CHECK_EQ(nvtx_client_b_push("ncclAllReduce"), 1);
    CHECK_EQ(nvtx_client_b_pop(), 1);
    unsigned long long id = nvtx_client_a_start("optimizer");
    CHECK(id != 0);
    nvtx_client_a_end(id);
    nvtx_client_a_mark("checkpoint");
    CHECK_EQ(nvtx_client_a_pop(), 0);
    CHECK_EQ(mrd__nvtx_clients(), 2); /* each copy initialises once */

    struct mrd_record r[8];
    CHECK_EQ(fake_ring_take(r, 8), 5);
    const char *want[] = {"nccl-init", "ncclAllReduce", "optimizer", "checkpoint", "step 0"};
    const uint32_t kinds[] = {MRD_NVTX_MARK, MRD_NVTX_PUSHPOP, MRD_NVTX_STARTEND, MRD_NVTX_MARK,
                              MRD_NVTX_PUSHPOP};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(r[i].kind, MRD_EV_NVTX);
        CHECK_STREQ(name_of(&r[i]), want[i]);
        CHECK_EQ(r[i].ev.nvtx.kind, kinds[i]);
        CHECK(r[i].ev.nvtx.end >= r[i].ev.nvtx.start);
    }
    CHECK_EQ(r[1].ev.nvtx.depth, 1);
    CHECK_EQ(r[4].ev.nvtx.depth, 0);
    CHECK(r[4].ev.nvtx.start <= r[1].ev.nvtx.start && r[1].ev.nvtx.end <= r[4].ev.nvtx.end);
    printf("capture_nvtx_multi: ok (%llu NVTX clients served)\n",
           (unsigned long long)mrd__nvtx_clients());
    return 0;
}
