/*
 * fuzz.h — what the libFuzzer targets of tests/fuzz share: the entry
 * points, a check that aborts (libFuzzer keeps the input that made it), a
 * scratch file and directory of the process, and (fuzz_daemon.c) a calibd
 * without sockets. See tests/fuzz/README.md.
 */
#ifndef CALIB_FUZZ_H
#define CALIB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property the code under test promises: when it does not hold, prints
 * what and aborts, which libFuzzer reports as a crash with its input. */
#define FUZZ_CHECK(cond)                                                      \
    do {                                                                      \
        if (!(cond))                                                          \
            fuzz_fail(__FILE__, __LINE__, #cond);                             \
    } while (0)
_Noreturn void fuzz_fail(const char *file, int line, const char *what);

/* 1 when msgpack bytes start with a map's head (fixmap, map 16, map 32). */
int fuzz_is_map(const void *buf, size_t len);

/* A directory of this process, created at the first call and removed,
 * with what is in it, at exit. */
const char *fuzz_dir(void);
/* Empties fuzz_dir() (a target whose code writes there starts clean). */
void fuzz_dir_clear(void);
/* Writes data to the file fuzz_dir()/name (replaced) and returns its path
 * (static storage, valid until the next call). */
const char *fuzz_file(const char *name, const void *data, size_t size);
/* stdout to /dev/null: the commands a target runs print their results. */
void fuzz_quiet_stdout(void);
/* FUZZ_VERBOSE=1 in the environment: the daemon's log and calibctl's
 * messages go to stderr, and stdout stays (to see why an input fails). */
int fuzz_verbose(void);

/* ------------------------------------------------------------ a calibd */

struct calibd;
/* A calibd as the unit tests make one (tests/unit/test_registry.c): the
 * built-in configuration with small models, a libuv loop that is never
 * run (its clock only), a log at debug level into /dev/null (every line
 * is formatted, none kept), fuzz_dir() as its state directory. It lives
 * as long as the process. */
struct calibd *fuzz_daemon_new(void);
/* Drops the models and zeroes the counters: as new, for the next input. */
void fuzz_daemon_clear(struct calibd *d);
/* Packs every model's status (what `calibctl status`, GET /status and
 * the page show) and checks that the reply is one msgpack map. */
void fuzz_daemon_status(struct calibd *d);

#endif
