/*
 * Recalibration maps learned online, one labelled pair at a time, by the
 * Online Newton Step (Hazan, Agarwal and Kale 2007) on the same objective
 * as the batch fits of recal.h, as Gupta and Ramdas (ICML 2023) do for
 * Platt scaling. See calib_online(3).
 *
 *   temperature  beta = 1 / T, log score of softmax(beta z)   logits, probs, binary
 *   platt        (a, b), log score of sigmoid(a s + b)        binary, or K = 2
 *   variance     w, DSS of N(mu, w var)                       gaussian
 *
 * z and s are recal.h's (calib_recal_row_logits); the parameters come out
 * in recal.h's order ({T}, {a, b}, {w, 0}), so that the built-in methods'
 * apply functions serve them. Temperature's and Platt's objectives are
 * convex and exp-concave in the learner's coordinates on its box (below),
 * where ONS's regret against the best fixed map of the box in hindsight
 * is O(d log n). Variance scaling's best w on the pairs so far has a
 * closed form, the mean of (y - mu)^2 / var: the learner follows it, with
 * eps pseudo-pairs at w = 1 (the regret of this leader, the scale
 * family's maximum likelihood, is O(log n) as well).
 *
 * An update allocates nothing (calib_online_init allocates K doubles),
 * never prints, and leaves the learner unchanged on a rejected pair.
 */
#ifndef CALIB_ONLINE_H
#define CALIB_ONLINE_H

#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"

/* The step's constants; 0 takes the default. */
typedef struct calib_online_cfg {
    double gamma; /* ONS's step: theta -= A^-1 g / gamma, in [1e-6, 1e6]
                     (default 0.1) */
    double eps;   /* A starts at eps I; variance: pseudo-pairs; in [1e-9,
                     1e9] (default 1) */
} calib_online_cfg;

enum calib_online_method {
    CALIB_ONLINE_TEMPERATURE,
    CALIB_ONLINE_PLATT,
    CALIB_ONLINE_VARIANCE,
};

/* The boxes the learner stays in (its coordinates). */
#define CALIB_ONLINE_BETA_MIN 0.01  /* T <= 100 */
#define CALIB_ONLINE_BETA_MAX 100.0 /* T >= 0.01 */
#define CALIB_ONLINE_A_MIN 0.01     /* a > 0: the map stays increasing */
#define CALIB_ONLINE_A_MAX 100.0
#define CALIB_ONLINE_B_MAX 100.0    /* |b| <= 100 */
#define CALIB_ONLINE_U_MAX 9.21     /* |ln w| <= 9.21: w in [1e-4, 1e4] */
#define CALIB_ONLINE_G_MAX 1e6      /* a larger gradient is refused */

typedef struct calib_online {
    int method, form;  /* calib_online_method, CALIB_FORM_* */
    size_t k;
    unsigned d;        /* parameters learned: 1, or 2 (platt) */
    double theta[2];   /* the learner's coordinates: beta; a, b; u */
    double a[3];       /* A: a11, a12, a22 (d = 1: a11 only; variance: the
                          running sums) */
    double ainv[3];    /* A^-1, the same way (d = 2) */
    double lo[2], hi[2];
    double gamma, eps;
    uint64_t n;        /* pairs learned from */
    calib_ksum loss;   /* the sum of each pair's loss under the map in force
                          before it was learned from (the online forecasts') */
    double *buf;       /* k doubles: a row's logits */
} calib_online;

/* Starts a learner of method ("temperature", "platt", "variance") for
 * outputs of form and K, at the identity map (T = 1; a = 1, b = 0;
 * w = 1). CALIB_EINVAL for a method the form does not take, an unknown
 * form, or a cfg value outside its range; CALIB_ENOMEM. */
int calib_online_init(calib_online *o, const char *method, int form, size_t k,
                      const calib_online_cfg *cfg);
void calib_online_free(calib_online *o);

/* One pair: the outputs x (as calib_check_* accepts them for the form)
 * and the outcome y (a class, or a real number). Adds its loss under the
 * map in force to `loss`, then takes one step. CALIB_OK; or, with nothing
 * changed, the check's error, CALIB_ENONFINITE for a loss or gradient
 * that overflows, CALIB_EINVAL for a gradient beyond CALIB_ONLINE_G_MAX
 * (temperature and Platt: outputs 1e6 apart). */
int calib_online_update(calib_online *o, const double *x, double y);

/* The map in force, in recal.h's order for the method (2 doubles). */
void calib_online_params(const calib_online *o, double params[2]);

/* The loss of the map params (recal.h's order) on one pair, as
 * calib_online_update counts it: the log score, or the DSS. */
double calib_online_loss_of(const calib_online *o, const double params[2], const double *x,
                            double y);

#endif
