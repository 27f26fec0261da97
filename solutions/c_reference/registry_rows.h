/* The answer key's rows of the registries (c_reference/registry.c includes this file when the
 * Makefile finds solutions/c_reference): lab 2's tasks, ring and Bruck; the binomial-tree
 * broadcast, one of lab 6's tasks (the tracer's c_reference/trace/timeline.c --coll bcast). */
#ifndef LAB_REGISTRY_ONLY
int lab_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int lab_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                        void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int lab_bcast_binomial(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
#endif

#define LAB_KEY_ROWS                                                                           \
    {"ring", LAB_FN(lab_allgather_ring)},                                                     \
    {"bruck", LAB_FN(lab_allgather_bruck)},

#define LAB_KEY_BCAST_ROWS                                                                     \
    {"binomial", LAB_FN(lab_bcast_binomial)},
