/* accum.c — compensated accumulators and exponentially decayed ones. */
#include <math.h>

#include "calib/calib.h"

void calib_ksum_merge(calib_ksum *dst, const calib_ksum *src)
{
    calib_ksum_add(dst, src->sum);
    calib_ksum_add(dst, src->comp);
}

/* ---------------------------------------------------------- plain accum */

void calib_accum_init(calib_accum *a)
{
    *a = (calib_accum){0};
}

void calib_accum_merge(calib_accum *dst, const calib_accum *src)
{
    dst->n += src->n;
    calib_ksum_merge(&dst->s1, &src->s1);
    calib_ksum_merge(&dst->s2, &src->s2);
}

double calib_accum_mean(const calib_accum *a)
{
    return a->n ? calib_ksum_value(&a->s1) / (double)a->n : NAN;
}

double calib_accum_var(const calib_accum *a)
{
    if (a->n < 2)
        return NAN;
    double n = (double)a->n, s1 = calib_ksum_value(&a->s1);
    double v = (calib_ksum_value(&a->s2) - s1 * (s1 / n)) / (n - 1);
    return v > 0 ? v : 0; /* cancellation can leave a tiny negative */
}

double calib_accum_se(const calib_accum *a)
{
    return sqrt(calib_accum_var(a) / (double)a->n);
}

static void ci95(double mean, double se, double ci[2])
{
    if (isnan(se)) {
        ci[0] = ci[1] = NAN;
        return;
    }
    ci[0] = mean - CALIB_Z95 * se;
    ci[1] = mean + CALIB_Z95 * se;
}

void calib_accum_ci95(const calib_accum *a, double ci[2])
{
    ci95(calib_accum_mean(a), calib_accum_se(a), ci);
}

/* ---------------------------------------------------------- decayed accum */

int calib_decay_init(calib_decay *d, double half_life)
{
    if (!(half_life > 0) || !isfinite(half_life))
        return CALIB_EINVAL;
    *d = (calib_decay){.half_life = half_life, .t = NAN};
    return CALIB_OK;
}

void calib_decay_add(calib_decay *d, double x, double t)
{
    if (isnan(d->t)) {
        d->t = t;
    } else if (t > d->t) {
        double f = exp2(-(t - d->t) / d->half_life);
        d->w *= f;
        d->w2 *= f * f;
        d->s1 *= f;
        d->s2 *= f;
        d->t = t;
    }
    d->w += 1;
    d->w2 += 1;
    d->s1 += x;
    d->s2 += x * x;
}

double calib_decay_mean(const calib_decay *d)
{
    return d->w > 0 ? d->s1 / d->w : NAN;
}

double calib_decay_neff(const calib_decay *d)
{
    return d->w2 > 0 ? d->w * d->w / d->w2 : 0;
}

double calib_decay_se(const calib_decay *d)
{
    double neff = calib_decay_neff(d);
    if (!(neff > 1))
        return NAN;
    double m = d->s1 / d->w;
    double v = d->s2 / d->w - m * m; /* weighted population variance */
    if (v < 0)
        v = 0;
    v *= neff / (neff - 1); /* small-sample correction */
    return sqrt(v / neff);
}

void calib_decay_ci95(const calib_decay *d, double ci[2])
{
    ci95(calib_decay_mean(d), calib_decay_se(d), ci);
}
