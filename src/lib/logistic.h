/* logistic.h — libcalib's logistic functions (internal, not installed),
 * shared by the Platt fits: the batch one (recal.c) and the online one
 * (online.c), so that both compute the same numbers. */
#ifndef CALIB_LOGISTIC_H
#define CALIB_LOGISTIC_H

#include <math.h>

/* sigmoid(u) without overflow for either sign of u. */
static inline double sigmoid(double u)
{
    if (u >= 0)
        return 1 / (1 + exp(-u));
    double e = exp(u);
    return e / (1 + e);
}

/* ln(1 + e^u) without overflow. */
static inline double softplus(double u)
{
    return (u > 0 ? u : 0) + log1p(exp(-fabs(u)));
}

#endif
