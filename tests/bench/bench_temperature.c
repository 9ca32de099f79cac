/*
 * bench_temperature.c — wall time of one temperature fit (mean NLL) on
 * n = 10,000 samples with K = 1000 logits; the target is under 100 ms.
 *
 * Data: z ~ N(0, 1.5^2) per class, labels drawn from softmax(z / 2), so the
 * fit starts at the identity T = 1 and has to travel to T ~= 2. Prints one
 * line per repetition and the median; `make bench` runs it.
 *
 *     bench_temperature [n [k [reps]]]
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "calib/calib.h"
#include "calib/recal.h"

#define T_TRUE 2.0

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t arg(int argc, char **argv, int i, size_t def)
{
    return argc > i ? (size_t)strtoul(argv[i], NULL, 10) : def;
}

int main(int argc, char **argv)
{
    size_t n = arg(argc, argv, 1, 10000), k = arg(argc, argv, 2, 1000);
    size_t reps = arg(argc, argv, 3, 5), stride = k + 1;
    double *rec = malloc(n * stride * sizeof *rec), *p = malloc(k * sizeof *p);
    double *ms = malloc(reps * sizeof *ms);
    calib_rng rng;
    if (!rec || !p || !ms || n == 0 || k < 2 || reps == 0) {
        fprintf(stderr, "bench_temperature: bad arguments or out of memory\n");
        return 1;
    }
    calib_rng_seed(&rng, 20221128);
    for (size_t i = 0; i < n; i++) {
        double *z = rec + i * stride;
        for (size_t j = 0; j < k; j++)
            z[j] = 1.5 * calib_rng_normal(&rng);
        for (size_t j = 0; j < k; j++)
            p[j] = z[j] / T_TRUE;
        calib_softmax(p, k, p);
        z[k] = (double)calib_rng_categorical(&rng, p, k);
    }
    calib_dataset ds = {CALIB_FORM_LOGITS, k, n, stride, rec};
    for (size_t r = 0; r < reps; r++) {
        calib_recal_result res;
        double t0 = now();
        int rc = calib_recal_fit_temperature(&ds, NULL, &res);
        ms[r] = 1e3 * (now() - t0);
        if (rc) {
            fprintf(stderr, "bench_temperature: %s\n", calib_strerror(rc));
            return 1;
        }
        printf("fit %zu: %.1f ms  T=%.6f iterations=%u fallbacks=%u "
               "converged=%d nll %.6f -> %.6f\n",
               r + 1, ms[r], res.params[0], res.iterations, res.fallbacks,
               res.converged, res.objective_before, res.objective_after);
    }
    qsort(ms, reps, sizeof *ms, cmp_double);
    printf("temperature fit, n=%zu K=%zu: median %.1f ms, min %.1f ms over %zu runs\n",
           n, k, ms[reps / 2], ms[0], reps);
    free(rec);
    free(p);
    free(ms);
    return 0;
}
