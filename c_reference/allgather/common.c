/* common.c — typed local copies shared by the allgather algorithms. */
#include <stdlib.h>
#include "labcoll_impl.h"

int lab_shared_scratch = 0;

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

int lab_typed_copy(const void *src, int scount, MPI_Datatype stype,
                   void *dst, int dcount, MPI_Datatype dtype, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, rank;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Sendrecv(src, scount, stype, rank, LAB_TAG_COPY,
                       dst, dcount, dtype, rank, LAB_TAG_COPY, comm, MPI_STATUS_IGNORE));
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
    CHECK(lab_typed_copy(sendbuf, sendcount, sendtype,
                         lab_block(recvbuf, rank, recvcount, extent), recvcount, recvtype, comm));
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
