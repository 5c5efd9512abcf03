/* capture_e2e_mpi's MPI program: a few MPI calls per rank, nothing else. Run under mpirun
 * with LD_PRELOAD=libmeridian_mpi.so (which pulls in the real libmeridian.so); e2e.py
 * checks what reached meridiand's database. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double x[256] = {0}, y[256];
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(x, y, 256, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int v = rank;
    if (rank == 0)
        MPI_Send(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
    else if (rank == 1)
        MPI_Recv(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    printf("e2e_mpi: rank %d of %d done\n", rank, size);
    return 0;
}
