/* Bruck allgather (lab 2, part 3): implement it here.
 * ceil(log2 p) steps: at distance d = 1, 2, 4, ... send the min(d, p-d) blocks you hold to
 * rank-d and receive as many from rank+d into a temporary buffer that starts with your own
 * block; at the end rotate the blocks so that block i lands at position i of recvbuf.
 * Must work for any p (also 1 and non-powers of two), MPI_IN_PLACE, any basic datatype and any
 * communicator. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int student_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
