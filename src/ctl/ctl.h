/* ctl.h — calibctl's commands and shared helpers. */
#ifndef CALIBCTL_CTL_H
#define CALIBCTL_CTL_H

#include <limits.h>
#include <stddef.h>

/* Exit codes: 0 success, 1 runtime failure, 2 bad input or usage. */
enum { CTL_OK = 0, CTL_FAIL = 1, CTL_BADINPUT = 2 };

/* Largest K calibctl accepts (class-wise bins hold K x 100 cells). */
#define CTL_MAX_CLASSES 10000

int cmd_score(int argc, char **argv);
int cmd_sizes(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_ping(int argc, char **argv);
int cmd_refit(int argc, char **argv);
int cmd_forget(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_keygen(int argc, char **argv);

/* Prints "calibctl: FILE:LINE: what" (LINE omitted when 0) to stderr. */
void ctl_error(const char *file, unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A decimal integer in [lo, hi] in the len bytes at s, nothing else (no
 * sign, no blanks): 0, else -1. Inline: the fuzz targets compile commands
 * without calibctl.c. */
static inline int ctl_parse_uint(const char *s, size_t len, unsigned long long lo,
                                 unsigned long long hi, unsigned long long *out)
{
    unsigned long long v = 0;
    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

#endif
