/* A wrong binomial broadcast for the grading tests: the tree is numbered from rank 0 whatever
 * the root, so it is right only when the root is 0 (the "root" and "sub-communicator" cases
 * fail: rank 0 sends its own buffer and the root's is overwritten). */
#include <mpi.h>

int student_bcast_binomial(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    int rank, p, mask = 1;
    (void)root;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    while (mask < p) {
        if (rank & mask) {
            MPI_Recv(buffer, count, datatype, rank - mask, 0, comm, MPI_STATUS_IGNORE);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rank + mask < p)
            MPI_Send(buffer, count, datatype, rank + mask, 0, comm);
    return MPI_SUCCESS;
}
