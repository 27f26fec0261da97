/* Algorithm: ompi_chain (broadcast) — a clone of Open MPI 4.1's forced chain broadcast
 *               (coll_tuned_bcast_algorithm 2: ompi_coll_base_bcast_intra_chain)
 * Steps:        the root feeds F chains of consecutive ranks (relative to the root), F =
 *               coll_tuned_bcast_algorithm_chain_fanout (Open MPI's default 4, at most p - 1);
 *               the first (p - 1) mod F chains are one rank longer. Each segment of
 *               coll_tuned_bcast_algorithm_segmentsize bytes (default 0: the whole message)
 *               goes down every chain (bcast/ompi_generic.c).
 * Cost:         with one segment, the root's F messages and then ceil((p - 1) / F) - 1 hops
 *               down the longest chain, one message each
 * Restrictions: any p, any root, contiguous datatypes, count 0; the two parameters are read
 *               from OMPI_MCA_coll_tuned_bcast_algorithm_{chain_fanout,segmentsize}
 *               (MPI_ERR_ARG when one is not an integer >= 0)
 * Memory:       no temporary buffer
 *
 *   p=9, F=4, root 0:   0→1→2   0→3→4   0→5→6   0→7→8
 */
#include "labompi.h"

int lab_bcast_ompi_chain(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    lab_ompi_tree tree;
    int segcount, mpi_errno = lab_ompi_prepare("bcast", 0, datatype, count, root, comm, &tree,
                                               &segcount);
    if (mpi_errno != MPI_SUCCESS)
        return mpi_errno;
    return lab_ompi_bcast_generic(buffer, count, datatype, root, comm, segcount, &tree);
}
