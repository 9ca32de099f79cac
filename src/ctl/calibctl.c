/* calibctl.c — command dispatch for calibctl(1). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "calib/calib.h"
#include "ctl.h"

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"score", cmd_score, "score [--segment COL] FILE    audit a CSV of predictions and outcomes"},
    {"sizes", cmd_sizes, "sizes [OPTIONS] FILE          estimators against the test-set size (subsamples)"},
    {"fit", cmd_fit, "fit --method M FILE [--test F2] fit a recalibration map"},
    {"status", cmd_status, "status [--control EP] [MODEL] a running calibd's statistics, as JSON"},
    {"refit", cmd_refit, "refit [--control EP] MODEL     refit MODEL on its recent samples now"},
    {"forget", cmd_forget, "forget [--control EP] MODEL    drop MODEL and its statistics"},
    {"ping", cmd_ping, "ping [--control EP]           is calibd answering?"},
    {"snapshot", cmd_snapshot, "snapshot FILE [MODEL]         a calibd snapshot, as status shows it"},
    {"merge", cmd_merge, "merge FILE... -o OUT          snapshots of shards or days merged into one"},
    {"keygen", cmd_keygen, "keygen NAME                   a CURVE key pair: NAME.key, NAME.key_secret"},
};

void ctl_error(const char *file, unsigned long line, const char *fmt, ...)
{
    va_list ap;
    fputs("calibctl: ", stderr);
    if (file && line)
        fprintf(stderr, "%s:%lu: ", file, line);
    else if (file)
        fprintf(stderr, "%s: ", file);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void usage(FILE *f)
{
    fputs("usage: calibctl COMMAND [OPTIONS] [ARGS]\n\ncommands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n", commands[i].summary);
    fputs("\n  calibctl COMMAND --help   options of one command\n"
          "  calibctl --version\n\nSee calibctl(1).\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CTL_BADINPUT;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return CTL_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("calibctl %s (libcalib %s)\n", PACKAGE_VERSION, calib_version());
        return CTL_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    ctl_error(NULL, 0, "unknown command '%s' (try calibctl --help)", argv[1]);
    return CTL_BADINPUT;
}
