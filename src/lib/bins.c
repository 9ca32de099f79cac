/* bins.c — top-label and class-wise reliability bins. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dup.h"

#include "calib/calib.h"

/* The bin of v, inlined where bins are filled (several per pair, K per
 * pair for the class-wise bins); calib_bin_index is its exported face. */
static inline uint32_t bin_index(double v, uint32_t m)
{
    /* ceil(v m) - 1 is the answer in exact arithmetic; the product rounds,
     * so settle it against the edges i/m as doubles -- but only near an
     * edge. v m rounds by at most half an ulp of m, and an edge i/m as a
     * double differs from i/m by at most half an ulp of 1, so v m's
     * distance to the integers tells the bin unless it is within about
     * m 2^-52 of one: 1e-12 m leaves a margin of thousands. Off the edges
     * the bin is floor(v m), taken by truncation to an integer (one
     * instruction; ceil is a call without SSE4.1) with x - f exact. */
    double x = v * m, tol = 1e-12 * m;
    if (x > tol && x < m - tol) {
        uint32_t f = (uint32_t)x;
        double frac = x - f;
        if (frac > tol && frac < 1 - tol)
            return f;
    }
    if (!(v > 0))
        return 0;
    if (v >= 1)
        return m - 1;
    double c = ceil(x);
    uint32_t i = c < 1 ? 0 : (uint32_t)c - 1;
    if (i > m - 1)
        i = m - 1;
    while (i > 0 && v <= (double)i / m)
        i--;
    while (i < m - 1 && v > (double)(i + 1) / m)
        i++;
    return i;
}

/* calib_ksum_add for terms and sums that are never negative, as bins hold
 * (probabilities): Neumaier's compensation without the absolute values,
 * the same sums bit for bit. */
static inline void ksum_add_nonneg(calib_ksum *k, double x)
{
    double t = k->sum + x;
    k->comp += k->sum >= x ? (k->sum - t) + x : (x - t) + k->sum;
    k->sum = t;
}

uint32_t calib_bin_index(double v, uint32_t m)
{
    return bin_index(v, m);
}

/* |x|^q with the common powers done exactly. */
static double powq(double x, double q)
{
    x = fabs(x);
    if (q == 1)
        return x;
    if (q == 2)
        return x * x;
    return pow(x, q);
}

/* ------------------------------------------------------------ top-label */

size_t calib_bins_bytes(uint32_t m)
{
    const calib_bins *b = NULL;
    return (size_t)m * (sizeof *b->count + sizeof *b->conf + sizeof *b->correct);
}

int calib_bins_init(calib_bins *b, uint32_t m)
{
    *b = (calib_bins){0};
    if (m == 0)
        return CALIB_EINVAL;
    b->m = m;
    b->count = calloc(m, sizeof *b->count);
    b->conf = calloc(m, sizeof *b->conf);
    b->correct = calloc(m, sizeof *b->correct);
    if (!b->count || !b->conf || !b->correct) {
        calib_bins_free(b);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

void calib_bins_free(calib_bins *b)
{
    free(b->count);
    free(b->conf);
    free(b->correct);
    *b = (calib_bins){0};
}

int calib_bins_copy(calib_bins *dst, const calib_bins *src)
{
    int fail = 0;
    *dst = *src;
    dst->count = calib_dup(src->count, src->m * sizeof *src->count, &fail);
    dst->conf = calib_dup(src->conf, src->m * sizeof *src->conf, &fail);
    dst->correct = calib_dup(src->correct, src->m * sizeof *src->correct, &fail);
    if (fail) {
        calib_bins_free(dst);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

void calib_bins_reset(calib_bins *b)
{
    b->n = 0;
    memset(b->count, 0, b->m * sizeof *b->count);
    memset(b->conf, 0, b->m * sizeof *b->conf);
    memset(b->correct, 0, b->m * sizeof *b->correct);
}

void calib_bins_add(calib_bins *b, double conf, int correct)
{
    uint32_t i = bin_index(conf, b->m);
    b->n++;
    b->count[i]++;
    ksum_add_nonneg(&b->conf[i], conf);
    b->correct[i] += correct != 0;
}

int calib_bins_merge(calib_bins *dst, const calib_bins *src)
{
    if (dst->m != src->m)
        return CALIB_EINVAL;
    dst->n += src->n;
    for (uint32_t i = 0; i < dst->m; i++) {
        dst->count[i] += src->count[i];
        calib_ksum_merge(&dst->conf[i], &src->conf[i]);
        dst->correct[i] += src->correct[i];
    }
    return CALIB_OK;
}

double calib_bins_plugin(const calib_bins *b, double q)
{
    if (b->n == 0)
        return NAN;
    calib_ksum s = {0};
    for (uint32_t i = 0; i < b->m; i++) {
        if (!b->count[i])
            continue;
        double nb = (double)b->count[i];
        double gap = calib_ksum_value(&b->conf[i]) / nb - (double)b->correct[i] / nb;
        calib_ksum_add(&s, nb / (double)b->n * powq(gap, q));
    }
    return calib_ksum_value(&s);
}

double calib_bins_ece(const calib_bins *b)
{
    return calib_bins_plugin(b, 1);
}

double calib_bins_tce2(const calib_bins *b)
{
    return sqrt(calib_bins_plugin(b, 2));
}

double calib_bins_accuracy(const calib_bins *b)
{
    if (b->n == 0)
        return NAN;
    uint64_t c = 0;
    for (uint32_t i = 0; i < b->m; i++)
        c += b->correct[i];
    return (double)c / (double)b->n;
}

/* ------------------------------------------------------------ class-wise */

size_t calib_cwbins_bytes(uint32_t k, uint32_t m)
{
    const calib_cwbins *b = NULL;
    size_t cell = sizeof *b->count + sizeof *b->psum + sizeof *b->hits;
    if (k == 0 || m == 0 || (size_t)k > SIZE_MAX / m / cell)
        return 0;
    return (size_t)k * m * cell;
}

int calib_cwbins_init(calib_cwbins *b, uint32_t k, uint32_t m)
{
    *b = (calib_cwbins){0};
    if (k == 0 || m == 0 || (size_t)k > SIZE_MAX / m)
        return CALIB_EINVAL;
    size_t cells = (size_t)k * m;
    b->k = k;
    b->m = m;
    b->count = calloc(cells, sizeof *b->count);
    b->psum = calloc(cells, sizeof *b->psum);
    b->hits = calloc(cells, sizeof *b->hits);
    if (!b->count || !b->psum || !b->hits) {
        calib_cwbins_free(b);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

void calib_cwbins_free(calib_cwbins *b)
{
    free(b->count);
    free(b->psum);
    free(b->hits);
    *b = (calib_cwbins){0};
}

int calib_cwbins_copy(calib_cwbins *dst, const calib_cwbins *src)
{
    int fail = 0;
    size_t cells = (size_t)src->k * src->m;
    *dst = *src;
    dst->count = calib_dup(src->count, cells * sizeof *src->count, &fail);
    dst->psum = calib_dup(src->psum, cells * sizeof *src->psum, &fail);
    dst->hits = calib_dup(src->hits, cells * sizeof *src->hits, &fail);
    if (fail) {
        calib_cwbins_free(dst);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

void calib_cwbins_reset(calib_cwbins *b)
{
    size_t cells = (size_t)b->k * b->m;
    b->n = 0;
    memset(b->count, 0, cells * sizeof *b->count);
    memset(b->psum, 0, cells * sizeof *b->psum);
    memset(b->hits, 0, cells * sizeof *b->hits);
}

void calib_cwbins_add(calib_cwbins *b, const double *p, size_t y)
{
    /* bin_index(v) is 0 exactly when v <= 1/m (its first edge, as the
     * double it settles against), and with K classes most are there: at
     * most m of a pair's K probabilities pass 1/m, since they sum to 1.
     * The others skip the bin's arithmetic; the bins and the order of the
     * sums are the same, bit for bit. */
    const uint32_t m = b->m;
    const double first = (double)1 / m;
    uint64_t *count = b->count;
    calib_ksum *psum = b->psum;
    b->n++;
    for (uint32_t c = 0; c < b->k; c++) {
        double v = p[c];
        size_t cell = (size_t)c * m + (v > first ? bin_index(v, m) : 0);
        count[cell]++;
        ksum_add_nonneg(&psum[cell], v);
    }
    if (y < b->k) /* one class is the outcome */
        b->hits[y * b->m + bin_index(p[y], b->m)]++;
}

int calib_cwbins_merge(calib_cwbins *dst, const calib_cwbins *src)
{
    if (dst->k != src->k || dst->m != src->m)
        return CALIB_EINVAL;
    size_t cells = (size_t)dst->k * dst->m;
    dst->n += src->n;
    for (size_t i = 0; i < cells; i++) {
        dst->count[i] += src->count[i];
        calib_ksum_merge(&dst->psum[i], &src->psum[i]);
        dst->hits[i] += src->hits[i];
    }
    return CALIB_OK;
}

double calib_cwbins_plugin(const calib_cwbins *b, double q)
{
    if (b->n == 0)
        return NAN;
    size_t cells = (size_t)b->k * b->m;
    calib_ksum s = {0};
    for (size_t i = 0; i < cells; i++) {
        if (!b->count[i])
            continue;
        double nb = (double)b->count[i];
        double gap = calib_ksum_value(&b->psum[i]) / nb - (double)b->hits[i] / nb;
        calib_ksum_add(&s, nb / (double)b->n * powq(gap, q));
    }
    return calib_ksum_value(&s);
}

double calib_cwbins_cwce2(const calib_cwbins *b)
{
    return sqrt(calib_cwbins_plugin(b, 2));
}

int calib_cwbins_brier_decomp(const calib_cwbins *b, calib_brier_decomp *d)
{
    if (b->n == 0)
        return CALIB_EEMPTY;
    double n = (double)b->n;
    calib_ksum rel = {0}, res = {0}, unc = {0};
    for (uint32_t c = 0; c < b->k; c++) {
        const size_t base = (size_t)c * b->m;
        uint64_t hits = 0;
        for (uint32_t j = 0; j < b->m; j++)
            hits += b->hits[base + j];
        double ybar = (double)hits / n;
        calib_ksum_add(&unc, ybar * (1 - ybar));
        for (uint32_t j = 0; j < b->m; j++) {
            if (!b->count[base + j])
                continue;
            double nb = (double)b->count[base + j];
            double pbar = calib_ksum_value(&b->psum[base + j]) / nb;
            double obar = (double)b->hits[base + j] / nb;
            calib_ksum_add(&rel, nb / n * (pbar - obar) * (pbar - obar));
            calib_ksum_add(&res, nb / n * (obar - ybar) * (obar - ybar));
        }
    }
    d->reliability = calib_ksum_value(&rel);
    d->resolution = calib_ksum_value(&res);
    d->uncertainty = calib_ksum_value(&unc);
    return CALIB_OK;
}
