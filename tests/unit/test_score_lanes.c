/* test_score_lanes.c — a row's exps, divisions, maxima and squares run in
 * vectors of four doubles and, on x86-64, are compiled for AVX2 and for
 * the baseline, the loader choosing: every path must score a row bit for
 * bit as plain scalar C does. This test compiles score.c a second time
 * without vectors (its public names renamed) and runs both on the same
 * rows: every length up to 17 and longer ones, temperatures, classes far
 * below the maximum (exp's range left, p subnormal or 0) at every lane,
 * and in place (p = z). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "calib/calib.h"
#include "softmax.h"

#define calib_check_binary scalar_check_binary
#define calib_check_gaussian scalar_check_gaussian
#define calib_check_label scalar_check_label
#define calib_check_logits scalar_check_logits
#define calib_check_probs scalar_check_probs
#define calib_row_max scalar_row_max
#define calib_softmax_row scalar_softmax_row
#define calib_softmax scalar_softmax
#define calib_log_softmax_at scalar_log_softmax_at
#define calib_argmax scalar_argmax
#define calib_score_probs scalar_score_probs
#define calib_score_logits scalar_score_logits
#define calib_score_binary scalar_score_binary
#define calib_score_dss scalar_score_dss
#define CALIB_NO_VEC4 1
/* its prototypes are the headers', under the library's names */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include "../../src/lib/score.c"
#pragma GCC diagnostic warning "-Wmissing-prototypes"
#undef calib_row_max
#undef calib_softmax_row
#undef calib_score_logits

static void vectors_equal_scalar(void **state)
{
    enum { KMAX = 1001 };
    static double z[KMAX], p[KMAX], q[KMAX], w[KMAX];
    const size_t ks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 100, 1001};
    const double betas[] = {1, 1 / 1.5, 0.25, 3};
    calib_rng r;
    calib_rng_seed(&r, 7);
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
        for (size_t b = 0; b < sizeof betas / sizeof betas[0]; b++)
            for (int rep = 0; rep < 200; rep++) {
                size_t k = ks[a];
                double spread = rep % 4 == 3 ? 300 : rep % 4 == 2 ? 20 : 2;
                for (size_t i = 0; i < k; i++)
                    z[i] = spread * calib_rng_normal(&r);
                if (rep % 5 == 4) /* one class out of exp's range */
                    z[calib_rng_next(&r) % k] = -800;
                double m = calib_row_max(z, k);
                assert_true(m == scalar_row_max(z, k));
                double lv = calib_softmax_row(z, k, m, betas[b], p);
                double ls = scalar_softmax_row(z, k, m, betas[b], q);
                assert_memory_equal(&lv, &ls, sizeof lv);
                assert_memory_equal(p, q, k * sizeof *p);
                memcpy(w, z, k * sizeof *w); /* in place, as temperature scaling calls it */
                calib_softmax_row(w, k, m, betas[b], w);
                assert_memory_equal(w, p, k * sizeof *p);
                memcpy(w, z, k * sizeof *w);
                scalar_softmax_row(w, k, m, betas[b], w);
                assert_memory_equal(w, p, k * sizeof *p);
                size_t y = calib_rng_next(&r) % k;
                calib_score sv, ss;
                calib_score_logits(z, k, y, p, &sv);
                scalar_score_logits(z, k, y, q, &ss);
                assert_memory_equal(&sv, &ss, sizeof sv);
                assert_memory_equal(p, q, k * sizeof *p);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vectors_equal_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
