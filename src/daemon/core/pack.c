/* pack.c — the figures every reply map of calibd repeats. */
#include <math.h>

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


static void pack_bool_key(calib_mpw *w, const char *key, int b)
{
    calib_mpw_key(w, key);
    calib_mpw_bool(w, b);
}

/* {"mean", "lo", "hi"} of a label-free estimate. */
static void pack_lf_est(calib_mpw *w, const char *key, const calib_lfree_est *e)
{
    calib_mpw_key(w, key);
    calib_mpw_map(w);
    calib_mpw_key(w, "mean");
    calib_mpw_num(w, e->mean);
    calib_mpw_key(w, "lo");
    calib_mpw_num(w, e->lo);
    calib_mpw_key(w, "hi");
    calib_mpw_num(w, e->hi);
    calib_mpw_end(w);
}

static void pack_nums(calib_mpw *w, const char *key, const double *v, size_t n)
{
    calib_mpw_key(w, key);
    if (!v) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        calib_mpw_num(w, v[i]);
    calib_mpw_end(w);
}

void pack_label_free(calib_mpw *w, const calib_lfree *lf, const calib_accum graded[2],
                     const calib_accum since[2], uint64_t last_alarm)
{
    if (!lf) {
        calib_mpw_nil(w);
        return;
    }
    const calib_lfree_fig *f = &lf->fig;
    size_t k = lf->cfg.k;
    int gauss = !k, corr = f->corrected;
    const calib_lfree_est *best = corr ? f->corrected_est : f->naive;
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "predictions", f->n);
    calib_mpw_key_uint(w, "seen", lf->total);
    calib_mpw_key_uint(w, "figures_seen", f->at); /* "seen" when they were computed */
    calib_mpw_key_uint(w, "capacity", lf->cfg.recent);
    if (gauss) {
        pack_lf_est(w, "dss", &f->naive[CALIB_LFREE_MAIN]);
    } else {
        pack_bool_key(w, "corrected", corr);
        pack_lf_est(w, "brier", &best[CALIB_LFREE_MAIN]);
        pack_lf_est(w, "naive_brier", &f->naive[CALIB_LFREE_MAIN]);
        pack_lf_est(w, "log", &best[CALIB_LFREE_LOG]);
        pack_lf_est(w, "naive_log", &f->naive[CALIB_LFREE_LOG]);
        pack_lf_est(w, "accuracy", &best[CALIB_LFREE_ACC]);
        pack_lf_est(w, "naive_accuracy", &f->naive[CALIB_LFREE_ACC]);
        /* K numbers a list: listed up to the K the priors' intervals cover,
         * so that a map stays small whatever K producers send */
        int have = f->n > 0 && k <= CALIB_LFREE_INTERVAL_MAX_K;
        pack_nums(w, "priors", have ? lf->priors : NULL, k);
        pack_nums(w, "priors_lo", have && corr ? lf->prior_lo : NULL, k);
        pack_nums(w, "priors_hi", have && corr ? lf->prior_hi : NULL, k);
        pack_nums(w, "reference_priors", have && corr ? lf->src : NULL, k);
        calib_mpw_key(w, "em");
        calib_mpw_map(w);
        calib_mpw_key_uint(w, "passes", f->em_passes);
        pack_bool_key(w, "converged", f->em_converged);
        calib_mpw_end(w);
    }
    /* realized less estimated on the joined pairs: the estimates graded */
    static const char *const estimate[2] = {"naive", "corrected"};
    calib_mpw_key(w, "graded");
    calib_mpw_map(w);
    for (int i = 0; i < 2; i++) {
        calib_mpw_key(w, estimate[i]);
        pack_estimate(w, &graded[i]);
    }
    calib_mpw_key(w, "since_params");
    calib_mpw_map(w);
    for (int i = 0; i < 2; i++) {
        calib_mpw_key(w, estimate[i]);
        pack_estimate(w, &since[i]);
    }
    calib_mpw_end(w);
    calib_mpw_end(w);
    calib_mpw_key(w, "shift");
    if (lf->test_on) {
        calib_mpw_map(w);
        pack_bool_key(w, "alarm", lf->alarm);
        calib_mpw_key(w, "log_e");
        calib_mpw_num(w, calib_lfree_log_e(lf));
        calib_mpw_key(w, "threshold");
        calib_mpw_num(w, log(1 / lf->cfg.alpha));
        calib_mpw_key_uint(w, "predictions", lf->test_n);
        calib_mpw_key_uint(w, "alarms", lf->alarms);
        calib_mpw_key(w, "last_alarm_seen"); /* "seen" at the last alarm */
        if (last_alarm)
            calib_mpw_uint(w, last_alarm);
        else
            calib_mpw_nil(w);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    calib_mpw_end(w);
}
