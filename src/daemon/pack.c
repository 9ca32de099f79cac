/* pack.c — the figures every reply map of calibd repeats. */
#include "pack.h"

void pack_estimate(calib_mpw *w, const calib_accum *a)
{
    double ci[2];
    calib_accum_ci95(a, ci);
    calib_mpw_map(w);
    calib_mpw_key(w, "mean");
    calib_mpw_num(w, calib_accum_mean(a));
    calib_mpw_key(w, "ci");
    calib_mpw_pair(w, ci);
    calib_mpw_key(w, "n");
    calib_mpw_uint(w, a->n);
    calib_mpw_end(w);
}

