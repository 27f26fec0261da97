/* harness.h — what the grader's case harnesses share (check_student.c, check_bcast.c,
 * check_reduce.c); mpilab.grade.casedata is the grader's side of every file named here.
 *
 * No verdict is made in the student's process. The grader (trusted Python) chooses every case
 * and every rank's input, and later compares what each rank's buffers hold with what it
 * computes itself; the harness only runs the cases and hands the buffers back:
 *
 *   plan          the cases, one line each (the same for every rank), written by the grader:
 *                     # mpilab-plan 1 guard=<byte> fill=<byte>
 *                     <seq>\t<kind>\t<type>\t<count>\t<comm>\t<root>\t<in_place>\t<segsize>\t<detail>
 *                 type char|int|double; comm world|halves (odd and even ranks apart, in reversed
 *                 order); detail is for people.
 *   in.<rank>     this rank's input of every case: records {int32 seq; int64 bytes; bytes},
 *                 random bytes the grader chose. Each rank reads its own file and deletes it,
 *                 and the ranks meet in a barrier before any student code runs, so another
 *                 rank's data can reach a rank only in a message. Nothing is derived from a
 *                 seed, so sending a seed cannot stand in for sending the data.
 *   out.<rank>    written here, one record per case this rank finished (hx_emit): the case's
 *                 buffers as they are after the student's call, with what changed in the guard
 *                 bytes around each (so a write past either end shows), the return code,
 *                 the library collectives it called while it ran, and the point-to-point
 *                 messages it sent and posted (peers as ranks of the case's communicator).
 *   state.<rank>  one line, rewritten when the student's code enters and leaves a blocking
 *                 call: the case and the call it is in, and the peers it waits for, so a run
 *                 that hangs, crashes or is killed still says where every rank was.
 *   error.<rank>  written only when the library raises an MPI error on this rank (hx_on_error):
 *                 "seq=S call=MPI_NAME error=TEXT", the library's MPI_Error_string of it. The
 *                 library's default handler would print the same through the launcher, which
 *                 can lose it (Open MPI 4.1's mpirun under load: ORTE_ERROR_LOG in
 *                 show_help.c); a file in the run's directory cannot be lost that way.
 *
 * The MPI functions below (point-to-point calls and every collective) are defined here and
 * pass each call on to the library through its PMPI_ name: the student's object is linked
 * against these, so while the student's function runs every message and every library
 * collective is seen, also one reached through a function pointer. The grader refuses, before
 * linking, an object that names a PMPI_ function or any other way around them
 * (mpilab.grade.symbols).
 *
 * A case that hangs: with a case time limit (hx_arm), SIGALRM ends every rank and rank 0 prints
 * "TIMEOUT <seq>". A crash ends the program; the grader finds the case from the records.
 */
#ifndef MPILAB_HARNESS_H
#define MPILAB_HARNESS_H

#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HX_MAX_CASES 1024
#define HX_MAX_MSGS 4096
#define HX_MAX_COLLS 16
#define HX_MAX_PENDING 256

/* ---- the plan ------------------------------------------------------------------------------ */

typedef struct {
    int seq;
    char kind[32];
    char type[8];
    long count;
    char comm[8];
    int root;
    int in_place;
    long segsize;
    char detail[128];
    const unsigned char *input;   /* this rank's input (NULL: none) */
    long input_bytes;
} hx_case;

static hx_case hx_cases[HX_MAX_CASES];
static int hx_ncases;
static unsigned char hx_guard = 0xab, hx_fill = 0xee;
static int hx_world_rank, hx_world_size;

static void hx_fail(const char *what)
{
    fprintf(stderr, "rank %d: %s: the case harness runs under mpilab's grader, which writes its "
            "files (mpilab.grade.casedata)\n", hx_world_rank, what);
    fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, 2);
}

static MPI_Datatype hx_type(const hx_case *c)
{
    if (strcmp(c->type, "char") == 0) return MPI_CHAR;
    if (strcmp(c->type, "double") == 0) return MPI_DOUBLE;
    return MPI_INT;
}

static void hx_read_plan(void)
{
    FILE *f = fopen("plan", "r");
    char line[512];
    unsigned g = 0xab, fl = 0xee;
    if (!f) hx_fail("the file plan is missing");
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            if (sscanf(line, "# mpilab-plan 1 guard=%u fill=%u", &g, &fl) == 2) {
                hx_guard = (unsigned char)g;
                hx_fill = (unsigned char)fl;
            }
            continue;
        }
        if (hx_ncases == HX_MAX_CASES) break;
        hx_case *c = &hx_cases[hx_ncases];
        memset(c, 0, sizeof *c);
        if (sscanf(line, "%d\t%31[^\t]\t%7[^\t]\t%ld\t%7[^\t]\t%d\t%d\t%ld\t%127[^\n]", &c->seq, c->kind,
                   c->type, &c->count, c->comm, &c->root, &c->in_place, &c->segsize, c->detail) >= 8)
            hx_ncases++;
    }
    fclose(f);
}

static unsigned char *hx_inputs;

/* Read this rank's input file, delete it, and wait for every rank to have done the same. */
static void hx_read_inputs(void)
{
    char name[32];
    snprintf(name, sizeof name, "in.%d", hx_world_rank);
    FILE *f = fopen(name, "rb");
    if (!f) hx_fail("its input file is missing");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    hx_inputs = malloc((size_t)size + 1);
    if (!hx_inputs || fread(hx_inputs, 1, (size_t)size, f) != (size_t)size) hx_fail("its input file is unreadable");
    fclose(f);
    unlink(name);
    for (long at = 0; at + 12 <= size;) {
        int32_t seq;
        int64_t n;
        memcpy(&seq, hx_inputs + at, 4);
        memcpy(&n, hx_inputs + at + 4, 8);
        at += 12;
        if (n < 0 || at + n > size) hx_fail("its input file is cut short");
        for (int i = 0; i < hx_ncases; i++)
            if (hx_cases[i].seq == seq) {
                hx_cases[i].input = hx_inputs + at;
                hx_cases[i].input_bytes = (long)n;
            }
        at += n;
    }
}

/* ---- what the student's function does, seen from here ------------------------------------- */

typedef struct {
    int32_t dir;      /* 0 sent, 1 receive posted */
    int32_t peer;     /* rank in the communicator of the call */
    int32_t tag;
    int32_t call;     /* index in hx_call_names */
    int64_t bytes;
} hx_msg;

static const char *hx_call_names[] = {"Send", "Ssend", "Rsend", "Isend", "Issend", "Irsend", "Recv",
                                      "Irecv", "Sendrecv", "Sendrecv_replace", "Wait", "Waitall",
                                      "Waitany", "Waitsome", "Probe"};
enum { C_SEND, C_SSEND, C_RSEND, C_ISEND, C_ISSEND, C_IRSEND, C_RECV, C_IRECV, C_SENDRECV, C_REPLACE,
       C_WAIT, C_WAITALL, C_WAITANY, C_WAITSOME, C_PROBE };

static int hx_in_student, hx_current_seq;
/* The library call the program is in, for hx_on_error: an index in hx_call_names, or a
 * collective's name; -1 / NULL between calls. */
static int hx_calling_p2p = -1;
static const char *hx_calling_coll;
static hx_msg hx_msgs[HX_MAX_MSGS];
static int hx_nmsgs, hx_msgs_dropped;
static char hx_colls[HX_MAX_COLLS][48];
static int hx_ncolls;
static int hx_state_fd = -1;

static struct {
    MPI_Request handle;
    int dir, peer;
} hx_pending[HX_MAX_PENDING];
static int hx_npending;

static void hx_note(int dir, int call, int peer, int tag, long long bytes)
{
    hx_calling_p2p = call;
    if (!hx_in_student) return;
    if (hx_nmsgs == HX_MAX_MSGS) {
        hx_msgs_dropped++;
        return;
    }
    hx_msg *m = &hx_msgs[hx_nmsgs++];
    m->dir = dir;
    m->call = call;
    m->peer = peer;
    m->tag = tag;
    m->bytes = bytes;
}

static long long hx_bytes(int count, MPI_Datatype t)
{
    int size = 0;
    PMPI_Type_size(t, &size);
    return (long long)count * size;
}

/* A rank of comm as a rank of MPI_COMM_WORLD (-1 any source, -2 MPI_PROC_NULL). */
static int hx_world(MPI_Comm comm, int r)
{
    if (r == MPI_ANY_SOURCE) return -1;
    if (r == MPI_PROC_NULL || r < 0) return -2;
    if (comm == MPI_COMM_WORLD) return r;
    MPI_Group g, wg;
    int out = r;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(g, 1, &r, wg, &out);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    return out == MPI_UNDEFINED ? -2 : out;
}

static void hx_remember(MPI_Request r, int dir, int peer)
{
    if (!hx_in_student || hx_npending == HX_MAX_PENDING) return;
    hx_pending[hx_npending].handle = r;
    hx_pending[hx_npending].dir = dir;
    hx_pending[hx_npending].peer = peer;
    hx_npending++;
}

static void hx_forget(MPI_Request r)
{
    for (int i = 0; i < hx_npending; i++)
        if (hx_pending[i].handle == r) {
            hx_pending[i] = hx_pending[--hx_npending];
            return;
        }
}

/* The state line: "seq=S call=NAME" then "send=PEER" / "recv=PEER" (ranks of MPI_COMM_WORLD, -1:
 * any source) for each peer it waits for;
 * "seq=S call=-" when the student's code is not in a blocking call, "seq=S call=returned" once
 * the student's function has returned. */
static void hx_state(int call, int send_to, int recv_from, const MPI_Request *reqs, int nreqs)
{
    /* send_to and recv_from are world ranks already (hx_world), -2 or -3: none */
    hx_calling_p2p = call;
    if (hx_state_fd < 0 || !hx_in_student) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "seq=%d call=%s", hx_current_seq,
                     call == -2 ? "returned" : call < 0 ? "-" : hx_call_names[call]);
    if (send_to >= 0 && n < 900)
        n += snprintf(line + n, sizeof line - (size_t)n, " send=%d", send_to);
    if (recv_from >= -1 && n < 900)
        n += snprintf(line + n, sizeof line - (size_t)n, " recv=%d", recv_from);
    for (int i = 0; i < nreqs && n < 900; i++)
        for (int j = 0; j < hx_npending; j++)
            if (reqs[i] != MPI_REQUEST_NULL && hx_pending[j].handle == reqs[i])
                n += snprintf(line + n, sizeof line - (size_t)n, " %s=%d", hx_pending[j].dir ? "recv" : "send",
                              hx_pending[j].peer);
    while (n < 1000) line[n++] = ' ';
    line[n++] = '\n';
    if (pwrite(hx_state_fd, line, (size_t)n, 0) < 0) hx_state_fd = -1;
}

#define HX_DONE() hx_state(-1, -3, -3, NULL, 0)

int MPI_Send(const void *b, int c, MPI_Datatype t, int dst, int tag, MPI_Comm comm)
{
    hx_note(0, C_SEND, dst, tag, hx_bytes(c, t));
    hx_state(C_SEND, hx_in_student ? hx_world(comm, dst) : -3, -3, NULL, 0);
    int rc = PMPI_Send(b, c, t, dst, tag, comm);
    HX_DONE();
    return rc;
}

int MPI_Ssend(const void *b, int c, MPI_Datatype t, int dst, int tag, MPI_Comm comm)
{
    hx_note(0, C_SSEND, dst, tag, hx_bytes(c, t));
    hx_state(C_SSEND, hx_in_student ? hx_world(comm, dst) : -3, -3, NULL, 0);
    int rc = PMPI_Ssend(b, c, t, dst, tag, comm);
    HX_DONE();
    return rc;
}

int MPI_Rsend(const void *b, int c, MPI_Datatype t, int dst, int tag, MPI_Comm comm)
{
    hx_note(0, C_RSEND, dst, tag, hx_bytes(c, t));
    hx_state(C_RSEND, hx_in_student ? hx_world(comm, dst) : -3, -3, NULL, 0);
    int rc = PMPI_Rsend(b, c, t, dst, tag, comm);
    HX_DONE();
    return rc;
}

int MPI_Isend(const void *b, int c, MPI_Datatype t, int dst, int tag, MPI_Comm comm, MPI_Request *r)
{
    hx_note(0, C_ISEND, dst, tag, hx_bytes(c, t));
    int rc = PMPI_Isend(b, c, t, dst, tag, comm, r);
    if (hx_in_student) hx_remember(*r, 0, hx_world(comm, dst));
    hx_calling_p2p = -1;
    return rc;
}

int MPI_Issend(const void *b, int c, MPI_Datatype t, int dst, int tag, MPI_Comm comm, MPI_Request *r)
{
    hx_note(0, C_ISSEND, dst, tag, hx_bytes(c, t));
    int rc = PMPI_Issend(b, c, t, dst, tag, comm, r);
    if (hx_in_student) hx_remember(*r, 0, hx_world(comm, dst));
    hx_calling_p2p = -1;
    return rc;
}

int MPI_Irsend(const void *b, int c, MPI_Datatype t, int dst, int tag, MPI_Comm comm, MPI_Request *r)
{
    hx_note(0, C_IRSEND, dst, tag, hx_bytes(c, t));
    int rc = PMPI_Irsend(b, c, t, dst, tag, comm, r);
    if (hx_in_student) hx_remember(*r, 0, hx_world(comm, dst));
    hx_calling_p2p = -1;
    return rc;
}

int MPI_Recv(void *b, int c, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    hx_note(1, C_RECV, src, tag, hx_bytes(c, t));
    hx_state(C_RECV, -3, hx_in_student ? hx_world(comm, src) : -3, NULL, 0);
    int rc = PMPI_Recv(b, c, t, src, tag, comm, st);
    HX_DONE();
    return rc;
}

int MPI_Irecv(void *b, int c, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request *r)
{
    hx_note(1, C_IRECV, src, tag, hx_bytes(c, t));
    int rc = PMPI_Irecv(b, c, t, src, tag, comm, r);
    if (hx_in_student) hx_remember(*r, 1, hx_world(comm, src));
    hx_calling_p2p = -1;
    return rc;
}

int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dst, int stag, void *rb, int rc_,
                 MPI_Datatype rt, int src, int rtag, MPI_Comm comm, MPI_Status *status)
{
    hx_note(0, C_SENDRECV, dst, stag, hx_bytes(sc, st));
    hx_note(1, C_SENDRECV, src, rtag, hx_bytes(rc_, rt));
    hx_state(C_SENDRECV, hx_in_student ? hx_world(comm, dst) : -3, hx_in_student ? hx_world(comm, src) : -3, NULL, 0);
    int rc = PMPI_Sendrecv(sb, sc, st, dst, stag, rb, rc_, rt, src, rtag, comm, status);
    HX_DONE();
    return rc;
}

int MPI_Sendrecv_replace(void *b, int c, MPI_Datatype t, int dst, int stag, int src, int rtag,
                         MPI_Comm comm, MPI_Status *status)
{
    hx_note(0, C_REPLACE, dst, stag, hx_bytes(c, t));
    hx_note(1, C_REPLACE, src, rtag, hx_bytes(c, t));
    hx_state(C_REPLACE, hx_in_student ? hx_world(comm, dst) : -3, hx_in_student ? hx_world(comm, src) : -3, NULL, 0);
    int rc = PMPI_Sendrecv_replace(b, c, t, dst, stag, src, rtag, comm, status);
    HX_DONE();
    return rc;
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    hx_state(C_PROBE, -3, hx_in_student ? hx_world(comm, src) : -3, NULL, 0);
    int rc = PMPI_Probe(src, tag, comm, st);
    HX_DONE();
    return rc;
}

int MPI_Wait(MPI_Request *r, MPI_Status *st)
{
    MPI_Request was = *r;
    hx_state(C_WAIT, -3, -3, r, 1);
    int rc = PMPI_Wait(r, st);
    hx_forget(was);
    HX_DONE();
    return rc;
}

int MPI_Waitall(int n, MPI_Request *r, MPI_Status *st)
{
    MPI_Request was[HX_MAX_PENDING];
    int keep = n < HX_MAX_PENDING ? n : HX_MAX_PENDING;
    for (int i = 0; i < keep; i++) was[i] = r[i];
    hx_state(C_WAITALL, -3, -3, r, n);
    int rc = PMPI_Waitall(n, r, st);
    for (int i = 0; i < keep; i++) hx_forget(was[i]);
    HX_DONE();
    return rc;
}

int MPI_Waitany(int n, MPI_Request *r, int *index, MPI_Status *st)
{
    MPI_Request was[HX_MAX_PENDING];
    int keep = n < HX_MAX_PENDING ? n : HX_MAX_PENDING;
    for (int i = 0; i < keep; i++) was[i] = r[i];
    hx_state(C_WAITANY, -3, -3, r, n);
    int rc = PMPI_Waitany(n, r, index, st);
    if (*index >= 0 && *index < keep) hx_forget(was[*index]);
    HX_DONE();
    return rc;
}

int MPI_Waitsome(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *st)
{
    MPI_Request was[HX_MAX_PENDING];
    int keep = n < HX_MAX_PENDING ? n : HX_MAX_PENDING;
    for (int i = 0; i < keep; i++) was[i] = r[i];
    hx_state(C_WAITSOME, -3, -3, r, n);
    int rc = PMPI_Waitsome(n, r, outcount, indices, st);
    for (int i = 0; i < *outcount && *outcount != MPI_UNDEFINED; i++)
        if (indices[i] < keep) hx_forget(was[indices[i]]);
    HX_DONE();
    return rc;
}

/* ---- the library's collectives: noted while the student's function runs -------------------- */

static void hx_collective(const char *name, MPI_Comm comm)
{
    hx_calling_coll = name;
    if (!hx_in_student || hx_ncolls == HX_MAX_COLLS) return;
    int size = 0;
    PMPI_Comm_size(comm, &size);
    snprintf(hx_colls[hx_ncolls++], sizeof hx_colls[0], "%s/%d", name, size);
}

/* A collective's return: it is no longer the call the program is in. */
static int hx_returned(int rc)
{
    hx_calling_coll = NULL;
    return rc;
}

#define HX_COLL(name, comm) hx_collective(name, comm)

int MPI_Barrier(MPI_Comm comm)
{ HX_COLL("MPI_Barrier", comm); return hx_returned(PMPI_Barrier(comm)); }
int MPI_Bcast(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm)
{ HX_COLL("MPI_Bcast", comm); return hx_returned(PMPI_Bcast(b, c, t, root, comm)); }
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{ HX_COLL("MPI_Gather", comm); return hx_returned(PMPI_Gather(s, sc, st, r, rc, rt, root, comm)); }
int MPI_Gatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *d, MPI_Datatype rt,
                int root, MPI_Comm comm)
{ HX_COLL("MPI_Gatherv", comm); return hx_returned(PMPI_Gatherv(s, sc, st, r, rc, d, rt, root, comm)); }
int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{ HX_COLL("MPI_Scatter", comm); return hx_returned(PMPI_Scatter(s, sc, st, r, rc, rt, root, comm)); }
int MPI_Scatterv(const void *s, const int *sc, const int *d, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                 int root, MPI_Comm comm)
{ HX_COLL("MPI_Scatterv", comm); return hx_returned(PMPI_Scatterv(s, sc, d, st, r, rc, rt, root, comm)); }
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm)
{ HX_COLL("MPI_Allgather", comm); return hx_returned(PMPI_Allgather(s, sc, st, r, rc, rt, comm)); }
int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *d, MPI_Datatype rt,
                   MPI_Comm comm)
{ HX_COLL("MPI_Allgatherv", comm); return hx_returned(PMPI_Allgatherv(s, sc, st, r, rc, d, rt, comm)); }
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm)
{ HX_COLL("MPI_Alltoall", comm); return hx_returned(PMPI_Alltoall(s, sc, st, r, rc, rt, comm)); }
int MPI_Alltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, const int *rc,
                  const int *rd, MPI_Datatype rt, MPI_Comm comm)
{ HX_COLL("MPI_Alltoallv", comm); return hx_returned(PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, comm)); }
int MPI_Reduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm comm)
{ HX_COLL("MPI_Reduce", comm); return hx_returned(PMPI_Reduce(s, r, c, t, o, root, comm)); }
int MPI_Allreduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ HX_COLL("MPI_Allreduce", comm); return hx_returned(PMPI_Allreduce(s, r, c, t, o, comm)); }
int MPI_Reduce_scatter(const void *s, void *r, const int *rc, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ HX_COLL("MPI_Reduce_scatter", comm); return hx_returned(PMPI_Reduce_scatter(s, r, rc, t, o, comm)); }
int MPI_Reduce_scatter_block(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ HX_COLL("MPI_Reduce_scatter_block", comm); return hx_returned(PMPI_Reduce_scatter_block(s, r, c, t, o, comm)); }
int MPI_Scan(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ HX_COLL("MPI_Scan", comm); return hx_returned(PMPI_Scan(s, r, c, t, o, comm)); }
int MPI_Exscan(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm)
{ HX_COLL("MPI_Exscan", comm); return hx_returned(PMPI_Exscan(s, r, c, t, o, comm)); }
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *q)
{ HX_COLL("MPI_Ibarrier", comm); return hx_returned(PMPI_Ibarrier(comm, q)); }
int MPI_Ibcast(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *q)
{ HX_COLL("MPI_Ibcast", comm); return hx_returned(PMPI_Ibcast(b, c, t, root, comm, q)); }
int MPI_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm,
                   MPI_Request *q)
{ HX_COLL("MPI_Iallgather", comm); return hx_returned(PMPI_Iallgather(s, sc, st, r, rc, rt, comm, q)); }
int MPI_Iallreduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm, MPI_Request *q)
{ HX_COLL("MPI_Iallreduce", comm); return hx_returned(PMPI_Iallreduce(s, r, c, t, o, comm, q)); }
int MPI_Ireduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm comm, MPI_Request *q)
{ HX_COLL("MPI_Ireduce", comm); return hx_returned(PMPI_Ireduce(s, r, c, t, o, root, comm, q)); }
int MPI_Ireduce_scatter_block(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm,
                              MPI_Request *q)
{ HX_COLL("MPI_Ireduce_scatter_block", comm); return hx_returned(PMPI_Ireduce_scatter_block(s, r, c, t, o, comm, q)); }
int MPI_Igather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                MPI_Request *q)
{ HX_COLL("MPI_Igather", comm); return hx_returned(PMPI_Igather(s, sc, st, r, rc, rt, root, comm, q)); }
int MPI_Iscatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                 MPI_Request *q)
{ HX_COLL("MPI_Iscatter", comm); return hx_returned(PMPI_Iscatter(s, sc, st, r, rc, rt, root, comm, q)); }
int MPI_Ialltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm,
                  MPI_Request *q)
{ HX_COLL("MPI_Ialltoall", comm); return hx_returned(PMPI_Ialltoall(s, sc, st, r, rc, rt, comm, q)); }

/* ---- buffers with guards, and the records --------------------------------------------------- */

typedef struct {
    char name[8];
    long before, len, after;
    unsigned char *base;       /* before + len + after bytes */
} hx_region;

/* Guard bytes after a buffer: room to measure an overrun of up to three buffers (a hard-coded
 * element size four times the real one), capped. */
static long hx_after(long len)
{
    long a = 3 * len;
    return a < 64 ? 64 : a > (4L << 20) ? 4L << 20 : a;
}

/* A buffer of len bytes between guards; its bytes hold `fill` (or `data` when not NULL). */
static unsigned char *hx_alloc(hx_region *r, const char *name, long len, const unsigned char *data)
{
    snprintf(r->name, sizeof r->name, "%s", name);
    r->before = 64;
    r->len = len;
    r->after = hx_after(len);
    r->base = malloc((size_t)(r->before + len + r->after));
    if (!r->base) hx_fail("out of memory");
    memset(r->base, hx_guard, (size_t)r->before);
    memset(r->base + r->before + len, hx_guard, (size_t)r->after);
    if (data) memcpy(r->base + r->before, data, (size_t)len);
    else memset(r->base + r->before, hx_fill, (size_t)len);
    return r->base + r->before;
}

static FILE *hx_out;

static void hx_open(void)
{
    char name[32];
    snprintf(name, sizeof name, "out.%d", hx_world_rank);
    hx_out = fopen(name, "wb");
    snprintf(name, sizeof name, "state.%d", hx_world_rank);
    hx_state_fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!hx_out || hx_state_fd < 0) hx_fail("cannot write its result files");
}

/* Start of the student's call: clear what the last case noted, and say which case runs. */
static void hx_begin(const hx_case *c)
{
    hx_current_seq = c->seq;
    hx_nmsgs = hx_msgs_dropped = hx_ncolls = hx_npending = 0;
    hx_in_student = 1;
    HX_DONE();
}

static void hx_end(void)
{
    hx_state(-2, -3, -3, NULL, 0);
    hx_in_student = 0;
}

/* The record of a finished case (see the header): "MPLBCAS1"; int32 seq, rank and size in the
 * case's communicator, return code, regions, messages, messages not kept, bytes of the
 * collectives' text, bytes of the error text; the collectives ("MPI_Bcast/4 ..."); the error
 * text (MPI_Error_string of a return code other than MPI_SUCCESS); per region its name (8
 * bytes), int64 length, guard bytes changed before it, how far before it the farthest change
 * is, guard bytes changed after it, how far past its end the farthest change reaches, then its
 * bytes; then the messages (hx_msg). */
static void hx_guards(const hx_region *r, int64_t out[4])
{
    const unsigned char *g = r->base, *a = r->base + r->before + r->len;
    out[0] = out[1] = out[2] = out[3] = 0;
    for (long i = 0; i < r->before; i++)
        if (g[i] != hx_guard) {
            out[0]++;
            if (out[1] == 0) out[1] = r->before - i;
        }
    for (long i = 0; i < r->after; i++)
        if (a[i] != hx_guard) {
            out[2]++;
            out[3] = i + 1;
        }
}

static void hx_emit(const hx_case *c, MPI_Comm comm, int rc, hx_region *regions, int nregions)
{
    int32_t head[9];
    char magic[8] = {'M', 'P', 'L', 'B', 'C', 'A', 'S', '1'};
    char colls[HX_MAX_COLLS * 48], err[MPI_MAX_ERROR_STRING + 1] = "";
    int rank, size, len = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    memset(colls, 0, sizeof colls);
    for (int i = 0; i < hx_ncolls; i++) {
        strcat(colls, hx_colls[i]);
        strcat(colls, " ");
    }
    if (rc != MPI_SUCCESS && PMPI_Error_string(rc, err, &len) != MPI_SUCCESS) err[0] = '\0';
    head[0] = c->seq;
    head[1] = rank;
    head[2] = size;
    head[3] = rc;
    head[4] = nregions;
    head[5] = hx_nmsgs;
    head[6] = hx_msgs_dropped;
    head[7] = (int32_t)strlen(colls);
    head[8] = (int32_t)strlen(err);
    fwrite(magic, 1, 8, hx_out);
    fwrite(head, sizeof head, 1, hx_out);
    fwrite(colls, 1, (size_t)head[7], hx_out);
    fwrite(err, 1, (size_t)head[8], hx_out);
    for (int i = 0; i < nregions; i++) {
        int64_t dims[5];
        dims[0] = regions[i].len;
        hx_guards(&regions[i], dims + 1);
        fwrite(regions[i].name, 1, 8, hx_out);
        fwrite(dims, sizeof dims, 1, hx_out);
        fwrite(regions[i].base + regions[i].before, 1, (size_t)regions[i].len, hx_out);
    }
    fwrite(hx_msgs, sizeof(hx_msg), (size_t)hx_nmsgs, hx_out);
    fflush(hx_out);
}

/* ---- communicators and time limits ------------------------------------------------------- */

/* The case's communicator: MPI_COMM_WORLD, or the halves (odd and even ranks, reversed). */
static MPI_Comm hx_halves = MPI_COMM_NULL;

static MPI_Comm hx_comm(const hx_case *c)
{
    if (strcmp(c->comm, "halves") != 0) return MPI_COMM_WORLD;
    if (hx_halves == MPI_COMM_NULL)
        PMPI_Comm_split(MPI_COMM_WORLD, hx_world_rank % 2, -hx_world_rank, &hx_halves);
    return hx_halves;
}

static int hx_case_timeout;

static void hx_on_alarm(int sig)
{
    char line[64];
    (void)sig;
    if (hx_world_rank == 0) {
        int n = snprintf(line, sizeof line, "TIMEOUT %d\n", hx_current_seq);
        if (write(STDOUT_FILENO, line, (size_t)n) < 0) _exit(3);
    }
    _exit(3);
}

/* The error handler of every communicator of the run (MPI_COMM_WORLD's, which the ones made
 * from it inherit): error.<rank> and stderr say which case, which call and what the library
 * said, then the run ends as the library's own default handler would end it. */
static void hx_on_error(MPI_Comm *comm, int *code, ...)
{
    char text[MPI_MAX_ERROR_STRING + 1] = "", call[48] = "-", line[MPI_MAX_ERROR_STRING + 128];
    int len = 0;
    (void)comm;
    if (PMPI_Error_string(*code, text, &len) != MPI_SUCCESS || len <= 0)
        snprintf(text, sizeof text, "MPI error code %d", *code);
    text[strcspn(text, "\n")] = '\0';  /* MPICH's text goes on with its error stack */
    if (hx_calling_coll) snprintf(call, sizeof call, "%s", hx_calling_coll);
    else if (hx_calling_p2p >= 0) snprintf(call, sizeof call, "MPI_%s", hx_call_names[hx_calling_p2p]);
    int n = snprintf(line, sizeof line, "seq=%d call=%s error=%s\n", hx_current_seq, call, text);
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    char name[32];
    snprintf(name, sizeof name, "error.%d", hx_world_rank);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) < 0) n = 0;
        close(fd);
    }
    fprintf(stderr, "rank %d: MPI error in %s: %s\n", hx_world_rank, call, text);
    fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, *code);
}

static void hx_arm(void)
{
    if (hx_case_timeout > 0) alarm((unsigned)hx_case_timeout);
}

static void hx_disarm(void)
{
    if (hx_case_timeout > 0) alarm(0);
}

/* MPI_Init's counterpart for a case run: the plan, this rank's input (then the barrier), the
 * result files; `--case-timeout S` among the arguments sets the case time limit. */
static void hx_init(int argc, char **argv)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &hx_world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &hx_world_size);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--case-timeout") == 0) hx_case_timeout = atoi(argv[i + 1]);
    MPI_Errhandler eh;
    PMPI_Comm_create_errhandler(hx_on_error, &eh);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    PMPI_Errhandler_free(&eh);
    hx_read_plan();
    hx_read_inputs();
    hx_open();
    PMPI_Barrier(MPI_COMM_WORLD);
    if (hx_case_timeout > 0) signal(SIGALRM, hx_on_alarm);
}

/* After each case every rank waits for the others, so that a rank never starts the next case
 * while another still sends to it in this one. */
static void hx_sync(void)
{
    PMPI_Barrier(MPI_COMM_WORLD);
}

static void hx_finish(void)
{
    if (hx_halves != MPI_COMM_NULL) PMPI_Comm_free(&hx_halves);
    if (hx_out) fclose(hx_out);
    if (hx_state_fd >= 0) close(hx_state_fd);
    free(hx_inputs);
}

#endif
