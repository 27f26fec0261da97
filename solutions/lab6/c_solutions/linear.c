/* Linear broadcast (lab 6 solution): the root posts one MPI_Isend of the whole buffer to every
 * other rank and waits for all of them; every other rank receives once from the root.
 * Cost (one port): (p-1)·(α + n·β), n = bytes of the buffer. */
#include <mpi.h>
#include <stdlib.h>

int student_bcast_linear(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    if (rank != root)
        return MPI_Recv(buffer, count, datatype, root, 0, comm, MPI_STATUS_IGNORE);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)(p > 1 ? p - 1 : 1));
    int k = 0;
    for (int dst = 0; dst < p; dst++)
        if (dst != root)
            MPI_Isend(buffer, count, datatype, dst, 0, comm, &reqs[k++]);
    int rc = MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    return rc;
}
