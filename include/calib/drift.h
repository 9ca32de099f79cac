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
 * No allocation per sample; calib_drift_init allocates once the ring of
 * recent scores of the mean detector, or the reference sample of the
 * robust (exceedance) detector.
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
     * mean of the scores before it by at least min_effect: a paired
     * two-sample test against a reference that grows while no alarm is
     * raised. */
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
                          watch (>= 1); 0: one e-process (MEAN: one at a
                          time) */
} calib_drift_cfg;

/* e-processes a detector keeps at once */
#define CALIB_DRIFT_BANK 4
/* MEAN: the ring keeps the last CALIB_DRIFT_RING * reference scores */
#define CALIB_DRIFT_RING 8

enum calib_drift_state {
    CALIB_DRIFT_REFERENCE, /* measuring the level */
    CALIB_DRIFT_WATCHING,  /* testing against it */
    CALIB_DRIFT_ALARM,     /* drift established; stays until a reset */
};

/*
 * MEAN: one paired e-process ("pair"). Started after sample `start` since
 * the reset, it tests the scores after it against the scores before it: each score Y after the start is paired with the mean B of a
 * block of scores before it, never used before (blocks of 8, 4, 2 and 1
 * scores, a quarter of its reference budget each, walking back from its
 * start), and it bets on Z = Y - B exceeding min_effect (normalized to
 * [-1, 1], see calib_drift(3)) with the online Newton step, bets in
 * [0, 9/10].
 */
typedef struct calib_drift_pair {
    uint64_t start;     /* its reference is samples 1..start of the reset */
    uint64_t pos;       /* its next block ends at sample pos */
    uint64_t budget;    /* reference samples it may use: min(start, 2/3 of
                           the ring, ring_n at its start) */
    uint64_t left;      /* scores left in the current phase */
    unsigned phase;     /* 0..3: blocks of 8 >> phase samples */
    double log_w;       /* ln of its prior weight 1 / (j (j + 1)) */
    double lambda, a;   /* the next bet; 1 + sum of squared gradients */
    double log_wealth;  /* ln W */
    double min_log_wealth; /* lowest ln W so far (0 at its start) */
    uint64_t argmin;    /* the n where it was reached */
    uint64_t n;         /* scores tested */
    calib_accum ref;    /* the scores 1..start (the level it tests against) */
} calib_drift_pair;

/*
 * After a reset the first cfg.reference scores are the reference period.
 *
 * MEAN (bounded scores, clamped to [lo, hi]): after the reference period
 * and every `restart` samples from there (and whenever none is left) a
 * new paired e-process starts, whose reference is every score before it
 * (so the reference grows while no alarm is raised), of which it uses at
 * most the newest 2/3 of a ring of CALIB_DRIFT_RING * reference scores.
 * The j-th has the prior weight w_j = 1 / (j (j + 1)) and the detector
 * alarms once some w_j W_j >= 1/alpha. Under H0 - independent scores,
 * none with a mean above the mean of an earlier one + min_effect; in
 * particular i.i.d. scores - each W_j is a nonnegative supermartingale in
 * its own filtration (its blocks are fresh, unseen scores of the past), so
 * P(W_j ever >= 1/(alpha w_j)) <= alpha w_j (Ville) and, since
 * sum w_j = 1, P(an alarm before the next reset) <= alpha (a union bound).
 * No part of alpha is spent on bounding the reference level: the pairing
 * makes the uncertainty of the reference part of the martingale.
 *
 * EXCEED (unbounded scores) is unchanged: the threshold is the reference
 * sample's quantile (order statistic ceil(quantile n)); m0 = the
 * reference fraction above it + sqrt(ln(2/alpha) / (2 n)) (one-sided DKW
 * at alpha/2) + min_effect, on indicators in [0, 1]; a bank of betting
 * e-processes started every `restart` samples with weights 1 / (j (j+1))
 * tests "rate <= m0" with M_t = sum_j w_j W_j,t at alpha/2 (it alarms at
 * ln M >= ln(2/alpha)); when m0 >= 1 no alarm is possible.
 *
 * See calib_drift(3) for the details, the guarantee and the references.
 */
typedef struct calib_drift {
    calib_drift_cfg cfg;   /* read-only */
    int state;             /* enum calib_drift_state */
    calib_accum ref;       /* the reference level's scores: the reference
                              period; MEAN, once watching, the scores before
                              the newest pair's start, and after an alarm
                              those before the alarming pair's (MEAN clamps
                              every score to [lo, hi]) */
    double *ref_x;         /* EXCEED: the reference sample, cfg.reference */
    double threshold;      /* EXCEED: the reference quantile */
    double null_mean;      /* once WATCHING: EXCEED m0; MEAN the mean of
                              `ref` + min_effect (the level tested) */
    /* EXCEED: the e-processes kept */
    calib_eproc bank[CALIB_DRIFT_BANK];
    double log_w[CALIB_DRIFT_BANK];     /* ln w_j of each */
    uint64_t start[CALIB_DRIFT_BANK];   /* n at each one's start */
    unsigned nbank;        /* EXCEED: e-processes kept (MEAN: 0) */
    uint64_t started;      /* e-processes (MEAN: pairs) started since the
                              reset */
    calib_accum watch;     /* scores since WATCHING began */
    uint64_t n;            /* samples since the reset */
    uint64_t alarm_at;     /* n at the alarm */
    uint64_t change_at;    /* n of the estimated change: where the wealth
                              of the e-process of largest w_j W_j was
                              lowest */
    uint64_t resets;
    /* MEAN */
    uint16_t *ring;        /* the last ring_len scores, (x - lo) / (hi - lo)
                              in units of 1/65535; sample i at (i-1) % len */
    size_t ring_len;       /* CALIB_DRIFT_RING * cfg.reference */
    uint64_t ring_n;       /* scores the ring holds: the last ring_n of the
                              n (min(n, ring_len), unless a state was
                              restored without its ring) */
    calib_drift_pair pair[CALIB_DRIFT_BANK]; /* the pairs kept */
    unsigned npair;        /* pairs kept */
    calib_accum all;       /* every score since the reset, clamped */
} calib_drift;

/* CALIB_EINVAL for a bad cfg, CALIB_ENOMEM. */
int calib_drift_init(calib_drift *d, const calib_drift_cfg *cfg);
void calib_drift_free(calib_drift *d);
/* dst becomes a copy of src that shares no memory with it (free it with
 * calib_drift_free): CALIB_OK, or CALIB_ENOMEM (dst then holds nothing). */
int calib_drift_copy(calib_drift *dst, const calib_drift *src);
/* Bytes calib_drift_init allocates for cfg (0 for a bad cfg):
 * MEAN 2 * CALIB_DRIFT_RING * reference, EXCEED 8 * reference. */
size_t calib_drift_bytes(const calib_drift_cfg *cfg);
/* CALIB_OK if the state of an initialized d is consistent (as after any
 * sequence of calls), else CALIB_EINVAL: for a state restored from a
 * snapshot, before it is used. */
int calib_drift_check(const calib_drift *d);
/* Starts a new reference period (after a publish, or by hand). */
void calib_drift_reset(calib_drift *d);
/* Adds one score (NaN ignored). Returns 1 exactly when this sample raises
 * the alarm, else 0. */
int calib_drift_add(calib_drift *d, double score);
/* The test statistic, 0 before WATCHING: MEAN ln max_j w_j W_j (alarm at
 * ln(1/alpha)); EXCEED ln M_t (alarm at ln(2/alpha)). */
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
