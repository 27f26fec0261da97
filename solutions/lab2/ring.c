/* Ring allgather (lab 2, part 3): implement it here.
 * p-1 steps; at step s each rank sends to rank+1 the block it received at step s-1 (its own
 * block at s = 0) and receives from rank-1 into the right place of recvbuf.
 * Must work for any p (also 1 and non-powers of two), MPI_IN_PLACE, any basic datatype and any
 * communicator. MPI_Sendrecv avoids deadlocks. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
