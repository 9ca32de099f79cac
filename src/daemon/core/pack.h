/* pack.h — the figures every reply map of calibd repeats, written with the
 * self-counting writer (calib/mpw.h). */
#ifndef CALIBD_PACK_H
#define CALIBD_PACK_H

#include <stdint.h>

#include "calib/accum.h"
#include "calib/lfree.h"
#include "calib/mpw.h"

/* {"mean": m, "ci": [lo, hi] or nil, "n": n} */
void pack_estimate(calib_mpw *w, const calib_accum *a);

/*
 * "label_free" (calibd(8), LABEL-FREE): lf's figures (nil when lf is NULL),
 * with the grading of joined pairs, realized less estimated, naive and
 * corrected, since the start (graded) and since the parameters (since),
 * and the number of predictions seen at the last alarm (0: none). "brier",
 * "log" and "accuracy" are the corrected estimates when there is a
 * reference ("corrected": true), else the naive ones; "naive_*" always the
 * naive ones; "dss" for a Gaussian. calibd's status and calibctl score
 * --label-free write it.
 */
void pack_label_free(calib_mpw *w, const calib_lfree *lf, const calib_accum graded[2],
                     const calib_accum since[2], uint64_t last_alarm);

#endif
