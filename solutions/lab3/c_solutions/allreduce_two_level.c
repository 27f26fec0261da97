/* Algorithm: two-level (node-aware) allreduce (lab 3 solution)
 * Implements: MPI_Allreduce (same signature)
 * Steps:        1. reduce inside each node to the node's leader (its rank 0 in the node);
 *               2. allreduce among the leaders (one per node), across the network;
 *               3. broadcast inside each node from the leader.
 *               The node communicator comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED),
 *               the leaders' from MPI_Comm_split; both are built on the first call and cached
 *               on comm as an attribute, so later calls pay nothing for them.
 * Cost:         c ranks per node, m = p/c nodes, α_i/β_i inside a node, α_e/β_e between
 *               nodes, with binomial trees inside and recursive doubling between nodes:
 *               2·log2(c)·(α_i + n·β_i) + log2(m)·(α_e + n·β_e) (+ γ terms of the reduces):
 *               only log2(m) messages cross the network instead of about log2(p).
 * Non-powers of two: nothing special here; nodes of different sizes are fine, and the three
 *               library collectives handle any size.
 * Restrictions: commutative op (ranks are summed node by node, not in rank order;
 *               MPI_ERR_OP otherwise); any p, any datatype, MPI_IN_PLACE.
 * Memory:       no temporary buffer; two cached communicators per comm.
 *
 *   p = 4 on 2 nodes {0,1} {2,3}:   reduce     1->0    3->2        (inside the nodes)
 *                                   allreduce  0<->2               (leaders, network)
 *                                   bcast      0->1    2->3        (inside the nodes)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

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
    MPI_Comm node;     /* the ranks of my node */
    MPI_Comm leaders;  /* rank 0 of every node; MPI_COMM_NULL on the other ranks */
} node_comms;

/* Given: frees the cached communicators when comm is freed (or at MPI_Finalize). */
static int free_node_comms(MPI_Comm comm, int keyval, void *value, void *extra)
{
    node_comms *c = value;
    (void)comm, (void)keyval, (void)extra;
    if (c->node != MPI_COMM_NULL)
        MPI_Comm_free(&c->node);
    if (c->leaders != MPI_COMM_NULL)
        MPI_Comm_free(&c->leaders);
    free(c);
    return MPI_SUCCESS;
}

/* Build the node and leaders communicators of comm. */
static int build_node_comms(MPI_Comm comm, node_comms *c)
{
    int mpi_errno = MPI_SUCCESS, fail_line = 0, rank, node_rank;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c->node));
    CHECK(MPI_Comm_rank(c->node, &node_rank));
    CHECK(MPI_Comm_split(comm, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &c->leaders));
    return MPI_SUCCESS;
fn_fail:
    fprintf(stderr, "%s:%d: MPI error %d\n", __FILE__, fail_line, mpi_errno);
    return mpi_errno;
}

/* Given: the communicators of comm, built on first use and cached on comm. */
static int get_node_comms(MPI_Comm comm, node_comms **out)
{
    static int keyval = MPI_KEYVAL_INVALID;
    int found = 0, rc;
    if (keyval == MPI_KEYVAL_INVALID) {
        rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_node_comms, &keyval, NULL);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    rc = MPI_Comm_get_attr(comm, keyval, out, &found);
    if (rc != MPI_SUCCESS || found)
        return rc;
    node_comms *c = malloc(sizeof *c);
    if (!c)
        return MPI_ERR_NO_MEM;
    c->node = c->leaders = MPI_COMM_NULL;
    rc = build_node_comms(comm, c);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_attr(comm, keyval, c);
    if (rc != MPI_SUCCESS) {
        free_node_comms(comm, keyval, c, NULL);
        return rc;
    }
    *out = c;
    return MPI_SUCCESS;
}

int student_allreduce_two_level(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int mpi_errno = MPI_SUCCESS, fail_line = 0, commute, node_rank;
    node_comms *c;

    CHECK(MPI_Op_commutative(op, &commute));
    if (!commute) {
        mpi_errno = MPI_ERR_OP;
        fail_line = __LINE__;
        goto fn_fail;
    }
    CHECK(get_node_comms(comm, &c));
    CHECK(MPI_Comm_rank(c->node, &node_rank));
    if (node_rank == 0) {
        CHECK(MPI_Reduce(sendbuf, recvbuf, count, datatype, op, 0, c->node));
        CHECK(MPI_Allreduce(MPI_IN_PLACE, recvbuf, count, datatype, op, c->leaders));
    } else {
        /* a non-leader's data is in recvbuf when it passed MPI_IN_PLACE */
        CHECK(MPI_Reduce(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, NULL, count, datatype, op,
                         0, c->node));
    }
    CHECK(MPI_Bcast(recvbuf, count, datatype, 0, c->node));
    return MPI_SUCCESS;
fn_fail:
    fprintf(stderr, "%s:%d: MPI error %d\n", __FILE__, fail_line, mpi_errno);
    return mpi_errno;
}
