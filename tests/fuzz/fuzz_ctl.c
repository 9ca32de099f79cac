/* fuzz_ctl.c — what the targets that compile calibctl's commands in
 * (fuzz_csv, fuzz_snapshot) need of calibctl.c, which also holds main(). */
#include <stdarg.h>
#include <stdio.h>

#include "ctl.h"
#include "fuzz.h"

/* Formatted (its arguments checked by the sanitizers), shown only with
 * FUZZ_VERBOSE. */
void ctl_error(const char *file, unsigned long line, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (fuzz_verbose())
        fprintf(stderr, "calibctl: %s:%lu: %s\n", file ? file : "", line, buf);
}
