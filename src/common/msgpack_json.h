/* msgpack_json.h — prints a decoded msgpack object as JSON: NaN and
 * infinities as null, bin and ext as null, non-string keys as "?". */
#ifndef CALIB_MSGPACK_JSON_H
#define CALIB_MSGPACK_JSON_H

#include <msgpack.h>
#include <stdio.h>

void msgpack_print_json(FILE *f, const msgpack_object *o);
/* The same, a map (or an array of containers) a member a line, indented
 * `indent` spaces a level: for people. */
void msgpack_print_json_indented(FILE *f, const msgpack_object *o, int indent);
/* The first msgpack object of buf as a JSON text ending in a newline,
 * malloc'ed, its length in *out_len; NULL when buf does not start with a
 * whole object, or out of memory. */
char *msgpack_to_json(const char *buf, size_t len, size_t *out_len);

#endif
