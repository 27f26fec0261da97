/* A two-level allreduce that deadlocks (grading test data): the node's ranks all wait for the
 * leader's result before sending their own contribution, and the leader waits for theirs. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int student_allreduce_two_level(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    MPI_Comm node;
    int rank, node_rank, node_size, tsize;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_size(node, &node_size);
    MPI_Type_size(datatype, &tsize);
    if (sendbuf != MPI_IN_PLACE)
        memcpy(recvbuf, sendbuf, (size_t)count * tsize);
    void *tmp = malloc((size_t)count * tsize + 1);
    if (node_rank == 0) {
        for (int r = 1; r < node_size; r++) {
            MPI_Recv(tmp, count, datatype, r, 0, node, MPI_STATUS_IGNORE);
            MPI_Reduce_local(tmp, recvbuf, count, datatype, op);
        }
        for (int r = 1; r < node_size; r++)
            MPI_Send(recvbuf, count, datatype, r, 1, node);
    } else {
        MPI_Recv(recvbuf, count, datatype, 0, 1, node, MPI_STATUS_IGNORE);   /* too early */
        MPI_Send(recvbuf, count, datatype, 0, 0, node);
    }
    free(tmp);
    MPI_Comm_free(&node);
    return MPI_SUCCESS;
}
