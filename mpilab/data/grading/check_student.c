/* The allgather harness of lab 2 (built and run by mpilab.grade.runner; the cases, the data and
 * the verdicts are mpilab.grade.casedata's).
 *
 * Built with -DSTUDENT_FN=<function name> and linked with the student's file.
 *
 *   check_student [--case-timeout S]
 *       runs every case of the file `plan` (harness.h) on this rank's input `in.<rank>` and
 *       writes `out.<rank>`: for each case, sendbuf (when not MPI_IN_PLACE) and recvbuf as the
 *       student's function left them, with their guard bytes, its return code, the library
 *       collectives it called and the messages it sent. recvbuf starts filled with the plan's
 *       fill byte (with MPI_IN_PLACE, the rank's own block holds its input). No verdict here.
 *   check_student --time NAME [ITERS WARMUP]
 *       the provenance block (labprov.h), then CSV rows "algorithm,nprocs,bytes,maxrank_avg_us"
 *       timing the student's function (as NAME) and MPI_Allgather (as native), int data, 4 to
 *       16384 bytes per rank (default 20 timed iterations after 5 warm-up ones).
 *       maxrank_avg_us is the slowest rank's average.
 *   check_student --time-alone NAME [ITERS WARMUP]
 *       the same without MPI_Allgather (SMPI's times repeat exactly: one native curve is enough).
 *   check_student --time-reference [ITERS WARMUP]   (built with -DWITH_REFERENCE)
 *       times the kit's gather_bcast and pairwise the same way.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "labprov.h"

#ifndef STUDENT_FN
#error "compile with -DSTUDENT_FN=name"
#endif

int STUDENT_FN(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

static void run_case(const hx_case *c)
{
    MPI_Comm comm = hx_comm(c);
    MPI_Datatype t = hx_type(c);
    int rank, size, tsize;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    PMPI_Type_size(t, &tsize);
    long block = c->count * tsize;
    if (c->input_bytes != block) hx_fail("its input does not fit the plan");
    hx_region regions[2];
    int nr = 0;
    unsigned char *send = NULL;
    if (!c->in_place) send = hx_alloc(&regions[nr++], "sendbuf", block, c->input);
    unsigned char *recv = hx_alloc(&regions[nr++], "recvbuf", block * size, NULL);
    if (c->in_place) memcpy(recv + (long)rank * block, c->input, (size_t)block);
    hx_arm();
    hx_begin(c);
    int rc = STUDENT_FN(c->in_place ? MPI_IN_PLACE : send, (int)c->count, t, recv, (int)c->count, t, comm);
    hx_end();
    hx_emit(c, comm, rc, regions, nr);
    hx_sync();
    hx_disarm();
    for (int i = 0; i < nr; i++) free(regions[i].base);
}

/* ---- timing -------------------------------------------------------------------------------- */

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
    if (rank == 0) {
        lab_print_provenance("check_student", 1);
        printf("# collective: allgather\n# datatype: int\n# iterations: %d\n# warmup: %d\n", iters, warmup);
        printf("algorithm,nprocs,bytes,maxrank_avg_us\n");
    }
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
    fflush(stdout);
    free(send);
    free(recv);
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
    hx_init(argc, argv);
    for (int i = 0; i < hx_ncases; i++)
        run_case(&hx_cases[i]);
    hx_finish();
    MPI_Finalize();
    return 0;
}
