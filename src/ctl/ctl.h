/* ctl.h — calibctl's commands and shared helpers. */
#ifndef CALIBCTL_CTL_H
#define CALIBCTL_CTL_H

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

#endif
