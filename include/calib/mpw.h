/*
 * A msgpack writer whose maps and arrays count their own entries: open a
 * container, write its entries, close it; the header is written at the
 * close with the number of entries written, so that a key added without
 * bumping a count is impossible. Every message and reply calibd sends is
 * written with it (calib/pubmsg.h for the PUB messages). See
 * calib_protocol(3).
 *
 * A map counts its keys (calib_mpw_key); each key must be followed by
 * exactly one value. An array counts its values. A container is itself a
 * value of its parent. Misuse (a value without its key, a key in an array,
 * closing with nothing open, nesting deeper than CALIB_MPW_MAX_DEPTH) and a
 * failed allocation are sticky: later calls do nothing and calib_mpw_error
 * says what happened first. Headers are the shortest msgpack allows, so the
 * bytes are those a hand-counted msgpack_pack_map would have made -- but
 * for a container whose body is CALIB_MPW_LONG_BODY bytes or more, which
 * keeps the 5-byte header (map 32 / array 32, valid for any count), so
 * that closing it never moves its body.
 *
 * This header includes <msgpack.h>.
 */
#ifndef CALIB_MPW_H
#define CALIB_MPW_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_MPW_MAX_DEPTH 16
#define CALIB_MPW_LONG_BODY ((size_t)1 << 20)

/* Private: one open container. */
typedef struct calib_mpw_frame {
    size_t at;       /* offset of its reserved header */
    uint32_t n;      /* entries written */
    int map;         /* 1: a map, 0: an array */
    int want_value;  /* a map whose last key has no value yet */
} calib_mpw_frame;

typedef struct calib_mpw {
    msgpack_sbuffer sb;  /* the bytes written: sb.data, sb.size (read-only) */
    /* private */
    msgpack_packer pk;
    unsigned depth;
    int err;
    calib_mpw_frame open[CALIB_MPW_MAX_DEPTH];
} calib_mpw;

void calib_mpw_init(calib_mpw *w);
void calib_mpw_destroy(calib_mpw *w);
/* Empties w (keeps its buffer) and clears its error. */
void calib_mpw_reset(calib_mpw *w);

/*
 * CALIB_OK; CALIB_ENOMEM if a write could not allocate; CALIB_EINVAL on
 * misuse; CALIB_EINVAL too when a container is still open -- so a check of
 * this after the last close covers the whole message.
 */
int calib_mpw_error(const calib_mpw *w);

void calib_mpw_map(calib_mpw *w);
void calib_mpw_array(calib_mpw *w);
void calib_mpw_end(calib_mpw *w);

/* The next key of the open map, a NUL-terminated string. */
void calib_mpw_key(calib_mpw *w, const char *key);

/* Values. */
void calib_mpw_str(calib_mpw *w, const char *s);
void calib_mpw_strn(calib_mpw *w, const char *s, size_t len);
void calib_mpw_double(calib_mpw *w, double x); /* as is, NaN included */
void calib_mpw_float(calib_mpw *w, float x);   /* float32, as is */
void calib_mpw_num(calib_mpw *w, double x);    /* nil unless finite */
void calib_mpw_uint(calib_mpw *w, uint64_t x);
void calib_mpw_int(calib_mpw *w, int64_t x);
void calib_mpw_bool(calib_mpw *w, int b);
void calib_mpw_nil(calib_mpw *w);
void calib_mpw_bin(calib_mpw *w, const void *data, size_t len);
/* Bytes as they are, between top-level values (framing around them: a
 * snapshot's section headers); misuse inside an open container. */
void calib_mpw_raw(calib_mpw *w, const void *data, size_t len);
/* [lo, hi], or nil unless both are finite. */
void calib_mpw_pair(calib_mpw *w, const double v[2]);
/* A key and its value, in one call. */
void calib_mpw_key_uint(calib_mpw *w, const char *key, uint64_t x);
void calib_mpw_key_double(calib_mpw *w, const char *key, double x);

#ifdef __cplusplus
}
#endif

#endif
