/*
 * bench_segments.c — calibd's calibration per segment (calibd(8),
 * SEGMENTS) on the scenario, through the model layer calibd runs
 * (model_segments, model_observe, the tick's seg_decide), without sockets.
 *
 *     scripts/build.sh plain && cd build/plain && \
 *         make tests/bench/bench_segments && ./tests/bench/bench_segments
 *
 * Options: --seeds N (100), --pairs N (50000), --values V (200), --bad B
 * (3), --sigma S (1.5), --t T (2), --alpha A (0.05), --min-effect D
 * (0.02, calibd's segment_min_effect; at 0 the calibrated values lie on
 * the null's boundary, where the level is tight), --every N (pairs
 * between two ticks' e-BH, 100), --csv (one line per seed).
 *
 * The stream: a K = 10 classifier reports softmax(z), z ~ N(0, sigma^2)
 * per class, as examples/simulate.c; each pair carries segment key
 * "segment" with one of V values, uniform; the labels of the first B
 * values come from softmax(z / T) (overconfident reports), the others'
 * from softmax(z) (calibrated). The model has segment_values = 256 (every
 * value tracked: V <= 256) and the other defaults of calibd.conf(5). Per
 * seed: the pair at which each bad value is flagged, the flags of
 * calibrated values (false discoveries), the false discovery proportion
 * of the flags at the end. Then the same seeds with no bad value: the
 * seeds that raise any flag.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/sample.h"
#include "calib/score.h"
#include "cfg.h"
#include "model.h"
#include "segment.h"

#define K 10

typedef struct opts {
    unsigned seeds;
    uint64_t pairs;
    unsigned values, bad;
    double sigma, t, alpha, min_effect;
    uint64_t every;
    int csv, refit;
} opts;

typedef struct outcome {
    uint64_t found_at[64]; /* per bad value: the pair flagged at, 0: never */
    unsigned true_flags, false_flags;
    unsigned refitted;        /* bad values with parameters of their own */
    double served, oracle;    /* Brier sums on their pairs after that */
    double before;            /* ... of the raw outputs */
    uint64_t pairs;
} outcome;

/* The tick's publish, at once: the parameters in force from the next pair. */
static int install(void *arg, model *m, const seg_key *k, seg_slot *s)
{
    (void)arg;
    model_params p;
    unsigned at;
    model_params_with_segment(m, k, s, 0, &p, &at);
    m->params = p;
    return 0;
}

/* softmax(z / t), libcalib's. */
static void softmax(const double *z, double t, double *p)
{
    for (int i = 0; i < K; i++)
        p[i] = z[i] / t;
    calib_softmax(p, K, p);
}

/* The Brier score of softmax(z / t) for outcome y. */
static double brier_at(const double *z, double t, size_t y)
{
    double q[K], b = 0;
    softmax(z, t, q);
    for (size_t i = 0; i < K; i++)
        b += (q[i] - (i == y)) * (q[i] - (i == y));
    return b;
}


static int run(const opts *o, uint64_t seed, unsigned bad, outcome *out)
{
    daemon_cfg dc;
    if (config_init(&dc) != 0)
        return -1;
    model_cfg c = dc.defaults;
    config_free(&dc);
    snprintf(c.name, sizeof c.name, "bench");
    c.segment_values = 256;
    c.segment_alpha = o->alpha;
    c.segment_min_effect = o->min_effect;
    c.segment_refit = o->refit;
    c.seed = seed;
    model *m = calloc(1, sizeof *m);
    if (!m || model_init(m, &c, seed, NULL) != CALIB_OK ||
        model_shape(m, CALIB_FORM_LOGITS, K) != CALIB_OK) {
        free(m);
        return -1;
    }
    /* the method calibd resolves for logits, at its identity (version 0) */
    m->params.desc = calib_plugin_builtin("temperature");
    m->params.n = 1;
    m->params.values[0] = 1;
    m->params.identity = 1;
    memset(out, 0, sizeof *out);
    calib_rng rng;
    calib_rng_seed(&rng, seed * 7919 + bad);
    double z[K], q[K], codes[SEG_MAX_KEYS];
    char name[16];
    for (uint64_t i = 1; i <= o->pairs; i++) {
        unsigned v = (unsigned)(calib_rng_next(&rng) % o->values);
        for (int j = 0; j < K; j++)
            z[j] = o->sigma * calib_rng_normal(&rng);
        softmax(z, v < bad ? o->t : 1, q);
        double y = (double)calib_rng_categorical(&rng, q, K);
        int len = snprintf(name, sizeof name, "v%u", v);
        seg_kv kv = {"segment", name, 7, (size_t)len};
        model_segments(m, &kv, 1, codes, 0);
        int which;
        const double *sv = model_pair_values(m, &m->params, codes, &which);
        if (which >= 0 && v < bad) { /* served: the value's own temperature */
            out->served += brier_at(z, sv[0], (size_t)y);
            out->oracle += brier_at(z, o->t, (size_t)y);
            out->before += brier_at(z, 1, (size_t)y);
            out->pairs++;
        }
        model_observe(m, z, y, 1e9 + (double)i * 1e-4, codes);
        if (i % o->every == 0 || i == o->pairs) {
            seg_decide(&m->seg, (double)i, NULL, NULL);
            model_segments_step(m, install, NULL, NULL); /* the tick's order */
        }
        if (i % o->every == 0 || i == o->pairs) {
            const seg_key *k = &m->seg.key[0];
            for (size_t s = 0; s < k->used; s++) {
                unsigned val = (unsigned)strtoul(k->slot[s].name + 1, NULL, 10);
                if (k->slot[s].flagged && val < bad && val < 64 && !out->found_at[val])
                    out->found_at[val] = i;
            }
        }
    }
    const seg_key *k = &m->seg.key[0];
    for (size_t s = 0; s < k->used; s++) {
        unsigned val = (unsigned)strtoul(k->slot[s].name + 1, NULL, 10);
        if (k->slot[s].flagged)
            val < bad ? out->true_flags++ : out->false_flags++;
    }
    out->refitted = m->params.nseg;
    model_free(m);
    free(m);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    opts o = {.seeds = 100, .pairs = 50000, .values = 200, .bad = 3, .sigma = 1.5, .t = 2,
              .alpha = 0.05, .min_effect = 0.02, .every = 100};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--csv") == 0 || strcmp(a, "--refit") == 0) {
            *(a[2] == 'c' ? &o.csv : &o.refit) = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_segments: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--seeds") == 0) o.seeds = (unsigned)atoi(v);
        else if (strcmp(a, "--pairs") == 0) o.pairs = strtoull(v, NULL, 10);
        else if (strcmp(a, "--values") == 0) o.values = (unsigned)atoi(v);
        else if (strcmp(a, "--bad") == 0) o.bad = (unsigned)atoi(v);
        else if (strcmp(a, "--sigma") == 0) o.sigma = atof(v);
        else if (strcmp(a, "--t") == 0) o.t = atof(v);
        else if (strcmp(a, "--alpha") == 0) o.alpha = atof(v);
        else if (strcmp(a, "--every") == 0) o.every = strtoull(v, NULL, 10);
        else if (strcmp(a, "--min-effect") == 0) o.min_effect = atof(v);
        else {
            fprintf(stderr, "bench_segments: unknown option %s\n", a);
            return 2;
        }
    }
    if (!o.seeds || !o.pairs || !o.values || o.values > 256 || o.bad > o.values || o.bad > 64 ||
        !o.every || !(o.sigma > 0) || !(o.t > 0) || !(o.alpha > 0 && o.alpha < 1) ||
        !(o.min_effect >= 0 && o.min_effect < 1)) {
        fprintf(stderr, "bench_segments: bad options\n");
        return 2;
    }
    unsigned all_found = 0, null_any = 0, all_refitted = 0;
    double fdp_sum = 0, served = 0, oracle = 0, before = 0;
    uint64_t fixed_pairs = 0;
    uint64_t *delays = calloc((size_t)o.seeds * o.bad + 1, sizeof *delays);
    size_t nd = 0;
    if (!delays)
        return 1;
    if (o.csv)
        printf("seed,found,true_flags,false_flags,last_found_at,null_flags\n");
    for (unsigned s = 1; s <= o.seeds; s++) {
        outcome w, n;
        if (run(&o, s, o.bad, &w) || run(&o, s, 0, &n)) {
            fprintf(stderr, "bench_segments: out of memory\n");
            return 1;
        }
        unsigned found = 0;
        uint64_t last = 0;
        for (unsigned b = 0; b < o.bad; b++)
            if (w.found_at[b]) {
                found++;
                delays[nd++] = w.found_at[b];
                last = w.found_at[b] > last ? w.found_at[b] : last;
            }
        all_found += found == o.bad;
        all_refitted += w.refitted == o.bad;
        served += w.served;
        oracle += w.oracle;
        before += w.before;
        fixed_pairs += w.pairs;
        unsigned flags = w.true_flags + w.false_flags;
        fdp_sum += flags ? (double)w.false_flags / flags : 0;
        null_any += n.false_flags > 0;
        if (o.csv)
            printf("%u,%u,%u,%u,%llu,%u\n", s, found, w.true_flags, w.false_flags,
                   (unsigned long long)last, n.false_flags);
    }
    qsort(delays, nd, sizeof *delays, cmp_u64);
    printf("# K = %d, %u values, %u overconfident (T = %g), sigma = %g, %llu pairs, "
           "segment_alpha = %g, segment_min_effect = %g, e-BH every %llu pairs, %u seeds\n", K,
           o.values, o.bad, o.t, o.sigma, (unsigned long long)o.pairs, o.alpha, o.min_effect,
           (unsigned long long)o.every, o.seeds);
    printf("seeds with all %u flagged within %llu pairs: %u of %u\n", o.bad,
           (unsigned long long)o.pairs, all_found, o.seeds);
    if (nd)
        printf("pairs until a bad value is flagged: median %llu, 90th percentile %llu "
               "(%zu of %u found)\n", (unsigned long long)delays[nd / 2],
               (unsigned long long)delays[(nd * 9) / 10 < nd ? (nd * 9) / 10 : nd - 1], nd,
               o.seeds * o.bad);
    printf("false discovery proportion, mean over seeds: %.4f (level %g)\n",
           fdp_sum / o.seeds, o.alpha);
    printf("no bad value: seeds with any flag: %u of %u\n", null_any, o.seeds);
    if (o.refit && fixed_pairs)
        printf("refit: seeds with all %u refitted: %u of %u; on their %llu pairs after it, "
               "Brier %.5f served, %.5f the oracle's (%+.2f%%), %.5f the raw outputs'\n",
               o.bad, all_refitted, o.seeds, (unsigned long long)fixed_pairs,
               served / fixed_pairs, oracle / fixed_pairs, 100 * (served / oracle - 1),
               before / fixed_pairs);
    free(delays);
    return 0;
}
