/* pingpong — point-to-point latency between two ranks (docs/DEVELOPING.md section 2b).
 *
 * Rank 0 sends n bytes to rank 1 with MPI_Send, rank 1 sends them back; the time of one
 * round trip divided by two is the one-way latency the α-β (Hockney) model describes:
 * t(n) = α + β·n. Sizes are 0 and then doubling from 1 up to 4 MiB by default, as OSU's
 * osu_latency. Each size runs warm-up round trips, then timed ones, each timed on its own
 * (MPI_Wtime around one round trip), so the printer reports the mean, min, max and median
 * of the half round-trip times. Only rank 0 times; only rank 0 prints.
 *
 * One options struct, one parser, one printer (as collbench). Output is parse-able: a block
 * of "# key: value" provenance lines, then a CSV table. Errors print "pingpong: ..." and exit
 * with status 2 (bad usage, wrong number of ranks) or 1 (an MPI error).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "labopts.h"
#include "labprov.h"

#define LARGE_THRESHOLD 8192
#define MAX_BYTES (1L << 30)
#define PP_TAG 0x9090

typedef struct {
    long min_bytes, max_bytes;
    int iters, warmup, iters_large, warmup_large;
    int help;
} options;

static int rank, nprocs;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pingpong [-m MIN:MAX] [--iters N] [--warmup N] [--iters-large N] [--warmup-large N]\n"
            "                [--help]\n\n"
            "Half round-trip time of MPI_Send/MPI_Recv between exactly 2 ranks.\n\n"
            "  -m MIN:MAX        sizes in bytes: MIN (0 allowed), then doubling (0 is followed by 1)\n"
            "                    up to MAX; K/M suffixes; -m MAX = 0:MAX (default 0:4M, as osu_latency)\n"
            "  --iters/--warmup  timed and warm-up round trips up to 8 KiB (default 1000/100)\n"
            "  --iters-large/--warmup-large  above 8 KiB (default 100/10)\n\n"
            "output (rank 0): '# key: value' provenance lines, then\n"
            "  bytes,iterations,avg_us,min_us,max_us,median_us\n"
            "  (one-way time = round trip / 2; avg, min, max, median over the timed round trips)\n");
}

/* Returns 0, or the exit status (2) after printing the message on rank 0. */
static int parse(int argc, char **argv, options *o)
{
    *o = (options){0, 4L << 20, 1000, 100, 100, 10, 0};
    const char *m = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
            continue;
        }
        int known = !strcmp(a, "-m") || !strcmp(a, "--iters") || !strcmp(a, "--warmup") ||
                    !strcmp(a, "--iters-large") || !strcmp(a, "--warmup-large");
        if (!known) {
            lab_fail("unknown option '%s'; valid: -m, --iters, --warmup, --iters-large, "
                     "--warmup-large, --help", a);
            return 2;
        }
        if (!v) {
            lab_fail("option %s needs a value", a);
            return 2;
        }
        if (!strcmp(a, "-m")) m = v;
        else if (!strcmp(a, "--iters")) rc = lab_parse_int_opt(a, v, 1, &o->iters);
        else if (!strcmp(a, "--warmup")) rc = lab_parse_int_opt(a, v, 0, &o->warmup);
        else if (!strcmp(a, "--iters-large")) rc = lab_parse_int_opt(a, v, 1, &o->iters_large);
        else rc = lab_parse_int_opt(a, v, 0, &o->warmup_large);
        if (rc)
            return rc;
        i++;
    }
    if (o->help)
        return 0;
    if (m) {
        lab_parse_range(m, 0, &o->min_bytes, &o->max_bytes);
        if (o->min_bytes < 0 || o->max_bytes < 0) {
            lab_fail("bad size range '%s' for -m; sizes must be byte counts >= 0 (K/M suffixes), e.g. 0:4M", m);
            return 2;
        }
        if (o->min_bytes > o->max_bytes) {
            lab_fail("bad size range '%s' for -m; MIN %ld is larger than MAX %ld", m, o->min_bytes,
                     o->max_bytes);
            return 2;
        }
        if (o->max_bytes > MAX_BYTES) {
            lab_fail("bad size range '%s' for -m; MAX %ld is above the largest size, %ld (1024M)", m,
                     o->max_bytes, MAX_BYTES);
            return 2;
        }
    }
    if (nprocs != 2) {
        lab_fail("needs exactly 2 processes, got %d; launch it with -n 2 (e.g. mpirun -n 2 pingpong)",
                 nprocs);
        return 2;
    }
    return 0;
}

/* ---- the printer (rank 0 only) ---- */

/* Where each rank runs: processor name and CPU (-1 when unknown, e.g. simulated). */
typedef struct { char name[MPI_MAX_PROCESSOR_NAME]; int cpu; } place;

static void print_header(const options *o, const place where[2])
{
    lab_print_provenance("pingpong", 1);
    printf("# collective: pingpong\n# algorithm: blocking\n# datatype: char\n# root: 0\n");
    printf("# iterations: %d\n# warmup: %d\n# iterations_large: %d\n# warmup_large: %d\n",
           o->iters, o->warmup, o->iters_large, o->warmup_large);
    printf("# rank_hosts: %s,%s\n# rank_cpus: %d,%d\n", where[0].name, where[1].name, where[0].cpu,
           where[1].cpu);
    printf("bytes,iterations,avg_us,min_us,max_us,median_us\n");
    fflush(stdout);
}

/* ---- timing ---- */

/* One round trip of `bytes`; rank 0 starts it. As osu_latency, each rank sends from one
 * buffer and receives into another: sending what was just received would make the peer read
 * cache lines this core had just written. */
static int round_trip(const char *sbuf, char *rbuf, int bytes)
{
    int rc;
    if (rank == 0) {
        rc = MPI_Send(sbuf, bytes, MPI_CHAR, 1, PP_TAG, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv(rbuf, bytes, MPI_CHAR, 1, PP_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Recv(rbuf, bytes, MPI_CHAR, 0, PP_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS)
            rc = MPI_Send(sbuf, bytes, MPI_CHAR, 0, PP_TAG, MPI_COMM_WORLD);
    }
    return rc;
}

static int bench(const options *o)
{
    place me = {"", -1}, where[2];
    int len;
    MPI_Get_processor_name(me.name, &len);
    if (strcmp(LAB_FLAVOUR, "smpi") != 0)   /* a simulated rank has no real CPU */
        me.cpu = sched_getcpu();
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, where, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);

    /* written and page-aligned, as osu_latency's ('a' to send, 'b' to receive) */
    char *sbuf = lab_touched_alloc((size_t)o->max_bytes, 'a');
    char *rbuf = lab_touched_alloc((size_t)o->max_bytes, 'b');
    int maxiters = o->iters > o->iters_large ? o->iters : o->iters_large;
    double *half = malloc(sizeof(double) * (size_t)maxiters);
    int status = 0;
    if (sbuf == NULL || rbuf == NULL || half == NULL) {
        lab_fail("cannot allocate %ld bytes", o->max_bytes);
        status = 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (status)
        goto done;
    if (rank == 0)
        print_header(o, where);
    for (long bytes = o->min_bytes; bytes <= o->max_bytes; bytes = bytes ? 2 * bytes : 1) {
        int large = bytes > LARGE_THRESHOLD;
        int iters = large ? o->iters_large : o->iters, warmup = large ? o->warmup_large : o->warmup;
        int rc = MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < warmup + iters && rc == MPI_SUCCESS; i++) {
            double t0 = MPI_Wtime();
            rc = round_trip(sbuf, rbuf, (int)bytes);
            double t = MPI_Wtime() - t0;
            if (i >= warmup)
                half[i - warmup] = t * 1e6 / 2.0;
        }
        int anyfail = rc != MPI_SUCCESS;
        MPI_Allreduce(MPI_IN_PLACE, &anyfail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (anyfail) {
            char msg[MPI_MAX_ERROR_STRING] = "";
            if (rc != MPI_SUCCESS)
                MPI_Error_string(rc, msg, &len);
            lab_fail("round trip of %ld bytes failed: %s", bytes, msg);
            status = 1;
            break;
        }
        if (rank == 0) {
            double sum = 0, mn = half[0], mx = half[0];
            for (int i = 0; i < iters; i++) {
                sum += half[i];
                mn = half[i] < mn ? half[i] : mn;
                mx = half[i] > mx ? half[i] : mx;
            }
            qsort(half, (size_t)iters, sizeof(double), lab_cmp_double);
            double med = iters % 2 ? half[iters / 2] : 0.5 * (half[iters / 2 - 1] + half[iters / 2]);
            printf("%ld,%d,%.6f,%.6f,%.6f,%.6f\n", bytes, iters, sum / iters, mn, mx, med);
            fflush(stdout);
        }
    }
done:
    free(sbuf);
    free(rbuf);
    free(half);
    return status;
}

int main(int argc, char **argv)
{
    options o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    lab_set_reporter("pingpong", rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int status = parse(argc, argv, &o);
    if (status == 0) {
        if (o.help) {
            if (rank == 0)
                usage(stdout);
        } else {
            status = bench(&o);
        }
    }
    MPI_Finalize();
    return status;
}
