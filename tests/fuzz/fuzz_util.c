/* fuzz_util.c — the checks and scratch files of the fuzz targets (fuzz.h). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    abort();
}

int fuzz_is_map(const void *buf, size_t len)
{
    unsigned char c = len ? *(const unsigned char *)buf : 0;
    return len && ((c & 0xf0) == 0x80 || c == 0xde || c == 0xdf);
}

static char dir[4096];

static void remove_dir(void)
{
    fuzz_dir_clear();
    rmdir(dir);
}

const char *fuzz_dir(void)
{
    if (dir[0])
        return dir;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/calib-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_dir);
    return dir;
}

void fuzz_dir_clear(void)
{
    DIR *d = opendir(fuzz_dir());
    if (!d)
        return;
    struct dirent *e;
    char path[sizeof dir + 300];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

const char *fuzz_file(const char *name, const void *data, size_t size)
{
    static char path[sizeof dir + 300];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n <= 0) {
            perror(path);
            abort();
        }
        p += n;
        size -= (size_t)n;
    }
    close(fd);
    return path;
}

int fuzz_verbose(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FUZZ_VERBOSE");
        v = e && *e && strcmp(e, "0") != 0;
    }
    return v;
}

void fuzz_quiet_stdout(void)
{
    if (fuzz_verbose())
        return;
    if (!freopen("/dev/null", "w", stdout)) {
        perror("fuzz: /dev/null");
        abort();
    }
}
