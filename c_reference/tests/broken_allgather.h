/* broken_allgather.h — deliberately broken allgathers, for tests only.
 *
 * Never part of liblabcoll: tests/test_c_reference.py builds a collbench of its own with
 * registry.c compiled with -DLAB_TEST_ALGORITHMS='"tests/broken_allgather.h"' and
 * tests/broken_allgather.c, to make collbench's --check and its mid-loop failure path fire.
 */
#ifndef BROKEN_ALLGATHER_H
#define BROKEN_ALLGATHER_H

#include "labcoll.h"

#ifndef LAB_REGISTRY_ONLY
/* The ring, then the last rank overwrites element 3 of what it gathered (when there is one). */
int lab_allgather_test_wrong_data(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                  MPI_Comm comm);
/* The ring, then rank 1 returns MPI_ERR_OTHER from its 5th call on, alone. */
int lab_allgather_test_fail_late(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                 MPI_Comm comm);
#endif

#define LAB_TEST_ROWS                                                                      \
    {"test_wrong_data", LAB_FN(lab_allgather_test_wrong_data)},                            \
    {"test_fail_late", LAB_FN(lab_allgather_test_fail_late)},

#endif
