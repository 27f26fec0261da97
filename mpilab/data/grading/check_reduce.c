/* Correctness harness for lab 3's reductions (grading only).
 *
 * Built by mpilab.grading with -DSTUDENT_FN=<function> -DKIND=<1|2|3> and linked with the
 * student's file:  KIND 1 = reduce-scatter (MPI_Reduce_scatter_block's signature),
 *                  KIND 2 = allreduce (MPI_Allreduce's),  KIND 3 = reduce (MPI_Reduce's).
 * Usage: check_reduce [--hidden]
 * Visible cases: MPI_SUM over MPI_INT, counts 1, 5, 64, 1000, MPI_COMM_WORLD.
 * Hidden cases add: MPI_DOUBLE (multiples of 1/4: every sum is exact), a prime count,
 * MPI_IN_PLACE, a sub-communicator (odd/even ranks, reversed order), and for reduce the roots
 * 0, p/2 and p-1. Every element of every result is compared with the exact sum, and the
 * send buffer must come back unchanged.
 * On the first wrong element rank 0 prints one FAIL line naming the case, the rank and the
 * index, and the program exits 1; when every case passes rank 0 prints PASS (under SMPI a
 * deadlock ends the simulation with status 0: a run without PASS has failed).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef STUDENT_FN
#error "compile with -DSTUDENT_FN=name -DKIND=1|2|3"
#endif

#if KIND == 1
int STUDENT_FN(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
               MPI_Op op, MPI_Comm comm);
#elif KIND == 2
int STUDENT_FN(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm);
#elif KIND == 3
int STUDENT_FN(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
#else
#error "KIND must be 1 (reduce-scatter), 2 (allreduce) or 3 (reduce)"
#endif

/* Element i of the input of `rank`: integers in -63..63 (as doubles: quarters), exact sums. */
static double value(int rank, long i, int is_double)
{
    double v = (double)((rank * 7919L + i * 31L) % 127) - 63;
    return is_double ? v / 4 : v;
}

static void put(MPI_Datatype t, void *buf, long i, double v)
{
    if (t == MPI_INT) ((int *)buf)[i] = (int)v;
    else ((double *)buf)[i] = v;
}

static double get(MPI_Datatype t, const void *buf, long i)
{
    return t == MPI_INT ? ((const int *)buf)[i] : ((const double *)buf)[i];
}

/* One case on comm; returns non-zero on every rank of MPI_COMM_WORLD if any rank failed. */
static int one_case(const char *name, MPI_Comm comm, MPI_Datatype t, int count, int in_place,
                    int root)
{
    int rank, size, wrank, is_double = t == MPI_DOUBLE, tsize;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Type_size(t, &tsize);
    long in_n = KIND == 1 ? (long)count * size : count;   /* elements of one rank's input */
    long out_n = count;                                    /* elements of its result */
    long first = KIND == 1 ? (long)rank * count : 0;       /* index of the result's element 0 */
    int has_result = KIND != 3 || rank == root;
    void *send = malloc((size_t)in_n * tsize + 1), *recv = malloc((size_t)in_n * tsize + 1);
    for (long i = 0; i < in_n; i++) {
        put(t, send, i, value(rank, i, is_double));
        put(t, recv, i, in_place ? value(rank, i, is_double) : -1000);
    }
    int use_in_place = in_place && (KIND != 3 || rank == root);
    const void *sbuf = use_in_place ? MPI_IN_PLACE : (in_place ? recv : send);
    int rc;
#if KIND == 3
    rc = STUDENT_FN(sbuf, recv, count, t, MPI_SUM, root, comm);
#else
    rc = STUDENT_FN(sbuf, recv, count, t, MPI_SUM, comm);
#endif
    long bad = -1;
    int bad_send = 0;
    double got = 0, want = 0;
    if (rc == MPI_SUCCESS && has_result) {
        for (long i = 0; i < out_n && bad < 0; i++) {
            double e = 0;
            for (int r = 0; r < size; r++)
                e += value(r, first + i, is_double);
            if (get(t, recv, i) != e) {
                bad = i;
                got = get(t, recv, i);
                want = e;
            }
        }
    }
    if (rc == MPI_SUCCESS && bad < 0 && !in_place)
        for (long i = 0; i < in_n && !bad_send; i++)
            if (get(t, send, i) != value(rank, i, is_double)) {
                bad_send = 1;
                bad = i;
            }
    /* rank 0 of MPI_COMM_WORLD reports the first failing rank of MPI_COMM_WORLD */
    double mine[5] = {rc != MPI_SUCCESS ? (double)rc : 0, (double)bad, got, want, bad_send};
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    double *all = wrank == 0 ? malloc(sizeof(double) * 5 * (size_t)wsize) : NULL;
    int *ranks = wrank == 0 ? malloc(sizeof(int) * (size_t)wsize) : NULL;
    MPI_Gather(mine, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int failed = 0;
    if (wrank == 0) {
        for (int w = 0; w < wsize && !failed; w++) {
            double *m = all + 5 * w;
            char where[200];
            char rootmsg[40] = "";
            if (KIND == 3)
                snprintf(rootmsg, sizeof rootmsg, ", root %d", root);
            snprintf(where, sizeof where, "FAIL %s, count=%d%s: rank %d", name, count, rootmsg,
                     ranks[w]);
            if (m[0] != 0) {
                char msg[MPI_MAX_ERROR_STRING] = "";
                int len;
                MPI_Error_string((int)m[0], msg, &len);
                printf("%s: the function returned error %d (%s) instead of MPI_SUCCESS\n", where,
                       (int)m[0], msg);
                failed = 1;
            } else if (m[4] != 0) {
                printf("%s: sendbuf[%.0f] was changed (the send buffer is read-only)\n", where, m[1]);
                failed = 1;
            } else if (m[1] >= 0) {
                if (KIND == 1)
                    printf("%s: recvbuf[%.0f] is %g, expected %g (the sum of element %.0f of block %d "
                           "over all ranks)\n", where, m[1], m[2], m[3], m[1], ranks[w]);
                else
                    printf("%s: recvbuf[%.0f] is %g, expected %g (the sum over all ranks)\n", where,
                           m[1], m[2], m[3]);
                failed = 1;
            }
        }
    }
    fflush(stdout);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    free(ranks);
    free(send);
    free(recv);
    return failed;
}

/* The cases of one communicator and datatype: every count, out of place then in place. */
static int cases(const char *name, MPI_Comm comm, MPI_Datatype t, const int *counts, int ncounts,
                 int in_place)
{
    int size, failed = 0;
    MPI_Comm_size(comm, &size);
    int roots[3] = {0, size / 2, size - 1};
    for (int c = 0; c < ncounts && !failed; c++)
        for (int k = 0; k < (KIND == 3 ? 3 : 1) && !failed; k++) {
            failed |= one_case(name, comm, t, counts[c], 0, roots[k]);
            if (in_place && !failed) {
                char ip[120];
                snprintf(ip, sizeof ip, "%s, MPI_IN_PLACE", name);
                failed |= one_case(ip, comm, t, counts[c], 1, roots[k]);
            }
        }
    return failed;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int hidden = argc > 1 && strcmp(argv[1], "--hidden") == 0;
    int rank, failed = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    static const int visible[] = {1, 5, 64, 1000};
    failed = cases("int", world, MPI_INT, visible, 4, 0);
    if (hidden && !failed) {
        static const int more[] = {1, 7, 1000, 4099};
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
        MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
        failed = cases("double", world, MPI_DOUBLE, more, 4, 1);
        if (!failed)
            failed = cases("int", world, MPI_INT, more, 4, 1);
        if (!failed)
            failed = cases("double on a sub-communicator (odd/even ranks, reversed)", half, MPI_DOUBLE,
                           more, 4, 1);
        MPI_Comm_free(&half);
    }
    MPI_Comm_free(&world);
    if (rank == 0 && !failed)
        printf("PASS\n");
    fflush(stdout);
    MPI_Finalize();
    return failed ? 1 : 0;
}
