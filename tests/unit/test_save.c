/* test_save.c — calib/save.h: every structure's writer and reader agree
 * (a state saved, loaded into a fresh structure and saved again gives the
 * same bytes, and goes on alike); keys a reader does not know are
 * skipped; a section of a later form is left as it was; the 0.1 form's
 * binaries (the x86-64 layout calibd 0.1 wrote) decode to the structures
 * they were; malformed input fails, naming what. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/save.h"

/* ------------------------------------------------------------------ helpers */

/* The msgpack in w, unpacked into u (its root at u->data). */
static void unpack(const calib_mpw *w, msgpack_unpacked *u)
{
    size_t off = 0;
    assert_int_equal(calib_mpw_error(w), CALIB_OK);
    msgpack_unpacked_init(u);
    assert_int_equal(msgpack_unpack_next(u, w->sb.data, w->sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, w->sb.size);
}

static void same_bytes(const calib_mpw *a, const calib_mpw *b)
{
    assert_int_equal(a->sb.size, b->sb.size);
    assert_memory_equal(a->sb.data, b->sb.data, a->sb.size);
}

/* A structure saved and unpacked, and a reader for it. */
typedef struct saved {
    calib_mpw w;
    msgpack_unpacked u;
    char err[300];
    calib_mpr r;
} saved;

/* SAVED(s, save, a): a saved by save into s, unpacked (s.u.data), and a
 * fresh reader (s.r); saved_end(&s) after. */
#define SAVED(sv, save, a) (calib_mpw_init(&(sv).w), save(&(sv).w, (a)), saved_read(&(sv)))

static void saved_read(saved *s)
{
    unpack(&s->w, &s->u);
    calib_mpr_init(&s->r, s->err, sizeof s->err);
}

static void saved_end(saved *s)
{
    msgpack_unpacked_destroy(&s->u);
    calib_mpw_destroy(&s->w);
}

/* o copied into w, as it was. */
static void copy_object(const msgpack_object *o, calib_mpw *w)
{
    switch (o->type) {
    case MSGPACK_OBJECT_MAP:
        calib_mpw_map(w);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)kv->key.via.str.size, kv->key.via.str.ptr);
            calib_mpw_key(w, key);
            copy_object(&kv->val, w);
        }
        calib_mpw_end(w);
        break;
    case MSGPACK_OBJECT_ARRAY:
        calib_mpw_array(w);
        for (uint32_t i = 0; i < o->via.array.size; i++)
            copy_object(&o->via.array.ptr[i], w);
        calib_mpw_end(w);
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: calib_mpw_uint(w, o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: calib_mpw_int(w, o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: calib_mpw_double(w, o->via.f64); break;
    case MSGPACK_OBJECT_STR: calib_mpw_strn(w, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN: calib_mpw_bin(w, o->via.bin.ptr, o->via.bin.size); break;
    case MSGPACK_OBJECT_BOOLEAN: calib_mpw_bool(w, o->via.boolean); break;
    default: calib_mpw_nil(w); break;
    }
}

/* ------------------------------------------------------------------ leaves */

static void accumulators_round_trip_and_read_the_01_form(void **state)
{
    (void)state;
    calib_accum a[3], b[3];
    calib_rng r;
    calib_rng_seed(&r, 1);
    for (int i = 0; i < 3; i++) {
        calib_accum_init(&a[i]);
        for (int k = 0; k < 100 * i; k++)
            calib_accum_add(&a[i], calib_rng_uniform(&r) * 1e3);
    }
    calib_mpw w;
    calib_mpw_init(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "a");
    calib_accums_save(&w, a, 3);
    /* the 0.1 form: the structures' bytes, which are that layout here */
    calib_mpw_key(&w, "old");
    calib_mpw_bin(&w, a, sizeof a);
    calib_mpw_end(&w);
    msgpack_unpacked u;
    unpack(&w, &u);
    char err[200];
    calib_mpr rd;
    calib_mpr_init(&rd, err, sizeof err);
    memset(b, 0xff, sizeof b);
    assert_int_equal(calib_accums_load(&rd, &u.data, "a", b, 3), 1);
    assert_memory_equal(a, b, sizeof a);
    memset(b, 0xff, sizeof b);
    assert_int_equal(calib_accums_load(&rd, &u.data, "old", b, 3), 1);
    assert_memory_equal(a, b, sizeof a);
    /* another count: refused, naming the key */
    assert_int_equal(calib_accums_load(&rd, &u.data, "a", b, 2), 0);
    assert_non_null(strstr(err, "a: not an array of 2"));
    msgpack_unpacked_destroy(&u);

    /* a NaN sum is refused */
    calib_mpw_reset(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "n");
    calib_mpw_uint(&w, 1);
    calib_mpw_key(&w, "sum");
    calib_mpw_double(&w, NAN);
    calib_mpw_key(&w, "sum_c");
    calib_mpw_double(&w, 0);
    calib_mpw_key(&w, "sq");
    calib_mpw_double(&w, 0);
    calib_mpw_key(&w, "sq_c");
    calib_mpw_double(&w, 0);
    calib_mpw_end(&w);
    unpack(&w, &u);
    calib_mpr_init(&rd, err, sizeof err);
    assert_int_equal(calib_accum_load(&rd, &u.data, &b[0]), 0);
    assert_non_null(strstr(err, "NaN"));
    msgpack_unpacked_destroy(&u);
    calib_mpw_destroy(&w);
}

static void eprocesses_round_trip_and_read_the_01_form(void **state)
{
    (void)state;
    calib_eproc e, f;
    assert_int_equal(calib_eproc_init(&e, 0, 1, 0.4), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 2);
    for (int i = 0; i < 500; i++)
        calib_eproc_add(&e, calib_rng_uniform(&r));
    calib_mpw w;
    calib_mpw_init(&w);
    calib_mpw_array(&w);
    calib_eproc_save(&w, &e);
    calib_mpw_bin(&w, &e, sizeof e);
    calib_mpw_end(&w);
    msgpack_unpacked u;
    unpack(&w, &u);
    char err[200];
    calib_mpr rd;
    calib_mpr_init(&rd, err, sizeof err);
    for (int i = 0; i < 2; i++) {
        memset(&f, 0, sizeof f);
        assert_int_equal(calib_eproc_load(&rd, &u.data.via.array.ptr[i], &f), 1);
        assert_memory_equal(&e, &f, sizeof e);
    }
    msgpack_unpacked_destroy(&u);
    calib_mpw_destroy(&w);
    /* an e-process that cannot go on (m outside its range) is refused */
    e.m = 2;
    saved sv;
    SAVED(sv, calib_eproc_save, &e);
    assert_int_equal(calib_eproc_load(&sv.r, &sv.u.data, &f), 0);
    assert_non_null(strstr(sv.err, "inconsistent"));
    saved_end(&sv);
}

/* ------------------------------------------------------------------ sections */

/* Saves a, loads into b and saves b: the same bytes. Returns the load's
 * result. */
#define ROUND_TRIP(save, load, a, b, ...)                                         \
    do {                                                                           \
        saved sa_;                                                                 \
        calib_mpw wb_;                                                             \
        SAVED(sa_, save, a);                                                       \
        int rc_ = load(&sa_.r, &sa_.u.data, (b), ##__VA_ARGS__);                   \
        if (rc_ != CALIB_LOAD_OK)                                                  \
            print_error("%s\n", sa_.err);                                          \
        assert_int_equal(rc_, CALIB_LOAD_OK);                                      \
        calib_mpw_init(&wb_);                                                      \
        save(&wb_, (b));                                                           \
        same_bytes(&sa_.w, &wb_);                                                  \
        saved_end(&sa_);                                                           \
        calib_mpw_destroy(&wb_);                                                   \
    } while (0)

static void bins_round_trip(void **state)
{
    (void)state;
    calib_bins a, b;
    calib_cwbins ca, cb;
    assert_int_equal(calib_bins_init(&a, 15), CALIB_OK);
    assert_int_equal(calib_bins_init(&b, 15), CALIB_OK);
    assert_int_equal(calib_cwbins_init(&ca, 3, 10), CALIB_OK);
    assert_int_equal(calib_cwbins_init(&cb, 3, 10), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 3);
    for (int i = 0; i < 1000; i++) {
        double c = calib_rng_uniform(&r);
        calib_bins_add(&a, c, calib_rng_uniform(&r) < c);
        double p[3] = {c / 2, c / 2, 1 - c};
        calib_cwbins_add(&ca, p, (size_t)(calib_rng_next(&r) % 3));
    }
    ROUND_TRIP(calib_bins_save, calib_bins_load, &a, &b);
    assert_int_equal(b.n, 1000);
    ROUND_TRIP(calib_cwbins_save, calib_cwbins_load, &ca, &cb);

    /* counts that do not add up are refused */
    a.count[0]++;
    saved sv;
    SAVED(sv, calib_bins_save, &a);
    assert_int_equal(calib_bins_load(&sv.r, &sv.u.data, &b), CALIB_LOAD_FAILED);
    assert_non_null(strstr(sv.err, "counts add to"));
    saved_end(&sv);
    calib_bins_free(&a);
    calib_bins_free(&b);
    calib_cwbins_free(&ca);
    calib_cwbins_free(&cb);
}

static void windows_round_trip_and_other_settings_are_left(void **state)
{
    (void)state;
    calib_window_cfg cfg = {.kind = CALIB_WINDOW_COUNT, .span = 100, .panes = 5,
                            .nstat = 2, .top_bins = 10, .cw_k = 2, .cw_bins = 5};
    calib_window a, b, c;
    assert_int_equal(calib_window_init(&a, &cfg), CALIB_OK);
    assert_int_equal(calib_window_init(&b, &cfg), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 4);
    for (int i = 0; i < 333; i++) {
        calib_pane *p = calib_window_next(&a);
        double x = calib_rng_uniform(&r), q[2] = {x, 1 - x};
        calib_accum_add(&p->stat[0], x);
        calib_accum_add(&p->stat[1], x * x);
        calib_bins_add(&p->top[0], x > 0.5 ? x : 1 - x, i % 2);
        calib_cwbins_add(&p->cw, q, (size_t)(i % 2));
    }
    ROUND_TRIP(calib_window_save, calib_window_load, &a, &b);
    assert_int_equal(b.clock, a.clock);

    /* another number of panes: left as it was */
    calib_window_cfg other = cfg;
    other.panes = 4;
    other.span = 100;
    assert_int_equal(calib_window_init(&c, &other), CALIB_OK);
    saved sv;
    SAVED(sv, calib_window_save, &a);
    assert_int_equal(calib_window_load(&sv.r, &sv.u.data, &c), CALIB_LOAD_OTHER);
    assert_false(sv.r.failed);
    assert_int_equal(c.head, -1);
    saved_end(&sv);
    calib_window_free(&a);
    calib_window_free(&b);
    calib_window_free(&c);
}

static void reservoir_save(calib_mpw *w, const calib_reservoir *v)
{
    calib_reservoir_save(w, v, v->s.cap);
}

static void reservoirs_round_trip(void **state)
{
    (void)state;
    calib_reservoir a, b;
    assert_int_equal(calib_reservoir_init(&a, 3, 50, 5, NULL), CALIB_OK);
    assert_int_equal(calib_reservoir_init(&b, 3, 50, 6, NULL), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 5);
    for (int i = 0; i < 777; i++) {
        double x[3] = {calib_rng_uniform(&r), i, -i};
        calib_reservoir_offer(&a, x, i % 3, i);
    }
    ROUND_TRIP(reservoir_save, calib_reservoir_load, &a, &b, (size_t)50);
    /* and they go on alike: the same records kept */
    for (int i = 0; i < 500; i++) {
        double x[3] = {i, i, i};
        assert_int_equal(calib_reservoir_offer(&a, x, 0, i), calib_reservoir_offer(&b, x, 0, i));
    }
    assert_memory_equal(a.s.data, b.s.data, a.s.len * 5 * sizeof(double));
    calib_reservoir_free(&a);
    calib_reservoir_free(&b);
}

static void join_save(calib_mpw *w, const calib_join *j)
{
    calib_join_save(w, j);
}

static int join_load(calib_mpr *r, const msgpack_object *o, calib_join *j, double *x)
{
    size_t lost;
    int rc = calib_join_load(r, o, j, 0, x, &lost);
    assert_int_equal(lost, 0);
    return rc;
}

static void joins_round_trip_and_other_widths_are_counted(void **state)
{
    (void)state;
    calib_join_cfg cfg = {.ttl = 100, .capacity = 64, .width = 3, .joined_capacity = 32,
                          .seed = 7};
    calib_join a, b, c;
    assert_int_equal(calib_join_init(&a, &cfg), CALIB_OK);
    assert_int_equal(calib_join_init(&b, &cfg), CALIB_OK);
    calib_join_result out;
    for (uint64_t i = 0; i < 40; i++) {
        calib_id id;
        calib_id_u64(&id, i);
        double x[3] = {i, 1, 2};
        if (i % 3 != 2)
            assert_int_equal(calib_join_pred(&a, &id, x, 0, (double)i, &out), CALIB_OK);
        if (i % 2)
            assert_int_equal(calib_join_label(&a, &id, 1, 0, (double)i, &out), CALIB_OK);
    }
    double x[3];
    ROUND_TRIP(join_save, join_load, &a, &b, x);
    assert_int_equal(b.joined, a.joined);

    /* into a table of another width: the predictions are counted lost */
    calib_join_cfg other = cfg;
    other.width = 4;
    assert_int_equal(calib_join_init(&c, &other), CALIB_OK);
    saved sv;
    SAVED(sv, calib_join_save, &a);
    size_t lost = 0;
    double x4[4];
    assert_int_equal(calib_join_load(&sv.r, &sv.u.data, &c, 0, x4, &lost), CALIB_LOAD_OK);
    assert_true(lost > 0);
    saved_end(&sv);

    /* outputs 2 and tags: one more tag than stored comes in as 0, one
     * fewer is dropped, and none are lost; keeping 3 outputs loses them
     * from the table of width 2 */
    for (size_t w = 2; w <= 4; w += 2) {
        calib_join t;
        calib_join_cfg tc = cfg;
        tc.width = w;
        assert_int_equal(calib_join_init(&t, &tc), CALIB_OK);
        SAVED(sv, calib_join_save, &a);
        lost = 0;
        assert_int_equal(calib_join_load_tags(&sv.r, &sv.u.data, &t, 0, x4, 2, 2, &lost),
                         CALIB_LOAD_OK);
        assert_int_equal(lost, 0);
        assert_int_equal(t.waiting_preds, a.waiting_preds);
        calib_id id;
        calib_id_u64(&id, 36); /* waiting: 36 % 3 != 2, 36 % 2 == 0 */
        assert_int_equal(calib_join_label(&t, &id, 1, 0, 36, &out), CALIB_OK);
        assert_int_equal(out.status, CALIB_JOIN_JOINED);
        assert_true(out.x[0] == 36 && out.x[1] == 1);
        if (w == 4)
            assert_true(out.x[2] == 2 && out.x[3] == 0);
        saved_end(&sv);
        calib_join_free(&t);
        SAVED(sv, calib_join_save, &a);
        assert_int_equal(calib_join_init(&t, &tc), CALIB_OK);
        assert_int_equal(calib_join_load_tags(&sv.r, &sv.u.data, &t, 0, x4, 3, 0, &lost),
                         CALIB_LOAD_OK);
        assert_true(w == 2 ? lost > 0 : lost == 0);
        if (w == 4) { /* tags not taken: 0 */
            assert_int_equal(calib_join_label(&t, &id, 1, 0, 36, &out), CALIB_OK);
            assert_true(out.x[2] == 2 && out.x[3] == 0);
        }
        saved_end(&sv);
        calib_join_free(&t);
    }
    calib_join_free(&a);
    calib_join_free(&b);
    calib_join_free(&c);
}

/* A MEAN detector and an EXCEED one. */
static const calib_drift_cfg drift_cfgs[2] = {
    {.kind = CALIB_DRIFT_MEAN, .lo = 0, .hi = 2, .alpha = 0.05, .min_effect = 0.01,
     .reference = 100, .restart = 100},
    {.kind = CALIB_DRIFT_EXCEED, .alpha = 0.05, .min_effect = 0.01, .quantile = 0.9,
     .reference = 100, .restart = 100}};

/* Fed until watching: MEAN with pairs and a ring, EXCEED with its bank. */
static void drift_fed(calib_drift *d, const calib_drift_cfg *c, uint64_t seed, int n)
{
    assert_int_equal(calib_drift_init(d, c), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, seed);
    for (int i = 0; i < n; i++)
        calib_drift_add(d, calib_rng_uniform(&r) * (i < n / 2 ? 1 : 1.2));
}

static void drifts_round_trip_and_go_on_alike(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        calib_drift a, b;
        drift_fed(&a, &drift_cfgs[k], 8, 1500);
        assert_int_equal(calib_drift_init(&b, &drift_cfgs[k]), CALIB_OK);
        assert_int_not_equal(a.state, CALIB_DRIFT_REFERENCE);
        if (k == 0)
            assert_true(a.npair > 0);
        else
            assert_true(a.nbank > 0);
        ROUND_TRIP(calib_drift_save, calib_drift_load, &a, &b);
        calib_rng r;
        calib_rng_seed(&r, 9);
        for (int i = 0; i < 2000; i++) {
            double x = calib_rng_uniform(&r) * 1.5;
            assert_int_equal(calib_drift_add(&a, x), calib_drift_add(&b, x));
        }
        assert_true(calib_drift_log_e(&a) == calib_drift_log_e(&b));
        calib_drift_free(&a);
        calib_drift_free(&b);
    }
}

/* A MEAN detector as calibd 0.1 wrote it: its bank, pairs and
 * accumulators the structures' bytes (this host's layout is that one). */
static void drift_01(calib_mpw *w, const calib_drift *d)
{
    const calib_drift_cfg *c = &d->cfg;
    const double v[8] = {c->kind, c->lo, c->hi, c->alpha, c->min_effect, c->quantile,
                         (double)c->reference, (double)c->restart};
    calib_mpw_map(w);
    calib_mpw_key(w, "cfg");
    calib_doubles_save(w, v, 8);
    calib_mpw_key(w, "state");
    calib_mpw_uint(w, (uint64_t)d->state);
    calib_mpw_key(w, "ref");
    calib_mpw_bin(w, &d->ref, sizeof d->ref);
    calib_mpw_key(w, "ref_x");
    calib_mpw_bin(w, d->ref_x, d->ref_x ? c->reference * sizeof(double) : 0);
    calib_mpw_key(w, "threshold");
    calib_mpw_double(w, d->threshold);
    calib_mpw_key(w, "null_mean");
    calib_mpw_double(w, d->null_mean);
    calib_mpw_key(w, "bank");
    calib_mpw_bin(w, d->bank, sizeof d->bank);
    calib_mpw_key(w, "log_w");
    calib_mpw_bin(w, d->log_w, sizeof d->log_w);
    calib_mpw_key(w, "start");
    calib_mpw_bin(w, d->start, sizeof d->start);
    calib_mpw_key(w, "nbank");
    calib_mpw_uint(w, d->nbank);
    calib_mpw_key(w, "started");
    calib_mpw_uint(w, d->started);
    calib_mpw_key(w, "watch");
    calib_mpw_bin(w, &d->watch, sizeof d->watch);
    calib_mpw_key(w, "n");
    calib_mpw_uint(w, d->n);
    calib_mpw_key(w, "alarm_at");
    calib_mpw_uint(w, d->alarm_at);
    calib_mpw_key(w, "change_at");
    calib_mpw_uint(w, d->change_at);
    calib_mpw_key(w, "resets");
    calib_mpw_uint(w, d->resets);
    calib_mpw_key(w, "ring");
    calib_mpw_bin(w, d->ring, d->ring ? d->ring_len * sizeof *d->ring : 0);
    calib_mpw_key(w, "ring_n");
    calib_mpw_uint(w, d->ring_n);
    calib_mpw_key(w, "pair");
    calib_mpw_bin(w, d->pair, sizeof d->pair);
    calib_mpw_key(w, "npair");
    calib_mpw_uint(w, d->npair);
    calib_mpw_key(w, "all");
    calib_mpw_bin(w, &d->all, sizeof d->all);
    calib_mpw_end(w);
}

static void drifts_of_the_01_form_are_read(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        calib_drift a, b;
        drift_fed(&a, &drift_cfgs[k], 10, 1500);
        assert_int_equal(calib_drift_init(&b, &drift_cfgs[k]), CALIB_OK);
        saved old, sa, sb;
        SAVED(old, drift_01, &a);
        assert_int_equal(calib_drift_load(&old.r, &old.u.data, &b), CALIB_LOAD_OK);
        SAVED(sa, calib_drift_save, &a);
        SAVED(sb, calib_drift_save, &b);
        same_bytes(&sa.w, &sb.w);
        saved_end(&old);
        saved_end(&sa);
        saved_end(&sb);
        calib_drift_free(&a);
        calib_drift_free(&b);
    }
}

static void gates_round_trip(void **state)
{
    (void)state;
    calib_gate_cfg c = {.alpha = 0.05, .min_improvement = 0.001, .lo = -2, .hi = 2,
                        .max_samples = 100000};
    calib_gate a, b;
    assert_int_equal(calib_gate_init(&a, &c), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 11);
    for (int i = 0; i < 300; i++)
        calib_gate_add(&a, calib_rng_uniform(&r), calib_rng_uniform(&r) * 0.99);
    ROUND_TRIP(calib_gate_save, calib_gate_load, &a, &b);
    assert_memory_equal(&a.cfg, &b.cfg, sizeof a.cfg);
}

static void confidence_sequences_round_trip(void **state)
{
    (void)state;
    calib_cs a, b, c;
    assert_int_equal(calib_cs_init(&a, 0, 2, 0.05, 0), CALIB_OK);
    assert_int_equal(calib_cs_init(&b, 0, 2, 0.05, 0), CALIB_OK);
    assert_int_equal(calib_cs_init(&c, 0, 2, 0.1, 0), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 12);
    for (int i = 0; i < 5000; i++)
        calib_cs_add(&a, calib_rng_uniform(&r) * 0.5);
    ROUND_TRIP(calib_cs_save, calib_cs_load, &a, &b);
    double la, ha, lb, hb;
    calib_cs_interval(&a, &la, &ha);
    calib_cs_interval(&b, &lb, &hb);
    assert_true(la == lb && ha == hb);
    /* another level: left as it was */
    saved sv;
    SAVED(sv, calib_cs_save, &a);
    assert_int_equal(calib_cs_load(&sv.r, &sv.u.data, &c), CALIB_LOAD_OTHER);
    assert_int_equal(c.n, 0);
    saved_end(&sv);
    calib_cs_free(&a);
    calib_cs_free(&b);
    calib_cs_free(&c);
}

/* The map o again into w: with keys added first and last ("zz_first"
 * holding a map) when later, without the key drop, with "v" as form when
 * form > 0. */
static void remake(calib_mpw *w, const msgpack_object *o, int later, const char *drop,
                   uint64_t form)
{
    calib_mpw_map(w);
    if (later) {
        calib_mpw_key(w, "zz_first");
        calib_mpw_map(w);
        calib_mpw_key_uint(w, "x", 1);
        calib_mpw_end(w);
    }
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.via.str.size, kv->key.via.str.ptr);
        if (drop && strcmp(key, drop) == 0)
            continue;
        calib_mpw_key(w, key);
        if (form && strcmp(key, "v") == 0)
            calib_mpw_uint(w, form);
        else
            copy_object(&kv->val, w);
    }
    if (later) {
        calib_mpw_key(w, "zz_last");
        calib_mpw_str(w, "later");
    }
    calib_mpw_end(w);
}

static void remade_later(calib_mpw *w, const msgpack_object *o)
{
    remake(w, o, 1, NULL, 0);
}

static void remade_form(calib_mpw *w, const msgpack_object *o)
{
    remake(w, o, 0, NULL, CALIB_SAVE_FORM + 1);
}

static void remade_without_pairs(calib_mpw *w, const msgpack_object *o)
{
    remake(w, o, 0, "pairs", 0);
}

/* A later writer's keys are skipped; a section of a later form is left
 * as it was, and said so by the result, not by a failure. */
static void later_keys_are_skipped_and_later_forms_left(void **state)
{
    (void)state;
    calib_gate_cfg c = {.alpha = 0.05, .min_improvement = 0.001, .lo = -2, .hi = 2,
                        .max_samples = 1000};
    calib_gate a, b;
    assert_int_equal(calib_gate_init(&a, &c), CALIB_OK);
    for (int i = 0; i < 50; i++)
        calib_gate_add(&a, 0.3, 0.2);
    saved sv, sl;
    SAVED(sv, calib_gate_save, &a);
    const msgpack_object *o = &sv.u.data;
    /* the same map, a new key first and last, one holding a map */
    SAVED(sl, remade_later, o);
    assert_int_equal(calib_gate_load(&sl.r, &sl.u.data, &b), CALIB_LOAD_OK);
    assert_int_equal(b.pairs, 50);
    saved_end(&sl);

    /* "v" above this libcalib's form: left as it was, no failure */
    SAVED(sl, remade_form, o);
    calib_gate fresh;
    assert_int_equal(calib_gate_init(&fresh, &c), CALIB_OK);
    b = fresh;
    assert_int_equal(calib_gate_load(&sl.r, &sl.u.data, &b), CALIB_LOAD_LATER);
    assert_false(sl.r.failed);
    assert_memory_equal(&b, &fresh, sizeof b);
    assert_int_equal(calib_save_form(&sl.u.data), CALIB_SAVE_FORM + 1);
    saved_end(&sl);

    /* a key it needs, missing: a failure that names it */
    SAVED(sl, remade_without_pairs, o);
    assert_int_equal(calib_gate_load(&sl.r, &sl.u.data, &b), CALIB_LOAD_FAILED);
    assert_string_equal(sl.err, "pairs: missing");
    saved_end(&sl);
    saved_end(&sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accumulators_round_trip_and_read_the_01_form),
        cmocka_unit_test(eprocesses_round_trip_and_read_the_01_form),
        cmocka_unit_test(bins_round_trip),
        cmocka_unit_test(windows_round_trip_and_other_settings_are_left),
        cmocka_unit_test(reservoirs_round_trip),
        cmocka_unit_test(joins_round_trip_and_other_widths_are_counted),
        cmocka_unit_test(drifts_round_trip_and_go_on_alike),
        cmocka_unit_test(drifts_of_the_01_form_are_read),
        cmocka_unit_test(gates_round_trip),
        cmocka_unit_test(confidence_sequences_round_trip),
        cmocka_unit_test(later_keys_are_skipped_and_later_forms_left),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
