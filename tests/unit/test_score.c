/* test_score.c — per-sample scores and input checks, against hand values. */
#include "unit.h"

#include <fenv.h>
#include <float.h>
#include <stdlib.h>

#include "calib/calib.h"

static const double LOG_CAP = 34.538776394910684; /* -ln(1e-15) */

static void probs_by_hand(void **state)
{
    calib_score s;
    double p[3] = {0.7, 0.2, 0.1};
    calib_score_probs(p, 3, 0, &s);
    assert_close(s.brier, 0.09 + 0.04 + 0.01, 1e-15);
    assert_close(s.log, -log(0.7), 1e-15);
    calib_score_probs(p, 3, 2, &s);
    assert_close(s.brier, 0.49 + 0.04 + 0.81, 1e-15);
    assert_close(s.log, -log(0.1), 1e-15);
}

static void probs_exactly_zero_and_one(void **state)
{
    calib_score s;
    double p[2] = {1, 0};
    calib_score_probs(p, 2, 1, &s); /* certain and wrong */
    assert_close(s.brier, 2, 0);
    assert_close(s.log, LOG_CAP, 1e-15);
    calib_score_probs(p, 2, 0, &s); /* certain and right */
    assert_close(s.brier, 0, 0);
    assert_close(s.log, 0, 0);
}

static void logits_uniform(void **state)
{
    double z[3] = {5, 5, 5}, p[3];
    calib_score s;
    calib_score_logits(z, 3, 1, p, &s);
    for (int i = 0; i < 3; i++)
        assert_close(p[i], 1.0 / 3, 1e-15);
    assert_close(s.brier, 4.0 / 9 + 2.0 / 9, 1e-15);
    assert_close(s.log, log(3), 1e-15);
}

static void logits_extreme_are_stable(void **state)
{
    double z[2] = {1000, 0}, p[2];
    calib_score s;
    calib_score_logits(z, 2, 1, p, &s);
    assert_close(p[0], 1, 0);
    assert_close(p[1], 0, 0);
    assert_close(s.brier, 2, 0);
    assert_close(s.log, LOG_CAP, 1e-15); /* -ln p_1 = 1000, clamped */
    calib_score_logits(z, 2, 0, p, &s);
    assert_close(s.log, 0, 1e-300);
    double big[2] = {1e308, 1e308};
    calib_score_logits(big, 2, 0, p, &s);
    assert_close(p[0], 0.5, 0);
    assert_close(s.log, log(2), 1e-15);
    /* Below the clamp, the log-softmax is exact where p_y underflows. */
    double mid[2] = {30, 0};
    calib_score_logits(mid, 2, 1, p, &s);
    assert_close(s.log, 30 + log1p(exp(-30)), 1e-14);
}

static void logits_k1000(void **state)
{
    enum { K = 1000 };
    double *z = calloc(K, sizeof *z), *p = calloc(K, sizeof *p);
    assert_non_null(z);
    assert_non_null(p);
    calib_score s;
    calib_score_logits(z, K, 999, p, &s);
    assert_close(s.brier, 0.999 * 0.999 + 999 * 1e-6, 1e-13);
    assert_close(s.log, log(K), 1e-14);
    assert_int_equal(calib_argmax(p, K), 0); /* all tied: lowest index */
    free(z);
    free(p);
}

/* softmax by libm: exp of each class, summed left to right (the reference's
 * formula, tests/ref/calib_ref.py) */
static void softmax_libm(const double *z, size_t k, double *p)
{
    double m = z[0], s = 0;
    for (size_t i = 1; i < k; i++)
        m = z[i] > m ? z[i] : m;
    for (size_t i = 0; i < k; i++)
        s += p[i] = exp(z[i] - m);
    for (size_t i = 0; i < k; i++)
        p[i] /= s;
}

/* libcalib's exp is its own (within 1 ulp of glibc's) and sums in four
 * lanes: p stays within (4 + K) ulps of libm's softmax summed in class
 * order (the sums' orders differ), whatever the row's length (every
 * remainder mod 4) and spread (classes far below the maximum, where p is
 * subnormal or 0, included). */
static void softmax_within_ulps_of_libm(void **state)
{
    enum { KMAX = 1000 };
    static double z[KMAX], p[KMAX], q[KMAX];
    const size_t ks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 31, 100, 1000};
    const double spreads[] = {0.01, 1, 5, 50, 400};
    calib_rng r;
    calib_rng_seed(&r, 42);
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
        for (size_t b = 0; b < sizeof spreads / sizeof spreads[0]; b++)
            for (int rep = 0; rep < 50; rep++) {
                size_t k = ks[a];
                unit_normal_row(&r, z, k, spreads[b]);
                calib_softmax(z, k, p);
                softmax_libm(z, k, q);
                double sum = 0;
                for (size_t i = 0; i < k; i++) {
                    double tol = (4.0 + (double)k) * DBL_EPSILON * q[i] + 2 * DBL_TRUE_MIN;
                    if (!(fabs(p[i] - q[i]) <= tol))
                        fail_msg("k %zu spread %g class %zu: p %a, libm %a", k,
                                 spreads[b], i, p[i], q[i]);
                    sum += p[i];
                }
                assert_close(sum, 1, 1e-13);
            }
}

/* Below exp's range (z - max z < -708) a p is glibc's exp over the sum,
 * subnormal or 0, in the vector lanes and in the tail alike: here the
 * sum is exactly 2 (two maxima; the rest cannot move it). */
static void softmax_below_range_is_libms(void **state)
{
    const double far[] = {-708.5, -709, -720, -745, -745.2, -800, -1e300};
    double z[11], p[11];
    for (size_t at = 0; at < 11; at++)
        for (size_t f = 0; f < sizeof far / sizeof far[0]; f++) {
            for (size_t i = 0; i < 11; i++)
                z[i] = far[(i + f) % (sizeof far / sizeof far[0])];
            z[at] = 0;
            z[(at + 5) % 11] = 0;
            calib_softmax(z, 11, p);
            for (size_t i = 0; i < 11; i++)
                if (z[i] == 0)
                    assert_true(p[i] == 0.5);
                else if (p[i] != exp(z[i]) / 2)
                    fail_msg("z %g: p %a, want %a", z[i], p[i], exp(z[i]) / 2);
        }
}

/* A NaN logit (unchecked input) makes every p NaN, as exp(NaN) in the sum
 * did before the exps were vectorised, in a lane and in the tail alike. */
static void softmax_nan_spreads(void **state)
{
    double z[13], p[13];
    for (size_t k = 1; k <= 13; k++)
        for (size_t at = 0; at < k; at++) {
            for (size_t i = 0; i < k; i++)
                z[i] = 0.1 * (double)i;
            z[at] = NAN;
            calib_softmax(z, k, p);
            for (size_t i = 0; i < k; i++)
                if (!isnan(p[i]))
                    fail_msg("k %zu NaN at %zu: p[%zu] = %g", k, at, i, p[i]);
        }
}

/* Classes far below the maximum raise no invalid and no overflow flag, and
 * classes -inf apart (z = -DBL_MAX against DBL_MAX) only the overflow of
 * that difference itself: a program that traps them must not die in
 * calib_softmax for an exp of a lane that was never wanted. */
static void softmax_raises_no_invalid(void **state)
{
    const double rows[][8] = {
        {0, -1e300, 0, 0, -800, -708.5, 0, 0},
        {DBL_MAX, -DBL_MAX, 0, 0, -DBL_MAX, 1, 2, 3},
        {-DBL_MAX, -DBL_MAX, -DBL_MAX, DBL_MAX, 0, 0, 0, -1e308},
    };
    double p[8];
    calib_score s;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (size_t k = 1; k <= 8; k++) {
            feclearexcept(FE_ALL_EXCEPT);
            calib_softmax(rows[r], k, p);
            calib_score_logits(rows[r], k, 0, p, &s);
            (void)calib_log_softmax_at(rows[r], k, k - 1);
            int bad = FE_INVALID | FE_DIVBYZERO | (r == 0 ? FE_OVERFLOW : 0);
            if (fetestexcept(bad))
                fail_msg("row %zu, k %zu: flags %#x", r, k, fetestexcept(bad));
        }
}

/* calib_log_softmax_at is the log score's ln p_y bit for bit (below the
 * clamp): one sum of exps, not a second one in another order. */
static void log_softmax_at_is_the_log_score(void **state)
{
    static double z[1000], p[1000];
    const size_t ks[] = {2, 3, 5, 8, 10, 13, 100, 1000};
    calib_rng r;
    calib_rng_seed(&r, 9);
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
        for (int rep = 0; rep < 200; rep++) {
            size_t k = ks[a], y = calib_rng_next(&r) % k;
            unit_normal_row(&r, z, k, 3);
            calib_score s;
            calib_score_logits(z, k, y, p, &s);
            if (s.log < LOG_CAP)
                assert_true(-calib_log_softmax_at(z, k, y) == s.log);
        }
}

static void binary_matches_k2(void **state)
{
    calib_score b, v;
    calib_score_binary(0.8, 1, &b);
    assert_close(b.brier, 2 * 0.2 * 0.2, 1e-15);
    assert_close(b.log, -log(0.8), 1e-15);
    calib_score_binary(0.8, 0, &b);
    assert_close(b.brier, 2 * 0.8 * 0.8, 1e-15);
    assert_close(b.log, -log(0.2), 1e-15);
    for (double p = 0; p <= 1; p += 0.125)
        for (unsigned y = 0; y < 2; y++) {
            double pv[2] = {1 - p, p};
            calib_score_binary(p, y, &b);
            calib_score_probs(pv, 2, y, &v);
            assert_close(b.brier, v.brier, 1e-15);
            assert_close(b.log, v.log, 1e-15);
        }
    /* K = 2 logits [0, s] are the binary p = sigmoid(s). */
    double z[2] = {0, 1.5}, p[2];
    calib_score_logits(z, 2, 1, p, &v);
    calib_score_binary(1 / (1 + exp(-1.5)), 1, &b);
    assert_close(v.brier, b.brier, 1e-15);
    assert_close(v.log, b.log, 1e-15);
}

static void dss_by_hand(void **state)
{
    assert_close(calib_score_dss(1, 2, 3), 4.0 / 2 + log(2), 1e-15);
    assert_close(calib_score_dss(0, 1, 0), 0, 0);
}

static void argmax_ties_lowest(void **state)
{
    double a[3] = {0.4, 0.4, 0.2}, b[3] = {0.2, 0.4, 0.4}, c[1] = {1};
    assert_int_equal(calib_argmax(a, 3), 0);
    assert_int_equal(calib_argmax(b, 3), 1);
    assert_int_equal(calib_argmax(c, 1), 0);
    assert_int_equal(calib_argmax(c, 0), 0);
}

/* The scan the four-lane argmax and logit check replace, for every length
 * up to 13 and every position (and pair of positions) of the maximum, a
 * tie, a NaN and an infinity: the same answers. */
static size_t argmax_scan(const double *p, size_t k)
{
    size_t best = 0;
    for (size_t i = 1; i < k; i++)
        if (p[i] > p[best])
            best = i;
    return best;
}

static void lanes_match_scans(void **state)
{
    double v[13];
    for (size_t k = 1; k <= 13; k++) {
        for (size_t a = 0; a < k; a++) {
            for (size_t b = 0; b < k; b++) {
                for (int kind = 0; kind < 7; kind++) {
                    for (size_t i = 0; i < k; i++)
                        v[i] = 0.01 * (double)((i * 7) % 5);
                    v[a] = 0.5;
                    if (kind == 1) /* a tie */
                        v[b] = 0.5;
                    else if (kind == 2)
                        v[b] = NAN;
                    else if (kind == 3)
                        v[b] = b % 2 ? INFINITY : -INFINITY;
                    else if (kind == 4) /* zeros of both signs: a tie at 0 */
                        for (size_t i = 0; i < k; i++)
                            v[i] = i % 2 ? -0.0 : 0.0;
                    else if (kind == 5) { /* subnormals the largest */
                        for (size_t i = 0; i < k; i++)
                            v[i] = 0;
                        v[b] = 4.9e-324, v[a] = 1e-310;
                    }
                    else if (kind == 6) /* the largest doubles (z * 0 is 0) */
                        v[b] = -DBL_MAX, v[a] = DBL_MAX;
                    assert_int_equal(calib_argmax(v, k), argmax_scan(v, k));
                    int finite = 1;
                    for (size_t i = 0; i < k; i++)
                        finite &= isfinite(v[i]) != 0;
                    assert_int_equal(calib_check_logits(v, k),
                                     finite ? CALIB_OK : CALIB_ENONFINITE);
                }
            }
        }
    }
}

static void checks(void **state)
{
    double ok[3] = {0.5, 0.4995, 0}, nan3[2] = {NAN, 1}, out[2] = {-0.1, 1.1},
           sum[2] = {0.5, 0.4}, inf2[2] = {INFINITY, 0};
    assert_int_equal(calib_check_probs(ok, 3), CALIB_OK);
    assert_int_equal(calib_check_probs(nan3, 2), CALIB_ENONFINITE);
    assert_int_equal(calib_check_probs(out, 2), CALIB_EPROB);
    assert_int_equal(calib_check_probs(sum, 2), CALIB_EPROBSUM);
    assert_int_equal(calib_check_logits(inf2, 2), CALIB_ENONFINITE);
    assert_int_equal(calib_check_logits(out, 2), CALIB_OK);
    assert_int_equal(calib_check_binary(1), CALIB_OK);
    assert_int_equal(calib_check_binary(1.0000001), CALIB_EPROB);
    assert_int_equal(calib_check_binary(NAN), CALIB_ENONFINITE);
    assert_int_equal(calib_check_gaussian(0, 1e-300), CALIB_OK);
    assert_int_equal(calib_check_gaussian(0, 0), CALIB_EVAR);
    assert_int_equal(calib_check_gaussian(0, -1), CALIB_EVAR);
    assert_int_equal(calib_check_gaussian(INFINITY, 1), CALIB_ENONFINITE);
    assert_int_equal(calib_check_label(0, 2), CALIB_OK);
    assert_int_equal(calib_check_label(1, 2), CALIB_OK);
    assert_int_equal(calib_check_label(2, 2), CALIB_ELABEL);
    assert_int_equal(calib_check_label(-1, 2), CALIB_ELABEL);
    assert_int_equal(calib_check_label(0.5, 2), CALIB_ELABEL);
    assert_int_equal(calib_check_label(NAN, 2), CALIB_ENONFINITE);
    assert_string_equal(calib_strerror(CALIB_EPROBSUM),
                        "probabilities do not sum to 1 within 1e-3");
}

/* One spelling of the form names, both ways. */
static void form_names(void **state)
{
    const char *names[] = {"logits", "probs", "binary", "gaussian"};
    for (int f = 0; f < 4; f++) {
        assert_string_equal(calib_form_name(f), names[f]);
        assert_int_equal(calib_form_parse(names[f]), f);
    }
    assert_int_equal(calib_form_parse(CALIB_FORM_LOGITS == 0 ? "logits" : ""), 0);
    assert_string_equal(calib_form_name(4), "unknown");
    assert_string_equal(calib_form_name(-1), "unknown");
    assert_int_equal(calib_form_parse("Logits"), -1);
    assert_int_equal(calib_form_parse("unknown"), -1);
    assert_int_equal(calib_form_parse(""), -1);
    assert_int_equal(calib_form_parse(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(probs_by_hand),
        cmocka_unit_test(probs_exactly_zero_and_one),
        cmocka_unit_test(logits_uniform),
        cmocka_unit_test(logits_extreme_are_stable),
        cmocka_unit_test(logits_k1000),
        cmocka_unit_test(softmax_within_ulps_of_libm),
        cmocka_unit_test(softmax_below_range_is_libms),
        cmocka_unit_test(softmax_nan_spreads),
        cmocka_unit_test(softmax_raises_no_invalid),
        cmocka_unit_test(log_softmax_at_is_the_log_score),
        cmocka_unit_test(binary_matches_k2),
        cmocka_unit_test(dss_by_hand),
        cmocka_unit_test(argmax_ties_lowest),
        cmocka_unit_test(lanes_match_scans),
        cmocka_unit_test(checks),
        cmocka_unit_test(form_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
