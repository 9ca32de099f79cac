/* score.c — per-sample proper scores (Brier, log, Dawid-Sebastiani). */
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "softmax.h"

/* ------------------------------------------------------------------ checks */

int calib_check_logits(const double *z, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (!isfinite(z[i]))
            return CALIB_ENONFINITE;
    return CALIB_OK;
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

static double max_of(const double *z, size_t k)
{
    double m = z[0];
    for (size_t i = 1; i < k; i++)
        if (z[i] > m)
            m = z[i];
    return m;
}

/* ln sum_k exp(z_k - zmax); >= 0 because one term is exp(0). */
static double lse_shifted(const double *z, size_t k, double zmax)
{
    double s = 0;
    for (size_t i = 0; i < k; i++)
        s += exp(z[i] - zmax);
    return log(s);
}

/* p = exp(z - zmax) / s with s their sum, summed left to right: one exp a
 * class, as SciPy's softmax and the reference (tests/ref) compute it, and
 * within a few ulps of the true p however small (exp(z - zmax - lse) loses
 * |z - zmax - lse| ulps). Returns ln s. */
static double softmax_shifted(const double *z, size_t k, double zmax, double *p)
{
    return calib_softmax_row(z, k, zmax, 1, p);
}

/* GCC and clang vectors of four doubles (two SSE2 registers on baseline
 * x86-64), and on x86-64 Linux the divisions compiled for AVX2 too, the
 * loader picking by CPU: a division is correctly rounded lane by lane, so
 * the quotients are the scalar loop's bit for bit. */
#if defined(__GNUC__)
typedef double vd4 __attribute__((vector_size(4 * sizeof(double))));
#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define DIV_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#endif
#ifndef DIV_CLONES
#define DIV_CLONES
#endif

DIV_CLONES
static void divide_row(double *p, size_t k, double s)
{
    size_t j = 0;
#if defined(__GNUC__)
    const vd4 vs = {s, s, s, s};
    for (; j + 4 <= k; j += 4) {
        vd4 v;
        memcpy(&v, p + j, sizeof v);
        v /= vs;
        memcpy(p + j, &v, sizeof v);
    }
#endif
    for (; j < k; j++)
        p[j] /= s;
}

double calib_softmax_row(const double *z, size_t k, double zmax, double beta, double *p)
{
    double s = 0;
    for (size_t j = 0; j < k; j++) {
        p[j] = exp(beta * (z[j] - zmax));
        s += p[j];
    }
    divide_row(p, k, s);
    return log(s);
}

void calib_softmax(const double *z, size_t k, double *p)
{
    softmax_shifted(z, k, max_of(z, k), p);
}

double calib_log_softmax_at(const double *z, size_t k, size_t y)
{
    double zmax = max_of(z, k);
    return (z[y] - zmax) - lse_shifted(z, k, zmax);
}

size_t calib_argmax(const double *p, size_t k)
{
    size_t best = 0;
    for (size_t i = 1; i < k; i++)
        if (p[i] > p[best])
            best = i;
    return best;
}

/* ------------------------------------------------------------------ scores */

static double log_clamped(double logp)
{
    static const double cap = 34.538776394910684; /* -ln(1e-15) */
    double s = -logp;
    return s < cap ? s : cap;
}

static double brier_of(const double *p, size_t k, size_t y)
{
    double s = 0;
    for (size_t i = 0; i < k; i++) {
        double d = p[i] - (i == y ? 1.0 : 0.0);
        s += d * d;
    }
    return s;
}

void calib_score_probs(const double *p, size_t k, size_t y, calib_score *s)
{
    s->brier = brier_of(p, k, y);
    s->log = -log(p[y] > CALIB_LOG_FLOOR ? p[y] : CALIB_LOG_FLOOR);
}

void calib_score_logits(const double *z, size_t k, size_t y, double *p,
                        calib_score *s)
{
    double zmax = max_of(z, k);
    double lse = softmax_shifted(z, k, zmax, p);
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
