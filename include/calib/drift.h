/*
 * Sequential tests for the closed loop: a betting e-process, a drift
 * detector that compares a stream of per-sample scores with the level
 * measured after a reset, and the shadow gate that decides whether a
 * candidate recalibration improves on the current one. See calib_drift(3).
 *
 * Everything here is anytime-valid: a test may be looked at after every
 * sample and stopped at any time without inflating its false-alarm level
 * (Ville's inequality on a nonnegative supermartingale).
 *
 * No allocation per sample; calib_drift_init allocates the reference sample
 * of the robust (exceedance) detector once.
 */
#ifndef CALIB_DRIFT_H
#define CALIB_DRIFT_H

#include <stddef.h>
#include <stdint.h>

#include "calib/accum.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ e-process */

/*
 * Betting e-process for H0: E[X_t | past] <= m for every t, X_t in [lo, hi]
 * (values outside are clamped). With c = m - lo and u = (X - m) / c, the
 * wealth is W_t = prod (1 + lambda_i u_i), lambda_i in [0, 1/2] chosen
 * before X_i by online Newton steps (Waudby-Smith & Ramdas 2023, after
 * Cutkosky & Orabona 2018): g = -u / (1 + lambda u), a += g^2,
 * lambda <- clip(lambda - 2 / (2 - ln 3) * g / a, 0, 1/2); start lambda = 0,
 * a = 1. Under H0, P(sup_t W_t >= 1/alpha) <= alpha.
 */
typedef struct calib_eproc {
    double lo, hi, m;   /* read-only: range and null bound */
    double lambda;      /* the next bet */
    double a;           /* 1 + sum of squared gradients */
    double log_wealth;  /* ln W_t */
    double min_log_wealth; /* lowest ln W_s, s <= t (0 at t = 0) */
    uint64_t argmin;    /* the s where it was reached: the last sample of
                           the stretch before W began to rise, an estimate
                           of a change point */
    uint64_t n;         /* samples added */
} calib_eproc;

/* CALIB_EINVAL unless lo < m < hi, all finite, and hi - lo and the largest
 * u, (hi - m) / (m - lo), finite too. */
int calib_eproc_init(calib_eproc *e, double lo, double hi, double m);
void calib_eproc_add(calib_eproc *e, double x); /* NaN is ignored */
/* 1 once W_t >= 1/alpha, for alpha in (0, 1); 0 for any other alpha. */
int calib_eproc_rejects(const calib_eproc *e, double alpha);

/* ------------------------------------------------------------------ drift detector */

enum calib_drift_kind {
    /* The mean of a bounded score (Brier in [0, 2]) rises above the
     * reference mean by at least min_effect. */
    CALIB_DRIFT_MEAN,
    /* Robust, for unbounded scores (DSS): the rate at which the score
     * exceeds the reference sample's `quantile` rises by at least
     * min_effect (a probability). */
    CALIB_DRIFT_EXCEED,
};

typedef struct calib_drift_cfg {
    int kind;          /* enum calib_drift_kind */
    double lo, hi;     /* MEAN: the score's range */
    double alpha;      /* false-alarm level of one reference period, (0, 1) */
    double min_effect; /* >= 0: MEAN in score units, EXCEED a probability */
    double quantile;   /* EXCEED: in (0, 1), e.g. 0.9 */
    size_t reference;  /* samples that measure the reference level, >= 10 */
    size_t restart;    /* a new e-process every `restart` samples of the
                          watch (>= 1); 0: one e-process only */
} calib_drift_cfg;

/* e-processes a detector keeps at once */
#define CALIB_DRIFT_BANK 4

enum calib_drift_state {
    CALIB_DRIFT_REFERENCE, /* measuring the level */
    CALIB_DRIFT_WATCHING,  /* testing against it */
    CALIB_DRIFT_ALARM,     /* drift established; stays until a reset */
};

/*
 * The level is measured on the first cfg.reference samples after a reset;
 * then an e-process tests H0 "the stream is no worse than the reference
 * period + min_effect". alpha is split in halves:
 *   MEAN:   null bound m0 = the empirical-Bernstein upper bound of the
 *           reference mean at alpha/2 (Maurer & Pontil 2009, Thm 4:
 *           mean + sqrt(2 V ln(2/d) / n) + 7 (hi - lo) ln(2/d) / (3 (n - 1)),
 *           V the sample variance, d = alpha/2) + min_effect;
 *   EXCEED: the threshold is the reference sample's quantile (order
 *           statistic ceil(quantile n)); m0 = the reference fraction above
 *           it + sqrt(ln(2/alpha) / (2 n)) (one-sided DKW at alpha/2) +
 *           min_effect, on indicators in [0, 1];
 * and the test runs at alpha/2. If i.i.d. scores keep their
 * distribution, P(an alarm before the next reset) <= alpha. When m0 >= hi
 * (or 1) no alarm is possible and the detector says so (state WATCHING,
 * null_mean >= hi).
 *
 * The test: one e-process alone loses power over a long quiet watch (its
 * ONS accumulator grows with every sample, and its wealth drifts below 1),
 * so the delay to detect a change grows with the time before it. Instead
 * the j-th e-process (j = 1, 2, ...) starts after (j - 1) restart samples
 * of the watch with prior weight w_j = 1 / (j (j + 1)), and the test
 * statistic is M_t = sum_j w_j W_j,t over the e-processes kept: at most
 * CALIB_DRIFT_BANK; when full, the one of least w_j W_j is dropped. Since
 * sum w_j = 1, the full sum is a test supermartingale with M_0 <= 1, and
 * the kept terms never exceed it, so P(sup M_t >= 2/alpha) <= alpha/2 still
 * holds (Ville). A change is detected by an e-process started shortly
 * before or after it, at the price of ln(1 / w_j), logarithmic in the
 * length of the watch.
 */
typedef struct calib_drift {
    calib_drift_cfg cfg;   /* read-only */
    int state;             /* enum calib_drift_state */
    calib_accum ref;       /* reference scores (MEAN and EXCEED; MEAN
                              clamps every score to [lo, hi], as the
                              Maurer-Pontil bound requires) */
    double *ref_x;         /* EXCEED: the reference sample, cfg.reference */
    double threshold;      /* EXCEED: the reference quantile */
    double null_mean;      /* m0, once WATCHING */
    calib_eproc bank[CALIB_DRIFT_BANK]; /* the e-processes kept */
    double log_w[CALIB_DRIFT_BANK];     /* ln w_j of each */
    uint64_t start[CALIB_DRIFT_BANK];   /* n at each one's start */
    unsigned nbank;        /* e-processes kept */
    uint64_t started;      /* e-processes started since the reset */
    calib_accum watch;     /* scores since WATCHING began */
    uint64_t n;            /* samples since the reset */
    uint64_t alarm_at;     /* n at the alarm */
    uint64_t change_at;    /* n of the estimated change: where the wealth
                              of the e-process of largest w_j W_j was
                              lowest */
    uint64_t resets;
} calib_drift;

/* CALIB_EINVAL for a bad cfg, CALIB_ENOMEM. */
int calib_drift_init(calib_drift *d, const calib_drift_cfg *cfg);
void calib_drift_free(calib_drift *d);
/* Starts a new reference period (after a publish, or by hand). */
void calib_drift_reset(calib_drift *d);
/* Adds one score (NaN ignored). Returns 1 exactly when this sample raises
 * the alarm, else 0. */
int calib_drift_add(calib_drift *d, double score);
/* ln M_t, the test statistic (0 before WATCHING). */
double calib_drift_log_e(const calib_drift *d);

/* ------------------------------------------------------------------ shadow gate */

typedef struct calib_gate_cfg {
    double alpha;           /* level of the test, (0, 1) */
    double min_improvement; /* >= 0, in score units */
    double lo, hi;          /* range the per-sample differences are clamped
                               to for the test: [-2, 2] for Brier */
    uint64_t max_samples;   /* give up after this many pairs, >= 1 */
} calib_gate_cfg;

enum calib_gate_state {
    CALIB_GATE_RUNNING,
    CALIB_GATE_PASSED,  /* improvement >= min_improvement established */
    CALIB_GATE_FAILED,  /* max_samples reached without it */
};

/*
 * Paired shadow test of a candidate against the current parameters: each
 * labelled sample gives d = S(current) - S(candidate) (positive: the
 * candidate is better). An e-process tests H0: E[d] <= min_improvement on d
 * clamped to [lo, hi]; the gate passes when it rejects at alpha. `diff`
 * keeps the unclamped differences for the reported mean and interval.
 */
typedef struct calib_gate {
    /* read-only */
    calib_gate_cfg cfg;
    int state;          /* enum calib_gate_state */
    /* private: calib_gate_log_e */
    calib_eproc e;
    /* read-only */
    calib_accum diff;   /* S(current) - S(candidate), unclamped */
    calib_accum current, candidate; /* the scores themselves */
    uint64_t pairs;     /* pairs added, NaN ones included */
} calib_gate;

/* CALIB_EINVAL for a bad cfg (lo < min_improvement < hi required). */
int calib_gate_init(calib_gate *g, const calib_gate_cfg *cfg);
/* Adds one pair of scores while RUNNING; returns the state after it. A
 * pair with a NaN difference is not tested but counts towards
 * max_samples. */
int calib_gate_add(calib_gate *g, double s_current, double s_candidate);
/* The log of the gate's e-value so far (it passes at -ln alpha). */
double calib_gate_log_e(const calib_gate *g);

#ifdef __cplusplus
}
#endif

#endif
