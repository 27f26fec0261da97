/* Pipelined chain broadcast (lab 6 solution): the chain of chain.c, the buffer cut into
 * segments of segsize bytes (whole elements, at least one; segsize <= 0: one segment).
 * A middle rank posts the receive of segment i+1 before it forwards segment i, so it receives
 * and sends at the same time. Cost: (p - 2 + k)·(α + (n/k)·β), k = ceil(n/s) segments. */
#include <mpi.h>

int student_bcast_pipeline(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                           int segsize)
{
    int rank, p, tsize;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_size(datatype, &tsize);
    MPI_Type_get_extent(datatype, &lb, &extent);
    if (p == 1 || count == 0)
        return MPI_SUCCESS;
    int seg = segsize <= 0 || tsize == 0 ? count : segsize / tsize;
    if (seg < 1) seg = 1;
    if (seg > count) seg = count;
    int nseg = (count + seg - 1) / seg;
    int v = (rank - root + p) % p, prev = (rank - 1 + p) % p, next = (rank + 1) % p;
    char *buf = buffer;
#define SEG_COUNT(i) ((i) == nseg - 1 ? count - (i) * seg : seg)
#define SEG_AT(i) (buf + (MPI_Aint)(i) * seg * extent)
    if (v == 0) {
        for (int i = 0; i < nseg; i++)
            MPI_Send(SEG_AT(i), SEG_COUNT(i), datatype, next, 0, comm);
        return MPI_SUCCESS;
    }
    MPI_Request req;
    MPI_Irecv(SEG_AT(0), SEG_COUNT(0), datatype, prev, 0, comm, &req);
    for (int i = 0; i < nseg; i++) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (i + 1 < nseg)
            MPI_Irecv(SEG_AT(i + 1), SEG_COUNT(i + 1), datatype, prev, 0, comm, &req);
        if (v < p - 1)
            MPI_Send(SEG_AT(i), SEG_COUNT(i), datatype, next, 0, comm);
    }
    return MPI_SUCCESS;
}
