/* calibd.c — a daemon's context made and ended (see calibd.h). */
#include <stdlib.h>

#include "calibd.h"
#include "registry.h"

int calibd_init(calibd *d, uv_loop_t *loop, uint64_t hash_seed)
{
    d->loop = loop;
    d->started = wall_now();
    clock_start(d);
    d->hash_seed = hash_seed;
    calib_msg_init(&d->msg);
    calib_plugin_registry_init(&d->plugins);
    d->x = malloc(CALIB_PROTO_MAX_K * sizeof *d->x);
    return d->x ? 0 : -1;
}

void calibd_free(calibd *d)
{
    registry_free(d);
    auth_free(&d->auth);
    calib_plugin_registry_free(&d->plugins);
    calib_msg_destroy(&d->msg);
    free(d->x);
    d->x = NULL;
    config_free(&d->cfg);
}
