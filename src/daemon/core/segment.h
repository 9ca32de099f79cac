/*
 * segment.h — calibration per segment of a model's traffic (calibd(8),
 * SEGMENTS).
 *
 * A prediction may name its segments: up to SEG_MAX_KEYS keys ("country",
 * "device") each with one value ("DE", "ios"). Per model and key, a
 * space-saving sketch (Metwally et al. 2005) keeps the `values` most
 * frequent values in slots, and one more slot, "other", takes every pair
 * whose value is not tracked. A prediction's values are counted when it
 * arrives; each is then written as a code (slot and occupant) that waits
 * with the prediction in the join table and routes the pair when its label
 * comes. A slot whose occupant changed meanwhile sends the pair to "other".
 *
 * Per slot: both views' scores (main and log), the calibrated view's
 * top-label residual r = 1{argmax p = y} - max p, and both views' top-label
 * bins. The test: H_j, "every value that held slot j had, given the whole
 * past of the stream, E[r] within +-min_effect". Its e-process is a
 * mixture of constant bets, each a test supermartingale under H_j: with
 * u+ = (r - min_effect) / (1 + min_effect) and u- = (-r - min_effect) /
 * (1 + min_effect), both >= -1 and of mean <= 0 under H_j,
 * E = mean over the SEG_BETS bets l and both sides of prod (1 + l u).
 * An occupant that replaces another starts each product from
 * min(product, 1), which stays under the product that went on betting.
 *
 * False discoveries across a key's slots: seg_decide applies e-BH (Wang
 * and Ramdas 2022) at level alpha to the key's K = `values` slots, each
 * taken at its e-value now, or, once flagged, at the e-value it had when
 * it was flagged (frozen). Why the flags accumulated over time keep the
 * false discovery rate at alpha, under any dependence between slots: a
 * slot's flag time tau_j is a stopping time of the stream, so E_j at
 * tau_j is an e-value (optional stopping; for a slot never flagged take
 * the limit of E_j), and the set F of the slots flagged up to any time,
 * however chosen, is self-consistent for those e-values: slot j was
 * flagged with E_j(tau_j) >= K / (alpha r) for r <= |F| rejections. Any
 * self-consistent set has FDR <= alpha K0 / K. (The sup of an e-process
 * over time is no e-value; the e-value at a stopping time is.)
 *
 * A flagged slot is never evicted: its value stays tracked.
 *
 * No I/O, no clock: the caller passes wall times. Memory: seg_key_bytes
 * per key, taken from the budget when a key first appears.
 */
#ifndef CALIBD_SEGMENT_H
#define CALIBD_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "calib/accum.h"
#include "calib/bins.h"
#include "calib/calib.h"
#include "calib/drift.h"
#include "calib/recal.h"
#include "calib/protocol.h"

#define SEG_MAX_KEYS 8       /* keys in one prediction's seg map (protocol) */
#define SEG_NAME_MAX 64      /* bytes of a key or a value */
#define SEG_MAX_VALUES 4096  /* the most segment_values can be */
#define SEG_BETS 3           /* constant bets of the mixture: SEG_BET_VALUES */
#define SEG_BET_VALUES {0.2, 0.5, 0.8}
#define SEG_VIEWS 2          /* raw, calibrated (model.h: VIEW_RAW, VIEW_CAL) */

typedef struct seg_cfg {
    size_t keys;        /* keys tracked per model; 0: segments off */
    size_t values;      /* values tracked per key, 1..SEG_MAX_VALUES */
    uint32_t bins;      /* of the top-label bins; 0: none (regression) */
    double alpha;       /* e-BH level per key, (0, 1) */
    double min_effect;  /* the null's half-width for E[r], [0, 1) */
    uint64_t seed;      /* of the values' hash */
} seg_cfg;

/* A key and a value as a message carries them: bytes, not NUL-terminated. */
typedef struct seg_kv {
    const char *key, *val;
    size_t key_len, val_len;
} seg_kv;

/* A flagged segment's own recalibration (segment_refit, calibd(8)
 * SEGMENTS): its next pairs collected, a fit on them, then a shadow gate on
 * the pairs after. Allocated from the table's budget while it runs. */
enum seg_fix_phase {
    SEG_FIX_COLLECT = 1, /* pairs wait in rec until cap */
    SEG_FIX_SHADOW,      /* values fitted; gate on each later pair */
};
typedef struct seg_fix {
    int phase;            /* enum seg_fix_phase */
    size_t n, cap;        /* records collected, wanted */
    size_t stride;        /* doubles a record: the outputs, then y */
    double *rec;          /* cap records */
    unsigned nparams;
    double values[CALIB_RECAL_MAX_PARAMS]; /* SHADOW: the fitted map */
    calib_gate gate;      /* S(in force) - S(fitted), on the segment's pairs */
    calib_accum log[2];   /* log scores of both, for the record */
} seg_fix;

typedef struct seg_slot {
    char name[SEG_NAME_MAX + 1]; /* the value, NUL-terminated; "" when free */
    uint32_t gen;       /* occupants so far (a code names slot and gen) */
    uint64_t count;     /* space-saving: predictions counted */
    uint64_t err;       /* ... of which at most this many were others' */
    double since;       /* wall clock when the occupant took the slot */
    /* the occupant's pairs */
    calib_accum score[SEG_VIEWS][2]; /* main (Brier or DSS), log */
    calib_accum resid;  /* r, calibrated view */
    calib_bins top[SEG_VIEWS];       /* point into the key's arrays */
    /* the slot's test, over its whole life: ln of each bet's product on
     * u+ ([0]) and u- ([1]) */
    double lw[2][SEG_BETS];
    int flagged;        /* rejected by e-BH once */
    double flagged_at;  /* wall clock */
    double log_e_flag;  /* ln E when flagged: what e-BH takes from then on */
    /* its own recalibration: the one running (NULL: none), and the counts */
    seg_fix *fix;
    uint32_t fits, fit_errors, passed, failed;
    uint32_t hnext;     /* private: next slot + 1 in the hash chain, 0: none */
} seg_slot;

/* The sketch's order (segment.c): the unflagged occupied slots grouped in
 * buckets of equal count, the buckets listed by ascending count (the
 * "stream summary" of Metwally et al.). A count grows by one at a time,
 * so a slot moves at most to the next bucket: counting a value and finding
 * the slot of least count both take O(1). Of slots of equal count, the
 * first to reach it goes first. Indices are + 1, 0: none. */
typedef struct seg_ord {
    uint32_t prev, next; /* neighbours in the slot's bucket */
    uint32_t bkt;        /* its bucket; 0: not in the order (free, flagged) */
} seg_ord;
typedef struct seg_bkt {
    uint64_t count;
    uint32_t head, tail; /* its slots, first to reach the count first */
    uint32_t prev, next; /* neighbouring buckets (next: the free list's) */
} seg_bkt;

typedef struct seg_key {
    char name[SEG_NAME_MAX + 1];
    size_t used;        /* slots that ever had an occupant (< values) */
    seg_slot *slot;     /* values + 1: the last is "other" */
    uint32_t *bucket;   /* nbuckets chain heads: slot + 1, 0: none */
    size_t nbuckets;    /* power of two */
    seg_ord *ord;       /* values: each slot's place in the order */
    seg_bkt *bkt;       /* values: the order's buckets */
    uint32_t least;     /* the bucket of least count */
    uint32_t free_bkt;  /* the first free bucket */
    int dirty;          /* e-values changed since seg_decide looked */
    uint64_t *bin_count, *bin_correct; /* the bins' arrays */
    calib_ksum *bin_conf;
    uint64_t evictions; /* occupants replaced */
    uint64_t flags;     /* slots flagged */
} seg_key;

typedef struct seg_table {
    seg_cfg cfg;
    size_t nkeys;
    seg_key key[SEG_MAX_KEYS];
    calib_budget *budget;
    uint64_t keys_full;   /* values of keys beyond cfg.keys: not tracked */
    uint64_t refused;     /* keys refused by the budget or malloc */
    uint64_t late;        /* pairs whose slot changed occupant: to "other" */
} seg_table;

/* A slot index in a code. */
#define SEG_SLOT_BITS 16

/* CALIB_EINVAL for a bad cfg (keys > SEG_MAX_KEYS, values out of range,
 * alpha or min_effect out of range); allocates nothing. */
int seg_init(seg_table *t, const seg_cfg *cfg, calib_budget *budget);
void seg_free(seg_table *t);
/* dst becomes a copy of src that shares no memory with it and takes its
 * bytes from no budget; free it with seg_free. CALIB_OK, or CALIB_ENOMEM
 * (dst then holds nothing). */
int seg_copy(seg_table *dst, const seg_table *src);
/* Bytes one key takes (its slots, hash heads, order and bins). */
size_t seg_key_bytes(const seg_cfg *cfg);
/* The key named so, or -1 (never adds one). */
int seg_find_key(const seg_table *t, const char *name, size_t len);
/* The key named so, added if there is room (cfg.keys, budget): its index,
 * or -1 (then counted in keys_full or refused). */
int seg_add_key(seg_table *t, const char *name, size_t len);

/*
 * A prediction's segments, n of them (checked by the decoder:
 * calib_proto_seg_key_ok, calib_proto_seg_value_ok): counts each value in its key's sketch and
 * writes, for each of the table's cfg.keys columns, the code its pair will
 * carry (0: the prediction has no value of that key). Keys seen first here
 * are added while there is room.
 */
void seg_predict(seg_table *t, const seg_kv *kv, size_t n, double *codes, double now);

/* What a scored pair brings (model_observe): per view, the main and log
 * scores (NaN: none) and the top-label confidence and correctness (conf
 * NaN for a regression model). */
typedef struct seg_obs {
    double s[SEG_VIEWS][2];
    double conf[SEG_VIEWS];
    int correct[SEG_VIEWS];
} seg_obs;

/* Routes a pair by its codes (cfg.keys of them, from seg_predict) to its
 * slots, or "other". */
void seg_observe(seg_table *t, const double *codes, const seg_obs *o);

/* The slot a code routes to now (the key's "other" when the occupant
 * changed), or NULL for code 0 or a key not there. */
seg_slot *seg_route(seg_table *t, size_t key, double code);

/* The slot a code names now, without counting: NULL for code 0, a key not
 * there, the "other" bucket, or an occupant since replaced. */
seg_slot *seg_peek(const seg_table *t, size_t key, double code);

/* Starts a slot's recalibration: cap records of stride doubles, from the
 * budget. CALIB_OK, CALIB_ENOMEM (nothing changes), CALIB_EINVAL (one
 * runs). seg_fix_end frees it. */
int seg_fix_start(seg_table *t, seg_slot *s, size_t stride, size_t cap);
void seg_fix_end(seg_table *t, seg_slot *s);
/* Bytes a recalibration of cap records of stride doubles holds. */
size_t seg_fix_bytes(size_t stride, size_t cap);

/* ln E of a slot now (0 before any pair). */
double seg_log_e(const seg_slot *s);
/* ln of the e-value e-BH takes for the slot: ln E now, or when flagged. */
double seg_log_e_decide(const seg_slot *s);

/* Applies e-BH to each key's slots; calls fn for each slot newly flagged
 * (at wall time now) and returns their number. fn may be NULL. */
typedef void (*seg_flag_fn)(void *arg, const seg_key *k, const seg_slot *s);
size_t seg_decide(seg_table *t, double now, seg_flag_fn fn, void *arg);

/* The e-BH threshold of a key's e-values for r rejections:
 * ln(K / (alpha r)). */
double seg_log_threshold(const seg_table *t, size_t r);

/* What status, /metrics, alerts and calibctl show of a slot. */
typedef struct seg_figures {
    uint64_t pairs;
    double gap;        /* mean confidence - accuracy, calibrated view
                          (-mean r); NaN without pairs */
    double gap_ci[2];  /* its 95% interval (normal); NaN below 2 pairs */
    double gap_lo;     /* the lower end of the interval of |gap|: 0 when
                          the interval holds 0; what ranks the worst */
    double brier[SEG_VIEWS], log[SEG_VIEWS]; /* means (main score, log) */
    double ece[SEG_VIEWS]; /* top-label ECE; NaN for regression */
    double log_e, log_e_flag; /* seg_log_e; ln E when flagged, NaN if not */
} seg_figures;
void seg_figures_of(const seg_slot *s, seg_figures *f);

/* The occupied slots of key i (not "other"), worst first: by gap_lo, then
 * by pairs. Writes at most max slot indices to idx; returns how many. */
size_t seg_rank(const seg_table *t, size_t key, size_t *idx, size_t max);

/* Snapshots: the table as one map of form SEG_SAVE_FORM ("v"); the
 * reader restores into a table initialised with the running settings,
 * keys in their order (a code's column is its key's index) and every
 * slot's occupant and generation (a code names them). CALIB_LOAD_OK;
 * CALIB_LOAD_OTHER (left as it was) for a table of other values, bins or
 * min_effect, or more keys than cfg.keys; CALIB_LOAD_NO_ROOM (as it
 * was) when the budget refuses a key; CALIB_LOAD_LATER; or
 * CALIB_LOAD_FAILED with r saying why. */
#define SEG_SAVE_FORM 1
struct calib_mpw;
struct calib_mpr;
void seg_save(struct calib_mpw *w, const seg_table *t);
int seg_load(struct calib_mpr *r, const msgpack_object *o, seg_table *t);

/* calibctl merge: src's segments into dst (the same values, bins and
 * min_effect; else CALIB_EINVAL, dst unchanged). Keys match by name (a
 * key dst lacks is added while there is room, else its pairs go nowhere
 * and its values' are counted in keys_full), values by name (a value dst
 * does not track takes a free slot, else goes to dst's "other"). The
 * statistics, sketch counts and errors add; a flag of either stays, with
 * the larger e-value; the tests belonged to one daemon each, and a merged
 * slot's bets start again from 1 (min(product, 1) for dst's). map (may be
 * NULL) receives where src's slots went, for seg_merge_code. CALIB_OK or
 * CALIB_ENOMEM (dst then partly merged). */
typedef struct seg_map {
    int key[SEG_MAX_KEYS];       /* dst's key index of src's key i, or -1 */
    uint32_t *slot[SEG_MAX_KEYS]; /* src slot j -> dst slot (values + 1 each) */
} seg_map;
int seg_merge(seg_table *dst, const seg_table *src, seg_map *map);
/* A waiting prediction's codes as src issued them (src's cfg.keys
 * columns) into the codes that route it alike in dst (dst's cfg.keys). */
void seg_merge_codes(const seg_table *dst, const seg_table *src, const seg_map *map,
                     const double *from, double *to);
void seg_map_free(seg_map *map);

/* The "other" slot of key i. */
static inline seg_slot *seg_other(const seg_table *t, size_t i)
{
    return &t->key[i].slot[t->cfg.values];
}

#endif
