/* bench_online.c — recalibration maps learned online (calib/online.h):
 * over 10 seeds of 20,000 pairs, each method on streams miscalibrated by
 * a known map, the regret against the best fixed map in hindsight (the
 * batch fit of recal.h, or variance's closed form), how far the last map
 * is from that best one, and the time of an update.
 * Run: make -C build/plain tests/bench/bench_online && build/plain/tests/bench/bench_online
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "calib/calib.h"
#include "calib/online.h"
#include "calib/recal.h"

enum { N = 20000, SEEDS = 10, KMAX = 10 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* one pair of a stream miscalibrated by `m` (T, a slope, or a scale),
 * written as a record of the method's form (outputs, then y) */
static void pair(calib_rng *r, int method, size_t k, double m, double *row)
{
    if (method == CALIB_ONLINE_VARIANCE) {
        row[0] = 3 * calib_rng_normal(r);
        row[1] = 0.5 + 1.5 * calib_rng_uniform(r);
        row[2] = row[0] + sqrt(m * row[1]) * calib_rng_normal(r);
        return;
    }
    if (method == CALIB_ONLINE_PLATT) { /* p = sigmoid(s / m + 0.3): best a = m */
        double s = 2 * calib_rng_normal(r);
        row[0] = 1 / (1 + exp(-(s / m + 0.3)));
        row[1] = calib_rng_uniform(r) < 1 / (1 + exp(-s));
        return;
    }
    double t[KMAX], p[KMAX], sum = 0;
    for (size_t j = 0; j < k; j++) {
        t[j] = 2 * calib_rng_normal(r);
        p[j] = exp(t[j]);
        sum += p[j];
        row[j] = m * t[j]; /* logits m times the truth's: best T = m */
    }
    double u = calib_rng_uniform(r) * sum, c = 0;
    row[k] = (double)(k - 1);
    for (size_t j = 0; j < k; j++) {
        c += p[j];
        if (u <= c) {
            row[k] = (double)j;
            break;
        }
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(const char *name, int method, int form, size_t k, double m, double *rec)
{
    size_t width = method == CALIB_ONLINE_VARIANCE ? 2 : form == CALIB_FORM_BINARY ? 1 : k;
    size_t stride = width + 1;
    double regret[SEEDS], off = 0, secs = 0;
    for (int s = 0; s < SEEDS; s++) {
        calib_rng r;
        calib_rng_seed(&r, 100 + (uint64_t)s);
        for (int i = 0; i < N; i++)
            pair(&r, method, k, m, rec + i * stride);
        calib_online o;
        if (calib_online_init(&o, name, form, k, NULL) != CALIB_OK) {
            fprintf(stderr, "bench_online: init %s failed\n", name);
            exit(1);
        }
        double t0 = now();
        for (int i = 0; i < N; i++)
            calib_online_update(&o, rec + i * stride, rec[i * stride + width]);
        secs += now() - t0;
        double best[2] = {1, 0};
        if (method == CALIB_ONLINE_VARIANCE) {
            double sum = 0;
            for (int i = 0; i < N; i++) {
                const double *x = rec + i * stride;
                sum += (x[2] - x[0]) * (x[2] - x[0]) / x[1];
            }
            best[0] = sum / N;
        } else {
            calib_dataset ds = {.form = form, .k = form == CALIB_FORM_BINARY ? 2 : k, .n = N,
                                .stride = stride, .rec = rec};
            calib_recal_result res;
            int e = method == CALIB_ONLINE_PLATT ? calib_recal_fit_platt(&ds, NULL, &res)
                                                 : calib_recal_fit_temperature(&ds, NULL, &res);
            if (e != CALIB_OK) {
                fprintf(stderr, "bench_online: the batch fit failed\n");
                exit(1);
            }
            best[0] = res.params[0];
            best[1] = res.params[1];
        }
        double fixed = 0, p[2];
        for (int i = 0; i < N; i++)
            fixed += calib_online_loss_of(&o, best, rec + i * stride, rec[i * stride + width]);
        regret[s] = calib_ksum_value(&o.loss) - fixed;
        calib_online_params(&o, p);
        double d = fabs(p[0] / best[0] - 1);
        off = d > off ? d : off;
        calib_online_free(&o);
    }
    qsort(regret, SEEDS, sizeof *regret, cmp);
    printf("%-12s K %2zu map %5.2f  regret median %7.2f worst %7.2f (ln n = %.1f)  "
           "last map off by %5.2f%% at most  %6.0f ns an update\n",
           name, method == CALIB_ONLINE_VARIANCE ? (size_t)1 : k, m,
           (regret[SEEDS / 2 - 1] + regret[SEEDS / 2]) / 2, regret[SEEDS - 1], log(N), 100 * off,
           1e9 * secs / (SEEDS * (double)N));
}

int main(void)
{
    double *rec = malloc((size_t)N * (KMAX + 1) * sizeof *rec);
    if (!rec)
        return 1;
    const double maps[4] = {0.5, 1, 2, 4};
    for (int i = 0; i < 4; i++)
        run("temperature", CALIB_ONLINE_TEMPERATURE, CALIB_FORM_LOGITS, 2, maps[i], rec);
    for (int i = 0; i < 4; i++)
        run("temperature", CALIB_ONLINE_TEMPERATURE, CALIB_FORM_LOGITS, 10, maps[i], rec);
    for (int i = 0; i < 4; i++)
        run("platt", CALIB_ONLINE_PLATT, CALIB_FORM_BINARY, 2, maps[i], rec);
    const double scales[4] = {0.25, 1, 4, 16};
    for (int i = 0; i < 4; i++)
        run("variance", CALIB_ONLINE_VARIANCE, CALIB_FORM_GAUSSIAN, 0, scales[i], rec);
    free(rec);
    return 0;
}
