/* A Rabenseifner allreduce that crashes (grading test data): rank 1 writes through a null
 * pointer, as a wrong block offset would. */
#include <mpi.h>
#include <string.h>

int student_allreduce_rabenseifner(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int rank, tsize;
    volatile int *nowhere = NULL;
    MPI_Comm_rank(comm, &rank);
    MPI_Type_size(datatype, &tsize);
    if (rank == 1)
        *nowhere = 42;
    if (sendbuf != MPI_IN_PLACE)
        memcpy(recvbuf, sendbuf, (size_t)count * tsize);
    return MPI_Allreduce(MPI_IN_PLACE, recvbuf, count, datatype, op, comm);
}
