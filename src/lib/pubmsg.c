/* pubmsg.c — the messages calibd publishes (params, alert): one key table,
 * the writer and the decoder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <msgpack.h>

#include "calib/mpw.h"
#include "calib/protocol.h"
#include "calib/pubmsg.h"

/* ------------------------------------------------------------------ keys */

enum key {
    K_V, K_TYPE, K_MODEL, K_TS,
    /* params */
    K_VERSION, K_METHOD, K_PARAMS, K_PUBLISHED, K_N, K_SHADOW_N, K_BEFORE,
    K_AFTER, K_IMPROVEMENT, K_CI, K_SEGMENTS, K_WEIGHTS, K_LABEL_FREE,
    /* alert */
    K_SEVERITY, K_KIND, K_MESSAGE, K_VALUES,
    K_COUNT
};

static const char *const key_names[K_COUNT] = {
    [K_V] = "v", [K_TYPE] = "type", [K_MODEL] = "model", [K_TS] = "ts",
    [K_VERSION] = "version", [K_METHOD] = "method", [K_PARAMS] = "params",
    [K_PUBLISHED] = "published", [K_N] = "n", [K_SHADOW_N] = "shadow_n",
    [K_BEFORE] = "before", [K_AFTER] = "after",
    [K_IMPROVEMENT] = "improvement", [K_CI] = "ci", [K_SEGMENTS] = "segments",
    [K_WEIGHTS] = "prior_weights", [K_LABEL_FREE] = "label_free",
    [K_SEVERITY] = "severity", [K_KIND] = "kind", [K_MESSAGE] = "message",
    [K_VALUES] = "values",
};

/* The scores of "before" and "after", and the inner keys of an
 * improvement map. */
enum score { S_BRIER, S_LOG, S_DSS, S_COUNT };
static const char *const score_names[S_COUNT] = {"brier", "log", "dss"};
#define TYPE_PARAMS "params"
#define TYPE_ALERT "alert"
#define KEY_MEAN "mean"

static double *score_slot(calib_pubmsg_scores *s, int i)
{
    return i == S_BRIER ? &s->brier : i == S_LOG ? &s->log : &s->dss;
}

/* ------------------------------------------------------------------ init */

static void copy_name(char *buf, size_t size, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    n = n < size - 1 ? n : size - 1;
    if (n)
        memcpy(buf, s, n);
    buf[n] = '\0';
}

void calib_params_msg_init(calib_params_msg *m, const char *model)
{
    memset(m, 0, sizeof *m);
    copy_name(m->model, sizeof m->model, model);
    m->ts = m->published = m->improvement = m->ci[0] = m->ci[1] = NAN;
    m->before = m->after = (calib_pubmsg_scores){NAN, NAN, NAN};
}

void calib_alert_msg_init(calib_alert_msg *a, const char *model)
{
    memset(a, 0, sizeof *a);
    copy_name(a->model, sizeof a->model, model);
    a->ts = NAN;
}

/* ------------------------------------------------------------------ writing */

static void write_head(calib_mpw *w, unsigned v, const char *type, const char *model,
                       double ts)
{
    calib_mpw_map(w);
    calib_mpw_key(w, key_names[K_V]);
    calib_mpw_uint(w, v);
    calib_mpw_key(w, key_names[K_TYPE]);
    calib_mpw_str(w, type);
    calib_mpw_key(w, key_names[K_MODEL]);
    calib_mpw_str(w, model);
    if (!isnan(ts)) {
        calib_mpw_key(w, key_names[K_TS]);
        calib_mpw_num(w, ts);
    }
}

static void write_scores(calib_mpw *w, int key, const calib_pubmsg_scores *s)
{
    calib_mpw_key(w, key_names[key]);
    calib_mpw_map(w);
    for (int i = 0; i < S_COUNT; i++) {
        double x = *score_slot((calib_pubmsg_scores *)s, i);
        if (!isnan(x)) {
            calib_mpw_key(w, score_names[i]);
            calib_mpw_num(w, x);
        }
    }
    calib_mpw_end(w);
}

/* "ci": [lo, hi] with an unknown end as nil, as the reader takes it
 * (read_ci); nil when neither end is known. calib_mpw_pair would write a
 * half-known interval as nil: the known end lost on the way (found by
 * tests/fuzz/fuzz_pubmsg's round trip, tests/fuzz/corpus/pubmsg/
 * params_improvement_map). */
static void write_ci(calib_mpw *w, const double ci[2])
{
    if (!isfinite(ci[0]) && !isfinite(ci[1])) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_array(w);
    calib_mpw_num(w, ci[0]);
    calib_mpw_num(w, ci[1]);
    calib_mpw_end(w);
}

int calib_params_msg_write(calib_mpw *w, const calib_params_msg *m)
{
    unsigned nw = m->nweights <= CALIB_PUBMSG_MAX_WEIGHTS ? m->nweights : 0;
    write_head(w, nw ? CALIB_PUBMSG_VERSION_WEIGHTS : CALIB_PROTO_VERSION, TYPE_PARAMS,
               m->model, m->ts);
    calib_mpw_key(w, key_names[K_VERSION]);
    calib_mpw_uint(w, m->version);
    calib_mpw_key(w, key_names[K_METHOD]);
    calib_mpw_str(w, m->method);
    calib_mpw_key(w, key_names[K_PARAMS]);
    calib_mpw_map(w);
    for (unsigned i = 0; i < m->nparams && i < CALIB_RECAL_MAX_PARAMS; i++) {
        calib_mpw_key(w, m->names[i]);
        calib_mpw_num(w, m->values[i]);
    }
    calib_mpw_end(w);
    if (!isnan(m->published)) {
        calib_mpw_key(w, key_names[K_PUBLISHED]);
        calib_mpw_num(w, m->published);
    }
    calib_mpw_key(w, key_names[K_N]);
    calib_mpw_uint(w, m->n);
    calib_mpw_key(w, key_names[K_SHADOW_N]);
    calib_mpw_uint(w, m->shadow_n);
    write_scores(w, K_BEFORE, &m->before);
    write_scores(w, K_AFTER, &m->after);
    calib_mpw_key(w, key_names[K_IMPROVEMENT]);
    calib_mpw_num(w, m->improvement);
    calib_mpw_key(w, key_names[K_CI]);
    write_ci(w, m->ci);
    if (m->nsegments) { /* "key=value": {name: value, ...} */
        calib_mpw_key(w, key_names[K_SEGMENTS]);
        calib_mpw_map(w);
        for (unsigned i = 0; i < m->nsegments && i < CALIB_PUBMSG_MAX_SEGMENTS; i++) {
            const calib_params_segment *sg = &m->segments[i];
            char kv[2 * CALIB_PUBMSG_SEG_NAME_MAX + 2];
            snprintf(kv, sizeof kv, "%s=%s", sg->key, sg->value);
            calib_mpw_key(w, kv);
            calib_mpw_map(w);
            for (unsigned j = 0; j < m->nparams && j < CALIB_RECAL_MAX_PARAMS; j++) {
                calib_mpw_key(w, m->names[j]);
                calib_mpw_num(w, sg->values[j]);
            }
            calib_mpw_end(w);
        }
        calib_mpw_end(w);
    }
    if (nw) {
        calib_mpw_key(w, key_names[K_WEIGHTS]);
        calib_mpw_array(w);
        for (unsigned j = 0; j < nw; j++)
            calib_mpw_num(w, m->weights[j]);
        calib_mpw_end(w);
    }
    if (m->label_free) {
        calib_mpw_key(w, key_names[K_LABEL_FREE]);
        calib_mpw_bool(w, 1);
    }
    calib_mpw_end(w);
    return calib_mpw_error(w);
}

const calib_params_segment *calib_params_segment_find(const calib_params_msg *p,
                                                      const char *const *keys,
                                                      const char *const *values, size_t n)
{
    for (unsigned i = 0; p && i < p->nsegments; i++)
        for (size_t j = 0; j < n; j++)
            if (keys[j] && values[j] && strcmp(p->segments[i].key, keys[j]) == 0 &&
                strcmp(p->segments[i].value, values[j]) == 0)
                return &p->segments[i];
    return NULL;
}

int calib_alert_msg_write(calib_mpw *w, const calib_alert_msg *a)
{
    write_head(w, CALIB_PROTO_VERSION, TYPE_ALERT, a->model, a->ts);
    calib_mpw_key(w, key_names[K_SEVERITY]);
    calib_mpw_str(w, a->severity);
    calib_mpw_key(w, key_names[K_KIND]);
    calib_mpw_str(w, a->kind);
    calib_mpw_key(w, key_names[K_MESSAGE]);
    calib_mpw_str(w, a->message);
    calib_mpw_key(w, key_names[K_VALUES]);
    calib_mpw_map(w);
    for (unsigned i = 0; i < a->nvalues && i < CALIB_PUBMSG_MAX_VALUES; i++) {
        calib_mpw_key(w, a->value_names[i]);
        calib_mpw_num(w, a->values[i]);
    }
    calib_mpw_end(w);
    calib_mpw_end(w);
    return calib_mpw_error(w);
}

/* ------------------------------------------------------------------ reading */

/* Copies a msgpack string into buf (size bytes), truncating, NUL-ended. */
static void str_copy(char *buf, size_t size, const msgpack_object_str *s)
{
    size_t n = s->size < size - 1 ? s->size : size - 1;
    if (n > 0) /* a zero-length string may have no pointer */
        memcpy(buf, s->ptr, n);
    buf[n] = '\0';
}

/* A payload unpacked and its known keys found. */
typedef struct envelope {
    msgpack_unpacked unp;
    const msgpack_object *val[K_COUNT];
} envelope;

/* The first pass over untrusted bytes: calib_proto_scan proves every
 * declared count is backed by bytes before msgpack-c allocates for it. */
static int unpack_one(envelope *e, const void *payload, size_t len)
{
    size_t end = 0, off = 0;
    int r = calib_proto_scan(payload, len, &end);
    if (r != CALIB_REJ_NONE)
        return r;
    if (end != len)
        return CALIB_REJ_TRAILING_BYTES;
    switch (msgpack_unpack_next(&e->unp, payload, len, &off)) {
    case MSGPACK_UNPACK_SUCCESS: break;
    case MSGPACK_UNPACK_NOMEM_ERROR: return CALIB_REJ_NO_MEMORY;
    default: return CALIB_REJ_BAD_MSGPACK;
    }
    return off == len ? CALIB_REJ_NONE : CALIB_REJ_TRAILING_BYTES;
}

static int gather_keys(envelope *e)
{
    const msgpack_object *root = &e->unp.data;
    if (root->type != MSGPACK_OBJECT_MAP)
        return CALIB_REJ_NOT_A_MAP;
    for (uint32_t i = 0; i < root->via.map.size; i++) {
        const msgpack_object_kv *kv = &root->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            return CALIB_REJ_BAD_KEY;
        for (int k = 0; k < K_COUNT; k++) {
            if (!calib_proto_str_is(&kv->key.via.str, key_names[k]))
                continue;
            if (e->val[k])
                return CALIB_REJ_DUPLICATE_KEY;
            e->val[k] = &kv->val;
            break;
        }
    }
    return CALIB_REJ_NONE;
}

/*
 * Everything every message shares: topic, one map, string keys, "v": 1,
 * "type"; and for params and alerts, "model" equal to the topic.
 */
static int envelope_open(envelope *e, int *type, const void *topic,
                         size_t topic_len, const void *payload, size_t len)
{
    int r;
    *type = CALIB_PUBMSG_OTHER;
    if (!calib_proto_topic_ok(topic, topic_len))
        return CALIB_REJ_BAD_TOPIC;
    if (payload == NULL)
        return CALIB_REJ_BAD_MSGPACK;
    if ((r = unpack_one(e, payload, len)) || (r = gather_keys(e)))
        return r;
    const msgpack_object *v = e->val[K_V], *t = e->val[K_TYPE];
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER
        || (v->via.u64 != CALIB_PROTO_VERSION && v->via.u64 != CALIB_PUBMSG_VERSION_WEIGHTS))
        return CALIB_REJ_BAD_VERSION;
    if (!t || t->type != MSGPACK_OBJECT_STR)
        return CALIB_REJ_BAD_TYPE;
    if (calib_proto_str_is(&t->via.str, TYPE_PARAMS))
        *type = CALIB_PUBMSG_PARAMS;
    else if (calib_proto_str_is(&t->via.str, TYPE_ALERT))
        *type = CALIB_PUBMSG_ALERT;
    else
        return CALIB_REJ_NONE;
    const msgpack_object *m = e->val[K_MODEL];
    if (!m)
        return CALIB_REJ_MISSING_KEY;
    if (m->type != MSGPACK_OBJECT_STR)
        return CALIB_REJ_KEY_TYPE;
    if (m->via.str.size != topic_len || memcmp(m->via.str.ptr, topic, topic_len))
        return CALIB_REJ_MODEL_MISMATCH;
    return CALIB_REJ_NONE;
}

/* A number, or nil (NaN). */
static int number_or_nil(const msgpack_object *o, double *out)
{
    *out = NAN;
    return o->type == MSGPACK_OBJECT_NIL || calib_proto_number(o, out);
}

/* An optional time ("ts", "published"): absent (NaN), or a finite number. */
static int read_time(const msgpack_object *o, double *t)
{
    *t = NAN;
    if (!o)
        return CALIB_REJ_NONE;
    if (!calib_proto_number(o, t))
        return CALIB_REJ_KEY_TYPE;
    return isfinite(*t) ? CALIB_REJ_NONE : CALIB_REJ_BAD_VALUE;
}

/* An optional count: absent (0), or an unsigned integer. */
static int read_count(const msgpack_object *o, uint64_t *n)
{
    *n = 0;
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return CALIB_REJ_KEY_TYPE;
    *n = o->via.u64;
    return CALIB_REJ_NONE;
}

/* "before" / "after": maps of score names to numbers (nil: unknown); the
 * known scores are kept, others only checked. */
static int read_scores(const msgpack_object *o, calib_pubmsg_scores *s)
{
    *s = (calib_pubmsg_scores){NAN, NAN, NAN};
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_MAP)
        return CALIB_REJ_KEY_TYPE;
    unsigned seen = 0;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        double x;
        if (kv->key.type != MSGPACK_OBJECT_STR || !number_or_nil(&kv->val, &x))
            return CALIB_REJ_KEY_TYPE;
        for (int j = 0; j < S_COUNT; j++) {
            if (!calib_proto_str_is(&kv->key.via.str, score_names[j]))
                continue;
            if (seen & (1u << j))
                return CALIB_REJ_DUPLICATE_KEY;
            seen |= 1u << j;
            *score_slot(s, j) = x;
        }
    }
    return CALIB_REJ_NONE;
}

/* [lo, hi] of numbers or nils, or nil. */
static int read_ci(const msgpack_object *a, double ci[2])
{
    if (a->type == MSGPACK_OBJECT_NIL)
        return 1;
    return a->type == MSGPACK_OBJECT_ARRAY && a->via.array.size == 2
           && number_or_nil(&a->via.array.ptr[0], &ci[0])
           && number_or_nil(&a->via.array.ptr[1], &ci[1]);
}

/*
 * The improvement, in either of two shapes: {"improvement": {"mean": x,
 * "ci": [lo, hi]}}, or, as calibd sends it, {"improvement": x, "ci":
 * [lo, hi]}. Numbers may be nil (unknown).
 */
static int read_improvement(const msgpack_object *o, const msgpack_object *ci,
                            calib_params_msg *p)
{
    p->improvement = p->ci[0] = p->ci[1] = NAN;
    if (ci && !read_ci(ci, p->ci))
        return CALIB_REJ_KEY_TYPE;
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_MAP)
        return number_or_nil(o, &p->improvement) ? CALIB_REJ_NONE
                                                 : CALIB_REJ_KEY_TYPE;
    int seen_mean = 0, seen_ci = 0;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            return CALIB_REJ_KEY_TYPE;
        if (calib_proto_str_is(&kv->key.via.str, KEY_MEAN)) {
            if (seen_mean++)
                return CALIB_REJ_DUPLICATE_KEY;
            if (!number_or_nil(&kv->val, &p->improvement))
                return CALIB_REJ_KEY_TYPE;
        } else if (calib_proto_str_is(&kv->key.via.str, key_names[K_CI])) {
            if (seen_ci++ || ci)
                return CALIB_REJ_DUPLICATE_KEY;
            if (!read_ci(&kv->val, p->ci))
                return CALIB_REJ_KEY_TYPE;
        }
    }
    return CALIB_REJ_NONE;
}

/* The domain of a built-in's parameters, beyond finiteness. A temperature
 * so small that 1 / T overflows is none: softmax(z / T) would be NaN
 * (tests/fuzz/corpus/pubmsg/crash-tiny_temperature). */
static int params_in_domain(const char *method, const double *v)
{
    if (strcmp(method, "temperature") == 0)
        return v[0] > 0 && isfinite(1 / v[0]);
    if (strcmp(method, "variance") == 0)
        return v[0] > 0 && v[1] >= 0;
    if (strcmp(method, "location_scale") == 0)
        return v[1] > 0 && v[2] > 0;
    return 1;
}

/* "params" of a known method: each of its param_names once, numbers;
 * other keys are ignored. */
static int read_known_params(const msgpack_object_map *map,
                             const calib_plugin *d, calib_params_msg *p)
{
    unsigned seen = 0;
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object_kv *kv = &map->ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            return CALIB_REJ_BAD_PARAMS;
        for (unsigned j = 0; j < d->nparams; j++) {
            if (!calib_proto_str_is(&kv->key.via.str, d->param_names[j]))
                continue;
            if (seen & (1u << j))
                return CALIB_REJ_DUPLICATE_KEY;
            seen |= 1u << j;
            if (!calib_proto_number(&kv->val, &p->values[j]))
                return CALIB_REJ_KEY_TYPE;
            break;
        }
    }
    if (seen != (1u << d->nparams) - 1)
        return CALIB_REJ_BAD_PARAMS;
    p->nparams = d->nparams;
    for (unsigned j = 0; j < d->nparams; j++)
        copy_name(p->names[j], sizeof p->names[j], d->param_names[j]);
    return CALIB_REJ_NONE;
}

/* "params" of a method unknown here: kept as sent, in the message's order,
 * so that it can at least be shown. */
static int read_unknown_params(const msgpack_object_map *map, calib_params_msg *p)
{
    if (map->size == 0 || map->size > CALIB_RECAL_MAX_PARAMS)
        return CALIB_REJ_BAD_PARAMS;
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object_kv *kv = &map->ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR
            || kv->key.via.str.size > CALIB_PUBMSG_PARAM_NAME_MAX
            || !calib_plugin_name_ok(kv->key.via.str.ptr, kv->key.via.str.size))
            return CALIB_REJ_BAD_PARAMS;
        for (uint32_t j = 0; j < i; j++)
            if (map->ptr[j].key.via.str.size == kv->key.via.str.size
                && memcmp(map->ptr[j].key.via.str.ptr, kv->key.via.str.ptr,
                          kv->key.via.str.size) == 0)
                return CALIB_REJ_DUPLICATE_KEY;
        if (!calib_proto_number(&kv->val, &p->values[i]))
            return CALIB_REJ_KEY_TYPE;
        str_copy(p->names[i], sizeof p->names[i], &kv->key.via.str);
    }
    p->nparams = map->size;
    return CALIB_REJ_NONE;
}

/* One segment's parameters: a map holding exactly the message's parameter
 * names (its method's), each once, numbers in the method's domain. */
static int read_segment_params(const msgpack_object *o, const calib_params_msg *p,
                               double *values)
{
    if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size != p->nparams)
        return CALIB_REJ_BAD_PARAMS;
    unsigned seen = 0;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        unsigned j = 0;
        while (j < p->nparams && !(kv->key.type == MSGPACK_OBJECT_STR &&
                                   calib_proto_str_is(&kv->key.via.str, p->names[j])))
            j++;
        if (j == p->nparams || (seen & (1u << j)))
            return CALIB_REJ_BAD_PARAMS;
        seen |= 1u << j;
        if (!calib_proto_number(&kv->val, &values[j]))
            return CALIB_REJ_KEY_TYPE;
        if (!isfinite(values[j]))
            return CALIB_REJ_BAD_VALUE;
    }
    if (p->desc && !params_in_domain(p->method, values))
        return CALIB_REJ_BAD_VALUE;
    return CALIB_REJ_NONE;
}

/* "segments": at most CALIB_PUBMSG_MAX_SEGMENTS "key=value" names (a
 * segment key and value as calib_proto_seg_key_ok and _value_ok take
 * them), each once, to the segment's parameters. */
static int read_segments(const msgpack_object *o, calib_params_msg *p)
{
    p->nsegments = 0;
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size > CALIB_PUBMSG_MAX_SEGMENTS ||
        (o->via.map.size && !p->nparams))
        return CALIB_REJ_BAD_PARAMS;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            return CALIB_REJ_BAD_PARAMS;
        const char *k = kv->key.via.str.ptr;
        size_t len = kv->key.via.str.size;
        const char *eq = len ? memchr(k, '=', len) : NULL;
        if (!eq || !calib_proto_seg_key_ok(k, (size_t)(eq - k)) ||
            !calib_proto_seg_value_ok(eq + 1, len - (size_t)(eq - k) - 1))
            return CALIB_REJ_BAD_PARAMS;
        for (uint32_t j = 0; j < i; j++)
            if (o->via.map.ptr[j].key.via.str.size == len &&
                memcmp(o->via.map.ptr[j].key.via.str.ptr, k, len) == 0)
                return CALIB_REJ_DUPLICATE_KEY;
        calib_params_segment *sg = &p->segments[i];
        memcpy(sg->key, k, (size_t)(eq - k));
        sg->key[eq - k] = 0;
        memcpy(sg->value, eq + 1, len - (size_t)(eq - k) - 1);
        sg->value[len - (size_t)(eq - k) - 1] = 0;
        int r = read_segment_params(&kv->val, p, sg->values);
        if (r)
            return r;
    }
    p->nsegments = o->via.map.size;
    return CALIB_REJ_NONE;
}

/* "prior_weights": absent, or an array of 2 to CALIB_PUBMSG_MAX_WEIGHTS
 * numbers calib_prior_weights_ok takes, in a message of "v" 2 (a v1
 * reader refuses the message; a v1 message holding them is refused here
 * too, so that no writer can put them where an old reader would ignore
 * them). */
static int read_weights(const envelope *e, calib_params_msg *p)
{
    const msgpack_object *o = e->val[K_WEIGHTS];
    p->nweights = 0;
    if (!o)
        return CALIB_REJ_NONE;
    if (e->val[K_V]->via.u64 != CALIB_PUBMSG_VERSION_WEIGHTS)
        return CALIB_REJ_BAD_VERSION;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return CALIB_REJ_KEY_TYPE;
    if (o->via.array.size < 2 || o->via.array.size > CALIB_PUBMSG_MAX_WEIGHTS)
        return CALIB_REJ_BAD_PARAMS;
    for (uint32_t j = 0; j < o->via.array.size; j++)
        if (!calib_proto_number(&o->via.array.ptr[j], &p->weights[j]))
            return CALIB_REJ_KEY_TYPE;
    if (!calib_prior_weights_ok(p->weights, o->via.array.size))
        return CALIB_REJ_BAD_VALUE;
    p->nweights = o->via.array.size;
    return CALIB_REJ_NONE;
}

/* An optional boolean: absent (0), or true / false. */
static int read_flag(const msgpack_object *o, int *flag)
{
    *flag = 0;
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return CALIB_REJ_KEY_TYPE;
    *flag = o->via.boolean;
    return CALIB_REJ_NONE;
}

static int decode_params(const envelope *e, const calib_plugin_registry *reg,
                         calib_params_msg *p)
{
    const msgpack_object *const *val = e->val;
    int r;
    memset(p, 0, sizeof *p);
    if (!val[K_VERSION] || !val[K_METHOD] || !val[K_PARAMS])
        return CALIB_REJ_MISSING_KEY;
    if (val[K_VERSION]->type != MSGPACK_OBJECT_POSITIVE_INTEGER
        || val[K_METHOD]->type != MSGPACK_OBJECT_STR
        || val[K_PARAMS]->type != MSGPACK_OBJECT_MAP)
        return CALIB_REJ_KEY_TYPE;
    p->version = val[K_VERSION]->via.u64;
    const msgpack_object_str *meth = &val[K_METHOD]->via.str;
    if (!calib_plugin_name_ok(meth->ptr, meth->size))
        return CALIB_REJ_BAD_METHOD;
    str_copy(p->method, sizeof p->method, meth);
    str_copy(p->model, sizeof p->model, &val[K_MODEL]->via.str);

    if ((r = read_time(val[K_TS], &p->ts))
        || (r = read_time(val[K_PUBLISHED], &p->published))
        || (r = read_count(val[K_N], &p->n))
        || (r = read_count(val[K_SHADOW_N], &p->shadow_n))
        || (r = read_scores(val[K_BEFORE], &p->before))
        || (r = read_scores(val[K_AFTER], &p->after))
        || (r = read_improvement(val[K_IMPROVEMENT], val[K_CI], p)))
        return r;

    p->desc = calib_plugin_find(reg, p->method);
    const msgpack_object_map *map = &val[K_PARAMS]->via.map;
    if (p->version == 0 && map->size == 0) {
        p->desc = NULL; /* the identity, by any name */
        return CALIB_REJ_NONE;
    }
    r = p->desc ? read_known_params(map, p->desc, p)
                : read_unknown_params(map, p);
    if (r)
        return r;
    for (unsigned j = 0; j < p->nparams; j++)
        if (!isfinite(p->values[j]))
            return CALIB_REJ_BAD_VALUE;
    if (p->desc && !params_in_domain(p->method, p->values))
        return CALIB_REJ_BAD_VALUE;
    if ((r = read_segments(val[K_SEGMENTS], p)) || (r = read_weights(e, p)))
        return r;
    return read_flag(val[K_LABEL_FREE], &p->label_free);
}

/* An optional string of an alert: absent, or a string. */
static int alert_str(const msgpack_object *o, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_STR)
        return CALIB_REJ_KEY_TYPE;
    str_copy(buf, size, &o->via.str);
    return CALIB_REJ_NONE;
}

/* "values": a map of names to numbers or nil, at most
 * CALIB_PUBMSG_MAX_VALUES; names are truncated. */
static int alert_values(const msgpack_object *o, calib_alert_msg *a)
{
    if (!o)
        return CALIB_REJ_NONE;
    if (o->type != MSGPACK_OBJECT_MAP)
        return CALIB_REJ_KEY_TYPE;
    if (o->via.map.size > CALIB_PUBMSG_MAX_VALUES)
        return CALIB_REJ_BAD_PARAMS;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR
            || !number_or_nil(&kv->val, &a->values[i]))
            return CALIB_REJ_KEY_TYPE;
        str_copy(a->value_names[i], sizeof a->value_names[i], &kv->key.via.str);
    }
    a->nvalues = o->via.map.size;
    return CALIB_REJ_NONE;
}

static int decode_alert(const envelope *e, const void *payload, size_t len,
                        calib_alert_msg *a)
{
    int r;
    memset(a, 0, sizeof *a);
    str_copy(a->model, sizeof a->model, &e->val[K_MODEL]->via.str);
    if ((r = read_time(e->val[K_TS], &a->ts))
        || (r = alert_str(e->val[K_SEVERITY], a->severity, sizeof a->severity))
        || (r = alert_str(e->val[K_KIND], a->kind, sizeof a->kind))
        || (r = alert_str(e->val[K_MESSAGE], a->message, sizeof a->message))
        || (r = alert_values(e->val[K_VALUES], a)))
        return r;
    a->payload = payload;
    a->payload_len = len;
    return CALIB_REJ_NONE;
}

int calib_pubmsg_decode(const void *topic, size_t topic_len, const void *payload,
                        size_t payload_len, const calib_plugin_registry *registry,
                        calib_pubmsg *out)
{
    if (!out)
        return CALIB_EINVAL;
    envelope e = {0};
    msgpack_unpacked_init(&e.unp);
    int r = envelope_open(&e, &out->type, topic, topic_len, payload, payload_len);
    if (r == CALIB_REJ_NONE && out->type == CALIB_PUBMSG_PARAMS)
        r = decode_params(&e, registry, &out->params);
    else if (r == CALIB_REJ_NONE && out->type == CALIB_PUBMSG_ALERT)
        r = decode_alert(&e, payload, payload_len, &out->alert);
    msgpack_unpacked_destroy(&e.unp);
    return r;
}
