/*
 * The binned lower-bound estimators of Gruber & Buettner (NeurIPS 2022) on a
 * stored sample set, with the conventions of their reference code:
 *   conf = max_k p_k, correct = [argmax_k p_k = y], ties to the lowest index;
 *   ECE = plugin q = 1 on 15 equal-width bins; TCE_2(M) = sqrt(plugin q = 2);
 *   CWCE_2(M) = sqrt(sum over k of the class-wise plugin q = 2) (bins.h);
 *   debiased TCE_2 on 15 equal-mass bins, and KS (below).
 */
#ifndef CALIB_ESTIMATORS_H
#define CALIB_ESTIMATORS_H

#include <stddef.h>
#include <stdint.h>

#include "calib/bins.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One top-label observation; idx is its position in the input, so that
 * sorting is stable (equal confidences keep input order). */
typedef struct calib_toplabel {
    double conf;
    uint32_t correct; /* 0 or 1 */
    size_t idx;
} calib_toplabel;

/* Sorts by ascending conf, ties by idx. */
void calib_toplabel_sort(calib_toplabel *v, size_t n);

/*
 * Debiased TCE_2 on m equal-mass bins, v sorted: cut the sorted confidences
 * into consecutive chunks of ceil(n/m); the edges are the midpoints between
 * the last value of chunk i and the first of chunk i + 1, then 1.0, duplicates
 * removed; values are assigned right-closed as for equal-width bins. The
 * result is sqrt(max(0, sum over bins with n_b >= 2 of (n_b/n) ((mean conf_b -
 * a_b)^2 - a_b (1 - a_b) / (n_b - 1)))), a_b = mean correct_b. NaN if n = 0.
 */
double calib_tce2_em_debiased(const calib_toplabel *v, size_t n, uint32_t m);

/* KS = max_i |C_i - A_i| / n, with C and A the running sums of conf and
 * correct over v sorted ascending. NaN if n = 0. */
double calib_ks(const calib_toplabel *v, size_t n);

typedef struct calib_estimates {
    size_t n;
    double accuracy;
    double ece;
    double tce2_15;
    double tce2_100;
    double tce2_15em_debiased;
    double cwce2_15;
    double cwce2_100;
    double ks;
} calib_estimates;

/*
 * A streaming estimator: equal-width bins (15 and 100, top-label and
 * class-wise) updated per sample, plus one calib_toplabel per sample for the
 * equal-mass and KS estimators, which need the whole set. Adding never
 * allocates: when the store is full, calib_estimator_add returns CALIB_EFULL
 * and the caller grows it with calib_estimator_reserve.
 */
typedef struct calib_estimator {
    uint32_t k;
    calib_bins top15, top100;
    calib_cwbins cw15, cw100;
    calib_toplabel *v;
    size_t n, cap;
} calib_estimator;

int calib_estimator_init(calib_estimator *e, uint32_t k, size_t cap);
void calib_estimator_free(calib_estimator *e);
int calib_estimator_reserve(calib_estimator *e, size_t cap);
/* p: k probabilities (checked by the caller); y < k. */
int calib_estimator_add(calib_estimator *e, const double *p, size_t y);
/* Empties the bins and the store, keeping the capacity: the next sample set
 * starts without allocating (calibctl sizes: one estimator per subsample). */
void calib_estimator_reset(calib_estimator *e);
/* Sorts the stored set (once more samples can still be added after). */
int calib_estimator_finish(calib_estimator *e, calib_estimates *out);

/* All of the above on n probability vectors p (row-major n x k) with labels
 * y. Allocates its working memory. */
int calib_estimate(const double *p, const uint32_t *y, size_t n, size_t k,
                   calib_estimates *out);

#ifdef __cplusplus
}
#endif

#endif
