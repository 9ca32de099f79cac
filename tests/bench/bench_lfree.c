/*
 * bench_lfree.c — calib_lfree_add alone, for callgrind: N predictions of
 * K = 10 random probabilities into a ring of 10,000, with or without the
 * label-shift test.
 *
 *     make -C build/plain tests/bench/bench_lfree && cd build/plain &&
 *     ./libtool --mode=execute valgrind --tool=callgrind \
 *         --toggle-collect=calib_lfree_add ./tests/bench/bench_lfree 0.01
 *     (0.01: the test at calibd's level; 0: without it)
 *
 * callgrind's "Collected" over N (100,000) is the cost of a prediction.
 */
#include <stdio.h>
#include <stdlib.h>

#include "calib/calib.h"
#include "calib/lfree.h"

int main(int argc, char **argv)
{
    double alpha = argc > 1 ? atof(argv[1]) : 0.01;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = 10, .recent = 10000, .alpha = alpha, .reference = 2000};
    if (!(alpha >= 0 && alpha < 1) || calib_lfree_init(&lf, &c) != CALIB_OK) {
        fprintf(stderr, "usage: bench_lfree [ALPHA in [0, 1)]\n");
        return 2;
    }
    calib_rng r;
    calib_rng_seed(&r, 1);
    double p[10];
    for (int i = 0; i < 100000; i++) {
        double s = 0;
        for (int j = 0; j < 10; j++)
            s += p[j] = calib_rng_uniform(&r);
        for (int j = 0; j < 10; j++)
            p[j] /= s;
        calib_lfree_add(&lf, p);
    }
    printf("%llu predictions, %llu alarms\n", (unsigned long long)lf.total,
           (unsigned long long)lf.alarms);
    calib_lfree_free(&lf);
    return 0;
}
