/* audit.c — the classification figures of calibctl score and sizes. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "audit.h"

void audit_classify(const pred_layout *l, const double *x, size_t y, double *p,
                    calib_score *sc)
{
    switch (l->form) {
    case CALIB_FORM_LOGITS:
        calib_score_logits(x, l->k, y, p, sc);
        break;
    case CALIB_FORM_PROBS:
        memcpy(p, x, l->k * sizeof *p);
        calib_score_probs(p, l->k, y, sc);
        break;
    default:
        p[0] = 1 - x[0];
        p[1] = x[0];
        calib_score_binary(x[0], (unsigned)y, sc);
        break;
    }
}

int audit_init(audit *a, size_t k, size_t cap)
{
    *a = (audit){0};
    if (k == 0 || k > UINT32_MAX)
        return CALIB_EINVAL;
    return calib_estimator_init(&a->est, (uint32_t)k, cap ? cap : 1);
}

void audit_free(audit *a)
{
    calib_estimator_free(&a->est);
}

void audit_reset(audit *a)
{
    calib_accum_init(&a->brier);
    calib_accum_init(&a->log);
    calib_estimator_reset(&a->est);
}

int audit_add(audit *a, const double *p, size_t y, const calib_score *sc)
{
    int rc = calib_estimator_add(&a->est, p, y);
    if (rc == CALIB_EFULL) {
        /* the store grows by doubling: adding stays amortised O(1) */
        if (a->est.cap > SIZE_MAX / 2)
            return CALIB_ENOMEM;
        if ((rc = calib_estimator_reserve(&a->est, 2 * a->est.cap)) == CALIB_OK)
            rc = calib_estimator_add(&a->est, p, y);
    }
    if (rc != CALIB_OK)
        return rc;
    calib_accum_add(&a->brier, sc->brier);
    calib_accum_add(&a->log, sc->log);
    return CALIB_OK;
}

calib_toplabel audit_last(const audit *a)
{
    return a->est.v[a->est.n - 1]; /* in order of addition until finish sorts */
}

int audit_finish(audit *a, audit_figures *f)
{
    int rc = calib_estimator_finish(&a->est, &f->e);
    if (rc != CALIB_OK)
        return rc;
    f->brier = calib_accum_mean(&a->brier);
    f->rbs = sqrt(f->brier);
    f->log = calib_accum_mean(&a->log);
    return CALIB_OK;
}
