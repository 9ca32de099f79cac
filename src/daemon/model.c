/* model.c — per-model statistics: everything a joined pair updates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/protocol.h"
#include "model.h"

const char *reject_name(int reason)
{
    switch (reason) {
    case REJ_FRAMING: return "framing";
    case REJ_UNKNOWN_MODEL: return "unknown_model";
    case REJ_TOO_MANY_MODELS: return "too_many_models";
    case REJ_SHAPE: return "shape_mismatch";
    case REJ_NO_MEMORY: return "no_memory";
    case REJ_UNSHAPED: return "label_before_shape";
    }
    return calib_reject_name(reason);
}

void model_init(model *m, const model_cfg *cfg)
{
    memset(m, 0, sizeof *m);
    memcpy(m->name, cfg->name, sizeof m->name);
    m->cfg = *cfg;
    snprintf(m->params.method, sizeof m->params.method, "identity");
    for (int v = 0; v < VIEWS; v++)
        for (int s = 0; s < WS_PER_VIEW; s++)
            calib_accum_init(&m->cum[v][s]);
}

int model_shape(model *m, int form, size_t k, uint64_t seed)
{
    const model_cfg *c = &m->cfg;
    size_t pk = form == CALIB_FORM_GAUSSIAN ? 1 : k;
    m->form = form;
    m->k = k;
    m->width = calib_form_width(form, k);
    calib_join_cfg jc = {.ttl = c->label_ttl, .capacity = c->max_pending,
                         .width = m->width, .joined_capacity = c->joined_memory,
                         .seed = seed};
    calib_window_cfg wc = {.kind = CALIB_WINDOW_TIME, .span = c->window,
                           .panes = (uint32_t)c->window_panes,
                           .nstat = VIEWS * WS_PER_VIEW,
                           .top_bins = form == CALIB_FORM_GAUSSIAN ? 0 : (uint32_t)c->bins};
    int rc;
    if ((rc = calib_join_init(&m->join, &jc)) ||
        (rc = calib_window_init(&m->win, &wc)) ||
        (rc = calib_reservoir_init(&m->reservoir, m->width, c->reservoir, c->seed)) ||
        (rc = calib_ring_init(&m->ring, m->width, c->ring)))
        goto err;
    for (int v = 0; v < VIEWS && form != CALIB_FORM_GAUSSIAN; v++)
        if ((rc = calib_bins_init(&m->top[v], (uint32_t)c->bins)) != 0)
            goto err;
    if (form != CALIB_FORM_GAUSSIAN && k * c->bins <= MODEL_CW_MAX_CELLS &&
        (rc = calib_cwbins_init(&m->cw, (uint32_t)k, (uint32_t)c->bins)) != 0)
        goto err;
    m->p = calloc(pk, sizeof *m->p);
    m->pcal = calloc(pk, sizeof *m->pcal);
    m->xcal = calloc(m->width, sizeof *m->xcal);
    if (!m->p || !m->pcal || !m->xcal) {
        rc = CALIB_ENOMEM;
        goto err;
    }
    m->shaped = 1;
    return CALIB_OK;
err:
    model_free(m);
    return rc;
}

void model_free(model *m)
{
    calib_join_free(&m->join);
    calib_window_free(&m->win);
    calib_reservoir_free(&m->reservoir);
    calib_ring_free(&m->ring);
    for (int v = 0; v < VIEWS; v++)
        calib_bins_free(&m->top[v]);
    calib_cwbins_free(&m->cw);
    free(m->p);
    free(m->pcal);
    free(m->xcal);
    m->p = m->pcal = m->xcal = NULL;
    m->shaped = 0;
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

void model_canonical(const model *m, int form, const double *x, double *out)
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

/* The outputs after the current parameters. Nothing publishes parameters
 * yet, so they are the identity and both views see the raw outputs. */
static const double *calibrated(const model *m, const double *x)
{
    (void)m;
    return x;
}

/* Scores of outputs x for outcome y; fills p for classification. */
static void score(const model *m, const double *x, double y, double *p, double s[2])
{
    calib_score sc;
    size_t label = (size_t)y;
    switch (m->form) {
    case CALIB_FORM_LOGITS:
        calib_score_logits(x, m->k, label, p, &sc);
        break;
    case CALIB_FORM_PROBS:
        memcpy(p, x, m->k * sizeof *p);
        calib_score_probs(p, m->k, label, &sc);
        break;
    case CALIB_FORM_BINARY:
        p[0] = 1 - x[0];
        p[1] = x[0];
        calib_score_binary(x[0], (unsigned)label, &sc);
        break;
    default:
        s[WS_MAIN] = calib_score_dss(x[0], x[1], y);
        s[WS_LOG] = NAN;
        return;
    }
    s[WS_MAIN] = sc.brier;
    s[WS_LOG] = sc.log;
}

static void add_bins(calib_bins *b, const double *p, size_t k, double y)
{
    size_t top = calib_argmax(p, k);
    calib_bins_add(b, p[top], top == (size_t)y);
}

void model_observe(model *m, const double *x, double y, double now)
{
    double s[VIEWS][WS_PER_VIEW];
    double *p[VIEWS] = {m->p, m->pcal};
    const double *xs[VIEWS] = {x, calibrated(m, x)};
    int err;
    calib_pane *pane = calib_window_at(&m->win, now, &err);
    if (!pane)
        m->stale++; /* a clock step back past the window: cumulative only */
    for (int v = 0; v < VIEWS; v++) {
        if (v == VIEW_CAL && xs[v] == xs[VIEW_RAW]) {
            /* identity parameters: the raw view's scores, not computed twice */
            memcpy(s[v], s[VIEW_RAW], sizeof s[v]);
            p[v] = p[VIEW_RAW];
        } else {
            score(m, xs[v], y, p[v], s[v]);
        }
        for (int i = 0; i < WS_PER_VIEW; i++) {
            if (isnan(s[v][i]))
                continue;
            calib_accum_add(&m->cum[v][i], s[v][i]);
            if (pane)
                calib_accum_add(&pane->stat[v * WS_PER_VIEW + i], s[v][i]);
        }
        if (m->form != CALIB_FORM_GAUSSIAN) {
            add_bins(&m->top[v], p[v], m->k, y);
            if (v == VIEW_RAW && m->cw.k)
                calib_cwbins_add(&m->cw, p[v], (size_t)y);
            if (pane && v == VIEW_RAW)
                add_bins(&pane->top, p[v], m->k, y);
        }
    }
    calib_reservoir_offer(&m->reservoir, x, y, now);
    calib_ring_push(&m->ring, x, y, now);
    m->scored++;
}

int model_window_pane(const model *m, calib_pane *out)
{
    calib_window_cfg wc = m->win.cfg;
    return calib_pane_init(out, &wc);
}
