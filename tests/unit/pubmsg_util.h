/* pubmsg_util.h — the params/alert codec for the unit tests that need it
 * (test_pubmsg, test_client): a message written into a payload, a decode
 * into a zeroed calib_pubmsg, and "mix8", a method of eight parameters
 * whose result shows a torn set. Include after unit.h and mp.h. */
#ifndef CALIB_TEST_PUBMSG_UTIL_H
#define CALIB_TEST_PUBMSG_UTIL_H

#include <stdio.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/mpw.h"
#include "calib/plugin.h"
#include "calib/pubmsg.h"

/* A params message of model: version, method and its n parameters by
 * name, every figure absent. */
static inline void params_of(calib_params_msg *m, const char *model, uint64_t version,
                             const char *method, unsigned n, const char *const *names,
                             const double *values)
{
    calib_params_msg_init(m, model);
    m->version = version;
    snprintf(m->method, sizeof m->method, "%s", method);
    m->nparams = n;
    for (unsigned i = 0; i < n; i++) {
        snprintf(m->names[i], sizeof m->names[i], "%s", names[i]);
        m->values[i] = values[i];
    }
}

/* m, written by calib_params_msg_write, as the payload p. */
static inline void pl_of_params(payload *p, const calib_params_msg *m)
{
    calib_mpw w;
    calib_mpw_init(&w);
    assert_int_equal(calib_params_msg_write(&w, m), CALIB_OK);
    pl_init(p);
    assert_int_equal(msgpack_sbuffer_write(&p->sb, w.sb.data, w.sb.size), 0);
    calib_mpw_destroy(&w);
}

/* calib_pubmsg_decode into a zeroed out; type the one wanted: a
 * well-formed message of another type gives CALIB_EINVAL. */
static inline int decode_as(int type, const void *topic, size_t topic_len, const void *buf,
                            size_t len, const calib_plugin_registry *reg, calib_pubmsg *out)
{
    memset(out, 0, sizeof *out);
    int r = calib_pubmsg_decode(topic, topic_len, buf, len, reg, out);
    return r == CALIB_REJ_NONE && out->type != type ? CALIB_EINVAL : r;
}

/* "mix8": p' = p0 when all eight parameters are equal, else -1 -- a reader
 * that saw half of one set and half of another would get -1. */
static inline int mix_fit(const calib_dataset *ds, const calib_recal_opts *opts,
                          calib_recal_result *res)
{
    (void)ds, (void)opts, (void)res;
    return CALIB_EINVAL;
}

static inline int mix_apply(const double *params, int form, size_t k, const double *x,
                            double *out)
{
    (void)k, (void)x;
    if (form != CALIB_FORM_BINARY)
        return CALIB_EINVAL;
    for (int j = 1; j < 8; j++)
        if (params[j] != params[0]) {
            out[0] = -1;
            return CALIB_OK;
        }
    out[0] = params[0];
    return CALIB_OK;
}

static const calib_plugin mix8 = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "mix8",
    .summary = "test: detects a torn parameter set",
    .forms = CALIB_FORM_BIT(CALIB_FORM_BINARY),
    .nparams = 8,
    .param_names = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"},
    .identity = {0},
    .fit = mix_fit,
    .apply = mix_apply,
};

static inline void mix_registry(calib_plugin_registry *r)
{
    calib_plugin_registry_init(r);
    assert_int_equal(calib_plugin_add(r, &mix8, NULL, 0), CALIB_OK);
}

#endif
