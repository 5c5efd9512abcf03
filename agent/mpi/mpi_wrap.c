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

int MPI_Init(int *argc, char ***argv)
{
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS && meridian_mpi_start())
        rec("MPI_Init", t0, 0, -1, -1, comm_size(MPI_COMM_WORLD));
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS && meridian_mpi_start())
        rec("MPI_Init_thread", t0, 0, -1, -1, comm_size(MPI_COMM_WORLD));
    return rc;
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

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    rec("MPI_Allreduce", t0, type_bytes(count, datatype), -1, -1, comm_size(comm));
    return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    rec("MPI_Reduce", t0, type_bytes(count, datatype), root, -1, comm_size(comm));
    return rc;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Bcast(buffer, count, datatype, root, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Bcast(buffer, count, datatype, root, comm);
    rec("MPI_Bcast", t0, type_bytes(count, datatype), root, -1, comm_size(comm));
    return rc;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    uint64_t bytes =
        sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype);
    rec("MPI_Allgather", t0, bytes, -1, -1, comm_size(comm));
    return rc;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    uint32_t n = comm_size(comm);
    uint64_t bytes =
        sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype);
    rec("MPI_Alltoall", t0, bytes * n, -1, -1, n);
    return rc;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    uint32_t n = comm_size(comm);
    uint64_t count = 0;
    for (uint32_t i = 0; recvcounts && i < n; i++)
        count += recvcounts[i] > 0 ? (uint64_t)recvcounts[i] : 0;
    rec("MPI_Reduce_scatter", t0, count * type_bytes(1, datatype), -1, -1, n);
    return rc;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    uint64_t bytes =
        sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype);
    rec("MPI_Gather", t0, bytes, root, -1, comm_size(comm));
    return rc;
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    uint64_t bytes =
        recvbuf == MPI_IN_PLACE ? type_bytes(sendcount, sendtype) : type_bytes(recvcount, recvtype);
    rec("MPI_Scatter", t0, bytes, root, -1, comm_size(comm));
    return rc;
}

int MPI_Barrier(MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Barrier(comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Barrier(comm);
    rec("MPI_Barrier", t0, 0, -1, -1, comm_size(comm));
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    if (!meridian_mpi_active())
        return PMPI_Send(buf, count, datatype, dest, tag, comm);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Send(buf, count, datatype, dest, tag, comm);
    rec("MPI_Send", t0, type_bytes(count, datatype), dest, tag, comm_size(comm));
    return rc;
}

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

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    if (!meridian_mpi_active())
        return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
    rec("MPI_Isend", t0, type_bytes(count, datatype), dest, tag, comm_size(comm));
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    if (!meridian_mpi_active())
        return PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
    rec("MPI_Irecv", t0, type_bytes(count, datatype), source, tag, comm_size(comm));
    return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
    if (!meridian_mpi_active())
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                           recvtype, source, recvtag, comm, status);
    rec("MPI_Sendrecv", t0, type_bytes(sendcount, sendtype), dest, sendtag, comm_size(comm));
    return rc;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (!meridian_mpi_active())
        return PMPI_Wait(request, status);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Wait(request, status);
    rec("MPI_Wait", t0, 0, -1, -1, 0);
    return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status *statuses)
{
    if (!meridian_mpi_active())
        return PMPI_Waitall(count, requests, statuses);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Waitall(count, requests, statuses);
    rec("MPI_Waitall", t0, 0, -1, -1, 0);
    return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!meridian_mpi_active())
        return PMPI_Test(request, flag, status);
    int64_t t0 = meridian_mpi_now();
    int rc = PMPI_Test(request, flag, status);
    if (flag && *flag) /* polling loops: only the call that completes is recorded */
        rec("MPI_Test", t0, 0, -1, -1, 0);
    return rc;
}
