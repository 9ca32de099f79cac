/* recalib.h — the closed loop of calibd(8): drift detection on the calibrated
 * Brier (or DSS) score, refits of the model's method on its recent ring in
 * a worker thread, the shadow gate, durable versioned publishing. */
#ifndef CALIBD_RECALIB_H
#define CALIBD_RECALIB_H

#include <stddef.h>

#include <uv.h>

#include "calib/mpw.h"
#include "calib/pubmsg.h"
#include "slicer.h"

struct calibd;
struct model;
struct model_params;
struct refit_job;

/* Refits whose samples are being copied out of the rings (calibd.h holds
 * it). */
typedef struct recalib_refits {
    slicer copy;
    struct refit_job *head, *tail;
    size_t challenger_bytes; /* copies of the challenger fits under way */
} recalib_refits;

/* Parameters files being written, or queued (calibd.h holds it). */
typedef struct recalib_stores {
    uv_mutex_t lock;
    uv_cond_t done;
    unsigned writing;
    int ready;          /* made by calibd_init (calibd_free ends them) */
} recalib_stores;

/* Resolves the model's method, restores its stored parameters and starts
 * its detectors, once the model is shaped. A model whose method or stored
 * state is unusable keeps scoring with the loop off (logged). Returns -1
 * only when out of memory. */
int recalib_attach(struct calibd *d, struct model *m);

/* A model's part of the tick (tick.h), after its window is summed and its
 * alert rules checked: segments' gates, the label-free figures and a
 * label shift's correction, the machine (drift alarms, scheduled refits,
 * the gate's decisions), and the parameters sent again when republish. */
void recalib_tick(struct calibd *d, struct model *m, int republish);

/* The copy of refits' samples out of the rings, a record at a time before
 * each fit (0, or a libuv error code); recalib_workers_free at stop drops the
 * refits still being copied. */
int recalib_workers_init(struct calibd *d);
void recalib_workers_free(struct calibd *d);

/* Where the model's parameters file is: the group's [kafka] state_dir for
 * a Kafka partition's model (its next owner reads it there), else
 * state_dir. */
const char *recalib_state_dir(const struct calibd *d, const struct model *m);

/* Blocks until no parameters file is being written (or waits to be): a
 * Kafka partition's models are handed over only with their last version
 * on disk, so that the next owner never starts below it. */
void recalib_wait_stores(struct calibd *d);

/* `calibctl refit MODEL`: starts a refit on the ring now. Returns the
 * number of samples it fits on, or 0 with the reason in why. */
size_t recalib_refit_now(struct calibd *d, struct model *m, char *why, size_t len);

/* The "params" message of m's current parameters, sent at now (wall
 * clock): what every publish and republish sends. */
void recalib_params_msg(const struct model *m, double now, calib_params_msg *msg);

/* The values of p as "T=1.98" or "a=1.1 b=-0.2", for logs. */
void recalib_format_params(const struct model_params *p, char *buf, size_t len);

#endif
