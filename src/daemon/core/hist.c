/* hist.c — bounded per-model histories (hist.h). */
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/protocol.h"
#include "hist.h"
#include "calib/mpr.h"

void hist_init(hist *h, size_t cap, double step)
{
    memset(h, 0, sizeof *h);
    h->cap = cap;
    h->step = step;
}

void hist_free(hist *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->s[i]->pts);
        free(h->s[i]);
    }
    free(h->s);
    h->s = NULL;
    h->n = h->alloc = 0;
}

long hist_find(hist *h, const char *name, int create)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->s[i]->name, name) == 0)
            return (long)i;
    if (!create || strlen(name) > CFG_NAME_MAX)
        return -1;
    if (h->n == h->alloc) {
        size_t alloc = h->alloc ? 2 * h->alloc : 16;
        hist_series **s = realloc(h->s, alloc * sizeof *s);
        if (!s)
            return -1;
        h->s = s;
        h->alloc = alloc;
    }
    hist_series *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    snprintf(s->name, sizeof s->name, "%s", name);
    h->s[h->n] = s;
    return (long)h->n++;
}

int hist_add(hist *h, size_t i, const hist_point *p)
{
    if (i >= h->n || h->cap == 0)
        return -1;
    hist_series *s = h->s[i];
    if (s->len < h->cap && s->len == s->alloc) {
        /* grows while it fills: the points are contiguous from 0 (head is
         * 0 until the series is full, and it is full only at cap) */
        size_t alloc = s->alloc ? 2 * s->alloc : 16;
        if (alloc > h->cap)
            alloc = h->cap;
        hist_point *pts = realloc(s->pts, alloc * sizeof *pts);
        if (!pts)
            return -1;
        s->pts = pts;
        s->alloc = alloc;
    }
    if (s->len < h->cap) {
        s->pts[s->len++] = *p;
    } else {
        s->pts[s->head] = *p;
        s->head = (s->head + 1) % h->cap;
    }
    return 0;
}

const hist_point *hist_at(const hist *h, size_t i, size_t j)
{
    const hist_series *s = h->s[i];
    return &s->pts[(s->head + j) % s->alloc];
}

/* ------------------------------------------------------------ file */

void hist_write(const hist *h, calib_mpw *w)
{
    hist_write_begin(h, w);
    for (size_t i = 0; i < h->n; i++)
        hist_write_series(h, i, w);
    hist_write_end(w);
}

void hist_write_begin(const hist *h, calib_mpw *w)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "format");
    calib_mpw_str(w, "calibd-history");
    calib_mpw_key(w, "v");
    calib_mpw_uint(w, 2);
    calib_mpw_key(w, "step");
    calib_mpw_double(w, h->step);
    calib_mpw_key(w, "series");
    calib_mpw_map(w);
}

void hist_write_series(const hist *h, size_t i, calib_mpw *w)
{
    calib_mpw_key(w, h->s[i]->name);
    calib_mpw_array(w);
    for (size_t j = 0; j < h->s[i]->len; j++) {
        const hist_point *p = hist_at(h, i, j);
        calib_mpw_array(w);
        calib_mpw_double(w, p->t);
        for (int k = 0; k < HIST_VALUES; k++)
            calib_mpw_num(w, p->v[k]);
        calib_mpw_uint(w, p->n);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

void hist_write_end(calib_mpw *w)
{
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* values: of a point, HIST_VALUES (v 2) or HIST_VALUES_V1 (the rest NaN) */
static int read_series(hist *h, const msgpack_object *name, const msgpack_object *pts,
                       int values, char *err, size_t errlen)
{
    char buf[CFG_NAME_MAX + 1];
    if (name->type != MSGPACK_OBJECT_STR || name->via.str.size == 0 ||
        name->via.str.size > CFG_NAME_MAX || pts->type != MSGPACK_OBJECT_ARRAY) {
        snprintf(err, errlen, "a series is not a model name and an array of points");
        return -1;
    }
    memcpy(buf, name->via.str.ptr, name->via.str.size);
    buf[name->via.str.size] = 0;
    if (memchr(buf, 0, name->via.str.size) || hist_find(h, buf, 0) >= 0) {
        snprintf(err, errlen, "series '%.64s' is named twice or holds a NUL", buf);
        return -1;
    }
    long i = hist_find(h, buf, 1);
    if (i < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint32_t n = pts->via.array.size;
    for (uint32_t j = n > h->cap ? n - (uint32_t)h->cap : 0; j < n; j++) {
        const msgpack_object *a = &pts->via.array.ptr[j];
        hist_point p;
        double x[HIST_VALUES + 2];
        uint32_t len = (uint32_t)values + 2;
        int ok = a->type == MSGPACK_OBJECT_ARRAY && a->via.array.size == len;
        for (uint32_t k = 0; ok && k < len; k++)
            ok = calib_mpr_number(&a->via.array.ptr[k], &x[k]);
        ok = ok && isfinite(x[0]) && x[len - 1] >= 0 && x[len - 1] <= UINT32_MAX;
        if (!ok) {
            snprintf(err, errlen, "series '%.64s': point %u is not [t, %d numbers, n]", buf,
                     (unsigned)j, values);
            return -1;
        }
        p.t = x[0];
        for (int k = 0; k < HIST_VALUES; k++)
            p.v[k] = k < values ? (float)x[k + 1] : NAN;
        p.n = (uint32_t)x[len - 1];
        if (hist_add(h, (size_t)i, &p) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

int hist_read(hist *h, const char *buf, size_t len, char *err, size_t errlen)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0, end;
    int rc = -1;
    /* every count backed by bytes before msgpack-c allocates for it
     * (tests/fuzz/corpus/snapshot/crash-history_huge_count) */
    if (calib_proto_scan(buf, len, &end) != CALIB_REJ_NONE ||
        msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "not one msgpack map");
        goto out;
    }
    const msgpack_object *fmt = calib_mpr_find(&u.data, "format"), *v = calib_mpr_find(&u.data, "v"),
                         *series = calib_mpr_find(&u.data, "series");
    if (!fmt || !calib_mpr_is_str(fmt, "calibd-history") || !v ||
        v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || (v->via.u64 != 1 && v->via.u64 != 2) ||
        !series || series->type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "not a calibd history of version 1 or 2");
        goto out;
    }
    int values = v->via.u64 == 1 ? HIST_VALUES_V1 : HIST_VALUES;
    for (uint32_t i = 0; i < series->via.map.size; i++)
        if (read_series(h, &series->via.map.ptr[i].key, &series->via.map.ptr[i].val, values,
                        err, errlen) != 0)
            goto out;
    rc = 0;
out:
    if (rc != 0)
        hist_free(h);
    msgpack_unpacked_destroy(&u);
    return rc;
}
