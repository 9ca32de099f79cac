/*
 * expk.c — the exp kernels of the temperature fit (see expk.h).
 *
 * A libm call per element costs 3-7 ns on the project machine and forces
 * the loop's accumulators through memory; the inline exp below keeps them
 * in registers and, with GCC/Clang vector extensions, runs two lanes at a
 * time on baseline x86-64 and four where the CPU has AVX2. The exp itself
 * is EXP_NEG (expk.h), which scoring's softmax shares.
 */
#include "expk.h"

static inline double exp_neg(double x)
{
    double e;
    EXP_NEG(x, e, double, uint64_t);
    return e;
}

enum { MODE_SUM, MODE_MOMENTS, MODE_SQUARES };

/* Elements j.. of the row, one at a time. A weight below the range is 0
 * and its d never enters a product (it may be -inf). */
static inline void kernel_tail(const double *z, size_t j, size_t k, double zmax,
                               double beta, int mode, double *s)
{
    for (; j < k; j++) {
        double d = z[j] - zmax, x = beta * d;
        if (!(x >= EXPK_ARG_MIN))
            continue;
        double w = exp_neg(x);
        s[0] += w;
        if (mode == MODE_MOMENTS) {
            double dw = d * w;
            s[1] += dw;
            s[2] += d * dw;
            s[3] += d * d * dw;
        } else if (mode == MODE_SQUARES) {
            s[1] += w * w;
        }
    }
}

#define DEFINE_SCALAR_KERNEL(name, MODE)                                    \
    static void name(const double *z, size_t k, double zmax, double beta,   \
                     double *s)                                             \
    {                                                                       \
        s[0] = s[1] = s[2] = s[3] = 0;                                      \
        kernel_tail(z, 0, k, zmax, beta, (MODE), s);                        \
    }
DEFINE_SCALAR_KERNEL(kernel_sum_s, MODE_SUM)
DEFINE_SCALAR_KERNEL(kernel_moments_s, MODE_MOMENTS)
DEFINE_SCALAR_KERNEL(kernel_squares_s, MODE_SQUARES)
static const calib_expk kernels_scalar = {
    "scalar", kernel_sum_s, kernel_moments_s, kernel_squares_s,
};

/* CALIB_NO_VECTOR and CALIB_NO_AVX2 (compile-time) leave the wider paths
 * out, for porting. */
#if defined(__GNUC__) && !defined(CALIB_NO_VECTOR)
#define EXPK_VECTOR 1
/*
 * One vector of W elements at z + J into the accumulators a0..a3. A lane
 * whose beta d is below the range (or -inf) takes the exp of the range's
 * end instead, which raises no invalid or overflow flag, and the mask
 * then makes its w = +0 (and its d = 0, so that -inf never meets a 0
 * weight in a product).
 */
#define KERNEL_STEP(T, U, MODE, J, a0, a1, a2, a3)                          \
    do {                                                                    \
        T d, x, w;                                                          \
        memcpy(&d, z + (J), sizeof d);                                      \
        d -= vmax;                                                          \
        x = beta * d;                                                       \
        U ok = (U)(x >= vmin);                                              \
        x = (T)(((U)x & ok) | ((U)vmin & ~ok));                             \
        EXP_NEG(x, w, T, U);                                                \
        w = (T)((U)w & ok);                                                 \
        a0 += w;                                                            \
        if ((MODE) == MODE_MOMENTS) {                                       \
            d = (T)((U)d & ok);                                             \
            T dw = d * w;                                                   \
            a1 += dw;                                                       \
            a2 += d * dw;                                                   \
            a3 += d * d * dw;                                               \
        } else if ((MODE) == MODE_SQUARES) {                                \
            a1 += w * w;                                                    \
        }                                                                   \
    } while (0)

/* UNROLL (1 or 2) vectors per iteration, each with its own accumulators:
 * with two, the exp's long dependency chains overlap -- a gain with 16-byte
 * vectors, a loss with 32-byte ones, where the eight accumulators no
 * longer fit the registers (measured: 150 -> 140 ms and 65 -> 84 ms). */
#define KERNEL_BODY(T, U, W, UNROLL, MODE)                                  \
    const T vmax = (T){0} + zmax, vmin = (T){0} + EXPK_ARG_MIN;             \
    T a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                               \
    T b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};                               \
    size_t j = 0;                                                           \
    for (; (UNROLL) == 2 && j + 2 * (W) <= k; j += 2 * (W)) {               \
        KERNEL_STEP(T, U, MODE, j, a0, a1, a2, a3);                         \
        KERNEL_STEP(T, U, MODE, j + (W), b0, b1, b2, b3);                   \
    }                                                                       \
    for (; j + (W) <= k; j += (W))                                          \
        KERNEL_STEP(T, U, MODE, j, a0, a1, a2, a3);                         \
    a0 += b0;                                                               \
    a1 += b1;                                                               \
    a2 += b2;                                                               \
    a3 += b3;                                                               \
    s[0] = s[1] = s[2] = s[3] = 0;                                          \
    for (int l = 0; l < (W); l++) {                                         \
        s[0] += a0[l];                                                      \
        s[1] += a1[l];                                                      \
        s[2] += a2[l];                                                      \
        s[3] += a3[l];                                                      \
    }                                                                       \
    kernel_tail(z, j, k, zmax, beta, (MODE), s)

#define DEFINE_KERNEL(name, T, U, W, UNROLL, MODE, ATTR)                    \
    ATTR static void name(const double *z, size_t k, double zmax,          \
                          double beta, double *s)                           \
    {                                                                       \
        KERNEL_BODY(T, U, W, UNROLL, MODE);                                 \
    }

typedef double v2d __attribute__((vector_size(16)));
typedef uint64_t v2u __attribute__((vector_size(16)));
DEFINE_KERNEL(kernel_sum_v2, v2d, v2u, 2, 2, MODE_SUM, )
DEFINE_KERNEL(kernel_moments_v2, v2d, v2u, 2, 2, MODE_MOMENTS, )
DEFINE_KERNEL(kernel_squares_v2, v2d, v2u, 2, 2, MODE_SQUARES, )
static const calib_expk kernels_vec2 = {
    "vec2", kernel_sum_v2, kernel_moments_v2, kernel_squares_v2,
};

#if (defined(__x86_64__) || defined(__i386__)) && !defined(CALIB_NO_AVX2)
#define EXPK_AVX2 1
#define AVX2 __attribute__((target("avx2")))
typedef double v4d __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));
DEFINE_KERNEL(kernel_sum_v4, v4d, v4u, 4, 1, MODE_SUM, AVX2)
DEFINE_KERNEL(kernel_moments_v4, v4d, v4u, 4, 1, MODE_MOMENTS, AVX2)
DEFINE_KERNEL(kernel_squares_v4, v4d, v4u, 4, 1, MODE_SQUARES, AVX2)
static const calib_expk kernels_vec4 = {
    "vec4", kernel_sum_v4, kernel_moments_v4, kernel_squares_v4,
};
#endif
#endif /* vector extensions */

const calib_expk *calib_expk_get(int isa)
{
    switch (isa) {
    case CALIB_EXPK_SCALAR:
        return &kernels_scalar;
#ifdef EXPK_VECTOR
    case CALIB_EXPK_VEC2:
        return &kernels_vec2;
#endif
#ifdef EXPK_AVX2
    case CALIB_EXPK_VEC4:
        return __builtin_cpu_supports("avx2") ? &kernels_vec4 : NULL;
#endif
    }
    return NULL;
}

const calib_expk *calib_expk_select(int widest)
{
    for (int isa = widest; isa > CALIB_EXPK_SCALAR; isa--) {
        const calib_expk *k = calib_expk_get(isa);
        if (k)
            return k;
    }
    return &kernels_scalar;
}
