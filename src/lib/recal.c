/*
 * recal.c — recalibration maps: temperature, Platt and variance scaling;
 * their fits, their apply functions and the paired improvement of one map
 * over another. The mathematics is in calib_recal(3); comments here say why
 * the code looks the way it does. Over 1,000 lines because the three fits
 * share the dataset's checks, the Newton steps and line searches and the
 * one-dimensional minimiser, and each map's apply function sits beside
 * the fit whose parameters it takes.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calib/recal.h"
#include "expk.h"
#include "logistic.h"
#include "softmax.h"

#define LOG_FLOOR CALIB_LOG_FLOOR  /* probabilities are clamped at 1e-15 */
#define RECAL_MAX_ITER 100u
#define RECAL_MAX_ITER_SLOW 200u   /* bisection and Brent */
#define TEMP_TOL_NEWTON 1e-7       /* relative Newton step */
#define TEMP_TOL_BISECT 1e-10      /* relative bracket width */
#define TEMP_TOL_BRENT 1e-6        /* Brent's relative interval */
#define NEWTON2_TOL 1e-15          /* half the squared Newton decrement */
#define ARMIJO_C 1e-4
#define STEP_MIN 1e-10             /* smallest backtracking factor */
#define WARMUP_ROWS 1024           /* rows of the temperature warm-up stage */
#define VAR_W_MIN 1e-8             /* variance scaling keeps w >= this */
#define LS_B_MIN 1e-8              /* location-scale keeps b >= this */
#define PLATT_SIGMA 1e-12          /* Lin-Lin-Weng's Hessian ridge */

/* ================================================================== options */

static int objective_valid(int obj)
{
    return obj >= CALIB_RECAL_OBJ_DEFAULT && obj <= CALIB_RECAL_OBJ_DSS;
}

/* Copies *in (or zeros) to *out with every zero field replaced by its
 * default; CALIB_EINVAL for values no default can mend. */
static int opts_resolve(const calib_recal_opts *in, calib_recal_opts *out,
                        unsigned def_iter, double def_tol)
{
    if (in)
        *out = *in;
    else
        memset(out, 0, sizeof *out);
    if (!objective_valid(out->objective))
        return CALIB_EINVAL;
    if (out->flags & ~(CALIB_RECAL_BISECT | CALIB_RECAL_NO_WARMUP
                       | CALIB_RECAL_EXP_VEC2 | CALIB_RECAL_EXP_SCALAR))
        return CALIB_EINVAL;
    if (out->t_min == 0)
        out->t_min = CALIB_RECAL_T_MIN;
    if (out->t_max == 0)
        out->t_max = CALIB_RECAL_T_MAX;
    if (!(out->t_min > 0 && out->t_max > out->t_min
          && out->t_max <= CALIB_RECAL_T_LIMIT))
        return CALIB_EINVAL;
    if (out->max_iter == 0)
        out->max_iter = def_iter;
    if (out->tol == 0)
        out->tol = def_tol;
    if (!(out->tol > 0 && out->tol < 1))
        return CALIB_EINVAL;
    return CALIB_OK;
}

static void result_reset(calib_recal_result *res, int objective,
                         unsigned nparams)
{
    memset(res, 0, sizeof *res);
    res->objective = objective;
    res->nparams = nparams;
    res->objective_before = NAN;
    res->objective_after = NAN;
}

/* ================================================================== dataset */

static int form_valid(int form)
{
    return form >= CALIB_FORM_LOGITS && form <= CALIB_FORM_GAUSSIAN;
}

static const double *row_at(const calib_dataset *ds, size_t i)
{
    return ds->rec + i * ds->stride;
}

int calib_recal_check_pair(int form, size_t k, const double *x, double y)
{
    int rc;
    switch (form) {
    case CALIB_FORM_LOGITS: rc = calib_check_logits(x, k); break;
    case CALIB_FORM_PROBS: rc = calib_check_probs(x, k); break;
    case CALIB_FORM_BINARY: rc = calib_check_binary(x[0]); break;
    default:
        rc = calib_check_gaussian(x[0], x[1]);
        return rc ? rc : isfinite(y) ? CALIB_OK : CALIB_ENONFINITE;
    }
    return rc ? rc : calib_check_label(y, form == CALIB_FORM_BINARY ? 2 : k);
}

static int check_record(const calib_dataset *ds, const double *x, double y)
{
    return calib_recal_check_pair(ds->form, ds->k, x, y);
}

int calib_recal_check_dataset(const calib_dataset *ds, unsigned forms)
{
    if (!ds || !form_valid(ds->form) || !(forms & CALIB_FORM_BIT(ds->form)))
        return CALIB_EINVAL;
    if (ds->form == CALIB_FORM_BINARY ? ds->k != 2
        : ds->form != CALIB_FORM_GAUSSIAN && ds->k < 2)
        return CALIB_EINVAL;
    size_t width = calib_form_width(ds->form, ds->k);
    if (ds->stride < width + 1)
        return CALIB_EINVAL;
    if (ds->n == 0)
        return CALIB_EEMPTY;
    /* every offset i * stride must be representable */
    if (!ds->rec || ds->n > SIZE_MAX / sizeof(double) / ds->stride)
        return CALIB_EINVAL;
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        int rc = check_record(ds, x, x[width]);
        if (rc)
            return rc;
    }
    return CALIB_OK;
}

/* ln max(p, 1e-15): the one logarithm of a probability every fit and
 * apply uses. */
static double log_floor(double p)
{
    return log(p > LOG_FLOOR ? p : LOG_FLOOR);
}

/* ln max(1 - p, 1e-15), with log1p where 1 - p would round. */
static double log1m_floor(double p)
{
    return 1 - p > LOG_FLOOR ? log1p(-p) : log(LOG_FLOOR);
}

const double *calib_recal_row_logits(int form, size_t k, const double *x,
                                     double *buf)
{
    if (form == CALIB_FORM_LOGITS)
        return x;
    if (form == CALIB_FORM_BINARY) {
        buf[0] = log1m_floor(x[0]);
        buf[1] = log_floor(x[0]);
        return buf;
    }
    for (size_t j = 0; j < k; j++)
        buf[j] = log_floor(x[j]);
    return buf;
}

/* The logit of a binary p, as every fit and apply sees it: the difference
 * of its two calib_recal_row_logits. */
static double binary_logit(double p)
{
    return log_floor(p) - log1m_floor(p);
}

/* ================================================================== temperature: passes */

/*
 * Per sample, with d = z - max z and p = softmax(beta d), the NLL is
 * l(beta) = ln sum_j exp(beta d_j) - beta d_y, and its derivatives in beta
 * are the cumulants of d under p: l' = E[d] - d_y, l'' = Var[d] >= 0 (so the
 * mean NLL is convex in beta), and the third derivative is the third
 * central moment. One O(K) sweep per sample gives all of them, from the raw
 * moments: the maximum's weight 1 is in every sum, so the cancellation in E[d^2] - E[d]^2 costs at most a few digits of a
 * quantity that only sets the Newton step length, never the optimum (where
 * E[d] - d_y = 0).
 *
 * A class whose beta d is below EXPK_ARG_MIN weighs 0 in the sums, at this
 * beta: its true weight, < 3e-308 against the maximum's 1, is nothing at
 * double precision. (An earlier version clamped d to one bound computed for
 * the largest beta, which left such classes a weight exp(-708 beta/beta_max)
 * at every smaller beta: the wrong objective whenever a row's logits spanned
 * more than ~35.)
 */
typedef struct temp_ctx {
    const calib_dataset *ds;
    size_t k;
    const calib_expk *kern; /* exp kernels (expk.h) */
    double *zbuf; /* k: logits of a probability row */
} temp_ctx;

typedef struct temp_eval {
    double f;   /* mean NLL (or Brier) */
    double g;   /* its first three derivatives in beta (NLL only) */
    double h;
    double t3;
    double f2;  /* mean NLL at a second beta, when asked for */
} temp_eval;

enum { TEMP_NLL, TEMP_BRIER };

/*
 * One pass over the samples at beta: the mean NLL with its derivatives, or
 * the mean Brier score; with beta2 > 0 also the mean NLL at beta2 (the
 * objective "before", folded into the first pass to save a sweep).
 */
static void temp_pass(const temp_ctx *c, const calib_dataset *ds, double beta,
                      int what, double beta2, temp_eval *ev)
{
    size_t k = c->k, width = calib_form_width(ds->form, k);
    calib_ksum f = {0}, g = {0}, h = {0}, t3 = {0}, f2 = {0};
    double s[4];
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        size_t y = (size_t)x[width];
        const double *z = calib_recal_row_logits(ds->form, k, x, c->zbuf);
        double zmax = calib_row_max(z, k), dy = z[y] - zmax;
        if (what == TEMP_BRIER) {
            c->kern->squares(z, k, zmax, beta, s);
            double wy = exp(beta * dy);
            /* sum_j (p_j - [j = y])^2 = sum p^2 - 2 p_y + 1 */
            calib_ksum_add(&f, s[1] / (s[0] * s[0]) - 2 * wy / s[0] + 1);
        } else {
            c->kern->moments(z, k, zmax, beta, s);
            double mu = s[1] / s[0], e2 = s[2] / s[0], e3 = s[3] / s[0];
            calib_ksum_add(&f, log(s[0]) - beta * dy);
            calib_ksum_add(&g, mu - dy);
            calib_ksum_add(&h, e2 - mu * mu);
            calib_ksum_add(&t3, e3 - 3 * mu * e2 + 2 * mu * mu * mu);
        }
        if (beta2 > 0) {
            c->kern->sum(z, k, zmax, beta2, s);
            calib_ksum_add(&f2, log(s[0]) - beta2 * dy);
        }
    }
    double n = (double)ds->n;
    ev->f = calib_ksum_value(&f) / n;
    ev->g = calib_ksum_value(&g) / n;
    ev->h = calib_ksum_value(&h) / n;
    ev->t3 = calib_ksum_value(&t3) / n;
    ev->f2 = calib_ksum_value(&f2) / n;
}

/* ================================================================== temperature: NLL solver */

typedef struct temp_solve {
    double lo, hi;      /* bracket of beta */
    double tol;
    unsigned max_iter;
    int bisect_only;
    double beta_before; /* > 0: also evaluate the NLL here in the first pass */
    /* out */
    double beta, f, f_before;
    unsigned iterations, fallbacks;
    int converged, at_bound;
} temp_solve;

/*
 * Newton step on the convex mean NLL, with Halley's third-order correction
 * from the third cumulant (computed in the same pass, it turns three sweeps
 * into two near the optimum). The correction is dropped when it would change
 * the step by more than a factor of two, i.e. far from the optimum where
 * the Taylor model says little.
 */
static double newton_halley_step(const temp_eval *ev)
{
    if (!(ev->h > 0))
        return NAN;
    double dn = -ev->g / ev->h;
    double corr = 1 + dn * ev->t3 / (2 * ev->h);
    return corr >= 0.5 && corr <= 2 ? dn / corr : dn;
}

/*
 * Safeguarded Newton inside a bracket [blo, bhi] that shrinks with the sign
 * of the gradient (the NLL is convex in beta). A step leaving the bracket
 * first probes the bound of the original bracket on that side -- the
 * optimum sits there when the data are separable -- and afterwards falls
 * back to bisection. Stops when the step is below tol * beta (then takes
 * it), or when a bound is the optimum (gradient pointing outward there).
 *
 * Where the data are separable or nearly so, the NLL is close to
 * c exp(-m beta) and Newton's step l'/l'' tends to a constant 1/m (2/m with
 * Halley's correction): it would creep towards a bound hundreds of steps
 * away and stop at max_iter. While Newton's step is at least half its
 * last one, in the same direction, the step taken doubles the last step
 * taken instead (converging, Newton's steps shrink faster than that); an
 * overshoot only shrinks the bracket. Once every class but the label's
 * weighs nothing at double precision (g = 0 and Var = 0: each row a point
 * mass on its label), every larger beta gives the same objective: the fit
 * heads for the upper bound as on separable data.
 */
static void temp_newton(const temp_ctx *c, const calib_dataset *ds, double b,
                        temp_solve *s)
{
    double blo = s->lo, bhi = s->hi, newton_prev = 0, taken_prev = 0;
    int probed_lo = 0, probed_hi = 0;
    temp_eval ev;
    s->converged = s->at_bound = 0;
    for (unsigned it = 0; it < s->max_iter; it++) {
        double extra = it == 0 && s->beta_before > 0 && s->beta_before != b
                           ? s->beta_before : 0;
        temp_pass(c, ds, b, TEMP_NLL, extra, &ev);
        s->iterations++;
        probed_lo |= b == s->lo;
        probed_hi |= b == s->hi;
        if (it == 0 && s->beta_before > 0)
            s->f_before = extra > 0 ? ev.f2 : ev.f;
        s->beta = b;
        s->f = ev.f;
        int flat_up = ev.g == 0 && !(ev.h > 0);
        if ((b == s->hi && ev.g <= 0) || (b == s->lo && ev.g >= 0 && !flat_up)) {
            s->converged = s->at_bound = 1;
            return;
        }
        if (flat_up)
            blo = b;
        else if (ev.g > 0)
            bhi = b;
        else if (ev.g < 0)
            blo = b;
        else {
            s->converged = 1;
            return;
        }
        /* step may be NaN (no Newton step): the comparisons that meet it
         * are the quiet ones, which raise no invalid flag */
        double step = s->bisect_only ? NAN : newton_halley_step(&ev);
        if (islessequal(fabs(step), s->tol * b)) {
            /* take the last step; its objective by the cubic Taylor model,
             * exact far below the rounding of the mean itself */
            double nb = b + step;
            nb = nb < blo ? blo : nb > bhi ? bhi : nb;
            double dd = nb - b;
            s->f = ev.f + dd * (ev.g + dd * (ev.h / 2 + dd * ev.t3 / 6));
            s->beta = nb;
            s->converged = 1;
            return;
        }
        if (bhi - blo <= s->tol * b) {
            s->converged = 1;
            return;
        }
        double newton = step;
        if (isgreater(newton_prev * newton, 0) && fabs(newton) >= 0.5 * fabs(newton_prev)
            && taken_prev * newton > 0 && fabs(newton) < 2 * fabs(taken_prev))
            step = 2 * taken_prev;
        newton_prev = newton;
        double cand = b + step;
        if (!(isgreater(cand, blo) && isless(cand, bhi))) {
            /* no step (bisection mode) heads where the gradient points */
            int up = isnan(cand) ? ev.g < 0 || flat_up : cand >= bhi;
            if (up && bhi == s->hi && !probed_hi) {
                cand = s->hi;
                probed_hi = 1;
            } else if (!up && blo == s->lo && !probed_lo) {
                cand = s->lo;
                probed_lo = 1;
            } else {
                cand = 0.5 * (blo + bhi);
                if (!s->bisect_only)
                    s->fallbacks++;
            }
        }
        taken_prev = cand - b;
        b = cand;
    }
}

/* ================================================================== temperature: fit */

static int temp_ctx_init(temp_ctx *c, const calib_dataset *ds, unsigned flags)
{
    c->ds = ds;
    c->k = ds->k;
    c->kern = calib_expk_select(flags & CALIB_RECAL_EXP_SCALAR ? CALIB_EXPK_SCALAR
                                : flags & CALIB_RECAL_EXP_VEC2 ? CALIB_EXPK_VEC2
                                : CALIB_EXPK_VEC4);
    c->zbuf = malloc(ds->k * sizeof(double));
    return c->zbuf ? CALIB_OK : CALIB_ENOMEM;
}

/* About `rows` evenly spaced records: a strided view, no copy. */
static calib_dataset subsample(const calib_dataset *ds, size_t rows)
{
    calib_dataset sub = *ds;
    size_t step = ds->n / rows;
    sub.stride = ds->stride * step;
    sub.n = ds->n / step;
    return sub;
}

static int fit_temperature_nll(const temp_ctx *c, const calib_dataset *ds,
                               const calib_recal_opts *o, double beta_init,
                               double beta_before, calib_recal_result *res)
{
    temp_solve s = {
        .lo = 1 / o->t_max, .hi = 1 / o->t_min, .tol = o->tol,
        .max_iter = o->max_iter, .bisect_only = !!(o->flags & CALIB_RECAL_BISECT),
    };
    double b = beta_init < s.lo ? s.lo : beta_init > s.hi ? s.hi : beta_init;
    /*
     * Warm-up: the same solver on ~WARMUP_ROWS strided rows finds a start
     * within a few percent of the optimum for a fraction of one full sweep,
     * so the full-data stage needs two or three sweeps. It only chooses the
     * start: the stopping test is on the full data.
     */
    if (!s.bisect_only && !(o->flags & CALIB_RECAL_NO_WARMUP)
        && ds->n >= 4 * WARMUP_ROWS) {
        calib_dataset sub = subsample(ds, WARMUP_ROWS);
        temp_solve w = s;
        w.tol = 1e-4;
        w.beta_before = 0;
        temp_newton(c, &sub, b, &w);
        if (isfinite(w.beta))
            b = w.beta;
    }
    s.beta_before = beta_before;
    s.iterations = s.fallbacks = 0;
    temp_newton(c, ds, b, &s);
    if (!isfinite(s.f) || !isfinite(s.beta) || !isfinite(s.f_before))
        return CALIB_ENONFINITE;
    res->params[0] = 1 / s.beta;
    res->iterations = s.iterations;
    res->fallbacks = s.fallbacks;
    res->converged = s.converged;
    res->at_bound = s.at_bound;
    res->objective_before = s.f_before;
    res->objective_after = s.f;
    return CALIB_OK;
}

typedef struct brier_fn_ctx {
    const temp_ctx *c;
    unsigned evals;
} brier_fn_ctx;

static double temp_brier_at(double beta, void *ctx)
{
    brier_fn_ctx *b = ctx;
    temp_eval ev;
    temp_pass(b->c, b->c->ds, beta, TEMP_BRIER, 0, &ev);
    b->evals++;
    return ev.f;
}

/*
 * Mean Brier in beta is not convex: Brent's method on the bracket finds a
 * local minimum; the two ends are then evaluated too, so a monotone
 * objective (separable data) returns its bound with at_bound set.
 */
static int fit_temperature_brier(const temp_ctx *c, const calib_recal_opts *o,
                                 double beta_before, calib_recal_result *res)
{
    double lo = 1 / o->t_max, hi = 1 / o->t_min;
    brier_fn_ctx bc = {c, 0};
    calib_recal_min1d m;
    int rc = calib_recal_minimize_1d(temp_brier_at, &bc, lo, hi, o->tol,
                                     o->max_iter, &m);
    if (rc)
        return rc;
    double flo = temp_brier_at(lo, &bc), fhi = temp_brier_at(hi, &bc);
    res->converged = m.converged;
    /* a tie goes to the bound: a flat end (separable data, every row a
     * point mass on its label) has its optimum there */
    if (fhi <= m.fx && fhi <= flo) {
        m.x = hi;
        m.fx = fhi;
        res->at_bound = 1;
    } else if (flo <= m.fx) {
        m.x = lo;
        m.fx = flo;
        res->at_bound = 1;
    }
    res->objective_before = temp_brier_at(beta_before, &bc);
    res->objective_after = m.fx;
    res->params[0] = 1 / m.x;
    res->iterations = bc.evals;
    if (!isfinite(m.fx) || !isfinite(res->objective_before))
        return CALIB_ENONFINITE;
    return CALIB_OK;
}

static const unsigned temperature_forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS)
    | CALIB_FORM_BIT(CALIB_FORM_PROBS) | CALIB_FORM_BIT(CALIB_FORM_BINARY);

int calib_recal_fit_temperature(const calib_dataset *ds,
                                const calib_recal_opts *opts,
                                calib_recal_result *res)
{
    calib_recal_opts o;
    temp_ctx c = {0};
    int rc;
    if (!res)
        return CALIB_EINVAL;
    result_reset(res, CALIB_RECAL_OBJ_NLL, 1);
    int brier = opts && opts->objective == CALIB_RECAL_OBJ_BRIER;
    int bisect = opts && (opts->flags & CALIB_RECAL_BISECT);
    rc = opts_resolve(opts, &o, brier || bisect ? RECAL_MAX_ITER_SLOW : RECAL_MAX_ITER,
                      brier ? TEMP_TOL_BRENT : bisect ? TEMP_TOL_BISECT : TEMP_TOL_NEWTON);
    if (rc)
        return rc;
    if (o.objective != CALIB_RECAL_OBJ_DEFAULT && o.objective != CALIB_RECAL_OBJ_NLL
        && !brier)
        return CALIB_EINVAL;
    res->objective = brier ? CALIB_RECAL_OBJ_BRIER : CALIB_RECAL_OBJ_NLL;
    if (o.init && !(o.init[0] > 0 && isfinite(o.init[0])))
        return CALIB_EINVAL;
    rc = calib_recal_check_dataset(ds, temperature_forms);
    if (rc)
        return rc;
    double beta_before = o.init ? 1 / o.init[0] : 1;
    rc = temp_ctx_init(&c, ds, o.flags);
    if (rc)
        return rc;
    if (brier)
        rc = fit_temperature_brier(&c, &o, beta_before, res);
    else
        rc = fit_temperature_nll(&c, ds, &o, beta_before, beta_before, res);
    free(c.zbuf);
    return rc;
}

/* ================================================================== Platt */

/* The score s of a binary prediction (see recal.h). */
static double platt_s(int form, const double *x)
{
    if (form == CALIB_FORM_BINARY)
        return binary_logit(x[0]);
    if (form == CALIB_FORM_LOGITS) {
        /* two finite logits can differ by more than a double holds: kept
         * finite, so that a = 0 gives sigmoid(b), not 0 * inf = NaN
         * (tests/fuzz/corpus/pubmsg/crash-platt_zero_slope) */
        double s = x[1] - x[0];
        return isinf(s) ? copysign(DBL_MAX, s) : s;
    }
    return log_floor(x[1]) - log_floor(x[0]);
}

/* A two-parameter objective at one point: its mean, gradient and (for
 * Platt the Hessian, for variance scaling the Fisher information) the
 * symmetric matrix 00, 01, 11. */
typedef struct eval2 {
    double f;
    double g[2];
    double h[3];
} eval2;

/* One evaluation of the objective at x (a full pass over the data). */
typedef void (*pass2_fn)(const calib_dataset *ds, const double x[2], const void *ctx,
                         eval2 *ev);
/* The search direction at x: returns the number of free variables (0: all
 * held on their bounds, converged) or -1 when there is none. */
typedef int (*dir2_fn)(const eval2 *ev, const double x[2], double d[2]);

/* Solves [h0 h1; h1 h2] d = -g; 0, or -1 if the matrix is not positive
 * definite. */
static int newton_dir2(const double h[3], const double g[2], double d[2])
{
    double det = h[0] * h[2] - h[1] * h[1];
    if (!(h[0] > 0 && det > 0))
        return -1;
    d[0] = -(h[2] * g[0] - h[1] * g[1]) / det;
    d[1] = -(h[0] * g[1] - h[1] * g[0]) / det;
    return 0;
}

/*
 * Damped Newton (or Fisher scoring) in two variables with lower bounds lo
 * (-INFINITY: none), from x with ev its evaluation: each step is projected
 * onto the bounds and halved until the Armijo condition holds along the
 * projection arc (Bertsekas); without active bounds this is the plain
 * backtracking of Lin, Lin & Weng. Stops when the predicted decrease is
 * below opts->tol. Leaves the result in x and ev.
 */
static void newton2_run(const calib_dataset *ds, pass2_fn pass, dir2_fn dir,
                        const void *ctx, const double lo[2],
                        const calib_recal_opts *o, double x[2], eval2 *ev,
                        calib_recal_result *res)
{
    eval2 tr;
    for (unsigned it = 0; it < o->max_iter; it++) {
        double d[2];
        int free_vars = dir(ev, x, d);
        if (free_vars < 0)
            break;
        double dec = -(ev->g[0] * d[0] + ev->g[1] * d[1]);
        if (free_vars == 0 || dec / 2 <= o->tol) {
            res->converged = 1;
            break;
        }
        res->iterations++;
        double step = 1, nx[2];
        for (;;) {
            for (int j = 0; j < 2; j++) {
                nx[j] = x[j] + step * d[j];
                nx[j] = nx[j] > lo[j] ? nx[j] : lo[j];
            }
            pass(ds, nx, ctx, &tr);
            double lin = ev->g[0] * (nx[0] - x[0]) + ev->g[1] * (nx[1] - x[1]);
            if (tr.f <= ev->f + ARMIJO_C * lin)
                break;
            step /= 2;
            res->fallbacks++;
            if (step < STEP_MIN)
                return; /* no descent left at this precision */
        }
        x[0] = nx[0];
        x[1] = nx[1];
        *ev = tr;
    }
}

/* Platt's smoothed targets for y = 1 and y = 0. */
typedef struct platt_targets {
    double tpos, tneg;
} platt_targets;

/* One pass at x = (a, b): cross-entropy against Platt's targets t+ and t-. */
static void platt_pass(const calib_dataset *ds, const double x2[2], const void *ctx,
                       eval2 *ev)
{
    const platt_targets *tg = ctx;
    double a = x2[0], b = x2[1], tpos = tg->tpos, tneg = tg->tneg;
    size_t width = calib_form_width(ds->form, ds->k);
    calib_ksum f = {0}, ga = {0}, gb = {0}, haa = {0}, hab = {0}, hbb = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double s = platt_s(ds->form, x), t = x[width] != 0 ? tpos : tneg;
        double u = a * s + b, q = sigmoid(u), w = q * (1 - q);
        /* -t ln q - (1 - t) ln(1 - q) = t softplus(-u) + (1 - t) softplus(u) */
        calib_ksum_add(&f, t * softplus(-u) + (1 - t) * softplus(u));
        calib_ksum_add(&ga, (q - t) * s);
        calib_ksum_add(&gb, q - t);
        calib_ksum_add(&haa, w * s * s);
        calib_ksum_add(&hab, w * s);
        calib_ksum_add(&hbb, w);
    }
    double n = (double)ds->n;
    ev->f = calib_ksum_value(&f) / n;
    ev->g[0] = calib_ksum_value(&ga) / n;
    ev->g[1] = calib_ksum_value(&gb) / n;
    ev->h[0] = calib_ksum_value(&haa) / n;
    ev->h[1] = calib_ksum_value(&hab) / n;
    ev->h[2] = calib_ksum_value(&hbb) / n;
}

/* Newton's direction on the Hessian with LLW's ridge; -1 if none. */
static int platt_direction(const eval2 *ev, const double x[2], double d[2])
{
    double h[3] = {ev->h[0] + PLATT_SIGMA, ev->h[1], ev->h[2] + PLATT_SIGMA};
    (void)x;
    return newton_dir2(h, ev->g, d) == 0 ? 2 : -1;
}

static const unsigned platt_forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS)
    | CALIB_FORM_BIT(CALIB_FORM_PROBS) | CALIB_FORM_BIT(CALIB_FORM_BINARY);

static void count_classes(const calib_dataset *ds, size_t *npos, size_t *nneg)
{
    size_t width = calib_form_width(ds->form, ds->k), pos = 0;
    for (size_t i = 0; i < ds->n; i++)
        pos += row_at(ds, i)[width] != 0;
    *npos = pos;
    *nneg = ds->n - pos;
}

/*
 * Lin, Lin & Weng (2007): Newton's method with backtracking (Armijo) on the
 * cross-entropy against Platt's smoothed targets (N+ + 1)/(N+ + 2) and
 * 1/(N- + 2), which stay inside (0, 1) and so keep (a, b) finite even on
 * separable data; a ridge of 1e-12 on the Hessian as in their code.
 */
int calib_recal_fit_platt(const calib_dataset *ds, const calib_recal_opts *opts,
                          calib_recal_result *res)
{
    calib_recal_opts o;
    eval2 ev;
    size_t npos, nneg;
    int rc;
    if (!res)
        return CALIB_EINVAL;
    result_reset(res, CALIB_RECAL_OBJ_NLL, 2);
    rc = opts_resolve(opts, &o, RECAL_MAX_ITER, NEWTON2_TOL);
    if (rc)
        return rc;
    if (o.objective != CALIB_RECAL_OBJ_DEFAULT && o.objective != CALIB_RECAL_OBJ_NLL)
        return CALIB_EINVAL;
    if (o.init && !(isfinite(o.init[0]) && isfinite(o.init[1])))
        return CALIB_EINVAL;
    if (ds && ds->k != 2)
        return CALIB_EINVAL; /* before the scan: a shape error, not data */
    rc = calib_recal_check_dataset(ds, platt_forms);
    if (rc)
        return rc;
    count_classes(ds, &npos, &nneg);
    const platt_targets t = {(npos + 1.0) / (npos + 2.0), 1.0 / (nneg + 2.0)};
    /* start: the current map, else LLW's a = 0, b = prior log-odds */
    double x[2] = {0, log((npos + 1.0) / (nneg + 1.0))};
    const double identity[2] = {1, 0}, lo[2] = {-INFINITY, -INFINITY};
    if (o.init) {
        x[0] = o.init[0];
        x[1] = o.init[1];
    }
    platt_pass(ds, o.init ? o.init : identity, &t, &ev);
    res->objective_before = ev.f;
    platt_pass(ds, x, &t, &ev);
    newton2_run(ds, platt_pass, platt_direction, &t, lo, &o, x, &ev, res);
    res->params[0] = x[0];
    res->params[1] = x[1];
    res->objective_after = ev.f;
    if (!isfinite(ev.f) || !isfinite(x[0]) || !isfinite(x[1]))
        return CALIB_ENONFINITE;
    return CALIB_OK;
}

/* ================================================================== variance */

/*
 * One pass at (w, b), var' = w var + b. Per sample with r = (y - mean)^2:
 * S = r / var' + ln var', dS/dvar' = 1/var' - r/var'^2, and the expected
 * second derivative (E r = var') is 1/var'^2 > 0: Fisher scoring has a
 * positive-definite matrix even where the DSS is locally concave.
 */
static void var_pass(const calib_dataset *ds, const double x2[2], const void *ctx,
                     eval2 *ev)
{
    double w = x2[0], b = x2[1];
    (void)ctx;
    calib_ksum f = {0}, gw = {0}, gb = {0}, hww = {0}, hwb = {0}, hbb = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double v = x[1], e = x[2] - x[0], r = e * e;
        double vp = w * v + b, iv = 1 / vp, ds1 = iv - r * iv * iv;
        calib_ksum_add(&f, r * iv + log(vp));
        calib_ksum_add(&gw, ds1 * v);
        calib_ksum_add(&gb, ds1);
        calib_ksum_add(&hww, v * v * iv * iv);
        calib_ksum_add(&hwb, v * iv * iv);
        calib_ksum_add(&hbb, iv * iv);
    }
    double n = (double)ds->n;
    ev->f = calib_ksum_value(&f) / n;
    ev->g[0] = calib_ksum_value(&gw) / n;
    ev->g[1] = calib_ksum_value(&gb) / n;
    ev->h[0] = calib_ksum_value(&hww) / n;
    ev->h[1] = calib_ksum_value(&hwb) / n;
    ev->h[2] = calib_ksum_value(&hbb) / n;
}

/* The closed-form w for b = 0: mean (y - mean)^2 / var. */
static double var_w0(const calib_dataset *ds)
{
    calib_ksum s = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double e = x[2] - x[0];
        calib_ksum_add(&s, e * e / x[1]);
    }
    double w = calib_ksum_value(&s) / (double)ds->n;
    return w > VAR_W_MIN ? w : VAR_W_MIN;
}

/*
 * Projected scoring direction (Bertsekas): a variable on its bound whose
 * gradient points outward is held there; the others take the scoring step.
 * Returns the number of free variables.
 */
static int var_direction(const eval2 *ev, const double x[2], double d[2])
{
    int fw = !(x[0] <= VAR_W_MIN && ev->g[0] > 0);
    int fb = !(x[1] <= 0 && ev->g[1] > 0);
    d[0] = d[1] = 0;
    if (fw && fb) {
        if (newton_dir2(ev->h, ev->g, d) == 0)
            return 2;
        fb = 0; /* singular: all variances equal; w and b are confounded */
    }
    if (fw)
        d[0] = -ev->g[0] / ev->h[0];
    else if (fb)
        d[1] = -ev->g[1] / ev->h[2];
    return fw + fb;
}

static const unsigned variance_forms = CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN);

int calib_recal_fit_variance(const calib_dataset *ds,
                             const calib_recal_opts *opts,
                             calib_recal_result *res)
{
    calib_recal_opts o;
    eval2 ev;
    int rc;
    if (!res)
        return CALIB_EINVAL;
    result_reset(res, CALIB_RECAL_OBJ_DSS, 2);
    rc = opts_resolve(opts, &o, RECAL_MAX_ITER, NEWTON2_TOL);
    if (rc)
        return rc;
    if (o.objective != CALIB_RECAL_OBJ_DEFAULT && o.objective != CALIB_RECAL_OBJ_DSS)
        return CALIB_EINVAL;
    if (o.init && !(o.init[0] > 0 && o.init[1] >= 0 && isfinite(o.init[0])
                    && isfinite(o.init[1])))
        return CALIB_EINVAL;
    rc = calib_recal_check_dataset(ds, variance_forms);
    if (rc)
        return rc;
    const double identity[2] = {1, 0}, lo[2] = {VAR_W_MIN, 0};
    var_pass(ds, o.init ? o.init : identity, NULL, &ev);
    res->objective_before = ev.f;
    double x[2] = {o.init ? o.init[0] : var_w0(ds), o.init ? o.init[1] : 0};
    x[0] = x[0] > VAR_W_MIN ? x[0] : VAR_W_MIN;
    var_pass(ds, x, NULL, &ev);
    newton2_run(ds, var_pass, var_direction, NULL, lo, &o, x, &ev, res);
    res->params[0] = x[0];
    res->params[1] = x[1];
    res->at_bound = (x[1] <= 0 && ev.g[1] >= 0) || (x[0] <= VAR_W_MIN && ev.g[0] >= 0);
    res->objective_after = ev.f;
    if (!isfinite(ev.f))
        return CALIB_ENONFINITE;
    return CALIB_OK;
}

/* ================================================================== location-scale */

/*
 * mean' = a + b mean, var' = c var. The DSS of a record, (y - a - b
 * mean)^2 / (c var) + ln c + ln var, splits: for any c, (a, b) minimise
 * the residuals' sum of squares weighted by 1/var (weighted least
 * squares, whatever c), and then c = mean((y - a - b mean)^2 / var). So
 * the optimum is exact in closed form, three passes over the samples with
 * compensated sums. b >= LS_B_MIN keeps the map injective and the mean
 * increasing: a WLS slope below it (forecasts carrying no signal, or
 * against it) is held at the bound, where the quadratic's optimum in a
 * alone is the weighted mean of y - b mean; all forecast means equal:
 * b cannot be told from a, and stays at the start's (1 without init).
 */
static double ls_objective(const calib_dataset *ds, const double v3[3])
{
    calib_ksum f = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double e = x[2] - (v3[0] + v3[1] * x[0]), vp = v3[2] * x[1];
        calib_ksum_add(&f, e * e / vp + log(vp));
    }
    return calib_ksum_value(&f) / (double)ds->n;
}

static const unsigned location_scale_forms = CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN);

int calib_recal_fit_location_scale(const calib_dataset *ds, const calib_recal_opts *opts,
                                   calib_recal_result *res)
{
    calib_recal_opts o, in = {0};
    int rc;
    if (!res)
        return CALIB_EINVAL;
    result_reset(res, CALIB_RECAL_OBJ_DSS, 3);
    if (opts)
        in = *opts;
    unsigned hold = in.flags & CALIB_RECAL_HOLD_ALL;
    in.flags &= ~CALIB_RECAL_HOLD_ALL;
    if (hold & ~(CALIB_RECAL_HOLD(0) | CALIB_RECAL_HOLD(1) | CALIB_RECAL_HOLD(2)))
        return CALIB_EINVAL;
    int hold_a = !!(hold & CALIB_RECAL_HOLD(0)), hold_b = !!(hold & CALIB_RECAL_HOLD(1));
    rc = opts_resolve(&in, &o, RECAL_MAX_ITER, NEWTON2_TOL);
    if (rc)
        return rc;
    if (o.objective != CALIB_RECAL_OBJ_DEFAULT && o.objective != CALIB_RECAL_OBJ_DSS)
        return CALIB_EINVAL;
    if (o.init && !(isfinite(o.init[0]) && o.init[1] > 0 && isfinite(o.init[1]) &&
                    o.init[2] > 0 && isfinite(o.init[2])))
        return CALIB_EINVAL;
    rc = calib_recal_check_dataset(ds, location_scale_forms);
    if (rc)
        return rc;
    const double identity[3] = {0, 1, 1};
    res->objective_before = ls_objective(ds, o.init ? o.init : identity);
    /* weighted means of mean and y, weights 1/var */
    calib_ksum sw = {0}, sx = {0}, sy = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double w = 1 / x[1];
        calib_ksum_add(&sw, w);
        calib_ksum_add(&sx, w * x[0]);
        calib_ksum_add(&sy, w * x[2]);
    }
    double wt = calib_ksum_value(&sw), mx = calib_ksum_value(&sx) / wt,
           my = calib_ksum_value(&sy) / wt;
    /* b: the weighted regression's slope, through the origin when a is
     * held at 0 (moments about 0, not the means) */
    double cx = hold_a ? 0 : mx, cy = hold_a ? 0 : my;
    calib_ksum sxx = {0}, sxy = {0};
    for (size_t i = 0; i < ds->n && !hold_b; i++) {
        const double *x = row_at(ds, i);
        double w = 1 / x[1], dx = x[0] - cx;
        calib_ksum_add(&sxx, w * dx * dx);
        calib_ksum_add(&sxy, w * dx * (x[2] - cy));
    }
    double vxx = calib_ksum_value(&sxx), b = hold_b ? 1 : o.init ? o.init[1] : 1;
    if (!hold_b && vxx > 0 && isfinite(vxx))
        b = calib_ksum_value(&sxy) / vxx;
    if (!(b >= LS_B_MIN)) {
        b = LS_B_MIN;
        res->at_bound = 1;
    }
    double v3[3] = {hold_a ? 0 : my - b * mx, b, 1};
    calib_ksum sc = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double e = x[2] - (v3[0] + b * x[0]);
        calib_ksum_add(&sc, e * e / x[1]);
    }
    v3[2] = hold & CALIB_RECAL_HOLD(2) ? 1 : calib_ksum_value(&sc) / (double)ds->n;
    if (!(v3[2] >= VAR_W_MIN)) {
        v3[2] = VAR_W_MIN;
        res->at_bound = 1;
    }
    memcpy(res->params, v3, sizeof v3);
    res->iterations = 1;
    res->converged = 1;
    res->objective_after = ls_objective(ds, v3);
    if (!isfinite(res->objective_after) || !isfinite(v3[0]) || !isfinite(v3[2]))
        return CALIB_ENONFINITE;
    return CALIB_OK;
}

/* ================================================================== apply */

/* out = softmax(beta z); out may equal z. */
static void softmax_scaled(const double *z, size_t k, double beta, double *out)
{
    calib_softmax_row(z, k, calib_row_max(z, k), beta, out);
}

int calib_recal_apply_temperature(const double *params, int form, size_t k,
                                  const double *x, double *out)
{
    double beta = 1 / params[0];
    switch (form) {
    case CALIB_FORM_LOGITS:
        softmax_scaled(x, k, beta, out);
        return CALIB_OK;
    case CALIB_FORM_PROBS:
        /* out = ln p first, then its softmax: safe when out == x */
        calib_recal_row_logits(form, k, x, out);
        softmax_scaled(out, k, beta, out);
        return CALIB_OK;
    case CALIB_FORM_BINARY:
        out[0] = sigmoid(beta * binary_logit(x[0]));
        return CALIB_OK;
    }
    return CALIB_EINVAL;
}

int calib_recal_apply_platt(const double *params, int form, size_t k,
                            const double *x, double *out)
{
    if (form == CALIB_FORM_GAUSSIAN || !form_valid(form)
        || (form != CALIB_FORM_BINARY && k != 2))
        return CALIB_EINVAL;
    double u = params[0] * platt_s(form, x) + params[1];
    if (form == CALIB_FORM_BINARY) {
        out[0] = sigmoid(u);
    } else {
        out[0] = sigmoid(-u); /* not 1 - q: keeps a tiny p0 exact */
        out[1] = sigmoid(u);
    }
    return CALIB_OK;
}

int calib_recal_apply_variance(const double *params, int form, size_t k,
                               const double *x, double *out)
{
    if (form != CALIB_FORM_GAUSSIAN)
        return CALIB_EINVAL;
    out[0] = x[0];
    out[1] = params[0] * x[1] + params[1];
    return CALIB_OK;
}

int calib_recal_apply_location_scale(const double *params, int form, size_t k,
                                     const double *x, double *out)
{
    (void)k;
    if (form != CALIB_FORM_GAUSSIAN)
        return CALIB_EINVAL;
    out[0] = params[0] + params[1] * x[0];
    out[1] = params[2] * x[1];
    return CALIB_OK;
}

/* ================================================================== prior correction */

int calib_prior_weights_ok(const double *w, size_t nw)
{
    if (!w || nw < 2)
        return 0;
    for (size_t j = 0; j < nw; j++)
        if (!(w[j] >= CALIB_PRIOR_WEIGHT_MIN && w[j] <= CALIB_PRIOR_WEIGHT_MAX))
            return 0; /* NaN fails too */
    return 1;
}

int calib_prior_weigh(const double *w, size_t nw, int out_form, size_t k, double *p)
{
    if (!p || !calib_prior_weights_ok(w, nw))
        return CALIB_EINVAL;
    if (out_form == CALIB_FORM_BINARY) {
        if (nw != 2)
            return CALIB_EINVAL;
        double a = w[1] * p[0], den = a + w[0] * (1 - p[0]);
        if (den > 0)
            p[0] = a / den;
        return CALIB_OK;
    }
    if (out_form != CALIB_FORM_PROBS || nw != k)
        return CALIB_EINVAL;
    double s = 0;
    for (size_t j = 0; j < k; j++)
        s += w[j] * p[j];
    if (!(s > 0) || !isfinite(s))
        return CALIB_OK;
    for (size_t j = 0; j < k; j++)
        p[j] = w[j] * p[j] / s;
    return CALIB_OK;
}

/* ================================================================== paired improvement */

/* The raw outputs as a prediction of the output form. */
static int apply_identity(int form, size_t k, const double *x, double *out)
{
    if (form == CALIB_FORM_LOGITS)
        calib_softmax(x, k, out);
    else
        memmove(out, x, calib_form_width(form, k) * sizeof *out);
    return CALIB_OK;
}

typedef struct pair_scores {
    double brier, log, dss;
} pair_scores;

/* Scores of one recalibrated prediction; CALIB_ENONFINITE or CALIB_EVAR
 * when a map produced something no score is defined for. */
static int score_out(int form, size_t k, const double *p, double y,
                     pair_scores *s)
{
    calib_score sc;
    switch (calib_recal_out_form(form)) {
    case CALIB_FORM_PROBS:
        calib_score_probs(p, k, (size_t)y, &sc);
        break;
    case CALIB_FORM_BINARY:
        calib_score_binary(p[0], y != 0, &sc);
        break;
    default:
        if (!(p[1] > 0))
            return isnan(p[1]) ? CALIB_ENONFINITE : CALIB_EVAR;
        s->dss = calib_score_dss(p[0], p[1], y);
        return isfinite(s->dss) ? CALIB_OK : CALIB_ENONFINITE;
    }
    s->brier = sc.brier;
    s->log = sc.log;
    return isfinite(sc.brier) && isfinite(sc.log) ? CALIB_OK : CALIB_ENONFINITE;
}

typedef struct pair_accum {
    calib_accum before, after, diff;
} pair_accum;

static void pair_init(pair_accum *a)
{
    calib_accum_init(&a->before);
    calib_accum_init(&a->after);
    calib_accum_init(&a->diff);
}

static void pair_add(pair_accum *a, double s0, double s1)
{
    calib_accum_add(&a->before, s0);
    calib_accum_add(&a->after, s1);
    calib_accum_add(&a->diff, s0 - s1);
}

static void pair_summary(const pair_accum *a, calib_recal_delta *d)
{
    d->before = calib_accum_mean(&a->before);
    d->after = calib_accum_mean(&a->after);
    d->mean = calib_accum_mean(&a->diff);
    d->se = calib_accum_se(&a->diff);
    calib_accum_ci95(&a->diff, d->ci);
}

static void delta_nan(calib_recal_delta *d)
{
    d->before = d->after = d->mean = d->se = d->ci[0] = d->ci[1] = NAN;
}

static int apply_or_identity(calib_recal_apply_fn fn, const double *params,
                             int form, size_t k, const double *x, double *out)
{
    return fn ? fn(params, form, k, x, out) : apply_identity(form, k, x, out);
}

int calib_recal_compare(const calib_dataset *ds, calib_recal_apply_fn apply0,
                        const double *params0, calib_recal_apply_fn apply1,
                        const double *params1, calib_recal_improvement *imp)
{
    if (!imp || !apply1 || !params1 || (apply0 && !params0))
        return CALIB_EINVAL;
    int rc = calib_recal_check_dataset(ds, ~0u);
    if (rc)
        return rc;
    size_t width = calib_form_width(ds->form, ds->k);
    double *buf = malloc(2 * width * sizeof *buf);
    if (!buf)
        return CALIB_ENOMEM;
    pair_accum brier, logs, dss;
    pair_init(&brier);
    pair_init(&logs);
    pair_init(&dss);
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = row_at(ds, i);
        double y = x[width];
        pair_scores s0, s1;
        rc = apply_or_identity(apply0, params0, ds->form, ds->k, x, buf);
        if (!rc)
            rc = apply1(params1, ds->form, ds->k, x, buf + width);
        if (!rc)
            rc = score_out(ds->form, ds->k, buf, y, &s0);
        if (!rc)
            rc = score_out(ds->form, ds->k, buf + width, y, &s1);
        if (rc)
            goto out;
        if (ds->form == CALIB_FORM_GAUSSIAN) {
            pair_add(&dss, s0.dss, s1.dss);
        } else {
            pair_add(&brier, s0.brier, s1.brier);
            pair_add(&logs, s0.log, s1.log);
        }
    }
    imp->n = ds->n;
    delta_nan(&imp->brier);
    delta_nan(&imp->log);
    delta_nan(&imp->dss);
    if (ds->form == CALIB_FORM_GAUSSIAN) {
        pair_summary(&dss, &imp->dss);
    } else {
        pair_summary(&brier, &imp->brier);
        pair_summary(&logs, &imp->log);
    }
out:
    free(buf);
    return rc;
}

/* ================================================================== 1-D minimisation */

/* Brent's localmin, as in his book (ch. 5) and netlib's fmin. */
int calib_recal_minimize_1d(double (*f)(double x, void *ctx), void *ctx,
                            double lo, double hi, double tol,
                            unsigned max_iter, calib_recal_min1d *out)
{
    const double cgold = 0.3819660112501051; /* (3 - sqrt 5) / 2 */
    if (!f || !out || !(lo < hi) || !isfinite(lo) || !isfinite(hi)
        || !(tol > 0) || max_iter == 0)
        return CALIB_EINVAL;
    double a = lo, b = hi, d = 0, e = 0;
    double x = a + cgold * (b - a), w = x, v = x;
    double fx = f(x, ctx), fw = fx, fv = fx;
    unsigned evals = 1;
    int converged = 0;
    if (isnan(fx))
        return CALIB_ENONFINITE;
    while (evals < max_iter) {
        double m = 0.5 * (a + b), tol1 = tol * fabs(x) + 1e-12, tol2 = 2 * tol1;
        if (fabs(x - m) <= tol2 - 0.5 * (b - a)) {
            converged = 1;
            break;
        }
        double p = 0, q = 0, r = 0;
        if (fabs(e) > tol1) { /* parabola through x, w, v */
            r = (x - w) * (fx - fv);
            q = (x - v) * (fx - fw);
            p = (x - v) * q - (x - w) * r;
            q = 2 * (q - r);
            if (q > 0)
                p = -p;
            else
                q = -q;
            r = e;
            e = d;
        }
        if (fabs(p) < fabs(0.5 * q * r) && p > q * (a - x) && p < q * (b - x)) {
            d = p / q;
            double u = x + d;
            if (u - a < tol2 || b - u < tol2)
                d = x < m ? tol1 : -tol1;
        } else {
            e = x < m ? b - x : a - x;
            d = cgold * e;
        }
        double u = x + (fabs(d) >= tol1 ? d : d > 0 ? tol1 : -tol1);
        double fu = f(u, ctx);
        evals++;
        if (isnan(fu))
            return CALIB_ENONFINITE;
        if (fu <= fx) {
            if (u < x)
                b = x;
            else
                a = x;
            v = w, fv = fw;
            w = x, fw = fx;
            x = u, fx = fu;
        } else {
            if (u < x)
                a = u;
            else
                b = u;
            if (fu <= fw || w == x) {
                v = w, fv = fw;
                w = u, fw = fu;
            } else if (fu <= fv || v == x || v == w) {
                v = u, fv = fu;
            }
        }
    }
    out->x = x;
    out->fx = fx;
    out->evals = evals;
    out->converged = converged;
    return CALIB_OK;
}
