/* labcoll_impl.h — helpers shared by the algorithm files (not part of the public API). */
#ifndef LABCOLL_IMPL_H
#define LABCOLL_IMPL_H

#include "labcoll.h"

/* Private tags: the algorithms never use MPI_COMM_WORLD and never share tags with users' 0. */
#define LAB_TAG_ALLGATHER 0x1ab0
#define LAB_TAG_GATHER    0x1ab1
#define LAB_TAG_BCAST     0x1ab2
#define LAB_TAG_FOLD      0x1ab3
#define LAB_TAG_COPY      0x1ab4   /* SMPI local copies: a send-receive to oneself */

/* Keep __FILE__/__LINE__ and jump to the function's fn_fail label. */
#define CHECK(rc_)                                                    \
    do {                                                              \
        int lab_rc_ = (rc_);                                          \
        if (lab_rc_ != MPI_SUCCESS) {                                 \
            mpi_errno = lab_rc_;                                      \
            lab_error_file = __FILE__;                                \
            lab_error_line = __LINE__;                                \
            goto fn_fail;                                             \
        }                                                             \
    } while (0)

/* Address of block i of a buffer of blocks of `count` elements of extent `extent`. */
static inline char *lab_block(void *buf, int i, int count, MPI_Aint extent)
{
    return (char *)buf + (MPI_Aint)i * count * extent;
}

/* What a rank contributes: sendbuf as (sendcount, sendtype), or with MPI_IN_PLACE its own
 * block of recvbuf as (recvcount, recvtype). Algorithms send it from there, so the first
 * message never waits for (or reads) a copy. */
typedef struct {
    const void *buf;
    int count;
    MPI_Datatype type;
} lab_contribution;

static inline lab_contribution lab_mine(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                        void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                        int rank, MPI_Aint extent)
{
    lab_contribution c = {sendbuf, sendcount, sendtype};
    if (sendbuf == MPI_IN_PLACE) {
        c.buf = lab_block(recvbuf, rank, recvcount, extent);
        c.count = recvcount;
        c.type = recvtype;
    }
    return c;
}

/* Local copies. Every copy an algorithm makes on its own process goes through
 * lab_local_copy: it is never a message, and the tracer sees it as a `copy` row.
 *
 * - Real MPI: memcpy when both types are dense (one run of bytes without holes, e.g. any
 *   predefined type whose size is its extent, or a contiguous type of one); any other type
 *   goes through MPI_Pack into a temporary buffer and MPI_Unpack out of it.
 * - SMPI: MPI_Sendrecv to oneself (called as PMPI_Sendrecv, so the tracer does not log a
 *   message). SMPI implements it as its own local copy (smpi_request.cpp: Datatype::copy),
 *   exactly as SimGrid's own collectives copy: no message, no simulated time. With
 *   lab_shared_scratch set (content-free benchmarking) the copy is skipped.
 *
 * Copies scount elements of stype at src into dst (dcount elements of dtype at most; the
 * signatures must match, as for a receive). Errors: MPI_ERR_TRUNCATE if dst is too small,
 * MPI_ERR_COUNT for a non-dense copy above INT_MAX bytes (MPI_Pack's int sizes). */
int lab_local_copy(const void *src, int scount, MPI_Datatype stype,
                   void *dst, int dcount, MPI_Datatype dtype, MPI_Comm comm);

/* Copy the local contribution (sendbuf/sendtype) into block `rank` of recvbuf with
 * lab_local_copy. Does nothing for MPI_IN_PLACE. */
int lab_copy_own_block(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/* Temporary buffers of the algorithms (see lab_shared_scratch). */
void *lab_scratch_alloc(size_t bytes);
void lab_scratch_free(void *p);

#endif
