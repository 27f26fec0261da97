/* A ring that receives one element less than it sends: MPI reports the truncated message
 * (Open MPI: MPI_ERR_TRUNCATE) and, with the default error handler, ends the program. */
#include <mpi.h>

int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(recvtype, &lb, &extent);
    char *recv = recvbuf;
    MPI_Sendrecv(sendbuf, sendcount, sendtype, (rank + 1) % p, 0,
                 recv + ((rank - 1 + p) % p) * recvcount * extent, recvcount - 1, recvtype,
                 (rank - 1 + p) % p, 0, comm, MPI_STATUS_IGNORE);
    return MPI_SUCCESS;
}
