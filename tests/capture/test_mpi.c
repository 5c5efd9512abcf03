/* capture_mpi: the PMPI wrappers (agent/mpi/mpi_wrap.c) in a real 2-rank Open MPI job.
 *
 * Run by CTest as `mpirun -np 2 -x LD_PRELOAD=<wrappers built against the capture test
 * library> test_capture_mpi`: the wrappers are preloaded exactly as in production and
 * report through the meridian_mpi_* bridge into the test ring. Each rank makes every
 * wrapped call once with known counts, types, peers and tags, then checks, in order, the
 * MPI records it produced: call name, bytes, peer, tag, communicator size, thread, and
 * start <= end. Also: MPI_Init started the agent; MPI_Finalize ran the agent's exit path
 * (flush hooks) while MPI was still usable (MPI_Finalized == 0 inside the hook), once.
 */
#include <mpi.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "fake_agent.h"

static int finalized_in_hook = -1, hooks_run;

static void exit_hook(void)
{
    int f = 1;
    MPI_Finalized(&f); /* not a wrapped call: no record */
    finalized_in_hook = f;
    hooks_run++;
}

struct want {
    const char *call;
    uint64_t bytes;
    int32_t peer, tag;
    uint32_t comm_size;
};

int main(int argc, char **argv)
{
    fake_reset();
    mrd_agent_on_flush(exit_hook);
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_EQ(fake_start_calls(), 1);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_EQ(size, 2);
    int other = 1 - rank;

    double d[1000] = {0}, dr[1000];
    int ints[64] = {0}, intr[64];
    float f[3] = {1, 2, 3}, fr[3];
    char c[64] = {0}, cr[64];
    short s[16] = {0}, sr[16];
    MPI_Allreduce(d, dr, 1000, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(ints, 10, MPI_INT, 1, MPI_COMM_WORLD);
    MPI_Reduce(f, fr, 3, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allgather(ints, 5, MPI_INT, intr, 5, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoall(ints, 4, MPI_INT, intr, 4, MPI_INT, MPI_COMM_WORLD);
    int recvcounts[2] = {3, 5};
    MPI_Reduce_scatter(ints, intr, recvcounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Gather(c, 6, MPI_CHAR, cr, 6, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Scatter(s, 7, MPI_SHORT, sr, 7, MPI_SHORT, 1, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Send(ints, 40, MPI_INT, 1, 7, MPI_COMM_WORLD);
    } else {
        MPI_Status st;
        MPI_Recv(intr, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    }
    MPI_Request req[2];
    MPI_Isend(d, 50, MPI_DOUBLE, other, 9, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(dr, 50, MPI_DOUBLE, other, 9, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    MPI_Sendrecv(ints, 8, MPI_INT, other, 11, intr, 8, MPI_INT, other, 11, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Isend(c, 32, MPI_CHAR, other, 12, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(cr, 32, MPI_CHAR, other, 12, MPI_COMM_WORLD, &req[1]);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    int flag = 0;
    while (!flag)
        MPI_Test(&req[1], &flag, MPI_STATUS_IGNORE);
    CHECK_EQ(hooks_run, 0);
    MPI_Finalize();
    CHECK_EQ(hooks_run, 1);
    CHECK_EQ(finalized_in_hook, 0);
    CHECK_EQ(fake_shutdown_calls(), 1);

    const struct want want[] = {
        {"MPI_Init", 0, -1, -1, 2},
        {"MPI_Allreduce", 8000, -1, -1, 2},
        {"MPI_Bcast", 40, 1, -1, 2},
        {"MPI_Reduce", 12, 0, -1, 2},
        {"MPI_Allgather", 20, -1, -1, 2},
        {"MPI_Alltoall", 32, -1, -1, 2},
        {"MPI_Reduce_scatter", 32, -1, -1, 2},
        {"MPI_Gather", 6, 0, -1, 2},
        {"MPI_Scatter", 14, 1, -1, 2},
        {"MPI_Barrier", 0, -1, -1, 2},
        {rank == 0 ? "MPI_Send" : "MPI_Recv", 160, rank == 0 ? 1 : 0, 7, 2},
        {"MPI_Isend", 400, other, 9, 2},
        {"MPI_Irecv", 400, other, 9, 2},
        {"MPI_Waitall", 0, -1, -1, 0},
        {"MPI_Sendrecv", 32, other, 11, 2},
        {"MPI_Isend", 32, other, 12, 2},
        {"MPI_Irecv", 32, other, 12, 2},
        {"MPI_Wait", 0, -1, -1, 0},
        {"MPI_Test", 0, -1, -1, 0}, /* only the completing MPI_Test is recorded */
        {"MPI_Finalize", 0, -1, -1, 2},
    };
    const size_t n = sizeof(want) / sizeof(want[0]);
    struct mrd_record r[64];
    CHECK_EQ(fake_ring_take(r, 64), n);
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    for (size_t i = 0; i < n; i++) {
        const struct mrd_mpi *e = &r[i].ev.mpi;
        CHECK_EQ(r[i].kind, MRD_EV_MPI);
        CHECK_STREQ(r[i].str[0], want[i].call);
        CHECK_UEQ(e->bytes, want[i].bytes);
        CHECK_EQ(e->peer, want[i].peer);
        CHECK_EQ(e->tag, want[i].tag);
        CHECK_EQ(e->comm_size, want[i].comm_size);
        CHECK_EQ(e->thread, tid);
        CHECK(e->start > 0 && e->start <= e->end);
        if (i > 0)
            CHECK(r[i - 1].ev.mpi.start <= e->start);
    }
    printf("capture_mpi: rank %d ok (%zu MPI records)\n", rank, n);
    return 0;
}
