/* kserve.c — KServe inference responses to "pred" messages (see kserve.h),
 * with jansson. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "calib/calib.h"
#include "calib/protocol.h"
#include "kserve.h"

/* n rows of k numbers: V1's nested rows (or k = 1 scalars), or V2's flat
 * row-major data. */
typedef struct tensor {
    const json_t *v;   /* the array */
    int flat;          /* V2: v[i * k + j]; V1: v[i][j], or v[i] when scalar */
    int scalar;        /* V1 rows that are numbers */
    size_t n, k;
} tensor;

/* The value at row i, column j (NULL where there is none). */
static const json_t *elem(const tensor *t, size_t i, size_t j)
{
    return t->flat     ? json_array_get(t->v, i * t->k + j)
           : t->scalar ? json_array_get(t->v, i)
                       : json_array_get(json_array_get(t->v, i), j);
}

static double at(const tensor *t, size_t i, size_t j)
{
    return json_number_value(elem(t, i, j));
}

/* Every value a number, finite. */
static int numbers(const tensor *t)
{
    for (size_t i = 0; i < t->n; i++)
        for (size_t j = 0; j < t->k; j++) {
            const json_t *x = elem(t, i, j);
            if (!json_is_number(x) || !isfinite(json_number_value(x)))
                return 0;
        }
    return 1;
}

/* Rows that are probability vectors: K >= 2, non-negative, summing to 1
 * within 1e-6. */
static int prob_rows(const tensor *t)
{
    if (t->k < 2)
        return 0;
    for (size_t i = 0; i < t->n; i++) {
        double s = 0;
        for (size_t j = 0; j < t->k; j++) {
            double p = at(t, i, j);
            if (!(p >= 0))
                return 0;
            s += p;
        }
        if (!(fabs(s - 1) <= 1e-6))
            return 0;
    }
    return 1;
}

/* V1: "predictions", an array of rows (arrays of K numbers) or of numbers. */
static int v1_tensor(const json_t *pred, tensor *t)
{
    size_t n = json_array_size(pred);
    if (!json_is_array(pred) || n == 0)
        return 0;
    *t = (tensor){.v = pred, .n = n};
    const json_t *first = json_array_get(pred, 0);
    if (json_is_array(first)) {
        t->k = json_array_size(first);
        for (size_t i = 0; i < n; i++) {
            const json_t *r = json_array_get(pred, i);
            if (!json_is_array(r) || json_array_size(r) != t->k)
                return 0;
        }
    } else {
        t->scalar = 1;
        t->k = 1;
    }
    return t->k >= 1 && numbers(t);
}

/* V2: one of "outputs": {"name", "shape": [n, k] or [n], "data": flat}. */
static int v2_tensor(const json_t *out, tensor *t)
{
    const json_t *shape = json_object_get(out, "shape"), *data = json_object_get(out, "data");
    size_t dims = json_array_size(shape);
    if (!json_is_array(shape) || !json_is_array(data) || dims < 1 || dims > 2)
        return 0;
    json_int_t d[2] = {0, 1};
    for (size_t i = 0; i < dims; i++) {
        const json_t *x = json_array_get(shape, i);
        /* rows and classes within the protocol's bounds: n * k cannot wrap */
        if (!json_is_integer(x) || json_integer_value(x) < 1 ||
            json_integer_value(x) > (i == 0 && dims == 2 ? CALIB_PROTO_MAX_N
                                     : dims == 1         ? CALIB_PROTO_MAX_N
                                                         : CALIB_PROTO_MAX_K))
            return 0;
        d[i] = json_integer_value(x);
    }
    *t = (tensor){.v = data, .flat = 1, .n = (size_t)d[0], .k = (size_t)d[1]};
    return json_array_size(data) == t->n * t->k && numbers(t);
}

/* The message: n rows as form, ids id or id/i. */
static void write_msg(calib_mpw *w, const tensor *t, int form, const char *id)
{
    static const char *const keys[] = {"logits", "probs", "p"};
    const char *key = keys[form == CALIB_FORM_LOGITS ? 0 : form == CALIB_FORM_PROBS ? 1 : 2];
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "v", 1);
    calib_mpw_key(w, "type");
    calib_mpw_str(w, "pred");
    if (t->n == 1) {
        calib_mpw_key(w, "id");
        calib_mpw_str(w, id);
        calib_mpw_key(w, key);
        if (form == CALIB_FORM_BINARY) {
            calib_mpw_double(w, at(t, 0, 0));
        } else {
            calib_mpw_array(w);
            for (size_t j = 0; j < t->k; j++)
                calib_mpw_double(w, at(t, 0, j));
            calib_mpw_end(w);
        }
    } else {
        calib_mpw_key_uint(w, "n", t->n);
        if (form != CALIB_FORM_BINARY)
            calib_mpw_key_uint(w, "k", t->k);
        calib_mpw_key(w, "id");
        calib_mpw_array(w);
        char buf[KSERVE_ID_MAX + 24];
        for (size_t i = 0; i < t->n; i++) {
            snprintf(buf, sizeof buf, "%s/%zu", id, i);
            calib_mpw_str(w, buf);
        }
        calib_mpw_end(w);
        calib_mpw_key(w, key);
        calib_mpw_array(w);
        for (size_t i = 0; i < t->n; i++) {
            if (form == CALIB_FORM_BINARY) {
                calib_mpw_double(w, at(t, i, 0));
                continue;
            }
            calib_mpw_array(w);
            for (size_t j = 0; j < t->k; j++)
                calib_mpw_double(w, at(t, i, j));
            calib_mpw_end(w);
        }
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* Whether t can be read as form (-1: probability rows). */
static int usable(const tensor *t, int form)
{
    if (form < 0)
        return prob_rows(t);
    return form == CALIB_FORM_BINARY ? t->k == 1 : t->k >= 2;
}

int kserve_to_msg(const char *json, size_t len, const char *id, const kserve_opts *o,
                  calib_mpw *w, char *why, size_t whylen)
{
    json_error_t e;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &e);
    if (!root) {
        snprintf(why, whylen, "not JSON: %s (line %d, column %d)", e.text, e.line, e.column);
        return -1;
    }
    int rc = -1;
    const char *want = o->output && o->output[0] ? o->output : NULL;
    int form = o->form;
    tensor t = {0};
    int found = 0;
    const json_t *pred = json_object_get(root, "predictions"),
                 *outs = json_object_get(root, "outputs");
    if (!json_is_object(root)) {
        snprintf(why, whylen, "not a JSON object");
        goto out;
    }
    if (pred) {
        found = v1_tensor(pred, &t) && usable(&t, form);
    } else if (json_is_array(outs)) {
        for (size_t i = 0; i < json_array_size(outs) && !found; i++) {
            const json_t *x = json_array_get(outs, i), *name = json_object_get(x, "name");
            if (want && !(json_is_string(name) && strcmp(json_string_value(name), want) == 0))
                continue;
            found = v2_tensor(x, &t) && usable(&t, form);
        }
    }
    rc = 0;
    if (!found) {
        snprintf(why, whylen, "no usable output: %s%s%s", want ? "the output " : "",
                 want ? want : "", want ? " is absent, or not numbers of that form"
                 : form < 0 ? "no output of probability rows (set kserve_form)"
                 : "no numeric output of that form");
        goto out;
    }
    if (t.n > CALIB_PROTO_MAX_N || t.k > CALIB_PROTO_MAX_K) {
        snprintf(why, whylen, "no usable output: %zu rows of %zu, more than %d rows or %d "
                 "classes", t.n, t.k, CALIB_PROTO_MAX_N, CALIB_PROTO_MAX_K);
        goto out;
    }
    char last[24];
    int digits = snprintf(last, sizeof last, "/%zu", t.n - 1);
    size_t idlen = strlen(id);
    if (idlen == 0 || idlen + (t.n > 1 ? (size_t)digits : 0) > KSERVE_ID_MAX) {
        snprintf(why, whylen, "ce-id of %zu bytes: the prediction ids would not fit in %d",
                 idlen, KSERVE_ID_MAX);
        rc = -1;
        goto out;
    }
    write_msg(w, &t, form < 0 ? CALIB_FORM_PROBS : form, id);
    rc = calib_mpw_error(w) == CALIB_OK ? (int)t.n : -1;
    if (rc < 0)
        snprintf(why, whylen, "out of memory");
out:
    json_decref(root);
    return rc;
}
