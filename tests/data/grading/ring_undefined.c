/* A ring that calls a helper it never defines (declared in a header it was meant to write):
 * every file compiles, and the program does not link. */
#include <mpi.h>

int next_block(int rank, int step, int p);

int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    (void)sendbuf; (void)sendcount; (void)sendtype; (void)recvbuf; (void)recvcount; (void)recvtype;
    return next_block(rank, 0, p);
}
