/* labcoll.h — the kit's allgather algorithms and broadcasts, and their registries.
 *
 * Every algorithm has exactly MPI_Allgather's signature and returns an MPI error code,
 * so the driver, the tests and the native call are interchangeable.
 */
#ifndef LABCOLL_H
#define LABCOLL_H

#ifndef LAB_REGISTRY_ONLY
#include <mpi.h>

int lab_allgather_gather_bcast(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int lab_allgather_pairwise(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

typedef int (*lab_allgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                                MPI_Comm);
/* Broadcasts built from point-to-point calls have MPI_Bcast's signature, so a PMPI tracer sees
 * every message (c_reference/trace/). */
typedef int (*lab_bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
/* Reductions have MPI_Reduce's signature. */
typedef int (*lab_reduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);

/* Clones of Open MPI 4.1's forced chain and pipeline (c_reference/bcast/ompi_*.c,
 * c_reference/reduce/ompi_*.c; include/labompi.h says what they share). */
int lab_bcast_ompi_chain(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int lab_bcast_ompi_pipeline(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int lab_reduce_ompi_chain(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, int root, MPI_Comm comm);
int lab_reduce_ompi_pipeline(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, int root, MPI_Comm comm);
#else
typedef void (*lab_allgather_fn)(void);   /* registry-only build: no MPI, no functions */
typedef void (*lab_bcast_fn)(void);
typedef void (*lab_reduce_fn)(void);
#endif

#include <stdio.h>

/* One row of the registry: a name and the function compiled in under it. It drives --list,
 * --list --json, help, errors and the test sweep. What each algorithm does, its restrictions,
 * cost and schedule are in the kit's one registry of algorithms, mpilab.model.algorithms
 * (`mpilab list`); tests/test_algorithms.py checks that both have the same names. */
typedef struct {
    const char *name;
    lab_allgather_fn fn;
} lab_algorithm;

extern const lab_algorithm lab_allgather_registry[];
extern const int lab_allgather_registry_size;

/* The row named `name`, or NULL. "native" is not in the table. */
const lab_algorithm *lab_allgather_lookup(const char *name);
/* Write "a, b, c, native" (registry names in table order, then native) into buf. */
void lab_allgather_valid_names(char *buf, size_t len);
/* Print {"collective": "allgather", "algorithms": [...]} followed by a newline. */
void lab_allgather_print_json(FILE *out);

/* The broadcasts: the clones of Open MPI's chain and pipeline, and lab 6's tasks, which live on
 * the instructor's side (solutions/c_reference/bcast, built in when that folder is there). */
typedef struct {
    const char *name;
    lab_bcast_fn fn;
} lab_bcast_algorithm;

extern const lab_bcast_algorithm lab_bcast_registry[];
extern const int lab_bcast_registry_size;
/* The broadcast named `name`, or NULL. */
const lab_bcast_algorithm *lab_bcast_lookup(const char *name);
/* Write "a, b" (the broadcasts' names) into buf; empty when there are none. */
void lab_bcast_valid_names(char *buf, size_t len);

/* The reductions: the clones of Open MPI's chain and pipeline reduce. */
typedef struct {
    const char *name;
    lab_reduce_fn fn;
} lab_reduce_algorithm;

extern const lab_reduce_algorithm lab_reduce_registry[];
extern const int lab_reduce_registry_size;
/* The reduction named `name`, or NULL. */
const lab_reduce_algorithm *lab_reduce_lookup(const char *name);
/* Write "a, b" (the reductions' names) into buf. */
void lab_reduce_valid_names(char *buf, size_t len);

/* Non-zero: contents are not kept (benchmarking only). Under SMPI, algorithms allocate their
 * temporary buffers with SMPI_SHARED_MALLOC and skip their local copies, which cost no
 * simulated time there but real time: SMPI copies even between shared blocks, and the copies
 * of a P = 512, 1 MiB Bruck were 256 GiB. collbench sets it when it does not --check, with
 * shared buffers of its own. No effect on real MPI. */
extern int lab_shared_scratch;

/* The tracer's view of local copies: when set, every copy an algorithm makes on its own
 * process (lab_local_copy) calls it with the copy's start and end (MPI_Wtime seconds) and
 * its size in bytes. trace/labtrace.c sets it in MPI_Init to log a `copy` row; NULL otherwise. */
typedef void (*lab_copy_observer)(double start, double end, long long bytes);
extern lab_copy_observer lab_copy_hook;

/* Where the last CHECK in algorithm code failed (for the driver's message). */
extern const char *lab_error_file;
extern int lab_error_line;

#endif
