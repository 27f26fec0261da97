/* Binomial-tree broadcast (lab 6 solution): ranks relative to the root, v = (rank - root) mod p.
 * Rank v receives the whole buffer from v - 2^j, 2^j its lowest set bit, then sends it to
 * v + 2^k for every 2^k below that bit, the largest first. Cost: ceil(log2 p)·(α + n·β). */
#include <mpi.h>

int student_bcast_binomial(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    int v = (rank - root + p) % p, mask = 1;
    while (mask < p) {
        if (v & mask) {
            MPI_Recv(buffer, count, datatype, (v - mask + root) % p, 0, comm, MPI_STATUS_IGNORE);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < p)
            MPI_Send(buffer, count, datatype, (v + mask + root) % p, 0, comm);
    return MPI_SUCCESS;
}
