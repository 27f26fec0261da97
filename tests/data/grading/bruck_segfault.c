/* A wrong Bruck: rank 1 writes through a null pointer. */
#include <mpi.h>
#include <stddef.h>
int student_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, recvbuf, recvcount, recvtype, rank, 0,
                 comm, MPI_STATUS_IGNORE);   /* right for P = 1 only */
    if (rank == 1) {
        volatile int *nowhere = NULL;
        *nowhere = 42;
    }
    return MPI_SUCCESS;
}
