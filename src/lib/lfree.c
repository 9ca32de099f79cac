/* lfree.c — label-free estimates and the label-shift test (calib/lfree.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/lfree.h"
#include "expk.h"
#include "vec4.h"

static int cfg_ok(const calib_lfree_cfg *c)
{
    if (c->k == 1 || c->recent < 1 || !(c->alpha >= 0 && c->alpha < 1))
        return 0;
    if (c->alpha > 0 && c->k >= 2 && c->reference < 10)
        return 0;
    size_t width = c->k ? c->k : 2;
    return c->recent <= SIZE_MAX / sizeof(float) / width && c->k <= SIZE_MAX / 64;
}

static int test_on(const calib_lfree_cfg *c)
{
    return c->alpha > 0 && c->k >= 2;
}

/* doubles of scratch: EM's accumulators and weights, then the Fisher
 * matrix of the K - 1 free priors */
static size_t scratch_len(size_t k)
{
    size_t f = k <= CALIB_LFREE_INTERVAL_MAX_K ? (k - 1) * (k - 1) : 0;
    return 5 * k + f;
}

/* The records allocated at init. */
static size_t first_records(const calib_lfree_cfg *c)
{
    return c->recent < CALIB_LFREE_FIRST ? c->recent : CALIB_LFREE_FIRST;
}

size_t calib_lfree_ring_bytes(const calib_lfree_cfg *c)
{
    return cfg_ok(c) ? (c->recent - first_records(c)) * (c->k ? c->k : 2) * sizeof(float) : 0;
}

size_t calib_lfree_bytes(const calib_lfree_cfg *c)
{
    if (!cfg_ok(c))
        return 0;
    size_t b = first_records(c) * (c->k ? c->k : 2) * sizeof(float);
    if (!c->k)
        return b;
    b += (5 * c->k + scratch_len(c->k)) * sizeof(double); /* src, priors, lo, hi, weights */
    if (test_on(c)) /* the counts since the reset and since each start */
        b += (1 + CALIB_LFREE_BANK) * c->k * sizeof(uint64_t);
    return b;
}

void calib_lfree_free(calib_lfree *lf)
{
    free(lf->all);
    free(lf->seg_cnt);
    free(lf->rec);
    size_t first = first_records(&lf->cfg); /* init's, not the budget's */
    if (lf->alloc > first)
        calib_budget_give(lf->cfg.budget, (lf->alloc - first) * lf->width * sizeof *lf->rec);
    free(lf->src);
    free(lf->priors);
    free(lf->weights);
    free(lf->prior_lo);
    free(lf->prior_hi);
    free(lf->scratch);
    memset(lf, 0, sizeof *lf);
}

static void fig_clear(calib_lfree_fig *f)
{
    calib_lfree_est none = {NAN, NAN, NAN};
    *f = (calib_lfree_fig){0};
    for (int i = 0; i < CALIB_LFREE_FIGS; i++)
        f->naive[i] = f->corrected_est[i] = none;
}

int calib_lfree_init(calib_lfree *lf, const calib_lfree_cfg *c)
{
    memset(lf, 0, sizeof *lf);
    if (!cfg_ok(c))
        return CALIB_EINVAL;
    lf->cfg = *c;
    lf->width = c->k ? c->k : 2;
    fig_clear(&lf->fig);
    lf->alloc = lf->cap = first_records(c);
    lf->rec = malloc(lf->alloc * lf->width * sizeof *lf->rec);
    if (!lf->rec)
        goto nomem;
    if (!c->k)
        return CALIB_OK;
    size_t k = c->k;
    lf->src = calloc(k, sizeof *lf->src);
    lf->priors = calloc(k, sizeof *lf->priors);
    lf->prior_lo = calloc(k, sizeof *lf->prior_lo);
    lf->prior_hi = calloc(k, sizeof *lf->prior_hi);
    lf->weights = calloc(k, sizeof *lf->weights);
    lf->scratch = calloc(scratch_len(k), sizeof *lf->scratch);
    if (!lf->src || !lf->priors || !lf->prior_lo || !lf->prior_hi || !lf->weights ||
        !lf->scratch)
        goto nomem;
    for (size_t i = 0; i < k; i++)
        lf->priors[i] = lf->prior_lo[i] = lf->prior_hi[i] = NAN;
    if (!test_on(c))
        return CALIB_OK;
    lf->all = calloc(k, sizeof *lf->all);
    lf->seg_cnt = calloc(CALIB_LFREE_BANK * k, sizeof *lf->seg_cnt);
    if (!lf->all || !lf->seg_cnt)
        goto nomem;
    lf->test_on = 1;
    lf->lgamma_h = lgamma(0.5 * (double)k);
    calib_lfree_test_reset(lf);
    return CALIB_OK;
nomem:
    calib_lfree_free(lf);
    return CALIB_ENOMEM;
}

/* Room for record number lf->total: the ring doubles, within cfg.recent
 * and the budget; refused, it stops where it is and wraps there. */
static void grow(calib_lfree *lf)
{
    size_t n = lf->alloc > lf->cfg.recent / 2 ? lf->cfg.recent : 2 * lf->alloc;
    size_t rec = lf->width * sizeof *lf->rec;
    float *r = calib_budget_grow(lf->cfg.budget, lf->rec, lf->alloc * rec, n * rec);
    if (!r) {
        lf->cfg.recent = lf->cap; /* stopped: no more attempts */
        return;
    }
    lf->rec = r;
    lf->alloc = lf->cap = n;
}

/* ------------------------------------------------------------------ the test */

/*
 * The Krichevsky-Trofimov mixture (a Dirichlet(1/2, ..., 1/2) mixture of
 * categorical laws over K classes) gives a sample the probability
 * (n_c + 1/2) / (n + K/2), n_c its class's count before it and n the
 * samples before it. The product over a sequence depends on its counts
 * alone: ln KT = sum_c [ln Gamma(n_c + 1/2) - ln Gamma(1/2)]
 * - [ln Gamma(n + K/2) - ln Gamma(K/2)]. A sample then costs one count,
 * and the test's logarithms are taken at its evaluations.
 */
#define LF_LGAMMA_HALF 0.57236494292470008707 /* ln Gamma(1/2) = ln sqrt(pi) */

/* The next evaluation comes this many samples after one: the evaluation
 * costs about (CALIB_LFREE_BANK + 2) K log-gammas, a few a sample at any K,
 * and alarms at most that many samples later than a check of each. */
static uint64_t check_every(size_t k)
{
    return k > 256 ? k : 256;
}

/* ln KT of the n samples whose counts are all - before (before: NULL for 0). */
static double kt_log(const calib_lfree *lf, const uint64_t *before, uint64_t n)
{
    size_t k = lf->cfg.k;
    double v = 0;
    for (size_t c = 0; c < k; c++) {
        uint64_t m = lf->all[c] - (before ? before[c] : 0);
        if (m) /* a class not seen adds lgamma(1/2) - lgamma(1/2) */
            v += lgamma((double)m + 0.5) - LF_LGAMMA_HALF;
    }
    return v - (lgamma((double)n + 0.5 * (double)k) - lf->lgamma_h);
}

/*
 * The evaluation: for each segment j, ln E_j = ln KT(before its start) +
 * ln KT(since its start) - ln L(pooled MLE), L(pooled MLE) = prod_k
 * (N_k / N)^N_k over every sample since the reset. The numerator is a
 * predictive law of the whole sequence, so under H0 (the samples i.i.d.
 * of some law q) E_j <= numerator / L_q, a test martingale of mean 1:
 * P(ever E_j >= 1 / (alpha w_j)) <= alpha w_j (universal inference,
 * Wasserman, Ramdas and Balakrishnan 2020), and the sum of w_j over the
 * segments is at most 1. Evaluating at some times only keeps the bound.
 */
static int evaluate(calib_lfree *lf)
{
    size_t k = lf->cfg.k;
    uint64_t n = lf->test_n;
    double mle = 0;
    for (size_t j = 0; j < k; j++)
        if (lf->all[j])
            mle += (double)lf->all[j] * log((double)lf->all[j] / (double)n);
    double best = -INFINITY;
    for (unsigned i = 0; i < lf->nseg; i++) {
        double e = lf->seg[i].log_w + lf->seg[i].log_ref +
                   kt_log(lf, lf->seg_cnt + i * k, n - lf->seg[i].start) - mle;
        best = e > best ? e : best;
    }
    lf->log_e = best > 0 ? best : 0;
    return lf->nseg && best >= log(1 / lf->cfg.alpha);
}

/* A segment starts after every `reference` samples since the reset; the
 * oldest of CALIB_LFREE_BANK makes room. It keeps the counts at its start
 * (seg_cnt) and the KT of the samples before it. */
static void segment_start(calib_lfree *lf)
{
    size_t k = lf->cfg.k;
    if (lf->nseg == CALIB_LFREE_BANK) {
        memmove(lf->seg, lf->seg + 1, (CALIB_LFREE_BANK - 1) * sizeof lf->seg[0]);
        memmove(lf->seg_cnt, lf->seg_cnt + k, (CALIB_LFREE_BANK - 1) * k * sizeof *lf->seg_cnt);
        lf->nseg--;
    }
    unsigned i = lf->nseg++;
    double j = (double)++lf->started;
    lf->seg[i].start = lf->test_n;
    lf->seg[i].log_w = -log(j * (j + 1));
    lf->seg[i].log_ref = kt_log(lf, NULL, lf->test_n);
    memcpy(lf->seg_cnt + i * k, lf->all, k * sizeof *lf->seg_cnt);
}

/* The test takes one prediction's top class. */
static int test_add(calib_lfree *lf, size_t top)
{
    if (lf->test_n == lf->seg_at) {
        segment_start(lf);
        lf->seg_at += lf->cfg.reference;
    }
    lf->all[top]++;
    if (++lf->test_n < lf->check_at)
        return 0;
    lf->check_at += check_every(lf->cfg.k);
    if (!evaluate(lf) || lf->alarm)
        return 0;
    lf->alarm = 1;
    lf->alarms++;
    return 1;
}

/* The next record's slot, the ring grown first if it may. */
static float *next_record(calib_lfree *lf)
{
    if (lf->total == lf->alloc && lf->alloc < lf->cfg.recent)
        grow(lf);
    float *r = lf->rec + (size_t)(lf->total % lf->cap) * lf->width;
    lf->total++;
    return r;
}

/*
 * A row p of k doubles, each divided by s, written to the record r as
 * floats, and the sums its estimates take (calib_lfree_newest_expected)
 * into o: sum p, sum p^2, and with w (the last update's weights) sum w p
 * and sum w p^2 (else 0); in vectors (vec4.h), four partial sums a lane.
 */
CALIB_CLONES
static void put_row(const double *p, size_t k, double s, const double *w, float *r,
                    double o[4])
{
    size_t j = 0;
    double acc[4][4] = {{0}};
#ifdef CALIB_VEC4
    typedef float v4f __attribute__((vector_size(4 * sizeof(float))));
    const calib_vec4 vs = {s, s, s, s};
    calib_vec4 sp = {0}, sq = {0}, sw = {0}, swq = {0};
    for (; j + 4 <= k; j += 4) {
        calib_vec4 x;
        memcpy(&x, p + j, sizeof x);
        x /= vs;
        v4f f = __builtin_convertvector(x, v4f);
        memcpy(r + j, &f, sizeof f);
        calib_vec4 xx = x * x;
        sp += x;
        sq += xx;
        if (w) {
            calib_vec4 vw;
            memcpy(&vw, w + j, sizeof vw);
            sw += vw * x;
            swq += vw * xx;
        }
    }
    for (int l = 0; l < 4; l++) {
        acc[0][l] = sp[l];
        acc[1][l] = sq[l];
        acc[2][l] = sw[l];
        acc[3][l] = swq[l];
    }
#endif
    for (; j < k; j++) {
        double x = p[j] / s;
        r[j] = (float)x;
        acc[0][j % 4] += x;
        acc[1][j % 4] += x * x;
        if (w) {
            acc[2][j % 4] += w[j] * x;
            acc[3][j % 4] += w[j] * x * x;
        }
    }
    for (int i = 0; i < 4; i++)
        o[i] = (acc[i][0] + acc[i][1]) + (acc[i][2] + acc[i][3]);
}

/* The weights a new record's estimates take: the last update's. */
static const double *row_weights(const calib_lfree *lf)
{
    return lf->fig.corrected ? lf->weights : NULL;
}

/* The entry points below call these, never one another: a profile's
 * inclusive count of each is its caller's cost alone (tests/integ/budget.py). */
static int add_top(calib_lfree *lf, const double *p, size_t top)
{
    float *r = next_record(lf);
    put_row(p, lf->width, 1, lf->cfg.k ? row_weights(lf) : NULL, r, lf->sums);
    return lf->test_on && top < lf->width ? test_add(lf, top) : 0;
}

static int add(calib_lfree *lf, const double *p)
{
    size_t top = 0; /* the top class, ties to the lowest: a scan (calib_argmax's
                       dispatch costs more than K = 10 compares) */
    for (size_t i = 1; lf->test_on && i < lf->width; i++)
        top = p[i] > p[top] ? i : top;
    return add_top(lf, p, top);
}

int calib_lfree_add_top(calib_lfree *lf, const double *p, size_t top)
{
    return add_top(lf, p, top);
}

int calib_lfree_add(calib_lfree *lf, const double *p)
{
    return add(lf, p);
}

/* ------------------------------------------------- a row of logits */

/* exp(x) for x in [LF_EXP_MIN, 0] to what a float keeps, on a double or a
 * vector of doubles (U: the matching unsigned 64-bit type): expk.h's
 * reduction (x = n ln2 + r, |r| <= ln2/2, Cody-Waite ln2) and 2^n, with
 * exp(r) by its degree-7 Taylor polynomial (truncation < 5.2e-9, a tenth
 * of float's half ulp) in place of degree 13. Every operation is one
 * IEEE operation, so a lane of any width gives the scalar's bits. */
#define LF_EXP_MIN (-87.0) /* exp(-87) ~ 1.6e-38, float's least normal */
#define LF_EXP_NEG(x, out, T, U)                                              \
    do {                                                                      \
        T t_ = (x) * EXP_LOG2E + EXP_SHIFT;                                   \
        T n_ = t_ - EXP_SHIFT;                                                \
        T r_ = (x) - n_ * EXP_LN2_HI - n_ * EXP_LN2_LO;                       \
        T r2_ = r_ * r_, r4_ = r2_ * r2_;                                     \
        T q_ = r_ + (r2_ * (1.0 / 2 + r_ * (1.0 / 6)) +                       \
                     r4_ * ((1.0 / 24 + r_ * (1.0 / 120)) +                   \
                            r2_ * (1.0 / 720 + r_ * (1.0 / 5040))));          \
        U b_;                                                                 \
        memcpy(&b_, &t_, sizeof b_);                                          \
        b_ = (b_ + 1023) << 52; /* t_'s low mantissa bits hold n */          \
        T s_;                                                                 \
        memcpy(&s_, &b_, sizeof s_);                                          \
        (out) = (1 + q_) * s_;                                                \
    } while (0)

/*
 * e_j = exp(z_j - zmax) for a float record's softmax (0 below LF_EXP_MIN:
 * under 1.6e-38 of the maximum's 1), into e (room for k rounded up to a
 * multiple of 4: a row's tail is padded to a whole vector of -inf, so no
 * lane runs a scalar exp); returns their sum, taken in four partial sums.
 * zmax: the row's maximum (finite). With put_row's division, within 2
 * float ulps of the double softmax rounded (calib_lfree_add's record).
 */
CALIB_CLONES
static double exp_f32(const double *z, size_t k, double zmax, double *e)
{
    size_t j = 0;
    double acc[4] = {0, 0, 0, 0};
#ifdef CALIB_VEC4
    const calib_vec4 vmin = {LF_EXP_MIN, LF_EXP_MIN, LF_EXP_MIN, LF_EXP_MIN};
    calib_vec4 vacc = {0, 0, 0, 0};
    for (; j < k; j += 4) {
        calib_vec4 x, w;
        if (k - j >= 4) {
            memcpy(&x, z + j, sizeof x);
        } else { /* the tail: its missing lanes -inf, weight 0 (zmax - a
                    constant would round back to zmax beyond 2^53) */
            for (size_t l = 0; l < 4; l++)
                x[l] = j + l < k ? z[j + l] : -INFINITY;
        }
        x -= zmax;
        calib_vec4u in = (calib_vec4u)(x >= vmin);
        x = (calib_vec4)(((calib_vec4u)x & in) | ((calib_vec4u)vmin & ~in));
        LF_EXP_NEG(x, w, calib_vec4, calib_vec4u);
        w = (calib_vec4)((calib_vec4u)w & in);
        vacc += w;
        memcpy(e + j, &w, sizeof w);
    }
    for (int l = 0; l < 4; l++)
        acc[l] = vacc[l];
#else
    for (; j < k; j++) {
        double x = z[j] - zmax, w = 0;
        if (x >= LF_EXP_MIN)
            LF_EXP_NEG(x, w, double, uint64_t);
        acc[j % 4] += w;
        e[j] = w;
    }
#endif
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

int calib_lfree_add_logits(calib_lfree *lf, const double *z)
{
    size_t k = lf->width, top = 0;
    for (size_t i = 1; i < k; i++)
        top = z[i] > z[top] ? i : top;
    if (!lf->cfg.k || !isfinite(z[top])) {
        /* not logits, or a row the float kernel is not for: the double
         * softmax (scratch's first k: free between updates) */
        if (lf->cfg.k)
            calib_softmax(z, k, lf->scratch);
        return add(lf, lf->cfg.k ? lf->scratch : z);
    }
    /* scratch: 5k doubles >= k rounded up to 4 (k >= 2) */
    double s = exp_f32(z, k, z[top], lf->scratch);
    put_row(lf->scratch, k, s, row_weights(lf), next_record(lf), lf->sums);
    return lf->test_on ? test_add(lf, top) : 0;
}

void calib_lfree_newest_expected(const calib_lfree *lf, const double *u, double est[2])
{
    est[0] = est[1] = NAN;
    if (!lf->total)
        return;
    const float *r = lf->rec + (size_t)((lf->total - 1) % lf->cap) * lf->width;
    if (!lf->cfg.k) {
        est[0] = est[1] = 1 + log((double)r[1]);
        return;
    }
    /* p'_j = u_j r_j / S, q_j = w_j r_j / D (q is proportional to
     * (w_j / u_j) p'_j): sum p'^2 = A / S^2, sum q p' = C / (D S); without
     * u, the sums the record's write took (before its rounding to float) */
    double o[4] = {0, 0, 0, 0}; /* S, A, D, C */
    const double *w = row_weights(lf);
    if (!u) {
        memcpy(o, lf->sums, sizeof o);
    } else { /* prior weights in force (label_shift_adapt): rare */
        for (size_t j = 0; j < lf->width; j++) {
            double x = r[j], ux = u[j] * x;
            o[0] += ux;
            o[1] += ux * ux;
            if (w) {
                o[2] += w[j] * x;
                o[3] += w[j] * x * ux;
            }
        }
    }
    double s = o[0], a = o[1], d = o[2], c = o[3];
    if (!(s > 0))
        return;
    est[0] = est[1] = 1 - a / (s * s);
    if (d > 0)
        est[1] = 1 - 2 * c / (d * s) + a / (s * s);
}

void calib_lfree_test_reset(calib_lfree *lf)
{
    if (!lf->test_on)
        return;
    memset(lf->all, 0, lf->cfg.k * sizeof *lf->all);
    lf->nseg = 0;
    lf->started = 0;
    lf->test_n = 0;
    /* the first evaluation at `reference` (the first segment starts at
     * the next sample, so it tests nothing), then every check_every: one
     * sample later, the bench's circle delays were 433 in every seed
     * against a median of 176, which is not understood yet */
    lf->check_at = lf->cfg.reference;
    lf->seg_at = lf->cfg.reference;
    lf->log_e = 0;
    lf->alarm = 0;
}

double calib_lfree_log_e(const calib_lfree *lf)
{
    return lf->test_on ? lf->log_e : 0;
}

/* ------------------------------------------------------------------ figures */

/* Sums of the per-prediction expectations and variances of one view. */
typedef struct sums {
    double e[CALIB_LFREE_FIGS], v[CALIB_LFREE_FIGS];
} sums;

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

static void est_of(const sums *s, double n, calib_lfree_est out[CALIB_LFREE_FIGS])
{
    for (int i = 0; i < CALIB_LFREE_FIGS; i++) {
        double mean = s->e[i] / n, half = CALIB_Z95 * sqrt(s->v[i] > 0 ? s->v[i] : 0) / n;
        out[i] = (calib_lfree_est){mean, mean - half, mean + half};
    }
}

/*
 * One record's expected scores, added to s: those of the served p (taken
 * as a distribution: divided by its sum) for a label drawn from q_j = w_j
 * p_j / D, D = sum_j w_j p_j (w NULL: q = p, the naive view). With c =
 * sum_j q_j p_j: E[Brier] = 1 - 2 c + sum_j p_j^2, variance 4 (sum_j q_j
 * p_j^2 - c^2); E[log] = -sum_j q_j ln p_j; E[accuracy] = q at p's top
 * class. Returns D, or 0 when the record is skipped.
 */
static double add_record(const float *pf, const double *w, size_t k, sums *s)
{
    double d = 0, tot = 0;
    size_t top = 0;
    for (size_t j = 0; j < k; j++) {
        d += (w ? w[j] : 1) * pf[j];
        tot += pf[j];
        top = pf[j] > pf[top] ? j : top;
    }
    if (!(d > 0) || !isfinite(d) || !(tot > 0))
        return 0;
    double sq = 0, c = 0, qsq = 0, h = 0, h2 = 0;
    for (size_t j = 0; j < k; j++) {
        double p = pf[j] / tot, q = (w ? w[j] : 1) * pf[j] / d;
        double l = log(p < CALIB_LOG_FLOOR ? CALIB_LOG_FLOOR : p);
        sq += p * p;
        c += q * p;
        qsq += q * p * p;
        h -= q * l;
        h2 += q * l * l;
    }
    double qtop = (w ? w[top] : 1) * pf[top] / d;
    s->e[CALIB_LFREE_MAIN] += 1 - 2 * c + sq;
    s->v[CALIB_LFREE_MAIN] += 4 * (qsq - c * c);
    s->e[CALIB_LFREE_LOG] += h;
    s->v[CALIB_LFREE_LOG] += h2 - h * h;
    s->e[CALIB_LFREE_ACC] += qtop;
    s->v[CALIB_LFREE_ACC] += qtop * (1 - qtop);
    return d;
}

/* The i-th record of the update's scope (from lf->base, the oldest). */
static const float *record(const calib_lfree *lf, size_t i)
{
    size_t s = lf->base + i;
    return lf->rec + (s < lf->cap ? s : s - lf->cap) * lf->width;
}

static void update_gaussian(calib_lfree *lf, size_t n)
{
    /* calibrated N(mu, v): (y - mu)^2 / v is chi^2_1, of mean 1 and
     * variance 2, so E[DSS] = 1 + ln v with a variance of 2 */
    sums s = {{0}, {0}};
    for (size_t i = 0; i < n; i++)
        s.e[CALIB_LFREE_MAIN] += 1 + log((double)record(lf, i)[1]);
    s.v[CALIB_LFREE_MAIN] = 2 * (double)n;
    est_of(&s, (double)n, lf->fig.naive);
    lf->fig.naive[CALIB_LFREE_LOG] = lf->fig.naive[CALIB_LFREE_ACC] =
        (calib_lfree_est){NAN, NAN, NAN};
}

/* One EM pass: out = F(in), the priors after one E and M step from in
 * (may be the same array); returns the largest move of a prior. */
static double em_pass(calib_lfree *lf, size_t n, const double *in, double *out)
{
    size_t k = lf->cfg.k;
    double *acc = lf->scratch, *w = acc + k;
    for (size_t j = 0; j < k; j++) {
        w[j] = in[j] / lf->src[j];
        acc[j] = 0;
    }
    double used = 0;
    for (size_t i = 0; i < n; i++) {
        const float *p = record(lf, i);
        double d = 0;
        for (size_t j = 0; j < k; j++)
            d += w[j] * p[j];
        if (!(d > 0) || !isfinite(d))
            continue;
        double inv = 1 / d;
        for (size_t j = 0; j < k; j++)
            acc[j] += w[j] * p[j] * inv;
        used++;
    }
    if (!used)
        return 0;
    double moved = 0;
    for (size_t j = 0; j < k; j++) {
        double next = acc[j] / used, dj = fabs(next - in[j]);
        moved = dj > moved ? dj : moved;
        out[j] = next;
    }
    return moved;
}

/*
 * EM from lf->priors to its fixed point, accelerated by SQUAREM (S3,
 * Varadhan and Roland 2008): EM alone crawls where the classes overlap
 * (hundreds of passes). A cycle of two passes t1 = F(t0), t2 = F(t1)
 * extrapolates t' = t0 - 2a r + a^2 v (r = t1 - t0, v = t2 - t1 - r,
 * a = -|r| / |v|, at most -1, which is t2 itself), halving a towards -1
 * while t' leaves the simplex, and a third pass F(t') keeps the
 * monotonicity of the likelihood in practice. Stops when a pass moves no
 * prior by CALIB_LFREE_EM_TOL, or after CALIB_LFREE_EM_MAX passes.
 */
static void em_run(calib_lfree *lf, size_t n)
{
    size_t k = lf->cfg.k;
    double *t0 = lf->priors, *t1 = lf->scratch + 2 * k, *t2 = t1 + k, *tp = t2 + k;
    unsigned pass = 0;
    lf->fig.em_converged = 0;
    while (pass + 3 <= CALIB_LFREE_EM_MAX) {
        pass++;
        if (em_pass(lf, n, t0, t1) < CALIB_LFREE_EM_TOL) {
            memcpy(t0, t1, k * sizeof *t0);
            lf->fig.em_converged = 1;
            break;
        }
        pass++;
        em_pass(lf, n, t1, t2);
        double rr = 0, vv = 0;
        for (size_t j = 0; j < k; j++) {
            double r = t1[j] - t0[j], v = t2[j] - 2 * t1[j] + t0[j];
            rr += r * r;
            vv += v * v;
        }
        double a = vv > 0 ? -sqrt(rr / vv) : -1;
        if (!(a < -1) || !isfinite(a)) /* NaN and -inf too */
            a = -1;
        for (;;) {
            if (a == -1) { /* t2 itself, not t0 + 2r + v, which may round below 0 */
                memcpy(tp, t2, k * sizeof *tp);
                break;
            }
            int inside = 1;
            for (size_t j = 0; j < k; j++) {
                double r = t1[j] - t0[j], v = t2[j] - 2 * t1[j] + t0[j];
                tp[j] = t0[j] - 2 * a * r + a * a * v;
                inside &= tp[j] >= 0;
            }
            if (inside)
                break;
            a = a > -1.001 ? -1 : (a - 1) / 2;
        }
        pass++;
        em_pass(lf, n, tp, t0);
    }
    lf->fig.em_passes = pass;
}

/* Lower-triangular Cholesky factor of the n x n matrix a, in place: 0, or
 * -1 when it is not positive definite. */
static int cholesky(double *a, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (size_t t = 0; t < j; t++)
            d -= a[j * n + t] * a[j * n + t];
        if (!(d > 0))
            return -1;
        a[j * n + j] = sqrt(d);
        for (size_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (size_t t = 0; t < j; t++)
                s -= a[i * n + t] * a[j * n + t];
            a[i * n + j] = s / a[j * n + j];
        }
    }
    return 0;
}

/* Solves L L^T x = b in place (b of n). */
static void chol_solve(const double *l, size_t n, double *b)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t t = 0; t < i; t++)
            b[i] -= l[i * n + t] * b[t];
        b[i] /= l[i * n + i];
    }
    for (size_t i = n; i-- > 0;) {
        for (size_t t = i + 1; t < n; t++)
            b[i] -= l[t * n + i] * b[t];
        b[i] /= l[i * n + i];
    }
}

/*
 * The priors' 95% intervals from the observed Fisher information of the
 * label-shift likelihood sum_i ln sum_k pi_k r_ik, r_ik = p_ik / pi_s,k,
 * in the K - 1 free priors (pi_K = 1 - the rest): J = sum_i g_i g_i^T /
 * D_i^2, g_ik = r_ik - r_iK, D_i = sum_k pi_k r_ik; the covariance is
 * J^-1, and pi_K's variance the sum of its entries.
 */
static void prior_intervals(calib_lfree *lf, size_t n)
{
    size_t k = lf->cfg.k, f = k - 1;
    for (size_t j = 0; j < k; j++)
        lf->prior_lo[j] = lf->prior_hi[j] = NAN;
    if (k > CALIB_LFREE_INTERVAL_MAX_K)
        return;
    double *g = lf->scratch, *col = g + k, *jm = lf->scratch + 5 * k;
    memset(jm, 0, f * f * sizeof *jm);
    for (size_t i = 0; i < n; i++) {
        const float *p = record(lf, i);
        double d = 0;
        for (size_t j = 0; j < k; j++)
            d += lf->priors[j] * p[j] / lf->src[j];
        if (!(d > 0) || !isfinite(d))
            continue;
        double last = p[f] / lf->src[f];
        for (size_t j = 0; j < f; j++)
            g[j] = (p[j] / lf->src[j] - last) / d;
        for (size_t a = 0; a < f; a++)
            for (size_t b = 0; b <= a; b++)
                jm[a * f + b] += g[a] * g[b];
    }
    for (size_t a = 0; a < f; a++)
        for (size_t b = 0; b < a; b++)
            jm[b * f + a] = jm[a * f + b];
    if (cholesky(jm, f) != 0)
        return;
    double var_last = 0;
    for (size_t j = 0; j < f; j++) {
        memset(col, 0, f * sizeof *col);
        col[j] = 1;
        chol_solve(jm, f, col); /* column j of the covariance */
        for (size_t t = 0; t < f; t++)
            var_last += col[t];
        double half = CALIB_Z95 * sqrt(col[j] > 0 ? col[j] : 0);
        lf->prior_lo[j] = clamp01(lf->priors[j] - half);
        lf->prior_hi[j] = clamp01(lf->priors[j] + half);
    }
    double half = CALIB_Z95 * sqrt(var_last > 0 ? var_last : 0);
    lf->prior_lo[f] = clamp01(lf->priors[f] - half);
    lf->prior_hi[f] = clamp01(lf->priors[f] + half);
}

static void update_classes(calib_lfree *lf, size_t n, const double *src)
{
    size_t k = lf->cfg.k;
    calib_lfree_fig *fig = &lf->fig;
    sums naive = {{0}, {0}}, corr = {{0}, {0}};
    double used = 0;
    double *mean = lf->scratch;
    memset(mean, 0, k * sizeof *mean);
    for (size_t i = 0; i < n; i++) {
        double d = add_record(record(lf, i), NULL, k, &naive);
        for (size_t j = 0; d > 0 && j < k; j++)
            mean[j] += record(lf, i)[j] / d;
        used += d > 0;
    }
    if (!used)
        return;
    est_of(&naive, used, fig->naive);
    if (!src) { /* no reference: the priors the served outputs imply */
        for (size_t j = 0; j < k; j++) {
            lf->priors[j] = mean[j] / used;
            lf->prior_lo[j] = lf->prior_hi[j] = NAN;
        }
        return;
    }
    /* warm: from the last priors while the reference stays */
    int warm = memcmp(lf->src, src, k * sizeof *src) == 0 && isfinite(lf->priors[0]);
    memcpy(lf->src, src, k * sizeof *src);
    if (!warm)
        memcpy(lf->priors, src, k * sizeof *src);
    em_run(lf, n);
    double *w = lf->weights;
    for (size_t j = 0; j < k; j++)
        w[j] = lf->priors[j] / src[j];
    used = 0;
    for (size_t i = 0; i < n; i++)
        used += add_record(record(lf, i), w, k, &corr) > 0;
    if (!used)
        return;
    est_of(&corr, used, fig->corrected_est);
    fig->corrected = 1;
    prior_intervals(lf, n);
}

void calib_lfree_update(calib_lfree *lf, const double *src)
{
    calib_lfree_update_newest(lf, src, calib_lfree_len(lf));
}

void calib_lfree_update_newest(calib_lfree *lf, const double *src, size_t n)
{
    size_t held = calib_lfree_len(lf);
    n = n < held ? n : held;
    lf->base = lf->cap ? (size_t)((lf->total - n) % lf->cap) : 0;
    fig_clear(&lf->fig);
    if (!n)
        return;
    if (lf->cfg.k)
        update_classes(lf, n, src);
    else
        update_gaussian(lf, n);
    lf->fig.n = n;
    lf->fig.at = lf->total;
}

void calib_lfree_priors_of_counts(const double *counts, size_t k, double *src)
{
    double n = 0;
    for (size_t j = 0; j < k; j++)
        n += counts[j];
    for (size_t j = 0; j < k; j++)
        src[j] = (counts[j] + 0.5) / (n + 0.5 * (double)k);
}
