/* The broadcast harness of lab 6 (built and run by mpilab.grade.runner; the cases, the data and
 * the verdicts are mpilab.grade.checks.collectives').
 *
 * Linked with one or more of the students' files. Each defines one function with MPI_Bcast's
 * signature; the pipelined one takes the segment size in bytes as a sixth argument:
 *
 *   int student_bcast_linear(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
 *   int student_bcast_chain(...);  student_bcast_binomial(...);  student_bcast_scatter_allgather(...);
 *   int student_bcast_pipeline(void *buffer, int count, MPI_Datatype datatype, int root,
 *                              MPI_Comm comm, int segsize);
 *
 * The functions are declared weak: a file that is not linked (or that misspells the name)
 * leaves its function NULL, and the harness says so instead of failing to link.
 *
 *   check_bcast --algo NAME [--case-timeout S]
 *       runs every case of the file `plan` (harness.h) and writes `out.<rank>`: the buffer as
 *       the function left it on every rank (the root's starts with its input, the others' with
 *       the plan's fill byte), with its guard bytes, and what the function called. A root of
 *       -1 in the plan is the last rank of each half. No verdict here.
 *   check_bcast --time NAME[,NAME...] --sizes B,B,... [--segsizes S,S,...] [--iters I]
 *               [--warmup W] [--root R]
 *       the provenance block (labprov.h), then CSV rows
 *       "algorithm,nprocs,bytes,segsize,maxrank_avg_us": each named algorithm (and "native",
 *       MPI_Bcast) broadcasting B bytes (MPI_BYTE) from the root; the pipeline once per segment
 *       size (default 8192), the others with segsize 0. maxrank_avg_us is the slowest rank's
 *       average time of one call, from a barrier to its return (default 5 timed calls after 1
 *       warm-up). Before timing, each algorithm broadcasts once and every rank checks every
 *       byte: a wrong one prints "# skip: NAME B: <why>" and NAME is not timed at larger sizes.
 */
#define _POSIX_C_SOURCE 200809L   /* strtok_r: under SMPI every rank shares libc's strtok state */
#include "harness.h"
#include "labprov.h"

typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*pipeline_fn)(void *, int, MPI_Datatype, int, MPI_Comm, int);

int student_bcast_linear(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_chain(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_binomial(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_scatter_allgather(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_pipeline(void *, int, MPI_Datatype, int, MPI_Comm, int) __attribute__((weak));


static const struct {
    const char *name;
    bcast_fn fn;
    const char *symbol;
} ALGOS[] = {
    {"linear", student_bcast_linear, "student_bcast_linear"},
    {"chain", student_bcast_chain, "student_bcast_chain"},
    {"pipeline", NULL, "student_bcast_pipeline"},
    {"binomial", student_bcast_binomial, "student_bcast_binomial"},
    {"scatter_allgather", student_bcast_scatter_allgather, "student_bcast_scatter_allgather"},
};
#define NALGOS ((int)(sizeof ALGOS / sizeof ALGOS[0]))

static int algo_index(const char *name)
{
    for (int i = 0; i < NALGOS; i++)
        if (strcmp(ALGOS[i].name, name) == 0)
            return i;
    return -1;
}

static int is_pipeline(int a) { return strcmp(ALGOS[a].name, "pipeline") == 0; }

static int defined(int a) { return is_pipeline(a) ? student_bcast_pipeline != NULL : ALGOS[a].fn != NULL; }

static int call(int a, void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, int segsize)
{
    if (is_pipeline(a))
        return student_bcast_pipeline(buf, count, t, root, comm, segsize);
    return ALGOS[a].fn(buf, count, t, root, comm);
}

static void run_case(int a, const hx_case *c)
{
    MPI_Comm comm = hx_comm(c);
    MPI_Datatype t = hx_type(c);
    int rank, size, tsize;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    PMPI_Type_size(t, &tsize);
    int root = c->root < 0 ? size - 1 : c->root;   /* -1: the last rank of each half */
    long len = c->count * tsize;
    if (rank == root && c->input_bytes != len) hx_fail("its input does not fit the plan");
    hx_region region;
    unsigned char *buf = hx_alloc(&region, "buffer", len, rank == root ? c->input : NULL);
    hx_arm();
    hx_begin(c);
    int rc = call(a, buf, (int)c->count, t, root, comm, (int)c->segsize);
    hx_end();
    hx_emit(c, comm, rc, &region, 1);
    hx_sync();
    hx_disarm();
    free(region.base);
}

/* ---- timing ---------------------------------------------------------------------------------- */

static int parse_list(char *text, long *out, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(text, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
        out[n++] = atol(tok);
    return n;
}

/* One broadcast of `bytes` from root whose every byte every rank checks; non-zero on every rank
 * when any rank got a wrong byte or an error. */
static int verify(int a, unsigned char *buf, long bytes, int root, int segsize)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long i = 0; i < bytes; i++)
        buf[i] = rank == root ? (unsigned char)(i * 7 + 3) : 0xFF;
    int rc = call(a, buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, segsize), bad = rc != MPI_SUCCESS, any;
    for (long i = 0; i < bytes && !bad; i++)
        bad = buf[i] != (unsigned char)(i * 7 + 3);
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static double timed(int a, unsigned char *buf, long bytes, int root, int segsize, int iters, int warmup)
{
    double total = 0;
    for (int it = 0; it < warmup + iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        if (a < 0) MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        else call(a, buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, segsize);
        if (it >= warmup) total += MPI_Wtime() - t;
    }
    double avg = total / iters * 1e6, max;
    MPI_Reduce(&avg, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return max;
}

static int time_all(char *names, long *sizes, int nsizes, long *segs, int nsegs, int iters, int warmup, int root)
{
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    long largest = 1;
    for (int i = 0; i < nsizes; i++) largest = sizes[i] > largest ? sizes[i] : largest;
    unsigned char *buf = malloc((size_t)largest);
    if (rank == 0) {
        lab_print_provenance("check_bcast", 1);
        printf("# collective: bcast\n# datatype: byte\n# root: %d\n# iterations: %d\n# warmup: %d\n", root,
               iters, warmup);
        printf("algorithm,nprocs,bytes,segsize,maxrank_avg_us\n");
    }
    char *save = NULL;
    for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int a = strcmp(name, "native") == 0 ? -1 : algo_index(name);
        if (a < 0 && strcmp(name, "native")) {
            if (rank == 0) printf("# skip: %s 0: unknown algorithm\n", name);
            continue;
        }
        if (a >= 0 && !defined(a)) {
            if (rank == 0) printf("# skip: %s 0: %s is not defined\n", name, ALGOS[a].symbol);
            continue;
        }
        int nseg = a >= 0 && is_pipeline(a) ? nsegs : 1, broken = 0;
        for (int i = 0; i < nsizes && !broken; i++) {
            for (int s = 0; s < nseg && !broken; s++) {
                int seg = a >= 0 && is_pipeline(a) ? (int)segs[s] : 0;
                if (a >= 0 && verify(a, buf, sizes[i], root, seg)) {
                    if (rank == 0) printf("# skip: %s %ld: a rank got a wrong byte or an error\n", name, sizes[i]);
                    broken = 1;
                    break;
                }
                double us = timed(a, buf, sizes[i], root, seg, iters, warmup);
                if (rank == 0) printf("%s,%d,%ld,%d,%.3f\n", name, p, sizes[i], seg, us);
                fflush(stdout);
            }
        }
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world_rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    const char *algo = NULL;
    char *time_names = NULL, *size_text = NULL, *seg_text = NULL;
    int iters = 5, warmup = 1, root = 0, status = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--case-timeout") == 0) continue;
        else if (strcmp(argv[i], "--algo") == 0) algo = argv[i + 1];
        else if (strcmp(argv[i], "--time") == 0) time_names = argv[i + 1];
        else if (strcmp(argv[i], "--sizes") == 0) size_text = argv[i + 1];
        else if (strcmp(argv[i], "--segsizes") == 0) seg_text = argv[i + 1];
        else if (strcmp(argv[i], "--iters") == 0) iters = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0) warmup = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--root") == 0) root = atoi(argv[i + 1]);
        else {
            if (world_rank == 0) fprintf(stderr, "check_bcast: unknown option '%s'\n", argv[i]);
            status = 2;
        }
    }
    if (status == 0 && time_names) {
        long sizes[64], segs[64] = {8192};
        int nsizes = size_text ? parse_list(size_text, sizes, 64) : 0, nsegs = seg_text ? parse_list(seg_text, segs, 64) : 1;
        if (nsizes == 0 || iters < 1 || warmup < 0) {
            if (world_rank == 0) fprintf(stderr, "check_bcast: --time needs --sizes B,B,... and iters >= 1\n");
            status = 2;
        } else {
            status = time_all(time_names, sizes, nsizes, segs, nsegs, iters, warmup, root);
        }
    } else if (status == 0) {
        int a = algo ? algo_index(algo) : -1;
        if (a < 0) {
            if (world_rank == 0) fprintf(stderr, "check_bcast: --algo needs one of linear, chain, pipeline, binomial, scatter_allgather\n");
            status = 2;
        } else if (!defined(a)) {
            if (world_rank == 0) printf("# the file does not define %s\n", ALGOS[a].symbol);
            status = 4;
        } else {
            hx_init(argc, argv);
            for (int i = 0; i < hx_ncases; i++)
                run_case(a, &hx_cases[i]);
            hx_finish();
        }
    }
    MPI_Finalize();
    return status;
}
