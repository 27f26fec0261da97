/* bench_reduce — lab 3's benchmark driver for the reproduction study (mpilab.studies.repro).
 *
 * Times MPI_Reduce / MPI_Allreduce ("default": the library's own choice) against the
 * two-level versions ("two_level"): the student's student_allreduce_two_level, linked in, and,
 * when built with -DWITH_REDUCE_TWO_LEVEL, a two-level reduce lab_reduce_two_level (the answer
 * key's, on the instructor's side: without it the reduce has no two_level). MPI_SUM over
 * MPI_DOUBLE, root 0, like collbench: a barrier before each iteration, each rank averages its
 * own iterations, and per iteration the max over ranks is kept (maxrank_*, the seed's metric).
 *
 * Usage: bench_reduce [--colls reduce,allreduce] [--algos default,two_level]
 *                     [--jobs allreduce:default,allreduce:two_level,reduce:default]
 *                     [--sizes 8,128,1000000] [--iters N] [--warmup W] [--seed S] [--check]
 * Every (collective, algorithm, size) is one job: --colls x --algos, or the pairs of --jobs;
 * --seed S shuffles the order of the jobs (as the seed's benchmark did with --shuffle-jobs).
 * --check runs each job once on real data and verifies every element instead of timing (prints
 * FAIL ... and exits 1 on a wrong one, PASS when all are right).
 * Output (rank 0): "# key: value" provenance lines, then CSV
 *   collective,algorithm,bytes,count,iterations,warmup,avg_us,min_us,max_us,maxrank_avg_us,maxrank_median_us
 * When not checking, buffers are SMPI_SHARED_MALLOC under SMPI (contents are not kept), so
 * 512 simulated ranks x 1 MB fit in memory.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "labopts.h"   /* c_reference/include: messages and helpers shared by the drivers */
#include "labprov.h"   /* c_reference/include: the provenance block of every driver */

int student_allreduce_two_level(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
#ifdef WITH_REDUCE_TWO_LEVEL
int lab_reduce_two_level(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, int root, MPI_Comm comm);
#define HAVE_REDUCE_TWO_LEVEL 1
#else
#define HAVE_REDUCE_TWO_LEVEL 0
#endif

#define MAXJOBS 64

typedef struct {
    int coll;      /* 0 reduce, 1 allreduce */
    int algo;      /* 0 default, 1 two_level */
    long bytes;
} job;

static const char *COLLS[] = {"reduce", "allreduce"};
static const char *ALGOS[] = {"default", "two_level"};
static int rank, nprocs;

static int index_of(const char *name, const char **names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

static void *bench_alloc(size_t n, int shared)
{
#ifdef SMPI_SHARED_MALLOC
    if (shared)
        return SMPI_SHARED_MALLOC(n > 0 ? n : 1);
#endif
    (void)shared;
    return calloc(n > 0 ? n : 1, 1);
}

static void bench_free(void *p, int shared)
{
#ifdef SMPI_SHARED_FREE
    if (shared) {
        SMPI_SHARED_FREE(p);
        return;
    }
#endif
    (void)shared;
    free(p);
}

static int run(const job *j, const double *send, double *recv, int count)
{
    if (j->coll == 0) {
#ifdef WITH_REDUCE_TWO_LEVEL
        if (j->algo)
            return lab_reduce_two_level(send, recv, count, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
#endif
        return MPI_Reduce(send, recv, count, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    return j->algo ? student_allreduce_two_level(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD)
                   : MPI_Allreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* Run once on real data and check every element; 1 (after rank 0 printed FAIL) if wrong. */
static int check(const job *j, int count)
{
    double *send = malloc(sizeof(double) * (size_t)count), *recv = malloc(sizeof(double) * (size_t)count);
    for (int i = 0; i < count; i++) {
        send[i] = (double)((rank + i) % 7);
        recv[i] = -1;
    }
    int rc = run(j, send, recv, count), bad = -1;
    if (rc == MPI_SUCCESS && (j->coll == 1 || rank == 0))
        for (int i = 0; i < count && bad < 0; i++) {
            double e = 0;
            for (int r = 0; r < nprocs; r++)
                e += (double)((r + i) % 7);
            if (recv[i] != e)
                bad = i;
        }
    int mine[2] = {rc != MPI_SUCCESS ? rc : 0, bad}, *all = rank == 0 ? malloc(sizeof(int) * 2 * (size_t)nprocs) : NULL;
    MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
    int failed = 0;
    if (rank == 0)
        for (int r = 0; r < nprocs && !failed; r++) {
            if (all[2 * r])
                printf("FAIL %s %s %ld bytes, p=%d: rank %d: the function returned error %d\n",
                       COLLS[j->coll], ALGOS[j->algo], j->bytes, nprocs, r, all[2 * r]);
            else if (all[2 * r + 1] >= 0)
                printf("FAIL %s %s %ld bytes, p=%d: rank %d: recvbuf[%d] is wrong\n", COLLS[j->coll],
                       ALGOS[j->algo], j->bytes, nprocs, r, all[2 * r + 1]);
            failed = all[2 * r] || all[2 * r + 1] >= 0;
        }
    fflush(stdout);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    free(send);
    free(recv);
    return failed;
}

static int time_job(const job *j, int count, int iters, int warmup)
{
    int shared = 1;
    double *send = bench_alloc(sizeof(double) * (size_t)count, shared);
    double *recv = bench_alloc(sizeof(double) * (size_t)count, shared);
    double *times = malloc(sizeof(double) * (size_t)iters);
    double *tmax = rank == 0 ? malloc(sizeof(double) * (size_t)iters) : NULL;
    double sum = 0;
    int rc = MPI_SUCCESS;
    for (int i = 0; i < warmup + iters && rc == MPI_SUCCESS; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        rc = run(j, send, recv, count);
        double t = (MPI_Wtime() - t0) * 1e6;
        if (i >= warmup) {
            times[i - warmup] = t;
            sum += t;
        }
    }
    int anyfail = rc != MPI_SUCCESS;
    MPI_Allreduce(MPI_IN_PLACE, &anyfail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!anyfail) {
        double avg = sum / iters, amin, amax, asum;
        MPI_Reduce(&avg, &amin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&avg, &amax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&avg, &asum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(times, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double s = 0;
            for (int i = 0; i < iters; i++)
                s += tmax[i];
            qsort(tmax, (size_t)iters, sizeof(double), lab_cmp_double);
            double med = iters % 2 ? tmax[iters / 2] : 0.5 * (tmax[iters / 2 - 1] + tmax[iters / 2]);
            printf("%s,%s,%ld,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n", COLLS[j->coll], ALGOS[j->algo],
                   j->bytes, count, iters, warmup, asum / nprocs, amin, amax, s / iters, med);
            fflush(stdout);
        }
    } else if (rank == 0) {
        fprintf(stderr, "bench_reduce: %s %s failed at %ld bytes (MPI error %d on some rank)\n",
                COLLS[j->coll], ALGOS[j->algo], j->bytes, rc);
    }
    bench_free(send, shared);
    bench_free(recv, shared);
    free(times);
    free(tmax);
    return anyfail;
}

/* Split a comma list in place; returns the number of items (at most max). */
static int split(char *s, char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        items[n++] = tok;
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    lab_set_reporter("bench_reduce", rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char colls[64] = "reduce,allreduce", algos[64] = "default,two_level", sizes[256] = "8,128,1000000";
    char pairs[256] = "";
    int iters = 10, warmup = 2, do_check = 0, status = 0;
    long seed = -1;
    for (int i = 1; i < argc && status == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) { do_check = 1; continue; }
        if (!v) { status = lab_usage("option %s needs a value", a); break; }
        if (!strcmp(a, "--colls")) snprintf(colls, sizeof colls, "%s", v);
        else if (!strcmp(a, "--algos")) snprintf(algos, sizeof algos, "%s", v);
        else if (!strcmp(a, "--jobs")) snprintf(pairs, sizeof pairs, "%s", v);
        else if (!strcmp(a, "--sizes")) snprintf(sizes, sizeof sizes, "%s", v);
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--seed")) seed = atol(v);
        else { status = lab_usage("unknown option '%s'; valid: --colls --algos --jobs --sizes --iters --warmup --seed --check", a); break; }
        i++;
    }
    job jobs[MAXJOBS];
    int njobs = 0;
    char *c_items[4], *a_items[4], *s_items[16], *p_items[8];
    int ns = split(sizes, s_items, 16);
    /* the (collective, algorithm) pairs: --jobs, else --colls x --algos */
    int pair_c[8], pair_a[8], np = 0;
    if (pairs[0]) {
        int n = split(pairs, p_items, 8);
        for (int k = 0; k < n && status == 0; k++) {
            char *colon = strchr(p_items[k], ':');
            int ci = -1, ai = -1;
            if (colon) {
                *colon = '\0';
                ci = index_of(p_items[k], COLLS, 2);
                ai = index_of(colon + 1, ALGOS, 2);
            }
            if (ci < 0 || ai < 0)
                status = lab_usage("bad job '%s'; valid: collective:algorithm, e.g. allreduce:two_level", p_items[k]);
            else {
                pair_c[np] = ci;
                pair_a[np++] = ai;
            }
        }
    } else {
        int nc = split(colls, c_items, 4), na = split(algos, a_items, 4);
        for (int c = 0; c < nc && status == 0; c++)
            for (int a = 0; a < na && status == 0 && np < 8; a++) {
                int ci = index_of(c_items[c], COLLS, 2), ai = index_of(a_items[a], ALGOS, 2);
                if (ci < 0) status = lab_usage("unknown collective '%s'; valid: reduce, allreduce", c_items[c]);
                else if (ai < 0) status = lab_usage("unknown algorithm '%s'; valid: default, two_level", a_items[a]);
                else {
                    pair_c[np] = ci;
                    pair_a[np++] = ai;
                }
            }
    }
    for (int k = 0; k < np && status == 0; k++)
        if (pair_c[k] == 0 && pair_a[k] == 1 && !HAVE_REDUCE_TWO_LEVEL)
            status = lab_usage("%s: the two-level reduce is not built in (it is the answer key's: build with "
                          "-DWITH_REDUCE_TWO_LEVEL and its file); time the reduce's default only", "reduce:two_level");
    if (status == 0 && iters < 1)
        status = lab_usage("--iters must be >= 1");
    for (int k = 0; k < np && status == 0; k++)
        for (int s = 0; s < ns && status == 0; s++) {
            long b = atol(s_items[s]);
            if (b < 8 || b % 8) status = lab_usage("bad size '%s'; valid: a multiple of 8 bytes (MPI_DOUBLE)", s_items[s]);
            else if (njobs < MAXJOBS) jobs[njobs++] = (job){pair_c[k], pair_a[k], b};
        }
    if (status == 0 && seed >= 0) {   /* Fisher-Yates with a small LCG: same order on every rank */
        unsigned long x = (unsigned long)seed * 2654435761ul + 1;
        for (int i = njobs - 1; i > 0; i--) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
            int k = (int)((x >> 33) % (unsigned long)(i + 1));
            job t = jobs[i];
            jobs[i] = jobs[k];
            jobs[k] = t;
        }
    }
    if (status == 0 && rank == 0) {
        lab_print_provenance("bench_reduce", 1);
        printf("# datatype: double\n# root: 0\n");
        if (!do_check)
            printf("collective,algorithm,bytes,count,iterations,warmup,avg_us,min_us,max_us,maxrank_avg_us,maxrank_median_us\n");
        fflush(stdout);
    }
    for (int i = 0; i < njobs && status == 0; i++) {
        int count = (int)(jobs[i].bytes / 8);
        status = do_check ? check(&jobs[i], count) : time_job(&jobs[i], count, iters, warmup);
    }
    if (status == 0 && do_check && rank == 0)
        printf("PASS\n");
    MPI_Finalize();
    return status;
}
