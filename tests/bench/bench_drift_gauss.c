/*
 * bench_drift_gauss.c — calibd's drift detection for Gaussian forecasts
 * (calibd(8), CLOSED LOOP) beside a PIT monitor, on the scenarios of
 * issue 40, through the model layer calibd runs (model_observe), without
 * sockets.
 *
 *     scripts/build.sh plain && cd build/plain && \
 *         make tests/bench/bench_drift_gauss && ./tests/bench/bench_drift_gauss
 *
 * Options: --seeds N (20), --after N (5000: pairs before the change),
 * --pairs N (30000 in all), --csv (one line per seed and detector).
 *
 * The stream: forecasts N(mu, 1), mu ~ N(0, 1), whose outcomes are
 * N(mu, 1) for the first `after` pairs and then, by scenario, N(mu, 1.5^2)
 * (spread x1.5), N(mu, 1.25^2), N(mu + 0.5, 1) (biased), or unchanged
 * (null). The detectors, each on its own copy of the stream:
 *   - calibd, drift_alpha 0.05 and 0.01 (the default): a model on
 *     calibd's defaults (identity parameters, its loop's detectors: the
 *     DSS exceedance test at 0.8 of the level and the two location tests
 *     of the standardised residual at 0.1 each);
 *   - calibd before the location tests: the DSS test alone at the whole
 *     of drift_alpha 0.01 (what calibd ran until this bench's commit);
 *   - a PIT monitor at 0.05, written here after the idea of PITMonitor
 *     (arXiv 2603.13156; not its code): the PITs u = Phi((y - mu) / sigma)
 *     in 10 bins; every 500 pairs a new e-process starts, the likelihood
 *     ratio of a Krichevsky-Trofimov mixture over the bins' probabilities
 *     (of the pairs since its start) to the uniform law, with prior weight
 *     1 / (j (j + 1)); it alarms once a weighted one reaches 1 / alpha
 *     (Ville and a union bound: level alpha on a calibrated stream). It
 *     keeps its 8 largest.
 * Reported: per detector and scenario, the seeds that alarmed after the
 * change (and before it: false alarms), and the median and largest delay
 * (pairs after the change) of those that did.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/drift.h"
#include "calib/sample.h"
#include "calib/score.h"
#include "cfg.h"
#include "model.h"

enum { SCEN = 4, DET = 4, PIT_BINS = 10, PIT_EVERY = 500, PIT_BANK = 8 };

static const char *const scen_name[SCEN] = {"spread x1.5", "spread x1.25", "biased +0.5",
                                            "no change"};
static const char *const det_name[DET] = {"calibd, drift_alpha 0.05",
                                          "calibd, drift_alpha 0.01 (default)",
                                          "calibd before (DSS test alone, 0.01)",
                                          "PIT monitor, alpha 0.05"};

/* ------------------------------------------------------------ PIT monitor */

typedef struct pit_proc {
    double log_w, log_e;
    unsigned cnt[PIT_BINS];
    unsigned n;
} pit_proc;

typedef struct pit_mon {
    double alpha;
    pit_proc p[PIT_BANK];
    unsigned np, started;
    uint64_t n;
} pit_mon;

/* 1 when this PIT raises the alarm */
static int pit_add(pit_mon *m, double u)
{
    if (m->n++ % PIT_EVERY == 0) {
        if (m->np == PIT_BANK) { /* drop the least weighted wealth */
            unsigned lo = 0;
            for (unsigned i = 1; i < m->np; i++)
                lo = m->p[i].log_w + m->p[i].log_e < m->p[lo].log_w + m->p[lo].log_e ? i : lo;
            m->p[lo] = m->p[--m->np];
        }
        double j = ++m->started;
        m->p[m->np++] = (pit_proc){.log_w = -log(j * (j + 1))};
    }
    unsigned b = (unsigned)(u * PIT_BINS);
    b = b >= PIT_BINS ? PIT_BINS - 1 : b;
    double level = log(1 / m->alpha);
    int alarm = 0;
    for (unsigned i = 0; i < m->np; i++) {
        pit_proc *p = &m->p[i];
        /* KT predictive of bin b against the uniform 1 / PIT_BINS */
        p->log_e += log(PIT_BINS * (p->cnt[b] + 0.5) / (p->n + 0.5 * PIT_BINS));
        p->cnt[b]++;
        p->n++;
        alarm |= p->log_w + p->log_e >= level;
    }
    return alarm;
}

/* ------------------------------------------------------------ the runs */

static model *new_model(double alpha)
{
    daemon_cfg dc;
    if (config_init(&dc) != 0)
        return NULL;
    model_cfg c = dc.defaults;
    config_free(&dc);
    snprintf(c.name, sizeof c.name, "bench");
    c.drift_alpha = alpha;
    model *m = calloc(1, sizeof *m);
    if (!m || model_init(m, &c, 1, NULL) != CALIB_OK ||
        model_shape(m, CALIB_FORM_GAUSSIAN, 1) != CALIB_OK || model_recalib_attach(m, 0) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

/* The pair (1-based) at which each detector alarmed, 0: never. */
static int run(int scen, uint64_t seed, uint64_t after, uint64_t pairs, uint64_t at[DET])
{
    model *m[2] = {new_model(0.05), new_model(0.01)};
    if (!m[0] || !m[1])
        return -1;
    daemon_cfg dc;
    if (config_init(&dc) != 0)
        return -1;
    calib_drift_cfg bc = {.kind = CALIB_DRIFT_EXCEED, .alpha = 0.01,
                          .min_effect = dc.defaults.drift_min_effect,
                          .quantile = dc.defaults.drift_quantile,
                          .reference = dc.defaults.drift_reference,
                          .restart = dc.defaults.drift_reference};
    config_free(&dc);
    calib_drift before;
    if (calib_drift_init(&before, &bc) != CALIB_OK)
        return -1;
    pit_mon pit = {.alpha = 0.05};
    calib_rng r;
    calib_rng_seed(&r, seed);
    memset(at, 0, DET * sizeof *at);
    for (uint64_t i = 0; i < pairs; i++) {
        double x[2] = {calib_rng_normal(&r), 1}, e = calib_rng_normal(&r), y = x[0] + e;
        if (i >= after) {
            if (scen == 0)
                y = x[0] + 1.5 * e;
            else if (scen == 1)
                y = x[0] + 1.25 * e;
            else if (scen == 2)
                y = x[0] + 0.5 + e;
        }
        for (int d = 0; d < 2; d++)
            if (!at[d]) {
                model_observe(m[d], x, y, 1000 + 1e-3 * (double)i, NULL);
                if (m[d]->recalib.drift_alarm)
                    at[d] = i + 1;
            }
        if (!at[2] && calib_drift_add(&before, calib_score_dss(x[0], x[1], y)))
            at[2] = i + 1;
        if (!at[3] && pit_add(&pit, 0.5 * erfc(-(y - x[0]) / sqrt(2 * x[1]))))
            at[3] = i + 1;
    }
    for (int d = 0; d < 2; d++) {
        model_free(m[d]);
        free(m[d]);
    }
    calib_drift_free(&before);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    unsigned seeds = 20;
    uint64_t after = 5000, pairs = 30000;
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--after") == 0 && i + 1 < argc)
            after = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc)
            pairs = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--csv") == 0)
            csv = 1;
        else {
            fprintf(stderr, "usage: bench_drift_gauss [--seeds N] [--after N] [--pairs N] "
                            "[--csv]\n");
            return 2;
        }
    }
    if (!seeds || seeds > 1000 || after >= pairs) {
        fprintf(stderr, "bench_drift_gauss: 1..1000 seeds, --after below --pairs\n");
        return 2;
    }
    uint64_t *at = calloc((size_t)seeds * SCEN * DET, sizeof *at);
    if (!at)
        return 1;
    for (int s = 0; s < SCEN; s++)
        for (unsigned k = 0; k < seeds; k++) {
            uint64_t *a = at + ((size_t)s * seeds + k) * DET;
            if (run(s, 1000 * (uint64_t)s + k + 1, after, pairs, a) != 0) {
                fprintf(stderr, "bench_drift_gauss: out of memory\n");
                return 1;
            }
            for (int d = 0; csv && d < DET; d++)
                printf("%s,%u,%s,%llu\n", scen_name[s], k, det_name[d],
                       (unsigned long long)a[d]);
        }
    if (csv)
        return 0;
    printf("%u seeds a scenario; the change after pair %llu of %llu\n\n", seeds,
           (unsigned long long)after, (unsigned long long)pairs);
    printf("| detector | scenario | detected | false alarms | delay median | delay max |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int d = 0; d < DET; d++)
        for (int s = 0; s < SCEN; s++) {
            uint64_t delay[1000];
            unsigned hit = 0, early = 0;
            for (unsigned k = 0; k < seeds; k++) {
                uint64_t t = at[((size_t)s * seeds + k) * DET + d];
                if (t && (s == 3 || t <= after))
                    early++;
                else if (t)
                    delay[hit++] = t - after;
            }
            qsort(delay, hit, sizeof *delay, cmp_u64);
            if (hit)
                printf("| %s | %s | %u/%u | %u | %llu | %llu |\n", det_name[d], scen_name[s],
                       hit, seeds, early, (unsigned long long)delay[(hit - 1) / 2],
                       (unsigned long long)delay[hit - 1]);
            else
                printf("| %s | %s | 0/%u | %u | - | - |\n", det_name[d], scen_name[s], seeds,
                       early);
        }
    free(at);
    return 0;
}
