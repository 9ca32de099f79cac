/* estimators.c — binned lower-bound estimators on a stored sample set. */
#include <math.h>
#include <stdlib.h>

#include "calib/calib.h"

static int toplabel_cmp(const void *a, const void *b)
{
    const calib_toplabel *x = a, *y = b;
    if (x->conf < y->conf)
        return -1;
    if (x->conf > y->conf)
        return 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

void calib_toplabel_sort(calib_toplabel *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, toplabel_cmp);
}

/* ------------------------------------------------------------ equal mass */

/* Upper edge of equal-mass chunk c (0-based) of size chunk over sorted v:
 * the midpoint to the next chunk's first value, 1.0 for the last chunk. */
static double em_edge(const calib_toplabel *v, size_t n, size_t chunk, size_t c)
{
    size_t end = (c + 1) * chunk; /* first index of the next chunk */
    if (end >= n)
        return 1.0;
    return (v[end - 1].conf + v[end].conf) / 2;
}

double calib_tce2_em_debiased(const calib_toplabel *v, size_t n, uint32_t m)
{
    if (n == 0 || m == 0)
        return NAN;
    size_t chunk = (n + m - 1) / m;
    size_t chunks = (n + chunk - 1) / chunk;
    calib_ksum total = {0};
    /* Edges ascend (v is sorted) and equal edges are one edge, so a sweep
     * over distinct edges assigns every value to the first edge >= it. */
    size_t i = 0;
    double prev = -INFINITY;
    for (size_t c = 0; c < chunks; c++) {
        double edge = em_edge(v, n, chunk, c);
        if (edge == prev)
            continue;
        prev = edge;
        calib_ksum conf = {0};
        size_t nb = 0, hits = 0;
        for (; i < n && (v[i].conf <= edge || c + 1 == chunks); i++) {
            calib_ksum_add(&conf, v[i].conf);
            hits += v[i].correct;
            nb++;
        }
        if (nb < 2)
            continue;
        double a = (double)hits / (double)nb;
        double gap = calib_ksum_value(&conf) / (double)nb - a;
        double term = gap * gap - a * (1 - a) / (double)(nb - 1);
        calib_ksum_add(&total, (double)nb / (double)n * term);
    }
    double s = calib_ksum_value(&total);
    return sqrt(s > 0 ? s : 0);
}

/* ------------------------------------------------------------ KS */

double calib_ks(const calib_toplabel *v, size_t n)
{
    if (n == 0)
        return NAN;
    calib_ksum conf = {0};
    uint64_t hits = 0;
    double best = 0;
    for (size_t i = 0; i < n; i++) {
        calib_ksum_add(&conf, v[i].conf);
        hits += v[i].correct;
        double gap = fabs(calib_ksum_value(&conf) - (double)hits);
        if (gap > best)
            best = gap;
    }
    return best / (double)n;
}

/* ------------------------------------------------------------ streaming */

int calib_estimator_init(calib_estimator *e, uint32_t k, size_t cap)
{
    *e = (calib_estimator){.k = k};
    int rc;
    if (k == 0)
        return CALIB_EINVAL;
    if ((rc = calib_bins_init(&e->top15, 15)) || (rc = calib_bins_init(&e->top100, 100)) ||
        (rc = calib_cwbins_init(&e->cw15, k, 15)) ||
        (rc = calib_cwbins_init(&e->cw100, k, 100)) ||
        (rc = calib_estimator_reserve(e, cap))) {
        calib_estimator_free(e);
        return rc;
    }
    return CALIB_OK;
}

void calib_estimator_free(calib_estimator *e)
{
    calib_bins_free(&e->top15);
    calib_bins_free(&e->top100);
    calib_cwbins_free(&e->cw15);
    calib_cwbins_free(&e->cw100);
    free(e->v);
    e->v = NULL;
    e->n = e->cap = 0;
}

int calib_estimator_reserve(calib_estimator *e, size_t cap)
{
    if (cap <= e->cap)
        return CALIB_OK;
    if (cap > SIZE_MAX / sizeof *e->v)
        return CALIB_ENOMEM;
    calib_toplabel *v = realloc(e->v, cap * sizeof *v);
    if (!v)
        return CALIB_ENOMEM;
    e->v = v;
    e->cap = cap;
    return CALIB_OK;
}

void calib_estimator_reset(calib_estimator *e)
{
    calib_bins_reset(&e->top15);
    calib_bins_reset(&e->top100);
    calib_cwbins_reset(&e->cw15);
    calib_cwbins_reset(&e->cw100);
    e->n = 0;
}

int calib_estimator_add(calib_estimator *e, const double *p, size_t y)
{
    if (y >= e->k)
        return CALIB_ELABEL;
    if (e->n == e->cap)
        return CALIB_EFULL;
    size_t top = calib_argmax(p, e->k);
    int correct = top == y;
    e->v[e->n] = (calib_toplabel){.conf = p[top], .correct = (uint32_t)correct, .idx = e->n};
    e->n++;
    calib_bins_add(&e->top15, p[top], correct);
    calib_bins_add(&e->top100, p[top], correct);
    calib_cwbins_add(&e->cw15, p, y);
    calib_cwbins_add(&e->cw100, p, y);
    return CALIB_OK;
}

int calib_estimator_finish(calib_estimator *e, calib_estimates *out)
{
    if (e->n == 0)
        return CALIB_EEMPTY;
    calib_toplabel_sort(e->v, e->n);
    *out = (calib_estimates){
        .n = e->n,
        .accuracy = calib_bins_accuracy(&e->top15),
        .ece = calib_bins_ece(&e->top15),
        .tce2_15 = calib_bins_tce2(&e->top15),
        .tce2_100 = calib_bins_tce2(&e->top100),
        .tce2_15em_debiased = calib_tce2_em_debiased(e->v, e->n, 15),
        .cwce2_15 = calib_cwbins_cwce2(&e->cw15),
        .cwce2_100 = calib_cwbins_cwce2(&e->cw100),
        .ks = calib_ks(e->v, e->n),
    };
    return CALIB_OK;
}

/* ------------------------------------------------------------ all at once */

int calib_estimate(const double *p, const uint32_t *y, size_t n, size_t k,
                   calib_estimates *out)
{
    if (n == 0)
        return CALIB_EEMPTY;
    if (k == 0 || k > UINT32_MAX)
        return CALIB_EINVAL;
    calib_estimator e;
    int rc = calib_estimator_init(&e, (uint32_t)k, n);
    for (size_t i = 0; rc == CALIB_OK && i < n; i++)
        rc = calib_estimator_add(&e, p + i * k, y[i]);
    if (rc == CALIB_OK)
        rc = calib_estimator_finish(&e, out);
    calib_estimator_free(&e);
    return rc;
}
