/* Pipelined chain broadcast (lab 6, part 2): implement it here.
 * The chain of chain.c, but the buffer travels in segments of `segsize` bytes: a rank forwards
 * segment i while it receives segment i + 1 (post that receive with MPI_Irecv before you send).
 * The segment size is MPI_Bcast's signature plus one argument, in bytes: use whole elements
 * (segsize / the datatype's size, at least one element); segsize <= 0 means no segmenting (one
 * segment, the whole buffer); the last segment may be shorter.
 * Must work for any p, any root, any count (also 0), any basic datatype, any communicator and
 * any segment size. */
#include <mpi.h>

int student_bcast_pipeline(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                           int segsize)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
