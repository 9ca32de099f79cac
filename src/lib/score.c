/* score.c — per-sample proper scores (Brier, log, Dawid-Sebastiani). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "calib/calib.h"
#include "expk.h"
#include "softmax.h"
#include "vec4.h"

/* ------------------------------------------------------------------ checks */

int calib_check_logits(const double *z, size_t k)
{
    /* z * 0 is 0 for a finite z and NaN for an infinity or a NaN, so the
     * sum is NaN exactly when some z is not finite: no branch a value */
    double zero[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (int l = 0; l < 4; l++)
            zero[l] += z[i + l] * 0;
    for (; i < k; i++)
        zero[0] += z[i] * 0;
    return isnan(zero[0] + zero[1] + zero[2] + zero[3]) ? CALIB_ENONFINITE : CALIB_OK;
}

int calib_check_probs(const double *p, size_t k)
{
    double sum = 0;
    for (size_t i = 0; i < k; i++) {
        if (!isfinite(p[i]))
            return CALIB_ENONFINITE;
        if (p[i] < 0 || p[i] > 1)
            return CALIB_EPROB;
        sum += p[i];
    }
    if (fabs(sum - 1) > CALIB_PROB_SUM_TOL)
        return CALIB_EPROBSUM;
    return CALIB_OK;
}

int calib_check_binary(double p)
{
    if (!isfinite(p))
        return CALIB_ENONFINITE;
    return p < 0 || p > 1 ? CALIB_EPROB : CALIB_OK;
}

int calib_check_gaussian(double mean, double var)
{
    if (!isfinite(mean) || !isfinite(var))
        return CALIB_ENONFINITE;
    return var > 0 ? CALIB_OK : CALIB_EVAR;
}

int calib_check_label(double y, size_t k)
{
    if (!isfinite(y))
        return CALIB_ENONFINITE;
    if (y < 0 || y != floor(y) || y >= (double)k)
        return CALIB_ELABEL;
    return CALIB_OK;
}

/* ------------------------------------------------------------------ softmax */

/* (the clones are static: clang 14 leaves an exported function with
 * target_clones undefined) */
CALIB_CLONES
static double row_max(const double *z, size_t k)
{
    /* four independent maxima: a single chain is latency-bound. A NaN is
     * never taken (x > NaN and NaN > x are false) unless z[0] is one. In
     * vectors (vec4.h) the same comparisons lane by lane, so the same
     * maximum. */
    double m[4] = {z[0], z[0], z[0], z[0]};
    size_t j = 0;
#ifdef CALIB_VEC4
    calib_vec4 vm = {z[0], z[0], z[0], z[0]};
    for (; j + 4 <= k; j += 4) {
        calib_vec4 x;
        memcpy(&x, z + j, sizeof x);
        calib_vec4u gt = (calib_vec4u)(x > vm);
        vm = (calib_vec4)(((calib_vec4u)x & gt) | ((calib_vec4u)vm & ~gt));
    }
    for (int l = 0; l < 4; l++)
        m[l] = vm[l];
#else
    for (; j + 4 <= k; j += 4)
        for (int l = 0; l < 4; l++)
            m[l] = z[j + l] > m[l] ? z[j + l] : m[l];
#endif
    for (; j < k; j++)
        m[0] = z[j] > m[0] ? z[j] : m[0];
    m[0] = m[1] > m[0] ? m[1] : m[0];
    m[2] = m[3] > m[2] ? m[3] : m[2];
    return m[2] > m[0] ? m[2] : m[0];
}

double calib_row_max(const double *z, size_t k)
{
    return row_max(z, k);
}

/* exp(x) for x <= 0: EXP_NEG (expk.h: within 1 ulp) in its range, and
 * glibc's own below it, where exp(x) < 3.4e-308 (or x is NaN, when
 * beta (z - zmax) is 0 * -inf or z is NaN) */
static inline double exp_le0(double x)
{
    if (!(x >= EXPK_ARG_MIN))
        return exp(x);
    double e;
    EXP_NEG(x, e, double, uint64_t);
    return e;
}

/*
 * p_j = exp(beta (z_j - zmax)), or none with p NULL; returns their sum,
 * taken in four partial sums (lane l holds the j = l mod 4 of the first
 * k - k mod 4), then (s0 + s1) + (s2 + s3), then the last k mod 4 in
 * order. In vectors (vec4.h), a lane whose argument is below EXPK_ARG_MIN
 * (or NaN) takes EXP_NEG of EXPK_ARG_MIN, so that no lane raises an
 * invalid or overflow flag, adds 0, and keeps its argument in p (a
 * weight is >= exp(-708) > 0, such an argument < -708 or NaN); a second
 * loop, run only for a row that has one, gives it glibc's exp. So p may
 * be z. Without vectors, the same operations in the same order in plain
 * C, so every build and CPU gives the same bits (test_score_lanes
 * compiles this file without vectors).
 */
CALIB_CLONES
static double exp_row(const double *z, size_t k, double zmax, double beta, double *p)
{
    size_t j = 0;
    double s[4] = {0, 0, 0, 0};
    int any_below = 0;
#ifdef CALIB_VEC4
    const calib_vec4 vmax = {zmax, zmax, zmax, zmax};
    const calib_vec4 vmin = {EXPK_ARG_MIN, EXPK_ARG_MIN, EXPK_ARG_MIN, EXPK_ARG_MIN};
    calib_vec4 acc = {0, 0, 0, 0};
    calib_vec4u below = {0, 0, 0, 0};
    for (; j + 4 <= k; j += 4) {
        calib_vec4 x, w;
        memcpy(&x, z + j, sizeof x);
        x = beta * (x - vmax);
        calib_vec4u in = (calib_vec4u)(x >= vmin);
        calib_vec4u xbits = (calib_vec4u)x;
        w = (calib_vec4)((xbits & in) | ((calib_vec4u)vmin & ~in));
        EXP_NEG(w, w, calib_vec4, calib_vec4u);
        calib_vec4u wbits = (calib_vec4u)w & in;
        acc += (calib_vec4)wbits;
        below |= ~in;
        if (p) {
            w = (calib_vec4)(wbits | (xbits & ~in));
            memcpy(p + j, &w, sizeof w);
        }
    }
    for (int l = 0; l < 4; l++)
        s[l] = acc[l];
    any_below = (below[0] | below[1] | below[2] | below[3]) != 0;
#else
    for (; j + 4 <= k; j += 4)
        for (int l = 0; l < 4; l++) {
            double x = beta * (z[j + l] - zmax), w = 0;
            if (x >= EXPK_ARG_MIN)
                EXP_NEG(x, w, double, uint64_t);
            else
                any_below = 1;
            s[l] += w;
            if (p)
                p[j + l] = x >= EXPK_ARG_MIN ? w : x;
        }
#endif
    /* a lane's sum may move; the total, which holds the maximum's 1, only
     * for a NaN */
    for (size_t i = 0; any_below && i < j; i++) {
        double x = p ? p[i] : beta * (z[i] - zmax); /* without p, z is intact */
        if (p ? p[i] >= 0 : x >= EXPK_ARG_MIN)
            continue;
        double e = exp(x);
        if (p)
            p[i] = e;
        s[i % 4] += e;
    }
    double sum = (s[0] + s[1]) + (s[2] + s[3]);
    for (; j < k; j++) {
        double e = exp_le0(beta * (z[j] - zmax));
        if (p)
            p[j] = e;
        sum += e;
    }
    return sum;
}

/* The quotients in vectors (vec4.h): a division is correctly rounded lane
 * by lane, so they are the scalar loop's bit for bit. */
CALIB_CLONES
static void divide_row(double *p, size_t k, double s)
{
    size_t j = 0;
#ifdef CALIB_VEC4
    const calib_vec4 vs = {s, s, s, s};
    for (; j + 4 <= k; j += 4) {
        calib_vec4 v;
        memcpy(&v, p + j, sizeof v);
        v /= vs;
        memcpy(p + j, &v, sizeof v);
    }
#endif
    for (; j < k; j++)
        p[j] /= s;
}

/* p = exp(beta (z - zmax)) / s with s their sum: one exp a class (EXP_NEG,
 * within 1 ulp of glibc's), as SciPy's softmax and the reference
 * (tests/ref) compute it, and within a few ulps of the true p however
 * small (exp(z - zmax - lse) loses |z - zmax - lse| ulps). Returns s. */
double calib_softmax_row(const double *z, size_t k, double zmax, double beta, double *p)
{
    double s = exp_row(z, k, zmax, beta, p);
    divide_row(p, k, s);
    return s;
}

void calib_softmax(const double *z, size_t k, double *p)
{
    calib_softmax_row(z, k, calib_row_max(z, k), 1, p);
}

double calib_log_softmax_at(const double *z, size_t k, size_t y)
{
    /* the log score of calib_score_logits, bit for bit (below its clamp) */
    double zmax = calib_row_max(z, k);
    return (z[y] - zmax) - log(exp_row(z, k, zmax, 1, NULL));
}

CALIB_CLONES
static size_t argmax(const double *p, size_t k)
{
    /* the first index holding the maximum, as a scan keeping the first
     * strictly greater value finds it (a NaN is never the maximum unless
     * p[0] is one; then no p equals it, and the answer is 0 as well); in
     * vectors (vec4.h), four at a time to the first four that hold it */
    if (k == 0)
        return 0;
    double m = row_max(p, k);
    size_t i = 0;
#ifdef CALIB_VEC4
    const calib_vec4 vm = {m, m, m, m};
    for (; i + 4 <= k; i += 4) {
        calib_vec4 x;
        memcpy(&x, p + i, sizeof x);
        calib_vec4u eq = (calib_vec4u)(x == vm);
        if (eq[0] | eq[1] | eq[2] | eq[3])
            break;
    }
#endif
    for (; i < k; i++)
        if (p[i] == m)
            return i;
    return 0;
}

size_t calib_argmax(const double *p, size_t k)
{
    return argmax(p, k);
}

/* ------------------------------------------------------------------ scores */

static double log_clamped(double logp)
{
    static const double cap = 34.538776394910684; /* -ln(1e-15) */
    double s = -logp;
    return s < cap ? s : cap;
}

/* sum of p[0..n)^2 in four partial sums (lane l the j = l mod 4 of the
 * first n - n mod 4), then (s0 + s1) + (s2 + s3), then the rest in order:
 * in vectors (vec4.h), or the same operations in plain C */
CALIB_CLONES
static double sum_squares(const double *p, size_t n)
{
    size_t j = 0;
    double s[4] = {0, 0, 0, 0};
#ifdef CALIB_VEC4
    calib_vec4 acc = {0, 0, 0, 0};
    for (; j + 4 <= n; j += 4) {
        calib_vec4 v;
        memcpy(&v, p + j, sizeof v);
        acc += v * v;
    }
    for (int l = 0; l < 4; l++)
        s[l] = acc[l];
#else
    for (; j + 4 <= n; j += 4)
        for (int l = 0; l < 4; l++)
            s[l] += p[j + l] * p[j + l];
#endif
    double sum = (s[0] + s[1]) + (s[2] + s[3]);
    for (; j < n; j++)
        sum += p[j] * p[j];
    return sum;
}

/* sum_i (p_i - [i = y])^2: the classes before y, after it, and y's own.
 * Every term is >= 0, so the order of the sums moves the result by a few
 * ulps at most (and adds no cancellation: (p_y - 1)^2 is its own term). */
static double brier_of(const double *p, size_t k, size_t y)
{
    if (y >= k) /* no read past p (the log score's p[y] still needs y < k) */
        return sum_squares(p, k);
    double d = p[y] - 1;
    return sum_squares(p, y) + sum_squares(p + y + 1, k - y - 1) + d * d;
}

void calib_score_probs(const double *p, size_t k, size_t y, calib_score *s)
{
    s->brier = brier_of(p, k, y);
    s->log = -log(p[y] > CALIB_LOG_FLOOR ? p[y] : CALIB_LOG_FLOOR);
}

void calib_score_logits(const double *z, size_t k, size_t y, double *p,
                        calib_score *s)
{
    double zmax = calib_row_max(z, k);
    double lse = log(calib_softmax_row(z, k, zmax, 1, p)); /* as calib_log_softmax_at */
    s->brier = brier_of(p, k, y);
    s->log = log_clamped((z[y] - zmax) - lse);
}

void calib_score_binary(double p, unsigned y, calib_score *s)
{
    double d = p - (y ? 1.0 : 0.0);
    double py = y ? p : 1 - p;
    s->brier = 2 * d * d;
    s->log = -log(py > CALIB_LOG_FLOOR ? py : CALIB_LOG_FLOOR);
}

double calib_score_dss(double mean, double var, double y)
{
    double d = y - mean;
    return d * d / var + log(var);
}
