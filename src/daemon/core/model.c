/* model.c — per-model statistics: everything a joined pair updates. */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/protocol.h"
#include "calib/recal.h"
#include "log.h"
#include "dup.h"
#include "model.h"

/* The time window: both views' scores and, for classification, a set of
 * top-label bins per view (top[VIEW_RAW], top[VIEW_CAL]). */
static calib_window_cfg window_cfg(const model_cfg *c, int form)
{
    int bins = form != CALIB_FORM_GAUSSIAN;
    return (calib_window_cfg){.kind = CALIB_WINDOW_TIME, .span = c->window,
                              .panes = (uint32_t)c->window_panes,
                              .nstat = VIEWS * WS_PER_VIEW,
                              .top_bins = bins ? (uint32_t)c->bins : 0,
                              .top_sets = bins ? VIEWS : 0};
}

static size_t min_size(uint64_t a, size_t b)
{
    size_t v = a < b ? (size_t)a : b;
    return v ? v : 1;
}

/* a + b, or 0 (unsizable) if either is 0 or the sum overflows. */
static size_t add_bytes(size_t a, size_t b)
{
    return a && b && b <= SIZE_MAX - a ? a + b : 0;
}

/* The drift detector of a model of this form: the mean of the Brier score
 * in [0, 2], or (DSS, unbounded) the rate above a reference quantile, at
 * MODEL_DRIFT_SCORE_SHARE of drift_alpha beside the location tests. */
static void drift_cfg_of(const model_cfg *c, int form, calib_drift_cfg *dc)
{
    int gauss = form == CALIB_FORM_GAUSSIAN;
    *dc = (calib_drift_cfg){.kind = gauss ? CALIB_DRIFT_EXCEED : CALIB_DRIFT_MEAN,
                            .lo = 0, .hi = 2,
                            .alpha = gauss ? MODEL_DRIFT_SCORE_SHARE * c->drift_alpha
                                           : c->drift_alpha,
                            .min_effect = c->drift_min_effect, .quantile = c->drift_quantile,
                            .reference = c->drift_reference, .restart = c->drift_reference};
}

void model_loc_cfg(const model_cfg *c, calib_drift_cfg *dc)
{
    *dc = (calib_drift_cfg){.kind = CALIB_DRIFT_EXCEED,
                            .alpha = (1 - MODEL_DRIFT_SCORE_SHARE) / 2 * c->drift_alpha,
                            .min_effect = c->drift_min_effect, .quantile = 0.5,
                            .reference = c->drift_reference, .restart = c->drift_reference};
}

void model_lfree_cfg(const model_cfg *c, int form, size_t k, calib_lfree_cfg *lc)
{
    size_t kk = form == CALIB_FORM_GAUSSIAN ? 0 : k;
    size_t rec = (kk ? kk : 2) * sizeof(float);
    *lc = (calib_lfree_cfg){.k = kk,
                            .recent = c->label_free_recent
                                          ? min_size(c->label_free_recent,
                                                     (size_t)c->label_free_memory / rec)
                                          : 0,
                            .alpha = c->label_shift_alpha,
                            .reference = (size_t)c->label_shift_reference};
}

void model_seg_cfg(const model_cfg *c, int form, seg_cfg *sc)
{
    *sc = (seg_cfg){.keys = (size_t)c->segment_keys, .values = (size_t)c->segment_values,
                    .bins = form == CALIB_FORM_GAUSSIAN ? 0 : (uint32_t)c->bins,
                    .alpha = c->segment_alpha, .min_effect = c->segment_min_effect,
                    .seed = c->seed ^ 0x5e65e65e65e65e6ULL};
}

/* Doubles a waiting prediction holds: its outputs, its segment codes,
 * then (label-free estimates on) its estimates, two floats in one double
 * (model_lf_slot_put). */
static size_t join_width(const model_cfg *c, int form, size_t k)
{
    calib_lfree_cfg lc;
    model_lfree_cfg(c, form, k, &lc);
    return calib_form_width(form, k) + (size_t)c->segment_keys + (lc.recent ? 1 : 0);
}

void model_size(const model_cfg *c, int form, size_t k, model_sizes *s)
{
    calib_join_cfg jc = {.ttl = c->label_ttl, .capacity = (size_t)c->max_pending,
                         .joined_capacity = (size_t)c->joined_memory};
    *s = (model_sizes){.pending = (size_t)c->max_pending};
    if (form < 0) { /* labels only */
        s->bytes = add_bytes(sizeof(model), calib_join_bytes(&jc));
        return;
    }
    size_t width = calib_form_width(form, k), pk = form == CALIB_FORM_GAUSSIAN ? 1 : k;
    size_t jwidth = join_width(c, form, k);
    /* a waiting item: its entry, its outputs, at most two bucket heads */
    size_t item = sizeof(calib_join_entry) + jwidth * sizeof(double) + 2 * sizeof(uint32_t);
    size_t rec = calib_store_bytes(width, 1);
    if (!rec)
        return;
    s->pending = jc.capacity = min_size(c->max_pending, (size_t)c->join_memory / item);
    s->ring = min_size(c->ring, (size_t)c->sample_memory / 2 / rec);
    s->reservoir = min_size(c->reservoir, (size_t)c->sample_memory / 2 / rec);
    jc.width = jwidth;
    calib_window_cfg wc = window_cfg(c, form);
    size_t fixed = calib_window_bytes(&wc);
    wc.panes = 1; /* the view: one pane like the window's */
    fixed = add_bytes(fixed, calib_window_bytes(&wc));
    if (form != CALIB_FORM_GAUSSIAN) /* the cumulative bins of both views */
        fixed = add_bytes(fixed, VIEWS * calib_bins_bytes((uint32_t)c->bins));
    if (form != CALIB_FORM_GAUSSIAN && k * c->bins <= MODEL_CW_MAX_CELLS)
        fixed = add_bytes(fixed, calib_cwbins_bytes((uint32_t)k, (uint32_t)c->bins));
    /* p, pcal; xcal (with room for the join's), xcand; the drift reference */
    fixed = add_bytes(fixed, (2 * pk + (width > pk ? width : pk) + jwidth) * sizeof(double));
    if (c->drift) { /* its ring (classification) or reference sample (DSS) */
        calib_drift_cfg dc;
        drift_cfg_of(c, form, &dc);
        fixed = add_bytes(fixed, calib_drift_bytes(&dc));
        if (form == CALIB_FORM_GAUSSIAN) { /* the two location tests */
            model_loc_cfg(c, &dc);
            fixed = add_bytes(fixed, 2 * calib_drift_bytes(&dc));
        }
    }
    calib_lfree_cfg lc;
    model_lfree_cfg(c, form, k, &lc);
    if (lc.recent) /* the label-free test and first records */
        fixed = add_bytes(fixed, calib_lfree_bytes(&lc));
    if (c->cs_alpha > 0 && form != CALIB_FORM_GAUSSIAN) /* both views' sequences, */
        fixed = add_bytes(fixed, 2 * VIEWS * calib_cs_bytes(MODEL_CS_GRID)); /* 2 scopes */
    size_t bytes = add_bytes(sizeof(model), fixed);
    if (c->segment_keys) { /* taken as keys appear (segment.h) */
        seg_cfg sc;
        model_seg_cfg(c, form, &sc);
        bytes = add_bytes(bytes, sc.keys * seg_key_bytes(&sc));
    }
    bytes = add_bytes(bytes, calib_join_bytes(&jc));
    bytes = add_bytes(bytes, calib_store_bytes(width, s->ring));
    bytes = add_bytes(bytes, calib_store_bytes(width, s->reservoir));
    bytes = add_bytes(bytes, s->ring * sizeof(double)); /* ring_score */
    if (calib_lfree_ring_bytes(&lc)) /* the label-free ring past its first records */
        bytes = add_bytes(bytes, calib_lfree_ring_bytes(&lc));
    s->fixed = fixed;
    s->bytes = fixed ? bytes : 0;
}

const size_t model_counters[MODEL_COUNTERS] = {
    offsetof(model, predictions), offsetof(model, labels), offsetof(model, scored),
    offsetof(model, inline_scored), offsetof(model, stale), offsetof(model, alerts)};
const size_t recalib_counters[RECALIB_COUNTERS] = {
    offsetof(model, recalib.drift_alarms), offsetof(model, recalib.refits),
    offsetof(model, recalib.refit_errors), offsetof(model, recalib.candidates),
    offsetof(model, recalib.published), offsetof(model, recalib.rejected),
    offsetof(model, recalib.withheld), offsetof(model, recalib.store_errors)};
const char *const model_counter_names[MODEL_COUNTERS] = {
    "predictions", "labels", "scored", "inline_scored", "stale", "alerts"};
const char *const recalib_counter_names[RECALIB_COUNTERS] = {
    "drift_alarms", "refits", "refit_errors", "candidates",
    "published", "rejected", "withheld", "store_errors"};

void model_counters_get(const model *m, const size_t *at, size_t n, uint64_t *v)
{
    for (size_t i = 0; i < n; i++)
        v[i] = *(const uint64_t *)((const char *)m + at[i]);
}

void model_counters_set(model *m, const size_t *at, size_t n, const uint64_t *v)
{
    for (size_t i = 0; i < n; i++)
        *model_counter(m, at[i]) = v[i];
}

int model_init(model *m, const model_cfg *cfg, uint64_t seed, calib_budget *parent)
{
    memset(m, 0, sizeof *m);
    calib_budget_init(&m->mem, SIZE_MAX, parent);
    if (calib_budget_take(&m->mem, sizeof *m) != CALIB_OK)
        return CALIB_ENOMEM;
    memcpy(m->name, cfg->name, sizeof m->name);
    m->name_len = strlen(m->name);
    m->cfg = *cfg;
    model_size(cfg, -1, 0, &m->sizes);
    snprintf(m->params.method, sizeof m->params.method, "identity");
    m->params.identity = 1;
    for (int v = 0; v < VIEWS; v++)
        for (int s = 0; s < WS_PER_VIEW; s++)
            calib_accum_init(&m->cum[v][s]);
    model_paired_reset(m, 0, 0);
    m->hist = -1;
    calib_join_cfg jc = {.ttl = cfg->label_ttl, .capacity = cfg->max_pending,
                         .width = 0, .joined_capacity = cfg->joined_memory,
                         .seed = seed, .budget = &m->mem};
    int rc = calib_join_init(&m->join, &jc);
    if (rc != CALIB_OK)
        calib_budget_give(&m->mem, sizeof *m);
    return rc;
}

int model_shape(model *m, int form, size_t k)
{
    const model_cfg *c = &m->cfg;
    size_t pk = form == CALIB_FORM_GAUSSIAN ? 1 : k;
    model_sizes sz;
    model_size(c, form, k, &sz);
    if (!sz.bytes)
        return CALIB_ENOMEM;
    /* what is allocated once here, taken as one figure (model_size) */
    if (calib_budget_take(&m->mem, sz.fixed) != CALIB_OK)
        return CALIB_ENOMEM;
    m->sizes.fixed = sz.fixed;
    m->form = form;
    m->k = k;
    m->width = calib_form_width(form, k);
    calib_window_cfg wc = window_cfg(c, form);
    int rc;
    if ((rc = calib_window_init(&m->win, &wc)) ||
        (rc = calib_pane_init(&m->view.w, &wc)) ||
        (rc = calib_reservoir_init(&m->reservoir, m->width, sz.reservoir, c->seed,
                                   &m->mem)) ||
        (rc = calib_ring_init(&m->ring, m->width, sz.ring, &m->mem)) ||
        (rc = model_ring_reserve(m, m->ring.s.alloc)))
        goto err;
    for (int v = 0; v < VIEWS && form != CALIB_FORM_GAUSSIAN; v++)
        if ((rc = calib_bins_init(&m->top[v], (uint32_t)c->bins)) != 0)
            goto err;
    if (form != CALIB_FORM_GAUSSIAN && k * c->bins <= MODEL_CW_MAX_CELLS &&
        (rc = calib_cwbins_init(&m->cw, (uint32_t)k, (uint32_t)c->bins)) != 0)
        goto err;
    m->p = calloc(pk, sizeof *m->p);
    m->pcal = calloc(pk, sizeof *m->pcal);
    size_t jwidth = join_width(c, form, k);
    m->xcal = calloc(jwidth, sizeof *m->xcal);
    /* the candidate's outputs, and K probabilities (lf_unweigh) */
    m->recalib.xcand = calloc(m->width > pk ? m->width : pk, sizeof *m->recalib.xcand);
    if (!m->p || !m->pcal || !m->xcal || !m->recalib.xcand) {
        rc = CALIB_ENOMEM;
        goto err;
    }
    /* the Brier score lies in [0, 2] */
    m->cs_on = c->cs_alpha > 0 && form != CALIB_FORM_GAUSSIAN;
    for (int v = 0; v < VIEWS && m->cs_on; v++)
        if ((rc = calib_cs_init(&m->cs[v], 0, 2, c->cs_alpha, MODEL_CS_GRID)) != CALIB_OK ||
            (rc = calib_cs_init(&m->period.cs[v], 0, 2, c->cs_alpha, MODEL_CS_GRID)) != CALIB_OK)
            goto err;
    seg_cfg sc;
    model_seg_cfg(c, form, &sc);
    if ((rc = seg_init(&m->seg, &sc, &m->mem)) != CALIB_OK)
        goto err;
    calib_lfree_cfg lc;
    model_lfree_cfg(c, form, k, &lc);
    lc.budget = &m->mem;
    if (lc.recent && (rc = calib_lfree_init(&m->lf, &lc)) != CALIB_OK)
        goto err;
    m->lf_slot = lc.recent ? m->width + (size_t)c->segment_keys : 0;
    for (int i = 0; i < 2; i++) {
        calib_accum_init(&m->lf_graded[i]);
        calib_accum_init(&m->lf_graded_base[i]);
    }
    memset(&m->lf_pend, 0, sizeof m->lf_pend);
    /* last: the one step that changes the join table */
    if ((rc = calib_join_set_width(&m->join, jwidth, sz.pending)) != CALIB_OK)
        goto err;
    m->sizes = sz;
    m->shaped = 1;
    return CALIB_OK;
err:
    model_unshape(m);
    return rc;
}

/* Frees everything model_shape allocates but the join table's outputs. */
static void free_shaped(model *m)
{
    calib_window_free(&m->win);
    calib_pane_free(&m->view.w);
    memset(&m->view, 0, sizeof m->view);
    calib_reservoir_free(&m->reservoir);
    calib_ring_free(&m->ring);
    for (int v = 0; v < VIEWS; v++)
        calib_bins_free(&m->top[v]);
    calib_cwbins_free(&m->cw);
    seg_free(&m->seg);
    free(m->p);
    free(m->pcal);
    free(m->xcal);
    free(m->recalib.xcand);
    free(m->ring_score);
    calib_budget_give(&m->mem, m->ring_score_n * sizeof *m->ring_score);
    m->ring_score_n = 0;
    calib_budget_give(&m->mem, m->sizes.fixed);
    m->sizes.fixed = 0;
    calib_drift_free(&m->recalib.drift);
    for (int i = 0; i < 2; i++)
        calib_drift_free(&m->recalib.loc[i]);
    m->recalib.loc_on = 0;
    calib_lfree_free(&m->lf);
    memset(m->lf_graded, 0, sizeof m->lf_graded);
    memset(m->lf_graded_base, 0, sizeof m->lf_graded_base);
    memset(&m->lf_pend, 0, sizeof m->lf_pend);
    m->lf_at = 0;
    m->lf_alarm_at = m->lf_last_alarm = 0;
    m->lf_reported = 0;
    for (int v = 0; v < VIEWS; v++) {
        calib_cs_free(&m->cs[v]);
        calib_cs_free(&m->period.cs[v]);
    }
    memset(&m->period, 0, sizeof m->period);
    m->cs_on = 0;
    m->p = m->pcal = m->xcal = m->recalib.xcand = m->ring_score = NULL;
    memset(&m->recalib, 0, sizeof m->recalib);
    m->shaped = 0;
    m->form = 0;
    m->k = m->width = 0;
}

void model_unshape(model *m)
{
    free_shaped(m);
    /* labels only again: cannot fail while no prediction waits, and none
     * can before the model has a shape */
    (void)calib_join_set_width(&m->join, 0, 0);
    model_size(&m->cfg, -1, 0, &m->sizes);
}

void model_free(model *m)
{
    free_shaped(m);
    calib_join_free(&m->join);
    calib_budget_give(&m->mem, sizeof *m);
}

model *model_copy(const model *m)
{
    model *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *m;
    /* its own account, drawing on nobody's: model_free gives back to it */
    c->mem.parent = NULL;
    /* nothing of m's memory, before anything can fail: model_free frees
     * what the copy holds and no more */
    c->join = (calib_join){0};
    memset(&c->seg, 0, sizeof c->seg);
    memset(&c->view, 0, sizeof c->view);
    c->win = (calib_window){0};
    c->reservoir = (calib_reservoir){0};
    c->ring = (calib_ring){0};
    for (int v = 0; v < VIEWS; v++) {
        c->top[v] = (calib_bins){0};
        c->cs[v] = (calib_cs){0};
        c->period.cs[v] = (calib_cs){0};
    }
    c->cw = (calib_cwbins){0};
    c->recalib.drift = (calib_drift){0};
    c->recalib.loc[0] = c->recalib.loc[1] = (calib_drift){0};
    c->lf = (calib_lfree){0}; /* not kept by snapshots */
    c->p = c->pcal = c->xcal = c->recalib.xcand = c->ring_score = NULL; /* scratch: none */
    c->ring_score_n = 0;
    int rc = calib_join_copy(&c->join, &m->join);
    if (rc == CALIB_OK && m->shaped) {
        rc |= seg_copy(&c->seg, &m->seg);
        rc |= calib_window_copy(&c->win, &m->win);
        rc |= calib_reservoir_copy(&c->reservoir, &m->reservoir);
        rc |= calib_ring_copy(&c->ring, &m->ring);
        for (int v = 0; v < VIEWS; v++) {
            rc |= calib_bins_copy(&c->top[v], &m->top[v]);
            rc |= calib_cs_copy(&c->cs[v], &m->cs[v]);
            rc |= calib_cs_copy(&c->period.cs[v], &m->period.cs[v]);
        }
        rc |= calib_cwbins_copy(&c->cw, &m->cw);
        rc |= calib_drift_copy(&c->recalib.drift, &m->recalib.drift);
        for (int i = 0; i < 2 && m->recalib.loc_on; i++)
            rc |= calib_drift_copy(&c->recalib.loc[i], &m->recalib.loc[i]);
        int fail = 0;
        c->ring_score = calib_dup(m->ring_score, m->ring_score_n * sizeof *m->ring_score, &fail);
        c->ring_score_n = c->ring_score ? m->ring_score_n : 0;
        rc |= fail ? CALIB_ENOMEM : CALIB_OK;
    }
    if (rc != CALIB_OK) {
        model_free(c);
        free(c);
        return NULL;
    }
    return c;
}

int model_ring_reserve(model *m, size_t n)
{
    /* the store grows by doubling: aim at the size it will take, so that
     * the scores have a slot for every record it can hold */
    const calib_store *s = &m->ring.s;
    if (n > s->alloc && n <= s->cap) {
        size_t doubled = s->alloc > s->cap / 2 ? s->cap : 2 * s->alloc;
        n = n > doubled ? n : doubled;
    }
    if (n > m->ring_score_n) {
        double *v = calib_budget_grow(&m->mem, m->ring_score,
                                      m->ring_score_n * sizeof *v, n * sizeof *v);
        if (!v)
            return CALIB_ENOMEM;
        m->ring_score = v;
        m->ring_score_n = n;
    }
    return calib_store_reserve(&m->ring.s, n);
}

void model_ring_push(model *m, const double *x, double y, double t, double score)
{
    calib_store *s = &m->ring.s;
    if (s->len == s->alloc && s->len < s->cap) { /* filling, and out of room */
        size_t more = s->alloc > s->cap / 2 ? s->cap : 2 * s->alloc;
        if (model_ring_reserve(m, more) != CALIB_OK)
            calib_store_stop(s); /* wraps here */
    }
    calib_ring_push(&m->ring, x, y, t);
    /* beside the record, at its slot (the newest) */
    m->ring_score[calib_ring_slot(&m->ring, calib_ring_len(&m->ring) - 1)] = score;
}

void model_join_tick(model *m, double now)
{
    calib_join_set_ttl(&m->join, m->cfg.label_ttl); /* validated by cfg */
    calib_join_expire(&m->join, now);
}

/* Classification outputs of any form and the same K are one shape (the
 * protocol fixes K and classification vs regression); they are converted
 * to the model's form. */
int model_accepts(const model *m, int form, size_t k)
{
    int reg = form == CALIB_FORM_GAUSSIAN, mreg = m->form == CALIB_FORM_GAUSSIAN;
    if (reg || mreg)
        return reg == mreg ? 0 : REJ_SHAPE;
    return m->k == k ? 0 : REJ_SHAPE;
}

static double clamp_prob(double p)
{
    return p < CALIB_LOG_FLOOR ? CALIB_LOG_FLOOR : p > 1 - CALIB_LOG_FLOOR ? 1 - CALIB_LOG_FLOOR : p;
}

/* Probabilities of a classification record of form `form`. */
static void to_probs(int form, const double *x, size_t k, double *p)
{
    if (form == CALIB_FORM_LOGITS)
        calib_softmax(x, k, p);
    else if (form == CALIB_FORM_BINARY) {
        p[0] = 1 - x[0];
        p[1] = x[0];
    } else
        memcpy(p, x, k * sizeof *p);
}

void model_canonical(model *m, int form, const double *x, double *out)
{
    if (form == m->form) {
        memcpy(out, x, m->width * sizeof *x);
        return;
    }
    double *p = m->pcal; /* scratch of k */
    to_probs(form, x, m->k, p);
    switch (m->form) {
    case CALIB_FORM_PROBS:
        memcpy(out, p, m->k * sizeof *p);
        break;
    case CALIB_FORM_BINARY:
        out[0] = p[1];
        break;
    default: /* logits: log p, whose softmax is p (up to the clamp of 0) */
        for (size_t i = 0; i < m->k; i++)
            out[i] = log(clamp_prob(p[i]));
        break;
    }
}

/* Outputs x after parameters p, in out; returns what to score (x itself
 * for the identity) and sets *form to its form. */
const double *model_pair_values(const model *m, const model_params *p, const double *codes,
                                int *which)
{
    if (which)
        *which = -1;
    for (unsigned i = 0; codes && i < p->nseg; i++) {
        const calib_params_segment *sg = &p->seg[i];
        int key = seg_find_key(&m->seg, sg->key, strlen(sg->key));
        const seg_slot *s = key < 0 ? NULL : seg_peek(&m->seg, (size_t)key, codes[key]);
        if (s && strcmp(s->name, sg->value) == 0) {
            if (which)
                *which = (int)i;
            return sg->values;
        }
    }
    return p->values;
}

/* x under parameters p, for a pair of segment codes codes (NULL: none). */
static const double *apply_params(const model *m, const model_params *p, const double *x,
                                  double *out, int *form, const double *codes)
{
    *form = m->form;
    const double *v = model_pair_values(m, p, codes, NULL);
    if (!p->desc || (v == p->values && p->identity && !p->nw))
        return x;
    p->desc->apply(v, m->form, m->k, x, out); /* form checked at install */
    *form = calib_recal_out_form(m->form);
    if (p->nw) /* a count that is not the model's K: refused, the map's */
        (void)calib_prior_weigh(p->w, p->nw, *form, m->k, out);
    return out;
}

/* The served probabilities p' before the prior correction in force (u):
 * p_j proportional to p'_j / u_j, into out; p itself without one. */
static const double *lf_unweigh(const model *m, const double *p, double *out)
{
    const model_params *pp = &m->params;
    if (!pp->nw || pp->nw != m->k || m->form == CALIB_FORM_GAUSSIAN)
        return p;
    double s = 0;
    for (size_t j = 0; j < m->k; j++)
        s += out[j] = p[j] / pp->w[j];
    for (size_t j = 0; s > 0 && j < m->k; j++)
        out[j] /= s;
    return s > 0 ? out : p;
}

/* Served outputs (probabilities, or the calibrated mean and variance)
 * into the label-free ring: the probabilities as the map gave them,
 * before a prior correction (EM needs outputs calibrated on the
 * reference, and the correction is what it estimates). */
static void lf_add(model *m, const double *served, size_t top)
{
    const double *p = lf_unweigh(m, served, m->recalib.xcand);
    /* top: served's top class (SIZE_MAX: not known), which unweighing may move */
    if (p == served && top != SIZE_MAX ? calib_lfree_add_top(&m->lf, p, top)
                                       : calib_lfree_add(&m->lf, p))
        m->lf_alarm_at = m->lf_last_alarm = m->lf.total;
}

/* The newest record's estimates (calib_lfree_newest_expected) of the
 * outputs served to it: those of the record, or with the prior weights in
 * force on top of it. */
static void lf_expected(const model *m, double est[2])
{
    const model_params *pp = &m->params;
    int weighed = pp->nw && pp->nw == m->k && m->form != CALIB_FORM_GAUSSIAN;
    calib_lfree_newest_expected(&m->lf, weighed ? pp->w : NULL, est);
}

/* All bits 0 is "none" (what a restored join table fills in, calib_join_load_tags):
 * estimates of 0 and 0 are kept as -0 and 0. */
void model_lf_slot_put(double *slot, const double est[2])
{
    float f[2] = {(float)est[0], (float)est[1]};
    if (f[0] == 0 && f[1] == 0)
        f[0] = -0.0f;
    memcpy(slot, f, sizeof f);
}

void model_lf_slot_get(const double *slot, double est[2])
{
    static const float none[2];
    float f[2];
    memcpy(f, slot, sizeof f);
    int have = memcmp(f, none, sizeof f) != 0;
    est[0] = have ? f[0] : NAN;
    est[1] = have ? f[1] : NAN;
}

void model_predicted(model *m, const double *x, const double *codes, double *slot)
{
    if (!m->lf.rec)
        return;
    int form;
    const double *xs = apply_params(m, &m->params, x, m->xcal, &form, codes);
    int alarm;
    if (form == CALIB_FORM_LOGITS) { /* no prior weights: the softmax in float */
        alarm = calib_lfree_add_logits(&m->lf, xs);
    } else {
        if (m->form != CALIB_FORM_GAUSSIAN) {
            to_probs(form, xs, m->k, m->pcal);
            xs = m->pcal;
        }
        alarm = calib_lfree_add(&m->lf, lf_unweigh(m, xs, m->recalib.xcand));
    }
    if (alarm)
        m->lf_alarm_at = m->lf_last_alarm = m->lf.total;
    if (slot) {
        double est[2];
        lf_expected(m, est);
        model_lf_slot_put(slot, est);
    }
}

int model_reference_priors(const model *m, double *src)
{
    size_t n = calib_ring_len(&m->ring), k = m->k;
    if (!m->shaped || m->form == CALIB_FORM_GAUSSIAN || !n)
        return 0;
    for (size_t j = 0; j < k; j++)
        src[j] = 0;
    for (size_t i = 0; i < n; i++) {
        double y = calib_ring_get(&m->ring, i).y; /* a class: checked at ingest */
        if (y >= 0 && y < (double)k)
            src[(size_t)y] += 1;
    }
    calib_lfree_priors_of_counts(src, k, src);
    return 1;
}

int model_lfree_step(model *m, double now)
{
    calib_lfree *lf = &m->lf;
    if (!lf->rec)
        return 0;
    if (lf->alarm && m->lf_reported && lf->total - m->lf_alarm_at >= lf->cfg.recent) {
        calib_lfree_test_reset(lf);
        m->lf_alarm_at = 0;
        m->lf_reported = 0;
    }
    int pending = m->lf_alarm_at && !m->lf_reported;
    /* lf->fig.at: lf->total at the last update */
    int due = lf->total != lf->fig.at && now - m->lf_at >= m->cfg.label_free_interval;
    if (!pending && !due)
        return 0;
    /* m->p: scratch of k, free between pairs */
    calib_lfree_update(lf, model_reference_priors(m, m->p) ? m->p : NULL);
    m->lf_at = now;
    return 1;
}

static calib_ksum ksum_less(calib_ksum a, calib_ksum b)
{
    return (calib_ksum){a.sum - b.sum, a.comp - b.comp};
}

/* lf_graded[i] with the pending gradings added, into *a. */
static void lf_graded_now(const model *m, int i, calib_accum *a)
{
    *a = m->lf_graded[i];
    a->n += m->lf_pend.n[i];
    calib_ksum_add(&a->s1, m->lf_pend.s1[i]);
    calib_ksum_add(&a->s2, m->lf_pend.s2[i]);
}

void model_lf_graded(const model *m, calib_accum all[2], calib_accum since[2])
{
    for (int i = 0; i < 2; i++) {
        const calib_accum *a = &all[i], *b = &m->lf_graded_base[i];
        lf_graded_now(m, i, &all[i]);
        since[i] = (calib_accum){a->n - b->n, ksum_less(a->s1, b->s1), ksum_less(a->s2, b->s2)};
    }
}

int model_lfree_weights(model *m, double *w)
{
    calib_lfree *lf = &m->lf;
    if (!lf->rec || m->form == CALIB_FORM_GAUSSIAN || m->k > CALIB_PUBMSG_MAX_WEIGHTS ||
        !model_reference_priors(m, m->p))
        return 0;
    calib_lfree_update_newest(lf, m->p, (size_t)m->cfg.label_shift_reference);
    if (!lf->fig.corrected)
        return 0;
    for (size_t j = 0; j < m->k; j++) {
        double x = lf->weights[j];
        w[j] = !(x >= CALIB_PRIOR_WEIGHT_MIN) ? CALIB_PRIOR_WEIGHT_MIN
               : x > CALIB_PRIOR_WEIGHT_MAX ? CALIB_PRIOR_WEIGHT_MAX : x;
    }
    return 1;
}

void model_score(const model *m, int form, const double *x, double y, double *p, double s[2])
{
    if (form == CALIB_FORM_GAUSSIAN) {
        s[WS_MAIN] = calib_score_dss(x[0], x[1], y);
        s[WS_LOG] = NAN;
        return;
    }
    /* a class, checked by calib_proto_check_y; a regression outcome is any
     * real, whose conversion to an index would be undefined */
    size_t label = (size_t)y;
    calib_score sc;
    switch (form) {
    case CALIB_FORM_LOGITS:
        calib_score_logits(x, m->k, label, p, &sc);
        break;
    case CALIB_FORM_PROBS:
        memcpy(p, x, m->k * sizeof *p);
        calib_score_probs(p, m->k, label, &sc);
        break;
    default: /* CALIB_FORM_BINARY */
        p[0] = 1 - x[0];
        p[1] = x[0];
        calib_score_binary(x[0], (unsigned)label, &sc);
        break;
    }
    s[WS_MAIN] = sc.brier;
    s[WS_LOG] = sc.log;
}

/* The top label's confidence and whether it was the outcome into the
 * cumulative bins b and, if any, the window pane's bins w (one argmax). */
/* Returns the top class it binned (the first index of p's maximum). */
static size_t add_bins(calib_bins *b, calib_bins *w, const double *p, size_t k, double y)
{
    size_t top = calib_argmax(p, k);
    calib_bins_add(b, p[top], top == (size_t)y);
    if (w)
        calib_bins_add(w, p[top], top == (size_t)y);
    return top;
}

/* The scores s of the outputs x after parameters p (the loop's scratch). */
static void score_after(model *m, const model_params *p, const double *x, double y, double s[2],
                        const double *codes)
{
    int form;
    const double *xp = apply_params(m, p, x, m->recalib.xcand, &form, codes);
    model_score(m, form, xp, y, m->pcal, s);
}

/* The candidate in shadow, scored against the current parameters' scores
 * cur; the gate decides, the loop's tick acts on its decision. */
static void shadow_observe(model *m, const double *x, double y, const double cur[2],
                           const double *codes)
{
    model_recalib *l = &m->recalib;
    double s[2];
    score_after(m, &l->candidate, x, y, s, codes);
    calib_gate_add(&l->gate, cur[WS_MAIN], s[WS_MAIN]);
    if (!isnan(s[WS_LOG])) {
        calib_accum_add(&l->shadow_log[0], cur[WS_LOG]);
        calib_accum_add(&l->shadow_log[1], s[WS_LOG]);
    }
}

/* The guard: the published version's main score cur against the previous
 * version's on the same pair. Its gate passing (the previous is better) is
 * read by the loop's machine at the tick (refit_in.guard_alarm). */
static void guard_observe(model *m, const double *x, double y, double cur,
                          const double *codes)
{
    model_recalib *l = &m->recalib;
    double s[2];
    score_after(m, &l->guard_prev, x, y, s, codes);
    calib_gate_add(&l->guard, cur, s[WS_MAIN]);
    double e = calib_gate_log_e(&l->guard);
    if (e <= l->guard_low) { /* a new low: the evidence starts after it */
        l->guard_low = e;
        for (int i = 0; i < 3; i++)
            calib_accum_init(&l->guard_since[i]);
        return;
    }
    if (isnan(cur) || isnan(s[WS_MAIN]))
        return;
    calib_accum_add(&l->guard_since[0], cur);
    calib_accum_add(&l->guard_since[1], s[WS_MAIN]);
    calib_accum_add(&l->guard_since[2], cur - s[WS_MAIN]);
}

/* The trigger: the parameters in force (cur) against the challenger. */
static void trigger_observe(model *m, const double *x, double y, const double cur[2],
                            const double *codes)
{
    model_recalib *l = &m->recalib;
    double s[2];
    score_after(m, &l->challenger, x, y, s, codes);
    calib_gate_add(&l->trig, cur[WS_MAIN], s[WS_MAIN]);
}

void model_segments(model *m, const seg_kv *kv, size_t n, double *codes, double now)
{
    seg_predict(&m->seg, kv, n, codes, now);
}

/* The index in p->seg of segment key = value's parameters, or -1. */
static int params_segment(const model_params *p, const char *key, const char *value)
{
    for (unsigned e = 0; e < p->nseg; e++)
        if (strcmp(p->seg[e].key, key) == 0 && strcmp(p->seg[e].value, value) == 0)
            return (int)e;
    return -1;
}

/* A pair of segment codes to the recalibrations its segments run: a
 * record for the fit while they collect, a paired score in the shadow gate
 * after. cur: the main score of what is served now. The candidate is
 * what the pair would be served were the segment's parameters published
 * (added after those in force, or in place of its own): where another
 * segment's come first, nothing changes for the pair. */
static void observe_fixes(model *m, const double *x, double y, const double *codes,
                          const double cur[2])
{
    seg_table *t = &m->seg;
    for (size_t i = 0; i < t->nkeys; i++) {
        seg_slot *s = seg_peek(t, i, codes[i]);
        seg_fix *f = s ? s->fix : NULL;
        if (!f)
            continue;
        if (f->phase == SEG_FIX_COLLECT) {
            if (f->n < f->cap) {
                double *r = f->rec + f->n++ * f->stride;
                memcpy(r, x, m->width * sizeof *r);
                r[m->width] = y;
            }
            continue;
        }
        if (f->gate.state != CALIB_GATE_RUNNING || !m->params.desc)
            continue;
        int which, own = params_segment(&m->params, t->key[i].name, s->name);
        (void)model_pair_values(m, &m->params, codes, &which);
        double sc[2] = {cur[0], cur[1]};
        if (which < 0 || which == own) {
            int form = calib_recal_out_form(m->form);
            m->params.desc->apply(f->values, m->form, m->k, x, m->recalib.xcand);
            model_score(m, form, m->recalib.xcand, y, m->pcal, sc);
        }
        calib_gate_add(&f->gate, cur[0], sc[0]);
        if (!isnan(sc[1])) {
            calib_accum_add(&f->log[0], cur[1]);
            calib_accum_add(&f->log[1], sc[1]);
        }
    }
}

/* A pair's figures to its segments. */
static void observe_segments(model *m, const double *codes, const double s[VIEWS][WS_PER_VIEW],
                             double *const p[VIEWS], double y)
{
    seg_obs o;
    for (int v = 0; v < VIEWS; v++) {
        o.s[v][0] = s[v][WS_MAIN];
        o.s[v][1] = s[v][WS_LOG];
        o.conf[v] = NAN;
        o.correct[v] = 0;
        if (m->form != CALIB_FORM_GAUSSIAN) {
            size_t top = calib_argmax(p[v], m->k);
            /* in [0, 1] whatever a plugin returns: each bet's factor stays > 0 */
            o.conf[v] = p[v][top] < 0 ? 0 : p[v][top] > 1 ? 1 : p[v][top];
            o.correct[v] = top == (size_t)y;
        }
    }
    seg_observe(&m->seg, codes, &o);
}

/* The pending gradings into lf_graded, and none pending. */
static void lf_grade_flush(model *m)
{
    for (int i = 0; i < 2; i++) {
        lf_graded_now(m, i, &m->lf_graded[i]);
        m->lf_pend.n[i] = 0;
        m->lf_pend.s1[i] = m->lf_pend.s2[i] = 0;
    }
}

/* A joined pair's calibrated main score less its label-free estimates
 * (naive, corrected) made when its prediction arrived: summed plainly,
 * LF_PEND_MAX at a time, then compensated (model.h, lf_pend). */
#define LF_PEND_MAX 64
static void lf_grade(model *m, const double est[2], double score)
{
    for (int i = 0; i < 2; i++) {
        double diff = score - est[i];
        if (isfinite(diff)) {
            m->lf_pend.n[i]++;
            m->lf_pend.s1[i] += diff;
            m->lf_pend.s2[i] += diff * diff;
        }
    }
    if (m->lf_pend.n[0] >= LF_PEND_MAX || m->lf_pend.n[1] >= LF_PEND_MAX)
        lf_grade_flush(m);
}

static void observe(model *m, const double *x, double y, double now, const double *codes,
                    int predicted, double arrived, const double *slot);

void model_observe(model *m, const double *x, double y, double now, const double *codes)
{
    observe(m, x, y, now, codes, 0, INFINITY, NULL);
}

void model_observe_at(model *m, const double *x, double y, double now, const double *codes,
                      double arrived, const double *slot)
{
    observe(m, x, y, now, codes, 0, arrived, slot);
}

void model_observe_inline(model *m, const double *x, double y, double now, const double *codes)
{
    observe(m, x, y, now, codes, 1, INFINITY, NULL);
}

/* predicted: the pair is a prediction that came with its outcome, whose
 * served outputs the label-free ring takes from the calibrated view's,
 * computed here anyway; slot: the estimates its prediction got at arrival
 * (model_predicted), or NULL. */
static void observe(model *m, const double *x, double y, double now, const double *codes,
                    int predicted, double arrived, const double *slot)
{
    double s[VIEWS][WS_PER_VIEW];
    double *p[VIEWS] = {m->p, m->pcal};
    int form[VIEWS];
    const double *xs[VIEWS] = {x, apply_params(m, &m->params, x, m->xcal, &form[VIEW_CAL],
                                               codes)};
    form[VIEW_RAW] = m->form;
    int err;
    calib_pane *pane = calib_window_at(&m->win, now, &err);
    if (!pane)
        m->stale++; /* a clock step back past the window: cumulative only */
    size_t top = SIZE_MAX; /* the calibrated view's top class, once binned */
    for (int v = 0; v < VIEWS; v++) {
        if (v == VIEW_CAL && xs[v] == xs[VIEW_RAW]) {
            /* identity parameters: the raw view's scores, not computed twice */
            memcpy(s[v], s[VIEW_RAW], sizeof s[v]);
            p[v] = p[VIEW_RAW];
        } else {
            model_score(m, form[v], xs[v], y, p[v], s[v]);
        }
        for (int i = 0; i < WS_PER_VIEW; i++) {
            if (isnan(s[v][i]))
                continue;
            calib_accum_add(&m->cum[v][i], s[v][i]);
            model_sums *sum = &m->sums[v][i];
            if (s[v][i] >= 0)
                sum->pos += s[v][i];
            else
                sum->neg -= s[v][i];
            sum->sq += s[v][i] * s[v][i];
            calib_accum_add(&m->paired.view[v][i], s[v][i]);
            if (v == VIEW_CAL)
                calib_accum_add(&m->paired.diff[i], s[VIEW_RAW][i] - s[v][i]);
            if (pane)
                calib_accum_add(&pane->stat[v * WS_PER_VIEW + i], s[v][i]);
        }
        if (m->form != CALIB_FORM_GAUSSIAN) {
            top = add_bins(&m->top[v], pane ? &pane->top[v] : NULL, p[v], m->k, y);
            if (v == VIEW_RAW && m->cw.k)
                calib_cwbins_add(&m->cw, p[v], (size_t)y);
        }
    }
    if (m->cs_on) {
        model_period_roll(m, now);
        calib_cs *cs[2] = {m->cs, m->period.cs};
        for (int i = 0; i < 2; i++) {
            calib_cs_add(&cs[i][VIEW_RAW], s[VIEW_RAW][WS_MAIN]);
            /* identity for every pair: the raw one stands for both */
            if (!model_params_serves_identity(&m->params) && m->params.desc)
                calib_cs_add(&cs[i][VIEW_CAL], s[VIEW_CAL][WS_MAIN]);
        }
    }
    if (m->lf.rec && (predicted || slot)) {
        double est[2];
        if (predicted) {
            lf_add(m, m->form == CALIB_FORM_GAUSSIAN ? xs[VIEW_CAL] : p[VIEW_CAL], top);
            lf_expected(m, est);
        } else {
            model_lf_slot_get(slot, est);
        }
        lf_grade(m, est, s[VIEW_CAL][WS_MAIN]);
    }
    if (codes && m->seg.nkeys) {
        observe_segments(m, codes, s, p, y);
        observe_fixes(m, x, y, codes, s[VIEW_CAL]); /* p is theirs now */
    }
    calib_reservoir_offer(&m->reservoir, x, y, now);
    model_ring_push(m, x, y, now, s[VIEW_CAL][WS_MAIN]);
    m->scored++;
    model_recalib *l = &m->recalib;
    /* a prediction from before a label-free correction: of the mix it
     * corrected, scored (above) but judging nothing of the loop's */
    if (l->refit.phase == PHASE_OFF || arrived < l->fresh_from)
        return;
    if (l->refit.phase == PHASE_SHADOW && l->gate.state == CALIB_GATE_RUNNING)
        shadow_observe(m, x, y, s[VIEW_CAL], codes);
    if (l->guard_on && l->guard.state == CALIB_GATE_RUNNING)
        guard_observe(m, x, y, s[VIEW_CAL][WS_MAIN], codes);
    if (l->trig_on && l->refit.phase == PHASE_IDLE && l->trig.state == CALIB_GATE_RUNNING &&
        m->ring.total > l->trig_quiet_until)
        trigger_observe(m, x, y, s[VIEW_CAL], codes);
    if (!l->drift_on)
        return;
    /* one drift alarm until the reset, whichever detector raises it */
    int standing = model_drift_alarmed(m, NULL) != NULL;
    int raised = calib_drift_add(&l->drift, s[VIEW_CAL][WS_MAIN]);
    if (l->loc_on) { /* the calibrated forecast's standardised residual */
        double z = (y - xs[VIEW_CAL][0]) / sqrt(xs[VIEW_CAL][1]);
        if (isfinite(z))
            raised |= calib_drift_add(&l->loc[0], z) | calib_drift_add(&l->loc[1], -z);
    }
    if (raised && !standing)
        l->drift_alarm = 1;
}

int model_fit_holds(const char *names, const calib_plugin *desc, unsigned *holds, char *err,
                    size_t len)
{
    *holds = 0;
    if (!names[0])
        return 0; /* all */
    unsigned fit = 0;
    for (const char *p = names; *p;) {
        size_t n = strcspn(p, " ");
        unsigned i = 0;
        while (i < desc->nparams &&
               !(strlen(desc->param_names[i]) == n && memcmp(desc->param_names[i], p, n) == 0))
            i++;
        if (i == desc->nparams) {
            snprintf(err, len, "%.*s is not a parameter of method %s", (int)n, p, desc->name);
            return -1;
        }
        fit |= 1u << i;
        p += n + (p[n] == ' ');
    }
    for (unsigned i = 0; i < desc->nparams; i++)
        if (!(fit & (1u << i)))
            *holds |= CALIB_RECAL_HOLD(i);
    if (*holds && strcmp(desc->name, "location_scale") != 0) {
        snprintf(err, len, "method %s fits all its parameters (only location_scale fits a "
                 "subset)", desc->name);
        return -1;
    }
    return 0;
}

void model_drift_cfg(const model *m, calib_drift_cfg *dc)
{
    drift_cfg_of(&m->cfg, m->form, dc);
}

const calib_drift *model_drift_alarmed(const model *m, int *which)
{
    const model_recalib *l = &m->recalib;
    const calib_drift *d[3] = {&l->drift, &l->loc[0], &l->loc[1]};
    for (int i = 0; i < (l->loc_on ? 3 : 1) && l->drift_on; i++)
        if (d[i]->state == CALIB_DRIFT_ALARM) {
            if (which)
                *which = i;
            return d[i];
        }
    return NULL;
}

void model_drift_reset(model *m)
{
    model_recalib *l = &m->recalib;
    if (l->drift_on)
        calib_drift_reset(&l->drift);
    for (int i = 0; i < 2 && l->loc_on; i++)
        calib_drift_reset(&l->loc[i]);
    l->drift_base = m->ring.total;
    l->drift_alarm = 0;
}


int model_recalib_attach(model *m, double now)
{
    model_recalib *l = &m->recalib;
    if (m->cfg.drift) {
        calib_drift_cfg dc;
        model_drift_cfg(m, &dc);
        int rc = calib_drift_init(&l->drift, &dc);
        if (rc != CALIB_OK)
            return rc;
        l->drift_on = 1;
        l->drift_base = m->ring.total;
        if (m->form == CALIB_FORM_GAUSSIAN) {
            model_loc_cfg(&m->cfg, &dc);
            for (int i = 0; i < 2; i++)
                if ((rc = calib_drift_init(&l->loc[i], &dc)) != CALIB_OK)
                    return rc; /* model_free frees what was made */
            l->loc_on = 1;
        }
    }
    refit_init(&l->refit, 1, m->cfg.refit_interval, now);
    return CALIB_OK;
}

/* ------------------------------------------------------------ segments' own parameters */

void model_params_with_segment(const model *m, const seg_key *k, const seg_slot *s, double now,
                               model_params *p, unsigned *index)
{
    const seg_fix *f = s->fix;
    *p = m->params;
    int at = params_segment(p, k->name, s->name);
    unsigned e = at >= 0 ? (unsigned)at : p->nseg;
    if (e == p->nseg && p->nseg < CALIB_PUBMSG_MAX_SEGMENTS)
        p->nseg++;
    calib_params_segment *sg = &p->seg[e < CALIB_PUBMSG_MAX_SEGMENTS ? e : p->nseg - 1];
    snprintf(sg->key, sizeof sg->key, "%s", k->name);
    snprintf(sg->value, sizeof sg->value, "%s", s->name);
    memcpy(sg->values, f->values, sizeof sg->values);
    p->version = m->params.version + 1;
    p->ts = now;
    p->shadow_n = f->gate.diff.n;
    p->before[0] = calib_accum_mean(&f->gate.current);
    p->after[0] = calib_accum_mean(&f->gate.candidate);
    p->before[1] = calib_accum_mean(&f->log[0]);
    p->after[1] = calib_accum_mean(&f->log[1]);
    p->improvement = calib_accum_mean(&f->gate.diff);
    calib_accum_ci95(&f->gate.diff, p->ci);
    p->fit_n = f->cap;
    *index = (unsigned)(sg - p->seg);
}

void model_params_keep_segments(const model *m, model_params *p)
{
    p->nseg = m->params.nseg;
    memcpy(p->seg, m->params.seg, sizeof p->seg);
}

int model_params_serves_identity(const model_params *p)
{
    return p->identity && p->nseg == 0 && p->nw == 0;
}

/* A slot's collected pairs fitted: its shadow gate starts, or, when the fit
 * fails, collecting starts again. */
static void segment_fit(model *m, const seg_key *k, seg_slot *s, logger *lg)
{
    seg_fix *f = s->fix;
    const calib_plugin *desc = m->params.desc;
    calib_dataset ds = {.form = m->form, .k = m->k, .n = f->n, .stride = f->stride,
                        .rec = f->rec};
    calib_recal_result res;
    calib_recal_opts opts = {.flags = m->recalib.fit_holds};
    calib_gate_cfg gc;
    model_gate_cfg(m, &gc);
    char why[ERR_MAX] = "";
    s->fits++;
    /* the n-th attempt tests at gate_alpha / 2^n: however many fail, a
     * segment passes a gate by chance with probability gate_alpha at most */
    gc.alpha = ldexp(gc.alpha, -(int)(s->fits < 60 ? s->fits : 60));
    int rc = desc->fit(&ds, &opts, &res);
    if (rc != CALIB_OK)
        snprintf(why, sizeof why, "%s", calib_strerror(rc));
    int ok = rc == CALIB_OK && res.nparams == desc->nparams &&
             calib_plugin_params_check(desc, res.params, why, sizeof why) == CALIB_OK &&
             calib_gate_init(&f->gate, &gc) == CALIB_OK;
    if (!ok) {
        s->fit_errors++;
        f->n = 0;
        if (lg)
            log_msg(lg, LOG_WARN, "loop", "%s: segment %s=%s: the fit of %zu pairs failed "
                    "(%s); collecting anew", m->name, k->name, s->name, ds.n, why);
        return;
    }
    f->phase = SEG_FIX_SHADOW;
    f->nparams = res.nparams;
    memcpy(f->values, res.params, sizeof f->values);
    calib_accum_init(&f->log[0]);
    calib_accum_init(&f->log[1]);
    if (lg)
        log_msg(lg, LOG_INFO, "loop", "%s: segment %s=%s: %s fitted on %zu pairs; its shadow "
                "gate starts", m->name, k->name, s->name, desc->name, ds.n);
}

/* A segment's fit runs in the tick: at most SEG_FIT_NUMBERS outputs in
 * all (about 10 ms of a temperature fit), whatever segment_refit_samples
 * asks, and 50 records at least. */
#define SEG_FIT_NUMBERS 1000000
static size_t segment_fit_records(const model *m)
{
    size_t most = SEG_FIT_NUMBERS / (m->width ? m->width : 1);
    size_t want = (size_t)m->cfg.segment_refit_samples;
    most = most < 50 ? 50 : most;
    return want < most ? want : most;
}

void model_segments_step(model *m, model_seg_publish_fn publish, void *arg, logger *lg)
{
    seg_table *t = &m->seg;
    const model_cfg *c = &m->cfg;
    const calib_plugin *desc = m->params.desc;
    if (!c->segment_refit || !desc || !desc->fit || m->form == CALIB_FORM_GAUSSIAN ||
        m->recalib.seg_storing) /* what it stores is not in m->params yet */
        return;
    int fitted = 0;
    for (size_t i = 0; i < t->nkeys; i++) {
        seg_key *k = &t->key[i];
        for (size_t j = 0; j < k->used; j++) {
            seg_slot *s = &k->slot[j];
            int published = params_segment(&m->params, k->name, s->name) >= 0;
            int room = published || m->params.nseg < CALIB_PUBMSG_MAX_SEGMENTS;
            if (!s->flagged || (!s->fix && (published || !room)))
                continue;
            if (!s->fix) { /* refused by the budget: tried again at the next tick */
                (void)seg_fix_start(t, s, m->width + 1, segment_fit_records(m));
                continue;
            }
            seg_fix *f = s->fix;
            if (f->phase == SEG_FIX_COLLECT && f->n == f->cap && !fitted) {
                fitted = 1; /* one fit a tick: the loop's time is bounded */
                segment_fit(m, k, s, lg);
            } else if (f->phase == SEG_FIX_SHADOW && f->gate.state == CALIB_GATE_FAILED) {
                s->failed++;
                if (lg)
                    log_msg(lg, LOG_INFO, "loop", "%s: segment %s=%s: its parameters did not "
                            "pass the gate in %llu pairs; collecting anew", m->name, k->name,
                            s->name, (unsigned long long)f->gate.pairs);
                *f = (seg_fix){.phase = SEG_FIX_COLLECT, .cap = f->cap, .stride = f->stride,
                               .rec = f->rec};
            } else if (f->phase == SEG_FIX_SHADOW && f->gate.state == CALIB_GATE_PASSED &&
                       room && publish(arg, m, k, s) == 0) {
                s->passed++;
                seg_fix_end(t, s);
            }
        }
    }
}

void model_gate_cfg(const model *m, calib_gate_cfg *gc)
{
    const model_cfg *c = &m->cfg;
    double clip = m->form == CALIB_FORM_GAUSSIAN ? c->gate_dss_clip : 2;
    *gc = (calib_gate_cfg){.alpha = c->gate_alpha, .min_improvement = c->min_improvement,
                           .lo = -clip, .hi = clip, .max_samples = c->gate_max_samples};
}

void model_trigger_cfg(const model *m, calib_gate_cfg *gc)
{
    const model_cfg *c = &m->cfg;
    double clip = m->form == CALIB_FORM_GAUSSIAN ? c->gate_dss_clip : 2;
    /* never below the gate's: an alarm for less would refit for a
     * candidate the gate must reject, again and again */
    double effect = c->miscal_min_effect > c->min_improvement ? c->miscal_min_effect
                                                              : c->min_improvement;
    *gc = (calib_gate_cfg){.alpha = c->miscal_alpha, .min_improvement = effect, .lo = -clip,
                           .hi = clip, .max_samples = c->miscal_period};
}

/* The interval of sequence cs[view], cs[VIEW_RAW]'s when raw_for_cal. */
static int cs_interval(const calib_cs cs[VIEWS], int view, int raw_for_cal, double *lo,
                       double *hi)
{
    *lo = *hi = NAN;
    if (view == VIEW_CAL && raw_for_cal)
        view = VIEW_RAW;
    if (cs[view].n == 0)
        return 0;
    return calib_cs_interval(&cs[view], lo, hi) == CALIB_OK ? 1 : -1;
}

/* The calibrated view was fed in the period only under other parameters
 * than the identity (which may have changed already: the caller of
 * model_paired_reset closes it). */
void model_period_close(model *m, double until)
{
    model_period *pd = &m->period;
    if (pd->cs[VIEW_RAW].n > 0) {
        model_period_end *e = &pd->last;
        e->since = pd->since;
        e->until = until;
        e->n = pd->cs[VIEW_RAW].n;
        for (int v = 0; v < VIEWS; v++)
            e->rc[v] = cs_interval(pd->cs, v, pd->cs[VIEW_CAL].n == 0, &e->lo[v], &e->hi[v]);
    }
    for (int v = 0; v < VIEWS; v++)
        calib_cs_reset(&pd->cs[v]);
    pd->running = 0;
}

void model_period_roll(model *m, double now)
{
    model_period *pd = &m->period;
    if (!m->cs_on || !isfinite(now))
        return;
    if (pd->running && now >= pd->end) /* a clock stepped back: it goes on */
        model_period_close(m, pd->end);
    if (pd->running)
        return;
    double w = m->cfg.window, start = floor(now / w) * w, since = m->paired.since;
    pd->running = 1;
    /* from the parameters' start when it is in this period, up to now (a
     * wall clock stepped back puts it after now: the period would end
     * before it started, and the snapshot's reader refuse it) */
    pd->since = since > start && since <= now ? since : start;
    pd->end = start + w;
}

void model_paired_reset(model *m, uint64_t version, double since)
{
    model_paired *p = &m->paired;
    p->version = version;
    p->since = since;
    for (int v = 0; v < VIEWS && m->cs_on; v++)
        calib_cs_reset(&m->cs[v]);
    if (m->cs_on && m->period.running) /* the next one starts at the next pair */
        model_period_close(m, since);
    calib_lfree_test_reset(&m->lf);
    m->lf_alarm_at = 0;
    m->lf_reported = 0;
    lf_grade_flush(m);
    memcpy(m->lf_graded_base, m->lf_graded, sizeof m->lf_graded_base);
    for (int i = 0; i < WS_PER_VIEW; i++) {
        for (int v = 0; v < VIEWS; v++)
            calib_accum_init(&p->view[v][i]);
        calib_accum_init(&p->diff[i]);
    }
}

int model_cs(const model *m, int scope, int view, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (!m->cs_on)
        return 0;
    return cs_interval(scope == CS_PERIOD ? m->period.cs : m->cs, view,
                       model_params_serves_identity(&m->params) || !m->params.desc, lo, hi);
}

void model_event_add(model *m, double t, const char *kind, const char *fmt, ...)
{
    model_event *e = &m->events[m->nevents++ % MODEL_EVENTS];
    e->t = t;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
}

size_t model_events_len(const model *m)
{
    return m->nevents < MODEL_EVENTS ? (size_t)m->nevents : MODEL_EVENTS;
}

const model_event *model_event_get(const model *m, size_t i)
{
    uint64_t first = m->nevents - model_events_len(m);
    return &m->events[(first + i) % MODEL_EVENTS];
}

int model_params_is_identity(const model_params *p)
{
    for (unsigned i = 0; p->desc && i < p->n; i++)
        if (p->values[i] != p->desc->identity[i])
            return 0;
    return 1;
}

/* The drift detectors' level over the ring's records from number `from`:
 * sign 0 the calibrated main scores, else sign * z (z the calibrated
 * standardised residual, under the parameters in force). */
static model_level level_since(model *m, uint64_t from, int sign, double threshold)
{
    model_level lv = {.mean = NAN, .above = NAN};
    uint64_t total = m->ring.total, held = calib_ring_len(&m->ring);
    if (!m->shaped || from >= total || (sign && m->form != CALIB_FORM_GAUSSIAN))
        return lv;
    uint64_t first = from;
    if (total - first > held) {
        first = total - held;
        lv.truncated = 1;
    }
    calib_accum acc;
    calib_accum_init(&acc);
    uint64_t above = 0;
    for (uint64_t t = first; t < total; t++) {
        /* record number t is the i-th oldest held */
        size_t i = (size_t)(held - (total - t));
        double s;
        if (!sign) {
            s = m->ring_score[calib_ring_slot(&m->ring, i)];
        } else {
            calib_record r = calib_ring_get(&m->ring, i);
            int form;
            const double *xc = apply_params(m, &m->params, r.x, m->xcal, &form, NULL);
            s = sign * (r.y - xc[0]) / sqrt(xc[1]);
        }
        if (!isfinite(s))
            continue; /* as the detectors, which ignore NaN */
        calib_accum_add(&acc, s);
        above += s > threshold;
    }
    lv.n = (size_t)acc.n;
    if (acc.n) {
        lv.mean = calib_accum_mean(&acc);
        lv.above = (double)above / (double)acc.n;
    }
    return lv;
}

model_level model_level_since(model *m, uint64_t from, double threshold)
{
    return level_since(m, from, 0, threshold);
}

model_level model_z_level_since(model *m, uint64_t from, int sign, double threshold)
{
    return level_since(m, from, sign < 0 ? -1 : 1, threshold);
}

void model_view_fill(model *m, double now)
{
    model_view *v = &m->view;
    if (m->shaped)
        model_period_roll(m, now);
    v->have = m->shaped && calib_window_sum(&m->win, now, &v->w) == CALIB_OK;
    v->at = now;

}

