/* A ring as it is often handed in: right, but for ints only. The block size and every call use
 * MPI_INT and sizeof(int), whatever datatype the caller passes (adapted from allgather rings in
 * public course repositories). */
#include <mpi.h>
#include <string.h>

int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, size;
    (void)sendtype;
    (void)recvtype;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *buf = (int *)recvbuf;
    if (sendbuf != MPI_IN_PLACE)
        memcpy(buf + rank * recvcount, sendbuf, sendcount * sizeof(int));
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    for (int i = 0; i < size - 1; i++) {
        int send_idx = (rank - i + size) % size, recv_idx = (rank - i - 1 + size) % size;
        MPI_Sendrecv(buf + send_idx * recvcount, recvcount, MPI_INT, next, 0,
                     buf + recv_idx * recvcount, recvcount, MPI_INT, prev, 0, comm,
                     MPI_STATUS_IGNORE);
    }
    return MPI_SUCCESS;
}
