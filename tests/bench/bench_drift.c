/*
 * bench_drift.c — detection delays of the drift detector (calib_drift(3),
 * CALIB_DRIFT_MEAN with calibd's defaults) against two reference
 * detectors, ADWIN and Page-Hinkley, on the same per-sample Brier streams.
 *
 *     mkdir -p build/bench && cd build/bench && ../../configure && \
 *         make tests/bench/bench_drift && ./tests/bench/bench_drift
 *
 * Options: --seeds N (streams per row, 20), --null-seeds N and --null-len L
 * (stationary streams for the false-alarm count, 20 of 100000), --restart R
 * (calibd's detector with another spacing of its pairs than calibd's
 * drift_reference, 2000), --csv (one line per stream and detector instead
 * of the table).
 *
 * The streams, as examples/simulate.c makes them: a K = 10 classifier
 * reports softmax(z), z ~ N(0, 1.5^2) per class, while the label is drawn
 * from softmax(z / T), T the true temperature; the score is the Brier
 * score of the report. T = 1 (calibrated) up to the change, T1 after it.
 * A change "at 10,000" means samples 10,001 on follow T1; an alarm on
 * sample i is a detection with delay i - 10,000 if i > 10,000 and
 * i <= 10,000 + 20,000, a false alarm if i <= 10,000. Delays are medians
 * over the detected streams. The row "random" moves the change to
 * 10,000 + (7919 seed mod 2000): a change that does not fall where the
 * detector happens to start a new e-process.
 *
 * ADWIN and Page-Hinkley here are reference implementations written from
 * their papers, for this comparison only; calibd does not use them.
 *
 * ADWIN (Bifet and Gavalda, "Learning from time-changing data with
 * adaptive windowing", SDM 2007), ADWIN2 with its exponential histogram:
 * rows of buckets of 2^i samples, at most M + 1 = 6 per row before the
 * two oldest merge into the next row; every 32 samples (the clock of MOA)
 * it tests the splits W = W0 W1 at bucket boundaries with
 *     eps_cut = sqrt(2 m sigma_W^2 ln(2/delta')) + (2/3) m ln(2/delta'),
 * m = 1/(n0 - 4) + 1/(n1 - 4) (MOA's constants, sub-windows of >= 5),
 * delta' = delta / ln n, delta = 0.002, sigma_W^2 the window's variance,
 * and drops the oldest bucket while some split is cut. Two ways of
 * enumerating the splits:
 *   "ADWIN": every bucket boundary, as the paper describes;
 *   "ADWIN-skmf": as scikit-multiflow 0.5 enumerates them (the issue's
 *     figures came from it): walking from the oldest row, it never
 *     visits the newest bucket of a row, which then stays in W1 - W1 is
 *     not the newest stretch but the rest of the window, older buckets
 *     included, which dilutes a recent change.
 *
 * Page-Hinkley (Page, "Continuous inspection schemes", Biometrika 1954;
 * the form of Gama, Sebastiao and Rodrigues 2013 with a forgetting
 * factor): x_mean the running mean, S = max(0, alpha S + x - x_mean -
 * delta), an alarm once S - min S > lambda after 30 samples, with the
 * usual delta = 0.005, lambda = 50, alpha = 1 - 1e-4. Its false-alarm
 * rate is not controlled: S is a reflected random walk whose stationary
 * law reaches lambda now and then.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/drift.h"

#define K 10
#define SIGMA 1.5
#define HORIZON 20000 /* samples after the change within which it counts */
#define MAX_SEEDS 1000

/* ------------------------------------------------------------------ streams */

typedef struct stream {
    calib_rng r;
    double t1;
    uint64_t change, i;
} stream;

static void stream_init(stream *s, uint64_t seed, double t1, uint64_t change)
{
    calib_rng_seed(&s->r, seed);
    s->t1 = t1;
    s->change = change;
    s->i = 0;
}

static double stream_next(stream *s)
{
    double z[K], q[K], p[K];
    double t = ++s->i > s->change ? s->t1 : 1;
    for (size_t j = 0; j < K; j++) {
        z[j] = SIGMA * calib_rng_normal(&s->r);
        q[j] = z[j] / t;
    }
    calib_softmax(q, K, q);
    size_t y = calib_rng_categorical(&s->r, q, K);
    calib_score sc;
    calib_score_logits(z, K, y, p, &sc);
    return sc.brier;
}

/* ------------------------------------------------------------------ ADWIN */

#define ADW_M 5
#define ADW_ROWS 64

typedef struct adw_bucket {
    double n, sum, m2; /* count, sum, sum of squared deviations */
} adw_bucket;

typedef struct adwin {
    double delta;
    int skmf; /* enumerate the splits as scikit-multiflow does */
    adw_bucket b[ADW_ROWS][ADW_M + 1]; /* row i: buckets of 2^i, [0] oldest */
    int cnt[ADW_ROWS], rows;
    adw_bucket w; /* the window */
    uint64_t t;
} adwin;

static void adw_init(adwin *a, double delta, int skmf)
{
    memset(a, 0, sizeof *a);
    a->delta = delta;
    a->skmf = skmf;
    a->rows = 1;
}

/* Chan et al.'s pairwise update: x absorbs y */
static void bucket_merge(adw_bucket *x, const adw_bucket *y)
{
    if (y->n == 0)
        return;
    if (x->n == 0) {
        *x = *y;
        return;
    }
    double d = y->sum / y->n - x->sum / x->n;
    x->m2 += y->m2 + d * d * x->n * y->n / (x->n + y->n);
    x->n += y->n;
    x->sum += y->sum;
}

/* x loses its sub-block y */
static void bucket_unmerge(adw_bucket *x, const adw_bucket *y)
{
    double n = x->n - y->n, sum = x->sum - y->sum;
    if (n <= 0) {
        *x = (adw_bucket){0};
        return;
    }
    double d = y->sum / y->n - sum / n;
    x->m2 -= y->m2 + d * d * n * y->n / (n + y->n);
    x->m2 = x->m2 > 0 ? x->m2 : 0;
    x->n = n;
    x->sum = sum;
}

static void adw_insert(adwin *a, double x)
{
    adw_bucket one = {1, x, 0};
    bucket_merge(&a->w, &one);
    a->b[0][a->cnt[0]++] = one;
    for (int i = 0; i < a->rows && a->cnt[i] == ADW_M + 1; i++) {
        adw_bucket m = a->b[i][0];
        bucket_merge(&m, &a->b[i][1]);
        memmove(&a->b[i][0], &a->b[i][2], (ADW_M - 1) * sizeof m);
        a->cnt[i] -= 2;
        if (i + 1 == a->rows) {
            if (a->rows == ADW_ROWS)
                abort(); /* 2^64 samples */
            a->rows++;
        }
        a->b[i + 1][a->cnt[i + 1]++] = m;
    }
}

static void adw_drop_oldest(adwin *a)
{
    int i = a->rows - 1;
    bucket_unmerge(&a->w, &a->b[i][0]);
    memmove(&a->b[i][0], &a->b[i][1], ADW_M * sizeof a->b[i][0]);
    a->cnt[i]--;
    while (a->rows > 1 && a->cnt[a->rows - 1] == 0)
        a->rows--;
}

/* One split test: 1 if W0 (n0, s0) and the rest differ by more than
 * eps_cut. */
static int adw_cut(const adwin *a, double n0, double s0)
{
    const double min_len = 5;
    double n1 = a->w.n - n0;
    if (n0 < min_len || n1 < min_len)
        return 0;
    double diff = s0 / n0 - (a->w.sum - s0) / n1;
    double dd = log(2 * log(a->w.n) / a->delta); /* ln(2 / delta') */
    double m = 1 / (n0 - min_len + 1) + 1 / (n1 - min_len + 1);
    double var = a->w.m2 / a->w.n;
    return fabs(diff) > sqrt(2 * m * var * dd) + 2.0 / 3 * dd * m;
}

/* Adds x; 1 when the window shrank (a change). */
static int adw_add(adwin *a, double x)
{
    adw_insert(a, x);
    if (++a->t % 32 || a->w.n <= 10)
        return 0;
    int changed = 0, again = 1;
    while (again) {
        again = 0;
        double n0 = 0, s0 = 0;
        for (int i = a->rows - 1; i >= 0 && !again; i--) {
            int last = a->cnt[i] - (a->skmf ? 1 : 0);
            for (int k = 0; k < last; k++) {
                n0 += a->b[i][k].n;
                s0 += a->b[i][k].sum;
                if (a->w.n - n0 <= 0)
                    break;
                if (adw_cut(a, n0, s0)) {
                    adw_drop_oldest(a);
                    again = changed = 1;
                    break;
                }
            }
        }
    }
    return changed;
}

/* ------------------------------------------------------------------ Page-Hinkley */

typedef struct ph {
    double mean, sum, min;
    uint64_t n;
} ph;

static void ph_init(ph *p)
{
    *p = (ph){.min = INFINITY};
}

static int ph_add(ph *p, double x)
{
    const double delta = 0.005, lambda = 50, fade = 1 - 1e-4;
    p->n++;
    p->mean += (x - p->mean) / (double)p->n;
    p->sum = fmax(0, fade * p->sum + (x - p->mean - delta));
    p->min = fmin(p->min, p->sum);
    return p->n >= 30 && p->sum - p->min > lambda;
}

/* ------------------------------------------------------------------ runs */

enum { DET_CALIBD, DET_ADWIN, DET_ADWIN_SKMF, DET_PH, NDET };
static const char *det_name[NDET] = {"calibd", "ADWIN", "ADWIN-skmf", "Page-Hinkley"};

/* calibd's defaults (src/daemon/core/cfg.c, model_drift_cfg in model.c) */
static calib_drift_cfg calibd_cfg(size_t restart)
{
    return (calib_drift_cfg){.kind = CALIB_DRIFT_MEAN, .lo = 0, .hi = 2, .alpha = 0.01,
                             .min_effect = 0.01, .reference = 2000, .restart = restart};
}

/* Runs every detector on one stream of len samples; at[d]: the sample of
 * d's first alarm, 0 if none. */
static void run_stream(calib_drift *cd, uint64_t seed, double t1, uint64_t change,
                       uint64_t len, uint64_t at[NDET])
{
    stream s;
    adwin *aw = malloc(2 * sizeof *aw);
    ph p;
    if (!aw)
        abort();
    stream_init(&s, seed, t1, change);
    calib_drift_reset(cd);
    adw_init(&aw[0], 0.002, 0);
    adw_init(&aw[1], 0.002, 1);
    ph_init(&p);
    memset(at, 0, NDET * sizeof *at);
    for (uint64_t i = 1; i <= len; i++) {
        double x = stream_next(&s);
        if (!at[DET_CALIBD] && calib_drift_add(cd, x))
            at[DET_CALIBD] = i;
        if (!at[DET_ADWIN] && adw_add(&aw[0], x))
            at[DET_ADWIN] = i;
        if (!at[DET_ADWIN_SKMF] && adw_add(&aw[1], x))
            at[DET_ADWIN_SKMF] = i;
        if (!at[DET_PH] && ph_add(&p, x))
            at[DET_PH] = i;
        int all = 1;
        for (int d = 0; d < NDET; d++)
            all &= at[d] != 0;
        if (all)
            break;
    }
    free(aw);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

typedef struct row {
    const char *name;
    double t1;
    uint64_t change; /* 0: random, 10,000 + 7919 seed mod 2000 */
} row;

static int csv;

static void run_row(calib_drift *cd, const row *r, unsigned seeds, unsigned base)
{
    static uint64_t delay[NDET][MAX_SEEDS];
    unsigned det[NDET] = {0}, fa[NDET] = {0};
    for (unsigned k = 0; k < seeds; k++) {
        uint64_t seed = (uint64_t)base * 100003 + k + 1, at[NDET];
        uint64_t change = r->change ? r->change : 10000 + (7919 * (uint64_t)(k + 1)) % 2000;
        run_stream(cd, seed, r->t1, change, change + HORIZON, at);
        for (int d = 0; d < NDET; d++) {
            if (csv)
                printf("%s,%g,%llu,%llu,%s,%llu\n", r->name, r->t1,
                       (unsigned long long)change, (unsigned long long)seed, det_name[d],
                       (unsigned long long)at[d]);
            if (!at[d])
                continue;
            if (at[d] <= change)
                fa[d]++;
            else
                delay[d][det[d]++] = at[d] - change;
        }
    }
    if (csv)
        return;
    printf("| %-34s |", r->name);
    for (int d = 0; d < NDET; d++) {
        char cell[64];
        qsort(delay[d], det[d], sizeof delay[d][0], cmp_u64);
        if (det[d])
            snprintf(cell, sizeof cell, "%u/%u, %llu", det[d], seeds,
                     (unsigned long long)delay[d][det[d] / 2]);
        else
            snprintf(cell, sizeof cell, "%u/%u", det[d], seeds);
        if (fa[d])
            snprintf(cell + strlen(cell), sizeof cell - strlen(cell), " (%u FA)", fa[d]);
        printf(" %-20s |", cell);
    }
    printf("\n");
    fflush(stdout);
}

static void run_null(calib_drift *cd, unsigned seeds, uint64_t len)
{
    unsigned fa[NDET] = {0};
    for (unsigned k = 0; k < seeds; k++) {
        uint64_t seed = (uint64_t)999 * 100003 + k + 1, at[NDET];
        run_stream(cd, seed, 1, UINT64_MAX, len, at);
        for (int d = 0; d < NDET; d++) {
            if (csv)
                printf("stationary,1,0,%llu,%s,%llu\n", (unsigned long long)seed,
                       det_name[d], (unsigned long long)at[d]);
            fa[d] += at[d] != 0;
        }
    }
    if (csv)
        return;
    char name[64];
    snprintf(name, sizeof name, "stationary, %llu samples: false alarms",
             (unsigned long long)len);
    printf("| %-34s |", name);
    for (int d = 0; d < NDET; d++) {
        char cell[32];
        snprintf(cell, sizeof cell, "%u of %u", fa[d], seeds);
        printf(" %-20s |", cell);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    unsigned seeds = 20, null_seeds = 20;
    uint64_t null_len = 100000;
    size_t restart = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--null-seeds") && i + 1 < argc)
            null_seeds = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--null-len") && i + 1 < argc)
            null_len = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--restart") && i + 1 < argc)
            restart = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--csv"))
            csv = 1;
        else {
            fprintf(stderr, "usage: %s [--seeds N] [--null-seeds N] [--null-len L] [--restart R] "
                            "[--csv]\n",
                    argv[0]);
            return 2;
        }
    }
    if (seeds < 1 || seeds > MAX_SEEDS || null_len < 1) {
        fprintf(stderr, "--seeds: 1..%d; --null-len >= 1\n", MAX_SEEDS);
        return 2;
    }
    calib_drift cd;
    calib_drift_cfg c = calibd_cfg(restart);
    if (calib_drift_init(&cd, &c) != CALIB_OK)
        return 1;
    const row rows[] = {
        {"T1 = 2, at 10,000", 2, 10000},
        {"T1 = 1.5, at 10,000", 1.5, 10000},
        {"T1 = 1.5 after 60,000 quiet samples", 1.5, 60000},
        {"T1 = 1.25, at 10,000", 1.25, 10000},
        {"T1 = 2, random in [10,000, 12,000)", 2, 0},
        {"T1 = 1.5, random", 1.5, 0},
        {"T1 = 1.25, random", 1.25, 0},
    };
    if (csv)
        printf("row,t1,change,seed,detector,alarm_at\n");
    else {
        printf("Detected within %d samples of the change / median delay, %u seeds a row "
               "(FA: false alarms before the change)\n\n", HORIZON, seeds);
        printf("| %-34s |", "change");
        for (int d = 0; d < NDET; d++)
            printf(" %-20s |", det_name[d]);
        printf("\n|%s|", "------------------------------------");
        for (int d = 0; d < NDET; d++)
            printf("%s|", "----------------------");
        printf("\n");
    }
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        run_row(&cd, &rows[r], seeds, (unsigned)r + 1);
    if (null_seeds)
        run_null(&cd, null_seeds, null_len);
    calib_drift_free(&cd);
    return 0;
}
