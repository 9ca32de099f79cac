/*
 * audit.h — the classification figures of `calibctl score`, shared with
 * `calibctl sizes` so that both compute every figure the same way: a checked
 * row's probabilities and per-sample proper scores, accumulated beside
 * libcalib's binned estimators.
 */
#ifndef CALIBCTL_AUDIT_H
#define CALIBCTL_AUDIT_H

#include <stddef.h>

#include "calib/calib.h"
#include "pred_csv.h"

/* Probabilities p[k] and per-sample scores of one classification row x,
 * as pred_row checked it (logits, probabilities or a binary p), label y. */
void audit_classify(const pred_layout *l, const double *x, size_t y, double *p,
                    calib_score *sc);

typedef struct audit {
    calib_accum brier, log;
    calib_estimator est;
} audit;

/* The figures of one sample set. */
typedef struct audit_figures {
    calib_estimates e;
    double brier; /* mean Brier score, the upper bound U */
    double rbs;   /* sqrt(brier) */
    double log;   /* mean log score */
} audit_figures;

/* k classes, room for cap samples (it grows). CALIB_OK or a CALIB_E* code. */
int audit_init(audit *a, size_t k, size_t cap);
void audit_free(audit *a);
/* Empties it, keeping the store's capacity. */
void audit_reset(audit *a);
/* One sample: p from audit_classify, y < k, its scores; the store doubles
 * when full. CALIB_OK or a CALIB_E* code. */
int audit_add(audit *a, const double *p, size_t y, const calib_score *sc);
/* The top-label confidence and correctness of the sample added last, as
 * the binned estimators took them (argmax ties to the lowest index). */
calib_toplabel audit_last(const audit *a);
/* CALIB_EEMPTY without samples. */
int audit_finish(audit *a, audit_figures *f);

#endif
