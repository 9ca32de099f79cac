/* test_online.c — recalibration maps learned online (calib/online.h):
 * the steps against a reference written here from the method's
 * definition (probabilities from recal.h's apply functions, the Online
 * Newton Step in its textbook form), the regret against the best fixed
 * map in hindsight (recal.h's batch fits, or the closed form), the box,
 * and refused pairs. */
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/online.h"
#include "calib/recal.h"

/* ------------------------------------------------------------ streams */

/* K-class logits z = 2 t, outcomes drawn from softmax(t): overconfident,
 * the best temperature 2 */
static void temperature_stream(calib_rng *r, size_t k, double *z, double *y)
{
    double t[8], p[8], s = 0;
    for (size_t j = 0; j < k; j++) {
        t[j] = 1.5 * calib_rng_normal(r);
        p[j] = exp(t[j]);
        s += p[j];
        z[j] = 2 * t[j];
    }
    double u = calib_rng_uniform(r) * s, c = 0;
    *y = (double)(k - 1);
    for (size_t j = 0; j < k; j++) {
        c += p[j];
        if (u <= c) {
            *y = (double)j;
            break;
        }
    }
}

/* a binary p = sigmoid(2 s + 0.5) for an outcome of probability
 * sigmoid(s): the best Platt map a = 0.5, b = -0.25 */
static void platt_stream(calib_rng *r, double *p, double *y)
{
    double s = 2 * calib_rng_normal(r);
    *p = 1 / (1 + exp(-(2 * s + 0.5)));
    *y = calib_rng_uniform(r) < 1 / (1 + exp(-s));
}

/* N(mu, v) forecasts of outcomes N(mu, 4 v): the best scale w = 4 */
static void variance_stream(calib_rng *r, double *x, double *y)
{
    x[0] = 3 * calib_rng_normal(r);
    x[1] = 0.5 + 1.5 * calib_rng_uniform(r);
    *y = x[0] + 2 * sqrt(x[1]) * calib_rng_normal(r);
}

/* ------------------------------------------------------------ the reference */

/* The log score of a classification map from its applied probabilities,
 * and its derivative in beta = 1 / T by the probabilities' mean logit:
 * d/dbeta [-ln softmax(beta z)_y] = sum_j p_j z_j - z_y. */
static double ref_temperature(double beta, const double *z, size_t k, size_t y, double *g)
{
    double params[1] = {1 / beta}, p[8];
    assert_int_equal(calib_recal_apply_temperature(params, CALIB_FORM_LOGITS, k, z, p), 0);
    double mean = 0;
    for (size_t j = 0; j < k; j++)
        mean += p[j] * z[j];
    *g = mean - z[y];
    return -log(p[y]);
}

/* Platt's log score from its applied probability, and its gradient
 * ((q - y) s, q - y) */
static double ref_platt(const double ab[2], double p, double y, double g[2])
{
    double q;
    assert_int_equal(calib_recal_apply_platt(ab, CALIB_FORM_BINARY, 2, &p, &q), 0);
    double s = log(p) - log(1 - p);
    g[0] = (q - y) * s;
    g[1] = q - y;
    return y ? -log(q) : -log(1 - q);
}

/* The Online Newton Step for one parameter in the box [lo, hi]: A = eps +
 * sum g^2, x <- clamp(x - g / (gamma A)). */
static double ref_ons1(double x, double g, double *a, double gamma, double lo, double hi)
{
    *a += g * g;
    x -= g / (gamma * *a);
    return x < lo ? lo : x > hi ? hi : x;
}

/* The A-norm projection onto a box, by brute force on a fine grid refined
 * around its best point (the reference of the two-parameter step). */
static void ref_project(const double a[2][2], const double lo[2], const double hi[2],
                        const double p[2], double out[2])
{
    double c0 = (lo[0] + hi[0]) / 2, c1 = (lo[1] + hi[1]) / 2;
    double h0 = (hi[0] - lo[0]) / 2, h1 = (hi[1] - lo[1]) / 2;
    for (int round = 0; round < 40; round++) {
        double best = INFINITY, b0 = c0, b1 = c1;
        for (int i = -20; i <= 20; i++)
            for (int j = -20; j <= 20; j++) {
                double q0 = c0 + h0 * i / 20, q1 = c1 + h1 * j / 20;
                q0 = q0 < lo[0] ? lo[0] : q0 > hi[0] ? hi[0] : q0;
                q1 = q1 < lo[1] ? lo[1] : q1 > hi[1] ? hi[1] : q1;
                double d0 = q0 - p[0], d1 = q1 - p[1];
                double v = a[0][0] * d0 * d0 + (a[0][1] + a[1][0]) * d0 * d1 + a[1][1] * d1 * d1;
                if (v < best) {
                    best = v;
                    b0 = q0;
                    b1 = q1;
                }
            }
        c0 = b0;
        c1 = b1;
        h0 /= 4;
        h1 /= 4;
    }
    out[0] = c0;
    out[1] = c1;
}

/* ------------------------------------------------------------ tests */

/* Each temperature step is the reference's, to rounding, over 3,000
 * pairs; the loss counted is the one before each step. */
static void temperature_steps_match_reference(void **state)
{
    (void)state;
    calib_online o;
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_LOGITS, 4, NULL), 0);
    calib_rng r;
    calib_rng_seed(&r, 11);
    double beta = 1, a = 1, loss = 0, z[4], y, g;
    for (int i = 0; i < 3000; i++) {
        temperature_stream(&r, 4, z, &y);
        loss += ref_temperature(beta, z, 4, (size_t)y, &g);
        beta = ref_ons1(beta, g, &a, 0.1, CALIB_ONLINE_BETA_MIN, CALIB_ONLINE_BETA_MAX);
        assert_int_equal(calib_online_update(&o, z, y), 0);
        double p[2];
        calib_online_params(&o, p);
        assert_close(1 / p[0], beta, 1e-9 * beta);
    }
    assert_int_equal(o.n, 3000);
    assert_close(calib_ksum_value(&o.loss), loss, 1e-9 * loss);
    calib_online_free(&o);
}

/* Regret against the best temperature in hindsight (the batch fit of
 * recal.h on the same pairs) stays logarithmic: under 5 ln n, where a
 * learner that stayed at T = 1 loses about n / 10; T ends within 3% of
 * the batch fit's, which is within 5% of the stream's 2. */
static void temperature_regret_is_logarithmic(void **state)
{
    (void)state;
    enum { N = 20000, K = 3 };
    double *rec = malloc(N * (K + 1) * sizeof *rec);
    assert_non_null(rec);
    calib_online o;
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_LOGITS, K, NULL), 0);
    calib_rng r;
    calib_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        double *row = rec + i * (K + 1);
        temperature_stream(&r, K, row, &row[K]);
        assert_int_equal(calib_online_update(&o, row, row[K]), 0);
    }
    calib_dataset ds = {.form = CALIB_FORM_LOGITS, .k = K, .n = N, .stride = K + 1, .rec = rec};
    calib_recal_result best;
    assert_int_equal(calib_recal_fit_temperature(&ds, NULL, &best), 0);
    double fixed = 0, identity = 0, one[2] = {1, 0};
    for (int i = 0; i < N; i++) {
        const double *row = rec + i * (K + 1);
        fixed += calib_online_loss_of(&o, best.params, row, row[K]);
        identity += calib_online_loss_of(&o, one, row, row[K]);
    }
    double regret = calib_ksum_value(&o.loss) - fixed, p[2];
    assert_true(regret < 5 * log(N));
    assert_true(identity - fixed > N / 20.0); /* a stream the identity loses on */
    calib_online_params(&o, p);
    assert_close(p[0], best.params[0], 0.03 * best.params[0]);
    assert_close(best.params[0], 2, 0.1);
    calib_online_free(&o);
    free(rec);
}

/* Platt's two-parameter steps are the reference's (its projection by
 * brute force), the regret against the batch fit logarithmic, and (a, b)
 * near the batch fit's. */
static void platt_steps_and_regret(void **state)
{
    (void)state;
    enum { N = 20000 };
    double *rec = malloc(N * 2 * sizeof *rec);
    assert_non_null(rec);
    calib_online o;
    assert_int_equal(calib_online_init(&o, "platt", CALIB_FORM_BINARY, 0, NULL), 0);
    calib_rng r;
    calib_rng_seed(&r, 7);
    double th[2] = {1, 0}, a[2][2] = {{1, 0}, {0, 1}};
    const double lo[2] = {CALIB_ONLINE_A_MIN, -CALIB_ONLINE_B_MAX};
    const double hi[2] = {CALIB_ONLINE_A_MAX, CALIB_ONLINE_B_MAX};
    for (int i = 0; i < N; i++) {
        double *row = rec + 2 * i, g[2];
        platt_stream(&r, &row[0], &row[1]);
        if (i < 300) { /* the reference's steps: its projection is slow */
            ref_platt(th, row[0], row[1], g);
            a[0][0] += g[0] * g[0];
            a[0][1] += g[0] * g[1];
            a[1][0] = a[0][1];
            a[1][1] += g[1] * g[1];
            double det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
            double step[2] = {(a[1][1] * g[0] - a[0][1] * g[1]) / det,
                              (-a[1][0] * g[0] + a[0][0] * g[1]) / det};
            double p[2] = {th[0] - step[0] / 0.1, th[1] - step[1] / 0.1};
            ref_project(a, lo, hi, p, th);
        }
        assert_int_equal(calib_online_update(&o, &row[0], row[1]), 0);
        if (i < 300) {
            double p[2];
            calib_online_params(&o, p);
            assert_close(p[0], th[0], 1e-7 * (1 + fabs(th[0])));
            assert_close(p[1], th[1], 1e-7 * (1 + fabs(th[1])));
        }
    }
    calib_dataset ds = {.form = CALIB_FORM_BINARY, .k = 2, .n = N, .stride = 2, .rec = rec};
    calib_recal_result best;
    assert_int_equal(calib_recal_fit_platt(&ds, NULL, &best), 0);
    double fixed = 0, p[2];
    for (int i = 0; i < N; i++)
        fixed += calib_online_loss_of(&o, best.params, rec + 2 * i, rec[2 * i + 1]);
    assert_true(calib_ksum_value(&o.loss) - fixed < 10 * log(N));
    calib_online_params(&o, p);
    assert_close(p[0], best.params[0], 0.05);
    assert_close(p[1], best.params[1], 0.05);
    assert_close(best.params[0], 0.5, 0.05);
    calib_online_free(&o);
    free(rec);
}

/* Variance scaling: the learner's w is the best fixed w on the pairs so
 * far (the mean of (y - mu)^2 / var, with one pseudo-pair at w = 1), the
 * regret logarithmic, for streams whose best w is 1/4, 1, 4 and 16. */
static void variance_steps_and_regret(void **state)
{
    (void)state;
    enum { N = 20000 };
    double (*rec)[3] = malloc(N * sizeof *rec);
    assert_non_null(rec);
    const double scales[4] = {0.25, 1, 4, 16};
    for (int s = 0; s < 4; s++) {
        calib_online o;
        assert_int_equal(calib_online_init(&o, "variance", CALIB_FORM_GAUSSIAN, 0, NULL), 0);
        calib_rng r;
        calib_rng_seed(&r, 9 + (uint64_t)s);
        double rsum = 0;
        for (int i = 0; i < N; i++) {
            variance_stream(&r, rec[i], &rec[i][2]);
            rec[i][2] = rec[i][0] + (rec[i][2] - rec[i][0]) * sqrt(scales[s] / 4);
            rsum += (rec[i][2] - rec[i][0]) * (rec[i][2] - rec[i][0]) / rec[i][1];
            assert_int_equal(calib_online_update(&o, rec[i], rec[i][2]), 0);
            double p[2];
            calib_online_params(&o, p);
            assert_close(p[0], (1 + rsum) / (i + 2), 1e-12 * p[0]);
            assert_true(p[1] == 0);
        }
        double best[2] = {rsum / N, 0}, fixed = 0, p[2];
        for (int i = 0; i < N; i++)
            fixed += calib_online_loss_of(&o, best, rec[i], rec[i][2]);
        assert_true(calib_ksum_value(&o.loss) - fixed < 10 * log(N));
        calib_online_params(&o, p);
        assert_close(p[0], best[0], 0.01 * best[0]);
        assert_close(best[0], scales[s], 0.05 * scales[s]);
        calib_online_free(&o);
    }
    free(rec);
}

/* The box holds whatever the pairs: separable data pushes Platt's a up
 * and temperature's beta up, each to its bound and no further. */
static void the_box_holds(void **state)
{
    (void)state;
    calib_online o;
    calib_online_cfg big = {.gamma = 1e-3}; /* long steps */
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_LOGITS, 2, &big), 0);
    for (int i = 0; i < 2000; i++) {
        double z[2] = {0, 0.01}; /* class 1, barely preferred, always right */
        assert_int_equal(calib_online_update(&o, z, 1), 0);
        assert_true(o.theta[0] >= CALIB_ONLINE_BETA_MIN && o.theta[0] <= CALIB_ONLINE_BETA_MAX);
    }
    assert_close(o.theta[0], CALIB_ONLINE_BETA_MAX, 0);
    calib_online_free(&o);
    assert_int_equal(calib_online_init(&o, "platt", CALIB_FORM_BINARY, 0, &big), 0);
    for (int i = 0; i < 2000; i++) {
        double p = i % 2 ? 0.6 : 0.4;
        assert_int_equal(calib_online_update(&o, &p, i % 2), 0);
        assert_true(o.theta[0] >= CALIB_ONLINE_A_MIN && o.theta[0] <= CALIB_ONLINE_A_MAX);
        assert_true(fabs(o.theta[1]) <= CALIB_ONLINE_B_MAX);
    }
    assert_close(o.theta[0], CALIB_ONLINE_A_MAX, 0);
    calib_online_free(&o);
}

/* A pair its form's checks refuse changes nothing; methods a form does
 * not take, and bad constants, are refused at init. */
static void refusals(void **state)
{
    (void)state;
    calib_online o;
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_PROBS, 3, NULL), 0);
    double good[3] = {0.2, 0.3, 0.5}, bad[3] = {0.2, 0.3, 0.6}, nan3[3] = {0.2, NAN, 0.8};
    assert_int_equal(calib_online_update(&o, good, 2), 0);
    calib_online before = o;
    assert_int_not_equal(calib_online_update(&o, bad, 2), 0);
    assert_int_not_equal(calib_online_update(&o, nan3, 2), 0);
    assert_int_not_equal(calib_online_update(&o, good, 3), 0);   /* no class 3 */
    assert_int_not_equal(calib_online_update(&o, good, 1.5), 0); /* no class 1.5 */
    assert_int_equal(o.n, before.n);
    assert_memory_equal(o.theta, before.theta, sizeof o.theta);
    assert_memory_equal(&o.loss, &before.loss, sizeof o.loss);
    calib_online_free(&o);
    assert_int_equal(calib_online_init(&o, "platt", CALIB_FORM_LOGITS, 3, NULL), CALIB_EINVAL);
    assert_int_equal(calib_online_init(&o, "variance", CALIB_FORM_LOGITS, 3, NULL), CALIB_EINVAL);
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_GAUSSIAN, 0, NULL),
                     CALIB_EINVAL);
    assert_int_equal(calib_online_init(&o, "online_temperature", CALIB_FORM_LOGITS, 3, NULL),
                     CALIB_EINVAL);
    calib_online_cfg neg = {.gamma = -1};
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_LOGITS, 3, &neg),
                     CALIB_EINVAL);
    /* Platt's s of logits 1e200 apart: a gradient past the bound */
    assert_int_equal(calib_online_init(&o, "platt", CALIB_FORM_LOGITS, 2, NULL), 0);
    double far[2] = {-1e200, 1e200};
    assert_int_equal(calib_online_update(&o, far, 0), CALIB_EINVAL);
    assert_int_equal(o.n, 0);
    assert_close(o.theta[0], 1, 0);
    /* one large gradient within the bound, then ordinary pairs: every one
     * is learned from (a version that tracked A's determinant overflowed
     * after it and refused every pair that followed) */
    double big[2] = {0, 9e5};
    assert_int_equal(calib_online_update(&o, big, 0), 0);
    calib_rng r;
    calib_rng_seed(&r, 3);
    for (int i = 0; i < 5000; i++) {
        double z[2] = {0, 2 * calib_rng_normal(&r)};
        assert_int_equal(calib_online_update(&o, z, calib_rng_uniform(&r) < 0.5), 0);
    }
    assert_int_equal(o.n, 5001);
    assert_true(isfinite(o.theta[0]) && isfinite(o.theta[1]));
    calib_online_free(&o);
    /* a constant p and a tiny eps: A of rank nearly 1, every pair learned */
    calib_online_cfg tiny = {.eps = 1e-9};
    assert_int_equal(calib_online_init(&o, "platt", CALIB_FORM_BINARY, 0, &tiny), 0);
    for (int i = 0; i < 20000; i++) {
        double p = 0.999999999999999;
        assert_int_equal(calib_online_update(&o, &p, i % 3 != 0), 0);
    }
    assert_true(isfinite(o.theta[0]) && isfinite(o.theta[1]));
    calib_online_free(&o);
    /* constants outside their ranges, an unknown form */
    calib_online_cfg under = {.gamma = 1e-7}, eps0 = {.eps = 1e-320};
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_LOGITS, 3, &under),
                     CALIB_EINVAL);
    assert_int_equal(calib_online_init(&o, "temperature", CALIB_FORM_LOGITS, 3, &eps0),
                     CALIB_EINVAL);
    assert_int_equal(calib_online_init(&o, "temperature", 99, 3, NULL), CALIB_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(temperature_steps_match_reference),
        cmocka_unit_test(temperature_regret_is_logarithmic),
        cmocka_unit_test(platt_steps_and_regret),
        cmocka_unit_test(variance_steps_and_regret),
        cmocka_unit_test(the_box_holds),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
