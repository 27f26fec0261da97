/* common.c — local copies and temporary buffers shared by the allgather algorithms. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "labcoll_impl.h"

int lab_shared_scratch = 0;
lab_copy_observer lab_copy_hook = NULL;

/* Under SMPI with lab_shared_scratch set, one shared (content-free) buffer per call site. */
void *lab_scratch_alloc(size_t bytes)
{
#ifdef SMPI_SHARED_MALLOC
    if (lab_shared_scratch)
        return SMPI_SHARED_MALLOC(bytes > 0 ? bytes : 1);
#endif
    return malloc(bytes > 0 ? bytes : 1);
}

void lab_scratch_free(void *p)
{
    if (p == NULL)
        return;
#ifdef SMPI_SHARED_FREE
    if (lab_shared_scratch) {
        SMPI_SHARED_FREE(p);
        return;
    }
#endif
    free(p);
}

const char *lab_error_file = "";
int lab_error_line = 0;

#ifndef SMPI_SHARED_MALLOC
/* *dense = 1 when any number of elements of t is one run of bytes starting at t's lower
 * bound, without holes: size = extent = true extent, lb = true lb, and t is predefined or a
 * contiguous (or dup) of such a type. Anything else (vectors, structs, resized types, pair
 * types like MPI_DOUBLE_INT whose size is not their extent) is not dense. */
static int dense_type(MPI_Datatype t, int *dense)
{
    int mpi_errno = MPI_SUCCESS, ni, na, nd, combiner, size;
    MPI_Aint lb, extent, true_lb, true_extent;
    MPI_Datatype base = MPI_DATATYPE_NULL;

    *dense = 0;
    CHECK(MPI_Type_size(t, &size));
    CHECK(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(MPI_Type_get_true_extent(t, &true_lb, &true_extent));
    if ((MPI_Aint)size != extent || extent != true_extent || lb != true_lb)
        goto fn_exit;
    CHECK(MPI_Type_get_envelope(t, &ni, &na, &nd, &combiner));
    if (combiner == MPI_COMBINER_NAMED) {
        *dense = 1;
    } else if (combiner == MPI_COMBINER_CONTIGUOUS || combiner == MPI_COMBINER_DUP) {
        int ints[1];
        MPI_Aint addrs[1];
        if (ni > 1 || na > 0 || nd != 1)
            goto fn_exit;
        CHECK(MPI_Type_get_contents(t, ni, na, nd, ints, addrs, &base));
        CHECK(dense_type(base, dense));
    }
fn_exit:
    if (base != MPI_DATATYPE_NULL) {
        /* get_contents returns new handles for derived types only */
        int bni, bna, bnd, bcomb;
        if (MPI_Type_get_envelope(base, &bni, &bna, &bnd, &bcomb) == MPI_SUCCESS &&
            bcomb != MPI_COMBINER_NAMED)
            MPI_Type_free(&base);
    }
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* The copy itself on real MPI: memcpy for dense types, MPI_Pack/MPI_Unpack for the others. */
static int copy_bytes(const void *src, int scount, MPI_Datatype stype, void *dst, int dcount,
                      MPI_Datatype dtype, MPI_Comm comm, long long *bytes)
{
    int mpi_errno = MPI_SUCCESS, ssize, dsize, sdense, ddense, psize, pos = 0, upos = 0;
    MPI_Aint extent, slb, dlb;
    char *packed = NULL;

    CHECK(MPI_Type_size(stype, &ssize));
    CHECK(MPI_Type_size(dtype, &dsize));
    *bytes = (long long)scount * ssize;
    if ((long long)dcount * dsize < *bytes)
        CHECK(MPI_ERR_TRUNCATE);
    if (*bytes == 0)
        goto fn_exit;
    CHECK(dense_type(stype, &sdense));
    CHECK(dense_type(dtype, &ddense));
    if (sdense && ddense) {
        CHECK(MPI_Type_get_extent(stype, &slb, &extent));
        CHECK(MPI_Type_get_extent(dtype, &dlb, &extent));
        memcpy((char *)dst + dlb, (const char *)src + slb, (size_t)*bytes);
        goto fn_exit;
    }
    /* Holes or a layout MPI knows better: pack, then unpack whole dtype elements. */
    if (*bytes > INT_MAX || *bytes % dsize)
        CHECK(*bytes > INT_MAX ? MPI_ERR_COUNT : MPI_ERR_TYPE);
    CHECK(MPI_Pack_size(scount, stype, comm, &psize));
    packed = malloc(psize > 0 ? (size_t)psize : 1);
    if (packed == NULL)
        CHECK(MPI_ERR_NO_MEM);
    CHECK(MPI_Pack(src, scount, stype, packed, psize, &pos, comm));
    CHECK(MPI_Unpack(packed, pos, &upos, dst, (int)(*bytes / dsize), dtype, comm));
fn_exit:
    free(packed);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
#endif

int lab_local_copy(const void *src, int scount, MPI_Datatype stype,
                   void *dst, int dcount, MPI_Datatype dtype, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS;
    double t0 = lab_copy_hook ? MPI_Wtime() : 0;
    long long bytes = 0;
#ifdef SMPI_SHARED_MALLOC
    int rank, ssize;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Type_size(stype, &ssize));
    bytes = (long long)scount * ssize;
    if (!lab_shared_scratch)   /* content-free benchmarking: nothing worth copying */
        CHECK(PMPI_Sendrecv(src, scount, stype, rank, LAB_TAG_COPY, dst, dcount, dtype, rank,
                            LAB_TAG_COPY, comm, MPI_STATUS_IGNORE));
#else
    CHECK(copy_bytes(src, scount, stype, dst, dcount, dtype, comm, &bytes));
#endif
    if (lab_copy_hook)
        lab_copy_hook(t0, MPI_Wtime(), bytes);
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

int lab_copy_own_block(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, rank;
    MPI_Aint lb, extent;
    if (sendbuf == MPI_IN_PLACE)
        return MPI_SUCCESS;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Type_get_extent(recvtype, &lb, &extent));
    CHECK(lab_local_copy(sendbuf, sendcount, sendtype,
                         lab_block(recvbuf, rank, recvcount, extent), recvcount, recvtype, comm));
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
