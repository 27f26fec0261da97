/* The harness of lab 3's reductions (built and run by mpilab.grade.checks.reductions; the cases,
 * the data and the verdicts are mpilab.grade.checks.collectives').
 *
 * Built with -DSTUDENT_FN=<function> -DKIND=<1|2|3> and linked with the student's file:
 *   KIND 1 = reduce-scatter (MPI_Reduce_scatter_block's signature),
 *   KIND 2 = allreduce (MPI_Allreduce's),  KIND 3 = reduce (MPI_Reduce's).
 *
 *   check_reduce [--case-timeout S]
 *       runs every case of the file `plan` (harness.h), MPI_SUM, and writes `out.<rank>`:
 *       sendbuf (unless MPI_IN_PLACE) and recvbuf as the function left them, with their guard
 *       bytes, its return code (and MPI's words for it) and what it called. recvbuf (count
 *       elements) starts filled with the plan's fill byte; with MPI_IN_PLACE it holds the rank's
 *       input (a reduce: at the root only). A reduce-scatter's input is count x P elements. The function
 *       gets communicators whose error handler returns errors (MPI_ERRORS_RETURN). No verdict
 *       here.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

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

/* The communicators the function gets: duplicates whose error handler returns errors. */
static MPI_Comm world_dup = MPI_COMM_NULL, halves_dup = MPI_COMM_NULL;

static MPI_Comm case_comm(const hx_case *c)
{
    MPI_Comm *dup = strcmp(c->comm, "halves") == 0 ? &halves_dup : &world_dup;
    if (*dup == MPI_COMM_NULL) {
        PMPI_Comm_dup(hx_comm(c), dup);
        PMPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
    }
    return *dup;
}

static void run_case(const hx_case *c)
{
    MPI_Comm comm = case_comm(c);
    MPI_Datatype t = hx_type(c);
    int rank, size, tsize;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    PMPI_Type_size(t, &tsize);
    long in_len = (KIND == 1 ? c->count * size : c->count) * tsize;
    int in_place = c->in_place && (KIND != 3 || rank == c->root);
    if (c->input_bytes != in_len) hx_fail("its input does not fit the plan");
    hx_region regions[2];
    int nr = 0;
    unsigned char *send = NULL;
    if (!in_place) send = hx_alloc(&regions[nr++], "sendbuf", in_len, c->input);
    /* a reduce-scatter's result is count elements; in place, recvbuf holds the whole input */
    long out_len = in_place ? in_len : c->count * tsize;
    unsigned char *recv = hx_alloc(&regions[nr++], "recvbuf", out_len, in_place ? c->input : NULL);
    const void *sbuf = in_place ? MPI_IN_PLACE : send;
    hx_arm();
    hx_begin(c);
#if KIND == 3
    int rc = STUDENT_FN(sbuf, recv, (int)c->count, t, MPI_SUM, c->root, comm);
#else
    int rc = STUDENT_FN(sbuf, recv, (int)c->count, t, MPI_SUM, comm);
#endif
    hx_end();
    hx_emit(c, comm, rc, regions, nr);
    hx_sync();
    hx_disarm();
    for (int i = 0; i < nr; i++) free(regions[i].base);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    hx_init(argc, argv);
    for (int i = 0; i < hx_ncases; i++)
        run_case(&hx_cases[i]);
    if (world_dup != MPI_COMM_NULL) PMPI_Comm_free(&world_dup);
    if (halves_dup != MPI_COMM_NULL) PMPI_Comm_free(&halves_dup);
    hx_finish();
    MPI_Finalize();
    return 0;
}
