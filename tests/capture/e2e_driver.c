/* capture_e2e's driver: the real libmeridian.so loaded the ways a job loads it.
 *
 * Not linked against the agent: NCCL's way (dlopen RTLD_NOW | RTLD_LOCAL, dlsym
 * ncclProfiler_v5) drives one all-reduce (GroupApi, CollApi, KernelLaunch, Coll, two
 * KernelCh with GPU timers) and one send; two NVTX v3 clients (nvtx_client.c, linked) find
 * the agent through NVTX_INJECTION64_PATH; the MPI bridge is called through dlsym as
 * libmeridian_mpi.so would. Then NCCL's dlclose, and a normal exit: the agent's exit path
 * must deliver everything to the meridiand that e2e.py started. Prints the op and launch
 * ids it saw nothing of (the agent assigns them); e2e.py checks the database.
 *
 * `e2e_driver LIB ddp RANK`: instead, one rank of a DDP-like job without NVTX steps (run
 * with MERIDIAN_STEP_COLLECTIVE=auto): a 1-rank communicator, then the 2-rank world one;
 * per iteration a Broadcast and the bucket AllReduces (3 in the first iteration, 4 others
 * after), DDP_ITERATIONS of them. e2e.py checks the steps each rank counted.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_abi.h"

int nvtx_client_a_push(const char *msg);
int nvtx_client_a_pop(void);
void nvtx_client_a_mark(const char *msg);
int nvtx_client_b_push(const char *msg);
int nvtx_client_b_pop(void);

static int fail(const char *what)
{
    fprintf(stderr, "e2e_driver: %s\n", what);
    return 1;
}

#define DDP_ITERATIONS 12

static void ddp_coll(struct mrd_nccl_profiler_v5 *p, void *ctx, const char *func, uint64_t seq,
                     size_t count)
{
    struct mrd_nccl_descr_v5 d;
    void *h = NULL;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.u.coll.seq = seq;
    d.u.coll.func = func;
    d.u.coll.count = count;
    d.u.coll.datatype = "ncclFloat32";
    d.u.coll.algo = "RING";
    d.u.coll.proto = "SIMPLE";
    p->start_event(ctx, &h, &d);
    if (h)
        p->stop_event(h);
}

static int ddp(const char *path, int rank)
{
    static const size_t first_layout[3] = {9000, 6000, 2000};
    static const size_t layout[4] = {4096, 8192, 2048, 1024};
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return fail(dlerror());
    struct mrd_nccl_profiler_v5 *p = dlsym(lib, "ncclProfiler_v5");
    void *local = NULL, *world = NULL;
    int mask = 0;
    if (!p)
        return fail("no ncclProfiler_v5");
    p->init(&local, 0x100 + (uint64_t)rank, &mask, "local", 1, 1, 0, NULL);
    p->init(&world, 0xdd9, &mask, "world", 1, 2, rank, NULL);
    if (!local || !world)
        return fail("NCCL plugin inactive");
    uint64_t ar = 0;
    for (int it = 0; it < DDP_ITERATIONS; it++) {
        ddp_coll(p, world, "Broadcast", (uint64_t)it, 1000);
        for (int b = 0; b < (it ? 4 : 3); b++)
            ddp_coll(p, world, "AllReduce", ar++, it ? layout[b] : first_layout[b]);
        ddp_coll(p, local, "AllReduce", (uint64_t)it, 17);
    }
    p->finalize(local);
    p->finalize(world);
    dlclose(lib);
    printf("e2e_driver: rank %d: %d iterations done\n", rank, DDP_ITERATIONS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[2], "ddp") == 0)
        return ddp(argv[1], atoi(argv[3]));
    if (argc != 2)
        return fail("usage: e2e_driver /abs/libmeridian.so [ddp RANK]");
    nvtx_client_b_push("ncclCommInitRank"); /* NCCL's NVTX copy initialises first */
    nvtx_client_b_pop();
    nvtx_client_a_push("step 0");

    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return fail(dlerror());
    struct mrd_nccl_profiler_v5 *p = dlsym(lib, "ncclProfiler_v5");
    void (*mpi_record)(const char *, int64_t, int64_t, uint64_t, int32_t, int32_t, uint32_t) =
        (void (*)(const char *, int64_t, int64_t, uint64_t, int32_t, int32_t, uint32_t))dlsym(
            lib, "meridian_mpi_record");
    int64_t (*mpi_now)(void) = (int64_t(*)(void))dlsym(lib, "meridian_mpi_now");
    if (!p || !mpi_record || !mpi_now)
        return fail("missing entry points");

    void *ctx = NULL;
    int mask = 0;
    p->init(&ctx, 0x1122334455667788ULL, &mask, "world", 1, 2, 0, NULL);
    if (!ctx || !(mask & MRD_NCCL_EV_KERNEL_CH))
        return fail("NCCL plugin inactive");
    struct mrd_nccl_descr_v5 d;
    void *group, *api, *launch, *op, *ch[2], *send;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    p->start_event(ctx, &group, &d);
    d.type = MRD_NCCL_EV_COLL_API;
    d.parent = group;
    p->start_event(ctx, &api, &d);
    p->stop_event(api);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_LAUNCH;
    d.parent = group;
    p->start_event(ctx, &launch, &d);
    p->stop_event(launch);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.parent = api;
    d.u.coll.seq = 41;
    d.u.coll.func = "AllReduce";
    d.u.coll.count = 2097152;
    d.u.coll.datatype = "ncclFloat32";
    d.u.coll.n_channels = 2;
    d.u.coll.n_warps = 16;
    d.u.coll.algo = "RING";
    d.u.coll.proto = "SIMPLE";
    p->start_event(ctx, &op, &d);
    p->stop_event(op);
    for (int c = 0; c < 2; c++) {
        memset(&d, 0, sizeof(d));
        d.type = MRD_NCCL_EV_KERNEL_CH;
        d.parent = op;
        d.u.kernel_ch.channel = (uint8_t)c;
        d.u.kernel_ch.ptimer = 5000000000ULL + 1000 * (uint64_t)c;
        p->start_event(ctx, &ch[c], &d);
        union mrd_nccl_state_args a = {.kernel_ch = {5000000000ULL + 1000 * (uint64_t)c + 700}};
        p->record_event_state(ch[c], MRD_NCCL_STATE_KERNEL_CH_STOP, &a);
        p->stop_event(ch[c]);
    }
    p->stop_event(group);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_P2P;
    d.u.p2p.func = "Send";
    d.u.p2p.count = 1000;
    d.u.p2p.datatype = "ncclInt8";
    d.u.p2p.peer = 1;
    d.u.p2p.n_channels = 1;
    p->start_event(ctx, &send, &d);
    p->stop_event(send);
    p->finalize(ctx);
    dlclose(lib); /* what NCCL does after its last communicator */

    int64_t t0 = mpi_now();
    mpi_record("MPI_Allreduce", t0, t0 + 1500, 8000, -1, -1, 2);
    nvtx_client_a_mark("checkpoint");
    nvtx_client_a_pop();
    printf("e2e_driver: done\n");
    return 0;
}
