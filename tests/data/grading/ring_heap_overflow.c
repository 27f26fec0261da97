/* A wrong ring: rank 1 writes past the end of a buffer it allocated, over the heap's own
 * bookkeeping, and glibc aborts it ("double free or corruption (out)" with glibc 2.36, "malloc():
 * corrupted top size" where the next allocation checks first).
 * The buffers are 8 MiB with mmap() turned off up to 64 MiB, so both come from the top of the
 * heap (no free chunk is that large): the bytes past the first one are the top chunk's size,
 * whatever MPI allocated before. */
#include <malloc.h>
#include <mpi.h>
#include <stdlib.h>
int student_allgather_ring(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Sendrecv(sendbuf, sendcount, sendtype, rank, 0, recvbuf, recvcount, recvtype, rank, 0,
                 comm, MPI_STATUS_IGNORE);   /* right for P = 1 only */
    if (rank == 1) {
        size_t n = 8 << 20;
        mallopt(M_MMAP_THRESHOLD, 64 << 20);
        volatile char *scratch = malloc(n);   /* volatile: the compiler keeps every write */
        for (size_t i = 0; i < n + 64; i++)   /* 64 bytes too far */
            scratch[i] = (char)0xff;
        char *more = malloc(n);
        free(more);
        free((void *)scratch);
    }
    return MPI_SUCCESS;
}
