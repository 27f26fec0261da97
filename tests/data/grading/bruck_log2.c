/* A right Bruck that counts its steps with ceil(log2(p)) from <math.h>, as many do: it needs
 * the maths library at link time (adapted from public course repositories). */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int student_allgather_bruck(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(recvtype, &lb, &extent);
    size_t block = (size_t)recvcount * extent;
    char *recv = recvbuf, *tmp = malloc(block * p + 1);
    if (sendbuf == MPI_IN_PLACE)
        memcpy(tmp, recv + rank * block, block);
    else
        MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, tmp, recvcount, recvtype, rank, 0,
                     comm, MPI_STATUS_IGNORE);
    int steps = (int)ceil(log2((double)p));
    for (int k = 0; k < steps; k++) {
        int d = (int)pow(2, k), n = d < p - d ? d : p - d;
        MPI_Sendrecv(tmp, n * recvcount, recvtype, (rank - d + p) % p, 1, tmp + d * block,
                     n * recvcount, recvtype, (rank + d) % p, 1, comm, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < p; i++)
        memcpy(recv + ((rank + i) % p) * block, tmp + i * block, block);
    free(tmp);
    return MPI_SUCCESS;
}
