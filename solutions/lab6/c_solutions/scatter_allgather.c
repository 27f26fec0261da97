/* Scatter + ring allgather broadcast (van de Geijn; lab 6 solution).
 * The buffer is cut into p blocks of b = ceil(count/p) elements (the last ones shorter or
 * empty); block i belongs to the rank v = i relative to the root.
 * 1. Binomial scatter: rank v receives blocks [v, v + 2^j) from v - 2^j (2^j its lowest set bit)
 *    and sends blocks [v + 2^k, v + 2^(k+1)) to v + 2^k for each 2^k below that bit.
 * 2. Ring allgather: p - 1 steps of MPI_Sendrecv; at step s rank v sends block (v - s) to
 *    v + 1 and receives block (v - s - 1) from v - 1.
 * Cost: (ceil(log2 p) + p - 1)·α + 2·((p-1)/p)·n·β. */
#include <mpi.h>

static int first(int block, int b, int count) { long f = (long)block * b; return f < count ? (int)f : count; }

/* Elements of blocks [lo, hi) (clipped to the buffer). */
static int span(int lo, int hi, int b, int count) { return first(hi, b, count) - first(lo, b, count); }

int student_bcast_scatter_allgather(void *buffer, int count, MPI_Datatype datatype, int root,
                                    MPI_Comm comm)
{
    int rank, p;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(datatype, &lb, &extent);
    if (p == 1 || count == 0)
        return MPI_SUCCESS;
    char *buf = buffer;
    int b = (count + p - 1) / p, v = (rank - root + p) % p, mask = 1;
#define AT(block) (buf + (MPI_Aint)first(block, b, count) * extent)
#define REAL(vr) (((vr) + root) % p)
    while (mask < p) {
        if (v & mask) {
            int hi = v + mask < p ? v + mask : p;
            MPI_Recv(AT(v), span(v, hi, b, count), datatype, REAL(v - mask), 0, comm, MPI_STATUS_IGNORE);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < p) {
            int hi = v + 2 * mask < p ? v + 2 * mask : p;
            MPI_Send(AT(v + mask), span(v + mask, hi, b, count), datatype, REAL(v + mask), 0, comm);
        }
    }
    int right = REAL(v + 1), left = REAL(v - 1 + p);
    for (int s = 0; s < p - 1; s++) {
        int sb = (v - s + p) % p, rb = (v - s - 1 + p) % p;
        MPI_Sendrecv(AT(sb), span(sb, sb + 1, b, count), datatype, right, 1,
                     AT(rb), span(rb, rb + 1, b, count), datatype, left, 1, comm, MPI_STATUS_IGNORE);
    }
    return MPI_SUCCESS;
}
