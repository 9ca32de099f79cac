/* test_json_msg.c — the JSON bodies of HTTP ingest. JSON messages to
 * msgpack (json_msg.h): every JSON type to its msgpack twin, the same
 * message in JSON and in msgpack decoded to the same records, and what is
 * no JSON object refused with where. KServe responses (kserve.h): V1 and
 * V2 outputs, one row and batches, to the records and ids they say; the
 * output and form chosen; what holds no usable output, told apart. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/protocol.h"
#include "json_msg.h"
#include "kserve.h"

static int convert(const char *json, calib_mpw *w, char *err, size_t errlen)
{
    calib_mpw_reset(w);
    return json_msg_to_msgpack(json, strlen(json), w, err, errlen);
}

static void every_type_has_its_twin(void **state)
{
    (void)state;
    calib_mpw w, want;
    calib_mpw_init(&w);
    calib_mpw_init(&want);
    char err[256];
    assert_int_equal(convert("{\"s\": \"x\\u00e9\", \"u\": 18446744073709551615, \"i\": -5, "
                             "\"u0\": 7, \"f\": 0.5, \"e\": 1e300, \"t\": true, \"n\": null, "
                             "\"a\": [1, [2.0], {}]}", &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "not JSON")); /* beyond 64-bit signed: no JSON here */
    assert_int_equal(convert("{\"s\": \"x\\u00e9\", \"u\": 9223372036854775807, \"i\": -5, "
                             "\"f\": 0.5, \"e\": 1e300, \"t\": true, \"n\": null, "
                             "\"a\": [1, [2.0], {}]}", &w, err, sizeof err), 0);
    calib_mpw_map(&want);
    calib_mpw_key(&want, "s");
    calib_mpw_str(&want, "x\xc3\xa9");
    calib_mpw_key(&want, "u");
    calib_mpw_uint(&want, 9223372036854775807ULL);
    calib_mpw_key(&want, "i");
    calib_mpw_int(&want, -5);
    calib_mpw_key(&want, "f");
    calib_mpw_double(&want, 0.5);
    calib_mpw_key(&want, "e");
    calib_mpw_double(&want, 1e300);
    calib_mpw_key(&want, "t");
    calib_mpw_bool(&want, 1);
    calib_mpw_key(&want, "n");
    calib_mpw_nil(&want);
    calib_mpw_key(&want, "a");
    calib_mpw_array(&want);
    calib_mpw_uint(&want, 1);
    calib_mpw_array(&want);
    calib_mpw_double(&want, 2.0);
    calib_mpw_end(&want);
    calib_mpw_map(&want);
    calib_mpw_end(&want);
    calib_mpw_end(&want);
    calib_mpw_end(&want);
    assert_int_equal(w.sb.size, want.sb.size);
    assert_memory_equal(w.sb.data, want.sb.data, w.sb.size);
    calib_mpw_destroy(&w);
    calib_mpw_destroy(&want);
}

/* The same batch in both encodings: the same records, bit for bit. */
static void json_and_msgpack_decode_alike(void **state)
{
    (void)state;
    const char *json = "{\"v\": 1, \"type\": \"pred\", \"n\": 2, \"k\": 3, \"id\": [\"a\", 7], "
                       "\"logits\": [[0.1, -2, 3.25], [1e-9, 0, 2]], \"y\": [2, 0], "
                       "\"ts\": 1700000000.5}";
    calib_mpw w, m;
    calib_mpw_init(&w);
    calib_mpw_init(&m);
    char err[256];
    assert_int_equal(convert(json, &w, err, sizeof err), 0);
    calib_mpw_map(&m);
    calib_mpw_key_uint(&m, "v", 1);
    calib_mpw_key(&m, "type");
    calib_mpw_str(&m, "pred");
    calib_mpw_key_uint(&m, "n", 2);
    calib_mpw_key_uint(&m, "k", 3);
    calib_mpw_key(&m, "id");
    calib_mpw_array(&m);
    calib_mpw_str(&m, "a");
    calib_mpw_uint(&m, 7);
    calib_mpw_end(&m);
    const double z[6] = {0.1, -2, 3.25, 1e-9, 0, 2};
    calib_mpw_key(&m, "logits");
    calib_mpw_bin(&m, z, sizeof z);
    calib_mpw_key(&m, "y");
    calib_mpw_array(&m);
    calib_mpw_uint(&m, 2);
    calib_mpw_uint(&m, 0);
    calib_mpw_end(&m);
    calib_mpw_key_double(&m, "ts", 1700000000.5);
    calib_mpw_end(&m);
    calib_msg a, b;
    calib_msg_init(&a);
    calib_msg_init(&b);
    assert_int_equal(calib_msg_decode(&a, "m", 1, w.sb.data, w.sb.size), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_decode(&b, "m", 1, m.sb.data, m.sb.size), CALIB_REJ_NONE);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.k, b.k);
    for (size_t i = 0; i < 2; i++) {
        calib_msg_rec ra, rb;
        double xa[3], xb[3];
        assert_int_equal(calib_msg_record(&a, i, &ra, xa), CALIB_REJ_NONE);
        assert_int_equal(calib_msg_record(&b, i, &rb, xb), CALIB_REJ_NONE);
        assert_memory_equal(xa, xb, sizeof xa);
        assert_true(ra.y == rb.y && ra.ts == rb.ts && ra.id_kind == rb.id_kind);
    }
    calib_msg_destroy(&a);
    calib_msg_destroy(&b);
    calib_mpw_destroy(&w);
    calib_mpw_destroy(&m);
}

static void what_is_no_json_object_is_refused(void **state)
{
    (void)state;
    calib_mpw w;
    calib_mpw_init(&w);
    char err[256];
    struct {
        const char *json, *why;
    } cases[] = {
        {"", "not JSON"},
        {"{\"v\": 1", "not JSON"},
        {"{\"v\": 1} x", "not JSON"},
        {"{\"v\": 1, \"v\": 2}", "not JSON"},          /* a key twice */
        {"[1, 2]", "not a JSON object"},
        {"\"v\"", "not JSON"},  /* jansson takes objects and arrays only */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(convert(cases[i].json, &w, err, sizeof err), -1);
        if (!strstr(err, cases[i].why))
            print_error("%s: %s\n", cases[i].json, err);
        assert_non_null(strstr(err, cases[i].why));
    }
    /* deeper than the writer nests (CALIB_MPW_MAX_DEPTH) */
    char deep[128];
    int d = CALIB_MPW_MAX_DEPTH + 2;
    size_t n = (size_t)snprintf(deep, sizeof deep, "{\"a\": ");
    for (int i = 0; i < d; i++)
        deep[n++] = '[';
    deep[n++] = '1';
    for (int i = 0; i < d; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = 0;
    assert_int_equal(convert(deep, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "nested deeper"));
    assert_int_equal(convert("{\"v\": 1,\n \"x\": }", &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 2")); /* where */
    calib_mpw_destroy(&w);
}

/* kserve_to_msg on body, decoded: the rows (or -1, 0 with why). */
static int kserve(const char *body, const char *output, int form, calib_msg *m, char *why)
{
    calib_mpw w;
    calib_mpw_init(&w);
    kserve_opts o = {output, form};
    int n = kserve_to_msg(body, strlen(body), "ev-1", &o, &w, why, 256);
    if (n > 0)
        assert_int_equal(calib_msg_decode(m, "m", 1, w.sb.data, w.sb.size), CALIB_REJ_NONE);
    calib_mpw_destroy(&w);
    return n;
}

static void record(calib_msg *m, size_t i, const char *id, const double *want, size_t k)
{
    calib_msg_rec r;
    double x[8];
    assert_int_equal(calib_msg_record(m, i, &r, x), CALIB_REJ_NONE);
    assert_int_equal(r.id_kind, CALIB_MSG_ID_STR);
    assert_int_equal(r.id_len, strlen(id));
    assert_memory_equal(r.id, id, r.id_len);
    for (size_t j = 0; j < k; j++)
        assert_true(x[j] == want[j]);
}

static void kserve_outputs_to_records(void **state)
{
    (void)state;
    calib_msg m;
    calib_msg_init(&m);
    char why[256];
    /* V1, a batch of probability rows: ids ev-1/0, ev-1/1 */
    assert_int_equal(kserve("{\"predictions\": [[0.25, 0.75], [1, 0]]}", NULL, -1, &m, why), 2);
    assert_int_equal(m.form, CALIB_FORM_PROBS);
    record(&m, 0, "ev-1/0", (const double[]){0.25, 0.75}, 2);
    record(&m, 1, "ev-1/1", (const double[]){1, 0}, 2);
    /* V1, one row: the id is ce-id itself */
    assert_int_equal(kserve("{\"predictions\": [[0.5, 0.3, 0.2]]}", NULL, -1, &m, why), 1);
    record(&m, 0, "ev-1", (const double[]){0.5, 0.3, 0.2}, 3);
    /* V2: the class labels skipped, the probabilities read row-major */
    const char *v2 = "{\"model_name\": \"m\", \"id\": \"ev-1\", \"outputs\": ["
                     "{\"name\": \"label\", \"shape\": [2], \"datatype\": \"INT64\", "
                     "\"data\": [1, 0]}, "
                     "{\"name\": \"z\", \"shape\": [2, 3], \"datatype\": \"FP64\", "
                     "\"data\": [1, -1, 0.5, 2, 0, -3]}, "
                     "{\"name\": \"proba\", \"shape\": [2, 3], \"datatype\": \"FP32\", "
                     "\"data\": [0.1, 0.2, 0.7, 0.6, 0.3, 0.1]}]}";
    assert_int_equal(kserve(v2, NULL, -1, &m, why), 2);
    assert_int_equal(m.form, CALIB_FORM_PROBS);
    record(&m, 1, "ev-1/1", (const double[]){0.6, 0.3, 0.1}, 3);
    /* kserve_output and kserve_form: the logits by name */
    assert_int_equal(kserve(v2, "z", CALIB_FORM_LOGITS, &m, why), 2);
    assert_int_equal(m.form, CALIB_FORM_LOGITS);
    record(&m, 0, "ev-1/0", (const double[]){1, -1, 0.5}, 3);
    /* p: one number a row */
    assert_int_equal(kserve("{\"predictions\": [0.9, 0.2]}", NULL, CALIB_FORM_BINARY, &m, why),
                     2);
    assert_int_equal(m.form, CALIB_FORM_BINARY);
    record(&m, 1, "ev-1/1", (const double[]){0.2}, 1);
    calib_msg_destroy(&m);
}

static void kserve_without_a_usable_output(void **state)
{
    (void)state;
    calib_msg m;
    calib_msg_init(&m);
    char why[256];
    /* class labels, rows summing to 0.99, a name absent: none usable */
    assert_int_equal(kserve("{\"predictions\": [1, 0, 2]}", NULL, -1, &m, why), 0);
    assert_non_null(strstr(why, "probability rows"));
    assert_int_equal(kserve("{\"predictions\": [[0.5, 0.49]]}", NULL, -1, &m, why), 0);
    assert_int_equal(kserve("{\"outputs\": [{\"name\": \"a\", \"shape\": [1, 2], "
                            "\"data\": [0.5, 0.5]}]}", "b", -1, &m, why), 0);
    assert_non_null(strstr(why, "the output b is absent"));
    /* shape and data that disagree, strings among the numbers */
    assert_int_equal(kserve("{\"outputs\": [{\"name\": \"a\", \"shape\": [2, 2], "
                            "\"data\": [0.5, 0.5]}]}", NULL, -1, &m, why), 0);
    assert_int_equal(kserve("{\"predictions\": [[\"0.5\", 0.5]]}", NULL, -1, &m, why), 0);
    /* no JSON: -1 */
    assert_int_equal(kserve("{\"predictions\": ", NULL, -1, &m, why), -1);
    assert_non_null(strstr(why, "not JSON"));
    /* a ce-id that leaves no room for the row numbers: -1 */
    calib_mpw w;
    calib_mpw_init(&w);
    kserve_opts o = {NULL, -1};
    char id[KSERVE_ID_MAX + 1];
    memset(id, 'a', KSERVE_ID_MAX);
    id[KSERVE_ID_MAX] = 0;
    const char *two = "{\"predictions\": [[1, 0], [0, 1]]}";
    assert_int_equal(kserve_to_msg(two, strlen(two), id, &o, &w, why, sizeof why), -1);
    assert_non_null(strstr(why, "ce-id"));
    calib_mpw_reset(&w);
    assert_int_equal(kserve_to_msg(two, strlen(two), "x", &o, &w, why, sizeof why), 2);
    calib_mpw_destroy(&w);
    calib_msg_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_has_its_twin),
        cmocka_unit_test(json_and_msgpack_decode_alike),
        cmocka_unit_test(what_is_no_json_object_is_refused),
        cmocka_unit_test(kserve_outputs_to_records),
        cmocka_unit_test(kserve_without_a_usable_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
