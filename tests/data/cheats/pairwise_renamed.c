/* The kit's own pairwise allgather (c_reference/allgather/pairwise.c: recursive doubling, the
 * extra ranks folded in and out), made to compile on its own and handed in under the name of
 * the skeleton's function (STUDENT_FUNCTION, replaced by tests/cheats.py): a right result by
 * an algorithm the student did not write, and not the one asked for. */
#include <mpi.h>
#include <string.h>

#define TAG_ALLGATHER 0x1ab0
#define TAG_FOLD 0x1ab3

static char *block_at(void *buf, int i, int count, MPI_Aint extent)
{
    return (char *)buf + (MPI_Aint)i * count * extent;
}

int STUDENT_FUNCTION(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, p;
    MPI_Aint lb, extent;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    MPI_Type_get_extent(recvtype, &lb, &extent);
    const void *mine = sendbuf;
    int mcount = sendcount;
    MPI_Datatype mtype = sendtype;
    if (sendbuf == MPI_IN_PLACE) {
        mine = block_at(recvbuf, rank, recvcount, extent);
        mcount = recvcount;
        mtype = recvtype;
    } else {
        memcpy(block_at(recvbuf, rank, recvcount, extent), sendbuf, (size_t)recvcount * extent);
    }
    int q = 1;
    while (q * 2 <= p)
        q *= 2;
    int e = p - q;
    if (rank >= q) {
        MPI_Send(mine, mcount, mtype, rank - q, TAG_FOLD, comm);
        MPI_Recv(recvbuf, p * recvcount, recvtype, rank - q, TAG_FOLD, comm, MPI_STATUS_IGNORE);
        return MPI_SUCCESS;
    }
    if (rank < e)
        MPI_Recv(block_at(recvbuf, q + rank, recvcount, extent), recvcount, recvtype, q + rank,
                 TAG_FOLD, comm, MPI_STATUS_IGNORE);
    for (int dist = 1; dist < q; dist *= 2) {
        int partner = rank ^ dist;
        int mybase = rank & ~(dist - 1), pbase = partner & ~(dist - 1);
        MPI_Sendrecv(block_at(recvbuf, mybase, recvcount, extent), dist * recvcount, recvtype,
                     partner, TAG_ALLGATHER, block_at(recvbuf, pbase, recvcount, extent),
                     dist * recvcount, recvtype, partner, TAG_ALLGATHER, comm, MPI_STATUS_IGNORE);
        if (e > 0) {
            int mycnt = mybase < e ? (mybase + dist < e ? mybase + dist : e) - mybase : 0;
            int pcnt = pbase < e ? (pbase + dist < e ? pbase + dist : e) - pbase : 0;
            MPI_Sendrecv(block_at(recvbuf, q + mybase, recvcount, extent), mycnt * recvcount,
                         recvtype, partner, TAG_ALLGATHER,
                         block_at(recvbuf, q + pbase, recvcount, extent), pcnt * recvcount,
                         recvtype, partner, TAG_ALLGATHER, comm, MPI_STATUS_IGNORE);
        }
    }
    if (rank < e)
        MPI_Send(recvbuf, p * recvcount, recvtype, q + rank, TAG_FOLD, comm);
    return MPI_SUCCESS;
}
