/* test_cs_lanes.c — calib_cs's hot loop is vectorised (four doubles a
 * step) and, on x86-64, compiled for AVX2 and for the baseline, the
 * loader choosing: every path must make the same sequence, bit for bit,
 * as plain scalar C. This test compiles cs.c a second time without
 * vectors (its public names renamed) and runs both on the same streams,
 * comparing every interval and, at the end, every capital kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "calib/calib.h"
#include "calib/cs.h"

#define calib_cs_add scalar_cs_add
#define calib_cs_bytes scalar_cs_bytes
#define calib_cs_copy scalar_cs_copy
#define calib_cs_free scalar_cs_free
#define calib_cs_init scalar_cs_init
#define calib_cs_interval scalar_cs_interval
#define calib_cs_merge scalar_cs_merge
#define calib_cs_reset scalar_cs_reset
#define calib_cs_restore scalar_cs_restore
#define calib_cs_step scalar_cs_step
#define CALIB_NO_VEC4 1
/* its prototypes are the header's, under the library's names */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include "../../src/lib/cs.c"
#pragma GCC diagnostic warning "-Wmissing-prototypes"
#undef calib_cs_add
#undef calib_cs_free
#undef calib_cs_init
#undef calib_cs_interval

static void same_kept(const calib_cs *a, const calib_cs *b)
{
    assert_int_equal(a->first, b->first);
    assert_int_equal(a->last, b->last);
    assert_int_equal(a->refines, b->refines);
    size_t len = (a->last - a->first) * sizeof(double);
    const double *x[] = {a->lp, a->pp, a->ap, a->qp, a->lm, a->pm, a->am, a->qm};
    const double *y[] = {b->lp, b->pp, b->ap, b->qp, b->lm, b->pm, b->am, b->qm};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        assert_memory_equal(x[i] + a->first, y[i] + a->first, len);
}

/* Streams of Brier-like scores (a mean near 0.6, and one near the range's
 * end, where the caps bind and the other branch runs), for grids of odd
 * and even candidate counts: the vector loop's remainder is exercised. */
static void vectors_equal_scalar(void **state)
{
    const double means[] = {0.6, 0.03, 1.9};
    const uint32_t grids[] = {17, 33, 129, 257};
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++)
        for (size_t k = 0; k < sizeof means / sizeof means[0]; k++) {
            calib_cs v, s;
            assert_int_equal(calib_cs_init(&v, 0, 2, 0.05, grids[g]), CALIB_OK);
            assert_int_equal(scalar_cs_init(&s, 0, 2, 0.05, grids[g]), CALIB_OK);
            calib_rng r;
            calib_rng_seed(&r, 100 + g * 10 + k);
            for (int i = 0; i < 200000; i++) {
                double x = means[k] + 0.3 * calib_rng_normal(&r);
                calib_cs_add(&v, x);
                scalar_cs_add(&s, x);
                double a[2], b[2];
                assert_int_equal(calib_cs_interval(&v, &a[0], &a[1]),
                                 scalar_cs_interval(&s, &b[0], &b[1]));
                assert_memory_equal(a, b, sizeof a);
            }
            same_kept(&v, &s);
            calib_cs_free(&v);
            scalar_cs_free(&s);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vectors_equal_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
