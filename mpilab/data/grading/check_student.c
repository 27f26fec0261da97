/* Correctness harness for a student's allgather (grading only).
 *
 * Built by mpilab.grading with -DSTUDENT_FN=<function name>, linked with the student's file.
 * Usage: check_student [--hidden]
 * Visible cases: MPI_INT, doubling counts, MPI_COMM_WORLD.
 * Hidden cases add: MPI_CHAR and MPI_DOUBLE, MPI_IN_PLACE, a sub-communicator (odd/even ranks).
 * check_student --time NAME [ITERS WARMUP] prints CSV rows "algorithm,nprocs,bytes,avg_us" timing
 * the student's function (as NAME) and MPI_Allgather (as native), int data, 4 to 16384 bytes per
 * rank (default 20 timed iterations after 5 warm-up ones; under SMPI, whose time is simulated and
 * repeats exactly, 2 after 1 are enough). Built with -DWITH_REFERENCE (and linked with
 * c_reference's liblabcoll.a), check_student --time-reference [ITERS WARMUP] times the kit's
 * gather_bcast and pairwise the same way.
 * On the first wrong element it prints one FAIL line naming case, rank and index, exit 1.
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

static double value(int rank, int i) { return (double)((rank * 7919 + i * 31) % 127); }

static void put(MPI_Datatype t, void *buf, int i, double v) {
    if (t == MPI_CHAR) ((char *)buf)[i] = (char)v;
    else if (t == MPI_INT) ((int *)buf)[i] = (int)v;
    else ((double *)buf)[i] = v;
}

static double get(MPI_Datatype t, const void *buf, int i) {
    if (t == MPI_CHAR) return ((const char *)buf)[i];
    if (t == MPI_INT) return ((const int *)buf)[i];
    return ((const double *)buf)[i];
}

static int one_case(const char *name, MPI_Comm comm, MPI_Datatype t, int count, int in_place) {
    int rank, size, tsize, wrank;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Type_size(t, &tsize);
    void *send = malloc((size_t)count * tsize + 1);
    void *recv = malloc((size_t)count * size * tsize + 1);
    for (int i = 0; i < count * size; i++) put(t, recv, i, -1);
    for (int i = 0; i < count; i++) put(t, in_place ? (char *)recv + (size_t)rank * count * tsize : send, i, value(rank, i));
    int rc = STUDENT_FN(in_place ? MPI_IN_PLACE : send, count, t, recv, count, t, comm);
    int bad = -1;
    if (rc != MPI_SUCCESS) bad = -2;
    for (int i = 0; bad == -1 && i < count * size; i++)
        if (get(t, recv, i) != value(i / count, i % count)) bad = i;
    int any = bad != -1, global_any;
    MPI_Allreduce(&any, &global_any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (bad == -2)
        printf("FAIL %s count=%d p=%d: rank %d: the function returned %d instead of MPI_SUCCESS\n", name, count, size, rank, rc);
    else if (bad >= 0)
        printf("FAIL %s count=%d p=%d: rank %d: recvbuf[%d] (block of rank %d) is %g, expected %g\n",
               name, count, size, rank, bad, bad / count, get(t, recv, bad), value(bad / count, bad % count));
    fflush(stdout);
    free(send);
    free(recv);
    return global_any;
}

typedef int (*allgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);

#ifdef WITH_REFERENCE
#include "labcoll.h"
#endif

/* avg_us = max over ranks of each rank's average over `iters` timed calls (after `warmup`). */
static void time_one(const char *name, allgather_fn fn, int iters, int warmup, int *send, int *recv) {
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

static void time_all(const char *name, int reference, int iters, int warmup) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *send = calloc(4096, sizeof(int)), *recv = calloc((size_t)4096 * size, sizeof(int));
    if (rank == 0) printf("algorithm,nprocs,bytes,avg_us\n");
    if (!reference) {
        time_one(name, STUDENT_FN, iters, warmup, send, recv);
        time_one("native", MPI_Allgather, iters, warmup, send, recv);
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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int timing = argc > 2 && strcmp(argv[1], "--time") == 0;
    int reference = argc > 1 && strcmp(argv[1], "--time-reference") == 0;
    if (timing || reference) {
        int first = timing ? 3 : 2;   /* optional ITERS WARMUP after the mode's arguments */
        int iters = argc > first ? atoi(argv[first]) : 20, warmup = argc > first + 1 ? atoi(argv[first + 1]) : 5;
        if (iters < 1) iters = 1;
        if (warmup < 0) warmup = 0;
        time_all(timing ? argv[2] : "", reference, iters, warmup);
        MPI_Finalize();
        return 0;
    }
    int hidden = argc > 1 && strcmp(argv[1], "--hidden") == 0;
    int rank, failed = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int count = 1; count <= 1024 && !failed; count *= 4)
        failed |= one_case("int", MPI_COMM_WORLD, MPI_INT, count, 0);
    if (hidden && !failed) {
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
        for (int count = 1; count <= 1024 && !failed; count *= 8) {
            failed |= one_case("char", MPI_COMM_WORLD, MPI_CHAR, count, 0);
            if (!failed) failed |= one_case("double", MPI_COMM_WORLD, MPI_DOUBLE, count, 0);
            if (!failed) failed |= one_case("in-place int", MPI_COMM_WORLD, MPI_INT, count, 1);
            if (!failed) failed |= one_case("sub-communicator (odd/even ranks, reversed) int", half, MPI_INT, count, 0);
        }
        MPI_Comm_free(&half);
    }
    if (rank == 0 && !failed) printf("PASS\n");
    MPI_Finalize();
    return failed ? 1 : 0;
}
