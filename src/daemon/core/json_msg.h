/* json_msg.h — a protocol v1 message written as JSON (HTTP ingest,
 * calibd-protocol(7) HTTP) turned into the msgpack map the decoder reads,
 * so that both encodings reach the same code: an object becomes a map, an
 * array an array, an integer an integer (unsigned when >= 0), any other
 * number a float64, a string a string, true and false booleans, null nil.
 * Pure: no I/O. */
#ifndef CALIBD_JSON_MSG_H
#define CALIBD_JSON_MSG_H

#include <stddef.h>

#include "calib/mpw.h"

/* The JSON text json[0..len) as one msgpack value appended to w: 0, or -1
 * with why in err ("not JSON: <jansson's message> (line L, column C)",
 * "not a JSON object", "nested deeper than ..."). Duplicate keys and text
 * after the value are refused; an integer beyond 64 bits is no JSON here. */
int json_msg_to_msgpack(const char *json, size_t len, calib_mpw *w, char *err, size_t errlen);

#endif
