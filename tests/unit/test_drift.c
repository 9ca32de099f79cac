/* test_drift.c — the betting e-process (arithmetic, bounds on adversarial
 * input, power), the drift detector (the paired e-processes of MEAN by
 * hand, their schedule and ring, EXCEED's formulas, false-alarm rates over
 * fixed seeds, detection delay and change estimate, reset) and the shadow
 * gate (power, futility, false-pass rate over fixed seeds). */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/drift.h"
#include "calib/recal.h"

#define K 10 /* classes of the simulated classifier */

/* ------------------------------------------------------------------ helpers */

/* The smallest k with P(Binomial(n, p) <= k) >= q: how many of n
 * independent level-p tests may reject before the level is in doubt. */
static unsigned binom_quantile(unsigned n, double p, double q)
{
    double cdf = 0;
    for (unsigned k = 0; k <= n; k++) {
        double lpmf = lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) +
                      k * log(p) + (n - k) * log1p(-p);
        cdf += exp(lpmf);
        if (cdf >= q)
            return k;
    }
    return n;
}

/* Logits z ~ N(0, sigma^2) per class; y ~ softmax(z / t). t = 1 is a
 * perfectly calibrated classifier, t > 1 one that is overconfident. */
static size_t draw_classifier_sigma(calib_rng *r, double sigma, double t, double *z)
{
    double q[K];
    for (size_t j = 0; j < K; j += 2) {
        unit_normal2(r, &z[j], &z[j + 1]);
        z[j] *= sigma, z[j + 1] *= sigma;
    }
    for (size_t j = 0; j < K; j++)
        q[j] = z[j] / t;
    calib_softmax(q, K, q);
    return calib_rng_categorical(r, q, K);
}

/* sigma = 2 */
static size_t draw_classifier(calib_rng *r, double t, double *z)
{
    return draw_classifier_sigma(r, 2, t, z);
}

/* The Brier score of the raw logits on one draw. */
static double classifier_brier_sigma(calib_rng *r, double sigma, double t)
{
    double z[K], p[K];
    calib_score s;
    size_t y = draw_classifier_sigma(r, sigma, t, z);
    calib_score_logits(z, K, y, p, &s);
    return s.brier;
}

static double classifier_brier(calib_rng *r, double t)
{
    return classifier_brier_sigma(r, 2, t);
}

/* A Gaussian model: mean ~ N(0, 1), var = exp(N(0, 0.5)) (variance 0.5),
 * y ~ N(mean, inflate * var); its Dawid-Sebastiani score. inflate = 1 is a
 * calibrated model. */
static double gaussian_dss(calib_rng *r, double inflate)
{
    double a, b, c, unused;
    unit_normal2(r, &a, &b);
    unit_normal2(r, &c, &unused);
    double mean = a, var = exp(sqrt(0.5) * b);
    double y = mean + sqrt(inflate * var) * c;
    return calib_score_dss(mean, var, y);
}

static calib_drift_cfg mean_cfg(double alpha, double min_effect)
{
    /* restart = reference, as calibd runs it */
    return (calib_drift_cfg){.kind = CALIB_DRIFT_MEAN, .lo = 0, .hi = 2,
                             .alpha = alpha, .min_effect = min_effect,
                             .reference = 1000, .restart = 1000};
}

static calib_drift_cfg exceed_cfg(double alpha, double min_effect)
{
    return (calib_drift_cfg){.kind = CALIB_DRIFT_EXCEED, .alpha = alpha,
                             .min_effect = min_effect, .quantile = 0.9,
                             .reference = 1000, .restart = 1000};
}

/* ------------------------------------------------------------------ e-process */

static void eproc_arguments(void **state)
{
    calib_eproc e;
    assert_int_equal(calib_eproc_init(NULL, 0, 1, 0.5), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 0, 1, 0), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 0, 1, 1), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 1, 0, 0.5), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, NAN, 1, 0.5), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 0, NAN, 0.5), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 0, 1, NAN), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, -INFINITY, 1, 0.5), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 0, INFINITY, 0.5), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, -1e308, 1e308, 0), CALIB_EINVAL);
    /* u could reach (hi - m) / (m - lo) = 1e310 */
    assert_int_equal(calib_eproc_init(&e, 0, 1e10, 1e-300), CALIB_EINVAL);
    assert_int_equal(calib_eproc_init(&e, 0, 1, 0.5), CALIB_OK);
    assert_true(e.lo == 0 && e.hi == 1 && e.m == 0.5 && e.a == 1);
    assert_true(e.lambda == 0 && e.log_wealth == 0 && e.n == 0);
    assert_true(e.min_log_wealth == 0 && e.argmin == 0);
    e.log_wealth = 10; /* e^10 > 1 / alpha for every alpha tested here */
    assert_int_equal(calib_eproc_rejects(&e, 0.01), 1);
    assert_int_equal(calib_eproc_rejects(&e, 0), 0);
    assert_int_equal(calib_eproc_rejects(&e, 1), 0);
    assert_int_equal(calib_eproc_rejects(&e, NAN), 0);
    assert_int_equal(calib_eproc_rejects(NULL, 0.01), 0);
    e.log_wealth = log(100) - 1e-9;
    assert_int_equal(calib_eproc_rejects(&e, 0.01), 0);
    e.log_wealth = log(100) + 1e-9;
    assert_int_equal(calib_eproc_rejects(&e, 0.01), 1);
}

/* Three steps on [0, 1], m = 1/2, by hand (ONS gain 2 / (2 - ln 3)). */
static void eproc_arithmetic(void **state)
{
    const double gain = 2 / (2 - log(3));
    calib_eproc e;
    assert_int_equal(calib_eproc_init(&e, 0, 1, 0.5), CALIB_OK);
    calib_eproc_add(&e, 1); /* lambda 0: no bet; g = -1, a = 2 */
    assert_true(e.log_wealth == 0);
    assert_close(e.a, 2, 1e-15);
    assert_close(e.lambda, fmin(gain / 2, 0.5), 1e-15);
    assert_int_equal(e.argmin, 1); /* flat so far: the estimate moves on */
    calib_eproc_add(&e, 7); /* clamped to 1: u = 1, bet 1/2 */
    assert_close(e.log_wealth, log(1.5), 1e-15);
    assert_close(e.a, 2 + 4.0 / 9, 1e-15);
    assert_close(e.lambda, 0.5, 1e-15);
    assert_int_equal(e.argmin, 1);
    calib_eproc_add(&e, NAN); /* ignored */
    assert_int_equal(e.n, 2);
    calib_eproc_add(&e, -3); /* clamped to 0: u = -1, g = 2 */
    assert_close(e.log_wealth, log(0.75), 1e-15);
    assert_close(e.a, 2 + 4.0 / 9 + 4, 1e-15);
    assert_close(e.lambda, fmax(0, 0.5 - gain * 2 / (2 + 4.0 / 9 + 4)), 1e-15);
    assert_close(e.min_log_wealth, log(0.75), 1e-15);
    assert_int_equal(e.argmin, 3);
    assert_int_equal(e.n, 3);
}

/* Every adversarial pattern keeps ln W finite and the bet in [0, 1/2]. */
static void run_adversarial(double lo, double hi, double m, int pattern)
{
    calib_eproc e;
    double extreme[] = {-INFINITY, INFINITY, -1e308, 1e308, NAN, lo, hi};
    uint64_t added = 0;
    assert_int_equal(calib_eproc_init(&e, lo, hi, m), CALIB_OK);
    for (int i = 0; i < 100000; i++) {
        double x = pattern == 0 ? lo
                 : pattern == 1 ? hi
                 : pattern == 2 ? (i % 2 ? hi : lo)
                 : pattern == 3 ? (i % 3 ? NAN : hi)
                 : pattern == 4 ? (i % 100 < 50 ? hi : lo) /* bursts */
                                : extreme[i % 7];
        calib_eproc_add(&e, x);
        added += !isnan(x);
        assert_true(isfinite(e.log_wealth));
        assert_true(e.lambda >= 0 && e.lambda <= 0.5);
        assert_true(e.a >= 1);
        assert_true(e.min_log_wealth <= 0 && e.min_log_wealth <= e.log_wealth);
        assert_true(e.argmin <= e.n);
    }
    assert_int_equal(e.n, added);
    if (pattern == 0) /* never above m: never a bet, never a loss */
        assert_true(e.log_wealth == 0 && e.lambda == 0);
    if (pattern == 1) /* always above: the wealth grows */
        assert_true(e.log_wealth > 0 && e.lambda > 0);
}

static void eproc_adversarial(void **state)
{
    const double box[][3] = {
        {0, 1, 0.5}, {0, 2, 1e-9}, {0, 2, 2 - 1e-9}, {-1e300, 1e300, 0},
        {-2, 2, 0}, {0, 1, 0.999},
    };
    for (size_t b = 0; b < sizeof box / sizeof box[0]; b++)
        for (int pattern = 0; pattern < 6; pattern++)
            run_adversarial(box[b][0], box[b][1], box[b][2], pattern);
}

/* Samples until the e-process rejects at alpha, or limit. */
static uint64_t bernoulli_rejection(double p, double m, double alpha,
                                    uint64_t seed, uint64_t limit)
{
    calib_rng r;
    calib_eproc e;
    calib_rng_seed(&r, seed);
    assert_int_equal(calib_eproc_init(&e, 0, 1, m), CALIB_OK);
    while (e.n < limit && !calib_eproc_rejects(&e, alpha))
        calib_eproc_add(&e, calib_rng_uniform(&r) < p);
    return e.n;
}

static void eproc_power(void **state)
{
    uint64_t worst = 0, worst_unif = 0;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        /* Bernoulli(0.7) against m = 0.5: growth rate about 0.08 a sample */
        uint64_t n = bernoulli_rejection(0.7, 0.5, 0.01, seed, 10000);
        worst = n > worst ? n : worst;
        /* a bounded continuous stream: U(0.2, 1), mean 0.6, m = 0.5 */
        calib_rng r;
        calib_eproc e;
        calib_rng_seed(&r, 1000 + seed);
        assert_int_equal(calib_eproc_init(&e, 0, 1, 0.5), CALIB_OK);
        while (e.n < 10000 && !calib_eproc_rejects(&e, 0.01))
            calib_eproc_add(&e, 0.2 + 0.8 * calib_rng_uniform(&r));
        worst_unif = e.n > worst_unif ? e.n : worst_unif;
    }
    print_message("e-process power: rejects at 0.01 within %llu samples "
                  "(Bernoulli 0.7 vs 0.5), %llu (U(0.2,1) vs 0.5), 50 seeds\n",
                  (unsigned long long)worst, (unsigned long long)worst_unif);
    assert_true(worst < 500);
    assert_true(worst_unif < 1000);
    /* at the null the same stream does not reject */
    assert_int_equal(bernoulli_rejection(0.5, 0.5, 0.01, 7, 20000), 20000);
}

/* ------------------------------------------------------------------ drift: arguments and formulas */

static void drift_arguments(void **state)
{
    calib_drift d;
    calib_drift_cfg ok = mean_cfg(0.05, 0), c;
    assert_int_equal(calib_drift_init(NULL, &ok), CALIB_EINVAL);
    assert_int_equal(calib_drift_init(&d, NULL), CALIB_EINVAL);
    calib_drift_free(&d); /* safe after a failed init */
#define BAD(field, value)                                                     \
    do {                                                                      \
        c = ok;                                                               \
        c.field = value;                                                      \
        assert_int_equal(calib_drift_init(&d, &c), CALIB_EINVAL);            \
        calib_drift_free(&d);                                                 \
    } while (0)
    BAD(kind, 2);
    BAD(kind, -1);
    BAD(alpha, 0);
    BAD(alpha, 1);
    BAD(alpha, NAN);
    BAD(min_effect, -0.1);
    BAD(min_effect, NAN);
    BAD(min_effect, INFINITY);
    BAD(reference, 9);
    BAD(lo, 2);
    BAD(lo, NAN);
    BAD(hi, INFINITY);
    BAD(lo, -INFINITY);
    BAD(reference, SIZE_MAX); /* its ring would not fit in a size_t */
    ok = exceed_cfg(0.05, 0);
    BAD(quantile, 0);
    BAD(quantile, 1);
    BAD(quantile, NAN);
    BAD(min_effect, 1.5);
    BAD(alpha, -1);
    BAD(reference, 0);
    BAD(reference, SIZE_MAX);
#undef BAD
    /* EXCEED ignores lo and hi */
    c = ok;
    c.lo = NAN;
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    assert_non_null(d.ref_x);
    calib_drift_free(&d);
    calib_drift_free(NULL);
    /* what init allocates: MEAN its ring of 16-bit scores, EXCEED its
     * reference sample */
    c = mean_cfg(0.05, 0);
    assert_int_equal(calib_drift_bytes(&c), 2 * CALIB_DRIFT_RING * 1000);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    assert_non_null(d.ring);
    assert_null(d.ref_x);
    assert_int_equal(d.ring_len, CALIB_DRIFT_RING * 1000);
    calib_drift_free(&d);
    assert_null(d.ring);
    c = exceed_cfg(0.05, 0);
    assert_int_equal(calib_drift_bytes(&c), 8 * 1000);
    c.quantile = 1;
    assert_int_equal(calib_drift_bytes(&c), 0);
    assert_int_equal(calib_drift_bytes(NULL), 0);
    assert_int_equal(calib_drift_add(NULL, 1), 0);
    assert_true(calib_drift_log_e(NULL) == 0);
    calib_drift_reset(NULL);
}

/* MEAN: the reference period, then the first pair, after the sample
 * that ends it: its reference is every score so far (clamped), its
 * weight 1/2, its first blocks of 8 walk back from its start. */
static void drift_mean_first_pair(void **state)
{
    calib_drift d;
    calib_drift_cfg c = mean_cfg(0.1, 0.05);
    calib_accum ref;
    calib_rng r;
    calib_rng_seed(&r, 3);
    calib_accum_init(&ref);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    assert_int_equal(d.state, CALIB_DRIFT_REFERENCE);
    assert_int_equal(d.resets, 0);
    for (size_t i = 0; i < c.reference; i++) {
        double x = 2.5 * calib_rng_uniform(&r); /* some above hi = 2 */
        assert_int_equal(calib_drift_add(&d, x), 0);
        assert_int_equal(calib_drift_add(&d, NAN), 0);
        calib_accum_add(&ref, fmin(x, 2));
        assert_true(calib_drift_log_e(&d) == 0);
    }
    assert_int_equal(d.n, c.reference);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    assert_close(d.null_mean, calib_accum_mean(&ref) + 0.05, 1e-12);
    assert_int_equal(d.npair, 0); /* it starts with the next sample */
    assert_int_equal(d.nbank, 0); /* EXCEED's bank, unused */
    assert_int_equal(calib_drift_add(&d, 2.0), 0); /* above any block */
    assert_int_equal(d.npair, 1);
    assert_int_equal(d.started, 1);
    const calib_drift_pair *q = &d.pair[0];
    assert_int_equal(q->start, 1000);
    assert_int_equal(q->budget, 1000); /* < 2/3 of the ring of 8000 */
    assert_int_equal(q->phase, 0);
    /* a quarter of the budget in blocks of 8: 31 scores; one tested */
    assert_int_equal(q->left, 250 / 8 - 1);
    assert_int_equal(q->pos, 1000 - 8);
    assert_int_equal(q->n, 1);
    assert_int_equal(q->ref.n, 1000);
    assert_close(calib_accum_mean(&q->ref), calib_accum_mean(&ref), 1e-12);
    /* the first bet is 0: ln(w_1 W) = ln 1/2 */
    assert_true(q->log_wealth == 0 && q->lambda > 0);
    assert_close(calib_drift_log_e(&d), -log(2), 1e-15);
    assert_int_equal(d.watch.n, 1);
    assert_int_equal(d.all.n, 1001);
    calib_drift_free(&d);
}

/* A pair's bets by hand. With lo = 0 and hi = 65535 the stored scores are
 * the scores themselves (integers) and Z = (Y - B) / 65535; min_effect
 * 6553.5 gives the margin m = 0.1 + 1/65535. Reference 10, restart 0:
 * budget 10 = 2 + 2 + 2 + 4, so phases of 0, 0, 1 and 4 scores. */
static void drift_mean_pair_arithmetic(void **state)
{
    const double gain = 2 / (2 - log(3)), q16 = 65535, m = 0.1 + 1 / q16;
    calib_drift d;
    calib_drift_cfg c = {.kind = CALIB_DRIFT_MEAN, .lo = 0, .hi = 65535, .alpha = 0.05,
                         .min_effect = 6553.5, .reference = 10, .restart = 0};
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int i = 1; i <= 10; i++)
        calib_drift_add(&d, 1000.0 * i);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    /* Y = 40000 against the block of 2 before the start: samples 9, 10 */
    calib_drift_add(&d, 40000);
    const calib_drift_pair *q = &d.pair[0];
    assert_int_equal(q->budget, 10);
    assert_int_equal(q->phase, 3); /* phase 2 done: on to blocks of 1 */
    assert_int_equal(q->left, 4);
    assert_int_equal(q->pos, 8);
    double u1 = ((40000 - 9500) / q16 - m) / (1 + m);
    double a1 = 1 + u1 * u1, l1 = fmin(gain * u1 / a1, 0.9);
    assert_true(q->log_wealth == 0); /* the first bet is 0 */
    assert_close(q->a, a1, 1e-14);
    assert_close(q->lambda, l1, 1e-14);
    assert_int_equal(q->argmin, 1);
    /* Y = 30000 against sample 8 */
    calib_drift_add(&d, 30000);
    double u2 = ((30000 - 8000) / q16 - m) / (1 + m), g2 = -u2 / (1 + l1 * u2);
    double a2 = a1 + g2 * g2, l2 = fmin(fmax(l1 - gain * g2 / a2, 0), 0.9);
    assert_close(q->log_wealth, log1p(l1 * u2), 1e-14);
    assert_close(q->a, a2, 1e-14);
    assert_close(q->lambda, l2, 1e-14);
    assert_int_equal(q->n, 2);
    assert_int_equal(q->pos, 7);
    assert_int_equal(q->argmin, 1); /* the wealth rose */
    /* Y = 0 against sample 7: u = (-7000/65535 - m) / (1 + m), a loss */
    calib_drift_add(&d, 0);
    double u3 = ((0 - 7000) / q16 - m) / (1 + m);
    assert_close(q->log_wealth, log1p(l1 * u2) + log1p(l2 * u3), 1e-14);
    assert_close(calib_drift_log_e(&d), -log(2) + q->log_wealth, 1e-14);
    assert_true(q->log_wealth < 0);
    assert_true(q->min_log_wealth == q->log_wealth && q->argmin == 3);
    /* two more: the budget is used, the pair is dropped, and (restart 0)
     * the next starts with the sample after: reference 1..15, weight
     * 1/6, budget 15 = 3 + 3 + 3 + 6 (phases of 0, 0, 1, 6 scores) */
    calib_drift_add(&d, 0);
    assert_int_equal(d.npair, 1);
    calib_drift_add(&d, 0);
    assert_int_equal(d.npair, 0);
    assert_true(calib_drift_log_e(&d) == 0);
    calib_drift_add(&d, 0);
    assert_int_equal(d.npair, 1);
    assert_int_equal(d.started, 2);
    assert_int_equal(q->start, 15);
    assert_int_equal(q->budget, 15);
    assert_close(q->log_w, -log(6), 1e-15);
    assert_int_equal(q->phase, 3);
    assert_int_equal(q->left, 6);
    assert_int_equal(q->pos, 13); /* its first block: samples 14, 15 */
    assert_int_equal(q->ref.n, 15);
    assert_close(d.null_mean, calib_accum_mean(&q->ref) + 6553.5, 1e-12);
    calib_drift_free(&d);
}

/* Sum of a pair's phase lengths: budget/4 in blocks of 8, 4, 2, the rest
 * in blocks of 1. */
static uint64_t pair_life(uint64_t budget)
{
    uint64_t quarter = budget / 4;
    return quarter / 8 + quarter / 4 + quarter / 2 + (budget - 3 * quarter);
}

/* The schedule: a pair every `restart` samples on the grid after the
 * reference, and one whenever none is left; budgets of at most 2/3 of
 * the ring, whose scores are still there when a pair reaches them (a pair
 * whose block had left the ring would end early: every pair lives exactly
 * its schedule). */
static void drift_mean_schedule(void **state)
{
    calib_drift d;
    /* min_effect 1.5: pairs that hardly ever bet on uniform scores */
    calib_drift_cfg c = mean_cfg(0.05, 1.5);
    c.reference = 64;
    c.restart = 0;
    calib_rng r;
    calib_rng_seed(&r, 5);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    assert_int_equal(d.ring_len, 512);
    /* restart 0: one pair at a time, each after the last's budget */
    uint64_t expect = 64, starts = 0, last = UINT64_MAX;
    for (int i = 0; i < 20000; i++) {
        calib_drift_add(&d, 2 * calib_rng_uniform(&r));
        assert_true(d.npair <= 1);
        if (d.npair && d.pair[0].n == 1 && d.pair[0].start != last) {
            last = d.pair[0].start;
            assert_int_equal(last, expect);
            uint64_t budget = expect < 340 ? expect : 340; /* 512 / 3 * 2 */
            assert_int_equal(d.pair[0].budget, budget);
            expect += pair_life(budget);
            starts++;
        }
    }
    assert_true(starts > 100); /* the ring (512) wrapped many times */
    assert_int_equal(d.started, starts);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    /* restart 100: the grid 64, 164, 264, ... and, while the pairs are
     * shorter than the spacing, one in each gap */
    c.restart = 100;
    calib_drift_free(&d);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    uint64_t seen[8] = {0};
    unsigned nseen = 0;
    for (int i = 0; i < 400; i++) {
        calib_drift_add(&d, 1);
        for (unsigned k = 0; k < d.npair; k++)
            if (d.pair[k].n == 1 && nseen < 8)
                seen[nseen++] = d.pair[k].start;
    }
    /* 64 lives pair_life(64) = 30 scores, to 94: a gap pair at 94 (43
     * scores, to 137), another at 137 (64, to 201); the grid's 164 (76,
     * to 240) outlives it, but leaves a gap at 240 (112, to 352); from
     * the grid's 264 (123, to 387) on, the pairs outlive the spacing */
    const uint64_t want[] = {64, 94, 137, 164, 240, 264, 364};
    assert_int_equal(pair_life(64), 30);
    assert_int_equal(pair_life(94), 43);
    assert_int_equal(pair_life(137), 64);
    assert_int_equal(pair_life(164), 76);
    assert_int_equal(pair_life(240), 112);
    assert_int_equal(nseen, 7);
    for (unsigned k = 0; k < 7; k++)
        assert_int_equal(seen[k], want[k]);
    calib_drift_free(&d);
}

/* EXCEED: the threshold is order statistic ceil(q n) of the reference;
 * m0 = fraction above + sqrt(ln(2 / alpha) / (2 n)) + min_effect. */
static void drift_exceed_null_bound(void **state)
{
    calib_drift d;
    calib_drift_cfg c = exceed_cfg(0.05, 0.02);
    c.reference = 100;
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int i = 0; i < 100; i++) /* 1..100 in a scrambled order */
        calib_drift_add(&d, (double)((i * 37) % 100 + 1));
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    assert_true(d.threshold == 90);
    assert_close(d.null_mean, 0.1 + sqrt(log(2 / 0.05) / 200) + 0.02, 1e-14);
    for (int i = 1; i < 100; i++)
        assert_true(d.ref_x[i - 1] <= d.ref_x[i]); /* sorted */
    calib_drift_reset(&d);
    /* ties at the threshold do not count as above it */
    for (int i = 0; i < 100; i++)
        calib_drift_add(&d, i < 50 ? 1.0 : 2.0);
    assert_true(d.threshold == 2);
    assert_close(d.null_mean, sqrt(log(2 / 0.05) / 200) + 0.02, 1e-14);
    /* a value equal to the threshold is not an exceedance: no bet, ever */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(calib_drift_add(&d, 2.0), 0);
    for (unsigned i = 0; i < d.nbank; i++)
        assert_true(d.bank[i].log_wealth == 0 && d.bank[i].lambda == 0);
    calib_drift_free(&d);
}

/* m0 >= hi: no alarm is possible, and the detector says so. */
static void drift_no_alarm_possible(void **state)
{
    calib_drift d;
    /* MEAN: no difference of two means in [0, 2] exceeds min_effect 2;
     * (with 1.9 after a reference at 0.5, a stream at 2 does not alarm
     * either, but the detector cannot know that the reference level will
     * stay so low: its pairs run and never bet) */
    calib_drift_cfg c = mean_cfg(0.05, 2);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int i = 0; i < 1000; i++)
        calib_drift_add(&d, 0.5);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    assert_true(d.null_mean >= c.hi);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(calib_drift_add(&d, 2.0), 0);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    assert_int_equal(d.npair, 0);
    assert_true(calib_drift_log_e(&d) == 0);
    calib_drift_free(&d);
    c = mean_cfg(0.05, 1.9);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int i = 0; i < 1000; i++)
        calib_drift_add(&d, 0.5);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(calib_drift_add(&d, 2.0), 0);
    assert_true(d.npair > 0);
    for (unsigned i = 0; i < d.npair; i++)
        assert_true(d.pair[i].log_wealth == 0 && d.pair[i].lambda == 0);
    calib_drift_free(&d);
    c = exceed_cfg(0.05, 1.0);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int i = 0; i < 11000; i++)
        assert_int_equal(calib_drift_add(&d, i), 0);
    assert_true(d.null_mean >= 1);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    calib_drift_free(&d);
}

/* ------------------------------------------------------------------ drift: validity */

#define VALID_SEEDS 300
#define VALID_LEN 20000

/* Seeds of VALID_SEEDS stationary streams that raised an alarm. */
static unsigned count_false_alarms(const calib_drift_cfg *c, int gaussian)
{
    unsigned alarms = 0;
    calib_drift d;
    assert_int_equal(calib_drift_init(&d, c), CALIB_OK);
    for (uint64_t seed = 1; seed <= VALID_SEEDS; seed++) {
        calib_rng r;
        calib_rng_seed(&r, seed * 7919);
        calib_drift_reset(&d);
        for (int i = 0; i < VALID_LEN && d.state != CALIB_DRIFT_ALARM; i++)
            calib_drift_add(&d, gaussian ? gaussian_dss(&r, 1)
                                         : classifier_brier(&r, 1));
        alarms += d.state == CALIB_DRIFT_ALARM;
    }
    calib_drift_free(&d);
    return alarms;
}

/* At most the binomial 0.999 quantile of VALID_SEEDS streams at level
 * 0.05 may alarm. */
static void check_validity(const calib_drift_cfg *c, int gaussian, const char *what)
{
    unsigned bound = binom_quantile(VALID_SEEDS, 0.05, 0.999);
    unsigned alarms = count_false_alarms(c, gaussian);
    print_message("drift %s validity: %u of %d calibrated streams of %d "
                  "scores alarmed at alpha 0.05 (bound %u)\n",
                  what, alarms, VALID_SEEDS, VALID_LEN, bound);
    assert_true(alarms <= bound);
}

static void drift_validity_mean(void **state)
{
    (void)state;
    calib_drift_cfg c = mean_cfg(0.05, 0);
    check_validity(&c, 0, "MEAN (Brier)");
}

/* The guarantee covers any independent scores whose means never exceed
 * the mean of an earlier score by more than min_effect: here the level
 * rises by exactly min_effect (uniform on [0, 1.8], then on [0.05,
 * 1.85]) after 5000 samples, and a short reference and restart (100)
 * start some 300 pairs a stream, of weights down to 1e-5, in a ring of 800
 * scores that wraps every 800. */
static void drift_validity_mean_long(void **state)
{
    (void)state;
    enum { LEN = 30000, RISE = 5000 };
    calib_drift_cfg c = mean_cfg(0.05, 0.05);
    c.reference = c.restart = 100;
    calib_drift d;
    unsigned alarms = 0, bound = binom_quantile(VALID_SEEDS, 0.05, 0.999);
    uint64_t pairs = 0;
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (uint64_t seed = 1; seed <= VALID_SEEDS; seed++) {
        calib_rng r;
        calib_rng_seed(&r, seed * 104729);
        calib_drift_reset(&d);
        for (int i = 0; i < LEN && d.state != CALIB_DRIFT_ALARM; i++)
            calib_drift_add(&d, 1.8 * calib_rng_uniform(&r) + (i >= RISE ? 0.05 : 0));
        alarms += d.state == CALIB_DRIFT_ALARM;
        pairs += d.started;
    }
    calib_drift_free(&d);
    print_message("drift MEAN validity, a rise of min_effect: %u of %d streams of %d "
                  "scores alarmed at alpha 0.05 (bound %u), %.0f pairs a stream\n",
                  alarms, VALID_SEEDS, LEN, bound, (double)pairs / VALID_SEEDS);
    assert_true(alarms <= bound);
    assert_true(pairs > 250 * VALID_SEEDS);
}

static void drift_validity_exceed(void **state)
{
    (void)state;
    calib_drift_cfg c = exceed_cfg(0.05, 0);
    check_validity(&c, 1, "EXCEED (DSS)");
}

/* ------------------------------------------------------------------ drift: detection */

#define SWITCH 5000
#define DETECT_SEEDS 20
#define MAX_DELAY 3000

/* Runs one stream that drifts after sample SWITCH; returns the alarm's
 * delay and stores change_at - SWITCH. */
static long detect_one(calib_drift *d, uint64_t seed, int gaussian,
                       long *change_err)
{
    calib_rng r;
    calib_rng_seed(&r, seed);
    calib_drift_reset(d);
    for (long i = 1; i <= SWITCH + MAX_DELAY; i++) {
        int after = i > SWITCH;
        double s = gaussian ? gaussian_dss(&r, after ? 4 : 1)
                            : classifier_brier(&r, after ? 2 : 1);
        if (calib_drift_add(d, s)) {
            assert_int_equal(d->state, CALIB_DRIFT_ALARM);
            assert_int_equal(d->alarm_at, (uint64_t)i);
            assert_true(i > SWITCH); /* no false alarm first */
            *change_err = (long)d->change_at - SWITCH;
            return i - SWITCH;
        }
        assert_int_equal(d->n, (uint64_t)i);
    }
    fail_msg("seed %llu: no alarm within %d samples of the switch",
             (unsigned long long)seed, MAX_DELAY);
    return 0;
}

static void detect(const calib_drift_cfg *c, int gaussian, const char *name)
{
    calib_drift d;
    long max_delay = 0, sum_delay = 0, max_err = 0, sum_abs = 0, sum_err = 0;
    assert_int_equal(calib_drift_init(&d, c), CALIB_OK);
    for (uint64_t seed = 1; seed <= DETECT_SEEDS; seed++) {
        long err = 0, delay = detect_one(&d, 100 + seed, gaussian, &err);
        max_delay = delay > max_delay ? delay : max_delay;
        sum_delay += delay;
        max_err = labs(err) > max_err ? labs(err) : max_err;
        sum_abs += labs(err);
        sum_err += err;
    }
    print_message("drift %s detection: delay mean %.0f max %ld; "
                  "change_at - switch mean %+.0f, |.| mean %.0f max %ld "
                  "(%d seeds)\n",
                  name, (double)sum_delay / DETECT_SEEDS, max_delay,
                  (double)sum_err / DETECT_SEEDS,
                  (double)sum_abs / DETECT_SEEDS, max_err, DETECT_SEEDS);
    calib_drift_free(&d);
    /* measured: delays below 300, change estimates within 380 samples of
     * the switch for MEAN (mean |error| 22: a pair that started after the
     * switch estimates its own start), within 30 for EXCEED (mean 10) */
    assert_true(max_delay < MAX_DELAY);
    assert_true(sum_delay < 1500 * DETECT_SEEDS);
    assert_true(max_err <= 500);
    assert_true(sum_abs <= 100 * DETECT_SEEDS);
}

static void drift_detects_temperature(void **state)
{
    calib_drift_cfg c = mean_cfg(0.01, 0.01);
    detect(&c, 0, "MEAN (T 1 -> 2)");
}

/* The delay of T 1 -> 2 after `quiet` calibrated samples (the pairs'
 * reference grows with the watch). */
static long long_watch_delay(uint64_t seed, long quiet, uint64_t *ref_n)
{
    calib_drift_cfg c = mean_cfg(0.01, 0.01);
    calib_drift d;
    calib_rng r;
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    calib_rng_seed(&r, seed);
    long i, end = quiet + 20000;
    for (i = 1; i <= end; i++)
        if (calib_drift_add(&d, classifier_brier(&r, i > quiet ? 2 : 1)))
            break;
    *ref_n = d.ref.n; /* the alarming pair's reference */
    calib_drift_free(&d);
    assert_true(i > quiet); /* no false alarm in the quiet stretch */
    return i - quiet;
}

/* A long quiet watch slows the detector down only logarithmically: a
 * pair started shortly before or after the change catches it, fresh, and
 * its reference is every score before it (its blocks the newest of
 * them). (This test compared restarts with one e-process alone, which
 * slowed down like the square root of the watch; for MEAN restart 0 now
 * means one pair at a time, each after the last has used its budget.) */
static void drift_memory_long_watch(void **state)
{
    (void)state;
    enum { SEEDS = 6, QUIET = 60000, SHORT = 5000 };
    long longw = 0, shortw = 0, worst = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        uint64_t ref_n;
        long a = long_watch_delay(500 + seed, QUIET, &ref_n);
        longw += a;
        worst = a > worst ? a : worst;
        assert_true(ref_n >= QUIET - 1000);
        shortw += long_watch_delay(500 + seed, SHORT, &ref_n);
    }
    print_message("drift after %d quiet samples: delay mean %.0f (max %ld); after %d: "
                  "%.0f\n", QUIET, (double)longw / SEEDS, worst, SHORT,
                  (double)shortw / SEEDS);
    /* the price of the long watch: the weight of pair j ~ 60 instead of
     * j ~ 5, 2 ln(60 / 5) ~ 5 more nats of wealth to win */
    assert_true(worst < 1000);
    assert_true(longw < 2 * shortw);
}

/* The setting, with calibd's defaults (reference and restart
 * 2000, alpha 0.01, min_effect 0.01): a K = 10 classifier with logits
 * N(0, 1.5^2), as examples/simulate.c, whose temperature moves from 1 to
 * 1.25 (mean Brier score 0.707 -> 0.774) at a sample between 10,000 and
 * 12,000, where it need not meet a pair's start. */
static void drift_detects_small_drift(void **state)
{
    (void)state;
    enum { SEEDS = 20, HORIZON = 20000 };
    calib_drift_cfg c = {.kind = CALIB_DRIFT_MEAN, .lo = 0, .hi = 2, .alpha = 0.01,
                         .min_effect = 0.01, .reference = 2000, .restart = 2000};
    calib_drift d;
    long delay[SEEDS];
    unsigned found = 0, early = 0;
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        calib_rng r;
        long change = 10000 + (long)((7919 * seed) % 2000), i;
        calib_rng_seed(&r, 7000 + seed);
        calib_drift_reset(&d);
        for (i = 1; i <= change + HORIZON; i++)
            if (calib_drift_add(&d, classifier_brier_sigma(&r, 1.5, i > change ? 1.25 : 1)))
                break;
        early += i <= change;
        if (i > change && i <= change + HORIZON)
            delay[found++] = i - change;
    }
    calib_drift_free(&d);
    for (unsigned a = 1; a < found; a++) /* insertion sort, for the median */
        for (unsigned b = a; b > 0 && delay[b - 1] > delay[b]; b--) {
            long t = delay[b];
            delay[b] = delay[b - 1];
            delay[b - 1] = t;
        }
    print_message("drift MEAN, T 1 -> 1.25 (calibd's defaults): %u of %d detected within "
                  "%d, median delay %ld (max %ld); %u false alarms before\n", found, SEEDS,
                  HORIZON, found ? delay[found / 2] : -1L, found ? delay[found - 1] : -1L,
                  early);
    assert_true(found >= 18);
    assert_true(delay[found / 2] < 2500);
}

static void drift_detects_variance(void **state)
{
    calib_drift_cfg c = exceed_cfg(0.01, 0.01);
    detect(&c, 1, "EXCEED (var x4)");
}

/* Once alarmed the detector stays so and returns 1 only once; a reset
 * measures the new level, so the drifted stream is then the norm. */
static void drift_reset_new_reference(void **state)
{
    calib_drift d;
    calib_drift_cfg c = mean_cfg(0.01, 0.01);
    calib_rng r;
    calib_rng_seed(&r, 42);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    double *storage = d.ref_x;
    uint16_t *ring = d.ring;
    int alarms = 0;
    for (int i = 0; i < 10000; i++)
        alarms += calib_drift_add(&d, classifier_brier(&r, i < 2000 ? 1 : 2));
    assert_int_equal(alarms, 1);
    assert_int_equal(d.state, CALIB_DRIFT_ALARM);
    assert_int_equal(d.n, 10000);
    double old_m0 = d.null_mean, frozen = calib_drift_log_e(&d);
    assert_true(frozen >= log(1 / 0.01)); /* MEAN alarms at ln(1/alpha) */
    calib_drift_add(&d, 2.0);
    assert_true(calib_drift_log_e(&d) == frozen); /* the test is decided */

    calib_drift_reset(&d);
    assert_int_equal(d.resets, 1);
    assert_int_equal(d.state, CALIB_DRIFT_REFERENCE);
    assert_true(d.n == 0 && d.alarm_at == 0 && d.change_at == 0);
    assert_true(d.ref.n == 0 && d.watch.n == 0 && d.nbank == 0);
    assert_true(isnan(d.null_mean) && calib_drift_log_e(&d) == 0);
    assert_ptr_equal(d.ref_x, storage);
    assert_ptr_equal(d.ring, ring); /* kept, but its scores are old: */
    assert_true(d.ring_n == 0 && d.npair == 0 && d.all.n == 0);
    assert_true(d.cfg.alpha == 0.01 && d.cfg.reference == 1000);
    alarms = 0;
    for (int i = 0; i < 20000; i++)
        alarms += calib_drift_add(&d, classifier_brier(&r, 2));
    assert_int_equal(alarms, 0);
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    assert_true(d.null_mean > old_m0 + 0.1); /* the new, higher level */
    assert_int_equal(d.watch.n, 19000);
    calib_drift_free(&d);

    /* EXCEED keeps its storage and re-sorts a new reference */
    c = exceed_cfg(0.01, 0.01);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    storage = d.ref_x;
    for (int i = 0; i < 1000; i++)
        calib_drift_add(&d, gaussian_dss(&r, 1));
    double thr = d.threshold;
    calib_drift_reset(&d);
    assert_true(isnan(d.threshold));
    for (int i = 0; i < 1000; i++)
        calib_drift_add(&d, gaussian_dss(&r, 4));
    assert_ptr_equal(d.ref_x, storage);
    assert_true(d.threshold > thr + 0.5); /* 0.9 quantile of 4 chi2_1 */
    for (int i = 0; i < 10000; i++)
        assert_int_equal(calib_drift_add(&d, gaussian_dss(&r, 4)), 0);
    calib_drift_free(&d);
}

/* calib_drift_check accepts every state the functions leave and refuses
 * inconsistent ones; a MEAN state restored without its ring and pairs
 * (what a snapshot that does not know them gives) neither alarms falsely
 * nor stays blind: its pairs use only the scores written since. */
static void drift_check_states(void **state)
{
    calib_drift d, e;
    calib_drift_cfg c = mean_cfg(0.01, 0.01);
    calib_rng r;
    calib_rng_seed(&r, 77);
    assert_int_equal(calib_drift_check(NULL), CALIB_EINVAL);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int i = 0; i < 30000; i++) {
        calib_drift_add(&d, classifier_brier(&r, i < 20000 ? 1 : 2));
        if (i % 97 == 0 || d.state == CALIB_DRIFT_ALARM)
            assert_int_equal(calib_drift_check(&d), CALIB_OK);
    }
    assert_int_equal(d.state, CALIB_DRIFT_ALARM);
    calib_drift_reset(&d);
    assert_int_equal(calib_drift_check(&d), CALIB_OK);
    for (int i = 0; i < 1500; i++)
        calib_drift_add(&d, classifier_brier(&r, 1));
    assert_int_equal(calib_drift_check(&d), CALIB_OK);
    /* broken pieces */
    e = d;
    e.pair[0].lambda = 0.95;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.pair[0].start = d.n;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.npair = CALIB_DRIFT_BANK + 1;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.ring_n = d.n + 1;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.null_mean = NAN;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.watch.n++;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.state = CALIB_DRIFT_ALARM; /* without alarm_at */
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    /* restored without ring, pairs and running sums, after 50,000
     * calibrated scores */
    for (int i = 0; i < 48500; i++)
        calib_drift_add(&d, classifier_brier(&r, 1));
    assert_int_equal(d.state, CALIB_DRIFT_WATCHING);
    uint64_t started = d.started;
    memset(d.ring, 0xff, d.ring_len * sizeof *d.ring); /* garbage */
    d.ring_n = 0;
    d.npair = 0;
    calib_accum_init(&d.all);
    assert_int_equal(calib_drift_check(&d), CALIB_OK);
    int alarms = 0;
    for (int i = 0; i < 20000; i++)
        alarms += calib_drift_add(&d, classifier_brier(&r, 1));
    assert_int_equal(alarms, 0);
    assert_int_equal(calib_drift_check(&d), CALIB_OK);
    assert_true(isfinite(d.null_mean));
    /* the pairs' budgets grew with the ring again; few gap pairs */
    assert_true(d.started - started < 40);
    for (unsigned i = 0; i < d.npair; i++)
        assert_true(d.pair[i].budget > 2000);
    long i;
    for (i = 1; i <= 5000; i++)
        if (calib_drift_add(&d, classifier_brier(&r, 2)))
            break;
    assert_true(i < 1000);
    calib_drift_free(&d);
    /* EXCEED */
    c = exceed_cfg(0.01, 0.01);
    assert_int_equal(calib_drift_init(&d, &c), CALIB_OK);
    for (int k = 0; k < 5000; k++) {
        calib_drift_add(&d, gaussian_dss(&r, 1));
        if (k % 101 == 0)
            assert_int_equal(calib_drift_check(&d), CALIB_OK);
    }
    e = d;
    e.bank[0].lambda = 0.6;
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    e = d;
    e.ring = d.ref_x ? (uint16_t *)d.ref_x : NULL; /* MEAN's storage */
    assert_int_equal(calib_drift_check(&e), CALIB_EINVAL);
    calib_drift_free(&d);
}

/* ------------------------------------------------------------------ gate */

static calib_gate_cfg gate_cfg(double alpha, double min_improvement,
                               uint64_t max_samples)
{
    return (calib_gate_cfg){.alpha = alpha, .min_improvement = min_improvement,
                            .lo = -2, .hi = 2, .max_samples = max_samples};
}

static void gate_arguments(void **state)
{
    calib_gate g;
    calib_gate_cfg ok = gate_cfg(0.05, 0, 100), c;
    assert_int_equal(calib_gate_init(NULL, &ok), CALIB_EINVAL);
    assert_int_equal(calib_gate_init(&g, NULL), CALIB_EINVAL);
#define BAD(field, value)                                                     \
    do {                                                                      \
        c = ok;                                                               \
        c.field = value;                                                      \
        assert_int_equal(calib_gate_init(&g, &c), CALIB_EINVAL);             \
    } while (0)
    BAD(alpha, 0);
    BAD(alpha, 1);
    BAD(alpha, NAN);
    BAD(min_improvement, -0.01);
    BAD(min_improvement, NAN);
    BAD(min_improvement, 2);
    BAD(lo, 0);
    BAD(lo, NAN);
    BAD(hi, 0);
    BAD(hi, INFINITY);
    BAD(max_samples, 0);
#undef BAD
    assert_int_equal(calib_gate_add(NULL, 1, 0), CALIB_EINVAL);
    assert_int_equal(calib_gate_init(&g, &ok), CALIB_OK);
    assert_int_equal(g.state, CALIB_GATE_RUNNING);
    assert_int_equal(calib_gate_add(&g, NAN, 0), CALIB_GATE_RUNNING);
    assert_int_equal(calib_gate_add(&g, 1, NAN), CALIB_GATE_RUNNING);
    assert_int_equal(calib_gate_add(&g, INFINITY, INFINITY), CALIB_GATE_RUNNING);
    assert_int_equal(g.diff.n, 0);
    assert_int_equal(g.e.n, 0);
    assert_true(calib_gate_log_e(&g) == 0); /* nothing tested: wealth 1 */
    /* a clear improvement raises the e-value */
    for (int i = 0; i < 50; i++)
        calib_gate_add(&g, 1.0, 0.2);
    assert_true(calib_gate_log_e(&g) > 0);
    assert_true(calib_gate_log_e(&g) == g.e.log_wealth);
}

/* Current: raw logits of a classifier whose labels follow softmax(z / 2);
 * candidate: temperature 2 applied. Returns the gate's final state. */
static int gate_run_temperature(uint64_t seed, uint64_t *pairs,
                                calib_gate *g)
{
    const double t2 = 2;
    calib_gate_cfg c = gate_cfg(0.01, 0.001, 20000);
    calib_rng r;
    calib_rng_seed(&r, seed);
    assert_int_equal(calib_gate_init(g, &c), CALIB_OK);
    while (g->state == CALIB_GATE_RUNNING) {
        double z[K], p[K];
        calib_score cur, cand;
        size_t y = draw_classifier(&r, 2, z);
        calib_score_logits(z, K, y, p, &cur);
        assert_int_equal(calib_recal_apply_temperature(&t2, CALIB_FORM_LOGITS,
                                                       K, z, p), CALIB_OK);
        calib_score_probs(p, K, y, &cand);
        calib_gate_add(g, cur.brier, cand.brier);
    }
    *pairs = g->e.n;
    return g->state;
}

static void gate_passes_improvement(void **state)
{
    uint64_t worst = 0;
    calib_gate g;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        uint64_t n;
        assert_int_equal(gate_run_temperature(seed, &n, &g), CALIB_GATE_PASSED);
        worst = n > worst ? n : worst;
        assert_true(calib_accum_mean(&g.diff) > 0.001);
        assert_close(calib_accum_mean(&g.diff),
                     calib_accum_mean(&g.current) -
                         calib_accum_mean(&g.candidate), 1e-12);
        /* PASSED is final */
        assert_int_equal(calib_gate_add(&g, 0, 2), CALIB_GATE_PASSED);
        assert_int_equal(g.e.n, n);
    }
    print_message("gate power: T 1 -> 2 (Brier) passes at alpha 0.01, "
                  "min_improvement 0.001 within %llu pairs (20 seeds)\n",
                  (unsigned long long)worst);
    assert_true(worst < 5000);
}

static void gate_identical_fails(void **state)
{
    calib_gate g;
    calib_gate_cfg c = gate_cfg(0.01, 0.001, 5000);
    calib_rng r;
    calib_rng_seed(&r, 9);
    assert_int_equal(calib_gate_init(&g, &c), CALIB_OK);
    for (uint64_t i = 1; i < 2500; i++) {
        double s = classifier_brier(&r, 1);
        assert_int_equal(calib_gate_add(&g, s, s), CALIB_GATE_RUNNING);
        /* not tested, but counted towards max_samples */
        assert_int_equal(calib_gate_add(&g, NAN, s), CALIB_GATE_RUNNING);
    }
    assert_int_equal(calib_gate_add(&g, 0.5, 0.5), CALIB_GATE_RUNNING);
    assert_int_equal(calib_gate_add(&g, 0.5, 0.5), CALIB_GATE_FAILED);
    assert_int_equal(g.pairs, 5000);
    assert_int_equal(g.e.n, 2501);
    assert_int_equal(g.diff.n, 2501);
    assert_true(g.e.log_wealth == 0);
    /* FAILED is final, even for a pair that would help */
    assert_int_equal(calib_gate_add(&g, 2, 0), CALIB_GATE_FAILED);
    assert_int_equal(g.e.n, 2501);
}

#define GATE_SEEDS 200
#define GATE_FIT 2000
#define GATE_TEST 5000

/* On a calibrated stream: fit T on GATE_FIT samples, then gate it against
 * the identity on GATE_TEST fresh ones. Returns 1 if it passed. */
static int gate_null_one(uint64_t seed, double *rec, double *t_hat)
{
    calib_rng r;
    calib_recal_result res;
    calib_dataset ds = {CALIB_FORM_LOGITS, K, GATE_FIT, K + 1, rec};
    calib_gate g;
    calib_gate_cfg c = gate_cfg(0.05, 0, GATE_TEST);
    calib_rng_seed(&r, seed * 104729);
    for (size_t i = 0; i < GATE_FIT; i++)
        rec[i * (K + 1) + K] = (double)draw_classifier(&r, 1, rec + i * (K + 1));
    assert_int_equal(calib_recal_fit_temperature(&ds, NULL, &res), CALIB_OK);
    *t_hat = res.params[0];
    assert_int_equal(calib_gate_init(&g, &c), CALIB_OK);
    while (g.state == CALIB_GATE_RUNNING) {
        double z[K], p[K];
        calib_score cur, cand;
        size_t y = draw_classifier(&r, 1, z);
        calib_score_logits(z, K, y, p, &cur);
        calib_recal_apply_temperature(t_hat, CALIB_FORM_LOGITS, K, z, p);
        calib_score_probs(p, K, y, &cand);
        calib_gate_add(&g, cur.brier, cand.brier);
    }
    return g.state == CALIB_GATE_PASSED;
}

static void gate_validity(void **state)
{
    double *rec = malloc(GATE_FIT * (K + 1) * sizeof *rec);
    double t_min = INFINITY, t_max = 0;
    unsigned passes = 0, bound = binom_quantile(GATE_SEEDS, 0.05, 0.999);
    assert_non_null(rec);
    for (uint64_t seed = 1; seed <= GATE_SEEDS; seed++) {
        double t;
        passes += gate_null_one(seed, rec, &t);
        t_min = fmin(t_min, t);
        t_max = fmax(t_max, t);
    }
    free(rec);
    print_message("gate validity: %u of %d fitted T in [%.3f, %.3f] passed "
                  "against a calibrated identity at alpha 0.05 (bound %u)\n",
                  passes, GATE_SEEDS, t_min, t_max, bound);
    assert_true(t_min > 0.9 && t_max < 1.1);
    assert_true(passes <= bound);
}

static void binomial_bound(void **state)
{
    /* P(Bin(300, 0.05) <= k) for the k found and one less */
    unsigned k = binom_quantile(300, 0.05, 0.999);
    double below = 0;
    for (unsigned j = 0; j < k; j++)
        below += exp(lgamma(301.0) - lgamma(j + 1.0) - lgamma(301.0 - j) +
                     j * log(0.05) + (300 - j) * log(0.95));
    assert_true(below < 0.999);
    assert_true(k > 15 && k < 40); /* mean 15, sd 3.8 */
    assert_int_equal(binom_quantile(10, 0.5, 0.5), 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(binomial_bound),
        cmocka_unit_test(eproc_arguments),
        cmocka_unit_test(eproc_arithmetic),
        cmocka_unit_test(eproc_adversarial),
        cmocka_unit_test(eproc_power),
        cmocka_unit_test(drift_arguments),
        cmocka_unit_test(drift_mean_first_pair),
        cmocka_unit_test(drift_mean_pair_arithmetic),
        cmocka_unit_test(drift_mean_schedule),
        cmocka_unit_test(drift_exceed_null_bound),
        cmocka_unit_test(drift_no_alarm_possible),
        cmocka_unit_test(drift_validity_mean),
        cmocka_unit_test(drift_validity_mean_long),
        cmocka_unit_test(drift_validity_exceed),
        cmocka_unit_test(drift_detects_temperature),
        cmocka_unit_test(drift_detects_variance),
        cmocka_unit_test(drift_memory_long_watch),
        cmocka_unit_test(drift_detects_small_drift),
        cmocka_unit_test(drift_reset_new_reference),
        cmocka_unit_test(drift_check_states),
        cmocka_unit_test(gate_arguments),
        cmocka_unit_test(gate_passes_improvement),
        cmocka_unit_test(gate_identical_fails),
        cmocka_unit_test(gate_validity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
