/*
 * calib/save.h — each saved libcalib structure to msgpack and back: a
 * writer and a reader per structure, side by side in save.c, so that a
 * key is named once for both. See calib_save(3).
 *
 * The form (calib_save(3), "Format"):
 * - a structure is a map of named fields; numbers are msgpack numbers,
 *   short arrays msgpack arrays, and long arrays of numbers (records,
 *   capitals, scores) binaries of little-endian doubles, 64-bit or 16-bit
 *   unsigned integers: never the bytes of a C structure;
 * - a section (bins, class-wise bins, window, reservoir, join, drift,
 *   gate, confidence sequence) carries "v", the version of its form
 *   (CALIB_SAVE_FORM); a reader refuses only a section of a higher form,
 *   which it leaves as it was (CALIB_LOAD_OTHER); keys added later do not
 *   raise the form: a reader skips keys it does not know, and a key a
 *   reader knows but a file lacks takes the default calib_save(3) names;
 * - accumulators and e-processes are fields of their section;
 * - a section without "v" is of the form calibd 0.1 wrote (format
 *   versions 1 and 2 of its snapshot), whose accumulators, e-processes and
 *   compensated sums were binaries in the x86-64 layout of the time; the
 *   readers decode those by explicit offsets.
 *
 * Every reader takes untrusted input: each length, count and range is
 * checked against the structure it fills (initialised by the caller with
 * the running configuration), and a failure names the key (calib_mpr).
 * A reader writes into its structure only once the whole section read.
 */
#ifndef CALIB_SAVE_H
#define CALIB_SAVE_H

#include <stddef.h>
#include <stdint.h>

#include "calib/accum.h"
#include "calib/bins.h"
#include "calib/cs.h"
#include "calib/drift.h"
#include "calib/join.h"
#include "calib/mpr.h"
#include "calib/mpw.h"
#include "calib/sample.h"
#include "calib/window.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The form of the sections this libcalib writes (key "v"). */
#define CALIB_SAVE_FORM 1

/* What a section's reader returns. */
enum calib_load {
    CALIB_LOAD_FAILED = 0, /* the input is malformed: r says why */
    CALIB_LOAD_OK = 1,     /* read */
    CALIB_LOAD_OTHER = 2,  /* of other settings: the structure is left as
                              it was, r not failed */
    CALIB_LOAD_NO_ROOM = 3, /* the store's budget refused the room: as it was */
    CALIB_LOAD_LATER = 4,  /* of a later form than this libcalib reads: as
                              it was */
    CALIB_LOAD_REFUSED = 5, /* read, but a state the structure's own check
                               refuses (a confidence sequence's: reset) */
};

/* Every section reader returns CALIB_LOAD_LATER for a section of a form
 * above CALIB_SAVE_FORM, before it reads anything. */

/* Accumulators: {"n", "sum", "sum_c", "sq", "sq_c"} (the compensated
 * sums of x and x^2, calib_accum(3)); an array of n of them. No sum may
 * be NaN. Fields of their section. */
void calib_accum_save(calib_mpw *w, const calib_accum *a);
int calib_accum_load(calib_mpr *r, const msgpack_object *o, calib_accum *a);
void calib_accums_save(calib_mpw *w, const calib_accum *a, size_t n);
/* key's value: an array of exactly n (or a binary of n of the 0.1 form) */
int calib_accums_load(calib_mpr *r, const msgpack_object *map, const char *key,
                      calib_accum *a, size_t n);

/* An e-process: {"lo", "hi", "m", "lambda", "a", "log_wealth",
 * "min_log_wealth", "argmin", "n"}; the reader checks it is one
 * calib_eproc_add can go on with. */
void calib_eproc_save(calib_mpw *w, const calib_eproc *e);
int calib_eproc_load(calib_mpr *r, const msgpack_object *o, calib_eproc *e);

/* Bins into b, initialised with the stored m (else a failure). */
void calib_bins_save(calib_mpw *w, const calib_bins *b);
int calib_bins_load(calib_mpr *r, const msgpack_object *o, calib_bins *b);
/* Class-wise bins (nil when k = 0), into b of the same k and m. */
void calib_cwbins_save(calib_mpw *w, const calib_cwbins *b);
int calib_cwbins_load(calib_mpr *r, const msgpack_object *o, calib_cwbins *b);

/* A window: its settings, its panes. CALIB_LOAD_OTHER when the stored
 * settings are not w's. */
void calib_window_save(calib_mpw *w, const calib_window *win);
int calib_window_load(calib_mpr *r, const msgpack_object *o, calib_window *win);

/* A store's records, as keys of the map being written (the enclosing
 * section's): "width", "cap", "bound" (the capacity it was given, cap
 * unless a budget stopped it lower), "len", "data". The reader takes at
 * most cap records into s (same width), room made for them, laid out as
 * stored or, from the record at slot `first` (< len, or 0), oldest first:
 * the stored len, or -1 (r says why), or -2 when the budget refused. */
void calib_store_save(calib_mpw *w, const calib_store *s, size_t bound);
long calib_store_load(calib_mpr *r, const msgpack_object *o, calib_store *s, size_t cap,
                      size_t first);
/* A store's stored capacity and bound (a file without "bound": cap). */
void calib_store_caps(calib_mpr *r, const msgpack_object *o, uint64_t *cap,
                      uint64_t *bound);

/* A reservoir, of capacity cap (<= v's, where a budget stopped it): v
 * stops there too. */
void calib_reservoir_save(calib_mpw *w, const calib_reservoir *v, size_t bound);
int calib_reservoir_load(calib_mpr *r, const msgpack_object *o, calib_reservoir *v,
                         size_t cap);

/* A join table: its counters, its waiting items and joined ids, oldest
 * first; read onto this clock (arrival + shift). A waiting prediction
 * passes through x (width doubles); one of another width, or with no x,
 * cannot be kept: *lost counts them. */
void calib_join_save(calib_mpw *w, const calib_join *j);
int calib_join_load(calib_mpr *r, const msgpack_object *o, calib_join *j, double shift,
                    double *x, size_t *lost);
/* As calib_join_load, for a table whose predictions are `keep` outputs
 * followed by tags of the caller's (calibd's segment codes): a prediction
 * stored with another number of tags is kept, with at most `tags` of the
 * tags both widths have (0: none, when the caller cannot trust them) and
 * 0 for the table's others. */
int calib_join_load_tags(calib_mpr *r, const msgpack_object *o, calib_join *j, double shift,
                         double *x, size_t keep, size_t tags, size_t *lost);

/* A drift detector, into d initialised with the running configuration:
 * CALIB_LOAD_OTHER when the stored one is not d's. calib_drift_settings:
 * 1 when the stored settings are d's, 0 when not or on failure (r says
 * which). */
void calib_drift_save(calib_mpw *w, const calib_drift *d);
int calib_drift_load(calib_mpr *r, const msgpack_object *o, calib_drift *d);
int calib_drift_settings(calib_mpr *r, const msgpack_object *o, const calib_drift *d);

/* A shadow gate; the reader initialises g with the stored configuration
 * (the caller compares it with its own). */
void calib_gate_save(calib_mpw *w, const calib_gate *g);
int calib_gate_load(calib_mpr *r, const msgpack_object *o, calib_gate *g);

/* A confidence sequence, into cs initialised with the running settings:
 * CALIB_LOAD_OTHER for other settings, CALIB_LOAD_REFUSED for a state
 * calib_cs_restore refuses (cs then reset). */
void calib_cs_save(calib_mpw *w, const calib_cs *cs);
int calib_cs_load(calib_mpr *r, const msgpack_object *o, calib_cs *cs);

/* Short arrays of numbers: an array of n doubles (or, of the 0.1 form, a
 * binary of n little-endian doubles), an array of n unsigned integers
 * (or such a binary). */
void calib_doubles_save(calib_mpw *w, const double *v, size_t n);
int calib_doubles_load(calib_mpr *r, const msgpack_object *map, const char *key, double *v,
                       size_t n);
void calib_uints_save(calib_mpw *w, const uint64_t *v, size_t n);
int calib_uints_load(calib_mpr *r, const msgpack_object *map, const char *key, uint64_t *v,
                     size_t n);

/* The form of a section: its "v", 0 when it has none (the 0.1 form). */
unsigned calib_save_form(const msgpack_object *o);

#ifdef __cplusplus
}
#endif

#endif
