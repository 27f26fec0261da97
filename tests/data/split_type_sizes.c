/* Print, on rank 0, "nodes: <size of the node communicator of each rank, in rank order>" and
 * "leaders: <rank 0 of each rank's node communicator, as a world rank>", from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (test data of tests/test_rubric_lab3.py). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, p, mine[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &mine[0]);
    mine[1] = rank;
    MPI_Bcast(&mine[1], 1, MPI_INT, 0, node);
    int *all = malloc(sizeof(int) * 2 * (size_t)p);
    MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("nodes:");
        for (int r = 0; r < p; r++)
            printf(" %d", all[2 * r]);
        printf("\nleaders:");
        for (int r = 0; r < p; r++)
            printf(" %d", all[2 * r + 1]);
        printf("\n");
    }
    free(all);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
