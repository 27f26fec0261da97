/* Binomial-tree broadcast (lab 6, part 2): implement it here.
 * Number the ranks from the root, v = (rank - root) mod p. The number of ranks that hold the
 * buffer doubles every round: ceil(log2 p) rounds in all, every rank but the root receiving the
 * whole buffer exactly once (draw the tree for p = 6 and p = 8 first, as part 1 asks).
 * Must work for any p (also non-powers of two), any root, any count (also 0), any basic datatype
 * and any communicator. */
#include <mpi.h>

int student_bcast_binomial(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
