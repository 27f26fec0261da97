/* Algorithm: ompi_chain (reduce) — a clone of Open MPI 4.1's forced chain reduce
 *               (coll_tuned_reduce_algorithm 2: ompi_coll_base_reduce_intra_chain)
 * Steps:        F chains of consecutive ranks (relative to the root) end at the root, F =
 *               coll_tuned_reduce_algorithm_chain_fanout (Open MPI's default 4, at most p - 1);
 *               each rank adds what comes up its chain to its own data and passes it on, the
 *               root adds the F chains' results to its own. Segments of
 *               coll_tuned_reduce_algorithm_segmentsize bytes (default 0: one segment) go up
 *               one after the other (reduce/ompi_generic.c).
 * Cost:         with one segment, ceil((p - 1) / F) - 1 hops up the longest chain, then the
 *               root's F receives
 * Restrictions: any p, any root, commutative operations, contiguous datatypes, MPI_IN_PLACE at
 *               the root, count 0; the parameters are read from
 *               OMPI_MCA_coll_tuned_reduce_algorithm_{chain_fanout,segmentsize}. SimGrid's
 *               reduce ompi_chain is another algorithm: p/2 chains and 64 KiB segments.
 * Memory:       see reduce/ompi_generic.c
 *
 *   p=9, F=4, root 0:   2→1→0   4→3→0   6→5→0   8→7→0
 */
#include "labompi.h"

int lab_reduce_ompi_chain(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, int root, MPI_Comm comm)
{
    lab_ompi_tree tree;
    int segcount, mpi_errno = lab_ompi_prepare("reduce", 0, datatype, count, root, comm, &tree,
                                               &segcount);
    if (mpi_errno != MPI_SUCCESS)
        return mpi_errno;
    return lab_ompi_reduce_generic(sendbuf, recvbuf, count, datatype, op, root, comm, segcount,
                                   &tree);
}
