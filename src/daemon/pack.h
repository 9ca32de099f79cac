/* pack.h — msgpack helpers of calibd: strings, numbers (NaN and infinities
 * as nil), counters, estimates. */
#ifndef CALIBD_PACK_H
#define CALIBD_PACK_H

#include <msgpack.h>
#include <stdint.h>

#include "calib/accum.h"

void pack_str(msgpack_packer *pk, const char *s);
void pack_num(msgpack_packer *pk, double x);
/* {"mean": m, "ci": [lo, hi] or nil, "n": n} */
void pack_estimate(msgpack_packer *pk, const calib_accum *a);
/* "name": v */
void pack_counter(msgpack_packer *pk, const char *name, uint64_t v);
/* [lo, hi], or nil unless both are finite */
void pack_pair(msgpack_packer *pk, const double v[2]);
/* The head of a PUB message: a map of nkeys, then "v": 1, "type", "model"
 * and "ts" (now); nkeys counts these four. */
void pack_message_head(msgpack_packer *pk, size_t nkeys, const char *type,
                       const char *model, double ts);

#endif
