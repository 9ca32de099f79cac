/* test_model.c — a model of calibd without a daemon: its byte budgets,
 * its shape and what a pair updates, the rejection counters, and the
 * params message of its parameters. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mpw.h"
#include "calib/protocol.h"
#include "calib/pubmsg.h"
#include "cfg.h"
#include "recalib.h"
#include "model.h"

static model_cfg defaults(void)
{
    daemon_cfg d;
    assert_int_equal(config_init(&d), 0);
    model_cfg c = d.defaults;
    snprintf(c.name, sizeof c.name, "m");
    config_free(&d);
    return c;
}

/* Every reason has its counter; a code that is no reason counts as
 * internal, never out of bounds. */
static void reject_counters_bounded(void **state)
{
    uint64_t counts[REJ_MAX] = {0};
    assert_int_equal(reject_count(counts, CALIB_REJ_BAD_TOPIC), CALIB_REJ_BAD_TOPIC);
    assert_int_equal(reject_count(counts, REJ_MEMORY_LIMIT), REJ_MEMORY_LIMIT);
    assert_int_equal(reject_count(counts, CALIB_EINVAL), REJ_INTERNAL);
    assert_int_equal(reject_count(counts, CALIB_REJ_NONE), REJ_INTERNAL);
    assert_int_equal(reject_count(counts, CALIB_REJ_COUNT), REJ_INTERNAL);
    assert_int_equal(reject_count(counts, REJ_MAX + 5), REJ_INTERNAL);
    assert_int_equal(counts[CALIB_REJ_BAD_TOPIC], 1);
    assert_int_equal(counts[REJ_MEMORY_LIMIT], 1);
    assert_int_equal(counts[REJ_INTERNAL], 4);
    assert_string_equal(reject_name(REJ_INTERNAL), "internal");
    assert_string_equal(reject_name(REJ_MEMORY_LIMIT), "memory_limit");
    assert_string_equal(reject_name(CALIB_REJ_BIN_AMBIGUOUS), "bin_ambiguous");
}

/* Capacities from the byte budgets, never above the configured counts;
 * the bytes grow with K and stay within the budgets' sum. */
static void sizes_follow_the_budgets(void **state)
{
    model_cfg c = defaults();
    model_sizes s;
    model_size(&c, CALIB_FORM_LOGITS, 10, &s);
    assert_int_equal(s.pending, c.max_pending);
    assert_int_equal(s.ring, c.ring);
    assert_int_equal(s.reservoir, c.reservoir);
    size_t k10 = s.bytes;
    model_size(&c, CALIB_FORM_LOGITS, 65536, &s);
    size_t item = sizeof(calib_join_entry) + 65536 * sizeof(double) + 2 * sizeof(uint32_t);
    assert_int_equal(s.pending, c.join_memory / item);
    assert_int_equal(s.ring, c.sample_memory / 2 / calib_store_bytes(65536, 1));
    assert_true(s.bytes > k10);
    assert_true(s.bytes < c.join_memory + c.sample_memory + (64u << 20));
    /* before the shape: the labels-only join table */
    model_sizes u;
    model_size(&c, -1, 0, &u);
    calib_join_cfg jc = {.ttl = 1, .capacity = c.max_pending, .joined_capacity = c.joined_memory};
    assert_int_equal(u.bytes, sizeof(model) + calib_join_bytes(&jc));
    /* a tiny budget still leaves one of each */
    c.join_memory = c.sample_memory = 65536;
    model_size(&c, CALIB_FORM_LOGITS, 65536, &s);
    assert_int_equal(s.pending, 1);
    assert_int_equal(s.ring, 1);
}

/* A shaped model holds what model_size said; a pair updates both views'
 * scores (equal while the parameters are the identity) by hand values. */
static void shape_and_observe(void **state)
{
    model_cfg c = defaults();
    c.join_memory = 1u << 20; /* 8 KiB items at K = 1000: 127 of them */
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_false(m->shaped);
    assert_int_equal(model_shape(m, CALIB_FORM_LOGITS, 1000), CALIB_OK);
    assert_true(m->shaped);
    assert_int_equal(m->join.cfg.capacity, m->sizes.pending);
    assert_true(m->sizes.pending < c.max_pending);
    assert_int_equal(calib_ring_cap(&m->ring), m->sizes.ring);
    model_free(m);

    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_BINARY, 2), CALIB_OK);
    double x = 0.8;
    model_observe(m, &x, 1, 1000, NULL);
    x = 0.4;
    model_observe(m, &x, 0, 1001, NULL);
    /* Brier of a binary p: 2 (p - y)^2 -> 0.08 and 0.32 */
    assert_int_equal(m->scored, 2);
    assert_close(calib_accum_mean(&m->cum[VIEW_RAW][WS_MAIN]), 0.2, 1e-15);
    assert_close(calib_accum_mean(&m->cum[VIEW_CAL][WS_MAIN]), 0.2, 1e-15);
    /* log: -(ln 0.8 + ln 0.6) / 2 */
    assert_close(calib_accum_mean(&m->cum[VIEW_RAW][WS_LOG]), -(log(0.8) + log(0.6)) / 2, 1e-15);
    assert_int_equal(calib_ring_len(&m->ring), 2);
    assert_int_equal(calib_reservoir_len(&m->reservoir), 2);
    model_free(m);
    free(m);
}

/* K = 10 logits x ~ 2 N(0, 1) and their probabilities p. */
static void draw10(calib_rng *rng, double x[10], double p[10])
{
    double z = 0;
    for (int c = 0; c < 10; c++) {
        x[c] = 2 * calib_rng_normal(rng);
        z += p[c] = exp(x[c]);
    }
    for (int c = 0; c < 10; c++)
        p[c] /= z;
}

/* Feeds n pairs of K = 10 logits with outcomes drawn from them, at wall
 * times t0, t0 + 0.01, ... */
static void feed10_at(model *m, int n, uint64_t seed, double t0)
{
    calib_rng rng;
    calib_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        double x[10], p[10];
        draw10(&rng, x, p);
        model_observe(m, x, (double)calib_rng_categorical(&rng, p, 10), t0 + i * 0.01, NULL);
    }
}

static void feed10(model *m, int n, uint64_t seed)
{
    feed10_at(m, n, seed, 1000);
}

/* A model of K = 10 logits on settings c, its memory drawn on daemon. */
static model *new_k10(const model_cfg *c, calib_budget *daemon)
{
    calib_budget_init(daemon, SIZE_MAX, NULL);
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, c, 7, daemon), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_LOGITS, 10), CALIB_OK);
    return m;
}

/* A new K = 10 model on the defaults holds at most 256 KiB, taken from its
 * parent budget; fed, it grows to its ring and reservoir and no further
 * than model_size's most; freed, it gives everything back. */
static void memory_grows_with_use(void **state)
{
    model_cfg c = defaults();
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    print_message("a new K = 10 model: %zu bytes (at most %zu)\n", m->mem.used,
                  m->sizes.bytes);
    assert_true(m->mem.used <= 256 * 1024);
    assert_int_equal(daemon.used, m->mem.used);
    size_t fresh = m->mem.used;
    feed10(m, 25000, 3);
    assert_int_equal(calib_ring_len(&m->ring), c.ring);
    assert_int_equal(calib_reservoir_len(&m->reservoir), c.reservoir);
    size_t stores = calib_store_bytes(10, c.ring) + calib_store_bytes(10, c.reservoir) +
                    c.ring * sizeof(double);
    assert_true(m->mem.used >= fresh + stores - CALIB_STORE_FIRST * 25 * sizeof(double));
    assert_true(m->mem.used <= m->sizes.bytes);
    assert_int_equal(daemon.used, m->mem.used);
    assert_int_equal(daemon.refused, 0);
    model_free(m);
    assert_int_equal(daemon.used, 0);
    free(m);
}

/* Under a parent budget with 200 KiB to spare, the ring and the reservoir
 * stop growing where it refuses; every pair is still scored, the ring
 * keeps the newest records and the drift scores stay with them. */
static void memory_limit_stops_growth(void **state)
{
    model_cfg c = defaults();
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    daemon.limit = daemon.used + 200 * 1024;
    feed10(m, 20000, 4);
    assert_int_equal(m->scored, 20000);
    assert_true(daemon.refused > 0 && m->mem.refused == daemon.refused);
    assert_true(daemon.used <= daemon.limit);
    size_t ring = calib_ring_cap(&m->ring), res = m->reservoir.s.cap;
    print_message("stopped at ring %zu, reservoir %zu\n", ring, res);
    assert_true(ring < c.ring && res < c.reservoir);
    assert_int_equal(calib_ring_len(&m->ring), ring);
    assert_int_equal(calib_reservoir_len(&m->reservoir), res);
    /* the newest records, in order, with their scores */
    calib_record last = calib_ring_get(&m->ring, ring - 1);
    assert_close(last.t, 1000 + 19999 * 0.01, 1e-9);
    model_level lv = model_level_since(m, m->ring.total - ring, 2);
    assert_int_equal(lv.n, ring);
    assert_false(lv.truncated);
    assert_true(lv.mean > 0 && lv.mean < 2);
    model_free(m);
    assert_int_equal(daemon.used, 0);
    free(m);
}

/* The params message of a model's parameters (recalib_params_msg, written by
 * the codec) is what a serving node decodes: version 0 with an exact zero
 * improvement, then a published version with its figures. */
static void params_message_round_trips(void **state)
{
    model_cfg c = defaults();
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_BINARY, 2), CALIB_OK);
    calib_params_msg msg;
    calib_pubmsg got;
    calib_mpw w;

    recalib_params_msg(m, 1000.5, &msg);
    calib_mpw_init(&w);
    assert_int_equal(calib_params_msg_write(&w, &msg), CALIB_OK);
    assert_int_equal(calib_pubmsg_decode("m", 1, w.sb.data, w.sb.size, NULL, &got),
                     CALIB_REJ_NONE);
    assert_int_equal(got.type, CALIB_PUBMSG_PARAMS);
    assert_true(got.params.version == 0);
    assert_string_equal(got.params.method, "identity");
    assert_int_equal(got.params.nparams, 0);
    assert_true(got.params.ts == 1000.5);
    assert_true(got.params.improvement == 0 && got.params.ci[0] == 0 && got.params.ci[1] == 0);
    assert_nan(got.params.before.brier);

    model_params *p = &m->params;
    p->desc = calib_plugin_builtin("platt");
    snprintf(p->method, sizeof p->method, "platt");
    p->version = 4;
    p->n = 2;
    p->values[0] = 1.25;
    p->values[1] = -0.5;
    p->identity = 0;
    p->ts = 999;
    p->fit_n = 300;
    p->shadow_n = 120;
    p->before[0] = 0.3, p->before[1] = 0.8;
    p->after[0] = 0.25, p->after[1] = 0.7;
    p->improvement = 0.05, p->ci[0] = 0.01, p->ci[1] = 0.09;
    recalib_params_msg(m, 1001, &msg);
    calib_mpw_reset(&w);
    assert_int_equal(calib_params_msg_write(&w, &msg), CALIB_OK);
    assert_int_equal(calib_pubmsg_decode("m", 1, w.sb.data, w.sb.size, NULL, &got),
                     CALIB_REJ_NONE);
    const calib_params_msg *g = &got.params;
    assert_true(g->version == 4);
    assert_ptr_equal(g->desc, calib_plugin_builtin("platt"));
    assert_string_equal(g->names[0], "a");
    assert_string_equal(g->names[1], "b");
    assert_true(g->values[0] == 1.25 && g->values[1] == -0.5);
    assert_true(g->published == 999 && g->n == 300 && g->shadow_n == 120);
    assert_true(g->before.brier == 0.3 && g->before.log == 0.8);
    assert_true(g->after.brier == 0.25 && g->after.log == 0.7);
    assert_nan(g->after.dss);
    assert_true(g->improvement == 0.05 && g->ci[0] == 0.01 && g->ci[1] == 0.09);
    assert_int_equal(g->nsegments, 0);
    /* segments' parameters travel in the message, by the method's names */
    p->nseg = 1;
    p->seg[0] = (calib_params_segment){"country", "DE", {2.5, 0.25}};
    recalib_params_msg(m, 1002, &msg);
    calib_mpw_reset(&w);
    assert_int_equal(calib_params_msg_write(&w, &msg), CALIB_OK);
    assert_int_equal(calib_pubmsg_decode("m", 1, w.sb.data, w.sb.size, NULL, &got),
                     CALIB_REJ_NONE);
    assert_int_equal(g->nsegments, 1);
    assert_string_equal(g->segments[0].key, "country");
    assert_string_equal(g->segments[0].value, "DE");
    assert_true(g->segments[0].values[0] == 2.5 && g->segments[0].values[1] == 0.25);
    calib_mpw_destroy(&w);
    model_free(m);
    free(m);
}

/* Raw against calibrated on the same pairs: the paired difference is the
 * difference of the two views' means, pair by pair; a publish restarts it.
 * The counters' sums agree with the accumulators. */
static void paired_and_counter_sums(void **state)
{
    model_cfg c = defaults();
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_BINARY, 2), CALIB_OK);
    model_params *p = &m->params;
    p->desc = calib_plugin_builtin("platt");
    snprintf(p->method, sizeof p->method, "platt");
    p->n = 2;
    p->values[0] = 0.5; /* a < 1: less confident */
    p->values[1] = 0;
    p->identity = 0;
    model_paired_reset(m, 3, 500);
    static const double xs[] = {0.9, 0.95, 0.2, 0.7, 0.99, 0.6};
    static const double ys[] = {1, 0, 0, 1, 1, 0};
    for (int i = 0; i < 6; i++)
        model_observe(m, &xs[i], ys[i], 1000 + i, NULL);
    const model_paired *pr = &m->paired;
    assert_true(pr->version == 3 && pr->since == 500);
    for (int k = 0; k < WS_PER_VIEW; k++) {
        double raw = calib_accum_mean(&pr->view[VIEW_RAW][k]),
               cal = calib_accum_mean(&pr->view[VIEW_CAL][k]);
        assert_int_equal(pr->diff[k].n, 6);
        assert_close(calib_accum_mean(&pr->diff[k]), raw - cal, 1e-14);
        assert_true(raw != cal); /* the parameters change the scores */
        for (int v = 0; v < VIEWS; v++) {
            assert_close(calib_accum_mean(&pr->view[v][k]), calib_accum_mean(&m->cum[v][k]),
                         1e-15);
            const model_sums *sum = &m->sums[v][k];
            assert_true(sum->neg == 0); /* Brier and log are >= 0 */
            assert_close(sum->pos, calib_ksum_value(&m->cum[v][k].s1), 1e-12);
            assert_close(sum->sq, calib_ksum_value(&m->cum[v][k].s2), 1e-12);
        }
    }
    model_paired_reset(m, 4, 600);
    assert_int_equal(m->paired.diff[WS_MAIN].n, 0);
    assert_int_equal(m->paired.view[VIEW_CAL][WS_LOG].n, 0);
    assert_int_equal(m->cum[VIEW_CAL][WS_LOG].n, 6); /* cumulative stays */
    model_free(m);

    /* a Gaussian's DSS is negative for a small variance: its negative
     * parts are a counter of their own, and pos - neg is the sum */
    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_GAUSSIAN, 1), CALIB_OK);
    double g[3][2] = {{0, 0.01}, {1, 4}, {2, 0.5}};
    double gy[3] = {0.05, 3, 2.1};
    for (int i = 0; i < 3; i++)
        model_observe(m, g[i], gy[i], 1000, NULL);
    const model_sums *sum = &m->sums[VIEW_RAW][WS_MAIN];
    assert_true(sum->neg > 0 && sum->pos > 0);
    assert_close(sum->pos - sum->neg, calib_ksum_value(&m->cum[VIEW_RAW][WS_MAIN].s1), 1e-12);
    model_free(m);
    free(m);
}

/* Temperature parameters T = 1.5 as version `version`, from wall time t. */
static void set_temperature(model *m, uint64_t version, double t)
{
    model_params *p = &m->params;
    p->desc = calib_plugin_builtin("temperature");
    snprintf(p->method, sizeof p->method, "temperature");
    p->n = 1;
    p->values[0] = 1.5;
    p->identity = 0;
    p->version = version;
    model_paired_reset(m, version, t);
}

/* Feeds n pairs of K = 10 logits x whose outcomes come from softmax(x / t):
 * for t > 1 the model's softmax(x) is overconfident. */
static void feed10_tempered(model *m, int n, uint64_t seed, double t)
{
    calib_rng rng;
    calib_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        double x[10], p[10], z = 0;
        draw10(&rng, x, p);
        for (int c = 0; c < 10; c++)
            z += p[c] = exp(x[c] / t);
        for (int c = 0; c < 10; c++)
            p[c] /= z;
        model_observe(m, x, (double)calib_rng_categorical(&rng, p, 10), 1000 + i * 0.01, NULL);
    }
}

/* The miscalibration trigger on the observe path: a challenger T = 2
 * against the parameters in force (the identity), on each pair, while the
 * loop is idle. Outcomes from softmax(x / 2): the challenger is better by
 * far, and the test rejects within a few hundred pairs. Outcomes from
 * softmax(x): the challenger is worse, and 15,000 pairs come nowhere near
 * the level. While a candidate is in shadow the test takes no pair. */
static void trigger_tests_the_challenger(void **state)
{
    model_cfg c = defaults();
    calib_budget daemon;
    for (int over = 1; over >= 0; over--) {
        model *m = new_k10(&c, &daemon);
        model_recalib *l = &m->recalib;
        l->refit.phase = PHASE_IDLE;
        set_temperature(m, 0, 1000);
        m->params.values[0] = 1;
        m->params.identity = 1;
        l->challenger = m->params;
        l->challenger.values[0] = 2;
        l->challenger.identity = 0;
        calib_gate_cfg gc;
        model_trigger_cfg(m, &gc);
        assert_true(gc.alpha == c.miscal_alpha && gc.min_improvement == c.miscal_min_effect);
        assert_int_equal(calib_gate_init(&l->trig, &gc), CALIB_OK);
        l->trig_on = 1;
        if (over) {
            feed10_tempered(m, 1500, 3, 2);
            assert_int_equal(l->trig.state, CALIB_GATE_PASSED);
            assert_true(l->trig.pairs < 1500);
            assert_true(calib_accum_mean(&l->trig.diff) > 0.01);
        } else {
            feed10_tempered(m, 15000, 4, 1);
            assert_int_equal(l->trig.state, CALIB_GATE_RUNNING); /* its period: 20,000 */
            assert_int_equal(l->trig.pairs, 15000);
            assert_true(calib_accum_mean(&l->trig.diff) < 0);
            assert_true(calib_gate_log_e(&l->trig) < log(1 / c.miscal_alpha));
            /* busy: the test waits */
            uint64_t before = l->trig.pairs;
            l->refit.phase = PHASE_SHADOW;
            calib_gate_init(&l->gate, &gc);
            feed10_tempered(m, 100, 5, 1);
            assert_int_equal(l->trig.pairs, before);
        }
        model_free(m);
        free(m);
    }
}

/* The confidence sequences: per view over the paired pairs, holding the
 * paired mean, narrowing, restarted with the paired comparison; under
 * identity parameters the raw one stands for both; off with cs_alpha = 0
 * and for a Gaussian model. */
static void confidence_sequences(void **state)
{
    model_cfg c = defaults();
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    double lo, hi, lo2, hi2;
    assert_true(m->cs_on);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &lo, &hi), 0); /* no pairs */
    feed10(m, 200, 3);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &lo, &hi), 1);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_CAL, &lo2, &hi2), 1);
    assert_true(lo == lo2 && hi == hi2); /* identity: the raw one */
    assert_int_equal(m->cs[VIEW_CAL].n, 0); /* ... not fed twice */
    double mean = calib_accum_mean(&m->paired.view[VIEW_RAW][WS_MAIN]);
    assert_true(lo < mean && mean < hi && hi - lo < 2);
    double w200 = hi - lo;
    feed10(m, 3000, 4);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &lo, &hi), 1);
    mean = calib_accum_mean(&m->paired.view[VIEW_RAW][WS_MAIN]);
    assert_true(lo < mean && mean < hi && hi - lo < w200 / 2);
    /* a temperature: both views fed, each holding its own mean */
    set_temperature(m, 1, 2000);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &lo, &hi), 0); /* restarted */
    feed10(m, 2000, 5);
    assert_int_equal(m->cs[VIEW_CAL].n, 2000);
    for (int v = 0; v < VIEWS; v++) {
        mean = calib_accum_mean(&m->paired.view[v][WS_MAIN]);
        assert_int_equal(model_cs(m, CS_PAIRED, v, &lo, &hi), 1);
        assert_true(lo < mean && mean < hi);
    }
    model_free(m);
    free(m);
    c.cs_alpha = 0;
    m = new_k10(&c, &daemon);
    feed10(m, 10, 3);
    assert_false(m->cs_on);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &lo, &hi), 0);
    model_free(m);
    free(m);
}

/* The window's confidence sequences: over a period from the last multiple
 * of `window` seconds (or the parameters' change, if later), closed into
 * period.last at its end by a pair or a tick, and by a change of
 * parameters; the paired ones go on meanwhile. */
static void window_period_sequences(void **state)
{
    model_cfg c = defaults();
    c.window = 60;
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    double lo, hi, plo, phi;
    const model_period *pd = &m->period;
    assert_int_equal(model_cs(m, CS_PERIOD, VIEW_RAW, &lo, &hi), 0);
    feed10(m, 200, 3); /* at 1000 .. 1001.99: the period [960, 1020) */
    assert_true(pd->running && pd->since == 960 && pd->end == 1020);
    assert_int_equal(model_cs(m, CS_PERIOD, VIEW_CAL, &lo, &hi), 1); /* identity: raw's */
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &plo, &phi), 1);
    assert_true(lo == plo && hi == phi); /* the same 200 pairs */
    assert_int_equal(pd->last.n, 0);
    model_view_fill(m, 1019.9);
    assert_true(pd->running && pd->cs[VIEW_RAW].n == 200);
    model_view_fill(m, 1020); /* the tick closes it */
    assert_int_equal(pd->last.n, 200);
    assert_true(pd->last.since == 960 && pd->last.until == 1020);
    for (int v = 0; v < VIEWS; v++)
        assert_true(pd->last.rc[v] == 1 && pd->last.lo[v] == lo && pd->last.hi[v] == hi);
    assert_true(pd->running && pd->since == 1020 && pd->end == 1080);
    assert_int_equal(model_cs(m, CS_PERIOD, VIEW_RAW, &lo, &hi), 0);
    assert_int_equal(model_cs(m, CS_PAIRED, VIEW_RAW, &plo, &phi), 1); /* goes on */
    /* a clock stepped back stays in the period running */
    feed10_at(m, 100, 4, 1010);
    assert_true(pd->running && pd->since == 1020 && pd->cs[VIEW_RAW].n == 100);
    /* new parameters close it where they took over; the next starts there */
    set_temperature(m, 1, 1040);
    assert_false(pd->running);
    assert_true(pd->last.n == 100 && pd->last.since == 1020 && pd->last.until == 1040);
    feed10_at(m, 300, 5, 1041);
    assert_true(pd->running && pd->since == 1040 && pd->end == 1080);
    assert_int_equal(pd->cs[VIEW_CAL].n, 300);
    assert_int_equal(model_cs(m, CS_PERIOD, VIEW_RAW, &lo, &hi), 1);
    assert_int_equal(model_cs(m, CS_PERIOD, VIEW_CAL, &plo, &phi), 1);
    assert_true(lo != plo || hi != phi); /* each view its own */
    model_free(m);
    free(m);
}

/* Each period's sequence holds the true mean Brier at every pair of a
 * stationary stream in at least 95% of 200 periods (the fixed-time 95%
 * interval, looked at after every pair, misses far more often). The
 * mean, E[1 - sum p^2] over the logits, by Monte Carlo to about 2e-4. */
static void window_period_coverage(void **state)
{
    calib_rng rng;
    calib_rng_seed(&rng, 11);
    double x[10], p[10], mu = 0;
    enum { MC = 1000000, PERIODS = 200, PER = 200 };
    for (int i = 0; i < MC; i++) {
        draw10(&rng, x, p);
        double q = 0;
        for (int c = 0; c < 10; c++)
            q += p[c] * p[c];
        mu += (1 - q) / MC;
    }
    model_cfg c = defaults();
    c.window = 1;
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    int missed = 0, fixed_missed = 0;
    for (int k = 0; k < PERIODS; k++) {
        int miss = 0, fixed_miss = 0;
        calib_accum acc;
        calib_accum_init(&acc);
        for (int i = 0; i < PER; i++) {
            draw10(&rng, x, p);
            double y = (double)calib_rng_categorical(&rng, p, 10), lo, hi, ci[2];
            model_observe(m, x, y, 2000 + k + (i + 0.5) / PER, NULL);
            assert_int_equal(m->period.since, 2000 + k);
            assert_int_equal(model_cs(m, CS_PERIOD, VIEW_RAW, &lo, &hi), 1);
            miss |= !(lo <= mu && mu <= hi);
            double s[2];
            model_score(m, CALIB_FORM_LOGITS, x, y, m->p, s);
            calib_accum_add(&acc, s[0]);
            calib_accum_ci95(&acc, ci);
            fixed_miss |= i >= 10 && !(ci[0] <= mu && mu <= ci[1]);
        }
        missed += miss;
        fixed_missed += fixed_miss;
    }
    print_message("periods missing the mean %.4f: %d of %d (the fixed-time interval: %d)\n",
                  mu, missed, PERIODS, fixed_missed);
    assert_true(missed <= PERIODS / 20);
    assert_true(fixed_missed > PERIODS / 20); /* the test can tell */
    model_free(m);
    free(m);
}

/* The newest MODEL_EVENTS events, oldest first, texts cut to fit. */
static void events_ring(void **state)
{
    model_cfg c = defaults();
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_int_equal(model_events_len(m), 0);
    model_event_add(m, 1, "start", "first");
    assert_int_equal(model_events_len(m), 1);
    assert_string_equal(model_event_get(m, 0)->text, "first");
    for (int i = 2; i <= MODEL_EVENTS + 5; i++)
        model_event_add(m, i, i % 2 ? "drift" : "publish", "event %d", i);
    assert_int_equal(model_events_len(m), MODEL_EVENTS);
    assert_true(model_event_get(m, 0)->t == 6); /* 1..5 overwritten */
    assert_string_equal(model_event_get(m, 0)->text, "event 6");
    assert_string_equal(model_event_get(m, 0)->kind, "publish");
    assert_true(model_event_get(m, MODEL_EVENTS - 1)->t == MODEL_EVENTS + 5);
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    model_event_add(m, 99, "a_kind_longer_than_its_field", "%s", big);
    const model_event *e = model_event_get(m, MODEL_EVENTS - 1);
    assert_int_equal(strlen(e->text), sizeof e->text - 1);
    assert_int_equal(strlen(e->kind), sizeof e->kind - 1);
    model_free(m);
    free(m);
}

/* The install a passed gate asks for, as calibd's store would do it. */
static int install(void *arg, model *m, const seg_key *k, seg_slot *s)
{
    int *calls = arg;
    model_params p;
    unsigned at;
    model_params_with_segment(m, k, s, 0, &p, &at);
    m->params = p;
    ++*calls;
    return 0;
}

/* segment_refit: a segment overconfident by T = 2 among calibrated ones is
 * flagged, collects its next pairs, fits its own temperature (near 2),
 * passes its gate and gets it as the next version; from then on its pairs
 * are served (the calibrated view) under its temperature, the others under
 * the model's. A calibrated segment gets nothing. */
static void segment_refit(void **state)
{
    (void)state;
    model_cfg c = defaults();
    c.segment_refit = 1;
    c.segment_refit_samples = 300;
    c.miscal_trigger = 0;
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, &c, 7, NULL), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_LOGITS, 10), CALIB_OK);
    set_temperature(m, 0, 0);
    m->params.values[0] = 1;
    m->params.identity = 1;
    calib_rng rng;
    calib_rng_seed(&rng, 11);
    int calls = 0;
    double codes[SEG_MAX_KEYS];
    uint64_t served_after = 0;
    for (int i = 0; i < 20000 && !calls; i++) {
        double x[10], p[10], z = 0;
        draw10(&rng, x, p);
        int bad = i % 2;
        double t = bad ? 2 : 1;
        for (int k = 0; k < 10; k++)
            z += p[k] = exp(x[k] / t);
        for (int k = 0; k < 10; k++)
            p[k] /= z;
        seg_kv kv = {"tier", bad ? "gold" : "free", 4, 4};
        model_segments(m, &kv, 1, codes, 0);
        model_observe(m, x, (double)calib_rng_categorical(&rng, p, 10), 1000 + i * 0.01, codes);
        if (i % 100 == 99) {
            seg_decide(&m->seg, i, NULL, NULL);
            model_segments_step(m, install, &calls, NULL);
        }
    }
    assert_int_equal(calls, 1);
    assert_true(m->params.version == 1);
    assert_int_equal(m->params.nseg, 1);
    assert_string_equal(m->params.seg[0].key, "tier");
    assert_string_equal(m->params.seg[0].value, "gold");
    double t = m->params.seg[0].values[0];
    print_message("segment temperature %.4f\n", t);
    assert_true(t > 1.7 && t < 2.3);
    /* the pairs of "gold" now get it, "free"'s the model's identity */
    seg_kv gold = {"tier", "gold", 4, 4}, free_ = {"tier", "free", 4, 4};
    int which;
    model_segments(m, &gold, 1, codes, 0);
    assert_true(model_pair_values(m, &m->params, codes, &which)[0] == t && which == 0);
    model_segments(m, &free_, 1, codes, 0);
    assert_true(model_pair_values(m, &m->params, codes, &which) == m->params.values &&
                which == -1);
    assert_null(m->seg.key[0].slot[0].fix); /* free's slot never ran one */
    const seg_slot *g = seg_route(&m->seg, 0, codes[0]) == &m->seg.key[0].slot[0]
                            ? &m->seg.key[0].slot[1] : &m->seg.key[0].slot[0];
    assert_true(g->flagged && g->passed == 1 && g->fits == 1 && !g->fix);
    /* nothing runs again for a segment that has its parameters */
    model_segments_step(m, install, &calls, NULL);
    assert_null(g->fix);
    (void)served_after;
    model_free(m);
    free(m);
}

/* The label-free estimates: each prediction as served (here under T =
 * 1.5), figures at the tick every label_free_interval seconds when
 * predictions came, the reference priors from the ring's labels, the
 * ring's growth on the model's budget, and the test restarted by new
 * parameters. */
/* A version with prior weights: the calibrated view scores the weighted
 * outputs (the map, then calib_prior_weigh), the label-free ring keeps
 * them before the weights, the grading's naive estimate is of what was
 * served; model_lfree_weights gives EM's priors over the reference's. */
static void prior_weights_served(void **state)
{
    (void)state;
    model_cfg c = defaults();
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    set_temperature(m, 1, 0);
    double w[10];
    for (int j = 0; j < 10; j++)
        w[j] = j == 0 ? 4.0 : 0.5;
    /* no labelled pair yet: no reference, no weights */
    assert_int_equal(model_lfree_weights(m, w), 0);
    m->params.nw = 10;
    memcpy(m->params.w, w, sizeof w);
    assert_false(model_params_serves_identity(&m->params));
    calib_rng rng;
    calib_rng_seed(&rng, 9);
    double x[10], p[10], q[10];
    draw10(&rng, x, p);
    double slot;
    model_predicted(m, x, NULL, &slot);
    for (int j = 0; j < 10; j++)
        q[j] = x[j] / 1.5;
    calib_softmax(q, 10, q);
    /* the ring: the map's outputs, as float32 */
    for (int j = 0; j < 10; j++)
        assert_close(m->lf.rec[j], q[j], 1e-7);
    double served[10];
    memcpy(served, q, sizeof q);
    assert_int_equal(calib_prior_weigh(w, 10, CALIB_FORM_PROBS, 10, served), CALIB_OK);
    model_observe_at(m, x, 0, 1000, NULL, INFINITY, &slot);
    double brier = 0, sq = 0;
    for (int j = 0; j < 10; j++) {
        brier += (served[j] - (j == 0)) * (served[j] - (j == 0));
        sq += served[j] * served[j];
    }
    assert_close(calib_accum_mean(&m->cum[VIEW_CAL][WS_MAIN]), brier, 1e-12);
    /* graded on the served (weighted) outputs, from the float record */
    calib_accum all[2], since[2];
    model_lf_graded(m, all, since);
    assert_close(calib_accum_mean(&all[LF_NAIVE]), brier - (1 - sq), 1e-6);
    /* labels from the served map's outputs (calibrated on this source),
     * then a label shift: class 0 kept, the others one in four (p(x | y)
     * fixed), labels withheld; the true weights are 4 : 1 */
    for (int i = 0; i < 9000; i++) {
        draw10(&rng, x, p);
        for (int j = 0; j < 10; j++)
            q[j] = x[j] / 1.5;
        calib_softmax(q, 10, q);
        size_t y = calib_rng_categorical(&rng, q, 10);
        if (i < 1000)
            model_observe(m, x, (double)y, 1001 + i, NULL);
        else if (y == 0 || calib_rng_uniform(&rng) < 0.25)
            model_predicted(m, x, NULL, NULL);
    }
    assert_int_equal(model_lfree_weights(m, w), 1);
    for (int j = 1; j < 10; j++)
        assert_true(w[0] > 2 * w[j]);
    model_free(m);
    free(m);
}

static void label_free_step(void **state)
{
    (void)state;
    model_cfg c = defaults();
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    set_temperature(m, 1, 0);
    calib_rng rng;
    calib_rng_seed(&rng, 5);
    double want = 0, graded = 0;
    size_t held = m->mem.used, labels[10] = {0};
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        double x[10], p[10], q[10], sq = 0;
        draw10(&rng, x, p);
        for (int j = 0; j < 10; j++)
            q[j] = x[j] / 1.5;
        calib_softmax(q, 10, q);
        for (int j = 0; j < 10; j++)
            sq += q[j] * q[j];
        want += 1 - sq;
        double slot;
        model_predicted(m, x, NULL, &slot);
        size_t y = calib_rng_categorical(&rng, p, 10);
        labels[y]++;
        double brier = 0; /* of the served q */
        for (size_t j = 0; j < 10; j++)
            brier += (q[j] - (j == y)) * (q[j] - (j == y));
        graded += brier - (1 - sq);
        model_observe_at(m, x, (double)y, 1000 + i, NULL, INFINITY, &slot);
    }
    /* graded: each pair's calibrated Brier less the naive estimate its
     * prediction got (from the float record: ~1e-7); no priors yet, so
     * the corrected one is the same. N = 200: 3 blocks of LF_PEND_MAX (64)
     * in the compensated sums, 8 pending */
    calib_accum all[2], since[2];
    model_lf_graded(m, all, since);
    assert_int_equal(all[LF_NAIVE].n, N);
    assert_int_equal(m->lf_graded[LF_NAIVE].n, 192);
    assert_close(calib_accum_mean(&all[LF_NAIVE]), graded / N, 1e-6);
    assert_close(calib_accum_mean(&all[LF_CORRECTED]), calib_accum_mean(&all[LF_NAIVE]), 0);
    assert_close(calib_accum_mean(&since[LF_NAIVE]), graded / N, 1e-6);
    assert_true(m->mem.used > held); /* the ring grew past its first 16 */
    assert_int_equal(m->lf.total, N);
    assert_int_equal(model_lfree_step(m, 100), 1);
    assert_int_equal(m->lf.fig.n, N);
    assert_close(m->lf.fig.naive[CALIB_LFREE_MAIN].mean, want / N, 1e-6);
    assert_int_equal(m->lf.fig.corrected, 1);
    double src[10];
    assert_int_equal(model_reference_priors(m, src), 1);
    for (int j = 0; j < 10; j++)
        assert_close(src[j], (labels[j] + 0.5) / (N + 5.0), 1e-12);
    assert_close(m->lf.src[3], src[3], 0);
    /* nothing new: no update; new, within the interval: none; after it: one */
    assert_int_equal(model_lfree_step(m, 200), 0);
    double x[10], p[10];
    draw10(&rng, x, p);
    model_predicted(m, x, NULL, NULL);
    assert_int_equal(model_lfree_step(m, 100 + c.label_free_interval / 2), 0);
    assert_int_equal(model_lfree_step(m, 100 + c.label_free_interval), 1);
    assert_int_equal(m->lf.fig.n, N + 1);
    /* new parameters: the test starts a new reference period */
    assert_int_equal(m->lf.test_n, N + 1);
    set_temperature(m, 2, 1);
    assert_int_equal(m->lf.test_n, 0);
    model_lf_graded(m, all, since);
    assert_int_equal(since[LF_NAIVE].n, 0);
    assert_int_equal(all[LF_NAIVE].n, N);
    model_free(m);
    free(m);
    assert_int_equal(daemon.used, 0);
}

/* Gaussian forecasts N(mu, 1) whose outcomes are N(mu + shift, 1) after
 * pair `after` (of n): returns the pair at which the drift alarm came
 * (0: none), the detectors' state left as it is. */
static uint64_t gauss_stream(model *m, uint64_t seed, size_t n, size_t after, double shift)
{
    calib_rng r;
    calib_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        double x[2] = {calib_rng_normal(&r), 1};
        double y = x[0] + (i >= after ? shift : 0) + calib_rng_normal(&r);
        model_observe(m, x, y, 1000 + 0.001 * (double)i, NULL);
        if (m->recalib.drift_alarm)
            return i + 1;
    }
    return 0;
}

static model *new_gauss(const model_cfg *c)
{
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(model_init(m, c, 7, NULL), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_GAUSSIAN, 1), CALIB_OK);
    assert_int_equal(model_recalib_attach(m, 0), CALIB_OK);
    return m;
}

/* A biased regression model is seen: the location tests alarm on a mean
 * moved by half a standard deviation, each on its side, where the score's
 * detector does not; a stationary stream raises nothing. */
static void gaussian_location_alarm(void **state)
{
    (void)state;
    model_cfg c = defaults();
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        model *m = new_gauss(&c);
        assert_true(m->recalib.loc_on);
        uint64_t at = gauss_stream(m, 3 + (uint64_t)(sgn + 1), 8000, 5000, 0.5 * sgn);
        assert_true(at > 5000 && at < 8000);
        int which = -1;
        const calib_drift *dr = model_drift_alarmed(m, &which);
        assert_non_null(dr);
        assert_int_equal(which, sgn > 0 ? 1 : 2);
        assert_int_equal(m->recalib.drift.state, CALIB_DRIFT_WATCHING);
        model_level lv = model_z_level_since(m, m->recalib.drift_base + dr->change_at,
                                             sgn, dr->threshold);
        assert_true(lv.n > 0 && lv.above > 0.6);
        assert_true(fabs(lv.mean - 0.5) < 0.25);
        model_drift_reset(m);
        assert_null(model_drift_alarmed(m, NULL));
        assert_int_equal(m->recalib.loc[0].state, CALIB_DRIFT_REFERENCE);
        model_free(m);
        free(m);
    }
    model *m = new_gauss(&c);
    assert_int_equal(gauss_stream(m, 9, 30000, 30000, 0), 0);
    assert_int_equal(m->recalib.loc[0].state, CALIB_DRIFT_WATCHING);
    model_free(m);
    free(m);
}

/* A joined pair is graded on the estimates its prediction got when it
 * arrived, not on the priors known when its label comes; a pair whose
 * slot holds none (it waited across a restart) is scored, not graded. */
static void label_free_carried(void **state)
{
    (void)state;
    model_cfg c = defaults();
    calib_budget daemon;
    model *m = new_k10(&c, &daemon);
    calib_rng rng;
    calib_rng_seed(&rng, 21);
    double x[10], p[10], slot, est[2];
    draw10(&rng, x, p);
    model_predicted(m, x, NULL, &slot); /* waits for its label */
    model_lf_slot_get(&slot, est);
    assert_true(isfinite(est[0]));
    assert_true(est[0] == est[1]); /* no priors yet */
    /* labelled pairs of class 0 (the reference), then predictions alone:
     * the update's priors move away from the reference's */
    double xi[10], pi[10];
    for (int i = 0; i < 300; i++) {
        draw10(&rng, xi, pi);
        model_observe_inline(m, xi, 0, 1000 + 0.01 * i, NULL);
    }
    assert_int_equal(model_lfree_step(m, 100), 1);
    assert_int_equal(m->lf.fig.corrected, 1);
    double later, now_est[2];
    model_predicted(m, x, NULL, &later); /* the same outputs now */
    model_lf_slot_get(&later, now_est);
    assert_true(fabs(now_est[1] - now_est[0]) > 1e-3);
    calib_accum g0[2], g1[2], since[2];
    model_lf_graded(m, g0, since);
    model_observe_at(m, x, 3, 1010, NULL, INFINITY, &slot);
    model_lf_graded(m, g1, since);
    double d[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(g1[i].n, g0[i].n + 1);
        d[i] = calib_accum_mean(&g1[i]) * (double)g1[i].n -
               calib_accum_mean(&g0[i]) * (double)g0[i].n;
    }
    assert_close(d[0], d[1], 1e-9); /* both against the arrival's estimate */
    /* no estimate: scored, not graded */
    double none = 0;
    uint64_t scored = m->scored;
    model_observe_at(m, x, 3, 1011, NULL, INFINITY, &none);
    assert_int_equal(m->scored, scored + 1);
    model_lf_graded(m, g1, since);
    assert_int_equal(g1[0].n, g0[0].n + 1);
    /* estimates of exactly 0 are kept, not taken for none */
    double zero[2] = {0, 0}, back[2];
    model_lf_slot_put(&none, zero);
    model_lf_slot_get(&none, back);
    assert_true(back[0] == 0 && back[1] == 0);
    model_free(m);
    free(m);
}

/* label_free_recent = 0 turns the estimates off; a ring smaller than its
 * first records (no growth to size) works too. */
static void label_free_off_and_small(void **state)
{
    (void)state;
    calib_budget daemon;
    model_cfg c = defaults();
    c.label_free_recent = 0;
    model *m = new_k10(&c, &daemon);
    assert_null(m->lf.rec);
    double x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    model_predicted(m, x, NULL, NULL);
    model_observe_inline(m, x, 3, 1000, NULL);
    assert_int_equal(model_lfree_step(m, 100), 0);
    assert_int_equal(m->scored, 1);
    model_free(m);
    free(m);
    c.label_free_recent = 5;
    m = new_k10(&c, &daemon);
    assert_non_null(m->lf.rec);
    for (int i = 0; i < 7; i++)
        model_observe_inline(m, x, 3, 1000 + i, NULL);
    assert_int_equal(model_lfree_step(m, 100), 1);
    assert_int_equal(m->lf.fig.n, 5);
    model_free(m);
    free(m);
    assert_int_equal(daemon.used, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reject_counters_bounded),
        cmocka_unit_test(sizes_follow_the_budgets),
        cmocka_unit_test(shape_and_observe),
        cmocka_unit_test(memory_grows_with_use),
        cmocka_unit_test(memory_limit_stops_growth),
        cmocka_unit_test(params_message_round_trips),
        cmocka_unit_test(segment_refit),
        cmocka_unit_test(paired_and_counter_sums),
        cmocka_unit_test(confidence_sequences),
        cmocka_unit_test(window_period_sequences),
        cmocka_unit_test(window_period_coverage),
        cmocka_unit_test(events_ring),
        cmocka_unit_test(trigger_tests_the_challenger),
        cmocka_unit_test(label_free_step), cmocka_unit_test(label_free_carried),
        cmocka_unit_test(gaussian_location_alarm),
        cmocka_unit_test(prior_weights_served),
        cmocka_unit_test(label_free_off_and_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
