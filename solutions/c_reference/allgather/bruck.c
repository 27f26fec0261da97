/* Algorithm: bruck
 * Steps:        ceil(log2 p); blocks are kept in a temporary buffer rotated so that rank r's
 *               own block is first. In step k (d = 2^k) rank r sends its first min(d, p - d)
 *               blocks to r - d and appends the same number received from r + d. A final
 *               rotation puts block i at position (r + i) mod p of recvbuf.
 *               What the rotation would only move is never put in the temporary buffer:
 *               step 0 sends the own block straight from sendbuf (and so does any step that
 *               sends one block), the last step receives straight into recvbuf unless its
 *               run of blocks passes block p - 1, and the own block is copied from sendbuf.
 *               Every copy is a local copy (lab_local_copy), never a message. At p = 2 this
 *               is one exchange and one copy, and no temporary buffer.
 * Cost:         ceil(log2 p)·α + ((p-1)/p)·n·β      n = bytes gathered on each process;
 *               plus local copies of at most n bytes (no network time)
 * Restrictions: none (any p, any datatype, MPI_IN_PLACE, count 0)
 * Memory:       a temporary buffer of up to n bytes (p blocks, true extent of recvtype) when
 *               p > 2; shared (content-free) under SMPI when lab_shared_scratch is set by the
 *               benchmark
 *
 *   p=4, temporary buffer of each rank:
 *           rank0   rank1   rank2   rank3
 *   start   A       B       C       D
 *   step 0  AB      BC      CD      DA        r sends to r-1, receives from r+1
 *   step 1  ABCD    BCDA    CDAB    DABC      r sends 2 blocks to r-2, receives from r+2
 *   rotate  ABCD    ABCD    ABCD    ABCD
 *   (step 1 lands in recvbuf directly on ranks 0, 2 and 3: CD, AB and BC do not wrap)
 */
#include <stdlib.h>
#include "labcoll_impl.h"

/* Copy `nblocks` blocks of recvtype from tmp block `from` to recvbuf, starting at recvbuf's
 * block `to` and wrapping past block p - 1 to block 0 (at most two local copies). */
static int place_run(const char *tmp, int from, void *recvbuf, int to, int nblocks, int p,
                     int recvcount, MPI_Datatype recvtype, MPI_Aint extent, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS;
    int first = nblocks < p - to ? nblocks : p - to;
    if (first > 0)
        CHECK(lab_local_copy(tmp + (MPI_Aint)from * recvcount * extent, first * recvcount,
                             recvtype, lab_block(recvbuf, to, recvcount, extent),
                             first * recvcount, recvtype, comm));
    if (nblocks > first)
        CHECK(lab_local_copy(tmp + (MPI_Aint)(from + first) * recvcount * extent,
                             (nblocks - first) * recvcount, recvtype, recvbuf,
                             (nblocks - first) * recvcount, recvtype, comm));
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

int lab_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                        void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, rank, p;
    MPI_Aint lb, extent, true_lb, true_extent;
    char *tmp_alloc = NULL, *tmp = NULL;

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    CHECK(MPI_Type_get_extent(recvtype, &lb, &extent));
    CHECK(MPI_Type_get_true_extent(recvtype, &true_lb, &true_extent));

    lab_contribution mine = lab_mine(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                     rank, extent);

    /* The last step: distance `last` (the largest power of two below p), `nlast` blocks
     * from rank + last, which land in recvbuf unless they pass block p - 1. */
    int last = 1;
    while (last * 2 < p)
        last *= 2;
    int nlast = p - last, first_last = (rank + last) % p;
    int last_wraps = first_last + nlast > p;
    int ntmp = last_wraps ? p : last;   /* blocks of the temporary buffer */

    if (p > 2 || last_wraps) {
        /* ntmp*recvcount elements laid out like recvbuf; shift so data starts at tmp_alloc. */
        MPI_Aint span = (MPI_Aint)ntmp * recvcount > 0
                            ? ((MPI_Aint)ntmp * recvcount - 1) * extent + true_extent : 0;
        tmp_alloc = lab_scratch_alloc(span > 0 ? (size_t)span : 1);
        if (tmp_alloc == NULL)
            CHECK(MPI_ERR_NO_MEM);
        tmp = tmp_alloc - true_lb;
    }

    for (int d = 1; d < p; d *= 2) {
        int cnt = (d < p - d) ? d : p - d;
        int dst = (rank - d + p) % p, src = (rank + d) % p;
        const void *sbuf = cnt == 1 ? mine.buf : tmp;   /* one block: the own one */
        int scount = cnt == 1 ? mine.count : cnt * recvcount;
        MPI_Datatype stype = cnt == 1 ? mine.type : recvtype;
        void *rbuf = (d == last && !last_wraps) ? lab_block(recvbuf, first_last, recvcount, extent)
                                                : lab_block(tmp, d, recvcount, extent);
        CHECK(MPI_Sendrecv(sbuf, scount, stype, dst, LAB_TAG_ALLGATHER, rbuf, cnt * recvcount,
                           recvtype, src, LAB_TAG_ALLGATHER, comm, MPI_STATUS_IGNORE));
        if (d == 1 && p >= 4)   /* later steps send runs that start with the own block */
            CHECK(lab_local_copy(mine.buf, mine.count, mine.type, tmp, recvcount, recvtype, comm));
    }

    /* Rotate what the temporary buffer holds: its block i is rank (rank + i) mod p's. */
    if (tmp != NULL)
        CHECK(place_run(tmp, 1, recvbuf, (rank + 1) % p, ntmp - 1, p, recvcount, recvtype,
                        extent, comm));
    CHECK(lab_copy_own_block(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
fn_exit:
    lab_scratch_free(tmp_alloc);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
