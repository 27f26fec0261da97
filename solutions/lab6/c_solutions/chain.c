/* Chain broadcast (lab 6 solution): ranks in a line from the root, v = (rank - root) mod p;
 * rank v receives the whole buffer from v - 1 and sends it on to v + 1.
 * Cost: (p-1)·(α + n·β). */
#include <mpi.h>

int student_bcast_chain(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    int v = (rank - root + p) % p;
    if (v > 0)
        MPI_Recv(buffer, count, datatype, (rank - 1 + p) % p, 0, comm, MPI_STATUS_IGNORE);
    if (v < p - 1)
        MPI_Send(buffer, count, datatype, (rank + 1) % p, 0, comm);
    return MPI_SUCCESS;
}
