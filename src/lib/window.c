/* window.c — sliding windows: a ring of panes of accumulators and bins. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"

#define PANE_EMPTY INT64_MIN

/* Sets of top-label bins a pane of cfg holds; -1 for too many. */
static int top_sets(const calib_window_cfg *cfg)
{
    if (!cfg->top_bins)
        return 0;
    if (cfg->top_sets > CALIB_WINDOW_MAXTOP)
        return -1;
    return cfg->top_sets ? (int)cfg->top_sets : 1;
}

/* ------------------------------------------------------------------ panes */

int calib_pane_init(calib_pane *p, const calib_window_cfg *cfg)
{
    *p = (calib_pane){.index = PANE_EMPTY};
    int sets = top_sets(cfg);
    if (cfg->nstat > CALIB_WINDOW_MAXSTAT || sets < 0)
        return CALIB_EINVAL;
    int rc;
    for (int s = 0; s < sets; s++)
        if ((rc = calib_bins_init(&p->top[s], cfg->top_bins)) != 0)
            goto err;
    if (cfg->cw_k && (rc = calib_cwbins_init(&p->cw, cfg->cw_k, cfg->cw_bins)) != 0)
        goto err;
    return CALIB_OK;
err:
    calib_pane_free(p);
    return rc;
}

void calib_pane_free(calib_pane *p)
{
    for (int s = 0; s < CALIB_WINDOW_MAXTOP; s++)
        calib_bins_free(&p->top[s]);
    calib_cwbins_free(&p->cw);
}

void calib_pane_reset(calib_pane *p)
{
    p->index = PANE_EMPTY;
    for (int i = 0; i < CALIB_WINDOW_MAXSTAT; i++)
        calib_accum_init(&p->stat[i]);
    for (int s = 0; s < CALIB_WINDOW_MAXTOP; s++)
        if (p->top[s].m)
            calib_bins_reset(&p->top[s]);
    if (p->cw.k)
        calib_cwbins_reset(&p->cw);
}

int calib_pane_merge(calib_pane *dst, const calib_pane *src, uint32_t nstat)
{
    for (uint32_t i = 0; i < nstat && i < CALIB_WINDOW_MAXSTAT; i++)
        calib_accum_merge(&dst->stat[i], &src->stat[i]);
    int rc = 0;
    for (int s = 0; s < CALIB_WINDOW_MAXTOP; s++)
        if (dst->top[s].m && (rc = calib_bins_merge(&dst->top[s], &src->top[s])) != 0)
            return rc;
    if (dst->cw.k && (rc = calib_cwbins_merge(&dst->cw, &src->cw)) != 0)
        return rc;
    return CALIB_OK;
}

/* ------------------------------------------------------------------ window */

size_t calib_window_bytes(const calib_window_cfg *cfg)
{
    if (!cfg || cfg->panes == 0 || top_sets(cfg) < 0)
        return 0;
    size_t pane = sizeof(calib_pane) + (size_t)top_sets(cfg) * calib_bins_bytes(cfg->top_bins);
    if (cfg->cw_k) {
        size_t cw = calib_cwbins_bytes(cfg->cw_k, cfg->cw_bins);
        if (!cw || cw > SIZE_MAX - pane)
            return 0;
        pane += cw;
    }
    return pane > SIZE_MAX / cfg->panes ? 0 : pane * cfg->panes;
}

int calib_window_init(calib_window *w, const calib_window_cfg *cfg)
{
    *w = (calib_window){.cfg = *cfg, .head = -1};
    if (cfg->panes == 0 || cfg->nstat > CALIB_WINDOW_MAXSTAT || top_sets(cfg) < 0 ||
        !(cfg->span > 0) || !isfinite(cfg->span) ||
        (cfg->cw_k && !cfg->cw_bins))
        return CALIB_EINVAL;
    w->width = cfg->span / cfg->panes;
    if (cfg->kind == CALIB_WINDOW_COUNT &&
        (w->width < 1 || w->width != floor(w->width)))
        return CALIB_EINVAL; /* a count span must be a multiple of panes */
    if (cfg->kind != CALIB_WINDOW_COUNT && cfg->kind != CALIB_WINDOW_TIME)
        return CALIB_EINVAL;
    w->pane = calloc(cfg->panes, sizeof *w->pane);
    if (!w->pane)
        return CALIB_ENOMEM;
    for (uint32_t i = 0; i < cfg->panes; i++) {
        int rc = calib_pane_init(&w->pane[i], cfg);
        if (rc != 0) {
            calib_window_free(w);
            return rc;
        }
    }
    return CALIB_OK;
}

void calib_window_free(calib_window *w)
{
    if (w->pane)
        for (uint32_t i = 0; i < w->cfg.panes; i++)
            calib_pane_free(&w->pane[i]);
    free(w->pane);
    w->pane = NULL;
}

int calib_window_copy(calib_window *dst, const calib_window *src)
{
    *dst = *src;
    if (!src->pane)
        return CALIB_OK;
    dst->pane = calloc(src->cfg.panes, sizeof *dst->pane);
    if (!dst->pane)
        return CALIB_ENOMEM;
    for (uint32_t i = 0; i < src->cfg.panes; i++) {
        const calib_pane *s = &src->pane[i];
        calib_pane *d = &dst->pane[i];
        d->index = s->index;
        memcpy(d->stat, s->stat, sizeof d->stat);
        int rc = calib_cwbins_copy(&d->cw, &s->cw);
        for (int t = 0; rc == CALIB_OK && t < CALIB_WINDOW_MAXTOP; t++)
            rc = calib_bins_copy(&d->top[t], &s->top[t]);
        if (rc != CALIB_OK) {
            calib_window_free(dst);
            return CALIB_ENOMEM;
        }
    }
    return CALIB_OK;
}

static calib_pane *slot(const calib_window *w, int64_t index)
{
    int64_t p = (int64_t)w->cfg.panes;
    return &w->pane[((index % p) + p) % p];
}

/* The pane of index idx, making it the newest when idx is past the head.
 * NULL when idx is already dropped. A head that moves empties every pane
 * it leaves behind the window (a model silent for longer than the window
 * left them in place once, summed by no one and refused by the snapshot's
 * reader): every pane held is within P of the head. */
static calib_pane *pane_for(calib_window *w, int64_t idx)
{
    int64_t n = (int64_t)w->cfg.panes;
    if (w->head >= 0 && idx <= w->head - n)
        return NULL;
    if (w->head < 0 || idx > w->head) {
        w->head = idx;
        for (int64_t i = 0; i < n; i++)
            if (w->pane[i].index != PANE_EMPTY && w->pane[i].index <= idx - n)
                calib_pane_reset(&w->pane[i]);
    }
    calib_pane *p = slot(w, idx);
    if (p->index != idx) {
        calib_pane_reset(p);
        p->index = idx;
    }
    return p;
}

calib_pane *calib_window_next(calib_window *w)
{
    int64_t idx = (int64_t)(w->clock / (uint64_t)w->width);
    w->clock++;
    return pane_for(w, idx);
}

calib_pane *calib_window_at(calib_window *w, double t, int *err)
{
    if (!isfinite(t)) {
        *err = CALIB_ENONFINITE;
        return NULL;
    }
    double q = floor(t / w->width);
    if (q < -9e18 || q > 9e18) {
        *err = CALIB_EINVAL;
        return NULL;
    }
    calib_pane *p = pane_for(w, (int64_t)q);
    *err = p ? CALIB_OK : CALIB_ESTALE;
    return p;
}

int calib_window_sum(const calib_window *w, double now, calib_pane *out)
{
    calib_pane_reset(out);
    int64_t newest = w->head;
    if (w->cfg.kind == CALIB_WINDOW_TIME && isfinite(now)) {
        double q = floor(now / w->width);
        if (q > (double)newest)
            newest = q > 9e18 ? INT64_MAX : (int64_t)q;
    }
    for (uint32_t i = 0; i < w->cfg.panes; i++) {
        const calib_pane *p = &w->pane[i];
        if (p->index == PANE_EMPTY || p->index > newest ||
            p->index <= newest - (int64_t)w->cfg.panes)
            continue;
        int rc = calib_pane_merge(out, p, w->cfg.nstat);
        if (rc != 0)
            return rc;
    }
    return CALIB_OK;
}
