/* Algorithm: bruck
 * Steps:        ceil(log2 p); blocks are kept in a temporary buffer rotated so that rank r's
 *               own block is first. In step k (d = 2^k) rank r sends its first min(d, p - d)
 *               blocks to r - d and appends the same number received from r + d. A final
 *               rotation puts block i at position (r + i) mod p of recvbuf.
 * Cost:         ceil(log2 p)·α + ((p-1)/p)·n·β      n = bytes gathered on each process;
 *               plus local copies of n bytes (no network time)
 * Restrictions: none (any p, any datatype, MPI_IN_PLACE, count 0)
 * Memory:       a temporary buffer of n bytes (p blocks, true extent of recvtype); shared
 *               (content-free) under SMPI when lab_shared_scratch is set by the benchmark
 *
 *   p=4, temporary buffer of each rank:
 *           rank0   rank1   rank2   rank3
 *   start   A       B       C       D
 *   step 0  AB      BC      CD      DA        r sends to r-1, receives from r+1
 *   step 1  ABCD    BCDA    CDAB    DABC      r sends 2 blocks to r-2, receives from r+2
 *   rotate  ABCD    ABCD    ABCD    ABCD
 */
#include <stdlib.h>
#include "labcoll_impl.h"

int lab_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                        void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, rank, p;
    MPI_Aint lb, extent, true_lb, true_extent;
    char *tmp_alloc = NULL, *tmp;

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    CHECK(MPI_Type_get_extent(recvtype, &lb, &extent));
    CHECK(MPI_Type_get_true_extent(recvtype, &true_lb, &true_extent));

    /* p*recvcount elements laid out like recvbuf; shift so element data starts at tmp_alloc. */
    MPI_Aint span = (MPI_Aint)p * recvcount > 0
                        ? ((MPI_Aint)p * recvcount - 1) * extent + true_extent : 0;
    tmp_alloc = lab_scratch_alloc(span > 0 ? (size_t)span : 1);
    if (tmp_alloc == NULL)
        CHECK(MPI_ERR_NO_MEM);
    tmp = tmp_alloc - true_lb;

    /* Own block first. */
    if (sendbuf == MPI_IN_PLACE)
        CHECK(lab_typed_copy(lab_block(recvbuf, rank, recvcount, extent), recvcount, recvtype,
                             tmp, recvcount, recvtype, comm));
    else
        CHECK(lab_typed_copy(sendbuf, sendcount, sendtype, tmp, recvcount, recvtype, comm));

    for (int d = 1; d < p; d *= 2) {
        int cnt = (d < p - d) ? d : p - d;
        int dst = (rank - d + p) % p, src = (rank + d) % p;
        CHECK(MPI_Sendrecv(tmp, cnt * recvcount, recvtype, dst, LAB_TAG_ALLGATHER,
                           lab_block(tmp, d, recvcount, extent), cnt * recvcount, recvtype, src,
                           LAB_TAG_ALLGATHER, comm, MPI_STATUS_IGNORE));
    }

    /* Rotate: tmp block i is the block of rank (rank + i) mod p. */
    CHECK(lab_typed_copy(tmp, (p - rank) * recvcount, recvtype,
                         lab_block(recvbuf, rank, recvcount, extent), (p - rank) * recvcount,
                         recvtype, comm));
    if (rank > 0)
        CHECK(lab_typed_copy(lab_block(tmp, p - rank, recvcount, extent), rank * recvcount,
                             recvtype, recvbuf, rank * recvcount, recvtype, comm));
fn_exit:
    lab_scratch_free(tmp_alloc);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
