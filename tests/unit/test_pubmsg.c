/* test_pubmsg.c — the messages calibd publishes, one codec: the
 * self-counting writer (calib_mpw: shortest headers, misuse refused), the
 * params and alert writers and calib_pubmsg_decode round-tripping every
 * field, and the decoder against hand-built input of other producers
 * (every method, every number type, every way to be malformed). */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "calib/calib.h"
#include "calib/mpw.h"
#include "calib/plugin.h"
#include "calib/protocol.h"
#include "calib/pubmsg.h"

#include "mp.h"
#include "pubmsg_util.h"

/* Not a reason: a well-formed message of another type than asked for. */
#define OTHER_TYPE CALIB_EINVAL

static int dec(const void *topic, size_t tl, const void *buf, size_t len,
               const calib_plugin_registry *reg, calib_params_msg *out)
{
    calib_pubmsg msg;
    int r = decode_as(CALIB_PUBMSG_PARAMS, topic, tl, buf, len, reg, &msg);
    *out = msg.params;
    return r;
}

static int dec_alert(const void *topic, size_t tl, const void *buf, size_t len,
                     calib_alert_msg *out)
{
    calib_pubmsg msg;
    int r = decode_as(CALIB_PUBMSG_ALERT, topic, tl, buf, len, NULL, &msg);
    *out = msg.alert;
    return r;
}

static int decode_pl(const char *topic, const payload *p,
                     const calib_plugin_registry *reg, calib_params_msg *out)
{
    return dec(topic, strlen(topic), p->sb.data, p->sb.size, reg, out);
}

/* ------------------------------------------------------------------ the writer */

/* The bytes w holds equal those of p. */
static void same_bytes(const calib_mpw *w, const payload *p)
{
    assert_int_equal(calib_mpw_error(w), CALIB_OK);
    assert_int_equal(w->sb.size, p->sb.size);
    assert_memory_equal(w->sb.data, p->sb.data, p->sb.size);
}

/* Nested maps and arrays come out as msgpack_pack_* with the right counts
 * would have made them, headers the shortest. */
static void writer_counts_its_own_entries(void **state)
{
    calib_mpw w;
    calib_mpw_init(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "a");
    calib_mpw_uint(&w, 1);
    calib_mpw_key(&w, "list");
    calib_mpw_array(&w);
    calib_mpw_int(&w, -2);
    calib_mpw_double(&w, 0.5);
    calib_mpw_str(&w, "x");
    calib_mpw_map(&w);
    calib_mpw_end(&w);
    calib_mpw_end(&w);
    calib_mpw_key(&w, "t");
    calib_mpw_bool(&w, 1);
    calib_mpw_key(&w, "f");
    calib_mpw_bool(&w, 0);
    calib_mpw_key(&w, "none");
    calib_mpw_nil(&w);
    calib_mpw_key(&w, "bin");
    calib_mpw_bin(&w, "\x01\x02", 2);
    calib_mpw_end(&w);

    payload p;
    pl_init(&p);
    mp(&p, "M s u s A i d s M", 6, "a", 1, "list", 4, -2, 0.5, "x", 0);
    msgpack_pack_str(&p.pk, 1);
    msgpack_pack_str_body(&p.pk, "t", 1);
    msgpack_pack_true(&p.pk);
    msgpack_pack_str(&p.pk, 1);
    msgpack_pack_str_body(&p.pk, "f", 1);
    msgpack_pack_false(&p.pk);
    mp(&p, "s", "none");
    msgpack_pack_nil(&p.pk);
    mp(&p, "s", "bin");
    msgpack_pack_bin(&p.pk, 2);
    msgpack_pack_bin_body(&p.pk, "\x01\x02", 2);
    same_bytes(&w, &p);
    pl_free(&p);

    /* reset: empty again, reusable */
    calib_mpw_reset(&w);
    assert_int_equal(w.sb.size, 0);
    calib_mpw_array(&w);
    calib_mpw_end(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_OK);
    assert_int_equal(w.sb.size, 1);
    assert_int_equal((unsigned char)w.sb.data[0], 0x90);
    calib_mpw_destroy(&w);
}

/* w's bytes as one msgpack object, every byte of them, into u (to
 * destroy). */
static void unpack_whole(const calib_mpw *w, msgpack_unpacked *u)
{
    msgpack_unpacked_init(u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(u, w->sb.data, w->sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, w->sb.size);
}

/* A container whose body is CALIB_MPW_LONG_BODY or more keeps the 32-bit
 * header whatever its count (its body not moved); msgpack-c reads it as
 * the same object. Below that, the shortest. */
static void writer_long_bodies_keep_32_bit_headers(void **state)
{
    static const char blob[4096];
    for (int map = 0; map < 2; map++) {
        /* n entries of `entry` bytes: the last count below the bound,
         * then the first at or past it */
        size_t entry = sizeof blob - 5 + 3 + (map ? 2 : 0);
        size_t first = (CALIB_MPW_LONG_BODY + entry - 1) / entry;
        for (size_t n = first - 1; n <= first; n++) {
            calib_mpw w;
            calib_mpw_init(&w);
            if (map)
                calib_mpw_map(&w);
            else
                calib_mpw_array(&w);
            for (size_t i = 0; i < n; i++) {
                if (map)
                    calib_mpw_key(&w, "k");
                calib_mpw_bin(&w, blob, sizeof blob - 5);
            }
            calib_mpw_end(&w);
            assert_int_equal(calib_mpw_error(&w), CALIB_OK);
            size_t body = n * entry;
            int long_body = n == first;
            assert_int_equal(long_body, body >= CALIB_MPW_LONG_BODY);
            assert_int_equal(w.sb.size, body + (long_body ? 5 : 3));
            assert_int_equal((unsigned char)w.sb.data[0],
                             long_body ? (map ? 0xdf : 0xdd) : (map ? 0xde : 0xdc));
            msgpack_unpacked u;
            unpack_whole(&w, &u);
            assert_int_equal(map ? u.data.via.map.size : u.data.via.array.size, n);
            msgpack_unpacked_destroy(&u);
            calib_mpw_destroy(&w);
        }
    }
}

/* Around each header size: fix (15), 16-bit (16, 65535), 32-bit (65536). */
static void writer_header_sizes(void **state)
{
    static const uint32_t counts[] = {0, 15, 16, 65535, 65536};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        for (int map = 0; map < 2; map++) {
            calib_mpw w;
            payload p;
            calib_mpw_init(&w);
            pl_init(&p);
            if (map) {
                calib_mpw_map(&w);
                msgpack_pack_map(&p.pk, counts[c]);
            } else {
                calib_mpw_array(&w);
                msgpack_pack_array(&p.pk, counts[c]);
            }
            for (uint32_t i = 0; i < counts[c]; i++) {
                if (map) {
                    char key[16];
                    snprintf(key, sizeof key, "%u", i);
                    calib_mpw_key(&w, key);
                    mp(&p, "s", key);
                }
                calib_mpw_uint(&w, i);
                msgpack_pack_uint64(&p.pk, i);
            }
            calib_mpw_end(&w);
            same_bytes(&w, &p);
            pl_free(&p);
            calib_mpw_destroy(&w);
        }
    }
}

/* Each misuse is refused, sticks, and writes nothing more. */
static void writer_refuses_misuse(void **state)
{
    calib_mpw w;
    calib_mpw_init(&w);

    calib_mpw_map(&w); /* a value without its key */
    calib_mpw_uint(&w, 1);
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);
    size_t size = w.sb.size;
    calib_mpw_key(&w, "k");
    calib_mpw_uint(&w, 1);
    calib_mpw_end(&w);
    assert_int_equal(w.sb.size, size);
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);

    calib_mpw_reset(&w); /* a key in an array */
    calib_mpw_array(&w);
    calib_mpw_key(&w, "k");
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);

    calib_mpw_reset(&w); /* a key whose value never came */
    calib_mpw_map(&w);
    calib_mpw_key(&w, "k");
    calib_mpw_end(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);

    calib_mpw_reset(&w); /* two keys in a row */
    calib_mpw_map(&w);
    calib_mpw_key(&w, "k");
    calib_mpw_key(&w, "l");
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);

    calib_mpw_reset(&w); /* a key outside any map */
    calib_mpw_key(&w, "k");
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);

    calib_mpw_reset(&w); /* a close with nothing open */
    calib_mpw_end(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);

    calib_mpw_reset(&w); /* still open */
    calib_mpw_array(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);
    calib_mpw_end(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_OK);

    calib_mpw_reset(&w); /* deeper than CALIB_MPW_MAX_DEPTH */
    for (int i = 0; i < CALIB_MPW_MAX_DEPTH; i++)
        calib_mpw_array(&w);
    assert_int_equal(w.depth, CALIB_MPW_MAX_DEPTH);
    calib_mpw_array(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_EINVAL);
    calib_mpw_destroy(&w);
}

/* num and pair write nil for what JSON cannot hold; double keeps it. */
static void writer_numbers(void **state)
{
    calib_mpw w;
    calib_mpw_init(&w);
    calib_mpw_array(&w);
    calib_mpw_num(&w, NAN);
    calib_mpw_num(&w, INFINITY);
    calib_mpw_num(&w, 2.5);
    calib_mpw_pair(&w, (double[]){0.1, INFINITY});
    calib_mpw_pair(&w, (double[]){0.1, 0.2});
    calib_mpw_double(&w, NAN);
    calib_mpw_strn(&w, NULL, 0);
    calib_mpw_float(&w, 0.375f);
    calib_mpw_end(&w);
    assert_int_equal(calib_mpw_error(&w), CALIB_OK);

    msgpack_unpacked u;
    unpack_whole(&w, &u);
    const msgpack_object_array *a = &u.data.via.array;
    assert_int_equal(a->size, 8);
    assert_int_equal(a->ptr[7].type, MSGPACK_OBJECT_FLOAT32);
    assert_true(a->ptr[7].via.f64 == 0.375);
    assert_int_equal(a->ptr[0].type, MSGPACK_OBJECT_NIL);
    assert_int_equal(a->ptr[1].type, MSGPACK_OBJECT_NIL);
    assert_true(a->ptr[2].via.f64 == 2.5);
    assert_int_equal(a->ptr[3].type, MSGPACK_OBJECT_NIL);
    assert_int_equal(a->ptr[4].type, MSGPACK_OBJECT_ARRAY);
    assert_true(a->ptr[4].via.array.ptr[1].via.f64 == 0.2);
    assert_nan(a->ptr[5].via.f64);
    assert_int_equal(a->ptr[6].type, MSGPACK_OBJECT_STR);
    assert_int_equal(a->ptr[6].via.str.size, 0);
    msgpack_unpacked_destroy(&u);
    calib_mpw_destroy(&w);
}

/* ------------------------------------------------------------------ round trips */

/* Equal, NaN equal to NaN. */
static void same_num(double a, double b)
{
    if (isnan(a))
        assert_nan(b);
    else
        assert_true(a == b);
}

static void same_scores(const calib_pubmsg_scores *a, const calib_pubmsg_scores *b)
{
    same_num(a->brier, b->brier);
    same_num(a->log, b->log);
    same_num(a->dss, b->dss);
}

/* What was written is what is read, field by field. */
static void round_trip_params(const calib_params_msg *m, const calib_plugin *desc)
{
    payload pl;
    calib_params_msg got;
    pl_of_params(&pl, m);
    assert_int_equal(decode_pl(m->model, &pl, NULL, &got), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_string_equal(got.model, m->model);
    assert_true(got.version == m->version);
    assert_string_equal(got.method, m->method);
    assert_ptr_equal(got.desc, desc);
    assert_int_equal(got.nparams, m->nparams);
    for (unsigned i = 0; i < m->nparams; i++) {
        assert_string_equal(got.names[i], m->names[i]);
        assert_true(got.values[i] == m->values[i]);
    }
    same_num(got.ts, m->ts);
    same_num(got.published, m->published);
    assert_true(got.n == m->n);
    assert_true(got.shadow_n == m->shadow_n);
    same_scores(&got.before, &m->before);
    same_scores(&got.after, &m->after);
    same_num(got.improvement, m->improvement);
    same_num(got.ci[0], m->ci[0]);
    same_num(got.ci[1], m->ci[1]);
    assert_int_equal(got.nsegments, m->nsegments);
    for (unsigned i = 0; i < m->nsegments; i++) {
        assert_string_equal(got.segments[i].key, m->segments[i].key);
        assert_string_equal(got.segments[i].value, m->segments[i].value);
        for (unsigned j = 0; j < m->nparams; j++)
            assert_true(got.segments[i].values[j] == m->segments[i].values[j]);
    }
    assert_int_equal(got.nweights, m->nweights);
    for (unsigned j = 0; j < m->nweights; j++)
        assert_true(got.weights[j] == m->weights[j]);
    assert_int_equal(got.label_free, m->label_free);
}

static void round_trips_params(void **state)
{
    calib_params_msg m;

    /* a published temperature, every figure */
    calib_params_msg_init(&m, "m1");
    m.version = 12;
    strcpy(m.method, "temperature");
    m.nparams = 1;
    strcpy(m.names[0], "T");
    m.values[0] = 1.25;
    m.ts = 1.7e9;
    m.published = 1.6e9;
    m.n = 4000;
    m.shadow_n = 900;
    m.before = (calib_pubmsg_scores){.brier = 0.3, .log = 0.9, .dss = NAN};
    m.after = (calib_pubmsg_scores){.brier = 0.25, .log = 0.8, .dss = NAN};
    m.improvement = 0.05;
    m.ci[0] = 0.04;
    m.ci[1] = 0.06;
    round_trip_params(&m, calib_plugin_builtin("temperature"));

    /* variance, regression's score, an unknown improvement (nil) */
    calib_params_msg_init(&m, "reg.x:1");
    m.version = UINT64_MAX;
    strcpy(m.method, "variance");
    m.nparams = 2;
    strcpy(m.names[0], "w");
    strcpy(m.names[1], "b");
    m.values[0] = 1.5;
    m.values[1] = 0;
    m.before.dss = 1.2;
    m.after.dss = -0.5;
    round_trip_params(&m, calib_plugin_builtin("variance"));

    /* location-scale: three parameters */
    calib_params_msg_init(&m, "reg.x:2");
    m.version = 3;
    strcpy(m.method, "location_scale");
    m.nparams = 3;
    strcpy(m.names[0], "a");
    strcpy(m.names[1], "b");
    strcpy(m.names[2], "c");
    m.values[0] = -0.5;
    m.values[1] = 0.9;
    m.values[2] = 1.25;
    m.before.dss = 1.4;
    m.after.dss = 1.1;
    round_trip_params(&m, calib_plugin_builtin("location_scale"));

    /* version 0: the identity, nothing measured, improvement exactly 0 */
    calib_params_msg_init(&m, "m1");
    strcpy(m.method, "identity");
    m.ts = 5;
    m.improvement = 0;
    m.ci[0] = m.ci[1] = 0;
    round_trip_params(&m, NULL);

    /* a method unknown to the reader: its parameters in the written order */
    calib_params_msg_init(&m, "m1");
    m.version = 3;
    strcpy(m.method, "ets");
    m.nparams = 3;
    strcpy(m.names[0], "t");
    strcpy(m.names[1], "w1");
    strcpy(m.names[2], "w2");
    m.values[0] = 1.2;
    m.values[1] = 0.5;
    m.values[2] = 0.25;
    round_trip_params(&m, NULL);

    /* an interval with one end unknown keeps the other (tests/fuzz/corpus/
     * pubmsg/params_improvement_map: it was written as nil, both lost) */
    calib_params_msg_init(&m, "m1");
    m.version = 4;
    strcpy(m.method, "temperature");
    m.nparams = 1;
    strcpy(m.names[0], "T");
    m.values[0] = 0.7;
    m.ci[1] = 0.1;
    round_trip_params(&m, calib_plugin_builtin("temperature"));
    m.ci[0] = -0.2;
    m.ci[1] = NAN;
    round_trip_params(&m, calib_plugin_builtin("temperature"));
}

/* The largest messages calibd can write, every field at its bound, fit
 * CALIB_PUBMSG_MAX_BYTES with their topic: calibd sizes a subscriber's
 * queue by it (publish_memory). */
static void largest_messages_fit_the_bound(void **state)
{
    char model[CALIB_PUBMSG_MODEL_MAX + 1];
    memset(model, 'm', sizeof model - 1);
    model[sizeof model - 1] = 0;
    calib_params_msg m;
    calib_params_msg_init(&m, model);
    m.version = UINT64_MAX;
    memset(m.method, 'x', CALIB_PLUGIN_NAME_MAX);
    m.method[CALIB_PLUGIN_NAME_MAX] = 0;
    m.nparams = CALIB_RECAL_MAX_PARAMS;
    for (unsigned i = 0; i < m.nparams; i++) {
        memset(m.names[i], 'a' + (int)i, CALIB_PUBMSG_PARAM_NAME_MAX);
        m.names[i][CALIB_PUBMSG_PARAM_NAME_MAX] = 0;
        m.values[i] = -1.2345678901234567e-300;
    }
    m.ts = m.published = m.improvement = m.ci[0] = m.ci[1] = 1.7e9 + 0.123456789;
    m.n = m.shadow_n = UINT64_MAX;
    m.before = m.after = (calib_pubmsg_scores){0.123456789, 2.123456789, -3.123456789};
    m.nweights = CALIB_PUBMSG_MAX_WEIGHTS;
    for (unsigned j = 0; j < m.nweights; j++)
        m.weights[j] = 1.2345678901234567e-6;
    m.label_free = 1;
    m.nsegments = CALIB_PUBMSG_MAX_SEGMENTS;
    for (unsigned i = 0; i < m.nsegments; i++) {
        memset(m.segments[i].key, 'a' + (int)i, CALIB_PUBMSG_SEG_NAME_MAX);
        m.segments[i].key[CALIB_PUBMSG_SEG_NAME_MAX] = 0;
        memset(m.segments[i].value, 'A' + (int)i, CALIB_PUBMSG_SEG_NAME_MAX);
        m.segments[i].value[CALIB_PUBMSG_SEG_NAME_MAX] = 0;
        for (unsigned j = 0; j < m.nparams; j++)
            m.segments[i].values[j] = -1.2345678901234567e-300;
    }
    calib_alert_msg a;
    calib_alert_msg_init(&a, model);
    snprintf(a.severity, sizeof a.severity, "critical");
    memset(a.kind, 'k', sizeof a.kind - 1);
    memset(a.message, 'w', sizeof a.message - 1);
    a.ts = 1.7e9 + 0.123456789;
    a.nvalues = CALIB_PUBMSG_MAX_VALUES;
    for (unsigned i = 0; i < a.nvalues; i++) {
        memset(a.value_names[i], 'A' + (int)i, CALIB_PUBMSG_VALUE_NAME_MAX);
        a.value_names[i][CALIB_PUBMSG_VALUE_NAME_MAX] = 0;
        a.values[i] = -1.2345678901234567e-300;
    }
    calib_mpw w;
    calib_mpw_init(&w);
    assert_int_equal(calib_params_msg_write(&w, &m), CALIB_OK);
    print_message("params: %zu bytes + topic %zu\n", w.sb.size, strlen(model));
    assert_true(w.sb.size + strlen(model) <= CALIB_PUBMSG_MAX_BYTES);
    calib_mpw_reset(&w);
    assert_int_equal(calib_alert_msg_write(&w, &a), CALIB_OK);
    print_message("alert: %zu bytes + topic %zu\n", w.sb.size, strlen(model));
    assert_true(w.sb.size + strlen(model) <= CALIB_PUBMSG_MAX_BYTES);
    calib_mpw_destroy(&w);
}

/* "segments": written after the figures as "key=value" maps of the
 * method's names, read back whole; the first match applies. */
static void round_trips_segments(void **state)
{
    (void)state;
    calib_params_msg m;
    params_of(&m, "m1", 3, "platt", 2, (const char *[]){"a", "b"}, (double[]){1, 0});
    m.nsegments = 2;
    m.segments[0] = (calib_params_segment){"country", "DE", {0.5, 0.1}};
    m.segments[1] = (calib_params_segment){"device", "S\xc3\xa3o=x", {0.7, -0.2}};
    round_trip_params(&m, calib_plugin_builtin("platt"));
    const char *keys[] = {"tier", "device", "country"}, *vals[] = {"gold", "S\xc3\xa3o=x", "DE"};
    assert_ptr_equal(calib_params_segment_find(&m, keys, vals, 3), &m.segments[0]);
    assert_ptr_equal(calib_params_segment_find(&m, keys, vals, 2), &m.segments[1]);
    assert_null(calib_params_segment_find(&m, keys, vals, 1));
    assert_null(calib_params_segment_find(NULL, keys, vals, 3));
}

static void round_trips_alerts(void **state)
{
    calib_alert_msg a, got;
    calib_alert_msg_init(&a, "m1");
    a.ts = 12.5;
    strcpy(a.severity, "critical");
    strcpy(a.kind, "threshold");
    strcpy(a.message, "window ECE 0.2 above 0.1");
    a.nvalues = CALIB_PUBMSG_MAX_VALUES;
    for (unsigned i = 0; i < a.nvalues; i++) {
        snprintf(a.value_names[i], sizeof a.value_names[i], "v%u", i);
        a.values[i] = i == 3 ? NAN : 0.125 * i;
    }
    calib_mpw w;
    calib_mpw_init(&w);
    assert_int_equal(calib_alert_msg_write(&w, &a), CALIB_OK);
    assert_int_equal(dec_alert("m1", 2, w.sb.data, w.sb.size, &got), CALIB_REJ_NONE);
    assert_string_equal(got.model, "m1");
    assert_true(got.ts == 12.5);
    assert_string_equal(got.severity, a.severity);
    assert_string_equal(got.kind, a.kind);
    assert_string_equal(got.message, a.message);
    assert_int_equal(got.nvalues, a.nvalues);
    for (unsigned i = 0; i < a.nvalues; i++) {
        assert_string_equal(got.value_names[i], a.value_names[i]);
        same_num(got.values[i], a.values[i]);
    }
    assert_ptr_equal(got.payload, w.sb.data);
    assert_int_equal(got.payload_len, w.sb.size);
    /* an alert is not params */
    calib_params_msg p;
    assert_int_equal(dec("m1", 2, w.sb.data, w.sb.size, NULL, &p), OTHER_TYPE);
    calib_mpw_destroy(&w);
}

/* ------------------------------------------------------------------ other producers */

/* A params message as another producer may write it: every key of the
 * contract, improvement as a map {"mean", "ci"}, values float64. */
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

/* ------------------------------------------------------------------ decoding */

static void decode_each_method(void **state)
{
    calib_params_msg p;
    payload pl;

    params_msg(&pl, "m1", 7, "temperature", 1, T_NAMES, (double[]){1.75});
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
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
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.desc == calib_plugin_builtin("platt"));
    assert_string_equal(p.names[0], "a");
    assert_string_equal(p.names[1], "b");
    assert_true(p.values[0] == 1.25 && p.values[1] == -0.5);

    params_msg(&pl, "m.x:1", 3, "variance", 2, WB_NAMES, (double[]){1.5, 0});
    assert_int_equal(decode_pl("m.x:1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.desc == calib_plugin_builtin("variance"));
    assert_true(p.values[0] == 1.5 && p.values[1] == 0);

    /* only the required keys: the informational ones are NaN / 0 */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s d", 6, "v", 1, "type", "params",
       "model", "m1", "version", 9, "method", "temperature", "params", 1, "T", 2.0);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
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
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == 0.5 && p.nparams == 1);
}

/* Figures calibd could not estimate are nil. */
static void decode_nil_figures(void **state)
{
    calib_params_msg p;
    payload pl;
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s d s n s n s M s n", 9, "v", 1, "type",
       "params", "model", "m1", "version", 3, "method", "temperature", "params",
       1, "T", 1.25, "improvement", "ci", "before", 1, "brier");
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_nan(p.improvement);
    assert_nan(p.ci[0]);
    assert_nan(p.before.brier);
}

static void decode_number_types(void **state)
{
    calib_params_msg p;
    payload pl;
    /* positive int, negative int, float32, float64 */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s u", 6, "v", 1, "type", "params", "model",
       "m1", "version", 1, "method", "temperature", "params", 1, "T", 3);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == 3.0);

    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s i s f s i", 7, "v", 1, "type", "params",
       "model", "m1", "version", 1, "method", "platt", "params", 2, "a", -2, "b",
       0.375, "ts", -5);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == -2.0 && p.values[1] == 0.375);
    assert_true(p.ts == -5.0);

    pl_init(&pl);
    mp(&pl, "M s u s s s s s u s s s M s f s d s f", 7, "v", 1, "type", "params",
       "model", "m1", "version", 1, "method", "variance", "params", 2, "w", 1.5,
       "b", 0.1, "ts", 2.5);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.values[0] == 1.5 && p.values[1] == 0.1 && p.ts == 2.5);

    /* the largest version */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s U s s s M s d", 6, "v", 1, "type", "params", "model",
       "m1", "version", UINT64_MAX, "method", "temperature", "params", 1, "T", 1.0);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_true(p.version == UINT64_MAX);
}

static void decode_plugin_methods(void **state)
{
    calib_plugin_registry reg;
    calib_params_msg p;
    payload pl;
    mix_registry(&reg);

    /* known through the registry: resolved and in its order */
    double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    params_msg(&pl, "m1", 5, "mix8", 8, mix8.param_names, v);
    assert_int_equal(decode_pl("m1", &pl, &reg, &p), CALIB_REJ_NONE);
    assert_true(p.desc == &mix8);
    assert_int_equal(p.nparams, 8);
    assert_string_equal(p.names[7], "p7");
    assert_true(p.values[7] == 8);

    /* unknown without it: kept in the message's order, not applicable */
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_null(p.desc);
    assert_string_equal(p.method, "mix8");
    assert_int_equal(p.nparams, 8);
    assert_string_equal(p.names[0], "p0");
    assert_true(p.values[3] == 4);

    params_msg(&pl, "m1", 5, "ets", 3, (const char *[]){"t", "w1", "w2"},
               (double[]){1.2, 0.5, 0.25});
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_NONE);
    pl_free(&pl);
    assert_string_equal(p.names[2], "w2");
    assert_true(p.values[2] == 0.25);

    /* a registered method missing one of its parameters */
    params_msg(&pl, "m1", 5, "mix8", 7, mix8.param_names, v);
    assert_int_equal(decode_pl("m1", &pl, &reg, &p), CALIB_REJ_BAD_PARAMS);
    pl_free(&pl);
    calib_plugin_registry_free(&reg);
}

/* Decodes the payload built by fmt with topic "m1" and checks the reason. */
#define REJECTS(reason, ...)                                                  \
    do {                                                                      \
        payload p_;                                                           \
        calib_params_msg out_;                                             \
        pl_init(&p_);                                                         \
        mp(&p_, __VA_ARGS__);                                                 \
        int r_ = decode_pl("m1", &p_, NULL, &out_);                           \
        if (r_ != (reason))                                                   \
            print_error("line %d: got %s, want %s\n", __LINE__,               \
                        calib_reject_name(r_),                         \
                        calib_reject_name(reason));                    \
        assert_int_equal(r_, (reason));                                       \
        pl_free(&p_);                                                         \
    } while (0)

/* The head of a params map with count entries: v, type, model. */
#define HF "M s u s s s s "
#define HA(count) (count), "v", 1, "type", "params", "model", "m1"

/* "prior_weights": written with "v": 2 (a v1 reader refuses it), read
 * back whole with "label_free"; without them a message stays v1. */
static void round_trips_weights(void **state)
{
    (void)state;
    calib_params_msg m;
    params_of(&m, "m1", 5, "temperature", 1, (const char *[]){"T"}, (double[]){1.5});
    calib_mpw w;
    calib_mpw_init(&w);
    assert_int_equal(calib_params_msg_write(&w, &m), CALIB_OK);
    assert_int_equal(((const unsigned char *)w.sb.data)[1 + 1 + 1], CALIB_PROTO_VERSION);
    m.nweights = 3;
    m.weights[0] = 2.5;
    m.weights[1] = 0.5;
    m.weights[2] = 1e-6;
    m.label_free = 1;
    round_trip_params(&m, calib_plugin_builtin("temperature"));
    calib_mpw_reset(&w);
    assert_int_equal(calib_params_msg_write(&w, &m), CALIB_OK);
    /* fixmap, "v" (fixstr of 1), then its value */
    assert_int_equal(((const unsigned char *)w.sb.data)[1 + 1 + 1],
                     CALIB_PUBMSG_VERSION_WEIGHTS);
    calib_mpw_destroy(&w);
    m.label_free = 0;
    round_trip_params(&m, calib_plugin_builtin("temperature"));
}

/* Weights out of their bounds, of the wrong type or count, or in a v1
 * message reject it. */
static void decode_weight_rejects(void **state)
{
    (void)state;
#define TH "M s u s s s s s u s s s M s d "
#define TA(v, count) (count), "v", v, "type", "params", "model", "m1", "version", 1, \
    "method", "temperature", "params", 1, "T", 1.5
    REJECTS(CALIB_REJ_NONE, TH "s A d d", TA(2, 7), "prior_weights", 2, 0.5, 2.0);
    REJECTS(CALIB_REJ_NONE, TH "s A d d s t", TA(2, 8), "prior_weights", 2, 0.5, 2.0,
            "label_free", 1);
    REJECTS(CALIB_REJ_NONE, TH, TA(2, 6)); /* v2 without weights */
    REJECTS(CALIB_REJ_BAD_VERSION, TH "s A d d", TA(1, 7), "prior_weights", 2, 0.5, 2.0);
    REJECTS(CALIB_REJ_BAD_VERSION, TH, TA(3, 6));
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s A d", TA(2, 7), "prior_weights", 1, 0.5);
    REJECTS(CALIB_REJ_BAD_VALUE, TH "s A d d", TA(2, 7), "prior_weights", 2, 0.0, 2.0);
    REJECTS(CALIB_REJ_BAD_VALUE, TH "s A d d", TA(2, 7), "prior_weights", 2, 0.5, 2e6);
    REJECTS(CALIB_REJ_BAD_VALUE, TH "s A d d", TA(2, 7), "prior_weights", 2, 0.5, NAN);
    REJECTS(CALIB_REJ_KEY_TYPE, TH "s A d s", TA(2, 7), "prior_weights", 2, 0.5, "x");
    REJECTS(CALIB_REJ_KEY_TYPE, TH "s d", TA(2, 7), "prior_weights", 0.5);
    REJECTS(CALIB_REJ_KEY_TYPE, TH "s A d d s u", TA(2, 8), "prior_weights", 2, 0.5, 2.0,
            "label_free", 1);
#undef TH
#undef TA
}

/* A bad "segments" rejects the message. */
static void decode_segment_rejects(void **state)
{
    (void)state;
#define TH HF "s u s s s M s d "
#define TA(count) HA(count), "version", 1, "method", "temperature", "params", 1, "T", 1.5
    REJECTS(CALIB_REJ_NONE, TH "s M s M s d", TA(7), "segments", 1, "country=DE", 1, "T", 2.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s u", TA(7), "segments", 3);
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s M s M s d", TA(7), "segments", 1, "countryDE", 1, "T", 2.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s M s M s d", TA(7), "segments", 1, "a b=DE", 1, "T", 2.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s M s M s d", TA(7), "segments", 1, "a=", 1, "T", 2.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s M s M s d", TA(7), "segments", 1, "a=x", 1, "U", 2.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, TH "s M s M", TA(7), "segments", 1, "a=x", 0);
    REJECTS(CALIB_REJ_BAD_VALUE, TH "s M s M s d", TA(7), "segments", 1, "a=x", 1, "T", -1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, TH "s M s M s s", TA(7), "segments", 1, "a=x", 1, "T", "x");
    REJECTS(CALIB_REJ_DUPLICATE_KEY, TH "s M s M s d s M s d", TA(7), "segments", 2,
            "a=x", 1, "T", 2.0, "a=x", 1, "T", 3.0);
#undef TH
#undef TA
}

static void decode_rejects(void **state)
{
    /* envelope */
    REJECTS(CALIB_REJ_NOT_A_MAP, "A u", 1, 1);
    REJECTS(CALIB_REJ_NOT_A_MAP, "s", "params");
    REJECTS(CALIB_REJ_BAD_KEY, "M u u", 1, 1, 1);
    REJECTS(CALIB_REJ_BAD_VERSION, "M s s", 1, "type", "params");
    REJECTS(CALIB_REJ_BAD_VERSION, "M s u s s", 2, "v", 3, "type", "params");
    REJECTS(CALIB_REJ_BAD_VERSION, "M s d s s", 2, "v", 1.0, "type", "params");
    REJECTS(CALIB_REJ_BAD_TYPE, "M s u", 1, "v", 1);
    REJECTS(CALIB_REJ_BAD_TYPE, "M s u s u", 2, "v", 1, "type", 3);
    REJECTS(CALIB_REJ_DUPLICATE_KEY, "M s u s u s s", 3, "v", 1, "v", 1,
            "type", "params");
    /* another type is not an error, but not params either */
    REJECTS(OTHER_TYPE, "M s u s s s s", 3, "v", 1, "type",
            "alert", "model", "m1");
    REJECTS(OTHER_TYPE, "M s u s s", 2, "v", 1, "type",
            "heartbeat");

    /* required keys, their types */
    REJECTS(CALIB_REJ_MISSING_KEY, "M s u s s s u s s s M s d", 5, "v", 1,
            "type", "params", "version", 1, "method", "temperature", "params", 1,
            "T", 1.0);
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s s s M s d", HA(5), "method",
            "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s u s M s d", HA(5), "version", 1,
            "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s u s s", HA(5), "version", 1,
            "method", "temperature");
    REJECTS(CALIB_REJ_KEY_TYPE, "M s u s s s u s u s s s M s d", 6, "v",
            1, "type", "params", "model", 1, "version", 1, "method",
            "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s i s s s M s d", HA(6), "version",
            -1, "method", "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s d s s s M s d", HA(6), "version",
            2.0, "method", "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s u s M s d", HA(6), "version",
            1, "method", 7, "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s A d", HA(6), "version", 1,
            "method", "temperature", "params", 1, 1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s s", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", "1.5");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s n", HA(6), "version",
            1, "method", "temperature", "params", 1, "T");
    REJECTS(CALIB_REJ_DUPLICATE_KEY, HF "s u s u s s s M s d", HA(7),
            "version", 1, "version", 2, "method", "temperature", "params", 1,
            "T", 1.0);
    REJECTS(CALIB_REJ_DUPLICATE_KEY, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "temperature", "params", 2, "T", 1.0, "T",
            2.0);

    /* the model must be the topic, exactly */
    REJECTS(CALIB_REJ_MODEL_MISMATCH, "M s u s s s s s u s s s M s d", 6,
            "v", 1, "type", "params", "model", "m2", "version", 1, "method",
            "temperature", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_MODEL_MISMATCH, "M s u s s s s s u s s s M s d", 6,
            "v", 1, "type", "params", "model", "m10", "version", 1, "method",
            "temperature", "params", 1, "T", 1.0);

    /* method names and parameter maps */
    REJECTS(CALIB_REJ_BAD_METHOD, HF "s u s s s M s d", HA(6), "version",
            1, "method", "", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_BAD_METHOD, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temp erature", "params", 1, "T", 1.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M s d", HA(6), "version",
            1, "method", "platt", "params", 1, "a", 1.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "t", 1.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M u d", HA(6), "version",
            1, "method", "temperature", "params", 1, 0, 1.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M", HA(6), "version", 1,
            "method", "someplugin", "params", 0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M sd sd sd sd sd sd sd sd sd",
            HA(6), "version", 1, "method", "someplugin", "params", 9, "a", 1.0,
            "b", 1.0, "c", 1.0, "d", 1.0, "e", 1.0, "f", 1.0, "g", 1.0, "h",
            1.0, "i", 1.0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M s d", HA(6), "version",
            1, "method", "someplugin", "params", 1, "a=b", 1.0);
    REJECTS(CALIB_REJ_DUPLICATE_KEY, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "someplugin", "params", 2, "a", 1.0, "a",
            2.0);

    /* values outside the method's domain */
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", -1.5);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s i", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", -2);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", 0.0);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", (double)NAN);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s f", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", (double)INFINITY);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "platt", "params", 2, "a", (double)INFINITY,
            "b", 0.0);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "variance", "params", 2, "w", 0.0, "b", 1.0);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(6),
            "version", 1, "method", "variance", "params", 2, "w", 1.0, "b", -0.1);
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "someplugin", "params", 1, "q", (double)NAN);
    /* T > 0, but 1 / T overflows: softmax(z / T) would be NaN
     * (tests/fuzz/corpus/pubmsg/crash-tiny_temperature) */
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d", HA(6), "version",
            1, "method", "temperature", "params", 1, "T", 1e-310);

    /* the optional keys, when present, have their types */
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0, "ts",
            "now");
    REJECTS(CALIB_REJ_BAD_VALUE, HF "s u s s s M s d s d", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0, "ts",
            (double)NAN);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s i", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0, "n", -4);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s A", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "before", 0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s M s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "after", 1, "brier", "low");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s M s A d d d",
            HA(7), "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "improvement", 1, "ci", 3, 0.1, 0.2, 0.3);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s M s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "improvement", 1, "mean", "big");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s s", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "improvement", "big");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s M s d s A d", HA(7),
            "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "ci", 1, 0.5);
    REJECTS(CALIB_REJ_DUPLICATE_KEY, HF "s u s s s M s d s A d d s M s A d d",
            HA(8), "version", 1, "method", "temperature", "params", 1, "T", 1.0,
            "ci", 2, 0.1, 0.2, "improvement", 1, "ci", 2, 0.1, 0.2);
    /* only version 0 may come without parameters */
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M", HA(6), "version", 1,
            "method", "identity", "params", 0);
    REJECTS(CALIB_REJ_BAD_PARAMS, HF "s u s s s M", HA(6), "version", 1,
            "method", "temperature", "params", 0);
}

static void decode_bad_topics(void **state)
{
    calib_params_msg p;
    payload pl;
    params_msg(&pl, "m1", 1, "temperature", 1, T_NAMES, (double[]){1.5});
    assert_int_equal(dec("", 0, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(dec("m 1", 3, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(dec("m1\0", 3, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_REJ_BAD_TOPIC);
    char longname[CALIB_PUBMSG_MODEL_MAX + 2];
    memset(longname, 'a', sizeof longname);
    assert_int_equal(dec(longname, sizeof longname, pl.sb.data,
                                         pl.sb.size, NULL, &p),
                     CALIB_REJ_BAD_TOPIC);
    /* the topic is the one the message names */
    assert_int_equal(dec("m", 1, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_REJ_MODEL_MISMATCH);
    assert_int_equal(dec("m1", 2, pl.sb.data, pl.sb.size, NULL, &p),
                     CALIB_REJ_NONE);
    pl_free(&pl);
}

/* Every proper prefix is truncated; one more byte is trailing. */
static void decode_truncated_and_trailing(void **state)
{
    calib_params_msg p;
    payload pl;
    params_msg(&pl, "m1", 1, "platt", 2, AB_NAMES, (double[]){1.5, -0.25});
    for (size_t len = 0; len < pl.sb.size; len++) {
        int r = dec("m1", 2, pl.sb.data, len, NULL, &p);
        if (r != CALIB_REJ_BAD_MSGPACK)
            print_error("prefix of %zu bytes: %s\n", len, calib_reject_name(r));
        assert_int_equal(r, CALIB_REJ_BAD_MSGPACK);
    }
    unsigned char *buf = malloc(pl.sb.size + 1);
    memcpy(buf, pl.sb.data, pl.sb.size);
    buf[pl.sb.size] = 0xc0; /* nil */
    assert_int_equal(dec("m1", 2, buf, pl.sb.size + 1, NULL, &p),
                     CALIB_REJ_TRAILING_BYTES);
    assert_int_equal(dec("m1", 2, buf, pl.sb.size, NULL, &p),
                     CALIB_REJ_NONE);
    free(buf);
    pl_free(&pl);
    assert_int_equal(dec("m1", 2, NULL, 0, NULL, &p),
                     CALIB_REJ_BAD_MSGPACK);
}

/* Declared counts no bytes back: refused before msgpack-c allocates them
 * (ASan would report a 64 GB request otherwise). */
static void decode_huge_counts(void **state)
{
    calib_params_msg p;
    static const unsigned char map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    static const unsigned char arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0};
    static const unsigned char str32[] = {0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'};
    assert_int_equal(dec("m1", 2, map32, sizeof map32, NULL, &p),
                     CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(dec("m1", 2, arr32, sizeof arr32, NULL, &p),
                     CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(dec("m1", 2, str32, sizeof str32, NULL, &p),
                     CALIB_REJ_BAD_MSGPACK);

    /* a huge array as the value of a known key, inside a sane map */
    payload pl;
    pl_init(&pl);
    mp(&pl, HF "s u s s s", HA(6), "version", 1, "method", "temperature", "params");
    msgpack_sbuffer_write(&pl.sb, (const char *)arr32, 5);
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), CALIB_REJ_BAD_MSGPACK);
    pl_free(&pl);

    /* deeper than msgpack-c nests */
    unsigned char deep[64];
    memset(deep, 0x91, sizeof deep); /* fixarray of 1, nested */
    deep[sizeof deep - 1] = 0xc0;
    assert_int_equal(dec("m1", 2, deep, sizeof deep, NULL, &p),
                     CALIB_REJ_TOO_DEEP);
}

static void decode_alerts(void **state)
{
    calib_alert_msg a;
    payload pl;
    pl_init(&pl);
    mp(&pl, "M s u s s s s s d s s s s s s s d", 8, "v", 1, "type", "alert",
       "model", "m1", "ts", 12.5, "severity", "critical", "kind", "drift",
       "message", "ece up", "ece", 0.2);
    assert_int_equal(dec_alert("m1", 2, pl.sb.data, pl.sb.size, &a),
                     CALIB_REJ_NONE);
    assert_string_equal(a.model, "m1");
    assert_string_equal(a.severity, "critical");
    assert_string_equal(a.kind, "drift");
    assert_string_equal(a.message, "ece up");
    assert_true(a.ts == 12.5);
    assert_true(a.payload == pl.sb.data && a.payload_len == pl.sb.size);
    calib_params_msg p;
    assert_int_equal(decode_pl("m1", &pl, NULL, &p), OTHER_TYPE);
    pl_free(&pl);

    REJECTS(OTHER_TYPE, "M s u s s s s", 3, "v", 1, "type",
            "alert", "model", "m1");
    pl_init(&pl);
    mp(&pl, "M s u s s s s s u", 4, "v", 1, "type", "alert", "model", "m1",
       "severity", 2);
    assert_int_equal(dec_alert("m1", 2, pl.sb.data, pl.sb.size, &a),
                     CALIB_REJ_KEY_TYPE);
    pl_free(&pl);
    params_msg(&pl, "m1", 1, "temperature", 1, T_NAMES, (double[]){1.5});
    assert_int_equal(dec_alert("m1", 2, pl.sb.data, pl.sb.size, &a),
                     OTHER_TYPE);
    pl_free(&pl);

    /* "values": a map of numbers or nil, at most CALIB_PUBMSG_MAX_VALUES */
    pl_init(&pl);
    mp(&pl, "M s u s s s s s M s d s n", 4, "v", 1, "type", "alert", "model",
       "m1", "values", 2, "ece", 0.2, "rbs");
    assert_int_equal(dec_alert("m1", 2, pl.sb.data, pl.sb.size, &a), CALIB_REJ_NONE);
    assert_int_equal(a.nvalues, 2);
    assert_string_equal(a.value_names[0], "ece");
    assert_true(a.values[0] == 0.2);
    assert_nan(a.values[1]);
    pl_free(&pl);
    REJECTS(CALIB_REJ_KEY_TYPE, "M s u s s s s s A", 4, "v", 1, "type", "alert",
            "model", "m1", "values", 0);
    REJECTS(CALIB_REJ_KEY_TYPE, "M s u s s s s s M s s", 4, "v", 1, "type",
            "alert", "model", "m1", "values", 1, "ece", "high");
    pl_init(&pl);
    mp(&pl, "M s u s s s s s M", 4, "v", 1, "type", "alert", "model", "m1",
       "values", CALIB_PUBMSG_MAX_VALUES + 1);
    for (int i = 0; i <= CALIB_PUBMSG_MAX_VALUES; i++) {
        char name[8];
        snprintf(name, sizeof name, "v%d", i);
        mp(&pl, "s d", name, 1.0);
    }
    assert_int_equal(dec_alert("m1", 2, pl.sb.data, pl.sb.size, &a), CALIB_REJ_BAD_PARAMS);
    pl_free(&pl);
}

static void reject_names(void **state)
{
    for (int r = 0; r < CALIB_REJ_COUNT; r++) {
        const char *n = calib_reject_name(r);
        assert_non_null(n);
        assert_string_not_equal(n, "unknown");
        for (int s = 0; s < r; s++)
            assert_string_not_equal(n, calib_reject_name(s));
    }
    assert_string_equal(calib_reject_name(-1), "unknown");
    assert_string_equal(calib_reject_name(CALIB_REJ_COUNT), "unknown");
    assert_string_equal(calib_reject_name(CALIB_REJ_FRAMING), "framing");
    assert_string_equal(calib_reject_name(CALIB_REJ_BAD_VALUE), "bad_value");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writer_counts_its_own_entries),
        cmocka_unit_test(writer_header_sizes),
        cmocka_unit_test(writer_long_bodies_keep_32_bit_headers),
        cmocka_unit_test(writer_refuses_misuse),
        cmocka_unit_test(writer_numbers),
        cmocka_unit_test(round_trips_params),
        cmocka_unit_test(round_trips_alerts),
        cmocka_unit_test(round_trips_segments),
        cmocka_unit_test(round_trips_weights),
        cmocka_unit_test(decode_weight_rejects),
        cmocka_unit_test(largest_messages_fit_the_bound),
        cmocka_unit_test(decode_each_method),
        cmocka_unit_test(decode_nil_figures),
        cmocka_unit_test(decode_number_types),
        cmocka_unit_test(decode_plugin_methods),
        cmocka_unit_test(decode_rejects),
        cmocka_unit_test(decode_segment_rejects),
        cmocka_unit_test(decode_bad_topics),
        cmocka_unit_test(decode_truncated_and_trailing),
        cmocka_unit_test(decode_huge_counts),
        cmocka_unit_test(decode_alerts),
        cmocka_unit_test(reject_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
