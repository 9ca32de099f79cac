/* ingest.c — producer messages: decode, route to the model, join, score. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "ingest.h"
#include "kafka.h"
#include "registry.h"


/* ------------------------------------------------------------ rejections */

/* Bytes of a topic a log line shows; longer ones are cut, with their length. */
#define LOG_TOPIC_MAX 64

/*
 * Counts a rejection for model m (NULL: unknown, counted globally) and logs
 * it with the topic as received (escaped, cut), the reason, the key at
 * fault (NULL: none) and what to fix (NULL: nothing to add). The rate
 * limit is per reason, so a flood of one cannot hide another.
 */
static void reject_topic(calibd *d, model *m, const void *topic, size_t topic_len,
                         int reason, const char *key, const char *detail)
{
    reason = reject_count(m ? m->rejected : d->rejected, reason);
    ingest_outcome *o = d->ingest_out;
    if (o)
        o->rejected++;
    if (o && !o->first) {
        o->first = reason;
        snprintf(o->key, sizeof o->key, "%s", key ? key : "");
        snprintf(o->detail, sizeof o->detail, "%s", detail ? detail : "");
    }
    char t[LOG_ESCAPE_SIZE(LOG_TOPIC_MAX)];
    log_escape(t, sizeof t, topic, topic_len, LOG_TOPIC_MAX);
    const char *name = reject_name(reason);
    log_rl_key(&d->log, name, LOG_WARN, "ingest", "topic \"%s\"%s: rejected (%s)%s%s%s%s%s",
               t, m ? "" : " (no model)", name, key ? ", key \"" : "", key ? key : "",
               key ? "\"" : "", detail ? ": " : "", detail ? detail : "");
}

/* A rejection of one record of model m, whose name is the topic. */
static void reject(calibd *d, model *m, int reason, const char *key, const char *detail)
{
    reject_topic(d, m, m->name, strlen(m->name), reason, key, detail);
}

/* What to fix for a message the decoder rejected, in buf (or NULL). */
static const char *decode_detail(const calib_msg *msg, int reason, char *buf, size_t len)
{
    const calib_msg_fault *f = &msg->fault;
    switch (reason) {
    case CALIB_REJ_BIN_AMBIGUOUS:
        snprintf(buf, len, "a bin of %zu bytes is %zu float32 or %zu float64, and the "
                 "model's K is not known yet; send \"k\" (the number of classes) with "
                 "the prediction, or configure k in its [model] section",
                 f->bin_bytes, f->bin_bytes / 4, f->bin_bytes / 8);
        return buf;
    case CALIB_REJ_BIN_LENGTH:
        if (f->bin_values)
            snprintf(buf, len, "a bin of %zu bytes; %llu values take %llu bytes as float32 "
                     "or %llu as float64", f->bin_bytes, (unsigned long long)f->bin_values,
                     4ULL * f->bin_values, 8ULL * f->bin_values);
        else
            snprintf(buf, len, "a bin of %zu bytes is no whole number of float32 values",
                     f->bin_bytes);
        return buf;
    case CALIB_REJ_MISSING_KEY:
        return f->key && strcmp(f->key, "k") == 0 ? "the batch form needs \"k\" with "
               "logits or probs" : NULL;
    case CALIB_REJ_AMBIGUOUS_OUTPUT:
        return "a prediction needs exactly one of logits, probs, p, or mean with var";
    default:
        return NULL;
    }
}

/* ------------------------------------------------------------ records */

static int make_id(const calib_msg_rec *r, calib_id *id)
{
    if (r->id_kind == CALIB_MSG_ID_STR)
        return calib_id_str(id, r->id, r->id_len);
    if (r->id_kind == CALIB_MSG_ID_UINT) {
        calib_id_u64(id, r->id_num);
        return CALIB_OK;
    }
    return CALIB_EINVAL;
}

/* When the model last had an outcome (label starvation). */
static void note_label(const calibd *d, model *m)
{
    m->last_label_mono = tick_now(d);
}

/* Checks an outcome against the model's K (or form): 0 if it fits, else
 * the rejection, counted and logged with what was wrong. */
static int check_y(calibd *d, model *m, double y, const char *what)
{
    int rc = calib_proto_check_y(m->form, m->k, y);
    if (rc == CALIB_REJ_NONE)
        return 0;
    char why[ERR_MAX];
    if (m->form == CALIB_FORM_GAUSSIAN)
        snprintf(why, sizeof why, "%s y = %g", what, y);
    else
        snprintf(why, sizeof why, "%s y = %g is not a class in [0, %zu)", what, y, m->k);
    reject(d, m, rc, "y", why);
    return rc;
}

/* A message's two times (clock.h): when its pairs are scored (the steady
 * clock, for windows) and when its items start waiting (monotonic, for the
 * label TTL). */
typedef struct ingest_time {
    double steady, mono;
    double wall; /* when a segment value takes a slot (read only for a message with seg) */
} ingest_time;

/* A joined pair: scored, unless the label waited for the model's first
 * prediction and its y turns out not to fit the model's K. */
static void score_pair(calibd *d, model *m, const double *x, double y, double now)
{
    /* x: the outputs, the segment codes, the label-free estimates */
    /* the label's fault, of an earlier message: counted for the model, not
     * held against this one's outcome */
    ingest_outcome *out = d->ingest_out;
    d->ingest_out = NULL;
    int bad = check_y(d, m, y, "a label that waited for its prediction:") != 0;
    d->ingest_out = out;
    if (bad)
        return;
    model_observe_at(m, x, y, now, x + m->width, INFINITY, m->lf_slot ? x + m->lf_slot : NULL);
}

/* Record i's segments, counted, as codes after its outputs in d->x. */
static void pred_segments(calibd *d, model *m, const calib_msg *msg, size_t i, double now)
{
    if (!m->seg.cfg.keys)
        return;
    if (!msg->nseg) { /* none: the codes say so */
        memset(d->x + m->width, 0, m->seg.cfg.keys * sizeof *d->x);
        return;
    }
    seg_kv kv[CALIB_PROTO_MAX_SEG];
    for (size_t j = 0; j < msg->nseg; j++)
        if (calib_msg_seg(msg, i, j, &kv[j].key, &kv[j].key_len, &kv[j].val,
                          &kv[j].val_len) != CALIB_OK)
            return; /* cannot be: the decoder checked them */
    model_segments(m, kv, msg->nseg, d->x + m->width, now);
}

/* A label that found no prediction, whose value waits as a prediction of
 * the other kind of id (string "5" against integer 5: different ids, which
 * never join): counted, and said at a limited rate with what to fix. Only
 * labels are checked: they wait rarely (their prediction came first),
 * where predictions wait as a rule, and a lookup each would cost every
 * joined pair. */
static void check_id_kind(calibd *d, model *m, const calib_id *id, int kind)
{
    calib_id alt;
    int other = kind == CALIB_JOIN_PRED ? CALIB_JOIN_LABEL : CALIB_JOIN_PRED;
    if (!calib_id_other_kind(id, &alt) || calib_join_waiting(&m->join, &alt) != other)
        return;
    m->id_kind_mismatches++;
    char shown[CALIB_ID_MAX + 3];
    if (id->kind == CALIB_ID_U64)
        snprintf(shown, sizeof shown, "%llu", (unsigned long long)id->v.u64);
    else
        snprintf(shown, sizeof shown, "\"%.*s\"", (int)id->len, (const char *)id->v.str);
    log_rl(&d->log, LOG_WARN, "join", "%s: a %s's id %s is %s, and its %s waits with the same "
           "value as %s: string and integer ids never join (calibd-protocol(7), Joining); "
           "send both with one type", m->name, kind == CALIB_JOIN_PRED ? "prediction" : "label",
           shown, id->kind == CALIB_ID_U64 ? "an integer" : "a string",
           kind == CALIB_JOIN_PRED ? "label" : "prediction",
           id->kind == CALIB_ID_U64 ? "a string" : "an integer");
}

static void pred_record(calibd *d, model *m, const calib_msg *msg, size_t i,
                        const calib_msg_rec *r, const ingest_time *t)
{
    int form = msg->form;
    double now = t->steady;
    m->last_prediction_mono = tick_now(d);
    if (m->predictions++ == 0)
        m->first_prediction_mono = m->last_prediction_mono;
    if (form != m->form) {
        model_canonical(m, form, d->x, m->xcal);
        memcpy(d->x, m->xcal, m->width * sizeof *d->x);
    }
    if (r->has_y) {
        if (check_y(d, m, r->y, "inline") != 0)
            return;
        pred_segments(d, m, msg, i, t->wall); /* counted once taken */
        model_observe_inline(m, d->x, r->y, now, d->x + m->width);
        m->inline_scored++;
        note_label(d, m); /* an inline outcome is a label too */
        return;
    }
    calib_id id;
    calib_join_result jr;
    if (make_id(r, &id) != CALIB_OK) {
        reject(d, m, CALIB_REJ_BAD_ID, "id", NULL);
        return;
    }
    pred_segments(d, m, msg, i, t->wall); /* the codes wait with the outputs */
    /* into the label-free estimates at arrival, its join or not (a
     * prediction served is one whatever becomes of its id); its
     * estimates wait with it */
    model_predicted(m, d->x, d->x + m->width, m->lf_slot ? d->x + m->lf_slot : NULL);
    if (calib_join_pred(&m->join, &id, d->x, r->ts, t->mono, &jr) != CALIB_OK) {
        reject(d, m, CALIB_REJ_BAD_ID, "id", NULL);
        return;
    }
    if (jr.status == CALIB_JOIN_JOINED)
        score_pair(d, m, d->x, jr.y, now);
}

/* A label waits in the join table whatever the model's shape: its y, known
 * to be finite, is checked against K now if the model has one, else when it
 * joins. */
static void label_record(calibd *d, model *m, const calib_msg_rec *r, const ingest_time *t)
{
    double now = t->steady;
    m->labels++;
    note_label(d, m);
    if (m->shaped && check_y(d, m, r->y, "label") != 0)
        return;
    calib_id id;
    calib_join_result jr;
    if (make_id(r, &id) != CALIB_OK ||
        calib_join_label(&m->join, &id, r->y, r->ts, t->mono, &jr) != CALIB_OK) {
        reject(d, m, CALIB_REJ_BAD_ID, "id", NULL);
        return;
    }
    if (jr.status == CALIB_JOIN_JOINED)
        /* shaped: y checked above */
        model_observe_at(m, jr.x, r->y, now, jr.x + m->width, jr.pred_arrived,
                         m->lf_slot ? jr.x + m->lf_slot : NULL);
    else if (jr.status == CALIB_JOIN_WAITING)
        check_id_kind(d, m, &id, CALIB_JOIN_LABEL);
}

/* "logits with K = 10", "gaussian", "probs with any K", "any form". */
static void shape_desc(char *buf, size_t len, int form, size_t k)
{
    if (form < 0)
        snprintf(buf, len, "any form");
    else if (form == CALIB_FORM_GAUSSIAN)
        snprintf(buf, len, "gaussian");
    else if (k)
        snprintf(buf, len, "%s with K = %zu", calib_form_name(form), k);
    else
        snprintf(buf, len, "%s with any K", calib_form_name(form));
}

/* Fixes the model's shape at its first prediction, or checks it; 0, or the
 * rejection with what was wrong in why. */
static int check_shape(calibd *d, model *m, const calib_msg *msg, char *why, size_t len)
{
    int form = msg->form;
    size_t k = msg->k;
    if (m->shaped && model_accepts(m, form, k) == 0)
        return 0;
    if (m->shaped || (m->cfg.form >= 0 && m->cfg.form != form) ||
        (m->cfg.k && k != m->cfg.k)) {
        char have[80], got[80];
        shape_desc(have, sizeof have, m->shaped ? m->form : m->cfg.form,
                   m->shaped ? m->k : m->cfg.k);
        shape_desc(got, sizeof got, form, k);
        snprintf(why, len, "the model is %s%s, this prediction %s",
                 m->shaped ? "" : "configured as ", have, got);
        return REJ_SHAPE;
    }
    int rc = registry_shape(d, m, form, k, why, len);
    if (rc)
        return rc;
    log_msg(&d->log, LOG_INFO, "model", "%s: form %s, K = %zu", m->name, calib_form_name(form),
            k);
    return 0;
}

/* The key a shape mismatch is about: K or the output form. */
static const char *shape_key(const calib_msg *msg)
{
    static const char *const keys[] = {"logits", "probs", "p", "mean"};
    return msg->form >= 0 && msg->form <= CALIB_FORM_GAUSSIAN ? keys[msg->form] : NULL;
}

/* ------------------------------------------------------------ messages */

/* Decodes frames (topic, payload) with the model's K as the hint for a
 * row-form bin, finding or creating the model; NULL when the message is
 * rejected (counted and logged). */
static model *decode(calibd *d, const char *topic, size_t topic_len, const void *payload,
                     size_t payload_len)
{
    calib_msg *msg = &d->msg;
    int why = 0;
    model *m = registry_get(d, topic, topic_len, 0, &why);
    int rc = calib_msg_decode_k(msg, topic, topic_len, payload, payload_len,
                                m && m->shaped ? m->k : 0);
    if (rc != CALIB_REJ_NONE) {
        char buf[400];
        reject_topic(d, m, topic, topic_len, rc, msg->fault.key,
                     decode_detail(msg, rc, buf, sizeof buf));
        return NULL;
    }
    if (!m)
        m = registry_get(d, topic, topic_len, 1, &why);
    if (!m) {
        why = why ? why : REJ_UNKNOWN_MODEL;
        reject_topic(d, NULL, topic, topic_len, why, NULL, why == REJ_UNKNOWN_MODEL
                     ? "no [model] section names it, and auto_models = no"
                     : why == REJ_TOO_MANY_MODELS ? "calibd holds as many models as it can"
                     : why == REJ_MEMORY_LIMIT ? "the models hold all of memory_limit; raise "
                       "memory_limit, or lower max_models or the models' max_pending, "
                       "joined_memory, ring or reservoir"
                     : "out of memory for a new model");
        return NULL;
    }
    if (m->kpart != d->source) {
        /* a partition's model is replayed from its partition alone (kafka.h) */
        char where[KAFKA_TOPIC_MAX + 64];
        if (m->kpart)
            snprintf(where, sizeof where, "the model is fed from Kafka partition %s/%d",
                     m->kpart->topic, (int)m->kpart->partition);
        else
            snprintf(where, sizeof where, "the model is fed from ZeroMQ or HTTP here");
        reject_topic(d, m, topic, topic_len, REJ_OTHER_SOURCE, NULL, where);
        return NULL;
    }
    return m;
}

void ingest_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg)
{
    calibd *d = arg;
    (void)z;
    if (nframes != 2) {
        d->messages++;
        reject_topic(d, NULL, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), CALIB_REJ_FRAMING,
                     NULL, nframes < 2 ? "one frame; a message is a topic and a payload"
                     : "more than two frames; a message is a topic and a payload");
        return;
    }
    ingest_message(d, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]),
                   zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]), -1, NULL);
}

void ingest_reject(calibd *d, const void *topic, size_t topic_len, int reason,
                   const char *why, ingest_outcome *out)
{
    d->messages++;
    if (out)
        *out = (ingest_outcome){0};
    d->ingest_out = out;
    int unused = 0;
    model *m = registry_get(d, topic, topic_len, 0, &unused);
    reject_topic(d, m, topic, topic_len, reason, NULL, why);
    if (out)
        out->reason = out->first;
    d->ingest_out = NULL;
}

/* The records of a decoded message of model m. */
static void ingest_records(calibd *d, model *m, ingest_outcome *out);

void ingest_message(calibd *d, const void *topic, size_t topic_len, const void *payload,
                    size_t payload_len, int want, ingest_outcome *out)
{
    d->messages++;
    if (out)
        *out = (ingest_outcome){0};
    d->ingest_out = out;
    calib_msg *msg = &d->msg;
    model *m = decode(d, topic, topic_len, payload, payload_len);
    char why[ERR_MAX];
    int rc;
    if (!m) {
        if (out)
            out->reason = out->first;
    } else if (want >= 0 && msg->type != want) {
        reject(d, m, CALIB_REJ_BAD_TYPE, "type", want == CALIB_MSG_PRED
               ? "this endpoint takes predictions (\"type\": \"pred\")"
               : "this endpoint takes labels (\"type\": \"label\")");
        if (out)
            out->reason = out->first;
    } else if (msg->type == CALIB_MSG_PRED && (rc = check_shape(d, m, msg, why, sizeof why)) != 0) {
        reject(d, m, rc, rc == REJ_SHAPE ? shape_key(msg) : NULL, why);
        if (out)
            out->reason = out->first;
    } else {
        ingest_records(d, m, out);
    }
    d->ingest_out = NULL;
}

/* What a prediction's probabilities were, where a value rejected them
 * (x: the record's outputs, as calib_msg_record decoded them). */
static void values_said(const calib_msg *msg, int rc, const double *x, char *buf, size_t len)
{
    buf[0] = 0;
    if (msg->type != CALIB_MSG_PRED)
        return;
    if (msg->form == CALIB_FORM_BINARY && rc == CALIB_REJ_PROB_RANGE) {
        snprintf(buf, len, "p = %.17g", x[0]);
        return;
    }
    if (msg->form != CALIB_FORM_PROBS)
        return;
    if (rc == CALIB_REJ_PROB_SUM) {
        double sum = 0;
        for (size_t j = 0; j < msg->k; j++)
            sum += x[j];
        snprintf(buf, len, "they sum to %.17g", sum);
    } else if (rc == CALIB_REJ_PROB_RANGE) {
        for (size_t j = 0; j < msg->k; j++)
            if (!(x[j] >= 0 && x[j] <= 1)) {
                snprintf(buf, len, "probs[%zu] = %.17g", j, x[j]);
                break;
            }
    }
}

static void ingest_records(calibd *d, model *m, ingest_outcome *out)
{
    calib_msg *msg = &d->msg;
    char why[ERR_MAX];
    int rc;
    if (out)
        out->records = msg->n;
    ingest_time now = {steady_now(d), tick_now(d), msg->nseg ? wall_now() : 0};
    for (size_t i = 0; i < msg->n; i++) {
        calib_msg_rec r;
        rc = calib_msg_record(msg, i, &r, msg->type == CALIB_MSG_PRED ? d->x : NULL);
        if (rc != CALIB_REJ_NONE) {
            char vals[64];
            values_said(msg, rc, d->x, vals, sizeof vals);
            if (msg->batch)
                snprintf(why, sizeof why, "record %zu of %zu%s%s", i + 1, msg->n,
                         vals[0] ? ": " : "", vals);
            else
                snprintf(why, sizeof why, "%s", vals);
            reject(d, m, rc, r.fault_key, why[0] ? why : NULL);
            continue;
        }
        if (msg->type == CALIB_MSG_PRED)
            pred_record(d, m, msg, i, &r, &now);
        else
            label_record(d, m, &r, &now);
    }
}
