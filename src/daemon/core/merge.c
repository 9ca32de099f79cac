/* merge.c — one model's state merged into another's (calibctl merge): the
 * statistics are sums, so shards and days add up (see merge.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"

/* ------------------------------------------------------------------ window */

/* src's panes into dst's (same configuration): a pane of the same index
 * adds, a newer one replaces an older one in its slot, an older one is
 * outside dst's window and stays out. */
static int merge_window(calib_window *dst, const calib_window *src)
{
    const calib_window_cfg *c = &dst->cfg;
    for (uint32_t i = 0; i < c->panes; i++) {
        const calib_pane *sp = &src->pane[i];
        calib_pane *dp = &dst->pane[i];
        if (sp->index == INT64_MIN)
            continue;
        if (dp->index == INT64_MIN || dp->index < sp->index) {
            calib_pane_reset(dp);
            dp->index = sp->index;
        }
        if (dp->index == sp->index && calib_pane_merge(dp, sp, c->nstat) != CALIB_OK)
            return -1;
    }
    if (src->head > dst->head)
        dst->head = src->head;
    dst->clock += src->clock;
    return 0;
}

/* ------------------------------------------------------------------ ring */

typedef struct ring_rec {
    double t;
    double score;
    const double *rec; /* width + 2 doubles: x, y, t */
} ring_rec;

static int by_time(const void *a, const void *b)
{
    double x = ((const ring_rec *)a)->t, y = ((const ring_rec *)b)->t;
    return (x > y) - (x < y);
}

static size_t ring_collect(const model *m, ring_rec *out)
{
    size_t n = calib_ring_len(&m->ring);
    for (size_t i = 0; i < n; i++) {
        calib_record r = calib_ring_get(&m->ring, i);
        out[i] = (ring_rec){.t = r.t, .score = m->ring_score[calib_ring_slot(&m->ring, i)],
                            .rec = r.x};
    }
    return n;
}

/* The newest records of both rings by time, as many as dst holds. */
static int merge_ring(model *dst, const model *src)
{
    size_t n1 = calib_ring_len(&dst->ring), n2 = calib_ring_len(&src->ring);
    size_t cap = calib_ring_cap(&dst->ring), w = dst->width;
    ring_rec *all = malloc((n1 + n2 ? n1 + n2 : 1) * sizeof *all);
    double *copy = malloc((n1 ? n1 : 1) * (w + 2) * sizeof *copy);
    if (!all || !copy) {
        free(all);
        free(copy);
        return -1;
    }
    size_t n = ring_collect(dst, all);
    /* dst's records are about to be overwritten: read them from a copy */
    for (size_t i = 0; i < n; i++) {
        memcpy(copy + i * (w + 2), all[i].rec, (w + 2) * sizeof *copy);
        all[i].rec = copy + i * (w + 2);
    }
    n += ring_collect(src, all + n);
    qsort(all, n, sizeof *all, by_time);
    size_t from = n > cap ? n - cap : 0;
    dst->ring.s.len = 0;
    dst->ring.head = 0;
    dst->ring.total = 0;
    for (size_t i = from; i < n; i++)
        model_ring_push(dst, all[i].rec, all[i].rec[w], all[i].rec[w + 1], all[i].score);
    free(all);
    free(copy);
    return 0;
}

/* ------------------------------------------------------------------ join */

typedef struct item_list {
    calib_join_item *it;
    size_t n, cap;
    struct done_id {
        calib_id id;
        double arrived;
    } *done;
    size_t nd, capd;
    int nomem;
} item_list;

static int collect_item(void *arg, const calib_join_item *it)
{
    item_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        calib_join_item *v = realloc(l->it, cap * sizeof *v);
        if (!v)
            return l->nomem = 1;
        l->it = v;
        l->cap = cap;
    }
    l->it[l->n++] = *it;
    return 0;
}

static int collect_done(void *arg, const calib_id *id, double arrived)
{
    item_list *l = arg;
    if (l->nd == l->capd) {
        size_t cap = l->capd ? 2 * l->capd : 64;
        struct done_id *v = realloc(l->done, cap * sizeof *v);
        if (!v)
            return l->nomem = 1;
        l->done = v;
        l->capd = cap;
    }
    l->done[l->nd++] = (struct done_id){*id, arrived};
    return 0;
}

static int item_by_arrival(const void *a, const void *b)
{
    double x = ((const calib_join_item *)a)->arrived, y = ((const calib_join_item *)b)->arrived;
    return (x > y) - (x < y);
}

static int done_by_arrival(const void *a, const void *b)
{
    double x = ((const struct done_id *)a)->arrived, y = ((const struct done_id *)b)->arrived;
    return (x > y) - (x < y);
}

/* Both tables' waiting items and joined ids, in arrival order, into a
 * fresh table like dst's (the outputs are copied by each put). An id in
 * both is kept once (counted as a duplicate). */
static int merge_join(model *dst, const model *src, const seg_map *map, uint64_t *dups)
{
    item_list l = {0};
    calib_join fresh;
    double *xs = NULL; /* src's predictions with their codes made dst's */
    int rc = -1;
    if (calib_join_each(&dst->join, collect_item, collect_done, &l))
        goto out;
    size_t from = l.n;
    if (calib_join_each(&src->join, collect_item, collect_done, &l) || l.nomem ||
        calib_join_init(&fresh, &dst->join.cfg) != CALIB_OK)
        goto out;
    size_t w = dst->join.cfg.width, sw = src->join.cfg.width;
    if (l.n > from && w && !(xs = calloc((l.n - from) * w, sizeof *xs))) {
        calib_join_free(&fresh);
        goto out;
    }
    for (size_t i = from; i < l.n; i++) {
        if (!l.it[i].x)
            continue;
        double *x = xs + (i - from) * w;
        memcpy(x, l.it[i].x, dst->width * sizeof *x);
        if (map)
            seg_merge_codes(&dst->seg, &src->seg, map, l.it[i].x + src->width, x + dst->width);
        l.it[i].x = x;
    }
    (void)sw;
    if (l.n) /* qsort takes no NULL, even for nothing */
        qsort(l.it, l.n, sizeof *l.it, item_by_arrival);
    if (l.nd)
        qsort(l.done, l.nd, sizeof *l.done, done_by_arrival);
    for (size_t i = 0; i < l.n; i++)
        if (calib_join_put(&fresh, &l.it[i]) != CALIB_OK)
            (*dups)++;
    for (size_t i = 0; i < l.nd; i++)
        if (calib_join_put_done(&fresh, &l.done[i].id, l.done[i].arrived) != CALIB_OK)
            (*dups)++;
    const calib_join *a = &dst->join, *b = &src->join;
    fresh.joined = a->joined + b->joined;
    fresh.expired_preds = a->expired_preds + b->expired_preds;
    fresh.expired_labels = a->expired_labels + b->expired_labels;
    fresh.evicted += a->evicted + b->evicted;
    fresh.duplicate_preds = a->duplicate_preds + b->duplicate_preds;
    fresh.duplicate_labels = a->duplicate_labels + b->duplicate_labels;
    fresh.forgotten = a->forgotten + b->forgotten;
    fresh.sampled_out_preds = a->sampled_out_preds + b->sampled_out_preds;
    fresh.sampled_out_labels = a->sampled_out_labels + b->sampled_out_labels;
    /* the smaller sample: what both shards kept of an id space */
    calib_join_sampling sa, sb;
    calib_join_sampling_get(a, &sa);
    calib_join_sampling_get(b, &sb);
    calib_join_sampling_set(&fresh, sa.sample <= sb.sample ? &sa : &sb);
    fresh.now = a->now > b->now ? a->now : b->now;
    calib_join_free(&dst->join);
    dst->join = fresh;
    rc = 0;
out:
    free(xs);
    free(l.it);
    free(l.done);
    return rc;
}

/* ------------------------------------------------------------------ events */

static int event_by_time(const void *a, const void *b)
{
    double x = ((const model_event *)a)->t, y = ((const model_event *)b)->t;
    return (x > y) - (x < y);
}

static void merge_events(model *dst, const model *src)
{
    model_event all[2 * MODEL_EVENTS];
    size_t n = 0;
    for (size_t i = 0; i < model_events_len(dst); i++)
        all[n++] = *model_event_get(dst, i);
    for (size_t i = 0; i < model_events_len(src); i++)
        all[n++] = *model_event_get(src, i);
    qsort(all, n, sizeof *all, event_by_time);
    size_t from = n > MODEL_EVENTS ? n - MODEL_EVENTS : 0;
    /* events recorded by both; the newest kept, oldest first */
    uint64_t total = dst->nevents + src->nevents;
    for (size_t i = from; i < n; i++)
        dst->events[(total - (n - from) + (i - from)) % MODEL_EVENTS] = all[i];
    dst->nevents = total;
}

/* ------------------------------------------------------------------ model */

static void add_counters(model *dst, const model *src, const size_t *at, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *model_counter(dst, at[i]) += *(const uint64_t *)((const char *)src + at[i]);
}

static const char *incompatible(const model *dst, const model *src)
{
    if (dst->shaped != src->shaped || dst->form != src->form || dst->k != src->k)
        return "another form or K";
    if (!dst->shaped)
        return NULL;
    if (dst->top[0].m != src->top[0].m)
        return "another number of bins";
    if (dst->cw.k != src->cw.k)
        return "class-wise bins on one side only";
    const calib_window_cfg *a = &dst->win.cfg, *b = &src->win.cfg;
    if (a->kind != b->kind || a->span != b->span || a->panes != b->panes || a->nstat != b->nstat ||
        a->top_bins != b->top_bins || a->top_sets != b->top_sets || a->cw_k != b->cw_k)
        return "another window (window, window_panes)";
    return NULL;
}

/* The window's periods (model_period), which follow the paired
 * comparison as its sequences do: a newer version's replaces dst's; at the
 * same version the later period wins (dst's earlier one closed), and the
 * same period's sequences merge (its start the earlier of the two). A
 * closed period's intervals cannot merge: the later one's is kept. */
static void merge_period(model *dst, const model *src, int newer)
{
    model_period *d = &dst->period;
    const model_period *s = &src->period;
    if (!dst->cs_on)
        return;
    int same = src->params.version == dst->params.version;
    int take = src->cs_on && s->running && (newer || (same && (!d->running || s->end > d->end)));
    int join = !take && src->cs_on && s->running && same && d->running && s->end == d->end;
    if (newer) {
        model_period_close(dst, 0);
        memset(&d->last, 0, sizeof d->last);
    } else if (take && d->running) {
        model_period_close(dst, d->end); /* src's period is later */
    }
    if (src->cs_on && s->last.n && (newer || same) && (!d->last.n || s->last.until > d->last.until))
        d->last = s->last;
    if (!take && !join)
        return;
    for (int v = 0; v < VIEWS; v++)
        if (s->cs[v].alpha != d->cs[v].alpha || s->cs[v].grid != d->cs[v].grid ||
            calib_cs_merge(&d->cs[v], &s->cs[v]) != CALIB_OK) {
            for (int u = 0; u < VIEWS; u++)
                calib_cs_reset(&d->cs[u]);
            break;
        }
    d->running = 1;
    d->since = take || s->since < d->since ? s->since : d->since;
    d->end = s->end;
}

int model_merge(model *dst, const model *src, char *why, size_t len)
{
    const char *no = incompatible(dst, src);
    if (no) {
        snprintf(why, len, "%s: %s", dst->name, no);
        return -1;
    }
    uint64_t dups = 0;
    seg_map map = {0};
    /* segments of other settings: src's are left out (its waiting
     * predictions keep their outputs, not their segments) */
    int seg_rc = dst->shaped ? seg_merge(&dst->seg, &src->seg, &map) : CALIB_EINVAL;
    int rc = seg_rc == CALIB_ENOMEM ? -1
           : merge_join(dst, src, seg_rc == CALIB_OK ? &map : NULL, &dups);
    seg_map_free(&map);
    if (rc != 0)
        goto nomem;
    add_counters(dst, src, model_counters, MODEL_COUNTERS);
    add_counters(dst, src, recalib_counters, RECALIB_COUNTERS);
    dst->recalib.rollbacks += src->recalib.rollbacks;
    dst->recalib.miscal_alarms += src->recalib.miscal_alarms;
    dst->recalib.cancelled += src->recalib.cancelled;
    for (int i = 0; i < REJ_MAX; i++)
        dst->rejected[i] += src->rejected[i];
    merge_events(dst, src);
    memset(dst->alert, 0, sizeof dst->alert); /* incidents are per daemon */
    /* the newest version in force, and its paired comparison, summed
     * where both have it */
    int newer = src->params.version > dst->params.version;
    /* the sequences follow the paired comparison: a newer version's
     * replace dst's (or, when src keeps none, dst's start afresh); at the
     * same version the product of the capitals is a sequence of the same
     * level over both shards' pairs (calib_cs_merge); another cs_alpha
     * cannot merge, and dst's, over a part of the pairs, stays valid */
    for (int v = 0; v < VIEWS && dst->cs_on; v++) {
        if (newer)
            calib_cs_reset(&dst->cs[v]);
        if (src->cs_on && (newer || src->params.version == dst->params.version) &&
            src->cs[v].alpha == dst->cs[v].alpha && src->cs[v].grid == dst->cs[v].grid &&
            calib_cs_merge(&dst->cs[v], &src->cs[v]) != CALIB_OK)
            calib_cs_reset(&dst->cs[v]);
    }
    merge_period(dst, src, newer);
    if (newer) {
        dst->params = src->params;
        dst->paired = src->paired;
    } else if (src->params.version == dst->params.version && dst->shaped) {
        for (int v = 0; v < VIEWS; v++)
            for (int s = 0; s < WS_PER_VIEW; s++)
                calib_accum_merge(&dst->paired.view[v][s], &src->paired.view[v][s]);
        for (int s = 0; s < WS_PER_VIEW; s++)
            calib_accum_merge(&dst->paired.diff[s], &src->paired.diff[s]);
        if (src->paired.since < dst->paired.since)
            dst->paired.since = src->paired.since;
    }
    if (!dst->shaped)
        goto done;
    for (int v = 0; v < VIEWS; v++)
        for (int s = 0; s < WS_PER_VIEW; s++) {
            calib_accum_merge(&dst->cum[v][s], &src->cum[v][s]);
            dst->sums[v][s].pos += src->sums[v][s].pos;
            dst->sums[v][s].neg += src->sums[v][s].neg;
            dst->sums[v][s].sq += src->sums[v][s].sq;
        }
    for (int v = 0; v < VIEWS && dst->top[v].m; v++)
        if (calib_bins_merge(&dst->top[v], &src->top[v]) != CALIB_OK)
            goto nomem;
    if (dst->cw.k && calib_cwbins_merge(&dst->cw, &src->cw) != CALIB_OK)
        goto nomem;
    if (merge_window(&dst->win, &src->win) != 0 ||
        calib_reservoir_merge(&dst->reservoir, &src->reservoir) != CALIB_OK ||
        merge_ring(dst, src) != 0)
        goto nomem;
    /* the loop's detectors and runs belonged to one daemon each (its
     * counters were added above): the merged model's start afresh */
    model_recalib *l = &dst->recalib;
    model_drift_reset(dst);
    l->guard_on = 0; /* a guard compares one daemon's pairs */
    l->trig_on = l->trig_fitting = l->trig_reported = 0; /* so does the trigger */
    l->trig_start = l->trig_fit_at = l->trig_quiet_until = dst->ring.total;
    if (l->refit.phase != PHASE_OFF)
        l->refit.phase = PHASE_IDLE;
    l->refit.pending = l->refit.reason = REFIT_NONE;
done:
    if (dups)
        snprintf(why, len, "%s: %llu waiting or joined ids were in both; kept once", dst->name,
                 (unsigned long long)dups);
    else if (len)
        why[0] = 0;
    return 0;
nomem:
    snprintf(why, len, "%s: out of memory", dst->name);
    return -1;
}
