/* labprov.h — the provenance block that every measuring program of the kit prints first.
 *
 *   # <program> <format version>
 *   # library: <MPI_Get_library_version, on one line>
 *   # flavour: openmpi | mpich | smpi
 *   # nprocs: <size of MPI_COMM_WORLD>
 *   # host: <the machine's name (uname)>
 *   # date: <UTC, ISO 8601>
 *
 * The program then prints its own "# key: value" lines and one CSV table (docs/DEVELOPING.md
 * section 2); Python reads all of it with mpilab.measure.driver.parse. Used by collbench,
 * pingpong, trace/timeline, lab 3's bench_reduce and lab 6's overlap; another program includes
 * it with -I<kit>/c_reference/include and calls lab_print_provenance from rank 0 after MPI_Init.
 * It needs nothing but MPI and the C library (C99, no POSIX feature macros).
 */
#ifndef LABPROV_H
#define LABPROV_H

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

/* The flavour: the kit's Makefile passes -DLAB_FLAVOUR; elsewhere the MPI's header says it. */
#ifndef LAB_FLAVOUR
#if defined(SMPI_H)
#define LAB_FLAVOUR "smpi"
#elif defined(OPEN_MPI)
#define LAB_FLAVOUR "openmpi"
#elif defined(MPICH)
#define LAB_FLAVOUR "mpich"
#else
#define LAB_FLAVOUR "unknown"
#endif
#endif

/* Print the block above on stdout (call it on one rank only) and flush. */
static inline void lab_print_provenance(const char *program, int version)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "", date[32] = "";
    int len = 0, nprocs = 0;
    struct utsname host;
    MPI_Get_library_version(lib, &len);
    for (char *c = lib; *c; c++)             /* one line: newlines and tabs become spaces */
        if (*c == '\n' || *c == '\t' || *c == '\r')
            *c = ' ';
    for (int n = (int)strlen(lib); n > 0 && lib[n - 1] == ' '; n--)
        lib[n - 1] = '\0';
    if (uname(&host) != 0)
        strcpy(host.nodename, "unknown");
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    printf("# %s %d\n# library: %s\n# flavour: %s\n# nprocs: %d\n# host: %s\n# date: %s\n",
           program, version, lib, LAB_FLAVOUR, nprocs, host.nodename, date);
    fflush(stdout);
}

#endif
