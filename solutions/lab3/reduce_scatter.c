/* Algorithm: reduce-scatter by recursive halving (lab 3, part 1: implement it here)
 * Implements: MPI_Reduce_scatter_block (same signature; every rank gets one block of
 *             recvcount elements of the element-wise reduction of all ranks' p blocks)
 * Steps:        p a power of two: log2(p) steps. At step k (mask = p/2, p/4, ..., 1) rank r
 *               exchanges with r XOR mask: it keeps the half of its current block range that
 *               holds its own block, sends the other half, and reduces the half it receives
 *               into the half it keeps (MPI_Reduce_local). After the last step it holds
 *               block r, fully reduced.
 * Cost:         log2(p)·α + ((p-1)/p)·n·β + ((p-1)/p)·n·γ      n = p·recvcount bytes (the
 *               whole input of one rank), γ = time to reduce one byte
 * Non-powers of two: p' = largest power of two <= p, q = p - p'. Pre-step: among ranks
 *               0..2q-1 each even rank sends its whole input to the odd rank above it, which
 *               reduces it into its own and stands for both (it owns blocks r-1 and r); the
 *               even ranks sit out. The p' remaining ranks run the halving above on "virtual
 *               blocks" (two real blocks for the first q, one for the others). Post-step:
 *               each odd rank < 2q sends block r-1 back to rank r-1.
 * Restrictions: must work for any p >= 1 (also 1 and non-powers of two), MPI_IN_PLACE (the
 *               input is then in recvbuf, p·recvcount elements), MPI_INT and MPI_DOUBLE, any
 *               communicator. The op must be commutative (check with MPI_Op_commutative and
 *               return MPI_ERR_OP otherwise). Never call MPI_Abort: return the error code.
 * Memory:       two temporary buffers of n bytes (the running sums and the incoming halves).
 *
 *   p = 4, blocks A B C D on every rank (A = block of rank 0, ...)
 *   step 1 (mask 2): 0<->2 and 1<->3   0,1 keep A B and send C D; 2,3 keep C D, send A B
 *        0: A B (sum of 0,2)   1: A B (1,3)   2: C D (0,2)   3: C D (1,3)
 *   step 2 (mask 1): 0<->1 and 2<->3   0 keeps A, 1 keeps B, 2 keeps C, 3 keeps D
 *        0: A = sum of all     1: B          2: C            3: D
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int student_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
