/* test_estimators.c — equal-mass debiased TCE_2, KS, and the whole set. */
#include "unit.h"

#include <stdlib.h>

#include "calib/calib.h"

static void fill(calib_toplabel *v, const double *conf, const int *correct, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (calib_toplabel){.conf = conf[i], .correct = (uint32_t)correct[i], .idx = i};
    calib_toplabel_sort(v, n);
}

static void sort_is_stable(void **state)
{
    double conf[5] = {0.5, 0.2, 0.5, 0.2, 0.5};
    int correct[5] = {1, 0, 0, 1, 1};
    calib_toplabel v[5];
    fill(v, conf, correct, 5);
    const size_t order[5] = {1, 3, 0, 2, 4};
    for (int i = 0; i < 5; i++)
        assert_int_equal(v[i].idx, order[i]);
}

/* sorted (0.2,0) (0.6,1) (0.9,1): C = .2 .8 1.7, A = 0 1 2 -> max .3 / 3 */
static void ks_by_hand(void **state)
{
    double conf[3] = {0.9, 0.6, 0.2};
    int correct[3] = {1, 1, 0};
    calib_toplabel v[3];
    fill(v, conf, correct, 3);
    assert_close(calib_ks(v, 3), 0.1, 1e-15);
    assert_nan(calib_ks(v, 0));
    calib_toplabel one = {.conf = 0.25, .correct = 1};
    assert_close(calib_ks(&one, 1), 0.75, 0);
}

/* n 4, m 2: chunks {.1,.3} {.6,.8}, edges .45 and 1.
 * correct 0 0 1 1: bin 1 (.2 - 0)^2 - 0, bin 2 (.7 - 1)^2 - 0, each weight 1/2 */
static void em_debiased_by_hand(void **state)
{
    double conf[4] = {0.8, 0.1, 0.6, 0.3};
    int correct[4] = {1, 0, 1, 0};
    calib_toplabel v[4];
    fill(v, conf, correct, 4);
    assert_close(calib_tce2_em_debiased(v, 4, 2), sqrt(0.5 * 0.04 + 0.5 * 0.09), 1e-15);
    /* correct 0 1 1 1: bin 1 a = .5: .09 - .25 / 1 < 0 -> whole sum < 0 -> 0 */
    int c2[4] = {1, 0, 1, 1};
    fill(v, conf, c2, 4);
    assert_close(calib_tce2_em_debiased(v, 4, 2), 0, 0);
}

/* n 5, m 2: chunks of ceil(5/2) = 3 and 2: the edge is between the 3rd and
 * 4th value. A single-sample bin adds 0. */
static void em_chunks_and_small_bins(void **state)
{
    double conf[5] = {0.1, 0.2, 0.3, 0.7, 0.9};
    int correct[5] = {0, 0, 1, 1, 1};
    calib_toplabel v[5];
    fill(v, conf, correct, 5);
    /* bin 1 {.1,.2,.3} a 1/3: (.2 - 1/3)^2 - (1/3)(2/3)/2; bin 2 {.7,.9} a 1: .04 */
    double b1 = (0.2 - 1.0 / 3) * (0.2 - 1.0 / 3) - (2.0 / 9) / 2;
    double want = 0.6 * b1 + 0.4 * 0.04;
    assert_close(calib_tce2_em_debiased(v, 5, 2), sqrt(want > 0 ? want : 0), 1e-15);
    /* m larger than n: every chunk is one value, every bin n_b < 2 -> 0 */
    assert_close(calib_tce2_em_debiased(v, 5, 15), 0, 0);
    assert_close(calib_tce2_em_debiased(v, 1, 15), 0, 0);
    assert_nan(calib_tce2_em_debiased(v, 0, 15));
}

/* all six at 0.5, m 3: edges .5 .5 1 -> one edge .5 holds all six */
static void em_duplicate_edges(void **state)
{
    double conf[6] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    int correct[6] = {1, 1, 1, 1, 1, 1};
    calib_toplabel v[6];
    fill(v, conf, correct, 6);
    assert_close(calib_tce2_em_debiased(v, 6, 3), 0.5, 1e-15);
    /* ties straddling a chunk boundary go to the lower bin: sorted
     * .2 .4 .4 .4 with m 2 -> edge (.4 + .4)/2 = .4 takes all the .4s */
    double c2[4] = {0.4, 0.2, 0.4, 0.4};
    int k2[4] = {1, 0, 1, 1};
    fill(v, c2, k2, 4);
    /* one bin {.2 .4 .4 .4}: mean .35, a .75: (.4)^2 - .1875/3 */
    assert_close(calib_tce2_em_debiased(v, 4, 2), sqrt(0.16 - 0.1875 / 3), 1e-15);
}

static void estimate_whole_set(void **state)
{
    /* K = 2, M = 15: conf .9 (hit) .9 (miss) in bin 14, .6 (hit) in bin 9
     * (on its edge 9/15), .8 (miss) in bin 12 (on its edge 12/15) */
    double p[8] = {0.1, 0.9, 0.9, 0.1, 0.4, 0.6, 0.2, 0.8};
    uint32_t y[4] = {1, 1, 1, 0};
    calib_estimates e;
    assert_int_equal(calib_estimate(p, y, 4, 2, &e), CALIB_OK);
    assert_int_equal(e.n, 4);
    assert_close(e.accuracy, 0.5, 0);
    assert_close(e.ece, 0.5 * 0.4 + 0.25 * 0.4 + 0.25 * 0.8, 1e-15);
    assert_close(e.tce2_15, sqrt(0.5 * 0.16 + 0.25 * 0.16 + 0.25 * 0.64), 1e-15);
    /* class 1's p: .9 hit, .1 hit, .6 hit, .8 miss, one per bin: gaps .1 .9
     * .4 .8, each weight 1/4; class 0 mirrors it */
    assert_close(e.cwce2_15, sqrt(2 * 0.25 * (0.01 + 0.81 + 0.16 + 0.64)), 1e-15);
    assert_close(e.ks, fabs(0.6 + 0.8 + 0.9 + 0.9 - 2) / 4, 1e-15);
    assert_int_equal(calib_estimate(p, y, 0, 2, &e), CALIB_EEMPTY);
    uint32_t bad[4] = {0, 2, 0, 0};
    assert_int_equal(calib_estimate(p, bad, 4, 2, &e), CALIB_ELABEL);
}

static void estimator_grows_on_request(void **state)
{
    calib_estimator e;
    calib_estimates out;
    double p[2] = {0.3, 0.7};
    assert_int_equal(calib_estimator_init(&e, 2, 1), CALIB_OK);
    assert_int_equal(calib_estimator_finish(&e, &out), CALIB_EEMPTY);
    assert_int_equal(calib_estimator_add(&e, p, 1), CALIB_OK);
    assert_int_equal(calib_estimator_add(&e, p, 1), CALIB_EFULL);
    assert_int_equal(calib_estimator_reserve(&e, 2), CALIB_OK);
    assert_int_equal(calib_estimator_add(&e, p, 0), CALIB_OK);
    assert_int_equal(calib_estimator_add(&e, p, 5), CALIB_ELABEL);
    assert_int_equal(calib_estimator_finish(&e, &out), CALIB_OK);
    assert_int_equal(out.n, 2);
    assert_close(out.ece, fabs(0.7 - 0.5), 1e-15);
    calib_estimator_free(&e);
}

/* A reset estimator forgets every bin and stored sample: the second set
 * gives exactly what a fresh estimator gives (calibctl sizes relies on it). */
static void estimator_reset_forgets(void **state)
{
    double p1[6] = {0.1, 0.9, 0.9, 0.1, 0.5, 0.5};
    uint32_t y1[3] = {0, 1, 0};
    double p2[8] = {0.1, 0.9, 0.9, 0.1, 0.4, 0.6, 0.2, 0.8};
    uint32_t y2[4] = {1, 1, 1, 0};
    calib_estimator e;
    calib_estimates got, want;
    assert_int_equal(calib_estimator_init(&e, 2, 4), CALIB_OK);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(calib_estimator_add(&e, p1 + 2 * i, y1[i]), CALIB_OK);
    assert_int_equal(calib_estimator_finish(&e, &got), CALIB_OK);
    calib_estimator_reset(&e);
    assert_int_equal(e.n, 0);
    assert_int_equal(e.cap, 4);
    assert_int_equal(calib_estimator_finish(&e, &got), CALIB_EEMPTY);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(calib_estimator_add(&e, p2 + 2 * i, y2[i]), CALIB_OK);
    assert_int_equal(calib_estimator_finish(&e, &got), CALIB_OK);
    assert_int_equal(calib_estimate(p2, y2, 4, 2, &want), CALIB_OK);
    assert_int_equal(got.n, 4);
    assert_true(got.accuracy == want.accuracy && got.ece == want.ece &&
                got.tce2_15 == want.tce2_15 && got.tce2_100 == want.tce2_100 &&
                got.tce2_15em_debiased == want.tce2_15em_debiased &&
                got.cwce2_15 == want.cwce2_15 && got.cwce2_100 == want.cwce2_100 &&
                got.ks == want.ks);
    calib_estimator_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sort_is_stable),
        cmocka_unit_test(ks_by_hand),
        cmocka_unit_test(em_debiased_by_hand),
        cmocka_unit_test(em_chunks_and_small_bins),
        cmocka_unit_test(em_duplicate_edges),
        cmocka_unit_test(estimate_whole_set),
        cmocka_unit_test(estimator_grows_on_request),
        cmocka_unit_test(estimator_reset_forgets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
