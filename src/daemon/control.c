/* control.c — the REP control socket: msgpack requests {"v": 1, "cmd": ...}
 * answered with one msgpack map each; calibctl(1) prints them as JSON. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibd.h"
#include "control.h"
#include "registry.h"
#include "loop.h"
#include "pack.h"

static void pack_rejected(calib_mpw *w, const uint64_t *counts)
{
    calib_mpw_map(w);
    for (int r = 0; r < REJ_MAX; r++)
        if (counts[r])
            pack_counter(w, reject_name(r), counts[r]);
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

static void pack_join(calib_mpw *w, const calib_join *j)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "ttl");
    calib_mpw_num(w, j->cfg.ttl);
    pack_counter(w, "capacity", j->cfg.capacity);
    pack_counter(w, "joined", j->joined);
    pack_counter(w, "waiting_predictions", j->waiting_preds);
    pack_counter(w, "waiting_labels", j->waiting_labels);
    pack_counter(w, "expired_predictions", j->expired_preds);
    pack_counter(w, "expired_labels", j->expired_labels);
    pack_counter(w, "evicted", j->evicted);
    pack_counter(w, "duplicate_predictions", j->duplicate_preds);
    pack_counter(w, "duplicate_labels", j->duplicate_labels);
    pack_counter(w, "forgotten_joined_ids", j->forgotten);
    calib_mpw_key(w, "sample");
    calib_mpw_num(w, calib_join_sample_fraction(j));
    pack_counter(w, "sampled_out_predictions", j->sampled_out_preds);
    pack_counter(w, "sampled_out_labels", j->sampled_out_labels);
    calib_mpw_end(w);
}

static void pack_params(calib_mpw *w, const model_params *p)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "method");
    calib_mpw_str(w, p->method);
    pack_counter(w, "version", p->version);
    calib_mpw_key(w, "values");
    loop_pack_values(w, p);
    calib_mpw_key(w, "published");
    calib_mpw_num(w, p->version ? p->ts : NAN);
    calib_mpw_key(w, "improvement");
    calib_mpw_num(w, p->version ? p->improvement : NAN);
    calib_mpw_key(w, "ci");
    calib_mpw_pair(w, p->ci);
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
    pack_counter(w, "scored", pd->running ? pd->cs[VIEW_RAW].n : 0);
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
        pack_counter(w, "scored", pd->last.n);
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
    pack_counter(w, "version", p->version);
    calib_mpw_key(w, "since");
    calib_mpw_num(w, p->since);
    pack_counter(w, "scored", p->view[VIEW_RAW][WS_MAIN].n);
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
    pack_counter(w, "scored", v->w.stat[WS_MAIN].n);
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
    pack_counter(w, "predictions", m->predictions);
    pack_counter(w, "labels", m->labels);
    pack_counter(w, "scored", m->scored);
    pack_counter(w, "scored_inline", m->inline_scored);
    calib_mpw_key(w, "rejected");
    pack_rejected(w, m->rejected);
    calib_mpw_key(w, "params");
    pack_params(w, &m->params);
    pack_counter(w, "alerts", m->alerts);
    calib_mpw_key(w, "memory");
    calib_mpw_map(w);
    pack_counter(w, "bytes", m->mem.used);
    pack_counter(w, "most", m->sizes.bytes);
    pack_counter(w, "refused", m->mem.refused);
    calib_mpw_end(w);
    calib_mpw_key(w, "events");
    pack_events(w, m);
    /* labels wait before the model's first prediction too */
    calib_mpw_key(w, "join");
    pack_join(w, &m->join);
    if (shaped) {
        int bins = m->form != CALIB_FORM_GAUSSIAN;
        calib_mpw_key(w, "loop");
        loop_pack_status(w, m);
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
        pack_counter(w, "stale_window_samples", m->stale);
        calib_mpw_key(w, "samples");
        calib_mpw_map(w);
        pack_counter(w, "reservoir", calib_reservoir_len(&m->reservoir));
        pack_counter(w, "ring", calib_ring_len(&m->ring));
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* ------------------------------------------------------------ commands */

static void reply_error(calib_mpw *w, const char *why)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 0);
    calib_mpw_key(w, "error");
    calib_mpw_str(w, why);
    calib_mpw_end(w);
}


void control_status_begin(calibd *d, calib_mpw *w)
{
    double now = wall_now();
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 1);
    calib_mpw_key(w, "version");
    calib_mpw_str(w, PACKAGE_VERSION);
    calib_mpw_key(w, "uptime");
    calib_mpw_num(w, now - d->started);
    pack_counter(w, "messages", d->messages);
    calib_mpw_key(w, "rejected");
    pack_rejected(w, d->rejected);
    pack_counter(w, "publish_errors", d->publish_errors);
    pack_counter(w, "config_reloads", d->reloads);
    pack_counter(w, "config_reloads_refused", d->reloads_refused);
    pack_counter(w, "models_forgotten", d->models_forgotten);
    pack_counter(w, "models_expired", d->models_expired);
    calib_mpw_key(w, "alerts");
    calib_mpw_map(w);
    pack_counter(w, "sent", d->alerts);
    pack_counter(w, "suppressed", d->alerts_suppressed);
    pack_counter(w, "sink_failed", d->sinks_failed);
    pack_counter(w, "sink_killed", d->sinks_killed);
    pack_counter(w, "sink_dropped", d->sinks_dropped);
    calib_mpw_end(w);
    calib_mpw_key(w, "memory");
    calib_mpw_map(w);
    pack_counter(w, "bytes", d->mem.used);
    pack_counter(w, "limit", d->cfg.memory_limit);
    pack_counter(w, "refused", d->mem.refused);
    pack_counter(w, "models", d->nmodels);
    pack_counter(w, "max_models", d->cfg.max_models);
    calib_mpw_end(w);
    calib_mpw_key(w, "models");
    calib_mpw_map(w);
}

void control_status_model(calib_mpw *w, const model *m)
{
    calib_mpw_key(w, m->name);
    pack_model(w, m);
}

void control_status_end(calib_mpw *w)
{
    calib_mpw_end(w);
    calib_mpw_end(w);
}

void control_pack_status(calibd *d, calib_mpw *w, const char *only, size_t only_len)
{
    const model *one = only ? registry_find(d, only, only_len) : NULL;
    if (only && !one) {
        reply_error(w, "no such model");
        return;
    }
    control_status_begin(d, w);
    for (size_t i = 0; i < d->nmodels; i++)
        if (!one || d->models[i] == one)
            control_status_model(w, d->models[i]);
    control_status_end(w);
}

/* The string value of key in map o, or NULL. */
static const msgpack_object *map_get(const msgpack_object *o, const char *key)
{
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && calib_proto_str_is(&kv->key.via.str, key))
            return &kv->val;
    }
    return NULL;
}

/* {"cmd": "refit", "model": NAME}: starts a refit of NAME on its ring. */
static void reply_refit(calibd *d, calib_mpw *w, const msgpack_object *name)
{
    if (!name || name->type != MSGPACK_OBJECT_STR) {
        reply_error(w, "\"model\" must be a string");
        return;
    }
    model *m = registry_get(d, name->via.str.ptr, name->via.str.size, 0, NULL);
    char why[200];
    if (!m) {
        reply_error(w, "no such model");
        return;
    }
    size_t n = loop_refit_now(d, m, why, sizeof why);
    if (n == 0) {
        reply_error(w, why);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 1);
    pack_counter(w, "refit", m->loop.refits);
    pack_counter(w, "samples", n);
    calib_mpw_end(w);
}

/* {"cmd": "forget", "model": NAME}: NAME and its statistics go at the next
 * tick (registry_collect); its stored parameters stay in force. */
static void reply_forget(calibd *d, calib_mpw *w, const msgpack_object *name)
{
    if (!name || name->type != MSGPACK_OBJECT_STR) {
        reply_error(w, "\"model\" must be a string");
        return;
    }
    model *m = registry_get(d, name->via.str.ptr, name->via.str.size, 0, NULL);
    if (!m) {
        reply_error(w, "no such model");
        return;
    }
    m->forget = 1;
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 1);
    calib_mpw_key(w, "forgetting");
    calib_mpw_str(w, m->name);
    pack_counter(w, "scored", m->scored);
    calib_mpw_end(w);
}

void control_reply(calibd *d, const void *buf, size_t len, calib_mpw *w)
{
    size_t end;
    if (calib_proto_scan(buf, len, &end) != CALIB_REJ_NONE || end != len) {
        reply_error(w, "request is not one well-formed msgpack object");
        return;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        reply_error(w, "request is not a msgpack map");
        goto out;
    }
    const msgpack_object *v = map_get(&u.data, "v"), *cmd = map_get(&u.data, "cmd");
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != 1) {
        reply_error(w, "\"v\" must be 1");
        goto out;
    }
    if (!cmd || cmd->type != MSGPACK_OBJECT_STR) {
        reply_error(w, "\"cmd\" must be a string");
        goto out;
    }
    const msgpack_object_str *c = &cmd->via.str;
    if (calib_proto_str_is(c, "ping")) {
        calib_mpw_map(w);
        calib_mpw_key(w, "ok");
        calib_mpw_bool(w, 1);
        calib_mpw_key(w, "pong");
        calib_mpw_bool(w, 1);
        calib_mpw_end(w);
    } else if (calib_proto_str_is(c, "status")) {
        const msgpack_object *only = map_get(&u.data, "model");
        if (only && only->type != MSGPACK_OBJECT_STR)
            reply_error(w, "\"model\" must be a string");
        else
            control_pack_status(d, w, only ? only->via.str.ptr : NULL, only ? only->via.str.size : 0);
    } else if (calib_proto_str_is(c, "refit")) {
        reply_refit(d, w, map_get(&u.data, "model"));
    } else if (calib_proto_str_is(c, "forget")) {
        reply_forget(d, w, map_get(&u.data, "model"));
    } else {
        reply_error(w, "unknown command");
    }
out:
    msgpack_unpacked_destroy(&u);
}

void control_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg)
{
    calibd *d = arg;
    calib_mpw w;
    calib_mpw_init(&w);
    if (nframes != 1)
        reply_error(&w, "a request is one frame");
    else
        control_reply(d, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), &w);
    int err = calib_mpw_error(&w);
    if (err != CALIB_OK) {
        /* a reply that could not be written whole: say so, shortly */
        log_msg(&d->log, LOG_ERROR, "control", "cannot write a reply: %s", calib_strerror(err));
        calib_mpw_reset(&w);
        reply_error(&w, "calibd could not write the reply");
    }
    /* REP must answer every request, or the socket refuses the next one */
    if (calib_mpw_error(&w) != CALIB_OK
        || zmq_send(z->sock, w.sb.data, w.sb.size, ZMQ_DONTWAIT) < 0)
        log_msg(&d->log, LOG_WARN, "control", "cannot send a reply: %s",
                calib_mpw_error(&w) ? "out of memory" : zmq_strerror(zmq_errno()));
    calib_mpw_destroy(&w);
}
