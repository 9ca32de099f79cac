/* test_segment.c — calibration per segment (segment.c): the
 * space-saving sketch and its codes, routing of a pair whose slot changed
 * occupant, flagged slots kept, the test's arithmetic (the mixture, the
 * adjuster, the e-BH threshold), power against an overconfident segment,
 * false discoveries over fixed seeds, the key limit and the budget. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/mpr.h"
#include "calib/mpw.h"
#include "calib/save.h"
#include "segment.h"

static seg_cfg cfg_of(size_t keys, size_t values)
{
    return (seg_cfg){.keys = keys, .values = values, .bins = 15, .alpha = 0.1,
                     .min_effect = 0.02, .seed = 42};
}

/* One prediction with one segment key: its first column's code (0 when
 * the table has no column: seg_predict writes cfg.keys of them). */
static double predict1(seg_table *t, const char *key, const char *val)
{
    double codes[SEG_MAX_KEYS] = {0};
    seg_kv kv = {key, val, strlen(key), strlen(val)};
    seg_predict(t, &kv, 1, codes, 0);
    return codes[0];
}

/* A pair of calibrated-view confidence conf, correct or not. */
static seg_obs obs_of(double conf, int correct)
{
    double b = (1 - conf) * (1 - conf) * (correct ? 1 : 0) + (correct ? 0 : conf * conf);
    return (seg_obs){.s = {{b, -log(correct ? conf : 1 - conf)}, {b, -log(correct ? conf : 1 - conf)}},
                     .conf = {conf, conf}, .correct = {correct, correct}};
}

static void test_bad_cfg(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(SEG_MAX_KEYS + 1, 8);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_EINVAL);
    c = cfg_of(1, 0);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_EINVAL);
    c = cfg_of(1, SEG_MAX_VALUES + 1);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_EINVAL);
    c = cfg_of(1, 8);
    c.alpha = 1;
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_EINVAL);
    c = cfg_of(0, 0); /* off: nothing else is looked at */
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    assert_int_equal(predict1(&t, "country", "DE"), 0);
    assert_int_equal(t.keys_full, 1);
    seg_free(&t);
}

/* Values take free slots, then the least counted unflagged one; a code
 * issued before its slot changed occupant routes to "other", with the
 * evicted occupant's pairs. */
static void test_sketch_and_codes(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(2, 3);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    double a = predict1(&t, "country", "DE");
    assert_true(a > 0);
    assert_true(predict1(&t, "country", "DE") == a); /* the same occupant, same code */
    double b = predict1(&t, "country", "FR");
    double cc = predict1(&t, "country", "IT");
    (void)predict1(&t, "country", "IT");
    (void)predict1(&t, "country", "IT");
    (void)predict1(&t, "country", "FR");
    seg_key *k = &t.key[0];
    assert_string_equal(k->name, "country");
    assert_int_equal(k->used, 3);
    assert_int_equal(k->slot[0].count, 2);
    assert_int_equal(k->slot[1].count, 2);
    assert_int_equal(k->slot[2].count, 3);
    /* FR's pair before the eviction */
    seg_obs o = obs_of(0.9, 1);
    seg_observe(&t, (double[]){b, 0}, &o);
    assert_int_equal(k->slot[1].score[1][0].n, 1);
    /* ES evicts the first least counted: DE (2) ties FR (2): DE, the first */
    double es = predict1(&t, "country", "ES");
    assert_int_equal(k->evictions, 1);
    assert_string_equal(k->slot[0].name, "ES");
    assert_int_equal(k->slot[0].count, 3);  /* inherits 2, counts 1 */
    assert_int_equal(k->slot[0].err, 2);
    assert_true(es != a);
    /* DE's waiting prediction joins now: to "other" */
    seg_observe(&t, (double[]){a, 0}, &o);
    assert_int_equal(seg_other(&t, 0)->score[1][0].n, 1);
    assert_int_equal(t.late, 1);
    assert_int_equal(k->slot[0].score[1][0].n, 0);
    /* FR is evicted next; its pair's statistics move to "other" */
    (void)predict1(&t, "country", "PT");
    assert_string_equal(k->slot[1].name, "PT");
    assert_int_equal(seg_other(&t, 0)->score[1][0].n, 2);
    assert_int_equal(seg_other(&t, 0)->top[1].n, 2);
    /* DE comes back to a slot of its own */
    double de2 = predict1(&t, "country", "DE");
    assert_true(de2 != a);
    assert_null(seg_route(&t, 0, 0));
    assert_null(seg_route(&t, 5, a));
    assert_null(seg_route(&t, 0, -1));
    assert_null(seg_route(&t, 0, NAN));
    (void)cc;
    seg_free(&t);
}

/* A prediction without a key leaves its column 0; a second key gets the
 * second column; keys past cfg.keys are counted, not tracked. */
static void test_keys(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(2, 4);
    calib_budget budget;
    calib_budget_init(&budget, SIZE_MAX, NULL);
    assert_int_equal(seg_init(&t, &c, &budget), CALIB_OK);
    double codes[SEG_MAX_KEYS];
    seg_kv kv[3] = {{"device", "ios", 6, 3}, {"country", "DE", 7, 2}, {"tier", "gold", 4, 4}};
    seg_predict(&t, kv, 3, codes, 0);
    assert_int_equal(t.nkeys, 2);
    assert_string_equal(t.key[0].name, "device");
    assert_string_equal(t.key[1].name, "country");
    assert_true(codes[0] > 0 && codes[1] > 0);
    assert_int_equal(t.keys_full, 1);
    assert_int_equal(budget.used, 2 * seg_key_bytes(&c));
    seg_predict(&t, kv + 1, 1, codes, 0);
    assert_true(codes[0] == 0 && codes[1] > 0);
    seg_free(&t);
    assert_int_equal(budget.used, 0);
    /* a budget too small for one key: refused, counted */
    calib_budget_init(&budget, seg_key_bytes(&c) - 1, NULL);
    assert_int_equal(seg_init(&t, &c, &budget), CALIB_OK);
    seg_predict(&t, kv, 1, codes, 0);
    assert_int_equal(t.nkeys, 0);
    assert_int_equal(t.refused, 1);
    assert_true(codes[0] == 0);
    seg_free(&t);
}

/* ln E is the log of the mean of the bets' products on both sides, each
 * the product of 1 + bet u over the pairs; the e-BH threshold is the
 * stated formula. */
static void test_arithmetic(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(1, 50);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    double code = predict1(&t, "k", "v");
    seg_slot *s = seg_route(&t, 0, code);
    assert_non_null(s);
    assert_close(seg_log_e(s), 0, 1e-15);
    for (int i = 0; i < 50; i++) {
        seg_obs o = obs_of(0.95, i % 2);
        seg_observe(&t, &code, &o);
    }
    /* r = 0.05 (25 times) and -0.95 (25 times); min_effect 0.02 */
    const double bets[] = SEG_BET_VALUES;
    double e = 0;
    for (int b = 0; b < SEG_BETS; b++) {
        double up = 1, down = 1;
        for (int i = 0; i < 50; i++) {
            double r = i % 2 ? 0.05 : -0.95;
            up *= 1 + bets[b] * (r - 0.02) / 1.02;
            down *= 1 + bets[b] * (-r - 0.02) / 1.02;
        }
        e += (up + down) / (2 * SEG_BETS);
    }
    assert_close(seg_log_e(s), log(e), 1e-12);
    assert_close(seg_log_e_decide(s), seg_log_e(s), 0);
    assert_close(seg_log_threshold(&t, 4), log(50 / (0.1 * 4)), 1e-15);
    assert_int_equal(s->resid.n, 50);
    assert_close(calib_accum_mean(&s->resid), 0.5 - 0.95, 1e-12);
    seg_free(&t);
}

/* Draws conf in [0.5, 1) and correctness with probability
 * conf - bias: bias 0 is a calibrated segment. */
static seg_obs draw(calib_rng *r, double bias)
{
    double conf = 0.5 + 0.5 * calib_rng_uniform(r);
    return obs_of(conf, calib_rng_uniform(r) < conf - bias);
}

/* nseg segments, the first `bad` overconfident by `bias`, n pairs each in
 * turn; e-BH after every round of pairs. Returns the slots flagged, and
 * how many of them were calibrated in *false_flags. */
static size_t run(uint64_t seed, size_t nseg, size_t bad, double bias, size_t n,
                  size_t *false_flags)
{
    seg_table t;
    seg_cfg c = cfg_of(1, nseg);
    c.seed = seed;
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, seed);
    double *codes = malloc(nseg * sizeof *codes);
    assert_non_null(codes);
    char name[16];
    for (size_t j = 0; j < nseg; j++) {
        snprintf(name, sizeof name, "s%zu", j);
        codes[j] = predict1(&t, "seg", name);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < nseg; j++) {
            seg_obs o = draw(&r, j < bad ? bias : 0);
            seg_observe(&t, &codes[j], &o);
        }
        if (i % 10 == 9)
            seg_decide(&t, (double)i, NULL, NULL);
    }
    size_t flags = 0;
    *false_flags = 0;
    for (size_t j = 0; j < nseg; j++) {
        const seg_slot *s = seg_route(&t, 0, codes[j]);
        if (s->flagged) {
            flags++;
            *false_flags += j >= bad;
        }
    }
    free(codes);
    seg_free(&t);
    return flags;
}

/* Overconfident by 0.2 among calibrated ones: found within 300 pairs
 * each; none of the calibrated flagged in this seed. */
static void test_power(void **state)
{
    (void)state;
    size_t fp;
    assert_int_equal(run(1, 40, 3, 0.2, 300, &fp), 3);
    assert_int_equal(fp, 0);
}

/* No segment miscalibrated: over 200 seeds, the seeds with any flag are
 * at most what alpha = 0.1 allows (e-BH's FDR is the family-wise rate
 * under the global null), with a binomial margin. */
static void test_null_level(void **state)
{
    (void)state;
    size_t any = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        size_t fp;
        any += run(seed, 20, 0, 0, 300, &fp) > 0;
    }
    print_message("seeds with a flag under the null: %zu of 200\n", any);
    assert_true(any <= 30); /* P(Binomial(200, 0.1) > 30) < 0.02; in fact far fewer */
}

/* A flagged slot keeps its value when new values come: the least counted
 * unflagged slot goes instead. */
static void test_flagged_kept(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(1, 2);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    double bad = predict1(&t, "k", "bad");
    (void)predict1(&t, "k", "good");
    (void)predict1(&t, "k", "good");
    calib_rng r;
    calib_rng_seed(&r, 3);
    size_t flagged = 0;
    for (int i = 0; i < 2000 && !flagged; i++) {
        seg_obs o = draw(&r, 0.4);
        seg_observe(&t, &bad, &o);
        flagged = seg_decide(&t, i, NULL, NULL);
    }
    assert_int_equal(flagged, 1);
    assert_true(t.key[0].slot[0].flagged);
    (void)predict1(&t, "k", "new");  /* "bad" has the lower count, but is flagged */
    assert_string_equal(t.key[0].slot[0].name, "bad");
    assert_string_equal(t.key[0].slot[1].name, "new");
    (void)predict1(&t, "k", "newer");
    assert_string_equal(t.key[0].slot[1].name, "newer");
    assert_int_equal(t.key[0].flags, 1);
    seg_free(&t);
}

/* Saves a to msgpack and loads it into b; returns the load's code. */
static int round_trip(const seg_table *a, seg_table *b, char *err, size_t errlen)
{
    calib_mpw w;
    calib_mpw_init(&w);
    seg_save(&w, a);
    assert_int_equal(calib_mpw_error(&w), CALIB_OK);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, w.sb.data, w.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    calib_mpr r;
    calib_mpr_init(&r, err, errlen);
    int rc = seg_load(&r, &u.data, b);
    msgpack_unpacked_destroy(&u);
    calib_mpw_destroy(&w);
    return rc;
}

/* A table saved and loaded routes the codes issued before as the original
 * does, with the same figures, flags and sketch; other settings leave the
 * table as it was. */
static void test_save_load(void **state)
{
    (void)state;
    seg_table a, b;
    seg_cfg c = cfg_of(2, 3);
    assert_int_equal(seg_init(&a, &c, NULL), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 5);
    double codes[4][SEG_MAX_KEYS];
    const char *vals[4] = {"DE", "FR", "IT", "ES"};
    for (int i = 0; i < 4; i++) {
        seg_kv kv[2] = {{"country", vals[i], 7, 2}, {"device", i % 2 ? "ios" : "web", 6, 3}};
        seg_predict(&a, kv, 2, codes[i], 100 + i);
    }
    for (int i = 0; i < 400; i++) {
        seg_obs o = draw(&r, i % 4 == 1 ? 0.4 : 0);
        seg_observe(&a, codes[i % 4], &o);
    }
    assert_true(seg_decide(&a, 500, NULL, NULL) >= 1);
    char err[200] = "";
    assert_int_equal(seg_init(&b, &c, NULL), CALIB_OK);
    assert_int_equal(round_trip(&a, &b, err, sizeof err), CALIB_LOAD_OK);
    assert_int_equal(b.nkeys, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(b.key[i].name, a.key[i].name);
        assert_int_equal(b.key[i].used, a.key[i].used);
        assert_int_equal(b.key[i].flags, a.key[i].flags);
        for (size_t j = 0; j <= c.values; j++) {
            const seg_slot *x = &a.key[i].slot[j], *y = &b.key[i].slot[j];
            if (j < c.values && j >= a.key[i].used)
                continue;
            assert_string_equal(x->name, y->name);
            assert_int_equal(x->gen, y->gen);
            assert_int_equal(x->count, y->count);
            assert_int_equal(x->flagged, y->flagged);
            assert_true(x->log_e_flag == y->log_e_flag || (isnan(x->log_e_flag) && isnan(y->log_e_flag)));
            assert_true(seg_log_e(x) == seg_log_e(y));
            assert_int_equal(x->resid.n, y->resid.n);
            assert_true(calib_accum_mean(&x->score[1][0]) == calib_accum_mean(&y->score[1][0]) ||
                        (isnan(calib_accum_mean(&x->score[1][0])) &&
                         isnan(calib_accum_mean(&y->score[1][0]))));
            assert_int_equal(x->top[1].n, y->top[1].n);
        }
    }
    /* the codes of waiting predictions route alike, and the sketch goes on
     * alike: a new value evicts the same slot in both */
    for (int i = 0; i < 4; i++)
        for (size_t k = 0; k < 2; k++)
            assert_ptr_equal(seg_route(&b, k, codes[i][k]) - b.key[k].slot,
                             seg_route(&a, k, codes[i][k]) - a.key[k].slot);
    assert_true(predict1(&a, "country", "PT") == predict1(&b, "country", "PT"));
    seg_free(&b);

    /* other values: left as it was */
    seg_cfg c2 = cfg_of(2, 4);
    assert_int_equal(seg_init(&b, &c2, NULL), CALIB_OK);
    assert_int_equal(round_trip(&a, &b, err, sizeof err), CALIB_LOAD_OTHER);
    assert_int_equal(b.nkeys, 0);
    seg_free(&b);
    /* fewer keys than saved: other settings too */
    seg_cfg c3 = cfg_of(1, 3);
    assert_int_equal(seg_init(&b, &c3, NULL), CALIB_OK);
    assert_int_equal(round_trip(&a, &b, err, sizeof err), CALIB_LOAD_OTHER);
    seg_free(&b);
    /* no room: refused, as it was */
    calib_budget tight;
    calib_budget_init(&tight, seg_key_bytes(&c), NULL);
    assert_int_equal(seg_init(&b, &c, &tight), CALIB_OK);
    assert_int_equal(round_trip(&a, &b, err, sizeof err), CALIB_LOAD_NO_ROOM);
    assert_int_equal(b.nkeys, 0);
    assert_int_equal(tight.used, 0);
    seg_free(&b);
    seg_free(&a);
}

/* A saved table whose slot holds a value twice, or a control character,
 * fails with a reason and leaves the table as it was. */
static void test_load_rejects(void **state)
{
    (void)state;
    seg_table a, b;
    seg_cfg c = cfg_of(1, 3);
    assert_int_equal(seg_init(&a, &c, NULL), CALIB_OK);
    (void)predict1(&a, "k", "x");
    (void)predict1(&a, "k", "y");
    memcpy(a.key[0].slot[1].name, "x", 2); /* a value twice */
    char err[200] = "";
    assert_int_equal(seg_init(&b, &c, NULL), CALIB_OK);
    assert_int_equal(round_trip(&a, &b, err, sizeof err), CALIB_LOAD_FAILED);
    assert_non_null(strstr(err, "twice"));
    assert_int_equal(b.nkeys, 0);
    memcpy(a.key[0].slot[1].name, "\x01", 2);
    err[0] = 0;
    assert_int_equal(round_trip(&a, &b, err, sizeof err), CALIB_LOAD_FAILED);
    assert_non_null(strstr(err, "segment name"));
    seg_free(&b);
    seg_free(&a);
}

/* The sketch evicts the unflagged slot of least count, the first to reach
 * that count among equals: checked against a scan of every slot, over a
 * long random stream with flags raised on the way, and after a restore
 * (the order is built again from the counts). */
static void check_eviction(seg_table *t, uint64_t *rng, int *evicted_checked)
{
    seg_key *k = &t->key[0];
    size_t values = t->cfg.values;
    char v[32];
    /* a value: mostly a few heavy ones, sometimes a new one */
    uint64_t x = (*rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 33;
    snprintf(v, sizeof v, "v%llu", (unsigned long long)(x % 4 ? x % 12 : x % 100000));
    long want = -1;
    int tracked = 0;
    for (size_t j = 0; j < k->used; j++)
        tracked |= strcmp(k->slot[j].name, v) == 0;
    if (!tracked && k->used == values)
        for (size_t j = 0; j < values; j++)
            if (!k->slot[j].flagged && (want < 0 || k->slot[j].count < k->slot[want].count))
                want = (long)j;
    uint64_t least = want >= 0 ? k->slot[want].count : 0;
    (void)predict1(t, "key", v);
    if (want < 0)
        return;
    /* the value took a slot of least count, which counts least + 1 now */
    long got = -1;
    for (size_t j = 0; j < values; j++)
        if (strcmp(k->slot[j].name, v) == 0)
            got = (long)j;
    assert_true(got >= 0);
    assert_false(k->slot[got].flagged);
    assert_int_equal(k->slot[got].count, least + 1);
    (*evicted_checked)++;
}

static void test_least_counted(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(1, 16);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    uint64_t rng = 7;
    int checked = 0;
    for (int i = 0; i < 20000; i++) {
        check_eviction(&t, &rng, &checked);
        if (i == 5000 || i == 9000) {
            /* two slots flagged (their bets won): never evicted after */
            seg_key *k = &t.key[0];
            size_t j = (size_t)i % 7;
            for (int b = 0; b < SEG_BETS; b++)
                k->slot[j].lw[0][b] = 50;
            k->dirty = 1;
            assert_true(seg_decide(&t, 1, NULL, NULL) >= 1);
            assert_true(k->slot[j].flagged);
        }
        if (i == 12000) {
            /* a restore: the order comes back from the counts */
            seg_table u;
            char err[200] = "";
            assert_int_equal(seg_init(&u, &c, NULL), CALIB_OK);
            assert_int_equal(round_trip(&t, &u, err, sizeof err), CALIB_LOAD_OK);
            seg_free(&t);
            t = u;
        }
    }
    assert_true(checked > 3000);
    size_t flagged = 0;
    for (size_t j = 0; j < c.values; j++)
        flagged += (size_t)t.key[0].slot[j].flagged;
    assert_int_equal(flagged, 2);
    seg_free(&t);
}

/* What a key costs is what calibd.conf(5), MEMORY, says: (values + 1)
 * (480 + 64B), 4 per hash bucket and 36 per value; 94.2 KiB at the
 * defaults (64 values, 15 bins). */
static void test_key_bytes_documented(void **state)
{
    (void)state;
    seg_cfg c = cfg_of(1, 64);
    assert_int_equal(seg_key_bytes(&c), 65 * (480 + 64 * 15) + 128 * 4 + 64 * 36);
    c.bins = 0;
    c.values = 4096;
    assert_int_equal(seg_key_bytes(&c), 4097 * 480 + 8192 * 4 + 4096 * 36);
}

/* seg_rank's worst max, for any max: the first max of every slot sorted
 * by gap_lo, then pairs, then slot (as the test computes them here). */
typedef struct expect_rank {
    double lo;
    uint64_t pairs;
    size_t slot;
} expect_rank;

static int expect_order(const void *a, const void *b)
{
    const expect_rank *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? 1 : -1;
    if (x->pairs != y->pairs)
        return x->pairs < y->pairs ? 1 : -1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static void test_rank(void **state)
{
    (void)state;
    seg_table t;
    seg_cfg c = cfg_of(1, 200);
    assert_int_equal(seg_init(&t, &c, NULL), CALIB_OK);
    calib_rng r;
    calib_rng_seed(&r, 11);
    double codes[200];
    for (int v = 0; v < 200; v++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", v);
        codes[v] = predict1(&t, "key", name);
    }
    /* pairs of various numbers and biases: many ties at gap_lo 0 */
    for (int i = 0; i < 20000; i++) {
        int v = (int)(calib_rng_uniform(&r) * 200);
        seg_obs o = draw(&r, v % 5 == 0 ? 0.2 * v / 200.0 : 0);
        seg_observe(&t, (double[]){codes[v]}, &o);
    }
    expect_rank want[200];
    for (size_t j = 0; j < 200; j++) {
        seg_figures f;
        seg_figures_of(&t.key[0].slot[j], &f);
        want[j] = (expect_rank){f.gap_lo, f.pairs, j};
    }
    qsort(want, 200, sizeof *want, expect_order);
    assert_true(want[0].lo > 0 && want[199].lo == 0);
    size_t idx[300], maxes[] = {1, 2, 7, 40, 199, 200, 300};
    for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++) {
        size_t n = seg_rank(&t, 0, idx, maxes[m]);
        assert_int_equal(n, maxes[m] < 200 ? maxes[m] : 200);
        for (size_t j = 0; j < n; j++)
            assert_int_equal(idx[j], want[j].slot);
    }
    assert_int_equal(seg_rank(&t, 0, idx, 0), 0);
    assert_int_equal(seg_rank(&t, 1, idx, 5), 0);
    seg_free(&t);
}

/* Two shards' tables: values match by name, figures and counts add, a
 * value past dst's room goes to its "other", flags stay, and a code src
 * issued routes in dst to the same value. */
static void test_merge(void **state)
{
    (void)state;
    seg_table a, b;
    seg_cfg c = cfg_of(2, 3);
    assert_int_equal(seg_init(&a, &c, NULL), CALIB_OK);
    assert_int_equal(seg_init(&b, &c, NULL), CALIB_OK);
    double ca = predict1(&a, "country", "DE");
    (void)predict1(&a, "country", "FR");
    (void)predict1(&a, "country", "IT");
    /* b: another key first, then the country key with DE, ES */
    (void)predict1(&b, "device", "ios");
    double codes[SEG_MAX_KEYS];
    seg_kv kv[2] = {{"country", "ES", 7, 2}, {"device", "web", 6, 3}};
    seg_predict(&b, kv, 2, codes, 0);
    kv[0].val = "DE";
    double cb[SEG_MAX_KEYS];
    seg_predict(&b, kv, 1, cb, 0);
    seg_obs o = obs_of(0.9, 1);
    seg_observe(&a, (double[]){ca, 0}, &o);
    seg_observe(&b, cb, &o);
    seg_observe(&b, cb, &o);
    b.key[1].slot[1].flagged = 1; /* DE flagged in b */
    b.key[1].slot[1].log_e_flag = 9;
    seg_map map;
    assert_int_equal(seg_merge(&a, &b, &map), CALIB_OK);
    assert_int_equal(a.nkeys, 2);
    assert_string_equal(a.key[1].name, "device");
    assert_int_equal(map.key[0], 1);
    assert_int_equal(map.key[1], 0);
    seg_slot *de = seg_route(&a, 0, ca);
    assert_string_equal(de->name, "DE");
    assert_int_equal(de->count, 2);
    assert_int_equal(de->score[1][0].n, 3);
    assert_true(de->flagged);
    assert_true(de->log_e_flag == 9);
    assert_int_equal(a.key[0].flags, 1);
    /* ES found no room: its figures in "other" */
    assert_int_equal(seg_other(&a, 0)->count, 1);
    /* b's code for DE routes to a's DE */
    double to[SEG_MAX_KEYS];
    seg_merge_codes(&a, &b, &map, cb, to);
    assert_ptr_equal(seg_route(&a, 0, to[0]), de);
    assert_true(to[1] == 0);
    seg_map_free(&map);
    /* other settings: refused, a unchanged */
    seg_cfg c2 = cfg_of(2, 4);
    seg_table x;
    assert_int_equal(seg_init(&x, &c2, NULL), CALIB_OK);
    assert_int_equal(seg_merge(&a, &x, NULL), CALIB_EINVAL);
    seg_free(&x);
    seg_free(&a);
    seg_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_cfg),
        cmocka_unit_test(test_sketch_and_codes),
        cmocka_unit_test(test_least_counted),
        cmocka_unit_test(test_key_bytes_documented),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_arithmetic),
        cmocka_unit_test(test_power),
        cmocka_unit_test(test_null_level),
        cmocka_unit_test(test_flagged_kept),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_load_rejects),
        cmocka_unit_test(test_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
