/* model.h — one model's state in calibd: shape, join table, statistics of
 * raw and calibrated outputs (cumulative and windowed), reliability bins,
 * reservoir and recent ring, counters and current parameters. */
#ifndef CALIBD_MODEL_H
#define CALIBD_MODEL_H

#include <stdint.h>

#include "calib/calib.h"
#include "calib/cs.h"
#include "calib/drift.h"
#include "calib/join.h"
#include "calib/lfree.h"
#include "calib/plugin.h"
#include "calib/pubmsg.h"
#include "calib/reject.h"
#include "incident.h"
#include "cfg.h"
#include "refit.h"
#include "reject.h"
#include "segment.h"

enum { VIEW_RAW, VIEW_CAL, VIEWS };
enum { LF_NAIVE, LF_CORRECTED };
/* Window accumulators: for each view, the main score (Brier, or DSS for
 * regression) then the log score (unused for regression). */
enum { WS_MAIN, WS_LOG, WS_PER_VIEW };

#define PARAMS_MAX CALIB_RECAL_MAX_PARAMS
/* Class-wise bins cost K x bins cells of 32 bytes: kept up to 2^20 cells
 * (32 MiB), e.g. K = 1000 with 15 bins; larger models go without CWCE. */
#define MODEL_CW_MAX_CELLS ((size_t)1 << 20)
/* Candidates of the confidence sequences' grid: 18.1 KiB a view; its ends
 * lie about 4.5% of the width outside the exact sequence's (calib_cs(3)) */
#define MODEL_CS_GRID 129

/* A recalibration map and what is known of it. Version 0 is the method's
 * identity; a published version carries the figures of the shadow run that
 * admitted it, republished unchanged. */
typedef struct model_params {
    const calib_plugin *desc; /* NULL: no usable method (identity) */
    char method[CFG_METHOD_MAX + 1];
    uint64_t version;
    unsigned n;
    double values[PARAMS_MAX];
    int identity;             /* values are desc->identity */
    double ts;                /* publish time; 0 for version 0 */
    uint64_t fit_n;           /* samples the fit used */
    uint64_t shadow_n;        /* samples of the shadow run */
    double before[2], after[2]; /* main and log score; NaN when unknown */
    double improvement, ci[2];  /* main score: before - after */
    /* per-segment parameters of the same method, in its order (SEGMENTS):
     * a pair of segment seg[i].key = seg[i].value gets the first it has */
    unsigned nseg;
    calib_params_segment seg[CALIB_PUBMSG_MAX_SEGMENTS];
    /* the prior correction of a label shift after the map (or a
     * segment's), calib_prior_weigh: nw = K weights, or 0 (LABEL-FREE,
     * label_shift_adapt); label_free: published on a label-shift alarm,
     * before any label judged it */
    unsigned nw;
    double w[CALIB_PUBMSG_MAX_WEIGHTS];
    int label_free;
} model_params;

/* A model's window as status, /metrics and the alert rules read it:
 * summed once per tick (model_view_fill), so that the three agree and the
 * panes are summed once. */
typedef struct model_view {
    int have;       /* summed: the model has a shape */
    double at;      /* wall-clock time of the sum */
    calib_pane w;   /* both views' scores and top-label bins (top[view]) */
} model_view;

/* The window's confidence sequences: the paired ones' twins over a
 * period, which starts at a multiple of `window` seconds of the wall clock
 * (or when the parameters change, if later) and ends at the next multiple
 * (or at the next change). Each sequence is anytime-valid within its
 * period, at level cs_alpha per period. The last closed period's
 * intervals are kept, for a period that has just begun knows little. */
typedef struct model_period_end {
    double since, until; /* wall clock */
    uint64_t n;          /* pairs; 0: no period closed with pairs yet */
    int rc[VIEWS];       /* 1: [lo, hi]; -1: empty (the mean moved) */
    double lo[VIEWS], hi[VIEWS];
} model_period_end;

typedef struct model_period {
    int running;    /* 0: none (one starts with the next pair or tick) */
    double since;   /* wall clock of its start */
    double end;     /* wall clock at which it closes */
    calib_cs cs[VIEWS]; /* as model.cs: the raw one stands for both under
                           identity parameters */
    model_period_end last;
} model_period;

/* Raw against calibrated on the same pairs, since the current parameters
 * took over (paired: the per-pair difference raw - calibrated estimates the
 * change of the calibration error without bias, Gruber & Buettner 2022). */
typedef struct model_paired {
    uint64_t version;  /* the parameters' version */
    double since;      /* wall clock when it took over (start, or publish) */
    calib_accum view[VIEWS][WS_PER_VIEW];
    calib_accum diff[WS_PER_VIEW]; /* raw - calibrated, per pair */
} model_paired;

/* Score sums as Prometheus counters: plain sums of non-negative terms, so
 * that each only grows (a compensated sum's value may step back by an
 * ulp, which Prometheus would read as a reset). The positive and negative
 * parts apart, for the DSS can be negative. */
typedef struct model_sums {
    double pos, neg, sq;
} model_sums;

/* What happened to a model, for the page and status: the newest
 * MODEL_EVENTS, oldest overwritten. */
#define MODEL_EVENTS 32
typedef struct model_event {
    double t;       /* wall clock */
    char kind[16];  /* drift, miscalibration, refit, refit_error, cancelled,
                       shadow_start, shadow_pass, shadow_fail, withheld,
                       publish, store_error, rollback, guard, alert, start,
                       segment */
    char text[240];
} model_event;

/* What a model holds at most: see model_size. */
typedef struct model_sizes {
    size_t pending, ring, reservoir;
    size_t fixed; /* bytes allocated when shaped, besides the join table,
                     ring and reservoir, which grow with their contents */
    size_t bytes; /* the most it holds; 0: too large to be sized */
} model_sizes;


/* The closed loop of one model (recalib.c). Updated per sample by
 * model_observe, acted on by the loop's tick. */
typedef struct model_recalib {
    refit_machine refit;    /* phase (OFF until the method is resolved and
                               the detectors initialised), pending reason,
                               schedule: refit.h */
    int drift_on;           /* the drift detector runs */
    calib_drift drift;      /* of the calibrated main score */
    /* Gaussian forecasts: the calibrated standardised residual z above
     * (loc[0], on z) and below (loc[1], on -z) its reference median, at
     * (1 - MODEL_DRIFT_SCORE_SHARE) / 2 of drift_alpha each; reset with
     * drift, and their alarm is the drift alarm */
    calib_drift loc[2];
    int loc_on;
    unsigned fit_holds;     /* CALIB_RECAL_HOLD flags of every fit of the
                               model's method (fit_params) */
    uint64_t drift_base;    /* ring.total at the last drift reset */
    int drift_alarm;        /* the detector alarmed; cleared by the tick */
    model_params candidate; /* PHASE_SHADOW, PHASE_STORING */
    calib_gate gate;
    calib_accum shadow_log[2]; /* log scores of current and candidate */
    double *xcand;          /* scratch: the candidate's (or the guard's
                               previous version's) outputs */
    /* the guard (rollback = yes): after a version is published, the same
     * fresh pairs scored under the version before it; a gate whose
     * "current" is the published version and whose "candidate" the
     * previous: passing it shows the publish made the bound worse */
    int guard_on;           /* a guard runs (its gate may have decided) */
    model_params guard_prev; /* the previous version's parameters */
    calib_gate guard;
    /* the pairs since the gate's e-value was last at its lowest: the
     * stretch that made the evidence, after the estimated change (the
     * means over all the guard's pairs mix in those before it): S(new),
     * S(prev) and S(new) - S(prev) */
    double guard_low;       /* the lowest ln e-value so far */
    calib_accum guard_since[3];
    /* the miscalibration trigger (miscal_trigger = yes): a challenger,
     * refit on the ring's newest pairs every refit_min_samples pairs (a
     * worker), scored on each later pair while the loop is idle against
     * the parameters in force; its gate tests H0: E[S(in force) -
     * S(challenger)] <= miscal_min_effect, a new gate every miscal_period
     * pairs. Predictable: a challenger is fit on pairs before any it is
     * scored on, so under H0 the gate's e-process is a supermartingale. */
    int trig_on;            /* a challenger is there and its gate runs */
    int trig_fitting;       /* a challenger's fit is under way */
    int trig_reported;      /* the gate's rejection was reported */
    uint64_t trig_fit_at;   /* ring.total when the last challenger fit began */
    double trig_fit_time;   /* ... and tick_now() then (not kept by snapshots) */
    uint64_t trig_quiet_until; /* ring.total before which the trigger takes no
                               pair: miscal_period after an outcome that left
                               the parameters as they were */
    uint64_t trig_start;    /* ring.total at the trigger's last restart: a
                               challenger fits on the pairs since (at least
                               refit_min_samples), the regime in force */
    model_params challenger;
    calib_gate trig;
    /* segment parameters (SEGMENTS): a version stores at a time; a
     * candidate's or rollback's store asked for meanwhile waits for it */
    int seg_storing;        /* also a label-free version's store */
    double fresh_from;      /* when the last label-free version took over
                               (mono_now(), 0: none): the loop's tests
                               (drift, trigger, shadow, guard) take the
                               pairs of predictions arrived from then on */
    int store_deferred;     /* 1 + the reason of the store that waits, 0 */
    /* counters */
    uint64_t drift_alarms, refits, refit_errors, candidates, published, rejected;
    uint64_t withheld; /* passed the gate with auto_publish = no */
    uint64_t store_errors; /* passed the gate, refused by the state directory */
    uint64_t rollbacks;    /* previous versions published again (the guard) */
    uint64_t miscal_alarms; /* rejections of the miscalibration trigger */
    uint64_t cancelled;    /* stale refits dropped at a drift alarm */
} model_recalib;

typedef struct model {
    char name[CFG_NAME_MAX + 1];
    size_t name_len;  /* strlen(name): compared per message by the registry */
    model_cfg cfg;
    model_sizes sizes; /* what it holds at most now (model_size) */
    calib_budget mem;  /* what it holds now: every allocation of its state is
                          taken from it (and its parent, the daemon's) */
    uint64_t mem_refused_logged; /* mem.refused when last logged */
    int shaped;       /* form and k are fixed */
    int form;         /* enum calib_form */
    size_t k, width;
    calib_join join;  /* from the model's creation: labels only (width 0)
                         until the shape is known; then each prediction's
                         width outputs and its seg.cfg.keys segment codes */
    seg_table seg;    /* calibration per segment (segment.h), once shaped */
    calib_accum cum[VIEWS][WS_PER_VIEW];
    model_sums sums[VIEWS][WS_PER_VIEW]; /* beside cum: the counters */
    model_paired paired;    /* both views since the current parameters */
    /* anytime-valid confidence sequences (calib_cs) for the mean Brier of
     * each view over the paired pairs (restarted with them); with identity
     * parameters only the raw view's is fed, and stands for both */
    int cs_on;              /* cs_alpha > 0 and a classifier */
    calib_cs cs[VIEWS];
    model_period period;    /* the window's: restarted every window seconds */
    calib_bins top[VIEWS];  /* cumulative top-label bins */
    calib_cwbins cw;        /* cumulative class-wise bins of the raw outputs;
                               k = 0 when K x bins > MODEL_CW_MAX_CELLS */
    calib_window win;       /* time window: both views' scores and
                               top-label bins (top[VIEW_RAW], top[VIEW_CAL]) */
    model_view view;        /* the window at the last tick */
    calib_reservoir reservoir;
    calib_ring ring;
    double *ring_score;     /* the calibrated main score of each record of
                               the ring (what the drift detector saw), at
                               the record's slot (calib_ring_slot) */
    size_t ring_score_n;    /* allocated, >= the ring's records allocated */
    double *p, *pcal, *xcal; /* scratch: probabilities and calibrated outputs */
    model_params params;    /* current: what the calibrated view applies */
    /* label-free estimates of the served outputs (calibd(8), LABEL-FREE):
     * rec NULL when off; not kept by snapshots (refilled by arrivals) */
    calib_lfree lf;
    double lf_at;           /* tick_now() of its last update */
    size_t lf_slot;         /* a waiting prediction's estimates: x[lf_slot]
                               in the join (0: estimates off) */
    uint64_t lf_alarm_at;   /* lf.total when its test alarmed; 0: no alarm
                               waits to be reported */
    int lf_reported;        /* the standing alarm was reported */
    double lf_adapt_tried;  /* tick_now() of the last label_shift_adapt try */
    uint64_t lf_last_alarm; /* lf.total at the last alarm; 0: none */
    /* the estimates graded: each joined pair's calibrated main score less
     * the estimates its prediction got when it arrived (model_predicted):
     * from its served outputs alone (LF_NAIVE) and under the priors of the
     * last update then (LF_CORRECTED) */
    /* the grading since the start, and its value when the parameters
     * last changed (model_lf_graded: the difference) */
    calib_accum lf_graded[2], lf_graded_base[2];
    /* the newest gradings, summed plainly (LF_PEND_MAX at most, a few ulps)
     * before they go into lf_graded's compensated sums: a pair costs two
     * additions a sum, not a compensated one (model_lf_graded adds them) */
    struct {
        uint32_t n[2];
        double s1[2], s2[2];
    } lf_pend;
    model_recalib recalib;
    alert_state alert[RULES];
    uint64_t alerts;        /* alerts sent */
    model_event events[MODEL_EVENTS]; /* event number i at i % MODEL_EVENTS */
    uint64_t nevents;       /* events recorded */
    long hist;              /* http.c: index of its history series, -1 none */
    /* counters */
    uint64_t predictions, labels, scored, inline_scored, stale;
    uint64_t id_kind_mismatches; /* a label left waiting whose id waits as
                                    a prediction of the other kind (string
                                    "5", integer 5); since the start, not
                                    in snapshots */
    uint64_t rejected[REJ_MAX];
    /* tick_now() of the last label (0 before any) and of the first and last
     * prediction: label starvation */
    double last_label_mono, first_prediction_mono, last_prediction_mono;
    double created_mono;    /* tick_now() at its creation (registry.c) */
    double expiry_said_mono; /* tick_now() of the last line on expiries */
    uint64_t expiry_said;    /* expired predictions + labels it counted */
    int forget;             /* calibctl forget: removed at the next safe tick */
    /* Kafka (kafka.h): the partition whose messages feed the model (NULL:
     * ZeroMQ or HTTP), and handed_over once that partition was revoked: the
     * model is then no one's, out of the index, acts no more, and goes at
     * the next safe tick (forget) */
    struct kafka_part *kpart;
    int handed_over;
} model;

/* A model's counters, each a uint64_t member at an offset in model: the
 * model's own and its recalibration's, with the names snapshots store them by (in
 * this order in snapshots of format 1 and 2). Snapshots write and read
 * them, and calibctl merge adds them, from these lists. */
enum { MODEL_COUNTERS = 6, RECALIB_COUNTERS = 8 };
extern const size_t model_counters[MODEL_COUNTERS], recalib_counters[RECALIB_COUNTERS];
extern const char *const model_counter_names[MODEL_COUNTERS],
    *const recalib_counter_names[RECALIB_COUNTERS];
static inline uint64_t *model_counter(model *m, size_t offset)
{
    return (uint64_t *)((char *)m + offset);
}
/* Copies n counters (offsets at) of m out to v, or in from v. */
void model_counters_get(const model *m, const size_t *at, size_t n, uint64_t *v);
void model_counters_set(model *m, const size_t *at, size_t n, const uint64_t *v);

/*
 * What a model holds at most (calibd.conf(5), MEMORY): the capacities its
 * byte budgets allow -- waiting items within join_memory, ring and
 * reservoir records within half of sample_memory each, never more than
 * configured -- the bytes allocated at its shaping (fixed), and the bytes
 * of all it holds when its join table, ring and reservoir are full.
 * form < 0: a model without shape yet (its labels-only join table).
 */
void model_size(const model_cfg *c, int form, size_t k, model_sizes *s);
/* The label-free estimates' settings for a model of these settings and
 * shape: recent 0 when they are off (label_free_recent = 0). */
void model_lfree_cfg(const model_cfg *c, int form, size_t k, calib_lfree_cfg *lc);
/* A prediction's outputs x (the model's form, after its segment codes were
 * taken into codes, NULL: none) as the model serves them now, added to its
 * label-free estimates; its expected scores (naive, corrected) into slot
 * (NULL: not kept), which waits with it in the join (x[lf_slot]) and
 * grades them when its label comes (model_observe_at). */
void model_predicted(model *m, const double *x, const double *codes, double *slot);
/* Two estimates in one double of the join's, as floats; all bits 0 reads
 * as none (NaN): a prediction that waited across a restart (its slot is
 * not restored) is scored but not graded. */
void model_lf_slot_put(double *slot, const double est[2]);
void model_lf_slot_get(const double *slot, double est[2]);
/* The class mix of the ring's labelled pairs (the pairs the fits use),
 * smoothed, (n_k + 1/2) / (n + K/2), into src[k]: 1, or 0 when the model
 * is no classifier or its ring holds no pair. */
int model_reference_priors(const model *m, double *src);
/* The label-free figures (m->lf.fig) brought up to date at now (the loop's
 * clock) when due: new predictions since the last update and
 * label_free_interval seconds since it, or an alarm of the shift test not
 * reported yet. An alarm that has stood for label_free_recent predictions
 * (the ring holds the new mix alone) restarts the test, the new mix its
 * reference. Returns 1 when it updated. */
int model_lfree_step(model *m, double now);
/* The grading (naive, corrected) of every pair, and since the parameters
 * changed: lf_graded with the pending gradings, less its base for since (a
 * subtraction at reading, not an accumulator more a pair). */
void model_lf_graded(const model *m, calib_accum all[2], calib_accum since[2]);
/* The prior correction of a label shift (label_shift_adapt): EM's priors
 * over the newest label_shift_reference predictions over the reference
 * priors, into w[K], each within [CALIB_PRIOR_WEIGHT_MIN, _MAX]. 1, or 0
 * when there is none to give: no classifier, K above
 * CALIB_PUBMSG_MAX_WEIGHTS, no labelled pair, no estimate. m->lf.fig is
 * then of those predictions, until the next update. */
int model_lfree_weights(model *m, double *w);
/* The segment table's settings for a model of these settings and form. */
void model_seg_cfg(const model_cfg *c, int form, seg_cfg *sc);

/* Sums a shaped model's window at now (wall clock) into m->view. */
void model_view_fill(model *m, double now);

/* A model with settings but no shape yet: its join table (hash seed
 * `seed`) takes labels only, so that labels that come before the first
 * prediction wait for it. Its memory (its struct included) is taken from
 * `parent` (NULL: no limit). CALIB_OK, or a CALIB_E* code with nothing
 * held (CALIB_ENOMEM also when the parent refuses). */
int model_init(model *m, const model_cfg *cfg, uint64_t seed, calib_budget *parent);
/* Fixes form and k (cfg or first prediction) and allocates the rest of the
 * state. On an error the model is as it was: unshaped, its labels waiting. */
int model_shape(model *m, int form, size_t k);
/* Room in the ring (and its scores) for n records (n <= its capacity):
 * CALIB_OK, or CALIB_ENOMEM with nothing changed. */
int model_ring_reserve(model *m, size_t n);
/* Appends a record and its calibrated main score to the ring, growing it
 * (or, refused, stopping it where it is: it wraps there). */
void model_ring_push(model *m, const double *x, double y, double t, double score);
/* Undoes model_shape before any prediction: frees the shaped state; the
 * join table keeps its waiting labels. */
void model_unshape(model *m);
void model_free(model *m);
/* A copy of m, malloc'ed, that shares no memory with it and draws on no
 * account but its own (its scratch buffers are none): what a snapshot
 * packs on a worker thread while the loop goes on with m. Free it with
 * model_free, then free. NULL when out of memory. */
model *model_copy(const model *m);

/* From the tick: the join table takes the model's label_ttl (a reload may
 * change it) and expires what is due at now (the monotonic clock, as
 * ingest's: clock.h). */
void model_join_tick(model *m, double now);

/* Checks a prediction's shape against the model's; 0 or REJ_SHAPE. */
int model_accepts(const model *m, int form, size_t k);
/* Converts an accepted record of form `form` to the model's form in out
 * (width doubles): logits, probabilities and a binary p of the same K are
 * one shape. Uses the model's scratch (pcal), hence not const. */
void model_canonical(model *m, int form, const double *x, double *out);

/* Scores one joined pair (x raw outputs, y outcome) observed at now: both
 * views, the drift detector and, while a candidate is in shadow, the
 * candidate too; with its segment codes (seg.cfg.keys of them, from
 * model_segments; NULL: none), its segments. */
void model_observe(model *m, const double *x, double y, double now, const double *codes);
/* The same for a pair whose prediction arrived at `arrived` (the join's
 * clock, monotonic; model_observe: now): a pair of a prediction from
 * before the last label-free version took over (model_recalib.fresh_from)
 * is of the mix that version corrected: it is scored, but feeds none of
 * the loop's tests. slot: the estimates model_predicted gave it, which the
 * pair grades (NULL: none; model_observe grades nothing). */
void model_observe_at(model *m, const double *x, double y, double now, const double *codes,
                      double arrived, const double *slot);
/* model_observe of a prediction that came with its outcome: it is also
 * added to the label-free estimates (model_predicted), from the outputs
 * the calibrated view computed. */
void model_observe_inline(model *m, const double *x, double y, double now, const double *codes);
/* The values of p that apply to a pair of segment codes codes (NULL:
 * none): the first of p's segment parameters the pair has, else p's own;
 * *which (may be NULL) receives the segment's index, or -1. */
const double *model_pair_values(const model *m, const model_params *p, const double *codes,
                                int *which);
/* The segment codes of a prediction (seg_predict) into codes[seg.cfg.keys];
 * n segments, at wall time now. */
void model_segments(model *m, const seg_kv *kv, size_t n, double *codes, double now);

/* The drift detector's configuration for the model's settings and form;
 * a Gaussian model's location tests' (model_recalib.loc). */
void model_drift_cfg(const model *m, calib_drift_cfg *dc);
void model_loc_cfg(const model_cfg *c, calib_drift_cfg *dc);
/* The CALIB_RECAL_HOLD flags of fit_params (names space-separated, "": all)
 * for method desc: 0, or -1 with why in err (a name the method does not
 * have, or a subset of a method that fits all its parameters). */
int model_fit_holds(const char *names, const calib_plugin *desc, unsigned *holds, char *err,
                    size_t len);
/* The share of drift_alpha a Gaussian model's score detector spends; the
 * two location tests spend the rest, half each (a union bound keeps the
 * level of the three at drift_alpha). */
#define MODEL_DRIFT_SCORE_SHARE 0.8
/* The detector in alarm (the score's first, then the location tests'),
 * its index into {drift, loc[0], loc[1]} in *which (may be NULL); NULL
 * when none is. */
const calib_drift *model_drift_alarmed(const model *m, int *which);
/* Every drift detector starts a new reference period; drift_base is the
 * ring's count now. */
void model_drift_reset(model *m);
/* The closed loop's detectors on a shaped model, as calibd attaches them
 * and as calibctl rebuilds them to restore a snapshot: the drift detector
 * (when the model's drift setting is on) from the ring's count now, then
 * the refit machine at now (loop seconds). CALIB_OK, or the drift
 * detector's error, the refit machine then left as it was. */
int model_recalib_attach(model *m, double now);
/* The miscalibration trigger's gate for the model's settings and form. */
void model_trigger_cfg(const model *m, calib_gate_cfg *gc);
/*
 * The segments' own recalibrations (segment_refit; calibd(8), SEGMENTS),
 * one step from the tick: a flagged segment without parameters of its own
 * starts collecting its next segment_refit_samples pairs (model_observe
 * collects them); a full collection is fitted with the model's method, at
 * most one a step, and a shadow gate (model_gate_cfg) starts on the
 * segment's later pairs; a failed gate collects anew; a passed one calls
 * publish(arg, m, k, s), whose 0 says it took the parameters
 * (model_params_with_segment): the recalibration then ends. lg may be NULL.
 */
struct logger;
typedef int (*model_seg_publish_fn)(void *arg, model *m, const seg_key *k, seg_slot *s);
void model_segments_step(model *m, model_seg_publish_fn publish, void *arg, struct logger *lg);
/* p (a fit's, of the model's method) takes the segments' parameters in
 * force, which a publish keeps: so it is scored as it would be served. */
void model_params_keep_segments(const model *m, model_params *p);
/* 1 when p is the identity for every pair: its values are its method's
 * identity and it holds no segment's parameters. */
int model_params_serves_identity(const model_params *p);
/* The model's parameters with slot s's fitted ones for its segment (added
 * after the others', or in place of its own), as the next version at wall
 * time now, the gate's figures as the version's; *index: its place. */
void model_params_with_segment(const model *m, const seg_key *k, const seg_slot *s, double now,
                               model_params *p, unsigned *index);

/* The shadow gate's for the model's settings and form (gate_alpha,
 * min_improvement, gate_dss_clip, gate_max_samples): a candidate's and a
 * segment's parameters pass the same test. */
void model_gate_cfg(const model *m, calib_gate_cfg *gc);

/* Restarts the paired comparison under parameter version `version`, which
 * took over at wall time `since`; the label-shift test starts a new
 * reference period with it, for a new map moves the served outputs. */
void model_paired_reset(model *m, uint64_t version, double since);
/* The view's confidence sequence for its mean Brier since then
 * (CS_PAIRED) or in the window's period (CS_PERIOD), the raw view's for
 * the calibrated one under identity parameters: 1 with [*lo, *hi], 0 when
 * it has no pairs or the model keeps none, -1 when it became empty (the
 * mean moved since it started, at level cs_alpha). */
enum { CS_PAIRED, CS_PERIOD };
int model_cs(const model *m, int scope, int view, double *lo, double *hi);
/* Closes the window's period if it ended by now (wall clock), keeping its
 * intervals in period.last, and starts the next; model_observe and
 * model_view_fill call it. */
void model_period_roll(model *m, double now);
/* Closes the running period at `until` (wall clock): its intervals become
 * period.last when it had pairs, and its sequences restart. */
void model_period_close(model *m, double until);

/* Records an event at wall time t (the text is cut to fit). */
__attribute__((format(printf, 4, 5)))
void model_event_add(model *m, double t, const char *kind, const char *fmt, ...);
/* Event number i (0 = the oldest kept, up to model_events_len - 1). */
size_t model_events_len(const model *m);
const model_event *model_event_get(const model *m, size_t i);

/* 1 when p's values are its method's identity (or it has no method). */
int model_params_is_identity(const model_params *p);

/* The main score (Brier, or DSS for a Gaussian) of outputs x of form `form`
 * for outcome y, and the log score in s[1] (NaN for a Gaussian). p is
 * scratch of k doubles that receives the probabilities. */
void model_score(const model *m, int form, const double *x, double y, double *p,
                 double s[2]);

/* What the drift detector tests, over the ring's records from number
 * `from` (a value of ring.total) on, as far as the ring still holds them:
 * the mean of their calibrated main scores, and the fraction of those
 * scores above `threshold`. */
typedef struct model_level {
    size_t n;       /* records measured */
    int truncated;  /* the ring no longer holds the first ones */
    double mean;    /* NaN when n = 0 */
    double above;   /* NaN when n = 0 */
} model_level;
model_level model_level_since(model *m, uint64_t from, double threshold);
/* The same of a Gaussian model's standardised residuals z (sign 1) or -z
 * (sign -1) under the parameters in force (mean: of sign z), for its
 * location tests' alarms. */
model_level model_z_level_since(model *m, uint64_t from, int sign, double threshold);


#endif
