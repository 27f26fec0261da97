/* A Bruck whose final rotation copies every block from the rank's own place onwards, p blocks
 * in all: the result is right, and rank r writes r blocks past the end of recvbuf (adapted from
 * public course repositories). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int student_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(recvtype, &lb, &extent);
    size_t block = (size_t)recvcount * extent;
    char *recv = recvbuf, *tmp = malloc(2 * block * p + 1);
    if (sendbuf == MPI_IN_PLACE)
        memcpy(tmp, recv + rank * block, block);
    else
        MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, tmp, recvcount, recvtype, rank, 0,
                     comm, MPI_STATUS_IGNORE);
    for (int d = 1; d < p; d *= 2) {
        int n = d < p - d ? d : p - d;
        MPI_Sendrecv(tmp, n * recvcount, recvtype, (rank - d + p) % p, 1, tmp + d * block,
                     n * recvcount, recvtype, (rank + d) % p, 1, comm, MPI_STATUS_IGNORE);
    }
    memcpy(tmp + p * block, tmp, p * block);   /* the blocks twice: rotation by one copy */
    memcpy(recv, tmp + (p - rank) * block, p * block);   /* right: block i at i */
    memcpy(recv + rank * block, tmp, p * block);         /* the bug: p blocks from rank's place */
    free(tmp);
    return MPI_SUCCESS;
}
