/* A right ring whose only defect is the order of its calls: every rank sends with a blocking
 * MPI_Send, then receives. It works while MPI buffers the message (small messages) and hangs
 * once every rank waits for its send to be received (adapted from public course repositories). */
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
    for (int s = 0; s < p - 1; s++) {
        int out = (rank - s + p) % p, in = (rank - s - 1 + p) % p;
        MPI_Send(recv + out * block, recvcount, recvtype, (rank + 1) % p, 0, comm);
        MPI_Recv(recv + in * block, recvcount, recvtype, (rank - 1 + p) % p, 0, comm,
                 MPI_STATUS_IGNORE);
    }
    return MPI_SUCCESS;
}
