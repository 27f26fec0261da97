/* Algorithm: Rabenseifner's allreduce = reduce-scatter by recursive halving, then allgather
 *            by recursive doubling (lab 3, part 1: implement it here)
 * Implements: MPI_Allreduce (same signature)
 * Steps:        p a power of two: cut the vector into p blocks (count/p elements, the first
 *               count % p blocks one more). log2(p) halving steps (as in reduce_scatter.c)
 *               leave rank r with block r fully reduced; then log2(p) doubling steps: at
 *               mask = 1, 2, ..., p/2 rank r swaps everything it has with r XOR mask, so the
 *               reduced blocks it holds double each step until it holds all p.
 * Cost:         derive it in the notebook (part 2)
 * Non-powers of two: as in reduce_scatter.c, fold ranks 0..2q-1 in pairs before (the even
 *               rank sends its whole vector to the odd one) and send the whole result back to
 *               the even ranks after; the p' others run the two phases with p' blocks.
 * Restrictions: must work for any p >= 1, any count >= 0 (blocks may be empty when count < p),
 *               MPI_IN_PLACE, MPI_INT and MPI_DOUBLE, any communicator; commutative op
 *               (MPI_ERR_OP otherwise). Never call MPI_Abort: return the error code.
 * Memory:       one temporary buffer of n bytes (incoming halves); the sums live in recvbuf.
 *
 *   p = 4, blocks A B C D            halving                    doubling
 *   step 1 (mask 2): 0<->2, 1<->3    0,1 keep A B; 2,3 keep C D
 *   step 2 (mask 1): 0<->1, 2<->3    0:A 1:B 2:C 3:D reduced
 *   step 3 (mask 1): 0<->1, 2<->3                               0,1: A B   2,3: C D
 *   step 4 (mask 2): 0<->2, 1<->3                               everyone: A B C D
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int student_allreduce_rabenseifner(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    /* YOUR CODE HERE */
    return MPI_SUCCESS;
}
