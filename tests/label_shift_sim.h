/* label_shift_sim.h — the label-shift stream of test_lfree and
 * bench_label_shift: a K = 5 classifier exactly calibrated under the
 * source priors (its outputs the posteriors of Gaussian classes), whose
 * labels are drawn from the target priors. */
#ifndef CALIB_TEST_LABEL_SHIFT_SIM_H
#define CALIB_TEST_LABEL_SHIFT_SIM_H

#include <math.h>
#include <stddef.h>

#include "calib/sample.h"

#define LSHIFT_K 5

/* y ~ tgt, x | y ~ N(mean[y], I) in `dims` (1 or 2) dimensions; ps the
 * posteriors under the source priors src (the served outputs), pt those
 * under tgt. Returns y. */
static inline size_t lshift_draw(calib_rng *r, const double mean[LSHIFT_K][2], int dims,
                                 const double *src, const double *tgt, double *ps, double *pt)
{
    size_t y = calib_rng_categorical(r, tgt, LSHIFT_K);
    double x[2] = {mean[y][0], mean[y][1]}, ss = 0, st = 0;
    for (int i = 0; i < dims; i++)
        x[i] += calib_rng_normal(r);
    for (size_t j = 0; j < LSHIFT_K; j++) {
        double d0 = x[0] - mean[j][0], d1 = x[1] - mean[j][1];
        double lik = exp(-0.5 * (d0 * d0 + d1 * d1));
        ps[j] = src[j] * lik;
        pt[j] = tgt[j] * lik;
        ss += ps[j];
        st += pt[j];
    }
    for (size_t j = 0; j < LSHIFT_K; j++) {
        ps[j] /= ss;
        pt[j] /= st;
    }
    return y;
}

/* The expected Brier score of outputs p for labels drawn from q. */
static inline double lshift_exp_brier(const double *p, const double *q)
{
    double e = 1;
    for (size_t j = 0; j < LSHIFT_K; j++)
        e += p[j] * p[j] - 2 * q[j] * p[j];
    return e;
}

#endif
