/* tree.c — Open MPI 4.1's chain topology, segment counts and MCA parameters, for the kit's clones
 * of its forced chain and pipeline (see include/labompi.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "labompi.h"

void lab_ompi_chain(int fanout, int rank, int size, int root, lab_ompi_tree *tree)
{
    int v = (rank - root + size) % size;   /* rank relative to the root */

    if (fanout < 1)
        fanout = 1;
    if (fanout > LAB_OMPI_MAXFANOUT)
        fanout = LAB_OMPI_MAXFANOUT;
    if (fanout > size - 1)
        fanout = size - 1;
    tree->prev = -1;
    tree->nextsize = 0;
    if (size < 2)
        return;

    /* Chain c (0-based) starts at relative rank first[c]; the first `longer` chains have
     * `len` ranks, the others len - 1 (none shorter when fanout divides size - 1). */
    int len = (size - 1 + fanout - 1) / fanout;
    int longer = (size - 1) % fanout ? (size - 1) % fanout : fanout;

    if (v == 0) {
        int head = 1;
        for (int c = 0; c < fanout; c++) {
            tree->next[tree->nextsize++] = (head + root) % size;
            head += c < longer ? len : len - 1;
        }
        return;
    }
    /* Which chain holds v, where it starts and how long it is. */
    int head, mylen;
    if (v - 1 < longer * len) {
        head = 1 + (v - 1) / len * len;
        mylen = len;
    } else {
        int c = longer + (v - 1 - longer * len) / (len - 1);
        head = 1 + longer * len + (c - longer) * (len - 1);
        mylen = len - 1;
    }
    tree->prev = v == head ? root : (v - 1 + root) % size;
    if (v < head + mylen - 1 && v + 1 < size)
        tree->next[tree->nextsize++] = (v + 1 + root) % size;
}

int lab_ompi_segcount(int count, int type_size, long segsize)
{
    if (type_size <= 0 || segsize < type_size || segsize >= (long)type_size * count)
        return count;
    long seg = segsize / type_size;
    if (segsize - seg * type_size > type_size / 2)
        seg++;
    return (int)seg;
}

long lab_ompi_param(const char *name, long dflt, int *bad)
{
    char var[160];
    snprintf(var, sizeof var, "OMPI_MCA_coll_tuned_%s", name);
    const char *text = getenv(var);
    if (text == NULL || !*text)
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || v < 0) {
        *bad = 1;
        return dflt;
    }
    return v;
}

int lab_ompi_prepare(const char *coll, int chains, MPI_Datatype datatype, int count, int root,
                     MPI_Comm comm, lab_ompi_tree *tree, int *segcount)
{
    int mpi_errno = MPI_SUCCESS, rank, p, type_size, bad = 0;
    char name[64];

    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &p));
    if (root < 0 || root >= p)
        CHECK(MPI_ERR_ROOT);
    CHECK(MPI_Type_size(datatype, &type_size));
    snprintf(name, sizeof name, "%s_algorithm_chain_fanout", coll);
    long fanout = chains ? chains : lab_ompi_param(name, 4, &bad);
    snprintf(name, sizeof name, "%s_algorithm_segmentsize", coll);
    long segsize = lab_ompi_param(name, 0, &bad);
    if (bad)
        CHECK(MPI_ERR_ARG);
    lab_ompi_chain((int)fanout, rank, p, root, tree);
    *segcount = lab_ompi_segcount(count, type_size, segsize);
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
