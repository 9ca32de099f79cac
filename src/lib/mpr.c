/* mpr.c — reading untrusted msgpack maps (see calib/mpr.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "calib/protocol.h"
#include "calib/mpr.h"

void calib_mpr_init(calib_mpr *r, char *err, size_t errlen)
{
    r->err = err;
    r->errlen = errlen;
    r->failed = 0;
    if (errlen)
        err[0] = 0;
}

int calib_mpr_fail(calib_mpr *r, const char *fmt, ...)
{
    if (r->failed++)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    return 0;
}

int calib_mpr_is_str(const msgpack_object *o, const char *lit)
{
    return o->type == MSGPACK_OBJECT_STR && calib_proto_str_is(&o->via.str, lit);
}

const msgpack_object *calib_mpr_find(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (calib_mpr_is_str(&map->via.map.ptr[i].key, key))
            return &map->via.map.ptr[i].val;
    return NULL;
}

int calib_mpr_number(const msgpack_object *o, double *x)
{
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: *x = o->via.f64; return 1;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *x = (double)o->via.u64; return 1;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *x = (double)o->via.i64; return 1;
    case MSGPACK_OBJECT_NIL: *x = NAN; return 1;
    default: return 0;
    }
}

const msgpack_object *calib_mpr_get(calib_mpr *r, const msgpack_object *map, const char *key)
{
    if (r->failed)
        return NULL;
    const msgpack_object *o = calib_mpr_find(map, key);
    if (!o)
        calib_mpr_fail(r, "%s: missing", key);
    return o;
}

const msgpack_object *calib_mpr_map(calib_mpr *r, const msgpack_object *map, const char *key)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (o && o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "%s: not a map", key), NULL;
    return o;
}

const msgpack_object *calib_mpr_array(calib_mpr *r, const msgpack_object *map, const char *key,
                                uint32_t n)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (o && (o->type != MSGPACK_OBJECT_ARRAY ||
              (n != UINT32_MAX && o->via.array.size != n)))
        return calib_mpr_fail(r, "%s: not an array of %lu values", key, (unsigned long)n), NULL;
    return o;
}

uint64_t calib_mpr_uint(calib_mpr *r, const msgpack_object *map, const char *key, uint64_t lo,
                  uint64_t hi)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 < lo || o->via.u64 > hi)
        return (uint64_t)calib_mpr_fail(r, "%s: not an integer in [%llu, %llu]", key,
                                  (unsigned long long)lo, (unsigned long long)hi);
    return o->via.u64;
}

int64_t calib_mpr_int(calib_mpr *r, const msgpack_object *map, const char *key)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return o->via.i64;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
        return (int64_t)o->via.u64;
    return calib_mpr_fail(r, "%s: not a 64-bit integer", key);
}

double calib_mpr_double(calib_mpr *r, const msgpack_object *map, const char *key)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    double x;
    if (!o)
        return NAN;
    if (!calib_mpr_number(o, &x))
        return calib_mpr_fail(r, "%s: not a number", key), NAN;
    return x;
}

double calib_mpr_finite(calib_mpr *r, const msgpack_object *map, const char *key)
{
    double x = calib_mpr_double(r, map, key);
    if (r->failed)
        return 0;
    if (!isfinite(x))
        return calib_mpr_fail(r, "%s: not a finite number", key);
    return x;
}

int calib_mpr_bin(calib_mpr *r, const msgpack_object *map, const char *key, void *dst, size_t len)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != len)
        return calib_mpr_fail(r, "%s: not a binary of %zu bytes", key, len);
    if (len)
        memcpy(dst, o->via.bin.ptr, len);
    return 1;
}

int calib_mpr_str(calib_mpr *r, const msgpack_object *map, const char *key, char *dst, size_t cap)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size == 0 || o->via.str.size >= cap ||
        memchr(o->via.str.ptr, 0, o->via.str.size))
        return calib_mpr_fail(r, "%s: not a string of 1 to %zu bytes", key, cap - 1);
    memcpy(dst, o->via.str.ptr, o->via.str.size);
    dst[o->via.str.size] = 0;
    return 1;
}
