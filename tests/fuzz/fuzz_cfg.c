/*
 * fuzz_cfg.c — calibd.conf(5) through config_load, as calibd reads it at
 * start and at a reload, then the configured models created as calibd
 * creates them (registry_get, which shapes a model whose form and K are
 * configured). Checked: a loaded configuration holds valid model names,
 * and every model key's value, written as text (config_model_key, what
 * snapshots store), reads back to the same value.
 *
 * An input is the file. It is written to the process's scratch directory,
 * since config_load reads a path.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "cfg.h"
#include "registry.h"

#include "fuzz.h"

static calibd *d;
static unsigned long warnings;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d = fuzz_daemon_new();
    return 0;
}

static void warn(void *arg, const char *msg)
{
    (void)arg;
    FUZZ_CHECK(msg[0] != 0);
    warnings++;
}

/* Each key of m as text, set on a copy, gives the same text. */
static void keys_read_back(const model_cfg *m)
{
    model_cfg copy = *m;
    char value[128], again[128], err[300];
    const char *key;
    for (size_t i = 0; (key = config_model_key(i, m, value, sizeof value)); i++) {
        FUZZ_CHECK(config_set_model(&copy, key, value, err, sizeof err) == 0);
        FUZZ_CHECK(strcmp(config_model_key(i, &copy, again, sizeof again), key) == 0);
        FUZZ_CHECK(strcmp(value, again) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("calibd.conf", data, size);
    daemon_cfg c;
    char err[700];
    FUZZ_CHECK(config_init(&c) == 0);
    if (config_load(&c, path, warn, NULL, err, sizeof err) != 0) {
        FUZZ_CHECK(err[0] != 0);
        config_free(&c);
        return 0;
    }
    keys_read_back(&c.defaults);
    for (size_t i = 0; i < c.nmodels; i++) {
        const model_cfg *m = &c.models[i];
        FUZZ_CHECK(calib_proto_topic_ok(m->name, strlen(m->name)));
        FUZZ_CHECK(config_find_model(&c, m->name) != NULL);
        keys_read_back(m);
    }
    (void)config_rcvhwm(&c);
    /* the models, in the daemon: its directories stay the scratch one
     * (no plugin is loaded from elsewhere) and its memory small (a
     * configuration may rightly ask for gigabytes) */
    config_free(&d->cfg);
    d->cfg = c;
    FUZZ_CHECK(config_set_daemon(&d->cfg, "state_dir", fuzz_dir(), err, sizeof err) == 0);
    FUZZ_CHECK(config_set_daemon(&d->cfg, "plugin_dir", fuzz_dir(), err, sizeof err) == 0);
    if (d->cfg.memory_limit > (64u << 20))
        d->cfg.memory_limit = 64u << 20;
    for (size_t i = 0; i < d->cfg.nmodels && i < 8; i++) {
        int why = 0;
        const char *name = d->cfg.models[i].name;
        model *m = registry_get(d, name, strlen(name), 1, &why);
        FUZZ_CHECK(m || why != 0);
    }
    fuzz_daemon_status(d);
    fuzz_daemon_clear(d);
    return 0;
}
