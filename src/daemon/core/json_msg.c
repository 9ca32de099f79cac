/* json_msg.c — JSON messages to msgpack (see json_msg.h), with jansson. */
#include <stdio.h>

#include <jansson.h>

#include "calib/calib.h"
#include "json_msg.h"

/* v into w; 0, or -1 when w refuses it (nested deeper than it allows):
 * the writer's error is sticky (w->err), its depth not yet zero. */
static int put(calib_mpw *w, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        calib_mpw_map(w);
        if (w->err) /* nested deeper than the writer takes: no further */
            return -1;
        json_object_foreach((json_t *)v, key, val) {
            calib_mpw_key(w, key);
            if (put(w, val) != 0)
                return -1;
        }
        calib_mpw_end(w);
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *val;
        calib_mpw_array(w);
        if (w->err)
            return -1;
        json_array_foreach(v, i, val)
            if (put(w, val) != 0)
                return -1;
        calib_mpw_end(w);
        break;
    }
    case JSON_STRING:
        calib_mpw_strn(w, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        if (i >= 0)
            calib_mpw_uint(w, (uint64_t)i);
        else
            calib_mpw_int(w, (int64_t)i);
        break;
    }
    case JSON_REAL:
        calib_mpw_double(w, json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        calib_mpw_bool(w, json_is_true(v));
        break;
    case JSON_NULL:
        calib_mpw_nil(w);
        break;
    }
    return w->err ? -1 : 0;
}

int json_msg_to_msgpack(const char *json, size_t len, calib_mpw *w, char *err, size_t errlen)
{
    json_error_t e;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (!root) {
        snprintf(err, errlen, "not JSON: %s (line %d, column %d)", e.text, e.line, e.column);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root))
        snprintf(err, errlen, "not a JSON object");
    else if (put(w, root) != 0 || calib_mpw_error(w) != CALIB_OK)
        snprintf(err, errlen, "nested deeper than %d objects and arrays (or out of memory)",
                 CALIB_MPW_MAX_DEPTH);
    else
        rc = 0;
    json_decref(root);
    return rc;
}
