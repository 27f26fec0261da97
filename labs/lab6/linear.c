/* Linear broadcast (lab 6, part 2): implement it here.
 * The root sends the whole buffer to every other rank with MPI_Isend (one request per rank)
 * and waits for all of them with MPI_Waitall; every other rank receives it once from the root.
 * Must work for any p (also 1 and non-powers of two), any root, any count (also 0), any basic
 * datatype and any communicator. Return MPI_SUCCESS (or the error code of a failed MPI call). */
#include <mpi.h>
#include <stdlib.h>

int student_bcast_linear(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
