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
#include <stdint.h>
#include <string.h>

#define EXPK_ARG_MIN (-708.0) /* exp(-708) ~ 3e-308, still normal */

#define EXP_SHIFT 0x1.8p52
#define EXP_LOG2E 0x1.71547652b82fep0
#define EXP_LN2_HI 0x1.62e42fee00000p-1 /* n * hi is exact for |n| < 2^21 */
#define EXP_LN2_LO 0x1.a39ef35793c76p-33

/* exp(x) for x in [EXPK_ARG_MIN, 0], on a double or a vector of doubles;
 * U is the matching unsigned 64-bit type. A macro, so that each vector
 * width expands inside a function compiled for it; the temperature fit's
 * kernels (expk.c) and scoring's softmax (score.c) use it.
 *
 * x = n ln2 + r, |r| <= ln2/2 (Cody-Waite split of ln2, n by the
 * 1.5*2^52 rounding trick), exp(r) by its degree-13 Taylor polynomial in
 * Estrin form (truncation < 5e-18), exp(r) - 1 summed before the 1 is
 * added, 2^n assembled in the exponent bits. Measured over 240 million
 * arguments in [-708, 0] (random, near the reduction's edges, at
 * integers, random bit patterns): about 1 ulp of the exact exp (1.02 the
 * largest seen), within 1 ulp of glibc's and equal to it for 78-90%;
 * exp(0) is exactly 1. Every operation is one IEEE operation (GCC in C11 mode
 * contracts nothing into an FMA, clang only where FMA is enabled, and
 * Makefile.am's -ffp-contract=off forbids it to both), so a lane of any
 * width gives the scalar's bits. Outside the range the result is garbage
 * (even NaN) and IEEE flags are raised: callers pass EXPK_ARG_MIN in such
 * a lane and mask its result. */
#define EXP_NEG(x, out, T, U)                                               \
    do {                                                                    \
        T t_ = (x) * EXP_LOG2E + EXP_SHIFT;                                 \
        T n_ = t_ - EXP_SHIFT;                                              \
        T r_ = (x) - n_ * EXP_LN2_HI - n_ * EXP_LN2_LO;                     \
        T r2_ = r_ * r_, r4_ = r2_ * r2_, r8_ = r4_ * r4_;                  \
        T p23_ = 1.0 / 2 + r_ * (1.0 / 6);                                  \
        T p47_ = (1.0 / 24 + r_ * (1.0 / 120))                              \
                 + r2_ * (1.0 / 720 + r_ * (1.0 / 5040));                   \
        T p8d_ = (1.0 / 40320 + r_ * (1.0 / 362880))                        \
                 + r2_ * (1.0 / 3628800 + r_ * (1.0 / 39916800))            \
                 + r4_ * (1.0 / 479001600 + r_ * (1.0 / 6227020800));       \
        /* exp(r) - 1, its small terms summed first; the 1 added last */    \
        T q_ = r_ + (r2_ * p23_ + (r4_ * p47_ + r8_ * p8d_));               \
        U b_;                                                               \
        memcpy(&b_, &t_, sizeof b_);                                        \
        /* the low mantissa bits of t_ hold n in two's complement */        \
        b_ = (b_ + 1023) << 52;                                             \
        T s_;                                                               \
        memcpy(&s_, &b_, sizeof s_);                                        \
        (out) = (1 + q_) * s_;                                              \
    } while (0)

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
