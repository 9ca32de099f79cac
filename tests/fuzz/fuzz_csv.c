/*
 * fuzz_csv.c — calibctl's prediction CSV (calibctl(1)): the file through
 * `calibctl score FILE`, `calibctl fit --method M --test FILE FILE` and
 * `calibctl score --label-free --reference FILE FILE`,
 * the commands' own code (cmd_score.c, cmd_fit.c) over csv_table.c (the
 * reader, through libcsv) and pred_csv.c (the header's layout and each
 * row's checks), then libcalib's scores, estimators and fits on what they
 * accept. Checked: the exit code is 0 or 2, bad input (1, a failure of
 * the system, has no cause here).
 *
 * An input is the file, written to the process's scratch directory.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "ctl.h"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_stdout(); /* the commands print their JSON */
    return 0;
}

/* The method that fits the outputs the header names, as a user picks it. */
static const char *method_for(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - (const char *)data) : size;
    char head[256];
    n = n < sizeof head - 1 ? n : sizeof head - 1;
    memcpy(head, data, n);
    head[n] = 0;
    if (strstr(head, "mean") || strstr(head, "var"))
        return "variance";
    if (strstr(head, "z0") || strstr(head, "p0"))
        return "temperature";
    return "platt";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200];
    snprintf(path, sizeof path, "%s", fuzz_file("pred.csv", data, size));
    char method[32];
    snprintf(method, sizeof method, "%s", method_for(data, size));
    char *score[] = {"score", path, NULL};
    int rc = cmd_score(2, score);
    FUZZ_CHECK(rc == CTL_OK || rc == CTL_BADINPUT);
    char *fit[] = {"fit", "--method", method, "--test", path, path, NULL};
    int frc = cmd_fit(6, fit);
    FUZZ_CHECK(frc == CTL_OK || frc == CTL_BADINPUT);
    /* the file as predictions and as their own reference, with a test
     * whose segments start every 10 rows */
    char *lf[] = {"score", "--label-free", "--reference", path, "--shift-reference", "10", path,
                  NULL};
    int lrc = cmd_score(7, lf);
    FUZZ_CHECK(lrc == CTL_OK || lrc == CTL_BADINPUT);
    return 0;
}
