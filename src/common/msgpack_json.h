/* msgpack_json.h — prints a decoded msgpack object as JSON: NaN and
 * infinities as null, bin and ext as null, non-string keys as "?". */
#ifndef CALIB_MSGPACK_JSON_H
#define CALIB_MSGPACK_JSON_H

#include <msgpack.h>
#include <stdio.h>

void msgpack_print_json(FILE *f, const msgpack_object *o);

#endif
