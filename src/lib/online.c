/* online.c — recalibration maps learned online by the Online Newton Step
 * (calib/online.h, calib_online(3)). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/online.h"
#include "calib/recal.h"
#include "calib/score.h"
#include "logistic.h"

/* ------------------------------------------------------------ set-up */

int calib_online_init(calib_online *o, const char *method, int form, size_t k,
                      const calib_online_cfg *cfg)
{
    calib_online_cfg c = cfg ? *cfg : (calib_online_cfg){0};
    c.gamma = c.gamma == 0 ? 0.1 : c.gamma;
    c.eps = c.eps == 0 ? 1.0 : c.eps;
    memset(o, 0, sizeof *o);
    if (!method || !(c.gamma >= 1e-6 && c.gamma <= 1e6) || !(c.eps >= 1e-9 && c.eps <= 1e9) ||
        form < CALIB_FORM_LOGITS || form > CALIB_FORM_GAUSSIAN)
        return CALIB_EINVAL;
    int gauss = form == CALIB_FORM_GAUSSIAN;
    int classes = form == CALIB_FORM_LOGITS || form == CALIB_FORM_PROBS;
    if (form == CALIB_FORM_BINARY)
        k = 2; /* its logits are the pair (1 - p, p)'s */
    else if (classes && (k < 2 || k > SIZE_MAX / sizeof(double)))
        return CALIB_EINVAL;
    if (strcmp(method, "temperature") == 0 && !gauss) {
        *o = (calib_online){.method = CALIB_ONLINE_TEMPERATURE, .d = 1, .theta = {1, 0},
                            .lo = {CALIB_ONLINE_BETA_MIN}, .hi = {CALIB_ONLINE_BETA_MAX}};
    } else if (strcmp(method, "platt") == 0 && !gauss && k == 2) {
        *o = (calib_online){.method = CALIB_ONLINE_PLATT, .d = 2, .theta = {1, 0},
                            .lo = {CALIB_ONLINE_A_MIN, -CALIB_ONLINE_B_MAX},
                            .hi = {CALIB_ONLINE_A_MAX, CALIB_ONLINE_B_MAX}};
    } else if (strcmp(method, "variance") == 0 && gauss) {
        *o = (calib_online){.method = CALIB_ONLINE_VARIANCE, .d = 1, .theta = {0, 0},
                            .lo = {-CALIB_ONLINE_U_MAX}, .hi = {CALIB_ONLINE_U_MAX}};
        k = 1;
    } else {
        return CALIB_EINVAL;
    }
    o->form = form;
    o->k = k;
    o->gamma = c.gamma;
    o->eps = c.eps;
    o->a[0] = o->a[2] = c.eps;
    o->ainv[0] = o->ainv[2] = 1 / c.eps;
    if (!gauss && !(o->buf = malloc(k * sizeof *o->buf)))
        return CALIB_ENOMEM;
    return CALIB_OK;
}

void calib_online_free(calib_online *o)
{
    free(o->buf);
    o->buf = NULL;
}

/* ------------------------------------------------------------ the maps */

static int check(const calib_online *o, const double *x, double y)
{
    return calib_recal_check_pair(o->form, o->k, x, y);
}

/* Platt's s, recal.h's: the logits' difference, kept finite */
static double platt_s(const double *z)
{
    double s = z[1] - z[0];
    return isinf(s) ? copysign(DBL_MAX, s) : s;
}

/* The loss at theta (the learner's coordinates) on one checked pair, and
 * its gradient g (d values). */
static double loss_grad(const calib_online *o, const double *theta, const double *x, double y,
                        double *g)
{
    if (o->method == CALIB_ONLINE_VARIANCE) {
        double r = (y - x[0]) * (y - x[0]) / x[1], q = r * exp(-theta[0]);
        g[0] = 1 - q;
        return q + theta[0] + log(x[1]);
    }
    const double *z = calib_recal_row_logits(o->form, o->k, x, o->buf);
    size_t c = (size_t)y;
    if (o->method == CALIB_ONLINE_PLATT) {
        double s = platt_s(z), u = theta[0] * s + theta[1], t = c == 1;
        double q = sigmoid(u);
        g[0] = (q - t) * s;
        g[1] = q - t;
        return t * softplus(-u) + (1 - t) * softplus(u);
    }
    /* temperature: -beta (z_y - m) + ln sum exp(beta (z_j - m)), m the
     * maximum; its derivative E_p[z - m] - (z_y - m) */
    double beta = theta[0], m = z[0];
    for (size_t j = 1; j < o->k; j++)
        m = z[j] > m ? z[j] : m;
    double s = 0, e = 0;
    for (size_t j = 0; j < o->k; j++) {
        double w = exp(beta * (z[j] - m));
        s += w;
        e += w * (z[j] - m);
    }
    g[0] = e / s - (z[c] - m);
    return -beta * (z[c] - m) + log(s);
}

/* The learner's coordinates of params in recal.h's order, and back. */
static void coords(const calib_online *o, const double params[2], double theta[2])
{
    theta[1] = params[1];
    theta[0] = o->method == CALIB_ONLINE_TEMPERATURE ? 1 / params[0]
               : o->method == CALIB_ONLINE_VARIANCE  ? log(params[0])
                                                     : params[0];
}

void calib_online_params(const calib_online *o, double params[2])
{
    params[1] = o->method == CALIB_ONLINE_PLATT ? o->theta[1] : 0;
    params[0] = o->method == CALIB_ONLINE_TEMPERATURE ? 1 / o->theta[0]
                : o->method == CALIB_ONLINE_VARIANCE  ? exp(o->theta[0])
                                                      : o->theta[0];
}

double calib_online_loss_of(const calib_online *o, const double params[2], const double *x,
                            double y)
{
    double theta[2], g[2];
    if (check(o, x, y) != CALIB_OK)
        return NAN;
    coords(o, params, theta);
    return loss_grad(o, theta, x, y, g);
}

/* ------------------------------------------------------------ the step */

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The point of the box [lo, hi] nearest p in the norm of A (2 x 2,
 * positive definite): p itself when inside; else the minimiser lies on
 * an edge, and each edge's minimiser is a clamped 1-D quadratic's, so the
 * best of the four is it. */
static void project2(const double a[3], const double lo[2], const double hi[2],
                     const double p[2], double out[2])
{
    if (p[0] >= lo[0] && p[0] <= hi[0] && p[1] >= lo[1] && p[1] <= hi[1]) {
        out[0] = p[0];
        out[1] = p[1];
        return;
    }
    double best = INFINITY;
    for (int e = 0; e < 4; e++) {
        int fixed = e / 2; /* the coordinate held on its bound */
        int free_ = 1 - fixed;
        double q[2];
        q[fixed] = e % 2 ? hi[fixed] : lo[fixed];
        /* minimise over the free coordinate: a_ff (t - p_f) + a_fx (q_x - p_x) = 0 */
        double aff = free_ == 0 ? a[0] : a[2];
        q[free_] = clamp(p[free_] - a[1] * (q[fixed] - p[fixed]) / aff, lo[free_], hi[free_]);
        double d0 = q[0] - p[0], d1 = q[1] - p[1];
        double v = a[0] * d0 * d0 + 2 * a[1] * d0 * d1 + a[2] * d1 * d1;
        if (v < best) {
            best = v;
            out[0] = q[0];
            out[1] = q[1];
        }
    }
}

int calib_online_update(calib_online *o, const double *x, double y)
{
    int rc = check(o, x, y);
    if (rc != CALIB_OK)
        return rc;
    double g[2] = {0, 0};
    double f = loss_grad(o, o->theta, x, y, g);
    if (!isfinite(f) || !isfinite(g[0]) || !isfinite(g[1]))
        return CALIB_ENONFINITE;
    /* ONS's bound needs bounded gradients; one far beyond the bound (Platt's
     * s of two logits 1e6 apart) would also make A so large that the steps
     * after it stop */
    if (o->method != CALIB_ONLINE_VARIANCE &&
        (fabs(g[0]) > CALIB_ONLINE_G_MAX || fabs(g[1]) > CALIB_ONLINE_G_MAX))
        return CALIB_EINVAL;
    calib_ksum_add(&o->loss, f);
    o->n++;
    if (o->method == CALIB_ONLINE_VARIANCE) {
        /* the best w on the pairs so far, with eps pseudo-pairs at w = 1:
         * (eps + sum r) / (eps + n), r = (y - mu)^2 / var: the leader
         * itself, in closed form, where ONS in u = ln w strayed (its
         * gradient 1 - r / w is unbounded: one pair of small r sent w
         * towards 0, and the pairs after it held A too large to come
         * back; BENCHMARKS.md, "Online recalibration") */
        double r = (y - x[0]) * (y - x[0]) / x[1];
        o->a[0] += r;
        o->a[2] += 1;
        o->theta[0] = clamp(log(o->a[0] / o->a[2]), o->lo[0], o->hi[0]);
        return CALIB_OK;
    }
    o->a[0] += g[0] * g[0];
    if (o->d == 1) {
        o->theta[0] = clamp(o->theta[0] - g[0] / (o->gamma * o->a[0]), o->lo[0], o->hi[0]);
        return CALIB_OK;
    }
    o->a[1] += g[0] * g[1];
    o->a[2] += g[1] * g[1];
    /* A^-1 kept by Sherman-Morrison: with u = A^-1 g, (A + g g^T)^-1 =
     * A^-1 - u u^T / (1 + g^T u), and its product with g is u / (1 + g^T
     * u). No determinant, which cancels when A is nearly of rank 1 (a
     * constant p, a small eps) and overflows after a large gradient. */
    double *b = o->ainv;
    double u[2] = {b[0] * g[0] + b[1] * g[1], b[1] * g[0] + b[2] * g[1]};
    double den = 1 + g[0] * u[0] + g[1] * u[1];
    b[0] -= u[0] * u[0] / den;
    b[1] -= u[0] * u[1] / den;
    b[2] -= u[1] * u[1] / den;
    double p[2] = {o->theta[0] - u[0] / (den * o->gamma), o->theta[1] - u[1] / (den * o->gamma)};
    project2(o->a, o->lo, o->hi, p, o->theta);
    return CALIB_OK;
}
