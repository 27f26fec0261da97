/* broken_allgather.c — deliberately broken allgathers for collbench's failure tests
 * (see broken_allgather.h). Not in liblabcoll; never shipped. */
#include "broken_allgather.h"

int lab_allgather_test_wrong_data(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                  MPI_Comm comm)
{
    int rank, size, tsize;
    int rc = lab_allgather_pairwise(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Type_size(recvtype, &tsize);
    if (rank == size - 1 && (long)recvcount * size > 3)
        ((signed char *)recvbuf)[3 * tsize] = 42;   /* no pattern value is 42 */
    return MPI_SUCCESS;
}

int lab_allgather_test_fail_late(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                 MPI_Comm comm)
{
    static int calls = 0;
    int rank;
    int rc = lab_allgather_pairwise(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    MPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS && rank == 1 && ++calls >= 5)
        return MPI_ERR_OTHER;
    return rc;
}
