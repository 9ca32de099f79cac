/* test_accum.c — compensated accumulators, merge, decayed accumulators. */
#include "unit.h"

#include "calib/calib.h"

static void mean_var_ci_by_hand(void **state)
{
    calib_accum a;
    calib_accum_init(&a);
    for (int i = 1; i <= 4; i++)
        calib_accum_add(&a, i);
    assert_int_equal(a.n, 4);
    assert_close(calib_accum_mean(&a), 2.5, 1e-15);
    assert_close(calib_accum_var(&a), 5.0 / 3, 1e-15);
    assert_close(calib_accum_se(&a), sqrt(5.0 / 12), 1e-15);
    double ci[2];
    calib_accum_ci95(&a, ci);
    assert_close(ci[0], 2.5 - CALIB_Z95 * sqrt(5.0 / 12), 1e-15);
    assert_close(ci[1], 2.5 + CALIB_Z95 * sqrt(5.0 / 12), 1e-15);
}

static void small_n(void **state)
{
    calib_accum a;
    double ci[2];
    calib_accum_init(&a);
    assert_nan(calib_accum_mean(&a));
    calib_accum_add(&a, 0.25);
    assert_close(calib_accum_mean(&a), 0.25, 0);
    assert_nan(calib_accum_var(&a));
    calib_accum_ci95(&a, ci);
    assert_nan(ci[0]);
    assert_nan(ci[1]);
    /* constant data: variance 0 up to rounding, never negative */
    calib_accum_init(&a);
    for (int i = 0; i < 1000; i++)
        calib_accum_add(&a, 0.1);
    assert_true(calib_accum_var(&a) >= 0);
    assert_close(calib_accum_var(&a), 0, 1e-15);
}

static void neumaier_beats_kahan_case(void **state)
{
    calib_ksum k = {0};
    const double x[] = {1, 1e100, 1, -1e100};
    for (int i = 0; i < 4; i++)
        calib_ksum_add(&k, x[i]);
    assert_close(calib_ksum_value(&k), 2, 0);
}

static void merge_equals_sequential(void **state)
{
    calib_rng r;
    calib_rng_seed(&r, 7);
    calib_accum all, part[4], merged;
    calib_accum_init(&all);
    calib_accum_init(&merged);
    for (int i = 0; i < 4; i++)
        calib_accum_init(&part[i]);
    for (int i = 0; i < 10000; i++) {
        double x = 2 * calib_rng_uniform(&r);
        calib_accum_add(&all, x);
        calib_accum_add(&part[(i * 7) % 4], x);
    }
    for (int i = 0; i < 4; i++)
        calib_accum_merge(&merged, &part[i]);
    assert_int_equal(merged.n, all.n);
    assert_close(calib_accum_mean(&merged), calib_accum_mean(&all), 1e-15);
    assert_close(calib_accum_var(&merged), calib_accum_var(&all), 1e-13);
}

/* 10^8 additions: the compensated sum stays within 1e-12 relative of a
 * long-double reference, where a naive double sum drifts. */
static void compensated_long_run(void **state)
{
    calib_rng r;
    calib_rng_seed(&r, 42);
    calib_ksum k = {0};
    long double ref = 0;
    double naive = 0;
    for (long i = 0; i < 100000000L; i++) {
        double x = 0.1 + 1e-3 * (double)(calib_rng_next(&r) >> 40);
        calib_ksum_add(&k, x);
        ref += x;
        naive += x;
    }
    double got = calib_ksum_value(&k);
    double rel = fabs(got - (double)ref) / (double)ref;
    print_message("compensated rel err %.3g, naive %.3g\n", rel,
                  fabs(naive - (double)ref) / (double)ref);
    assert_true(rel <= 1e-12);
}

static void decay_by_hand(void **state)
{
    calib_decay d;
    assert_int_equal(calib_decay_init(&d, 0), CALIB_EINVAL);
    assert_int_equal(calib_decay_init(&d, NAN), CALIB_EINVAL);
    assert_int_equal(calib_decay_init(&d, 10), CALIB_OK);
    assert_nan(calib_decay_mean(&d));
    calib_decay_add(&d, 1, 0);
    calib_decay_add(&d, 3, 10); /* the first weighs 1/2 now */
    assert_close(calib_decay_mean(&d), (0.5 * 1 + 3) / 1.5, 1e-15);
    assert_close(calib_decay_neff(&d), 1.5 * 1.5 / 1.25, 1e-15);
    calib_decay_add(&d, 5, 5); /* a clock going back is "now" */
    assert_close(calib_decay_mean(&d), (0.5 + 3 + 5) / 2.5, 1e-15);
    double ci[2];
    calib_decay_ci95(&d, ci);
    assert_true(ci[0] < calib_decay_mean(&d) && calib_decay_mean(&d) < ci[1]);
}

static void decay_forgets(void **state)
{
    calib_decay d;
    calib_decay_init(&d, 100);
    for (int t = 0; t < 5000; t++)
        calib_decay_add(&d, 0, t);
    for (int t = 5000; t < 10000; t++)
        calib_decay_add(&d, 1, t);
    /* after 50 half-lives the old level weighs 2^-50 */
    assert_close(calib_decay_mean(&d), 1, 1e-12);
    /* Kish n of a long run with per-step factor f = 2^(-1/h): (1 + f)/(1 - f) */
    assert_close(calib_decay_neff(&d), (1 + exp2(-0.01)) / (1 - exp2(-0.01)),
                 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mean_var_ci_by_hand),
        cmocka_unit_test(small_n),
        cmocka_unit_test(neumaier_beats_kahan_case),
        cmocka_unit_test(merge_equals_sequential),
        cmocka_unit_test(compensated_long_run),
        cmocka_unit_test(decay_by_hand),
        cmocka_unit_test(decay_forgets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
