/* Algorithm: Rabenseifner's allreduce = reduce-scatter by recursive halving, then allgather
 *            by recursive doubling (lab 3 solution)
 * Implements: MPI_Allreduce (same signature)
 * Steps:        p a power of two: the vector is cut into p blocks (count/p elements, the first
 *               count % p blocks one more). log2(p) halving steps (as in reduce_scatter.c)
 *               leave rank r with block r fully reduced; then log2(p) doubling steps: at
 *               mask = 1, 2, ..., p/2 rank r swaps everything it has with r XOR mask, so the
 *               reduced blocks it holds double each step until it holds all p.
 * Cost:         2·log2(p)·α + 2·((p-1)/p)·n·β + ((p-1)/p)·n·γ      n = count elements in bytes
 *               (recursive doubling alone: log2(p)·(α + n·β + n·γ): better for small n only)
 * Non-powers of two: p' = largest power of two <= p, q = p - p'. Pre-step: among ranks
 *               0..2q-1 each even rank sends its whole vector to the odd rank above it, which
 *               reduces it into its own; the even ranks sit out. The p' others run the two
 *               phases above with p' blocks. Post-step: each odd rank < 2q sends the whole
 *               result to rank r-1. Extra cost: 2·α + 2·n·β + n·γ.
 * Restrictions: commutative op (MPI_ERR_OP otherwise); any p >= 1, any count >= 0 (blocks
 *               may be empty when count < p'), any datatype the op accepts, MPI_IN_PLACE.
 * Memory:       one temporary buffer of n bytes (incoming halves); the sums live in recvbuf.
 *
 *   p = 4, blocks A B C D            halving                    doubling
 *   step 1 (mask 2): 0<->2, 1<->3    0,1 keep A B; 2,3 keep C D
 *   step 2 (mask 1): 0<->1, 2<->3    0:A 1:B 2:C 3:D reduced
 *   step 3 (mask 1): 0<->1, 2<->3                               0,1: A B   2,3: C D
 *   step 4 (mask 2): 0<->2, 1<->3                               everyone: A B C D
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AR_TAG 0x1ab6

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

/* First element of block b when count elements are cut into nblocks blocks. */
static int block_start(int b, int count, int nblocks)
{
    int base = count / nblocks, extra = count % nblocks;
    return b * base + (b < extra ? b : extra);
}

int student_allreduce_rabenseifner(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, fail_line = 0, rank, p, commute;
    char *in_raw = NULL;
    MPI_Aint lb, extent, true_lb, true_extent;

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    CHECK(MPI_Op_commutative(op, &commute));
    if (!commute) {
        mpi_errno = MPI_ERR_OP;
        fail_line = __LINE__;
        goto fn_fail;
    }
    if (count == 0)
        return MPI_SUCCESS;
    CHECK(MPI_Type_get_extent(datatype, &lb, &extent));
    CHECK(MPI_Type_get_true_extent(datatype, &true_lb, &true_extent));
    const size_t span = (size_t)(count - 1) * extent + true_extent;
    char *acc = recvbuf;                                  /* the running sums */
    if (sendbuf != MPI_IN_PLACE)
        memcpy(acc + true_lb, (const char *)sendbuf + true_lb, span);
    in_raw = malloc(span);
    if (!in_raw) {
        mpi_errno = MPI_ERR_NO_MEM;
        fail_line = __LINE__;
        goto fn_fail;
    }
    char *in = in_raw - true_lb;

    int pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    const int q = p - pof2;
    int vrank;

    /* Pre-step: fold ranks 0..2q-1 in pairs. */
    if (rank < 2 * q) {
        if (rank % 2 == 0) {
            CHECK(MPI_Send(acc, count, datatype, rank + 1, AR_TAG, comm));
            vrank = -1;
        } else {
            CHECK(MPI_Recv(in, count, datatype, rank - 1, AR_TAG, comm, MPI_STATUS_IGNORE));
            CHECK(MPI_Reduce_local(in, acc, count, datatype, op));
            vrank = rank / 2;
        }
    } else {
        vrank = rank - q;
    }

    if (vrank >= 0) {
        /* Reduce-scatter by recursive halving over blocks [lo, hi). */
        int lo = 0, hi = pof2;
        for (int mask = pof2 / 2; mask >= 1; mask /= 2) {
            int vpeer = vrank ^ mask, peer = real_rank(vpeer, q), mid = lo + mask;
            int keep_lo = vrank < vpeer ? lo : mid, keep_hi = vrank < vpeer ? mid : hi;
            int send_lo = vrank < vpeer ? mid : lo, send_hi = vrank < vpeer ? hi : mid;
            int k0 = block_start(keep_lo, count, pof2), k1 = block_start(keep_hi, count, pof2);
            int s0 = block_start(send_lo, count, pof2), s1 = block_start(send_hi, count, pof2);
            CHECK(MPI_Sendrecv(acc + (MPI_Aint)s0 * extent, s1 - s0, datatype, peer, AR_TAG,
                               in + (MPI_Aint)k0 * extent, k1 - k0, datatype, peer, AR_TAG, comm,
                               MPI_STATUS_IGNORE));
            CHECK(MPI_Reduce_local(in + (MPI_Aint)k0 * extent, acc + (MPI_Aint)k0 * extent,
                                   k1 - k0, datatype, op));
            lo = keep_lo;
            hi = keep_hi;
        }
        /* Allgather by recursive doubling: my range [lo, lo + mask) grows to everything. */
        for (int mask = 1; mask < pof2; mask *= 2) {
            int vpeer = vrank ^ mask, peer = real_rank(vpeer, q);
            int mine = vrank & ~(mask - 1), theirs = vpeer & ~(mask - 1);
            int m0 = block_start(mine, count, pof2), m1 = block_start(mine + mask, count, pof2);
            int t0 = block_start(theirs, count, pof2), t1 = block_start(theirs + mask, count, pof2);
            CHECK(MPI_Sendrecv(acc + (MPI_Aint)m0 * extent, m1 - m0, datatype, peer, AR_TAG,
                               acc + (MPI_Aint)t0 * extent, t1 - t0, datatype, peer, AR_TAG, comm,
                               MPI_STATUS_IGNORE));
        }
    }

    /* Post-step: odd ranks below 2q send the result to the even rank they stood for. */
    if (rank < 2 * q) {
        if (rank % 2 == 0)
            CHECK(MPI_Recv(acc, count, datatype, rank + 1, AR_TAG, comm, MPI_STATUS_IGNORE));
        else
            CHECK(MPI_Send(acc, count, datatype, rank - 1, AR_TAG, comm));
    }

fn_exit:
    free(in_raw);
    return mpi_errno;
fn_fail:
    fprintf(stderr, "%s:%d: MPI error %d\n", __FILE__, fail_line, mpi_errno);
    goto fn_exit;
}
