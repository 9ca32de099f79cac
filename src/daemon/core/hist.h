/* hist.h — each model's history at a fixed step (a point a minute by
 * default): the window's mean score of both views with its interval, for
 * the page (GET /history). Bounded: a series keeps its newest `cap`
 * points, and its memory grows with the points it holds. Saved to and
 * loaded from the state directory, so that a restart keeps it. No locking
 * here: http.c holds its lock around every call. */
#ifndef CALIBD_HIST_H
#define CALIBD_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "calib/mpw.h"
#include "cfg.h"

/* raw mean, raw 95% low, raw high, calibrated mean, low, high; the
 * label-free estimate of the served outputs' score, low, high (calibd(8),
 * LABEL-FREE: from the predictions, before their labels) */
enum { HIST_RAW, HIST_RAW_LO, HIST_RAW_HI, HIST_CAL, HIST_CAL_LO, HIST_CAL_HI, HIST_EST,
       HIST_EST_LO, HIST_EST_HI, HIST_VALUES };
/* the values of a point of the first file format (v 1): no estimate */
#define HIST_VALUES_V1 HIST_EST

typedef struct hist_point {
    double t;                 /* wall clock */
    float v[HIST_VALUES];     /* NaN when unknown */
    uint32_t n;               /* pairs in the window */
} hist_point;

typedef struct hist_series {
    char name[CFG_NAME_MAX + 1];
    size_t head, len, alloc;  /* oldest at head; pts has alloc places */
    hist_point *pts;
} hist_series;

typedef struct hist {
    size_t cap;               /* points per series; 0: no history */
    double step;              /* seconds between points */
    hist_series **s;
    size_t n, alloc;
} hist;

void hist_init(hist *h, size_t cap, double step);
void hist_free(hist *h);
/* The series of model `name`: its index, created when create is set and it
 * does not exist; -1 when it does not (or out of memory). A linear search:
 * callers keep the index. */
long hist_find(hist *h, const char *name, int create);
/* Appends a point to series i, dropping the oldest past cap. 0, or -1 out
 * of memory (nothing changed). */
int hist_add(hist *h, size_t i, const hist_point *p);
/* Point j (0 = oldest) of series i. */
const hist_point *hist_at(const hist *h, size_t i, size_t j);

/* The whole history as msgpack: {"format": "calibd-history", "v": 2,
 * "step": s, "series": {NAME: [[t, v0..v8, n], ...]}}, NaN as nil (v 1,
 * read too, had v0..v5). */
void hist_write(const hist *h, calib_mpw *w);
/* The same in parts, for a caller that packs a few series at a time:
 * begin, then series i for each, then end. */
void hist_write_begin(const hist *h, calib_mpw *w);
void hist_write_series(const hist *h, size_t i, calib_mpw *w);
void hist_write_end(calib_mpw *w);
/* Reads what hist_write wrote into an empty h (keeping h's cap and step;
 * a series longer than cap keeps its newest points). 0, or -1 with err
 * set and h emptied when the bytes are not such a history. */
int hist_read(hist *h, const char *buf, size_t len, char *err, size_t errlen);

#endif
