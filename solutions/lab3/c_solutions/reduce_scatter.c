/* Algorithm: reduce-scatter by recursive halving (lab 3 solution)
 * Implements: MPI_Reduce_scatter_block (same signature; every rank gets one block of
 *             recvcount elements of the element-wise reduction of all ranks' p blocks)
 * Steps:        p a power of two: log2(p) steps. At step k (mask = p/2, p/4, ..., 1) rank r
 *               exchanges with r XOR mask: it keeps the half of its current block range that
 *               holds its own block, sends the other half, and reduces the half it receives
 *               into the half it keeps. After the last step it holds block r, fully reduced.
 * Cost:         log2(p)·α + ((p-1)/p)·n·β + ((p-1)/p)·n·γ      n = p·recvcount bytes (the
 *               whole input of one rank), γ = time to reduce one byte
 * Non-powers of two: p' = largest power of two <= p, q = p - p'. Pre-step: among ranks
 *               0..2q-1 each even rank sends its whole input to the odd rank above it, which
 *               reduces it into its own and stands for both (it owns blocks r-1 and r); the
 *               even ranks sit out. The p' remaining ranks run the halving above on "virtual
 *               blocks" (two real blocks for the first q, one for the others). Post-step:
 *               each odd rank < 2q sends block r-1 back to rank r-1.
 *               Extra cost: α + n·β + n·γ (pre) + α + (n/p)·β (post).
 * Restrictions: commutative op (the order of the operands changes; MPI_ERR_OP otherwise);
 *               any p >= 1, any datatype the op accepts, MPI_IN_PLACE (input in recvbuf).
 * Memory:       two temporary buffers of n bytes (the running sums and the incoming halves).
 *
 *   p = 4, blocks A B C D on every rank (A = block of rank 0, ...)
 *   step 1 (mask 2): 0<->2 and 1<->3   0,1 keep A B and send C D; 2,3 keep C D, send A B
 *        0: A B (sum of 0,2)   1: A B (1,3)   2: C D (0,2)   3: C D (1,3)
 *   step 2 (mask 1): 0<->1 and 2<->3   0 keeps A, 1 keeps B, 2 keeps C, 3 keeps D
 *        0: A = sum of all     1: B          2: C            3: D
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RS_TAG 0x1ab5

/* Keep the failing line, jump to fn_fail; the function returns the MPI error code. */
#define CHECK(rc_)                       \
    do {                                 \
        mpi_errno = (rc_);               \
        if (mpi_errno != MPI_SUCCESS) {  \
            fail_line = __LINE__;        \
            goto fn_fail;                \
        }                                \
    } while (0)

/* Real rank of virtual rank v (after the pre-step, q odd ranks stand for two). */
static int real_rank(int v, int q) { return v < q ? 2 * v + 1 : v + q; }

/* First real block of virtual block v. */
static int first_block(int v, int q) { return v < q ? 2 * v : v + q; }

int student_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, fail_line = 0, rank, p, commute;
    char *acc_raw = NULL, *in_raw = NULL;
    MPI_Aint lb, extent, true_lb, true_extent;

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    CHECK(MPI_Op_commutative(op, &commute));
    if (!commute) {
        mpi_errno = MPI_ERR_OP;
        fail_line = __LINE__;
        goto fn_fail;
    }
    if (recvcount == 0)
        return MPI_SUCCESS;
    CHECK(MPI_Type_get_extent(datatype, &lb, &extent));
    CHECK(MPI_Type_get_true_extent(datatype, &true_lb, &true_extent));

    const int total = p * recvcount;                      /* elements of one rank's input */
    const size_t span = (size_t)(total - 1) * extent + true_extent;
    acc_raw = malloc(span);
    in_raw = malloc(span);
    if (!acc_raw || !in_raw) {
        mpi_errno = MPI_ERR_NO_MEM;
        fail_line = __LINE__;
        goto fn_fail;
    }
    char *acc = acc_raw - true_lb, *in = in_raw - true_lb;   /* element 0 of each buffer */
    const void *input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    memcpy(acc_raw, (const char *)input + true_lb, span);

    int pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    const int q = p - pof2;
    int vrank;

    /* Pre-step: fold ranks 0..2q-1 in pairs. */
    if (rank < 2 * q) {
        if (rank % 2 == 0) {
            CHECK(MPI_Send(acc, total, datatype, rank + 1, RS_TAG, comm));
            vrank = -1;
        } else {
            CHECK(MPI_Recv(in, total, datatype, rank - 1, RS_TAG, comm, MPI_STATUS_IGNORE));
            CHECK(MPI_Reduce_local(in, acc, total, datatype, op));
            vrank = rank / 2;
        }
    } else {
        vrank = rank - q;
    }

    /* Recursive halving over virtual blocks [lo, hi). */
    if (vrank >= 0) {
        int lo = 0, hi = pof2;
        for (int mask = pof2 / 2; mask >= 1; mask /= 2) {
            int vpeer = vrank ^ mask, peer = real_rank(vpeer, q), mid = lo + mask;
            int keep_lo = vrank < vpeer ? lo : mid, keep_hi = vrank < vpeer ? mid : hi;
            int send_lo = vrank < vpeer ? mid : lo, send_hi = vrank < vpeer ? hi : mid;
            MPI_Aint keep_off = (MPI_Aint)first_block(keep_lo, q) * recvcount;
            MPI_Aint send_off = (MPI_Aint)first_block(send_lo, q) * recvcount;
            int keep_n = (first_block(keep_hi, q) - first_block(keep_lo, q)) * recvcount;
            int send_n = (first_block(send_hi, q) - first_block(send_lo, q)) * recvcount;
            CHECK(MPI_Sendrecv(acc + send_off * extent, send_n, datatype, peer, RS_TAG,
                               in + keep_off * extent, keep_n, datatype, peer, RS_TAG, comm,
                               MPI_STATUS_IGNORE));
            CHECK(MPI_Reduce_local(in + keep_off * extent, acc + keep_off * extent, keep_n,
                                   datatype, op));
            lo = keep_lo;
            hi = keep_hi;
        }
    }

    /* Post-step: odd ranks below 2q hand block r-1 to rank r-1; everyone copies its block. */
    if (rank < 2 * q && rank % 2 == 0) {
        CHECK(MPI_Recv(recvbuf, recvcount, datatype, rank + 1, RS_TAG, comm, MPI_STATUS_IGNORE));
    } else {
        if (rank < 2 * q)
            CHECK(MPI_Send(acc + (MPI_Aint)(rank - 1) * recvcount * extent, recvcount, datatype,
                           rank - 1, RS_TAG, comm));
        const size_t block_span = (size_t)(recvcount - 1) * extent + true_extent;
        memmove((char *)recvbuf + true_lb, acc + (MPI_Aint)rank * recvcount * extent + true_lb,
                block_span);
    }

fn_exit:
    free(acc_raw);
    free(in_raw);
    return mpi_errno;
fn_fail:
    fprintf(stderr, "%s:%d: MPI error %d\n", __FILE__, fail_line, mpi_errno);
    goto fn_exit;
}
