/* pack.h — the figures every reply map of calibd repeats, written with the
 * self-counting writer (calib/mpw.h). */
#ifndef CALIBD_PACK_H
#define CALIBD_PACK_H

#include <stdint.h>

#include "calib/accum.h"
#include "calib/mpw.h"

/* {"mean": m, "ci": [lo, hi] or nil, "n": n} */
void pack_estimate(calib_mpw *w, const calib_accum *a);

#endif
