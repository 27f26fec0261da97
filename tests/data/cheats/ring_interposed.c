/* A "ring" that does nothing, and replaces the MPI_Allreduce the harness uses to learn which
 * rank failed: every rank then reports that none did. */
#include <mpi.h>

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    (void)sendbuf; (void)datatype; (void)op; (void)comm;
    for (int i = 0; i < count; i++) ((int *)recvbuf)[i] = 1 << 30;
    return MPI_SUCCESS;
}

int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    (void)sendbuf; (void)sendcount; (void)sendtype; (void)recvbuf; (void)recvcount; (void)recvtype;
    (void)comm;
    return MPI_SUCCESS;
}
