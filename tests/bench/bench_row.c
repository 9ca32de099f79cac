/*
 * bench_row.c — what a prediction's row costs libcalib, per class: the
 * pieces calibd runs on every pair of a classifier (calib_check_logits,
 * calib_score_logits with its softmax, calib_argmax, calib_softmax alone,
 * calib_cwbins_add with 15 bins) at K = 10, 100 and 1000.
 *
 * 64 rows of logits N(0, 1.5^2) per class (as bench_rate sends) are drawn
 * first, then each piece runs over them round-robin until it has seen
 * about 2 * 10^7 classes; the least ns per class of `reps` repetitions is
 * printed. `make bench` runs it.
 *
 *     bench_row [reps]
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "calib/calib.h"

enum { ROWS = 64, BINS = 15 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { CHECK, SCORE, ARGMAX, SOFTMAX, CWBINS, PIECES };
static const char *const names[PIECES] = {
    "calib_check_logits", "calib_score_logits", "calib_argmax", "calib_softmax",
    "calib_cwbins_add",
};

/* One pass of `piece` over n rows; returns something of each result, so
 * that nothing is optimised away. */
static double run(int piece, size_t k, size_t n, const double *z, double *p,
                  calib_cwbins *cw)
{
    double sink = 0;
    for (size_t i = 0; i < n; i++) {
        const double *zi = z + (i % ROWS) * k;
        double *pi = p + (i % ROWS) * k;
        size_t y = i % k;
        calib_score s;
        switch (piece) {
        case CHECK: sink += calib_check_logits(zi, k); break;
        case SCORE: calib_score_logits(zi, k, y, pi, &s); sink += s.brier; break;
        case ARGMAX: sink += (double)calib_argmax(pi, k); break;
        case SOFTMAX: calib_softmax(zi, k, pi); sink += pi[y]; break;
        default: calib_cwbins_add(cw, pi, y); break;
        }
    }
    return sink;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) {
        fprintf(stderr, "usage: bench_row [reps >= 1]\n");
        return 2;
    }
    static const size_t ks[] = {10, 100, 1000};
    calib_rng r;
    calib_rng_seed(&r, 1);
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
        size_t k = ks[c], n = 20000000 / k;
        double *z = malloc(ROWS * k * sizeof *z), *p = malloc(ROWS * k * sizeof *p);
        calib_cwbins cw;
        if (!z || !p || calib_cwbins_init(&cw, (uint32_t)k, BINS) != CALIB_OK) {
            fprintf(stderr, "bench_row: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < ROWS * k; i++)
            z[i] = 1.5 * calib_rng_normal(&r);
        for (size_t i = 0; i < ROWS; i++)
            calib_softmax(z + i * k, k, p + i * k);
        printf("K = %zu:", k);
        double sink = 0;
        for (int piece = 0; piece < PIECES; piece++) {
            double best = INFINITY;
            for (int rep = 0; rep < reps; rep++) {
                double t0 = now();
                sink += run(piece, k, n, z, p, &cw);
                double ns = (now() - t0) / ((double)n * (double)k) * 1e9;
                best = ns < best ? ns : best;
            }
            printf("  %s %.2f", names[piece], best);
        }
        printf(" ns a class (%g)\n", sink > 0 ? 1.0 : 0.0);
        calib_cwbins_free(&cw);
        free(z);
        free(p);
    }
    return 0;
}
