/* control.c — the REP control socket: msgpack requests {"v": 1, "cmd": ...}
 * answered with one msgpack map each; calibctl(1) prints them as JSON. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibd.h"
#include "control.h"
#include "registry.h"
#include "recalib.h"
#include "pack.h"
#include "status.h"

void control_pack_status(calibd *d, calib_mpw *w, const char *only, size_t only_len)
{
    const model *one = only ? registry_find(d, only, only_len) : NULL;
    if (only && !one)
        status_error(w, "no such model");
    else {
        status_daemon s;
        calibd_status(d, &s);
        status_pack(w, &s, d->reg.models, d->reg.n, one);
    }
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
        status_error(w, "\"model\" must be a string");
        return;
    }
    model *m = registry_get(d, name->via.str.ptr, name->via.str.size, 0, NULL);
    char why[ERR_MAX];
    if (!m) {
        status_error(w, "no such model");
        return;
    }
    size_t n = recalib_refit_now(d, m, why, sizeof why);
    if (n == 0) {
        status_error(w, why);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 1);
    calib_mpw_key_uint(w, "refit", m->recalib.refits);
    calib_mpw_key_uint(w, "samples", n);
    calib_mpw_end(w);
}

/* {"cmd": "forget", "model": NAME}: NAME and its statistics go at the next
 * tick (registry_collect); its stored parameters stay in force. */
static void reply_forget(calibd *d, calib_mpw *w, const msgpack_object *name)
{
    if (!name || name->type != MSGPACK_OBJECT_STR) {
        status_error(w, "\"model\" must be a string");
        return;
    }
    model *m = registry_get(d, name->via.str.ptr, name->via.str.size, 0, NULL);
    if (!m) {
        status_error(w, "no such model");
        return;
    }
    m->forget = 1;
    calib_mpw_map(w);
    calib_mpw_key(w, "ok");
    calib_mpw_bool(w, 1);
    calib_mpw_key(w, "forgetting");
    calib_mpw_str(w, m->name);
    calib_mpw_key_uint(w, "scored", m->scored);
    calib_mpw_end(w);
}

void control_reply(calibd *d, const void *buf, size_t len, calib_mpw *w)
{
    size_t end;
    if (calib_proto_scan(buf, len, &end) != CALIB_REJ_NONE || end != len) {
        status_error(w, "request is not one well-formed msgpack object");
        return;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        status_error(w, "request is not a msgpack map");
        goto out;
    }
    const msgpack_object *v = map_get(&u.data, "v"), *cmd = map_get(&u.data, "cmd");
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != 1) {
        status_error(w, "\"v\" must be 1");
        goto out;
    }
    if (!cmd || cmd->type != MSGPACK_OBJECT_STR) {
        status_error(w, "\"cmd\" must be a string");
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
            status_error(w, "\"model\" must be a string");
        else
            control_pack_status(d, w, only ? only->via.str.ptr : NULL, only ? only->via.str.size : 0);
    } else if (calib_proto_str_is(c, "refit")) {
        reply_refit(d, w, map_get(&u.data, "model"));
    } else if (calib_proto_str_is(c, "forget")) {
        reply_forget(d, w, map_get(&u.data, "model"));
    } else {
        status_error(w, "unknown command");
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
        status_error(&w, "a request is one frame");
    else
        control_reply(d, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), &w);
    int err = calib_mpw_error(&w);
    if (err != CALIB_OK) {
        /* a reply that could not be written whole: say so, shortly */
        log_msg(&d->log, LOG_ERROR, "control", "cannot write a reply: %s", calib_strerror(err));
        calib_mpw_reset(&w);
        status_error(&w, "calibd could not write the reply");
    }
    /* REP must answer every request, or the socket refuses the next one */
    if (calib_mpw_error(&w) != CALIB_OK
        || zmq_send(z->sock, w.sb.data, w.sb.size, ZMQ_DONTWAIT) < 0)
        log_msg(&d->log, LOG_WARN, "control", "cannot send a reply: %s",
                calib_mpw_error(&w) ? "out of memory" : zmq_strerror(zmq_errno()));
    calib_mpw_destroy(&w);
}
