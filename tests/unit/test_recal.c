/* test_recal.c — temperature, Platt and variance scaling: recovery of known
 * parameters within derived standard errors, agreement with brute force,
 * separable data, apply functions, paired improvement, validation. */
#include "unit.h"

#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/recal.h"

/* ------------------------------------------------------------------ data */

typedef struct data {
    calib_dataset ds;
    double *rec;
} data;

static void data_alloc(data *d, int form, size_t k, size_t n, size_t width)
{
    d->rec = calloc(n * (width + 1), sizeof *d->rec);
    assert_non_null(d->rec);
    d->ds = (calib_dataset){form, k, n, width + 1, d->rec};
}

static void data_free(data *d)
{
    free(d->rec);
}

/* Logits z ~ N(0, 1.5^2) per class, y ~ softmax(z / t); with mix > 0 the
 * label is instead uniform with probability mix. */
static void gen_logits(data *d, size_t n, size_t k, double t, double mix,
                       uint64_t seed)
{
    calib_rng r;
    double *p = malloc(k * sizeof *p);
    assert_non_null(p);
    calib_rng_seed(&r, seed);
    data_alloc(d, CALIB_FORM_LOGITS, k, n, k);
    for (size_t i = 0; i < n; i++) {
        double *z = d->rec + i * (k + 1);
        for (size_t j = 0; j < k; j++) {
            z[j] = 1.5 * calib_rng_normal(&r);
            p[j] = z[j] / t;
        }
        calib_softmax(p, k, p);
        if (mix > 0 && calib_rng_uniform(&r) < mix)
            z[k] = (double)(calib_rng_next(&r) % k);
        else
            z[k] = (double)calib_rng_categorical(&r, p, k);
    }
    free(p);
}

/* The mean NLL of softmax(beta z) by libm, row by row. */
static double nll_brute(const calib_dataset *ds, double beta)
{
    size_t k = ds->k;
    double *zb = malloc(k * sizeof *zb);
    calib_ksum s = {0};
    assert_non_null(zb);
    for (size_t i = 0; i < ds->n; i++) {
        const double *z = ds->rec + i * ds->stride;
        for (size_t j = 0; j < k; j++)
            zb[j] = beta * z[j];
        calib_ksum_add(&s, -calib_log_softmax_at(zb, k, (size_t)z[k]));
    }
    free(zb);
    return calib_ksum_value(&s) / (double)ds->n;
}

/* Mean Var_p[z] under p = softmax(beta z): the per-sample Fisher
 * information for beta, so se(beta hat) = 1 / sqrt(n info). */
static double beta_info(const calib_dataset *ds, double beta)
{
    size_t k = ds->k;
    double *p = malloc(k * sizeof *p), s = 0;
    assert_non_null(p);
    for (size_t i = 0; i < ds->n; i++) {
        const double *z = ds->rec + i * ds->stride;
        double m1 = 0, m2 = 0;
        for (size_t j = 0; j < k; j++)
            p[j] = beta * z[j];
        calib_softmax(p, k, p);
        for (size_t j = 0; j < k; j++) {
            m1 += p[j] * z[j];
            m2 += p[j] * z[j] * z[j];
        }
        s += m2 - m1 * m1;
    }
    free(p);
    return s / (double)ds->n;
}

/* Grid search for the NLL minimiser: 400 log-spaced points over the
 * bracket, then 8 rounds of 41 points around the best, each 10x finer. */
static double beta_grid(const calib_dataset *ds, double lo, double hi)
{
    double best = lo, fbest = INFINITY, step;
    for (int i = 0; i <= 400; i++) {
        double b = lo * pow(hi / lo, i / 400.0), f = nll_brute(ds, b);
        if (f < fbest)
            fbest = f, best = b;
    }
    step = best * (pow(hi / lo, 1 / 400.0) - 1);
    for (int round = 0; round < 8; round++) {
        double c = best;
        for (int i = -20; i <= 20; i++) {
            double b = c + i * step / 10, f = nll_brute(ds, b);
            if (b > 0 && f < fbest)
                fbest = f, best = b;
        }
        step /= 10;
    }
    return best;
}

/* ------------------------------------------------------------------ temperature */

/* The exp kernel the temperature tests run under: main runs them once per
 * kernel this CPU has (CALIB_RECAL_EXP_* flags; 0 = the widest). */
static unsigned kernel_flags;

static int fit_t(const calib_dataset *ds, const calib_recal_opts *opts,
                 calib_recal_result *res)
{
    calib_recal_opts o = opts ? *opts : (calib_recal_opts){0};
    o.flags |= kernel_flags;
    return calib_recal_fit_temperature(ds, &o, res);
}

static void temperature_recovers_t(void **state)
{
    const double ts[] = {0.5, 1, 2};
    for (int i = 0; i < 3; i++) {
        data d;
        calib_recal_result res;
        gen_logits(&d, 20000, 10, ts[i], 0, 100 + (uint64_t)i);
        assert_int_equal(fit_t(&d.ds, NULL, &res), CALIB_OK);
        assert_true(res.converged);
        assert_false(res.at_bound);
        assert_int_equal(res.nparams, 1);
        assert_int_equal(res.objective, CALIB_RECAL_OBJ_NLL);
        /* MLE: se(beta) = 1/sqrt(n I); 4 se is exceeded with p ~ 6e-5 */
        double beta = 1 / res.params[0], bstar = 1 / ts[i];
        double se = 1 / sqrt(20000 * beta_info(&d.ds, beta));
        assert_true(se < 0.05 * bstar); /* the test has power */
        assert_true(fabs(beta - bstar) <= 4 * se);
        assert_true(res.objective_after <= res.objective_before);
        /* the pass count the benchmark depends on: Halley-corrected Newton
         * needs at most 3 full passes after the warm-up, 5 without it */
        assert_true(res.iterations <= 3);
        double t1 = res.params[0];
        calib_recal_opts o = {.flags = CALIB_RECAL_NO_WARMUP};
        assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
        assert_true(res.iterations <= 5);
        assert_close(res.params[0], t1, 1e-8);
        data_free(&d);
    }
}

static void temperature_equals_brute_force(void **state)
{
    const size_t ks[] = {10, 3, 37};
    for (int i = 0; i < 3; i++) {
        data d;
        calib_recal_result res;
        gen_logits(&d, 3000, ks[i], 1.5, 0, 7 + (uint64_t)i);
        assert_int_equal(fit_t(&d.ds, NULL, &res), CALIB_OK);
        double beta = 1 / res.params[0];
        double grid = beta_grid(&d.ds, 1 / CALIB_RECAL_T_MAX, 1 / CALIB_RECAL_T_MIN);
        assert_close(beta, grid, 1e-6);
        /* the fit's inline exp and moments agree with libm */
        assert_close(res.objective_after, nll_brute(&d.ds, beta), 1e-12);
        assert_close(res.objective_before, nll_brute(&d.ds, 1), 1e-12);
        data_free(&d);
    }
}

static void temperature_solvers_agree(void **state)
{
    data d;
    calib_recal_result ref, res;
    gen_logits(&d, 20000, 10, 1.5, 0, 11);
    assert_int_equal(fit_t(&d.ds, NULL, &ref), CALIB_OK);

    calib_recal_opts o = {.flags = CALIB_RECAL_NO_WARMUP};
    assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
    assert_close(res.params[0], ref.params[0], 1e-8);

    o.flags = CALIB_RECAL_BISECT;
    assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
    assert_true(res.converged);
    assert_close(res.params[0], ref.params[0], 1e-8);
    assert_true(res.iterations > ref.iterations);

    /* warm starts far away on either side (the bracket probes bring Newton
     * back) and at the answer (one full-data pass suffices) */
    const double starts[] = {0.05, 20, ref.params[0]};
    for (int i = 0; i < 3; i++) {
        double t0 = starts[i];
        o = (calib_recal_opts){.init = &t0, .flags = CALIB_RECAL_NO_WARMUP};
        assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
        assert_true(res.converged);
        assert_false(res.at_bound);
        assert_close(res.params[0], ref.params[0], 1e-8);
        assert_close(res.objective_before, nll_brute(&d.ds, 1 / t0), 1e-12);
        assert_true(i < 2 ? res.iterations >= 3 : res.iterations == 1);
    }
    data_free(&d);
}

static void temperature_separable_at_bound(void **state)
{
    data d;
    calib_recal_result res;
    gen_logits(&d, 2000, 5, 1, 0, 3);
    for (size_t i = 0; i < d.ds.n; i++) { /* label = argmax: separable */
        double *z = d.rec + i * d.ds.stride;
        z[5] = (double)calib_argmax(z, 5);
    }
    calib_recal_opts variants[] = {
        {0},
        {.flags = CALIB_RECAL_NO_WARMUP},
        {.flags = CALIB_RECAL_BISECT},
        {.objective = CALIB_RECAL_OBJ_BRIER},
    };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(fit_t(&d.ds, &variants[i], &res),
                         CALIB_OK);
        assert_true(res.at_bound);
        assert_close(res.params[0], CALIB_RECAL_T_MIN, 1e-12);
        assert_true(isfinite(res.objective_after));
        assert_true(res.objective_after < res.objective_before);
    }
    /* a narrower bracket moves the bound with it */
    calib_recal_opts o = {.t_min = 0.25};
    assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
    assert_true(res.at_bound);
    assert_close(res.params[0], 0.25, 1e-12);
    data_free(&d);
}

static void temperature_extreme_logits_finite(void **state)
{
    data d;
    calib_recal_result res;
    gen_logits(&d, 500, 9, 1, 0, 5);
    for (size_t i = 0; i < d.ds.n; i += 3) { /* far below, never the label */
        double *z = d.rec + i * d.ds.stride;
        z[((size_t)z[9] + 1) % 9] = -1e300;
    }
    assert_int_equal(fit_t(&d.ds, NULL, &res), CALIB_OK);
    assert_true(isfinite(res.params[0]));
    assert_close(res.objective_after, nll_brute(&d.ds, 1 / res.params[0]), 1e-12);
    data_free(&d);
}

static void temperature_probs_and_binary_forms(void **state)
{
    data d, q;
    calib_recal_result rz, rp;
    gen_logits(&d, 5000, 10, 2, 0, 21);
    data_alloc(&q, CALIB_FORM_PROBS, 10, 5000, 10);
    for (size_t i = 0; i < 5000; i++) {
        calib_softmax(d.rec + i * 11, 10, q.rec + i * 11);
        q.rec[i * 11 + 10] = d.rec[i * 11 + 10];
    }
    /* ln softmax(z) = z - lse(z): the same temperature */
    assert_int_equal(fit_t(&d.ds, NULL, &rz), CALIB_OK);
    assert_int_equal(fit_t(&q.ds, NULL, &rp), CALIB_OK);
    assert_close(rp.params[0], rz.params[0], 1e-9);
    assert_close(rp.objective_after, rz.objective_after, 1e-9);
    data_free(&d);
    data_free(&q);

    /* a binary p is the pair (1 - p, p) */
    data b, b2;
    calib_rng r;
    calib_rng_seed(&r, 22);
    data_alloc(&b, CALIB_FORM_BINARY, 2, 4000, 1);
    data_alloc(&b2, CALIB_FORM_PROBS, 2, 4000, 2);
    for (size_t i = 0; i < 4000; i++) {
        double s = 2 * calib_rng_normal(&r), p = 1 / (1 + exp(-s));
        double y = calib_rng_uniform(&r) < 1 / (1 + exp(-s / 1.7));
        b.rec[2 * i] = p;
        b.rec[2 * i + 1] = y;
        b2.rec[3 * i] = 1 - p;
        b2.rec[3 * i + 1] = p;
        b2.rec[3 * i + 2] = y;
    }
    assert_int_equal(fit_t(&b.ds, NULL, &rz), CALIB_OK);
    assert_int_equal(fit_t(&b2.ds, NULL, &rp), CALIB_OK);
    assert_close(rz.params[0], rp.params[0], 1e-9);
    assert_true(fabs(rz.params[0] - 1.7) < 0.2);
    data_free(&b);
    data_free(&b2);
}

static double brier_brute(const calib_dataset *ds, double t)
{
    size_t k = ds->k;
    double *p = malloc(k * sizeof *p), s = 0;
    assert_non_null(p);
    for (size_t i = 0; i < ds->n; i++) {
        const double *z = ds->rec + i * ds->stride;
        calib_score sc;
        calib_recal_apply_temperature(&t, CALIB_FORM_LOGITS, k, z, p);
        calib_score_probs(p, k, (size_t)z[k], &sc);
        s += sc.brier;
    }
    free(p);
    return s / (double)ds->n;
}

static void temperature_brier_option(void **state)
{
    data d;
    calib_recal_result res;
    calib_recal_opts o = {.objective = CALIB_RECAL_OBJ_BRIER};
    gen_logits(&d, 20000, 10, 2, 0, 31);
    assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
    assert_int_equal(res.objective, CALIB_RECAL_OBJ_BRIER);
    assert_true(res.converged);
    assert_false(res.at_bound);
    double t = res.params[0];
    /* a local minimum of the brute-force Brier, and consistent for T */
    assert_close(res.objective_after, brier_brute(&d.ds, t), 1e-12);
    assert_close(res.objective_before, brier_brute(&d.ds, 1), 1e-12);
    assert_true(brier_brute(&d.ds, t * 1.01) > res.objective_after);
    assert_true(brier_brute(&d.ds, t / 1.01) > res.objective_after);
    assert_true(fabs(t - 2) < 0.15);
    data_free(&d);
}

/* ------------------------------------------------------------------ wide logits */

/* Logits z ~ N(0, spread^2) per class, y ~ softmax(z / t): an
 * overconfident model whose rows span hundreds. */
static void gen_wide(data *d, size_t n, size_t k, double spread, double t,
                     uint64_t seed)
{
    calib_rng r;
    double *p = malloc(k * sizeof *p);
    assert_non_null(p);
    calib_rng_seed(&r, seed);
    data_alloc(d, CALIB_FORM_LOGITS, k, n, k);
    for (size_t i = 0; i < n; i++) {
        double *z = d->rec + i * (k + 1);
        for (size_t j = 0; j < k; j++) {
            z[j] = spread * calib_rng_normal(&r);
            p[j] = z[j] / t;
        }
        calib_softmax(p, k, p);
        z[k] = (double)calib_rng_categorical(&r, p, k);
    }
    free(p);
}

/* The exact gradient of the mean NLL in beta, mean of E_p[d] - d_y with
 * d = z - max z, by libm: every class weighs exp(beta d), nothing clamped. */
static double nll_grad_exact(const calib_dataset *ds, double beta)
{
    calib_ksum g = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *z = ds->rec + i * ds->stride;
        size_t k = ds->k;
        double zmax = z[0], s0 = 0, s1 = 0;
        for (size_t j = 1; j < k; j++)
            zmax = z[j] > zmax ? z[j] : zmax;
        for (size_t j = 0; j < k; j++) {
            double d = z[j] - zmax, w = exp(beta * d);
            s0 += w;
            s1 += d * w;
        }
        calib_ksum_add(&g, s1 / s0 - (z[(size_t)z[k]] - zmax));
    }
    return calib_ksum_value(&g) / (double)ds->n;
}

/* The exact NLL minimiser over beta in [lo, hi]: the mean NLL is convex in
 * beta, so bisection on the sign of its exact gradient, to 1e-13. */
static double nll_argmin_exact(const calib_dataset *ds, double lo, double hi)
{
    if (nll_grad_exact(ds, lo) >= 0)
        return lo;
    if (nll_grad_exact(ds, hi) <= 0)
        return hi;
    while (hi - lo > 1e-13 * lo) {
        double mid = sqrt(lo * hi);
        if (nll_grad_exact(ds, mid) > 0)
            hi = mid;
        else
            lo = mid;
    }
    return sqrt(lo * hi);
}

/* The global Brier minimiser over T in [tlo, thi], by brute force: 240
 * log-spaced points, then golden section between the best one's
 * neighbours (the mean Brier is not convex: the grid finds the basin). */
static double brier_argmin_exact(const calib_dataset *ds, double tlo, double thi)
{
    const int npts = 240;
    double best = tlo, fbest = INFINITY, ratio = pow(thi / tlo, 1.0 / npts);
    for (int i = 0; i <= npts; i++) {
        double t = tlo * pow(ratio, i), f = brier_brute(ds, t);
        if (f < fbest)
            fbest = f, best = t;
    }
    double a = log(fmax(best / ratio, tlo)), b = log(fmin(best * ratio, thi));
    const double g = 0.6180339887498949;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = brier_brute(ds, exp(x1)), f2 = brier_brute(ds, exp(x2));
    while (b - a > 1e-11) {
        if (f1 < f2) {
            b = x2, x2 = x1, f2 = f1;
            x1 = b - g * (b - a);
            f1 = brier_brute(ds, exp(x1));
        } else {
            a = x1, x1 = x2, f1 = f2;
            x2 = a + g * (b - a);
            f2 = brier_brute(ds, exp(x2));
        }
    }
    double t = exp(0.5 * (a + b));
    return brier_brute(ds, tlo) < brier_brute(ds, t) ? tlo
           : brier_brute(ds, thi) < brier_brute(ds, t) ? thi : t;
}

typedef struct wide_case {
    size_t n, k;
    double spread, t;
    double t_nll, t_brier; /* exact optima, computed once */
} wide_case;

static wide_case wide_cases[] = {
    {4000, 10, 30, 8, 0, 0},
    {4000, 10, 60, 12, 0, 0},
    {600, 1000, 300, 15, 0, 0},
};

/*
 * Rows whose logits span far more than 35 (an overconfident model): the
 * fitted T is the exact optimum of the true objective, within 1e-6
 * relative for the NLL and 1e-5 for the Brier score, and the objective
 * reported is the true objective at the T returned.
 */
static void temperature_wide_logits_exact(void **state)
{
    for (size_t c = 0; c < sizeof wide_cases / sizeof *wide_cases; c++) {
        wide_case *wc = &wide_cases[c];
        data d;
        calib_recal_result res;
        gen_wide(&d, wc->n, wc->k, wc->spread, wc->t, 40 + c);
        if (wc->t_nll == 0) {
            wc->t_nll = 1 / nll_argmin_exact(&d.ds, 1 / CALIB_RECAL_T_MAX,
                                             1 / CALIB_RECAL_T_MIN);
            wc->t_brier = brier_argmin_exact(&d.ds, CALIB_RECAL_T_MIN, CALIB_RECAL_T_MAX);
            printf("# K = %zu, logits N(0, %g^2), T* = %g: exact T %.9g (NLL), "
                   "%.9g (Brier)\n", wc->k, wc->spread, wc->t, wc->t_nll, wc->t_brier);
        }
        assert_int_equal(fit_t(&d.ds, NULL, &res), CALIB_OK);
        assert_true(res.converged);
        assert_close(res.params[0], wc->t_nll, 1e-6); /* relative: T > 1 */
        assert_close(res.objective_after, nll_brute(&d.ds, 1 / res.params[0]), 1e-12);
        assert_close(res.objective_before, nll_brute(&d.ds, 1), 1e-12);

        calib_recal_opts o = {.objective = CALIB_RECAL_OBJ_BRIER};
        assert_int_equal(fit_t(&d.ds, &o, &res), CALIB_OK);
        assert_close(res.params[0], wc->t_brier, 1e-5);
        assert_close(res.objective_after, brier_brute(&d.ds, res.params[0]), 1e-12);
        assert_close(res.objective_before, brier_brute(&d.ds, 1), 1e-12);
        data_free(&d);
    }
}

/*
 * Separable data with wide margins: every row's label leads the other
 * classes by at least m, so the NLL falls like exp(-m beta) all the way to
 * the bracket's end and Newton's step is ~1/m each time; past beta ~ 708/m
 * every row is a point mass on its label and the objective is flat. The fit
 * must still reach t_min within a few passes, say so (converged, at_bound)
 * and report the objective there -- for the Brier objective too.
 */
static void temperature_wide_separable_at_bound(void **state)
{
    const double margins[] = {5, 20, 200};
    for (int mi = 0; mi < 3; mi++) {
        data d;
        calib_rng r;
        calib_rng_seed(&r, 9);
        gen_wide(&d, 2000, 10, 1, 1, 9);
        for (size_t i = 0; i < d.ds.n; i++) {
            double *z = d.rec + i * d.ds.stride;
            size_t y = (size_t)(calib_rng_next(&r) % 10);
            z[y] = z[calib_argmax(z, 10)] + margins[mi];
            z[10] = (double)y;
        }
        calib_recal_opts variants[] = {
            {0},
            {.flags = CALIB_RECAL_NO_WARMUP},
            {.flags = CALIB_RECAL_BISECT},
            {.objective = CALIB_RECAL_OBJ_BRIER},
        };
        for (int i = 0; i < 4; i++) {
            calib_recal_result res;
            assert_int_equal(fit_t(&d.ds, &variants[i], &res), CALIB_OK);
            assert_true(res.converged);
            assert_true(res.at_bound);
            assert_close(res.params[0], CALIB_RECAL_T_MIN, 1e-12);
            if (i < 3) {
                assert_close(res.objective_after,
                             nll_brute(&d.ds, 1 / CALIB_RECAL_T_MIN), 1e-12);
                assert_true(res.iterations <= 20);
            } else {
                assert_close(res.objective_after,
                             brier_brute(&d.ds, CALIB_RECAL_T_MIN), 1e-12);
            }
        }
        data_free(&d);
    }
}

/*
 * A binary p has one logit, ln max(p, 1e-15) - ln max(1 - p, 1e-15), in the
 * fits (through calib_recal_row_logits) and in the applies of temperature
 * and Platt scaling: at p = 1 all say 34.5388, never 34.5399.
 */
static void binary_logit_one_definition(void **state)
{
    const double ps[] = {0, 1e-300, 1e-16, 1e-15, 3e-15, 1e-9, 0.25, 0.5,
                         1 - 1e-9, 1 - 3e-15, 1 - 1e-15, 1 - 1e-16, 1};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        double buf[2], out, t = 2, ab[2] = {1, 0};
        calib_recal_row_logits(CALIB_FORM_BINARY, 2, &ps[i], buf);
        double s = buf[1] - buf[0];
        double want = log(fmax(ps[i], 1e-15)) - log(fmax(1 - ps[i], 1e-15));
        assert_close(s, want, 1e-9); /* log1p refines ln(1 - p) */
        if (ps[i] == 1)
            assert_close(s, -log(1e-15), 1e-15);
        assert_int_equal(calib_recal_apply_temperature(&t, CALIB_FORM_BINARY, 2,
                                                       &ps[i], &out), CALIB_OK);
        assert_close(out, 1 / (1 + exp(-s / 2)), 1e-15);
        assert_int_equal(calib_recal_apply_platt(ab, CALIB_FORM_BINARY, 2, &ps[i],
                                                 &out), CALIB_OK);
        assert_close(out, 1 / (1 + exp(-s)), 1e-15);
    }
}

/* ------------------------------------------------------------------ Platt */

/* s ~ N(0, 2^2), the model says p = sigmoid(s), y ~ sigmoid(a s + b). */
static void gen_platt(data *d, int form, size_t n, double a, double b,
                      uint64_t seed)
{
    calib_rng r;
    calib_rng_seed(&r, seed);
    size_t width = form == CALIB_FORM_BINARY ? 1 : 2;
    data_alloc(d, form, 2, n, width);
    for (size_t i = 0; i < n; i++) {
        double *x = d->rec + i * (width + 1);
        double s = 2 * calib_rng_normal(&r);
        double y = calib_rng_uniform(&r) < 1 / (1 + exp(-(a * s + b)));
        if (form == CALIB_FORM_BINARY) {
            x[0] = 1 / (1 + exp(-s));
        } else {
            x[0] = 0.25; /* logits: only z1 - z0 = s matters */
            x[1] = 0.25 + s;
        }
        x[width] = y;
    }
}

static void platt_recovers_ab(void **state)
{
    const double a = 0.6, b = -0.4;
    data d, l;
    calib_recal_result res, rl;
    gen_platt(&d, CALIB_FORM_BINARY, 20000, a, b, 41);
    gen_platt(&l, CALIB_FORM_LOGITS, 20000, a, b, 41);
    assert_int_equal(calib_recal_fit_platt(&d.ds, NULL, &res), CALIB_OK);
    assert_true(res.converged);
    assert_int_equal(res.nparams, 2);
    /* covariance of the MLE: the inverse Fisher information at (a, b) */
    double iaa = 0, iab = 0, ibb = 0;
    for (size_t i = 0; i < 20000; i++) {
        double p = d.rec[2 * i], s = log(p / (1 - p));
        double q = 1 / (1 + exp(-(a * s + b))), w = q * (1 - q);
        iaa += w * s * s, iab += w * s, ibb += w;
    }
    double det = iaa * ibb - iab * iab;
    assert_true(fabs(res.params[0] - a) <= 4 * sqrt(ibb / det));
    assert_true(fabs(res.params[1] - b) <= 4 * sqrt(iaa / det));
    assert_true(sqrt(ibb / det) < 0.05); /* power */
    /* K = 2 logits: s = z1 - z0, the same fit */
    assert_int_equal(calib_recal_fit_platt(&l.ds, NULL, &rl), CALIB_OK);
    assert_close(rl.params[0], res.params[0], 1e-6);
    assert_close(rl.params[1], res.params[1], 1e-6);
    /* a warm start from the answer converges at once */
    calib_recal_opts o = {.init = res.params};
    assert_int_equal(calib_recal_fit_platt(&d.ds, &o, &rl), CALIB_OK);
    assert_true(rl.iterations <= 1);
    assert_close(rl.objective_before, res.objective_after, 1e-12);
    data_free(&d);
    data_free(&l);
}

static void platt_separable_stays_finite(void **state)
{
    data d;
    calib_recal_result res;
    gen_platt(&d, CALIB_FORM_BINARY, 3000, 1, 0, 43);
    for (size_t i = 0; i < 3000; i++) /* y = [s > 0]: separable */
        d.rec[2 * i + 1] = d.rec[2 * i] > 0.5;
    assert_int_equal(calib_recal_fit_platt(&d.ds, NULL, &res), CALIB_OK);
    assert_true(res.converged);
    assert_true(isfinite(res.params[0]) && isfinite(res.params[1]));
    assert_true(res.params[0] > 1); /* sharper than the identity */
    assert_true(res.objective_after < res.objective_before);
    data_free(&d);
}

/* ------------------------------------------------------------------ variance */

/* mean ~ N(0,1), var = exp(N(0, 0.5^2)) (or 1 + 2U), y ~ N(mean, w var + b). */
static void gen_gauss(data *d, size_t n, double w, double b, int wide,
                      uint64_t seed)
{
    calib_rng r;
    calib_rng_seed(&r, seed);
    data_alloc(d, CALIB_FORM_GAUSSIAN, 0, n, 2);
    for (size_t i = 0; i < n; i++) {
        double *x = d->rec + 3 * i;
        x[0] = calib_rng_normal(&r);
        x[1] = wide ? 1 + 2 * calib_rng_uniform(&r) : exp(0.5 * calib_rng_normal(&r));
        x[2] = x[0] + sqrt(w * x[1] + b) * calib_rng_normal(&r);
    }
}

static void variance_recovers_wb(void **state)
{
    const double w = 1.8, b = 0.3;
    data d;
    calib_recal_result res;
    gen_gauss(&d, 20000, w, b, 0, 51);
    assert_int_equal(calib_recal_fit_variance(&d.ds, NULL, &res), CALIB_OK);
    assert_true(res.converged);
    assert_false(res.at_bound);
    assert_int_equal(res.objective, CALIB_RECAL_OBJ_DSS);
    /* M-estimator of the DSS: cov = 2 H^-1 / n, H = mean [v 1]'[v 1]/v'^2 */
    double hww = 0, hwb = 0, hbb = 0;
    for (size_t i = 0; i < 20000; i++) {
        double v = d.rec[3 * i + 1], vp = w * v + b;
        hww += v * v / (vp * vp), hwb += v / (vp * vp), hbb += 1 / (vp * vp);
    }
    double det = hww * hbb - hwb * hwb; /* of the sum: n H */
    double sew = sqrt(2 * hbb / det), seb = sqrt(2 * hww / det);
    assert_true(fabs(res.params[0] - w) <= 4 * sew);
    assert_true(fabs(res.params[1] - b) <= 4 * seb);
    assert_true(sew < 0.1 && seb < 0.1);
    assert_true(res.objective_after < res.objective_before);
    data_free(&d);
}

static void variance_constraint_at_bound(void **state)
{
    /* true var' = 2 var - 0.5 with var in [1, 3]: the unconstrained b is
     * negative, so the fit holds b = 0 and says so */
    data d;
    calib_recal_result res;
    gen_gauss(&d, 20000, 2, -0.5, 1, 53);
    assert_int_equal(calib_recal_fit_variance(&d.ds, NULL, &res), CALIB_OK);
    assert_true(res.converged);
    assert_true(res.at_bound);
    assert_true(res.params[1] == 0);
    assert_true(res.params[0] > 1);
    /* optimal in w along b = 0: the closed form mean r / var */
    double s = 0;
    for (size_t i = 0; i < 20000; i++) {
        double e = d.rec[3 * i + 2] - d.rec[3 * i];
        s += e * e / d.rec[3 * i + 1];
    }
    assert_close(res.params[0], s / 20000, 1e-6);
    data_free(&d);
}

/* ------------------------------------------------------------------ location-scale */

/* y = a + b mean + sqrt(c var) N(0, 1): the fit recovers a, b, c, and it
 * is the DSS optimum (no step along any parameter lowers it); a slope the
 * data put below 0 is held at the bound; (0, 1, c) is variance scaling's
 * (c, 0). */
static void location_scale_recovers(void **state)
{
    enum { N = 20000 };
    const double a = 0.5, b = 0.9, c = 1.4;
    data d;
    calib_recal_result res;
    gen_gauss(&d, N, 1, 0, 0, 61);
    for (size_t i = 0; i < N; i++) {
        double *x = d.rec + 3 * i, z = x[2] - x[0]; /* N(0, var) */
        x[2] = a + b * x[0] + sqrt(c) * z;
    }
    assert_int_equal(calib_recal_fit_location_scale(&d.ds, NULL, &res), CALIB_OK);
    assert_int_equal(res.nparams, 3);
    assert_true(res.converged);
    assert_false(res.at_bound);
    assert_true(fabs(res.params[0] - a) < 0.05);
    assert_true(fabs(res.params[1] - b) < 0.05);
    assert_true(fabs(res.params[2] - c) < 0.05);
    assert_true(res.objective_after < res.objective_before);
    /* the optimum: the DSS rises along every parameter, both ways */
    calib_recal_result again;
    for (int j = 0; j < 3; j++)
        for (int sgn = -1; sgn <= 1; sgn += 2) {
            double v[3];
            memcpy(v, res.params, sizeof v);
            v[j] += sgn * 1e-3;
            calib_recal_opts o = {.init = v};
            assert_int_equal(calib_recal_fit_location_scale(&d.ds, &o, &again), CALIB_OK);
            assert_true(again.objective_before > res.objective_after);
        }
    /* the mean against the outcome: b held at its bound, a and c optimal
     * along it */
    for (size_t i = 0; i < N; i++)
        d.rec[3 * i + 2] = -0.5 * d.rec[3 * i] + 0.3 * d.rec[3 * i + 2];
    assert_int_equal(calib_recal_fit_location_scale(&d.ds, NULL, &res), CALIB_OK);
    assert_true(res.at_bound);
    assert_true(res.params[1] > 0 && res.params[1] < 1e-6);
    double sw = 0, swr = 0;
    for (size_t i = 0; i < N; i++) {
        const double *x = d.rec + 3 * i;
        sw += 1 / x[1];
        swr += (x[2] - res.params[1] * x[0]) / x[1];
    }
    assert_close(res.params[0], swr / sw, 1e-9);
    /* a bad start is refused */
    double bad[3] = {0, -1, 1};
    calib_recal_opts o = {.init = bad};
    assert_int_equal(calib_recal_fit_location_scale(&d.ds, &o, &res), CALIB_EINVAL);
    data_free(&d);
    /* apply; (0, 1, c) is variance scaling with (c, 0) */
    double x[2] = {2, 0.5}, out[2], v[3] = {0.5, 0.9, 1.4};
    assert_int_equal(calib_recal_apply_location_scale(v, CALIB_FORM_GAUSSIAN, 0, x, out),
                     CALIB_OK);
    assert_close(out[0], 0.5 + 0.9 * 2, 1e-15);
    assert_close(out[1], 1.4 * 0.5, 1e-15);
    double u[3] = {0, 1, 1.4}, w[2] = {1.4, 0}, o1[2], o2[2];
    calib_recal_apply_location_scale(u, CALIB_FORM_GAUSSIAN, 0, x, o1);
    calib_recal_apply_variance(w, CALIB_FORM_GAUSSIAN, 0, x, o2);
    assert_true(o1[0] == o2[0] && o1[1] == o2[1]);
    assert_int_equal(calib_recal_apply_location_scale(v, CALIB_FORM_LOGITS, 2, x, out),
                     CALIB_EINVAL);
}

/* A subset of location-scale's parameters: the others held at their
 * identity (0, 1, 1), the fitted ones at the DSS optimum along them;
 * another method refuses a hold. */
static void location_scale_holds(void **state)
{
    enum { N = 20000 };
    data d;
    calib_recal_result res, again;
    gen_gauss(&d, N, 1, 0, 0, 63);
    for (size_t i = 0; i < N; i++) {
        double *x = d.rec + 3 * i;
        x[2] = 0.5 + 0.8 * x[0] + sqrt(1.4) * (x[2] - x[0]);
    }
    const unsigned holds[] = {CALIB_RECAL_HOLD(0), CALIB_RECAL_HOLD(1), CALIB_RECAL_HOLD(2),
                              CALIB_RECAL_HOLD(0) | CALIB_RECAL_HOLD(1)};
    const double identity[3] = {0, 1, 1};
    for (size_t h = 0; h < sizeof holds / sizeof *holds; h++) {
        calib_recal_opts o = {.flags = holds[h]};
        assert_int_equal(calib_recal_fit_location_scale(&d.ds, &o, &res), CALIB_OK);
        for (int j = 0; j < 3; j++) {
            if (holds[h] & CALIB_RECAL_HOLD(j)) {
                assert_true(res.params[j] == identity[j]);
                continue;
            }
            /* optimal along each fitted parameter, holds kept */
            for (int sgn = -1; sgn <= 1; sgn += 2) {
                double v[3];
                memcpy(v, res.params, sizeof v);
                v[j] += sgn * 1e-3;
                calib_recal_opts oi = {.init = v, .flags = holds[h]};
                assert_int_equal(calib_recal_fit_location_scale(&d.ds, &oi, &again), CALIB_OK);
                assert_true(again.objective_before > res.objective_after);
            }
        }
    }
    /* b held: a is the weighted mean of y - mean (the mean's bias) */
    calib_recal_opts ob = {.flags = CALIB_RECAL_HOLD(1)};
    assert_int_equal(calib_recal_fit_location_scale(&d.ds, &ob, &res), CALIB_OK);
    double sw = 0, swr = 0;
    for (size_t i = 0; i < N; i++) {
        const double *x = d.rec + 3 * i;
        sw += 1 / x[1];
        swr += (x[2] - x[0]) / x[1];
    }
    assert_close(res.params[0], swr / sw, 1e-9);
    calib_recal_opts bad = {.flags = CALIB_RECAL_HOLD(3)};
    assert_int_equal(calib_recal_fit_location_scale(&d.ds, &bad, &res), CALIB_EINVAL);
    calib_recal_opts tv = {.flags = CALIB_RECAL_HOLD(0)};
    assert_int_equal(calib_recal_fit_variance(&d.ds, &tv, &res), CALIB_EINVAL);
    data_free(&d);
}

/* ------------------------------------------------------------------ apply */

static void apply_functions(void **state)
{
    double z[4] = {1.0, -2.0, 0.5, 3.0}, p[4], q[4], t = 2.5;
    for (int j = 0; j < 4; j++)
        q[j] = z[j] / t;
    calib_softmax(q, 4, q);
    assert_int_equal(calib_recal_apply_temperature(&t, CALIB_FORM_LOGITS, 4, z, p),
                     CALIB_OK);
    for (int j = 0; j < 4; j++)
        assert_close(p[j], q[j], 1e-15);
    /* in place, and from probabilities: softmax(ln p / t) */
    double zz[4];
    memcpy(zz, z, sizeof z);
    calib_recal_apply_temperature(&t, CALIB_FORM_LOGITS, 4, zz, zz);
    assert_memory_equal(zz, p, sizeof p);
    calib_softmax(z, 4, zz);
    calib_recal_apply_temperature(&t, CALIB_FORM_PROBS, 4, zz, zz);
    for (int j = 0; j < 4; j++)
        assert_close(zz[j], q[j], 1e-14);
    double one = 1, pb = 0.8;
    calib_recal_apply_temperature(&one, CALIB_FORM_BINARY, 2, &pb, &pb);
    assert_close(pb, 0.8, 1e-15);
    calib_recal_apply_temperature(&t, CALIB_FORM_BINARY, 2, &pb, &pb);
    assert_close(pb, 1 / (1 + pow(0.25, 1 / t)), 1e-15);
    assert_int_equal(calib_recal_apply_temperature(&t, CALIB_FORM_GAUSSIAN, 0, z, p),
                     CALIB_EINVAL);

    /* Platt: binary and K = 2 agree; the identity keeps p */
    double ab[2] = {1, 0}, bin = 0.3, two[2] = {0.7, 0.3};
    calib_recal_apply_platt(ab, CALIB_FORM_BINARY, 2, &bin, &bin);
    assert_close(bin, 0.3, 1e-15);
    ab[0] = 0.5, ab[1] = 1;
    calib_recal_apply_platt(ab, CALIB_FORM_BINARY, 2, &bin, &bin);
    double u = 0.5 * log(0.3 / 0.7) + 1;
    assert_close(bin, 1 / (1 + exp(-u)), 1e-15);
    calib_recal_apply_platt(ab, CALIB_FORM_PROBS, 2, two, two);
    assert_close(two[1], bin, 1e-15);
    assert_close(two[0] + two[1], 1, 1e-15);
    double lg[2] = {0.2, 0.2 + log(0.3 / 0.7)};
    calib_recal_apply_platt(ab, CALIB_FORM_LOGITS, 2, lg, lg);
    assert_close(lg[1], bin, 1e-14);
    assert_int_equal(calib_recal_apply_platt(ab, CALIB_FORM_LOGITS, 3, z, p),
                     CALIB_EINVAL);
    /* extreme p: clamped, finite */
    double p0 = 0;
    calib_recal_apply_platt(ab, CALIB_FORM_BINARY, 2, &p0, &p0);
    assert_true(p0 > 0 && p0 < 1e-6);
    /* finite logits whose difference overflows, slope 0: sigmoid(b), not
     * NaN from 0 * inf (tests/fuzz/corpus/pubmsg/crash-platt_zero_slope) */
    double flat[2] = {0, 1}, far[2] = {1e308, -1e308};
    calib_recal_apply_platt(flat, CALIB_FORM_LOGITS, 2, far, far);
    assert_close(far[1], 1 / (1 + exp(-1.0)), 1e-15);
    assert_close(far[0] + far[1], 1, 1e-15);

    double wb[2] = {2, 0.5}, g[2] = {1.5, 0.25};
    assert_int_equal(calib_recal_apply_variance(wb, CALIB_FORM_GAUSSIAN, 0, g, g),
                     CALIB_OK);
    assert_close(g[0], 1.5, 0);
    assert_close(g[1], 1.0, 1e-15);
    assert_int_equal(calib_recal_apply_variance(wb, CALIB_FORM_BINARY, 2, g, g),
                     CALIB_EINVAL);
}

/* A fit raises no invalid flag: a bisection's step, or a step where there
 * is no Newton step, is NaN, and meets only the quiet comparisons (a
 * program that traps invalid operations must not die in a fit). */
/* The prior correction: p'_j proportional to w_j p_j, binary as two
 * classes, refused shapes untouched. */
static void prior_weigh(void **state)
{
    (void)state;
    double w[3] = {2.0, 0.5, 1.0}, p[3] = {0.2, 0.5, 0.3};
    double s = 2.0 * 0.2 + 0.5 * 0.5 + 1.0 * 0.3;
    assert_int_equal(calib_prior_weigh(w, 3, CALIB_FORM_PROBS, 3, p), CALIB_OK);
    assert_close(p[0], 0.4 / s, 1e-16);
    assert_close(p[1], 0.25 / s, 1e-16);
    assert_close(p[2], 0.3 / s, 1e-16);
    assert_close(p[0] + p[1] + p[2], 1, 1e-15);
    /* binary: the same as two classes [1 - p, p] */
    double b[1] = {0.3}, two[2] = {0.7, 0.3}, wb[2] = {0.25, 3.0};
    assert_int_equal(calib_prior_weigh(wb, 2, CALIB_FORM_BINARY, 2, b), CALIB_OK);
    assert_int_equal(calib_prior_weigh(wb, 2, CALIB_FORM_PROBS, 2, two), CALIB_OK);
    assert_close(b[0], two[1], 1e-16);
    assert_close(b[0], 0.9 / (0.9 + 0.175), 1e-15);
    /* equal weights change nothing; p of 0 and 1 stay */
    double one[3] = {4, 4, 4}, q[3] = {0, 1, 0};
    assert_int_equal(calib_prior_weigh(one, 3, CALIB_FORM_PROBS, 3, q), CALIB_OK);
    assert_true(q[0] == 0 && q[1] == 1 && q[2] == 0);
    /* refused: count, form, a weight out of bounds; p untouched */
    double keep[3] = {0.2, 0.5, 0.3};
    assert_int_equal(calib_prior_weigh(w, 2, CALIB_FORM_PROBS, 3, keep), CALIB_EINVAL);
    assert_int_equal(calib_prior_weigh(w, 3, CALIB_FORM_BINARY, 2, keep), CALIB_EINVAL);
    assert_int_equal(calib_prior_weigh(w, 3, CALIB_FORM_GAUSSIAN, 0, keep), CALIB_EINVAL);
    assert_int_equal(calib_prior_weigh((double[]){1, 0, 1}, 3, CALIB_FORM_PROBS, 3, keep),
                     CALIB_EINVAL);
    assert_int_equal(calib_prior_weigh((double[]){1, NAN, 1}, 3, CALIB_FORM_PROBS, 3, keep),
                     CALIB_EINVAL);
    assert_int_equal(calib_prior_weigh((double[]){1, 2e6, 1}, 3, CALIB_FORM_PROBS, 3, keep),
                     CALIB_EINVAL);
    assert_int_equal(calib_prior_weigh(w, 3, CALIB_FORM_PROBS, 3, NULL), CALIB_EINVAL);
    assert_true(keep[0] == 0.2 && keep[1] == 0.5 && keep[2] == 0.3);
    assert_true(calib_prior_weights_ok(w, 3));
    assert_false(calib_prior_weights_ok(w, 1));
    assert_false(calib_prior_weights_ok(NULL, 3));
}

static void fit_raises_no_invalid(void **state)
{
    const double mixed[] = {1, 0, 0, 0, 1, 1, 0.3, 0, 1}; /* rows of z0 z1 y */
    const double separable[] = {0, -800, 0};
    const calib_dataset sets[] = {
        {CALIB_FORM_LOGITS, 2, 3, 3, mixed},
        {CALIB_FORM_LOGITS, 2, 1, 3, separable},
    };
    const unsigned flags[] = {0, CALIB_RECAL_BISECT};
    for (size_t d = 0; d < sizeof sets / sizeof sets[0]; d++)
        for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
            calib_recal_opts o = {0};
            o.flags = flags[f];
            calib_recal_result res;
            feclearexcept(FE_ALL_EXCEPT);
            int rc = calib_recal_fit_temperature(&sets[d], &o, &res);
            int raised = fetestexcept(FE_INVALID | FE_DIVBYZERO);
            if (raised)
                fail_msg("set %zu flags %u: rc %d, flags %#x", d, flags[f], rc, raised);
            assert_int_equal(rc, CALIB_OK);
        }
}

/* ------------------------------------------------------------------ paired improvement */

static void improvement_positive_and_paired(void **state)
{
    data fit, test;
    calib_recal_result res;
    calib_recal_improvement imp;
    gen_logits(&fit, 20000, 10, 2, 0, 61);
    gen_logits(&test, 20000, 10, 2, 0, 62);
    assert_int_equal(calib_recal_fit_temperature(&fit.ds, NULL, &res), CALIB_OK);
    assert_int_equal(calib_recal_compare(&test.ds, NULL, NULL,
                                         calib_recal_apply_temperature,
                                         res.params, &imp),
                     CALIB_OK);
    assert_int_equal(imp.n, 20000);
    const calib_recal_delta *ds[2] = {&imp.brier, &imp.log};
    for (int i = 0; i < 2; i++) {
        assert_true(ds[i]->mean > 0);
        assert_true(ds[i]->ci[0] > 0);
        assert_true(ds[i]->ci[0] < ds[i]->mean && ds[i]->mean < ds[i]->ci[1]);
        assert_close(ds[i]->mean, ds[i]->before - ds[i]->after, 1e-12);
        assert_close(ds[i]->ci[1] - ds[i]->ci[0], 2 * CALIB_Z95 * ds[i]->se, 1e-12);
    }
    assert_nan(imp.dss.mean);
    /* "before" is the raw outputs' mean scores, "after" the map's */
    double sb = 0, sl = 0, p[10];
    for (size_t i = 0; i < 20000; i++) {
        const double *z = test.rec + 11 * i;
        calib_score s;
        calib_score_logits(z, 10, (size_t)z[10], p, &s);
        sb += s.brier, sl += s.log;
    }
    assert_close(imp.brier.before, sb / 20000, 1e-12);
    assert_close(imp.log.before, sl / 20000, 1e-12);
    double one = 1;
    calib_recal_compare(&test.ds, calib_recal_apply_temperature, &one,
                        calib_recal_apply_temperature, res.params, &imp);
    assert_close(imp.log.before, sl / 20000, 1e-12);
    /* the same map on both sides gains exactly nothing */
    calib_recal_compare(&test.ds, calib_recal_apply_temperature, res.params,
                        calib_recal_apply_temperature, res.params, &imp);
    assert_true(imp.log.mean == 0 && imp.brier.se == 0);
    data_free(&fit);
    data_free(&test);

    data g;
    gen_gauss(&g, 20000, 1.8, 0.3, 0, 63);
    assert_int_equal(calib_recal_fit_variance(&g.ds, NULL, &res), CALIB_OK);
    assert_int_equal(calib_recal_compare(&g.ds, NULL, NULL, calib_recal_apply_variance,
                                         res.params, &imp),
                     CALIB_OK);
    assert_true(imp.dss.mean > 0 && imp.dss.ci[0] > 0);
    assert_close(imp.dss.after, res.objective_after, 1e-12);
    assert_nan(imp.brier.mean);
    data_free(&g);
}

/* ------------------------------------------------------------------ validation */

static void validation(void **state)
{
    data d;
    calib_recal_result res;
    gen_logits(&d, 50, 3, 1, 0, 71);
    calib_dataset ds = d.ds;
    ds.n = 0;
    assert_int_equal(calib_recal_fit_temperature(&ds, NULL, &res), CALIB_EEMPTY);
    assert_int_equal(calib_recal_fit_platt(&ds, NULL, &res), CALIB_EINVAL); /* k = 3 */
    ds = d.ds;
    ds.stride = 3;
    assert_int_equal(calib_recal_fit_temperature(&ds, NULL, &res), CALIB_EINVAL);
    ds = d.ds;
    ds.form = CALIB_FORM_GAUSSIAN;
    assert_int_equal(calib_recal_fit_temperature(&ds, NULL, &res), CALIB_EINVAL);
    assert_int_equal(calib_recal_fit_variance(&d.ds, NULL, &res), CALIB_EINVAL);
    ds.form = 9;
    assert_int_equal(calib_recal_check_dataset(&ds, ~0u), CALIB_EINVAL);
    assert_int_equal(calib_recal_fit_temperature(NULL, NULL, &res), CALIB_EINVAL);
    assert_int_equal(calib_recal_fit_temperature(&d.ds, NULL, NULL), CALIB_EINVAL);

    calib_recal_opts o = {.t_min = 2, .t_max = 1};
    assert_int_equal(calib_recal_fit_temperature(&d.ds, &o, &res), CALIB_EINVAL);
    double bad = -1;
    o = (calib_recal_opts){.init = &bad};
    assert_int_equal(calib_recal_fit_temperature(&d.ds, &o, &res), CALIB_EINVAL);
    o = (calib_recal_opts){.objective = CALIB_RECAL_OBJ_DSS};
    assert_int_equal(calib_recal_fit_temperature(&d.ds, &o, &res), CALIB_EINVAL);
    o = (calib_recal_opts){.flags = 0x80};
    assert_int_equal(calib_recal_fit_temperature(&d.ds, &o, &res), CALIB_EINVAL);
    o = (calib_recal_opts){.tol = NAN};
    assert_int_equal(calib_recal_fit_temperature(&d.ds, &o, &res), CALIB_EINVAL);

    d.rec[4] = NAN;
    assert_int_equal(calib_recal_fit_temperature(&d.ds, NULL, &res), CALIB_ENONFINITE);
    d.rec[4] = 0;
    d.rec[3] = 3; /* label of record 0 */
    assert_int_equal(calib_recal_fit_temperature(&d.ds, NULL, &res), CALIB_ELABEL);
    assert_int_equal(calib_recal_compare(&d.ds, NULL, NULL,
                                         calib_recal_apply_temperature, &bad, NULL),
                     CALIB_EINVAL);
    data_free(&d);

    data g;
    gen_gauss(&g, 10, 1, 0, 0, 72);
    g.rec[1] = 0; /* variance 0 */
    assert_int_equal(calib_recal_fit_variance(&g.ds, NULL, &res), CALIB_EVAR);
    data_free(&g);

    data b;
    gen_platt(&b, CALIB_FORM_BINARY, 10, 1, 0, 73);
    b.rec[0] = 1.5;
    assert_int_equal(calib_recal_fit_platt(&b.ds, NULL, &res), CALIB_EPROB);
    data_free(&b);
}

/* ------------------------------------------------------------------ helpers */

static double parabola(double x, void *ctx)
{
    int *calls = ctx;
    (*calls)++;
    return (x - 0.3) * (x - 0.3) + 1;
}

static double nan_after_3(double x, void *ctx)
{
    int *calls = ctx;
    return ++*calls > 3 ? NAN : x * x;
}

static void minimize_1d(void **state)
{
    calib_recal_min1d m;
    int calls = 0;
    assert_int_equal(calib_recal_minimize_1d(parabola, &calls, 0, 1, 1e-8, 100, &m),
                     CALIB_OK);
    assert_true(m.converged);
    assert_close(m.x, 0.3, 1e-7);
    assert_close(m.fx, 1, 1e-14);
    assert_int_equal((int)m.evals, calls);
    /* a monotone function ends near the bound */
    calls = 0;
    assert_int_equal(calib_recal_minimize_1d(parabola, &calls, 0.5, 2, 1e-8, 100, &m),
                     CALIB_OK);
    assert_close(m.x, 0.5, 1e-7);
    calls = 0;
    assert_int_equal(calib_recal_minimize_1d(parabola, &calls, 0, 1, 1e-8, 3, &m),
                     CALIB_OK);
    assert_false(m.converged);
    assert_int_equal(m.evals, 3);
    calls = 0;
    assert_int_equal(calib_recal_minimize_1d(nan_after_3, &calls, -1, 2, 1e-8, 100, &m),
                     CALIB_ENONFINITE);
    assert_int_equal(calib_recal_minimize_1d(parabola, &calls, 1, 0, 1e-8, 100, &m),
                     CALIB_EINVAL);
}

static void row_logits(void **state)
{
    double buf[3], p[3] = {0.5, 0.5, 0}, bin = 0.25;
    const double *z = calib_recal_row_logits(CALIB_FORM_LOGITS, 3, p, buf);
    assert_ptr_equal(z, p);
    z = calib_recal_row_logits(CALIB_FORM_PROBS, 3, p, buf);
    assert_ptr_equal(z, buf);
    assert_close(buf[0], log(0.5), 1e-15);
    assert_close(buf[2], log(1e-15), 1e-15);
    calib_recal_row_logits(CALIB_FORM_BINARY, 2, &bin, buf);
    assert_close(buf[0], log(0.75), 1e-15);
    assert_close(buf[1], log(0.25), 1e-15);
}

int main(void)
{
    /* the temperature fit under each exp kernel: the widest this CPU has
     * (AVX2 here), two lanes (SSE2), scalar */
    const struct CMUnitTest temperature[] = {
        cmocka_unit_test(temperature_recovers_t),
        cmocka_unit_test(temperature_equals_brute_force),
        cmocka_unit_test(temperature_solvers_agree),
        cmocka_unit_test(temperature_separable_at_bound),
        cmocka_unit_test(temperature_extreme_logits_finite),
        cmocka_unit_test(temperature_probs_and_binary_forms),
        cmocka_unit_test(temperature_brier_option),
        cmocka_unit_test(temperature_wide_logits_exact),
        cmocka_unit_test(temperature_wide_separable_at_bound),
    };
    const struct { const char *name; unsigned flags; } kernels[] = {
        {"temperature, widest exp kernel", 0},
        {"temperature, two-lane exp kernel", CALIB_RECAL_EXP_VEC2},
        {"temperature, scalar exp kernel", CALIB_RECAL_EXP_SCALAR},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        kernel_flags = kernels[i].flags;
        failed += _cmocka_run_group_tests(kernels[i].name, temperature,
                                          sizeof temperature / sizeof *temperature,
                                          NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(binary_logit_one_definition),
        cmocka_unit_test(platt_recovers_ab),
        cmocka_unit_test(platt_separable_stays_finite),
        cmocka_unit_test(variance_recovers_wb),
        cmocka_unit_test(variance_constraint_at_bound),
        cmocka_unit_test(location_scale_recovers),
        cmocka_unit_test(location_scale_holds),
        cmocka_unit_test(apply_functions),
        cmocka_unit_test(prior_weigh),
        cmocka_unit_test(fit_raises_no_invalid),
        cmocka_unit_test(improvement_positive_and_paired),
        cmocka_unit_test(validation),
        cmocka_unit_test(minimize_1d),
        cmocka_unit_test(row_logits),
    };
    return failed + cmocka_run_group_tests(tests, NULL, NULL);
}
