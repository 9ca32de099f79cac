/* model.h — one model's state in calibd: shape, join table, statistics of
 * raw and calibrated outputs (cumulative and windowed), reliability bins,
 * reservoir and recent ring, counters and current parameters. */
#ifndef CALIBD_MODEL_H
#define CALIBD_MODEL_H

#include <stdint.h>

#include "calib/calib.h"
#include "calib/join.h"
#include "cfg.h"

/* Reasons the daemon adds to the decoder's (calib_reject). */
enum daemon_reject {
    REJ_FRAMING = 100, /* not exactly two frames */
    REJ_UNKNOWN_MODEL, /* auto_models = no and the model is not configured */
    REJ_TOO_MANY_MODELS,
    REJ_SHAPE,         /* K or output form differs from the model's */
    REJ_NO_MEMORY,     /* the model's state could not be allocated */
    REJ_UNSHAPED,      /* a label before the first prediction of a model
                          whose form and K are not configured */
};
#define REJ_MAX 128 /* counters per model, indexed by reason */

const char *reject_name(int reason);

enum { VIEW_RAW, VIEW_CAL, VIEWS };
/* Window accumulators: for each view, the main score (Brier, or DSS for
 * regression) then the log score (unused for regression). */
enum { WS_MAIN, WS_LOG, WS_PER_VIEW };

#define PARAMS_MAX 8
/* Class-wise bins cost K x bins cells of 32 bytes: kept up to 2^20 cells
 * (32 MiB), e.g. K = 1000 with 15 bins; larger models go without CWCE. */
#define MODEL_CW_MAX_CELLS ((size_t)1 << 20)

typedef struct model_params {
    char method[32];   /* "identity" until something is published */
    uint64_t version;
    size_t n;
    char names[PARAMS_MAX][16];
    double values[PARAMS_MAX];
} model_params;

typedef struct model {
    char name[CFG_NAME_MAX + 1];
    model_cfg cfg;
    int shaped;       /* form and k are fixed */
    int form;         /* enum calib_form */
    size_t k, width;
    calib_join join;
    calib_accum cum[VIEWS][WS_PER_VIEW];
    calib_bins top[VIEWS];  /* cumulative top-label bins */
    calib_cwbins cw;        /* cumulative class-wise bins of the raw outputs;
                               k = 0 when K x bins > MODEL_CW_MAX_CELLS */
    calib_window win;       /* time window: stats and raw top-label bins */
    calib_reservoir reservoir;
    calib_ring ring;
    double *p, *pcal, *xcal; /* scratch: probabilities and calibrated outputs */
    model_params params;
    /* counters */
    uint64_t predictions, labels, scored, inline_scored, stale;
    uint64_t rejected[REJ_MAX];
    double last_label; /* receive time of the last label, 0 before any */
} model;

/* A model with settings but no shape yet (no allocation beyond the struct). */
void model_init(model *m, const model_cfg *cfg);
/* Fixes form and k (cfg or first prediction) and allocates the state. */
int model_shape(model *m, int form, size_t k, uint64_t seed);
void model_free(model *m);

/* Checks a prediction's shape against the model's; 0 or REJ_SHAPE. */
int model_accepts(const model *m, int form, size_t k);
/* Converts an accepted record of form `form` to the model's form in out
 * (width doubles): logits, probabilities and a binary p of the same K are
 * one shape. */
void model_canonical(const model *m, int form, const double *x, double *out);

/* Scores one joined pair (x raw outputs, y outcome) observed at now. */
void model_observe(model *m, const double *x, double y, double now);

/* Reads the window at now into out (a pane shaped by model_window_pane). */
int model_window_pane(const model *m, calib_pane *out);

#endif
