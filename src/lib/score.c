/* score.c — per-sample proper scores (Brier, log, Dawid-Sebastiani). */
#include <math.h>

#include "calib/calib.h"

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

/* p = exp(z - zmax - lse): the reference's formula (SciPy's softmax), not
 * exp(z - zmax) / s, which saves K exps but moves p by an ulp, and a p on a
 * bin's edge (1/25 on one of 100 bins) to the next bin. Returns lse. */
static double softmax_shifted(const double *z, size_t k, double zmax, double *p)
{
    double lse = lse_shifted(z, k, zmax);
    for (size_t i = 0; i < k; i++)
        p[i] = exp((z[i] - zmax) - lse);
    return lse;
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
