/*
 * Per-sample proper scores and input checks.
 *
 * Brier: sum_k (p_k - [y = k])^2, in [0, 2]. A binary p is the K = 2 case
 * (p_1 = p), so its Brier score is 2 (p - y)^2.
 * Log: -ln p_y with p_y clamped below at CALIB_LOG_FLOOR, so at most
 * -ln(1e-15) ~= 34.54. From logits it is computed through a max-shifted
 * log-softmax, which is exact where p_y would underflow.
 * Dawid-Sebastiani: (y - mean)^2 / var + ln var.
 *
 * Every k below is >= 1 and every y < k; the scorers take checked input.
 */
#ifndef CALIB_SCORE_H
#define CALIB_SCORE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_LOG_FLOOR 1e-15
#define CALIB_PROB_SUM_TOL 1e-3

typedef struct calib_score {
    double brier;
    double log;
} calib_score;

/* Checks; each returns CALIB_OK or the CALIB_E* code of the first fault. */
int calib_check_logits(const double *z, size_t k);            /* finite */
int calib_check_probs(const double *p, size_t k);             /* [0,1], sum 1 */
int calib_check_binary(double p);                              /* [0,1] */
int calib_check_gaussian(double mean, double var);             /* var > 0 */
int calib_check_label(double y, size_t k);                     /* integer in [0,k) */

/* Stable softmax: p = exp(d) / sum exp(d) with d = z - max z: libcalib's exp
 * (within 1 ulp of glibc's), the sum in four partial sums (libcalib(3)). */
void calib_softmax(const double *z, size_t k, double *p);

/* ln p_y of softmax(z), through the max-shifted log-sum-exp: the log score
 * of calib_score_logits, bit for bit, below its clamp. */
double calib_log_softmax_at(const double *z, size_t k, size_t y);

/* Index of the largest p_k; ties go to the lowest index. k >= 1. */
size_t calib_argmax(const double *p, size_t k);

/* Scores of a probability vector (checked by the caller), label y < k. */
void calib_score_probs(const double *p, size_t k, size_t y, calib_score *s);

/* Scores of logits z; p (k doubles, caller's) receives softmax(z). */
void calib_score_logits(const double *z, size_t k, size_t y, double *p,
                        calib_score *s);

/* Scores of a binary classifier's p = P(y = 1), y in {0, 1}. */
void calib_score_binary(double p, unsigned y, calib_score *s);

/* Dawid-Sebastiani score of a Gaussian N(mean, var), var > 0. */
double calib_score_dss(double mean, double var, double y);

#ifdef __cplusplus
}
#endif

#endif
