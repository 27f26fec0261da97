/* Algorithm: Open MPI 4.1's segmented tree reduce (the engine of its chain and pipeline)
 * Steps:        the message in k = ceil(count / segcount) segments up a tree. A leaf sends its
 *               segments to its parent, each with a blocking MPI_Send (Open MPI's default
 *               coll_tuned_reduce_algorithm_max_requests 0). A rank with children takes the
 *               items (segment s, child c) in order, s major, keeping one receive ahead: it
 *               posts the receive of the next item, waits for the current one and adds it in;
 *               once the last child's part of segment s is in, it adds its own data and sends
 *               the segment up (blocking MPI_Send) unless it is the root. The first child's part
 *               is received straight into the accumulator (the operation is commutative), the
 *               others into two alternating buffers of one segment.
 * Cost:         depends on the tree: reduce/ompi_chain.c, reduce/ompi_pipeline.c
 * Restrictions: commutative operations (MPI_ERR_OP otherwise), contiguous datatypes,
 *               MPI_IN_PLACE at the root; count 0 returns at once, as MPI_Reduce does in Open
 *               MPI's binding
 * Memory:       non-root ranks with children: an accumulator of the whole message; two
 *               segment buffers where there are two children or two segments
 *
 *   chain 3→2→1→root, one segment: 3 sends to 2; 2 adds its own, sends to 1; 1 adds, sends to 0
 */
#include <stdlib.h>
#include "labompi.h"

int lab_ompi_reduce_generic(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, int root, MPI_Comm comm, int segcount,
                            const lab_ompi_tree *tree)
{
    int mpi_errno = MPI_SUCCESS, rank, commute;
    MPI_Aint lb, extent;
    char *accum = NULL, *own_accum = NULL, *inbuf[2] = {NULL, NULL};
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};

    if (count == 0)
        return MPI_SUCCESS;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Op_commutative(op, &commute));
    if (!commute)
        CHECK(MPI_ERR_OP);
    CHECK(MPI_Type_get_extent(datatype, &lb, &extent));
    int nseg = (count + segcount - 1) / segcount;
    int in_place = rank == root && sendbuf == MPI_IN_PLACE;
    const char *mine = in_place ? recvbuf : sendbuf;
#define OFF(s) ((MPI_Aint)(s) * segcount * extent)
#define SEGCOUNT(s) ((s) == nseg - 1 ? count - (s) * segcount : segcount)

    if (tree->prev < 0 && tree->nextsize == 0) {   /* alone */
        if (sendbuf != MPI_IN_PLACE)
            CHECK(lab_local_copy(sendbuf, count, datatype, recvbuf, count, datatype, comm));
        goto fn_exit;
    }
    if (tree->nextsize == 0) {   /* a leaf */
        for (int s = 0; s < nseg; s++)
            CHECK(MPI_Send(mine + OFF(s), SEGCOUNT(s), datatype, tree->prev, LAB_TAG_REDUCE, comm));
        goto fn_exit;
    }
    accum = recvbuf;
    if (rank != root) {
        own_accum = lab_scratch_alloc((size_t)count * (size_t)extent);
        if (own_accum == NULL)
            CHECK(MPI_ERR_NO_MEM);
        accum = own_accum - lb;
    }
    for (int b = 0; b < ((nseg > 1 || tree->nextsize > 1) ? 2 : 1); b++) {
        inbuf[b] = lab_scratch_alloc((size_t)segcount * (size_t)extent);
        if (inbuf[b] == NULL)
            CHECK(MPI_ERR_NO_MEM);
        inbuf[b] -= lb;
    }
    /* Item k is (segment k / nextsize, child k % nextsize); its receive is request k % 2. */
    int items = nseg * tree->nextsize;
    for (int k = 0; k <= items; k++) {
        if (k < items) {
            int s = k / tree->nextsize, c = k % tree->nextsize;
            char *into = c == 0 && !in_place ? accum + OFF(s) : inbuf[k % 2];
            CHECK(MPI_Irecv(into, SEGCOUNT(s), datatype, tree->next[c], LAB_TAG_REDUCE, comm,
                            &req[k % 2]));
        }
        if (k == 0)
            continue;
        int j = k - 1, s = j / tree->nextsize, c = j % tree->nextsize;
        CHECK(MPI_Wait(&req[j % 2], MPI_STATUS_IGNORE));
        if (c > 0 || in_place)   /* the first child's part is already in the accumulator */
            CHECK(MPI_Reduce_local(inbuf[j % 2], accum + OFF(s), SEGCOUNT(s), datatype, op));
        if (c == 0 && !in_place)   /* then this rank's own part */
            CHECK(MPI_Reduce_local(mine + OFF(s), accum + OFF(s), SEGCOUNT(s), datatype, op));
        if (c == tree->nextsize - 1 && rank != root)
            CHECK(MPI_Send(accum + OFF(s), SEGCOUNT(s), datatype, tree->prev, LAB_TAG_REDUCE, comm));
    }
#undef OFF
#undef SEGCOUNT
fn_exit:
    for (int b = 0; b < 2; b++)
        if (inbuf[b] != NULL)
            lab_scratch_free(inbuf[b] + lb);
    lab_scratch_free(own_accum);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
