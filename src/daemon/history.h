/* history.h — each model's history of its windowed scores (hist.h: the
 * points and their file format), as calibd keeps it while HTTP serves it
 * (GET /history, the page): a point per model every history_step,
 * STATE_DIR/history loaded at the start, saved every HISTORY_SAVE seconds
 * by a worker and at exit (calibd(8), FILES). The loop alone adds points;
 * other threads read the points under the lock. */
#ifndef CALIBD_HISTORY_H
#define CALIBD_HISTORY_H

#include <pthread.h>
#include <stddef.h>

#include <uv.h>

#include "calib/mpw.h"
#include "hist.h"
#include "log.h"
#include "slicer.h"

struct calibd;
struct model;

#define HISTORY_SAVE 600.0 /* seconds between two saves */

typedef struct history {
    hist h;                 /* the points: under lock for other threads */
    pthread_mutex_t lock;
    double next_point;      /* steady time of the next point */
    double next_save;       /* monotonic time of the next save */
    struct calibd *d;       /* set by history_start */
    /* a save: the series packed a slice at a time on the loop, then
     * written by a worker */
    slicer series;
    uv_work_t work;
    int busy;
    calib_mpw w;
    int rc;
    char err[ERR_MAX];
} history;

/* points a series at most (0: no history), step seconds apart */
void history_init(history *y, size_t points, double step);
void history_free(history *y);
/* The saves' handle on d's loop: 0, or -1 (libuv). */
int history_start(history *y, struct calibd *d);
/* Stops the saves (one under way still ends). */
void history_stop(history *y);
/* Loop thread: model m's point at wall (steady time), if it has a
 * window. */
void history_add(history *y, struct model *m, double wall);
/* Loop thread, each tick: the wall time of the points due now (0: none),
 * and a save started when one is due (now: monotonic). */
double history_due(history *y, double wall, double now);
/* Loads STATE_DIR/history (the history of the last run), keeping at most
 * d->cfg.history points a series; a file that cannot be trusted is moved
 * aside to history.bad with one log line. */
void history_load(history *y, struct calibd *d);
/* Saves the history to STATE_DIR/history, atomically, at once (at exit):
 * 0, or -1 (logged). */
int history_save(history *y, struct calibd *d);

#endif
