/* Algorithm: ompi_pipeline (broadcast) — a clone of Open MPI 4.1's forced pipeline broadcast
 *               (coll_tuned_bcast_algorithm 3: ompi_coll_base_bcast_intra_pipeline)
 * Steps:        one chain of all the ranks in order from the root (relative rank v receives
 *               from v - 1 and sends to v + 1), the message cut into segments of
 *               coll_tuned_bcast_algorithm_segmentsize bytes (Open MPI's default 0: one
 *               segment, the whole message), each passed on while the next arrives
 *               (bcast/ompi_generic.c). Forced with Open MPI's defaults, as seed 000 forced it,
 *               it is an unsegmented chain.
 * Cost:         lab 6 derives it (the chain, and the pipelined chain of k segments)
 * Restrictions: any p, any root, contiguous datatypes, count 0; the segment size is read from
 *               OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize (MPI_ERR_ARG when it is not an
 *               integer >= 0)
 * Memory:       no temporary buffer
 *
 *   p=4, 3 segments:  step 1 0→1 s0; step 2 0→1 s1, 1→2 s0; step 3 0→1 s2, 1→2 s1, 2→3 s0; ...
 */
#include "labompi.h"

int lab_bcast_ompi_pipeline(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    lab_ompi_tree tree;
    int segcount, mpi_errno = lab_ompi_prepare("bcast", 1, datatype, count, root, comm, &tree,
                                               &segcount);
    if (mpi_errno != MPI_SUCCESS)
        return mpi_errno;
    return lab_ompi_bcast_generic(buffer, count, datatype, root, comm, segcount, &tree);
}
