/* Algorithm: ompi_pipeline (reduce) — a clone of Open MPI 4.1's forced pipeline reduce
 *               (coll_tuned_reduce_algorithm 3: ompi_coll_base_reduce_intra_pipeline)
 * Steps:        one chain of all the ranks, relative rank v receiving from v + 1 and sending to
 *               v - 1, the last rank first; every rank adds its own data to what arrives and
 *               passes it on. Segments of coll_tuned_reduce_algorithm_segmentsize bytes (Open
 *               MPI's default 0: the whole message) follow each other up the chain
 *               (reduce/ompi_generic.c). SimGrid's reduce ompi_pipeline picks its own segment
 *               size (1, 32 or 64 KiB) from P and the message size, as Open MPI's old decision
 *               rules did, instead of the forced 0.
 * Cost:         with one segment, p - 1 messages one after the other
 * Restrictions: any p, any root, commutative operations, contiguous datatypes, MPI_IN_PLACE at
 *               the root, count 0; the segment size is read from
 *               OMPI_MCA_coll_tuned_reduce_algorithm_segmentsize
 * Memory:       see reduce/ompi_generic.c
 *
 *   p=4, one segment:  3→2, then 2→1, then 1→0
 */
#include "labompi.h"

int lab_reduce_ompi_pipeline(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, int root, MPI_Comm comm)
{
    lab_ompi_tree tree;
    int segcount, mpi_errno = lab_ompi_prepare("reduce", 1, datatype, count, root, comm, &tree,
                                               &segcount);
    if (mpi_errno != MPI_SUCCESS)
        return mpi_errno;
    return lab_ompi_reduce_generic(sendbuf, recvbuf, count, datatype, op, root, comm, segcount,
                                   &tree);
}
