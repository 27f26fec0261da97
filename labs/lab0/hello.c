/* Lab 0: hello from every rank.
 *
 * Every rank prints exactly one line:
 *
 *     hello from rank R of P on HOST
 *
 * where R is its rank in MPI_COMM_WORLD, P the number of ranks, and HOST the name
 * MPI_Get_processor_name gives (on this machine its host name; under SMPI the simulated
 * core the rank was placed on, e.g. thin01-s0-c00).
 *
 * Fill in the three TODOs. The notebook compiles this file for Open MPI and for SMPI. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1, len = 0;
    char host[MPI_MAX_PROCESSOR_NAME] = "?";

    MPI_Init(&argc, &argv);

    /* TODO 1: set rank to this process's rank in MPI_COMM_WORLD (MPI_Comm_rank) */

    /* TODO 2: set size to the number of processes in MPI_COMM_WORLD (MPI_Comm_size) */

    /* TODO 3: put this process's processor name in host (MPI_Get_processor_name) */

    (void)len;
    printf("hello from rank %d of %d on %s\n", rank, size, host);
    MPI_Finalize();
    return 0;
}
