/* Diagnosis harness: one traced call of an allgather (built and run by mpilab.grade.diagnose
 * under SMPI, linked with the labtrace PMPI library, c_reference/trace/labtrace.c).
 *
 * Built with -DSTUDENT_FN=<function name> and the file that defines it: the student's file, or
 * (in a build of its own, without any student code) the answer key's reference, whose trace is
 * what the student's is compared with.
 *
 *   trace_student --count C
 *
 * Each rank's block is C ints; element i of rank r's block is the word (r + 1) * 2^20 + i, so
 * a probed message (LABTRACE_PROBE = 4 C) names the blocks it carries. Region 1 of the trace
 * is the call. Rank 0 prints
 *
 *   TIME <us>                               the call's time (slowest rank), simulated
 *   WRONG <rank> <block> <element> <value>  the first wrong element of each rank
 *   RETURNED <rank> <code>                  a rank's function returned something else than MPI_SUCCESS
 *   DONE                                    the call returned on every rank
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef STUDENT_FN
#error "compile with -DSTUDENT_FN=name"
#endif

int STUDENT_FN(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

#define OWNER_UNIT (1 << 20)

static int word(int owner, int i) { return (owner + 1) * OWNER_UNIT + i; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Pcontrol(0);
    int rank, size, count = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--count") == 0) count = atoi(argv[i + 1]);
    if (count < 1 || count >= OWNER_UNIT) {
        if (rank == 0) fprintf(stderr, "trace_student: bad --count; valid: 1..%d\n", OWNER_UNIT - 1);
        MPI_Finalize();
        return 2;
    }
    int *send = malloc(sizeof(int) * (size_t)count + 1);
    int *recv = malloc(sizeof(int) * (size_t)count * size + 1);
    for (int i = 0; i < count; i++) send[i] = word(rank, i);
    for (int i = 0; i < count * size; i++) recv[i] = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(1);
    double t = MPI_Wtime();
    int rc = STUDENT_FN(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    MPI_Pcontrol(0);
    double tmax = 0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int bad[4] = {-1, -1, -1, rc}, *all = rank == 0 ? malloc(sizeof bad * (size_t)size) : NULL;
    for (int i = 0; i < count * size; i++)
        if (recv[i] != word(i / count, i % count)) {
            bad[0] = i / count;
            bad[1] = i % count;
            bad[2] = recv[i];
            break;
        }
    MPI_Gather(bad, 4, MPI_INT, all, 4, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < size; r++) {
        if (all[4 * r] >= 0)
            printf("WRONG %d %d %d %d\n", r, all[4 * r], all[4 * r + 1], all[4 * r + 2]);
        if (all[4 * r + 3] != MPI_SUCCESS)
            printf("RETURNED %d %d\n", r, all[4 * r + 3]);
    }
    if (rank == 0) printf("TIME %.3f\nDONE\n", tmax * 1e6);
    free(all);
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
