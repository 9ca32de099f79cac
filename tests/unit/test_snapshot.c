/* test_snapshot.c — a model's snapshot without a daemon: a restored model
 * packs to the same bytes and goes on exactly as the original; waiting
 * items move onto another clock; a section whose configuration changed
 * stays fresh; a truncated, bit-flipped, foreign or crafted file is
 * refused or restored without harm, never crashes. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/mpw.h"
#include "calib/plugin.h"
#include "calib/sample.h"
#include "cfg.h"
#include "merge.h"
#include "model.h"
#include "refit.h"
#include "snapshot.h"

enum { K = 4 };

static model_cfg small_cfg(void)
{
    daemon_cfg d;
    assert_int_equal(config_init(&d), 0);
    model_cfg c = d.defaults;
    config_free(&d);
    snprintf(c.name, sizeof c.name, "m");
    c.ring = 300;
    c.reservoir = 200;
    c.max_pending = 64;
    c.joined_memory = 64;
    c.window = 60;
    c.window_panes = 6;
    c.drift_reference = 100;
    c.label_ttl = 50;
    return c;
}

/* A model shaped with logits of K classes, temperature parameters T = 1.5,
 * the drift detector on and, with shadow, a candidate T = 1.2 in shadow and
 * the guard of version 3 against version 2's T = 1.1; its memory drawn from
 * parent (NULL: no limit). */
static void make_in(model *m, const model_cfg *c, int shadow, calib_budget *parent)
{
    assert_int_equal(model_init(m, c, 7, parent), CALIB_OK);
    assert_int_equal(model_shape(m, CALIB_FORM_LOGITS, K), CALIB_OK);
    const calib_plugin *t = calib_plugin_builtin("temperature");
    assert_non_null(t);
    m->params.desc = t;
    snprintf(m->params.method, sizeof m->params.method, "temperature");
    m->params.n = 1;
    m->params.values[0] = 1.5;
    m->params.identity = 0;
    m->params.version = 3;
    model_paired_reset(m, 3, 100);
    calib_drift_cfg dc = {.kind = CALIB_DRIFT_MEAN, .lo = 0, .hi = 2, .alpha = 0.01,
                          .min_effect = 0.01, .reference = c->drift_reference,
                          .restart = c->drift_reference};
    assert_int_equal(calib_drift_init(&m->recalib.drift, &dc), CALIB_OK);
    m->recalib.drift_on = 1;
    refit_init(&m->recalib.refit, 1, 3600, 0);
    if (shadow) {
        m->recalib.refit.phase = PHASE_SHADOW;
        m->recalib.refit.reason = REFIT_DRIFT;
        m->recalib.candidate = m->params;
        m->recalib.candidate.values[0] = 1.2;
        m->recalib.candidate.version = 4;
        calib_gate_cfg gc = {.alpha = 0.01, .min_improvement = 0.001, .lo = -2, .hi = 2,
                             .max_samples = 100000};
        assert_int_equal(calib_gate_init(&m->recalib.gate, &gc), CALIB_OK);
        m->recalib.guard_prev = m->params;
        m->recalib.guard_prev.values[0] = 1.1;
        m->recalib.guard_prev.version = 2;
        m->recalib.guard_prev.nw = 3; /* a label-free version's weights */
        m->recalib.guard_prev.w[0] = 2.5;
        m->recalib.guard_prev.w[1] = 0.5;
        m->recalib.guard_prev.w[2] = 1.0 / 3;
        m->recalib.guard_prev.label_free = 1;
        gc.min_improvement = 0;
        assert_int_equal(calib_gate_init(&m->recalib.guard, &gc), CALIB_OK);
        m->recalib.guard_on = 1;
        m->recalib.rollbacks = 1;
    }
}

static void make(model *m, const model_cfg *c, int shadow)
{
    make_in(m, c, shadow, NULL);
}

/* n pairs from seed, at wall times from t0, 0.05 s apart; and some
 * predictions and labels that wait in the join table. */
static void feed(model *m, uint64_t seed, int n, double t0)
{
    calib_rng r;
    calib_rng_seed(&r, seed);
    double x[K + SEG_MAX_KEYS] = {0}; /* the outputs, then no segment codes */
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < K; j++)
            x[j] = 2 * calib_rng_normal(&r);
        double y = (double)(calib_rng_next(&r) % K);
        model_observe(m, x, y, t0 + 0.05 * i, NULL);
        m->predictions++, m->labels++;
    }
    for (int i = 0; i < 5; i++) {
        calib_id id;
        calib_join_result res;
        calib_id_u64(&id, seed * 100 + (uint64_t)i);
        assert_int_equal(calib_join_pred(&m->join, &id, x, t0, t0 + i, &res), CALIB_OK);
        char s[16];
        snprintf(s, sizeof s, "l%llu-%d", (unsigned long long)seed, i);
        assert_int_equal(calib_id_str(&id, s, strlen(s)), CALIB_OK);
        assert_int_equal(calib_join_label(&m->join, &id, 1, t0, t0 + i + 0.5, &res), CALIB_OK);
    }
    /* and one joined pair, remembered */
    calib_id id;
    calib_join_result res;
    calib_id_u64(&id, seed * 1000 + 999);
    assert_int_equal(calib_join_pred(&m->join, &id, x, t0, t0 + 6, &res), CALIB_OK);
    int pst = res.status;
    assert_int_equal(calib_join_label(&m->join, &id, 0, t0, t0 + 6, &res), CALIB_OK);
    /* (a table that filled keeps a sample of ids: that prediction may be
     * out, and the sample may have grown back by the time its label came) */
    assert_true(res.status == CALIB_JOIN_JOINED || pst == CALIB_JOIN_SAMPLED_OUT ||
                m->join.now > t0 + 6); /* a crafted file's clock, far ahead: it expired */
    model_event_add(m, t0, "drift", "seed %llu", (unsigned long long)seed);
}

/* A file of `models` bodies (blen bytes, sections unless bare): the
 * header (42 messages, 2 shape rejections, 3 alerts sent, 4 models
 * forgotten) then the body. */
static char *framed_n(const char *body, size_t blen, uint64_t models, size_t *len)
{
    calib_mpw head;
    calib_mpw_init(&head);
    snapshot_counts c = {.messages = 42, .alerts_sent = 3, .models_forgotten = 4};
    c.rejected[REJ_SHAPE] = 2;
    snapshot_frame(&head, body, blen, models, 1e9, 500, &c);
    assert_int_equal(calib_mpw_error(&head), CALIB_OK);
    *len = head.sb.size + blen;
    char *f = malloc(*len);
    assert_non_null(f);
    memcpy(f, head.sb.data, head.sb.size);
    memcpy(f + head.sb.size, body, blen);
    calib_mpw_destroy(&head);
    return f;
}

/* A file of one model's map (mlen bytes), framed as a section. */
static char *framed(const char *map, size_t mlen, size_t *len)
{
    calib_mpw w;
    calib_mpw_init(&w);
    snapshot_section(&w, map, mlen);
    assert_int_equal(calib_mpw_error(&w), CALIB_OK);
    char *f = framed_n(w.sb.data, w.sb.size, 1, len);
    calib_mpw_destroy(&w);
    return f;
}

static char *body_of(const model *m, size_t *len);

/* The whole file of one model. */
static char *file_of(const model *m, size_t *len)
{
    size_t blen;
    char *body = body_of(m, &blen);
    char *f = framed(body, blen, len);
    free(body);
    return f;
}

/* The map of one model (its packed bytes, without its section's head). */
static char *body_of(const model *m, size_t *len)
{
    calib_mpw w;
    calib_mpw_init(&w);
    snapshot_pack_model(&w, m);
    assert_int_equal(calib_mpw_error(&w), CALIB_OK);
    assert_true(w.sb.size > SNAPSHOT_SECTION_HEAD);
    *len = w.sb.size - SNAPSHOT_SECTION_HEAD;
    char *b = malloc(*len);
    assert_non_null(b);
    memcpy(b, w.sb.data + SNAPSHOT_SECTION_HEAD, *len);
    calib_mpw_destroy(&w);
    return b;
}

/* Opens a file and restores its one model into m: 0 or -1. */
static int restore(const char *f, size_t len, model *m, double shift, char *skipped,
                   size_t skippedlen, char *err, size_t errlen)
{
    snapshot_head h;
    if (snapshot_open(f, len, &h, err, errlen) != 0)
        return -1;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc = snapshot_next(&h, &off, &u, err, errlen);
    if (rc == 1)
        rc = snapshot_restore_model(m, &u.data, shift, 0, skipped, skippedlen, err, errlen);
    else
        rc = -1;
    msgpack_unpacked_destroy(&u);
    return rc;
}

static void same_bytes(const model *a, const model *b)
{
    size_t la, lb;
    char *pa = body_of(a, &la), *pb = body_of(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(pa, pb, la);
    free(pa);
    free(pb);
}

/* model_copy(a) packs to a's bytes and shares none of a's memory: a copy
 * of the copy, made before the first copy is freed, still packs to them
 * (a copy that shared memory would be read after its free: the sanitizer
 * build fails on it, and a plain build reads other bytes). */
static void same_copy(const model *a)
{
    model *c1 = model_copy(a);
    assert_non_null(c1);
    model *c2 = model_copy(c1);
    assert_non_null(c2);
    model_free(c1);
    memset(c1, 0x5a, sizeof *c1);
    free(c1);
    same_bytes(a, c2);
    model_free(c2);
    free(c2);
}

/* a made (with a shadow run if shadow), fed n pairs from time 1000 and
 * snapshotted; b made without one and restored from the file, which is
 * returned (to free) with what the restore skipped. */
static char *fed_and_restored(model *a, model *b, const model_cfg *c, int shadow, int n,
                              char *skipped, size_t skippedlen)
{
    make(a, c, shadow);
    feed(a, 1, n, 1000);
    size_t len;
    char *f = file_of(a, &len);
    make(b, c, 0);
    char err[600];
    assert_int_equal(restore(f, len, b, 0, skipped, skippedlen, err, sizeof err), 0);
    return f;
}

/* b made afresh and restored from a's file, which must be accepted. */
static void restored_copy(const model *a, model *b, const model_cfg *c)
{
    char skipped[600], err[600];
    size_t len;
    char *f = file_of(a, &len);
    make(b, c, 0);
    assert_int_equal(restore(f, len, b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    free(f);
}

/* A ring restored with 20 records (between the 16 a store starts with and
 * the 32 it doubles to) keeps a drift score for every slot it can fill:
 * fed on, restored and original stay the same (before the fix, the scores
 * were sized for 20 and the next pushes wrote past them: ASan). */
static void restored_small_ring_grows(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    char skipped[600];
    char *f = fed_and_restored(&a, &b, &c, 0, 20, skipped, sizeof skipped);
    assert_int_equal(calib_ring_len(&b.ring), 20);
    assert_true(b.ring_score_n >= b.ring.s.alloc);
    feed(&a, 2, 100, 1001);
    feed(&b, 2, 100, 1001);
    assert_true(b.ring_score_n >= b.ring.s.alloc);
    same_bytes(&a, &b);
    free(f);
    model_free(&a);
    model_free(&b);
}

/* Packed, restored, packed again: the same bytes; fed the same pairs
 * afterwards, the two stay the same (the reservoir's generator, the
 * window's panes, the drift detector's e-processes and the shadow gate
 * included). */
static void round_trip_is_exact(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    char skipped[600];
    /* b has no shadow run: the snapshot's is restored */
    char *f = fed_and_restored(&a, &b, &c, 1, 1000, skipped, sizeof skipped);
    assert_string_equal(skipped, "");
    assert_int_equal(b.scored, 1000);
    assert_int_equal(b.recalib.refit.phase, PHASE_SHADOW);
    assert_true(b.recalib.candidate.values[0] == 1.2 && b.recalib.candidate.desc == a.params.desc);
    /* the guard, with the pairs it compared */
    assert_true(b.recalib.guard_on && b.recalib.guard_prev.values[0] == 1.1 &&
                b.recalib.guard_prev.version == 2 && b.recalib.guard_prev.desc == a.params.desc);
    assert_true(b.recalib.guard_prev.nw == 3 && b.recalib.guard_prev.w[2] == 1.0 / 3 &&
                b.recalib.guard_prev.label_free == 1);
    assert_true(b.recalib.guard.pairs == a.recalib.guard.pairs && a.recalib.guard.pairs > 0);
    assert_int_equal(b.recalib.rollbacks, 1);
    assert_int_equal(b.join.waiting_preds, 5);
    assert_int_equal(b.join.waiting_labels, 5);
    assert_int_equal(b.join.joined, a.join.joined);
    /* the window's period [1020, 1080) and the closed [960, 1020) */
    assert_true(b.period.running && b.period.since == 1020 && b.period.end == 1080);
    assert_true(b.period.cs[VIEW_CAL].n == a.period.cs[VIEW_CAL].n && a.period.cs[VIEW_CAL].n);
    assert_true(b.period.last.n == 400 && b.period.last.until == 1020);
    assert_memory_equal(&b.period.last, &a.period.last, sizeof a.period.last);
    same_bytes(&a, &b);
    feed(&a, 2, 700, 1060);
    feed(&b, 2, 700, 1060);
    same_bytes(&a, &b);
    assert_true(a.recalib.drift.n == b.recalib.drift.n && a.recalib.drift.n > 0);
    free(f);
    model_free(&a);
    model_free(&b);
}

/* A guard that has decided (its alarm waits for an idle tick) and a
 * shadow gate that has decided restore as they are; a guard of another
 * version than the one the state directory holds is skipped, said. */
static void decided_gates_and_stale_guards(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    char skipped[600], err[600];
    make(&a, &c, 1);
    feed(&a, 1, 300, 1000);
    a.recalib.guard.state = CALIB_GATE_PASSED;
    a.recalib.gate.state = CALIB_GATE_FAILED;
    size_t len;
    char *f = file_of(&a, &len);
    make(&b, &c, 0);
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_string_equal(skipped, "");
    assert_true(b.recalib.guard_on && b.recalib.guard.state == CALIB_GATE_PASSED);
    assert_int_equal(b.recalib.gate.state, CALIB_GATE_FAILED);
    model_free(&b);
    /* version 4 was published after the snapshot: version 3's guard is stale */
    make(&b, &c, 0);
    b.params.version = 4;
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_false(b.recalib.guard_on);
    assert_non_null(strstr(skipped, "the guard (of version 3; version 4 is in force)"));
    free(f);
    model_free(&a);
    model_free(&b);
}

/* After a rollback was stored, the machine is idle with the rollback as
 * its reason: the state the writer saves there, the reader takes (it once
 * refused it, and with it the whole file). */
static void idle_after_a_rollback_is_restored(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    make(&a, &c, 0);
    feed(&a, 1, 300, 1000);
    refit_in in = {.guard_alarm = 1, .available = 300, .want = 200, .need = 100,
                   .auto_publish = 1};
    refit_out out;
    assert_true(refit_step(&a.recalib.refit, EV_TICK, 10, &in, &out) & ACT_STORE);
    assert_true(refit_step(&a.recalib.refit, EV_STORED, 11, &in, &out) & ACT_PUBLISH);
    assert_int_equal(a.recalib.refit.phase, PHASE_IDLE);
    assert_int_equal(a.recalib.refit.reason, REFIT_ROLLBACK);
    restored_copy(&a, &b, &c);
    assert_int_equal(b.scored, 300);
    assert_int_equal(b.recalib.refit.phase, PHASE_IDLE);
    assert_int_equal(b.recalib.refit.pending, REFIT_NONE);
    model_free(&a);
    model_free(&b);
}

/* A model silent for longer than its window, then one more pair: its
 * snapshot reads back, window and all (the reader once refused the panes
 * the silence left, and with them every model of the file). A file from
 * such a calibd, whose stale panes are there, reads back too, without them. */
static void silence_longer_than_the_window(void **state)
{
    model_cfg c = small_cfg(); /* a window of 60 s in 6 panes */
    model a, b;
    make(&a, &c, 0);
    feed(&a, 1, 100, 1000);        /* 1000 .. 1005 */
    feed(&a, 2, 1, 1005 + 70);     /* 70 s later */
    restored_copy(&a, &b, &c);
    assert_int_equal(b.scored, 101);
    same_bytes(&a, &b);
    model_free(&b);
    /* the panes as an older calibd left them: in place behind the head */
    for (uint32_t i = 0; i < a.win.cfg.panes; i++)
        if (a.win.pane[i].index == INT64_MIN) {
            a.win.pane[i].index = (int64_t)i;
            calib_accum_add(&a.win.pane[i].stat[0], 1);
        }
    restored_copy(&a, &b, &c);
    for (uint32_t i = 0; i < b.win.cfg.panes; i++)
        assert_true(b.win.pane[i].index == INT64_MIN ||
                    b.win.pane[i].index > b.win.head - (int64_t)b.win.cfg.panes);
    model_free(&a);
    model_free(&b);
}

/* The join's sample over capacity is saved and restored: a model restored
 * keeps the ids it kept (and refuses the labels of those it dropped). */
static void join_sample_is_restored(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    make(&a, &c, 0);
    feed(&a, 1, 50, 1000);
    calib_join_sampling in = {.sample = 3000000000u, .label_sample = 2000000000u,
                              .label_until = a.join.now + 20, .arrivals = 7}, out;
    assert_int_equal(calib_join_sampling_set(&a.join, &in), CALIB_OK);
    a.join.sampled_out_preds = 3;
    a.join.sampled_out_labels = 4;
    restored_copy(&a, &b, &c);
    calib_join_sampling_get(&b.join, &out);
    assert_true(out.sample == in.sample && out.label_sample == in.label_sample &&
                out.arrivals == in.arrivals);
    assert_true(b.join.sampled_out_preds == 3 && b.join.sampled_out_labels == 4);
    same_bytes(&a, &b);
    model_free(&a);
    model_free(&b);
}

/* The shell's share of one machine step, as recalib.c does it, enough for the
 * state it leaves: a candidate in shadow with its gate, a publish (or a
 * rollback) with the guard of the version it replaced, a drift restart. */
static void shell(model *m, const model_cfg *c, const refit_out *o, double now, calib_rng *r)
{
    model_recalib *l = &m->recalib;
    calib_gate_cfg gc = {.alpha = 0.01, .min_improvement = 0.001, .lo = -2, .hi = 2,
                         .max_samples = 100000};
    if (o->actions & ACT_START_SHADOW) {
        l->candidate = m->params;
        l->candidate.values[0] = 0.5 + 2 * calib_rng_uniform(r);
        assert_int_equal(calib_gate_init(&l->gate, &gc), CALIB_OK);
        calib_accum_init(&l->shadow_log[0]);
        calib_accum_init(&l->shadow_log[1]);
    }
    if (o->actions & ACT_PUBLISH) {
        model_params prev = m->params;
        m->params = o->reason == REFIT_ROLLBACK ? l->guard_prev : l->candidate;
        m->params.version = prev.version + 1;
        model_paired_reset(m, m->params.version, now);
        l->guard_on = 0;
        if (o->reason != REFIT_ROLLBACK && c->rollback) {
            gc.min_improvement = 0;
            assert_int_equal(calib_gate_init(&l->guard, &gc), CALIB_OK);
            l->guard_prev = prev;
            l->guard_low = 0;
            for (int i = 0; i < 3; i++)
                calib_accum_init(&l->guard_since[i]);
            l->guard_on = 1;
        }
    }
    if ((o->actions & ACT_DRIFT_RESTART) && l->drift_on) {
        calib_drift_reset(&l->drift);
        l->drift_base = m->ring.total;
        l->drift_alarm = 0;
    }
}

/* The property the snapshot's writer and reader keep: whatever state a
 * model and its closed loop reach, through random pairs, silences longer
 * than the window or not, a wall clock stepped back (once, a window period
 * then ended before it started, and the reader refused the file), and
 * every event of the refit machine (alarms,
 * manual refits, fits done or failed, shadow runs passed or rejected,
 * stores done or refused, rollbacks), its snapshot reads back. Restored
 * (with the parameters the state directory holds, as calibd does), it packs
 * to the same bytes, but for a fit or a store under way, which starts
 * again: idle, with the reason pending. 8 seeds of 200 steps. */
static void every_state_reads_back(void **state)
{
    static const int events[] = {EV_TICK, EV_MANUAL, EV_FIT_DONE, EV_FIT_FAILED,
                                 EV_GATE_PASSED, EV_GATE_REJECTED, EV_STORED,
                                 EV_STORE_FAILED};
    /* and a wall clock stepped back now and then */
    static const double silences[] = {0.5, 5, 30, 70, 600, -75, -20};
    int phases[PHASE_STORING + 1] = {0}, restarted = 0, rollbacks = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        model_cfg c = small_cfg();
        model a;
        calib_rng r;
        calib_rng_seed(&r, seed);
        make(&a, &c, 0);
        double t = 1000;
        for (int step = 0; step < 200; step++) {
            uint64_t what = calib_rng_next(&r) % 10;
            if (what < 3) {
                int n = 1 + (int)(calib_rng_next(&r) % 60);
                feed(&a, seed * 1000 + (uint64_t)step, n, t);
                t += 0.05 * n;
            } else if (what < 5) {
                t += silences[calib_rng_next(&r) % 7];
            } else {
                refit_in in = {.drift_alarm = (int)(calib_rng_next(&r) % 3 == 0),
                               .guard_alarm = (int)(calib_rng_next(&r) % 2 == 0) &&
                                              a.recalib.guard_on,
                               .available = calib_ring_len(&a.ring),
                               .since_change = calib_ring_len(&a.ring) / 2,
                               .want = 200, .need = 50,
                               .auto_publish = (int)(calib_rng_next(&r) % 4 != 0)};
                refit_out o;
                refit_step(&a.recalib.refit, events[calib_rng_next(&r) % 8], t, &in, &o);
                shell(&a, &c, &o, t, &r);
                rollbacks += (o.actions & ACT_PUBLISH) && o.reason == REFIT_ROLLBACK;
            }
            size_t len;
            char *f = file_of(&a, &len);
            model b;
            char skipped[600], err[600];
            make(&b, &c, 0);
            b.params = a.params; /* the state directory's, read first */
            model_paired_reset(&b, b.params.version, 0);
            b.recalib.guard_on = 0;
            if (restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err) != 0)
                fail_msg("seed %llu, step %d, phase %d, reason %d: refused: %s",
                         (unsigned long long)seed, step, a.recalib.refit.phase,
                         a.recalib.refit.reason, err);
            int phase = a.recalib.refit.phase;
            phases[phase]++;
            if (phase == PHASE_FITTING || phase == PHASE_STORING) {
                /* the work under way starts again */
                assert_int_equal(b.recalib.refit.phase, PHASE_IDLE);
                assert_true(b.recalib.refit.pending != REFIT_NONE ||
                            a.recalib.refit.reason == REFIT_ROLLBACK);
                restarted++;
            } else {
                same_bytes(&a, &b);
            }
            same_copy(&a);
            free(f);
            model_free(&b);
        }
        model_free(&a);
    }
    print_message("states: idle %d, fitting %d, shadow %d, storing %d; %d restarted, "
                  "%d rollbacks\n", phases[PHASE_IDLE], phases[PHASE_FITTING],
                  phases[PHASE_SHADOW], phases[PHASE_STORING], restarted, rollbacks);
    /* every phase was reached, and a rollback stored */
    for (int p = PHASE_IDLE; p <= PHASE_STORING; p++)
        assert_true(phases[p] > 0);
    assert_true(rollbacks > 0);
}

/* A model with every part a snapshot packs: segments (two keys, more
 * values than slots, so occupants were evicted; a segment's own refit
 * collecting), a shadow run, the guard, the drift detector, confidence
 * sequences. Its copy packs to its bytes after the model itself is freed
 * and overwritten. */
static void copy_holds_everything(void **state)
{
    model_cfg c = small_cfg();
    c.segment_keys = 2;
    c.segment_values = 8;
    model a;
    make(&a, &c, 1);
    assert_int_equal(a.seg.cfg.keys, 2);
    feed(&a, 3, 300, 1000);
    calib_rng r;
    calib_rng_seed(&r, 11);
    double x[K + SEG_MAX_KEYS] = {0}, *codes = x + K;
    for (int i = 0; i < 400; i++) {
        char v1[16], v2[16];
        int n1 = snprintf(v1, sizeof v1, "c%d", (int)(calib_rng_next(&r) % 20));
        int n2 = snprintf(v2, sizeof v2, "d%d", (int)(calib_rng_next(&r) % 5));
        seg_kv kv[2] = {{"country", v1, 7, (size_t)n1}, {"device", v2, 6, (size_t)n2}};
        model_segments(&a, kv, 2, codes, 1020 + 0.01 * i);
        for (int j = 0; j < K; j++)
            x[j] = 2 * calib_rng_normal(&r);
        model_observe(&a, x, (double)(calib_rng_next(&r) % K), 1020 + 0.01 * i, codes);
    }
    assert_true(a.seg.nkeys == 2 && a.seg.key[0].evictions > 0);
    assert_int_equal(seg_fix_start(&a.seg, &a.seg.key[1].slot[0], K + 1, 16), CALIB_OK);
    a.seg.key[1].slot[0].fix->rec[3] = 0.25;
    a.seg.key[1].slot[0].fix->n = 1;
    size_t la;
    char *before = body_of(&a, &la);
    same_copy(&a);
    model *cp = model_copy(&a);
    assert_non_null(cp);
    model_free(&a);
    memset(&a, 0xa5, sizeof a);
    size_t lc;
    char *after = body_of(cp, &lc);
    assert_int_equal(la, lc);
    assert_memory_equal(before, after, la);
    free(before);
    free(after);
    model_free(cp);
    free(cp);
}

/* Merged, the confidence sequences follow the paired comparison: a newer
 * version from a file without sequences leaves none of the older version's
 * (they once stayed, shown for the wrong parameters); the same version
 * multiplies the capitals. */
static void merged_sequences_follow_the_version(void **state)
{
    model_cfg c = small_cfg(), off = small_cfg();
    off.cs_alpha = 0;
    model a, b;
    char why[300];
    make(&a, &c, 0);
    make(&b, &off, 0);
    b.params.version = 4;
    feed(&a, 1, 200, 1000);
    feed(&b, 2, 200, 1000);
    assert_true(a.cs_on && !b.cs_on && a.cs[VIEW_CAL].n > 0);
    assert_int_equal(model_merge(&a, &b, why, sizeof why), 0);
    assert_int_equal(a.params.version, 4);
    assert_int_equal(a.cs[VIEW_RAW].n, 0);
    assert_int_equal(a.cs[VIEW_CAL].n, 0);
    model_free(&b);
    /* the same version, both keeping them: one sequence over both */
    make(&b, &c, 0);
    b.params.version = 4;
    feed(&a, 3, 100, 1020);
    feed(&b, 4, 100, 1020);
    uint64_t na = a.cs[VIEW_CAL].n, nb = b.cs[VIEW_CAL].n;
    /* and the same window period, [1020, 1080): merged too */
    uint64_t pa = a.period.cs[VIEW_CAL].n, pb = b.period.cs[VIEW_CAL].n;
    assert_true(a.period.end == 1080 && b.period.end == 1080 && pa && pb);
    assert_int_equal(model_merge(&a, &b, why, sizeof why), 0);
    assert_int_equal(a.cs[VIEW_CAL].n, na + nb);
    assert_int_equal(a.period.cs[VIEW_CAL].n, pa + pb);
    /* a later period at the same version replaces it, with its last */
    model_free(&b);
    make(&b, &c, 0);
    b.params.version = 4;
    feed(&b, 5, 100, 1090);
    assert_int_equal(model_merge(&a, &b, why, sizeof why), 0);
    assert_true(a.period.end == 1140 && a.period.since == 1080);
    assert_int_equal(a.period.cs[VIEW_CAL].n, b.period.cs[VIEW_CAL].n);
    /* b's sole pairs were in this period: a's closed one stays the last */
    assert_true(a.period.last.n == pa + pb && a.period.last.until == 1080);
    model_free(&a);
    model_free(&b);
}

/* A model's snapshot of another shape's statistics keeps its waiting
 * labels, and a later clock moves its waiting items' deadlines with it. */
static void waiting_items_move_with_the_clock(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    make(&a, &c, 0);
    feed(&a, 3, 10, 2000); /* items arrive at 2000 + i, ttl 50 */
    size_t len;
    char *f = file_of(&a, &len);
    make(&b, &c, 0);
    char skipped[600], err[600];
    /* restored on a clock 1e6 s later */
    assert_int_equal(restore(f, len, &b, 1e6, skipped, sizeof skipped, err, sizeof err), 0);
    /* the first pair of items (arrived 2000, 2000.5) expires at 2050 + 1e6 */
    assert_int_equal(calib_join_expire(&b.join, 1e6 + 2049.9), 0);
    assert_int_equal(calib_join_expire(&b.join, 1e6 + 2050.6), 2);
    calib_id id;
    calib_join_result res;
    calib_id_u64(&id, 3 * 100 + 4); /* waits: a label joins it */
    assert_int_equal(calib_join_label(&b.join, &id, 1, 0, 1e6 + 2051, &res), CALIB_OK);
    assert_int_equal(res.status, CALIB_JOIN_JOINED);
    calib_id_u64(&id, 3 * 1000 + 999); /* was joined: a duplicate */
    assert_int_equal(calib_join_label(&b.join, &id, 1, 0, 1e6 + 2051, &res), CALIB_OK);
    assert_int_equal(res.status, CALIB_JOIN_DUPLICATE);
    free(f);
    model_free(&a);
    model_free(&b);
}

/* A configuration with other window panes, ring and bins: those sections
 * stay fresh and are named; the rest is restored. */
static void changed_sections_stay_fresh(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    make(&a, &c, 0);
    feed(&a, 4, 500, 3000);
    size_t len;
    char *f = file_of(&a, &len);
    model_cfg c2 = c;
    c2.window_panes = 3;
    c2.ring = 250;
    c2.bins = 10;
    make(&b, &c2, 0);
    char skipped[600], err[600];
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_non_null(strstr(skipped, "window"));
    assert_non_null(strstr(skipped, "ring"));
    assert_non_null(strstr(skipped, "cumulative bins"));
    assert_int_equal(b.scored, 500);
    assert_int_equal(b.cum[VIEW_RAW][WS_MAIN].n, 500);
    assert_int_equal(b.reservoir.seen, 500);
    assert_int_equal(b.ring.total, 0);
    assert_int_equal(b.top[VIEW_RAW].n, 0);
    free(f);
    model_free(&a);
    model_free(&b);
}

/* The records of two rings, newest first, as far as the shorter goes:
 * outputs, outcome, time and drift score alike. */
static void same_newest(const model *a, const model *b, size_t n)
{
    size_t la = calib_ring_len(&a->ring), lb = calib_ring_len(&b->ring);
    assert_true(n <= la && n <= lb);
    for (size_t i = 1; i <= n; i++) {
        calib_record x = calib_ring_get(&a->ring, la - i), y = calib_ring_get(&b->ring, lb - i);
        assert_memory_equal(x.x, y.x, K * sizeof(double));
        assert_true(x.y == y.y && x.t == y.t);
        assert_true(a->ring_score[calib_ring_slot(&a->ring, la - i)] ==
                    b->ring_score[calib_ring_slot(&b->ring, lb - i)]);
    }
}

static void same_reservoir(const calib_reservoir *a, const calib_reservoir *b)
{
    assert_int_equal(a->s.cap, b->s.cap);
    assert_int_equal(a->s.len, b->s.len);
    assert_int_equal(a->seen, b->seen);
    assert_int_equal(a->skip, b->skip);
    assert_true(a->w == b->w);
    assert_memory_equal(a->rng.s, b->rng.s, sizeof a->rng.s);
    assert_memory_equal(a->s.data, b->s.data, a->s.len * (K + 2) * sizeof(double));
}

static void same_drift(const model *a, const model *b)
{
    const calib_drift *x = &a->recalib.drift, *y = &b->recalib.drift;
    assert_true(x->n > 0);
    assert_int_equal(x->n, y->n);
    assert_int_equal(x->state, y->state);
    assert_int_equal(x->nbank, y->nbank);
    assert_memory_equal(x->bank, y->bank, sizeof x->bank);
    assert_memory_equal(x->log_w, y->log_w, sizeof x->log_w);
    assert_int_equal(a->recalib.drift_base, b->recalib.drift_base);
}

/* A ring and a reservoir that memory_limit stopped below their configured
 * capacities are restored into a model of the same configuration, not
 * left fresh as "capacity changed": the ring's records and drift scores,
 * the reservoir exactly (it stays where it stopped) and the closed loop
 * (drift detector, shadow run). The ring grows again as memory allows; a
 * configured capacity that did change still leaves the ring fresh. */
static void stopped_by_memory_is_restored(void **state)
{
    model_cfg c = small_cfg();
    calib_budget da, db;
    calib_budget_init(&da, SIZE_MAX, NULL);
    calib_budget_init(&db, SIZE_MAX, NULL);
    model a, b;
    make_in(&a, &c, 1, &da);
    /* room for the first doubling of each (16 -> 32 records), not the next */
    da.limit = da.used + 3000;
    feed(&a, 1, 1000, 1000);
    size_t ring = calib_ring_cap(&a.ring), res = a.reservoir.s.cap;
    assert_true(da.refused > 0);
    assert_true(ring < c.ring && res < c.reservoir);
    assert_int_equal(calib_ring_len(&a.ring), ring);
    assert_int_equal(calib_reservoir_len(&a.reservoir), res);
    assert_int_equal(a.ring.total, 1000);
    size_t len;
    char *f = file_of(&a, &len);
    double t_at[64], score_at[64]; /* the ring's records then, oldest first */
    assert_true(ring <= 64);
    for (size_t i = 0; i < ring; i++) {
        t_at[i] = calib_ring_get(&a.ring, i).t;
        score_at[i] = a.ring_score[calib_ring_slot(&a.ring, i)];
    }

    /* the same configuration under the same limit */
    make_in(&b, &c, 0, &db);
    db.limit = db.used + 3000;
    char skipped[600], err[600];
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_string_equal(skipped, "");
    assert_int_equal(b.ring.total, 1000);
    assert_int_equal(calib_ring_len(&b.ring), ring);
    same_newest(&a, &b, ring);
    same_reservoir(&a.reservoir, &b.reservoir);
    same_drift(&a, &b);
    assert_int_equal(b.recalib.refit.phase, PHASE_SHADOW);
    assert_true(b.recalib.candidate.values[0] == 1.2);
    assert_true(b.recalib.gate.pairs == a.recalib.gate.pairs && a.recalib.gate.pairs > 0);
    model_level lva = model_level_since(&a, a.ring.total - ring, 0.5),
                lvb = model_level_since(&b, b.ring.total - ring, 0.5);
    assert_int_equal(lva.n, ring);
    assert_int_equal(lvb.n, ring);
    assert_true(lva.mean == lvb.mean && lva.above == lvb.above);
    /* fed on together: the same newest records, reservoir and detector */
    feed(&a, 2, 500, 1060);
    feed(&b, 2, 500, 1060);
    assert_int_equal(b.ring.total, 1500);
    same_newest(&a, &b, ring);
    same_reservoir(&a.reservoir, &b.reservoir);
    same_drift(&a, &b);
    /* stopped again where memory_limit still refuses, as the original */
    assert_int_equal(calib_ring_cap(&b.ring), ring);
    /* and its snapshot restores the same again */
    size_t len2;
    char *f2 = file_of(&b, &len2);
    model b2;
    make_in(&b2, &c, 0, NULL);
    assert_int_equal(restore(f2, len2, &b2, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_string_equal(skipped, "");
    same_newest(&b, &b2, ring);
    same_reservoir(&b.reservoir, &b2.reservoir);
    same_drift(&b, &b2);
    model_free(&b2);
    free(f2);
    model_free(&b);
    assert_int_equal(db.used, 0);

    /* with room: the ring grows again, its restored records the oldest,
     * up to its configured capacity */
    make_in(&b, &c, 0, NULL);
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_string_equal(skipped, "");
    feed(&b, 3, 100, 1060);
    assert_int_equal(b.ring.total, 1100);
    assert_int_equal(calib_ring_len(&b.ring), ring + 100);
    for (size_t i = 0; i < ring; i++) {
        assert_true(calib_ring_get(&b.ring, i).t == t_at[i]);
        assert_true(b.ring_score[calib_ring_slot(&b.ring, i)] == score_at[i]);
    }
    model_level lv = model_level_since(&b, 1000 - ring, 0.5);
    assert_int_equal(lv.n, ring + 100);
    assert_false(lv.truncated);
    feed(&b, 4, 400, 1070);
    assert_int_equal(calib_ring_cap(&b.ring), c.ring);
    assert_int_equal(calib_ring_len(&b.ring), c.ring);
    assert_true(calib_ring_get(&b.ring, c.ring - 1).t == 1070 + 0.05 * 399);
    lv = model_level_since(&b, b.ring.total - c.ring, 0.5);
    assert_int_equal(lv.n, c.ring);
    assert_false(lv.truncated);
    model_free(&b);

    /* another configured ring: left fresh, as any change of capacity */
    model_cfg c2 = c;
    c2.ring = 250;
    make_in(&b, &c2, 0, NULL);
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_non_null(strstr(skipped, "ring"));
    assert_null(strstr(skipped, "reservoir"));
    assert_int_equal(b.ring.total, 0);
    assert_int_equal(b.reservoir.seen, 1000);
    assert_int_equal(b.reservoir.s.cap, res);
    model_free(&b);
    free(f);
    model_free(&a);
    assert_int_equal(da.used, 0);
}

static int is_key(const msgpack_object *k, const char *name)
{
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(name) &&
           memcmp(k->via.str.ptr, name, k->via.str.size) == 0;
}

/* o packed into pk without the map entries named drop, at any depth. */
static void pack_without(msgpack_packer *pk, const msgpack_object *o, const char *drop)
{
    if (o->type == MSGPACK_OBJECT_MAP) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < o->via.map.size; i++)
            n += !is_key(&o->via.map.ptr[i].key, drop);
        msgpack_pack_map(pk, n);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            if (is_key(&o->via.map.ptr[i].key, drop))
                continue;
            msgpack_pack_object(pk, o->via.map.ptr[i].key);
            pack_without(pk, &o->via.map.ptr[i].val, drop);
        }
    } else if (o->type == MSGPACK_OBJECT_ARRAY) {
        msgpack_pack_array(pk, o->via.array.size);
        for (uint32_t i = 0; i < o->via.array.size; i++)
            pack_without(pk, &o->via.array.ptr[i], drop);
    } else {
        msgpack_pack_object(pk, *o);
    }
}

/* m's file without the map entries named drop (there are some); bare:
 * its map not in a section (as formats 1 to 3 wrote it). */
static char *file_without_as(const model *m, const char *drop, int bare, size_t *len)
{
    size_t blen, off = 0;
    char *body = body_of(m, &blen);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    assert_int_equal(msgpack_unpack_next(&u, body, blen, &off), MSGPACK_UNPACK_SUCCESS);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_without(&pk, &u.data, drop);
    assert_true(sb.size < blen);
    char *f = bare ? framed_n(sb.data, sb.size, 1, len) : framed(sb.data, sb.size, len);
    msgpack_sbuffer_destroy(&sb);
    msgpack_unpacked_destroy(&u);
    free(body);
    return f;
}

static char *file_without(const model *m, const char *drop, size_t *len)
{
    return file_without_as(m, drop, 0, len);
}

/* m's file in format version 1: its body without the stores' bounds, its
 * header saying "v": 1. */
static char *file_v1(const model *m, size_t *len)
{
    char *f = file_without_as(m, "bound", 1, len);
    /* the header's "v": 4 (fixstr "v", fixint 4) becomes 1: a file
     * without the stores' bounds, its map bare, its sections as written now */
    char *v = NULL;
    for (size_t i = 0; !v && i + 3 <= *len; i++)
        if (memcmp(f + i, "\xa1v\x04", 3) == 0)
            v = f + i;
    assert_non_null(v);
    v[2] = 1;
    snapshot_head h;
    char err[600];
    assert_int_equal(snapshot_open(f, *len, &h, err, sizeof err), 0);
    assert_int_equal(h.version, 1);
    return f;
}

/* A version 1 file is read as before: restored exactly; a ring and
 * reservoir stopped by memory in one cannot be told from a configured
 * capacity (it has no bounds) and stay fresh, as version 1 did. */
static void version_1_is_read(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    make(&a, &c, 1);
    feed(&a, 1, 1000, 1000);
    size_t len;
    char *f = file_v1(&a, &len);
    make(&b, &c, 0);
    char skipped[600], err[600];
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_string_equal(skipped, "");
    same_bytes(&a, &b);
    free(f);
    model_free(&a);
    model_free(&b);

    calib_budget da;
    calib_budget_init(&da, SIZE_MAX, NULL);
    make_in(&a, &c, 0, &da);
    da.limit = da.used + 3000;
    feed(&a, 1, 1000, 1000);
    assert_true(calib_ring_cap(&a.ring) < c.ring);
    f = file_v1(&a, &len);
    make(&b, &c, 0);
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_non_null(strstr(skipped, "ring"));
    assert_non_null(strstr(skipped, "reservoir"));
    assert_int_equal(b.scored, 1000);
    assert_int_equal(b.ring.total, 0);
    free(f);
    model_free(&a);
    model_free(&b);
}

/* A file from before the window's confidence sequences: the rest is
 * restored, the period starts afresh with the next pair, and it is said. */
static void files_without_periods(void **state)
{
    model_cfg c = small_cfg();
    model a, b;
    make(&a, &c, 0);
    feed(&a, 1, 1000, 1000);
    size_t len;
    char *f = file_without(&a, "period", &len);
    make(&b, &c, 0);
    char skipped[600], err[600];
    assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_non_null(strstr(skipped, "the window's confidence sequences (none in the file"));
    assert_true(!b.period.running && b.period.last.n == 0);
    assert_int_equal(b.cs[VIEW_CAL].n, a.cs[VIEW_CAL].n);
    feed(&b, 2, 10, 1060);
    assert_true(b.period.running && b.period.since == 1020 && b.period.cs[VIEW_CAL].n == 10);
    free(f);
    model_free(&a);
    model_free(&b);
}

/* The walk over a file's body: what snapshot_next said of each section
 * (1 a map, 2 damaged), at most 8; each map restored into out[i] when
 * given. The number of results, or -1 when the header is refused. */
static int walk(const char *f, size_t len, const model_cfg *c, model *out, int got[8],
                snapshot_head *h)
{
    char err[600], skipped[600];
    if (snapshot_open(f, len, h, err, sizeof err) != 0)
        return -1;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int n = 0, rc;
    while (n < 8 && (rc = snapshot_next(h, &off, &u, err, sizeof err)) > 0) {
        got[n] = rc;
        if (rc == 1 && out) {
            make(&out[n], c, 0);
            assert_int_equal(snapshot_restore_model(&out[n], &u.data, 0, 0, skipped,
                                                    sizeof skipped, err, sizeof err), 0);
        }
        if (rc == 2)
            assert_true(strstr(err, "section") != NULL);
        n++;
    }
    assert_true(rc >= 0); /* a body of sections is never refused whole */
    msgpack_unpacked_destroy(&u);
    return n;
}

/* One damaged byte costs the model it falls in (its section's checksum,
 * or its head's, after which the walk finds the next intact head), not
 * the file; a file cut short keeps every section it still holds whole.
 * Flips in the header are refused or harmless. */
static void damage_costs_one_model(void **state)
{
    enum { M = 4 };
    model_cfg c = small_cfg();
    model a[M];
    calib_mpw body;
    calib_mpw_init(&body);
    size_t at[M + 1];
    for (int i = 0; i < M; i++) {
        make(&a[i], &c, i == 1);
        feed(&a[i], 5 + (uint64_t)i, 100 + 100 * i, 4000);
        at[i] = body.sb.size;
        snapshot_pack_model(&body, &a[i]);
    }
    at[M] = body.sb.size;
    assert_int_equal(calib_mpw_error(&body), CALIB_OK);
    size_t len;
    char *f = framed_n(body.sb.data, body.sb.size, M, &len);
    size_t head = len - body.sb.size;
    snapshot_head h;
    int got[8];
    model b[8];
    /* intact: all four, exactly */
    assert_int_equal(walk(f, len, &c, b, got, &h), M);
    assert_int_equal(h.counts.messages, 42);
    assert_int_equal(h.counts.rejected[REJ_SHAPE], 2);
    assert_int_equal(h.counts.alerts_sent, 3);
    assert_int_equal(h.counts.models_forgotten, 4);
    assert_int_equal(h.counts.publish_errors, 0);
    for (int i = 0; i < M; i++) {
        assert_int_equal(got[i], 1);
        same_bytes(&a[i], &b[i]);
        model_free(&b[i]);
    }
    calib_rng r;
    calib_rng_seed(&r, 9);
    for (int t = 0; t < 300; t++) {
        /* a third in the sections' heads, the rest anywhere */
        size_t pos = t % 3 == 0 ? head + at[t % M] + calib_rng_next(&r) % SNAPSHOT_SECTION_HEAD
                                : (size_t)(calib_rng_next(&r) % len);
        unsigned char bit = (unsigned char)(1u << (calib_rng_next(&r) % 8));
        f[pos] ^= bit;
        int n = walk(f, len, &c, b, got, &h);
        f[pos] ^= bit;
        if (pos < head) { /* the header: refused, or read as before */
            for (int i = 0; i < n; i++)
                if (got[i] == 1)
                    model_free(&b[i]);
            continue;
        }
        int hit = 0;
        while (pos - head >= at[hit + 1])
            hit++;
        assert_int_equal(n, M);
        for (int i = 0; i < M; i++) {
            assert_int_equal(got[i], i == hit ? 2 : 1);
            if (i != hit) {
                same_bytes(&a[i], &b[i]);
                model_free(&b[i]);
            }
        }
    }
    /* cut short, anywhere: the sections wholly there, exactly; a cut in
     * the header refuses the file */
    for (size_t cut = 0; cut < len; cut += 1 + cut / 5) {
        int n = walk(f, cut, &c, b, got, &h);
        if (cut < head) {
            assert_int_equal(n, -1);
            continue;
        }
        int whole = 0;
        while (whole < M && at[whole + 1] <= cut - head)
            whole++;
        assert_int_equal(n, whole + (cut - head > at[whole] && whole < M));
        for (int i = 0; i < n; i++) {
            assert_int_equal(got[i], i < whole ? 1 : 2);
            if (i < whole) {
                same_bytes(&a[i], &b[i]);
                model_free(&b[i]);
            }
        }
        assert_true(h.body_bytes == at[M] && h.len == cut - head);
    }
    free(f);
    calib_mpw_destroy(&body);
    for (int i = 0; i < M; i++)
        model_free(&a[i]);
}

/* A Kafka partition's snapshot: its header names the partition and the
 * offset its models have read up to (kafka.h); a plain one names none; a
 * header whose "kafka" map is malformed is refused. */
static void partition_source_in_the_header(void **state)
{
    char err[600], body[] = "\x80"; /* an empty model map stands in */
    snapshot_counts seven = {.messages = 7};
    snapshot_source src = {.topic = "preds.v2", .partition = 3, .offset = 123456789012LL};
    calib_mpw w;
    calib_mpw_init(&w);
    snapshot_frame_sum(&w, 1, snapshot_crc(0, body, 1), 1, 1e9, 5, NULL, &seven, &src);
    char *f = malloc(w.sb.size + 1);
    assert_non_null(f);
    memcpy(f, w.sb.data, w.sb.size);
    f[w.sb.size] = body[0];
    snapshot_head h;
    assert_int_equal(snapshot_open(f, w.sb.size + 1, &h, err, sizeof err), 0);
    assert_int_equal(h.has_source, 1);
    assert_string_equal(h.source.topic, "preds.v2");
    assert_int_equal(h.source.partition, 3);
    assert_true(h.source.offset == 123456789012LL);
    assert_int_equal(h.counts.messages, 7);
    free(f);
    /* none: a daemon's own snapshot */
    size_t len;
    model m;
    model_cfg c = small_cfg();
    make(&m, &c, 0);
    f = file_of(&m, &len);
    assert_int_equal(snapshot_open(f, len, &h, err, sizeof err), 0);
    assert_int_equal(h.has_source, 0);
    free(f);
    model_free(&m);
    /* malformed: a topic that is no topic name, a partition out of range */
    const char *topics[2] = {"a/b", "ok"};
    const uint64_t parts[2] = {0, (uint64_t)INT32_MAX + 1};
    for (int i = 0; i < 2; i++) {
        calib_mpw_reset(&w);
        calib_mpw_map(&w);
        calib_mpw_key(&w, "format");
        calib_mpw_str(&w, "calibd-snapshot");
        calib_mpw_key_uint(&w, "v", SNAPSHOT_VERSION);
        calib_mpw_key(&w, "byte_order");
        calib_mpw_str(&w, "little");
        calib_mpw_key_double(&w, "written", 1e9);
        calib_mpw_key_double(&w, "mono", 5);
        calib_mpw_key(&w, "kafka");
        calib_mpw_map(&w);
        calib_mpw_key(&w, "topic");
        calib_mpw_str(&w, topics[i]);
        calib_mpw_key_uint(&w, "partition", parts[i]);
        calib_mpw_key_uint(&w, "offset", 1);
        calib_mpw_end(&w);
        calib_mpw_end(&w);
        assert_int_equal(snapshot_open(w.sb.data, w.sb.size, &h, err, sizeof err), -1);
        assert_non_null(strstr(err, i == 0 ? "kafka: topic" : "partition"));
    }
    calib_mpw_destroy(&w);
}

/* Another format version, or no snapshot at all: refused, saying why. */
static void foreign_files_are_refused(void **state)
{
    char err[600];
    snapshot_head h;
    calib_mpw w;
    calib_mpw_init(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "format");
    calib_mpw_str(&w, "calibd-snapshot");
    calib_mpw_key(&w, "v");
    calib_mpw_uint(&w, SNAPSHOT_VERSION + 1);
    calib_mpw_end(&w);
    assert_int_equal(snapshot_open(w.sb.data, w.sb.size, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "another format version"));
    calib_mpw_reset(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "format");
    calib_mpw_str(&w, "calibd-snapshot");
    calib_mpw_key(&w, "v");
    calib_mpw_uint(&w, 0);
    calib_mpw_end(&w);
    assert_int_equal(snapshot_open(w.sb.data, w.sb.size, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "another format version"));
    calib_mpw_reset(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "format");
    calib_mpw_str(&w, "calibd-history");
    calib_mpw_end(&w);
    assert_int_equal(snapshot_open(w.sb.data, w.sb.size, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a calibd snapshot"));
    assert_int_equal(snapshot_open("", 0, &h, err, sizeof err), -1);
    assert_int_equal(snapshot_open("\xc1\xc1\xc1", 3, &h, err, sizeof err), -1);
    /* a map of 2^32 entries in 5 bytes, as the header or as a model of a
     * checksummed body: refused before msgpack-c allocates 64 GiB for it,
     * which the sanitizers' allocator would abort on (tests/fuzz/corpus/
     * snapshot/crash-huge_header, crash-huge_count) */
    assert_int_equal(snapshot_open("\xdf\xff\xff\xff\xff", 5, &h, err, sizeof err), -1);
    snapshot_head body = {.body = "\xdf\xff\xff\xff\xff", .len = 5};
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(snapshot_next(&body, &off, &u, err, sizeof err), -1);
    msgpack_unpacked_destroy(&u);
    calib_mpw_destroy(&w);
}

/* A body changed and framed again, so that its checksum holds: whatever
 * the change, restoring returns 0 or -1 and never reads or writes out of
 * bounds (the sanitizer build runs this). */
static void crafted_bodies_do_no_harm(void **state)
{
    model_cfg c = small_cfg();
    model a;
    make(&a, &c, 1);
    feed(&a, 6, 300, 5000);
    size_t blen;
    char *body = body_of(&a, &blen);
    calib_rng r;
    calib_rng_seed(&r, 11);
    int refused = 0;
    for (int i = 0; i < 300; i++) {
        char *mut = malloc(blen);
        assert_non_null(mut);
        memcpy(mut, body, blen);
        int flips = 1 + (int)(calib_rng_next(&r) % 4);
        for (int j = 0; j < flips; j++)
            mut[calib_rng_next(&r) % blen] ^= (char)(1u << (calib_rng_next(&r) % 8));
        size_t len;
        char *f = framed(mut, blen, &len);
        model b;
        make(&b, &c, 0);
        char skipped[600], err[600];
        int rc = restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err);
        assert_true(rc == 0 || rc == -1);
        refused += rc != 0;
        /* a model restored from a crafted file still takes pairs */
        if (rc == 0)
            feed(&b, 7, 50, 6000);
        model_free(&b);
        free(f);
        free(mut);
    }
    assert_true(refused > 0);
    free(body);
    model_free(&a);
}

/* A prediction waits with its segment code; the restart cannot restore
 * the segments (segment_min_effect changed): its code is dropped, so once
 * another value takes the slot the code named, the label's pair does not
 * go to that value. With the same settings it goes where it went before. */
static void waiting_codes_follow_their_segments(void **state)
{
    (void)state;
    model_cfg c = small_cfg();
    for (int same = 0; same < 2; same++) {
        model a, b;
        make(&a, &c, 0);
        double x[K + SEG_MAX_KEYS] = {0};
        x[0] = 2;
        seg_kv de = {"country", "DE", 7, 2}, fr = {"country", "FR", 7, 2};
        model_segments(&a, &de, 1, x + K, 0);
        calib_id id;
        calib_id_u64(&id, 77);
        calib_join_result res;
        assert_int_equal(calib_join_pred(&a.join, &id, x, 0, 1, &res), CALIB_OK);
        size_t len;
        char *f = file_of(&a, &len);
        model_cfg c2 = c;
        if (!same)
            c2.segment_min_effect = 0.05;
        make(&b, &c2, 0);
        char skipped[600] = "", err[600];
        assert_int_equal(restore(f, len, &b, 0, skipped, sizeof skipped, err, sizeof err), 0);
        assert_true(same ? b.seg.nkeys == 1 : (b.seg.nkeys == 0 && strstr(skipped, "segments")));
        double y[K + SEG_MAX_KEYS] = {0};
        model_segments(&b, same ? &de : &fr, 1, y + K, 0); /* FR takes slot 0, gen 1 */
        assert_int_equal(calib_join_label(&b.join, &id, 0, 0, 2, &res), CALIB_OK);
        assert_int_equal(res.status, CALIB_JOIN_JOINED);
        model_observe(&b, res.x, 0, 1000, res.x + K);
        const seg_slot *sl = &b.seg.key[0].slot[0];
        assert_string_equal(sl->name, same ? "DE" : "FR");
        assert_int_equal(sl->score[VIEW_CAL][0].n, same ? 1 : 0);
        model_free(&a);
        model_free(&b);
        free(f);
    }
}

/* Two shards of one stream merged = one model fed the whole stream:
 * counts, sums (to rounding), bins and window panes exactly, the ring's
 * newest records, the reservoir's size and count, the waiting items. */
static void merged_shards_equal_the_whole(void **state)
{
    model_cfg c = small_cfg();
    model a, b, whole;
    make(&a, &c, 0);
    make(&b, &c, 0);
    make(&whole, &c, 0);
    feed(&a, 11, 400, 7000);
    feed(&whole, 11, 400, 7000);
    feed(&b, 12, 500, 7020); /* later pairs, some in the same panes */
    feed(&whole, 12, 500, 7020);
    char why[300];
    assert_int_equal(model_merge(&a, &b, why, sizeof why), 0);
    assert_int_equal(a.scored, whole.scored);
    for (int v = 0; v < VIEWS; v++)
        for (int k = 0; k < WS_PER_VIEW; k++) {
            assert_int_equal(a.cum[v][k].n, whole.cum[v][k].n);
            double x = calib_accum_mean(&a.cum[v][k]), y = calib_accum_mean(&whole.cum[v][k]);
            assert_true(fabs(x - y) <= 1e-13 * fabs(y));
        }
    for (int v = 0; v < VIEWS; v++) {
        assert_memory_equal(a.top[v].count, whole.top[v].count, c.bins * sizeof(uint64_t));
        assert_memory_equal(a.top[v].correct, whole.top[v].correct, c.bins * sizeof(uint64_t));
    }
    assert_memory_equal(a.cw.count, whole.cw.count, (size_t)K * c.bins * sizeof(uint64_t));
    assert_true(a.win.head == whole.win.head);
    for (uint32_t i = 0; i < a.win.cfg.panes; i++) {
        assert_true(a.win.pane[i].index == whole.win.pane[i].index);
        assert_int_equal(a.win.pane[i].stat[0].n, whole.win.pane[i].stat[0].n);
    }
    size_t n = calib_ring_len(&whole.ring);
    assert_int_equal(calib_ring_len(&a.ring), n);
    for (size_t i = 0; i < n; i++) {
        calib_record x = calib_ring_get(&a.ring, i), y = calib_ring_get(&whole.ring, i);
        assert_memory_equal(x.x, y.x, K * sizeof(double));
        assert_true(x.t == y.t && x.y == y.y);
    }
    assert_int_equal(a.reservoir.seen, 900);
    assert_int_equal(calib_reservoir_len(&a.reservoir), c.reservoir);
    /* the waiting items of both: 5 predictions and 5 labels each */
    assert_int_equal(a.join.waiting_preds, 10);
    assert_int_equal(a.join.waiting_labels, 10);
    assert_int_equal(a.join.joined, 2);
    /* another window cannot be merged */
    model_cfg c2 = c;
    c2.window_panes = 3;
    model d;
    make(&d, &c2, 0);
    assert_int_equal(model_merge(&a, &d, why, sizeof why), -1);
    assert_non_null(strstr(why, "window"));
    model_free(&a);
    model_free(&b);
    model_free(&whole);
    model_free(&d);
}

/* A merged model's trigger starts afresh, like its drift detector: its
 * counts were one daemon's, past the merged ring's (which once made the
 * merged snapshot unreadable, and its model start empty); the merge
 * restores, and so does a file whose trigger counts are past its ring. */
static void merged_trigger_starts_afresh(void **state)
{
    model_cfg c = small_cfg();
    model a, b, fresh;
    make(&a, &c, 0);
    make(&b, &c, 0);
    feed(&a, 11, 1000, 7000);
    feed(&b, 12, 100, 7020);
    calib_gate_cfg gc;
    model_trigger_cfg(&a, &gc);
    assert_int_equal(calib_gate_init(&a.recalib.trig, &gc), CALIB_OK);
    a.recalib.challenger = a.params;
    a.recalib.challenger.version = 0;
    a.recalib.challenger.values[0] = 1.3;
    a.recalib.trig_on = 1;
    a.recalib.trig_start = 900;
    a.recalib.trig_fit_at = 950;
    model chk;
    restored_copy(&a, &chk, &c); /* unmerged, it restores with its trigger */
    assert_int_equal(chk.recalib.trig_on, 1);
    assert_int_equal(chk.recalib.trig_start, 900);
    model_free(&chk);
    char why[300];
    assert_int_equal(model_merge(&a, &b, why, sizeof why), 0);
    assert_int_equal(a.recalib.trig_on, 0);
    assert_true(a.recalib.trig_start <= a.ring.total && a.recalib.trig_fit_at <= a.ring.total);
    size_t len;
    char *f = file_of(&a, &len);
    char skipped[600], err[600];
    make(&fresh, &c, 0);
    assert_int_equal(restore(f, len, &fresh, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_int_equal(fresh.scored, a.scored);
    model_free(&fresh);
    free(f);
    /* a file whose trigger's counts are past its ring: the trigger is left
     * out, the model restores */
    a.recalib.trig_on = 1;
    a.recalib.trig_start = a.ring.total + 5;
    f = file_of(&a, &len);
    make(&fresh, &c, 0);
    assert_int_equal(restore(f, len, &fresh, 0, skipped, sizeof skipped, err, sizeof err), 0);
    assert_int_equal(fresh.recalib.trig_on, 0);
    assert_non_null(strstr(skipped, "miscalibration trigger"));
    model_free(&fresh);
    free(f);
    model_free(&a);
    model_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_is_exact),
        cmocka_unit_test(merged_trigger_starts_afresh),
        cmocka_unit_test(decided_gates_and_stale_guards),
        cmocka_unit_test(idle_after_a_rollback_is_restored),
        cmocka_unit_test(silence_longer_than_the_window),
        cmocka_unit_test(join_sample_is_restored),
        cmocka_unit_test(every_state_reads_back),
        cmocka_unit_test(copy_holds_everything),
        cmocka_unit_test(merged_sequences_follow_the_version),
        cmocka_unit_test(restored_small_ring_grows),
        cmocka_unit_test(waiting_items_move_with_the_clock),
        cmocka_unit_test(changed_sections_stay_fresh),
        cmocka_unit_test(stopped_by_memory_is_restored),
        cmocka_unit_test(version_1_is_read),
        cmocka_unit_test(files_without_periods),
        cmocka_unit_test(damage_costs_one_model),
        cmocka_unit_test(foreign_files_are_refused),
        cmocka_unit_test(crafted_bodies_do_no_harm),
        cmocka_unit_test(merged_shards_equal_the_whole),
        cmocka_unit_test(waiting_codes_follow_their_segments),
        cmocka_unit_test(partition_source_in_the_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
