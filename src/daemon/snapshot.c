/* snapshot.c — a model's full state to msgpack and back (see snapshot.h).
 * Over 1,000 lines because the writer and the reader of each section sit
 * in one file, so that a key changed in one is changed in the other; a
 * save/load pair per libcalib structure, in libcalib, would move most of
 * it there. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "calib/calib.h"
#include "calib/plugin.h"
#include "calib/protocol.h"
#include "log.h"
#include "mp_read.h"
#include "snapshot.h"
#include "state.h"

/* The binaries are the structs' bytes: their layout is part of the format
 * (versions 1 and 2 alike). */
_Static_assert(sizeof(calib_ksum) == 16, "calib_ksum is two doubles");
_Static_assert(sizeof(calib_accum) == 40, "calib_accum is n and two ksums");
_Static_assert(sizeof(calib_eproc) == 72, "calib_eproc is 7 doubles and 2 integers");
_Static_assert(sizeof(model_sums) == 24, "model_sums is three doubles");
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshots are written in the host's byte order, which must be little-endian"
#endif

/* ------------------------------------------------------------------ writing */

static void key_bin(calib_mpw *w, const char *key, const void *p, size_t len)
{
    calib_mpw_key(w, key);
    calib_mpw_bin(w, p, len);
}

static void key_uint(calib_mpw *w, const char *key, uint64_t v)
{
    calib_mpw_key(w, key);
    calib_mpw_uint(w, v);
}

static void key_double(calib_mpw *w, const char *key, double v)
{
    calib_mpw_key(w, key);
    calib_mpw_double(w, v);
}

/* A structure's settings as numbers: stored as an array, and compared with
 * the running configuration's at restore (a section is restored only into
 * the same dimensions). */
enum { CFG_NUMBERS = 8 };

static void window_numbers(const calib_window_cfg *c, double v[CFG_NUMBERS])
{
    const double n[CFG_NUMBERS] = {c->kind, c->span, c->panes, c->nstat,
                                   c->top_bins, c->top_sets, c->cw_k, c->cw_bins};
    memcpy(v, n, sizeof n);
}

static void drift_numbers(const calib_drift_cfg *c, double v[CFG_NUMBERS])
{
    const double n[CFG_NUMBERS] = {c->kind, c->lo, c->hi, c->alpha, c->min_effect, c->quantile,
                                   (double)c->reference, (double)c->restart};
    memcpy(v, n, sizeof n);
}

static void key_numbers(calib_mpw *w, const char *key, const double v[CFG_NUMBERS])
{
    calib_mpw_key(w, key);
    calib_mpw_array(w);
    for (int i = 0; i < CFG_NUMBERS; i++)
        calib_mpw_double(w, v[i]);
    calib_mpw_end(w);
}

static void pack_bins(calib_mpw *w, const calib_bins *b)
{
    calib_mpw_map(w);
    key_uint(w, "m", b->m);
    key_uint(w, "n", b->n);
    key_bin(w, "count", b->count, b->m * sizeof *b->count);
    key_bin(w, "conf", b->conf, b->m * sizeof *b->conf);
    key_bin(w, "correct", b->correct, b->m * sizeof *b->correct);
    calib_mpw_end(w);
}

/* nil when there are none (k = 0) */
static void pack_cwbins(calib_mpw *w, const calib_cwbins *b)
{
    if (!b->k) {
        calib_mpw_nil(w);
        return;
    }
    size_t cells = (size_t)b->k * b->m;
    calib_mpw_map(w);
    key_uint(w, "k", b->k);
    key_uint(w, "m", b->m);
    key_uint(w, "n", b->n);
    key_bin(w, "count", b->count, cells * sizeof *b->count);
    key_bin(w, "psum", b->psum, cells * sizeof *b->psum);
    key_bin(w, "hits", b->hits, cells * sizeof *b->hits);
    calib_mpw_end(w);
}

static void pack_window(calib_mpw *w, const calib_window *win)
{
    const calib_window_cfg *c = &win->cfg;
    uint32_t sets = c->top_sets ? c->top_sets : 1;
    double v[CFG_NUMBERS];
    window_numbers(c, v);
    calib_mpw_map(w);
    key_numbers(w, "cfg", v);
    calib_mpw_key(w, "head");
    calib_mpw_int(w, win->head);
    key_uint(w, "clock", win->clock);
    calib_mpw_key(w, "panes");
    calib_mpw_array(w);
    for (uint32_t i = 0; i < c->panes; i++) {
        const calib_pane *p = &win->pane[i];
        calib_mpw_map(w);
        calib_mpw_key(w, "index");
        calib_mpw_int(w, p->index);
        key_bin(w, "stat", p->stat, c->nstat * sizeof *p->stat);
        calib_mpw_key(w, "top");
        calib_mpw_array(w);
        for (uint32_t s = 0; c->top_bins && s < sets; s++)
            pack_bins(w, &p->top[s]);
        calib_mpw_end(w);
        calib_mpw_key(w, "cw");
        pack_cwbins(w, &p->cw);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* Records of a store as they lie: len * (width + 2) doubles; cap the
 * records it holds at most now, bound the most it was given (cap unless
 * memory_limit stopped it lower: model_size's figure). */
static void pack_store(calib_mpw *w, const calib_store *s, size_t bound)
{
    key_uint(w, "width", s->width);
    key_uint(w, "cap", s->cap);
    key_uint(w, "bound", bound);
    key_uint(w, "len", s->len);
    key_bin(w, "data", s->data, s->len * (s->width + 2) * sizeof *s->data);
}

static void pack_ring(calib_mpw *w, const model *m)
{
    const calib_ring *r = &m->ring;
    calib_mpw_map(w);
    pack_store(w, &r->s, m->sizes.ring);
    key_uint(w, "head", r->head);
    key_uint(w, "total", r->total);
    /* the drift detector's score of each record, by slot */
    key_bin(w, "score", m->ring_score, r->s.len * sizeof *m->ring_score);
    calib_mpw_end(w);
}

static void pack_reservoir(calib_mpw *w, const calib_reservoir *r, size_t bound)
{
    calib_mpw_map(w);
    pack_store(w, &r->s, bound);
    key_uint(w, "seen", r->seen);
    key_uint(w, "skip", r->skip);
    key_double(w, "w", r->w);
    key_bin(w, "rng", r->rng.s, sizeof r->rng.s);
    calib_mpw_end(w);
}

static void pack_id(calib_mpw *w, const calib_id *id)
{
    if (id->kind == CALIB_ID_U64)
        calib_mpw_uint(w, id->v.u64);
    else
        calib_mpw_bin(w, id->v.str, id->len);
}

typedef struct item_writer {
    calib_mpw *w;
    size_t width;
} item_writer;

static int write_item(void *arg, const calib_join_item *it)
{
    item_writer *iw = arg;
    calib_mpw *w = iw->w;
    calib_mpw_array(w);
    calib_mpw_uint(w, (uint64_t)it->kind);
    pack_id(w, &it->id);
    calib_mpw_double(w, it->arrived);
    calib_mpw_double(w, it->ts);
    if (it->kind == CALIB_JOIN_PRED)
        calib_mpw_bin(w, it->x, iw->width * sizeof *it->x);
    else
        calib_mpw_double(w, it->y);
    calib_mpw_end(w);
    return 0;
}

static int write_done(void *arg, const calib_id *id, double arrived)
{
    item_writer *iw = arg;
    calib_mpw_array(iw->w);
    pack_id(iw->w, id);
    calib_mpw_double(iw->w, arrived);
    calib_mpw_end(iw->w);
    return 0;
}

static void pack_join(calib_mpw *w, const calib_join *j)
{
    item_writer iw = {w, j->cfg.width};
    calib_mpw_map(w);
    key_uint(w, "width", j->cfg.width);
    key_uint(w, "joined", j->joined);
    key_uint(w, "expired_preds", j->expired_preds);
    key_uint(w, "expired_labels", j->expired_labels);
    key_uint(w, "evicted", j->evicted);
    key_uint(w, "duplicate_preds", j->duplicate_preds);
    key_uint(w, "duplicate_labels", j->duplicate_labels);
    key_uint(w, "forgotten", j->forgotten);
    /* the sample over capacity (optional keys: absent before it) */
    calib_join_sampling sm;
    calib_join_sampling_get(j, &sm);
    key_uint(w, "sampled_out_preds", j->sampled_out_preds);
    key_uint(w, "sampled_out_labels", j->sampled_out_labels);
    key_uint(w, "sample", sm.sample);
    key_uint(w, "label_sample", sm.label_sample);
    key_double(w, "label_until", sm.label_until);
    key_uint(w, "arrivals", sm.arrivals);
    /* [kind, id, arrived, ts, y or outputs], oldest first */
    calib_mpw_key(w, "items");
    calib_mpw_array(w);
    calib_join_each(j, write_item, NULL, &iw);
    calib_mpw_end(w);
    /* [id, arrived], oldest first */
    calib_mpw_key(w, "done");
    calib_mpw_array(w);
    calib_join_each(j, NULL, write_done, &iw);
    calib_mpw_end(w);
    calib_mpw_end(w);
}

static void pack_params(calib_mpw *w, const model_params *p)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "method");
    calib_mpw_str(w, p->method);
    key_uint(w, "version", p->version);
    calib_mpw_key(w, "names");
    calib_mpw_array(w);
    for (unsigned i = 0; p->desc && i < p->n; i++)
        calib_mpw_str(w, p->desc->param_names[i]);
    calib_mpw_end(w);
    key_bin(w, "values", p->values, (p->desc ? p->n : 0) * sizeof *p->values);
    key_double(w, "ts", p->ts);
    key_uint(w, "fit_n", p->fit_n);
    key_uint(w, "shadow_n", p->shadow_n);
    key_bin(w, "before", p->before, sizeof p->before);
    key_bin(w, "after", p->after, sizeof p->after);
    key_double(w, "improvement", p->improvement);
    key_bin(w, "ci", p->ci, sizeof p->ci);
    calib_mpw_end(w);
}

static void pack_drift(calib_mpw *w, const calib_drift *d)
{
    const calib_drift_cfg *c = &d->cfg;
    double v[CFG_NUMBERS];
    drift_numbers(c, v);
    calib_mpw_map(w);
    key_numbers(w, "cfg", v);
    key_uint(w, "state", (uint64_t)d->state);
    key_bin(w, "ref", &d->ref, sizeof d->ref);
    key_bin(w, "ref_x", d->ref_x, d->ref_x ? c->reference * sizeof *d->ref_x : 0);
    key_double(w, "threshold", d->threshold);
    key_double(w, "null_mean", d->null_mean);
    key_bin(w, "bank", d->bank, sizeof d->bank);
    key_bin(w, "log_w", d->log_w, sizeof d->log_w);
    key_bin(w, "start", d->start, sizeof d->start);
    key_uint(w, "nbank", d->nbank);
    key_uint(w, "started", d->started);
    key_bin(w, "watch", &d->watch, sizeof d->watch);
    key_uint(w, "n", d->n);
    key_uint(w, "alarm_at", d->alarm_at);
    key_uint(w, "change_at", d->change_at);
    key_uint(w, "resets", d->resets);
    /* the mean detector's paired e-processes and its ring of scores
     * (calib_drift(3), "Saving and restoring the state"); optional keys:
     * absent from older files, read_drift then leaves them as init did */
    key_bin(w, "ring", d->ring, d->ring ? d->ring_len * sizeof *d->ring : 0);
    key_uint(w, "ring_n", d->ring_n);
    key_bin(w, "pair", d->pair, sizeof d->pair);
    key_uint(w, "npair", d->npair);
    key_bin(w, "all", &d->all, sizeof d->all);
    calib_mpw_end(w);
}

/* A confidence sequence's state (calib_cs(3)): its configuration, the
 * scalars and the kept candidates' capitals; the rest is derived. */
static void pack_cs(calib_mpw *w, const calib_cs *cs)
{
    calib_mpw_map(w);
    key_double(w, "alpha", cs->alpha);
    key_uint(w, "grid", cs->grid);
    key_uint(w, "gsize", cs->gsize);
    key_uint(w, "gbase", cs->gbase);
    key_uint(w, "gstride", cs->gstride);
    key_uint(w, "first", cs->first);
    key_uint(w, "last", cs->last);
    uint64_t flags = (cs->low_out ? 1u : 0u) | (cs->high_out ? 2u : 0u) | (cs->empty ? 4u : 0u);
    key_uint(w, "flags", flags);
    key_uint(w, "n", cs->n);
    key_uint(w, "clamped", cs->clamped);
    key_uint(w, "refines", cs->refines);
    key_double(w, "sum", cs->sum);
    key_double(w, "sq", cs->sq);
    key_double(w, "fold_bits", cs->fold_bits);
    const double *arr[8] = {cs->lp, cs->pp, cs->ap, cs->qp, cs->lm, cs->pm, cs->am, cs->qm};
    calib_mpw_key(w, "capital");
    calib_mpw_array(w);
    for (int i = 0; i < 8; i++)
        calib_mpw_bin(w, arr[i] + cs->first, (cs->last - cs->first) * sizeof(double));
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* The window's period (model_period): nil when none runs; its last
 * closed period's intervals (NaN for an empty one), nil when none. */
static void pack_period(calib_mpw *w, const model *m)
{
    const model_period *pd = &m->period;
    if (!m->cs_on || !pd->running) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    key_double(w, "since", pd->since);
    key_double(w, "end", pd->end);
    calib_mpw_key(w, "cs");
    calib_mpw_array(w);
    for (int v = 0; v < VIEWS; v++)
        pack_cs(w, &pd->cs[v]);
    calib_mpw_end(w);
    calib_mpw_key(w, "last");
    if (!pd->last.n) {
        calib_mpw_nil(w);
    } else {
        calib_mpw_map(w);
        key_double(w, "since", pd->last.since);
        key_double(w, "until", pd->last.until);
        key_uint(w, "n", pd->last.n);
        calib_mpw_key(w, "interval"); /* per view: low, high */
        calib_mpw_array(w);
        for (int v = 0; v < VIEWS; v++)
            calib_mpw_pair(w, (const double[2]){pd->last.lo[v], pd->last.hi[v]});
        calib_mpw_end(w);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

static void pack_gate(calib_mpw *w, const calib_gate *g)
{
    calib_mpw_map(w);
    key_double(w, "alpha", g->cfg.alpha);
    key_double(w, "min_improvement", g->cfg.min_improvement);
    key_double(w, "lo", g->cfg.lo);
    key_double(w, "hi", g->cfg.hi);
    key_uint(w, "max_samples", g->cfg.max_samples);
    key_uint(w, "state", (uint64_t)g->state);
    key_bin(w, "e", &g->e, sizeof g->e);
    key_bin(w, "diff", &g->diff, sizeof g->diff);
    key_bin(w, "current", &g->current, sizeof g->current);
    key_bin(w, "candidate", &g->candidate, sizeof g->candidate);
    key_uint(w, "pairs", g->pairs);
    calib_mpw_end(w);
}

static void pack_loop(calib_mpw *w, const model *m)
{
    const model_loop *l = &m->loop;
    calib_mpw_map(w);
    key_uint(w, "phase", (uint64_t)l->refit.phase);
    key_uint(w, "pending", (uint64_t)l->refit.pending);
    key_uint(w, "reason", (uint64_t)l->refit.reason);
    key_double(w, "next_refit", l->refit.next_refit);
    calib_mpw_key(w, "drift");
    if (l->drift_on)
        pack_drift(w, &l->drift);
    else
        calib_mpw_nil(w);
    key_uint(w, "drift_base", l->drift_base);
    key_uint(w, "drift_alarm", (uint64_t)(l->drift_alarm != 0));
    calib_mpw_key(w, "shadow");
    if (l->refit.phase == PHASE_SHADOW) {
        calib_mpw_map(w);
        calib_mpw_key(w, "candidate");
        pack_params(w, &l->candidate);
        calib_mpw_key(w, "gate");
        pack_gate(w, &l->gate);
        key_bin(w, "log", l->shadow_log, sizeof l->shadow_log);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    /* optional keys (absent from files before the guard): read_loop */
    calib_mpw_key(w, "guard");
    if (l->guard_on) {
        calib_mpw_map(w);
        key_uint(w, "version", m->params.version); /* the version guarded */
        calib_mpw_key(w, "prev");
        pack_params(w, &l->guard_prev);
        calib_mpw_key(w, "gate");
        pack_gate(w, &l->guard);
        key_double(w, "low", l->guard_low);
        key_bin(w, "since", l->guard_since, sizeof l->guard_since);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    calib_mpw_key(w, "trigger"); /* optional: read_loop */
    if (l->trig_on) {
        calib_mpw_map(w);
        calib_mpw_key(w, "challenger");
        pack_params(w, &l->challenger);
        calib_mpw_key(w, "gate");
        pack_gate(w, &l->trig);
        key_uint(w, "fit_at", l->trig_fit_at);
        key_uint(w, "start", l->trig_start);
        key_uint(w, "quiet_until", l->trig_quiet_until);
        key_uint(w, "reported", (uint64_t)(l->trig_reported != 0));
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    key_uint(w, "rollbacks", l->rollbacks);
    key_uint(w, "miscal_alarms", l->miscal_alarms);
    key_uint(w, "cancelled", l->cancelled);
    uint64_t counters[LOOP_COUNTERS];
    model_counters_get(m, loop_counters, LOOP_COUNTERS, counters);
    key_bin(w, "counters", counters, sizeof counters);
    calib_mpw_end(w);
}

static void pack_rejected(calib_mpw *w, const uint64_t counts[REJ_MAX])
{
    calib_mpw_map(w);
    for (int r = 0; r < REJ_MAX; r++)
        if (counts[r])
            key_uint(w, reject_name(r), counts[r]);
    calib_mpw_end(w);
}

/* The model's configuration as the text of its [model] keys, with the
 * capacities its byte budgets allowed (model_size; not those memory_limit
 * stopped a ring or reservoir at, which their maps hold), so that calibctl
 * can rebuild it without the daemon's file. */
static void pack_cfg(calib_mpw *w, const model *m)
{
    model_cfg c = m->cfg;
    c.max_pending = m->join.cfg.capacity;
    c.joined_memory = m->join.cfg.joined_capacity ? m->join.cfg.joined_capacity : 1;
    if (m->shaped) {
        c.ring = m->sizes.ring;
        c.reservoir = m->sizes.reservoir;
    }
    char value[128];
    const char *key;
    calib_mpw_map(w);
    for (size_t i = 0; (key = config_model_key(i, &c, value, sizeof value)); i++) {
        calib_mpw_key(w, key);
        calib_mpw_str(w, value);
    }
    calib_mpw_end(w);
}

void snapshot_pack_model(calib_mpw *w, const model *m)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "name");
    calib_mpw_str(w, m->name);
    key_uint(w, "shaped", (uint64_t)(m->shaped != 0));
    key_uint(w, "form", (uint64_t)(m->shaped ? m->form : 0));
    key_uint(w, "k", m->shaped ? m->k : 0);
    calib_mpw_key(w, "cfg");
    pack_cfg(w, m);
    uint64_t counters[MODEL_COUNTERS];
    model_counters_get(m, model_counters, MODEL_COUNTERS, counters);
    key_bin(w, "counters", counters, sizeof counters);
    calib_mpw_key(w, "rejected");
    pack_rejected(w, m->rejected);
    const double last[] = {m->last_label_mono, m->first_prediction_mono,
                           m->last_prediction_mono};
    key_bin(w, "last", last, sizeof last);
    calib_mpw_key(w, "join");
    pack_join(w, &m->join);
    key_uint(w, "nevents", m->nevents);
    calib_mpw_key(w, "events");
    calib_mpw_array(w);
    for (size_t i = 0; i < model_events_len(m); i++) {
        const model_event *e = model_event_get(m, i);
        calib_mpw_array(w);
        calib_mpw_double(w, e->t);
        calib_mpw_str(w, e->kind);
        calib_mpw_str(w, e->text);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_key(w, "alert");
    calib_mpw_array(w);
    for (int i = 0; i < RULES; i++) {
        calib_mpw_array(w);
        calib_mpw_uint(w, (uint64_t)(m->alert[i].open != 0));
        calib_mpw_uint(w, (uint64_t)(m->alert[i].alerted != 0));
        calib_mpw_double(w, m->alert[i].last);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_key(w, "params");
    pack_params(w, &m->params);
    if (m->shaped) {
        key_bin(w, "cum", m->cum, sizeof m->cum);
        key_bin(w, "sums", m->sums, sizeof m->sums);
        calib_mpw_key(w, "paired");
        calib_mpw_map(w);
        key_uint(w, "version", m->paired.version);
        key_double(w, "since", m->paired.since);
        key_bin(w, "view", m->paired.view, sizeof m->paired.view);
        key_bin(w, "diff", m->paired.diff, sizeof m->paired.diff);
        calib_mpw_key(w, "cs"); /* optional: absent before the sequences */
        if (m->cs_on) {
            calib_mpw_array(w);
            for (int v = 0; v < VIEWS; v++)
                pack_cs(w, &m->cs[v]);
            calib_mpw_end(w);
        } else {
            calib_mpw_nil(w);
        }
        calib_mpw_key(w, "period"); /* optional: absent before the window's */
        pack_period(w, m);
        calib_mpw_end(w);
        calib_mpw_key(w, "top");
        calib_mpw_array(w);
        for (int v = 0; v < VIEWS && m->top[v].m; v++)
            pack_bins(w, &m->top[v]);
        calib_mpw_end(w);
        calib_mpw_key(w, "cw");
        pack_cwbins(w, &m->cw);
        calib_mpw_key(w, "window");
        pack_window(w, &m->win);
        calib_mpw_key(w, "reservoir");
        pack_reservoir(w, &m->reservoir, m->sizes.reservoir);
        calib_mpw_key(w, "ring");
        pack_ring(w, m);
        calib_mpw_key(w, "loop");
        pack_loop(w, m);
    }
    calib_mpw_end(w);
}

/* zlib's crc32 takes a uInt length: in steps */
static uint32_t crc_of(const char *p, size_t len)
{
    return snapshot_crc((uint32_t)crc32(0L, Z_NULL, 0), p, len);
}

uint32_t snapshot_crc(uint32_t crc, const char *p, size_t len)
{
    uLong c = crc;
    for (size_t off = 0; off < len;) {
        uInt n = len - off > (1u << 30) ? 1u << 30 : (uInt)(len - off);
        c = crc32(c, (const Bytef *)p + off, n);
        off += n;
    }
    return (uint32_t)c;
}

void snapshot_frame(calib_mpw *w, const char *body, size_t len, uint64_t models, double wall,
                    double mono, uint64_t messages, const uint64_t rejected[REJ_MAX])
{
    snapshot_frame_sum(w, len, crc_of(body, len), models, wall, mono, NULL, messages, rejected);
}

/* The header's fields; with pad >= 0 a last key "pad" of that many zero
 * bytes (readers skip unknown keys: the header can fill a slot). */
static void frame_fields(calib_mpw *w, long pad, uint64_t len, uint32_t crc, uint64_t models,
                         double wall, double mono, const snapshot_clocks *clocks,
                         uint64_t messages, const uint64_t rejected[REJ_MAX])
{
    static const char zeros[SNAPSHOT_HEAD_SLOT];
    calib_mpw_reset(w);
    calib_mpw_map(w);
    calib_mpw_key(w, "format");
    calib_mpw_str(w, "calibd-snapshot");
    key_uint(w, "v", SNAPSHOT_VERSION);
    calib_mpw_key(w, "byte_order");
    calib_mpw_str(w, "little");
    key_double(w, "written", wall);
    key_double(w, "mono", mono);
    if (clocks && isfinite(clocks->steady)) { /* optional keys: snapshot_clocks */
        key_double(w, "steady", clocks->steady);
        key_double(w, "boottime", clocks->boottime);
        calib_mpw_key(w, "boot_id");
        calib_mpw_str(w, clocks->boot_id);
    }
    key_uint(w, "models", models);
    calib_mpw_key(w, "daemon");
    calib_mpw_map(w);
    key_uint(w, "messages", messages);
    calib_mpw_key(w, "rejected");
    pack_rejected(w, rejected);
    calib_mpw_end(w);
    key_uint(w, "body_bytes", len);
    key_uint(w, "crc32", crc);
    if (pad >= 0)
        key_bin(w, "pad", zeros, (size_t)pad);
    calib_mpw_end(w);
}

void snapshot_frame_sum(calib_mpw *w, uint64_t len, uint32_t crc, uint64_t models, double wall,
                        double mono, const snapshot_clocks *clocks, uint64_t messages,
                        const uint64_t rejected[REJ_MAX])
{
    frame_fields(w, -1, len, crc, models, wall, mono, clocks, messages, rejected);
}

int snapshot_frame_slot(calib_mpw *w, uint64_t len, uint32_t crc, uint64_t models, double wall,
                        double mono, const snapshot_clocks *clocks, uint64_t messages,
                        const uint64_t rejected[REJ_MAX])
{
    long pad = 0;
    for (int i = 0; i < 4 && pad >= 0 && pad < SNAPSHOT_HEAD_SLOT; i++) {
        frame_fields(w, pad, len, crc, models, wall, mono, clocks, messages, rejected);
        if (calib_mpw_error(w) != CALIB_OK)
            return -1;
        if (w->sb.size == SNAPSHOT_HEAD_SLOT)
            return 0;
        /* the pad's own length field may take another byte or two */
        pad += (long)SNAPSHOT_HEAD_SLOT - (long)w->sb.size;
    }
    return -1;
}

/* ------------------------------------------------------------------ reading */

static int read_rejected(mpr *r, const msgpack_object *map, uint64_t counts[REJ_MAX])
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return mpr_fail(r, "rejected: not a map");
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return mpr_fail(r, "rejected: a count is not an integer");
        int reason = REJ_INTERNAL; /* a reason this version does not know */
        for (int c = 0; c < REJ_MAX; c++)
            if (mpr_is_str(&kv->key, reject_name(c)) && c != CALIB_REJ_NONE) {
                reason = c;
                break;
            }
        counts[reason] += kv->val.via.u64;
    }
    return 1;
}

int snapshot_open(const char *data, size_t len, snapshot_head *h, char *err, size_t errlen)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    mpr r;
    mpr_init(&r, err, errlen);
    size_t off = 0, end;
    memset(h, 0, sizeof *h);
    /* every count backed by bytes before msgpack-c allocates for it: the
     * header has no checksum (tests/fuzz/corpus/snapshot/crash-huge_header) */
    if (calib_proto_scan(data, len, &end) != CALIB_REJ_NONE ||
        msgpack_unpack_next(&u, data, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        mpr_fail(&r, "no msgpack map at the start (empty, truncated or not a snapshot)");
        goto out;
    }
    const msgpack_object *o = &u.data, *fmt = mpr_find(o, "format"), *v = mpr_find(o, "v"),
                         *bo = mpr_find(o, "byte_order");
    if (!fmt || !mpr_is_str(fmt, "calibd-snapshot")) {
        mpr_fail(&r, "not a calibd snapshot");
        goto out;
    }
    /* version 1 is version 2 without the stores' bounds (and with the
     * ring's record numbers tied to its slots): read alike */
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 < 1 ||
        v->via.u64 > SNAPSHOT_VERSION) {
        mpr_fail(&r, "a snapshot of another format version (this calibd reads versions 1 "
                 "to %d)", SNAPSHOT_VERSION);
        goto out;
    }
    h->version = (unsigned)v->via.u64;
    if (!bo || !mpr_is_str(bo, "little")) {
        mpr_fail(&r, "a snapshot of another byte order");
        goto out;
    }
    h->written = mpr_finite(&r, o, "written");
    h->mono = mpr_finite(&r, o, "mono");
    h->clocks.steady = NAN;
    const msgpack_object *bid = mpr_find(o, "boot_id");
    if (mpr_find(o, "steady") && bid && bid->type == MSGPACK_OBJECT_STR &&
        bid->via.str.size < sizeof h->clocks.boot_id) {
        h->clocks.steady = mpr_finite(&r, o, "steady");
        h->clocks.boottime = mpr_finite(&r, o, "boottime");
        memcpy(h->clocks.boot_id, bid->via.str.ptr, bid->via.str.size);
        h->clocks.boot_id[bid->via.str.size] = 0;
    }
    h->models = mpr_uint(&r, o, "models", 0, UINT64_MAX);
    const msgpack_object *dm = mpr_map(&r, o, "daemon");
    h->messages = mpr_uint(&r, dm, "messages", 0, UINT64_MAX);
    if (!r.failed)
        read_rejected(&r, mpr_get(&r, dm, "rejected"), h->rejected);
    uint64_t blen = mpr_uint(&r, o, "body_bytes", 0, UINT64_MAX);
    uint64_t crc = mpr_uint(&r, o, "crc32", 0, UINT32_MAX);
    if (r.failed)
        goto out;
    if (blen != len - off) {
        mpr_fail(&r, "%zu bytes follow the header, not the %llu written (truncated?)",
                 len - off, (unsigned long long)blen);
        goto out;
    }
    uint32_t c = crc_of(data + off, len - off);
    if (c != crc) {
        mpr_fail(&r, "the checksum does not match: the file is damaged (crc32 %08lx, "
                 "stored %08llx)", (unsigned long)c, (unsigned long long)crc);
        goto out;
    }
    h->body = data + off;
    h->len = len - off;
out:
    msgpack_unpacked_destroy(&u);
    return r.failed ? -1 : 0;
}

int snapshot_next(const snapshot_head *h, size_t *off, msgpack_unpacked *u, char *err,
                  size_t errlen)
{
    size_t end;
    if (*off >= h->len)
        return 0;
    /* a checksum proves no intent: a crafted body's map of 2^32 entries
     * would have msgpack-c allocate 64 GiB (tests/fuzz/corpus/snapshot/
     * crash-huge_count) */
    if (calib_proto_scan(h->body + *off, h->len - *off, &end) != CALIB_REJ_NONE ||
        msgpack_unpack_next(u, h->body, h->len, off) != MSGPACK_UNPACK_SUCCESS ||
        u->data.type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "the body does not parse as model maps");
        return -1;
    }
    return 1;
}

int snapshot_model_head(const msgpack_object *o, char name[CFG_NAME_MAX + 1], int *shaped,
                        int *form, size_t *k, char *err, size_t errlen)
{
    mpr r;
    mpr_init(&r, err, errlen);
    mpr_str(&r, o, "name", name, CFG_NAME_MAX + 1);
    *shaped = (int)mpr_uint(&r, o, "shaped", 0, 1);
    *form = (int)mpr_uint(&r, o, "form", 0, CALIB_FORM_GAUSSIAN);
    *k = (size_t)mpr_uint(&r, o, "k", 0, CALIB_PROTO_MAX_K);
    if (!r.failed && *shaped && calib_form_width(*form, *k) == 0)
        mpr_fail(&r, "model %s: form %d with k %zu is no shape", name, *form, *k);
    return r.failed ? -1 : 0;
}

int snapshot_model_cfg(const msgpack_object *o, model_cfg *c, char *err, size_t errlen)
{
    mpr r;
    mpr_init(&r, err, errlen);
    const msgpack_object *cfg = mpr_map(&r, o, "cfg");
    if (!cfg)
        return -1;
    for (uint32_t i = 0; i < cfg->via.map.size; i++) {
        const msgpack_object_kv *kv = &cfg->via.map.ptr[i];
        char key[64], value[128];
        if (kv->key.type != MSGPACK_OBJECT_STR || kv->val.type != MSGPACK_OBJECT_STR ||
            kv->key.via.str.size >= sizeof key || kv->val.via.str.size >= sizeof value) {
            snprintf(err, errlen, "cfg: entry %u is not a key and a value", i);
            return -1;
        }
        snprintf(key, sizeof key, "%.*s", (int)kv->key.via.str.size, kv->key.via.str.ptr);
        snprintf(value, sizeof value, "%.*s", (int)kv->val.via.str.size, kv->val.via.str.ptr);
        if (config_set_model(c, key, value, err, errlen) < 0)
            return -1; /* an unknown key (a later version's) is left alone */
    }
    /* the capacities are the stored ones: no byte budget caps them */
    c->join_memory = c->sample_memory = (uint64_t)1 << 40;
    return 0;
}

/* A note of a section left fresh, appended to skipped. */
typedef struct notes {
    char *buf;
    size_t len;
} notes;

__attribute__((format(printf, 2, 3)))
static void note(notes *n, const char *fmt, ...)
{
    size_t at = strlen(n->buf);
    if (at + 3 >= n->len)
        return;
    if (at)
        at += (size_t)snprintf(n->buf + at, n->len - at, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->buf + at, n->len - at, fmt, ap);
    va_end(ap);
}

/* n accumulators from a binary, none with a NaN sum. */
static int read_accums(mpr *r, const msgpack_object *map, const char *key, calib_accum *a,
                       size_t n)
{
    if (!mpr_bin(r, map, key, a, n * sizeof *a))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (isnan(a[i].s1.sum) || isnan(a[i].s1.comp) || isnan(a[i].s2.sum) ||
            isnan(a[i].s2.comp))
            return mpr_fail(r, "%s: a sum is NaN", key);
    return 1;
}

/* Bins into b, which has the stored m (else a failure: the caller checks
 * the dimensions first). Counts must add up. */
static int read_bins(mpr *r, const msgpack_object *o, calib_bins *b)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return mpr_fail(r, "bins: not a map");
    if (mpr_uint(r, o, "m", 0, UINT32_MAX) != b->m && !r->failed)
        return mpr_fail(r, "bins: %u bins expected", b->m);
    uint64_t n = mpr_uint(r, o, "n", 0, UINT64_MAX);
    if (!mpr_bin(r, o, "count", b->count, b->m * sizeof *b->count) ||
        !mpr_bin(r, o, "conf", b->conf, b->m * sizeof *b->conf) ||
        !mpr_bin(r, o, "correct", b->correct, b->m * sizeof *b->correct))
        return 0;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < b->m; i++) {
        if (b->correct[i] > b->count[i] || !isfinite(b->conf[i].sum))
            return mpr_fail(r, "bins: bin %u is inconsistent", i);
        sum += b->count[i];
    }
    if (sum != n)
        return mpr_fail(r, "bins: counts add to %llu, not n = %llu", (unsigned long long)sum,
                        (unsigned long long)n);
    b->n = n;
    return 1;
}

static int read_cwbins(mpr *r, const msgpack_object *o, calib_cwbins *b)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return mpr_fail(r, "class-wise bins: not a map");
    uint64_t k = mpr_uint(r, o, "k", 0, UINT32_MAX), m = mpr_uint(r, o, "m", 0, UINT32_MAX);
    if (!r->failed && (k != b->k || m != b->m))
        return mpr_fail(r, "class-wise bins: %u x %u expected", b->k, b->m);
    uint64_t n = mpr_uint(r, o, "n", 0, UINT64_MAX);
    size_t cells = (size_t)b->k * b->m;
    if (!mpr_bin(r, o, "count", b->count, cells * sizeof *b->count) ||
        !mpr_bin(r, o, "psum", b->psum, cells * sizeof *b->psum) ||
        !mpr_bin(r, o, "hits", b->hits, cells * sizeof *b->hits))
        return 0;
    for (size_t i = 0; i < cells; i++)
        if (b->hits[i] > b->count[i] || !isfinite(b->psum[i].sum))
            return mpr_fail(r, "class-wise bins: cell %zu is inconsistent", i);
    b->n = n;
    return 1;
}

/* 1 when the stored settings (key "cfg" of o) are v, 0 when not or on
 * failure. */
static int numbers_match(mpr *r, const msgpack_object *o, const double v[CFG_NUMBERS])
{
    const msgpack_object *a = mpr_array(r, o, "cfg", CFG_NUMBERS);
    if (!a)
        return 0;
    for (int i = 0; i < CFG_NUMBERS; i++) {
        double x;
        if (!mpr_number(&a->via.array.ptr[i], &x))
            return mpr_fail(r, "cfg holds a non-number");
        if (x != v[i])
            return 0;
    }
    return 1;
}

static int window_matches(mpr *r, const msgpack_object *o, const calib_window *w)
{
    double v[CFG_NUMBERS];
    window_numbers(&w->cfg, v);
    return numbers_match(r, o, v);
}

static int read_window(mpr *r, const msgpack_object *o, calib_window *w)
{
    const calib_window_cfg *c = &w->cfg;
    uint32_t sets = c->top_bins ? (c->top_sets ? c->top_sets : 1) : 0;
    int64_t head = mpr_int(r, o, "head");
    uint64_t clock = mpr_uint(r, o, "clock", 0, UINT64_MAX);
    const msgpack_object *panes = mpr_array(r, o, "panes", c->panes);
    if (r->failed)
        return 0;
    if (head < -1)
        return mpr_fail(r, "window: head %lld", (long long)head);
    for (uint32_t i = 0; i < c->panes; i++) {
        const msgpack_object *po = &panes->via.array.ptr[i];
        calib_pane *p = &w->pane[i];
        int64_t index = mpr_int(r, po, "index");
        const msgpack_object *top = mpr_array(r, po, "top", sets);
        const msgpack_object *cw = mpr_get(r, po, "cw");
        if (r->failed)
            return 0;
        /* a pane holds index i mod P, up to head */
        if (index != INT64_MIN &&
            (index < 0 || index > head || (uint64_t)index % c->panes != i))
            return mpr_fail(r, "window: pane %u holds index %lld (head %lld)", i,
                            (long long)index, (long long)head);
        p->index = index;
        if (!read_accums(r, po, "stat", p->stat, c->nstat))
            return 0;
        for (uint32_t s = 0; s < sets; s++)
            if (!read_bins(r, &top->via.array.ptr[s], &p->top[s]))
                return 0;
        if (c->cw_k ? !read_cwbins(r, cw, &p->cw) : cw->type != MSGPACK_OBJECT_NIL)
            return mpr_fail(r, "window: class-wise bins");
        /* older than the window: earlier calibds kept such panes (summed
         * by no one); they hold nothing of the window */
        if (index != INT64_MIN && head - index >= (int64_t)c->panes)
            calib_pane_reset(p);
    }
    w->head = head;
    w->clock = clock;
    return 1;
}

/* The binary at key of exactly len bytes, or NULL (r says why). */
static const msgpack_object *bin_of(mpr *r, const msgpack_object *map, const char *key,
                                    size_t len)
{
    const msgpack_object *o = mpr_get(r, map, key);
    if (o && (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != len))
        return mpr_fail(r, "%s: not a binary of %zu bytes", key, len), NULL;
    return o;
}

/* n items of `size` bytes from src, where the oldest is item `first`,
 * into dst oldest first. */
static void copy_oldest_first(void *dst, const char *src, size_t n, size_t first, size_t size)
{
    if (!n)
        return;
    memcpy(dst, src + first * size, (n - first) * size);
    if (first)
        memcpy((char *)dst + (n - first) * size, src, first * size);
}

/* A store's records into s (same width), room made for them: at most cap
 * (the stored capacity, <= s's), laid out as stored or, from the record at
 * slot `first` (< len, or 0), oldest first. Returns the stored len, -1 on
 * failure, NO_ROOM when memory_limit (or malloc) refuses the room, s
 * unchanged. */
#define NO_ROOM (-2)
static long read_store(mpr *r, const msgpack_object *o, calib_store *s, size_t cap,
                       size_t first)
{
    uint64_t width = mpr_uint(r, o, "width", 0, UINT64_MAX);
    uint64_t len = mpr_uint(r, o, "len", 0, cap);
    if (r->failed)
        return -1;
    if (width != s->width)
        return mpr_fail(r, "records of width %llu, not %zu", (unsigned long long)width,
                        s->width), -1;
    if (first && first >= len)
        return mpr_fail(r, "the oldest record at slot %zu of %llu", first,
                        (unsigned long long)len), -1;
    size_t rec = (s->width + 2) * sizeof *s->data;
    const msgpack_object *data = bin_of(r, o, "data", (size_t)len * rec);
    if (!data)
        return -1;
    if (calib_store_reserve(s, (size_t)len) != CALIB_OK)
        return NO_ROOM;
    copy_oldest_first(s->data, data->via.bin.ptr, (size_t)len, first, rec);
    s->len = (size_t)len;
    return (long)len;
}

/*
 * The stored ring, of capacity cap, into the model's: cap is the ring's
 * (its records stay in their slots), or lower where memory_limit had
 * stopped it (version 2: see read_shaped): its records then go in oldest
 * first, and the ring, filling again, grows as memory allows (or stops
 * again). Record numbers (total) are not tied to slots: a ring restored so
 * and grown again has pushed more than its slots show. 1, 0 on failure (r
 * says why), or NO_ROOM with the ring as it was.
 */
static int read_ring(mpr *r, const msgpack_object *o, model *m, size_t cap)
{
    calib_ring *g = &m->ring;
    int unroll = cap < calib_ring_cap(g);
    uint64_t head = mpr_uint(r, o, "head", 0, cap - 1);
    uint64_t total = mpr_uint(r, o, "total", 0, UINT64_MAX);
    uint64_t held = mpr_uint(r, o, "len", 0, cap);
    if (r->failed)
        return 0;
    /* filling: the oldest at slot 0, the next write at len; full: the
     * oldest at head, where the next write goes */
    if (total < held || (held < cap && head != held))
        return mpr_fail(r, "ring: head %llu, %llu records, %llu pushed",
                        (unsigned long long)head, (unsigned long long)held,
                        (unsigned long long)total);
    if (model_ring_reserve(m, (size_t)held) != CALIB_OK)
        return NO_ROOM;
    size_t first = unroll && held == cap ? (size_t)head : 0;
    long len = read_store(r, o, &g->s, cap, first);
    if (len < 0)
        return (int)len == NO_ROOM ? NO_ROOM : 0;
    /* the drift scores by slot, as the records */
    const msgpack_object *score = bin_of(r, o, "score", (size_t)len * sizeof *m->ring_score);
    if (!score)
        return 0;
    copy_oldest_first(m->ring_score, score->via.bin.ptr, (size_t)len, first,
                      sizeof *m->ring_score);
    g->head = unroll ? (size_t)len : (size_t)head;
    g->total = total;
    return 1;
}

/* The stored reservoir, of capacity cap, into v: cap is v's, or lower
 * where memory_limit had stopped it (see read_shaped), and v then stops
 * there too: its sample and Algorithm L's state are those of cap records
 * (a uniform sample cannot grow back without the records it skipped).
 * 1, 0 on failure (r says why), or NO_ROOM with v as it was. */
static int read_reservoir(mpr *r, const msgpack_object *o, calib_reservoir *v, size_t cap)
{
    uint64_t seen = mpr_uint(r, o, "seen", 0, UINT64_MAX);
    uint64_t skip = mpr_uint(r, o, "skip", 0, UINT64_MAX);
    double w = mpr_double(r, o, "w");
    uint64_t rng[4];
    mpr_bin(r, o, "rng", rng, sizeof rng);
    if (r->failed)
        return 0;
    /* the room first: refused, v is as it was */
    if (cap < v->s.cap && (calib_store_reserve(&v->s, cap) != CALIB_OK ||
                           calib_store_limit(&v->s, cap) != CALIB_OK))
        return NO_ROOM;
    long len = read_store(r, o, &v->s, v->s.cap, 0);
    if (len < 0)
        return (int)len == NO_ROOM ? NO_ROOM : 0;
    if ((uint64_t)len != (seen < v->s.cap ? seen : v->s.cap) || !(w > 0 && w <= 1) ||
        !(rng[0] | rng[1] | rng[2] | rng[3]))
        return mpr_fail(r, "reservoir: %ld records after %llu offered, W %g", len,
                        (unsigned long long)seen, w);
    v->seen = seen;
    v->skip = skip;
    v->w = w;
    memcpy(v->rng.s, rng, sizeof rng);
    return 1;
}

/* An id: an unsigned integer or a binary of 1..CALIB_ID_MAX bytes. */
static int read_id(mpr *r, const msgpack_object *o, calib_id *id)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        calib_id_u64(id, o->via.u64);
        return 1;
    }
    if (o->type == MSGPACK_OBJECT_BIN && calib_id_str(id, o->via.bin.ptr, o->via.bin.size) == 0)
        return 1;
    return mpr_fail(r, "join: an id is neither an integer nor 1 to %d bytes", CALIB_ID_MAX);
}

/* The waiting items and joined ids, onto this clock (arrival + shift). */
static int read_join(mpr *r, const msgpack_object *o, calib_join *j, double shift,
                     double *x, notes *skipped)
{
    uint64_t width = mpr_uint(r, o, "width", 0, CALIB_PROTO_MAX_K + 1);
    const msgpack_object *items = mpr_array(r, o, "items", UINT32_MAX);
    const msgpack_object *done = mpr_array(r, o, "done", UINT32_MAX);
    uint64_t c[7];
    static const char *const keys[7] = {"joined", "evicted", "expired_preds",
                                        "expired_labels", "duplicate_preds",
                                        "duplicate_labels", "forgotten"};
    for (int i = 0; i < 7; i++)
        c[i] = mpr_uint(r, o, keys[i], 0, UINT64_MAX);
    if (r->failed)
        return 0;
    size_t put = 0, lost = 0;
    for (uint32_t i = 0; i < items->via.array.size; i++) {
        const msgpack_object *a = &items->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 5)
            return mpr_fail(r, "join: item %u is not [kind, id, arrived, ts, y or x]", i);
        const msgpack_object *f = a->via.array.ptr;
        calib_join_item it = {0};
        if (f[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            (f[0].via.u64 != CALIB_JOIN_PRED && f[0].via.u64 != CALIB_JOIN_LABEL) ||
            !read_id(r, &f[1], &it.id) || !mpr_number(&f[2], &it.arrived) ||
            !mpr_number(&f[3], &it.ts) || !isfinite(it.arrived))
            return mpr_fail(r, "join: item %u is malformed", i);
        it.kind = (int)f[0].via.u64;
        it.arrived += shift;
        if (it.kind == CALIB_JOIN_LABEL) {
            if (!mpr_number(&f[4], &it.y))
                return mpr_fail(r, "join: label %u has no y", i);
        } else {
            if (f[4].type != MSGPACK_OBJECT_BIN ||
                f[4].via.bin.size != width * sizeof(double))
                return mpr_fail(r, "join: prediction %u has not %llu outputs", i,
                                (unsigned long long)width);
            if (width != j->cfg.width || !x) { /* another shape: these cannot be kept */
                lost++;
                continue;
            }
            memcpy(x, f[4].via.bin.ptr, f[4].via.bin.size);
            it.x = x;
        }
        if (calib_join_put(j, &it) != CALIB_OK)
            return mpr_fail(r, "join: item %u is out of order or twice", i);
        put++;
    }
    for (uint32_t i = 0; i < done->via.array.size; i++) {
        const msgpack_object *a = &done->via.array.ptr[i];
        calib_id id;
        double arrived;
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 2 ||
            !read_id(r, &a->via.array.ptr[0], &id) || !mpr_number(&a->via.array.ptr[1], &arrived) ||
            calib_join_put_done(j, &id, arrived + shift) != CALIB_OK)
            return mpr_fail(r, "join: joined id %u is malformed, out of order or twice", i);
    }
    j->joined = c[0];
    j->evicted += c[1];
    j->expired_preds = c[2];
    j->expired_labels = c[3];
    j->duplicate_preds = c[4];
    j->duplicate_labels = c[5];
    j->forgotten = c[6];
    if (mpr_find(o, "sample")) { /* absent from files before the sample */
        calib_join_sampling sm;
        j->sampled_out_preds = mpr_uint(r, o, "sampled_out_preds", 0, UINT64_MAX);
        j->sampled_out_labels = mpr_uint(r, o, "sampled_out_labels", 0, UINT64_MAX);
        sm.sample = (uint32_t)mpr_uint(r, o, "sample", 0, UINT32_MAX);
        sm.label_sample = (uint32_t)mpr_uint(r, o, "label_sample", 0, UINT32_MAX);
        sm.label_until = mpr_double(r, o, "label_until") + shift;
        sm.arrivals = mpr_uint(r, o, "arrivals", 0, UINT64_MAX);
        if (r->failed)
            return 0;
        if (calib_join_sampling_set(j, &sm) != CALIB_OK)
            return mpr_fail(r, "join: the sample (label sample above it, or no time)");
    }
    if (lost)
        note(skipped, "%zu waiting predictions of another width", lost);
    (void)put;
    return 1;
}

static int read_params(mpr *r, const msgpack_object *o, model_params *p)
{
    memset(p, 0, sizeof *p);
    mpr_str(r, o, "method", p->method, sizeof p->method);
    p->version = mpr_uint(r, o, "version", 0, UINT64_MAX);
    const msgpack_object *names = mpr_array(r, o, "names", UINT32_MAX);
    const msgpack_object *values = mpr_get(r, o, "values");
    if (r->failed)
        return 0;
    if (names->via.array.size > PARAMS_MAX || values->type != MSGPACK_OBJECT_BIN ||
        values->via.bin.size != names->via.array.size * sizeof(double))
        return mpr_fail(r, "params: names and values do not match");
    p->n = names->via.array.size;
    memcpy(p->values, values->via.bin.ptr, values->via.bin.size);
    p->ts = mpr_double(r, o, "ts");
    p->fit_n = mpr_uint(r, o, "fit_n", 0, UINT64_MAX);
    p->shadow_n = mpr_uint(r, o, "shadow_n", 0, UINT64_MAX);
    mpr_bin(r, o, "before", p->before, sizeof p->before);
    mpr_bin(r, o, "after", p->after, sizeof p->after);
    p->improvement = mpr_double(r, o, "improvement");
    mpr_bin(r, o, "ci", p->ci, sizeof p->ci);
    return !r->failed;
}

/* The stored names of a params map, for state_params_by_name. */
static int read_param_names(mpr *r, const msgpack_object *o, state_param_names *names)
{
    const msgpack_object *a = mpr_array(r, o, "names", UINT32_MAX);
    if (!a || a->via.array.size > PARAMS_MAX)
        return mpr_fail(r, "params: names");
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *s = &a->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size == 0 ||
            s->via.str.size > CALIB_PLUGIN_NAME_MAX || memchr(s->via.str.ptr, 0, s->via.str.size))
            return mpr_fail(r, "params: name %u", i);
        memcpy((*names)[i], s->via.str.ptr, s->via.str.size);
        (*names)[i][s->via.str.size] = 0;
    }
    return 1;
}

static int drift_matches(mpr *r, const msgpack_object *o, const calib_drift *d)
{
    double v[CFG_NUMBERS];
    drift_numbers(&d->cfg, v);
    return numbers_match(r, o, v);
}

static int eproc_ok(const calib_eproc *e)
{
    return isfinite(e->lo) && isfinite(e->hi) && isfinite(e->m) && e->lo < e->m &&
           e->m < e->hi && isfinite(e->lambda) && isfinite(e->a) && !isnan(e->log_wealth) &&
           !isnan(e->min_log_wealth);
}

static int read_drift(mpr *r, const msgpack_object *o, calib_drift *d)
{
    calib_drift t = *d; /* the scalars first, into a copy */
    t.state = (int)mpr_uint(r, o, "state", CALIB_DRIFT_REFERENCE, CALIB_DRIFT_ALARM);
    read_accums(r, o, "ref", &t.ref, 1);
    t.threshold = mpr_double(r, o, "threshold");
    t.null_mean = mpr_double(r, o, "null_mean");
    mpr_bin(r, o, "bank", t.bank, sizeof t.bank);
    mpr_bin(r, o, "log_w", t.log_w, sizeof t.log_w);
    mpr_bin(r, o, "start", t.start, sizeof t.start);
    t.nbank = (unsigned)mpr_uint(r, o, "nbank", 0, CALIB_DRIFT_BANK);
    t.started = mpr_uint(r, o, "started", 0, UINT64_MAX);
    read_accums(r, o, "watch", &t.watch, 1);
    t.n = mpr_uint(r, o, "n", 0, UINT64_MAX);
    t.alarm_at = mpr_uint(r, o, "alarm_at", 0, UINT64_MAX);
    t.change_at = mpr_uint(r, o, "change_at", 0, UINT64_MAX);
    t.resets = mpr_uint(r, o, "resets", 0, UINT64_MAX);
    int paired = mpr_find(o, "pair") != NULL; /* MEAN: read_loop checked */
    if (paired) {
        mpr_bin(r, o, "pair", t.pair, sizeof t.pair);
        t.npair = (unsigned)mpr_uint(r, o, "npair", 0, CALIB_DRIFT_BANK);
        t.ring_n = mpr_uint(r, o, "ring_n", 0, d->ring_len);
        read_accums(r, o, "all", &t.all, 1);
    }
    if (r->failed)
        return 0;
    if (calib_drift_check(&t) != CALIB_OK)
        return mpr_fail(r, "drift: its state is inconsistent");
    for (unsigned i = 0; i < t.nbank; i++)
        if (!eproc_ok(&t.bank[i]) || isnan(t.log_w[i]) || t.start[i] > t.n)
            return mpr_fail(r, "drift: e-process %u is inconsistent", i);
    if (t.state != CALIB_DRIFT_REFERENCE && isnan(t.null_mean))
        return mpr_fail(r, "drift: watching without a null mean");
    /* EXCEED keeps its reference sample */
    if (!mpr_bin(r, o, "ref_x", d->ref_x, d->ref_x ? d->cfg.reference * sizeof *d->ref_x : 0))
        return 0;
    /* MEAN keeps its ring */
    if (paired && !mpr_bin(r, o, "ring", d->ring, d->ring ? d->ring_len * sizeof *d->ring : 0))
        return 0;
    t.ref_x = d->ref_x;
    *d = t;
    return 1;
}

static int read_gate(mpr *r, const msgpack_object *o, calib_gate *g)
{
    calib_gate_cfg c = {.alpha = mpr_finite(r, o, "alpha"),
                        .min_improvement = mpr_finite(r, o, "min_improvement"),
                        .lo = mpr_finite(r, o, "lo"), .hi = mpr_finite(r, o, "hi"),
                        .max_samples = mpr_uint(r, o, "max_samples", 1, UINT64_MAX)};
    calib_gate t;
    if (r->failed || calib_gate_init(&t, &c) != CALIB_OK)
        return mpr_fail(r, "gate: its configuration is refused");
    /* decided, too: a snapshot can come between a gate's decision and the
     * tick that acts on it (decide(), the guard's alarm), which the tick
     * after the restore then does */
    t.state = (int)mpr_uint(r, o, "state", CALIB_GATE_RUNNING, CALIB_GATE_FAILED);
    mpr_bin(r, o, "e", &t.e, sizeof t.e);
    read_accums(r, o, "diff", &t.diff, 1);
    read_accums(r, o, "current", &t.current, 1);
    read_accums(r, o, "candidate", &t.candidate, 1);
    t.pairs = mpr_uint(r, o, "pairs", 0, c.max_samples);
    if (r->failed)
        return 0;
    if (!eproc_ok(&t.e))
        return mpr_fail(r, "gate: its e-process is inconsistent");
    *g = t;
    return 1;
}

/* Parameters of the current method, as a shadow run or a guard holds them:
 * 1 with *p resolved, 0 for a file that fails to read, -1 (noted as what)
 * when they are not of the model's method now. */
static int read_method_params(mpr *r, const msgpack_object *o, const model *m,
                              model_params *p, const char *what, notes *skipped)
{
    state_param_names names;
    char why[ERR_MAX];
    if (r->failed || !read_params(r, o, p) || !read_param_names(r, o, &names))
        return 0;
    if (!m->params.desc || strcmp(p->method, m->params.method) != 0 ||
        state_params_by_name(p, names, m->params.desc, why, sizeof why) != 0) {
        note(skipped, "%s (not of method %s)", what, m->params.method);
        return -1;
    }
    p->desc = m->params.desc;
    p->identity = model_params_is_identity(p);
    return 1;
}

/* The guard of the version in force: the previous version's parameters and
 * its gate. */
static int read_guard(mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_loop *l = &m->loop;
    const msgpack_object *po = mpr_map(r, o, "prev"), *go = mpr_map(r, o, "gate");
    double low = mpr_double(r, o, "low");
    uint64_t version = mpr_uint(r, o, "version", 1, UINT64_MAX);
    model_params prev;
    calib_gate g;
    calib_accum since[3];
    if (r->failed || !read_accums(r, o, "since", since, 3))
        return 0;
    if (!(low <= 0))
        return mpr_fail(r, "guard: its low is not an e-value's at most 1");
    int ok = read_method_params(r, po, m, &prev, "the guard", skipped);
    if (ok <= 0)
        return ok == 0 ? 0 : 1;
    /* the stored parameters are the state directory's: a version published
     * (or rolled back) after this snapshot has its own guard, or none */
    if (version != m->params.version || prev.version >= version) {
        note(skipped, "the guard (of version %llu; version %llu is in force)",
             (unsigned long long)version, (unsigned long long)m->params.version);
        return 1;
    }
    if (!read_gate(r, go, &g))
        return 0;
    l->guard_prev = prev;
    l->guard = g;
    l->guard_low = low;
    memcpy(l->guard_since, since, sizeof since);
    l->guard_on = 1;
    return 1;
}

/* The miscalibration trigger: its challenger, in the current method, and
 * its gate; a gate of other settings (changed since) starts afresh. */
static int read_trigger(mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_loop *l = &m->loop;
    const msgpack_object *co = mpr_map(r, o, "challenger"), *go = mpr_map(r, o, "gate");
    uint64_t at = mpr_uint(r, o, "fit_at", 0, UINT64_MAX);
    uint64_t start = mpr_uint(r, o, "start", 0, UINT64_MAX);
    uint64_t quiet = mpr_find(o, "quiet_until") ? mpr_uint(r, o, "quiet_until", 0, UINT64_MAX)
                                                 : 0;
    int reported = (int)mpr_uint(r, o, "reported", 0, 1);
    if (!r->failed && (at > m->ring.total || start > m->ring.total)) {
        /* counts of another ring (a merge's, say): the trigger starts afresh */
        note(skipped, "the miscalibration trigger (its counts are past the ring's)");
        return 1;
    }
    model_params ch;
    int ok = read_method_params(r, co, m, &ch, "the miscalibration trigger", skipped);
    if (ok <= 0)
        return ok == 0 ? 0 : 1;
    calib_gate g;
    if (!read_gate(r, go, &g))
        return 0;
    calib_gate_cfg now;
    model_trigger_cfg(m, &now);
    if (memcmp(&now, &g.cfg, sizeof now) != 0) {
        note(skipped, "the miscalibration trigger's evidence (its settings changed)");
        if (calib_gate_init(&g, &now) != CALIB_OK)
            return mpr_fail(r, "trigger: the configuration's gate is refused");
        reported = 0;
    }
    l->challenger = ch;
    l->trig = g;
    l->trig_fit_at = at;
    l->trig_start = start;
    /* no quiet longer than a period from now */
    l->trig_quiet_until = quiet < m->ring.total + m->cfg.miscal_period
                              ? quiet : m->ring.total + m->cfg.miscal_period;
    l->trig_reported = reported;
    l->trig_on = 1;
    return 1;
}

/* The shadow run: its candidate, in the current method, and its gate. */
static int read_shadow(mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_loop *l = &m->loop;
    const msgpack_object *co = mpr_map(r, o, "candidate"), *go = mpr_map(r, o, "gate");
    model_params cand;
    calib_accum log[2];
    if (r->failed || !read_accums(r, o, "log", log, 2))
        return 0;
    int ok = read_method_params(r, co, m, &cand, "the shadow run's candidate", skipped);
    if (ok <= 0)
        return ok == 0 ? 0 : 1;
    calib_gate g;
    if (!read_gate(r, go, &g))
        return 0;
    l->candidate = cand;
    l->gate = g;
    memcpy(l->shadow_log, log, sizeof log);
    l->refit.phase = PHASE_SHADOW;
    return 1;
}

static int read_loop(mpr *r, const msgpack_object *o, model *m, double shift, notes *skipped)
{
    model_loop *l = &m->loop;
    int phase = (int)mpr_uint(r, o, "phase", PHASE_OFF, PHASE_STORING);
    int pending = (int)mpr_uint(r, o, "pending", REFIT_NONE, REFIT_MISCAL);
    int reason = (int)mpr_uint(r, o, "reason", REFIT_NONE, REFIT_MISCAL);
    if (pending == REFIT_ROLLBACK)
        return mpr_fail(r, "loop: a rollback is never pending");
    /* a rollback is stored without a fit or a shadow run; idle after it,
     * the machine keeps it as the reason of its last outcome */
    if (reason == REFIT_ROLLBACK && (phase == PHASE_FITTING || phase == PHASE_SHADOW))
        return mpr_fail(r, "loop: a rollback is never fitted nor in shadow");
    double next = mpr_double(r, o, "next_refit");
    const msgpack_object *drift = mpr_get(r, o, "drift"), *shadow = mpr_get(r, o, "shadow");
    uint64_t base = mpr_uint(r, o, "drift_base", 0, m->ring.total);
    int alarm = (int)mpr_uint(r, o, "drift_alarm", 0, 1);
    uint64_t c[LOOP_COUNTERS];
    mpr_bin(r, o, "counters", c, sizeof c);
    if (r->failed)
        return 0;
    model_counters_set(m, loop_counters, LOOP_COUNTERS, c);
    const msgpack_object *rb = mpr_find(o, "rollbacks"), *guard = mpr_find(o, "guard");
    if (rb) /* absent before the guard */
        l->rollbacks = mpr_uint(r, o, "rollbacks", 0, UINT64_MAX);
    if (mpr_find(o, "miscal_alarms")) /* absent before the trigger */
        l->miscal_alarms = mpr_uint(r, o, "miscal_alarms", 0, UINT64_MAX);
    if (mpr_find(o, "cancelled"))
        l->cancelled = mpr_uint(r, o, "cancelled", 0, UINT64_MAX);
    if (r->failed)
        return 0;
    if (l->refit.phase == PHASE_OFF) /* the loop is off now: nothing more to resume */
        return 1;
    if (guard && guard->type != MSGPACK_OBJECT_NIL && m->cfg.rollback) {
        if (guard->type != MSGPACK_OBJECT_MAP)
            return mpr_fail(r, "guard: not a map");
        if (!read_guard(r, guard, m, skipped))
            return 0;
    }

    const msgpack_object *trig = mpr_find(o, "trigger"); /* absent before it */
    if (trig && trig->type != MSGPACK_OBJECT_NIL && m->cfg.miscal_trigger) {
        if (trig->type != MSGPACK_OBJECT_MAP)
            return mpr_fail(r, "trigger: not a map");
        if (!read_trigger(r, trig, m, skipped))
            return 0;
    }
    if (drift->type != MSGPACK_OBJECT_NIL && l->drift_on) {
        int same = drift_matches(r, drift, &l->drift);
        if (r->failed)
            return 0;
        if (!same)
            note(skipped, "the drift detector (its settings changed)");
        else if (l->drift.cfg.kind == CALIB_DRIFT_MEAN && !mpr_find(drift, "pair"))
            note(skipped, "the drift detector (an older calibd's test)");
        else if (!read_drift(r, drift, &l->drift))
            return 0;
        else {
            l->drift_base = base;
            l->drift_alarm = alarm;
        }
    }
    /* the schedule keeps its time; a refit that was running starts again
     * at the next tick (its worker's result was lost with the process) */
    if (isfinite(next) && next != 0 && l->refit.next_refit != 0)
        l->refit.next_refit = next + shift;
    l->refit.pending = pending;
    l->refit.reason = reason; /* idle: the reason of the last outcome */
    if (phase == PHASE_FITTING || phase == PHASE_STORING) {
        /* a rollback starts again from the guard's alarm, restored above */
        if (!l->refit.pending && reason != REFIT_ROLLBACK)
            l->refit.pending = reason ? reason : REFIT_MANUAL;
        note(skipped, "the %s under way (it starts again)",
             phase == PHASE_FITTING ? "fit" : "store");
    } else if (phase == PHASE_SHADOW && shadow->type == MSGPACK_OBJECT_MAP) {
        if (!read_shadow(r, shadow, m, skipped))
            return 0;
        l->refit.reason = reason;
        if (l->refit.phase != PHASE_SHADOW && !l->refit.pending)
            l->refit.pending = reason ? reason : REFIT_MANUAL;
    }
    return 1;
}

static int read_events(mpr *r, const msgpack_object *o, model *m)
{
    uint64_t total = mpr_uint(r, o, "nevents", 0, UINT64_MAX);
    const msgpack_object *ev = mpr_array(r, o, "events", UINT32_MAX);
    if (r->failed)
        return 0;
    uint32_t n = ev->via.array.size;
    if (n > MODEL_EVENTS || n > total)
        return mpr_fail(r, "events: %u kept of %llu", n, (unsigned long long)total);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *a = &ev->via.array.ptr[i];
        model_event *e = &m->events[(total - n + i) % MODEL_EVENTS];
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 3 ||
            !mpr_number(&a->via.array.ptr[0], &e->t) ||
            a->via.array.ptr[1].type != MSGPACK_OBJECT_STR ||
            a->via.array.ptr[2].type != MSGPACK_OBJECT_STR)
            return mpr_fail(r, "events: event %u is not [t, kind, text]", i);
        const msgpack_object_str *k = &a->via.array.ptr[1].via.str,
                                 *t = &a->via.array.ptr[2].via.str;
        snprintf(e->kind, sizeof e->kind, "%.*s", (int)(k->size < 64 ? k->size : 64), k->ptr);
        snprintf(e->text, sizeof e->text, "%.*s", (int)(t->size < 512 ? t->size : 512), t->ptr);
    }
    m->nevents = total;
    return 1;
}

static int read_alerts(mpr *r, const msgpack_object *o, model *m, double shift)
{
    const msgpack_object *a = mpr_array(r, o, "alert", RULES);
    if (!a)
        return 0;
    for (int i = 0; i < RULES; i++) {
        const msgpack_object *s = &a->via.array.ptr[i];
        double open, alerted, last;
        if (s->type != MSGPACK_OBJECT_ARRAY || s->via.array.size != 3 ||
            !mpr_number(&s->via.array.ptr[0], &open) ||
            !mpr_number(&s->via.array.ptr[1], &alerted) ||
            !mpr_number(&s->via.array.ptr[2], &last) || !isfinite(last))
            return mpr_fail(r, "alert: rule %d is not [open, alerted, last]", i);
        m->alert[i] = (alert_state){.open = open != 0, .alerted = alerted != 0,
                                    .last = last != 0 ? last + shift : 0};
    }
    return 1;
}

/* A stored ring's or reservoir's capacity now and the one it was given
 * (version 1 has no bound: the capacity, stopped or not). */
typedef struct store_caps {
    uint64_t cap, bound;
} store_caps;

static store_caps read_caps(mpr *r, const msgpack_object *o)
{
    store_caps c = {.cap = mpr_uint(r, o, "cap", 0, UINT64_MAX)};
    c.bound = mpr_find(o, "bound") ? mpr_uint(r, o, "bound", 0, UINT64_MAX) : c.cap;
    return c;
}

/* Whether a stored store goes into one of capacity cap, given bound (a
 * model just shaped: cap = bound): of the same capacity, or given the same
 * bound and stopped lower by memory_limit. A store whose configured
 * capacity changed (ring, reservoir, sample_memory) does not. */
static int caps_fit(const store_caps *c, size_t cap, size_t bound)
{
    return c->cap == cap || (c->bound == bound && c->cap >= 1 && c->cap < cap);
}

/* A confidence sequence into cs, initialised with the model's settings: 1,
 * or 0 for a file that fails; one of other settings, or whose state its
 * checks refuse, is noted and left fresh. */
static int read_cs(mpr *r, const msgpack_object *o, calib_cs *cs, notes *skipped)
{
    double alpha = mpr_finite(r, o, "alpha");
    uint64_t grid = mpr_uint(r, o, "grid", 0, UINT32_MAX);
    const msgpack_object *cap = mpr_array(r, o, "capital", 8);
    if (r->failed)
        return 0;
    if (alpha != cs->alpha || grid != cs->grid) {
        note(skipped, "a confidence sequence (of another cs_alpha)");
        return 1;
    }
    calib_cs t = *cs; /* the arrays are cs's own: written only once checked */
    t.gsize = (uint32_t)mpr_uint(r, o, "gsize", 1, grid);
    t.gbase = mpr_uint(r, o, "gbase", 0, UINT64_MAX);
    t.gstride = mpr_uint(r, o, "gstride", 1, UINT64_MAX);
    t.first = (uint32_t)mpr_uint(r, o, "first", 0, grid);
    t.last = (uint32_t)mpr_uint(r, o, "last", 0, grid);
    uint64_t flags = mpr_uint(r, o, "flags", 0, 7);
    t.n = mpr_uint(r, o, "n", 0, UINT64_MAX);
    t.clamped = mpr_uint(r, o, "clamped", 0, t.n);
    t.refines = mpr_uint(r, o, "refines", 0, UINT64_MAX);
    t.sum = mpr_finite(r, o, "sum");
    t.sq = mpr_finite(r, o, "sq");
    t.fold_bits = mpr_finite(r, o, "fold_bits");
    if (r->failed)
        return 0;
    size_t len = t.first < t.last ? (t.last - t.first) * sizeof(double) : 0;
    if (!len || cap->via.array.size != 8)
        return mpr_fail(r, "a confidence sequence keeps no candidate");
    for (int i = 0; i < 8; i++) {
        const msgpack_object *b = &cap->via.array.ptr[i];
        if (b->type != MSGPACK_OBJECT_BIN || b->via.bin.size != len)
            return mpr_fail(r, "a confidence sequence's capitals: %zu bytes expected", len);
    }
    t.low_out = !!(flags & 1);
    t.high_out = !!(flags & 2);
    t.empty = !!(flags & 4);
    double *arr[8] = {t.lp, t.pp, t.ap, t.qp, t.lm, t.pm, t.am, t.qm};
    for (int i = 0; i < 8; i++)
        memcpy(arr[i] + t.first, cap->via.array.ptr[i].via.bin.ptr, len);
    *cs = t;
    if (calib_cs_restore(cs) != CALIB_OK) /* it has reset cs */
        note(skipped, "a confidence sequence (its state is inconsistent)");
    return 1;
}

/* The window's period into m->period (model_period); its sequences go as
 * read_cs reads them. 1, or 0 for a file that fails. */
static int read_period(mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_period *pd = &m->period;
    double since = mpr_finite(r, o, "since"), end = mpr_finite(r, o, "end");
    const msgpack_object *cs = mpr_array(r, o, "cs", VIEWS);
    const msgpack_object *last = mpr_get(r, o, "last");
    if (r->failed)
        return 0;
    if (!(since < end))
        return mpr_fail(r, "paired: the period ends before it starts");
    model_period_end e = {0};
    if (last->type == MSGPACK_OBJECT_MAP) {
        e.since = mpr_finite(r, last, "since");
        e.until = mpr_finite(r, last, "until");
        e.n = mpr_uint(r, last, "n", 1, UINT64_MAX);
        const msgpack_object *iv = mpr_array(r, last, "interval", VIEWS);
        if (r->failed)
            return 0;
        for (int v = 0; v < VIEWS; v++) {
            const msgpack_object *b = &iv->via.array.ptr[v];
            e.rc[v] = -1;
            e.lo[v] = e.hi[v] = NAN;
            if (b->type == MSGPACK_OBJECT_NIL)
                continue;
            if (b->type != MSGPACK_OBJECT_ARRAY || b->via.array.size != 2 ||
                !mpr_number(&b->via.array.ptr[0], &e.lo[v]) ||
                !mpr_number(&b->via.array.ptr[1], &e.hi[v]) || !(e.lo[v] <= e.hi[v]))
                return mpr_fail(r, "paired: the last period's interval is not [low, high]");
            e.rc[v] = 1;
        }
    } else if (last->type != MSGPACK_OBJECT_NIL) {
        return mpr_fail(r, "paired: the last period is neither a map nor nil");
    }
    for (int v = 0; v < VIEWS; v++)
        if (cs->via.array.ptr[v].type != MSGPACK_OBJECT_MAP ||
            !read_cs(r, &cs->via.array.ptr[v], &pd->cs[v], skipped))
            return r->failed ? 0 : mpr_fail(r, "paired: a period's cs is not a map");
    pd->running = 1;
    pd->since = since;
    pd->end = end;
    pd->last = e;
    return 1;
}

/* The statistics of a shaped model, section by section: a section whose
 * dimensions changed with the configuration stays fresh. */
static int read_shaped(mpr *r, const msgpack_object *o, model *m, double shift, notes *skipped)
{
    read_accums(r, o, "cum", &m->cum[0][0], VIEWS * WS_PER_VIEW);
    mpr_bin(r, o, "sums", m->sums, sizeof m->sums);
    const msgpack_object *po = mpr_map(r, o, "paired");
    uint64_t version = mpr_uint(r, po, "version", 0, UINT64_MAX);
    if (r->failed)
        return 0;
    if (version == m->params.version) {
        m->paired.version = version;
        m->paired.since = mpr_finite(r, po, "since");
        read_accums(r, po, "view", &m->paired.view[0][0], VIEWS * WS_PER_VIEW);
        read_accums(r, po, "diff", m->paired.diff, WS_PER_VIEW);
        const msgpack_object *cs = mpr_find(po, "cs");
        if (cs && cs->type == MSGPACK_OBJECT_ARRAY && m->cs_on) {
            if (cs->via.array.size != VIEWS)
                return mpr_fail(r, "paired: cs is not one sequence a view");
            for (int v = 0; v < VIEWS; v++)
                if (cs->via.array.ptr[v].type != MSGPACK_OBJECT_MAP ||
                    !read_cs(r, &cs->via.array.ptr[v], &m->cs[v], skipped))
                    return r->failed ? 0 : mpr_fail(r, "paired: a cs is not a map");
        } else if (cs && cs->type != MSGPACK_OBJECT_NIL && cs->type != MSGPACK_OBJECT_ARRAY) {
            return mpr_fail(r, "paired: cs is neither a list nor nil");
        } else if (m->cs_on) {
            note(skipped, "the confidence sequences (none in the file: they start afresh)");
        }
        const msgpack_object *pd = mpr_find(po, "period");
        if (pd && pd->type == MSGPACK_OBJECT_MAP && m->cs_on) {
            if (!read_period(r, pd, m, skipped))
                return 0;
        } else if (pd && pd->type != MSGPACK_OBJECT_NIL && pd->type != MSGPACK_OBJECT_MAP) {
            return mpr_fail(r, "paired: period is neither a map nor nil");
        } else if (m->cs_on && !pd) {
            note(skipped, "the window's confidence sequences (none in the file: they start "
                          "afresh)");
        }
    } else {
        note(skipped, "the paired comparison (of version %llu, now %llu)",
             (unsigned long long)version, (unsigned long long)m->params.version);
    }
    int bins = m->form != CALIB_FORM_GAUSSIAN;
    const msgpack_object *top = mpr_array(r, o, "top", bins ? VIEWS : 0);
    const msgpack_object *cw = mpr_get(r, o, "cw");
    if (r->failed)
        return 0;
    const msgpack_object *m0 = bins ? mpr_find(&top->via.array.ptr[0], "m") : NULL;
    if (bins && (!m0 || m0->type != MSGPACK_OBJECT_POSITIVE_INTEGER || m0->via.u64 != m->top[0].m)) {
        note(skipped, "the cumulative bins (bins changed)");
    } else {
        for (int v = 0; bins && v < VIEWS; v++)
            if (!read_bins(r, &top->via.array.ptr[v], &m->top[v]))
                return 0;
        if (m->cw.k && cw->type == MSGPACK_OBJECT_MAP) {
            if (!read_cwbins(r, cw, &m->cw))
                return 0;
        } else if (m->cw.k || cw->type != MSGPACK_OBJECT_NIL) {
            note(skipped, "the class-wise bins");
        }
    }
    const msgpack_object *win = mpr_map(r, o, "window");
    int same = win && window_matches(r, win, &m->win);
    if (r->failed)
        return 0;
    if (!same)
        note(skipped, "the window (window, window_panes or bins changed)");
    else if (!read_window(r, win, &m->win))
        return 0;
    const msgpack_object *res = mpr_map(r, o, "reservoir"), *ring = mpr_map(r, o, "ring");
    store_caps rs = read_caps(r, res), gs = read_caps(r, ring);
    if (r->failed)
        return 0;
    int rc = 1;
    if (!caps_fit(&rs, m->reservoir.s.cap, m->sizes.reservoir))
        note(skipped, "the reservoir (its capacity changed: %llu records, now %zu)",
             (unsigned long long)rs.bound, m->sizes.reservoir);
    else if ((rc = read_reservoir(r, res, &m->reservoir, (size_t)rs.cap)) == NO_ROOM)
        note(skipped, "the reservoir (no room under memory_limit)");
    else if (!rc)
        return 0;
    if (!caps_fit(&gs, calib_ring_cap(&m->ring), m->sizes.ring)) {
        note(skipped, "the ring and the loop (the ring's capacity changed: %llu records, "
             "now %zu)", (unsigned long long)gs.bound, m->sizes.ring);
        return 1; /* the drift detector's base and the fits index the ring */
    }
    if ((rc = read_ring(r, ring, m, (size_t)gs.cap)) == NO_ROOM) {
        note(skipped, "the ring and the loop (no room under memory_limit)");
        return 1;
    }
    if (!rc)
        return 0;
    return read_loop(r, mpr_map(r, o, "loop"), m, shift, skipped);
}

int snapshot_restore_model(model *m, const msgpack_object *o, double shift, int with_params,
                           char *skipped, size_t skippedlen, char *err, size_t errlen)
{
    mpr r;
    mpr_init(&r, err, errlen);
    notes sk = {skipped, skippedlen};
    if (skippedlen)
        skipped[0] = 0;
    uint64_t c[MODEL_COUNTERS];
    double last[3];
    mpr_bin(&r, o, "counters", c, sizeof c);
    mpr_bin(&r, o, "last", last, sizeof last);
    uint64_t rejected[REJ_MAX] = {0};
    if (!r.failed)
        read_rejected(&r, mpr_get(&r, o, "rejected"), rejected);
    const msgpack_object *params = mpr_map(&r, o, "params");
    if (r.failed)
        return -1;
    if (with_params) {
        state_param_names names;
        model_params p;
        if (!read_params(&r, params, &p) || !read_param_names(&r, params, &names))
            return -1;
        /* a built-in method by name, its values in its order; a plugin's
         * (not loaded here) keeps its values unnamed */
        const calib_plugin *desc = calib_plugin_builtin(p.method);
        char why[ERR_MAX];
        p.desc = desc && state_params_by_name(&p, names, desc, why, sizeof why) == 0 ? desc
                                                                                   : NULL;
        p.identity = model_params_is_identity(&p);
        m->params = p;
    }
    model_counters_set(m, model_counters, MODEL_COUNTERS, c);
    for (int i = 0; i < REJ_MAX; i++)
        m->rejected[i] += rejected[i];
    double *mono[3] = {&m->last_label_mono, &m->first_prediction_mono,
                       &m->last_prediction_mono};
    for (int i = 0; i < 3; i++)
        if (isfinite(last[i]) && last[i] != 0)
            *mono[i] = last[i] + shift;
    const msgpack_object *join = mpr_map(&r, o, "join");
    /* a waiting prediction's outputs pass through the model's scratch */
    int ok = join && read_join(&r, join, &m->join, shift, m->shaped ? m->xcal : NULL, &sk);
    if (!ok || !read_events(&r, o, m) || !read_alerts(&r, o, m, shift))
        return -1;
    if (m->shaped && !read_shaped(&r, o, m, shift, &sk))
        return -1;
    return r.failed ? -1 : 0;
}
