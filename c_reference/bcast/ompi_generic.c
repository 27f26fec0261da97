/* Algorithm: Open MPI 4.1's segmented tree broadcast (the engine of its chain and pipeline)
 * Steps:        the message in k = ceil(count / segcount) segments down a tree. The root sends
 *               each segment to all its children (MPI_Isend each, MPI_Waitall) before the next.
 *               An inner rank keeps one receive ahead: it posts the receive of segment s + 1,
 *               waits for segment s, sends s to its children and waits for those sends. A leaf
 *               posts the receive of s + 1 before it waits for s.
 * Cost:         depends on the tree: bcast/ompi_chain.c, bcast/ompi_pipeline.c
 * Restrictions: contiguous datatypes (segments are offsets of count x extent); count 0 returns
 *               at once, as MPI_Bcast does in Open MPI's binding
 * Memory:       no temporary buffer; one request per child, two receive requests
 *
 *   chain of 3 below the root, 3 segments (time ->):
 *   root→1: s0 s1 s2        1→2:    s0 s1 s2        2→3:       s0 s1 s2
 */
#include <stdlib.h>
#include "labompi.h"

int lab_ompi_bcast_generic(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                           int segcount, const lab_ompi_tree *tree)
{
    int mpi_errno = MPI_SUCCESS, rank;
    MPI_Aint lb, extent;
    MPI_Request recv_req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Request *send_req = NULL;
    MPI_Status *st = NULL;

    if (count == 0)
        return MPI_SUCCESS;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Type_get_extent(datatype, &lb, &extent));
    int nseg = (count + segcount - 1) / segcount;
    if (tree->nextsize > 0) {
        send_req = malloc(sizeof(MPI_Request) * (size_t)tree->nextsize);
        st = malloc(sizeof(MPI_Status) * (size_t)tree->nextsize);
        if (send_req == NULL || st == NULL)
            CHECK(MPI_ERR_NO_MEM);
    }
#define SEG(s) ((char *)buffer + (MPI_Aint)(s) * segcount * extent)
#define SEGCOUNT(s) ((s) == nseg - 1 ? count - (s) * segcount : segcount)

    if (rank == root) {
        for (int s = 0; s < nseg; s++) {
            for (int c = 0; c < tree->nextsize; c++)
                CHECK(MPI_Isend(SEG(s), SEGCOUNT(s), datatype, tree->next[c], LAB_TAG_BCAST, comm,
                                &send_req[c]));
            CHECK(MPI_Waitall(tree->nextsize, send_req, st));
        }
        goto fn_exit;
    }
    /* Inner ranks and leaves: one receive posted ahead of the segment being handled. */
    CHECK(MPI_Irecv(SEG(0), SEGCOUNT(0), datatype, tree->prev, LAB_TAG_BCAST, comm, &recv_req[0]));
    for (int s = 0; s < nseg; s++) {
        if (s + 1 < nseg)
            CHECK(MPI_Irecv(SEG(s + 1), SEGCOUNT(s + 1), datatype, tree->prev, LAB_TAG_BCAST, comm,
                            &recv_req[(s + 1) % 2]));
        CHECK(MPI_Wait(&recv_req[s % 2], MPI_STATUS_IGNORE));
        if (tree->nextsize == 0)
            continue;
        for (int c = 0; c < tree->nextsize; c++)
            CHECK(MPI_Isend(SEG(s), SEGCOUNT(s), datatype, tree->next[c], LAB_TAG_BCAST, comm,
                            &send_req[c]));
        CHECK(MPI_Waitall(tree->nextsize, send_req, st));
    }
#undef SEG
#undef SEGCOUNT
fn_exit:
    free(send_req);
    free(st);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
