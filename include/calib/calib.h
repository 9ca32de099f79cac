/*
 * libcalib — proper-score calibration statistics (umbrella header).
 *
 * Pure C11: no I/O, no globals, no allocation in per-sample paths. Functions
 * that can fail return 0 or a negative CALIB_E* code; calib_strerror() names
 * it. See libcalib(3).
 */
#ifndef CALIB_CALIB_H
#define CALIB_CALIB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum calib_error {
    CALIB_OK = 0,
    CALIB_EINVAL = -1,     /* invalid argument (size, shape, option) */
    CALIB_ENOMEM = -2,     /* allocation failed */
    CALIB_ENONFINITE = -3, /* a number is NaN or infinite */
    CALIB_EPROB = -4,      /* a probability lies outside [0, 1] */
    CALIB_EPROBSUM = -5,   /* probabilities do not sum to 1 within 1e-3 */
    CALIB_EVAR = -6,       /* a variance is not positive */
    CALIB_ELABEL = -7,     /* a class label is out of range */
    CALIB_EEMPTY = -8,     /* no samples */
    CALIB_ESTALE = -9,     /* a sample is older than a window keeps */
    CALIB_EFULL = -10,     /* a fixed-capacity store is full */
};

/* What a model outputs per prediction. */
enum calib_form {
    CALIB_FORM_LOGITS,   /* K logits; K >= 2 */
    CALIB_FORM_PROBS,    /* K probabilities; K >= 2 */
    CALIB_FORM_BINARY,   /* p = P(y = 1); K = 2 */
    CALIB_FORM_GAUSSIAN, /* mean and variance; regression */
};

/* Number of doubles per prediction of a form with k classes. */
static inline unsigned long calib_form_width(enum calib_form form, unsigned long k)
{
    return form == CALIB_FORM_BINARY ? 1 : form == CALIB_FORM_GAUSSIAN ? 2 : k;
}

/* The wire and configuration name of a form: "logits", "probs", "binary",
 * "gaussian"; "unknown" for any other value. */
const char *calib_form_name(int form);
/* The form of that name, or -1. */
int calib_form_parse(const char *name);

/* A short, static, English description of a CALIB_E* code. */
const char *calib_strerror(int err);

/* The library version, "MAJOR.MINOR.PATCH". */
const char *calib_version(void);

/*
 * A byte budget. What grows with its contents (a join table, a ring, a
 * reservoir) takes the bytes from its budget before it allocates them and
 * gives them back when it frees them; a growth the budget refuses is not
 * made (the structure then keeps what it has: see each). A budget may draw
 * on a parent too (a model's on the daemon's): a take succeeds only if
 * every budget up the chain has room, and is counted in each. A NULL
 * budget has no limit. Not thread-safe.
 */
typedef struct calib_budget {
    size_t limit;                /* bytes; SIZE_MAX: none */
    size_t used;                 /* bytes taken and not given back */
    unsigned long long refused;  /* takes refused */
    struct calib_budget *parent; /* or NULL */
} calib_budget;

void calib_budget_init(calib_budget *b, size_t limit, calib_budget *parent);
/* Takes n bytes from b and its parents: CALIB_OK, or CALIB_ENOMEM with
 * nothing taken, counted in `refused` of b and of its parents up to the
 * one that refused. */
int calib_budget_take(calib_budget *b, size_t n);
/* Gives back n bytes taken. */
void calib_budget_give(calib_budget *b, size_t n);
/* Grows the block p of `had` bytes (malloc's; NULL if had is 0) to `want`
 * >= had, taking the difference from b: the block, grown with realloc; or
 * NULL with p kept and nothing taken (the budget refused, counted in its
 * `refused`, or realloc failed). What grows by doubling through it copies
 * each byte it holds at most about once over its life, and less where
 * realloc extends in place or moves pages (mremap): how much less depends
 * on the heap's layout, so its instructions differ from run to run, and
 * tests/integ/budget.sh counts them apart from a pair's ("growth"). */
void *calib_budget_grow(calib_budget *b, void *p, size_t had, size_t want);

#ifdef __cplusplus
}
#endif

#include "calib/score.h"
#include "calib/accum.h"
#include "calib/bins.h"
#include "calib/window.h"
#include "calib/sample.h"
#include "calib/estimators.h"

/* calib/recal.h, calib/plugin.h, calib/protocol.h and calib/join.h are
 * included on their own (they include this header). */

#endif
