/* prom.c — calibd's metrics in the Prometheus text exposition format
 * (version 0.0.4): the daemon's families, and each model's, family by
 * family (see prom.h). Every sample is rendered on the loop thread. */
#include "config.h"
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "status.h"
#include "prom.h"

/* What is being rendered into: one text (the daemon's families), or, with
 * fam set, the families' texts, one for each, help() moving to the next
 * (and writing its header only with headers set). */
typedef struct out {
    textbuf t;
    prom_families *fam;
    size_t cur;     /* families begun in this render */
    int headers;
} out;

/* Leaves the family being written, if any, in its text of fam. */
static void fam_stash(out *o)
{
    if (o->fam && o->cur)
        o->fam->f[o->cur - 1] = o->t;
}

/* The next family's text as o's; 0, or -1 out of memory. */
static int fam_next(out *o)
{
    prom_families *f = o->fam;
    fam_stash(o);
    if (o->cur == f->n) {
        if (f->n == f->cap) {
            size_t cap = f->cap ? 2 * f->cap : 64;
            textbuf *g = realloc(f->f, cap * sizeof *g);
            if (!g)
                return -1;
            f->f = g;
            f->cap = cap;
        }
        f->f[f->n++] = (textbuf){0};
    }
    textbuf *g = &f->f[o->cur++];
    if (!g->buf && !(g->buf = malloc(g->cap = 4096)))
        return -1;
    o->t = *g;
    o->t.failed = 0; /* help() moves on only while nothing failed */
    return 0;
}

__attribute__((format(printf, 2, 3)))
static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    textbuf_vput(&o->t, fmt, ap);
    va_end(ap);
}

/* One sample, name{labels} value, or none when the value is not finite:
 * a series without data is absent, never NaN, so that an alert rule on
 * it is not silently false. */
__attribute__((format(printf, 3, 4)))
static void sample(out *o, double x, const char *fmt, ...)
{
    if (!isfinite(x) || o->t.failed)
        return;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof head) {
        o->t.failed = 1;
        return;
    }
    put(o, "%s %.17g\n", head, x);
}

/* One model as the metrics see it: its window as the tick summed it
 * (model_view), the same that status and the alert rules read. */
typedef struct snap {
    const model *m;
    const calib_pane *w; /* both views' window scores; raw window bins */
    int have_w;
} snap;

static void help(out *t, const char *name, const char *type, const char *what)
{
    if (t->fam && !t->t.failed && fam_next(t) != 0) {
        t->t.failed = 1;
        t->cur = 0; /* the buffers stay the families', as stashed */
    }
    if (!t->fam || t->headers)
        put(t, "# HELP %s %s\n# TYPE %s %s\n", name, what, name, type);
}

/* A family of one unlabelled integer sample. */
static void one(out *t, const char *name, const char *type, const char *what,
                unsigned long long v)
{
    help(t, name, type, what);
    put(t, "%s %llu\n", name, v);
}

static void counters(out *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *what;
        size_t offset;
    } fam[] = {
        {"calibd_predictions_total", "Predictions accepted.", offsetof(model, predictions)},
        {"calibd_labels_total", "Labels accepted.", offsetof(model, labels)},
        {"calibd_scored_total", "Prediction-outcome pairs scored.", offsetof(model, scored)},
        {"calibd_drift_alarms_total", "Drift alarms of the calibrated score.",
         offsetof(model, recalib.drift_alarms)},
        {"calibd_refits_total", "Refits started.", offsetof(model, recalib.refits)},
        {"calibd_refit_errors_total", "Refits whose fit failed.", offsetof(model, recalib.refit_errors)},
        {"calibd_candidates_total", "Candidate parameters put in shadow.",
         offsetof(model, recalib.candidates)},
        {"calibd_candidates_published_total", "Candidates that passed the gate and were published.",
         offsetof(model, recalib.published)},
        {"calibd_candidates_rejected_total", "Candidates the gate did not pass.",
         offsetof(model, recalib.rejected)},
        {"calibd_candidates_store_errors_total", "Candidates that passed the gate but the "
         "state directory refused to store, so were not published.",
         offsetof(model, recalib.store_errors)},
        {"calibd_miscalibration_alarms_total", "Rejections of the miscalibration trigger: a "
         "recalibration fit on earlier pairs lowered the score by more than miscal_min_effect.",
         offsetof(model, recalib.miscal_alarms)},
        {"calibd_candidates_cancelled_total", "Refits made stale by a drift alarm after the "
         "samples they were fit on, dropped.", offsetof(model, recalib.cancelled)},
        {"calibd_rollbacks_total", "Versions the guard showed worse than the one before, "
         "which was published again (rollback = yes).", offsetof(model, recalib.rollbacks)},
        {"calibd_alerts_total", "Alerts sent.", offsetof(model, alerts)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, "counter", fam[f].what);
        for (size_t i = 0; i < n; i++)
            put(t, "%s{model=\"%s\"} %llu\n", fam[f].name, s[i].m->name,
                *(const unsigned long long *)((const char *)s[i].m + fam[f].offset));
    }
    help(t, "calibd_params_version", "gauge", "Version of the current parameters.");
    for (size_t i = 0; i < n; i++)
        put(t, "calibd_params_version{model=\"%s\"} %llu\n", s[i].m->name,
            (unsigned long long)s[i].m->params.version);
}

/* d NULL: the models' alone (a round's model by model) */
static void rejections(out *t, const calibd *d, const snap *s, size_t n)
{
    help(t, "calibd_rejected_total", "counter",
         "Rejected messages or records, by model (empty when unknown) and reason.");
    for (int r = 0; d && r < REJ_MAX; r++)
        if (d->rejected[r])
            put(t, "calibd_rejected_total{model=\"\",reason=\"%s\"} %llu\n", reject_name(r),
                (unsigned long long)d->rejected[r]);
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < REJ_MAX; r++)
            if (s[i].m->rejected[r])
                put(t, "calibd_rejected_total{model=\"%s\",reason=\"%s\"} %llu\n",
                    s[i].m->name, reject_name(r), (unsigned long long)s[i].m->rejected[r]);
}

static void joins(out *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *type, *what;
    } fam[] = {
        {"calibd_join_waiting", "gauge", "Predictions or labels waiting to be joined."},
        {"calibd_join_expired_total", "counter", "Items that waited the label TTL unmatched."},
        {"calibd_join_evicted_total", "counter", "Waiting items evicted by the memory bound."},
        {"calibd_join_duplicates_total", "counter", "Duplicate predictions or labels."},
        {"calibd_join_sampled_out_total", "counter",
         "Items dropped over capacity: their id out of the join's sample."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, fam[f].type, fam[f].what);
        for (size_t i = 0; i < n; i++) {
            const calib_join *j = &s[i].m->join;
            const char *name = s[i].m->name;
            if (!s[i].m->shaped)
                continue;
            uint64_t v[5][2] = {{j->waiting_preds, j->waiting_labels},
                                {j->expired_preds, j->expired_labels},
                                {j->evicted, 0},
                                {j->duplicate_preds, j->duplicate_labels},
                                {j->sampled_out_preds, j->sampled_out_labels}};
            if (f == 2) {
                put(t, "%s{model=\"%s\"} %llu\n", fam[f].name, name,
                    (unsigned long long)v[f][0]);
                continue;
            }
            put(t, "%s{model=\"%s\",kind=\"prediction\"} %llu\n", fam[f].name, name,
                (unsigned long long)v[f][0]);
            put(t, "%s{model=\"%s\",kind=\"label\"} %llu\n", fam[f].name, name,
                (unsigned long long)v[f][1]);
        }
    }
    help(t, "calibd_join_id_kind_mismatches_total", "counter",
         "Labels left waiting while their id's value waited as a prediction of the other kind (string "
         "\"5\" against integer 5: they never join); since the start.");
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped)
            put(t, "calibd_join_id_kind_mismatches_total{model=\"%s\"} %llu\n", s[i].m->name,
                (unsigned long long)s[i].m->id_kind_mismatches);
    help(t, "calibd_join_sample_fraction", "gauge",
         "Fraction of ids the join keeps: 1 until it is full, then a uniform sample.");
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped)
            put(t, "calibd_join_sample_fraction{model=\"%s\"} %.17g\n", s[i].m->name,
                calib_join_sample_fraction(&s[i].m->join));
}


/* The accumulators of one model, view and scope; NULL if not available. */
static const calib_accum *accums(const snap *s, int view, int window)
{
    if (!window)
        return s->m->cum[view];
    return s->have_w ? &s->w->stat[view * WS_PER_VIEW] : NULL;
}

/* which 0: mean, 1: lower end of the interval, 2: upper end */
static void score_family(out *t, const snap *s, size_t n, int which)
{
    static const char *names[3] = {"calibd_score_mean", "calibd_score_ci_low",
                                   "calibd_score_ci_high"};
    static const char *whats[3] = {
        "Mean proper score: for brier and log, the calibration upper bound U.",
        "Lower end of the 95% interval of the mean score.",
        "Upper end of the 95% interval of the mean score."};
    static const char *views[VIEWS] = {"raw", "calibrated"}, *scopes[2] = {"cumulative", "window"};
    help(t, names[which], "gauge", whats[which]);
    for (size_t i = 0; i < n; i++) {
        if (!s[i].m->shaped)
            continue;
        int reg = s[i].m->form == CALIB_FORM_GAUSSIAN;
        for (int v = 0; v < VIEWS; v++)
            for (int w = 0; w < 2; w++) {
                const calib_accum *acc = accums(&s[i], v, w);
                for (int k = 0; acc && k < (reg ? 1 : 2); k++) {
                    double ci[2];
                    calib_accum_ci95(&acc[k], ci);
                    sample(t, which == 0 ? calib_accum_mean(&acc[k]) : ci[which - 1],
                           "%s{model=\"%s\",view=\"%s\",scope=\"%s\",score=\"%s\"}",
                           names[which], s[i].m->name, views[v], scopes[w],
                           reg ? "dss" : k ? "log" : "brier");
                }
            }
    }
}

static void ece_family(out *t, const snap *s, size_t n)
{
    help(t, "calibd_ece", "gauge", "Expected calibration error (binned lower bound).");
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        if (!m->shaped || m->form == CALIB_FORM_GAUSSIAN)
            continue;
        sample(t, calib_bins_ece(&m->top[VIEW_RAW]),
               "calibd_ece{model=\"%s\",view=\"raw\",scope=\"cumulative\"}", m->name);
        sample(t, calib_bins_ece(&m->top[VIEW_CAL]),
               "calibd_ece{model=\"%s\",view=\"calibrated\",scope=\"cumulative\"}", m->name);
        if (s[i].have_w) {
            sample(t, calib_bins_ece(&s[i].w->top[VIEW_RAW]),
                   "calibd_ece{model=\"%s\",view=\"raw\",scope=\"window\"}", m->name);
            /* the value alert_ece fires on */
            sample(t, calib_bins_ece(&s[i].w->top[VIEW_CAL]),
                   "calibd_ece{model=\"%s\",view=\"calibrated\",scope=\"window\"}", m->name);
        }
    }
}

static const char *const view_names[VIEWS] = {"raw", "calibrated"};

/* ------------------------------------------------------------ segments */

/* A label value with \ and " escaped (segment values have no newline). */
static void label_escape(char *dst, size_t cap, const char *s)
{
    size_t j = 0;
    for (; *s && j + 2 < cap; s++) {
        if (*s == '\\' || *s == '"')
            dst[j++] = '\\';
        dst[j++] = *s;
    }
    dst[j] = 0;
}

/* What one segment family shows of a slot in view v (NaN: no sample). */
typedef double (*seg_value_fn)(const seg_slot *sl, const seg_figures *f, int v);
static double seg_pairs(const seg_slot *sl, const seg_figures *f, int v)
{
    (void)sl, (void)v;
    return (double)f->pairs;
}
static double seg_brier(const seg_slot *sl, const seg_figures *f, int v)
{
    (void)sl;
    return f->brier[v];
}
static double seg_gap(const seg_slot *sl, const seg_figures *f, int v)
{
    (void)sl, (void)v;
    return f->gap;
}
static double seg_gap_lo(const seg_slot *sl, const seg_figures *f, int v)
{
    (void)sl, (void)v;
    return f->gap_lo;
}
static double seg_e(const seg_slot *sl, const seg_figures *f, int v)
{
    (void)v;
    return sl->top[VIEW_CAL].m ? exp(f->log_e) : NAN; /* no test for regression */
}
static double seg_flag(const seg_slot *sl, const seg_figures *f, int v)
{
    (void)f, (void)v;
    return sl->top[VIEW_CAL].m ? sl->flagged : NAN;
}

/* One exported segment: a value among the segment_metrics worst of its
 * key, or its key's other bucket; ranked, summed and escaped once a render
 * for every family. */
typedef struct seg_row {
    const model *m;
    const seg_key *key;
    const seg_slot *sl;
    int other;
    seg_figures f;
    char value[2 * SEG_NAME_MAX + 1]; /* escaped */
} seg_row;

/* The rows of models s[0..n) into *rows (malloc'd; NULL when none):
 * their number, or -1 out of memory. */
static long seg_rows(const snap *s, size_t n, seg_row **rows)
{
    size_t most = 0, got = 0;
    *rows = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped)
            most += s[i].m->seg.nkeys * ((size_t)s[i].m->cfg.segment_metrics + 1);
    if (!most)
        return 0;
    seg_row *r = malloc(most * sizeof *r);
    size_t *idx = malloc(SEG_MAX_VALUES * sizeof *idx);
    if (!r || !idx) {
        free(r);
        free(idx);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        for (size_t k = 0; m->shaped && k < m->seg.nkeys; k++) {
            size_t top = seg_rank(&m->seg, k, idx, (size_t)m->cfg.segment_metrics);
            for (size_t j = 0; j <= top; j++, got++) {
                seg_row *w = &r[got];
                *w = (seg_row){.m = m, .key = &m->seg.key[k], .other = j == top};
                w->sl = w->other ? seg_other(&m->seg, k) : &w->key->slot[idx[j]];
                seg_figures_of(w->sl, &w->f);
                /* the other bucket: value="", which no value can be
                 * (a value has 1 to 64 bytes), the same as no label */
                label_escape(w->value, sizeof w->value, w->other ? "" : w->sl->name);
            }
        }
    }
    free(idx);
    *rows = r;
    return (long)got;
}

/* One family over the rows (with other, the other buckets too); with
 * views, a sample per view (label view). */
static void seg_family(out *t, const seg_row *rows, size_t n, const char *name, const char *what,
                       seg_value_fn fn, int views, int other)
{
    help(t, name, "gauge", what);
    for (size_t i = 0; i < n; i++) {
        const seg_row *w = &rows[i];
        if (w->other && !other)
            continue;
        for (int vw = 0; vw < (views ? VIEWS : 1); vw++)
            sample(t, fn(w->sl, &w->f, views ? vw : VIEW_CAL),
                   "%s{model=\"%s\",key=\"%s\",value=\"%s\"%s%s%s}", name, w->m->name,
                   w->key->name, w->value, views ? ",view=\"" : "",
                   views ? view_names[vw] : "", views ? "\"" : "");
    }
}

/* Per key: values tracked, flags and evictions. */
static void seg_key_family(out *t, const snap *s, size_t n, const char *name, const char *type,
                           const char *what, int which)
{
    help(t, name, type, what);
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        for (size_t k = 0; m->shaped && k < m->seg.nkeys; k++) {
            const seg_key *key = &m->seg.key[k];
            double v = which == 0 ? (double)key->used : which == 1 ? (double)key->flags
                                                                   : (double)key->evictions;
            sample(t, v, "%s{model=\"%s\",key=\"%s\"}", name, m->name, key->name);
        }
    }
}

static void segment_metrics(out *t, const snap *s, size_t n)
{
    seg_key_family(t, s, n, "calibd_segment_tracked", "gauge",
                   "Values of a segment key tracked (segment_values at most).", 0);
    seg_key_family(t, s, n, "calibd_segment_flagged_total", "counter",
                   "Segments found miscalibrated (e-BH at segment_alpha per key).", 1);
    seg_key_family(t, s, n, "calibd_segment_evictions_total", "counter",
                   "Tracked values replaced by more frequent ones.", 2);
    seg_row *r;
    long got = seg_rows(s, n, &r);
    size_t nr = got > 0 ? (size_t)got : 0;
    if (got < 0)
        t->t.failed = 1;
    seg_family(t, r, nr, "calibd_segment_pairs", "Pairs scored of a segment since its value "
               "is tracked (the segment_metrics worst values of each key, and the other bucket, value=\"\").",
               seg_pairs, 0, 1);
    seg_family(t, r, nr, "calibd_segment_brier", "Mean Brier score (or DSS) of a segment.",
               seg_brier, 1, 1);
    seg_family(t, r, nr, "calibd_segment_gap", "Mean top-label confidence minus accuracy of a "
               "segment, calibrated outputs.", seg_gap, 0, 1);
    seg_family(t, r, nr, "calibd_segment_gap_low", "Lower end of the 95% interval of "
               "|confidence - accuracy| of a segment (0: it holds 0).", seg_gap_lo, 0, 1);
    seg_family(t, r, nr, "calibd_segment_e_value", "E-value of a segment's test of calibration "
               "now (e-BH flags at segment_values / (segment_alpha r)).", seg_e, 0, 0);
    seg_family(t, r, nr, "calibd_segment_flagged", "1 once a segment was found "
               "miscalibrated.", seg_flag, 0, 0);
    free(r);
}

/* The name of score i (WS_MAIN, WS_LOG) of model m. */
static const char *score_name(const model *m, int i)
{
    return m->form == CALIB_FORM_GAUSSIAN ? "dss" : i == WS_MAIN ? "brier" : "log";
}

static int scores_of(const model *m)
{
    return m->form == CALIB_FORM_GAUSSIAN ? 1 : WS_PER_VIEW;
}

/*
 * The scores as counters, so that rate(sum) / rate(count) is the mean over
 * any range and a sum over instances pools shards. A plain double sum of
 * non-negative terms only grows, as a counter must; the DSS can be
 * negative, so its negative parts are a counter of their own:
 * mean = (rate(sum) - rate(negative_sum)) / rate(count), for every score.
 */
static void score_counters(out *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *what;
    } fam[] = {
        {"calibd_score_count_total", "Pairs scored, by view and score."},
        {"calibd_score_sum_total", "Sum of the positive parts of the per-pair scores (for "
         "brier and log, their sum)."},
        {"calibd_score_negative_sum_total", "Sum of the magnitudes of the negative per-pair "
         "scores (only the DSS can be negative)."},
        {"calibd_score_squares_total", "Sum of the squared per-pair scores."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, "counter", fam[f].what);
        for (size_t i = 0; i < n; i++) {
            const model *m = s[i].m;
            if (!m->shaped)
                continue;
            for (int v = 0; v < VIEWS; v++)
                for (int k = 0; k < scores_of(m); k++) {
                    const model_sums *sum = &m->sums[v][k];
                    double x[4] = {(double)m->cum[v][k].n, sum->pos, sum->neg, sum->sq};
                    /* a sum that overflowed stays +Inf, as the text format spells it */
                    if (isinf(x[f]))
                        put(t, "%s{model=\"%s\",view=\"%s\",score=\"%s\"} +Inf\n",
                            fam[f].name, m->name, view_names[v], score_name(m, k));
                    else
                        put(t, "%s{model=\"%s\",view=\"%s\",score=\"%s\"} %.17g\n",
                            fam[f].name, m->name, view_names[v], score_name(m, k), x[f]);
                }
        }
    }
}

/* The cumulative top-label bins as counters: ECE and the reliability
 * diagram of any range, pooled over instances, in PromQL. */
static void bin_counters(out *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *what;
    } fam[] = {
        {"calibd_bin_count_total", "Pairs in each top-label reliability bin."},
        {"calibd_bin_confidence_sum_total", "Sum of the top-label confidences in each bin."},
        {"calibd_bin_correct_total", "Pairs in each bin whose top label was the outcome."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, "counter", fam[f].what);
        for (size_t i = 0; i < n; i++) {
            const model *m = s[i].m;
            if (!m->shaped || m->form == CALIB_FORM_GAUSSIAN)
                continue;
            for (int v = 0; v < VIEWS; v++) {
                const calib_bins *b = &m->top[v];
                for (uint32_t j = 0; j < b->m; j++) {
                    /* the running sum alone, not its compensation: it only grows */
                    double x[3] = {(double)b->count[j], b->conf[j].sum, (double)b->correct[j]};
                    put(t, "%s{model=\"%s\",view=\"%s\",bin=\"%u\"} %.17g\n", fam[f].name,
                        m->name, view_names[v], (unsigned)j, x[f]);
                }
            }
        }
    }
}

/* TCE2 and RBS of both views and scopes, CWCE2 of the raw view. */
static void estimator_gauges(out *t, const snap *s, size_t n)
{
    static const char *scopes[2] = {"cumulative", "window"};
    help(t, "calibd_tce2", "gauge", "Squared top-label calibration error (binned lower bound).");
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        if (!m->shaped || m->form == CALIB_FORM_GAUSSIAN)
            continue;
        for (int w = 0; w < 1 + s[i].have_w; w++)
            for (int v = 0; v < VIEWS; v++)
                sample(t, calib_bins_tce2(w ? &s[i].w->top[v] : &m->top[v]),
                       "calibd_tce2{model=\"%s\",view=\"%s\",scope=\"%s\"}", m->name,
                       view_names[v], scopes[w]);
    }
    help(t, "calibd_cwce2", "gauge",
         "Squared class-wise calibration error of the raw outputs (binned lower bound).");
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped && s[i].m->cw.k)
            sample(t, calib_cwbins_cwce2(&s[i].m->cw),
                   "calibd_cwce2{model=\"%s\",view=\"raw\",scope=\"cumulative\"}",
                   s[i].m->name);
    help(t, "calibd_rbs", "gauge", "Root Brier score: the square root of the mean Brier score.");
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        if (!m->shaped || m->form == CALIB_FORM_GAUSSIAN)
            continue;
        for (int w = 0; w < 2; w++)
            for (int v = 0; v < VIEWS; v++) {
                const calib_accum *acc = accums(&s[i], v, w);
                if (acc)
                    sample(t, sqrt(calib_accum_mean(&acc[WS_MAIN])),
                           "calibd_rbs{model=\"%s\",view=\"%s\",scope=\"%s\"}", m->name,
                           view_names[v], scopes[w]);
            }
    }
}

/* The current parameters, and raw against calibrated on the same pairs
 * since they took over. */
static void params_gauges(out *t, const snap *s, size_t n)
{
    help(t, "calibd_params_value", "gauge", "Current parameter values, by name and version.");
    for (size_t i = 0; i < n; i++) {
        const model_params *p = &s[i].m->params;
        for (unsigned j = 0; p->desc && j < p->n; j++)
            sample(t, p->values[j],
                   "calibd_params_value{model=\"%s\",method=\"%s\",param=\"%s\","
                   "version=\"%llu\"}", s[i].m->name, p->method, p->desc->param_names[j],
                   (unsigned long long)p->version);
    }
    help(t, "calibd_paired_samples", "gauge",
         "Pairs scored since the current parameter version took over.");
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped)
            put(t, "calibd_paired_samples{model=\"%s\"} %llu\n", s[i].m->name,
                (unsigned long long)s[i].m->paired.view[VIEW_RAW][WS_MAIN].n);
    help(t, "calibd_paired_since_seconds", "gauge",
         "When the current parameter version took over, seconds since the epoch.");
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped && s[i].m->paired.since > 0)
            sample(t, s[i].m->paired.since, "calibd_paired_since_seconds{model=\"%s\"}",
                   s[i].m->name);
    help(t, "calibd_paired_score_mean", "gauge",
         "Mean score of each view on the same pairs, since the current parameters.");
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        for (int v = 0; m->shaped && v < VIEWS; v++)
            for (int k = 0; k < scores_of(m); k++)
                sample(t, calib_accum_mean(&m->paired.view[v][k]),
                       "calibd_paired_score_mean{model=\"%s\",view=\"%s\",score=\"%s\"}",
                       m->name, view_names[v], score_name(m, k));
    }
    /* a sequence that became empty has no interval: no sample (the mean
     * moved since it started) */
    static const char *cs_names[2][2] = {
        {"calibd_paired_brier_cs_low", "calibd_paired_brier_cs_high"},
        {"calibd_window_brier_cs_low", "calibd_window_brier_cs_high"}};
    static const char *cs_whats[2][2] = {
        {"Lower end of the anytime-valid confidence sequence (level cs_alpha, 0.05 by "
         "default) for the mean Brier of each view since the current parameters: unlike "
         "the fixed-time interval, it holds however often it is looked at.",
         "Upper end of the anytime-valid confidence sequence of calibd_paired_brier_cs_low."},
        {"Lower end of the anytime-valid confidence sequence (level cs_alpha per period) for "
         "the mean Brier of each view in the window's period: since the last multiple of "
         "window seconds of the clock, or the last change of parameters "
         "(calibd_window_cs_since_seconds).",
         "Upper end of the anytime-valid confidence sequence of calibd_window_brier_cs_low."}};
    for (int scope = CS_PAIRED; scope <= CS_PERIOD; scope++)
        for (int e = 0; e < 2; e++) {
            help(t, cs_names[scope][e], "gauge", cs_whats[scope][e]);
            for (size_t i = 0; i < n; i++) {
                const model *m = s[i].m;
                double b[2];
                for (int v = 0; m->shaped && v < VIEWS; v++)
                    if (model_cs(m, scope, v, &b[0], &b[1]) > 0)
                        sample(t, b[e], "%s{model=\"%s\",view=\"%s\"}", cs_names[scope][e],
                               m->name, view_names[v]);
            }
        }
    help(t, "calibd_window_cs_since_seconds", "gauge",
         "Unix time the window's period of calibd_window_brier_cs_low began.");
    for (size_t i = 0; i < n; i++)
        if (s[i].m->shaped && s[i].m->cs_on && s[i].m->period.running)
            sample(t, s[i].m->period.since, "calibd_window_cs_since_seconds{model=\"%s\"}",
                   s[i].m->name);
    static const char *names[3] = {"calibd_paired_improvement",
                                   "calibd_paired_improvement_ci_low",
                                   "calibd_paired_improvement_ci_high"};
    static const char *whats[3] = {
        ("Mean of raw minus calibrated score on the same pairs since the current parameters "
         "(> 0: they improve the calibration by that much)."),
        "Lower end of the 95% interval of calibd_paired_improvement.",
        "Upper end of the 95% interval of calibd_paired_improvement."};
    for (int f = 0; f < 3; f++) {
        help(t, names[f], "gauge", whats[f]);
        for (size_t i = 0; i < n; i++) {
            const model *m = s[i].m;
            for (int k = 0; m->shaped && k < scores_of(m); k++) {
                double ci[2];
                calib_accum_ci95(&m->paired.diff[k], ci);
                sample(t, f ? ci[f - 1] : calib_accum_mean(&m->paired.diff[k]),
                       "%s{model=\"%s\",score=\"%s\"}", names[f], m->name, score_name(m, k));
            }
        }
    }
}

/* The closed loop: its phase, the drift detector, the shadow run. */
static void loop_gauges(out *t, const snap *s, size_t n)
{
    static const char *drift_states[] = {"reference", "watching", "alarm"};
    help(t, "calibd_loop_phase", "gauge", "1 for the closed loop's current phase, else 0.");
    for (size_t i = 0; i < n; i++)
        for (int ph = PHASE_OFF; s[i].m->shaped && ph <= PHASE_STORING; ph++)
            put(t, "calibd_loop_phase{model=\"%s\",phase=\"%s\"} %d\n", s[i].m->name,
                refit_phase_name(ph), s[i].m->recalib.refit.phase == ph);
    help(t, "calibd_drift_state", "gauge", "1 for the drift detector's current state, else 0.");
    for (size_t i = 0; i < n; i++) {
        const model_recalib *l = &s[i].m->recalib;
        for (int st = 0; s[i].m->shaped && l->drift_on && st < 3; st++)
            put(t, "calibd_drift_state{model=\"%s\",state=\"%s\"} %d\n", s[i].m->name,
                drift_states[st], (int)l->drift.state == st);
    }
    help(t, "calibd_drift_log_e", "gauge",
         "Log of the drift detector's e-process (it alarms at log(1/drift_alpha)).");
    for (size_t i = 0; i < n; i++) {
        const model_recalib *l = &s[i].m->recalib;
        if (s[i].m->shaped && l->drift_on && l->drift.state != CALIB_DRIFT_REFERENCE)
            sample(t, calib_drift_log_e(&l->drift), "calibd_drift_log_e{model=\"%s\"}",
                   s[i].m->name);
    }
    help(t, "calibd_drift_location_log_e", "gauge",
         "Log of a Gaussian model's location test's e-value: its standardised residual "
         "above or below the reference median.");
    for (size_t i = 0; i < n; i++) {
        const model_recalib *l = &s[i].m->recalib;
        static const char *const side[2] = {"above", "below"};
        for (int j = 0; j < 2 && s[i].m->shaped && l->loc_on; j++)
            if (l->loc[j].state != CALIB_DRIFT_REFERENCE)
                sample(t, calib_drift_log_e(&l->loc[j]),
                       "calibd_drift_location_log_e{model=\"%s\",side=\"%s\"}", s[i].m->name,
                       side[j]);
    }
    static const char *names[5] = {"calibd_shadow_samples", "calibd_shadow_log_e",
                                   "calibd_shadow_improvement",
                                   "calibd_shadow_improvement_ci_low",
                                   "calibd_shadow_improvement_ci_high"};
    static const char *whats[5] = {
        "Pairs the candidate in shadow has been scored on.",
        "Log of the shadow gate's e-process (it passes at log(1/gate_alpha)).",
        "Mean of current minus candidate score in shadow (> 0: the candidate is better).",
        "Lower end of the 95% interval of calibd_shadow_improvement.",
        "Upper end of the 95% interval of calibd_shadow_improvement."};
    for (int f = 0; f < 5; f++) {
        help(t, names[f], "gauge", whats[f]);
        for (size_t i = 0; i < n; i++) {
            const model_recalib *l = &s[i].m->recalib;
            if (!s[i].m->shaped || l->refit.phase != PHASE_SHADOW)
                continue;
            double ci[2];
            calib_accum_ci95(&l->gate.diff, ci);
            double x[5] = {(double)l->gate.diff.n, calib_gate_log_e(&l->gate),
                           calib_accum_mean(&l->gate.diff), ci[0], ci[1]};
            sample(t, x[f], "%s{model=\"%s\"}", names[f], s[i].m->name);
        }
    }
}

/* The label-free estimates (calibd(8), LABEL-FREE): models that keep them
 * and have figures. */
static const calib_lfree *lfree_of(const snap *s, int need_figures)
{
    const model *m = s->m;
    if (!m->shaped || !m->lf.rec || (need_figures && !m->lf.fig.n))
        return NULL;
    return &m->lf;
}

static void label_free_gauges(out *t, const snap *s, size_t n)
{
    static const char *const names[3] = {"calibd_label_free_brier", "calibd_label_free_log",
                                         "calibd_label_free_accuracy"};
    static const char *const whats[3] = {
        "Brier score the labels of the newest predictions will probably give, from the "
        "predictions alone (estimate: corrected for a label shift, or naive).",
        "Log score the labels of the newest predictions will probably give (as "
        "calibd_label_free_brier).",
        "Accuracy the labels of the newest predictions will probably give (as "
        "calibd_label_free_brier)."};
    for (int f = 0; f < 3; f++) {
        help(t, names[f], "gauge", whats[f]);
        for (size_t i = 0; i < n; i++) {
            const calib_lfree *lf = lfree_of(&s[i], 1);
            if (!lf || !lf->cfg.k)
                continue;
            sample(t, lf->fig.naive[f].mean, "%s{model=\"%s\",estimate=\"naive\"}", names[f],
                   s[i].m->name);
            if (lf->fig.corrected)
                sample(t, lf->fig.corrected_est[f].mean,
                       "%s{model=\"%s\",estimate=\"corrected\"}", names[f], s[i].m->name);
        }
    }
    help(t, "calibd_label_free_dss", "gauge",
         "Dawid-Sebastiani score the labels of the newest Gaussian forecasts will probably give.");
    for (size_t i = 0; i < n; i++) {
        const calib_lfree *lf = lfree_of(&s[i], 1);
        if (lf && !lf->cfg.k)
            sample(t, lf->fig.naive[CALIB_LFREE_MAIN].mean, "calibd_label_free_dss{model=\"%s\"}",
                   s[i].m->name);
    }
    help(t, "calibd_label_free_predictions", "gauge",
         "Predictions the label-free estimates are of.");
    for (size_t i = 0; i < n; i++) {
        const calib_lfree *lf = lfree_of(&s[i], 0);
        if (lf)
            put(t, "calibd_label_free_predictions{model=\"%s\"} %llu\n", s[i].m->name,
                (unsigned long long)lf->fig.n);
    }
    static const char *const pnames[2] = {"calibd_label_free_prior",
                                          "calibd_label_free_reference_prior"};
    static const char *const pwhats[2] = {
        "Estimated class prior of the newest predictions (EM under label shift).",
        "Class prior of the labelled pairs the served outputs are calibrated on."};
    for (int f = 0; f < 2; f++) {
        help(t, pnames[f], "gauge", pwhats[f]);
        for (size_t i = 0; i < n; i++) {
            const calib_lfree *lf = lfree_of(&s[i], 1);
            /* a series a class: up to the K status lists, a bounded number
             * of label values whatever K producers send */
            if (!lf || !lf->cfg.k || lf->cfg.k > CALIB_LFREE_INTERVAL_MAX_K ||
                (f == 1 && !lf->fig.corrected))
                continue;
            const double *v = f ? lf->src : lf->priors;
            for (size_t j = 0; j < lf->cfg.k; j++)
                sample(t, v[j], "%s{model=\"%s\",class=\"%zu\"}", pnames[f], s[i].m->name, j);
        }
    }
    help(t, "calibd_label_shift_log_e", "gauge",
         "Log of the label-shift test's e-value (it alarms at log(1/label_shift_alpha)).");
    for (size_t i = 0; i < n; i++) {
        const calib_lfree *lf = lfree_of(&s[i], 0);
        if (lf && lf->test_on)
            sample(t, calib_lfree_log_e(lf), "calibd_label_shift_log_e{model=\"%s\"}",
                   s[i].m->name);
    }
    help(t, "calibd_label_shift_alarm", "gauge",
         "1 while the label-shift test's alarm stands, else 0.");
    for (size_t i = 0; i < n; i++) {
        const calib_lfree *lf = lfree_of(&s[i], 0);
        if (lf && lf->test_on)
            put(t, "calibd_label_shift_alarm{model=\"%s\"} %d\n", s[i].m->name, lf->alarm);
    }
    help(t, "calibd_label_shift_alarms_total", "counter",
         "Label-shift alarms raised since calibd started.");
    for (size_t i = 0; i < n; i++) {
        const calib_lfree *lf = lfree_of(&s[i], 0);
        if (lf && lf->test_on)
            put(t, "calibd_label_shift_alarms_total{model=\"%s\"} %llu\n", s[i].m->name,
                (unsigned long long)lf->alarms);
    }
}

/* The snapshots' figures (persist.h). */
static void snapshot_metrics(out *t, const persister *s)
{
    help(t, "calibd_snapshot_writes_total", "counter", "Snapshots written to the state directory.");
    put(t, "calibd_snapshot_writes_total %llu\n", (unsigned long long)s->writes);
    help(t, "calibd_snapshot_errors_total", "counter",
         "Snapshots that could not be packed or written (logged).");
    put(t, "calibd_snapshot_errors_total %llu\n", (unsigned long long)s->errors);
    if (!s->writes)
        return;
    help(t, "calibd_snapshot_last_success_timestamp_seconds", "gauge",
         "When the last snapshot was written, seconds since the epoch.");
    sample(t, s->last_ok, "calibd_snapshot_last_success_timestamp_seconds");
    help(t, "calibd_snapshot_bytes", "gauge", "Size of the last snapshot written.");
    put(t, "calibd_snapshot_bytes %zu\n", s->bytes);
    help(t, "calibd_snapshot_models", "gauge", "Models in the last snapshot written.");
    put(t, "calibd_snapshot_models %llu\n", (unsigned long long)s->models);
    help(t, "calibd_snapshot_copied_models", "gauge",
         "Models of the last snapshot copied by the loop and packed by a worker (large ones).");
    put(t, "calibd_snapshot_copied_models %llu\n", (unsigned long long)s->copied);
    help(t, "calibd_snapshot_duration_seconds", "gauge",
         "Seconds from the start of the last snapshot's packing to its file written.");
    sample(t, s->duration, "calibd_snapshot_duration_seconds");
    help(t, "calibd_snapshot_slice_max_seconds", "gauge",
         "The longest the loop packed models without taking messages, in the last periodic "
         "snapshot.");
    sample(t, s->slice_max, "calibd_snapshot_slice_max_seconds");
}

/* The Kafka consumer group's figures (kafka_part.h), as status carries
 * them, when there is one. */
static void kafka_metrics(out *t, const calibd *d)
{
    status_daemon s;
    calibd_status(d, &s);
    if (!s.kafka)
        return;
    const kafka_stats k = s.kstats;
    /* the counters: a family, its label (NULL: none) and up to three
     * values of it */
    const struct {
        const char *name, *type, *what, *label;
        const char *values[3];
        uint64_t n[3];
    } fam[] = {
        {"calibd_kafka_messages_total", "counter", "Messages taken from Kafka partitions.",
         NULL, {NULL}, {k.messages}},
        {"calibd_kafka_messages_dropped_total", "counter", "Kafka messages not taken: of a "
         "partition no longer held (stray), or already in the partition's models (skipped).",
         "reason", {"stray", "skipped"}, {k.stray, k.skipped}},
        {"calibd_kafka_errors_total", "counter", "Errors librdkafka reported (logged).", NULL,
         {NULL}, {k.errors}},
        {"calibd_kafka_rebalances_total", "counter", "Rebalances of the consumer group seen.",
         NULL, {NULL}, {k.rebalances}},
        {"calibd_kafka_partitions", "gauge", "Kafka partitions held now.", NULL, {NULL},
         {k.partitions}},
        {"calibd_kafka_partition_events_total", "counter", "Partitions assigned, revoked "
         "(written and handed over) and lost (handed over unwritten).", "event",
         {"assigned", "revoked", "lost"}, {k.assigned, k.revoked, k.lost}},
        {"calibd_kafka_snapshots_total", "counter", "Partition snapshots written to the "
         "group's state directory, or not (logged).", "result", {"written", "error"},
         {k.snapshots, k.snapshot_errors}},
        {"calibd_kafka_restores_total", "counter", "Partitions restored from their snapshot at "
         "assignment, or whose snapshot could not be used (moved aside, logged).", "result",
         {"restored", "error"}, {k.restored, k.restore_errors}},
        {"calibd_kafka_commits_total", "counter", "Partition offsets committed to the group "
         "after their snapshot, or refused.", "result", {"ok", "error"},
         {k.commits, k.commit_errors}},
    };
    for (size_t f = 0; f < sizeof fam / sizeof *fam; f++) {
        help(t, fam[f].name, fam[f].type, fam[f].what);
        if (!fam[f].label) {
            put(t, "%s %llu\n", fam[f].name, (unsigned long long)fam[f].n[0]);
            continue;
        }
        for (int v = 0; v < 3 && fam[f].values[v]; v++)
            put(t, "%s{%s=\"%s\"} %llu\n", fam[f].name, fam[f].label, fam[f].values[v],
                (unsigned long long)fam[f].n[v]);
    }
    size_t n = s.nkparts;
    kafka_part *const *parts = s.kparts;
    help(t, "calibd_kafka_partition_offset", "gauge",
         "A held partition's offsets: the next message to take (next), the one its last "
         "snapshot reads from (saved), the one committed (committed); -1: none.");
    static const char *const kinds[3] = {"next", "saved", "committed"};
    for (int f = 0; f < 3; f++)
        for (size_t i = 0; i < n; i++) {
            const kafka_part *p = parts[i];
            if (!p->assigned)
                continue;
            int64_t v = f == 0 ? p->next : f == 1 ? p->saved : p->committed;
            put(t, "calibd_kafka_partition_offset{topic=\"%s\",partition=\"%d\",offset=\"%s\"} "
                "%lld\n", p->topic, (int)p->partition, kinds[f], (long long)v);
        }
}

/* The ingest sockets: what ZeroMQ delivered, and the two ways calibd
 * learns it is losing messages it never receives. */
static void sockets(out *t, const calibd *d)
{
    const zsock *z[2] = {&d->ingest, d->have_pull ? &d->pull : NULL};
    static const struct {
        const char *name, *what;
        size_t offset;
    } fam[] = {
        {"calibd_socket_received_total", "Messages received, by ingest socket.",
         offsetof(zsock, received)},
        {"calibd_socket_saturated_total", "Receive turns that ended on drain_time with "
         "messages still queued: calibd is behind (a full SUB queue makes producers' "
         "PUB sockets drop).", offsetof(zsock, saturated)},
        {"calibd_socket_disconnects_total", "Producer connections that ended: closed, or "
         "cut by ZeroMQ for a message over max_msg_size.", offsetof(zsock, disconnects)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, "counter", fam[f].what);
        for (int i = 0; i < 2; i++)
            if (z[i])
                put(t, "%s{socket=\"%s\"} %llu\n", fam[f].name, z[i]->name,
                    *(const unsigned long long *)((const char *)z[i] + fam[f].offset));
    }
    /* every socket's failed handshakes (zsock_monitor): those opened */
    const zsock *all[4] = {z[0], z[1], &d->control, &d->publish};
    help(t, "calibd_socket_handshake_failures_total", "counter",
         "Connections refused in their handshake, by socket. With CURVE: a client without "
         "a key pair or calibd's public key, or whose key is not allowed; without: a "
         "client using CURVE, or a peer not speaking ZeroMQ.");
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->name)
            put(t, "calibd_socket_handshake_failures_total{socket=\"%s\"} %llu\n",
                all[i]->name, all[i]->handshake_failures);
    if (!d->curve.on)
        return;
    help(t, "calibd_curve_clients_total", "counter",
         "CURVE clients the ZAP handler admitted (result=\"accepted\") or refused "
         "(\"refused\": a key not in the role's allow-list), by role.");
    for (int r = 0; r < AUTH_ROLES; r++)
        put(t, "calibd_curve_clients_total{role=\"%s\",result=\"accepted\"} %llu\n"
               "calibd_curve_clients_total{role=\"%s\",result=\"refused\"} %llu\n",
            curve_role_name[r], d->curve.accepted[r], curve_role_name[r], d->curve.refused[r]);
}

static void http_counters(out *t, http_server *h)
{
    help(t, "calibd_http_timeouts_total", "counter",
         "HTTP connections cut for not completing a request within http_timeout.");
    pthread_mutex_lock(&h->lock);
    unsigned long long n = h->timeouts, missing = h->unauthorized[0],
                       wrong = h->unauthorized[1];
    pthread_mutex_unlock(&h->lock);
    put(t, "calibd_http_timeouts_total %llu\n", n);
    help(t, "calibd_http_unauthorized_total", "counter",
         "HTTP requests refused (401) for credentials missing or wrong, by reason.");
    put(t, "calibd_http_unauthorized_total{reason=\"missing\"} %llu\n", missing);
    put(t, "calibd_http_unauthorized_total{reason=\"wrong\"} %llu\n", wrong);
    if (h->ingest.on) {
        http_ingest *g = &h->ingest;
        pthread_mutex_lock(&g->lock);
        unsigned long long msgs = g->messages, large = g->too_large, media = g->unsupported,
                           busy = g->busy, event = g->bad_event, kreq = g->kserve_requests,
                           kunusable = g->kserve_unusable, late = g->late,
                           queued = g->queued, reading = g->reading,
                           reading_max = g->reading_max, received = g->received;
        pthread_mutex_unlock(&g->lock);
        one(t, "calibd_http_ingest_messages_total", "counter",
            "Messages posted over HTTP that calibd ingested (or refused, counted in "
            "calibd_rejected_total).", msgs);
        one(t, "calibd_http_ingest_queued_bytes", "gauge",
            "Bytes of HTTP bodies waiting for the loop (at most ingest_memory).", queued);
        one(t, "calibd_http_ingest_reading_bytes", "gauge",
            "Bytes of the buffers of HTTP bodies being read (with the queued ones, at most "
            "ingest_memory, or one body).", reading);
        one(t, "calibd_http_ingest_reading_max_bytes", "gauge",
            "The most calibd_http_ingest_reading_bytes has been since the start.", reading_max);
        one(t, "calibd_http_ingest_received_bytes_total", "counter",
            "Bytes of HTTP ingest bodies received, kept or discarded.", received);
        help(t, "calibd_http_ingest_refused_total", "counter",
             "HTTP ingest requests refused before the loop, by reason: a body past "
             "max_msg_size (413), another content type (415), the bodies being read and "
             "waiting past ingest_memory or calibd stopping (busy, 503), an answer expected later than "
             "http_timeout (late, 503), a CloudEvent without the headers of KServe's (400).");
        put(t, "calibd_http_ingest_refused_total{reason=\"too_large\"} %llu\n", large);
        put(t, "calibd_http_ingest_refused_total{reason=\"unsupported_media_type\"} %llu\n",
            media);
        put(t, "calibd_http_ingest_refused_total{reason=\"busy\"} %llu\n", busy);
        put(t, "calibd_http_ingest_refused_total{reason=\"late\"} %llu\n", late);
        put(t, "calibd_http_ingest_refused_total{reason=\"bad_event\"} %llu\n", event);
        help(t, "calibd_kserve_ignored_total", "counter",
             "KServe payload-logger events ignored: requests (their inputs), and responses "
             "without a usable output (kserve_output, kserve_form).");
        put(t, "calibd_kserve_ignored_total{reason=\"request\"} %llu\n", kreq);
        put(t, "calibd_kserve_ignored_total{reason=\"unusable\"} %llu\n", kunusable);
    }
    if (h->round_seconds <= 0)
        return; /* no round done yet */
    help(t, "calibd_http_render_seconds", "gauge",
         "Seconds the last rendering of /metrics and /status took, from its start on the "
         "loop to the text served (what the text lags behind at most, besides the tick).");
    sample(t, h->round_seconds, "calibd_http_render_seconds");
    help(t, "calibd_http_render_slice_max_seconds", "gauge",
         "The longest the loop rendered models without taking messages, in the last rendering.");
    sample(t, h->round_slice_max, "calibd_http_render_slice_max_seconds");
}

/* What the models hold, against memory_limit and max_models. */
static void memory(out *t, const calibd *d)
{
    help(t, "calibd_models", "gauge", "Models held.");
    put(t, "calibd_models %zu\n", d->reg.n - d->reg.leaving);
    help(t, "calibd_max_models", "gauge", "Models calibd holds at most (max_models).");
    put(t, "calibd_max_models %llu\n", (unsigned long long)d->cfg.max_models);
    help(t, "calibd_memory_bytes", "gauge", "Bytes the models' state holds.");
    put(t, "calibd_memory_bytes %zu\n", d->reg.mem.used);
    help(t, "calibd_memory_limit_bytes", "gauge", "Bytes the models' state may hold (memory_limit).");
    put(t, "calibd_memory_limit_bytes %llu\n", (unsigned long long)d->cfg.memory_limit);
    help(t, "calibd_memory_refused_total", "counter",
         "Allocations of the models' state refused by memory_limit.");
    put(t, "calibd_memory_refused_total %llu\n", (unsigned long long)d->reg.mem.refused);
}

static void model_memory(out *t, const snap *s, size_t n)
{
    help(t, "calibd_model_memory_bytes", "gauge", "Bytes a model's state holds.");
    for (size_t i = 0; i < n; i++)
        put(t, "calibd_model_memory_bytes{model=\"%s\"} %zu\n", s[i].m->name, s[i].m->mem.used);
}

/* The metrics of the daemon as a whole. */
static void render_daemon(out *t, calibd *d)
{
    help(t, "calibd_build_info", "gauge", "Always 1; the version of calibd as a label.");
    put(t, "calibd_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
    help(t, "calibd_start_time_seconds", "gauge", "When calibd started, seconds since the epoch.");
    sample(t, d->started, "calibd_start_time_seconds");
    help(t, "calibd_messages_total", "counter", "Messages received on the ingest sockets.");
    put(t, "calibd_messages_total %llu\n", (unsigned long long)d->messages);
    help(t, "calibd_models_removed_total", "counter",
         "Models removed: forgotten (calibctl forget), expired (model_idle_ttl), or handed "
         "over with their Kafka partition.");
    put(t, "calibd_models_removed_total{reason=\"forgotten\"} %llu\n",
        (unsigned long long)d->reg.forgotten);
    put(t, "calibd_models_removed_total{reason=\"expired\"} %llu\n",
        (unsigned long long)d->reg.expired);
    put(t, "calibd_models_removed_total{reason=\"handed_over\"} %llu\n",
        (unsigned long long)d->reg.handed_over);
    help(t, "calibd_config_reloads_total", "counter",
         "SIGHUP reloads of the configuration file: applied, or refused whole.");
    put(t, "calibd_config_reloads_total{result=\"applied\"} %llu\n", (unsigned long long)d->reloads);
    put(t, "calibd_config_reloads_total{result=\"refused\"} %llu\n",
        (unsigned long long)d->reloads_refused);
    help(t, "calibd_tick_overruns_total", "counter",
         "Ticks that found the last pass over the models still running (and started none).");
    put(t, "calibd_tick_overruns_total %llu\n", (unsigned long long)d->pass.overruns);
    memory(t, d);
    sockets(t, d);
    snapshot_metrics(t, &d->snap);
    kafka_metrics(t, d);
    http_counters(t, &d->http);
}

/* The families of models s[0..n) (with d, the daemon's rejections too):
 * each begins with help(), whatever n, so that a round renders each model
 * into the same sequence of families. */
static void render_models(out *t, const calibd *d, const snap *s, size_t n)
{
    rejections(t, d, s, n);
    counters(t, s, n);
    joins(t, s, n);
    model_memory(t, s, n);
    for (int which = 0; which < 3; which++)
        score_family(t, s, n, which);
    ece_family(t, s, n);
    score_counters(t, s, n);
    bin_counters(t, s, n);
    estimator_gauges(t, s, n);
    params_gauges(t, s, n);
    loop_gauges(t, s, n);
    label_free_gauges(t, s, n);
    segment_metrics(t, s, n);
}

int prom_daemon(textbuf *t, calibd *d)
{
    out o = {.t = *t};
    render_daemon(&o, d);
    *t = o.t;
    return o.t.failed ? -1 : 0;
}

/* A render into the families, from their first. */
static int families(prom_families *f, const calibd *d, const model *m, int headers)
{
    snap s = {0};
    if (m)
        s = (snap){.m = m, .w = &m->view.w, .have_w = m->view.have};
    out o = {.fam = f, .headers = headers};
    render_models(&o, d, m ? &s : NULL, m ? 1 : 0);
    fam_stash(&o);
    return o.t.failed ? -1 : 0;
}

int prom_headers(prom_families *f, const calibd *d)
{
    for (size_t i = 0; i < f->n; i++)
        f->f[i].len = 0;
    return families(f, d, NULL, 1);
}

int prom_model(prom_families *f, const model *m)
{
    return families(f, NULL, m, 0);
}

size_t prom_families_len(const prom_families *f)
{
    size_t len = 0;
    for (size_t i = 0; i < f->n; i++)
        len += f->f[i].len;
    return len;
}

void prom_families_release(prom_families *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->f[i].buf);
        f->f[i] = (textbuf){0};
    }
}

void prom_families_free(prom_families *f)
{
    prom_families_release(f);
    free(f->f);
    *f = (prom_families){0};
}
