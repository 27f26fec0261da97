/* Correctness harness for a student's allgather (built and run by mpilab.grade.ccode).
 *
 * Built with -DSTUDENT_FN=<function name> and linked with the student's file.
 *
 *   check_student [--kinds K,K,...] [--case-timeout S]
 *       runs the cases of each kind and prints one line per case, as it goes:
 *           CASE <kind> count=<n>\tPASS
 *           CASE <kind> count=<n>\tFAIL\t<what is wrong, naming the rank and the block>
 *       Kinds: int (counts 1..1024), char, double, in-place (MPI_IN_PLACE, int), sub-communicator
 *       (odd and even ranks, reversed order, int). A wrong result does not stop the run; a
 *       crash or a hang does. With --case-timeout, a case still running after S seconds prints
 *           CASE <kind> count=<n>\tTIMEOUT
 *       and the program exits with status 3 (a deadlock: the other cases are not run).
 *       Each rank's data comes from its private seed, and each CASE line ends in its seal
 *       (sealed.h): the grader writes the files those need, and reads no unsealed line.
 *   check_student --time NAME [ITERS WARMUP]
 *       prints CSV rows "algorithm,nprocs,bytes,maxrank_avg_us" timing the student's function (as NAME)
 *       and MPI_Allgather (as native), int data, 4 to 16384 bytes per rank (default 20 timed
 *       iterations after 5 warm-up ones). maxrank_avg_us is the slowest rank's average.
 *   check_student --time-alone NAME [ITERS WARMUP]
 *       the same without MPI_Allgather (SMPI's times repeat exactly: one native curve is enough).
 *   check_student --time-reference [ITERS WARMUP]   (built with -DWITH_REFERENCE)
 *       times the kit's gather_bcast and pairwise the same way.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sealed.h"

#ifndef STUDENT_FN
#error "compile with -DSTUDENT_FN=name"
#endif

int STUDENT_FN(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/* Case seq's element i of the rank whose seed is `seed` (sealed.h): private to that rank until
 * the student's function sends it. 0..126, so it fits every kind's type. */
static long seq;
static double value(uint64_t seed, int i) { return sealed_value(seed, seq, i, 127); }

static void put(MPI_Datatype t, void *buf, int i, double v)
{
    if (t == MPI_CHAR) ((char *)buf)[i] = (char)v;
    else if (t == MPI_INT) ((int *)buf)[i] = (int)v;
    else ((double *)buf)[i] = v;
}

static double get(MPI_Datatype t, const void *buf, int i)
{
    if (t == MPI_CHAR) return ((const char *)buf)[i];
    if (t == MPI_INT) return ((const int *)buf)[i];
    return ((const double *)buf)[i];
}

/* The case running now, for the time-out line, and this process's rank in MPI_COMM_WORLD. */
static char current[96];
static int world_rank;

/* Every rank of a hung case times out (rank 0 waits in the check's MPI_Allreduce); rank 0 says so. */
static void on_alarm(int sig)
{
    (void)sig;
    if (world_rank != 0) _exit(3);
    sealed_timeout(current);
}

/* One case on comm: every rank checks every element; rank 0 of MPI_COMM_WORLD prints one line. */
static void one_case(const char *kind, MPI_Comm comm, MPI_Datatype t, int count, int in_place,
                     int case_timeout)
{
    int rank, size, tsize, wrank;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Type_size(t, &tsize);
    snprintf(current, sizeof current, "%s count=%d", kind, count);
    seq++;
    void *send = malloc((size_t)count * tsize + 1);
    void *recv = malloc((size_t)count * size * tsize + 1);
    for (int i = 0; i < count * size; i++) put(t, recv, i, -1);
    for (int i = 0; i < count; i++)
        put(t, in_place ? (char *)recv + (size_t)rank * count * tsize : send, i, value(sealed_seed, i));
    if (case_timeout > 0) alarm((unsigned)case_timeout);
    int rc = STUDENT_FN(in_place ? MPI_IN_PLACE : send, count, t, recv, count, t, comm);
    /* a message so every rank learns of the first rank that failed, with the world rank */
    char msg[256] = "";
    uint64_t *seeds = malloc((size_t)size * sizeof *seeds);
    sealed_seeds(comm, seeds);   /* the expected data, now that the call is over */
    if (rc != MPI_SUCCESS) {
        snprintf(msg, sizeof msg, "rank %d: the function returned %d instead of MPI_SUCCESS", rank, rc);
    } else {
        for (int i = 0; i < count * size; i++) {
            double want = value(seeds[i / count], i % count);
            if (get(t, recv, i) != want) {
                snprintf(msg, sizeof msg, "rank %d: block %d (rank %d's data), element %d is %g, expected %g",
                         rank, i / count, i / count, i % count, get(t, recv, i), want);
                break;
            }
        }
    }
    /* the lowest world rank that failed reports */
    int mine = msg[0] ? wrank : 1 << 30, first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (case_timeout > 0) alarm(0);
    if (first != 1 << 30 && first != 0) {
        if (wrank == first) MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 99, MPI_COMM_WORLD);
        if (wrank == 0) MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, first, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (wrank == 0)   /* its own message, the reporting rank's, or none: PASS */
        sealed_case(current, msg);
    free(seeds);
    free(send);
    free(recv);
}

typedef int (*allgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);

#ifdef WITH_REFERENCE
#include "labcoll.h"
#endif

/* maxrank_avg_us = max over ranks of each rank's average over `iters` timed calls (after `warmup`). */
static void time_one(const char *name, allgather_fn fn, int iters, int warmup, int *send, int *recv)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int count = 1; count <= 4096; count *= 4) {
        double total = 0;
        for (int it = 0; it < warmup + iters; it++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            fn(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD);
            if (it >= warmup) total += MPI_Wtime() - t;
        }
        double avg = total / iters * 1e6, max;
        MPI_Reduce(&avg, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("%s,%d,%d,%.3f\n", name, size, count * 4, max);
    }
}

static void time_all(const char *name, int reference, int native, int iters, int warmup)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *send = calloc(4096, sizeof(int)), *recv = calloc((size_t)4096 * size, sizeof(int));
    if (rank == 0) printf("algorithm,nprocs,bytes,maxrank_avg_us\n");
    if (!reference) {
        time_one(name, STUDENT_FN, iters, warmup, send, recv);
        if (native) time_one("native", MPI_Allgather, iters, warmup, send, recv);
    }
#ifdef WITH_REFERENCE
    else {
        time_one("gather_bcast", lab_allgather_gather_bcast, iters, warmup, send, recv);
        time_one("pairwise", lab_allgather_pairwise, iters, warmup, send, recv);
    }
#endif
    free(send);
    free(recv);
}

static int wanted(const char *kinds, const char *kind)
{
    if (!kinds) return 1;
    size_t n = strlen(kind);
    for (const char *p = kinds; (p = strstr(p, kind)) != NULL; p += n)
        if ((p == kinds || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int alone = argc > 2 && strcmp(argv[1], "--time-alone") == 0;
    int timing = alone || (argc > 2 && strcmp(argv[1], "--time") == 0);
    int reference = argc > 1 && strcmp(argv[1], "--time-reference") == 0;
    if (timing || reference) {
        int first = timing ? 3 : 2;   /* optional ITERS WARMUP after the mode's arguments */
        int iters = argc > first ? atoi(argv[first]) : 20, warmup = argc > first + 1 ? atoi(argv[first + 1]) : 5;
        if (iters < 1) iters = 1;
        if (warmup < 0) warmup = 0;
        time_all(timing ? argv[2] : "", reference, !alone, iters, warmup);
        MPI_Finalize();
        return 0;
    }
    const char *kinds = NULL;
    int case_timeout = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kinds") == 0) kinds = argv[i + 1];
        else if (strcmp(argv[i], "--case-timeout") == 0) case_timeout = atoi(argv[i + 1]);
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    world_rank = rank;
    sealed_init();
    if (case_timeout > 0) signal(SIGALRM, on_alarm);
    if (wanted(kinds, "int"))
        for (int count = 1; count <= 1024; count *= 4)
            one_case("int", MPI_COMM_WORLD, MPI_INT, count, 0, case_timeout);
    if (wanted(kinds, "char"))
        for (int count = 1; count <= 1024; count *= 8)
            one_case("char", MPI_COMM_WORLD, MPI_CHAR, count, 0, case_timeout);
    if (wanted(kinds, "double"))
        for (int count = 1; count <= 1024; count *= 8)
            one_case("double", MPI_COMM_WORLD, MPI_DOUBLE, count, 0, case_timeout);
    if (wanted(kinds, "in-place"))
        for (int count = 1; count <= 1024; count *= 8)
            one_case("in-place", MPI_COMM_WORLD, MPI_INT, count, 1, case_timeout);
    if (wanted(kinds, "sub-communicator")) {
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
        for (int count = 1; count <= 1024; count *= 8)
            one_case("sub-communicator", half, MPI_INT, count, 0, case_timeout);
        MPI_Comm_free(&half);
    }
    MPI_Finalize();
    return 0;
}
