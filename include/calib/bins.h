/*
 * Reliability-diagram bins, mergeable.
 *
 * Equal-width M bins have upper edges i/M (i = 1..M, computed as the double
 * i/M); a value goes to the first bin whose upper edge is >= the value
 * (right-closed; 0 goes to the first bin).
 *
 * Top-label bins hold, per bin, the count, the sum of confidences
 * (conf = max_k p_k) and the number correct ([argmax_k p_k = y]). Class-wise
 * bins hold, per class k and bin of p_k, the count, the sum of p_k and the
 * number of samples with y = k.
 *
 * The plugin estimate of power q is the sum over non-empty bins of
 * (n_b / n) |mean(conf_b) - mean(correct_b)|^q. ECE is q = 1 (M = 15 by
 * convention), TCE_2 = sqrt(plugin q = 2), CWCE_2 = sqrt of the sum over
 * classes of the class-wise plugin q = 2.
 */
#ifndef CALIB_BINS_H
#define CALIB_BINS_H

#include <stddef.h>
#include <stdint.h>

#include "calib/accum.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0-based bin of v in [0, 1] among m equal-width right-closed bins. */
uint32_t calib_bin_index(double v, uint32_t m);

typedef struct calib_bins {
    uint32_t m;
    uint64_t n;
    uint64_t *count;   /* [m] */
    calib_ksum *conf;  /* [m] sum of confidences */
    uint64_t *correct; /* [m] */
} calib_bins;

int calib_bins_init(calib_bins *b, uint32_t m); /* m >= 1; allocates */
/* Bytes calib_bins_init allocates for m bins; 0 if m is 0. */
size_t calib_bins_bytes(uint32_t m);
void calib_bins_free(calib_bins *b);
/* dst becomes a copy of src that shares no memory with it (free it with
 * calib_bins_free): CALIB_OK, or CALIB_ENOMEM (dst then holds nothing). */
int calib_bins_copy(calib_bins *dst, const calib_bins *src);
void calib_bins_reset(calib_bins *b);
void calib_bins_add(calib_bins *b, double conf, int correct);
int calib_bins_merge(calib_bins *dst, const calib_bins *src); /* same m */
double calib_bins_plugin(const calib_bins *b, double q); /* NaN if n = 0 */
double calib_bins_ece(const calib_bins *b);
double calib_bins_tce2(const calib_bins *b);
double calib_bins_accuracy(const calib_bins *b);

typedef struct calib_cwbins {
    uint32_t k, m;
    uint64_t n;
    uint64_t *count; /* [k * m], class-major: index k * m + bin */
    calib_ksum *psum; /* [k * m] sum of p_k */
    uint64_t *hits;  /* [k * m] samples with y = k */
} calib_cwbins;

/* The binned (Murphy) decomposition of the Brier score from class-wise
 * bins, summed over classes: reliability - resolution + uncertainty equals
 * the Brier score of the bin-mean forecasts. */
typedef struct calib_brier_decomp {
    double reliability;
    double resolution;
    double uncertainty;
} calib_brier_decomp;

int calib_cwbins_init(calib_cwbins *b, uint32_t k, uint32_t m); /* allocates */
/* Bytes calib_cwbins_init allocates; 0 for k or m 0, or an overflow. */
size_t calib_cwbins_bytes(uint32_t k, uint32_t m);
void calib_cwbins_free(calib_cwbins *b);
/* As calib_bins_copy. */
int calib_cwbins_copy(calib_cwbins *dst, const calib_cwbins *src);
void calib_cwbins_reset(calib_cwbins *b);
void calib_cwbins_add(calib_cwbins *b, const double *p, size_t y);
int calib_cwbins_merge(calib_cwbins *dst, const calib_cwbins *src);
double calib_cwbins_plugin(const calib_cwbins *b, double q); /* summed over k */
double calib_cwbins_cwce2(const calib_cwbins *b);
int calib_cwbins_brier_decomp(const calib_cwbins *b, calib_brier_decomp *d);

#ifdef __cplusplus
}
#endif

#endif
