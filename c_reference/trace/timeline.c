/* timeline — run one collective a few times under the labtrace PMPI library.
 *
 *   timeline [--coll allgather|bcast] --algo NAME [-b BYTES] [--reps N] [--warmup N] [--root R]
 *
 * Linked with liblabtrace.a: every point-to-point call of the algorithm is logged to
 * $LABTRACE_DIR/trace.<rank>.csv. Repetition k (1..N) is region k of the log (MPI_Pcontrol(k)
 * after a barrier, MPI_Pcontrol(0) after the call); warm-up runs and the data checks are not
 * traced. Every repetition's result is checked element by element.
 *
 * Allgather algorithms come from the registry (BYTES = each rank's block); bcast from the
 * broadcasts' registry (BYTES = the buffer): the kit's binomial tree, which is lab 6's task and is
 * built in only on the instructor's side (solutions/c_reference/bcast); elsewhere --coll bcast
 * says so. "native" is refused: the library's own
 * collectives never pass through the PMPI layer, so there would be nothing to see.
 *
 * Output (rank 0): "# key: value" lines, then "rep,max_us" with each repetition's time
 * (the slowest rank's, between the barrier and its return).
 * Errors: "timeline: ..." on stderr, exit 2 for bad usage, 1 for a wrong result or MPI error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "labcoll.h"
#include "labopts.h"
#include "labprov.h"

static int rank, nprocs;

/* What --coll bcast can run: the registry's broadcasts, and why the kit's own are missing from a
 * student's build (its clones of Open MPI's chain and pipeline are not lab 6's answers). */
static const char *bcast_names(char *buf, size_t len)
{
    static const char why[] = "the kit's binomial and pipeline broadcasts are lab 6's tasks: they are "
                              "on the instructor's side, solutions/c_reference/bcast";
    lab_bcast_valid_names(buf, len);
    size_t used = strlen(buf);
    if (!used)
        snprintf(buf, len, "none in this build (%s)", why);
    else if (!strstr(buf, "binomial") && used < len)
        snprintf(buf + used, len - used, " (%s)", why);
    return buf;
}

static int usage_error(const char *msg, const char *val)
{
    char valid[512], bc[256];
    lab_allgather_valid_names(valid, sizeof valid);
    lab_fail(msg, val);
    lab_fail("usage: timeline [--coll allgather|bcast] --algo NAME [-b BYTES] [--reps N] "
             "[--warmup N] [--root R]; allgather algorithms: %s (not native); bcast: %s",
             valid, bcast_names(bc, sizeof bc));
    return 2;
}

static unsigned char expected(int owner, long i)
{
    return (unsigned char)(owner * 31 + i * 7 + 1);
}

int main(int argc, char **argv)
{
    const char *coll = "allgather", *algo = NULL;
    long bytes = 1024;
    int reps = 3, warmup = 1, root = 0, status = 0;

    MPI_Init(&argc, &argv);
    MPI_Pcontrol(0);            /* nothing is traced until the first repetition */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    lab_set_reporter("timeline", rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    for (int i = 1; i < argc && status == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = !strcmp(a, "--coll") || !strcmp(a, "--algo") || !strcmp(a, "-b") ||
                    !strcmp(a, "--reps") || !strcmp(a, "--warmup") || !strcmp(a, "--root");
        if (!takes) {
            status = usage_error("unknown option '%s'", a);
            break;
        }
        if (v == NULL) {
            status = usage_error("option '%s' needs a value", a);
            break;
        }
        i++;
        if (!strcmp(a, "--coll"))
            coll = v;
        else if (!strcmp(a, "--algo"))
            algo = v;
        else if (!strcmp(a, "-b") && ((bytes = lab_parse_bytes(v)) < 0 || bytes > 1L << 30))
            status = usage_error("bad size '%s'; expected bytes (up to 1G) with an optional K or M", v);
        else if (!strcmp(a, "--reps") && lab_parse_int(v, 1, &reps))
            status = usage_error("bad --reps '%s'; expected an integer >= 1", v);
        else if (!strcmp(a, "--warmup") && lab_parse_int(v, 0, &warmup))
            status = usage_error("bad --warmup '%s'; expected an integer >= 0", v);
        else if (!strcmp(a, "--root") && (lab_parse_int(v, 0, &root) || root >= nprocs))
            status = usage_error("bad --root '%s'; expected a rank of the communicator", v);
    }
    lab_allgather_fn ag = NULL;
    lab_bcast_fn bc = NULL;
    int is_ag = !strcmp(coll, "allgather");
    if (status == 0 && !is_ag && strcmp(coll, "bcast"))
        status = usage_error("unknown collective '%s'; valid: allgather, bcast", coll);
    if (status == 0 && algo == NULL)
        status = usage_error("%s--algo is required", "");
    if (status == 0 && !strcmp(algo, "native"))
        status = usage_error("'%s' cannot be traced: the library's own collectives bypass the "
                             "PMPI layer", algo);
    if (status == 0 && is_ag) {
        const lab_algorithm *row = lab_allgather_lookup(algo);
        if (row == NULL)
            status = usage_error("unknown allgather algorithm '%s'", algo);
        else
            ag = row->fn;
    } else if (status == 0) {
        const lab_bcast_algorithm *row = lab_bcast_lookup(algo);
        char fmt[320], names[256];
        if (row != NULL) {
            bc = row->fn;
        } else {
            snprintf(fmt, sizeof fmt, "unknown bcast algorithm '%%s'; valid: %s",
                     bcast_names(names, sizeof names));
            status = usage_error(fmt, algo);
        }
    }
    if (status != 0) {
        MPI_Finalize();
        return status;
    }

    size_t total = is_ag ? (size_t)bytes * (size_t)nprocs : (size_t)bytes;
    unsigned char *sbuf = malloc(bytes > 0 ? (size_t)bytes : 1);
    unsigned char *rbuf = malloc(total > 0 ? total : 1);
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (rank == 0) {
        lab_print_provenance("timeline", 1);
        printf("# collective: %s\n# algorithm: %s\n# bytes: %ld\n# root: %d\n# reps: %d\n"
               "# warmup: %d\n", coll, algo, bytes, root, reps, warmup);
        printf("rep,max_us\n");
    }
    for (int it = 0; it < warmup + reps && status == 0; it++) {
        int traced = it >= warmup;
        for (long i = 0; i < bytes; i++)
            sbuf[i] = expected(rank, i);
        memset(rbuf, 0, total > 0 ? total : 1);
        if (!is_ag && rank == root)
            memcpy(rbuf, sbuf, (size_t)bytes);
        MPI_Barrier(MPI_COMM_WORLD);
        if (traced)
            MPI_Pcontrol(it - warmup + 1);
        double t0 = MPI_Wtime();
        int rc = is_ag ? ag(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD)
                       : bc(rbuf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        if (traced)
            MPI_Pcontrol(0);
        /* Check every byte: block b of an allgather comes from rank b; a bcast from the root. */
        long bad = -1;
        for (size_t i = 0; rc == MPI_SUCCESS && i < total && bad < 0; i++) {
            int owner = is_ag ? (int)(i / (size_t)bytes) : root;
            long off = is_ag ? (long)(i % (size_t)bytes) : (long)i;
            if (rbuf[i] != expected(owner, off))
                bad = (long)i;
        }
        int mine = rc != MPI_SUCCESS ? 2 : bad >= 0, worst;
        double tmax;
        MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (mine == 2)
            fprintf(stderr, "timeline: %s %s failed on rank %d with MPI error %d (%s:%d)\n", coll,
                    algo, rank, rc, lab_error_file, lab_error_line);
        else if (mine == 1)
            fprintf(stderr, "timeline: %s %s gave a wrong byte at index %ld on rank %d\n", coll,
                    algo, bad, rank);
        if (worst)
            status = 1;
        else if (traced)
            times[it - warmup] = tmax * 1e6;
    }
    if (rank == 0 && status == 0)
        for (int r = 0; r < reps; r++)
            printf("%d,%.3f\n", r + 1, times[r]);
    free(sbuf);
    free(rbuf);
    free(times);
    MPI_Finalize();
    return status;
}
