/* labopts.h — command-line value parsing and message buffers shared by the kit's drivers
 * (collbench, pingpong). Each driver prints its own messages ("collbench: ...", "pingpong: ...").
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
