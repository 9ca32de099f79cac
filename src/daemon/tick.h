/* tick.h — the daemon's periodic work (tick.c). */
#ifndef CALIBD_TICK_H
#define CALIBD_TICK_H

#include <stdint.h>

#include "slicer.h"

struct calibd;

/* The tick's pass over the models, in slices (calibd.h holds it). */
typedef struct tick_pass {
    slicer models;
    double now, steady; /* tick_now(), steady_now() at its start */
    int republish;
    uint64_t overruns;  /* ticks that found the last pass still running */
} tick_pass;

/* Periodic work, every `tick` seconds: the models that expire or were
 * forgotten collected; for every model, in a pass a slice at a time
 * (slicer.h), join expiry, drift alarms, scheduled refits, the gate's
 * decisions, alert rules, republishing every params_interval (a tick that
 * finds the last pass still running starts none, counted); the windows on
 * steady_now() (clock.h), intervals on tick_now(); then snapshots, Kafka
 * and the HTTP rendering, each when due. While stopping, only the last.
 * daemon_tick_init first (0, or a libuv error code). */
int daemon_tick_init(struct calibd *d);
void daemon_tick(struct calibd *d);

#endif
