/* Not a ring: every rank sends its block to rank 0, which sends the whole buffer back to each.
 * The result is right; the messages are a gather and a broadcast (a student's own code handed in
 * as the ring, adapted from public course repositories). */
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
        memcpy(recv + rank * block, sendbuf, block);
    if (rank == 0) {
        for (int r = 1; r < p; r++)
            MPI_Recv(recv + r * block, recvcount, recvtype, r, 0, comm, MPI_STATUS_IGNORE);
        for (int r = 1; r < p; r++)
            MPI_Send(recv, p * recvcount, recvtype, r, 1, comm);
    } else {
        MPI_Send(recv + rank * block, recvcount, recvtype, 0, 0, comm);
        MPI_Recv(recv, p * recvcount, recvtype, 0, 1, comm, MPI_STATUS_IGNORE);
    }
    (void)sendcount;
    (void)sendtype;
    return MPI_SUCCESS;
}
