/* libmeridian_mpi.so: PMPI wrappers that time MPI calls for meridian.
 *
 * Where this sits: in MPI jobs the launcher LD_PRELOADs this library (not libmeridian.so
 * itself, which must stay free of MPI symbols). Each wrapper below defines MPI_X, calls
 * PMPI_X, and hands the call's start/end, bytes, peer, tag and communicator size to
 * libmeridian.so through its meridian_mpi_* bridge (agent/capture/mpi_bridge.h), which
 * writes one MRD_EV_MPI record to the calling thread's ring. With Open MPI, MPI_* are weak
 * aliases of PMPI_*, so every C caller (mpi4py included) lands here; Fortran mpif.h
 * bindings call PMPI_* directly and are not seen.
 *
 * Lifecycle: MPI_Init / MPI_Init_thread start the agent after PMPI_Init (the rank
 * environment is set by mpirun before, the agent only needs it read once). MPI_Finalize
 * runs the agent's exit path BEFORE PMPI_Finalize, while the network still works.
 * No constructor: loading this library touches neither CUDA nor CUPTI.
 *
 * Workload: one record per call; when the agent is inert each wrapper costs one atomic
 * load on top of the PMPI call. Bytes are what this rank contributes: count * type size
 * (Alltoall: sendcount * size * comm size; Reduce_scatter: sum of recvcounts * size;
 * receive-only calls: what they receive). MPI_Test is recorded only when it completes the
 * request, so polling loops do not flood the ring.
 */
#include <mpi.h>
#include <stdint.h>

#include "mpi_bridge.h"

static uint64_t type_bytes(int count, MPI_Datatype type)
{
    int size = 0;
    if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

static uint32_t comm_size(MPI_Comm comm)
{
    int n = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS || n < 0)
        return 0;
    return (uint32_t)n;
}

static void rec(const char *call, int64_t t0, uint64_t bytes, int peer, int tag, uint32_t n)
{
    meridian_mpi_record(call, t0, meridian_mpi_now(), bytes, peer, tag, n);
}

/* The bytes of (count, type), or of (in_place_count, in_place_type) when buf is
 * MPI_IN_PLACE: the rank's own contribution then sits in the other buffer. */
static uint64_t own_bytes(const void *buf, int count, MPI_Datatype type, int in_place_count,
                          MPI_Datatype in_place_type)
{
    return buf == MPI_IN_PLACE ? type_bytes(in_place_count, in_place_type)
                               : type_bytes(count, type);
}

/* Reduce_scatter: what every rank receives, summed over the communicator's n ranks. */
static uint64_t scattered_bytes(const int recvcounts[], MPI_Datatype type, uint32_t n)
{
    uint64_t count = 0;
    for (uint32_t i = 0; recvcounts && i < n; i++)
        count += recvcounts[i] > 0 ? (uint64_t)recvcounts[i] : 0;
    return count * type_bytes(1, type);
}

/* MPI_Init and MPI_Init_thread: the agent starts once MPI is up, and the call that started
 * it is its first record. */
static int started(int rc, const char *call, int64_t t0)
{
    if (rc == MPI_SUCCESS && meridian_mpi_start())
        rec(call, t0, 0, -1, -1, comm_size(MPI_COMM_WORLD));
    return rc;
}

int MPI_Init(int *argc, char ***argv)
{
    int64_t t0 = meridian_mpi_now();
    return started(PMPI_Init(argc, argv), "MPI_Init", t0);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int64_t t0 = meridian_mpi_now();
    return started(PMPI_Init_thread(argc, argv, required, provided), "MPI_Init_thread", t0);
}

int MPI_Finalize(void)
{
    if (meridian_mpi_active()) {
        int64_t t0 = meridian_mpi_now();
        meridian_mpi_record("MPI_Finalize", t0, t0, 0, -1, -1, comm_size(MPI_COMM_WORLD));
        meridian_mpi_shutdown();
    }
    return PMPI_Finalize();
}

/* TIMED_CALL(name, params, args, bytes, peer, tag, nranks) defines MPI_name(params), the
 * wrapper of a call whose record follows from its arguments alone: PMPI_name(args) and
 * nothing else while the agent is inert; otherwise the call is timed and recorded with
 * bytes, peer, tag and nranks, expressions over the arguments evaluated after PMPI_name
 * returned: nranks first, into n_, which the bytes expression may use (one comm_size). */
#define TIMED_CALL(name, params, args, bytes, peer, tag, nranks)                                   \
    int MPI_##name params                                                                          \
    {                                                                                              \
        if (!meridian_mpi_active())                                                                \
            return PMPI_##name args;                                                               \
        int64_t t0 = meridian_mpi_now();                                                           \
        int rc = PMPI_##name args;                                                                 \
        uint32_t n_ = (nranks);                                                                    \
        rec("MPI_" #name, t0, bytes, peer, tag, n_);                                               \
        return rc;                                                                                 \
    }

TIMED_CALL(Allreduce,
           (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
            MPI_Comm comm),
           (sendbuf, recvbuf, count, datatype, op, comm), type_bytes(count, datatype), -1, -1,
           comm_size(comm))

TIMED_CALL(Reduce,
           (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
            int root, MPI_Comm comm),
           (sendbuf, recvbuf, count, datatype, op, root, comm), type_bytes(count, datatype), root,
           -1, comm_size(comm))

TIMED_CALL(Bcast, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm),
           (buffer, count, datatype, root, comm), type_bytes(count, datatype), root, -1,
           comm_size(comm))

TIMED_CALL(Allgather,
           (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
            MPI_Datatype recvtype, MPI_Comm comm),
           (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
           own_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype), -1, -1, comm_size(comm))

TIMED_CALL(Alltoall,
           (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
            MPI_Datatype recvtype, MPI_Comm comm),
           (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
           own_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype) * n_, -1, -1,
           comm_size(comm))

TIMED_CALL(Reduce_scatter,
           (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
            MPI_Op op, MPI_Comm comm),
           (sendbuf, recvbuf, recvcounts, datatype, op, comm),
           scattered_bytes(recvcounts, datatype, n_), -1, -1, comm_size(comm))

TIMED_CALL(Gather,
           (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
            MPI_Datatype recvtype, int root, MPI_Comm comm),
           (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm),
           own_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype), root, -1, comm_size(comm))

TIMED_CALL(Scatter,
           (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
            MPI_Datatype recvtype, int root, MPI_Comm comm),
           (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm),
           own_bytes(recvbuf, recvcount, recvtype, sendcount, sendtype), root, -1, comm_size(comm))

TIMED_CALL(Barrier, (MPI_Comm comm), (comm), 0, -1, -1, comm_size(comm))

TIMED_CALL(Send,
           (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm),
           (buf, count, datatype, dest, tag, comm), type_bytes(count, datatype), dest, tag,
           comm_size(comm))

TIMED_CALL(Isend,
           (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
            MPI_Request *request),
           (buf, count, datatype, dest, tag, comm, request), type_bytes(count, datatype), dest, tag,
           comm_size(comm))

TIMED_CALL(Irecv,
           (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
            MPI_Request *request),
           (buf, count, datatype, source, tag, comm, request), type_bytes(count, datatype), source,
           tag, comm_size(comm))

TIMED_CALL(Sendrecv,
           (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
            void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
            MPI_Comm comm, MPI_Status *status),
           (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
            recvtag, comm, status),
           type_bytes(sendcount, sendtype), dest, sendtag, comm_size(comm))

TIMED_CALL(Wait, (MPI_Request * request, MPI_Status *status), (request, status), 0, -1, -1, 0)

TIMED_CALL(Waitall, (int count, MPI_Request requests[], MPI_Status *statuses),
           (count, requests, statuses), 0, -1, -1, 0)

/* MPI_Recv: the peer, tag and size are what arrived (the arguments may be wildcards). */
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    if (!meridian_mpi_active())
        return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Recv(buf, count, datatype, source, tag, comm, st);
    int peer = source, got_tag = tag, n = count;
    if (rc == MPI_SUCCESS) {
        peer = st->MPI_SOURCE;
        got_tag = st->MPI_TAG;
        if (PMPI_Get_count(st, datatype, &n) != MPI_SUCCESS || n == MPI_UNDEFINED)
            n = count;
    }
    rec("MPI_Recv", t0, type_bytes(n, datatype), peer, got_tag, comm_size(comm));
    return rc;
}

/* MPI_Test: polling loops call it until it completes; only that call is recorded. */
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!meridian_mpi_active())
        return PMPI_Test(request, flag, status);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Test(request, flag, status);
    if (flag && *flag)
        rec("MPI_Test", t0, 0, -1, -1, 0);
    return rc;
}
