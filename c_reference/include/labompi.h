/* labompi.h — what the kit's clones of Open MPI 4.1's tree algorithms share (c_reference/ompi/,
 * bcast/ompi_*.c, reduce/ompi_*.c).
 *
 * Open MPI 4.1's coll/base builds a broadcast or a reduce from a tree and a segment count: the
 * chain (coll_base_topo.c: ompi_coll_base_topo_build_chain), cut into segments of `segcount`
 * elements (coll_base_functions.h: COLL_BASE_COMPUTED_SEGCOUNT), run by one generic engine per
 * collective (coll_base_bcast.c: ompi_coll_base_bcast_intra_generic; coll_base_reduce.c:
 * ompi_coll_base_reduce_generic). Forced through coll/tuned (coll_tuned_use_dynamic_rules 1 and
 * coll_tuned_<coll>_algorithm 2 or 3), chain has 4 chains (coll_tuned_init_chain_fanout) and
 * both have segment size 0, no segmenting (coll_tuned_<coll>_algorithm_segmentsize). The clones
 * read the same MCA parameters from the environment (OMPI_MCA_coll_tuned_..., as Open MPI
 * does), so one setting forces both Open MPI and the kit's copy. These are the kit's own code
 * written from Open MPI's description, not Open MPI's source.
 */
#ifndef LABOMPI_H
#define LABOMPI_H

#include "labcoll_impl.h"

#define LAB_TAG_REDUCE   0x1ab5
#define LAB_OMPI_MAXFANOUT 32   /* Open MPI's MAXTREEFANOUT */

/* A rank's place in a tree: its parent (-1 at the root) and its children, in order. */
typedef struct {
    int prev;
    int nextsize;
    int next[LAB_OMPI_MAXFANOUT];
} lab_ompi_tree;

/* Open MPI's chain of `fanout` chains rooted at `root`, as seen by `rank` of `size`: the root
 * feeds the heads of `fanout` chains of consecutive ranks (relative to the root); the first
 * (size - 1) % fanout chains are one rank longer. fanout 1 is the pipeline's single chain. */
void lab_ompi_chain(int fanout, int rank, int size, int root, lab_ompi_tree *tree);

/* Elements per segment for a segment size in bytes (COLL_BASE_COMPUTED_SEGCOUNT): count when
 * segsize is 0, smaller than one element, or not smaller than the message; else segsize /
 * type size, rounded to the nearest element. */
int lab_ompi_segcount(int count, int type_size, long segsize);

/* An Open MPI coll/tuned MCA parameter from the environment: OMPI_MCA_coll_tuned_<name> as an
 * integer, or `dflt` when it is not set. *bad is set when it is set but not an integer >= 0. */
long lab_ompi_param(const char *name, long dflt, int *bad);

/* What a clone does first: check the root, read the segment size (and, for chains = 0, the
 * number of chains) of collective `coll` from Open MPI's variables, build the chain (`chains`
 * chains when not 0: 1 for the pipeline) and count the elements of a segment. */
int lab_ompi_prepare(const char *coll, int chains, MPI_Datatype datatype, int count, int root,
                     MPI_Comm comm, lab_ompi_tree *tree, int *segcount);

/* The generic engines (one file each): a broadcast and a commutative reduce over `tree`, in
 * segments of `segcount` elements. Alone in the communicator (no parent, no child), the reduce
 * copies sendbuf to recvbuf and the broadcast does nothing. */
int lab_ompi_bcast_generic(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                           int segcount, const lab_ompi_tree *tree);
int lab_ompi_reduce_generic(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, int root, MPI_Comm comm, int segcount,
                            const lab_ompi_tree *tree);

#endif
