/*
 * Sliding windows over accumulators and bins: a ring of P panes.
 *
 * A count window of span N keeps panes of N / P samples: it holds the current
 * (partly filled) pane and the P - 1 panes before it, so between N - N/P and N
 * of the most recent samples. A time window of span S seconds keeps panes of
 * S / P seconds: pane i covers [i w, (i + 1) w); at time t it holds the panes
 * whose index is in (floor(t / w) - P, floor(t / w)]. A late sample whose pane
 * is still held lands in that pane; an older one is refused (CALIB_ESTALE).
 *
 * Each pane holds nstat accumulators and, optionally, top_sets sets of
 * top-label bins (one per view of the same predictions, say: raw and
 * recalibrated, so that one window serves both) and class-wise bins. The caller adds into the pane it is given with the
 * accum/bins functions, and reads the window through calib_window_sum().
 */
#ifndef CALIB_WINDOW_H
#define CALIB_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "calib/accum.h"
#include "calib/bins.h"

#ifdef __cplusplus
extern "C" {
#endif

enum calib_window_kind { CALIB_WINDOW_COUNT, CALIB_WINDOW_TIME };

typedef struct calib_window_cfg {
    enum calib_window_kind kind;
    double span;      /* samples (integral, multiple of panes) or seconds */
    uint32_t panes;   /* P >= 1 */
    uint32_t nstat;   /* accumulators per pane, 0..CALIB_WINDOW_MAXSTAT */
    uint32_t top_bins; /* M of top-label bins, 0 for none */
    uint32_t top_sets; /* sets of them per pane, 1..CALIB_WINDOW_MAXTOP;
                          0 means 1 */
    uint32_t cw_k;    /* K of class-wise bins, 0 for none */
    uint32_t cw_bins; /* M of class-wise bins */
} calib_window_cfg;

#define CALIB_WINDOW_MAXSTAT 8
#define CALIB_WINDOW_MAXTOP 2

typedef struct calib_pane {
    int64_t index; /* pane number; INT64_MIN when empty */
    calib_accum stat[CALIB_WINDOW_MAXSTAT];
    calib_bins top[CALIB_WINDOW_MAXTOP]; /* the first top_sets are in use */
    calib_cwbins cw;
} calib_pane;

typedef struct calib_window {
    calib_window_cfg cfg;
    double width;    /* samples or seconds per pane */
    int64_t head;    /* index of the newest pane; -1 before the first sample */
    uint64_t clock;  /* count windows: samples seen */
    calib_pane *pane; /* [panes], slot = index mod panes */
} calib_window;

/* Bytes calib_window_init allocates for cfg (panes and their bins); 0 for
 * a cfg it refuses. */
size_t calib_window_bytes(const calib_window_cfg *cfg);
int calib_window_init(calib_window *w, const calib_window_cfg *cfg);
void calib_window_free(calib_window *w);
/* dst becomes a copy of src that shares no memory with it (free it with
 * calib_window_free): CALIB_OK, or CALIB_ENOMEM (dst then holds nothing). */
int calib_window_copy(calib_window *dst, const calib_window *src);

/* Count window: the pane that takes the next sample (counts it). */
calib_pane *calib_window_next(calib_window *w);

/* Time window: the pane for a sample at time t, advancing the window when t
 * is past the newest pane. Sets *err to CALIB_ESTALE (t too old for the
 * window) or CALIB_ENONFINITE and returns NULL on refusal. */
calib_pane *calib_window_at(calib_window *w, double t, int *err);

/* A pane shaped like the window's panes (for calib_window_sum's output). */
int calib_pane_init(calib_pane *p, const calib_window_cfg *cfg);
void calib_pane_free(calib_pane *p);
void calib_pane_reset(calib_pane *p);
int calib_pane_merge(calib_pane *dst, const calib_pane *src, uint32_t nstat);

/* Merges the panes held at time now (time windows; ignored for count
 * windows) into out, which it resets first. */
int calib_window_sum(const calib_window *w, double now, calib_pane *out);

#ifdef __cplusplus
}
#endif

#endif
