/* Algorithm: binomial (broadcast)
 * Steps:        ceil(log2 p); ranks are numbered relative to the root (v = (r - root) mod p).
 *               A rank first receives the whole buffer from its parent v - 2^j, where 2^j is
 *               the lowest set bit of v; then it sends to its children v + 2^k for every
 *               2^k below that bit (largest first), with blocking MPI_Send / MPI_Recv.
 * Cost:         ceil(log2 p)·(α + n·β)      n = bytes of the buffer
 * Restrictions: none (any p, any root, any datatype, count 0)
 * Memory:       no temporary buffer
 *
 *   p=8, root 0 (relative ranks):
 *   step 1  0→4
 *   step 2  0→2  4→6
 *   step 3  0→1  2→3  4→5  6→7
 */
#include "labcoll_impl.h"

int lab_bcast_binomial(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, rank, p;

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    if (root < 0 || root >= p)
        CHECK(MPI_ERR_ROOT);
    int v = (rank - root + p) % p;

    /* Receive from the parent: clear the lowest set bit of v. */
    int mask = 1;
    while (mask < p) {
        if (v & mask) {
            int parent = (v - mask + root) % p;
            CHECK(MPI_Recv(buffer, count, datatype, parent, LAB_TAG_BCAST, comm,
                           MPI_STATUS_IGNORE));
            break;
        }
        mask <<= 1;
    }

    /* Send to the children below that bit, the farthest first. */
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < p)
            CHECK(MPI_Send(buffer, count, datatype, (v + mask + root) % p, LAB_TAG_BCAST, comm));
    }
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
