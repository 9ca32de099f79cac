/*
 * plugin.c — recalibration methods by name: the three built-ins described by
 * calib_plugin descriptors, and a registry of plugins added at link time or
 * loaded with dlopen. Every failure returns a code and, when the caller gave
 * a buffer, one message; nothing here prints.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "calib/plugin.h"
#include "calib/protocol.h"

/* ================================================================== built-ins */

static const calib_plugin builtin_temperature = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "temperature",
    .summary = "temperature scaling: p = softmax(z / T), T fitted by NLL or Brier",
    .forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS) | CALIB_FORM_BIT(CALIB_FORM_PROBS)
             | CALIB_FORM_BIT(CALIB_FORM_BINARY),
    .nparams = 1,
    .param_names = {"T"},
    .identity = {1},
    .fit = calib_recal_fit_temperature,
    .apply = calib_recal_apply_temperature,
};

static const calib_plugin builtin_platt = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "platt",
    .summary = "Platt scaling: p = sigmoid(a s + b), binary or K = 2",
    .forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS) | CALIB_FORM_BIT(CALIB_FORM_PROBS)
             | CALIB_FORM_BIT(CALIB_FORM_BINARY),
    .nparams = 2,
    .param_names = {"a", "b"},
    .identity = {1, 0},
    .fit = calib_recal_fit_platt,
    .apply = calib_recal_apply_platt,
};

static const calib_plugin builtin_variance = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "variance",
    .summary = "variance scaling: var' = w var + b, fitted by Dawid-Sebastiani",
    .forms = CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN),
    .nparams = 2,
    .param_names = {"w", "b"},
    .identity = {1, 0},
    .fit = calib_recal_fit_variance,
    .apply = calib_recal_apply_variance,
};

static const calib_plugin builtin_location_scale = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "location_scale",
    .summary = "location-scale: mean' = a + b mean, var' = c var, fitted by Dawid-Sebastiani",
    .forms = CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN),
    .nparams = 3,
    .param_names = {"a", "b", "c"},
    .identity = {0, 1, 1},
    .fit = calib_recal_fit_location_scale,
    .apply = calib_recal_apply_location_scale,
};

static const calib_plugin *const builtins[] = {
    &builtin_temperature,
    &builtin_platt,
    &builtin_variance,
    &builtin_location_scale,
};

const calib_plugin *calib_plugin_builtin(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i]->name, name) == 0)
            return builtins[i];
    return NULL;
}

/* ================================================================== checks */

/* snprintf into an optional buffer. */
#if defined(__GNUC__)
static void errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int calib_plugin_name_ok(const char *name, size_t len)
{
    return len <= CALIB_PLUGIN_NAME_MAX && calib_proto_topic_ok(name, len) &&
           memchr(name, ':', len) == NULL;
}

static const unsigned all_forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS)
    | CALIB_FORM_BIT(CALIB_FORM_PROBS) | CALIB_FORM_BIT(CALIB_FORM_BINARY)
    | CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN);

int calib_plugin_check(const calib_plugin *p, char *err, size_t errlen)
{
    if (!p) {
        errf(err, errlen, "no descriptor");
        return CALIB_EINVAL;
    }
    if (p->abi_version != CALIB_PLUGIN_ABI_VERSION) {
        errf(err, errlen,
             "plugin ABI version %u, but this libcalib has ABI version %u;"
             " rebuild the plugin against this libcalib",
             (unsigned)p->abi_version, (unsigned)CALIB_PLUGIN_ABI_VERSION);
        return CALIB_EPLUGIN_ABI;
    }
    if (!p->name || !calib_plugin_name_ok(p->name, strlen(p->name))) {
        errf(err, errlen, "name must be 1..%d bytes of [A-Za-z0-9._-]",
             CALIB_PLUGIN_NAME_MAX);
        return CALIB_EINVAL;
    }
    if (p->forms == 0 || (p->forms & ~all_forms)) {
        errf(err, errlen, "%s: forms 0x%x is not a set of CALIB_FORM_BIT()s",
             p->name, p->forms);
        return CALIB_EINVAL;
    }
    if (p->nparams == 0 || p->nparams > CALIB_RECAL_MAX_PARAMS) {
        errf(err, errlen, "%s: nparams %u outside 1..%d", p->name, p->nparams,
             CALIB_RECAL_MAX_PARAMS);
        return CALIB_EINVAL;
    }
    for (unsigned i = 0; i < p->nparams; i++)
        if (!p->param_names[i] || !p->param_names[i][0]) {
            errf(err, errlen, "%s: parameter %u has no name", p->name, i);
            return CALIB_EINVAL;
        }
    if (!p->fit || !p->apply) {
        errf(err, errlen, "%s: fit and apply are required", p->name);
        return CALIB_EINVAL;
    }
    return CALIB_OK;
}

/* ================================================================== parameters */

/* The built-ins' domains: T > 0; w > 0 and b >= 0 (a variance stays
 * positive); Platt's a and b anything finite; location-scale's b > 0 (the
 * mean stays increasing) and c > 0. -1, or the index of the parameter
 * outside its domain. */
static int builtin_domain(const calib_plugin *p, const double *v, const char **why)
{
    if (p == &builtin_temperature && !(v[0] > 0))
        return *why = "must be > 0", 0;
    if (p == &builtin_variance && !(v[0] > 0))
        return *why = "must be > 0", 0;
    if (p == &builtin_variance && !(v[1] >= 0))
        return *why = "must be >= 0", 1;
    if (p == &builtin_location_scale && !(v[1] > 0))
        return *why = "must be > 0", 1;
    if (p == &builtin_location_scale && !(v[2] > 0))
        return *why = "must be > 0", 2;
    return -1;
}

/* One prediction of each form, ordinary and extreme, to apply a map to. */
static const struct probe {
    int form;
    size_t k;
    double x[2];
} probes[] = {
    {CALIB_FORM_LOGITS, 2, {0.3, -1.2}},
    {CALIB_FORM_LOGITS, 2, {0, 40}},
    {CALIB_FORM_PROBS, 2, {0.2, 0.8}},
    {CALIB_FORM_PROBS, 2, {1e-12, 1 - 1e-12}},
    {CALIB_FORM_BINARY, 2, {0.7, 0}},
    {CALIB_FORM_BINARY, 2, {1 - 1e-12, 0}},
    {CALIB_FORM_GAUSSIAN, 0, {1.5, 0.5}},
    {CALIB_FORM_GAUSSIAN, 0, {-1e6, 1e-9}},
};

/* The map's output of one probe is a valid prediction of its output form. */
static int output_ok(int form, size_t k, const double *out)
{
    switch (calib_recal_out_form(form)) {
    case CALIB_FORM_PROBS: return calib_check_probs(out, k) == CALIB_OK;
    case CALIB_FORM_BINARY: return calib_check_binary(out[0]) == CALIB_OK;
    default: return calib_check_gaussian(out[0], out[1]) == CALIB_OK;
    }
}

int calib_plugin_params_check(const calib_plugin *p, const double *params,
                              char *err, size_t errlen)
{
    const char *why;
    if (!p || !params || p->nparams == 0 || p->nparams > CALIB_RECAL_MAX_PARAMS) {
        errf(err, errlen, "no method or no parameters");
        return CALIB_EINVAL;
    }
    for (unsigned i = 0; i < p->nparams; i++)
        if (!isfinite(params[i])) {
            errf(err, errlen, "%s: %s = %g is not finite", p->name, p->param_names[i],
                 params[i]);
            return CALIB_EINVAL;
        }
    int bad = builtin_domain(p, params, &why);
    if (bad >= 0) {
        errf(err, errlen, "%s: %s = %.17g %s", p->name, p->param_names[bad],
             params[bad], why);
        return CALIB_EINVAL;
    }
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        const struct probe *pr = &probes[i];
        double out[2];
        if (!(p->forms & CALIB_FORM_BIT(pr->form)))
            continue;
        if (p->apply(params, pr->form, pr->k, pr->x, out) != CALIB_OK ||
            !output_ok(pr->form, pr->k, out)) {
            errf(err, errlen, "%s: these parameters do not map a %s prediction to a "
                 "valid one", p->name, calib_form_name(pr->form));
            return CALIB_EINVAL;
        }
    }
    return CALIB_OK;
}

/* ================================================================== registry */

void calib_plugin_registry_init(calib_plugin_registry *r)
{
    memset(r, 0, sizeof *r);
}

void calib_plugin_registry_free(calib_plugin_registry *r)
{
    if (!r)
        return;
    while (r->len > 0) {
        struct calib_plugin_slot *s = &r->slot[--r->len];
        if (s->desc->free)
            s->desc->free();
        if (s->handle)
            dlclose(s->handle);
    }
}

const calib_plugin *calib_plugin_find(const calib_plugin_registry *r,
                                      const char *name)
{
    const calib_plugin *p = calib_plugin_builtin(name);
    if (p || !r || !name)
        return p;
    for (size_t i = 0; i < r->len; i++)
        if (strcmp(r->slot[i].desc->name, name) == 0)
            return r->slot[i].desc;
    return NULL;
}

/* Checks p, refuses a known name, runs init and stores p; every message
 * starts with prefix (the path and ": ", or ""). */
static int registry_insert(calib_plugin_registry *r, const calib_plugin *p,
                           void *handle, const char *prefix, char *err,
                           size_t errlen)
{
    char why[256] = "";
    int rc = calib_plugin_check(p, why, sizeof why);
    if (rc) {
        errf(err, errlen, "%s%s", prefix, why);
        return rc;
    }
    if (calib_plugin_find(r, p->name)) {
        errf(err, errlen, "%sa method named \"%s\" is already registered",
             prefix, p->name);
        return CALIB_EPLUGIN_EXISTS;
    }
    if (r->len == CALIB_PLUGIN_MAX) {
        errf(err, errlen, "%sregistry full (%d plugins)", prefix,
             CALIB_PLUGIN_MAX);
        return CALIB_EFULL;
    }
    if (p->init && p->init(why, sizeof why) != 0) {
        why[sizeof why - 1] = '\0'; /* a plugin's message, not trusted */
        errf(err, errlen, "%s%s: init failed: %s", prefix, p->name, why);
        return CALIB_EPLUGIN_INIT;
    }
    r->slot[r->len].desc = p;
    r->slot[r->len].handle = handle;
    r->len++;
    return CALIB_OK;
}

int calib_plugin_add(calib_plugin_registry *r, const calib_plugin *p,
                     char *err, size_t errlen)
{
    if (!r) {
        errf(err, errlen, "no registry");
        return CALIB_EINVAL;
    }
    return registry_insert(r, p, NULL, "", err, errlen);
}

int calib_plugin_load(calib_plugin_registry *r, const char *path, char *err,
                      size_t errlen)
{
    char prefix[512];
    const calib_plugin *p;
    void *handle;
    int rc;
    if (!r || !path) {
        errf(err, errlen, "no registry or path");
        return CALIB_EINVAL;
    }
    snprintf(prefix, sizeof prefix, "%s: ", path);
    /* RTLD_LOCAL: two plugins may define the same internal symbols */
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        errf(err, errlen, "%s%s", prefix, why ? why : "dlopen failed");
        return CALIB_EPLUGIN_OPEN;
    }
    dlerror();
    p = dlsym(handle, CALIB_PLUGIN_SYMBOL);
    if (!p) {
        errf(err, errlen, "%sno symbol %s: not a calib plugin", prefix,
             CALIB_PLUGIN_SYMBOL);
        rc = CALIB_EPLUGIN_SYMBOL;
        goto err;
    }
    rc = registry_insert(r, p, handle, prefix, err, errlen);
    if (rc)
        goto err;
    return CALIB_OK;
err:
    dlclose(handle);
    return rc;
}

const char *calib_plugin_strerror(int err)
{
    switch (err) {
    case CALIB_EPLUGIN_OPEN: return "plugin cannot be loaded";
    case CALIB_EPLUGIN_SYMBOL: return "not a calib plugin (no descriptor)";
    case CALIB_EPLUGIN_ABI: return "plugin built against another ABI version";
    case CALIB_EPLUGIN_EXISTS: return "a method of that name is registered";
    case CALIB_EPLUGIN_INIT: return "plugin initialisation failed";
    }
    return calib_strerror(err);
}
