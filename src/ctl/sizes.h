/* sizes.h — `calibctl sizes`: the figures of subsamples by test-set size,
 * shared between the command (cmd_sizes.c) and its plot (sizes_svg.c). */
#ifndef CALIBCTL_SIZES_H
#define CALIBCTL_SIZES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Panels of the plot: calibration-error estimates (binned lower bounds,
 * and RBS, an upper bound in the same units), and mean proper scores. */
enum { SIZES_PANEL_ERROR = 0, SIZES_PANEL_SCORE = 1, SIZES_PANELS = 2 };

typedef struct sizes_est {
    const char *name;  /* the key calibctl score prints it under */
    int panel;
    int upper;         /* RBS, the upper bound among the lower bounds: dashed */
} sizes_est;

/* One estimator at one size, across that size's subsamples. */
typedef struct sizes_stat {
    double mean, sd, q05, q95; /* sd NaN for one subsample */
} sizes_stat;

typedef struct sizes_result {
    const char *path;
    size_t rows, k;      /* k 0 for regression */
    const char *form;
    uint64_t seed;
    unsigned long reps;  /* subsamples asked for per size */
    const sizes_est *est;
    size_t nest;
    size_t nsizes;
    const size_t *size;          /* [nsizes], ascending */
    const unsigned long *reps_of; /* [nsizes] subsamples drawn */
    const sizes_stat *stat;      /* [nsizes * nest], size-major */
} sizes_result;

/* Writes the plot as a standalone SVG document; 0, or -1 if f failed. */
int sizes_svg_write(const sizes_result *r, FILE *f);

#endif
