/* overlap — how much of a non-blocking collective hides behind computation (lab 6, part 6).
 *
 *   overlap --coll bcast|allgather --sizes B,B,... --compute-us C [--progress none|test]
 *           [--test-every-us T] [--iters I] [--warmup W]
 *
 * For each size (bytes broadcast from rank 0 with MPI_Ibcast, or contributed by each rank to
 * MPI_Iallgather) it times, on every rank, from a barrier to the end:
 *   comm_us     start the collective, wait for it                       (nothing to hide behind)
 *   compute_us  the compute kernel alone                                (C µs on a calibrated core)
 *   both_us     start the collective, run the kernel, wait for it
 * With --progress test the kernel stops every T µs (default C/10) to call MPI_Test on the
 * request, which lets an MPI library that progresses only inside MPI calls move the collective on.
 *
 * The kernel is a loop of floating-point operations calibrated at start-up in CPU time
 * (CLOCK_THREAD_CPUTIME_ID: iterations per µs, the median of 5 calibrations of at least 20 ms
 * on rank 0, sent to every rank), so C µs is C µs of this core's work, whatever else the machine
 * runs; compute_us, measured with MPI_Wtime, shows what it took on the clock. Under SMPI the same
 * loop runs for real and SimGrid charges its CPU time (smpi/simulate-computation, at
 * smpi/host-speed) to the simulated clock: with host-speed equal to the platform's host speed,
 * a µs of CPU is a simulated µs.
 *
 * The three are interleaved call by call (comm, compute, both, comm, ...), so a disturbance of
 * the machine hits the three alike; each is the median of a rank's I calls (default 10, after 2
 * warm-up rounds), and the slowest rank's median is reported.
 *
 * Output (rank 0): the kit's provenance block (c_reference/include/labprov.h: "# overlap 1", the
 * library, flavour, host, date), then CSV "collective,nprocs,bytes,progress,compute_target_us,
 * comm_us,compute_us,both_us,overlap", read by mpilab.measure.driver.parse; overlap = (comm_us + compute_us - both_us) / min(comm_us, compute_us): 1 when the
 * shorter one hides entirely behind the longer, 0 when they run one after the other.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "labopts.h"
#include "labprov.h"

static volatile double sink;
static double iters_per_us;

/* The kernel: `n` iterations of a dependent multiply-add (nothing to vectorise away). */
static void kernel(long n)
{
    double x = sink + 1.0;
    for (long i = 0; i < n; i++)
        x = x * 1.0000001 + 1e-9;
    sink = x;
}

/* CPU time of this thread, µs: not stretched when the machine makes the process wait, and
 * what SMPI charges to the simulated clock. */
static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void calibrate(void)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double rates[5];
    if (rank == 0) {
        long n = 1000;
        for (int k = 0; k < 5; k++) {
            double t;
            for (;;) {
                double t0 = cpu_us();
                kernel(n);
                t = cpu_us() - t0;
                if (t >= 20000) break;
                n *= 2;
            }
            rates[k] = n / t;
        }
        qsort(rates, 5, sizeof rates[0], lab_cmp_double);
        iters_per_us = rates[2];
    }
    MPI_Bcast(&iters_per_us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

/* C µs of kernel; with `req`, an MPI_Test every `every` µs. */
static void compute(double us, MPI_Request *req, double every)
{
    if (req == NULL || every <= 0) {
        kernel((long)(us * iters_per_us));
        return;
    }
    int done = 0;
    for (double left = us; left > 0; left -= every) {
        kernel((long)((left < every ? left : every) * iters_per_us));
        if (!done) MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
}

static void start(int allgather, char *buf, char *out, long bytes, MPI_Request *req)
{
    if (allgather)
        MPI_Iallgather(buf, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, req);
    else
        MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, req);
}

/* One call of a mode (0: the collective alone, 1: the kernel alone, 2: both), µs on this rank. */
static double once(int mode, int allgather, char *buf, char *out, long bytes, double c_us, double every)
{
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (mode != 1) start(allgather, buf, out, bytes, &req);
    if (mode != 0) compute(c_us, mode == 2 && every > 0 ? &req : NULL, every);
    if (mode != 1) MPI_Wait(&req, MPI_STATUS_IGNORE);
    return (MPI_Wtime() - t0) * 1e6;
}

/* The three modes interleaved call by call (a disturbance hits all three alike); each mode's
 * median over `iters` calls on this rank, then the slowest rank's. */
static void measure(int allgather, char *buf, char *out, long bytes, double c_us, double every,
                    int iters, int warmup, double result[3])
{
    double *t = malloc(sizeof(double) * 3 * (size_t)iters);
    for (int it = 0; it < warmup + iters; it++)
        for (int mode = 0; mode < 3; mode++) {
            double us = once(mode, allgather, buf, out, bytes, c_us, mode == 2 ? every : 0);
            if (it >= warmup) t[mode * iters + (it - warmup)] = us;
        }
    double med[3];
    for (int mode = 0; mode < 3; mode++) {
        qsort(t + mode * iters, (size_t)iters, sizeof(double), lab_cmp_double);
        med[mode] = iters % 2 ? t[mode * iters + iters / 2]
                              : (t[mode * iters + iters / 2 - 1] + t[mode * iters + iters / 2]) / 2;
    }
    MPI_Allreduce(med, result, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, p, status = 0, iters = 10, warmup = 2, allgather = -1, test = 0;
    double c_us = -1, every = -1;
    long sizes[64];
    int nsizes = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--coll")) allgather = !strcmp(v, "allgather") ? 1 : !strcmp(v, "bcast") ? 0 : -2;
        else if (!strcmp(a, "--compute-us")) c_us = atof(v);
        else if (!strcmp(a, "--test-every-us")) every = atof(v);
        else if (!strcmp(a, "--progress")) test = !strcmp(v, "test") ? 1 : !strcmp(v, "none") ? 0 : -1;
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--sizes")) {
            char *save = NULL, *copy = strdup(v);
            for (char *t = strtok_r(copy, ",", &save); t && nsizes < 64; t = strtok_r(NULL, ",", &save))
                sizes[nsizes++] = atol(t);
            free(copy);
        } else {
            status = 2;
        }
    }
    if (status || allgather < 0 || c_us <= 0 || test < 0 || nsizes == 0 || iters < 1 || warmup < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: overlap --coll bcast|allgather --sizes B,B,... --compute-us C "
                            "[--progress none|test] [--test-every-us T] [--iters I] [--warmup W]\n");
        MPI_Finalize();
        return 2;
    }
    if (every <= 0) every = c_us / 10;
    calibrate();
    long largest = 1;
    for (int i = 0; i < nsizes; i++) largest = sizes[i] > largest ? sizes[i] : largest;
    char *buf = calloc((size_t)largest, 1), *out = allgather ? calloc((size_t)largest * p, 1) : NULL;
    if (rank == 0) {
        lab_print_provenance("overlap", 1);
        printf("collective,nprocs,bytes,progress,compute_target_us,comm_us,compute_us,both_us,overlap\n");
    }
    for (int i = 0; i < nsizes; i++) {
        double r[3];
        measure(allgather, buf, out, sizes[i], c_us, test ? every : 0, iters, warmup, r);
        double comm = r[0], comp = r[1], both = r[2], shorter = comm < comp ? comm : comp;
        if (rank == 0)
            printf("%s,%d,%ld,%s,%.1f,%.3f,%.3f,%.3f,%.3f\n", allgather ? "allgather" : "bcast", p,
                   sizes[i], test ? "test" : "none", c_us, comm, comp, both,
                   shorter > 0 ? (comm + comp - both) / shorter : 0.0);
        fflush(stdout);
    }
    free(buf);
    free(out);
    MPI_Finalize();
    return 0;
}
