/* fuzz_daemon.c — a calibd without sockets for the fuzz targets (fuzz.h),
 * made as tests/unit/test_registry.c and test_http.c make theirs. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "control.h"
#include "registry.h"

#include "fuzz.h"

static FILE *devnull(void)
{
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w"))) {
        perror("fuzz: /dev/null");
        abort();
    }
    return f;
}

calibd *fuzz_daemon_new(void)
{
    calibd *d = calloc(1, sizeof *d);
    uv_loop_t *loop = malloc(sizeof *loop);
    char err[300];
    FUZZ_CHECK(d && loop && uv_loop_init(loop) == 0);
    FUZZ_CHECK(config_init(&d->cfg) == 0);
    /* nothing outside the process's own directory: no parameters of a real
     * state directory, no plugin loaded from the system's */
    FUZZ_CHECK(config_set_daemon(&d->cfg, "state_dir", fuzz_dir(), err, sizeof err) == 0);
    FUZZ_CHECK(config_set_daemon(&d->cfg, "plugin_dir", fuzz_dir(), err, sizeof err) == 0);
    /* small models, so that an input creates several quickly; fewer
     * samples than refit_min_samples: a refit is refused, never started
     * (a worker thread would make runs depend on timing) */
    model_cfg *c = &d->cfg.defaults;
    c->max_pending = 64;
    c->joined_memory = 64;
    c->ring = 256;
    c->reservoir = 128;
    c->window_panes = 4;
    c->drift_reference = 100;
    c->refit_min_samples = 1000;
    d->cfg.max_models = 8;
    d->cfg.memory_limit = 64u << 20;
    log_init(&d->log, LOG_DEBUG, fuzz_verbose() ? stderr : devnull());
    FUZZ_CHECK(calibd_init(d, loop, 12345) == 0);
    d->started = 1; /* the same status from run to run: */
    clock_resume(d, 1); /* the steady clock too */
    return d;
}

void fuzz_daemon_clear(calibd *d)
{
    registry_free(d);
    d->reg.mem = (calib_budget){0};
    d->messages = 0;
    memset(d->rejected, 0, sizeof d->rejected);
}

void fuzz_daemon_status(calibd *d)
{
    double now = wall_now();
    for (size_t i = 0; i < d->reg.n; i++)
        model_view_fill(d->reg.models[i], now);
    calib_mpw w;
    calib_mpw_init(&w);
    control_pack_status(d, &w, NULL, 0);
    size_t end = 0;
    FUZZ_CHECK(calib_mpw_error(&w) == CALIB_OK);
    FUZZ_CHECK(calib_proto_scan(w.sb.data, w.sb.size, &end) == CALIB_REJ_NONE);
    FUZZ_CHECK(end == w.sb.size && fuzz_is_map(w.sb.data, w.sb.size));
    calib_mpw_destroy(&w);
}
