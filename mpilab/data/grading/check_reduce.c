/* Correctness harness for lab 3's reductions (built and run by mpilab.grade.checks.reductions).
 *
 * Built with -DSTUDENT_FN=<function> -DKIND=<1|2|3> and linked with the student's file:
 *   KIND 1 = reduce-scatter (MPI_Reduce_scatter_block's signature),
 *   KIND 2 = allreduce (MPI_Allreduce's),  KIND 3 = reduce (MPI_Reduce's).
 *
 *   check_reduce [--kinds K,K,...] [--case-timeout S]
 *       runs the cases of each kind and prints one line per case, as it goes:
 *           CASE <kind> count=<n>[, root <r>]\tPASS
 *           CASE <kind> count=<n>[, root <r>]\tFAIL\t<what is wrong, naming the rank and the element>
 *       With --case-timeout, a case still running after S seconds prints
 *           CASE <kind> count=<n>\tTIMEOUT
 *       and the program exits with status 3 (a deadlock: the other cases are not run).
 *       A wrong result does not stop the run; a crash or a hang does. Each rank's input comes
 *       from its private seed, and each CASE line ends in its seal (sealed.h): the grader writes
 *       the files those need, and reads no unsealed line.
 *
 * Kinds, MPI_SUM always; every element of every result is compared with the exact sum, and a
 * send buffer must come back unchanged:
 *   int               MPI_INT, counts 1, 5, 64, 1000, on a duplicate of MPI_COMM_WORLD
 *   double            MPI_DOUBLE (quarters: every sum is exact), counts 1, 8, 1000
 *   prime-count       MPI_INT, counts 13 and 4099 (an allreduce's blocks differ in size)
 *   in-place          MPI_IN_PLACE (at the root only for a reduce), MPI_INT, counts 1, 5, 1000
 *   sub-communicator  odd and even ranks apart, in reversed order, MPI_INT, counts 1, 7, 1000
 *   root              reduce only: roots p/2 and p-1, counts 1 and 1000, then in place at p-1
 * Every other kind of a reduce has root 0. The student's function gets communicators whose
 * error handler returns errors (MPI_ERRORS_RETURN), so a returned error is reported as such.
 *
 * Built with -DOWN_MESSAGES (the reduce-scatter and Rabenseifner's allreduce, which the lab asks
 * to build from point-to-point messages), a case also fails when the student's function calls
 * one of the library's collectives (MPI_Allreduce, MPI_Reduce_scatter_block, ...): this file
 * defines them, notes the call, and passes it on to the library through PMPI.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sealed.h"

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

#ifdef OWN_MESSAGES
/* Non-zero while the student's function runs; the first library collective it called. */
static int in_student;
static const char *library_call;
#define NOTE(name) do { if (in_student && !library_call) library_call = name; } while (0)

int MPI_Allreduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ NOTE("MPI_Allreduce"); return PMPI_Allreduce(s, r, c, t, o, comm); }
int MPI_Reduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm comm)
{ NOTE("MPI_Reduce"); return PMPI_Reduce(s, r, c, t, o, root, comm); }
int MPI_Reduce_scatter(const void *s, void *r, const int *rc, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ NOTE("MPI_Reduce_scatter"); return PMPI_Reduce_scatter(s, r, rc, t, o, comm); }
int MPI_Reduce_scatter_block(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ NOTE("MPI_Reduce_scatter_block"); return PMPI_Reduce_scatter_block(s, r, c, t, o, comm); }
int MPI_Scan(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ NOTE("MPI_Scan"); return PMPI_Scan(s, r, c, t, o, comm); }
int MPI_Exscan(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ NOTE("MPI_Exscan"); return PMPI_Exscan(s, r, c, t, o, comm); }
int MPI_Bcast(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm)
{ NOTE("MPI_Bcast"); return PMPI_Bcast(b, c, t, root, comm); }
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm)
{ NOTE("MPI_Allgather"); return PMPI_Allgather(s, sc, st, r, rc, rt, comm); }
int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *d,
                   MPI_Datatype rt, MPI_Comm comm)
{ NOTE("MPI_Allgatherv"); return PMPI_Allgatherv(s, sc, st, r, rc, d, rt, comm); }
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{ NOTE("MPI_Gather"); return PMPI_Gather(s, sc, st, r, rc, rt, root, comm); }
int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{ NOTE("MPI_Scatter"); return PMPI_Scatter(s, sc, st, r, rc, rt, root, comm); }
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm)
{ NOTE("MPI_Alltoall"); return PMPI_Alltoall(s, sc, st, r, rc, rt, comm); }
int MPI_Iallreduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm, MPI_Request *q)
{ NOTE("MPI_Iallreduce"); return PMPI_Iallreduce(s, r, c, t, o, comm, q); }
int MPI_Ireduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm comm,
                MPI_Request *q)
{ NOTE("MPI_Ireduce"); return PMPI_Ireduce(s, r, c, t, o, root, comm, q); }
int MPI_Ireduce_scatter_block(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm,
                              MPI_Request *q)
{ NOTE("MPI_Ireduce_scatter_block"); return PMPI_Ireduce_scatter_block(s, r, c, t, o, comm, q); }
int MPI_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm,
                   MPI_Request *q)
{ NOTE("MPI_Iallgather"); return PMPI_Iallgather(s, sc, st, r, rc, rt, comm, q); }
int MPI_Ibcast(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *q)
{ NOTE("MPI_Ibcast"); return PMPI_Ibcast(b, c, t, root, comm, q); }
#endif

/* Stands in recvbuf before the call: no sum of the inputs below comes near it. */
#define UNTOUCHED 1048577.0

/* Element i of case seq's input of the rank whose seed is `seed` (sealed.h; private to that rank
 * until the function sends it): integers in -63..63 (as doubles: quarters), so sums are exact. */
static long seq;
static double value(uint64_t seed, long i, int is_double)
{
    double v = sealed_value(seed, seq, i, 127) - 63;
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

/* The case running now, for the time-out line, and this process's rank in MPI_COMM_WORLD. */
static char current[96];
static int world_rank;

/* Every rank of a hung case times out (rank 0 may wait in the check's MPI_Allreduce); rank 0 says so. */
static void on_alarm(int sig)
{
    (void)sig;
    if (world_rank != 0) _exit(3);
    sealed_timeout(current);
}

/* One case on comm: every rank checks its result; rank 0 of MPI_COMM_WORLD prints one line. */
static void one_case(const char *kind, MPI_Comm comm, MPI_Datatype t, int count, int in_place,
                     int root, int case_timeout)
{
    int rank, size, wrank, is_double = t == MPI_DOUBLE, tsize;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Type_size(t, &tsize);
    if (KIND == 3)
        snprintf(current, sizeof current, "%s count=%d, root %d", kind, count, root);
    else
        snprintf(current, sizeof current, "%s count=%d", kind, count);
    seq++;
    long in_n = KIND == 1 ? (long)count * size : count;   /* elements of one rank's input */
    long first = KIND == 1 ? (long)rank * count : 0;       /* input index of the result's element 0 */
    int has_result = KIND != 3 || rank == root;
    int use_in_place = in_place && (KIND != 3 || rank == root);
    void *send = malloc((size_t)in_n * tsize + 1), *recv = malloc((size_t)in_n * tsize + 1);
    for (long i = 0; i < in_n; i++) {
        put(t, send, i, value(sealed_seed, i, is_double));
        put(t, recv, i, use_in_place ? value(sealed_seed, i, is_double) : UNTOUCHED);
    }
    if (case_timeout > 0) alarm((unsigned)case_timeout);
    const void *sbuf = use_in_place ? MPI_IN_PLACE : send;
#ifdef OWN_MESSAGES
    library_call = NULL;
    in_student = 1;
#endif
#if KIND == 3
    int rc = STUDENT_FN(sbuf, recv, count, t, MPI_SUM, root, comm);
#else
    int rc = STUDENT_FN(sbuf, recv, count, t, MPI_SUM, comm);
#endif
#ifdef OWN_MESSAGES
    in_student = 0;
#endif
    char msg[512] = "", who[64];
    uint64_t *seeds = malloc((size_t)size * sizeof *seeds);
    sealed_seeds(comm, seeds);   /* the inputs of every rank, now that the call is over */
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (size == wsize)
        snprintf(who, sizeof who, "rank %d", rank);
    else
        snprintf(who, sizeof who, "rank %d (world rank %d)", rank, wrank);
#ifdef OWN_MESSAGES
    if (library_call)
        snprintf(msg, sizeof msg, "%s: the function calls %s; build it from point-to-point messages "
                 "(MPI_Sendrecv, MPI_Send/MPI_Recv) and MPI_Reduce_local, as the lab asks", who, library_call);
#endif
    if (!msg[0] && rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, text, &len);
        snprintf(msg, sizeof msg, "%s: the function returned error %d (%s) instead of MPI_SUCCESS",
                 who, rc, text);
    }
    for (long i = 0; !msg[0] && has_result && i < count; i++) {
        double want = 0;
        for (int r = 0; r < size; r++)
            want += value(seeds[r], first + i, is_double);
        double got = get(t, recv, i);
        if (got == want)
            continue;
        const char *untouched = got == UNTOUCHED ? " (never written)" : "";
        if (KIND == 1)
            snprintf(msg, sizeof msg, "%s: recvbuf[%ld] is %.10g%s, expected %.10g (element %ld of block %d, "
                     "summed over all ranks)", who, i, got, untouched, want, i, rank);
        else
            snprintf(msg, sizeof msg, "%s: recvbuf[%ld] is %.10g%s, expected %.10g (the sum over all ranks)",
                     who, i, got, untouched, want);
    }
    for (long i = 0; !msg[0] && !use_in_place && i < in_n; i++)
        if (get(t, send, i) != value(sealed_seed, i, is_double))
            snprintf(msg, sizeof msg, "%s: sendbuf[%ld] was changed (the send buffer is read-only)", who, i);
    /* the lowest world rank that failed reports to rank 0 */
    int mine = msg[0] ? wrank : 1 << 30, lowest;
    MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (case_timeout > 0) alarm(0);
    if (lowest != 1 << 30 && lowest != 0) {
        if (wrank == lowest) MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 99, MPI_COMM_WORLD);
        if (wrank == 0) MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, lowest, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (wrank == 0)   /* its own message, the reporting rank's, or none: PASS */
        sealed_case(current, msg);
    free(seeds);
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
    const char *kinds = NULL;
    int case_timeout = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kinds") == 0) kinds = argv[i + 1];
        else if (strcmp(argv[i], "--case-timeout") == 0) case_timeout = atoi(argv[i + 1]);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    world_rank = rank;
    sealed_init();
    if (case_timeout > 0) signal(SIGALRM, on_alarm);
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    if (wanted(kinds, "int")) {
        static const int counts[] = {1, 5, 64, 1000};
        for (int c = 0; c < 4; c++)
            one_case("int", world, MPI_INT, counts[c], 0, 0, case_timeout);
    }
    if (wanted(kinds, "double")) {
        static const int counts[] = {1, 8, 1000};
        for (int c = 0; c < 3; c++)
            one_case("double", world, MPI_DOUBLE, counts[c], 0, 0, case_timeout);
    }
    if (wanted(kinds, "prime-count")) {
        static const int counts[] = {13, 4099};
        for (int c = 0; c < 2; c++)
            one_case("prime-count", world, MPI_INT, counts[c], 0, 0, case_timeout);
    }
    if (wanted(kinds, "in-place")) {
        static const int counts[] = {1, 5, 1000};
        for (int c = 0; c < 3; c++)
            one_case("in-place", world, MPI_INT, counts[c], 1, 0, case_timeout);
    }
    if (wanted(kinds, "sub-communicator")) {
        static const int counts[] = {1, 7, 1000};
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
        MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
        for (int c = 0; c < 3; c++)
            one_case("sub-communicator", half, MPI_INT, counts[c], 0, 0, case_timeout);
        MPI_Comm_free(&half);
    }
    if (KIND == 3 && wanted(kinds, "root")) {
        int roots[2] = {size / 2, size - 1};
        for (int k = 0; k < 2; k++) {
            one_case("root", world, MPI_INT, 1, 0, roots[k], case_timeout);
            one_case("root", world, MPI_INT, 1000, 0, roots[k], case_timeout);
        }
        one_case("root", world, MPI_INT, 1000, 1, size - 1, case_timeout);
    }
    MPI_Comm_free(&world);
    MPI_Finalize();
    return 0;
}
