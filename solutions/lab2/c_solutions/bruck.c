/* Bruck allgather (lab 2 solution): ceil(log2 p) steps; at step k (distance d = 2^k) each rank
 * sends the min(d, p-d) blocks it holds to rank-d and receives as many from rank+d, into a
 * buffer that starts with its own block; a final rotation puts block i at rank i's place.
 * Cost: ceil(log2 p) * alpha + (p-1) * n * beta. */
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
    char *recv = recvbuf;
    size_t block = (size_t)recvcount * extent;
    char *tmp = malloc(block * p + 1);
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
    for (int i = 0; i < p; i++)
        memcpy(recv + ((rank + i) % p) * block, tmp + i * block, block);
    free(tmp);
    return MPI_SUCCESS;
}
