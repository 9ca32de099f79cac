/* status.c — the status map (see status.h). Pure: it reads the daemon's
 * counters and its models, and packs; nothing here does I/O. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "model.h"
#include "pack.h"
#include "refit.h"
#include "status.h"

static const char *refit_reason_or_none(int r)
{
    const char *n = refit_reason_name(r);
    return n ? n : "none";
}

void status_pack_values(calib_mpw *w, const model_params *p)
{
    calib_mpw_map(w);
    for (unsigned i = 0; p->desc && i < p->n; i++) {
        calib_mpw_key(w, p->desc->param_names[i]);
        calib_mpw_num(w, p->values[i]);
    }
    calib_mpw_end(w);
}

static void pack_bool(calib_mpw *w, const char *key, int b)
{
    calib_mpw_key(w, key);
    calib_mpw_bool(w, b);
}

static void pack_drift(calib_mpw *w, const model_recalib *l)
{
    static const char *states[] = {"reference", "watching", "alarm"};
    const calib_drift *dr = &l->drift;
    if (!l->drift_on) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key(w, "state");
    calib_mpw_str(w, states[dr->state]);
    calib_mpw_key(w, "reference");
    pack_estimate(w, &dr->ref);
    calib_mpw_key(w, "since_reference");
    pack_estimate(w, &dr->watch);
    calib_mpw_key(w, "bound");
    calib_mpw_num(w, dr->state == CALIB_DRIFT_REFERENCE ? NAN : dr->null_mean);
    calib_mpw_key(w, "log_e");
    calib_mpw_num(w, calib_drift_log_e(dr));
    calib_mpw_key_uint(w, "alarms", l->drift_alarms);
    calib_mpw_key_uint(w, "resets", dr->resets);
    /* a Gaussian model's tests of its residuals above and below their
     * reference median (nil for a classifier) */
    calib_mpw_key(w, "location");
    if (!l->loc_on) {
        calib_mpw_nil(w);
    } else {
        static const char *const side[2] = {"above", "below"};
        calib_mpw_map(w);
        for (int i = 0; i < 2; i++) {
            const calib_drift *lc = &l->loc[i];
            calib_mpw_key(w, side[i]);
            calib_mpw_map(w);
            calib_mpw_key(w, "state");
            calib_mpw_str(w, states[lc->state]);
            calib_mpw_key(w, "bound"); /* the rate the test rejects */
            calib_mpw_num(w, lc->state == CALIB_DRIFT_REFERENCE ? NAN : lc->null_mean);
            calib_mpw_key(w, "log_e");
            calib_mpw_num(w, calib_drift_log_e(lc));
            calib_mpw_end(w);
        }
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* The guard of the version in force, or nil. */
static void pack_guard(calib_mpw *w, const model_recalib *l)
{
    if (!l->guard_on) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key(w, "against");
    calib_mpw_uint(w, l->guard_prev.version);
    calib_mpw_key(w, "worse_by"); /* the version in force minus the one before */
    pack_estimate(w, &l->guard.diff);
    calib_mpw_key(w, "log_e");
    calib_mpw_num(w, calib_gate_log_e(&l->guard));
    pack_bool(w, "alarm", l->guard.state == CALIB_GATE_PASSED);
    calib_mpw_end(w);
}

/* "method" and "values" of unpublished parameters, into an open map. */
static void pack_method(calib_mpw *w, const model_params *p)
{
    calib_mpw_key(w, "method");
    calib_mpw_str(w, p->method);
    calib_mpw_key(w, "values");
    status_pack_values(w, p);
}

static void pack_shadow(calib_mpw *w, const model_recalib *l)
{
    if (l->refit.phase != PHASE_SHADOW) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    pack_method(w, &l->candidate);
    calib_mpw_key(w, "improvement");
    pack_estimate(w, &l->gate.diff);
    calib_mpw_key(w, "log_e");
    calib_mpw_num(w, calib_gate_log_e(&l->gate));
    calib_mpw_end(w);
}

/* The miscalibration trigger, or nil when off. */
static void pack_trigger(calib_mpw *w, const model *m)
{
    const model_recalib *l = &m->recalib;
    if (!m->cfg.miscal_trigger) {
        calib_mpw_nil(w);
        return;
    }
    const char *state = !l->trig_on                          ? "waiting"
                        : l->trig.state == CALIB_GATE_PASSED ? "alarm"
                                                             : "testing";
    calib_mpw_map(w);
    calib_mpw_key(w, "state");
    calib_mpw_str(w, state);
    calib_mpw_key(w, "challenger");
    if (l->trig_on) {
        calib_mpw_map(w);
        pack_method(w, &l->challenger);
        calib_mpw_key(w, "fit_n");
        calib_mpw_uint(w, l->challenger.fit_n);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    calib_mpw_key(w, "improvement"); /* S(in force) - S(challenger), this period */
    if (l->trig_on)
        pack_estimate(w, &l->trig.diff);
    else
        calib_mpw_nil(w);
    calib_mpw_key(w, "log_e");
    calib_mpw_num(w, l->trig_on ? calib_gate_log_e(&l->trig) : 0);
    calib_mpw_key_uint(w, "alarms", l->miscal_alarms);
    calib_mpw_end(w);
}

static void status_pack_loop(calib_mpw *w, const model *m)
{
    const model_recalib *l = &m->recalib;
    calib_mpw_map(w);
    pack_bool(w, "on", l->refit.phase != PHASE_OFF);
    calib_mpw_key(w, "phase");
    calib_mpw_str(w, refit_phase_name(l->refit.phase));
    calib_mpw_key(w, "drift");
    pack_drift(w, l);
    pack_bool(w, "refit_running", l->refit.phase == PHASE_FITTING);
    calib_mpw_key(w, "refit_pending");
    if (l->refit.pending)
        calib_mpw_str(w, refit_reason_or_none(l->refit.pending));
    else
        calib_mpw_nil(w);
    calib_mpw_key_uint(w, "refits", l->refits);
    calib_mpw_key_uint(w, "refit_errors", l->refit_errors);
    calib_mpw_key_uint(w, "candidates", l->candidates);
    calib_mpw_key_uint(w, "published", l->published);
    calib_mpw_key_uint(w, "rejected", l->rejected);
    calib_mpw_key_uint(w, "withheld", l->withheld);
    calib_mpw_key_uint(w, "store_errors", l->store_errors);
    calib_mpw_key_uint(w, "rollbacks", l->rollbacks);
    calib_mpw_key_uint(w, "cancelled", l->cancelled);
    calib_mpw_key(w, "trigger");
    pack_trigger(w, m);
    calib_mpw_key(w, "shadow");
    pack_shadow(w, l);
    calib_mpw_key(w, "guard");
    pack_guard(w, l);
    calib_mpw_key_uint(w, "alerts", m->alerts);
    calib_mpw_end(w);
}

static void pack_rejected(calib_mpw *w, const uint64_t *counts)
{
    calib_mpw_map(w);
    for (int r = 0; r < REJ_MAX; r++)
        if (counts[r])
            calib_mpw_key_uint(w, reject_name(r), counts[r]);
    calib_mpw_end(w);
}

/* {"brier": est, "rbs": x, "log": est, "ece": x, "tce2": x} or {"dss": est}
 * for one view, from accumulators acc[WS_PER_VIEW] and bins b (may be NULL) */
static void pack_view(calib_mpw *w, const model *m, const calib_accum *acc,
                      const calib_bins *b, const calib_cwbins *cw)
{
    calib_mpw_map(w);
    if (m->form == CALIB_FORM_GAUSSIAN) {
        calib_mpw_key(w, "dss");
        pack_estimate(w, &acc[WS_MAIN]);
        calib_mpw_end(w);
        return;
    }
    calib_mpw_key(w, "brier");
    pack_estimate(w, &acc[WS_MAIN]);
    calib_mpw_key(w, "rbs");
    calib_mpw_num(w, sqrt(calib_accum_mean(&acc[WS_MAIN])));
    calib_mpw_key(w, "log");
    pack_estimate(w, &acc[WS_LOG]);
    if (b) {
        calib_mpw_key(w, "ece");
        calib_mpw_num(w, calib_bins_ece(b));
        calib_mpw_key(w, "tce2");
        calib_mpw_num(w, calib_bins_tce2(b));
    }
    if (cw) {
        calib_mpw_key(w, "cwce2");
        calib_mpw_num(w, calib_cwbins_cwce2(cw));
    }
    calib_mpw_end(w);
}

static void pack_join(calib_mpw *w, const model *m)
{
    const calib_join *j = &m->join;
    calib_mpw_map(w);
    calib_mpw_key(w, "ttl");
    calib_mpw_num(w, j->cfg.ttl);
    calib_mpw_key_uint(w, "capacity", j->cfg.capacity);
    calib_mpw_key_uint(w, "joined", j->joined);
    calib_mpw_key_uint(w, "waiting_predictions", j->waiting_preds);
    calib_mpw_key_uint(w, "waiting_labels", j->waiting_labels);
    calib_mpw_key_uint(w, "expired_predictions", j->expired_preds);
    calib_mpw_key_uint(w, "expired_labels", j->expired_labels);
    calib_mpw_key_uint(w, "evicted", j->evicted);
    calib_mpw_key_uint(w, "duplicate_predictions", j->duplicate_preds);
    calib_mpw_key_uint(w, "duplicate_labels", j->duplicate_labels);
    calib_mpw_key_uint(w, "forgotten_joined_ids", j->forgotten);
    calib_mpw_key(w, "sample");
    calib_mpw_num(w, calib_join_sample_fraction(j));
    calib_mpw_key_uint(w, "sampled_out_predictions", j->sampled_out_preds);
    calib_mpw_key_uint(w, "sampled_out_labels", j->sampled_out_labels);
    calib_mpw_key_uint(w, "id_kind_mismatches", m->id_kind_mismatches);
    calib_mpw_end(w);
}

static void pack_params(calib_mpw *w, const model_params *p)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "method");
    calib_mpw_str(w, p->method);
    calib_mpw_key_uint(w, "version", p->version);
    calib_mpw_key(w, "values");
    status_pack_values(w, p);
    calib_mpw_key(w, "published");
    calib_mpw_num(w, p->version ? p->ts : NAN);
    calib_mpw_key(w, "improvement");
    calib_mpw_num(w, p->version ? p->improvement : NAN);
    calib_mpw_key(w, "ci");
    calib_mpw_pair(w, p->ci);
    calib_mpw_key(w, "segments"); /* their own parameters (SEGMENTS) */
    calib_mpw_array(w);
    for (unsigned i = 0; p->desc && i < p->nseg; i++) {
        model_params one = *p;
        memcpy(one.values, p->seg[i].values, sizeof one.values);
        calib_mpw_map(w);
        calib_mpw_key(w, "key");
        calib_mpw_str(w, p->seg[i].key);
        calib_mpw_key(w, "value");
        calib_mpw_str(w, p->seg[i].value);
        calib_mpw_key(w, "values");
        status_pack_values(w, &one);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_key(w, "prior_weights"); /* the prior correction (LABEL-FREE) */
    calib_mpw_array(w);
    for (unsigned j = 0; j < p->nw; j++)
        calib_mpw_num(w, p->w[j]);
    calib_mpw_end(w);
    calib_mpw_key(w, "label_free");
    calib_mpw_bool(w, p->label_free);
    calib_mpw_end(w);
}

/* {"brier": est, "log": est} or {"dss": est} */
static void pack_scores(calib_mpw *w, const model *m, const calib_accum *acc)
{
    calib_mpw_map(w);
    calib_mpw_key(w, m->form == CALIB_FORM_GAUSSIAN ? "dss" : "brier");
    pack_estimate(w, &acc[WS_MAIN]);
    if (m->form != CALIB_FORM_GAUSSIAN) {
        calib_mpw_key(w, "log");
        pack_estimate(w, &acc[WS_LOG]);
    }
    calib_mpw_end(w);
}

/* A confidence sequence's interval (model_cs's rc): [low, high], nil
 * without pairs, or "empty" when the mean moved. */
static void pack_cs_interval(calib_mpw *w, int rc, double lo, double hi)
{
    if (rc < 0) {
        calib_mpw_str(w, "empty");
    } else {
        double b[2] = {lo, hi};
        calib_mpw_pair(w, b); /* NaN (no pairs): nil */
    }
}

/* "raw" and "calibrated": the scope's sequences, or a closed period's. */
static void pack_cs_views(calib_mpw *w, const model *m, int scope, const model_period_end *e)
{
    static const char *const view[VIEWS] = {"raw", "calibrated"};
    for (int v = 0; v < VIEWS; v++) {
        calib_mpw_key(w, view[v]);
        if (e) {
            pack_cs_interval(w, e->rc[v], e->lo[v], e->hi[v]);
        } else {
            double lo, hi;
            int rc = model_cs(m, scope, v, &lo, &hi);
            pack_cs_interval(w, rc, lo, hi);
        }
    }
}

/* The window's period (model_period): its sequences, and the last closed
 * period's intervals. */
static void pack_period(calib_mpw *w, const model *m)
{
    const model_period *pd = &m->period;
    if (!m->cs_on) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key(w, "alpha");
    calib_mpw_num(w, m->cfg.cs_alpha);
    calib_mpw_key(w, "since");
    calib_mpw_num(w, pd->running ? pd->since : NAN);
    calib_mpw_key(w, "until");
    calib_mpw_num(w, pd->running ? pd->end : NAN);
    calib_mpw_key_uint(w, "scored", pd->running ? pd->cs[VIEW_RAW].n : 0);
    pack_cs_views(w, m, CS_PERIOD, NULL);
    calib_mpw_key(w, "last");
    if (!pd->last.n) {
        calib_mpw_nil(w);
    } else {
        calib_mpw_map(w);
        calib_mpw_key(w, "since");
        calib_mpw_num(w, pd->last.since);
        calib_mpw_key(w, "until");
        calib_mpw_num(w, pd->last.until);
        calib_mpw_key_uint(w, "scored", pd->last.n);
        pack_cs_views(w, m, CS_PERIOD, &pd->last);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* Both views on the same pairs since the current parameters took over. */
static void pack_paired(calib_mpw *w, const model *m)
{
    const model_paired *p = &m->paired;
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "version", p->version);
    calib_mpw_key(w, "since");
    calib_mpw_num(w, p->since);
    calib_mpw_key_uint(w, "scored", p->view[VIEW_RAW][WS_MAIN].n);
    calib_mpw_key(w, "raw");
    pack_scores(w, m, p->view[VIEW_RAW]);
    calib_mpw_key(w, "calibrated");
    pack_scores(w, m, p->view[VIEW_CAL]);
    calib_mpw_key(w, "improvement");
    pack_scores(w, m, p->diff);
    /* anytime-valid: the intervals of every time hold the mean together */
    calib_mpw_key(w, "cs");
    if (!m->cs_on) {
        calib_mpw_nil(w);
    } else {
        calib_mpw_map(w);
        calib_mpw_key(w, "alpha");
        calib_mpw_num(w, m->cfg.cs_alpha);
        pack_cs_views(w, m, CS_PAIRED, NULL);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

static void pack_bins(calib_mpw *w, const calib_bins *b)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "count");
    calib_mpw_array(w);
    for (uint32_t i = 0; i < b->m; i++)
        calib_mpw_uint(w, b->count[i]);
    calib_mpw_end(w);
    calib_mpw_key(w, "confidence");
    calib_mpw_array(w);
    for (uint32_t i = 0; i < b->m; i++)
        calib_mpw_double(w, calib_ksum_value(&b->conf[i]));
    calib_mpw_end(w);
    calib_mpw_key(w, "correct");
    calib_mpw_array(w);
    for (uint32_t i = 0; i < b->m; i++)
        calib_mpw_uint(w, b->correct[i]);
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* The top-label reliability bins of both views, cumulative and in the
 * window: the reliability diagram. */
static void pack_reliability(calib_mpw *w, const model *m)
{
    const calib_bins *b[2][VIEWS] = {{&m->top[VIEW_RAW], &m->top[VIEW_CAL]},
                                     {&m->view.w.top[VIEW_RAW], &m->view.w.top[VIEW_CAL]}};
    static const char *scopes[2] = {"cumulative", "window"};
    calib_mpw_map(w);
    calib_mpw_key(w, "bins");
    calib_mpw_uint(w, m->top[VIEW_RAW].m);
    for (int s = 0; s < 2; s++) {
        calib_mpw_key(w, scopes[s]);
        if (s == 1 && !m->view.have) {
            calib_mpw_nil(w);
            continue;
        }
        calib_mpw_map(w);
        calib_mpw_key(w, "raw");
        pack_bins(w, b[s][VIEW_RAW]);
        calib_mpw_key(w, "calibrated");
        pack_bins(w, b[s][VIEW_CAL]);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* One tracked value (or "other") of a segment key. */
static void pack_segment(calib_mpw *w, const model *m, const seg_slot *sl, int other)
{
    seg_figures f;
    seg_figures_of(sl, &f);
    int bins = m->form != CALIB_FORM_GAUSSIAN;
    calib_mpw_map(w);
    calib_mpw_key(w, "value"); /* the other bucket: nil, which no value can be */
    if (other)
        calib_mpw_nil(w);
    else
        calib_mpw_str(w, sl->name);
    calib_mpw_key(w, "other");
    calib_mpw_bool(w, other);
    if (!other) {
        calib_mpw_key_uint(w, "count", sl->count);
        calib_mpw_key_uint(w, "count_error", sl->err);
        calib_mpw_key(w, "since");
        calib_mpw_num(w, sl->since);
    }
    calib_mpw_key_uint(w, "pairs", f.pairs);
    calib_mpw_key(w, "raw");
    pack_scores(w, m, sl->score[VIEW_RAW]);
    calib_mpw_key(w, "calibrated");
    pack_scores(w, m, sl->score[VIEW_CAL]);
    if (bins) {
        calib_mpw_key(w, "ece");
        calib_mpw_num(w, f.ece[VIEW_CAL]);
        calib_mpw_key(w, "gap");
        calib_mpw_num(w, f.gap);
        calib_mpw_key(w, "gap_ci");
        calib_mpw_pair(w, f.gap_ci);
        calib_mpw_key(w, "gap_lo");
        calib_mpw_num(w, f.gap_lo);
    }
    if (bins && !other) {
        calib_mpw_key(w, "e");
        calib_mpw_num(w, exp(f.log_e));
        calib_mpw_key(w, "flagged");
        calib_mpw_bool(w, sl->flagged);
        calib_mpw_key(w, "flagged_at");
        calib_mpw_num(w, sl->flagged ? sl->flagged_at : NAN);
        calib_mpw_key(w, "e_flagged"); /* the e-value it was flagged with */
        calib_mpw_num(w, exp(f.log_e_flag));
    }
    if (bins && !other) { /* its own recalibration (segment_refit) */
        const seg_fix *fx = sl->fix;
        calib_mpw_key(w, "refit");
        calib_mpw_map(w);
        calib_mpw_key(w, "phase");
        calib_mpw_str(w, !fx ? "none" : fx->phase == SEG_FIX_COLLECT ? "collecting" : "shadow");
        calib_mpw_key_uint(w, "collected", fx ? fx->n : 0);
        calib_mpw_key_uint(w, "of", fx ? fx->cap : 0);
        int shadow = fx && fx->phase == SEG_FIX_SHADOW;
        calib_mpw_key_uint(w, "shadow_pairs", shadow ? fx->gate.pairs : 0);
        calib_mpw_key(w, "shadow_log_e");
        calib_mpw_num(w, shadow ? calib_gate_log_e(&fx->gate) : NAN);
        calib_mpw_key(w, "improvement");
        calib_mpw_num(w, shadow ? calib_accum_mean(&fx->gate.diff) : NAN);
        calib_mpw_key_uint(w, "fits", sl->fits);
        calib_mpw_key_uint(w, "fit_errors", sl->fit_errors);
        calib_mpw_key_uint(w, "passed", sl->passed);
        calib_mpw_key_uint(w, "failed", sl->failed);
        calib_mpw_end(w);
    }
    if (bins) {
        calib_mpw_key(w, "reliability");
        calib_mpw_map(w);
        calib_mpw_key(w, "raw");
        pack_bins(w, &sl->top[VIEW_RAW]);
        calib_mpw_key(w, "calibrated");
        pack_bins(w, &sl->top[VIEW_CAL]);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* Per segment key its segment_status worst values (the size of a status
 * does not grow with segment_values), then "other". */
static void pack_segments(calib_mpw *w, const model *m)
{
    const seg_table *t = &m->seg;
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "keys", t->cfg.keys);
    calib_mpw_key_uint(w, "values", t->cfg.values);
    calib_mpw_key(w, "alpha");
    calib_mpw_num(w, t->cfg.alpha);
    calib_mpw_key(w, "min_effect");
    calib_mpw_num(w, t->cfg.min_effect);
    calib_mpw_key_uint(w, "keys_full", t->keys_full);
    calib_mpw_key_uint(w, "refused", t->refused);
    calib_mpw_key_uint(w, "late", t->late);
    calib_mpw_key(w, "by_key");
    calib_mpw_map(w);
    size_t most = (size_t)m->cfg.segment_status;
    size_t *idx = t->nkeys ? malloc((most ? most : 1) * sizeof *idx) : NULL;
    for (size_t i = 0; i < t->nkeys && idx; i++) {
        const seg_key *k = &t->key[i];
        calib_mpw_key(w, k->name);
        calib_mpw_map(w);
        calib_mpw_key_uint(w, "tracked", k->used);
        size_t n = seg_rank(t, i, idx, most);
        calib_mpw_key_uint(w, "listed", n); /* of them, below */
        calib_mpw_key_uint(w, "evictions", k->evictions);
        calib_mpw_key_uint(w, "flagged", k->flags);
        calib_mpw_key(w, "threshold");
        calib_mpw_num(w, exp(seg_log_threshold(t, 1))); /* flags a value alone */
        calib_mpw_key(w, "segments");
        calib_mpw_array(w);
        for (size_t j = 0; j < n; j++)
            pack_segment(w, m, &k->slot[idx[j]], 0);
        pack_segment(w, m, seg_other(t, i), 1);
        calib_mpw_end(w);
        calib_mpw_end(w);
    }
    free(idx);
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* The newest events, oldest first. */
static void pack_events(calib_mpw *w, const model *m)
{
    calib_mpw_array(w);
    for (size_t i = 0; i < model_events_len(m); i++) {
        const model_event *e = model_event_get(m, i);
        calib_mpw_map(w);
        calib_mpw_key(w, "t");
        calib_mpw_num(w, e->t);
        calib_mpw_key(w, "kind");
        calib_mpw_str(w, e->kind);
        calib_mpw_key(w, "text");
        calib_mpw_str(w, e->text);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* The window as the last tick summed it (model_view), or nil. */
static void pack_window(calib_mpw *w, const model *m)
{
    const model_view *v = &m->view;
    int bins = m->form != CALIB_FORM_GAUSSIAN;
    if (!v->have) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key(w, "seconds");
    calib_mpw_num(w, m->cfg.window);
    calib_mpw_key(w, "at");
    calib_mpw_num(w, v->at);
    calib_mpw_key_uint(w, "scored", v->w.stat[WS_MAIN].n);
    calib_mpw_key(w, "raw");
    pack_view(w, m, &v->w.stat[VIEW_RAW * WS_PER_VIEW], bins ? &v->w.top[VIEW_RAW] : NULL,
              NULL);
    calib_mpw_key(w, "calibrated");
    pack_view(w, m, &v->w.stat[VIEW_CAL * WS_PER_VIEW], bins ? &v->w.top[VIEW_CAL] : NULL,
              NULL);
    /* anytime-valid within a period of the window's length */
    calib_mpw_key(w, "cs");
    pack_period(w, m);
    calib_mpw_end(w);
}

/* "label_free": pack_label_free with the model's grading and alarm. */
static void pack_model_label_free(calib_mpw *w, const model *m)
{
    calib_accum all[2], since[2];
    model_lf_graded(m, all, since);
    pack_label_free(w, m->lf.rec ? &m->lf : NULL, all, since, m->lf_last_alarm);
}

static void pack_model(calib_mpw *w, const model *m)
{
    int shaped = m->shaped;
    calib_mpw_map(w);
    calib_mpw_key(w, "form");
    if (shaped)
        calib_mpw_str(w, calib_form_name(m->form));
    else
        calib_mpw_nil(w);
    calib_mpw_key(w, "k");
    if (shaped && m->form != CALIB_FORM_GAUSSIAN)
        calib_mpw_uint(w, m->k);
    else
        calib_mpw_nil(w);
    calib_mpw_key_uint(w, "predictions", m->predictions);
    calib_mpw_key_uint(w, "labels", m->labels);
    calib_mpw_key_uint(w, "scored", m->scored);
    calib_mpw_key_uint(w, "scored_inline", m->inline_scored);
    calib_mpw_key(w, "rejected");
    pack_rejected(w, m->rejected);
    calib_mpw_key(w, "params");
    pack_params(w, &m->params);
    calib_mpw_key_uint(w, "alerts", m->alerts);
    calib_mpw_key(w, "memory");
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "bytes", m->mem.used);
    calib_mpw_key_uint(w, "most", m->sizes.bytes);
    calib_mpw_key_uint(w, "refused", m->mem.refused);
    calib_mpw_end(w);
    calib_mpw_key(w, "events");
    pack_events(w, m);
    /* labels wait before the model's first prediction too */
    calib_mpw_key(w, "join");
    pack_join(w, m);
    if (shaped) {
        int bins = m->form != CALIB_FORM_GAUSSIAN;
        calib_mpw_key(w, "loop");
        status_pack_loop(w, m);
        calib_mpw_key(w, "raw");
        pack_view(w, m, m->cum[VIEW_RAW], bins ? &m->top[VIEW_RAW] : NULL,
                  m->cw.k ? &m->cw : NULL);
        calib_mpw_key(w, "calibrated");
        pack_view(w, m, m->cum[VIEW_CAL], bins ? &m->top[VIEW_CAL] : NULL, NULL);
        calib_mpw_key(w, "calibrated_since_params");
        pack_view(w, m, m->paired.view[VIEW_CAL], NULL, NULL);
        calib_mpw_key(w, "paired");
        pack_paired(w, m);
        if (bins) {
            calib_mpw_key(w, "reliability");
            pack_reliability(w, m);
        }
        calib_mpw_key(w, "window");
        pack_window(w, m);
        calib_mpw_key_uint(w, "stale_window_samples", m->stale);
        calib_mpw_key(w, "segments");
        pack_segments(w, m);
        calib_mpw_key(w, "label_free");
        pack_model_label_free(w, m);
        calib_mpw_key(w, "samples");
        calib_mpw_map(w);
        calib_mpw_key_uint(w, "reservoir", calib_reservoir_len(&m->reservoir));
        calib_mpw_key_uint(w, "ring", calib_ring_len(&m->ring));
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* ------------------------------------------------------------ commands */

/* "kafka": the group, the partitions held now, the counters. */
static void pack_kafka(calib_mpw *w, const status_daemon *s)
{
    const kafka_stats *k = &s->kstats;
    calib_mpw_key(w, "kafka");
    calib_mpw_map(w);
    calib_mpw_key(w, "group");
    calib_mpw_str(w, s->kafka_group ? s->kafka_group : "");
    calib_mpw_key(w, "partitions");
    calib_mpw_array(w);
    for (size_t i = 0; i < s->nkparts; i++) {
        const kafka_part *p = s->kparts[i];
        if (!p->assigned)
            continue;
        calib_mpw_map(w);
        calib_mpw_key(w, "topic");
        calib_mpw_str(w, p->topic);
        calib_mpw_key(w, "partition");
        calib_mpw_int(w, p->partition);
        calib_mpw_key(w, "next");
        calib_mpw_int(w, p->next);
        calib_mpw_key(w, "saved");
        calib_mpw_int(w, p->saved);
        calib_mpw_key(w, "committed");
        calib_mpw_int(w, p->committed);
        calib_mpw_key_uint(w, "messages", p->messages);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    const struct {
        const char *key;
        uint64_t v;
    } c[] = {{"messages", k->messages}, {"skipped", k->skipped}, {"stray", k->stray},
             {"errors", k->errors}, {"rebalances", k->rebalances}, {"assigned", k->assigned},
             {"revoked", k->revoked}, {"lost", k->lost}, {"snapshots", k->snapshots},
             {"snapshot_errors", k->snapshot_errors}, {"commits", k->commits},
             {"commit_errors", k->commit_errors}, {"restored", k->restored},
             {"restore_errors", k->restore_errors}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++)
        calib_mpw_key_uint(w, c[i].key, c[i].v);
    calib_mpw_end(w);
}

void status_begin(calib_mpw *w, const status_daemon *s)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 1);
    calib_mpw_key(w, "version");
    calib_mpw_str(w, PACKAGE_VERSION);
    calib_mpw_key(w, "uptime");
    calib_mpw_num(w, s->uptime);
    calib_mpw_key_uint(w, "messages", s->counts.messages);
    calib_mpw_key(w, "rejected");
    pack_rejected(w, s->counts.rejected);
    calib_mpw_key_uint(w, "publish_errors", s->counts.publish_errors);
    calib_mpw_key_uint(w, "config_reloads", s->counts.reloads);
    calib_mpw_key_uint(w, "config_reloads_refused", s->counts.reloads_refused);
    calib_mpw_key_uint(w, "models_forgotten", s->counts.models_forgotten);
    calib_mpw_key_uint(w, "models_expired", s->counts.models_expired);
    calib_mpw_key(w, "alerts");
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "sent", s->counts.alerts_sent);
    calib_mpw_key_uint(w, "suppressed", s->counts.alerts_suppressed);
    calib_mpw_key_uint(w, "sink_failed", s->counts.sinks_failed);
    calib_mpw_key_uint(w, "sink_killed", s->counts.sinks_killed);
    calib_mpw_key_uint(w, "sink_dropped", s->counts.sinks_dropped);
    calib_mpw_end(w);
    calib_mpw_key(w, "memory");
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "bytes", s->mem_bytes);
    calib_mpw_key_uint(w, "limit", s->mem_limit);
    calib_mpw_key_uint(w, "refused", s->mem_refused);
    calib_mpw_key_uint(w, "models", s->models);
    calib_mpw_key_uint(w, "max_models", s->max_models);
    calib_mpw_end(w);
    if (s->kafka)
        pack_kafka(w, s);
    calib_mpw_key(w, "models");
    calib_mpw_map(w);
}

void status_model(calib_mpw *w, const model *m)
{
    calib_mpw_key(w, m->name);
    pack_model(w, m);
}

void status_end(calib_mpw *w)
{
    calib_mpw_end(w);
    calib_mpw_end(w);
}

void status_error(calib_mpw *w, const char *why)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 0);
    calib_mpw_key(w, "error");
    calib_mpw_str(w, why);
    calib_mpw_end(w);
}

void status_pack(calib_mpw *w, const status_daemon *s, model *const *models, size_t n,
                 const model *only)
{
    status_begin(w, s);
    for (size_t i = 0; i < n; i++)
        if ((!only || models[i] == only) && !models[i]->handed_over)
            status_model(w, models[i]);
    status_end(w);
}
