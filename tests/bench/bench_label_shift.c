/*
 * bench_label_shift.c — calibd's label-free estimates and label-shift test
 * (calib_lfree(3), with calibd's defaults) on a K = 5 stream whose class
 * priors shift while its labels are withheld.
 *
 *     mkdir -p build/bench && cd build/bench && ../../configure && \
 *         make tests/bench/bench_label_shift && ./tests/bench/bench_label_shift
 *
 * Options: --seeds N (streams per shift, 20), --null-seeds N and
 * --null-len L (stationary streams for the false-alarm count, 20 of
 * 100,000), --sep S (2), --circle.
 *
 * The stream: x | y = j ~ N(S j, 1) (or, with --circle, x in the plane
 * ~ N(S (cos 2 pi j / 5, sin 2 pi j / 5), I)), and the model's outputs are its exact
 * posteriors under uniform priors (calibrated on the source). 20,000
 * predictions from the uniform priors, their labels known (the reference
 * priors are their class frequencies, smoothed as calibd smooths them),
 * then 20,000 from the target priors, whose labels are never used. Per
 * seed: the alarm's delay after the shift (an alarm before it is a false
 * one); after 10,000 shifted predictions, over the newest 10,000 (the
 * ring), the naive and the corrected Brier estimates against the exact
 * expected Brier of the served outputs (their posteriors under the target
 * priors being known here), and the L1 distance of EM's priors to the
 * target's. The stationary rows run the source for --null-len predictions
 * and count alarms.
 *
 * label_shift_adapt = yes, as calibd does it: label_shift_reference
 * (2,000) predictions after the alarm, EM over the newest 2,000 gives the
 * prior weights (calib_lfree_update_newest), and from then on the served
 * outputs are the weighted ones (calib_prior_weigh). "as is" and "adapt"
 * are the exact expected Brier scores of what is served over the whole
 * shifted phase (20,000 predictions, the unadapted stretch before the
 * publish included) without and with it, "oracle" that of the true
 * posteriors (the best any correction can do), "worst gain" the least
 * 1 - adapt / as is over the seeds; "rollbacks" counts the seeds
 * whose guard (calibd's: a gate at gate_alpha 0.01 testing that the
 * version before does better, scores clipped to [-2, 2], at most 20,000
 * pairs) rolled the adaptation back once the withheld labels came.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/drift.h"
#include "calib/lfree.h"
#include "calib/recal.h"
#include "../label_shift_sim.h"

#define K LSHIFT_K

static double sep = 2;
static int circle;
static double mean[K][2]; /* the classes' means */
static const double uniform[K] = {0.2, 0.2, 0.2, 0.2, 0.2};

static size_t draw(calib_rng *r, const double *tgt, double *ps, double *pt)
{
    return lshift_draw(r, mean, circle ? 2 : 1, uniform, tgt, ps, pt);
}

#define exp_brier lshift_exp_brier

typedef struct result {
    long delay;         /* predictions after the shift; -1: none */
    int false_alarm;
    double naive_err, corr_err, prior_l1;
    double as_is, adapt;  /* exact expected Brier served over the shifted
                             phase, without and with label_shift_adapt */
    double oracle;        /* the true posteriors' (the best correction) */
    int rolled_back;      /* the guard's verdict on the labels */
} result;

/* The Brier score of p for class y. */
static double brier(const double *p, size_t y)
{
    double s = 1;
    for (size_t j = 0; j < K; j++)
        s += p[j] * p[j] - (j == y ? 2 * p[j] : 0);
    return s;
}

/* calibd's model_lfree_weights: EM over the newest label_shift_reference
 * predictions, the weights bounded as calib_prior_weigh takes them. */
static void adapt_weights(calib_lfree *lf, const double *src, double *w)
{
    calib_lfree_update_newest(lf, src, lf->cfg.reference);
    for (size_t j = 0; j < K; j++) {
        double x = lf->weights[j];
        w[j] = !(x >= CALIB_PRIOR_WEIGHT_MIN) ? CALIB_PRIOR_WEIGHT_MIN
               : x > CALIB_PRIOR_WEIGHT_MAX ? CALIB_PRIOR_WEIGHT_MAX : x;
    }
}

static calib_lfree_cfg defaults(void)
{
    return (calib_lfree_cfg){.k = K, .recent = 10000, .alpha = 0.01, .reference = 2000};
}

/* A calib_lfree at calibd's defaults and the stream of this seed. */
static void start(calib_lfree *lf, calib_rng *r, uint64_t seed)
{
    calib_lfree_cfg c = defaults();
    if (calib_lfree_init(lf, &c) != CALIB_OK)
        exit(1);
    calib_rng_seed(r, seed);
}

static result run(const double *tgt, uint64_t seed)
{
    calib_lfree lf;
    calib_rng r;
    start(&lf, &r, seed);
    result res = {.delay = -1};
    double ps[K], pt[K], counts[K] = {0};
    enum { SRC = 20000, TGT = 20000, RING = 10000 };
    for (int i = 0; i < SRC; i++) {
        counts[draw(&r, uniform, ps, pt)] += 1;
        if (calib_lfree_add(&lf, ps))
            res.false_alarm = 1;
    }
    double src[K];
    for (size_t j = 0; j < K; j++)
        src[j] = (counts[j] + 0.5) / (SRC + 0.5 * K);
    /* the exact expectations of the last RING shifted predictions */
    static double keep_p[RING][K], keep_q[RING][K];
    calib_gate guard;
    calib_gate_cfg gc = {.alpha = 0.01, .min_improvement = 0, .lo = -2, .hi = 2,
                         .max_samples = 20000};
    if (calib_gate_init(&guard, &gc) != CALIB_OK)
        exit(1);
    double w[K];
    long adapt_at = -1;
    for (int i = 0; i < TGT; i++) {
        size_t y = draw(&r, tgt, ps, pt);
        if (calib_lfree_add(&lf, ps) && res.delay < 0 && !res.false_alarm) {
            res.delay = i + 1;
            adapt_at = i + 1 + (long)lf.cfg.reference;
        }
        if (i == adapt_at)
            adapt_weights(&lf, src, w);
        double a[K];
        memcpy(a, ps, sizeof a);
        if (adapt_at >= 0 && i >= adapt_at) {
            calib_prior_weigh(w, K, CALIB_FORM_PROBS, K, a);
            calib_gate_add(&guard, brier(a, y), brier(ps, y)); /* in force, before */
        }
        res.as_is += exp_brier(ps, pt) / TGT;
        res.adapt += exp_brier(a, pt) / TGT;
        res.oracle += exp_brier(pt, pt) / TGT;
        if (i >= TGT - RING) {
            memcpy(keep_p[i - (TGT - RING)], ps, sizeof ps);
            memcpy(keep_q[i - (TGT - RING)], pt, sizeof pt);
        }
    }
    res.rolled_back = guard.state == CALIB_GATE_PASSED;
    calib_lfree_update(&lf, src);
    double truth = 0;
    for (int i = 0; i < RING; i++)
        truth += exp_brier(keep_p[i], keep_q[i]);
    truth /= RING;
    res.naive_err = fabs(lf.fig.naive[CALIB_LFREE_MAIN].mean - truth);
    res.corr_err = fabs(lf.fig.corrected_est[CALIB_LFREE_MAIN].mean - truth);
    for (size_t j = 0; j < K; j++)
        res.prior_l1 += fabs(lf.priors[j] - tgt[j]);
    calib_lfree_free(&lf);
    return res;
}

static long null_alarms(uint64_t seed, long len)
{
    calib_lfree lf;
    calib_rng r;
    start(&lf, &r, seed);
    double ps[K], pt[K];
    for (long i = 0; i < len; i++) {
        draw(&r, uniform, ps, pt);
        calib_lfree_add(&lf, ps);
    }
    long n = (long)lf.alarms;
    calib_lfree_free(&lf);
    return n;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int seeds = 20, null_seeds = 20;
    long null_len = 100000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--null-seeds") && i + 1 < argc)
            null_seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--null-len") && i + 1 < argc)
            null_len = atol(argv[++i]);
        else if (!strcmp(argv[i], "--sep") && i + 1 < argc)
            sep = atof(argv[++i]);
        else if (!strcmp(argv[i], "--circle"))
            circle = 1;
        else {
            fprintf(stderr, "usage: %s [--seeds N] [--null-seeds N] [--null-len L] [--sep S] "
                            "[--circle]\n", argv[0]);
            return 2;
        }
    }
    if (seeds < 1 || seeds > 1000 || null_seeds < 0 || null_len < 1 || !(sep > 0))
        return 2;
    for (int j = 0; j < K; j++) {
        double a = 2 * 3.14159265358979323846 * j / K;
        mean[j][0] = circle ? sep * cos(a) : sep * j;
        mean[j][1] = circle ? sep * sin(a) : 0;
    }
    static const struct {
        const char *name;
        double p[K];
    } shifts[] = {{"0.5/0.2/0.15/0.1/0.05", {0.5, 0.2, 0.15, 0.1, 0.05}},
                  {"0.3/0.25/0.2/0.15/0.1 (mild)", {0.3, 0.25, 0.2, 0.15, 0.1}}};
    printf("K = 5, class means %s %g, %d seeds a shift; calib_lfree at calibd's defaults\n\n",
           circle ? "on a circle of radius" : "on a line,", sep, seeds);
    printf("| shift | detected | delay median | delay max | false alarms | naive err | "
           "corrected err | worst corr/naive | priors L1 max | as is | adapt | oracle | worst gain | "
           "rollbacks |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof shifts / sizeof *shifts; s++) {
        long delays[1000];
        int det = 0, fa = 0;
        double ne = 0, ce = 0, worst = 0, l1 = 0, as_is = 0, adapt = 0, oracle = 0;
        double least = INFINITY;
        int rollbacks = 0;
        for (int i = 0; i < seeds; i++) {
            result r = run(shifts[s].p, 1000 + (uint64_t)i);
            fa += r.false_alarm;
            if (r.delay >= 0)
                delays[det++] = r.delay;
            ne += r.naive_err / seeds;
            ce += r.corr_err / seeds;
            worst = r.corr_err / r.naive_err > worst ? r.corr_err / r.naive_err : worst;
            l1 = r.prior_l1 > l1 ? r.prior_l1 : l1;
            as_is += r.as_is / seeds;
            adapt += r.adapt / seeds;
            oracle += r.oracle / seeds;
            least = 1 - r.adapt / r.as_is < least ? 1 - r.adapt / r.as_is : least;
            rollbacks += r.rolled_back;
        }
        qsort(delays, (size_t)det, sizeof *delays, cmp_long);
        printf("| %s | %d/%d | %ld | %ld | %d | %.5f | %.5f | %.2f | %.4f | %.4f | %.4f | %.4f | "
               "%.1f%% | %d |\n",
               shifts[s].name, det, seeds, det ? delays[det / 2] : -1L,
               det ? delays[det - 1] : -1L, fa, ne, ce, worst, l1, as_is, adapt, oracle, 100 * least,
               rollbacks);
    }
    long alarms = 0;
    for (int i = 0; i < null_seeds; i++)
        alarms += null_alarms(5000 + (uint64_t)i, null_len);
    printf("\nstationary: %ld alarms in %d streams of %ld predictions\n", alarms, null_seeds,
           null_len);
    return 0;
}
