/*
 * Recalibration: injective maps h applied to a model's outputs, fitted on
 * labelled samples, and the paired estimate of what a new map gains over the
 * current one. See calib_recal(3).
 *
 * Built-in methods (parameter order as published in "params" messages):
 *   temperature  {T}     p' = softmax(z / T)         logits, probs, binary
 *   platt        {a, b}  p' = sigmoid(a s + b)       binary, or K = 2
 *   variance     {w, b}  var' = w var + b           gaussian
 * For probabilities the logits are ln max(p, 1e-15); a binary p stands for
 * the two probabilities (1 - p, p). Platt's s is logit(p) for a binary p,
 * z1 - z0 for K = 2 logits and ln p1 - ln p0 for K = 2 probabilities (each
 * probability clamped to [1e-15, 1 - 1e-15]).
 *
 * Every map is injective, so (Gruber & Buettner 2022) the change of its
 * expected proper score equals the change of its proper calibration error:
 * the paired score difference below measures the improvement without bias.
 *
 * Fits read a calib_dataset (sample.h), allocate O(K) scratch once, never
 * allocate per sample, return 0 or a negative CALIB_E* code, never print.
 * Apply functions work in place, never allocate and never fail on checked
 * input.
 */
#ifndef CALIB_RECAL_H
#define CALIB_RECAL_H

#include <stddef.h>

#include "calib/calib.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_RECAL_MAX_PARAMS 8

/* Default temperature bracket: T in [0.05, 20], i.e. beta = 1/T in [0.05, 20]. */
#define CALIB_RECAL_T_MIN 0.05
#define CALIB_RECAL_T_MAX 20.0
/* The largest t_max a temperature fit takes: the moments of d = z - max z
 * under softmax(d / T) reach (708 T)^3, finite below ~1e99. */
#define CALIB_RECAL_T_LIMIT 1e12

/* What a fit minimises (the mean over the samples). */
enum calib_recal_objective {
    CALIB_RECAL_OBJ_DEFAULT = 0, /* the method's own (below) */
    CALIB_RECAL_OBJ_NLL,         /* log score: temperature (default); platt
                                    (against Platt's smoothed targets) */
    CALIB_RECAL_OBJ_BRIER,       /* Brier score: temperature (option), ets */
    CALIB_RECAL_OBJ_DSS,         /* Dawid-Sebastiani: variance (default) */
};

/* Option flags. */
#define CALIB_RECAL_BISECT 0x1u    /* temperature NLL: bisection only */
#define CALIB_RECAL_NO_WARMUP 0x2u /* temperature NLL: no subsample stage */
/* Temperature: the exp kernels of at most two lanes (SSE2 on x86-64), or
 * the portable scalar loop, where the CPU has wider ones. The widest runs
 * by default; the results differ only in summation order (~1e-16
 * relative). For tests, and for figures that must not depend on the CPU. */
#define CALIB_RECAL_EXP_VEC2 0x4u
#define CALIB_RECAL_EXP_SCALAR 0x8u
/* location_scale: parameter i (0: a, 1: b, 2: c) is held at its identity
 * value (0, 1, 1) instead of fitted, e.g. CALIB_RECAL_HOLD(1) for a shift
 * of the mean and a scale of the variance alone. Other methods refuse it
 * (CALIB_EINVAL). */
#define CALIB_RECAL_HOLD(i) (0x100u << (i))
#define CALIB_RECAL_HOLD_ALL (0xffu << 8)

/*
 * Fit options. A zero field means "the method's default", so a
 * zero-initialised struct (or a NULL pointer) gives every default.
 */
typedef struct calib_recal_opts {
    int objective;       /* enum calib_recal_objective */
    const double *init;  /* current parameters (nparams values): the warm
                            start and the map "before"; NULL: identity */
    double t_min, t_max; /* temperature bracket (temperature, ets);
                            defaults CALIB_RECAL_T_MIN, CALIB_RECAL_T_MAX */
    unsigned max_iter;   /* default 100 (bisection and Brent: 200) */
    double tol;          /* convergence tolerance, per method:
                            temperature NLL: relative Newton step (1e-7);
                              with CALIB_RECAL_BISECT: relative bracket
                              width (1e-10);
                            temperature Brier, ets: Brent's relative
                              interval (1e-6);
                            platt, variance: half the squared Newton
                              decrement, in objective units (1e-15) */
    unsigned flags;      /* CALIB_RECAL_* flags */
} calib_recal_opts;

typedef struct calib_recal_result {
    int objective;        /* the objective minimised (never DEFAULT) */
    unsigned nparams;
    double params[CALIB_RECAL_MAX_PARAMS]; /* the fitted map */
    unsigned iterations;  /* full-data Newton steps (temperature: passes
                             over the data; Brent: evaluations) */
    unsigned fallbacks;   /* safeguard steps taken: bisections
                             (temperature), step halvings (platt,
                             variance) */
    int converged;        /* 1: the stopping test held before max_iter */
    int at_bound;         /* 1: the optimum lies on a bound or constraint */
    double objective_before; /* mean objective of the map "before":
                                opts->init, or the identity */
    double objective_after;  /* mean objective of params */
} calib_recal_result;

/*
 * A recalibration method's two entry points; the built-ins below and every
 * plugin (plugin.h) have these types.
 *
 * apply: x holds one prediction of the given form (calib_form_width(form, k)
 * doubles, checked by calib_check_*); out receives the recalibrated one in
 * the output form -- K probabilities for logits or probabilities, p for a
 * binary classifier, mean and variance for a Gaussian: the same number of
 * doubles, so out may equal x. Returns CALIB_EINVAL for a form the method
 * does not handle, else CALIB_OK.
 */
typedef int (*calib_recal_fit_fn)(const calib_dataset *ds,
                                  const calib_recal_opts *opts,
                                  calib_recal_result *res);
typedef int (*calib_recal_apply_fn)(const double *params, int form, size_t k,
                                    const double *x, double *out);

/* The output form of a map applied to predictions of the given form. */
static inline int calib_recal_out_form(int form)
{
    return form == CALIB_FORM_LOGITS ? CALIB_FORM_PROBS : form;
}

/* ------------------------------------------------------------------ built-ins */

int calib_recal_fit_temperature(const calib_dataset *ds,
                                const calib_recal_opts *opts,
                                calib_recal_result *res);
int calib_recal_fit_platt(const calib_dataset *ds, const calib_recal_opts *opts,
                          calib_recal_result *res);
int calib_recal_fit_variance(const calib_dataset *ds,
                             const calib_recal_opts *opts,
                             calib_recal_result *res);
int calib_recal_fit_location_scale(const calib_dataset *ds,
                                   const calib_recal_opts *opts,
                                   calib_recal_result *res);

int calib_recal_apply_temperature(const double *params, int form, size_t k,
                                  const double *x, double *out);
int calib_recal_apply_platt(const double *params, int form, size_t k,
                            const double *x, double *out);
int calib_recal_apply_variance(const double *params, int form, size_t k,
                               const double *x, double *out);
int calib_recal_apply_location_scale(const double *params, int form, size_t k,
                                     const double *x, double *out);

/* ------------------------------------------------------------------ prior correction */

/*
 * The prior correction of a label shift (Saerens, Latinne and
 * Decaestecker 2002): a prediction out of a map, in its output form
 * (calib_recal_out_form: K probabilities, or a binary p), reweighted in
 * place, p'_j = w[j] p_j / sum_i w[i] p_i (binary: p' = w[1] p / (w[1] p +
 * w[0] (1 - p))), where w[j] = pi_target[j] / pi_source[j]. nw must be K
 * (2 for a binary p), every weight finite and > 0 (calib_prior_weights_ok);
 * CALIB_EINVAL otherwise, p untouched. A prediction whose weighted mass
 * underflows to 0 is left as it was.
 */
int calib_prior_weigh(const double *w, size_t nw, int out_form, size_t k, double *p);
/* 1 if w[0..nw) are weights calib_prior_weigh takes: 2 <= nw, each finite
 * and within [CALIB_PRIOR_WEIGHT_MIN, CALIB_PRIOR_WEIGHT_MAX]. */
int calib_prior_weights_ok(const double *w, size_t nw);
#define CALIB_PRIOR_WEIGHT_MIN 1e-6
#define CALIB_PRIOR_WEIGHT_MAX 1e6

/* ------------------------------------------------------------------ paired improvement */

/*
 * One score, paired: before = mean S(h0(x), y), after = mean S(h(x), y),
 * mean = the mean of the per-sample differences S(h0) - S(h) (equal to
 * before - after up to rounding), its standard error and 95% normal
 * interval. Positive = the candidate h scores lower = better.
 */
typedef struct calib_recal_delta {
    double before;
    double after;
    double mean;
    double se;
    double ci[2];
} calib_recal_delta;

/* Brier and log for classification, dss for a Gaussian; the others NaN. */
typedef struct calib_recal_improvement {
    size_t n;
    calib_recal_delta brier;
    calib_recal_delta log;
    calib_recal_delta dss;
} calib_recal_improvement;

/*
 * Paired improvement of h = (apply1, params1) over h0 = (apply0, params0) on
 * the same labelled samples. apply0 == NULL means the raw outputs (softmax of
 * logits). Checks ds as calib_recal_check_dataset(ds, all forms) does;
 * CALIB_ENONFINITE if a map produces a non-finite score. Allocates
 * 2 * width doubles once.
 */
int calib_recal_compare(const calib_dataset *ds, calib_recal_apply_fn apply0,
                        const double *params0, calib_recal_apply_fn apply1,
                        const double *params1, calib_recal_improvement *imp);

/* ------------------------------------------------------------------ helpers for methods and plugins */

/* Bit of a form in a mask of accepted forms. */
#define CALIB_FORM_BIT(form) (1u << (form))

/*
 * Checks a dataset before a fit: CALIB_EINVAL for a NULL or malformed
 * dataset (k < 2 for classification, k != 2 for binary, stride < width + 1)
 * or a form outside the mask, CALIB_EEMPTY for n == 0, then every record
 * with calib_check_* and calib_check_label (regression: y finite).
 */
int calib_recal_check_dataset(const calib_dataset *ds, unsigned forms);

/*
 * The logits of one classification prediction: x itself for logits, else
 * ln max(p_k, 1e-15) written to buf (k doubles) -- for a binary p the pair
 * (ln max(1 - p, 1e-15), ln max(p, 1e-15)). Returns the pointer to read.
 * Every fit and apply of a probability or binary p uses these logarithms:
 * a binary p has the logit ln max(p, 1e-15) - ln max(1 - p, 1e-15)
 * (+-34.5388 at p = 1 and 0) in the temperature and Platt fits and applies.
 */
const double *calib_recal_row_logits(int form, size_t k, const double *x,
                                     double *buf);

/* One labelled pair's checks, as every fit (and calib_online) applies
 * them: the outputs x by the form's calib_check_* (score.h), then y, a
 * class in [0, k) (k = 2 for a binary p), or finite for a Gaussian.
 * CALIB_OK, or the first check's code. */
int calib_recal_check_pair(int form, size_t k, const double *x, double y);

/* Where a 1-D minimisation ended. */
typedef struct calib_recal_min1d {
    double x;       /* the minimiser found */
    double fx;      /* f(x) */
    unsigned evals; /* evaluations of f */
    int converged;  /* 1: the interval shrank to the tolerance */
} calib_recal_min1d;

/*
 * Brent's minimisation of f on [lo, hi] (golden section with parabolic
 * steps; Brent 1973, ch. 5) until the bracket is within 2 (tol |x| + 1e-12)
 * of x, or max_iter evaluations. Finds a local minimum of a function that
 * need not be convex; never evaluates f at lo or hi. f returns the objective,
 * or NaN to abort (then CALIB_ENONFINITE). CALIB_EINVAL unless
 * lo < hi, tol > 0 and max_iter > 0.
 */
int calib_recal_minimize_1d(double (*f)(double x, void *ctx), void *ctx,
                            double lo, double hi, double tol,
                            unsigned max_iter, calib_recal_min1d *out);

#ifdef __cplusplus
}
#endif

#endif
