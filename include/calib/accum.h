/*
 * Accumulators: count, sum and sum of squares with Neumaier-compensated
 * summation; mean, standard error and a 95% normal interval; exact merge.
 * Exponentially decayed accumulators for "recent" levels.
 */
#ifndef CALIB_ACCUM_H
#define CALIB_ACCUM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_Z95 1.959963984540054 /* Phi^-1(0.975) */

/* A Neumaier compensated sum; its value is sum + comp. */
typedef struct calib_ksum {
    double sum;
    double comp;
} calib_ksum;

static inline void calib_ksum_add(calib_ksum *k, double x)
{
    double t = k->sum + x;
    double ax = x < 0 ? -x : x, as = k->sum < 0 ? -k->sum : k->sum;
    if (as >= ax)
        k->comp += (k->sum - t) + x;
    else
        k->comp += (x - t) + k->sum;
    k->sum = t;
}

static inline double calib_ksum_value(const calib_ksum *k)
{
    return k->sum + k->comp;
}

void calib_ksum_merge(calib_ksum *dst, const calib_ksum *src);

typedef struct calib_accum {
    uint64_t n;
    calib_ksum s1; /* sum of x */
    calib_ksum s2; /* sum of x^2 */
} calib_accum;

void calib_accum_init(calib_accum *a);

static inline void calib_accum_add(calib_accum *a, double x)
{
    a->n++;
    calib_ksum_add(&a->s1, x);
    calib_ksum_add(&a->s2, x * x);
}

void calib_accum_merge(calib_accum *dst, const calib_accum *src);
double calib_accum_mean(const calib_accum *a); /* NaN when n = 0 */
double calib_accum_var(const calib_accum *a);  /* sample variance; NaN when n < 2 */
double calib_accum_se(const calib_accum *a);   /* sqrt(var / n); NaN when n < 2 */
/* mean -/+ 1.96 se; both NaN when n < 2. */
void calib_accum_ci95(const calib_accum *a, double ci[2]);

/*
 * Exponentially decayed accumulator: a sample's weight halves every
 * half_life units of the clock t (seconds, or a sample counter). Clocks that
 * go backwards are treated as "now". Mean, standard error (with the Kish
 * effective sample size w^2 / sum w^2) and 95% interval as above.
 */
typedef struct calib_decay {
    double half_life;
    double t;  /* clock of the last update */
    double w;  /* sum of weights */
    double w2; /* sum of squared weights */
    double s1; /* weighted sum of x */
    double s2; /* weighted sum of x^2 */
} calib_decay;

int calib_decay_init(calib_decay *d, double half_life); /* half_life > 0 */
void calib_decay_add(calib_decay *d, double x, double t);
double calib_decay_mean(const calib_decay *d);
double calib_decay_neff(const calib_decay *d);
double calib_decay_se(const calib_decay *d);
void calib_decay_ci95(const calib_decay *d, double ci[2]);

#ifdef __cplusplus
}
#endif

#endif
