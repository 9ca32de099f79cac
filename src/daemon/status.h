/* status.h — the status map: the daemon's counters and each model's state,
 * what `calibctl status` prints, GET /status serves (as JSON) and
 * `calibctl snapshot` prints of a snapshot (calibd(8), CONTROL). Pure: it
 * reads and packs, with no I/O, so that calibctl packs it without a
 * running daemon. */
#ifndef CALIBD_STATUS_H
#define CALIBD_STATUS_H

#include "calib/mpw.h"

struct calibd;
struct model;
struct model_params;

/* The whole map: every model's entry, or only's alone. */
void status_pack(const struct calibd *d, calib_mpw *w, const struct model *only);
/* The same map in parts, for a caller that packs the models a few at a
 * time (http.c): begin, then each model's entry, then end. */
void status_begin(const struct calibd *d, calib_mpw *w);
void status_model(calib_mpw *w, const struct model *m);
void status_end(calib_mpw *w);
/* An error reply, {"ok": false, "error": why}. */
void status_error(calib_mpw *w, const char *why);
/* {"T": t} or {"a": a, "b": b}...: the values of p by their names. */
void status_pack_values(calib_mpw *w, const struct model_params *p);

#endif
