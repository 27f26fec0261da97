/* The kit's own gather + broadcast allgather (c_reference/allgather/gather_bcast.c), made to
 * compile on its own and handed in under the name of the skeleton's function
 * (STUDENT_FUNCTION, replaced by tests/cheats.py). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define TAG_GATHER 0x1ab1
#define TAG_BCAST 0x1ab2

int STUDENT_FUNCTION(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p, nreq = 0;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(recvtype, &lb, &extent);
    char *recv = recvbuf;
    size_t block = (size_t)recvcount * extent;
    const void *mine = sendbuf == MPI_IN_PLACE ? recv + rank * block : sendbuf;
    int mcount = sendbuf == MPI_IN_PLACE ? recvcount : sendcount;
    MPI_Datatype mtype = sendbuf == MPI_IN_PLACE ? recvtype : sendtype;
    MPI_Request *req = malloc(sizeof(MPI_Request) * ((size_t)p + 1));
    if (rank == 0) {
        for (int i = 1; i < p; i++)
            MPI_Irecv(recv + i * block, recvcount, recvtype, i, TAG_GATHER, comm, &req[nreq++]);
        if (sendbuf != MPI_IN_PLACE)
            memcpy(recv, sendbuf, block);
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        nreq = 0;
        for (int i = 1; i < p; i++)
            MPI_Isend(recvbuf, p * recvcount, recvtype, i, TAG_BCAST, comm, &req[nreq++]);
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    } else {
        MPI_Send(mine, mcount, mtype, 0, TAG_GATHER, comm);
        MPI_Recv(recvbuf, p * recvcount, recvtype, 0, TAG_BCAST, comm, MPI_STATUS_IGNORE);
    }
    free(req);
    return MPI_SUCCESS;
}
