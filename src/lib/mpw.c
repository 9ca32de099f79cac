/* mpw.c — a msgpack writer whose maps and arrays count their own entries.
 *
 * A container reserves the longest header (5 bytes: map32 / array32) when
 * it opens; at its close the count is known, the shortest header is
 * written and the body moved down over the bytes it does not need. */
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/mpw.h"

#define HEAD_MAX 5

void calib_mpw_init(calib_mpw *w)
{
    memset(w, 0, sizeof *w);
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
}

void calib_mpw_destroy(calib_mpw *w)
{
    msgpack_sbuffer_destroy(&w->sb);
    w->sb.data = NULL;
    w->sb.size = w->sb.alloc = 0;
}

void calib_mpw_reset(calib_mpw *w)
{
    w->sb.size = 0;
    w->depth = 0;
    w->err = CALIB_OK;
}

int calib_mpw_error(const calib_mpw *w)
{
    if (w->err)
        return w->err;
    return w->depth ? CALIB_EINVAL : CALIB_OK;
}

static int fail(calib_mpw *w, int err)
{
    if (!w->err)
        w->err = err;
    return 0;
}

/* Whether a value may be written now; counts it in its container. */
static int value(calib_mpw *w)
{
    if (w->err)
        return 0;
    if (w->depth == 0)
        return 1;
    calib_mpw_frame *f = &w->open[w->depth - 1];
    if (f->map) {
        if (!f->want_value)
            return fail(w, CALIB_EINVAL);
        f->want_value = 0;
    } else {
        if (f->n == UINT32_MAX)
            return fail(w, CALIB_EINVAL);
        f->n++;
    }
    return 1;
}

/* A msgpack_pack_* result: nonzero when the buffer could not grow. */
static void wrote(calib_mpw *w, int rc)
{
    if (rc != 0)
        fail(w, CALIB_ENOMEM);
}

void calib_mpw_raw(calib_mpw *w, const void *data, size_t len)
{
    if (w->err)
        return;
    if (w->depth) {
        fail(w, CALIB_EINVAL);
        return;
    }
    if (len) /* msgpack-c adds 0 to a buffer not yet allocated */
        wrote(w, msgpack_sbuffer_write(&w->sb, data, len));
}

static void open_container(calib_mpw *w, int map)
{
    if (!value(w))
        return;
    if (w->depth == CALIB_MPW_MAX_DEPTH) {
        fail(w, CALIB_EINVAL);
        return;
    }
    static const char reserve[HEAD_MAX] = {0};
    size_t at = w->sb.size;
    if (msgpack_sbuffer_write(&w->sb, reserve, HEAD_MAX) != 0) {
        fail(w, CALIB_ENOMEM);
        return;
    }
    w->open[w->depth++] = (calib_mpw_frame){.at = at, .map = map};
}

void calib_mpw_map(calib_mpw *w)
{
    open_container(w, 1);
}

void calib_mpw_array(calib_mpw *w)
{
    open_container(w, 0);
}

/* The shortest header of a container of n entries, in h; its length. */
/* map 32 / array 32 */
static size_t header32(int map, uint32_t n, unsigned char *h)
{
    h[0] = map ? 0xdf : 0xdd;
    for (int i = 0; i < 4; i++)
        h[1 + i] = (unsigned char)(n >> (24 - 8 * i));
    return 5;
}

static size_t header(int map, uint32_t n, unsigned char h[HEAD_MAX])
{
    if (n < 16) {
        h[0] = (unsigned char)((map ? 0x80 : 0x90) | n);
        return 1;
    }
    if (n <= UINT16_MAX) {
        h[0] = map ? 0xde : 0xdc;
        h[1] = (unsigned char)(n >> 8);
        h[2] = (unsigned char)n;
        return 3;
    }
    return header32(map, n, h);
}

void calib_mpw_end(calib_mpw *w)
{
    if (w->err)
        return;
    if (w->depth == 0) {
        fail(w, CALIB_EINVAL);
        return;
    }
    calib_mpw_frame *f = &w->open[w->depth - 1];
    if (f->map && f->want_value) {
        fail(w, CALIB_EINVAL);
        return;
    }
    unsigned char h[HEAD_MAX];
    char *base = w->sb.data + f->at;
    size_t body = w->sb.size - f->at - HEAD_MAX;
    /* a long body keeps the 32-bit header, whatever its count: moving it
     * down by a few bytes would copy it again at every level it nests in
     * (a snapshot's model of 40 MB, copied 5 times over) */
    size_t hl = body >= CALIB_MPW_LONG_BODY ? header32(f->map, f->n, h) : header(f->map, f->n, h);
    if (hl < HEAD_MAX)
        memmove(base + hl, base + HEAD_MAX, body);
    memcpy(base, h, hl);
    w->sb.size -= HEAD_MAX - hl;
    w->depth--;
}

void calib_mpw_key(calib_mpw *w, const char *key)
{
    if (w->err)
        return;
    calib_mpw_frame *f = w->depth ? &w->open[w->depth - 1] : NULL;
    if (!f || !f->map || f->want_value || f->n == UINT32_MAX) {
        fail(w, CALIB_EINVAL);
        return;
    }
    size_t len = strlen(key);
    wrote(w, msgpack_pack_str(&w->pk, len));
    wrote(w, msgpack_pack_str_body(&w->pk, key, len));
    f->n++;
    f->want_value = 1;
}

void calib_mpw_strn(calib_mpw *w, const char *s, size_t len)
{
    if (!value(w))
        return;
    wrote(w, msgpack_pack_str(&w->pk, len));
    if (len)
        wrote(w, msgpack_pack_str_body(&w->pk, s, len));
}

void calib_mpw_str(calib_mpw *w, const char *s)
{
    calib_mpw_strn(w, s, strlen(s));
}

void calib_mpw_double(calib_mpw *w, double x)
{
    if (value(w))
        wrote(w, msgpack_pack_double(&w->pk, x));
}

void calib_mpw_float(calib_mpw *w, float x)
{
    if (value(w))
        wrote(w, msgpack_pack_float(&w->pk, x));
}

void calib_mpw_num(calib_mpw *w, double x)
{
    if (isfinite(x))
        calib_mpw_double(w, x);
    else
        calib_mpw_nil(w);
}

void calib_mpw_uint(calib_mpw *w, uint64_t x)
{
    if (value(w))
        wrote(w, msgpack_pack_uint64(&w->pk, x));
}

void calib_mpw_int(calib_mpw *w, int64_t x)
{
    if (value(w))
        wrote(w, msgpack_pack_int64(&w->pk, x));
}

void calib_mpw_bool(calib_mpw *w, int b)
{
    if (value(w))
        wrote(w, b ? msgpack_pack_true(&w->pk) : msgpack_pack_false(&w->pk));
}

void calib_mpw_nil(calib_mpw *w)
{
    if (value(w))
        wrote(w, msgpack_pack_nil(&w->pk));
}

void calib_mpw_bin(calib_mpw *w, const void *data, size_t len)
{
    if (!value(w))
        return;
    wrote(w, msgpack_pack_bin(&w->pk, len));
    if (len)
        wrote(w, msgpack_pack_bin_body(&w->pk, data, len));
}

void calib_mpw_pair(calib_mpw *w, const double v[2])
{
    if (!isfinite(v[0]) || !isfinite(v[1])) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_array(w);
    calib_mpw_double(w, v[0]);
    calib_mpw_double(w, v[1]);
    calib_mpw_end(w);
}

void calib_mpw_key_uint(calib_mpw *w, const char *key, uint64_t x)
{
    calib_mpw_key(w, key);
    calib_mpw_uint(w, x);
}

void calib_mpw_key_double(calib_mpw *w, const char *key, double x)
{
    calib_mpw_key(w, key);
    calib_mpw_double(w, x);
}
