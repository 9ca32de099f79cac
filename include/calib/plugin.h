/*
 * Recalibration plugins: a versioned descriptor per method, the three
 * built-ins described through it, and a registry that loads more with
 * dlopen(3). See calib_recal(3), section PLUGINS.
 *
 * A plugin is a shared object exporting exactly one symbol,
 * CALIB_PLUGIN_SYMBOL, a const calib_plugin built with designated
 * initialisers:
 *
 *     const calib_plugin calib_plugin_descriptor = {
 *         .abi_version = CALIB_PLUGIN_ABI_VERSION,
 *         .name = "ets",
 *         ...
 *     };
 *
 * The loader reads abi_version first (it stays the first member in every
 * ABI version) and refuses a plugin built against another version before
 * touching any other field. libcalib never prints: failures return a code
 * and, when the caller passes a buffer, a message naming the file.
 */
#ifndef CALIB_PLUGIN_H
#define CALIB_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "calib/recal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever calib_plugin, calib_recal_opts, calib_recal_result or the
 * fit/apply signatures change, additions included. */
#define CALIB_PLUGIN_ABI_VERSION 1u
#define CALIB_PLUGIN_SYMBOL "calib_plugin_descriptor"
#define CALIB_PLUGIN_NAME_MAX 63 /* bytes of [A-Za-z0-9._-] */
#define CALIB_PLUGIN_MAX 16      /* loaded plugins per registry */

/* Codes of the plugin loader, beyond the CALIB_E* of calib.h. */
enum calib_plugin_error {
    CALIB_EPLUGIN_OPEN = -64,   /* dlopen failed */
    CALIB_EPLUGIN_SYMBOL = -65, /* no CALIB_PLUGIN_SYMBOL in the object */
    CALIB_EPLUGIN_ABI = -66,    /* built against another ABI version */
    CALIB_EPLUGIN_EXISTS = -67, /* a method of that name is registered */
    CALIB_EPLUGIN_INIT = -68,   /* the plugin's init hook failed */
};

typedef struct calib_plugin {
    uint32_t abi_version;    /* CALIB_PLUGIN_ABI_VERSION; always first */
    const char *name;        /* the "method" of params messages */
    const char *summary;     /* one line, for listings */
    unsigned forms;          /* CALIB_FORM_BIT(CALIB_FORM_*) | ... */
    unsigned nparams;        /* 1..CALIB_RECAL_MAX_PARAMS */
    const char *param_names[CALIB_RECAL_MAX_PARAMS]; /* keys of "params" */
    double identity[CALIB_RECAL_MAX_PARAMS]; /* the map h(x) = x */
    calib_recal_fit_fn fit;
    calib_recal_apply_fn apply;
    /* Optional (NULL): called once after loading, before any fit; returns
     * 0, or nonzero with a message in err (errlen bytes) to refuse the
     * load. */
    int (*init)(char *err, size_t errlen);
    /* Optional (NULL): called once before the object is unloaded. */
    void (*free)(void);
} calib_plugin;

/* 1 when name[0..len) is a method name: 1..CALIB_PLUGIN_NAME_MAX bytes of
 * [A-Za-z0-9._-] (a model name's characters but ':'); else 0. */
int calib_plugin_name_ok(const char *name, size_t len);

/* The built-in "temperature", "platt" or "variance"; NULL for other names. */
const calib_plugin *calib_plugin_builtin(const char *name);

/*
 * Checks a descriptor: ABI version, name (1..CALIB_PLUGIN_NAME_MAX bytes of
 * [A-Za-z0-9._-]), forms, nparams, a non-empty name per parameter, fit and
 * apply. CALIB_EPLUGIN_ABI or CALIB_EINVAL with a message, else CALIB_OK.
 */
int calib_plugin_check(const calib_plugin *p, char *err, size_t errlen);

/*
 * Checks parameters p->nparams values for method p, as read back from
 * storage or received: each finite; in the built-ins' domains (temperature
 * T > 0; variance w > 0, b >= 0; Platt any finite a, b); and, for every
 * method, p->apply maps an ordinary and an extreme prediction of each form
 * the method handles (K = 2) to a valid one. CALIB_OK, or CALIB_EINVAL
 * with a message naming the parameter.
 */
int calib_plugin_params_check(const calib_plugin *p, const double *params,
                              char *err, size_t errlen);

/* Built-ins plus up to CALIB_PLUGIN_MAX added or loaded plugins. */
typedef struct calib_plugin_registry {
    size_t len;
    struct calib_plugin_slot {
        const calib_plugin *desc;
        void *handle; /* from dlopen, or NULL for an added descriptor */
    } slot[CALIB_PLUGIN_MAX];
} calib_plugin_registry;

void calib_plugin_registry_init(calib_plugin_registry *r);

/* Calls every free hook, newest first, and dlcloses; r is then empty. */
void calib_plugin_registry_free(calib_plugin_registry *r);

/*
 * Loads the shared object at path (dlopen RTLD_NOW | RTLD_LOCAL), checks its
 * descriptor, refuses a name already known, runs its init hook and adds it.
 * Returns CALIB_OK or CALIB_EPLUGIN_*, CALIB_EINVAL (bad descriptor),
 * CALIB_EFULL; on failure the object is closed again and err (if not NULL,
 * errlen bytes) holds a NUL-terminated message beginning with the path.
 */
int calib_plugin_load(calib_plugin_registry *r, const char *path, char *err,
                      size_t errlen);

/* Adds a descriptor linked into the program; checks and init as above. */
int calib_plugin_add(calib_plugin_registry *r, const calib_plugin *p,
                     char *err, size_t errlen);

/* The method of that name: a built-in first, then the registry (r may be
 * NULL); NULL if unknown. */
const calib_plugin *calib_plugin_find(const calib_plugin_registry *r,
                                      const char *name);

/* calib_strerror(), knowing the CALIB_EPLUGIN_* codes too. */
const char *calib_plugin_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
