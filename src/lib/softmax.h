/*
 * softmax.h — libcalib's one softmax (internal, not installed): scoring's
 * (calib_softmax, calib_score_logits) and temperature scaling's apply.
 */
#ifndef CALIB_SOFTMAX_H
#define CALIB_SOFTMAX_H

#include <stddef.h>

/* p_j = exp(beta (z_j - zmax)) / s, s their sum in four partial sums, with
 * EXP_NEG (expk.h) in its range and libm's exp below it, one a class
 * (score.c: exp_row); zmax is the row's maximum. Returns s (>= 1; its log
 * only where a log score needs it: temperature scaling does not). p may
 * be z. beta = 1 gives exactly exp(z_j - zmax) (the product is exact). */
double calib_softmax_row(const double *z, size_t k, double zmax, double beta, double *p);

/* The largest of z[0..k), k >= 1; NaNs are skipped unless z[0] is one. */
double calib_row_max(const double *z, size_t k);

#endif
