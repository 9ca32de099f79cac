/* registry.h — the daemon's models by name (registry.c). All on the loop
 * thread. */
#ifndef CALIBD_REGISTRY_H
#define CALIBD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"
#include "model.h"

struct calibd;

/* The models by name (registry.c). */
typedef struct registry {
    model **models;     /* in creation order */
    size_t n, cap;
    uint32_t *index;    /* open addressing by name: index_cap places of
                           model numbers */
    size_t index_cap;
    calib_budget mem;   /* what the models hold: every model's budget draws
                           on it, up to cfg.memory_limit */
    uint64_t forgotten, expired, handed_over; /* registry_collect */
    size_t leaving;     /* handed over, not yet freed: not counted against
                           max_models, nor shown */
    uint64_t made;      /* models ever made (their seeds) */
    unsigned walks;     /* walks by number under way (registry_walk_begin) */
} registry;

/* The model of that name (len bytes, not NUL-terminated), or NULL. */
model *registry_find(const struct calibd *d, const char *name, size_t len);

/*
 * The model of that name; with create, made if it does not exist and may:
 * auto_models (or a [model] section), fewer than max_models, and room
 * under memory_limit for its first state. NULL with *reject set (REJ_UNKNOWN_MODEL,
 * REJ_TOO_MANY_MODELS, REJ_MEMORY_LIMIT, CALIB_REJ_NO_MEMORY) when not.
 */
model *registry_get(struct calibd *d, const char *name, size_t len, int create, int *reject);

/*
 * Fixes a model's form and K (its first prediction, or its configuration),
 * charging the most it may then hold against memory_limit, and starts its
 * closed loop. 0, or a rejection with what to do in why; the model then
 * stays unshaped, its waiting labels kept.
 */
int registry_shape(struct calibd *d, model *m, int form, size_t k, char *why, size_t len);

/* Frees model m and takes it out of the registry; the models after it
 * keep their order. */
void registry_remove(struct calibd *d, model *m);

/*
 * At a tick: removes the models calibctl forget asked for and, with
 * model_idle_ttl, the ones no [model] section configures that never scored
 * a pair and had no message for that long (a flood of names). Only when
 * nothing walks the models by number (busy: a tick pass, a snapshot's
 * packing or an HTTP round under way) and no worker holds the model (a fit
 * or a store). Counts them; returns how many went.
 */
size_t registry_collect(struct calibd *d, double now, int busy);
/* A walk over the models by number (the tick's pass, a snapshot's
 * packing, an HTTP round) holds their numbers across turns of the loop:
 * from registry_walk_begin to registry_walk_end, which the walker calls
 * (Redis's dictPauseRehashing), registry_collect frees none. */
void registry_walk_begin(registry *r);
void registry_walk_end(registry *r);
/* Something walks the models by number now (registry_collect's busy). */
int registry_walked(const struct calibd *d);

/* Hands n models over (a revoked Kafka partition's, kafka.h): out of the
 * index at once, so that a message or a restored snapshot of the name
 * makes a new model, and freed by registry_collect when no worker holds
 * them. They act no more meanwhile (no tick, no publish, not in status). */
void registry_hand_over(struct calibd *d, model *const *models, size_t n);

/* Frees every model (at exit). */
void registry_free(struct calibd *d);

#endif
