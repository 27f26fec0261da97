/* registry.c — the names and functions of the allgathers, broadcasts and reductions compiled in.
 *
 * The rest of each algorithm's record (what it does, restrictions, cost, schedule, side) is in
 * mpilab.model.algorithms, the kit's one registry; `mpilab list` prints it.
 *
 * It drives collbench's --list, --list --json, --help and the "unknown algorithm" error,
 * the correctness sweep, and (through registry.json) the Python side. Compiled with
 * -DLAB_REGISTRY_ONLY it needs no MPI, so build/<flavour>/registry.json is produced by a
 * plain host program (registry_dump.c) without any launcher.
 */
#include <stdio.h>
#include <string.h>
#include "labcoll.h"

#ifdef LAB_REGISTRY_ONLY
#define LAB_FN(f) NULL
#else
#define LAB_FN(f) f
#endif

/* The instructor's algorithms (ring, Bruck: lab 2's tasks; the binomial-tree broadcast: one of
 * lab 6's) live in the answer key, solutions/c_reference/; the Makefile builds them in when that
 * folder is there, and this file then includes their rows (LAB_KEY_ROWS and LAB_KEY_BCAST_ROWS,
 * from solutions/c_reference/registry_rows.h). */
#ifdef LAB_KEY_REGISTRY
#include LAB_KEY_REGISTRY
#endif

/* Test-only rows: tests/test_c_reference.py compiles this file with
 * -DLAB_TEST_ALGORITHMS='"tests/broken_allgather.h"' into a collbench of its own, to see
 * collbench's failure paths fire for real. The shipped build never defines it. */
#ifdef LAB_TEST_ALGORITHMS
#include LAB_TEST_ALGORITHMS
#endif

const lab_algorithm lab_allgather_registry[] = {
    {"gather_bcast", LAB_FN(lab_allgather_gather_bcast)},
    {"pairwise", LAB_FN(lab_allgather_pairwise)},
#ifdef LAB_KEY_ROWS
    LAB_KEY_ROWS
#endif
#ifdef LAB_TEST_ROWS
    LAB_TEST_ROWS
#endif
};
const int lab_allgather_registry_size =
    (int)(sizeof(lab_allgather_registry) / sizeof(lab_allgather_registry[0]));

const lab_algorithm *lab_allgather_lookup(const char *name)
{
    for (int i = 0; i < lab_allgather_registry_size; i++)
        if (strcmp(lab_allgather_registry[i].name, name) == 0)
            return &lab_allgather_registry[i];
    return NULL;
}

void lab_allgather_valid_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i <= lab_allgather_registry_size; i++) {
        const char *name = i < lab_allgather_registry_size ? lab_allgather_registry[i].name
                                                           : "native";
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

/* The broadcasts: the answer key's (lab 6's tasks), then the clones of Open MPI 4.1's forced chain
 * and pipeline (bcast/ompi_*.c), in mpilab.model.algorithms' order. */
const lab_bcast_algorithm lab_bcast_registry[] = {
#ifdef LAB_KEY_BCAST_ROWS
    LAB_KEY_BCAST_ROWS
#endif
    {"ompi_chain", LAB_FN(lab_bcast_ompi_chain)},
    {"ompi_pipeline", LAB_FN(lab_bcast_ompi_pipeline)},
    {NULL, NULL},
};
const int lab_bcast_registry_size =
    (int)(sizeof(lab_bcast_registry) / sizeof(lab_bcast_registry[0])) - 1;

const lab_bcast_algorithm *lab_bcast_lookup(const char *name)
{
    for (int i = 0; i < lab_bcast_registry_size; i++)
        if (strcmp(lab_bcast_registry[i].name, name) == 0)
            return &lab_bcast_registry[i];
    return NULL;
}

void lab_bcast_valid_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < lab_bcast_registry_size; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", lab_bcast_registry[i].name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

/* The reductions: the clones of Open MPI 4.1's forced chain and pipeline (reduce/ompi_*.c). */
const lab_reduce_algorithm lab_reduce_registry[] = {
    {"ompi_chain", LAB_FN(lab_reduce_ompi_chain)},
    {"ompi_pipeline", LAB_FN(lab_reduce_ompi_pipeline)},
};
const int lab_reduce_registry_size =
    (int)(sizeof(lab_reduce_registry) / sizeof(lab_reduce_registry[0]));

const lab_reduce_algorithm *lab_reduce_lookup(const char *name)
{
    for (int i = 0; i < lab_reduce_registry_size; i++)
        if (strcmp(lab_reduce_registry[i].name, name) == 0)
            return &lab_reduce_registry[i];
    return NULL;
}

void lab_reduce_valid_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < lab_reduce_registry_size; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", lab_reduce_registry[i].name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

static void print_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

void lab_allgather_print_json(FILE *out)
{
    fprintf(out, "{\"collective\": \"allgather\", \"algorithms\": [");
    for (int i = 0; i < lab_allgather_registry_size; i++) {
        const lab_algorithm *a = &lab_allgather_registry[i];
        fprintf(out, "%s{\"name\": ", i ? ", " : "");
        print_json_string(out, a->name);
        fputc('}', out);
    }
    fprintf(out, "]}\n");
}
