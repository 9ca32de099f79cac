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

static void pack_rejected(msgpack_packer *pk, const uint64_t *counts)
{
    size_t n = 0;
    for (int r = 0; r < REJ_MAX; r++)
        n += counts[r] != 0;
    msgpack_pack_map(pk, n);
    for (int r = 0; r < REJ_MAX; r++)
        if (counts[r])
            pack_counter(pk, reject_name(r), counts[r]);
}

/* {"brier": est, "rbs": x, "log": est, "ece": x, "tce2": x} or {"dss": est}
 * for one view, from accumulators acc[WS_PER_VIEW] and bins b (may be NULL) */
static void pack_view(msgpack_packer *pk, const model *m, const calib_accum *acc,
                      const calib_bins *b, const calib_cwbins *cw)
{
    if (m->form == CALIB_FORM_GAUSSIAN) {
        msgpack_pack_map(pk, 1);
        pack_str(pk, "dss");
        pack_estimate(pk, &acc[WS_MAIN]);
        return;
    }
    msgpack_pack_map(pk, (b ? 5 : 3) + (cw != NULL));
    pack_str(pk, "brier");
    pack_estimate(pk, &acc[WS_MAIN]);
    pack_str(pk, "rbs");
    pack_num(pk, sqrt(calib_accum_mean(&acc[WS_MAIN])));
    pack_str(pk, "log");
    pack_estimate(pk, &acc[WS_LOG]);
    if (b) {
        pack_str(pk, "ece");
        pack_num(pk, calib_bins_ece(b));
        pack_str(pk, "tce2");
        pack_num(pk, calib_bins_tce2(b));
    }
    if (cw) {
        pack_str(pk, "cwce2");
        pack_num(pk, calib_cwbins_cwce2(cw));
    }
}

static void pack_join(msgpack_packer *pk, const calib_join *j)
{
    msgpack_pack_map(pk, 11);
    pack_str(pk, "ttl");
    pack_num(pk, j->cfg.ttl);
    pack_counter(pk, "capacity", j->cfg.capacity);
    pack_counter(pk, "joined", j->joined);
    pack_counter(pk, "waiting_predictions", j->waiting_preds);
    pack_counter(pk, "waiting_labels", j->waiting_labels);
    pack_counter(pk, "expired_predictions", j->expired_preds);
    pack_counter(pk, "expired_labels", j->expired_labels);
    pack_counter(pk, "evicted", j->evicted);
    pack_counter(pk, "duplicate_predictions", j->duplicate_preds);
    pack_counter(pk, "duplicate_labels", j->duplicate_labels);
    pack_counter(pk, "forgotten_joined_ids", j->forgotten);
}

static void pack_params(msgpack_packer *pk, const model_params *p)
{
    msgpack_pack_map(pk, 6);
    pack_str(pk, "method");
    pack_str(pk, p->method);
    pack_counter(pk, "version", p->version);
    pack_str(pk, "values");
    loop_pack_values(pk, p);
    pack_str(pk, "published");
    pack_num(pk, p->version ? p->ts : NAN);
    pack_str(pk, "improvement");
    pack_num(pk, p->version ? p->improvement : NAN);
    pack_str(pk, "ci");
    pack_pair(pk, p->ci);
}

static void pack_model(msgpack_packer *pk, const model *m, double now)
{
    int shaped = m->shaped;
    msgpack_pack_map(pk, shaped ? 17 : 10);
    pack_str(pk, "form");
    if (shaped)
        pack_str(pk, calib_form_name(m->form));
    else
        msgpack_pack_nil(pk);
    pack_str(pk, "k");
    if (shaped && m->form != CALIB_FORM_GAUSSIAN)
        msgpack_pack_uint64(pk, m->k);
    else
        msgpack_pack_nil(pk);
    pack_counter(pk, "predictions", m->predictions);
    pack_counter(pk, "labels", m->labels);
    pack_counter(pk, "scored", m->scored);
    pack_counter(pk, "scored_inline", m->inline_scored);
    pack_str(pk, "rejected");
    pack_rejected(pk, m->rejected);
    pack_str(pk, "params");
    pack_params(pk, &m->params);
    pack_counter(pk, "alerts", m->alerts);
    /* labels wait before the model's first prediction too */
    pack_str(pk, "join");
    pack_join(pk, &m->join);
    if (!shaped)
        return;
    pack_str(pk, "loop");
    loop_pack_status(pk, m);
    int bins = m->form != CALIB_FORM_GAUSSIAN;
    pack_str(pk, "raw");
    pack_view(pk, m, m->cum[VIEW_RAW], bins ? &m->top[VIEW_RAW] : NULL,
              m->cw.k ? &m->cw : NULL);
    pack_str(pk, "calibrated");
    pack_view(pk, m, m->cum[VIEW_CAL], bins ? &m->top[VIEW_CAL] : NULL, NULL);
    pack_str(pk, "calibrated_since_params");
    pack_view(pk, m, m->since_params, NULL, NULL);
    /* the window as the last tick summed it (model_view) */
    const model_view *v = &m->view;
    pack_str(pk, "window");
    if (v->have) {
        msgpack_pack_map(pk, 5);
        pack_str(pk, "seconds");
        pack_num(pk, m->cfg.window);
        pack_str(pk, "at");
        pack_num(pk, v->at);
        pack_counter(pk, "scored", v->w.stat[WS_MAIN].n);
        pack_str(pk, "raw");
        pack_view(pk, m, &v->w.stat[VIEW_RAW * WS_PER_VIEW], bins ? &v->w.top[VIEW_RAW] : NULL,
                  NULL);
        pack_str(pk, "calibrated");
        pack_view(pk, m, &v->w.stat[VIEW_CAL * WS_PER_VIEW], bins ? &v->w.top[VIEW_CAL] : NULL,
                  NULL);
    } else {
        msgpack_pack_nil(pk);
    }
    pack_counter(pk, "stale_window_samples", m->stale);
    pack_str(pk, "samples");
    msgpack_pack_map(pk, 2);
    pack_counter(pk, "reservoir", calib_reservoir_len(&m->reservoir));
    pack_counter(pk, "ring", calib_ring_len(&m->ring));
}

/* ------------------------------------------------------------ commands */

static void reply_error(msgpack_packer *pk, const char *why)
{
    msgpack_pack_map(pk, 2);
    pack_str(pk, "ok");
    msgpack_pack_false(pk);
    pack_str(pk, "error");
    pack_str(pk, why);
}

static void reply_status(calibd *d, msgpack_packer *pk, const char *only, size_t only_len)
{
    double now = wall_now();
    size_t n = 0;
    for (size_t i = 0; i < d->nmodels; i++)
        n += !only || (strlen(d->models[i]->name) == only_len &&
                       memcmp(d->models[i]->name, only, only_len) == 0);
    if (only && n == 0) {
        reply_error(pk, "no such model");
        return;
    }
    msgpack_pack_map(pk, 8);
    pack_str(pk, "ok");
    msgpack_pack_true(pk);
    pack_str(pk, "version");
    pack_str(pk, PACKAGE_VERSION);
    pack_str(pk, "uptime");
    pack_num(pk, now - d->started);
    pack_counter(pk, "messages", d->messages);
    pack_str(pk, "rejected");
    pack_rejected(pk, d->rejected);
    pack_counter(pk, "publish_errors", d->publish_errors);
    pack_str(pk, "alerts");
    msgpack_pack_map(pk, 5);
    pack_counter(pk, "sent", d->alerts);
    pack_counter(pk, "suppressed", d->alerts_suppressed);
    pack_counter(pk, "sink_failed", d->sinks_failed);
    pack_counter(pk, "sink_killed", d->sinks_killed);
    pack_counter(pk, "sink_dropped", d->sinks_dropped);
    pack_str(pk, "models");
    msgpack_pack_map(pk, n);
    for (size_t i = 0; i < d->nmodels; i++) {
        const model *m = d->models[i];
        if (only && !(strlen(m->name) == only_len && memcmp(m->name, only, only_len) == 0))
            continue;
        pack_str(pk, m->name);
        pack_model(pk, m, now);
    }
}

/* The string value of key in map o, or NULL. */
static const msgpack_object *map_get(const msgpack_object *o, const char *key)
{
    size_t len = strlen(key);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == len &&
            memcmp(kv->key.via.str.ptr, key, len) == 0)
            return &kv->val;
    }
    return NULL;
}

/* {"cmd": "refit", "model": NAME}: starts a refit of NAME on its ring. */
static void reply_refit(calibd *d, msgpack_packer *pk, const msgpack_object *name)
{
    if (!name || name->type != MSGPACK_OBJECT_STR) {
        reply_error(pk, "\"model\" must be a string");
        return;
    }
    model *m = registry_get(d, name->via.str.ptr, name->via.str.size, 0, NULL);
    char why[200];
    if (!m) {
        reply_error(pk, "no such model");
        return;
    }
    size_t n = loop_refit_now(d, m, why, sizeof why);
    if (n == 0) {
        reply_error(pk, why);
        return;
    }
    msgpack_pack_map(pk, 3);
    pack_str(pk, "ok");
    msgpack_pack_true(pk);
    pack_counter(pk, "refit", m->loop.refits);
    pack_counter(pk, "samples", n);
}

static void handle(calibd *d, const void *buf, size_t len, msgpack_packer *pk)
{
    size_t end;
    if (calib_proto_scan(buf, len, &end) != CALIB_REJ_NONE || end != len) {
        reply_error(pk, "request is not one well-formed msgpack object");
        return;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        reply_error(pk, "request is not a msgpack map");
        goto out;
    }
    const msgpack_object *v = map_get(&u.data, "v"), *cmd = map_get(&u.data, "cmd");
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != 1) {
        reply_error(pk, "\"v\" must be 1");
        goto out;
    }
    if (!cmd || cmd->type != MSGPACK_OBJECT_STR) {
        reply_error(pk, "\"cmd\" must be a string");
        goto out;
    }
    const char *c = cmd->via.str.ptr;
    size_t clen = cmd->via.str.size;
    if (clen == 4 && memcmp(c, "ping", 4) == 0) {
        msgpack_pack_map(pk, 2);
        pack_str(pk, "ok");
        msgpack_pack_true(pk);
        pack_str(pk, "pong");
        msgpack_pack_true(pk);
    } else if (clen == 6 && memcmp(c, "status", 6) == 0) {
        const msgpack_object *only = map_get(&u.data, "model");
        if (only && only->type != MSGPACK_OBJECT_STR)
            reply_error(pk, "\"model\" must be a string");
        else
            reply_status(d, pk, only ? only->via.str.ptr : NULL, only ? only->via.str.size : 0);
    } else if (clen == 5 && memcmp(c, "refit", 5) == 0) {
        reply_refit(d, pk, map_get(&u.data, "model"));
    } else {
        reply_error(pk, "unknown command");
    }
out:
    msgpack_unpacked_destroy(&u);
}

void control_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg)
{
    calibd *d = arg;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (nframes != 1)
        reply_error(&pk, "a request is one frame");
    else
        handle(d, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), &pk);
    /* REP must answer every request, or the socket refuses the next one */
    if (!sb.data || zmq_send(z->sock, sb.data, sb.size, ZMQ_DONTWAIT) < 0)
        log_msg(&d->log, LOG_WARN, "control", "cannot send a reply: %s",
                sb.data ? zmq_strerror(zmq_errno()) : "out of memory");
    msgpack_sbuffer_destroy(&sb);
}
