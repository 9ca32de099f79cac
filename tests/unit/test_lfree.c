/* test_lfree.c — label-free estimates: the identities by hand, EM's
 * priors and the corrected estimates on a simulated label shift against
 * the exact expectations, the priors' intervals, the shift test's silence
 * on a stationary stream and its alarm after a shift, Gaussian forecasts,
 * a K beyond the test's, and bad configurations. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/lfree.h"
#include "../label_shift_sim.h"

#define K LSHIFT_K

/* x | y = j ~ N(2 j, 1) (label_shift_sim.h) */
static const double line[K][2] = {{0, 0}, {2, 0}, {4, 0}, {6, 0}, {8, 0}};

static void draw(calib_rng *r, const double *src, const double *tgt, double *ps, double *pt)
{
    lshift_draw(r, line, 1, src, tgt, ps, pt);
}

#define exp_brier lshift_exp_brier

static const double uniform[K] = {0.2, 0.2, 0.2, 0.2, 0.2};
static const double shifted[K] = {0.5, 0.2, 0.15, 0.1, 0.05};

static void test_bad_cfg(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg ok = {.k = K, .recent = 100, .alpha = 0.01, .reference = 800};
    assert_int_equal(calib_lfree_init(&lf, &ok), CALIB_OK);
    assert_true(calib_lfree_bytes(&ok) + calib_lfree_ring_bytes(&ok) >= 100 * K * sizeof(float));
    calib_lfree_free(&lf);
    calib_lfree_cfg bad[] = {
        {.k = 1, .recent = 10},
        {.k = K, .recent = 0},
        {.k = K, .recent = 10, .alpha = 1},
        {.k = K, .recent = 10, .alpha = -0.1},
        {.k = K, .recent = 10, .alpha = 0.01, .reference = 9}, /* under 10 */
        {.k = K, .recent = SIZE_MAX / 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(calib_lfree_init(&lf, &bad[i]), CALIB_EINVAL);
        assert_int_equal(calib_lfree_bytes(&bad[i]), 0);
        calib_lfree_free(&lf); /* zeroed: a no-op */
    }
}

/* Two records by hand: the naive figures are the identities, their
 * intervals the per-record variances' sums. */
static void test_identities(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = 3, .recent = 4};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    calib_lfree_update(&lf, NULL);
    assert_int_equal(lf.fig.n, 0);
    assert_nan(lf.fig.naive[CALIB_LFREE_MAIN].mean);
    const double rows[2][3] = {{0.5, 0.25, 0.25}, {0.125, 0.75, 0.125}}; /* exact in float */
    for (int i = 0; i < 2; i++)
        assert_int_equal(calib_lfree_add(&lf, rows[i]), 0);
    calib_lfree_update(&lf, NULL);
    assert_int_equal(lf.fig.n, 2);
    double brier = 0, vb = 0, lg = 0, vl = 0, acc = 0, va = 0;
    for (int i = 0; i < 2; i++) {
        const double *p = rows[i];
        double s2 = 0, s3 = 0, h = 0, h2 = 0, top = 0;
        for (int j = 0; j < 3; j++) {
            s2 += p[j] * p[j];
            s3 += p[j] * p[j] * p[j];
            h -= p[j] * log(p[j]);
            h2 += p[j] * log(p[j]) * log(p[j]);
            top = p[j] > top ? p[j] : top;
        }
        brier += 1 - s2;
        vb += 4 * (s3 - s2 * s2);
        lg += h;
        vl += h2 - h * h;
        acc += top;
        va += top * (1 - top);
    }
    const calib_lfree_est *f = lf.fig.naive;
    assert_close(f[CALIB_LFREE_MAIN].mean, brier / 2, 1e-12);
    assert_close(f[CALIB_LFREE_MAIN].hi - f[CALIB_LFREE_MAIN].mean, CALIB_Z95 * sqrt(vb) / 2,
                 1e-12);
    assert_close(f[CALIB_LFREE_LOG].mean, lg / 2, 1e-12);
    assert_close(f[CALIB_LFREE_LOG].mean - f[CALIB_LFREE_LOG].lo, CALIB_Z95 * sqrt(vl) / 2,
                 1e-12);
    assert_close(f[CALIB_LFREE_ACC].mean, acc / 2, 1e-12);
    assert_close(f[CALIB_LFREE_ACC].hi - f[CALIB_LFREE_ACC].mean, CALIB_Z95 * sqrt(va) / 2,
                 1e-12);
    /* no reference: the priors are the mean of the outputs */
    assert_close(lf.priors[1], (0.25 + 0.75) / 2, 1e-12);
    assert_int_equal(lf.fig.corrected, 0);
    /* the ring keeps the newest 4: five more rows of the second kind */
    for (int i = 0; i < 5; i++)
        calib_lfree_add(&lf, rows[1]);
    calib_lfree_update(&lf, NULL);
    assert_int_equal(lf.fig.n, 4);
    assert_close(lf.fig.naive[CALIB_LFREE_ACC].mean, 0.75, 1e-12);
    /* with the reference priors equal to the mix: EM stays, corrected = naive */
    double mix[3] = {0.125, 0.75, 0.125};
    calib_lfree_update(&lf, mix);
    assert_int_equal(lf.fig.corrected, 1);
    assert_true(lf.fig.em_converged);
    assert_close(lf.fig.corrected_est[CALIB_LFREE_MAIN].mean,
                 lf.fig.naive[CALIB_LFREE_MAIN].mean, 1e-9);
    calib_lfree_free(&lf);
}

/*
 * The stream: source priors uniform, target priors 0.5 / 0.2 /
 * 0.15 / 0.1 / 0.05, outputs calibrated on the source. After 10,000
 * predictions EM's priors are within 0.02 of the truth and inside their
 * intervals; the corrected Brier is within 30% of the naive one's error of
 * the exact expected Brier on the same predictions; on an unshifted
 * stream both agree.
 */
static void test_label_shift(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = K, .recent = 10000};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 39);
    double ps[K], pt[K], truth = 0, truth_acc = 0;
    for (int i = 0; i < 10000; i++) {
        draw(&r, uniform, shifted, ps, pt);
        calib_lfree_add(&lf, ps);
        truth += exp_brier(ps, pt);
        truth_acc += pt[calib_argmax(ps, K)];
    }
    truth /= 10000;
    truth_acc /= 10000;
    calib_lfree_update(&lf, uniform);
    assert_int_equal(lf.fig.corrected, 1);
    assert_true(lf.fig.em_converged);
    for (size_t j = 0; j < K; j++) {
        assert_close(lf.priors[j], shifted[j], 0.02);
        assert_true(lf.prior_lo[j] <= shifted[j] && shifted[j] <= lf.prior_hi[j]);
        assert_true(lf.prior_hi[j] - lf.prior_lo[j] < 0.1);
    }
    double naive_err = fabs(lf.fig.naive[CALIB_LFREE_MAIN].mean - truth);
    double corr_err = fabs(lf.fig.corrected_est[CALIB_LFREE_MAIN].mean - truth);
    assert_true(naive_err > 0.005);
    assert_true(corr_err < 0.3 * naive_err);
    assert_true(fabs(lf.fig.corrected_est[CALIB_LFREE_ACC].mean - truth_acc) <
                0.3 * fabs(lf.fig.naive[CALIB_LFREE_ACC].mean - truth_acc));
    /* warm: a second update starts from these priors and stops at once */
    calib_lfree_update(&lf, uniform);
    assert_true(lf.fig.em_passes <= 2);
    calib_lfree_free(&lf);

    /* no shift: the corrected estimate agrees with the naive one */
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    for (int i = 0; i < 10000; i++) {
        draw(&r, uniform, uniform, ps, pt);
        calib_lfree_add(&lf, ps);
    }
    calib_lfree_update(&lf, uniform);
    assert_close(lf.fig.corrected_est[CALIB_LFREE_MAIN].mean,
                 lf.fig.naive[CALIB_LFREE_MAIN].mean, 0.003);
    for (size_t j = 0; j < K; j++)
        assert_close(lf.priors[j], 0.2, 0.03);
    calib_lfree_free(&lf);
}

/* The newest n alone: a ring of 6,000 uniform then 2,000 shifted (wrapped:
 * capacity 5,000) gives, over the newest 2,000, the shifted priors, and
 * over the whole ring a mix; the records are the same either way. */
static void test_update_newest(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = K, .recent = 5000};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 41);
    double ps[K], pt[K];
    for (int i = 0; i < 8000; i++) {
        draw(&r, uniform, i < 6000 ? uniform : shifted, ps, pt);
        calib_lfree_add(&lf, ps);
    }
    calib_lfree_update_newest(&lf, uniform, 2000);
    assert_true(lf.fig.n == 2000 && lf.fig.corrected);
    double l1 = 0;
    for (size_t j = 0; j < K; j++)
        l1 += fabs(lf.priors[j] - shifted[j]);
    assert_true(l1 < 0.1);
    calib_lfree_update(&lf, uniform);
    assert_true(lf.fig.n == 5000);
    /* 3,000 uniform, 2,000 shifted: the first prior in between */
    double mix = 0.6 * 0.2 + 0.4 * shifted[0];
    assert_close(lf.priors[0], mix, 0.04);
    /* more than the ring holds: the ring */
    calib_lfree_update_newest(&lf, uniform, 1000000);
    assert_true(lf.fig.n == 5000);
    assert_close(lf.priors[0], mix, 0.04);
    calib_lfree_free(&lf);
}

/* Stationary for 30,000 predictions: no alarm (a fixed seed of a level
 * 0.01 test). Then the shift: the alarm within 3,000 predictions; a reset
 * clears it and a stationary stream of the new mix stays quiet. */
static void test_shift_alarm(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = K, .recent = 1000, .alpha = 0.01, .reference = 2000};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 3939);
    double ps[K], pt[K];
    for (int i = 0; i < 30000; i++) {
        draw(&r, uniform, uniform, ps, pt);
        assert_int_equal(calib_lfree_add(&lf, ps), 0);
    }
    assert_true(calib_lfree_log_e(&lf) < log(1 / 0.01));
    int at = -1;
    for (int i = 0; i < 3000 && at < 0; i++) {
        draw(&r, uniform, shifted, ps, pt);
        if (calib_lfree_add(&lf, ps))
            at = i;
    }
    assert_true(at >= 0);
    assert_int_equal(lf.alarm, 1);
    assert_int_equal(lf.alarms, 1);
    assert_true(calib_lfree_log_e(&lf) >= log(1 / 0.01));
    /* latched: more shifted predictions raise nothing new */
    for (int i = 0; i < 100; i++) {
        draw(&r, uniform, shifted, ps, pt);
        assert_int_equal(calib_lfree_add(&lf, ps), 0);
    }
    calib_lfree_test_reset(&lf);
    assert_int_equal(lf.alarm, 0);
    assert_true(calib_lfree_log_e(&lf) == 0);
    for (int i = 0; i < 20000; i++) {
        draw(&r, uniform, shifted, ps, pt);
        assert_int_equal(calib_lfree_add(&lf, ps), 0);
    }
    assert_int_equal(lf.alarms, 1);
    calib_lfree_free(&lf);
}

static double log_kt3(const int *cls, int from, int to)
{
    /* ln KT of the samples cls[from..to): lgamma's closed form */
    double n[3] = {0, 0, 0};
    for (int i = from; i < to; i++)
        n[cls[i]]++;
    double v = lgamma(1.5) - lgamma((to - from) + 1.5);
    for (int j = 0; j < 3; j++)
        v += lgamma(n[j] + 0.5) - lgamma(0.5);
    return v;
}

/* calib_lfree_add_top with the top class found by the caller is
 * calib_lfree_add: the same records, the same e-values, the same alarm. */
static void test_add_top(void **state)
{
    (void)state;
    calib_lfree a, b;
    calib_lfree_cfg c = {.k = K, .recent = 500, .alpha = 0.01, .reference = 1000};
    assert_int_equal(calib_lfree_init(&a, &c), CALIB_OK);
    assert_int_equal(calib_lfree_init(&b, &c), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 77);
    double ps[K], pt[K];
    int alarms = 0;
    for (int i = 0; i < 6000; i++) {
        draw(&r, uniform, i < 3000 ? uniform : shifted, ps, pt);
        int x = calib_lfree_add(&a, ps), y = calib_lfree_add_top(&b, ps, calib_argmax(ps, K));
        assert_int_equal(x, y);
        alarms += x;
        assert_true(calib_lfree_log_e(&a) == calib_lfree_log_e(&b));
    }
    assert_int_equal(alarms, 1); /* the shift was seen, by both alike */
    assert_memory_equal(a.rec, b.rec, 500 * K * sizeof *a.rec);
    assert_memory_equal(a.sums, b.sums, sizeof a.sums);
    assert_int_equal(calib_lfree_add_top(&b, ps, K), 0); /* a top out of range: not counted */
    calib_lfree_free(&a);
    calib_lfree_free(&b);
}

/* The test's statistic by hand: K = 3, segments every 10 predictions, the
 * evaluation at prediction 266 (the first at 10, then every 256): max over
 * the 4 segments kept, started at 230, 240, 250 and 260 (the 23rd to the
 * 26th), of ln w_j + ln KT(before) + ln KT(after) - ln L(pooled MLE). */
#define STAT_N 266
static void test_statistic(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = 3, .recent = 8, .alpha = 1e-9, .reference = 10};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    int cls[STAT_N];
    for (int i = 0; i < STAT_N; i++) {
        cls[i] = i < 245 ? i % 3 : 0; /* mixed, then 0 alone */
        double p[3] = {0.1, 0.1, 0.1};
        p[cls[i]] = 0.8;
        assert_int_equal(calib_lfree_add(&lf, p), 0);
        if (i == STAT_N - 2)
            assert_true(calib_lfree_log_e(&lf) == 0); /* not evaluated since 10 */
    }
    double n[3] = {0, 0, 0}, mle = 0, best = -INFINITY;
    for (int i = 0; i < STAT_N; i++)
        n[cls[i]]++;
    for (int j = 0; j < 3; j++)
        mle += n[j] * log(n[j] / STAT_N);
    for (int j = 23; j <= 26; j++) {
        int start = 10 * j;
        double e = -log(j * (j + 1.0)) + log_kt3(cls, 0, start) + log_kt3(cls, start, STAT_N) -
                   mle;
        best = e > best ? e : best;
    }
    assert_int_equal(lf.nseg, 4);
    assert_close(calib_lfree_log_e(&lf), best > 0 ? best : 0, 1e-9);
    assert_true(best > 0); /* the sequence does move */
    calib_lfree_free(&lf);
}

/* EM on outputs at the edge of the simplex ends (libFuzzer found
 * SQUAREM's step, rounded below 0 at a = -1, halving for ever). */
static void test_em_degenerate(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = 3, .recent = 8};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    double z[3] = {10, 0, -10}, p[3], one[3] = {1, 0, 0};
    calib_softmax(z, 3, p);
    calib_lfree_add(&lf, p);
    double src[3] = {0.2, 0.2, 0.6};
    calib_lfree_update(&lf, src);
    double sum = 0;
    for (int j = 0; j < 3; j++) {
        assert_true(isfinite(lf.priors[j]) && lf.priors[j] >= 0);
        sum += lf.priors[j];
    }
    assert_close(sum, 1, 1e-9);
    calib_lfree_add(&lf, one);
    calib_lfree_update(&lf, src);
    assert_int_equal(lf.fig.n, 2);
    calib_lfree_free(&lf);
}

/* Gaussian forecasts: E[DSS] = 1 + ln v, an interval of half-width
 * 1.96 sqrt(2 / n). */
static void test_gaussian(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = 0, .recent = 8};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    double rows[2][2] = {{3, 0.5}, {-1, 4}};
    calib_lfree_add(&lf, rows[0]);
    calib_lfree_add(&lf, rows[1]);
    calib_lfree_update(&lf, NULL);
    const calib_lfree_est *e = &lf.fig.naive[CALIB_LFREE_MAIN];
    assert_close(e->mean, 1 + (log(0.5) + log(4)) / 2, 1e-12);
    assert_close(e->hi - e->mean, CALIB_Z95 * sqrt(2.0 / 2), 1e-12);
    assert_nan(lf.fig.naive[CALIB_LFREE_LOG].mean);
    assert_int_equal(lf.fig.corrected, 0);
    assert_false(lf.test_on); /* a Gaussian has no classes */
    calib_lfree_free(&lf);
}

/* K past the priors' intervals: the priors by EM without them, and the
 * test, which costs O(1) a prediction at any K. */
static void test_large_k(void **state)
{
    (void)state;
    enum { BIG = CALIB_LFREE_INTERVAL_MAX_K + 1 };
    calib_lfree lf;
    calib_lfree_cfg c = {.k = BIG, .recent = 50, .alpha = 0.01, .reference = 800};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    assert_true(lf.test_on);
    double p[BIG], src[BIG];
    for (size_t j = 0; j < BIG; j++) {
        p[j] = j == 0 ? 0.5 : 0.5 / (BIG - 1);
        src[j] = 1.0 / BIG;
    }
    for (int i = 0; i < 60; i++)
        assert_int_equal(calib_lfree_add(&lf, p), 0);
    calib_lfree_update(&lf, src);
    assert_int_equal(lf.fig.n, 50);
    assert_int_equal(lf.fig.corrected, 1);
    assert_true(isfinite(lf.priors[0]) && lf.priors[0] > 1.0 / BIG);
    assert_nan(lf.prior_lo[0]);
    calib_lfree_free(&lf);
}

/* The ring doubles from its first records, its growth taken from the
 * budget and given back; refused, it stops and wraps where it is. */
static void test_growth(void **state)
{
    (void)state;
    calib_budget b;
    size_t rec = K * sizeof(float);
    calib_budget_init(&b, 48 * rec, NULL); /* room for 16 + 32 more, not 64 */
    calib_lfree lf;
    calib_lfree_cfg c = {.k = K, .recent = 1000, .budget = &b};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    assert_int_equal(calib_lfree_ring_bytes(&c), (1000 - CALIB_LFREE_FIRST) * rec);
    assert_int_equal(lf.alloc, CALIB_LFREE_FIRST);
    assert_int_equal(b.used, 0);
    double p[K] = {0.6, 0.1, 0.1, 0.1, 0.1}, q[K] = {0.2, 0.2, 0.2, 0.2, 0.2};
    for (int i = 0; i < 100; i++)
        calib_lfree_add(&lf, i < 90 ? p : q);
    /* 16 -> 32 (16 more) -> 64 (32 more) -> 128 refused: 64 kept */
    assert_int_equal(lf.alloc, 64);
    assert_int_equal(b.used, 48 * rec);
    assert_true(b.refused >= 1);
    assert_int_equal(calib_lfree_len(&lf), 64);
    calib_lfree_update(&lf, NULL);
    /* the newest 64: 54 of p, 10 of q */
    assert_close(lf.fig.naive[CALIB_LFREE_ACC].mean, (54 * 0.6 + 10 * 0.2) / 64, 1e-6);
    calib_lfree_free(&lf);
    assert_int_equal(b.used, 0);
}

/* A row of logits recorded in float: within a few float ulps of the
 * double softmax rounded (what calib_lfree_add keeps), at every K around
 * the lanes' width and beyond, with classes far below the maximum (float
 * exp's range left) and ties; the test sees the same classes. */
static void test_logits_row(void **state)
{
    (void)state;
    static const size_t ks[] = {2, 3, 7, 8, 9, 10, 16, 17, 100, 1000};
    calib_rng r;
    calib_rng_seed(&r, 11);
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        size_t k = ks[t];
        calib_lfree a, b;
        calib_lfree_cfg c = {.k = k, .recent = 64, .alpha = 0.01, .reference = 10};
        assert_int_equal(calib_lfree_init(&a, &c), CALIB_OK);
        assert_int_equal(calib_lfree_init(&b, &c), CALIB_OK);
        double *z = malloc(k * sizeof *z), *p = malloc(k * sizeof *p);
        assert_non_null(z);
        assert_non_null(p);
        for (int i = 0; i < 200; i++) {
            double spread = i % 4 == 0 ? 60 : i % 4 == 1 ? 3 : 0.5;
            for (size_t j = 0; j < k; j++)
                z[j] = spread * calib_rng_normal(&r) + 40;
            if (i % 5 == 0)
                z[k - 1] = z[0]; /* a tie for the top: the lowest class */
            calib_softmax(z, k, p);
            assert_int_equal(calib_lfree_add_logits(&a, z), calib_lfree_add(&b, p));
            const float *ra = a.rec + (size_t)((a.total - 1) % a.cap) * k;
            const float *rb = b.rec + (size_t)((b.total - 1) % b.cap) * k;
            for (size_t j = 0; j < k; j++) {
                double tol = 4 * 0x1p-24 * rb[j] + 2e-38;
                if (fabs((double)ra[j] - rb[j]) > tol)
                    fail_msg("K = %zu row %d class %zu: %.9g, the double's %.9g", k, i, j,
                             (double)ra[j], (double)rb[j]);
            }
        }
        assert_int_equal(a.alarms, b.alarms);
        assert_int_equal(a.test_n, b.test_n);
        /* logits so large that zmax - 1000 is zmax: the padded lanes of
         * the tail still weigh nothing */
        for (size_t j = 0; j < k; j++)
            z[j] = j == 0 ? 1e19 : j == 1 ? 1e19 - 1e6 : 0;
        calib_softmax(z, k, p);
        calib_lfree_add_logits(&a, z);
        calib_lfree_add(&b, p);
        const float *ra = a.rec + (size_t)((a.total - 1) % a.cap) * k;
        for (size_t j = 0; j < k; j++)
            assert_true(ra[j] == (float)p[j]);
        free(z);
        free(p);
        calib_lfree_free(&a);
        calib_lfree_free(&b);
    }
}

/* The newest record's expected Brier: 1 - sum p^2, and under the
 * priors of an update 1 - 2 q.p + sum p^2 (q_j proportional to w_j p_j),
 * and with weights u on the served outputs, those of p'_j ~ u_j p_j. */
static void test_newest_expected(void **state)
{
    (void)state;
    calib_lfree lf;
    calib_lfree_cfg c = {.k = K, .recent = 100};
    assert_int_equal(calib_lfree_init(&lf, &c), CALIB_OK);
    double est[2];
    calib_lfree_newest_expected(&lf, NULL, est);
    assert_nan(est[0]);
    calib_rng r;
    calib_rng_seed(&r, 5);
    double ps[K], pt[K];
    for (int i = 0; i < 100; i++) {
        draw(&r, uniform, shifted, ps, pt);
        calib_lfree_add(&lf, ps);
    }
    calib_lfree_update(&lf, uniform);
    assert_int_equal(lf.fig.corrected, 1);
    const double p[K] = {0.5, 0.25, 0.125, 0.0625, 0.0625}; /* exact in float */
    const double u[K] = {2, 1, 0.5, 1, 1};
    calib_lfree_add(&lf, p);
    calib_lfree_newest_expected(&lf, NULL, est);
    double sq = 0, d = 0, qp = 0;
    for (int j = 0; j < K; j++) {
        sq += p[j] * p[j];
        d += lf.weights[j] * p[j];
    }
    for (int j = 0; j < K; j++)
        qp += lf.weights[j] * p[j] / d * p[j];
    assert_close(est[0], 1 - sq, 1e-15);
    assert_close(est[1], 1 - 2 * qp + sq, 1e-15);
    /* served p' ~ u p; labels q' ~ (w / u) p' ~ w p */
    double pp[K], s = 0, sq2 = 0, qp2 = 0;
    for (int j = 0; j < K; j++)
        s += pp[j] = u[j] * p[j];
    for (int j = 0; j < K; j++) {
        pp[j] /= s;
        sq2 += pp[j] * pp[j];
        qp2 += lf.weights[j] * p[j] / d * pp[j];
    }
    calib_lfree_newest_expected(&lf, u, est);
    assert_close(est[0], 1 - sq2, 1e-15);
    assert_close(est[1], 1 - 2 * qp2 + sq2, 1e-15);
    calib_lfree_free(&lf);
    /* a Gaussian forecast: E[DSS] = 1 + ln v */
    calib_lfree_cfg g = {.k = 0, .recent = 10};
    assert_int_equal(calib_lfree_init(&lf, &g), CALIB_OK);
    const double mv[2] = {3, 0.25};
    calib_lfree_add_logits(&lf, mv); /* not logits: recorded as given */
    calib_lfree_newest_expected(&lf, NULL, est);
    assert_close(est[0], 1 + log(0.25), 1e-15);
    assert_close(est[1], est[0], 0);
    calib_lfree_free(&lf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_cfg),     cmocka_unit_test(test_identities),
        cmocka_unit_test(test_label_shift),
        cmocka_unit_test(test_update_newest), cmocka_unit_test(test_shift_alarm),
        cmocka_unit_test(test_gaussian),    cmocka_unit_test(test_large_k),
        cmocka_unit_test(test_growth),       cmocka_unit_test(test_statistic),
        cmocka_unit_test(test_em_degenerate), cmocka_unit_test(test_logits_row),
        cmocka_unit_test(test_newest_expected), cmocka_unit_test(test_add_top),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
