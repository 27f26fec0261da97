/* A wrong ring: every rank receives before it sends, so all ranks wait forever (P > 1). */
#include <mpi.h>
int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, recvbuf, recvcount, recvtype, rank, 0,
                 comm, MPI_STATUS_IGNORE);   /* right for P = 1 only */
    if (p > 1) {
        MPI_Recv(recvbuf, recvcount, recvtype, (rank - 1 + p) % p, 0, comm, MPI_STATUS_IGNORE);
        MPI_Send(sendbuf, sendcount, sendtype, (rank + 1) % p, 0, comm);
    }
    return MPI_SUCCESS;
}
