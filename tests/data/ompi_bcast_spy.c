/* ompi_bcast_spy — an LD_PRELOAD library that says which Open MPI 4.1 broadcast algorithm runs.
 *
 * coll/tuned (mca_coll_tuned.so) calls the algorithms of coll/base through libmpi.so's exported
 * ompi_coll_base_bcast_intra_* functions; these wrappers stand in front of them, print one line
 *     spy: bcast <algorithm> count=<count> segsize=<bytes> fanout=<chains or radix>
 * on stderr (rank 0 of the communicator only) and call the real function (dlsym RTLD_NEXT).
 * Test-only (tests/test_ompi_fixed.py): build with  cc -shared -fPIC -o spy.so ompi_bcast_spy.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <mpi.h>

typedef int (*plain_fn)(void *, int, void *, int, void *, void *);
typedef int (*seg_fn)(void *, int, void *, int, void *, void *, uint32_t);
typedef int (*seg_int_fn)(void *, int, void *, int, void *, void *, uint32_t, int32_t);

static void say(void *comm, const char *name, int count, long segsize, long fanout)
{
    int rank;
    MPI_Comm_rank((MPI_Comm)comm, &rank);
    if (rank == 0)
        fprintf(stderr, "spy: bcast %s count=%d segsize=%ld fanout=%ld\n", name, count, segsize, fanout);
}

int ompi_coll_base_bcast_intra_basic_linear(void *b, int c, void *t, int r, void *comm, void *m)
{
    say(comm, "basic_linear", c, -1, -1);
    return ((plain_fn)dlsym(RTLD_NEXT, __func__))(b, c, t, r, comm, m);
}

#define SEG(fn, label)                                                                        \
    int fn(void *b, int c, void *t, int r, void *comm, void *m, uint32_t s)                  \
    {                                                                                         \
        say(comm, label, c, (long)s, -1);                                                     \
        return ((seg_fn)dlsym(RTLD_NEXT, __func__))(b, c, t, r, comm, m, s);                  \
    }
SEG(ompi_coll_base_bcast_intra_pipeline, "pipeline")
SEG(ompi_coll_base_bcast_intra_split_bintree, "split_binary_tree")
SEG(ompi_coll_base_bcast_intra_bintree, "binary_tree")
SEG(ompi_coll_base_bcast_intra_binomial, "binomial")
SEG(ompi_coll_base_bcast_intra_scatter_allgather, "scatter_allgather")
SEG(ompi_coll_base_bcast_intra_scatter_allgather_ring, "scatter_allgather_ring")

#define SEG_INT(fn, label)                                                                    \
    int fn(void *b, int c, void *t, int r, void *comm, void *m, uint32_t s, int32_t k)       \
    {                                                                                         \
        say(comm, label, c, (long)s, (long)k);                                                \
        return ((seg_int_fn)dlsym(RTLD_NEXT, __func__))(b, c, t, r, comm, m, s, k);           \
    }
SEG_INT(ompi_coll_base_bcast_intra_chain, "chain")
SEG_INT(ompi_coll_base_bcast_intra_knomial, "knomial")
