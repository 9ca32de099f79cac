/* dup.h — a private copy of an array: libcalib's *_copy functions and the
 * daemon's seg_copy. */
#ifndef CALIB_DUP_H
#define CALIB_DUP_H

#include <stdlib.h>
#include <string.h>

/* A malloc'ed copy of n bytes at src; NULL for a NULL src, or (with *fail
 * set) when out of memory. */
static inline void *calib_dup(const void *src, size_t n, int *fail)
{
    if (!src)
        return NULL;
    void *p = malloc(n ? n : 1);
    if (!p)
        *fail = 1;
    else
        memcpy(p, src, n);
    return p;
}

#endif
