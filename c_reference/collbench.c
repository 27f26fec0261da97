/* collbench — the kit's benchmark driver (docs/DEVELOPING.md section 2).
 *
 * One options struct, one parser, one printer run only by rank 0. Timing follows OSU
 * micro-benchmarks: a barrier before each iteration, each rank averages its own iterations,
 * avg/min/max over ranks; plus the per-iteration max over ranks, averaged and its median.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "labcoll.h"
#include "labopts.h"
#include "labprov.h"

#define LARGE_THRESHOLD 8192
#define PROBE_TAG 0x1ac0

typedef struct {
    const char *coll;       /* allgather | bcast | reduce | allreduce */
    const char *algo;       /* registry name or native */
    long min_bytes, max_bytes;
    int iters, warmup, iters_large, warmup_large;
    const char *dtname;
    MPI_Datatype dtype;
    int dtsize;
    int root;
    int check;
    const char *format;     /* csv | osu */
    int full;
    long probe_bytes;
    int list, json, help;
} options;

static int rank, nprocs;

static void usage(FILE *out)
{
    char valid[512];
    lab_allgather_valid_names(valid, sizeof valid);
    fprintf(out,
            "usage: collbench [--coll allgather|bcast|reduce|allreduce] [--algo NAME|native]\n"
            "                 [-m MIN:MAX] [--iters N] [--warmup N] [--iters-large N] [--warmup-large N]\n"
            "                 [--datatype char|int|float|double] [--root R] [--check]\n"
            "                 [--format csv|osu] [--full] [--probe BYTES] [--list [--json]] [--help]\n\n"
            "  --coll C          collective (default allgather); bcast and reduce: native or the\n"
            "                    clones of Open MPI's ompi_chain, ompi_pipeline; allreduce: native\n"
            "  --algo NAME       allgather algorithm: %s (default native)\n"
            "  -m MIN:MAX        sizes in bytes doubling from MIN to MAX, K/M suffixes; -m MAX = 1:MAX\n"
            "                    (allgather: each process's contribution) (default 1:1M)\n"
            "  --iters/--warmup  iterations and warm-up for every size (default 1000/100 up to\n"
            "                    8 KiB, 100/10 above, as OSU)\n"
            "  --iters-large/--warmup-large  above 8 KiB only (overrides --iters/--warmup there)\n"
            "  --datatype T      char|int|float|double (default char)\n"
            "  --root R          root of bcast/reduce (default 0)\n"
            "  --check           verify every element for every size before timing\n"
            "  --format F        csv (default) or osu (OSU micro-benchmarks 7.x layout)\n"
            "  --full            with --format osu: add min, max and iterations columns (OSU -f)\n"
            "  --probe BYTES     ping-pong between ranks 0 and p-1 before each size (probe_us)\n"
            "  --list [--json]   list the allgather algorithms\n\nalgorithms:\n",
            valid);
    for (int i = 0; i < lab_allgather_registry_size; i++)
        fprintf(out, "  %s\n", lab_allgather_registry[i].name);
    fprintf(out, "  %-13s the MPI library's own call\n"
            "(what each does, its restrictions and cost: mpilab list)\n", "native");
}

/* Returns 0, or the exit status (2) after printing the message on rank 0. */
static int parse(int argc, char **argv, options *o)
{
    *o = (options){"allgather", "native", 1, 1 << 20, 1000, 100, 100, 10, "char", MPI_CHAR, 1,
                   0, 0, "csv", 0, 0, 0, 0, 0};
    const char *m = NULL;
    int iters_given = 0, warmup_given = 0, large_iters_given = 0, large_warmup_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1, rc = 0;
        if (!strcmp(a, "--check")) { o->check = 1; takes = 0; }
        else if (!strcmp(a, "--list")) { o->list = 1; takes = 0; }
        else if (!strcmp(a, "--json")) { o->json = 1; takes = 0; }
        else if (!strcmp(a, "--full") || !strcmp(a, "-f")) { o->full = 1; takes = 0; }
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { o->help = 1; takes = 0; }
        else if (!v) {
            if (!strcmp(a, "--coll") || !strcmp(a, "--algo") || !strcmp(a, "-m") ||
                !strcmp(a, "--iters") || !strcmp(a, "--warmup") || !strcmp(a, "--iters-large") ||
                !strcmp(a, "--warmup-large") || !strcmp(a, "--datatype") || !strcmp(a, "--root") ||
                !strcmp(a, "--format") || !strcmp(a, "--probe"))
                lab_fail("option %s needs a value", a);
            else
                lab_fail("unknown option '%s'; see --help", a);
            return 2;
        }
        else if (!strcmp(a, "--coll")) o->coll = v;
        else if (!strcmp(a, "--algo")) o->algo = v;
        else if (!strcmp(a, "-m")) m = v;
        else if (!strcmp(a, "--iters")) { rc = lab_parse_int_opt(a, v, 1, &o->iters); iters_given = 1; }
        else if (!strcmp(a, "--warmup")) { rc = lab_parse_int_opt(a, v, 0, &o->warmup); warmup_given = 1; }
        else if (!strcmp(a, "--iters-large")) { rc = lab_parse_int_opt(a, v, 1, &o->iters_large); large_iters_given = 1; }
        else if (!strcmp(a, "--warmup-large")) { rc = lab_parse_int_opt(a, v, 0, &o->warmup_large); large_warmup_given = 1; }
        else if (!strcmp(a, "--datatype")) o->dtname = v;
        else if (!strcmp(a, "--root")) rc = lab_parse_int_opt(a, v, 0, &o->root);
        else if (!strcmp(a, "--format")) o->format = v;
        else if (!strcmp(a, "--probe")) {
            o->probe_bytes = lab_parse_bytes(v);
            if (o->probe_bytes <= 0) {
                lab_fail("bad value '%s' for --probe; expected a positive size in bytes (K/M suffixes)", v);
                return 2;
            }
        } else {
            lab_fail("unknown option '%s'; see --help", a);
            return 2;
        }
        if (rc)
            return rc;
        i += takes;
    }
    if (o->help)
        return 0;
    /* As OSU's -i and -x: a count given for all sizes holds above 8 KiB too, unless the
     * large-size count is given as well. */
    if (iters_given && !large_iters_given)
        o->iters_large = o->iters;
    if (warmup_given && !large_warmup_given)
        o->warmup_large = o->warmup;
    if (strcmp(o->coll, "allgather") && strcmp(o->coll, "bcast") && strcmp(o->coll, "reduce") &&
        strcmp(o->coll, "allreduce")) {
        lab_fail("unknown collective '%s'; valid: allgather, bcast, reduce, allreduce", o->coll);
        return 2;
    }
    if (o->list)
        return 0;
    if (!strcmp(o->coll, "allgather")) {
        if (strcmp(o->algo, "native") && !lab_allgather_lookup(o->algo)) {
            char valid[512];
            lab_allgather_valid_names(valid, sizeof valid);
            lab_fail("unknown algorithm '%s'; valid: %s", o->algo, valid);
            return 2;
        }
    } else if (strcmp(o->algo, "native") &&
               !(!strcmp(o->coll, "bcast") && lab_bcast_lookup(o->algo)) &&
               !(!strcmp(o->coll, "reduce") && lab_reduce_lookup(o->algo))) {
        char valid[512] = "";
        if (!strcmp(o->coll, "bcast"))
            lab_bcast_valid_names(valid, sizeof valid);
        else if (!strcmp(o->coll, "reduce"))
            lab_reduce_valid_names(valid, sizeof valid);
        lab_fail("unknown algorithm '%s' for %s; valid: %s%snative", o->algo, o->coll, valid,
                 valid[0] ? ", " : "");
        return 2;
    }
    if (!strcmp(o->dtname, "char")) { o->dtype = MPI_CHAR; o->dtsize = 1; }
    else if (!strcmp(o->dtname, "int")) { o->dtype = MPI_INT; o->dtsize = sizeof(int); }
    else if (!strcmp(o->dtname, "float")) { o->dtype = MPI_FLOAT; o->dtsize = sizeof(float); }
    else if (!strcmp(o->dtname, "double")) { o->dtype = MPI_DOUBLE; o->dtsize = sizeof(double); }
    else {
        lab_fail("unknown datatype '%s'; valid: char, double, float, int", o->dtname);
        return 2;
    }
    /* Reductions on characters use MPI_SIGNED_CHAR (MPI_CHAR is not a reduction type). */
    if (o->dtype == MPI_CHAR && strstr(o->coll, "reduce"))
        o->dtype = MPI_SIGNED_CHAR;
    if (strcmp(o->format, "csv") && strcmp(o->format, "osu")) {
        lab_fail("unknown format '%s'; valid: csv, osu", o->format);
        return 2;
    }
    if (m) {
        lab_parse_range(m, 1, &o->min_bytes, &o->max_bytes);
        if (o->min_bytes <= 0 || o->max_bytes <= 0) {
            lab_fail("bad size range '%s' for -m; sizes must be positive byte counts (K/M suffixes), e.g. 32:1M", m);
            return 2;
        }
        if (o->min_bytes > o->max_bytes) {
            lab_fail("bad size range '%s' for -m; MIN %ld is larger than MAX %ld", m, o->min_bytes,
                     o->max_bytes);
            return 2;
        }
    }
    for (long b = o->min_bytes; b <= o->max_bytes; b *= 2)
        if (b % o->dtsize) {
            lab_fail("size %ld bytes is not a multiple of the %s datatype size (%d bytes); use -m with multiples of %d",
                     b, o->dtname, o->dtsize, o->dtsize);
            return 2;
        }
    if (o->root >= nprocs) {
        lab_fail("bad root %d; valid: 0..%d (nprocs %d)", o->root, nprocs - 1, nprocs);
        return 2;
    }
    return 0;
}

/* ---- the printer (rank 0 only) ---- */

static const char *osu_name(const char *coll)
{
    if (!strcmp(coll, "bcast")) return "Broadcast";
    if (!strcmp(coll, "reduce")) return "Reduce";
    if (!strcmp(coll, "allreduce")) return "Allreduce";
    return "Allgather";
}

static void print_header(const options *o)
{
    if (!strcmp(o->format, "osu")) {
        printf("\n# OSU MPI %s Latency Test v7.3\n", osu_name(o->coll));
        const char *dn = o->dtype == MPI_CHAR ? "MPI_CHAR" : o->dtype == MPI_SIGNED_CHAR ? "MPI_SIGNED_CHAR"
                         : o->dtype == MPI_INT ? "MPI_INT" : o->dtype == MPI_FLOAT ? "MPI_FLOAT"
                                                                                   : "MPI_DOUBLE";
        printf("# Datatype: %s.\n", dn);
        printf("%-10s%20s", "# Size", "Avg Latency(us)");
        if (o->full)
            printf("%20s%20s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations");
        printf("\n");
    } else {
        lab_print_provenance("collbench", 1);
        printf("# collective: %s\n# algorithm: %s\n# datatype: %s\n# root: %d\n", o->coll, o->algo,
               o->dtname, o->root);
        printf("# iterations: %d\n# warmup: %d\n# iterations_large: %d\n# warmup_large: %d\n",
               o->iters, o->warmup, o->iters_large, o->warmup_large);
        printf("# probe_bytes: %ld\n", o->probe_bytes);
        printf("bytes,count,iterations,avg_us,min_us,max_us,maxrank_avg_us,maxrank_median_us,probe_us\n");
    }
    fflush(stdout);
}

typedef struct { long bytes, count; int iters; double avg, min, max, mr_avg, mr_median, probe; } row;

static void print_row(const options *o, const row *r)
{
    if (!strcmp(o->format, "osu")) {
        printf("%-10ld%20.2f", r->bytes, r->avg);
        if (o->full)
            printf("%20.2f%20.2f%12d", r->min, r->max, r->iters);
        printf("\n");
    } else {
        printf("%ld,%ld,%d,%.3f,%.3f,%.3f,%.3f,%.3f,", r->bytes, r->count, r->iters, r->avg, r->min,
               r->max, r->mr_avg, r->mr_median);
        if (o->probe_bytes > 0)
            printf("%.3f", r->probe);
        printf("\n");
    }
    fflush(stdout);
}

/* ---- buffers, checking, timing ---- */

/* Real MPI: page-aligned and written, as OSU's buffers (send 1, receive 0); SMPI when not
 * checking: shared (content-free) memory, never touched. */
static void *bench_alloc(size_t n, int shared, int fill)
{
#ifdef SMPI_SHARED_MALLOC
    if (shared)
        return SMPI_SHARED_MALLOC(n > 0 ? n : 1);
#endif
    (void)shared;
    return lab_touched_alloc(n, fill);
}

static void bench_free(void *p, int shared)
{
    if (p == NULL)
        return;
#ifdef SMPI_SHARED_FREE
    if (shared) {
        SMPI_SHARED_FREE(p);
        return;
    }
#endif
    (void)shared;
    free(p);
}

/* Value of element i of rank r's data: small enough to sum exactly over 1000s of ranks. */
static double pattern(int r, long i, int small) { return small ? (double)((r + i) % 2) : (double)((r * 7 + i) % 100); }

static void store(void *buf, long i, double v, MPI_Datatype t)
{
    if (t == MPI_INT) ((int *)buf)[i] = (int)v;
    else if (t == MPI_FLOAT) ((float *)buf)[i] = (float)v;
    else if (t == MPI_DOUBLE) ((double *)buf)[i] = v;
    else ((signed char *)buf)[i] = (signed char)v;
}

static double load(const void *buf, long i, MPI_Datatype t)
{
    if (t == MPI_INT) return ((const int *)buf)[i];
    if (t == MPI_FLOAT) return ((const float *)buf)[i];
    if (t == MPI_DOUBLE) return ((const double *)buf)[i];
    return ((const signed char *)buf)[i];
}

static int run_once(const options *o, lab_allgather_fn fn, void *sbuf, void *rbuf, int count)
{
    if (!strcmp(o->coll, "allgather"))
        return fn(sbuf, count, o->dtype, rbuf, count, o->dtype, MPI_COMM_WORLD);
    if (!strcmp(o->coll, "bcast")) {
        const lab_bcast_algorithm *a = lab_bcast_lookup(o->algo);
        return (a ? a->fn : MPI_Bcast)(sbuf, count, o->dtype, o->root, MPI_COMM_WORLD);
    }
    if (!strcmp(o->coll, "reduce")) {
        const lab_reduce_algorithm *a = lab_reduce_lookup(o->algo);
        return (a ? a->fn : (lab_reduce_fn)MPI_Reduce)(sbuf, rbuf, count, o->dtype, MPI_SUM,
                                                       o->root, MPI_COMM_WORLD);
    }
    return MPI_Allreduce(sbuf, rbuf, count, o->dtype, MPI_SUM, MPI_COMM_WORLD);
}

/* Fill, run once, verify every element; returns 1 on failure after rank 0 printed it. */
static int check_size(const options *o, lab_allgather_fn fn, void *sbuf, void *rbuf, int count,
                      long bytes, int *mpi_rc)
{
    int ag = !strcmp(o->coll, "allgather"), bc = !strcmp(o->coll, "bcast");
    int small = !ag && !bc;
    long rn = ag ? (long)count * nprocs : count;
    for (long i = 0; i < count; i++)
        store(sbuf, i, bc ? (rank == o->root ? pattern(o->root, i, 0) : -1) : pattern(rank, i, small), o->dtype);
    for (long i = 0; i < rn; i++)
        store(rbuf, i, -1, o->dtype);
    *mpi_rc = run_once(o, fn, sbuf, rbuf, count);
    long bad = -1;
    double got = 0, want = 0;
    if (*mpi_rc == MPI_SUCCESS) {
        const void *res = bc ? sbuf : rbuf;
        int has = !(!strcmp(o->coll, "reduce") && rank != o->root);
        for (long i = 0; has && i < rn && bad < 0; i++) {
            double e;
            if (ag) e = pattern((int)(i / count), i % count, 0);
            else if (bc) e = pattern(o->root, i, 0);
            else { e = 0; for (int r = 0; r < nprocs; r++) e += pattern(r, i, 1); }
            double g = load(res, i, o->dtype);
            if (g != e) { bad = i; got = g; want = e; }
        }
    }
    double mine[4] = {(double)bad, got, want, *mpi_rc == MPI_SUCCESS ? 0 : 1};
    double *all = rank == 0 ? malloc(sizeof(double) * 4 * (size_t)nprocs) : NULL;
    MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int failed = 0;
    if (rank == 0) {
        for (int r = 0; r < nprocs && !failed; r++) {
            if (all[4 * r + 3] != 0) {
                lab_fail("check failed: algorithm %s, size %ld bytes, rank %d: MPI error", o->algo, bytes, r);
                failed = 1;
            } else if (all[4 * r] >= 0) {
                lab_fail("check failed: algorithm %s, size %ld bytes, rank %d, first wrong index %.0f: got %g expected %g",
                         o->algo, bytes, r, all[4 * r], all[4 * r + 1], all[4 * r + 2]);
                failed = 1;
            }
        }
        free(all);
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return failed;
}

/* One-way latency in µs of a ping-pong of `bytes` between rank 0 and rank p-1 (0 if p = 1). */
static double probe(long bytes, char *buf)
{
    const int reps = 10;
    double t = 0;
    int last = nprocs - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (last > 0 && (rank == 0 || rank == last)) {
        int peer = rank == 0 ? last : 0;
        double t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++) {
            if (rank == 0) {
                MPI_Send(buf, (int)bytes, MPI_CHAR, peer, PROBE_TAG, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, PROBE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, PROBE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)bytes, MPI_CHAR, peer, PROBE_TAG, MPI_COMM_WORLD);
            }
        }
        t = (MPI_Wtime() - t0) * 1e6 / (2.0 * reps);
    }
    return t;
}

static int bench(const options *o)
{
    lab_allgather_fn fn = NULL;
    if (!strcmp(o->coll, "allgather")) {
        const lab_algorithm *a = lab_allgather_lookup(o->algo);
        fn = a ? a->fn : (lab_allgather_fn)MPI_Allgather;
    }
    int ag = !strcmp(o->coll, "allgather");
    int shared = !o->check;   /* SMPI only: shared (content-free) buffers when not checking */
    lab_shared_scratch = shared;
    size_t sbytes = (size_t)o->max_bytes, rbytes = ag ? (size_t)o->max_bytes * nprocs : (size_t)o->max_bytes;
    void *sbuf = bench_alloc(sbytes, shared, 1), *rbuf = bench_alloc(rbytes, shared, 0);
    char *pbuf = o->probe_bytes > 0 ? calloc((size_t)o->probe_bytes, 1) : NULL;
    int maxiters = o->iters > o->iters_large ? o->iters : o->iters_large;
    double *times = malloc(sizeof(double) * (size_t)maxiters);
    double *tmax = rank == 0 ? malloc(sizeof(double) * (size_t)maxiters) : NULL;
    int status = sbuf == NULL || rbuf == NULL || times == NULL || (rank == 0 && tmax == NULL);
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (status)
        lab_fail("cannot allocate the buffers (%zu bytes to send, %zu to receive per rank)",
                 sbytes, rbytes);
    else if (rank == 0)
        print_header(o);
    for (long bytes = o->min_bytes; bytes <= o->max_bytes && status == 0; bytes *= 2) {
        int count = (int)(bytes / o->dtsize), rc = MPI_SUCCESS;
        int large = bytes > LARGE_THRESHOLD;
        int iters = large ? o->iters_large : o->iters, warmup = large ? o->warmup_large : o->warmup;
        if (o->check && check_size(o, fn, sbuf, rbuf, count, bytes, &rc)) {
            status = 1;
            break;
        }
        row r = {bytes, count, iters, 0, 0, 0, 0, 0, 0};
        if (o->probe_bytes > 0)
            r.probe = probe(o->probe_bytes, pbuf);
        double sum = 0;
        int anyfail = 0;
        for (int i = 0; i < warmup + iters && !anyfail; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            rc = run_once(o, fn, sbuf, rbuf, count);
            double t = MPI_Wtime() - t0;
            if (i >= warmup) {
                times[i - warmup] = t * 1e6;
                sum += t * 1e6;
            }
            /* Outside the timed region: every rank learns whether any rank's call failed, so
             * that all leave the loop together (a rank leaving alone would wait in the next
             * collective while the others wait in the next iteration's barrier). */
            anyfail = rc != MPI_SUCCESS;
            MPI_Allreduce(MPI_IN_PLACE, &anyfail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        }
        if (anyfail) {
            /* rank 0 names the failure: its own error, or the lowest failing rank's */
            int mine = rc != MPI_SUCCESS ? rank : nprocs, first;
            MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            char msg[MPI_MAX_ERROR_STRING] = "";
            int len = 0;
            if (rank == first) {
                MPI_Error_string(rc, msg, &len);
                if (lab_error_file && *lab_error_file)
                    snprintf(msg + len, sizeof msg - (size_t)len, " (%s:%d)", lab_error_file,
                             lab_error_line);
                len = (int)strlen(msg) + 1;
            }
            MPI_Bcast(&len, 1, MPI_INT, first, MPI_COMM_WORLD);
            MPI_Bcast(msg, len, MPI_CHAR, first, MPI_COMM_WORLD);
            lab_fail("algorithm %s failed at size %ld bytes on rank %d: %s", o->algo, bytes,
                     first, msg);
            status = 1;
            break;
        }
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
            r.avg = asum / nprocs;
            r.min = amin;
            r.max = amax;
            r.mr_avg = s / iters;
            r.mr_median = iters % 2 ? tmax[iters / 2] : 0.5 * (tmax[iters / 2 - 1] + tmax[iters / 2]);
            print_row(o, &r);
        }
    }
    bench_free(sbuf, shared);
    bench_free(rbuf, shared);
    free(pbuf);
    free(times);
    free(tmax);
    return status;
}

int main(int argc, char **argv)
{
    options o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    lab_set_reporter("collbench", rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int status = parse(argc, argv, &o);
    if (status == 0) {
        if (o.help) {
            if (rank == 0) usage(stdout);
        } else if (o.list) {
            if (rank == 0) {
                char names[512] = "";
                if (!strcmp(o.coll, "bcast"))
                    lab_bcast_valid_names(names, sizeof names);
                else if (!strcmp(o.coll, "reduce"))
                    lab_reduce_valid_names(names, sizeof names);
                /* the JSON lists what a sweep may ask for by name: the allgathers. A broadcast's or
                 * reduce's clone of Open MPI's algorithm is asked for by the library's name
                 * (mpilab.measure.libalgs, kit:...), so their names never shadow the library's. */
                if (strcmp(o.coll, "allgather") && o.json)
                    printf("{\"collective\": \"%s\", \"algorithms\": []}\n", o.coll);
                else if (o.json)
                    lab_allgather_print_json(stdout);
                else {
                    if (names[0]) {
                        printf("# sweeps run these as the library's algorithms they clone "
                               "(mpilab libalgs --coll %s)\n", o.coll);
                        for (char *t = strtok(names, ", "); t; t = strtok(NULL, ", "))
                            printf("%s\n", t);
                    }
                    else if (strcmp(o.coll, "allgather"))
                        printf("# no kit algorithms for %s: collbench runs the library's own call "
                               "(the library's algorithms: mpilab libalgs --coll %s)\n",
                               o.coll, o.coll);
                    else
                        for (int i = 0; i < lab_allgather_registry_size; i++)
                            printf("%s\n", lab_allgather_registry[i].name);
                    printf("%-13s the MPI library's own MPI_%c%s\n", "native",
                           toupper((unsigned char)o.coll[0]), o.coll + 1);
                    if (!strcmp(o.coll, "allgather"))
                        printf("# what each does, its restrictions and cost: mpilab list\n");
                }
            }
        } else {
            status = bench(&o);
        }
    }
    MPI_Finalize();
    return status;
}
