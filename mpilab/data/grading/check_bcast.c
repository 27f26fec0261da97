/* Correctness and timing harness for students' broadcasts (lab 6; built and run by
 * mpilab.grade.runner).
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
 *   check_bcast --algo NAME [--kinds K,K,...] [--case-timeout S]
 *       runs the cases of each kind and prints one line per case, as it goes:
 *           CASE <kind> <detail>\tPASS
 *           CASE <kind> <detail>\tFAIL\t<what is wrong, naming the rank and the element>
 *       Kinds (every element of every rank is checked, and the elements just past the count
 *       must stay untouched; the root's buffer must not change):
 *         int               MPI_INT, root 0, counts 0, 1, P-1, P+1, 7, 1000, 4099
 *         char              MPI_CHAR, root 0, counts 1, 3, 255, 4096
 *         double            MPI_DOUBLE, root 0, counts 1, 5, 1023
 *         root              MPI_INT, roots P-1, P/2 and 1, counts 1, P-1, 1000
 *         sub-communicator  MPI_INT on the odd and on the even ranks (reversed order), root the
 *                           last rank of each half, counts 1, 100, 1000
 *         segments          (pipeline only) MPI_INT 1000 elements with segments of 4, 12, 1000,
 *                           3 (less than an element: one element) and 0 bytes (no segmenting),
 *                           and of 1 MiB (more than the message); MPI_DOUBLE 999 elements with
 *                           56-byte segments, MPI_CHAR 1001 elements with 7-byte segments
 *       The pipeline runs the other kinds with 64-byte segments. A wrong result does not stop
 *       the run; a crash or a hang does. With --case-timeout, a case still running after S
 *       seconds prints  CASE <kind> <detail>\tTIMEOUT  and the program exits with status 3.
 *       The root's data comes from its private seed, and each CASE line ends in its seal
 *       (sealed.h): the grader writes the files those need, and reads no unsealed line.
 *   check_bcast --time NAME[,NAME...] --sizes B,B,... [--segsizes S,S,...] [--iters I]
 *               [--warmup W] [--root R]
 *       prints CSV rows "algorithm,nprocs,bytes,segsize,maxrank_avg_us": each named algorithm
 *       (and "native", MPI_Bcast) broadcasting B bytes (MPI_BYTE) from the root; the pipeline
 *       once per segment size (default 8192), the others with segsize 0. maxrank_avg_us is the
 *       slowest rank's average time of one call, from a barrier to its return (default 5 timed
 *       calls after 1 warm-up). Before timing, each algorithm broadcasts once and every rank
 *       checks every byte: a wrong one prints "# SKIP NAME B: <why>" and NAME is not timed
 *       at larger sizes.
 */
#define _POSIX_C_SOURCE 200809L   /* strtok_r: under SMPI every rank shares libc's strtok state */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sealed.h"

typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*pipeline_fn)(void *, int, MPI_Datatype, int, MPI_Comm, int);

int student_bcast_linear(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_chain(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_binomial(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_scatter_allgather(void *, int, MPI_Datatype, int, MPI_Comm) __attribute__((weak));
int student_bcast_pipeline(void *, int, MPI_Datatype, int, MPI_Comm, int) __attribute__((weak));

/* The segment size the pipeline gets in the cases of the other kinds, bytes. */
#define CASE_SEGSIZE 64

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

/* Element i of case `seq`'s message from a root whose seed is `seed` (sealed.h): 0..99, private
 * to the root until the function sends it, and different from one case to the next, so a
 * message left over from an earlier case is caught. Non-roots start at -1; the elements past
 * the count hold a guard of their own rank, -(2 + rank % 100). */
static double value(uint64_t seed, int seq, long i) { return sealed_value(seed, seq, i, 100); }
static double guard(int wrank) { return -(double)(2 + wrank % 100); }

static void put(MPI_Datatype t, void *buf, long i, double v)
{
    if (t == MPI_CHAR) ((signed char *)buf)[i] = (signed char)v;
    else if (t == MPI_INT) ((int *)buf)[i] = (int)v;
    else ((double *)buf)[i] = v;
}

static double get(MPI_Datatype t, const void *buf, long i)
{
    if (t == MPI_CHAR) return ((const signed char *)buf)[i];
    if (t == MPI_INT) return ((const int *)buf)[i];
    return ((const double *)buf)[i];
}

#define GUARD_ELEMENTS 8

/* The case running now, for the time-out line, and this process's rank in MPI_COMM_WORLD. */
static char current[128];
static int world_rank, seq;

/* Every rank of a hung case times out (rank 0 waits in the check's MPI_Allreduce); rank 0 says so. */
static void on_alarm(int sig)
{
    (void)sig;
    if (world_rank != 0) _exit(3);
    sealed_timeout(current);
}

/* One case on comm: every rank checks every element; rank 0 of MPI_COMM_WORLD prints one line. */
static void one_case(int a, const char *kind, const char *detail, MPI_Comm comm, MPI_Datatype t,
                     int count, int root, int segsize, int case_timeout)
{
    int rank, tsize;
    MPI_Comm_rank(comm, &rank);
    MPI_Type_size(t, &tsize);
    seq++;
    snprintf(current, sizeof current, "%s %s", kind, detail);
    long total = (long)count + GUARD_ELEMENTS;
    void *buf = malloc((size_t)total * tsize);
    for (long i = 0; i < count; i++)
        put(t, buf, i, rank == root ? value(sealed_seed, seq, i) : -1);
    for (long i = count; i < total; i++)
        put(t, buf, i, guard(world_rank));
    if (case_timeout > 0) alarm((unsigned)case_timeout);
    int rc = call(a, buf, count, t, root, comm, segsize);
    /* a message so every rank learns of the first rank that failed, with the world rank */
    char msg[256] = "";
    int size;
    MPI_Comm_size(comm, &size);
    uint64_t *seeds = malloc((size_t)size * sizeof *seeds);
    sealed_seeds(comm, seeds);   /* the root's seed, now that the call is over */
    if (rc != MPI_SUCCESS) {
        snprintf(msg, sizeof msg, "rank %d: the function returned %d instead of MPI_SUCCESS", world_rank, rc);
    } else {
        for (long i = 0; i < total && !msg[0]; i++) {
            double got = get(t, buf, i), want = i < count ? value(seeds[root], seq, i) : guard(world_rank);
            if (got == want) continue;
            if (i >= count)
                snprintf(msg, sizeof msg, "rank %d: element %ld, past the count of %d, was overwritten "
                         "(%g; it held %g): a write past the end of the buffer", world_rank, i, count, got, want);
            else if (rank == root)
                snprintf(msg, sizeof msg, "rank %d (the root): element %ld of its own buffer changed "
                         "to %g (it held %g): a broadcast must not change the root's data", world_rank,
                         i, got, want);
            else
                snprintf(msg, sizeof msg, "rank %d: element %ld is %g, expected %g%s", world_rank, i, got,
                         want, got == -1 ? " (never received)" : "");
        }
    }
    /* the lowest world rank that failed reports */
    int mine = msg[0] ? world_rank : 1 << 30, first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (case_timeout > 0) alarm(0);
    if (first != 1 << 30 && first != 0) {
        if (world_rank == first) MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 99, MPI_COMM_WORLD);
        if (world_rank == 0) MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, first, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (world_rank == 0)   /* its own message, the reporting rank's, or none: PASS */
        sealed_case(current, msg);
    free(seeds);
    free(buf);
}

static int wanted(const char *kinds, const char *kind)
{
    if (!kinds) return 1;
    size_t n = strlen(kind);
    for (const char *p = kinds; (p = strstr(p, kind)) != NULL; p += n)
        if ((p == kinds || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

static void counts_case(int a, const char *kind, MPI_Comm comm, MPI_Datatype t, const int *counts,
                        int n, int root, int seg, int case_timeout)
{
    char detail[64];
    for (int i = 0; i < n; i++) {
        int seen = counts[i] < 0;
        for (int j = 0; j < i; j++) seen |= counts[j] == counts[i];
        if (seen) continue;
        snprintf(detail, sizeof detail, "count=%d root=%d", counts[i], root);
        one_case(a, kind, detail, comm, t, counts[i], root, seg, case_timeout);
    }
}

static int run_cases(int a, const char *kinds, int case_timeout)
{
    int p;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int seg = is_pipeline(a) ? CASE_SEGSIZE : 0;
    if (wanted(kinds, "int")) {
        int counts[] = {0, 1, p - 1, p + 1, 7, 1000, 4099};
        counts_case(a, "int", MPI_COMM_WORLD, MPI_INT, counts, 7, 0, seg, case_timeout);
    }
    if (wanted(kinds, "char")) {
        int counts[] = {1, 3, 255, 4096};
        counts_case(a, "char", MPI_COMM_WORLD, MPI_CHAR, counts, 4, 0, seg, case_timeout);
    }
    if (wanted(kinds, "double")) {
        int counts[] = {1, 5, 1023};
        counts_case(a, "double", MPI_COMM_WORLD, MPI_DOUBLE, counts, 3, 0, seg, case_timeout);
    }
    if (wanted(kinds, "root")) {
        int roots[] = {p - 1, p / 2, 1};
        for (int r = 0; r < 3; r++) {
            int dup = roots[r] <= 0 || roots[r] >= p;
            for (int q = 0; q < r; q++) dup |= roots[q] == roots[r];
            if (dup) continue;
            int counts[] = {1, p - 1, 1000};
            counts_case(a, "root", MPI_COMM_WORLD, MPI_INT, counts, 3, roots[r], seg, case_timeout);
        }
    }
    if (wanted(kinds, "sub-communicator")) {
        MPI_Comm half;
        int hsize;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &half);
        MPI_Comm_size(half, &hsize);
        int counts[] = {1, 100, 1000};
        char detail[80];
        for (int i = 0; i < 3; i++) {
            snprintf(detail, sizeof detail, "count=%d root=last rank of each half", counts[i]);
            one_case(a, "sub-communicator", detail, half, MPI_INT, counts[i], hsize - 1, seg, case_timeout);
        }
        MPI_Comm_free(&half);
    }
    if (wanted(kinds, "segments") && is_pipeline(a)) {
        int segs[] = {4, 12, 1000, 3, 0, 1 << 20};
        char detail[80];
        for (int i = 0; i < 6; i++) {
            snprintf(detail, sizeof detail, "int count=1000 segsize=%d", segs[i]);
            one_case(a, "segments", detail, MPI_COMM_WORLD, MPI_INT, 1000, 0, segs[i], case_timeout);
        }
        one_case(a, "segments", "double count=999 segsize=56", MPI_COMM_WORLD, MPI_DOUBLE, 999, 0, 56, case_timeout);
        one_case(a, "segments", "char count=1001 segsize=7", MPI_COMM_WORLD, MPI_CHAR, 1001, 0, 7, case_timeout);
    }
    return 0;
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
    if (rank == 0) printf("algorithm,nprocs,bytes,segsize,maxrank_avg_us\n");
    char *save = NULL;
    for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int a = strcmp(name, "native") == 0 ? -1 : algo_index(name);
        if (a < 0 && strcmp(name, "native")) {
            if (rank == 0) printf("# SKIP %s 0: unknown algorithm\n", name);
            continue;
        }
        if (a >= 0 && !defined(a)) {
            if (rank == 0) printf("# SKIP %s 0: %s is not defined\n", name, ALGOS[a].symbol);
            continue;
        }
        int nseg = a >= 0 && is_pipeline(a) ? nsegs : 1, broken = 0;
        for (int i = 0; i < nsizes && !broken; i++) {
            for (int s = 0; s < nseg && !broken; s++) {
                int seg = a >= 0 && is_pipeline(a) ? (int)segs[s] : 0;
                if (a >= 0 && verify(a, buf, sizes[i], root, seg)) {
                    if (rank == 0) printf("# SKIP %s %ld: a rank got a wrong byte or an error\n", name, sizes[i]);
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
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    const char *kinds = NULL, *algo = NULL;
    char *time_names = NULL, *size_text = NULL, *seg_text = NULL;
    int case_timeout = 0, iters = 5, warmup = 1, root = 0, status = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kinds") == 0) kinds = argv[i + 1];
        else if (strcmp(argv[i], "--case-timeout") == 0) case_timeout = atoi(argv[i + 1]);
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
            sealed_init();
            if (case_timeout > 0) signal(SIGALRM, on_alarm);
            status = run_cases(a, kinds, case_timeout);
        }
    }
    MPI_Finalize();
    return status;
}
