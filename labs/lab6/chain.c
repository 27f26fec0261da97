/* Chain broadcast (lab 6, part 2): implement it here.
 * Number the ranks from the root, v = (rank - root) mod p: rank v receives the whole buffer
 * from v - 1 (unless it is the root) and sends it to v + 1 (unless it is the last).
 * Must work for any p, any root, any count (also 0), any basic datatype and any communicator. */
#include <mpi.h>

int student_bcast_chain(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
