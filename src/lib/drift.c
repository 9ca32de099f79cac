/* drift.c — betting e-process, drift detector and shadow gate. */
#include <math.h>
#include <stdlib.h>

#include "calib/calib.h"
#include "calib/drift.h"

/* The online Newton step's constant 2 / (2 - ln 3) (Cutkosky & Orabona). */
#define ONS_GAIN (2.0 / (2.0 - 1.0986122886681098))
#define BET_MAX 0.5

/* ------------------------------------------------------------------ e-process */

int calib_eproc_init(calib_eproc *e, double lo, double hi, double m)
{
    if (!e)
        return CALIB_EINVAL;
    *e = (calib_eproc){0};
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(m) || !(lo < m) ||
        !(m < hi) || !isfinite(hi - lo))
        return CALIB_EINVAL;
    /* The largest u, (hi - m) / (m - lo), must be finite too: otherwise
     * lambda * u could be 0 * inf. */
    if (!isfinite((hi - m) / (m - lo)))
        return CALIB_EINVAL;
    *e = (calib_eproc){.lo = lo, .hi = hi, .m = m, .a = 1};
    return CALIB_OK;
}

static double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

void calib_eproc_add(calib_eproc *e, double x)
{
    if (!e || isnan(x) || !(e->a >= 1))
        return; /* NaN, or an e-process whose init failed */
    double u = (clamp(x, e->lo, e->hi) - e->m) / (e->m - e->lo);
    double lu = e->lambda * u; /* >= -1/2: u >= -1, lambda <= 1/2 */
    double g = -u / (1 + lu);  /* d/d lambda of -ln(1 + lambda u) */
    if (lu != 0) /* a bet of 0 (frequent under H0) changes nothing */
        e->log_wealth += log1p(lu);
    e->n++;
    /* <=: along a flat stretch (lambda = 0) the estimate moves to its end */
    if (e->log_wealth <= e->min_log_wealth) {
        e->min_log_wealth = e->log_wealth;
        e->argmin = e->n;
    }
    e->a += g * g; /* may reach +inf for a huge u; then lambda freezes */
    e->lambda = clamp(e->lambda - ONS_GAIN * g / e->a, 0, BET_MAX);
}

int calib_eproc_rejects(const calib_eproc *e, double alpha)
{
    if (!e || !(alpha > 0 && alpha < 1))
        return 0; /* never reject on a bad argument */
    return e->log_wealth >= -log(alpha);
}

/* ------------------------------------------------------------------ drift detector */

static int drift_cfg_ok(const calib_drift_cfg *c)
{
    if (!(c->alpha > 0 && c->alpha < 1) || !(c->min_effect >= 0) ||
        !isfinite(c->min_effect) || c->reference < 10)
        return 0;
    switch (c->kind) {
    case CALIB_DRIFT_MEAN:
        /* the Maurer-Pontil bound needs a finite range */
        return isfinite(c->lo) && isfinite(c->hi) && c->lo < c->hi &&
               isfinite(c->hi - c->lo);
    case CALIB_DRIFT_EXCEED:
        return c->quantile > 0 && c->quantile < 1 && c->min_effect <= 1 &&
               c->reference <= SIZE_MAX / sizeof(double);
    default:
        return 0;
    }
}

int calib_drift_init(calib_drift *d, const calib_drift_cfg *cfg)
{
    if (!d)
        return CALIB_EINVAL;
    *d = (calib_drift){0};
    if (!cfg || !drift_cfg_ok(cfg))
        return CALIB_EINVAL;
    d->cfg = *cfg;
    if (cfg->kind == CALIB_DRIFT_EXCEED) {
        d->ref_x = malloc(cfg->reference * sizeof *d->ref_x);
        if (!d->ref_x)
            return CALIB_ENOMEM;
    }
    calib_drift_reset(d);
    d->resets = 0;
    return CALIB_OK;
}

void calib_drift_free(calib_drift *d)
{
    if (!d)
        return;
    free(d->ref_x);
    d->ref_x = NULL;
}

void calib_drift_reset(calib_drift *d)
{
    if (!d)
        return;
    calib_drift tmp = {
        .cfg = d->cfg,
        .state = CALIB_DRIFT_REFERENCE,
        .ref_x = d->ref_x,
        .threshold = NAN,
        .null_mean = NAN,
        .resets = d->resets + 1,
    };
    calib_accum_init(&tmp.ref);
    calib_accum_init(&tmp.watch);
    *d = tmp;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Maurer & Pontil (2009), Thm 4: an upper confidence bound on the mean of
 * i.i.d. values in [lo, hi] that holds with probability >= 1 - delta. */
static double mp_upper(const calib_accum *a, double lo, double hi,
                       double delta)
{
    double n = (double)a->n, l = log(2 / delta);
    return calib_accum_mean(a) + sqrt(2 * calib_accum_var(a) * l / n) +
           7 * (hi - lo) * l / (3 * (n - 1));
}

/* EXCEED: the threshold is the order statistic ceil(q n) of the sorted
 * reference sample; returns the fraction strictly above it. */
static double exceed_reference(calib_drift *d)
{
    size_t n = d->cfg.reference;
    qsort(d->ref_x, n, sizeof *d->ref_x, cmp_double);
    double r = ceil(d->cfg.quantile * (double)n);
    size_t k = r < 1 ? 1 : r > (double)n ? n : (size_t)r;
    d->threshold = d->ref_x[k - 1];
    while (k < n && !(d->ref_x[k] > d->threshold))
        k++; /* skip ties with the threshold */
    return (double)(n - k) / (double)n;
}

/* The range of the values the e-processes see. */
static void drift_range(const calib_drift *d, double *lo, double *hi)
{
    *lo = d->cfg.kind == CALIB_DRIFT_EXCEED ? 0 : d->cfg.lo;
    *hi = d->cfg.kind == CALIB_DRIFT_EXCEED ? 1 : d->cfg.hi;
}

/* Starts the next e-process of the bank, with weight 1 / (j (j + 1)), its
 * first sample being number `before` + 1; when the bank is full it takes
 * the place of the one of least w_j W_j. */
static void bank_start(calib_drift *d, uint64_t before)
{
    double lo, hi;
    calib_eproc e;
    drift_range(d, &lo, &hi);
    if (calib_eproc_init(&e, lo, hi, d->null_mean) != CALIB_OK)
        return;
    unsigned slot = d->nbank;
    if (slot == CALIB_DRIFT_BANK) {
        slot = 0;
        for (unsigned i = 1; i < d->nbank; i++)
            if (d->log_w[i] + d->bank[i].log_wealth <
                d->log_w[slot] + d->bank[slot].log_wealth)
                slot = i;
    } else {
        d->nbank++;
    }
    double j = (double)++d->started;
    d->bank[slot] = e;
    d->log_w[slot] = -log(j) - log(j + 1);
    d->start[slot] = before;
}

/* The end of the reference period: m0 and the first e-process (alpha
 * split in halves between the reference bound and the test). */
static void drift_start_watching(calib_drift *d)
{
    const calib_drift_cfg *c = &d->cfg;
    double lo, hi, n = (double)c->reference;
    drift_range(d, &lo, &hi);
    if (c->kind == CALIB_DRIFT_EXCEED)
        d->null_mean = exceed_reference(d) +
                       sqrt(log(2 / c->alpha) / (2 * n)) + c->min_effect;
    else
        d->null_mean = mp_upper(&d->ref, lo, hi, c->alpha / 2) + c->min_effect;
    d->state = CALIB_DRIFT_WATCHING;
    /* m0 >= hi: no stream can exceed it; the bank stays empty and every
     * sample is ignored */
    if (d->null_mean < hi)
        bank_start(d, d->n); /* after the reference's last sample */
}

static void drift_reference_add(calib_drift *d, double score)
{
    if (d->cfg.kind == CALIB_DRIFT_EXCEED)
        d->ref_x[d->ref.n] = score;
    calib_accum_add(&d->ref, score);
    if (d->ref.n == d->cfg.reference)
        drift_start_watching(d);
}

/* The value the e-processes see: the indicator for EXCEED. */
static double drift_test_value(const calib_drift *d, double score)
{
    return d->cfg.kind == CALIB_DRIFT_EXCEED ? (double)(score > d->threshold)
                                             : score;
}

/* ln sum_j w_j W_j over the bank; *best: the term of largest w_j W_j. */
static double bank_log_sum(const calib_drift *d, unsigned *best)
{
    unsigned b = 0;
    for (unsigned i = 1; i < d->nbank; i++)
        if (d->log_w[i] + d->bank[i].log_wealth > d->log_w[b] + d->bank[b].log_wealth)
            b = i;
    double top = d->log_w[b] + d->bank[b].log_wealth, sum = 0;
    for (unsigned i = 0; i < d->nbank; i++)
        sum += exp(d->log_w[i] + d->bank[i].log_wealth - top);
    if (best)
        *best = b;
    return top + log(sum);
}

int calib_drift_add(calib_drift *d, double score)
{
    if (!d || isnan(score))
        return 0;
    /* MEAN tests the score clamped to its range, and the reference bound
     * must see the same values. */
    if (d->cfg.kind == CALIB_DRIFT_MEAN)
        score = clamp(score, d->cfg.lo, d->cfg.hi);
    d->n++;
    if (d->state == CALIB_DRIFT_REFERENCE) {
        drift_reference_add(d, score);
        return 0;
    }
    calib_accum_add(&d->watch, score);
    if (d->state != CALIB_DRIFT_WATCHING || d->nbank == 0)
        return 0; /* ALARM: decided until a reset; or no alarm possible */
    if (d->cfg.restart && d->watch.n > 1 && (d->watch.n - 1) % d->cfg.restart == 0)
        bank_start(d, d->n - 1); /* this sample is its first */
    double x = drift_test_value(d, score), top = -INFINITY;
    for (unsigned i = 0; i < d->nbank; i++) {
        calib_eproc_add(&d->bank[i], x);
        double t = d->log_w[i] + d->bank[i].log_wealth;
        top = t > top ? t : top;
    }
    /* M <= nbank max_j w_j W_j: the exact sum only when it may matter */
    double level = log(2 / d->cfg.alpha);
    if (top + log((double)d->nbank) < level)
        return 0;
    unsigned best;
    if (bank_log_sum(d, &best) < level)
        return 0;
    d->state = CALIB_DRIFT_ALARM;
    d->alarm_at = d->n;
    d->change_at = d->start[best] + d->bank[best].argmin;
    return 1;
}

double calib_drift_log_e(const calib_drift *d)
{
    if (!d || d->state == CALIB_DRIFT_REFERENCE || d->nbank == 0)
        return 0;
    return bank_log_sum(d, NULL);
}

/* ------------------------------------------------------------------ shadow gate */

int calib_gate_init(calib_gate *g, const calib_gate_cfg *cfg)
{
    if (!g)
        return CALIB_EINVAL;
    *g = (calib_gate){0};
    if (!cfg || !(cfg->alpha > 0 && cfg->alpha < 1) ||
        !(cfg->min_improvement >= 0) || cfg->max_samples < 1)
        return CALIB_EINVAL;
    int rc = calib_eproc_init(&g->e, cfg->lo, cfg->hi, cfg->min_improvement);
    if (rc != CALIB_OK)
        return rc;
    g->cfg = *cfg;
    g->state = CALIB_GATE_RUNNING;
    calib_accum_init(&g->diff);
    calib_accum_init(&g->current);
    calib_accum_init(&g->candidate);
    return CALIB_OK;
}

int calib_gate_add(calib_gate *g, double s_current, double s_candidate)
{
    if (!g)
        return CALIB_EINVAL;
    double diff = s_current - s_candidate;
    if (g->state != CALIB_GATE_RUNNING)
        return g->state;
    /* a NaN pair (either score, or inf - inf) is no evidence, but counts
     * towards max_samples: a candidate that only ever scores NaN ends */
    g->pairs++;
    if (isnan(diff)) {
        if (g->pairs >= g->cfg.max_samples)
            g->state = CALIB_GATE_FAILED;
        return g->state;
    }
    calib_accum_add(&g->diff, diff);
    calib_accum_add(&g->current, s_current);
    calib_accum_add(&g->candidate, s_candidate);
    calib_eproc_add(&g->e, diff);
    if (calib_eproc_rejects(&g->e, g->cfg.alpha))
        g->state = CALIB_GATE_PASSED;
    else if (g->pairs >= g->cfg.max_samples)
        g->state = CALIB_GATE_FAILED;
    return g->state;
}

double calib_gate_log_e(const calib_gate *g)
{
    return g->e.log_wealth;
}
