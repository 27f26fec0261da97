/* Ring allgather (lab 2 solution): p-1 steps; at step s each rank sends to rank+1 the block it
 * received at step s-1 (its own at s = 0) and receives from rank-1.
 * Cost: (p-1) * (alpha + n*beta), n = bytes contributed by each rank. */
#include <mpi.h>
#include <string.h>

int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(recvtype, &lb, &extent);
    char *recv = recvbuf;
    size_t block = (size_t)recvcount * extent;
    if (sendbuf != MPI_IN_PLACE)
        MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, recv + rank * block, recvcount,
                     recvtype, rank, 0, comm, MPI_STATUS_IGNORE);
    int right = (rank + 1) % p, left = (rank - 1 + p) % p;
    for (int s = 0; s < p - 1; s++) {
        int send_block = (rank - s + p) % p, recv_block = (rank - s - 1 + p) % p;
        MPI_Sendrecv(recv + send_block * block, recvcount, recvtype, right, 0,
                     recv + recv_block * block, recvcount, recvtype, left, 0, comm,
                     MPI_STATUS_IGNORE);
    }
    return MPI_SUCCESS;
}
