/* unit.h — cmocka plus the approximate comparisons libcalib's tests need. */
#ifndef CALIB_TEST_UNIT_H
#define CALIB_TEST_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

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

#endif
