/* labtrace.c — a PMPI tracing library: every point-to-point call with MPI_Wtime timestamps.
 *
 * Link it into a program before the MPI library (build/<flavour>/liblabtrace.a). It defines
 * MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Sendrecv, MPI_Wait, MPI_Waitall, MPI_Waitany
 * and MPI_Waitsome, logs each call (start, end, peer, bytes, tag) and calls the PMPI_ version.
 * Works with Open MPI, MPICH and SimGrid SMPI (whose MPI_ functions are weak symbols).
 *
 * Local copies: the kit's algorithms copy on their own process through lab_local_copy
 * (allgather/common.c), which calls lab_copy_hook when it is set. This library sets it in
 * MPI_Init, so each copy is a `copy` row: dst and src are the rank itself, sbytes and rbytes
 * the bytes copied, no tag. (A weak reference: a program without liblabcoll links too.)
 *
 * What it cannot see: the library's own collectives (MPI_Bcast, MPI_Barrier, ...) use internal
 * point-to-point functions that never go through the PMPI layer. Trace algorithms written with
 * MPI point-to-point calls (c_reference/allgather, c_reference/bcast).
 *
 * Regions: tracing is on from MPI_Init; MPI_Pcontrol(0) switches it off and MPI_Pcontrol(k),
 * k > 0, switches it on and labels the following calls with region k (a "Pcontrol" row marks
 * the start of each region). Calls before any MPI_Pcontrol are in region 0.
 *
 * Clocks: in MPI_Init and again in MPI_Finalize, rank 0 ping-pongs with every rank and keeps,
 * from the round trip with the smallest duration, the offset of that rank's clock from its own
 * (Cristian's method). Both are written in the log with their round-trip times (the error of
 * an offset is at most half its round trip); the reader uses the better one.
 *
 * Output, written in MPI_Finalize: $LABTRACE_DIR/trace.<rank>.csv (default directory ".")
 *
 *   # labtrace 1
 *   # rank: 3
 *   # nprocs: 8
 *   # clock_init: <local time s> <offset s> <round trip s>
 *   # clock_final: <local time s> <offset s> <round trip s>
 *   # dropped: 0
 *   region,call,start,end,dst,sbytes,stag,src,rbytes,rtag,req,done
 *
 * Times are local MPI_Wtime seconds (subtract the offset to get rank 0's clock). Ranks are
 * MPI_COMM_WORLD ranks; -1 is MPI_ANY_SOURCE/MPI_ANY_TAG, -2 MPI_PROC_NULL, empty = not used.
 * An MPI_Isend/MPI_Irecv row has its request number in `req` and, once a Wait* completed it,
 * the end time of that call in `done` (and, for a receive, the actual source, size and tag).
 * A Wait* row lists in `req` the requests it completed, separated by spaces. A `copy` row
 * is a local copy (see above); an empty tag means the call has none.
 *
 * Two options, for the grader's schedule diagnosis (mpilab.grade.diagnose); both off by default:
 *
 *   LABTRACE_LIVE=1    keep each log current while the program runs: it is rewritten when a
 *                      rank enters a blocking call (MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Wait*)
 *                      and when it leaves it. On entry the log ends with
 *                          # blocked: <call>,<start>,<dst>,<sbytes>,<stag>,<src>,<rbytes>,<rtag>,<reqs>
 *                      (a Wait*'s `reqs`: the requests it waits for). A run that deadlocks,
 *                      crashes or is killed at its time limit thus leaves what every rank was
 *                      blocked in; a row of the table with the same call and start means it returned.
 *   LABTRACE_PROBE=S   for every send of contiguous data, write in column `data` the 4-byte words
 *                      at byte offsets 0, S, 2S, ... of the message (at most 64, space-separated):
 *                      a program that fills each block with words that name its owner lets the
 *                      reader say which blocks a message carried.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#define TRACE_TAG 0x7ace        /* clock synchronisation, before and after the program */
#define SYNC_ROUNDS 20
#define MAX_EVENTS_DEFAULT 1000000
#define MAX_PROBES 64

typedef struct {
    int region;
    const char *call;
    double start, end, done;
    int dst, stag, src, rtag;
    long long sbytes, rbytes;
    int req;                    /* Isend/Irecv: its number; -1 otherwise */
    char *completed;            /* Wait*: the requests it completed ("3 4"), or NULL */
    char *data;                 /* LABTRACE_PROBE: the probed words of a send, or NULL */
} event;

typedef struct {
    MPI_Request handle;
    int event;                  /* index of the Isend/Irecv row */
} pending;

static event *events;
static long nevents, capacity, dropped, max_events = MAX_EVENTS_DEFAULT;
static pending *reqs;
static int nreqs, reqs_cap, next_req;
static int enabled = 1, region = 0, world_rank = 0, world_size = 1;
static double sync_init[3], sync_final[3];   /* local time, offset, round trip */
static int live;                /* LABTRACE_LIVE */
static long probe_stride;       /* LABTRACE_PROBE, bytes (0: off) */

static void write_log(const char *blocked);

/* ---- recording ------------------------------------------------------------------------ */

static event *new_event(const char *call, double start, double end)
{
    if (nevents == capacity) {
        if (capacity >= max_events) {
            dropped++;
            return NULL;
        }
        long cap = capacity ? capacity * 2 : 1024;
        if (cap > max_events)
            cap = max_events;
        event *e = realloc(events, sizeof(event) * (size_t)cap);
        if (e == NULL) {
            dropped++;
            return NULL;
        }
        events = e;
        capacity = cap;
    }
    event *e = &events[nevents++];
    memset(e, 0, sizeof *e);
    e->region = region;
    e->call = call;
    e->start = start;
    e->end = end;
    e->done = -1;
    e->dst = e->src = e->stag = e->rtag = -3;   /* -3: not used by this call */
    e->sbytes = e->rbytes = -1;
    e->req = -1;
    return e;
}

/* A communicator's rank as an MPI_COMM_WORLD rank (keeps the special values). */
static int world_of(MPI_Comm comm, int r)
{
    if (r == MPI_ANY_SOURCE)
        return -1;
    if (r == MPI_PROC_NULL)
        return -2;
    if (comm == MPI_COMM_WORLD)
        return r;
    MPI_Group g, wg;
    int out = r;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(g, 1, &r, wg, &out);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    return out;
}

static int tag_of(int tag)
{
    return tag == MPI_ANY_TAG ? -1 : tag;
}

static long long bytes_of(int count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return (long long)count * size;
}

/* Size of a completed receive, and its source (world rank) and tag where the call left them
 * open (MPI_ANY_SOURCE, MPI_ANY_TAG). A named source is kept: SMPI 3.32 reports a wrong
 * MPI_SOURCE for a message a rank sends to itself. */
static void received(event *e, const MPI_Status *st, MPI_Datatype type, MPI_Comm comm)
{
    int count = 0;
    if (st->MPI_SOURCE == MPI_PROC_NULL)
        return;
    if (e->src == -1)
        e->src = world_of(comm, st->MPI_SOURCE);
    if (e->rtag == -1)
        e->rtag = st->MPI_TAG;
    if (type != MPI_DATATYPE_NULL && PMPI_Get_count(st, type, &count) == MPI_SUCCESS &&
        count != MPI_UNDEFINED)
        e->rbytes = bytes_of(count, type);
}

/* Requests: remember which row an outstanding request belongs to, and its receive type. */
typedef struct {
    MPI_Datatype type;
    MPI_Comm comm;
} recv_info;
static recv_info *rinfo;        /* parallel to events, only for Irecv rows */
static long rinfo_cap;

static void remember(MPI_Request handle, long ev, MPI_Datatype type, MPI_Comm comm)
{
    if (nreqs == reqs_cap) {
        int cap = reqs_cap ? reqs_cap * 2 : 64;
        pending *p = realloc(reqs, sizeof(pending) * (size_t)cap);
        if (p == NULL)
            return;
        reqs = p;
        reqs_cap = cap;
    }
    reqs[nreqs].handle = handle;
    reqs[nreqs].event = (int)ev;
    nreqs++;
    if (ev >= rinfo_cap) {
        long cap = rinfo_cap ? rinfo_cap * 2 : 1024;
        while (cap <= ev)
            cap *= 2;
        recv_info *r = realloc(rinfo, sizeof(recv_info) * (size_t)cap);
        if (r == NULL)
            return;
        rinfo = r;
        rinfo_cap = cap;
    }
    rinfo[ev].type = type;
    rinfo[ev].comm = comm;
}

static void request_numbers(int n, const MPI_Request *handles, char *list, size_t len)
{
    for (int i = 0; i < n; i++) {
        if (handles[i] == MPI_REQUEST_NULL)
            continue;
        for (int j = 0; j < nreqs; j++) {
            if (memcmp(&reqs[j].handle, &handles[i], sizeof handles[i]) != 0)
                continue;
            size_t used = strlen(list);
            snprintf(list + used, len - used, used ? " %d" : "%d", events[reqs[j].event].req);
            break;
        }
    }
}

/* A request completed by a Wait* that ended at `end`: fill its row, note it in `list`. */
static void complete(MPI_Request handle, const MPI_Status *st, double end, char *list, size_t len)
{
    for (int i = 0; i < nreqs; i++) {
        if (memcmp(&reqs[i].handle, &handle, sizeof handle) != 0)
            continue;
        event *e = &events[reqs[i].event];
        e->done = end;
        if (e->src != -3 && st != NULL)
            received(e, st, rinfo[reqs[i].event].type, rinfo[reqs[i].event].comm);
        size_t used = strlen(list);
        snprintf(list + used, len - used, used ? " %d" : "%d", e->req);
        reqs[i] = reqs[--nreqs];
        return;
    }
}

/* ---- the grader's options: live logs and probed payloads ------------------------------------ */

/* LABTRACE_PROBE: the words of a send's payload every probe_stride bytes ("" when not probed). */
static char *probe_words(const void *buf, int count, MPI_Datatype type)
{
    MPI_Aint lb, extent;
    int size;
    if (!probe_stride || buf == NULL || count <= 0 ||
        PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_size(type, &size) != MPI_SUCCESS || lb != 0 || extent != size)
        return NULL;            /* nothing asked, nothing sent, or not one contiguous piece */
    size_t len = MAX_PROBES * 12 + 1, used = 0;
    char *out = malloc(len);
    if (out == NULL)
        return NULL;
    out[0] = '\0';
    long long n = (long long)count * size;
    for (long long off = 0, k = 0; off + 4 <= n && k < MAX_PROBES; off += probe_stride, k++) {
        int w;
        memcpy(&w, (const char *)buf + off, sizeof w);
        used += (size_t)snprintf(out + used, len - used, used ? " %d" : "%d", w);
    }
    return out;
}

static void attach(event *e, char *data)
{
    if (e)
        e->data = data;
    else
        free(data);
}

static void field(char *line, size_t len, long long v)
{
    size_t used = strlen(line);
    if (v == -3)
        snprintf(line + used, len - used, ",");
    else
        snprintf(line + used, len - used, "%lld,", v);
}

/* Forward declaration: the request numbers of the handles a Wait* waits for. */
static void request_numbers(int n, const MPI_Request *handles, char *list, size_t len);

/* LABTRACE_LIVE: rewrite the log, ending with the blocking call this rank is entering. */
static void entering(const char *call, double start, int dst, long long sbytes, int stag, int src,
                     long long rbytes, int rtag, int n, const MPI_Request *handles)
{
    if (!live)
        return;
    char line[1024], list[512] = "";
    snprintf(line, sizeof line, "%s,%.9f,", call, start);
    field(line, sizeof line, dst);
    field(line, sizeof line, sbytes);
    field(line, sizeof line, stag);
    field(line, sizeof line, src);
    field(line, sizeof line, rbytes);
    field(line, sizeof line, rtag);
    if (n > 0)
        request_numbers(n, handles, list, sizeof list);
    size_t used = strlen(line);
    snprintf(line + used, sizeof line - used, "%s", list);
    write_log(line);
}

/* LABTRACE_LIVE: rewrite the log once a blocking call has returned (and been recorded). */
static void left(void)
{
    if (live)
        write_log(NULL);
}

/* ---- clock synchronisation -------------------------------------------------------------- */

static void clock_sync(double out[3])
{
    double got[2] = {0, 0}, local = PMPI_Wtime(), t = 0;
    PMPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == 0) {
        for (int r = 1; r < world_size; r++) {
            double best = 1e300, off = 0;
            for (int k = 0; k < SYNC_ROUNDS; k++) {
                double t0 = PMPI_Wtime();
                PMPI_Send(NULL, 0, MPI_BYTE, r, TRACE_TAG, MPI_COMM_WORLD);
                PMPI_Recv(&t, 1, MPI_DOUBLE, r, TRACE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t1 = PMPI_Wtime();
                if (t1 - t0 < best) {
                    best = t1 - t0;
                    off = t - (t0 + t1) / 2;
                }
            }
            double res[2] = {off, best};
            PMPI_Send(res, 2, MPI_DOUBLE, r, TRACE_TAG, MPI_COMM_WORLD);
        }
        local = PMPI_Wtime();
    } else {
        for (int k = 0; k < SYNC_ROUNDS; k++) {
            PMPI_Recv(NULL, 0, MPI_BYTE, 0, TRACE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            t = PMPI_Wtime();
            PMPI_Send(&t, 1, MPI_DOUBLE, 0, TRACE_TAG, MPI_COMM_WORLD);
        }
        local = t;
        PMPI_Recv(got, 2, MPI_DOUBLE, 0, TRACE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    out[0] = local;
    out[1] = got[0];
    out[2] = got[1];
}

/* lab_copy_hook of liblabcoll (labcoll.h), if the program has it. */
extern void (*lab_copy_hook)(double start, double end, long long bytes) __attribute__((weak));

/* A local copy made by one of the kit's algorithms: a `copy` row. */
static void record_copy(double start, double end, long long bytes)
{
    if (!enabled)
        return;
    event *e = new_event("copy", start, end);
    if (e) {
        e->dst = e->src = world_rank;
        e->sbytes = e->rbytes = bytes;
    }
}

static void start_tracing(void)
{
    const char *m = getenv("LABTRACE_MAX_EVENTS");
    if (m != NULL && atol(m) > 0)
        max_events = atol(m);
    const char *l = getenv("LABTRACE_LIVE");
    live = l != NULL && atoi(l) > 0;
    const char *s = getenv("LABTRACE_PROBE");
    if (s != NULL && atol(s) > 0)
        probe_stride = atol(s);
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (&lab_copy_hook != NULL)
        lab_copy_hook = record_copy;
    clock_sync(sync_init);
    if (live)
        write_log(NULL);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        start_tracing();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        start_tracing();
    return rc;
}

static void write_log(const char *blocked)
{
    const char *dir = getenv("LABTRACE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.%d.csv", dir && *dir ? dir : ".", world_rank);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "labtrace: rank %d cannot write %s\n", world_rank, path);
        return;
    }
    fprintf(f, "# labtrace 1\n# rank: %d\n# nprocs: %d\n", world_rank, world_size);
    fprintf(f, "# clock_init: %.9f %.9f %.9f\n# clock_final: %.9f %.9f %.9f\n# dropped: %ld\n",
            sync_init[0], sync_init[1], sync_init[2], sync_final[0], sync_final[1], sync_final[2],
            dropped);
    fprintf(f, "region,call,start,end,dst,sbytes,stag,src,rbytes,rtag,req,done,data\n");
    for (long i = 0; i < nevents; i++) {
        const event *e = &events[i];
        fprintf(f, "%d,%s,%.9f,%.9f,", e->region, e->call, e->start, e->end);
        if (e->dst != -3)
            fprintf(f, "%d,%lld,", e->dst, e->sbytes);
        else
            fputs(",,", f);
        if (e->stag != -3)
            fprintf(f, "%d", e->stag);
        fputc(',', f);
        if (e->src != -3)
            fprintf(f, "%d,%lld,", e->src, e->rbytes);
        else
            fputs(",,", f);
        if (e->rtag != -3)
            fprintf(f, "%d", e->rtag);
        fputc(',', f);
        if (e->completed)
            fprintf(f, "%s,", e->completed);
        else if (e->req >= 0)
            fprintf(f, "%d,", e->req);
        else
            fputc(',', f);
        if (e->done >= 0)
            fprintf(f, "%.9f", e->done);
        fprintf(f, ",%s\n", e->data ? e->data : "");
    }
    if (blocked)
        fprintf(f, "# blocked: %s\n", blocked);
    fclose(f);
}

int MPI_Finalize(void)
{
    clock_sync(sync_final);
    if (&lab_copy_hook != NULL)
        lab_copy_hook = NULL;
    write_log(NULL);
    for (long i = 0; i < nevents; i++) {
        free(events[i].completed);
        free(events[i].data);
    }
    free(events);
    free(reqs);
    free(rinfo);
    events = NULL;
    reqs = NULL;
    rinfo = NULL;
    nevents = capacity = 0;
    nreqs = reqs_cap = 0;
    rinfo_cap = 0;
    return PMPI_Finalize();
}

int MPI_Pcontrol(const int level, ...)
{
    enabled = level > 0;
    if (enabled) {
        region = level;
        double t = PMPI_Wtime();
        new_event("Pcontrol", t, t);
    }
    return MPI_SUCCESS;
}

/* ---- point-to-point ----------------------------------------------------------------------- */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (!enabled)
        return PMPI_Send(buf, count, type, dest, tag, comm);
    char *data = probe_words(buf, count, type);
    double t0 = PMPI_Wtime();
    entering("Send", t0, world_of(comm, dest), bytes_of(count, type), tag, -3, -3, -3, 0, NULL);
    int rc = PMPI_Send(buf, count, type, dest, tag, comm);
    event *e = new_event("Send", t0, PMPI_Wtime());
    if (e) {
        e->dst = world_of(comm, dest);
        e->sbytes = bytes_of(count, type);
        e->stag = tag;
    }
    attach(e, data);
    left();
    return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    if (!enabled)
        return PMPI_Recv(buf, count, type, source, tag, comm, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    double t0 = PMPI_Wtime();
    entering("Recv", t0, -3, -3, -3, world_of(comm, source), bytes_of(count, type), tag_of(tag), 0, NULL);
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
    event *e = new_event("Recv", t0, PMPI_Wtime());
    if (e) {
        e->src = world_of(comm, source);
        e->rbytes = bytes_of(count, type);
        e->rtag = tag_of(tag);
        if (rc == MPI_SUCCESS)
            received(e, st, type, comm);
    }
    left();
    return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (!enabled)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    char *data = probe_words(sendbuf, sendcount, sendtype);
    double t0 = PMPI_Wtime();
    entering("Sendrecv", t0, world_of(comm, dest), bytes_of(sendcount, sendtype), sendtag,
             world_of(comm, source), bytes_of(recvcount, recvtype), tag_of(recvtag), 0, NULL);
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                           recvtype, source, recvtag, comm, st);
    event *e = new_event("Sendrecv", t0, PMPI_Wtime());
    attach(e, data);
    if (e) {
        e->dst = world_of(comm, dest);
        e->sbytes = bytes_of(sendcount, sendtype);
        e->stag = sendtag;
        e->src = world_of(comm, source);
        e->rbytes = bytes_of(recvcount, recvtype);
        e->rtag = tag_of(recvtag);
        if (rc == MPI_SUCCESS)
            received(e, st, recvtype, comm);
    }
    left();
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    if (!enabled)
        return PMPI_Isend(buf, count, type, dest, tag, comm, request);
    char *data = probe_words(buf, count, type);
    double t0 = PMPI_Wtime();
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, request);
    event *e = new_event("Isend", t0, PMPI_Wtime());
    attach(e, data);
    if (e) {
        e->dst = world_of(comm, dest);
        e->sbytes = bytes_of(count, type);
        e->stag = tag;
        e->req = next_req++;
        if (rc == MPI_SUCCESS)
            remember(*request, e - events, MPI_DATATYPE_NULL, comm);
    }
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    if (!enabled)
        return PMPI_Irecv(buf, count, type, source, tag, comm, request);
    double t0 = PMPI_Wtime();
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
    event *e = new_event("Irecv", t0, PMPI_Wtime());
    if (e) {
        e->src = world_of(comm, source);
        e->rbytes = bytes_of(count, type);
        e->rtag = tag_of(tag);
        e->req = next_req++;
        if (rc == MPI_SUCCESS)
            remember(*request, e - events, type, comm);
    }
    return rc;
}

/* Log a Wait* call that completed handles[i] for every i with done[i] (statuses may be NULL). */
static void log_wait(const char *call, double t0, double t1, int n, const MPI_Request *handles,
                     const int *done, const MPI_Status *statuses)
{
    event *e = new_event(call, t0, t1);
    size_t len = (size_t)n * 12 + 1;
    char *list = calloc(len, 1);
    if (list == NULL)
        return;
    for (int i = 0; i < n; i++)
        if (done[i] && handles[i] != MPI_REQUEST_NULL)
            complete(handles[i], statuses ? &statuses[i] : NULL, t1, list, len);
    if (e)
        e->completed = list;
    else
        free(list);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (!enabled)
        return PMPI_Wait(request, status);
    MPI_Request h = *request;
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    double t0 = PMPI_Wtime();
    entering("Wait", t0, -3, -3, -3, -3, -3, -3, 1, &h);
    int rc = PMPI_Wait(request, st);
    int one = rc == MPI_SUCCESS;
    log_wait("Wait", t0, PMPI_Wtime(), 1, &h, &one, st);
    left();
    return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    if (!enabled || count <= 0)
        return PMPI_Waitall(count, requests, statuses);
    MPI_Request *h = malloc(sizeof(MPI_Request) * (size_t)count);
    int *done = malloc(sizeof(int) * (size_t)count);
    MPI_Status *own = statuses == MPI_STATUSES_IGNORE
                          ? malloc(sizeof(MPI_Status) * (size_t)count) : statuses;
    if (h == NULL || done == NULL || own == NULL) {
        free(h);
        free(done);
        if (own != statuses)
            free(own);
        return PMPI_Waitall(count, requests, statuses);
    }
    memcpy(h, requests, sizeof(MPI_Request) * (size_t)count);
    double t0 = PMPI_Wtime();
    entering("Waitall", t0, -3, -3, -3, -3, -3, -3, count, h);
    int rc = PMPI_Waitall(count, requests, own);
    for (int i = 0; i < count; i++)
        done[i] = rc == MPI_SUCCESS;
    log_wait("Waitall", t0, PMPI_Wtime(), count, h, done, own);
    left();
    free(h);
    free(done);
    if (own != statuses)
        free(own);
    return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    if (!enabled || count <= 0)
        return PMPI_Waitany(count, requests, index, status);
    MPI_Request *h = malloc(sizeof(MPI_Request) * (size_t)count);
    if (h == NULL)
        return PMPI_Waitany(count, requests, index, status);
    memcpy(h, requests, sizeof(MPI_Request) * (size_t)count);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    double t0 = PMPI_Wtime();
    entering("Waitany", t0, -3, -3, -3, -3, -3, -3, count, h);
    int rc = PMPI_Waitany(count, requests, index, st);
    double t1 = PMPI_Wtime();
    int one = 1;
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED)
        log_wait("Waitany", t0, t1, 1, &h[*index], &one, st);
    else
        log_wait("Waitany", t0, t1, 0, h, &one, NULL);
    free(h);
    left();
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    if (!enabled || incount <= 0)
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    MPI_Request *h = malloc(sizeof(MPI_Request) * (size_t)incount);
    MPI_Request *hit = malloc(sizeof(MPI_Request) * (size_t)incount);
    int *done = malloc(sizeof(int) * (size_t)incount);
    MPI_Status *own = statuses == MPI_STATUSES_IGNORE
                          ? malloc(sizeof(MPI_Status) * (size_t)incount) : statuses;
    if (h == NULL || hit == NULL || done == NULL || own == NULL) {
        free(h);
        free(hit);
        free(done);
        if (own != statuses)
            free(own);
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    }
    memcpy(h, requests, sizeof(MPI_Request) * (size_t)incount);
    double t0 = PMPI_Wtime();
    entering("Waitsome", t0, -3, -3, -3, -3, -3, -3, incount, h);
    int rc = PMPI_Waitsome(incount, requests, outcount, indices, own);
    int n = (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) ? *outcount : 0;
    for (int i = 0; i < n; i++) {
        hit[i] = h[indices[i]];
        done[i] = 1;
    }
    log_wait("Waitsome", t0, PMPI_Wtime(), n, hit, done, own);
    left();
    free(h);
    free(hit);
    free(done);
    if (own != statuses)
        free(own);
    return rc;
}
