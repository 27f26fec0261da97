/* A Rabenseifner allreduce that crashes (grading test data): rank 1 writes through a null
 * pointer, as a wrong block offset would. The other ranks sum with point-to-point messages
 * (everything to rank 0, which sends the sum back), so with one rank it is right. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int student_allreduce_rabenseifner(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int rank, p, tsize;
    volatile int *nowhere = NULL;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_size(datatype, &tsize);
    if (rank == 1)
        *nowhere = 42;
    if (sendbuf != MPI_IN_PLACE)
        memcpy(recvbuf, sendbuf, (size_t)count * tsize);
    void *in = malloc((size_t)count * tsize + 1);
    if (rank == 0) {
        for (int r = 1; r < p; r++) {
            MPI_Recv(in, count, datatype, r, 0, comm, MPI_STATUS_IGNORE);
            MPI_Reduce_local(in, recvbuf, count, datatype, op);
        }
        for (int r = 1; r < p; r++)
            MPI_Send(recvbuf, count, datatype, r, 1, comm);
    } else {
        MPI_Send(recvbuf, count, datatype, 0, 0, comm);
        MPI_Recv(recvbuf, count, datatype, 0, 1, comm, MPI_STATUS_IGNORE);
    }
    free(in);
    return MPI_SUCCESS;
}
