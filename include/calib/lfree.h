/*
 * Label-free estimates: what the labels of the newest predictions will
 * probably show, from the predictions alone, and an anytime-valid test
 * that the class mix of the predictions has moved. See calib_lfree(3).
 *
 * For calibrated outputs p the expected scores are known without the
 * label: E[Brier | p] = 1 - sum_k p_k^2, E[log | p] = H(p) (p clamped below
 * at CALIB_LOG_FLOOR, as the log score is), E[accuracy | p] = max_k p_k,
 * and for a Gaussian N(mu, v), E[DSS] = 1 + ln v. Under a label shift
 * (p(x | y) fixed, the priors moving from pi_s to pi_t) the target priors
 * are the fixed point of EM (Saerens, Latinne and Decaestecker 2002) and
 * the target posteriors are p'_k proportional to (pi_t,k / pi_s,k) p_k:
 * the corrected estimates are the served p's expected scores for labels
 * drawn from p' (E[Brier] = 1 - 2 p'.p + |p|^2, E[log] = -sum p'_k ln p_k,
 * E[accuracy] = p' at p's top class), which are the naive ones when the
 * priors have not moved.
 *
 * A ring keeps the newest `recent` predictions as float32; calib_lfree_add
 * costs O(K) and allocates nothing; calib_lfree_update walks the ring
 * (EM passes, then one pass for the figures) and is what costs.
 */
#ifndef CALIB_LFREE_H
#define CALIB_LFREE_H

#include <stddef.h>
#include <stdint.h>

#include "calib/accum.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The priors' intervals cover K up to this (a K^2 matrix a prediction
 * of the update's walk); larger K gets the priors without them (and
 * calibd lists the priors in status and /metrics up to this K). */
#define CALIB_LFREE_INTERVAL_MAX_K 32
/* The shift test's segments kept at once. */
#define CALIB_LFREE_BANK 4
/* EM passes of one calib_lfree_update at most. */
#define CALIB_LFREE_EM_MAX 128
/* EM stops once no prior moves by more than this in a pass. */
#define CALIB_LFREE_EM_TOL 1e-6

/* Records the ring allocates at first; it doubles as it fills. */
#define CALIB_LFREE_FIRST 16

struct calib_budget;

typedef struct calib_lfree_cfg {
    size_t k;          /* classes, >= 2 (a binary p is K = 2: (1 - p, p));
                          0: Gaussian forecasts (mean, variance) */
    size_t recent;     /* predictions the ring keeps, >= 1 */
    double alpha;      /* the shift test's level per reference period, in
                          (0, 1); 0: no test */
    size_t reference;  /* predictions before the test's first segment, and
                          between two segments' starts, >= 10 */
    struct calib_budget *budget; /* the ring's growth past its first
                          records comes from it (NULL: no limit); refused,
                          the ring stops growing and wraps where it is */
} calib_lfree_cfg;

/* An estimate of a mean over the ring's predictions and a 95% interval
 * for the mean their labels will give (NaN when unknown). */
typedef struct calib_lfree_est {
    double mean, lo, hi;
} calib_lfree_est;

enum { CALIB_LFREE_MAIN, CALIB_LFREE_LOG, CALIB_LFREE_ACC, CALIB_LFREE_FIGS };

typedef struct calib_lfree_fig {
    uint64_t n;        /* predictions the figures are of; 0: none yet */
    uint64_t at;       /* `total` when they were computed */
    /* MAIN: Brier (DSS for a Gaussian), LOG: log score, ACC: accuracy;
     * naive: the served outputs taken as calibrated */
    calib_lfree_est naive[CALIB_LFREE_FIGS];
    /* the served outputs' under the estimated priors (classification with
     * reference priors) */
    int corrected;     /* 1: corrected[] and priors are computed */
    calib_lfree_est corrected_est[CALIB_LFREE_FIGS];
    unsigned em_passes; /* EM passes of the last update */
    int em_converged;
} calib_lfree_fig;

typedef struct calib_lfree {
    calib_lfree_cfg cfg; /* read-only */
    size_t width;        /* floats a record: k, or 2 */
    float *rec;          /* record i at (i % cap) */
    size_t alloc;        /* records allocated */
    size_t cap;          /* records kept: alloc, up to cfg.recent (which
                            falls to cap when a growth is refused) */
    uint64_t total;      /* predictions added */
    /* the shift test (calib_lfree(3)): the predicted classes' counts since
     * its reset (all) and at each segment's start, a segment's e-value
     * the universal-inference ratio of a KT mixture that predicts the
     * samples before its start and those after apart, over the pooled
     * maximum likelihood; a KT mixture's probability depends on the counts
     * alone, so a sample costs one count */
    int test_on;
    double lgamma_h;     /* ln Gamma(K/2), the KT denominators' start */
    uint64_t *all;       /* k counts since the reset */
    uint64_t *seg_cnt;   /* CALIB_LFREE_BANK x k: all at each start */
    struct {
        uint64_t start;  /* test_n at its start */
        double log_w;    /* ln of its weight 1 / (j (j + 1)) */
        double log_ref;  /* ln KT of the samples before its start */
    } seg[CALIB_LFREE_BANK];
    unsigned nseg;       /* segments kept, the oldest first */
    uint64_t started;    /* segments started since the reset */
    uint64_t check_at;   /* test_n of the next evaluation */
    uint64_t seg_at;     /* test_n of the next segment's start */
    double log_e;        /* the last evaluation's max_j ln(w_j E_j), 0 before */
    int alarm;           /* raised, until calib_lfree_test_reset */
    uint64_t alarms;     /* alarms raised */
    uint64_t test_n;     /* predictions since the test's reset */
    /* EM and the figures */
    double *src;         /* the reference priors of the last update */
    double *priors, *prior_lo, *prior_hi; /* the estimated target priors */
    double *weights;     /* priors / reference priors once fig.corrected:
                            the correction a served p takes */
    double *scratch;     /* k accumulators and the Fisher matrix */
    double sums[4];      /* the newest record's sum p, sum p^2 and, under
                            the weights of the last update, sum w p, sum
                            w p^2 (0 without): its estimates */
    size_t base;         /* the update's oldest record's slot */
    calib_lfree_fig fig;
} calib_lfree;

/* Bytes calib_lfree_init allocates for cfg (0 for a bad cfg): all but
 * the ring's growth past its first CALIB_LFREE_FIRST records. */
size_t calib_lfree_bytes(const calib_lfree_cfg *cfg);
/* Bytes the ring's growth takes from cfg.budget when full, cfg.recent
 * records (0 for a bad cfg). */
size_t calib_lfree_ring_bytes(const calib_lfree_cfg *cfg);
/* CALIB_EINVAL for a bad cfg, CALIB_ENOMEM (nothing then held). */
int calib_lfree_init(calib_lfree *lf, const calib_lfree_cfg *cfg);
void calib_lfree_free(calib_lfree *lf); /* also on a zeroed one */

/* One prediction as served: k probabilities (summing to 1), or the mean
 * and variance. Returns 1 exactly when it raises the shift test's alarm
 * (the test is evaluated every max(256, K) predictions). */
int calib_lfree_add(calib_lfree *lf, const double *p);
/* The same for probabilities whose top class (the first index of their
 * maximum) the caller has already found: calibd's bins find it. */
int calib_lfree_add_top(calib_lfree *lf, const double *p, size_t top);
/* The same for a row of K logits (a classifier's, k >= 2), whose softmax
 * the record keeps: computed in float (within a few float ulps of the
 * double softmax rounded, what calib_lfree_add would keep), about a third
 * of the cost of calib_softmax and calib_lfree_add. A row with a
 * non-finite maximum takes the double softmax. */
int calib_lfree_add_logits(calib_lfree *lf, const double *z);
/* The expected main score (Brier, or DSS for a Gaussian) of the newest
 * record as served, from the record itself: est[0] naive, est[1] under
 * the last update's priors (the naive one without them). u: the prior
 * weights (k) the served outputs carry on top of the recorded ones
 * (served p'_j proportional to u_j p_j), or NULL. NaN before a record. */
void calib_lfree_newest_expected(const calib_lfree *lf, const double *u, double est[2]);
/* The shift test starts a new reference period (after its alarm was
 * handled, or when the served map changed) and the alarm is cleared. */
void calib_lfree_test_reset(calib_lfree *lf);
/* The test's statistic at its last evaluation: max over its segments of
 * ln(w_j E_j), floored at 0 (it alarms at ln(1/alpha)); 0 before its first
 * segment or without a test. */
double calib_lfree_log_e(const calib_lfree *lf);

/*
 * Recomputes lf->fig over the ring. src: the reference priors (k, each >
 * 0, summing to 1; the class mix of the labelled pairs the served map was
 * calibrated on), or NULL: naive figures only, and the priors are the
 * mean of the served probabilities. EM starts from the last update's
 * priors when src is the same, else from src, and runs at most
 * CALIB_LFREE_EM_MAX passes. Cost: O(n K) a pass, plus O(n K^2) for the
 * priors' intervals (K <= CALIB_LFREE_INTERVAL_MAX_K).
 */
void calib_lfree_update(calib_lfree *lf, const double *src);
/* The same over the newest n predictions only (all the ring holds if
 * fewer): after a shift, the figures and priors of the new regime alone
 * (calibd's label_shift_adapt estimates its weights so). */
void calib_lfree_update_newest(calib_lfree *lf, const double *src, size_t n);

/* The reference priors of class counts (a labelled sample's), smoothed by
 * half a count a class: src[j] = (counts[j] + 1/2) / (n + K/2). */
void calib_lfree_priors_of_counts(const double *counts, size_t k, double *src);

/* Predictions the ring holds. */
static inline size_t calib_lfree_len(const calib_lfree *lf)
{
    return lf->total < lf->cap ? (size_t)lf->total : lf->cap;
}

#ifdef __cplusplus
}
#endif

#endif
