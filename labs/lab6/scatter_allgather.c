/* Scatter + ring allgather broadcast (van de Geijn; lab 6, part 2): implement it here.
 * Cut the buffer into p blocks of b = ceil(count / p) elements (the last blocks shorter, some
 * possibly empty when count < p); block i belongs to rank v = i, numbered from the root.
 * 1. Scatter: the root hands every rank its block along a binomial tree (a rank receives its
 *    whole subtree's blocks at once and passes each child its subtree's share).
 * 2. Allgather: a ring of p - 1 MPI_Sendrecv steps among the ranks, one block per step.
 * Must work for any p, any root, any count (also 0 and count < p), any basic datatype and any
 * communicator. */
#include <mpi.h>

int student_bcast_scatter_allgather(void *buffer, int count, MPI_Datatype datatype, int root,
                                    MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
