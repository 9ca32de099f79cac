/* test_client.c — the serving-node client: decoding params messages (every
 * method, every number type, every way to be malformed), version ordering,
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
#include "calib/plugin.h"
#include "calib/recal.h"

#include "mp.h"

/* ------------------------------------------------------------------ messages */

/* A complete params message (every key of the contract) with n parameters
 * packed as float64. */
static void params_msg(payload *p, const char *model, uint64_t version,
                       const char *method, unsigned n, const char *const *names,
                       const double *values)
{
    pl_init(p);
    mp(p, "M s u s s s s s U s s s M", 11, "v", 1, "type", "params", "model",
       model, "version", version, "method", method, "params", (int)n);
    for (unsigned i = 0; i < n; i++)
        mp(p, "s d", names[i], values[i]);
    mp(p, "s d s u s M s d s d s M s d s d s M s d s A d d", "ts", 1.7e9, "n",
       1000, "before", 2, "brier", 0.25, "log", 0.7, "after", 2, "brier", 0.2,
       "log", 0.6, "improvement", 2, "mean", 0.05, "ci", 2, 0.03, 0.07);
}

static const char *const T_NAMES[] = {"T"};
static const char *const AB_NAMES[] = {"a", "b"};
static const char *const WB_NAMES[] = {"w", "b"};

static int decode_pl(const char *topic, const payload *p,
                     const calib_plugin_registry *reg, calib_client_params *out)
{
    return calib_client_decode(topic, strlen(topic), p->sb.data, p->sb.size, reg,
                               out);
}

/* ------------------------------------------------------------------ a test plugin */

/* "mix8": eight parameters; p' = p0 when all eight are equal, else -1 -- a
 * reader that saw half of one set and half of another would get -1. */
static int mix_fit(const calib_dataset *ds, const calib_recal_opts *opts,
                   calib_recal_result *res)
{
    return CALIB_EINVAL;
}

static int mix_apply(const double *params, int form, size_t k, const double *x,
                     double *out)
{
    if (form != CALIB_FORM_BINARY)
        return CALIB_EINVAL;
    for (int j = 1; j < 8; j++)
        if (params[j] != params[0]) {
            out[0] = -1;
            return CALIB_OK;
        }
    out[0] = params[0];
    return CALIB_OK;
}

static const calib_plugin mix8 = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "mix8",
    .summary = "test: detects a torn parameter set",
    .forms = CALIB_FORM_BIT(CALIB_FORM_BINARY),
    .nparams = 8,
    .param_names = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"},
    .identity = {0},
    .fit = mix_fit,
    .apply = mix_apply,
};

static void mix_registry(calib_plugin_registry *r)
{
    calib_plugin_registry_init(r);
    assert_int_equal(calib_plugin_add(r, &mix8, NULL, 0), CALIB_OK);
}

static void mix_msg(payload *p, const char *model, uint64_t version, double v)
{
    double vals[8];
    for (int j = 0; j < 8; j++)
        vals[j] = v;
    params_msg(p, model, version, "mix8", 8, mix8.param_names, vals);
}

/* ------------------------------------------------------------------ decoding */

static void decode_each_method(void **state)
{
    calib_client_params p;
    payload pl;

    params_msg(&pl, "m1", 7, "temperature", 1, T_NAMES, (double[]){1.75});
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_string_equal(p.model, "m1");
    assert_true(p.version == 7);
    assert_string_equal(p.method, "temperature");
    assert_true(p.desc == calib_plugin_builtin("temperature"));
    assert_int_equal(p.nparams, 1);
    assert_string_equal(p.names[0], "T");
    assert_true(p.values[0] == 1.75);
    assert_true(p.ts == 1.7e9);
    assert_true(p.n == 1000);
    assert_true(p.improvement == 0.05);
    assert_true(p.ci[0] == 0.03 && p.ci[1] == 0.07);

    /* parameters in the method's order, whatever the message's */
    params_msg(&pl, "m1", 2, "platt", 2, (const char *[]){"b", "a"},
               (double[]){-0.5, 1.25});
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.desc == calib_plugin_builtin("platt"));
    assert_string_equal(p.names[0], "a");
    assert_string_equal(p.names[1], "b");
    assert_true(p.values[0] == 1.25 && p.values[1] == -0.5);

    params_msg(&pl, "m.x:1", 3, "variance", 2, WB_NAMES, (double[]){1.5, 0});
    assert_int_equal(decode_pl("m.x:1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.desc == calib_plugin_builtin("variance"));
    assert_true(p.values[0] == 1.5 && p.values[1] == 0);

    /* only the required keys: the informational ones are NaN / 0 */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s d", 6, "v", 1, "type", "params",
       "model", "m1", "version", 9, "method", "temperature", "params", 1, "T", 2.0);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.version == 9 && p.values[0] == 2.0);
    assert_nan(p.ts);
    assert_nan(p.improvement);
    assert_true(p.n == 0);

    /* unknown keys, at the top and in params, are ignored */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s d s i s d s M s A u u", 8, "v", 1,
       "type", "params", "model", "m1", "version", 4, "method", "temperature",
       "params", 2, "T", 0.5, "extra", -3, "future", 1.0, "nested", 1, "x",
       2, 1, 2);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == 0.5 && p.nparams == 1);
}

/* What calibd itself sends (src/daemon/loop.c): improvement as a number
 * and ci as a key of its own, extensions, and version 0 as the method
 * "identity" with no parameters. */
static void decode_daemon_shapes(void **state)
{
    calib_client_params p;
    payload pl;
    pl_init(&pl);
    mp(&pl, "M s u s s s s s U s s s M s d s d s d s U s U s M s d s d s M s d "
       "s d s d s A d d", 14, "v", 1, "type", "params", "model", "m1", "version",
       (uint64_t)12, "method", "temperature", "params", 1, "T", 1.25, "ts", 1.7e9,
       "published", 1.6e9, "n", (uint64_t)4000, "shadow_n", (uint64_t)900,
       "before", 2, "brier", 0.3, "log", 0.9, "after", 2, "brier", 0.25, "log",
       0.8, "improvement", 0.05, "ci", 2, 0.04, 0.06);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.version == 12 && p.values[0] == 1.25 && p.n == 4000);
    assert_true(p.improvement == 0.05 && p.ci[0] == 0.04 && p.ci[1] == 0.06);

    /* unknown figures are nil */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s d s n s n s M s n", 9, "v", 1, "type",
       "params", "model", "m1", "version", 3, "method", "temperature", "params",
       1, "T", 1.25, "improvement", "ci", "before", 1, "brier");
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_nan(p.improvement);
    assert_nan(p.ci[0]);

    /* version 0: the identity, by whatever name, with no parameters */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s d s u s M s M s d s A d d", 12, "v", 1,
       "type", "params", "model", "m1", "version", 0, "method", "identity",
       "params", 0, "ts", 5.0, "n", 0, "before", 0, "after", 0, "improvement",
       0.0, "ci", 2, 0.0, 0.0);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.version == 0 && p.nparams == 0);
    assert_string_equal(p.method, "identity");
    double x[] = {1.0, 2.0}, out[2], sm[2];
    assert_int_equal(calib_client_params_apply(&p, CALIB_FORM_LOGITS, 2, x, out),
                     CALIB_OK);
    calib_softmax(x, 2, sm);
    assert_true(out[0] == sm[0] && out[1] == sm[1]);
}

static void decode_number_types(void **state)
{
    calib_client_params p;
    payload pl;
    /* positive int, negative int, float32, float64 */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s u", 6, "v", 1, "type", "params", "model",
       "m1", "version", 1, "method", "temperature", "params", 1, "T", 3);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == 3.0);

    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s i s f s i", 7, "v", 1, "type", "params",
       "model", "m1", "version", 1, "method", "platt", "params", 2, "a", -2, "b",
       0.375, "ts", -5);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == -2.0 && p.values[1] == 0.375);
    assert_true(p.ts == -5.0);

    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s f s d s f", 7, "v", 1, "type", "params",
       "model", "m1", "version", 1, "method", "variance", "params", 2, "w", 1.5,
       "b", 0.1, "ts", 2.5);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == 1.5 && p.values[1] == 0.1 && p.ts == 2.5);

    /* the largest version */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s U s s s M s d", 6, "v", 1, "type", "params", "model",
       "m1", "version", UINT64_MAX, "method", "temperature", "params", 1, "T", 1.0);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_true(p.version == UINT64_MAX);
}

static void decode_plugin_methods(void **state)
{
    calib_plugin_registry reg;
    calib_client_params p;
    payload pl;
    mix_registry(&reg);

    /* known through the registry: resolved and in its order */
    double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    params_msg(&pl, "m1", 5, "mix8", 8, mix8.param_names, v);
    assert_int_equal(decode_pl("m1", &pl, &reg, &p), CALIB_CLIENT_REJ_NONE);
    assert_true(p.desc == &mix8);
    assert_int_equal(p.nparams, 8);
    assert_string_equal(p.names[7], "p7");
    assert_true(p.values[7] == 8);

    /* unknown without it: kept in the message's order, not applicable */
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_null(p.desc);
    assert_string_equal(p.method, "mix8");
    assert_int_equal(p.nparams, 8);
    assert_string_equal(p.names[0], "p0");
    assert_true(p.values[3] == 4);
    double x = 0.3, out = 0.5;
    assert_int_equal(calib_client_params_apply(&p, CALIB_FORM_BINARY, 2, &x, &out),
                     CALIB_ECLIENT_METHOD);
    assert_true(out == 0.5);

    params_msg(&pl, "m1", 5, "ets", 3, (const char *[]){"t", "w1", "w2"},
               (double[]){1.2, 0.5, 0.25});
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
    assert_string_equal(p.names[2], "w2");
    assert_true(p.values[2] == 0.25);

    /* a registered method missing one of its parameters */
    params_msg(&pl, "m1", 5, "mix8", 7, mix8.param_names, v);
    assert_int_equal(decode_pl("m1", &pl, &reg, &p), CALIB_CLIENT_REJ_BAD_PARAMS);
    pl_free(&pl);
    calib_plugin_registry_free(&reg);
}

/* Decodes the payload built by fmt with topic "m1" and checks the reason. */
#define REJECTS(reason, ...)                                                  \
    do {                                                                      \
        payload p_;                                                           \
        calib_client_params out_;                                             \
        pl_init(&p_);                                                         \
        mp(&p_, __VA_ARGS__);                                                 \
        int r_ = decode_pl("m1", &p_, NULL, &out_);                           \
        if (r_ != (reason))                                                   \
            print_error("line %d: got %s, want %s\n", __LINE__,               \
                        calib_client_reject_name(r_),                         \
                        calib_client_reject_name(reason));                    \
        assert_int_equal(r_, (reason));                                       \
        pl_free(&p_);                                                         \
    } while (0)

/* The head of a params map with count entries: v, type, model. */
#define HF "M s u s s s s "
#define HA(count) (count), "v", 1, "type", "params", "model", "m1"

static void decode_rejects(void **state)
{
    /* envelope */
    REJECTS(CALIB_CLIENT_REJ_NOT_A_MAP, "A u", 1, 1);
    REJECTS(CALIB_CLIENT_REJ_NOT_A_MAP, "s", "params");
    REJECTS(CALIB_CLIENT_REJ_BAD_KEY, "M u u", 1, 1, 1);
    REJECTS(CALIB_CLIENT_REJ_BAD_VERSION, "M s s", 1, "type", "params");
    REJECTS(CALIB_CLIENT_REJ_BAD_VERSION, "M s u s s", 2, "v", 2, "type", "params");
    REJECTS(CALIB_CLIENT_REJ_BAD_VERSION, "M s d s s", 2, "v", 1.0, "type", "params");
    REJECTS(CALIB_CLIENT_REJ_BAD_TYPE, "M s u", 1, "v", 1);
    REJECTS(CALIB_CLIENT_REJ_BAD_TYPE, "M s u s u", 2, "v", 1, "type", 3);
    REJECTS(CALIB_CLIENT_REJ_DUPLICATE_KEY, "M s u s u s s", 3, "v", 1, "v", 1,
            "type", "params");
    /* another type is not an error, but not params either */
    REJECTS(CALIB_CLIENT_REJ_OTHER_TYPE, "M s u s s s s", 3, "v", 1, "type",
            "alert", "model", "m1");
    REJECTS(CALIB_CLIENT_REJ_OTHER_TYPE, "M s u s s", 2, "v", 1, "type",
            "heartbeat");

    /* required keys, their types */
    REJECTS(CALIB_CLIENT_REJ_MISSING_KEY, "M s u s s s u s s s M s d", 5, "v", 1,
            "type", "params", "version", 1, "method", "temperature", "params", 1,
            "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_MISSING_KEY, HF "s s s M s d", HA(5), "method",
            "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_MISSING_KEY, HF "s u s M s d", HA(5), "version", 1,
            "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_MISSING_KEY, HF "s u s s", HA(5), "version", 1,
            "method", "temperature");
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, "M s u s s s u s u s s s M s d", 6, "v",
            1, "type", "params", "model", 1, "version", 1, "method",
            "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s i s s s M s d", HA(6), "version",
            -1, "method", "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s d s s s M s d", HA(6), "version",
            2.0, "method", "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s u s M s d", HA(6), "version",
            1, "method", 7, "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s A d", HA(6), "version", 1,
            "method", "temperature", "params", 1, 1.0);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s s", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", "1.5");
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s n", HA(6), "version",
            1, "method", "temperature", "params", 1, "T");
    REJECTS(CALIB_CLIENT_REJ_DUPLICATE_KEY, HF "s u s u s s s M s d", HA(7),
            "version", 1, "version", 2, "method", "temperature", "params", 1,
            "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_DUPLICATE_KEY, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "temperature", "params", 2, "T", 1.0, "T",
            2.0);

    /* the model must be the topic, exactly */
    REJECTS(CALIB_CLIENT_REJ_MODEL_MISMATCH, "M s u s s s s s u s s s M s d", 6,
            "v", 1, "type", "params", "model", "m2", "version", 1, "method",
            "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_MODEL_MISMATCH, "M s u s s s s s u s s s M s d", 6,
            "v", 1, "type", "params", "model", "m10", "version", 1, "method",
            "temperature", "params", 1, "T", 1.0);

    /* method names and parameter maps */
    REJECTS(CALIB_CLIENT_REJ_BAD_METHOD, HF "s u s s s M s d", HA(6), "version",
            1, "method", "", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_METHOD, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temp erature", "params", 1, "T", 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M s d", HA(6), "version",
            1, "method", "platt", "params", 1, "a", 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "t", 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M u d", HA(6), "version",
            1, "method", "temperature", "params", 1, 0, 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M", HA(6), "version", 1,
            "method", "someplugin", "params", 0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M sd sd sd sd sd sd sd sd sd",
            HA(6), "version", 1, "method", "someplugin", "params", 9, "a", 1.0,
            "b", 1.0, "c", 1.0, "d", 1.0, "e", 1.0, "f", 1.0, "g", 1.0, "h",
            1.0, "i", 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M s d", HA(6), "version",
            1, "method", "someplugin", "params", 1, "a=b", 1.0);
    REJECTS(CALIB_CLIENT_REJ_DUPLICATE_KEY, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "someplugin", "params", 2, "a", 1.0, "a",
            2.0);

    /* values outside the method's domain */
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", -1.5);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s i", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", -2);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", 0.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", (double)NAN);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s f", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", (double)INFINITY);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "platt", "params", 2, "a", (double)INFINITY,
            "b", 0.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "variance", "params", 2, "w", 0.0, "b", 1.0);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "variance", "params", 2, "w", 1.0, "b", -0.1);
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "someplugin", "params", 1, "q", (double)NAN);

    /* the optional keys, when present, have their types */
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0, "ts",
            "now");
    REJECTS(CALIB_CLIENT_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0, "ts",
            (double)NAN);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s i", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0, "n", -4);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s A", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "before", 0);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s M s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "after", 1, "brier", "low");
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s M s A d d d",
            HA(7), "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "improvement", 1, "ci", 3, 0.1, 0.2, 0.3);
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s M s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "improvement", 1, "mean", "big");
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "improvement", "big");
    REJECTS(CALIB_CLIENT_REJ_KEY_TYPE, HF "s u s s s M s d s A d", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "ci", 1, 0.5);
    REJECTS(CALIB_CLIENT_REJ_DUPLICATE_KEY, HF "s u s s s M s d s A d d s M s A d d",
            HA(8), "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "ci", 2, 0.1, 0.2, "improvement", 1, "ci", 2, 0.1, 0.2);
    /* only version 0 may come without parameters */
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M", HA(6), "version", 1,
            "method", "identity", "params", 0);
    REJECTS(CALIB_CLIENT_REJ_BAD_PARAMS, HF "s u s s s M", HA(6), "version", 1,
            "method", "temperature", "params", 0);
}

static void decode_bad_topics(void **state)
{
    calib_client_params p;
    payload pl;
    params_msg(&pl, "m1", 1, "temperature", 1, T_NAMES, (double[]){1.5});
    assert_int_equal(calib_client_decode("", 0, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_TOPIC);
    assert_int_equal(calib_client_decode("m 1", 3, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_TOPIC);
    assert_int_equal(calib_client_decode("m1\0", 3, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_TOPIC);
    char longname[CALIB_CLIENT_MODEL_MAX + 2];
    memset(longname, 'a', sizeof longname);
    assert_int_equal(calib_client_decode(longname, sizeof longname, pl.sb.data,
                                         pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_TOPIC);
    /* the topic is the one the message names */
    assert_int_equal(calib_client_decode("m", 1, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_MODEL_MISMATCH);
    assert_int_equal(calib_client_decode("m1", 2, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_NONE);
    pl_free(&pl);
}

/* Every proper prefix is truncated; one more byte is trailing. */
static void decode_truncated_and_trailing(void **state)
{
    calib_client_params p;
    payload pl;
    params_msg(&pl, "m1", 1, "platt", 2, AB_NAMES, (double[]){1.5, -0.25});
    for (size_t len = 0; len < pl.sb.size; len++) {
        int r = calib_client_decode("m1", 2, pl.sb.data, len, NULL, &p);
        if (r != CALIB_CLIENT_REJ_BAD_MSGPACK)
            print_error("prefix of %zu bytes: %s\n", len, calib_client_reject_name(r));
        assert_int_equal(r, CALIB_CLIENT_REJ_BAD_MSGPACK);
    }
    unsigned char *buf = malloc(pl.sb.size + 1);
    memcpy(buf, pl.sb.data, pl.sb.size);
    buf[pl.sb.size] = 0xc0; /* nil */
    assert_int_equal(calib_client_decode("m1", 2, buf, pl.sb.size + 1, NULL, &p),
                     CALIB_CLIENT_REJ_TRAILING_BYTES);
    assert_int_equal(calib_client_decode("m1", 2, buf, pl.sb.size, NULL, &p),
                     CALIB_CLIENT_REJ_NONE);
    free(buf);
    pl_free(&pl);
    assert_int_equal(calib_client_decode("m1", 2, NULL, 0, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_MSGPACK);
}

/* Declared counts no bytes back: refused before msgpack-c allocates them
 * (ASan would report a 64 GB request otherwise). */
static void decode_huge_counts(void **state)
{
    calib_client_params p;
    static const unsigned char map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    static const unsigned char arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0};
    static const unsigned char str32[] = {0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'};
    assert_int_equal(calib_client_decode("m1", 2, map32, sizeof map32, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_MSGPACK);
    assert_int_equal(calib_client_decode("m1", 2, arr32, sizeof arr32, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_MSGPACK);
    assert_int_equal(calib_client_decode("m1", 2, str32, sizeof str32, NULL, &p),
                     CALIB_CLIENT_REJ_BAD_MSGPACK);

    /* a huge array as the value of a known key, inside a sane map */
    payload pl;
    pl_init(&pl);
    mp(&pl, HF "s u s s s", HA(6), "version", 1, "method", "temperature", "params");
    msgpack_sbuffer_write(&pl.sb, (const char *)arr32, 5);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_BAD_MSGPACK);
    pl_free(&pl);

    /* deeper than msgpack-c nests */
    unsigned char deep[64];
    memset(deep, 0x91, sizeof deep); /* fixarray of 1, nested */
    deep[sizeof deep - 1] = 0xc0;
    assert_int_equal(calib_client_decode("m1", 2, deep, sizeof deep, NULL, &p),
                     CALIB_CLIENT_REJ_TOO_DEEP);
}

static void decode_alerts(void **state)
{
    calib_client_alert a;
    payload pl;
    pl_init(&pl);
    mp(&pl, "M s u s s s s s d s s s s s s s d", 8, "v", 1, "type", "alert",
       "model", "m1", "ts", 12.5, "severity", "critical", "kind", "drift",
       "message", "ece up", "ece", 0.2);
    assert_int_equal(calib_client_decode_alert("m1", 2, pl.sb.data, pl.sb.size, &a),
                     CALIB_CLIENT_REJ_NONE);
    assert_string_equal(a.model, "m1");
    assert_string_equal(a.severity, "critical");
    assert_string_equal(a.kind, "drift");
    assert_string_equal(a.message, "ece up");
    assert_true(a.ts == 12.5);
    assert_true(a.payload == pl.sb.data && a.payload_len == pl.sb.size);
    calib_client_params p;
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_OTHER_TYPE);
    pl_free(&pl);

    REJECTS(CALIB_CLIENT_REJ_OTHER_TYPE, "M s u s s s s", 3, "v", 1, "type",
            "alert", "model", "m1");
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u", 4, "v", 1, "type", "alert", "model", "m1",
       "severity", 2);
    assert_int_equal(calib_client_decode_alert("m1", 2, pl.sb.data, pl.sb.size, &a),
                     CALIB_CLIENT_REJ_KEY_TYPE);
    pl_free(&pl);
    params_msg(&pl, "m1", 1, "temperature", 1, T_NAMES, (double[]){1.5});
    assert_int_equal(calib_client_decode_alert("m1", 2, pl.sb.data, pl.sb.size, &a),
                     CALIB_CLIENT_REJ_OTHER_TYPE);
    pl_free(&pl);
}

static void names_and_errors(void **state)
{
    for (int r = 0; r < CALIB_CLIENT_REJ_COUNT; r++) {
        const char *n = calib_client_reject_name(r);
        assert_non_null(n);
        assert_string_not_equal(n, "unknown");
        for (int s = 0; s < r; s++)
            assert_string_not_equal(n, calib_client_reject_name(s));
    }
    assert_string_equal(calib_client_reject_name(-1), "unknown");
    assert_string_equal(calib_client_reject_name(CALIB_CLIENT_REJ_COUNT), "unknown");
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
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_CLIENT_REJ_NONE);
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
    assert_true(st.reject[CALIB_CLIENT_REJ_BAD_TOPIC] == 1);
    assert_true(st.reject[CALIB_CLIENT_REJ_MODEL_MISMATCH] == 1);
    assert_true(st.reject[CALIB_CLIENT_REJ_FRAMING] == 2);
    assert_true(st.reject[CALIB_CLIENT_REJ_BAD_MSGPACK] == 3);
    assert_true(st.reject[CALIB_CLIENT_REJ_TRAILING_BYTES] == 1);
    assert_true(st.reject[CALIB_CLIENT_REJ_BAD_VALUE] == 1);
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
        if (v % 64 == 0)
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
        cmocka_unit_test(decode_each_method),
        cmocka_unit_test(decode_daemon_shapes),
        cmocka_unit_test(decode_number_types),
        cmocka_unit_test(decode_plugin_methods),
        cmocka_unit_test(decode_rejects),
        cmocka_unit_test(decode_bad_topics),
        cmocka_unit_test(decode_truncated_and_trailing),
        cmocka_unit_test(decode_huge_counts),
        cmocka_unit_test(decode_alerts),
        cmocka_unit_test(names_and_errors),
        cmocka_unit_test(apply_matches_recal),
        cmocka_unit_test(version_ordering),
        cmocka_unit_test(socket_hostile_and_topics),
        cmocka_unit_test(api_misuse),
        cmocka_unit_test(end_to_end_background),
        cmocka_unit_test(concurrent_swaps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
