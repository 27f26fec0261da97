/* Algorithm: ring
 * Steps:        p - 1; in step k, rank r sends block (r - k) to r + 1 and receives block
 *               (r - k - 1) from r - 1 (indices mod p), with one MPI_Sendrecv. Step 0 sends
 *               the rank's own block straight from sendbuf; the local copy of that block into
 *               recvbuf comes after step 0 (lab_local_copy: a copy, never a message). Copying
 *               first and sending the fresh copy made the neighbour read cache lines this
 *               core had just written: 4.3x slower at p = 2, 64 KiB on Open MPI (DEVELOPING 2d).
 * Cost:         (p-1)·α + ((p-1)/p)·n·β      n = bytes gathered on each process (p blocks)
 * Restrictions: none (any p, any datatype, MPI_IN_PLACE, count 0)
 * Memory:       no temporary buffer
 *
 *   p=4, blocks held after each step (A..D = the blocks of ranks 0..3):
 *           rank0   rank1   rank2   rank3
 *   start   A...    .B..    ..C.    ...D
 *   step 0  A..D    AB..    .BC.    ..CD     0→1 A, 1→2 B, 2→3 C, 3→0 D
 *   step 1  A.CD    AB.D    ABC.    .BCD     0→1 D, 1→2 A, 2→3 B, 3→0 C
 *   step 2  ABCD    ABCD    ABCD    ABCD     0→1 C, 1→2 D, 2→3 A, 3→0 B
 */
#include "labcoll_impl.h"

int lab_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, rank, p;
    MPI_Aint lb, extent;

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    CHECK(MPI_Type_get_extent(recvtype, &lb, &extent));

    lab_contribution mine = lab_mine(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                     rank, extent);

    int right = (rank + 1) % p, left = (rank - 1 + p) % p;
    if (p > 1)   /* step 0: the own block, from the caller's buffer */
        CHECK(MPI_Sendrecv(mine.buf, mine.count, mine.type, right, LAB_TAG_ALLGATHER,
                           lab_block(recvbuf, left, recvcount, extent), recvcount, recvtype,
                           left, LAB_TAG_ALLGATHER, comm, MPI_STATUS_IGNORE));
    CHECK(lab_copy_own_block(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
    for (int k = 1; k < p - 1; k++) {
        int send_block = (rank - k + p) % p;
        int recv_block = (rank - k - 1 + 2 * p) % p;
        CHECK(MPI_Sendrecv(lab_block(recvbuf, send_block, recvcount, extent), recvcount, recvtype,
                           right, LAB_TAG_ALLGATHER,
                           lab_block(recvbuf, recv_block, recvcount, extent), recvcount, recvtype,
                           left, LAB_TAG_ALLGATHER, comm, MPI_STATUS_IGNORE));
    }
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
