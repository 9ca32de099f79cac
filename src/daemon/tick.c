/* tick.c — the daemon's periodic work (calibd(8)), the one place to read
 * what happens every tick (as Redis's serverCron): the models that leave,
 * a pass over the models a slice at a time (slicer.h) -- each model's
 * join expiry, its memory and expiry messages, its window summed for
 * status, metrics and the alert rules, then the closed loop's part
 * (recalib_tick) -- the snapshots' turn, Kafka's, and HTTP's rendering.
 * main.c's tick timer calls daemon_tick. */
#include "alert.h"
#include "calibd.h"
#include "kafka.h"
#include "recalib.h"
#include "registry.h"
#include "tick.h"

/* Says, at most once a minute per model (and within the logger's budget),
 * that predictions or labels expired unmatched: their other half did not
 * come within label_ttl, which nothing else tells a user but counters. */
static void expiry_say(calibd *d, model *m)
{
    const calib_join *j = &m->join;
    uint64_t n = j->expired_preds + j->expired_labels;
    if (n == m->expiry_said || (m->expiry_said_mono && d->pass.now - m->expiry_said_mono < 60))
        return;
    log_rl(&d->log, LOG_INFO, "join", "%s: %llu predictions and %llu labels expired unmatched "
           "in all: their label or prediction did not come within label_ttl = %g s (an id "
           "of the other kind, or a later label: raise label_ttl)", m->name,
           (unsigned long long)j->expired_preds, (unsigned long long)j->expired_labels,
           m->cfg.label_ttl);
    m->expiry_said = n;
    m->expiry_said_mono = d->pass.now;
}

/* Says once per model that memory_limit stopped its state growing (the
 * refusals go on being counted: calibd_memory_refused_total). */
static void memory_check(calibd *d, model *m)
{
    if (m->mem.refused == m->mem_refused_logged)
        return;
    if (!m->mem_refused_logged) {
        size_t ring = m->shaped ? calib_ring_cap(&m->ring) : 0;
        size_t res = m->shaped ? m->reservoir.s.cap : 0;
        log_msg(&d->log, LOG_WARN, "model", "%s: memory_limit reached (the models hold %zu "
                "bytes): its state stops growing, with %zu waiting slots, ring %zu, reservoir "
                "%zu; raise memory_limit or lower max_pending, ring or reservoir", m->name,
                d->reg.mem.used, m->join.alloc, ring, res);
        model_event_add(m, wall_now(), "memory", "memory_limit reached: the state stops growing "
                        "(%zu waiting slots, ring %zu, reservoir %zu)", m->join.alloc, ring, res);
    }
    m->mem_refused_logged = m->mem.refused;
}

static size_t pass_count(void *arg)
{
    return ((calibd *)arg)->reg.n;
}

static void pass_model(void *arg, size_t i)
{
    calibd *d = arg;
    model *m = d->reg.models[i];
    if (m->handed_over) /* another instance's now (kafka.h) */
        return;
    /* every model's join table, also one that holds labels only */
    model_join_tick(m, d->pass.now); /* TTLs are intervals: monotonic */
    expiry_say(d, m);
    memory_check(d, m);
    if (!m->shaped)
        return;
    model_view_fill(m, d->pass.steady); /* what status, metrics and alerts read */
    alert_check(d, m);
    recalib_tick(d, m, d->pass.republish);
}

static void pass_done(void *arg)
{
    calibd *d = arg;
    registry_walk_end(&d->reg);
}

int daemon_tick_init(calibd *d)
{
    return slicer_init(&d->pass.models, d->loop, pass_count, pass_model, pass_done, d);
}

/* The pass over the models: a tick that finds the last one running
 * starts none (counted). */
static void pass_start(calibd *d, double steady)
{
    if (d->pass.models.running) {
        d->pass.overruns++;
        return;
    }
    double now = tick_now(d);
    d->pass.now = now;
    d->pass.steady = steady;
    d->pass.republish = now >= d->next_republish;
    if (d->pass.republish)
        d->next_republish = now + d->cfg.params_interval;
    registry_walk_begin(&d->reg); /* until pass_done */
    slicer_start(&d->pass.models);
}

void daemon_tick(calibd *d)
{
    if (!d->stopping) {
        /* before the pass starts: nothing walks the models then */
        registry_collect(d, tick_now(d), registry_walked(d));
        pass_start(d, steady_now(d)); /* join expiry included */
        persist_tick(d);
        kafka_tick(d);
    }
    http_update(&d->http, d);
}
