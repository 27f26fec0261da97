/* labopts.h — command-line value parsing, messages and buffers shared by the kit's drivers
 * (collbench, pingpong). Each driver names itself once, after MPI_Init, with
 * lab_set_reporter("collbench", rank); lab_fail then prints "collbench: ..." on rank 0 only.
 */
#ifndef LABOPTS_H
#define LABOPTS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "64", "4K", "1M" -> bytes (binary suffixes); -1 for anything else, negatives included. */
static inline long lab_parse_bytes(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0)
        return -1;
    if (*end == 'K' || *end == 'k') { v *= 1024; end++; }
    else if (*end == 'M' || *end == 'm') { v *= 1024 * 1024; end++; }
    return *end ? -1 : v;
}

/* A whole decimal integer in [minimum, 1e9] into *out: 0, or -1 (and *out untouched). */
static inline int lab_parse_int(const char *s, int minimum, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < minimum || v > 1000000000)
        return -1;
    *out = (int)v;
    return 0;
}

/* -m "MIN:MAX" (or "MAX", meaning default_min:MAX) into *lo, *hi; a bad number gives -1. */
static inline void lab_parse_range(const char *m, long default_min, long *lo, long *hi)
{
    const char *colon = strchr(m, ':');
    if (colon) {
        char buf[64];
        size_t len = (size_t)(colon - m);
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, m, len);
        buf[len] = '\0';
        *lo = lab_parse_bytes(buf);
        *hi = lab_parse_bytes(colon + 1);
    } else {
        *lo = default_min;
        *hi = lab_parse_bytes(m);
    }
}

/* "<prog>: <message>" and a newline on stderr, printed by rank 0 only. */
static inline void lab_vfail(const char *prog, int rank, const char *fmt, va_list ap)
{
    if (rank != 0)
        return;
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

/* The driver's name and this process's rank, for lab_fail and lab_parse_int_opt (one copy per
 * program: a driver is one translation unit). */
typedef struct {
    const char *prog;
    int rank;
} lab_reporter;

static inline lab_reporter *lab_reporter_of(void)
{
    static lab_reporter reporter = {"driver", 0};
    return &reporter;
}

static inline void lab_set_reporter(const char *prog, int rank)
{
    lab_reporter_of()->prog = prog;
    lab_reporter_of()->rank = rank;
}

/* "<prog>: <message>" and a newline on stderr, rank 0 only (lab_set_reporter names prog). */
static inline void lab_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lab_vfail(lab_reporter_of()->prog, lab_reporter_of()->rank, fmt, ap);
    va_end(ap);
}

/* lab_fail, then 2 (the usage error's exit status): `status = lab_usage("...", v);`. */
static inline int lab_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lab_vfail(lab_reporter_of()->prog, lab_reporter_of()->rank, fmt, ap);
    va_end(ap);
    return 2;
}

/* The value of option `opt` as a whole number >= minimum into *out: 0, or 2 (the usage
 * error's exit status) after lab_fail has said what was wrong. */
static inline int lab_parse_int_opt(const char *opt, const char *s, int minimum, int *out)
{
    if (lab_parse_int(s, minimum, out) == 0)
        return 0;
    lab_fail("bad value '%s' for %s; expected an integer >= %d", s, opt, minimum);
    return 2;
}

/* qsort's comparison of doubles, for the medians of the timed iterations. */
static inline int lab_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A page-aligned buffer of n bytes with every byte set to `fill`, as OSU's
 * allocate_memory_coll + set_buffer. Every page is written, so it is a real page of its own:
 * an untouched calloc'ed buffer reads as the kernel's one shared zero page, which is always in
 * cache, and made the drivers 8-22 % faster than OSU from 256 KiB up (DEVELOPING 2d). NULL if
 * out of memory. */
static inline void *lab_touched_alloc(size_t n, int fill)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    size_t size = (n + align - 1) / align * align;   /* C11 aligned_alloc: a multiple */
    void *p = aligned_alloc(align, size > 0 ? size : align);
    if (p != NULL)
        memset(p, fill, size > 0 ? size : align);
    return p;
}

#endif
