/*
 * vec4.h — libcalib's vectors of four doubles (internal, not installed),
 * for the loops that run on every pair: the confidence sequence's products
 * (cs.c) and a row's exps, divisions and squares (score.c).
 *
 * With GCC and clang, calib_vec4 is four doubles, which the compiler lowers
 * to two SSE2 registers on baseline x86-64 (NEON on arm64, its own lowering
 * elsewhere); without them, or with CALIB_NO_VEC4 defined (the tests that
 * compile a file again as plain C), CALIB_VEC4 is undefined and the loops
 * are scalar. Never passed or returned by a function: that would change
 * the ABI by target.
 *
 * CALIB_CLONES on a function compiles it twice on x86-64 Linux, for AVX2
 * and for the baseline, and the dynamic loader picks the one the CPU runs
 * (an ifunc). AVX2 brings no FMA, and Makefile.am's -ffp-contract=off
 * forbids fusing anyway, so both give the same bits.
 */
#ifndef CALIB_VEC4_H
#define CALIB_VEC4_H

#if defined(__GNUC__) && !defined(CALIB_NO_VEC4)
#define CALIB_VEC4 1
typedef double calib_vec4 __attribute__((vector_size(4 * sizeof(double))));
/* its lanes' bits, for masks (a comparison of two calib_vec4 gives -1 or 0) */
typedef unsigned long long calib_vec4u __attribute__((vector_size(4 * sizeof(double))));
#endif

/* CALIB_BASELINE_ONLY: the baseline alone, no clones (the tests that check
 * the baseline's bits on a CPU that would pick AVX2) */
#if defined(CALIB_VEC4) && defined(__x86_64__) && defined(__linux__) && defined(__has_attribute) && \
    !defined(CALIB_BASELINE_ONLY)
#if __has_attribute(target_clones)
#define CALIB_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CALIB_CLONES
#define CALIB_CLONES
#endif

#endif
