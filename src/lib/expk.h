/*
 * expk.h — libcalib's internal exp kernels (not installed).
 *
 * The temperature fit spends nearly all its time summing exp(beta d) over a
 * row of logits. These kernels do one such sum per call, on one of three
 * instruction sets: the portable scalar loop, two-lane vectors (SSE2 on
 * x86-64; any 16-byte GCC/Clang vector elsewhere) and four-lane vectors
 * (AVX2, x86 only). The paths differ only in summation order (~1e-16
 * relative); each is tested against libm in tests/unit/test_expk.c.
 *
 * Contract of one call, for a row z of k doubles, a reference zmax (the
 * row's maximum, or anything >= every z_j) and beta > 0:
 *
 *   d_j = z_j - zmax (<= 0),  w_j = exp(beta d_j)  if beta d_j >= EXPK_ARG_MIN
 *                             w_j = 0              otherwise
 *
 * A weight below exp(EXPK_ARG_MIN) ~ 3e-308 cannot change a sum that holds
 * the maximum's weight 1, so setting it to 0 is exact at double precision;
 * its d (which may be -inf for z = -DBL_MAX) then never enters a product.
 *
 *   sum:     s[0] = sum w
 *   moments: s[0..3] = sum w, sum d w, sum d^2 w, sum d^3 w
 *   squares: s[0] = sum w, s[1] = sum w^2
 *
 * s must hold 4 doubles (every kernel writes all four).
 */
#ifndef CALIB_EXPK_H
#define CALIB_EXPK_H

#include <stddef.h>

#define EXPK_ARG_MIN (-708.0) /* exp(-708) ~ 3e-308, still normal */

enum calib_expk_isa {
    CALIB_EXPK_SCALAR = 0, /* portable C */
    CALIB_EXPK_VEC2 = 1,   /* 2 lanes: SSE2 on x86-64 */
    CALIB_EXPK_VEC4 = 2,   /* 4 lanes: AVX2 */
};

typedef void (*calib_expk_fn)(const double *z, size_t k, double zmax,
                              double beta, double *s);

typedef struct calib_expk {
    const char *name; /* "scalar", "vec2", "vec4" */
    calib_expk_fn sum, moments, squares;
} calib_expk;

/* The kernels of exactly this instruction set, or NULL when this build or
 * this CPU has none. */
const calib_expk *calib_expk_get(int isa);
/* The widest kernels this CPU runs that are no wider than `widest`. */
const calib_expk *calib_expk_select(int widest);

#endif
