/* ingest.c — producer messages: decode, route to the model, join, score. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibd.h"
#include "loop.h"

double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double loop_now(const calibd *d)
{
    return (double)uv_now(d->loop) / 1000;
}

/* ------------------------------------------------------------ models */

/* A join table's hash seed: random per process, distinct per model. */
static uint64_t model_seed(const calibd *d)
{
    return d->hash_seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(d->nmodels + 1);
}

/* Fixes a model's form and K, and starts its closed loop. */
static int shape(calibd *d, model *m, int form, size_t k)
{
    if (model_shape(m, form, k, model_seed(d)) != CALIB_OK)
        return REJ_NO_MEMORY;
    if (loop_attach(d, m) != 0) {
        model_free(m);
        return REJ_NO_MEMORY;
    }
    return 0;
}

static model *new_model(calibd *d, const char *name, int *reject)
{
    if (d->nmodels == CFG_MAX_MODELS) {
        *reject = REJ_TOO_MANY_MODELS;
        return NULL;
    }
    if (d->nmodels == d->cap_models) {
        size_t cap = d->cap_models ? 2 * d->cap_models : 8;
        model **v = realloc(d->models, cap * sizeof *v);
        if (!v) {
            *reject = REJ_NO_MEMORY;
            return NULL;
        }
        d->models = v;
        d->cap_models = cap;
    }
    model *m = malloc(sizeof *m);
    if (!m) {
        *reject = REJ_NO_MEMORY;
        return NULL;
    }
    model_cfg mc;
    config_model_for(&d->cfg, name, &mc);
    model_init(m, &mc);
    /* a model configured with its form and K is shaped at once, so labels
     * that come before its first prediction can wait for it */
    if (mc.form >= 0 && (mc.form == CALIB_FORM_GAUSSIAN || mc.form == CALIB_FORM_BINARY || mc.k)) {
        size_t k = mc.form == CALIB_FORM_BINARY ? 2 : mc.form == CALIB_FORM_GAUSSIAN ? 0 : mc.k;
        if (shape(d, m, mc.form, k) != 0) {
            free(m);
            *reject = REJ_NO_MEMORY;
            return NULL;
        }
    }
    d->models[d->nmodels++] = m;
    log_msg(&d->log, LOG_INFO, "model", "%s: created%s", m->name,
            m->shaped ? " (shape from configuration)" : "");
    return m;
}

model *calibd_model(calibd *d, const char *name, size_t len, int create, int *reject)
{
    for (size_t i = 0; i < d->nmodels; i++)
        if (strlen(d->models[i]->name) == len && memcmp(d->models[i]->name, name, len) == 0)
            return d->models[i];
    if (!create)
        return NULL;
    char buf[CFG_NAME_MAX + 1];
    if (len > CFG_NAME_MAX)
        return NULL;
    memcpy(buf, name, len);
    buf[len] = 0;
    if (!d->cfg.auto_models && !config_find_model(&d->cfg, buf)) {
        *reject = REJ_UNKNOWN_MODEL;
        return NULL;
    }
    return new_model(d, buf, reject);
}

void calibd_free_models(calibd *d)
{
    for (size_t i = 0; i < d->nmodels; i++) {
        model_free(d->models[i]);
        free(d->models[i]);
    }
    free(d->models);
    d->models = NULL;
    d->nmodels = d->cap_models = 0;
}

/* ------------------------------------------------------------ rejections */

static void reject(calibd *d, model *m, int reason, const char *detail)
{
    uint64_t *counter = m ? &m->rejected[reason] : &d->rejected[reason];
    (*counter)++;
    log_rl(&d->log, LOG_WARN, "ingest", "%s: rejected (%s)%s%s", m ? m->name : "-",
           reject_name(reason), detail ? ": " : "", detail ? detail : "");
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
    m->last_label_mono = loop_now(d);
}

static void pred_record(calibd *d, model *m, int form, const calib_msg_rec *r, double now)
{
    m->last_prediction_mono = loop_now(d);
    if (m->predictions++ == 0)
        m->first_prediction_mono = m->last_prediction_mono;
    if (form != m->form) {
        model_canonical(m, form, d->x, m->xcal);
        memcpy(d->x, m->xcal, m->width * sizeof *d->x);
    }
    if (r->has_y) {
        int rc = calib_proto_check_y(m->form, m->k, r->y);
        if (rc != CALIB_REJ_NONE) {
            reject(d, m, rc, "inline y");
            return;
        }
        model_observe(m, d->x, r->y, now);
        m->inline_scored++;
        note_label(d, m); /* an inline outcome is a label too */
        return;
    }
    calib_id id;
    calib_join_result jr;
    if (make_id(r, &id) != CALIB_OK) {
        reject(d, m, CALIB_REJ_BAD_ID, NULL);
        return;
    }
    if (calib_join_pred(&m->join, &id, d->x, r->ts, now, &jr) != CALIB_OK) {
        reject(d, m, CALIB_REJ_BAD_ID, NULL);
        return;
    }
    if (jr.status == CALIB_JOIN_JOINED)
        model_observe(m, d->x, jr.y, now);
}

static void label_record(calibd *d, model *m, const calib_msg_rec *r, double now)
{
    m->labels++;
    note_label(d, m);
    int rc = calib_proto_check_y(m->form, m->k, r->y);
    if (rc != CALIB_REJ_NONE) {
        reject(d, m, rc, "label");
        return;
    }
    calib_id id;
    calib_join_result jr;
    if (make_id(r, &id) != CALIB_OK ||
        calib_join_label(&m->join, &id, r->y, r->ts, now, &jr) != CALIB_OK) {
        reject(d, m, CALIB_REJ_BAD_ID, NULL);
        return;
    }
    if (jr.status == CALIB_JOIN_JOINED)
        model_observe(m, jr.x, r->y, now);
}

/* Fixes the model's shape at its first prediction, or checks it. */
static int check_shape(calibd *d, model *m, const calib_msg *msg)
{
    if (m->shaped)
        return model_accepts(m, msg->form, msg->k);
    if (m->cfg.form >= 0 && m->cfg.form != msg->form)
        return REJ_SHAPE;
    if (m->cfg.k && msg->k != m->cfg.k)
        return REJ_SHAPE;
    if (shape(d, m, msg->form, msg->k) != 0)
        return REJ_NO_MEMORY;
    log_msg(&d->log, LOG_INFO, "model", "%s: form %s, K = %zu", m->name,
            msg->form == CALIB_FORM_LOGITS ? "logits" : msg->form == CALIB_FORM_PROBS ? "probs"
            : msg->form == CALIB_FORM_BINARY ? "binary" : "gaussian", msg->k);
    return 0;
}

/* ------------------------------------------------------------ messages */

void ingest_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg)
{
    calibd *d = arg;
    (void)z;
    d->messages++;
    if (nframes != 2) {
        reject(d, NULL, REJ_FRAMING, nframes < 2 ? "one frame" : "more than two frames");
        return;
    }
    calib_msg *msg = &d->msg;
    /* the model's K, once known, reads a row-form bin that has no "k" */
    int why = 0;
    model *m = calibd_model(d, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), 0, &why);
    int rc = calib_msg_decode_k(msg, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]),
                                zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]),
                                m && m->shaped ? m->k : 0);
    if (!m && rc == CALIB_REJ_NONE)
        m = calibd_model(d, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), 1, &why);
    if (rc != CALIB_REJ_NONE) {
        reject(d, m, rc, NULL);
        return;
    }
    if (!m) {
        reject(d, NULL, why ? why : REJ_UNKNOWN_MODEL, NULL);
        return;
    }
    if (msg->type == CALIB_MSG_PRED && (rc = check_shape(d, m, msg)) != 0) {
        reject(d, m, rc, NULL);
        return;
    }
    if (msg->type == CALIB_MSG_LABEL && !m->shaped) {
        reject(d, m, REJ_UNSHAPED, "configure the model's form and k to keep "
                                   "labels that come before its first prediction");
        return;
    }
    double now = wall_now();
    for (size_t i = 0; i < msg->n; i++) {
        calib_msg_rec r;
        rc = calib_msg_record(msg, i, &r, msg->type == CALIB_MSG_PRED ? d->x : NULL);
        if (rc != CALIB_REJ_NONE) {
            reject(d, m, rc, NULL);
            continue;
        }
        if (msg->type == CALIB_MSG_PRED)
            pred_record(d, m, msg->form, &r, now);
        else
            label_record(d, m, &r, now);
    }
}
