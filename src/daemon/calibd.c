/* calibd.c — a daemon's context made and ended (see calibd.h). */
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "registry.h"
#include "status.h"

int calibd_init(calibd *d, uv_loop_t *loop, uint64_t hash_seed)
{
    d->loop = loop;
    d->started = wall_now();
    clock_start(d);
    d->hash_seed = hash_seed;
    calib_msg_init(&d->msg);
    calib_plugin_registry_init(&d->plugins);
    /* + codes + the label-free estimates (model.h, lf_slot) */
    d->x = malloc((CALIB_PROTO_MAX_K + SEG_MAX_KEYS + 1) * sizeof *d->x);
    if (!d->x)
        return -1;
    /* the store workers' count (recalib_wait_stores): until the end, since
     * a worker may finish after the loop stopped */
    if (uv_mutex_init(&d->stores.lock) != 0)
        return -1;
    if (uv_cond_init(&d->stores.done) != 0) {
        uv_mutex_destroy(&d->stores.lock);
        return -1;
    }
    d->stores.ready = 1;
    return 0;
}

void calibd_free(calibd *d)
{
    registry_free(d);
    curve_free(&d->curve);
    calib_plugin_registry_free(&d->plugins);
    calib_msg_destroy(&d->msg);
    free(d->x);
    d->x = NULL;
    if (d->stores.ready) {
        uv_cond_destroy(&d->stores.done);
        uv_mutex_destroy(&d->stores.lock);
        d->stores.ready = 0;
    }
    config_free(&d->cfg);
}

void calibd_counts(const calibd *d, snapshot_counts *c)
{
    *c = (snapshot_counts){
        .messages = d->messages,
        .publish_errors = d->publish_errors,
        .reloads = d->reloads,
        .reloads_refused = d->reloads_refused,
        .models_forgotten = d->reg.forgotten,
        .models_expired = d->reg.expired,
        .alerts_sent = d->alert.sent,
        .alerts_suppressed = d->alert.suppressed,
        .sinks_failed = d->alert.sinks_failed,
        .sinks_killed = d->alert.sinks_killed,
        .sinks_dropped = d->alert.sinks_dropped,
    };
    memcpy(c->rejected, d->rejected, sizeof c->rejected);
}

void calibd_counts_add(calibd *d, const snapshot_counts *c)
{
    d->messages += c->messages;
    d->publish_errors += c->publish_errors;
    d->reloads += c->reloads;
    d->reloads_refused += c->reloads_refused;
    d->reg.forgotten += c->models_forgotten;
    d->reg.expired += c->models_expired;
    d->alert.sent += c->alerts_sent;
    d->alert.suppressed += c->alerts_suppressed;
    d->alert.sinks_failed += c->sinks_failed;
    d->alert.sinks_killed += c->sinks_killed;
    d->alert.sinks_dropped += c->sinks_dropped;
    for (int i = 0; i < REJ_MAX; i++)
        d->rejected[i] += c->rejected[i];
}

void calibd_status(const calibd *d, status_daemon *s)
{
    *s = (status_daemon){
        .uptime = wall_now() - d->started,
        .mem_bytes = d->reg.mem.used,
        .mem_limit = d->cfg.memory_limit,
        .mem_refused = d->reg.mem.refused,
        .models = d->reg.n - d->reg.leaving,
        .max_models = d->cfg.max_models,
    };
    calibd_counts(d, &s->counts);
    const kafka_figures *k = d->kafka_fig;
    if ((s->kafka = k != NULL) != 0) {
        s->kstats = k->st;
        for (size_t i = 0; i < k->nparts; i++)
            s->kstats.partitions += k->parts[i]->assigned != 0;
        s->kafka_group = d->cfg.kafka.group;
        s->kparts = k->parts;
        s->nkparts = k->nparts;
    }
}
