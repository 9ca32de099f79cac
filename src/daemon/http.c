/* http.c — calibd over HTTP: /metrics in the Prometheus text format,
 * /status (calibctl status as JSON), /history, /healthz and the page at /;
 * over TLS, and behind a bearer token or basic auth, when configured. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibd.h"
#include "control.h"
#include "http.h"
#include "msgpack_json.h"
#include "state.h"

extern const char calibd_page[]; /* page.c, generated from page.html */
extern const size_t calibd_page_len;

/* ------------------------------------------------------------ text buffer */

typedef struct text {
    char *buf;
    size_t len, cap;
    int failed;
    /* a round's model metrics: help() moves to the next family's buffer
     * (and writes its header only with headers set) */
    http_round *fam;
    size_t cur;     /* families begun in this render */
    int headers;
} text;

/* Leaves the family being written, if any, in its buffer of the round. */
static void fam_stash(text *t)
{
    if (t->fam && t->cur)
        t->fam->fam[t->cur - 1] = (http_text){t->buf, t->len, t->cap};
}

/* Starts a render of model families into the round's buffers. */
static text fam_text(http_round *r, int headers)
{
    return (text){.fam = r, .headers = headers};
}

/* The next family's buffer as t's; 0, or -1 out of memory. */
static int fam_next(text *t)
{
    http_round *r = t->fam;
    fam_stash(t);
    if (t->cur == r->nfam) {
        if (r->nfam == r->famcap) {
            size_t cap = r->famcap ? 2 * r->famcap : 64;
            http_text *f = realloc(r->fam, cap * sizeof *f);
            if (!f)
                return -1;
            r->fam = f;
            r->famcap = cap;
        }
        r->fam[r->nfam++] = (http_text){0};
    }
    http_text *f = &r->fam[t->cur++];
    if (!f->buf && !(f->buf = malloc(f->cap = 4096)))
        return -1;
    t->buf = f->buf;
    t->len = f->len;
    t->cap = f->cap;
    return 0;
}

__attribute__((format(printf, 2, 3)))
static void put(text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n + 1;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->failed = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

/* A JSON string (model names are printable, but escape anyway). */
static void json_str(text *t, const char *s)
{
    put(t, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            put(t, "\\%c", c);
        else if (c < 0x20)
            put(t, "\\u%04x", c);
        else
            put(t, "%c", c);
    }
    put(t, "\"");
}

/* One sample, name{labels} value, or none when the value is not finite:
 * a series without data is absent, never NaN, so that an alert rule on
 * it is not silently false. */
__attribute__((format(printf, 3, 4)))
static void sample(text *t, double x, const char *fmt, ...)
{
    if (!isfinite(x) || t->failed)
        return;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof head) {
        t->failed = 1;
        return;
    }
    put(t, "%s %.17g\n", head, x);
}

/* ------------------------------------------------------------ metrics */

/* One model as the metrics see it: its window as the tick summed it
 * (model_view), the same that status and the alert rules read. */
typedef struct snap {
    const model *m;
    const calib_pane *w; /* both views' window scores; raw window bins */
    int have_w;
} snap;

static void help(text *t, const char *name, const char *type, const char *what)
{
    if (t->fam && !t->failed && fam_next(t) != 0) {
        t->failed = 1;
        t->cur = 0; /* the buffers stay the round's, as stashed */
    }
    if (!t->fam || t->headers)
        put(t, "# HELP %s %s\n# TYPE %s %s\n", name, what, name, type);
}

static void counters(text *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *what;
        size_t offset;
    } fam[] = {
        {"calibd_predictions_total", "Predictions accepted.", offsetof(model, predictions)},
        {"calibd_labels_total", "Labels accepted.", offsetof(model, labels)},
        {"calibd_scored_total", "Prediction-outcome pairs scored.", offsetof(model, scored)},
        {"calibd_drift_alarms_total", "Drift alarms of the calibrated score.",
         offsetof(model, loop.drift_alarms)},
        {"calibd_refits_total", "Refits started.", offsetof(model, loop.refits)},
        {"calibd_refit_errors_total", "Refits whose fit failed.", offsetof(model, loop.refit_errors)},
        {"calibd_candidates_total", "Candidate parameters put in shadow.",
         offsetof(model, loop.candidates)},
        {"calibd_candidates_published_total", "Candidates that passed the gate and were published.",
         offsetof(model, loop.published)},
        {"calibd_candidates_rejected_total", "Candidates the gate did not pass.",
         offsetof(model, loop.rejected)},
        {"calibd_candidates_store_errors_total", "Candidates that passed the gate but the "
         "state directory refused to store, so were not published.",
         offsetof(model, loop.store_errors)},
        {"calibd_miscalibration_alarms_total", "Rejections of the miscalibration trigger: a "
         "recalibration fit on earlier pairs lowered the score by more than miscal_min_effect.",
         offsetof(model, loop.miscal_alarms)},
        {"calibd_candidates_cancelled_total", "Refits made stale by a drift alarm after the "
         "samples they were fit on, dropped.", offsetof(model, loop.cancelled)},
        {"calibd_rollbacks_total", "Versions the guard showed worse than the one before, "
         "which was published again (rollback = yes).", offsetof(model, loop.rollbacks)},
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
static void rejections(text *t, const calibd *d, const snap *s, size_t n)
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

static void joins(text *t, const snap *s, size_t n)
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
static void score_family(text *t, const snap *s, size_t n, int which)
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

static void ece_family(text *t, const snap *s, size_t n)
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
static void score_counters(text *t, const snap *s, size_t n)
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
static void bin_counters(text *t, const snap *s, size_t n)
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
static void estimator_gauges(text *t, const snap *s, size_t n)
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
static void params_gauges(text *t, const snap *s, size_t n)
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
static void loop_gauges(text *t, const snap *s, size_t n)
{
    static const char *drift_states[] = {"reference", "watching", "alarm"};
    help(t, "calibd_loop_phase", "gauge", "1 for the closed loop's current phase, else 0.");
    for (size_t i = 0; i < n; i++)
        for (int ph = PHASE_OFF; s[i].m->shaped && ph <= PHASE_STORING; ph++)
            put(t, "calibd_loop_phase{model=\"%s\",phase=\"%s\"} %d\n", s[i].m->name,
                refit_phase_name(ph), s[i].m->loop.refit.phase == ph);
    help(t, "calibd_drift_state", "gauge", "1 for the drift detector's current state, else 0.");
    for (size_t i = 0; i < n; i++) {
        const model_loop *l = &s[i].m->loop;
        for (int st = 0; s[i].m->shaped && l->drift_on && st < 3; st++)
            put(t, "calibd_drift_state{model=\"%s\",state=\"%s\"} %d\n", s[i].m->name,
                drift_states[st], (int)l->drift.state == st);
    }
    help(t, "calibd_drift_log_e", "gauge",
         "Log of the drift detector's e-process (it alarms at log(1/drift_alpha)).");
    for (size_t i = 0; i < n; i++) {
        const model_loop *l = &s[i].m->loop;
        if (s[i].m->shaped && l->drift_on && l->drift.state != CALIB_DRIFT_REFERENCE)
            sample(t, calib_drift_log_e(&l->drift), "calibd_drift_log_e{model=\"%s\"}",
                   s[i].m->name);
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
            const model_loop *l = &s[i].m->loop;
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

/* The snapshots' figures (snapshots.h). */
static void snapshot_metrics(text *t, const snapshots *s)
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
    help(t, "calibd_snapshot_duration_seconds", "gauge",
         "Seconds from the start of the last snapshot's packing to its file written.");
    sample(t, s->duration, "calibd_snapshot_duration_seconds");
    help(t, "calibd_snapshot_slice_max_seconds", "gauge",
         "The longest the loop packed models without taking messages, in the last periodic "
         "snapshot.");
    sample(t, s->slice_max, "calibd_snapshot_slice_max_seconds");
}

/* The ingest sockets: what ZeroMQ delivered, and the two ways calibd
 * learns it is losing messages it never receives. */
static void sockets(text *t, const calibd *d)
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
    if (!d->auth.on)
        return;
    help(t, "calibd_curve_clients_total", "counter",
         "CURVE clients the ZAP handler admitted (result=\"accepted\") or refused "
         "(\"refused\": a key not in the role's allow-list), by role.");
    for (int r = 0; r < AUTH_ROLES; r++)
        put(t, "calibd_curve_clients_total{role=\"%s\",result=\"accepted\"} %llu\n"
               "calibd_curve_clients_total{role=\"%s\",result=\"refused\"} %llu\n",
            auth_role_name[r], d->auth.accepted[r], auth_role_name[r], d->auth.refused[r]);
}

static void http_counters(text *t, http_server *h)
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
static void memory(text *t, const calibd *d)
{
    help(t, "calibd_models", "gauge", "Models held.");
    put(t, "calibd_models %zu\n", d->nmodels);
    help(t, "calibd_max_models", "gauge", "Models calibd holds at most (max_models).");
    put(t, "calibd_max_models %llu\n", (unsigned long long)d->cfg.max_models);
    help(t, "calibd_memory_bytes", "gauge", "Bytes the models' state holds.");
    put(t, "calibd_memory_bytes %zu\n", d->mem.used);
    help(t, "calibd_memory_limit_bytes", "gauge", "Bytes the models' state may hold (memory_limit).");
    put(t, "calibd_memory_limit_bytes %llu\n", (unsigned long long)d->cfg.memory_limit);
    help(t, "calibd_memory_refused_total", "counter",
         "Allocations of the models' state refused by memory_limit.");
    put(t, "calibd_memory_refused_total %llu\n", (unsigned long long)d->mem.refused);
}

static void model_memory(text *t, const snap *s, size_t n)
{
    help(t, "calibd_model_memory_bytes", "gauge", "Bytes a model's state holds.");
    for (size_t i = 0; i < n; i++)
        put(t, "calibd_model_memory_bytes{model=\"%s\"} %zu\n", s[i].m->name, s[i].m->mem.used);
}

/* The metrics of the daemon as a whole. */
static void render_daemon(text *t, calibd *d)
{
    help(t, "calibd_build_info", "gauge", "Always 1; the version of calibd as a label.");
    put(t, "calibd_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
    help(t, "calibd_start_time_seconds", "gauge", "When calibd started, seconds since the epoch.");
    sample(t, d->started, "calibd_start_time_seconds");
    help(t, "calibd_messages_total", "counter", "Messages received on the ingest sockets.");
    put(t, "calibd_messages_total %llu\n", (unsigned long long)d->messages);
    help(t, "calibd_models_removed_total", "counter",
         "Models removed: forgotten (calibctl forget), or expired (model_idle_ttl).");
    put(t, "calibd_models_removed_total{reason=\"forgotten\"} %llu\n",
        (unsigned long long)d->models_forgotten);
    put(t, "calibd_models_removed_total{reason=\"expired\"} %llu\n",
        (unsigned long long)d->models_expired);
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
    http_counters(t, &d->http);
}

/* The families of models s[0..n) (with d, the daemon's rejections too):
 * each begins with help(), whatever n, so that a round renders each model
 * into the same sequence of families. */
static void render_models(text *t, const calibd *d, const snap *s, size_t n)
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
}

/* ------------------------------------------------------------ history */

/* /history?model=NAME as JSON (server thread, under the lock). */
static void render_history(text *t, const hist *h, long i, const char *name)
{
    static const char *cols = "[\"t\",\"raw\",\"raw_lo\",\"raw_hi\",\"calibrated\","
                              "\"calibrated_lo\",\"calibrated_hi\",\"scored\"]";
    put(t, "{\"model\":");
    json_str(t, name);
    put(t, ",\"step\":%g,\"columns\":%s,\"points\":[", h->step, cols);
    for (size_t j = 0; i >= 0 && j < h->s[i]->len; j++) {
        const hist_point *p = hist_at(h, (size_t)i, j);
        put(t, "%s[%.17g", j ? "," : "", p->t);
        for (int k = 0; k < HIST_VALUES; k++) {
            if (isfinite(p->v[k]))
                put(t, ",%.9g", (double)p->v[k]);
            else
                put(t, ",null");
        }
        put(t, ",%u]", (unsigned)p->n);
    }
    put(t, "]}\n");
}

/* Loop thread: model m's point of the history, if it has a window. */
static void history_add(http_server *h, model *m, double wall)
{
    if (!m->shaped || !m->view.have)
        return;
    pthread_mutex_lock(&h->lock);
    if (m->hist < 0)
        m->hist = hist_find(&h->hist, m->name, 1); /* -1 out of memory: next step */
    if (m->hist >= 0) {
        const calib_accum *raw = &m->view.w.stat[VIEW_RAW * WS_PER_VIEW + WS_MAIN],
                          *cal = &m->view.w.stat[VIEW_CAL * WS_PER_VIEW + WS_MAIN];
        double ci[2][2];
        calib_accum_ci95(raw, ci[0]);
        calib_accum_ci95(cal, ci[1]);
        hist_point p = {.t = wall,
                        .v = {(float)calib_accum_mean(raw), (float)ci[0][0], (float)ci[0][1],
                              (float)calib_accum_mean(cal), (float)ci[1][0], (float)ci[1][1]},
                        .n = raw->n > UINT32_MAX ? UINT32_MAX : (uint32_t)raw->n};
        hist_add(&h->hist, (size_t)m->hist, &p);
    }
    pthread_mutex_unlock(&h->lock);
}

/* The history's file written from w; 0, or -1 with err set. */
static int history_write(const calibd *d, const calib_mpw *w, char *err, size_t errlen)
{
    if (calib_mpw_error(w)) {
        snprintf(err, errlen, "history: out of memory");
        return -1;
    }
    return state_write_file(d->cfg.state_dir, "history", w->sb.data, w->sb.size, err, errlen);
}

static void history_logged(calibd *d, int rc, const char *err)
{
    if (rc != 0)
        log_msg(&d->log, rc < 0 ? LOG_ERROR : LOG_WARN, "http", "%s", err);
}

int http_history_save(http_server *h, calibd *d)
{
    if (!h->started || !h->hist.cap)
        return 0;
    calib_mpw w;
    char err[4800];
    calib_mpw_init(&w);
    hist_write(&h->hist, &w); /* the loop's own: no lock to read it */
    int rc = history_write(d, &w, err, sizeof err);
    history_logged(d, rc, err);
    calib_mpw_destroy(&w);
    return rc < 0 ? -1 : 0;
}

/* The periodic save, a series at a time on the loop (the loop alone
 * changes the history, so it reads it without the lock), written by a
 * worker. */
static size_t series_now(void *arg)
{
    return ((http_server *)arg)->hist.n;
}

static void save_series(void *arg, size_t i)
{
    http_server *h = arg;
    hist_write_series(&h->hist, i, &h->saving.w);
}

static void save_work(uv_work_t *req)
{
    http_server *h = req->data;
    http_saving *s = &h->saving;
    s->rc = history_write(h->d, &s->w, s->err, sizeof s->err);
}

static void save_done(uv_work_t *req, int status)
{
    http_server *h = req->data;
    h->saving.busy = 0;
    history_logged(h->d, status ? -1 : h->saving.rc, status ? uv_strerror(status) : h->saving.err);
}

static void series_packed(void *arg)
{
    http_server *h = arg;
    http_saving *s = &h->saving;
    hist_write_end(&s->w);
    s->work.data = h;
    if (uv_queue_work(h->d->loop, &s->work, save_work, save_done) != 0) {
        save_work(&s->work); /* no worker: at once */
        save_done(&s->work, 0);
    }
}

static void save_start(http_server *h)
{
    http_saving *s = &h->saving;
    if (s->busy || !s->series.ready)
        return;
    s->busy = 1;
    calib_mpw_reset(&s->w);
    hist_write_begin(&h->hist, &s->w);
    slicer_start(&s->series);
}

void http_history_load(http_server *h, calibd *d)
{
    char *buf, err[4800], moved[4400];
    size_t len;
    if (!h->mhd || !h->hist.cap)
        return;
    /* 64 bytes a point at most, as hist_write writes them */
    size_t max = 4096 + (d->cfg.history + 16) * 64 * (d->cfg.max_models + 16);
    int rc = state_read_file(d->cfg.state_dir, "history", max, &buf, &len, err, sizeof err);
    if (rc == 1)
        return;
    pthread_mutex_lock(&h->lock);
    if (rc == 0)
        rc = hist_read(&h->hist, buf, len, err, sizeof err);
    size_t series = h->hist.n;
    pthread_mutex_unlock(&h->lock);
    free(buf);
    if (rc == 0) {
        log_msg(&d->log, LOG_INFO, "http", "history of %zu models restored from %s/history",
                series, d->cfg.state_dir);
        return;
    }
    if (state_move_aside(d->cfg.state_dir, "history", moved, sizeof moved) == 0)
        log_msg(&d->log, LOG_WARN, "http", "%s/history: %s; moved aside to %s, the history "
                "starts anew", d->cfg.state_dir, err, moved);
    else
        log_msg(&d->log, LOG_WARN, "http", "%s/history: %s; it could not be moved aside "
                "(%s), the history starts anew", d->cfg.state_dir, err, strerror(errno));
}

/* ------------------------------------------------------------ access */

/* Overwrites a secret before its memory goes (a plain memset may be
 * optimised away, and explicit_bzero is not POSIX). */
static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

int http_secret_equal(const void *given, size_t given_len, const void *secret,
                      size_t secret_len)
{
    const unsigned char *g = given, *s = secret;
    /* every byte of the kept secret, whatever is given, to the end: the
     * time tells neither how much of a guess is right nor where it
     * differs */
    volatile unsigned diff = given_len != secret_len;
    for (size_t i = 0; i < secret_len; i++)
        diff |= (unsigned)(s[i] ^ (given_len ? g[i % given_len] : 0u));
    return diff == 0;
}

/* The file at path whole (at most max bytes), NUL-terminated, in *out;
 * 0, or -1 with err set. */
static int read_whole(const char *path, size_t max, char **out, size_t *len, char *err,
                      size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    const char *why = fstat(fd, &st) != 0          ? strerror(errno)
                      : !S_ISREG(st.st_mode)       ? "not a regular file"
                      : (uintmax_t)st.st_size > max ? "too large"
                                                    : NULL;
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st.st_size, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        close(fd);
        return -1;
    }
    while (n < cap) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            wipe(buf, cap);
            free(buf);
            close(fd);
            return -1;
        }
        if (got == 0)
            break; /* shrunk meanwhile: what is there */
        n += (size_t)got;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* RFC 6750's b64token: what can follow "Bearer " in a header. */
static int token_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~+/", c));
}

/* The token of the file's text (its error says where, never the secret). */
static int parse_token(http_auth *a, const char *path, const char *buf, size_t len, char *err,
                       size_t errlen)
{
    size_t n = strcspn(buf, "\r\n"), body = n;
    for (size_t i = n; i < len; i++)
        if (buf[i] != '\r' && buf[i] != '\n') {
            snprintf(err, errlen, "%s: more than one line: the file holds one token", path);
            return -1;
        }
    while (body && buf[body - 1] == '=') /* padding, at the end only */
        body--;
    if (body == 0) {
        snprintf(err, errlen, "%s: empty: the file holds one token", path);
        return -1;
    }
    for (size_t i = 0; i < body; i++)
        if (!token_char((unsigned char)buf[i])) {
            snprintf(err, errlen, "%s: character %zu of the token is not one of A-Z a-z 0-9 "
                     "- . _ ~ + / (or = at the end)", path, i + 1);
            return -1;
        }
    if (n < HTTP_TOKEN_MIN || n > HTTP_SECRET_MAX) {
        snprintf(err, errlen, "%s: the token has %zu characters: %d to %d are needed "
                 "(e.g. openssl rand -hex 32)", path, n, HTTP_TOKEN_MIN, HTTP_SECRET_MAX);
        return -1;
    }
    if (!(a->token = malloc(n + 1))) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(a->token, buf, n);
    a->token[n] = 0;
    a->token_len = n;
    return 0;
}

static int printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* One user:password line (without its end) into a. */
static int parse_user(http_auth *a, const char *path, size_t lineno, const char *line,
                      size_t n, char *err, size_t errlen)
{
    const char *colon = memchr(line, ':', n);
    const char *why = NULL;
    if (n > HTTP_SECRET_MAX)
        why = "longer than 4096 bytes";
    else if (!colon)
        why = "expected user:password";
    else if (colon == line)
        why = "empty user name";
    else if (colon == line + n - 1)
        why = "empty password";
    else if (!printable(line, n))
        why = "a control character";
    else if (a->nusers == HTTP_USERS_MAX)
        why = "more than 256 users";
    if (why) {
        snprintf(err, errlen, "%s:%zu: %s", path, lineno, why);
        return -1;
    }
    size_t name_len = (size_t)(colon - line), pass_len = n - name_len - 1;
    for (size_t i = 0; i < a->nusers; i++)
        if (a->users[i].name_len == name_len && memcmp(a->users[i].name, line, name_len) == 0) {
            snprintf(err, errlen, "%s:%zu: user '%.*s' again", path, lineno, (int)name_len,
                     line);
            return -1;
        }
    http_user *u = realloc(a->users, (a->nusers + 1) * sizeof *u);
    if (!u) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    a->users = u;
    u = &a->users[a->nusers];
    if (!(u->name = malloc(n + 1))) { /* name and password in one block */
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(u->name, line, name_len);
    u->name[name_len] = 0;
    u->pass = u->name + name_len + 1;
    memcpy(u->pass, colon + 1, pass_len);
    u->pass[pass_len] = 0;
    u->name_len = name_len;
    u->pass_len = pass_len;
    a->nusers++;
    return 0;
}

static int parse_users(http_auth *a, const char *path, const char *buf, size_t len, char *err,
                       size_t errlen)
{
    size_t lineno = 0;
    for (const char *p = buf, *end = buf + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *next = nl ? nl + 1 : end;
        lineno++;
        if (n && p[n - 1] == '\r')
            n--;
        if (n && p[0] != '#' && parse_user(a, path, lineno, p, n, err, errlen) != 0)
            return -1;
        p = next;
    }
    if (a->nusers == 0) {
        snprintf(err, errlen, "%s: no user:password line", path);
        return -1;
    }
    return 0;
}

/* A secret file read, parsed by parse, then wiped. */
static int load_secret(http_auth *a, const char *path,
                       int (*parse)(http_auth *, const char *, const char *, size_t, char *,
                                    size_t),
                       char *err, size_t errlen)
{
    char *buf;
    size_t len;
    /* the whole basic-auth file's worth at most */
    if (read_whole(path, (size_t)HTTP_USERS_MAX * (HTTP_SECRET_MAX + 2), &buf, &len, err,
                   errlen) != 0)
        return -1;
    int rc = memchr(buf, 0, len) ? -1 : 0;
    if (rc != 0)
        snprintf(err, errlen, "%s: a NUL byte: expected text", path);
    else
        rc = parse(a, path, buf, len, err, errlen);
    wipe(buf, len);
    free(buf);
    return rc;
}

int http_auth_load(http_auth *a, const char *token_file, const char *basic_file, char *err,
                   size_t errlen)
{
    *a = (http_auth){0};
    if ((token_file && load_secret(a, token_file, parse_token, err, errlen) != 0) ||
        (basic_file && load_secret(a, basic_file, parse_users, err, errlen) != 0)) {
        http_auth_free(a);
        return -1;
    }
    return 0;
}

void http_auth_free(http_auth *a)
{
    if (a->token) {
        wipe(a->token, a->token_len);
        free(a->token);
    }
    for (size_t i = 0; i < a->nusers; i++) {
        wipe(a->users[i].name, a->users[i].name_len + a->users[i].pass_len + 2);
        free(a->users[i].name);
    }
    free(a->users);
    *a = (http_auth){0};
}

int http_auth_required(const http_auth *a, const char *url)
{
    return (a->token || a->nusers) && (a->metrics || strcmp(url, "/metrics") != 0);
}

enum http_verdict http_auth_check(const http_auth *a, const char *url,
                                  const char *authorization, const char *user,
                                  const char *pass)
{
    if (!http_auth_required(a, url))
        return HTTP_AUTH_PASS;
    if (!authorization)
        return HTTP_AUTH_MISSING;
    int ok = 0;
    if (a->token && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *t = authorization + 7;
        while (*t == ' ')
            t++;
        ok = http_secret_equal(t, strlen(t), a->token, a->token_len);
    } else if (user && pass) {
        size_t ul = strlen(user), pl = strlen(pass);
        /* every user, each compare whole: which one matched, and whether
         * the name did, stays out of the time */
        for (size_t i = 0; i < a->nusers; i++)
            ok |= http_secret_equal(user, ul, a->users[i].name, a->users[i].name_len) &
                  http_secret_equal(pass, pl, a->users[i].pass, a->users[i].pass_len);
    }
    return ok ? HTTP_AUTH_PASS : HTTP_AUTH_WRONG;
}

/* Whether PEM text holds a block of the kind (see http_pem_load); NULL,
 * or what is wrong. */
static const char *pem_check(const char *buf, const char *kind)
{
    int key = strcmp(kind, "PRIVATE KEY") == 0, encrypted = 0;
    static const char begin[] = "-----BEGIN ";
    for (const char *p = strstr(buf, begin); p; p = strstr(p + 1, begin)) {
        const char *label = p + sizeof begin - 1, *end = strstr(label, "-----");
        if (!end)
            break;
        size_t n = (size_t)(end - label), kn = strlen(kind);
        if (!key && n == kn && memcmp(label, kind, n) == 0)
            return NULL;
        if (key && n >= kn && memcmp(end - kn, kind, kn) == 0) {
            const char *next = strstr(end, begin);
            const char *proc = strstr(end, "Proc-Type: 4,ENCRYPTED");
            static const char pkcs8[] = "ENCRYPTED PRIVATE KEY";
            if ((n == sizeof pkcs8 - 1 && memcmp(label, pkcs8, n) == 0) ||
                (proc && (!next || proc < next)))
                encrypted = 1;
            else
                return NULL;
        }
    }
    if (encrypted)
        return "the private key is encrypted; calibd needs it unencrypted, readable by "
               "calibd alone (openssl pkey -in KEY -out PLAIN)";
    return key ? "no PEM private key (-----BEGIN ... PRIVATE KEY-----)"
               : "no PEM certificate (-----BEGIN CERTIFICATE-----)";
}

int http_pem_load(const char *path, const char *kind, char **out, size_t *len, char *err,
                  size_t errlen)
{
    char *buf;
    size_t n;
    if (read_whole(path, HTTP_PEM_MAX, &buf, &n, err, errlen) != 0)
        return -1;
    const char *why = memchr(buf, 0, n) ? "a NUL byte: expected PEM text (DER? openssl "
                                          "x509 -inform der or openssl pkey -inform der "
                                          "converts it)"
                                        : pem_check(buf, kind);
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        wipe(buf, n);
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* A line for the log from the server's thread, written by the next tick. */
__attribute__((format(printf, 3, 4)))
static void note(http_server *h, int kind, const char *fmt, ...)
{
    http_note n = {.kind = kind};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n.text, sizeof n.text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&h->note_lock);
    if (h->nnotes < HTTP_NOTES)
        h->notes[h->nnotes++] = n;
    else
        h->notes_lost++;
    pthread_mutex_unlock(&h->note_lock);
}

/* libmicrohttpd's lines: the error of a start that fails, then notes
 * (rate-limited by the loop: a client cannot flood the log with, say,
 * plain HTTP to the TLS port). */
__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *h = cls;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = 0;
    if (!n)
        return;
    pthread_mutex_lock(&h->note_lock);
    if (!h->mhd_up) {
        size_t used = strlen(h->start_err);
        snprintf(h->start_err + used, sizeof h->start_err - used, "%s%s", used ? "; " : "",
                 line);
    } else if (h->nnotes < HTTP_NOTES) {
        http_note *note_ = &h->notes[h->nnotes++];
        note_->kind = 1;
        snprintf(note_->text, sizeof note_->text, "%s", line);
    } else {
        h->notes_lost++;
    }
    pthread_mutex_unlock(&h->note_lock);
}

/* Loop thread: the notes into the log, at a limited rate. */
static void notes_flush(http_server *h, logger *log)
{
    http_note n[HTTP_NOTES];
    pthread_mutex_lock(&h->note_lock);
    unsigned k = h->nnotes;
    unsigned long long lost = h->notes_lost;
    memcpy(n, h->notes, k * sizeof n[0]);
    h->nnotes = 0;
    h->notes_lost = 0;
    pthread_mutex_unlock(&h->note_lock);
    for (unsigned i = 0; i < k; i++) {
        if (n[i].kind == 0)
            log_rl(log, LOG_WARN, "http", "unauthorized: %s", n[i].text);
        else
            log_rl(log, LOG_WARN, "http", "libmicrohttpd: %s", n[i].text);
    }
    if (lost)
        log_rl(log, LOG_WARN, "http", "%llu more lines of the HTTP server since the last tick "
               "not logged", lost);
}

/* A secret file others can read: said once, at start. */
static void warn_readable(logger *log, const char *key, const char *path)
{
    struct stat st;
    if (log && stat(path, &st) == 0 && (st.st_mode & S_IROTH))
        log_msg(log, LOG_WARN, "http", "%s %s can be read by every user (mode %03o): "
                "chmod o-rwx it", key, path, (unsigned)(st.st_mode & 0777));
}

/* Reads acc's files into h (before the server starts). 0, or -1 with err
 * set (what was read is freed by the caller, access_free). */
static int access_start(http_server *h, const http_access *acc, const char *host, char *err,
                        size_t errlen)
{
    char why[600];
    if (!acc->tls_cert != !acc->tls_key) {
        snprintf(err, errlen, "http: http_tls_cert and http_tls_key go together: set both, "
                 "or neither");
        return -1;
    }
    if (acc->tls_cert) {
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
            snprintf(err, errlen, "http: http_tls_cert: this libmicrohttpd (%s) was built "
                     "without TLS (GnuTLS)", MHD_get_version());
            return -1;
        }
        if (http_pem_load(acc->tls_cert, "CERTIFICATE", &h->tls_cert, &h->tls_cert_len, why,
                          sizeof why) != 0) {
            snprintf(err, errlen, "http: http_tls_cert %s", why);
            return -1;
        }
        if (http_pem_load(acc->tls_key, "PRIVATE KEY", &h->tls_key, &h->tls_key_len, why,
                          sizeof why) != 0) {
            snprintf(err, errlen, "http: http_tls_key %s", why);
            return -1;
        }
        warn_readable(acc->log, "http_tls_key", acc->tls_key);
    }
    if (acc->basic_file && !MHD_is_feature_supported(MHD_FEATURE_BASIC_AUTH)) {
        snprintf(err, errlen, "http: http_auth_basic_file: this libmicrohttpd (%s) was built "
                 "without basic authentication", MHD_get_version());
        return -1;
    }
    if (http_auth_load(&h->auth, acc->token_file, acc->basic_file, why, sizeof why) != 0) {
        snprintf(err, errlen, "http: %s", why);
        return -1;
    }
    int auth = h->auth.token || h->auth.nusers;
    if (acc->auth_metrics && !auth) { /* fail closed: /metrics would stay open */
        snprintf(err, errlen, "http: http_auth_metrics = yes needs credentials: "
                 "http_auth_token_file or http_auth_basic_file");
        return -1;
    }
    h->auth.metrics = acc->auth_metrics;
    if (acc->token_file)
        warn_readable(acc->log, "http_auth_token_file", acc->token_file);
    if (acc->basic_file)
        warn_readable(acc->log, "http_auth_basic_file", acc->basic_file);
    if (acc->log && strncmp(host, "127.", 4) != 0) {
        if (auth && !h->tls_cert)
            log_msg(acc->log, LOG_WARN, "http", "%s is not loopback and has no TLS: tokens and "
                    "passwords cross the network in clear (http_tls_cert, http_tls_key)", host);
        else if (!auth)
            log_msg(acc->log, LOG_WARN, "http", "%s is not loopback and needs no credentials: "
                    "/status, /history and the page are open to whoever reaches it "
                    "(http_auth_token_file, http_auth_basic_file)", host);
    }
    return 0;
}

static void access_free(http_server *h)
{
    http_auth_free(&h->auth);
    if (h->tls_key)
        wipe(h->tls_key, h->tls_key_len);
    free(h->tls_key);
    free(h->tls_cert);
    h->tls_key = h->tls_cert = NULL;
}

/* The peer's address, for the log. */
static void peer_name(struct MHD_Connection *c, char *out, size_t len)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, len, "?");
    if (!info || !info->client_addr)
        return;
    if (info->client_addr->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, info->client_addr, sizeof in);
        if (!inet_ntop(AF_INET, &in.sin_addr, out, (socklen_t)len))
            snprintf(out, len, "?");
    } else if (info->client_addr->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, info->client_addr, sizeof in6);
        if (!inet_ntop(AF_INET6, &in6.sin6_addr, out, (socklen_t)len))
            snprintf(out, len, "?");
    }
}

static struct MHD_Response *text_response(const char *body);

/* 401, with a challenge for each kind of credentials accepted; counted,
 * and noted for the log. */
static enum MHD_Result refuse(http_server *h, struct MHD_Connection *c, const char *method,
                              const char *url, enum http_verdict v, int bearer)
{
    char peer[INET6_ADDRSTRLEN + 1], what[LOG_ESCAPE_SIZE(64)], how[LOG_ESCAPE_SIZE(16)];
    peer_name(c, peer, sizeof peer);
    log_escape(what, sizeof what, url, strlen(url), 64);
    log_escape(how, sizeof how, method, strlen(method), 16);
    pthread_mutex_lock(&h->lock);
    h->unauthorized[v == HTTP_AUTH_WRONG]++;
    pthread_mutex_unlock(&h->lock);
    note(h, 0, "%s %s from %s: %s", how, what, peer,
         v == HTTP_AUTH_MISSING ? "no credentials" : "wrong credentials");
    struct MHD_Response *r = text_response("calibd: credentials needed\n");
    if (!r)
        return MHD_NO;
    enum MHD_Result ret = MHD_YES;
    if (h->auth.token)
        ret = MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                      v == HTTP_AUTH_WRONG && bearer
                                          ? "Bearer realm=\"" HTTP_REALM "\", "
                                            "error=\"invalid_token\""
                                          : "Bearer realm=\"" HTTP_REALM "\"");
    if (ret == MHD_YES)
        ret = h->auth.nusers ? MHD_queue_basic_auth_fail_response(c, HTTP_REALM, r)
                             : MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
    MHD_destroy_response(r);
    return ret;
}

/* The verdict on a request, with libmicrohttpd's decoding of basic auth. */
static enum http_verdict authorize(http_server *h, struct MHD_Connection *c, const char *url,
                                   int *bearer)
{
    const char *authz =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    char *user = NULL, *pass = NULL;
    *bearer = authz && strncasecmp(authz, "Bearer ", 7) == 0;
    if (h->auth.nusers && authz && strncasecmp(authz, "Basic ", 6) == 0)
        user = MHD_basic_auth_get_username_password(c, &pass);
    enum http_verdict v = http_auth_check(&h->auth, url, authz, user, pass);
    if (pass) {
        wipe(pass, strlen(pass));
        MHD_free(pass);
    }
    if (user)
        MHD_free(user);
    return v;
}

/* ------------------------------------------------------------ server */

static double mono_now(void);

static struct MHD_Response *text_response(const char *body)
{
    return MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
}

/* A copy of a snapshot (under the lock), or 503 with Retry-After when
 * there is none yet. */
/* Text served: the server's current one and each response that sends it
 * hold it, and the last to let go frees it, so a request copies nothing
 * and holds no lock while it is sent. */
typedef struct http_blob {
    atomic_size_t refs;
    size_t len;
    char *data;
} http_blob;

static http_blob *blob_new(char *data, size_t len)
{
    http_blob *b = malloc(sizeof *b);
    if (!b) {
        free(data);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->data = data;
    b->len = len;
    return b;
}

static void blob_release(void *arg)
{
    http_blob *b = arg;
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b->data);
        free(b);
    }
}

/* The response of a snapshot (under the lock), or a 503 before there is
 * one. */
static struct MHD_Response *snapshot(http_blob *b, const char *type, const char *what,
                                     unsigned *code)
{
    if (b) {
        atomic_fetch_add(&b->refs, 1);
        struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
            b->len, b->data, blob_release, b);
        if (r)
            MHD_add_response_header(r, "Content-Type", type);
        else
            blob_release(b);
        return r;
    }
    char body[128];
    snprintf(body, sizeof body, "calibd: no %s snapshot yet\n", what);
    *code = MHD_HTTP_SERVICE_UNAVAILABLE;
    struct MHD_Response *r = text_response(body);
    if (r)
        MHD_add_response_header(r, "Retry-After", "1");
    return r;
}

static struct MHD_Response *route(http_server *h, struct MHD_Connection *c, const char *url,
                                  unsigned *code)
{
    struct MHD_Response *r = NULL;
    if (strcmp(url, "/") == 0) {
        r = MHD_create_response_from_buffer(calibd_page_len, (void *)calibd_page,
                                            MHD_RESPMEM_PERSISTENT);
        if (r) {
            MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
            /* nothing from elsewhere: the page works with no network */
            MHD_add_response_header(r, "Content-Security-Policy",
                                    "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                    "script-src 'self' 'unsafe-inline'; img-src 'self' data:");
        }
        return r;
    }
    if (strcmp(url, "/healthz") == 0) {
        pthread_mutex_lock(&h->lock);
        double age = mono_now() - h->beat, limit = h->health_timeout;
        pthread_mutex_unlock(&h->lock);
        char body[160];
        if (age <= limit) {
            snprintf(body, sizeof body, "ok\n");
        } else {
            *code = MHD_HTTP_SERVICE_UNAVAILABLE;
            snprintf(body, sizeof body, "calibd: the event loop has not ticked for %.1f s "
                     "(health_timeout %g s)\n", age, limit);
        }
        return text_response(body);
    }
    if (strcmp(url, "/history") == 0) {
        const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
        text t = {.cap = 4096};
        if (!(t.buf = malloc(t.cap)))
            return NULL;
        pthread_mutex_lock(&h->lock);
        long i = name ? hist_find(&h->hist, name, 0) : -1;
        if (i >= 0)
            render_history(&t, &h->hist, i, name);
        pthread_mutex_unlock(&h->lock);
        if (i < 0) {
            *code = MHD_HTTP_NOT_FOUND;
            put(&t, "{\"error\":\"%s\"}\n", name ? "no history for this model yet"
                                                 : "expected ?model=NAME");
        }
        if (t.failed) {
            free(t.buf);
            return NULL;
        }
        r = MHD_create_response_from_buffer(t.len, t.buf, MHD_RESPMEM_MUST_FREE);
        if (r)
            MHD_add_response_header(r, "Content-Type", "application/json");
        else
            free(t.buf);
        return r;
    }
    if (strcmp(url, "/metrics") == 0 || strcmp(url, "/status") == 0) {
        int metrics = url[1] == 'm';
        pthread_mutex_lock(&h->lock);
        if (metrics) {
            h->metrics_wanted = mono_now();
            r = snapshot(h->text, "text/plain; version=0.0.4", "metrics", code);
        } else {
            h->status_wanted = mono_now();
            r = snapshot(h->status, "application/json", "status", code);
        }
        pthread_mutex_unlock(&h->lock);
        return r;
    }
    *code = MHD_HTTP_NOT_FOUND;
    return text_response("calibd: see / (the page), /metrics, /status, "
                         "/history?model=NAME, /healthz\n");
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_len, void **state)
{
    http_server *h = cls;
    (void)version;
    (void)upload;
    (void)upload_len;
    (void)state;
    struct MHD_Response *r;
    unsigned code = MHD_HTTP_OK;
    /* credentials first: without them, not even which paths exist */
    if (http_auth_required(&h->auth, url)) {
        int bearer;
        enum http_verdict v = authorize(h, c, url, &bearer);
        if (v != HTTP_AUTH_PASS)
            return refuse(h, c, method, url, v, bearer);
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    } else {
        r = route(h, c, url, &code);
    }
    if (!r)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* MHD's thread: a connection opens or closes. MHD calls CLOSED before it
 * closes the descriptor, so under the lock the list never holds a closed
 * one, and http_update's shutdown can never reach a reused descriptor. */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *h = cls;
    http_conn *hc = *ctx;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info || !(hc = calloc(1, sizeof *hc)))
            return; /* untracked: MHD's own idle timeout still applies */
        hc->fd = info->connect_fd;
        hc->since = mono_now();
        pthread_mutex_lock(&h->lock);
        hc->next = h->conns;
        if (h->conns)
            h->conns->prev = hc;
        h->conns = hc;
        pthread_mutex_unlock(&h->lock);
        *ctx = hc;
    } else if (hc) {
        pthread_mutex_lock(&h->lock);
        if (hc->prev)
            hc->prev->next = hc->next;
        else
            h->conns = hc->next;
        if (hc->next)
            hc->next->prev = hc->prev;
        pthread_mutex_unlock(&h->lock);
        free(hc);
        *ctx = NULL;
    }
}

/* MHD's thread: a request was answered; its connection's clock restarts. */
static void on_request_done(void *cls, struct MHD_Connection *c, void **req_ctx,
                            enum MHD_RequestTerminationCode code)
{
    http_server *h = cls;
    (void)req_ctx;
    (void)code;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!info || !info->socket_context)
        return;
    pthread_mutex_lock(&h->lock);
    ((http_conn *)info->socket_context)->since = mono_now();
    pthread_mutex_unlock(&h->lock);
}

/* Loop thread: shuts down connections past their deadline; MHD then reads
 * end-of-file and closes them. */
static void cut_slow(http_server *h)
{
    double now = mono_now();
    pthread_mutex_lock(&h->lock);
    for (http_conn *c = h->conns; c; c = c->next)
        if (!c->cut && now - c->since > h->lim.timeout) {
            shutdown(c->fd, SHUT_RDWR);
            c->cut = 1;
            h->timeouts++;
        }
    pthread_mutex_unlock(&h->lock);
}

int http_start(http_server *h, const char *addr, const http_limits *lim,
               const http_access *acc, char *err, size_t errlen)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    char *end;
    unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
    memset(h, 0, sizeof *h);
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host || *end ||
        port > 65535) {
        snprintf(err, errlen, "http: '%s' is not ADDR:PORT", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "http: '%s' is not an IPv4 address", host);
        return -1;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->note_lock, NULL);
    h->lim = *lim;
    if (acc && access_start(h, acc, host, err, errlen) != 0)
        goto fail;
    hist_init(&h->hist, lim->history, lim->history_step);
    unsigned idle = (unsigned)ceil(lim->timeout);
    /* TLS 1.2 and 1.3 only, from the key and certificate read above */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
        {MHD_OPTION_END, 0, NULL},
    };
    /* one polling thread (epoll where there is one): a slow client costs a
     * descriptor and a small memory pool, never a thread */
    h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                                  MHD_USE_ERROR_LOG | (h->tls_cert ? MHD_USE_TLS : 0),
                              (uint16_t)port, NULL, NULL, answer, h,
                              /* first, so that every line of its start goes there */
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                              lim->max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                              lim->max_per_addr, MHD_OPTION_CONNECTION_TIMEOUT,
                              idle ? idle : 1u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)32768, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                              h, MHD_OPTION_NOTIFY_COMPLETED, on_request_done, h,
                              MHD_OPTION_ARRAY, &tls[h->tls_cert ? 0 : 3], MHD_OPTION_END);
    if (!h->mhd) {
        /* libmicrohttpd's own lines say why: the port, or GnuTLS on the
         * certificate and key (which must match) */
        snprintf(err, errlen, "http: cannot %s on %s%s%s",
                 h->tls_cert ? "serve TLS" : "listen", addr, h->start_err[0] ? ": " : "",
                 h->start_err[0] ? h->start_err : "");
        goto fail;
    }
    pthread_mutex_lock(&h->note_lock);
    h->mhd_up = 1; /* a line it wrote on its way up is worth the log too */
    if (h->start_err[0] && h->nnotes < HTTP_NOTES) { /* cut to a note's size */
        http_note *n = &h->notes[h->nnotes++];
        size_t len = strnlen(h->start_err, sizeof n->text - 1);
        n->kind = 1;
        memcpy(n->text, h->start_err, len);
        n->text[len] = 0;
    }
    pthread_mutex_unlock(&h->note_lock);
    h->started = 1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    return info && info->port ? info->port : (int)port;
fail:
    access_free(h);
    pthread_mutex_destroy(&h->note_lock);
    pthread_mutex_destroy(&h->lock);
    return -1;
}

/* ------------------------------------------------------------ rounds */

static size_t models_now(void *arg)
{
    return ((http_server *)arg)->d->nmodels;
}

/* One model into the round: its metrics, family by family, its status,
 * its history point. */
static void round_model(void *arg, size_t i)
{
    http_server *h = arg;
    http_round *r = &h->round;
    model *m = h->d->models[i];
    if (r->metrics && !r->failed) {
        snap s = {.m = m, .w = &m->view.w, .have_w = m->view.have};
        text t = fam_text(r, 0);
        render_models(&t, NULL, &s, 1);
        fam_stash(&t);
        r->failed = t.failed;
    }
    if (r->status)
        control_status_model(&r->st, m);
    if (r->point)
        history_add(h, m, r->point_at);
}

/* The worker's share: the parts joined into the text served, the status
 * converted to JSON. Only the round's buffers are read. */
static void join_work(uv_work_t *req)
{
    http_round *r = &((http_server *)req->data)->round;
    r->text = r->json = NULL;
    if (r->metrics && !r->failed) {
        size_t len = r->daemon.len;
        for (size_t f = 0; f < r->nfam; f++)
            len += r->fam[f].len;
        if ((r->text = malloc(len ? len : 1))) {
            memcpy(r->text, r->daemon.buf, r->daemon.len);
            r->text_len = r->daemon.len;
            for (size_t f = 0; f < r->nfam; f++) {
                memcpy(r->text + r->text_len, r->fam[f].buf, r->fam[f].len);
                r->text_len += r->fam[f].len;
            }
        }
    }
    /* the families' buffers go: the joined text is their copy, and the
     * next round's grow again (one copy of the text kept, not two) */
    for (size_t f = 0; f < r->nfam; f++) {
        free(r->fam[f].buf);
        r->fam[f] = (http_text){0};
    }
    if (r->status && calib_mpw_error(&r->st) == CALIB_OK)
        r->json = msgpack_to_json(r->st.sb.data, r->st.sb.size, &r->json_len);
}

/* Swaps in a new text (NULL: drop the current one, when keep is 0). */
static void swap_blob(http_blob **cur, char *data, size_t len, int keep)
{
    http_blob *b = data ? blob_new(data, len) : NULL;
    if (!b && keep)
        return; /* out of memory: the last one stays */
    blob_release(*cur);
    *cur = b;
}

static void join_done(uv_work_t *req, int status)
{
    http_server *h = req->data;
    http_round *r = &h->round;
    if (status != 0) /* cancelled: nothing joined */
        r->text = r->json = NULL;
    r->busy = 0;
    h->round_seconds = mono_now() - r->begun;
    h->round_slice_max = r->models.slice_max;
    if (!h->mhd) { /* stopped meanwhile */
        free(r->text);
        free(r->json);
        return;
    }
    pthread_mutex_lock(&h->lock);
    if (r->metrics || h->text) /* not asked for: dropped, so never stale */
        swap_blob(&h->text, r->text, r->text_len, r->metrics);
    if (r->status || h->status) /* not asked for: dropped, so never stale */
        swap_blob(&h->status, r->json, r->json_len, r->status);
    pthread_mutex_unlock(&h->lock);
}

static void round_rendered(void *arg)
{
    http_server *h = arg;
    http_round *r = &h->round;
    if (r->status)
        control_status_end(&r->st);
    r->busy = 2; /* the worker's */
    r->work.data = h;
    if (uv_queue_work(h->d->loop, &r->work, join_work, join_done) != 0) {
        join_work(&r->work); /* no worker: at once */
        join_done(&r->work, 0);
    }
}

/* Starts a round: the daemon-wide metrics and every family's header now,
 * the models in slices. */
static void round_start(http_server *h, calibd *d, int metrics, int status, double point_at)
{
    http_round *r = &h->round;
    r->busy = 1;
    r->metrics = metrics;
    r->status = status;
    r->point = point_at > 0;
    r->point_at = point_at;
    r->failed = 0;
    r->begun = mono_now();
    if (metrics) {
        text t = {.buf = r->daemon.buf, .cap = r->daemon.cap};
        if (!t.buf && (t.buf = malloc(t.cap = 1 << 16)) == NULL)
            t.failed = 1;
        render_daemon(&t, d);
        r->daemon = (http_text){t.buf, t.len, t.cap};
        for (size_t f = 0; f < r->nfam; f++)
            r->fam[f].len = 0;
        text ft = fam_text(r, 1);
        render_models(&ft, d, NULL, 0);
        fam_stash(&ft);
        r->failed = t.failed || ft.failed;
    }
    if (status) {
        calib_mpw_reset(&r->st);
        control_status_begin(d, &r->st);
    }
    slicer_start(&r->models);
}

/* The rounds' handles and buffers, at the first tick. */
static int rounds_init(http_server *h, calibd *d)
{
    h->d = d;
    calib_mpw_init(&h->round.st);
    calib_mpw_init(&h->saving.w);
    if (slicer_init(&h->round.models, d->loop, models_now, round_model, round_rendered, h) ||
        slicer_init(&h->saving.series, d->loop, series_now, save_series, series_packed, h))
        return -1;
    return 0;
}

int http_rendering(const http_server *h)
{
    return h->round.busy == 1;
}

void http_update(http_server *h, calibd *d)
{
    if (!h->mhd)
        return;
    if (!h->d && rounds_init(h, d) != 0)
        log_rl(&d->log, LOG_ERROR, "http", "cannot start rendering (libuv)");
    notes_flush(h, &d->log);
    double now = mono_now(), wall = steady_now(d); /* history points: steady */
    pthread_mutex_lock(&h->lock);
    h->beat = now;
    h->health_timeout = d->cfg.health_timeout; /* a reload may change it */
    int few = d->nmodels <= HTTP_STATUS_ALWAYS;
    int status = few || now - h->status_wanted < HTTP_WANTED;
    int metrics = few || now - h->metrics_wanted < HTTP_WANTED;
    pthread_mutex_unlock(&h->lock);
    cut_slow(h);
    if (h->round.busy || !h->round.models.ready)
        return;
    double point_at = 0;
    if (h->hist.cap && wall >= h->next_point) {
        h->next_point = wall + h->hist.step;
        point_at = wall;
    }
    if (h->next_save == 0) {
        h->next_save = now + HTTP_HISTORY_SAVE;
    } else if (h->hist.cap && now >= h->next_save) {
        h->next_save = now + HTTP_HISTORY_SAVE;
        save_start(h);
    }
    round_start(h, d, metrics, status, point_at);
}

void http_stop(http_server *h)
{
    if (!h->mhd)
        return;
    MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
    slicer_close(&h->round.models);
    slicer_close(&h->saving.series);
    h->round.busy = h->round.busy == 1 ? 0 : h->round.busy; /* a join still ends */
}

void http_free(http_server *h)
{
    if (!h->started)
        return;
    http_stop(h);
    access_free(h);
    pthread_mutex_destroy(&h->note_lock);
    pthread_mutex_destroy(&h->lock);
    blob_release(h->text);
    blob_release(h->status);
    h->text = h->status = NULL;
    hist_free(&h->hist);
    free(h->round.daemon.buf);
    for (size_t f = 0; f < h->round.nfam; f++)
        free(h->round.fam[f].buf);
    free(h->round.fam);
    calib_mpw_destroy(&h->round.st);
    calib_mpw_destroy(&h->saving.w);
    h->round = (http_round){0};
    h->started = 0;
}
