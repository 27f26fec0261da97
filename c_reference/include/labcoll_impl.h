/* labcoll_impl.h — helpers shared by the algorithm files (not part of the public API). */
#ifndef LABCOLL_IMPL_H
#define LABCOLL_IMPL_H

#include "labcoll.h"

/* Private tags: the algorithms never use MPI_COMM_WORLD and never share tags with users' 0. */
#define LAB_TAG_ALLGATHER 0x1ab0
#define LAB_TAG_GATHER    0x1ab1
#define LAB_TAG_BCAST     0x1ab2
#define LAB_TAG_FOLD      0x1ab3
#define LAB_TAG_COPY      0x1ab4

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

/* Copy the local contribution (sendbuf/sendtype) into block `rank` of recvbuf with a
 * typed send-receive to self, so derived and non-contiguous types are handled by MPI.
 * Does nothing for MPI_IN_PLACE. */
int lab_copy_own_block(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/* Typed copy between two buffers on this process (send-receive to self). */
int lab_typed_copy(const void *src, int scount, MPI_Datatype stype,
                   void *dst, int dcount, MPI_Datatype dtype, MPI_Comm comm);

/* Temporary buffers of the algorithms (see lab_shared_scratch). */
void *lab_scratch_alloc(size_t bytes);
void lab_scratch_free(void *p);

#endif
