/* What keeps a case harness's verdict out of the reach of the student's function it calls
 * (mpilab.grade.sealed is the grader's side).
 *
 * Private data. Before the ranks start, the grader writes one file per rank, seed.<rank>, with 8
 * random bytes. Each rank reads its own and deletes it, and the ranks meet in a barrier, so by
 * the time the student's function first runs no rank can read another's seed: the data a case
 * hands a rank (sealed_value) can reach the other ranks only through the messages the function
 * sends. The harness learns the other ranks' seeds after the call, to check the result.
 *
 * Sealed lines. The grader also writes key (16 random bytes), which rank 0 reads and deletes.
 * Every CASE line rank 0 prints ends in a tab and the SipHash-2-4 of the line under that key,
 * in 16 hex digits; the grader counts no line whose hash is wrong, so a function that prints
 * "CASE ... PASS" lines of its own (or rewrites the harness's) gains nothing.
 */
#ifndef MPILAB_SEALED_H
#define MPILAB_SEALED_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t sealed_seed;            /* this rank's */
static unsigned char sealed_key[16];    /* rank 0's */

static uint64_t sealed_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

#define SEALED_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SEALED_ROUND                                                                 \
    do {                                                                             \
        v0 += v1; v1 = SEALED_ROTL(v1, 13); v1 ^= v0; v0 = SEALED_ROTL(v0, 32);      \
        v2 += v3; v3 = SEALED_ROTL(v3, 16); v3 ^= v2;                                \
        v0 += v3; v3 = SEALED_ROTL(v3, 21); v3 ^= v0;                                \
        v2 += v1; v1 = SEALED_ROTL(v1, 17); v1 ^= v2; v2 = SEALED_ROTL(v2, 32);      \
    } while (0)

/* SipHash-2-4 (Aumasson and Bernstein, 2012) of m[0..len) under a 16-byte key. */
static uint64_t sealed_siphash(const unsigned char key[16], const unsigned char *m, size_t len)
{
    uint64_t k0 = sealed_le64(key), k1 = sealed_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t w = sealed_le64(m + i);
        v3 ^= w;
        SEALED_ROUND;
        SEALED_ROUND;
        v0 ^= w;
    }
    uint64_t last = (uint64_t)len << 56;
    for (size_t j = 0; j < len % 8; j++) last |= (uint64_t)m[whole + j] << (8 * j);
    v3 ^= last;
    SEALED_ROUND;
    SEALED_ROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SEALED_ROUND;
    SEALED_ROUND;
    SEALED_ROUND;
    SEALED_ROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* A 64-bit mix (the finaliser of splitmix64): nearby inputs give unrelated outputs. */
static uint64_t sealed_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Element i of case seq's data of the rank whose seed is `seed`: an integer in 0..modulo-1. */
static double sealed_value(uint64_t seed, long seq, long i, int modulo)
{
    return (double)(sealed_mix(seed ^ sealed_mix((uint64_t)seq << 32 ^ (uint64_t)i)) % (uint64_t)modulo);
}

static int sealed_read(const char *name, unsigned char *buf, size_t n)
{
    FILE *f = fopen(name, "rb");
    if (!f) return -1;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    unlink(name);
    return got == n ? 0 : -1;
}

/* Read this rank's seed (and on rank 0 the key), delete the files, and wait for every rank. */
static void sealed_init(void)
{
    int rank;
    char name[32];
    unsigned char b[8];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(name, sizeof name, "seed.%d", rank);
    if (sealed_read(name, b, sizeof b) != 0 || (rank == 0 && sealed_read("key", sealed_key, 16) != 0)) {
        fprintf(stderr, "rank %d: %s or key is missing: the case harness runs under mpilab's grader, "
                "which writes them (mpilab.grade.sealed.prepare)\n", rank, name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    sealed_seed = sealed_le64(b);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every rank's seed of comm, by rank in comm (a collective of the harness, after the student's call). */
static void sealed_seeds(MPI_Comm comm, uint64_t *seeds)
{
    MPI_Allgather(&sealed_seed, 1, MPI_UINT64_T, seeds, 1, MPI_UINT64_T, comm);
}

/* `line` (no newline) followed by a tab and its seal, into out; returns the length written. */
static int sealed_line(const char *line, char *out, size_t cap)
{
    uint64_t h = sealed_siphash(sealed_key, (const unsigned char *)line, strlen(line));
    return snprintf(out, cap, "%s\t%016llx\n", line, (unsigned long long)h);
}

/* Print the sealed CASE line of the case `current`: PASS when msg is empty, else FAIL and msg. */
static void sealed_case(const char *current, const char *msg)
{
    char line[1024], out[1048];
    if (msg[0])
        snprintf(line, sizeof line, "CASE %s\tFAIL\t%s", current, msg);
    else
        snprintf(line, sizeof line, "CASE %s\tPASS", current);
    sealed_line(line, out, sizeof out);
    fputs(out, stdout);
    fflush(stdout);
}

/* From a SIGALRM handler: write the sealed TIMEOUT line of the case `current` and exit with 3. */
static void sealed_timeout(const char *current)
{
    char line[256], out[280];
    snprintf(line, sizeof line, "CASE %s\tTIMEOUT", current);
    int len = sealed_line(line, out, sizeof out);
    if (write(STDOUT_FILENO, out, (size_t)len) < 0) _exit(3);
    _exit(3);
}

#endif
