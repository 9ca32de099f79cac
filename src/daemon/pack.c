/* pack.c — msgpack helpers shared by the control replies and the PUB
 * messages. */
#include <math.h>
#include <string.h>

#include "pack.h"

void pack_str(msgpack_packer *pk, const char *s)
{
    size_t len = strlen(s);
    msgpack_pack_str(pk, len);
    msgpack_pack_str_body(pk, s, len);
}

void pack_num(msgpack_packer *pk, double x)
{
    if (isfinite(x))
        msgpack_pack_double(pk, x);
    else
        msgpack_pack_nil(pk);
}

void pack_estimate(msgpack_packer *pk, const calib_accum *a)
{
    double ci[2];
    calib_accum_ci95(a, ci);
    msgpack_pack_map(pk, 3);
    pack_str(pk, "mean");
    pack_num(pk, calib_accum_mean(a));
    pack_str(pk, "ci");
    pack_pair(pk, ci);
    pack_str(pk, "n");
    msgpack_pack_uint64(pk, a->n);
}

void pack_counter(msgpack_packer *pk, const char *name, uint64_t v)
{
    pack_str(pk, name);
    msgpack_pack_uint64(pk, v);
}

void pack_pair(msgpack_packer *pk, const double v[2])
{
    if (!isfinite(v[0]) || !isfinite(v[1])) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_array(pk, 2);
    pack_num(pk, v[0]);
    pack_num(pk, v[1]);
}

void pack_message_head(msgpack_packer *pk, size_t nkeys, const char *type,
                       const char *model, double ts)
{
    msgpack_pack_map(pk, nkeys);
    pack_str(pk, "v");
    msgpack_pack_uint8(pk, 1);
    pack_str(pk, "type");
    pack_str(pk, type);
    pack_str(pk, "model");
    pack_str(pk, model);
    pack_str(pk, "ts");
    msgpack_pack_double(pk, ts);
}
