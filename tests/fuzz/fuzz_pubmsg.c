/*
 * fuzz_pubmsg.c — the messages calibd publishes ("params", "alert") as a
 * serving node reads them: calib_pubmsg_decode, then what libcalib_client
 * does with an accepted one (its handle() in src/client/client.c, without
 * the socket): install it in the model's params store, load it back, and
 * apply it to predictions of every form. Checked: the decoder's promises,
 * that writing a decoded message and decoding it again gives it back, and
 * that applied parameters give a prediction of the form asked.
 *
 * An input is 1 byte T, T bytes of topic (frame 0), then the payload
 * (frame 1) to the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/client.h"
#include "calib/mpw.h"
#include "calib/pubmsg.h"
#include "params_store.h"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Equal, or both absent: a non-finite figure is written as nil (or not
 * at all) and read back as NaN. */
static int same(double a, double b)
{
    return a == b || (!isfinite(a) && !isfinite(b));
}

static int same_scores(const calib_pubmsg_scores *a, const calib_pubmsg_scores *b)
{
    return same(a->brier, b->brier) && same(a->log, b->log) && same(a->dss, b->dss);
}

static void check_params(const calib_params_msg *p, const void *topic, size_t topic_len)
{
    FUZZ_CHECK(strlen(p->model) == topic_len && memcmp(p->model, topic, topic_len) == 0);
    FUZZ_CHECK(p->nparams <= CALIB_RECAL_MAX_PARAMS);
    FUZZ_CHECK(!p->desc || p->nparams == p->desc->nparams);
    for (unsigned j = 0; j < p->nparams; j++)
        FUZZ_CHECK(isfinite(p->values[j]));
    FUZZ_CHECK(isnan(p->ts) || isfinite(p->ts));
    FUZZ_CHECK(isnan(p->published) || isfinite(p->published));
}

/* Written again and decoded: the same message. */
static void round_trip_params(const calib_params_msg *p)
{
    calib_mpw w;
    calib_mpw_init(&w);
    FUZZ_CHECK(calib_params_msg_write(&w, p) == CALIB_OK);
    calib_pubmsg again;
    FUZZ_CHECK(calib_pubmsg_decode(p->model, strlen(p->model), w.sb.data, w.sb.size, NULL,
                                   &again) == CALIB_REJ_NONE);
    const calib_params_msg *q = &again.params;
    FUZZ_CHECK(again.type == CALIB_PUBMSG_PARAMS);
    FUZZ_CHECK(strcmp(p->model, q->model) == 0 && strcmp(p->method, q->method) == 0);
    FUZZ_CHECK(p->version == q->version && p->desc == q->desc && p->nparams == q->nparams);
    for (unsigned j = 0; j < p->nparams; j++)
        FUZZ_CHECK(strcmp(p->names[j], q->names[j]) == 0 && p->values[j] == q->values[j]);
    FUZZ_CHECK(same(p->ts, q->ts) && same(p->published, q->published));
    FUZZ_CHECK(p->n == q->n && p->shadow_n == q->shadow_n);
    FUZZ_CHECK(same_scores(&p->before, &q->before) && same_scores(&p->after, &q->after));
    FUZZ_CHECK(same(p->improvement, q->improvement));
    FUZZ_CHECK(same(p->ci[0], q->ci[0]) && same(p->ci[1], q->ci[1]));
    calib_mpw_destroy(&w);
}

static void round_trip_alert(const calib_alert_msg *a)
{
    calib_mpw w;
    calib_mpw_init(&w);
    FUZZ_CHECK(calib_alert_msg_write(&w, a) == CALIB_OK);
    calib_pubmsg again;
    FUZZ_CHECK(calib_pubmsg_decode(a->model, strlen(a->model), w.sb.data, w.sb.size, NULL,
                                   &again) == CALIB_REJ_NONE);
    const calib_alert_msg *b = &again.alert;
    FUZZ_CHECK(again.type == CALIB_PUBMSG_ALERT);
    FUZZ_CHECK(strcmp(a->model, b->model) == 0 && strcmp(a->severity, b->severity) == 0);
    FUZZ_CHECK(strcmp(a->kind, b->kind) == 0 && strcmp(a->message, b->message) == 0);
    FUZZ_CHECK(same(a->ts, b->ts) && a->nvalues == b->nvalues);
    for (unsigned i = 0; i < a->nvalues; i++)
        FUZZ_CHECK(strcmp(a->value_names[i], b->value_names[i]) == 0 &&
                   same(a->values[i], b->values[i]));
    calib_mpw_destroy(&w);
}

/* A recalibrated prediction of form: probabilities, p, or mean and var. */
static void check_output(int form, size_t k, const double *out)
{
    if (form == CALIB_FORM_GAUSSIAN) {
        FUZZ_CHECK(!isnan(out[0]) && !isnan(out[1]) && out[1] >= 0);
        return;
    }
    size_t n = form == CALIB_FORM_BINARY ? 1 : k;
    double sum = 0;
    for (size_t j = 0; j < n; j++) {
        FUZZ_CHECK(out[j] >= 0 && out[j] <= 1); /* false for NaN too */
        sum += out[j];
    }
    FUZZ_CHECK(form == CALIB_FORM_BINARY || fabs(sum - 1) < 1e-6);
}

/* Predictions of every form, ordinary and extreme, as serving nodes send. */
static const struct prediction {
    int form;
    size_t k;
    double x[4];
} predictions[] = {
    {CALIB_FORM_LOGITS, 3, {2.0, -1.0, 0.5}},
    {CALIB_FORM_LOGITS, 2, {700, -700}},
    {CALIB_FORM_LOGITS, 4, {0, 0, 0, 0}},
    {CALIB_FORM_LOGITS, 2, {1e308, -1e308}}, /* finite, their difference not */
    {CALIB_FORM_PROBS, 3, {0.7, 0.2, 0.1}},
    {CALIB_FORM_PROBS, 2, {1, 0}},
    {CALIB_FORM_BINARY, 2, {0.8}},
    {CALIB_FORM_BINARY, 2, {0}},
    {CALIB_FORM_BINARY, 2, {1}},
    {CALIB_FORM_GAUSSIAN, 0, {1.5, 0.25}},
    {CALIB_FORM_GAUSSIAN, 0, {-1e6, 1e-9}},
};

/* What libcalib_client does with an accepted params message. */
static void serve(const calib_params_msg *p)
{
    pstore s;
    FUZZ_CHECK(pstore_init(&s, p->model, strlen(p->model)) == CALIB_OK);
    int installed = pstore_install(&s, p);
    FUZZ_CHECK(installed == (p->version > 0));
    FUZZ_CHECK(pstore_version(&s) == p->version);
    FUZZ_CHECK(!pstore_install(&s, p)); /* the same version again: stale */
    pstore_snapshot snap;
    pstore_load(&s, &snap);
    calib_params_msg held;
    pstore_get(&s, &held);
    FUZZ_CHECK(snap.version == p->version && held.version == p->version);
    for (size_t i = 0; i < sizeof predictions / sizeof predictions[0]; i++) {
        const struct prediction *c = &predictions[i];
        double out[4];
        if (calib_client_params_apply(&held, c->form, c->k, c->x, out) == CALIB_OK)
            check_output(c->form, c->k, out);
    }
    pstore_destroy(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t t = data[0] < size - 1 ? data[0] : size - 1;
    const uint8_t *payload = data + 1 + t;
    size_t len = size - 1 - t;
    /* the topic in a buffer of its own: ASan sees a read past its end */
    uint8_t *topic = malloc(t ? t : 1);
    FUZZ_CHECK(topic != NULL);
    memcpy(topic, data + 1, t);
    calib_pubmsg msg;
    int rc = calib_pubmsg_decode(topic, t, payload, len, NULL, &msg);
    if (rc != CALIB_REJ_NONE) {
        FUZZ_CHECK(rc > CALIB_REJ_NONE && rc < CALIB_REJ_COUNT);
        free(topic);
        return 0;
    }
    if (msg.type == CALIB_PUBMSG_PARAMS) {
        check_params(&msg.params, topic, t);
        round_trip_params(&msg.params);
        serve(&msg.params);
    } else if (msg.type == CALIB_PUBMSG_ALERT) {
        FUZZ_CHECK(strlen(msg.alert.model) == t && memcmp(msg.alert.model, topic, t) == 0);
        FUZZ_CHECK(msg.alert.nvalues <= CALIB_PUBMSG_MAX_VALUES);
        FUZZ_CHECK(msg.alert.payload == payload && msg.alert.payload_len == len);
        round_trip_alert(&msg.alert);
    } else {
        FUZZ_CHECK(msg.type == CALIB_PUBMSG_OTHER);
    }
    free(topic);
    return 0;
}
