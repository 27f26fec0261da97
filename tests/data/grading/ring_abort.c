/* A wrong ring: rank 2 gives up with MPI_Abort (error code 3) instead of returning an error. */
#include <mpi.h>
int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 2)
        MPI_Abort(comm, 3);
    return MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, recvbuf, recvcount, recvtype, rank, 0,
                        comm, MPI_STATUS_IGNORE);   /* right for P = 1 only */
}
