/* mp.h — msgpack payloads for the unit tests, packed from a format
 * string (see mp()). Static functions: include it in one file per program. */
#ifndef CALIB_TEST_MP_H
#define CALIB_TEST_MP_H

#include <msgpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

typedef struct payload {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} payload;

static void pl_init(payload *p)
{
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void pl_free(payload *p)
{
    msgpack_sbuffer_destroy(&p->sb);
}

static void put_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

/* A bin of n float32 (size 4) or float64 (size 8) values as little-endian
 * bytes, whatever the host's byte order. */
static void put_le_bin(msgpack_packer *pk, const void *v, size_t n, size_t size)
{
    const unsigned char *x = v;
    msgpack_pack_bin(pk, size * n);
    for (size_t i = 0; i < n; i++, x += size) {
        uint64_t u;
        uint32_t w;
        unsigned char b[8];
        if (size == 4) {
            memcpy(&w, x, 4);
            u = w;
        } else {
            memcpy(&u, x, 8);
        }
        for (size_t j = 0; j < size; j++)
            b[j] = (unsigned char)(u >> (8 * j));
        msgpack_pack_bin_body(pk, b, size);
    }
}

/*
 * Packs a sequence described by fmt (spaces ignored):
 *   M n  map of n entries     A n  array of n items
 *   s    string (const char *)  u  unsigned (int)   U  uint64_t
 *   i    signed (int)           d  float64 (double) f  float32 (double)
 *   n    nil                    t  true
 *   b    raw bin (const void *, size_t)
 *   4    float32 LE bin (const float *, size_t)   8  float64 LE bin
 */
static void mp(payload *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    for (const char *c = fmt; *c; c++) {
        switch (*c) {
        case 'M': msgpack_pack_map(&p->pk, (size_t)va_arg(ap, int)); break;
        case 'A': msgpack_pack_array(&p->pk, (size_t)va_arg(ap, int)); break;
        case 's': put_str(&p->pk, va_arg(ap, const char *)); break;
        case 'u': msgpack_pack_uint64(&p->pk, (uint64_t)va_arg(ap, int)); break;
        case 'U': msgpack_pack_uint64(&p->pk, va_arg(ap, uint64_t)); break;
        case 'i': msgpack_pack_int64(&p->pk, va_arg(ap, int)); break;
        case 'd': msgpack_pack_double(&p->pk, va_arg(ap, double)); break;
        case 'f': msgpack_pack_float(&p->pk, (float)va_arg(ap, double)); break;
        case 'n': msgpack_pack_nil(&p->pk); break;
        case 't': msgpack_pack_true(&p->pk); break;
        case 'b': {
            const void *b = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            msgpack_pack_bin(&p->pk, n);
            msgpack_pack_bin_body(&p->pk, b, n);
            break;
        }
        case '4': {
            const float *v = va_arg(ap, const float *);
            put_le_bin(&p->pk, v, va_arg(ap, size_t), 4);
            break;
        }
        case '8': {
            const double *v = va_arg(ap, const double *);
            put_le_bin(&p->pk, v, va_arg(ap, size_t), 8);
            break;
        }
        default: break;
        }
    }
    va_end(ap);
}

#endif
