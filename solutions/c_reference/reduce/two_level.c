/* Algorithm: two-level (node-aware) reduce — the answer key's: lab 3's two-level allreduce with a
 *            reduce among the leaders, so it stays on the instructor's side. The reproduction
 *            study (mpilab.studies.repro.run_study, reduce_c=) times it as the reduce's
 *            two_level; without it the study times the library's reduce only.
 * Implements: MPI_Reduce (same signature)
 * Steps:        1. reduce inside each node to the node's leader (its rank 0 in the node);
 *               2. reduce among the leaders to the leader of the root's node;
 *               3. if the root is not that leader, the leader sends it the result.
 *               The node communicator comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED),
 *               the leaders' from MPI_Comm_split; both, and the leaders' rank of every rank's
 *               node leader, are built on the first call and cached on comm as an attribute.
 * Cost:         c ranks per node, m = p/c nodes, α_i/β_i inside a node, α_e/β_e between
 *               nodes, binomial trees at both levels:
 *               log2(c)·(α_i + n·β_i) + log2(m)·(α_e + n·β_e) (+ α_i + n·β_i if the root is
 *               not its node's leader) (+ γ terms)
 * Non-powers of two: nothing special; nodes of different sizes are fine.
 * Restrictions: commutative op (MPI_ERR_OP otherwise); any p, any root, any datatype,
 *               MPI_IN_PLACE at the root.
 *               A level with a single rank is skipped (a copy instead of a reduce): SimGrid
 *               3.32's "ompi" selector crashes in MPI_Reduce on a one-rank communicator.
 * Memory:       one temporary buffer of n bytes on node leaders that are not the root; the
 *               cached communicators and p ints per comm.
 *
 *   p = 4 on 2 nodes {0,1} {2,3}, root 3:   reduce  1->0  3->2     (inside the nodes)
 *                                           reduce  0->2           (leaders, network)
 *                                           send    2->3           (root is not a leader)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RED_TAG 0x1ab7

/* Keep the failing line, jump to fn_fail; the function returns the MPI error code. */
#define CHECK(rc_)                       \
    do {                                 \
        mpi_errno = (rc_);               \
        if (mpi_errno != MPI_SUCCESS) {  \
            fail_line = __LINE__;        \
            goto fn_fail;                \
        }                                \
    } while (0)

typedef struct {
    MPI_Comm node;      /* the ranks of my node */
    MPI_Comm leaders;   /* rank 0 of every node; MPI_COMM_NULL on the other ranks */
    int *leader_of;     /* leader_of[r]: rank in `leaders` of the leader of rank r's node */
} reduce_comms;

/* The attribute's delete function: frees what build_reduce_comms made. */
static int free_reduce_comms(MPI_Comm comm, int keyval, void *value, void *extra)
{
    reduce_comms *c = value;
    MPI_Comm *made[2] = {&c->node, &c->leaders};
    (void)comm, (void)keyval, (void)extra;
    for (int i = 0; i < 2; i++)
        if (*made[i] != MPI_COMM_NULL)
            MPI_Comm_free(made[i]);
    free(c->leader_of);
    free(c);
    return MPI_SUCCESS;
}

static int build_reduce_comms(MPI_Comm comm, reduce_comms *c)
{
    int mpi_errno = MPI_SUCCESS, fail_line = 0, rank, p, node_rank, my_leader = -1;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c->node));
    CHECK(MPI_Comm_rank(c->node, &node_rank));
    CHECK(MPI_Comm_split(comm, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &c->leaders));
    if (node_rank == 0)
        CHECK(MPI_Comm_rank(c->leaders, &my_leader));
    CHECK(MPI_Bcast(&my_leader, 1, MPI_INT, 0, c->node));
    c->leader_of = malloc(sizeof(int) * (size_t)p);
    if (!c->leader_of) {
        mpi_errno = MPI_ERR_NO_MEM;
        fail_line = __LINE__;
        goto fn_fail;
    }
    CHECK(MPI_Allgather(&my_leader, 1, MPI_INT, c->leader_of, 1, MPI_INT, comm));
    return MPI_SUCCESS;
fn_fail:
    fprintf(stderr, "%s:%d: MPI error %d\n", __FILE__, fail_line, mpi_errno);
    return mpi_errno;
}

/* The communicators of comm: built on the first call, then read from comm's attribute. */
static int get_reduce_comms(MPI_Comm comm, reduce_comms **out)
{
    static int key = MPI_KEYVAL_INVALID;
    int cached = 0, err = MPI_SUCCESS;
    if (key == MPI_KEYVAL_INVALID)
        err = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_reduce_comms, &key, NULL);
    if (err == MPI_SUCCESS)
        err = MPI_Comm_get_attr(comm, key, out, &cached);
    if (err != MPI_SUCCESS || cached)
        return err;
    reduce_comms *made = calloc(1, sizeof *made);
    if (made == NULL)
        return MPI_ERR_NO_MEM;
    made->node = made->leaders = MPI_COMM_NULL;
    err = build_reduce_comms(comm, made);
    if (err == MPI_SUCCESS)
        err = MPI_Comm_set_attr(comm, key, made);
    if (err == MPI_SUCCESS)
        *out = made;
    else
        free_reduce_comms(comm, key, made, NULL);
    return err;
}

/* Copy count elements of datatype between two buffers of the same layout. */
static int lab_copy(const void *src, void *dst, int count, MPI_Datatype datatype)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    int rc = MPI_Type_get_extent(datatype, &lb, &extent);
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_get_true_extent(datatype, &true_lb, &true_extent);
    if (rc == MPI_SUCCESS && count > 0)
        memcpy((char *)dst + true_lb, (const char *)src + true_lb,
               (size_t)(count - 1) * extent + true_extent);
    return rc;
}

int lab_reduce_two_level(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, int root, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, fail_line = 0, commute, rank, node_rank, leaders_rank;
    int node_size, nodes;
    char *tmp_raw = NULL;
    reduce_comms *c;

    CHECK(MPI_Op_commutative(op, &commute));
    if (!commute) {
        mpi_errno = MPI_ERR_OP;
        fail_line = __LINE__;
        goto fn_fail;
    }
    CHECK(get_reduce_comms(comm, &c));
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_rank(c->node, &node_rank));
    const int root_leader = c->leader_of[root];   /* in `leaders` */

    if (node_rank != 0) {
        /* the root's data is in recvbuf when it passed MPI_IN_PLACE */
        const void *mine = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
        CHECK(MPI_Reduce(mine, NULL, count, datatype, op, 0, c->node));
        if (rank == root)
            CHECK(MPI_Recv(recvbuf, count, datatype, MPI_ANY_SOURCE, RED_TAG, comm,
                           MPI_STATUS_IGNORE));
        goto fn_exit;
    }
    /* a node leader: its node's partial result goes to recvbuf if it is the root, else tmp */
    char *partial = recvbuf;
    if (rank != root) {
        MPI_Aint lb, extent, true_lb, true_extent;
        CHECK(MPI_Type_get_extent(datatype, &lb, &extent));
        CHECK(MPI_Type_get_true_extent(datatype, &true_lb, &true_extent));
        tmp_raw = malloc(count > 0 ? (size_t)(count - 1) * extent + true_extent : 1);
        if (!tmp_raw) {
            mpi_errno = MPI_ERR_NO_MEM;
            fail_line = __LINE__;
            goto fn_fail;
        }
        partial = tmp_raw - true_lb;
    }
    CHECK(MPI_Comm_size(c->node, &node_size));
    CHECK(MPI_Comm_size(c->leaders, &nodes));
    if (node_size > 1)
        CHECK(MPI_Reduce(sendbuf, partial, count, datatype, op, 0, c->node));
    else if (sendbuf != MPI_IN_PLACE)
        CHECK(lab_copy(sendbuf, partial, count, datatype));
    CHECK(MPI_Comm_rank(c->leaders, &leaders_rank));
    if (nodes > 1)
        CHECK(MPI_Reduce(leaders_rank == root_leader ? MPI_IN_PLACE : partial, partial, count,
                         datatype, op, root_leader, c->leaders));
    if (leaders_rank == root_leader && rank != root)
        CHECK(MPI_Send(partial, count, datatype, root, RED_TAG, comm));

fn_exit:
    free(tmp_raw);
    return mpi_errno;
fn_fail:
    fprintf(stderr, "%s:%d: MPI error %d\n", __FILE__, fail_line, mpi_errno);
    goto fn_exit;
}
