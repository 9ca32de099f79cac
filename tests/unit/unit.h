/* unit.h — cmocka plus the approximate comparisons libcalib's tests need. */
#ifndef CALIB_TEST_UNIT_H
#define CALIB_TEST_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "calib/sample.h"

/* |a - b| <= tol * max(1, |b|): relative for large b, absolute near 0. */
#define assert_close(a, b, tol) check_close((a), (b), (tol), __FILE__, __LINE__)

static inline void check_close(double a, double b, double tol, const char *file,
                               int line)
{
    double scale = fabs(b) > 1 ? fabs(b) : 1;
    if (!(fabs(a - b) <= tol * scale)) {
        print_error("%s:%d: %.17g is not within %g of %.17g\n", file, line, a,
                    tol, b);
        _fail(file, line);
    }
}

#define assert_nan(a) assert_true(isnan(a))

/* A row of k logits N(0, sd^2) from r: the random rows of the scoring
 * tests (test_score, test_score_lanes). */
static inline void unit_normal_row(calib_rng *r, double *z, size_t k, double sd)
{
    for (size_t i = 0; i < k; i++)
        z[i] = sd * calib_rng_normal(r);
}

/* Two independent N(0, 1) from r by Marsaglia's polar method (no
 * trigonometry: the simulations of test_drift and test_cs draw tens of
 * millions). */
static inline void unit_normal2(calib_rng *r, double *a, double *b)
{
    double u, v, s;
    do {
        u = 2 * calib_rng_uniform(r) - 1;
        v = 2 * calib_rng_uniform(r) - 1;
        s = u * u + v * v;
    } while (s >= 1);
    double f = sqrt(-2 * log(s) / s);
    *a = u * f;
    *b = v * f;
}

#endif
