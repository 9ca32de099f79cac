/* drift.c — betting e-process, drift detector and shadow gate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dup.h"

#include "calib/calib.h"
#include "calib/drift.h"

/* The online Newton step's constant 2 / (2 - ln 3) (Cutkosky & Orabona). */
#define ONS_GAIN (2.0 / (2.0 - 1.0986122886681098))
#define BET_MAX 0.5

/* ------------------------------------------------------------------ e-process */

int calib_eproc_init(calib_eproc *e, double lo, double hi, double m)
{
    if (!e)
        return CALIB_EINVAL;
    *e = (calib_eproc){0};
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(m) || !(lo < m) ||
        !(m < hi) || !isfinite(hi - lo))
        return CALIB_EINVAL;
    /* The largest u, (hi - m) / (m - lo), must be finite too: otherwise
     * lambda * u could be 0 * inf. */
    if (!isfinite((hi - m) / (m - lo)))
        return CALIB_EINVAL;
    *e = (calib_eproc){.lo = lo, .hi = hi, .m = m, .a = 1};
    return CALIB_OK;
}

static double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

void calib_eproc_add(calib_eproc *e, double x)
{
    if (!e || isnan(x) || !(e->a >= 1))
        return; /* NaN, or an e-process whose init failed */
    double u = (clamp(x, e->lo, e->hi) - e->m) / (e->m - e->lo);
    double lu = e->lambda * u; /* >= -1/2: u >= -1, lambda <= 1/2 */
    double g = -u / (1 + lu);  /* d/d lambda of -ln(1 + lambda u) */
    if (lu != 0) /* a bet of 0 (frequent under H0) changes nothing */
        e->log_wealth += log1p(lu);
    e->n++;
    /* <=: along a flat stretch (lambda = 0) the estimate moves to its end */
    if (e->log_wealth <= e->min_log_wealth) {
        e->min_log_wealth = e->log_wealth;
        e->argmin = e->n;
    }
    e->a += g * g; /* may reach +inf for a huge u; then lambda freezes */
    e->lambda = clamp(e->lambda - ONS_GAIN * g / e->a, 0, BET_MAX);
}

int calib_eproc_rejects(const calib_eproc *e, double alpha)
{
    if (!e || !(alpha > 0 && alpha < 1))
        return 0; /* never reject on a bad argument */
    return e->log_wealth >= -log(alpha);
}

/* ------------------------------------------------------------------ drift detector */

/*
 * MEAN: paired e-processes against a growing reference.
 *
 * Every score is clamped to [lo, hi] and stored in a ring, rounded to
 * 16 bits of (x - lo) / (hi - lo). A pair started after sample s (its
 * reference: samples 1..s) pairs each later score Y_t with B_t, the mean
 * of a block of its reference scores it has never used, walking back from
 * s in blocks of 8, 4, 2 and then 1 score (a quarter of its budget each),
 * and bets on Z_t = Y_t - B_t exceeding the margin (min_effect, plus one
 * rounding unit) with the wealth W = prod (1 + lambda_t u_t),
 * u_t = (Z_t - margin) / (1 + margin) >= -1 in stored units.
 *
 * Why it is valid. Suppose the scores are independent and none has a
 * mean above that of an earlier score (since the reset) + min_effect -
 * in particular i.i.d. scores. Then every block B_t is made of scores the
 * pair has not seen, independent of its past and of Y_t, each of mean at
 * least E[Y_t] - min_effect, so E[u_t | the pair's past] <= 0 and W is a
 * nonnegative supermartingale in the pair's own filtration (its Y's and
 * the blocks used so far: the unused blocks are still "unseen"), the bets
 * lambda_t being chosen from that past (online Newton step, Cutkosky and
 * Orabona 2018). Ville's inequality gives P(sup W >= 1/(alpha w_j)) <=
 * alpha w_j for the j-th pair, of prior weight w_j = 1 / (j (j + 1)); the
 * pairs' filtrations differ, so they are combined by a union bound (the
 * largest w_j W_j against 1/alpha), not summed, and sum_j w_j = 1 gives
 * P(an alarm before the next reset) <= alpha. Stopping a pair (its
 * budget used, or dropped from the bank) only stops a supermartingale.
 * The rounding moves any mean by at most half a unit, a difference of
 * means by at most one: the extra unit of margin covers it.
 *
 * Why it is fast. The pairing is a two-sample test by betting (Shekhar
 * and Ramdas 2024) whose second sample is the past: the uncertainty of
 * the reference level costs the variance of B (1/k of a score's) on each
 * bet, instead of a confidence bound on the reference mean spent on every
 * bet (which, with a reference that keeps growing, would also have to be
 * time-uniform), and no part of alpha. The reference grows with the watch:
 * a pair started shortly before a change holds it to every score before
 * it (at most 2/3 of the ring; its budget).
 */

/* The largest bet: u >= -1, so any cap below 1 keeps the wealth positive;
 * the cap of the e-process above (1/2) is that of the ONS regret bound,
 * which is too timid for the small variance of a paired difference. */
#define PAIR_BET_MAX 0.9
/* block sizes 8, 4, 2, 1: the phases of a pair */
#define PAIR_BLOCK0 8u
#define PAIR_PHASES 4u
/* scores are stored as (x - lo) / (hi - lo) in units of 1/Q16 */
#define Q16 65535.0

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

static int drift_cfg_ok(const calib_drift_cfg *c)
{
    if (!(c->alpha > 0 && c->alpha < 1) || !(c->min_effect >= 0) ||
        !isfinite(c->min_effect) || c->reference < 10)
        return 0;
    switch (c->kind) {
    case CALIB_DRIFT_MEAN:
        /* a finite range, and a ring of CALIB_DRIFT_RING * reference */
        return isfinite(c->lo) && isfinite(c->hi) && c->lo < c->hi &&
               isfinite(c->hi - c->lo) &&
               c->reference <= SIZE_MAX / CALIB_DRIFT_RING / sizeof(uint16_t);
    case CALIB_DRIFT_EXCEED:
        return c->quantile > 0 && c->quantile < 1 && c->min_effect <= 1 &&
               c->reference <= SIZE_MAX / sizeof(double);
    default:
        return 0;
    }
}

size_t calib_drift_bytes(const calib_drift_cfg *cfg)
{
    if (!cfg || !drift_cfg_ok(cfg))
        return 0;
    return cfg->kind == CALIB_DRIFT_MEAN
               ? cfg->reference * CALIB_DRIFT_RING * sizeof(uint16_t)
               : cfg->reference * sizeof(double);
}

int calib_drift_init(calib_drift *d, const calib_drift_cfg *cfg)
{
    if (!d)
        return CALIB_EINVAL;
    *d = (calib_drift){0};
    if (!cfg || !drift_cfg_ok(cfg))
        return CALIB_EINVAL;
    d->cfg = *cfg;
    if (cfg->kind == CALIB_DRIFT_EXCEED) {
        d->ref_x = malloc(calib_drift_bytes(cfg));
        if (!d->ref_x)
            return CALIB_ENOMEM;
    } else {
        d->ring_len = cfg->reference * CALIB_DRIFT_RING;
        /* zeroed: a restored or inspected state never shows garbage */
        d->ring = calloc(d->ring_len, sizeof *d->ring);
        if (!d->ring)
            return CALIB_ENOMEM;
    }
    calib_drift_reset(d);
    d->resets = 0;
    return CALIB_OK;
}

int calib_drift_copy(calib_drift *dst, const calib_drift *src)
{
    int fail = 0;
    *dst = *src;
    dst->ref_x = calib_dup(src->ref_x, src->cfg.reference * sizeof *src->ref_x, &fail);
    dst->ring = calib_dup(src->ring, src->ring_len * sizeof *src->ring, &fail);
    if (fail) {
        calib_drift_free(dst);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

void calib_drift_free(calib_drift *d)
{
    if (!d)
        return;
    free(d->ref_x);
    d->ref_x = NULL;
    free(d->ring);
    d->ring = NULL;
    d->ring_len = 0;
}

void calib_drift_reset(calib_drift *d)
{
    if (!d)
        return;
    calib_drift tmp = {
        .cfg = d->cfg,
        .state = CALIB_DRIFT_REFERENCE,
        .ref_x = d->ref_x,
        .threshold = NAN,
        .null_mean = NAN,
        .resets = d->resets + 1,
        .ring = d->ring,
        .ring_len = d->ring_len,
    };
    calib_accum_init(&tmp.ref);
    calib_accum_init(&tmp.watch);
    calib_accum_init(&tmp.all);
    *d = tmp;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* EXCEED: the threshold is the order statistic ceil(q n) of the sorted
 * reference sample; returns the fraction strictly above it. */
static double exceed_reference(calib_drift *d)
{
    size_t n = d->cfg.reference;
    qsort(d->ref_x, n, sizeof *d->ref_x, cmp_double);
    double r = ceil(d->cfg.quantile * (double)n);
    size_t k = r < 1 ? 1 : r > (double)n ? n : (size_t)r;
    d->threshold = d->ref_x[k - 1];
    while (k < n && !(d->ref_x[k] > d->threshold))
        k++; /* skip ties with the threshold */
    return (double)(n - k) / (double)n;
}

/* ---------------------------------------------- EXCEED: bank of e-processes */

/* Starts the next e-process of the bank, with weight 1 / (j (j + 1)), its
 * first sample being number `before` + 1; when the bank is full it takes
 * the place of the one of least w_j W_j. */
static void bank_start(calib_drift *d, uint64_t before)
{
    calib_eproc e;
    if (calib_eproc_init(&e, 0, 1, d->null_mean) != CALIB_OK)
        return;
    unsigned slot = d->nbank;
    if (slot == CALIB_DRIFT_BANK) {
        slot = 0;
        for (unsigned i = 1; i < d->nbank; i++)
            if (d->log_w[i] + d->bank[i].log_wealth <
                d->log_w[slot] + d->bank[slot].log_wealth)
                slot = i;
    } else {
        d->nbank++;
    }
    double j = (double)++d->started;
    d->bank[slot] = e;
    d->log_w[slot] = -log(j) - log(j + 1);
    d->start[slot] = before;
}

/* ln sum_j w_j W_j over the bank; *best: the term of largest w_j W_j. */
static double bank_log_sum(const calib_drift *d, unsigned *best)
{
    unsigned b = 0;
    for (unsigned i = 1; i < d->nbank; i++)
        if (d->log_w[i] + d->bank[i].log_wealth > d->log_w[b] + d->bank[b].log_wealth)
            b = i;
    double top = d->log_w[b] + d->bank[b].log_wealth, sum = 0;
    for (unsigned i = 0; i < d->nbank; i++)
        sum += exp(d->log_w[i] + d->bank[i].log_wealth - top);
    if (best)
        *best = b;
    return top + log(sum);
}

/* The end of the reference period: the threshold, m0 (alpha split in
 * halves between the DKW bound and the test) and the first e-process. */
static void exceed_start_watching(calib_drift *d)
{
    const calib_drift_cfg *c = &d->cfg;
    double n = (double)c->reference;
    d->null_mean = exceed_reference(d) + sqrt(log(2 / c->alpha) / (2 * n)) + c->min_effect;
    d->state = CALIB_DRIFT_WATCHING;
    /* m0 >= 1: no rate can exceed it; the bank stays empty */
    if (d->null_mean < 1)
        bank_start(d, d->n); /* after the reference's last sample */
}

static int exceed_add(calib_drift *d, double score)
{
    d->n++;
    if (d->state == CALIB_DRIFT_REFERENCE) {
        d->ref_x[d->ref.n] = score;
        calib_accum_add(&d->ref, score);
        if (d->ref.n == d->cfg.reference)
            exceed_start_watching(d);
        return 0;
    }
    calib_accum_add(&d->watch, score);
    if (d->state != CALIB_DRIFT_WATCHING || d->nbank == 0)
        return 0; /* ALARM: decided until a reset; or no alarm possible */
    if (d->cfg.restart && d->watch.n > 1 && (d->watch.n - 1) % d->cfg.restart == 0)
        bank_start(d, d->n - 1); /* this sample is its first */
    double x = score > d->threshold, top = -INFINITY;
    for (unsigned i = 0; i < d->nbank; i++) {
        calib_eproc_add(&d->bank[i], x);
        double t = d->log_w[i] + d->bank[i].log_wealth;
        top = t > top ? t : top;
    }
    /* M <= nbank max_j w_j W_j: the exact sum only when it may matter */
    double level = log(2 / d->cfg.alpha);
    if (top + log((double)d->nbank) < level)
        return 0;
    unsigned best;
    if (bank_log_sum(d, &best) < level)
        return 0;
    d->state = CALIB_DRIFT_ALARM;
    d->alarm_at = d->n;
    d->change_at = d->start[best] + d->bank[best].argmin;
    return 1;
}

/* ---------------------------------------------- MEAN: paired e-processes */

/* min_effect in the stored units, plus one unit: the stored values are
 * rounded to the nearest unit, which moves a mean by at most half a unit,
 * so a difference of means moves by at most one. H0 for the scores then
 * implies H0 for the stored values with this margin. */
static double pair_margin(const calib_drift_cfg *c)
{
    return c->min_effect / (c->hi - c->lo) + 1 / Q16;
}

/* No difference of means in [lo, hi] can exceed min_effect >= hi - lo. */
static int pair_possible(const calib_drift_cfg *c)
{
    return c->min_effect < c->hi - c->lo;
}

/* Scores in phase p of a pair of the given budget: a quarter of the
 * budget (the last phase: the rest) in blocks of PAIR_BLOCK0 >> p. */
static uint64_t pair_phase_len(uint64_t budget, unsigned p)
{
    uint64_t quarter = budget / PAIR_PHASES;
    if (p + 1 == PAIR_PHASES)
        return budget - (PAIR_PHASES - 1) * quarter; /* blocks of 1 */
    return quarter / (PAIR_BLOCK0 >> p);
}

/* Moves a pair to its next phase with any score left; 0 once it has used
 * its budget. */
static int pair_next_phase(calib_drift_pair *q)
{
    while (q->left == 0) {
        if (q->phase + 1 >= PAIR_PHASES)
            return 0;
        q->phase++;
        q->left = pair_phase_len(q->budget, q->phase);
    }
    return 1;
}

/*
 * Starts a pair whose reference is samples 1..s (the newest sample being
 * s). Its budget is at most 2/3 of the ring: over its life it uses
 * budget reference samples and tests 15/32 budget later ones (the phase
 * lengths are budget/32, /16, /8, /4), so its oldest block is never more
 * than 47/32 budget <= ring_len samples old and still in the ring.
 */
static void pair_start(calib_drift *d, uint64_t s)
{
    uint64_t cap = (uint64_t)d->ring_len / 3 * 2;
    cap = d->ring_n < cap ? d->ring_n : cap; /* scores the ring holds */
    if (cap == 0)
        return; /* a state restored without its ring: wait for a score */
    unsigned slot = d->npair;
    if (slot == CALIB_DRIFT_BANK) { /* drop the one of least w_j W_j */
        slot = 0;
        for (unsigned i = 1; i < d->npair; i++)
            if (d->pair[i].log_w + d->pair[i].log_wealth <
                d->pair[slot].log_w + d->pair[slot].log_wealth)
                slot = i;
    } else {
        d->npair++;
    }
    double j = (double)++d->started;
    calib_drift_pair *q = &d->pair[slot];
    memset(q, 0, sizeof *q); /* its padding too: snapshots write the bytes */
    *q = (calib_drift_pair){.start = s, .pos = s, .budget = s < cap ? s : cap,
                            .log_w = -log(j) - log(j + 1), .a = 1, .ref = d->all};
    /* a state restored without its running sums: keep the last level */
    if (d->all.n == 0)
        q->ref = d->ref;
    q->left = pair_phase_len(q->budget, 0);
    pair_next_phase(q); /* phases too short for one block are skipped */
    d->ref = q->ref;
    d->null_mean = calib_accum_mean(&d->ref) + d->cfg.min_effect;
}

static void pair_remove(calib_drift *d, unsigned i)
{
    d->pair[i] = d->pair[--d->npair];
}

/* The mean of a pair's next block, in stored units; 0 if the block has
 * left the ring (impossible by the budget, checked anyway). */
static int pair_block(const calib_drift *d, calib_drift_pair *q, double *b)
{
    /* the ring holds samples n - ring_n .. n - 1 (sample i at slot
     * (i - 1) % ring_len); the block is samples pos - k + 1 .. pos */
    uint64_t k = PAIR_BLOCK0 >> q->phase;
    if (q->pos < k || q->pos - k + 1 + d->ring_n < d->n)
        return 0;
    uint32_t sum = 0;
    for (uint64_t i = q->pos - k; i < q->pos; i++) /* samples i + 1 */
        sum += d->ring[i % d->ring_len];
    q->pos -= k;
    *b = (double)sum / (double)k;
    return 1;
}

/* One bet of a pair on the stored score y (its left is 0 once it has
 * used its budget). */
static void pair_add(const calib_drift *d, calib_drift_pair *q, double y, double margin)
{
    double b;
    if (q->left == 0)
        return;
    if (!pair_block(d, q, &b)) {
        q->left = 0;
        return;
    }
    double z = (y - b) / Q16; /* in [-1, 1] */
    double u = (z - margin) / (1 + margin); /* >= -1 */
    double lu = q->lambda * u; /* >= -9/10 */
    double g = -u / (1 + lu);  /* d/d lambda of -ln(1 + lambda u) */
    if (lu != 0)
        q->log_wealth += log1p(lu);
    q->n++;
    /* <=: along a flat stretch the estimate moves to its end */
    if (q->log_wealth <= q->min_log_wealth) {
        q->min_log_wealth = q->log_wealth;
        q->argmin = q->n;
    }
    q->a += g * g;
    q->lambda = clamp(q->lambda - ONS_GAIN * g / q->a, 0, PAIR_BET_MAX);
    q->left--;
    pair_next_phase(q);
}

static uint16_t pair_quantize(const calib_drift_cfg *c, double score)
{
    /* score is clamped to [lo, hi]: v in [0, 1], v Q16 + 1/2 <= 65535.5 */
    double v = clamp01((score - c->lo) / (c->hi - c->lo));
    return (uint16_t)(v * Q16 + 0.5);
}

static double pairs_top(const calib_drift *d, unsigned *best)
{
    double top = -INFINITY;
    for (unsigned i = 0; i < d->npair; i++) {
        double t = d->pair[i].log_w + d->pair[i].log_wealth;
        if (t > top) {
            top = t;
            if (best)
                *best = i;
        }
    }
    return top;
}

static int mean_add(calib_drift *d, double score)
{
    const calib_drift_cfg *c = &d->cfg;
    uint16_t y = pair_quantize(c, score);
    int alarm = 0;
    d->n++;
    if (d->state == CALIB_DRIFT_REFERENCE) {
        calib_accum_add(&d->ref, score);
        if (d->ref.n == c->reference) {
            d->state = CALIB_DRIFT_WATCHING;
            d->null_mean = calib_accum_mean(&d->ref) + c->min_effect;
        }
    } else {
        calib_accum_add(&d->watch, score);
        if (d->state == CALIB_DRIFT_WATCHING && pair_possible(c)) {
            /* a pair after the reference period and every `restart`
             * samples from there (restart 0: no more), and one whenever
             * none is left, which happens after a short reference (a
             * pair tests 15/32 as many scores as it has reference
             * scores): the stream is never left untested. The grid is a
             * function of n alone: a restored state needs nothing more. */
            uint64_t s = d->n - 1, since = s - c->reference;
            if ((c->restart ? since % c->restart == 0 : since == 0) || d->npair == 0)
                pair_start(d, s); /* this sample is its first */
            double margin = pair_margin(c);
            for (unsigned i = 0; i < d->npair; i++)
                pair_add(d, &d->pair[i], y, margin);
            unsigned best = 0;
            double top = d->npair ? pairs_top(d, &best) : -INFINITY;
            /* the level -ln(alpha) > 0: its log only when it may matter */
            if (top > 0 && top >= -log(c->alpha)) {
                const calib_drift_pair *q = &d->pair[best];
                d->state = CALIB_DRIFT_ALARM;
                d->alarm_at = d->n;
                d->change_at = q->start + q->argmin;
                d->ref = q->ref;
                d->null_mean = calib_accum_mean(&d->ref) + c->min_effect;
                alarm = 1;
            } else {
                /* pairs that used their budget can no longer grow */
                for (unsigned i = d->npair; i-- > 0;)
                    if (d->pair[i].left == 0)
                        pair_remove(d, i);
            }
        }
    }
    /* the ring: every score since the reset, the reference period too */
    d->ring[(d->n - 1) % d->ring_len] = y;
    d->ring_n += d->ring_n < d->ring_len;
    calib_accum_add(&d->all, score);
    return alarm;
}

int calib_drift_add(calib_drift *d, double score)
{
    if (!d || isnan(score))
        return 0;
    if (d->cfg.kind == CALIB_DRIFT_EXCEED)
        return exceed_add(d, score);
    if (!d->ring)
        return 0; /* an init that failed */
    /* MEAN tests the score clamped to its range */
    return mean_add(d, clamp(score, d->cfg.lo, d->cfg.hi));
}

/* A pair as pair_start makes it and pair_add leaves it. */
static int pair_ok(const calib_drift *d, const calib_drift_pair *q)
{
    return q->start < d->n && q->n <= d->n - q->start && q->pos <= q->start &&
           q->budget <= q->start && q->budget <= d->ring_len / 3 * 2 &&
           q->budget <= d->ring_n &&
           q->start - q->pos <= q->budget && q->phase < PAIR_PHASES &&
           q->left <= pair_phase_len(q->budget, q->phase) &&
           q->lambda >= 0 && q->lambda <= PAIR_BET_MAX && q->a >= 1 &&
           isfinite(q->log_w) && q->log_w < 0 && !isnan(q->log_wealth) &&
           q->log_wealth > -INFINITY && q->min_log_wealth <= 0 &&
           q->min_log_wealth <= q->log_wealth && q->argmin <= q->n &&
           q->ref.n <= q->start && isfinite(q->ref.s1.sum) && isfinite(q->ref.s1.comp) &&
           isfinite(q->ref.s2.sum) && isfinite(q->ref.s2.comp);
}

static int eproc_ok(const calib_eproc *e)
{
    return e->lo == 0 && e->hi == 1 && e->lo < e->m && e->m < e->hi && e->a >= 1 &&
           e->lambda >= 0 && e->lambda <= BET_MAX && !isnan(e->log_wealth) &&
           e->min_log_wealth <= 0 && e->min_log_wealth <= e->log_wealth &&
           e->argmin <= e->n;
}

int calib_drift_check(const calib_drift *d)
{
    if (!d || !drift_cfg_ok(&d->cfg) || d->state < CALIB_DRIFT_REFERENCE ||
        d->state > CALIB_DRIFT_ALARM || d->watch.n > d->n || d->alarm_at > d->n ||
        d->change_at > d->n || (d->state == CALIB_DRIFT_ALARM) != (d->alarm_at != 0) ||
        (d->state != CALIB_DRIFT_REFERENCE && isnan(d->null_mean)))
        return CALIB_EINVAL;
    const calib_drift_cfg *c = &d->cfg;
    if (d->state == CALIB_DRIFT_REFERENCE
            ? d->ref.n != d->n || d->n >= c->reference || d->watch.n || d->started
            : d->n - d->watch.n != c->reference)
        return CALIB_EINVAL;
    if (c->kind == CALIB_DRIFT_EXCEED) {
        if (!d->ref_x || d->ring || d->npair || d->nbank > CALIB_DRIFT_BANK ||
            d->nbank > d->started)
            return CALIB_EINVAL;
        for (unsigned i = 0; i < d->nbank; i++)
            if (!eproc_ok(&d->bank[i]) || !(d->log_w[i] < 0) || d->start[i] > d->n)
                return CALIB_EINVAL;
        return CALIB_OK;
    }
    if (!d->ring || d->ref_x || d->ring_len != c->reference * CALIB_DRIFT_RING ||
        d->ring_n > d->ring_len || d->ring_n > d->n || d->nbank ||
        d->npair > CALIB_DRIFT_BANK || d->npair > d->started || d->ref.n > d->n ||
        d->all.n > d->n)
        return CALIB_EINVAL;
    for (unsigned i = 0; i < d->npair; i++)
        if (!pair_ok(d, &d->pair[i]))
            return CALIB_EINVAL;
    return CALIB_OK;
}

double calib_drift_log_e(const calib_drift *d)
{
    if (!d || d->state == CALIB_DRIFT_REFERENCE)
        return 0;
    if (d->cfg.kind == CALIB_DRIFT_EXCEED)
        return d->nbank ? bank_log_sum(d, NULL) : 0;
    return d->npair ? pairs_top(d, NULL) : 0;
}

/* ------------------------------------------------------------------ shadow gate */

int calib_gate_init(calib_gate *g, const calib_gate_cfg *cfg)
{
    if (!g)
        return CALIB_EINVAL;
    *g = (calib_gate){0};
    if (!cfg || !(cfg->alpha > 0 && cfg->alpha < 1) ||
        !(cfg->min_improvement >= 0) || cfg->max_samples < 1)
        return CALIB_EINVAL;
    int rc = calib_eproc_init(&g->e, cfg->lo, cfg->hi, cfg->min_improvement);
    if (rc != CALIB_OK)
        return rc;
    g->cfg = *cfg;
    g->state = CALIB_GATE_RUNNING;
    calib_accum_init(&g->diff);
    calib_accum_init(&g->current);
    calib_accum_init(&g->candidate);
    return CALIB_OK;
}

int calib_gate_add(calib_gate *g, double s_current, double s_candidate)
{
    if (!g)
        return CALIB_EINVAL;
    double diff = s_current - s_candidate;
    if (g->state != CALIB_GATE_RUNNING)
        return g->state;
    /* a NaN pair (either score, or inf - inf) is no evidence, but counts
     * towards max_samples: a candidate that only ever scores NaN ends */
    g->pairs++;
    if (isnan(diff)) {
        if (g->pairs >= g->cfg.max_samples)
            g->state = CALIB_GATE_FAILED;
        return g->state;
    }
    calib_accum_add(&g->diff, diff);
    calib_accum_add(&g->current, s_current);
    calib_accum_add(&g->candidate, s_candidate);
    calib_eproc_add(&g->e, diff);
    if (calib_eproc_rejects(&g->e, g->cfg.alpha))
        g->state = CALIB_GATE_PASSED;
    else if (g->pairs >= g->cfg.max_samples)
        g->state = CALIB_GATE_FAILED;
    return g->state;
}

double calib_gate_log_e(const calib_gate *g)
{
    return g->e.log_wealth;
}
