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
 * and count alarms. The "served" columns: the exact expected Brier of the
 * outputs as served and of the adapted posteriors p'_k proportional to
 * (pi_t,k / pi_s,k) p_k under EM's priors: what serving the adaptation
 * would give, without a label.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/lfree.h"
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
    double served, adapted; /* exact expected Brier, as served and adapted */
} result;

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
    for (int i = 0; i < TGT; i++) {
        draw(&r, tgt, ps, pt);
        if (calib_lfree_add(&lf, ps) && res.delay < 0 && !res.false_alarm)
            res.delay = i + 1;
        if (i >= TGT - RING) {
            memcpy(keep_p[i - (TGT - RING)], ps, sizeof ps);
            memcpy(keep_q[i - (TGT - RING)], pt, sizeof pt);
        }
    }
    calib_lfree_update(&lf, src);
    double truth = 0, adapted = 0;
    double w[K];
    for (size_t j = 0; j < K; j++)
        w[j] = lf.priors[j] / src[j];
    for (int i = 0; i < RING; i++) {
        truth += exp_brier(keep_p[i], keep_q[i]);
        double a[K], d = 0;
        for (size_t j = 0; j < K; j++)
            d += a[j] = w[j] * keep_p[i][j];
        for (size_t j = 0; j < K; j++)
            a[j] /= d;
        adapted += exp_brier(a, keep_q[i]);
    }
    truth /= RING;
    res.served = truth;
    res.adapted = adapted / RING;
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
           "corrected err | worst corr/naive | priors L1 max | served Brier | adapted Brier |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof shifts / sizeof *shifts; s++) {
        long delays[1000];
        int det = 0, fa = 0;
        double ne = 0, ce = 0, worst = 0, l1 = 0, served = 0, adapted = 0;
        for (int i = 0; i < seeds; i++) {
            result r = run(shifts[s].p, 1000 + (uint64_t)i);
            fa += r.false_alarm;
            if (r.delay >= 0)
                delays[det++] = r.delay;
            ne += r.naive_err / seeds;
            ce += r.corr_err / seeds;
            worst = r.corr_err / r.naive_err > worst ? r.corr_err / r.naive_err : worst;
            l1 = r.prior_l1 > l1 ? r.prior_l1 : l1;
            served += r.served / seeds;
            adapted += r.adapted / seeds;
        }
        qsort(delays, (size_t)det, sizeof *delays, cmp_long);
        printf("| %s | %d/%d | %ld | %ld | %d | %.5f | %.5f | %.2f | %.4f | %.4f | %.4f |\n",
               shifts[s].name, det, seeds, det ? delays[det / 2] : -1L,
               det ? delays[det - 1] : -1L, fa, ne, ce, worst, l1, served, adapted);
    }
    long alarms = 0;
    for (int i = 0; i < null_seeds; i++)
        alarms += null_alarms(5000 + (uint64_t)i, null_len);
    printf("\nstationary: %ld alarms in %d streams of %ld predictions\n", alarms, null_seeds,
           null_len);
    return 0;
}
