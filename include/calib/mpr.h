/*
 * calib/mpr.h — reading untrusted msgpack maps (state files): look
 * a key up, take a value of the expected type and range, or fail with a
 * message that names the key. A reader's first failure sticks (later
 * calls do nothing and return 0), so a file is read as a plain sequence of
 * calls and checked once at the end, as calib_mpw does for writing.
 */
#ifndef CALIB_MPR_H
#define CALIB_MPR_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct calib_mpr {
    char *err;      /* the first failure, "KEY: what" */
    size_t errlen;
    int failed;
} calib_mpr;

void calib_mpr_init(calib_mpr *r, char *err, size_t errlen);
/* Records a failure (the first one only) and returns 0. */
__attribute__((format(printf, 2, 3)))
int calib_mpr_fail(calib_mpr *r, const char *fmt, ...);

/* 1 when o is the string lit. */
int calib_mpr_is_str(const msgpack_object *o, const char *lit);
/* The value of key in map, or NULL (no failure) when map is not a map or
 * has no such key. */
const msgpack_object *calib_mpr_find(const msgpack_object *map, const char *key);
/* A number as a double (integers converted, nil as NaN); 0 if o is none. */
int calib_mpr_number(const msgpack_object *o, double *x);

/* The value of key, which must be there (else a failure, NULL). */
const msgpack_object *calib_mpr_get(calib_mpr *r, const msgpack_object *map, const char *key);
/* key's value as a map, or as an array of exactly n values (n =
 * UINT32_MAX: any); NULL on failure. */
const msgpack_object *calib_mpr_map(calib_mpr *r, const msgpack_object *map, const char *key);
const msgpack_object *calib_mpr_array(calib_mpr *r, const msgpack_object *map, const char *key,
                                uint32_t n);
/* key's value as an unsigned integer in [lo, hi]; 0 on failure. */
uint64_t calib_mpr_uint(calib_mpr *r, const msgpack_object *map, const char *key, uint64_t lo,
                  uint64_t hi);
/* key's value as a signed integer. */
int64_t calib_mpr_int(calib_mpr *r, const msgpack_object *map, const char *key);
/* key's value as a number (nil: NaN); NaN on failure. */
double calib_mpr_double(calib_mpr *r, const msgpack_object *map, const char *key);
/* key's value as a number that is finite; 0 on failure. */
double calib_mpr_finite(calib_mpr *r, const msgpack_object *map, const char *key);
/* key's value, a binary of exactly len bytes, copied to dst; 0 on failure. */
int calib_mpr_bin(calib_mpr *r, const msgpack_object *map, const char *key, void *dst, size_t len);
/* key's value, a string of 1..cap-1 bytes without NUL, copied to dst with
 * its NUL; 0 on failure. */
int calib_mpr_str(calib_mpr *r, const msgpack_object *map, const char *key, char *dst, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
