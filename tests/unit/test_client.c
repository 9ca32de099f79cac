/* test_client.c — the serving-node client (its decoder, calib_pubmsg_decode,
 * is libcalib's: test_pubmsg.c): messages written by the codec, version ordering,
 * exact topics and counters over a socket, apply against calib_recal_apply_*
 * directly, the background thread end to end over TCP, and atomic swaps
 * under concurrent readers. */
#include "unit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>
#include <zmq.h>

#include "calib/calib.h"
#include "calib/client.h"
#include "calib/mpw.h"
#include "calib/pubmsg.h"
#include "calib/plugin.h"
#include "calib/recal.h"

#include "mp.h"
#include "pubmsg_util.h"

/* ------------------------------------------------------------------ messages */

/* A complete params message, as calibd writes it (calib_params_msg_write),
 * with n parameters. */
static void params_msg(payload *p, const char *model, uint64_t version,
                       const char *method, unsigned n, const char *const *names,
                       const double *values)
{
    calib_params_msg m;
    calib_params_msg_init(&m, model);
    m.version = version;
    snprintf(m.method, sizeof m.method, "%s", method);
    m.nparams = n;
    for (unsigned i = 0; i < n; i++) {
        snprintf(m.names[i], sizeof m.names[i], "%s", names[i]);
        m.values[i] = values[i];
    }
    m.ts = 1.7e9;
    m.n = 1000;
    m.before = (calib_pubmsg_scores){.brier = 0.25, .log = 0.7, .dss = NAN};
    m.after = (calib_pubmsg_scores){.brier = 0.2, .log = 0.6, .dss = NAN};
    m.improvement = 0.05;
    m.ci[0] = 0.03;
    m.ci[1] = 0.07;
    pl_of_params(p, &m);
}

static const char *const T_NAMES[] = {"T"};
static const char *const AB_NAMES[] = {"a", "b"};
static const char *const WB_NAMES[] = {"w", "b"};
static const char *const ABC_NAMES[] = {"a", "b", "c"};

/* Decodes a params message (calib_pubmsg_decode) into out. */
static int decode_pl(const char *topic, const payload *p,
                     const calib_plugin_registry *reg, calib_client_params *out)
{
    calib_pubmsg msg;
    int r = decode_as(CALIB_PUBMSG_PARAMS, topic, strlen(topic), p->sb.data, p->sb.size,
                      reg, &msg);
    *out = msg.params;
    return r;
}

static void mix_msg(payload *p, const char *model, uint64_t version, double v)
{
    double vals[8];
    for (int j = 0; j < 8; j++)
        vals[j] = v;
    params_msg(p, model, version, "mix8", 8, mix8.param_names, vals);
}

/* ------------------------------------------------------------------ errors */

static void client_errors(void **state)
{
    const int codes[] = {CALIB_ECLIENT_ZMQ, CALIB_ECLIENT_MODEL, CALIB_ECLIENT_METHOD,
                         CALIB_ECLIENT_FORM, CALIB_ECLIENT_BUSY};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        assert_string_not_equal(calib_client_strerror(codes[i]),
                                calib_strerror(codes[i]));
    assert_string_equal(calib_client_strerror(CALIB_EINVAL), calib_strerror(CALIB_EINVAL));
}

/* ------------------------------------------------------------------ apply */

/* A params set as decoded from a message. */
static calib_client_params decoded(const char *method, unsigned n,
                                   const char *const *names, const double *v)
{
    calib_client_params p;
    payload pl;
    params_msg(&pl, "m1", 1, method, n, names, v);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    return p;
}

/* The client's result equals calib_recal_apply_* bit for bit, also in place. */
static void check_same(const calib_client_params *p, calib_recal_apply_fn fn,
                       int form, size_t k, const double *x)
{
    size_t w = calib_form_width(form, k);
    double want[8], got[8], inplace[8];
    assert_int_equal(fn(p->values, form, k, x, want), CALIB_OK);
    assert_int_equal(calib_client_params_apply(p, form, k, x, got), CALIB_OK);
    memcpy(inplace, x, w * sizeof *x);
    assert_int_equal(calib_client_params_apply(p, form, k, inplace, inplace), CALIB_OK);
    for (size_t j = 0; j < w; j++) {
        assert_true(got[j] == want[j]);
        assert_true(inplace[j] == want[j]);
    }
}

static void apply_matches_recal(void **state)
{
    const double logits4[] = {2.0, -1.0, 0.5, 0.25};
    const double probs3[] = {0.7, 0.2, 0.1};
    const double logits2[] = {0.3, 1.9};
    const double probs2[] = {0.35, 0.65};
    const double bin[] = {0.8};
    const double gauss[] = {3.0, 0.5};

    calib_client_params t = decoded("temperature", 1, T_NAMES, (double[]){1.7});
    check_same(&t, calib_recal_apply_temperature, CALIB_FORM_LOGITS, 4, logits4);
    check_same(&t, calib_recal_apply_temperature, CALIB_FORM_PROBS, 3, probs3);
    check_same(&t, calib_recal_apply_temperature, CALIB_FORM_BINARY, 2, bin);
    /* and it does something: T > 1 flattens */
    double out[4];
    assert_int_equal(calib_client_params_apply(&t, CALIB_FORM_BINARY, 2, bin, out),
                     CALIB_OK);
    assert_true(out[0] < 0.8 && out[0] > 0.5);

    calib_client_params pl = decoded("platt", 2, AB_NAMES, (double[]){1.3, -0.4});
    check_same(&pl, calib_recal_apply_platt, CALIB_FORM_BINARY, 2, bin);
    check_same(&pl, calib_recal_apply_platt, CALIB_FORM_LOGITS, 2, logits2);
    check_same(&pl, calib_recal_apply_platt, CALIB_FORM_PROBS, 2, probs2);
    out[0] = 42;
    assert_int_equal(calib_client_params_apply(&pl, CALIB_FORM_LOGITS, 4, logits4, out),
                     CALIB_EINVAL);
    assert_true(out[0] == 42);

    calib_client_params ls =
        decoded("location_scale", 3, ABC_NAMES, (double[]){-0.5, 0.9, 1.25});
    check_same(&ls, calib_recal_apply_location_scale, CALIB_FORM_GAUSSIAN, 0, gauss);
    calib_client_params v = decoded("variance", 2, WB_NAMES, (double[]){1.5, 0.1});
    check_same(&v, calib_recal_apply_variance, CALIB_FORM_GAUSSIAN, 0, gauss);
    assert_int_equal(calib_client_params_apply(&v, CALIB_FORM_GAUSSIAN, 0, gauss, out),
                     CALIB_OK);
    assert_close(out[1], 0.85, 1e-15);
    out[0] = 42;
    assert_int_equal(calib_client_params_apply(&v, CALIB_FORM_LOGITS, 4, logits4, out),
                     CALIB_ECLIENT_FORM);
    assert_int_equal(calib_client_params_apply(&t, CALIB_FORM_GAUSSIAN, 0, gauss, out),
                     CALIB_ECLIENT_FORM);
    assert_true(out[0] == 42);

    /* version 0: the identity */
    calib_client_params id;
    memset(&id, 0, sizeof id);
    assert_int_equal(calib_client_params_apply(&id, CALIB_FORM_LOGITS, 4, logits4, out),
                     CALIB_OK);
    double sm[4];
    calib_softmax(logits4, 4, sm);
    for (int j = 0; j < 4; j++)
        assert_true(out[j] == sm[j]);
    assert_int_equal(calib_client_params_apply(&id, CALIB_FORM_PROBS, 3, probs3, out),
                     CALIB_OK);
    assert_true(out[0] == 0.7 && out[2] == 0.1);

    /* checked input, nothing written on error */
    out[0] = 42;
    const double bad_probs[] = {0.5, 0.6};
    const double nan_logits[] = {0.0, NAN};
    const double bad_var[] = {1.0, 0.0};
    const double bad_p[] = {1.5};
    assert_int_equal(calib_client_params_apply(&t, CALIB_FORM_PROBS, 2, bad_probs, out),
                     CALIB_EPROBSUM);
    assert_int_equal(calib_client_params_apply(&t, CALIB_FORM_LOGITS, 2, nan_logits, out),
                     CALIB_ENONFINITE);
    assert_int_equal(calib_client_params_apply(&v, CALIB_FORM_GAUSSIAN, 0, bad_var, out),
                     CALIB_EVAR);
    assert_int_equal(calib_client_params_apply(&t, CALIB_FORM_BINARY, 2, bad_p, out),
                     CALIB_EPROB);
    assert_int_equal(calib_client_params_apply(&t, CALIB_FORM_LOGITS, 1, logits4, out),
                     CALIB_EINVAL);
    assert_int_equal(calib_client_params_apply(&t, 9, 2, logits4, out), CALIB_EINVAL);
    assert_int_equal(calib_client_params_apply(NULL, CALIB_FORM_LOGITS, 2, logits4, out),
                     CALIB_EINVAL);
    assert_true(out[0] == 42);
}

/* ------------------------------------------------------------------ sockets */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A PUB socket bound on an ephemeral TCP port; its endpoint in ep. */
static void *pub_open(void *ctx, char *ep, size_t eplen)
{
    void *pub = zmq_socket(ctx, ZMQ_PUB);
    assert_non_null(pub);
    int zero = 0, hwm = 100000;
    zmq_setsockopt(pub, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    assert_int_equal(zmq_bind(pub, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(pub, ZMQ_LAST_ENDPOINT, ep, &eplen), 0);
    return pub;
}

static void send_frames(void *pub, const void *topic, size_t tlen,
                        const void *data, size_t len)
{
    assert_true(zmq_send(pub, topic, tlen, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(pub, data, len, 0) >= 0);
}

static void send_pl(void *pub, const char *topic, const payload *p)
{
    send_frames(pub, topic, strlen(topic), p->sb.data, p->sb.size);
}

static void send_params(void *pub, const char *model, uint64_t version,
                        const char *method, unsigned n, const char *const *names,
                        const double *v)
{
    payload pl;
    params_msg(&pl, model, version, method, n, names, v);
    send_pl(pub, model, &pl);
    pl_free(&pl);
}

static uint64_t received(calib_client *c)
{
    calib_client_stats st;
    calib_client_stats_get(c, &st);
    return st.received;
}

/* Polls until the client has read `want` messages in all (2 s at most). */
static void poll_until_received(calib_client *c, uint64_t want)
{
    double deadline = now_s() + 2;
    while (received(c) < want && now_s() < deadline)
        assert_true(calib_client_poll(c, 20) >= 0);
    assert_true(received(c) == want);
}

typedef struct recorder {
    uint64_t versions[64];
    int nparams_calls;
    int nalerts;
    char last_alert_kind[32];
} recorder;

static void record_params(const calib_client_params *p, void *arg)
{
    recorder *r = arg;
    if (r->nparams_calls < 64)
        r->versions[r->nparams_calls] = p->version;
    r->nparams_calls++;
}

static void record_alert(const calib_client_alert *a, void *arg)
{
    recorder *r = arg;
    r->nalerts++;
    snprintf(r->last_alert_kind, sizeof r->last_alert_kind, "%s", a->kind);
}

/* A client polled by this thread, connected to a fresh PUB; the first
 * message of model is handshaken (published until it arrives), so that
 * everything sent afterwards is delivered. */
typedef struct rig {
    void *ctx, *pub;
    calib_client *c;
    recorder rec;
} rig;

static void rig_open(rig *g, const char *model, const calib_plugin_registry *reg)
{
    char ep[256];
    memset(g, 0, sizeof *g);
    g->ctx = zmq_ctx_new();
    g->pub = pub_open(g->ctx, ep, sizeof ep);
    calib_client_opts o = {.registry = reg, .on_params = record_params,
                           .on_alert = record_alert, .arg = &g->rec};
    assert_int_equal(calib_client_create(&g->c, &o), CALIB_OK);
    assert_int_equal(calib_client_connect(g->c, ep), CALIB_OK);
    assert_int_equal(calib_client_subscribe(g->c, model), CALIB_OK);
}

static uint64_t others(calib_client *c)
{
    calib_client_stats st;
    calib_client_stats_get(c, &st);
    return st.other;
}

/* Sends a message of another type and reads until it arrives: then every
 * copy published before it has been read too (one connection keeps order). */
static void rig_sync(rig *g, const char *model)
{
    payload pl;
    pl_init(&pl);
    mp(&pl, "M s u s s", 2, "v", 1, "type", "sync");
    uint64_t want = others(g->c) + 1;
    send_pl(g->pub, model, &pl);
    pl_free(&pl);
    double deadline = now_s() + 2;
    while (others(g->c) < want && now_s() < deadline)
        assert_true(calib_client_poll(g->c, 20) >= 0);
    assert_true(others(g->c) == want);
}

static void rig_handshake(rig *g, const char *model, uint64_t version,
                          const char *method, unsigned n,
                          const char *const *names, const double *v)
{
    double deadline = now_s() + 2;
    uint64_t held = 0;
    while (held < version && now_s() < deadline) {
        send_params(g->pub, model, version, method, n, names, v);
        assert_true(calib_client_poll(g->c, 10) >= 0);
        assert_int_equal(calib_client_version(g->c, model, &held), CALIB_OK);
    }
    assert_true(held == version);
    rig_sync(g, model);
}

static void rig_close(rig *g)
{
    calib_client_destroy(g->c);
    zmq_close(g->pub);
    zmq_ctx_term(g->ctx);
}

/* A params message written by libcalib's codec, sent, and read. */
static void rig_send(rig *g, const calib_params_msg *m)
{
    calib_mpw w;
    calib_mpw_init(&w);
    assert_int_equal(calib_params_msg_write(&w, m), CALIB_OK);
    uint64_t base = received(g->c);
    send_frames(g->pub, m->model, strlen(m->model), w.sb.data, w.sb.size);
    calib_mpw_destroy(&w);
    poll_until_received(g->c, base + 1);
}

static void version_ordering(void **state)
{
    rig g;
    calib_client_params p;
    calib_client_stats st;
    rig_open(&g, "m1", NULL);
    uint64_t v;
    assert_int_equal(calib_client_version(g.c, "m1", &v), CALIB_OK);
    assert_true(v == 0);
    assert_int_equal(calib_client_get(g.c, "m1", &p), CALIB_OK);
    assert_true(p.version == 0 && p.method[0] == '\0' && p.desc == NULL);

    rig_handshake(&g, "m1", 2, "temperature", 1, T_NAMES, (double[]){2.0});
    uint64_t base = received(g.c);
    calib_client_stats_get(g.c, &st);
    uint64_t stale0 = st.stale, accepted0 = st.accepted;
    assert_true(accepted0 == 1);

    /* older and equal versions, with other values, are ignored */
    send_params(g.pub, "m1", 1, "temperature", 1, T_NAMES, (double[]){9.0});
    send_params(g.pub, "m1", 2, "temperature", 1, T_NAMES, (double[]){8.0});
    poll_until_received(g.c, base + 2);
    assert_int_equal(calib_client_get(g.c, "m1", &p), CALIB_OK);
    assert_true(p.version == 2 && p.values[0] == 2.0);

    /* newer ones are taken, even with another method; gaps are fine */
    send_params(g.pub, "m1", 5, "platt", 2, AB_NAMES, (double[]){1.5, 0.5});
    send_params(g.pub, "m1", 4, "temperature", 1, T_NAMES, (double[]){7.0});
    send_params(g.pub, "m1", 6, "temperature", 1, T_NAMES, (double[]){1.25});
    send_params(g.pub, "m1", 6, "temperature", 1, T_NAMES, (double[]){6.0});
    poll_until_received(g.c, base + 6);
    assert_int_equal(calib_client_get(g.c, "m1", &p), CALIB_OK);
    assert_true(p.version == 6 && p.values[0] == 1.25);
    assert_string_equal(p.method, "temperature");
    calib_client_stats_get(g.c, &st);
    assert_true(st.accepted == accepted0 + 2);
    assert_true(st.stale == stale0 + 4);
    assert_true(st.rejected == 0);
    /* one callback per new version, in order */
    assert_int_equal(g.rec.nparams_calls, 3);
    assert_true(g.rec.versions[0] == 2 && g.rec.versions[1] == 5 &&
                g.rec.versions[2] == 6);

    /* apply uses what is held */
    double x[] = {0.9}, out[1], want[1];
    assert_int_equal(calib_client_apply(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, &v),
                     CALIB_OK);
    calib_recal_apply_temperature((double[]){1.25}, CALIB_FORM_BINARY, 2, x, want);
    assert_true(v == 6 && out[0] == want[0]);
    assert_int_equal(calib_client_apply(g.c, "m2", CALIB_FORM_BINARY, 2, x, out, &v),
                     CALIB_ECLIENT_MODEL);
    assert_int_equal(calib_client_get(g.c, "m2", &p), CALIB_ECLIENT_MODEL);
    rig_close(&g);
}

/* A version with segment parameters: a prediction of a listed segment gets
 * them, the first listed where it has several, any other the model's;
 * a later version without segments drops them. */
static void segment_parameters(void **state)
{
    (void)state;
    rig g;
    rig_open(&g, "m1", NULL);
    rig_handshake(&g, "m1", 1, "temperature", 1, T_NAMES, (double[]){2.0});
    calib_params_msg m;
    params_of(&m, "m1", 2, "temperature", 1, T_NAMES, (double[]){1.5});
    m.nsegments = 2;
    m.segments[0] = (calib_params_segment){"country", "DE", {3.0}};
    m.segments[1] = (calib_params_segment){"device", "ios", {0.5}};
    rig_send(&g, &m);
    double x[] = {0.9}, out[1], want[1];
    uint64_t v = 0;
    const char *keys[] = {"device", "country"}, *de[] = {"ios", "DE"}, *fr[] = {"web", "FR"};
    /* both listed: the first in the message's order, DE's */
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, keys, de,
                                            2, &v), CALIB_OK);
    calib_recal_apply_temperature((double[]){3.0}, CALIB_FORM_BINARY, 2, x, want);
    assert_true(v == 2 && out[0] == want[0]);
    /* ios alone */
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, keys, de,
                                            1, &v), CALIB_OK);
    calib_recal_apply_temperature((double[]){0.5}, CALIB_FORM_BINARY, 2, x, want);
    assert_true(out[0] == want[0]);
    /* none listed, or no segments: the model's */
    calib_recal_apply_temperature((double[]){1.5}, CALIB_FORM_BINARY, 2, x, want);
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, keys, fr,
                                            2, &v), CALIB_OK);
    assert_true(out[0] == want[0]);
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, NULL, NULL,
                                            0, &v), CALIB_OK);
    assert_true(out[0] == want[0]);
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, NULL, NULL,
                                            1, &v), CALIB_EINVAL);
    /* the same through parameters held by the caller */
    calib_client_params p;
    assert_int_equal(calib_client_get(g.c, "m1", &p), CALIB_OK);
    assert_int_equal(p.nsegments, 2);
    assert_int_equal(calib_client_params_apply_seg(&p, CALIB_FORM_BINARY, 2, x, out, keys, de, 2),
                     CALIB_OK);
    calib_recal_apply_temperature((double[]){3.0}, CALIB_FORM_BINARY, 2, x, want);
    assert_true(out[0] == want[0]);
    /* version 3 without segments */
    uint64_t base = received(g.c);
    send_params(g.pub, "m1", 3, "temperature", 1, T_NAMES, (double[]){1.25});
    poll_until_received(g.c, base + 1);
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_BINARY, 2, x, out, keys, de,
                                            2, &v), CALIB_OK);
    calib_recal_apply_temperature((double[]){1.25}, CALIB_FORM_BINARY, 2, x, want);
    assert_true(v == 3 && out[0] == want[0]);
    rig_close(&g);
}

/* Prior weights (a label-free version): applied after the map, and after
 * a segment's map, exactly as calib_prior_weigh; a prediction of another
 * class count or a Gaussian is refused, not misweighted. */
static void prior_weights(void **state)
{
    (void)state;
    rig g;
    rig_open(&g, "m1", NULL);
    rig_handshake(&g, "m1", 1, "temperature", 1, T_NAMES, (double[]){2.0});
    calib_params_msg m;
    params_of(&m, "m1", 2, "temperature", 1, T_NAMES, (double[]){1.5});
    m.nweights = 3;
    m.weights[0] = 2.0;
    m.weights[1] = 0.5;
    m.weights[2] = 1.0;
    m.label_free = 1;
    m.nsegments = 1;
    m.segments[0] = (calib_params_segment){"country", "DE", {3.0}};
    rig_send(&g, &m);
    const double z[] = {1.0, 0.2, -0.7};
    double out[3], want[3];
    uint64_t v = 0;
    assert_int_equal(calib_client_apply(g.c, "m1", CALIB_FORM_LOGITS, 3, z, out, &v), CALIB_OK);
    calib_recal_apply_temperature((double[]){1.5}, CALIB_FORM_LOGITS, 3, z, want);
    double plain0 = want[0];
    assert_int_equal(calib_prior_weigh(m.weights, 3, CALIB_FORM_PROBS, 3, want), CALIB_OK);
    assert_true(v == 2);
    for (int j = 0; j < 3; j++)
        assert_true(out[j] == want[j]);
    assert_true(out[0] > plain0); /* the weight 2 raised class 0 */
    /* a segment's map, then the same weights */
    const char *keys[] = {"country"}, *de[] = {"DE"};
    assert_int_equal(calib_client_apply_seg(g.c, "m1", CALIB_FORM_LOGITS, 3, z, out, keys, de, 1,
                                            &v), CALIB_OK);
    calib_recal_apply_temperature((double[]){3.0}, CALIB_FORM_LOGITS, 3, z, want);
    calib_prior_weigh(m.weights, 3, CALIB_FORM_PROBS, 3, want);
    for (int j = 0; j < 3; j++)
        assert_true(out[j] == want[j]);
    /* the held record carries them, and applies them the same way */
    calib_client_params p;
    assert_int_equal(calib_client_get(g.c, "m1", &p), CALIB_OK);
    assert_int_equal(p.nweights, 3);
    assert_true(p.label_free == 1);
    assert_int_equal(calib_client_params_apply(&p, CALIB_FORM_LOGITS, 3, z, out), CALIB_OK);
    calib_recal_apply_temperature((double[]){1.5}, CALIB_FORM_LOGITS, 3, z, want);
    calib_prior_weigh(m.weights, 3, CALIB_FORM_PROBS, 3, want);
    for (int j = 0; j < 3; j++)
        assert_true(out[j] == want[j]);
    /* three weights for two classes: refused, out untouched */
    out[0] = 42;
    assert_int_equal(calib_client_apply(g.c, "m1", CALIB_FORM_LOGITS, 2, z, out, &v),
                     CALIB_ECLIENT_FORM);
    assert_int_equal(calib_client_apply(g.c, "m1", CALIB_FORM_BINARY, 2, (double[]){0.3}, out,
                                        &v), CALIB_ECLIENT_FORM);
    assert_true(out[0] == 42);
    /* a later version without weights drops them */
    uint64_t base = received(g.c);
    send_params(g.pub, "m1", 3, "temperature", 1, T_NAMES, (double[]){1.5});
    poll_until_received(g.c, base + 1);
    assert_int_equal(calib_client_apply(g.c, "m1", CALIB_FORM_LOGITS, 3, z, out, &v), CALIB_OK);
    calib_recal_apply_temperature((double[]){1.5}, CALIB_FORM_LOGITS, 3, z, want);
    assert_true(v == 3);
    for (int j = 0; j < 3; j++)
        assert_true(out[j] == want[j]);
    rig_close(&g);
}

/* What arrives on the socket is checked: exact topic, framing, payloads. */
static void socket_hostile_and_topics(void **state)
{
    rig g;
    calib_client_stats st;
    rig_open(&g, "m1", NULL);
    rig_handshake(&g, "m1", 1, "temperature", 1, T_NAMES, (double[]){1.5});
    uint64_t base = received(g.c);
    calib_client_stats_get(g.c, &st);
    assert_true(st.rejected == 0);
    uint64_t other0 = st.other;

    /* prefix matches of the subscription, but other models */
    send_params(g.pub, "m10", 50, "temperature", 1, T_NAMES, (double[]){3.0});
    send_params(g.pub, "m1.b", 51, "temperature", 1, T_NAMES, (double[]){3.0});
    /* a bad topic starting with the name */
    send_params(g.pub, "m1 x", 52, "temperature", 1, T_NAMES, (double[]){3.0});
    /* topic m1, model m10 */
    payload pl;
    params_msg(&pl, "m10", 53, "temperature", 1, T_NAMES, (double[]){3.0});
    send_pl(g.pub, "m1", &pl);
    /* one frame; three frames */
    assert_true(zmq_send(g.pub, "m1", 2, 0) == 2);
    assert_true(zmq_send(g.pub, "m1", 2, ZMQ_SNDMORE) == 2);
    assert_true(zmq_send(g.pub, pl.sb.data, pl.sb.size, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(g.pub, "x", 1, 0) == 1);
    pl_free(&pl);
    /* garbage, truncation, a lie about counts, trailing bytes */
    send_frames(g.pub, "m1", 2, "\xc1\xc1", 2);
    send_frames(g.pub, "m1", 2, "\xdf\xff\xff\xff\xff", 5);
    params_msg(&pl, "m1", 54, "temperature", 1, T_NAMES, (double[]){3.0});
    send_frames(g.pub, "m1", 2, pl.sb.data, pl.sb.size - 1);
    msgpack_pack_nil(&pl.pk);
    send_pl(g.pub, "m1", &pl);
    pl_free(&pl);
    /* a negative temperature */
    send_params(g.pub, "m1", 55, "temperature", 1, T_NAMES, (double[]){-3.0});
    /* an alert, and a message of a type from the future */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s s s s s d", 6, "v", 1, "type", "alert", "model", "m1",
       "kind", "drift", "severity", "warning", "ts", 3.0);
    send_pl(g.pub, "m1", &pl);
    pl_free(&pl);
    pl_init(&pl);
    mp(&pl, "M s u s s", 2, "v", 1, "type", "heartbeat");
    send_pl(g.pub, "m1", &pl);
    pl_free(&pl);

    poll_until_received(g.c, base + 13);
    uint64_t v;
    assert_int_equal(calib_client_version(g.c, "m1", &v), CALIB_OK);
    assert_true(v == 1);
    calib_client_stats_get(g.c, &st);
    assert_true(st.unsubscribed == 2);
    assert_true(st.reject[CALIB_REJ_BAD_TOPIC] == 1);
    assert_true(st.reject[CALIB_REJ_MODEL_MISMATCH] == 1);
    assert_true(st.reject[CALIB_REJ_FRAMING] == 2);
    assert_true(st.reject[CALIB_REJ_BAD_MSGPACK] == 3);
    assert_true(st.reject[CALIB_REJ_TRAILING_BYTES] == 1);
    assert_true(st.reject[CALIB_REJ_BAD_VALUE] == 1);
    assert_true(st.rejected == 9);
    assert_true(st.alerts == 1 && st.other == other0 + 1);
    assert_int_equal(g.rec.nalerts, 1);
    assert_string_equal(g.rec.last_alert_kind, "drift");
    assert_int_equal(g.rec.nparams_calls, 1);

    /* and it still takes good parameters */
    send_params(g.pub, "m1", 60, "temperature", 1, T_NAMES, (double[]){1.1});
    poll_until_received(g.c, base + 14);
    assert_int_equal(calib_client_version(g.c, "m1", &v), CALIB_OK);
    assert_true(v == 60);
    rig_close(&g);
}

static void api_misuse(void **state)
{
    calib_client *c;
    assert_int_equal(calib_client_create(NULL, NULL), CALIB_EINVAL);
    assert_int_equal(calib_client_create(&c, NULL), CALIB_OK);
    assert_int_equal(calib_client_subscribe(c, ""), CALIB_EINVAL);
    assert_int_equal(calib_client_subscribe(c, "a b"), CALIB_EINVAL);
    assert_int_equal(calib_client_subscribe(c, NULL), CALIB_EINVAL);
    assert_int_equal(calib_client_subscribe(c, "m1"), CALIB_OK);
    assert_int_equal(calib_client_subscribe(c, "m1"), CALIB_OK); /* no-op */
    assert_int_equal(calib_client_connect(c, "nonsense"), CALIB_ECLIENT_ZMQ);
    assert_int_equal(calib_client_connect(c, ""), CALIB_EINVAL);
    assert_int_equal(calib_client_connect(c, ">tcp://127.0.0.1:1"), CALIB_OK);
    assert_int_equal(calib_client_poll(c, 0), 0);
    /* the socket belongs to the background thread while it runs */
    assert_int_equal(calib_client_start(c), CALIB_OK);
    assert_int_equal(calib_client_start(c), CALIB_ECLIENT_BUSY);
    assert_int_equal(calib_client_poll(c, 0), CALIB_ECLIENT_BUSY);
    assert_int_equal(calib_client_subscribe(c, "m2"), CALIB_ECLIENT_BUSY);
    assert_int_equal(calib_client_connect(c, "tcp://127.0.0.1:2"), CALIB_ECLIENT_BUSY);
    double t0 = now_s();
    assert_int_equal(calib_client_stop(c), CALIB_OK);
    assert_true(now_s() - t0 < 0.5); /* woken, not timed out */
    assert_int_equal(calib_client_stop(c), CALIB_OK);
    assert_int_equal(calib_client_subscribe(c, "m2"), CALIB_OK);
    /* 256 models at most */
    char name[16];
    int rc = CALIB_OK, i;
    for (i = 0; i < 300 && rc == CALIB_OK; i++) {
        snprintf(name, sizeof name, "n%d", i);
        rc = calib_client_subscribe(c, name);
    }
    assert_int_equal(rc, CALIB_EFULL);
    assert_int_equal(i, CALIB_CLIENT_MAX_MODELS - 2 + 1);
    double x[2] = {0.5, 0.5}, out[2];
    uint64_t v = 99;
    assert_int_equal(calib_client_apply(c, "m2", CALIB_FORM_PROBS, 2, x, out, &v),
                     CALIB_OK);
    assert_true(v == 0 && out[0] == 0.5);
    calib_client_destroy(c);
    calib_client_destroy(NULL);
}

/* ------------------------------------------------------------------ background thread */

static void end_to_end_background(void **state)
{
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pub = pub_open(ctx, ep, sizeof ep);
    recorder rec = {0};
    calib_client *c;
    calib_client_opts o = {.on_params = record_params, .arg = &rec};
    assert_int_equal(calib_client_create(&c, &o), CALIB_OK);
    assert_int_equal(calib_client_subscribe(c, "e2e"), CALIB_OK);
    assert_int_equal(calib_client_subscribe(c, "other"), CALIB_OK);
    assert_int_equal(calib_client_connect(c, ep), CALIB_OK);
    assert_int_equal(calib_client_start(c), CALIB_OK);

    /* calibd republishes: publish 1..N again until the client holds N */
    const uint64_t N = 5;
    double deadline = now_s() + 2.5;
    uint64_t held = 0;
    while (held < N && now_s() < deadline) {
        for (uint64_t v = 1; v <= N; v++)
            send_params(pub, "e2e", v, "platt", 2, AB_NAMES,
                        (double[]){1.0 + (double)v, -(double)v});
        sleep_ms(5);
        assert_int_equal(calib_client_version(c, "e2e", &held), CALIB_OK);
    }
    assert_true(held == N);
    calib_client_params p;
    assert_int_equal(calib_client_get(c, "e2e", &p), CALIB_OK);
    assert_true(p.values[0] == 6.0 && p.values[1] == -5.0);
    double x[] = {0.2, 1.1}, out[2], want[2];
    uint64_t v;
    assert_int_equal(calib_client_apply(c, "e2e", CALIB_FORM_LOGITS, 2, x, out, &v),
                     CALIB_OK);
    calib_recal_apply_platt(p.values, CALIB_FORM_LOGITS, 2, x, want);
    assert_true(v == N && out[0] == want[0] && out[1] == want[1]);
    assert_int_equal(calib_client_version(c, "other", &v), CALIB_OK);
    assert_true(v == 0);
    assert_int_equal(calib_client_stop(c), CALIB_OK);

    /* callbacks (on the background thread, joined now): increasing */
    assert_true(rec.nparams_calls >= 1 && rec.nparams_calls <= (int)N);
    for (int i = 1; i < rec.nparams_calls; i++)
        assert_true(rec.versions[i] > rec.versions[i - 1]);
    assert_true(rec.versions[rec.nparams_calls - 1] == N);
    calib_client_stats st;
    calib_client_stats_get(c, &st);
    assert_true(st.accepted == (uint64_t)rec.nparams_calls);
    assert_true(st.rejected == 0);

    calib_client_destroy(c);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}

/* ------------------------------------------------------------------ concurrency */

#define READERS 3

typedef struct reader_ctx {
    calib_client *c;
    atomic_int *stop;
    uint64_t calls, torn, wrong_version, errors, seen_a, seen_b, versions_seen;
} reader_ctx;

/* Odd versions carry 1.0 in all eight parameters, even ones 2.0: the result
 * tells the set, the version tells which set it must be. */
static void *reader_main(void *arg)
{
    reader_ctx *r = arg;
    uint64_t last = 0;
    while (!atomic_load_explicit(r->stop, memory_order_relaxed)) {
        double x = 0.25, out = 0;
        uint64_t v = 0;
        int rc = calib_client_apply(r->c, "swap", CALIB_FORM_BINARY, 2, &x, &out, &v);
        r->calls++;
        if (rc != CALIB_OK) {
            r->errors++;
            continue;
        }
        if (v != last) {
            r->versions_seen++;
            last = v;
        }
        if (out == -1)
            r->torn++;
        else if (out == 1.0) {
            r->seen_a++;
            r->wrong_version += v % 2 != 1;
        } else if (out == 2.0) {
            r->seen_b++;
            r->wrong_version += v % 2 != 0;
        } else if (!(v == 0 && out == 0.25)) {
            r->torn++;
        }
    }
    return NULL;
}

static void concurrent_swaps(void **state)
{
    calib_plugin_registry reg;
    mix_registry(&reg);
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pub = pub_open(ctx, ep, sizeof ep);
    calib_client *c;
    calib_client_opts o = {.registry = &reg};
    assert_int_equal(calib_client_create(&c, &o), CALIB_OK);
    assert_int_equal(calib_client_subscribe(c, "swap"), CALIB_OK);
    assert_int_equal(calib_client_connect(c, ep), CALIB_OK);
    assert_int_equal(calib_client_start(c), CALIB_OK);

    atomic_int stop;
    atomic_init(&stop, 0);
    reader_ctx rd[READERS];
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].c = c;
        rd[i].stop = &stop;
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    }

    /* connect: version 1 until it is held */
    payload pl;
    uint64_t held = 0;
    double deadline = now_s() + 2;
    mix_msg(&pl, "swap", 1, 1.0);
    while (held < 1 && now_s() < deadline) {
        send_pl(pub, "swap", &pl);
        sleep_ms(2);
        calib_client_version(c, "swap", &held);
    }
    pl_free(&pl);
    /* then swap as fast as the client takes them, for 0.4 s */
    uint64_t v = 1;
    deadline = now_s() + 0.4;
    while (now_s() < deadline) {
        v++;
        mix_msg(&pl, "swap", v, v % 2 ? 1.0 : 2.0);
        send_pl(pub, "swap", &pl);
        pl_free(&pl);
        /* a pause every 63 versions: odd, so that the version a burst ends
         * on, which a client that fell behind may alone install, is odd
         * (1.0) and even (2.0) in turn; a pause every 64 ended each burst
         * on an even one, and a loaded run saw 2.0 only */
        if (v % 63 == 0)
            sleep_ms(1);
    }
    sleep_ms(20);
    atomic_store(&stop, 1);
    uint64_t calls = 0, torn = 0, wrong = 0, errors = 0, a = 0, b = 0, seen = 0;
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        calls += rd[i].calls;
        torn += rd[i].torn;
        wrong += rd[i].wrong_version;
        errors += rd[i].errors;
        a += rd[i].seen_a;
        b += rd[i].seen_b;
        seen += rd[i].versions_seen;
    }
    assert_int_equal(calib_client_stop(c), CALIB_OK);
    calib_client_stats st;
    calib_client_stats_get(c, &st);
    print_message("swaps published %llu, installed %llu; %llu applies saw %llu "
                  "version changes\n", (unsigned long long)v,
                  (unsigned long long)st.accepted, (unsigned long long)calls,
                  (unsigned long long)seen);
    assert_true(held >= 1);
    assert_true(torn == 0);
    assert_true(wrong == 0);
    assert_true(errors == 0);
    assert_true(st.rejected == 0);
    /* the test saw something: many swaps, both sets, seen switching */
    assert_true(st.accepted >= 100);
    assert_true(a > 0 && b > 0);
    assert_true(seen >= 20);

    calib_client_destroy(c);
    zmq_close(pub);
    zmq_ctx_term(ctx);
    calib_plugin_registry_free(&reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(client_errors),
        cmocka_unit_test(apply_matches_recal),
        cmocka_unit_test(version_ordering),
        cmocka_unit_test(segment_parameters),
        cmocka_unit_test(prior_weights),
        cmocka_unit_test(socket_hostile_and_topics),
        cmocka_unit_test(api_misuse),
        cmocka_unit_test(end_to_end_background),
        cmocka_unit_test(concurrent_swaps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
