/*
 * bench_lfree.c — a prediction's share of the label-free estimates, for
 * callgrind: N (100,000) predictions of K = 10 into a ring of 10,000,
 * with or without the label-shift test, as probabilities
 * (calib_lfree_add) or as logits (calib_lfree_add_logits, the softmax in
 * float), each followed by its expected scores
 * (calib_lfree_newest_expected, what calibd keeps for the join) under
 * the priors of one update made after the first 10,000.
 *
 *     make -C build/plain tests/bench/bench_lfree && cd build/plain &&
 *     ./libtool --mode=execute valgrind --tool=callgrind \
 *         --callgrind-out-file=cg.lfree ./tests/bench/bench_lfree 0.01 logits &&
 *     callgrind_annotate --inclusive=yes cg.lfree | grep calib_lfree_
 *     (0.01: the test at calibd's level; 0: without it)
 *
 * A function's inclusive count over N is its cost a prediction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/lfree.h"

enum { K = 10, N = 100000 };

int main(int argc, char **argv)
{
    double alpha = argc > 1 ? atof(argv[1]) : 0.01;
    int logits = argc > 2 && strcmp(argv[2], "logits") == 0;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = K, .recent = 10000, .alpha = alpha, .reference = 2000};
    if (!(alpha >= 0 && alpha < 1) || (argc > 2 && !logits && strcmp(argv[2], "probs")) ||
        calib_lfree_init(&lf, &c) != CALIB_OK) {
        fprintf(stderr, "usage: bench_lfree [ALPHA in [0, 1)] [probs|logits]\n");
        return 2;
    }
    calib_rng r;
    calib_rng_seed(&r, 1);
    double p[K], src[K], est[2], sum = 0;
    for (int j = 0; j < K; j++)
        src[j] = 1.0 / K;
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < K; j++)
            s += p[j] = logits ? 2 * calib_rng_normal(&r) : calib_rng_uniform(&r);
        if (logits) {
            calib_lfree_add_logits(&lf, p);
        } else {
            for (int j = 0; j < K; j++)
                p[j] /= s;
            calib_lfree_add(&lf, p);
        }
        if (i == 10000)
            calib_lfree_update(&lf, src);
        calib_lfree_newest_expected(&lf, NULL, est);
        sum += est[1];
    }
    printf("%llu predictions, %llu alarms, mean corrected Brier %.4f\n",
           (unsigned long long)lf.total, (unsigned long long)lf.alarms, sum / N);
    calib_lfree_free(&lf);
    return 0;
}
