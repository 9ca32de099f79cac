/*
 * ets.c — ensemble temperature scaling (Zhang, Kailkhura & Han, ICML 2020)
 * as a calib plugin, and the worked example of calib_recal(3).
 *
 *   p = w1 softmax(z / t) + w2 softmax(z) + w3 / K,   w on the simplex,
 *
 * t and w fitted by the mean Brier score. Parameters, in order: t, w1, w2,
 * w3; the identity is t = 1, w = (1, 0, 0).
 *
 * Optimiser. With a = softmax(z / t), b = softmax(z) and c = 1/K (a
 * constant vector), the mean Brier score is, for fixed t, the quadratic
 *
 *     Q(w) = w' G w - 2 h' w + 1,
 *     G = mean over samples of the Gram matrix of (a, b, c),
 *     h = mean of (a_y, b_y, 1/K),
 *
 * (sum_k a_k = 1 makes G_ac = G_bc = G_cc = 1/K). G is positive
 * semi-definite, so the minimum over the simplex lies in the relative
 * interior of one of its seven faces: each face's equality-constrained
 * minimum solves a linear system of at most 4 x 4, and the best feasible one
 * is the exact minimiser. The profile min_w Q(w; t) is then minimised over
 * ln t on the bracket [t_min, t_max] by Brent's method
 * (calib_recal_minimize_1d), and the two ends are evaluated too. Each
 * evaluation of the profile is one O(nK) pass; the fit allocates 3K doubles
 * once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/plugin.h"

#define ETS_NPARAMS 4
#define ETS_TOL 1e-6
#define ETS_MAX_ITER 200
#define SIMPLEX_TOL 1e-9

/* ================================================================== one pass */

typedef struct ets_gram {
    double g[3][3]; /* mean Gram matrix of (a, b, c) */
    double h[3];    /* mean (a_y, b_y, 1/K) */
} ets_gram;

typedef struct ets_ctx {
    const calib_dataset *ds;
    double *zbuf, *ea, *eb; /* K each */
    ets_gram gram;          /* of the last pass */
    double wbest[3];        /* simplex minimiser of the last pass */
} ets_ctx;

static double row_max(const double *z, size_t k)
{
    double m = z[0];
    for (size_t j = 1; j < k; j++)
        m = z[j] > m ? z[j] : m;
    return m;
}

/* Accumulates G and h at temperature t. */
static void ets_pass(ets_ctx *c, double t)
{
    const calib_dataset *ds = c->ds;
    size_t k = ds->k, width = calib_form_width(ds->form, k);
    calib_ksum aa = {0}, ab = {0}, bb = {0}, ay = {0}, by = {0};
    for (size_t i = 0; i < ds->n; i++) {
        const double *x = ds->rec + i * ds->stride;
        size_t y = (size_t)x[width];
        const double *z = calib_recal_row_logits(ds->form, k, x, c->zbuf);
        double m = row_max(z, k), sa = 0, sb = 0, saa = 0, sab = 0, sbb = 0;
        for (size_t j = 0; j < k; j++) {
            c->ea[j] = exp((z[j] - m) / t);
            c->eb[j] = exp(z[j] - m);
            sa += c->ea[j];
            sb += c->eb[j];
        }
        for (size_t j = 0; j < k; j++) {
            saa += c->ea[j] * c->ea[j];
            sab += c->ea[j] * c->eb[j];
            sbb += c->eb[j] * c->eb[j];
        }
        calib_ksum_add(&aa, saa / (sa * sa));
        calib_ksum_add(&ab, sab / (sa * sb));
        calib_ksum_add(&bb, sbb / (sb * sb));
        calib_ksum_add(&ay, c->ea[y] / sa);
        calib_ksum_add(&by, c->eb[y] / sb);
    }
    double n = (double)ds->n, ik = 1.0 / (double)k;
    ets_gram *g = &c->gram;
    g->g[0][0] = calib_ksum_value(&aa) / n;
    g->g[0][1] = g->g[1][0] = calib_ksum_value(&ab) / n;
    g->g[1][1] = calib_ksum_value(&bb) / n;
    g->g[0][2] = g->g[2][0] = g->g[1][2] = g->g[2][1] = g->g[2][2] = ik;
    g->h[0] = calib_ksum_value(&ay) / n;
    g->h[1] = calib_ksum_value(&by) / n;
    g->h[2] = ik;
}

/* ================================================================== simplex QP */

static double quad(const ets_gram *g, const double w[3])
{
    double q = 1;
    for (int i = 0; i < 3; i++) {
        q -= 2 * g->h[i] * w[i];
        for (int j = 0; j < 3; j++)
            q += w[i] * g->g[i][j] * w[j];
    }
    return q;
}

/* Gaussian elimination with partial pivoting on an m x (m + 1) augmented
 * matrix; -1 if (numerically) singular. */
static int solve(double a[4][5], int m, double *x)
{
    for (int col = 0; col < m; col++) {
        int piv = col;
        for (int r = col + 1; r < m; r++)
            if (fabs(a[r][col]) > fabs(a[piv][col]))
                piv = r;
        if (fabs(a[piv][col]) < 1e-14)
            return -1;
        for (int j = 0; j <= m; j++) {
            double tmp = a[col][j];
            a[col][j] = a[piv][j];
            a[piv][j] = tmp;
        }
        for (int r = col + 1; r < m; r++) {
            double f = a[r][col] / a[col][col];
            for (int j = col; j <= m; j++)
                a[r][j] -= f * a[col][j];
        }
    }
    for (int r = m - 1; r >= 0; r--) {
        double s = a[r][m];
        for (int j = r + 1; j < m; j++)
            s -= a[r][j] * x[j];
        x[r] = s / a[r][r];
    }
    return 0;
}

/*
 * min Q over the face with support `mask` (bits of w1..w3), sum w = 1:
 * the KKT system [2 G_SS 1; 1' 0] [w_S; lambda] = [2 h_S; 1]. Returns 0 and
 * w if the solution is feasible (w_S >= 0), else -1.
 */
static int face_min(const ets_gram *g, unsigned mask, double w[3])
{
    int idx[3], m = 0;
    double a[4][5] = {{0}}, sol[4];
    for (int i = 0; i < 3; i++)
        if (mask & (1u << i))
            idx[m++] = i;
    for (int r = 0; r < m; r++) {
        for (int c = 0; c < m; c++)
            a[r][c] = 2 * g->g[idx[r]][idx[c]];
        a[r][m] = 1;
        a[r][m + 1] = 2 * g->h[idx[r]];
        a[m][r] = 1;
    }
    a[m][m + 1] = 1;
    if (solve(a, m + 1, sol))
        return -1;
    w[0] = w[1] = w[2] = 0;
    for (int r = 0; r < m; r++) {
        if (sol[r] < -SIMPLEX_TOL)
            return -1;
        w[idx[r]] = sol[r] > 0 ? sol[r] : 0;
    }
    return 0;
}

/* The exact minimiser of Q over the simplex; returns Q there. */
static double simplex_min(const ets_gram *g, double best[3])
{
    double qbest = INFINITY;
    for (unsigned mask = 1; mask < 8; mask++) {
        double w[3];
        if (face_min(g, mask, w))
            continue;
        double s = w[0] + w[1] + w[2], q;
        for (int i = 0; i < 3; i++)
            w[i] /= s; /* undo the clipping of -1e-9 .. 0 */
        q = quad(g, w);
        if (q < qbest) {
            qbest = q;
            memcpy(best, w, sizeof w);
        }
    }
    return qbest; /* the vertices are always feasible */
}

/* The profile objective in u = ln t, for calib_recal_minimize_1d. */
static double ets_profile(double u, void *ctx)
{
    ets_ctx *c = ctx;
    ets_pass(c, exp(u));
    return simplex_min(&c->gram, c->wbest);
}

/* ================================================================== fit */

static int init_valid(const double *p)
{
    double s = p[1] + p[2] + p[3];
    if (!(p[0] > 0 && isfinite(p[0])))
        return 0;
    for (int i = 1; i < 4; i++)
        if (!(p[i] >= 0 && p[i] <= 1))
            return 0;
    return fabs(s - 1) <= SIMPLEX_TOL;
}

static const unsigned ets_forms =
    CALIB_FORM_BIT(CALIB_FORM_LOGITS) | CALIB_FORM_BIT(CALIB_FORM_PROBS);

static void set_params(calib_recal_result *res, double t, const double w[3])
{
    res->params[0] = t;
    res->params[1] = w[0];
    res->params[2] = w[1];
    res->params[3] = w[2];
}

static int ets_fit(const calib_dataset *ds, const calib_recal_opts *opts,
                   calib_recal_result *res)
{
    static const double identity[ETS_NPARAMS] = {1, 1, 0, 0};
    calib_recal_opts o = {0};
    ets_ctx c = {0};
    calib_recal_min1d m;
    int rc;
    if (!res)
        return CALIB_EINVAL;
    memset(res, 0, sizeof *res);
    res->objective = CALIB_RECAL_OBJ_BRIER;
    res->nparams = ETS_NPARAMS;
    if (opts)
        o = *opts;
    if (o.objective != CALIB_RECAL_OBJ_DEFAULT && o.objective != CALIB_RECAL_OBJ_BRIER)
        return CALIB_EINVAL;
    o.t_min = o.t_min != 0 ? o.t_min : CALIB_RECAL_T_MIN;
    o.t_max = o.t_max != 0 ? o.t_max : CALIB_RECAL_T_MAX;
    o.tol = o.tol != 0 ? o.tol : ETS_TOL;
    o.max_iter = o.max_iter != 0 ? o.max_iter : ETS_MAX_ITER;
    if (!(o.t_min > 0 && o.t_max > o.t_min && isfinite(o.t_max)) || o.flags
        || (o.init && !init_valid(o.init)))
        return CALIB_EINVAL;
    rc = calib_recal_check_dataset(ds, ets_forms);
    if (rc)
        return rc;
    c.ds = ds;
    c.zbuf = malloc(3 * ds->k * sizeof(double));
    if (!c.zbuf)
        return CALIB_ENOMEM;
    c.ea = c.zbuf + ds->k;
    c.eb = c.ea + ds->k;

    const double *h0 = o.init ? o.init : identity;
    ets_pass(&c, h0[0]);
    res->objective_before = quad(&c.gram, h0 + 1);

    double lo = log(o.t_min), hi = log(o.t_max);
    rc = calib_recal_minimize_1d(ets_profile, &c, lo, hi, o.tol, o.max_iter, &m);
    if (rc)
        goto out;
    /* Brent's last evaluation need not be its minimiser's: redo that one
     * for the weights */
    res->objective_after = ets_profile(m.x, &c);
    set_params(res, exp(m.x), c.wbest);
    res->iterations = m.evals + 1;
    res->converged = m.converged;
    /* a monotone profile runs into an end of the bracket: look there too */
    for (int end = 0; end < 2; end++) {
        double u = end ? hi : lo, q = ets_profile(u, &c);
        res->iterations++;
        if (q < res->objective_after) {
            set_params(res, exp(u), c.wbest);
            res->objective_after = q;
            res->at_bound = 1;
        }
    }
    if (!isfinite(res->objective_after) || !isfinite(res->objective_before))
        rc = CALIB_ENONFINITE;
out:
    free(c.zbuf);
    return rc;
}

/* ================================================================== apply */

static double logit_at(int form, const double *x, size_t j)
{
    if (form == CALIB_FORM_LOGITS)
        return x[j];
    return log(x[j] > CALIB_LOG_FLOOR ? x[j] : CALIB_LOG_FLOOR);
}

/*
 * In place and without scratch: the two softmax sums first, then each
 * output element from its own input element only, so out may equal x.
 */
static int ets_apply(const double *params, int form, size_t k, const double *x,
                     double *out)
{
    if (form != CALIB_FORM_LOGITS && form != CALIB_FORM_PROBS)
        return CALIB_EINVAL;
    double t = params[0], m = logit_at(form, x, 0), sa = 0, sb = 0;
    for (size_t j = 1; j < k; j++) {
        double z = logit_at(form, x, j);
        m = z > m ? z : m;
    }
    for (size_t j = 0; j < k; j++) {
        double d = logit_at(form, x, j) - m;
        sa += exp(d / t);
        sb += exp(d);
    }
    for (size_t j = 0; j < k; j++) {
        double d = logit_at(form, x, j) - m;
        out[j] = params[1] * exp(d / t) / sa + params[2] * exp(d) / sb
                 + params[3] / (double)k;
    }
    return CALIB_OK;
}

/* ================================================================== descriptor */

const calib_plugin calib_plugin_descriptor = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION,
    .name = "ets",
    .summary = "ensemble temperature scaling (Zhang et al. 2020), fitted by Brier",
    .forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS) | CALIB_FORM_BIT(CALIB_FORM_PROBS),
    .nparams = ETS_NPARAMS,
    .param_names = {"t", "w1", "w2", "w3"},
    .identity = {1, 1, 0, 0},
    .fit = ets_fit,
    .apply = ets_apply,
};
