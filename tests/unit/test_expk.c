/* test_expk.c — every exp kernel libcalib can pick (scalar, two lanes,
 * four lanes where the CPU has AVX2) against libm, element by element and
 * in every lane, and the weight-0 rule below exp(-708). Built from
 * src/lib/expk.c directly: the kernels are internal to libcalib. */
#include "unit.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "expk.h"

/* A row of 13 copies covers, in every kernel, the two-vector unrolled loop,
 * the one-vector loop and the scalar tail (13 = 2*2*3 + 1 = 4*3 + 1). */
#define COPIES 13

static const calib_expk *kernel_of(int isa)
{
    const calib_expk *k = calib_expk_get(isa);
    if (!k)
        printf("# kernel %d: not on this build or CPU\n", isa);
    return k;
}

/* exp(x) for x in [-708, 0] from each kernel's sum of COPIES equal terms:
 * within 4 ulp of libm (the kernel's exp is within 1, the sum adds 13
 * equal terms exactly up to the last rounding of each lane). */
static void kernel_exp_matches_libm(void **state)
{
    double z[COPIES], s[4];
    calib_rng r;
    calib_rng_seed(&r, 1);
    for (int isa = CALIB_EXPK_SCALAR; isa <= CALIB_EXPK_VEC4; isa++) {
        const calib_expk *kern = kernel_of(isa);
        if (!kern)
            continue;
        double worst = 0;
        for (int i = 0; i <= 200000; i++) {
            /* a dense grid plus random points, ends included */
            double x = i <= 100000 ? -708.0 * i / 100000 : -708 * calib_rng_uniform(&r);
            for (int j = 0; j < COPIES; j++)
                z[j] = x;
            kern->sum(z, COPIES, 0, 1, s);
            double e = exp(x), rel = fabs(s[0] / COPIES - e) / e;
            worst = rel > worst ? rel : worst;
        }
        printf("# %s: worst relative error of exp over [-708, 0]: %.3g\n",
               kern->name, worst);
        assert_true(worst <= 4 * DBL_EPSILON);
    }
}

/* ulps between two positive doubles */
static uint64_t ulps_apart(double a, double b)
{
    uint64_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x > y ? x - y : y - x;
}

/* EXP_NEG itself (expk.h), element by element: within 1 ulp of glibc's
 * exp over [-708, 0] (random points, points near the reduction's edges
 * (n + 1/2) ln 2, and the integers), exactly 1 at 0. */
static void exp_neg_within_1ulp_of_libm(void **state)
{
    calib_rng r;
    calib_rng_seed(&r, 3);
    uint64_t worst = 0;
    for (int i = 0; i < 3000000; i++) {
        double x;
        if (i % 3 == 0)
            x = -708 * calib_rng_uniform(&r);
        else if (i % 3 == 1)
            x = -(double)(calib_rng_next(&r) % 1021 + 0.5) * 0.6931471805599453 +
                1e-9 * (calib_rng_uniform(&r) - 0.5);
        else
            x = -(double)(i / 3 % 709);
        if (!(x >= EXPK_ARG_MIN && x <= 0))
            continue;
        double e;
        EXP_NEG(x, e, double, uint64_t);
        uint64_t u = ulps_apart(e, exp(x));
        if (u > worst)
            worst = u;
        if (u > 1)
            fail_msg("exp(%a): %a, glibc %a", x, e, exp(x));
    }
    printf("# EXP_NEG: at most %llu ulp from glibc's exp\n", (unsigned long long)worst);
    double one;
    EXP_NEG(0.0, one, double, uint64_t);
    assert_true(one == 1);
}

/* Moments and squares against libm on rows of distinct values, each lane
 * and the tail holding a different one; beta and zmax are applied. */
static void kernel_moments_and_squares(void **state)
{
    calib_rng r;
    calib_rng_seed(&r, 2);
    for (int isa = CALIB_EXPK_SCALAR; isa <= CALIB_EXPK_VEC4; isa++) {
        const calib_expk *kern = kernel_of(isa);
        if (!kern)
            continue;
        for (int trial = 0; trial < 2000; trial++) {
            size_t k = 1 + (size_t)(calib_rng_next(&r) % 37);
            double z[37], zmax = -INFINITY, beta = 0.01 + 5 * calib_rng_uniform(&r);
            for (size_t j = 0; j < k; j++) {
                z[j] = 40 * calib_rng_normal(&r);
                zmax = z[j] > zmax ? z[j] : zmax;
            }
            long double ref[5] = {0};
            for (size_t j = 0; j < k; j++) {
                /* the argument as the kernel forms it: its rounding is
                 * 1e-16 relative, 1e-14 of exp(x) at x ~ -100 */
                double dd = z[j] - zmax, xd = beta * dd;
                long double d = dd, x = xd;
                if (xd < EXPK_ARG_MIN)
                    continue;
                long double w = expl(x);
                ref[0] += w;
                ref[1] += d * w;
                ref[2] += d * d * w;
                ref[3] += d * d * d * w;
                ref[4] += w * w;
            }
            double s[4], q[4], sc[4];
            kern->moments(z, k, zmax, beta, s);
            kern->squares(z, k, zmax, beta, q);
            kern->sum(z, k, zmax, beta, sc);
            /* sums of terms of one sign: relative error a few ulp; the
             * scale of d^m w bounds the absolute error of the moments */
            assert_close(s[0], (double)ref[0], 1e-14);
            assert_close(sc[0], (double)ref[0], 1e-14);
            assert_close(q[0], (double)ref[0], 1e-14);
            assert_close(q[1], (double)ref[4], 1e-14);
            for (int m = 1; m <= 3; m++)
                assert_true(fabsl(s[m] - ref[m]) <= 1e-14L * fabsl(ref[m]) + 1e-300L);
        }
    }
}

/*
 * Below exp(-708) a weight is exactly 0, at the beta of the call: a class
 * 1000 below the maximum weighs nothing at beta = 1 but exp(-10) at
 * beta = 0.01. And its d never reaches a product: z = -DBL_MAX makes
 * d = -inf, which must not turn a moment into NaN.
 */
static void kernel_range_is_per_beta(void **state)
{
    double z[COPIES];
    for (int isa = CALIB_EXPK_SCALAR; isa <= CALIB_EXPK_VEC4; isa++) {
        const calib_expk *kern = kernel_of(isa);
        if (!kern)
            continue;
        for (int j = 0; j < COPIES; j++)
            z[j] = j == 5 ? 0 : -1000;
        double s[4];
        kern->moments(z, COPIES, 0, 1, s);
        assert_true(s[0] == 1 && s[1] == 0 && s[2] == 0 && s[3] == 0);
        kern->moments(z, COPIES, 0, 0.01, s);
        assert_close(s[0], 1 + 12 * exp(-10), 1e-15);
        assert_close(s[1], -12 * 1000 * exp(-10), 1e-14);
        assert_close(s[3], -12 * 1e9 * exp(-10), 1e-14);
        for (int j = 0; j < COPIES; j++)
            z[j] = j == 7 ? DBL_MAX : -DBL_MAX;
        kern->moments(z, COPIES, DBL_MAX, 1e-300, s);
        assert_true(s[0] == 1 && s[1] == 0 && s[2] == 0 && s[3] == 0);
        kern->squares(z, COPIES, DBL_MAX, 1e-300, s);
        assert_true(s[0] == 1 && s[1] == 1);
    }
}

static void select_never_wider_than_asked(void **state)
{
    assert_string_equal(calib_expk_select(CALIB_EXPK_SCALAR)->name, "scalar");
    const calib_expk *v2 = calib_expk_select(CALIB_EXPK_VEC2);
    assert_true(v2 == calib_expk_get(CALIB_EXPK_VEC2) || v2 == calib_expk_get(CALIB_EXPK_SCALAR));
    const calib_expk *best = calib_expk_select(CALIB_EXPK_VEC4);
    assert_non_null(best);
    if (calib_expk_get(CALIB_EXPK_VEC4))
        assert_ptr_equal(best, calib_expk_get(CALIB_EXPK_VEC4));
    assert_null(calib_expk_get(99));
    printf("# this CPU runs the %s kernels\n", best->name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernel_exp_matches_libm),
        cmocka_unit_test(exp_neg_within_1ulp_of_libm),
        cmocka_unit_test(kernel_moments_and_squares),
        cmocka_unit_test(kernel_range_is_per_beta),
        cmocka_unit_test(select_never_wider_than_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
