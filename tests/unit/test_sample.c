/* test_sample.c — seeded RNG, recent ring, uniform reservoir. */
#include "unit.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"

static void rng_is_seeded(void **state)
{
    calib_rng a, b;
    calib_rng_seed(&a, 99);
    calib_rng_seed(&b, 99);
    for (int i = 0; i < 100; i++)
        assert_true(calib_rng_next(&a) == calib_rng_next(&b));
    calib_rng_seed(&b, 100);
    assert_true(calib_rng_next(&a) != calib_rng_next(&b));
    calib_accum u, z;
    calib_accum_init(&u);
    calib_accum_init(&z);
    for (int i = 0; i < 200000; i++) {
        double x = calib_rng_uniform(&a);
        assert_true(x > 0 && x < 1);
        calib_accum_add(&u, x);
        calib_accum_add(&z, calib_rng_normal(&a));
    }
    /* 5 standard errors: deterministic for this seed, and loose enough */
    assert_close(calib_accum_mean(&u), 0.5, 5 * sqrt(1.0 / 12 / 200000));
    assert_close(calib_accum_var(&u), 1.0 / 12, 0.002);
    assert_close(calib_accum_mean(&z), 0, 5 / sqrt(200000));
    assert_close(calib_accum_var(&z), 1, 0.02);
}

/* Frequencies follow p; a class of probability 0 is never drawn, even when
 * the p given sum to a little less than 1. */
static void categorical_draws(void **state)
{
    calib_rng r;
    calib_rng_seed(&r, 17);
    const double p[4] = {0.5, 0, 0.3, 0.2 - 1e-9};
    long hits[4] = {0};
    enum { N = 200000 };
    for (int i = 0; i < N; i++)
        hits[calib_rng_categorical(&r, p, 4)]++;
    assert_int_equal(hits[1], 0);
    for (int j = 0; j < 4; j++) /* 5 standard errors */
        assert_close((double)hits[j] / N, p[j], 5 * sqrt(p[j] * (1 - p[j]) / N) + 1e-12);
    const double last_zero[3] = {0.25, 0.25, 0};
    for (int i = 0; i < 1000; i++) /* u above 0.5: the last class with p > 0 */
        assert_true(calib_rng_categorical(&r, last_zero, 3) < 2);
}

static void ring_keeps_most_recent(void **state)
{
    calib_ring r;
    assert_int_equal(calib_ring_init(&r, 2, 3, NULL), CALIB_OK);
    assert_int_equal(calib_ring_len(&r), 0);
    assert_int_equal(calib_ring_cap(&r), 3);
    for (int i = 0; i < 5; i++) {
        double x[2] = {i, -i};
        calib_ring_push(&r, x, i % 2, 100 + i);
        assert_int_equal(calib_ring_len(&r), i < 3 ? i + 1 : 3);
        calib_record newest = calib_ring_get(&r, calib_ring_len(&r) - 1);
        assert_close(newest.x[0], i, 0);
    }
    for (int i = 0; i < 3; i++) {
        calib_record rec = calib_ring_get(&r, (size_t)i);
        assert_close(rec.x[0], i + 2, 0);
        assert_close(rec.x[1], -(i + 2), 0);
        assert_close(rec.y, (i + 2) % 2, 0);
        assert_close(rec.t, 102 + i, 0);
    }
    assert_int_equal(r.total, 5);
    calib_ring_free(&r);
    assert_int_equal(calib_ring_init(&r, 0, 3, NULL), CALIB_EINVAL);
    assert_int_equal(calib_ring_init(&r, 1, 0, NULL), CALIB_EINVAL);
    assert_int_equal(calib_ring_init(&r, SIZE_MAX / 4, 2, NULL), CALIB_EINVAL);
}

/* Inclusion frequencies of a reservoir of `cap` over a stream of n items,
 * over T seeded trials, are uniform: chi-square against T * held / n per
 * item, below the 0.1% critical value for n - 1 degrees of freedom. With a
 * budget of `limit` bytes (0: none) the reservoir stops growing where the
 * budget refuses, and samples uniformly that many. */
static double inclusion_chi2(size_t n, int trials, size_t cap, size_t limit, size_t held)
{
    long *hits = calloc(n, sizeof *hits);
    assert_non_null(hits);
    for (int t = 0; t < trials; t++) {
        calib_reservoir r;
        calib_budget b;
        calib_budget_init(&b, limit ? limit : SIZE_MAX, NULL);
        assert_int_equal(calib_reservoir_init(&r, 1, cap, (uint64_t)t + 1, &b), CALIB_OK);
        for (size_t i = 0; i < n; i++) {
            double x = (double)i;
            calib_reservoir_offer(&r, &x, 0, 0);
        }
        assert_int_equal(r.s.len, held);
        assert_int_equal(r.seen, n);
        assert_int_equal(b.used, calib_store_held(&r.s));
        for (size_t j = 0; j < held; j++)
            hits[(size_t)calib_store_get(&r.s, j).x[0]]++;
        calib_reservoir_free(&r);
        assert_int_equal(b.used, 0);
    }
    double expect = (double)trials * (double)held / (double)n, chi2 = 0;
    for (size_t i = 0; i < n; i++)
        chi2 += (hits[i] - expect) * (hits[i] - expect) / expect;
    free(hits);
    return chi2;
}

static void reservoir_uniform(void **state)
{
    double c1 = inclusion_chi2(100, 20000, 10, 0, 10);  /* dof 99: critical 148.2 */
    double c2 = inclusion_chi2(2000, 10000, 10, 0, 10); /* dof 1999: critical 2200.1 */
    /* grown from CALIB_STORE_FIRST to 40 records on the way */
    double c3 = inclusion_chi2(100, 20000, 40, 0, 40);
    print_message("chi2 %.1f (99 dof), %.1f (1999 dof), %.1f (grown)\n", c1, c2, c3);
    assert_true(c1 < 148.2);
    assert_true(c2 < 2200.1);
    assert_true(c3 < 148.2);
}

/* A budget of 20 records' bytes: the first 16 are allocated, the growth to
 * 32 is refused, and the reservoir samples 16 uniformly. */
static void reservoir_stopped_by_budget_is_uniform(void **state)
{
    double c = inclusion_chi2(100, 20000, 40, 20 * 3 * sizeof(double), CALIB_STORE_FIRST);
    print_message("chi2 %.1f (99 dof, stopped at %d)\n", c, CALIB_STORE_FIRST);
    assert_true(c < 148.2);
}

/* A ring grows by doubling as it fills, holds what its records need and
 * not its capacity; where the budget refuses a growth, it wraps there and
 * keeps the newest records. */
static void ring_grows_then_stops(void **state)
{
    calib_ring r;
    calib_budget b;
    calib_budget_init(&b, SIZE_MAX, NULL);
    assert_int_equal(calib_ring_init(&r, 1, 100, &b), CALIB_OK);
    assert_int_equal(b.used, CALIB_STORE_FIRST * 3 * sizeof(double));
    for (int i = 0; i < 250; i++) {
        double x = i;
        calib_ring_push(&r, &x, 0, i);
        assert_true(r.s.alloc >= calib_ring_len(&r) && r.s.alloc <= 100);
        assert_int_equal(b.used, calib_store_held(&r.s));
    }
    assert_int_equal(calib_ring_cap(&r), 100);
    assert_int_equal(calib_ring_len(&r), 100);
    for (size_t i = 0; i < 100; i++)
        assert_close(calib_ring_get(&r, i).x[0], 150 + (double)i, 0);
    calib_ring_free(&r);
    assert_int_equal(b.used, 0);

    /* room for 40 records: 16, then 32, then the growth to 64 is refused */
    calib_budget parent, child;
    calib_budget_init(&parent, 40 * 3 * sizeof(double), NULL);
    calib_budget_init(&child, SIZE_MAX, &parent);
    assert_int_equal(calib_ring_init(&r, 1, 100, &child), CALIB_OK);
    for (int i = 0; i < 250; i++) {
        double x = i;
        calib_ring_push(&r, &x, 0, i);
    }
    assert_int_equal(calib_ring_cap(&r), 32);
    assert_int_equal(calib_ring_len(&r), 32);
    assert_int_equal(r.total, 250);
    for (size_t i = 0; i < 32; i++)
        assert_close(calib_ring_get(&r, i).x[0], 218 + (double)i, 0);
    assert_int_equal(parent.refused, 1);
    assert_int_equal(child.refused, 1); /* counted where asked too */
    assert_int_equal(parent.used, 32 * 3 * sizeof(double));
    assert_int_equal(child.used, parent.used);
    calib_ring_free(&r);
    assert_int_equal(parent.used, 0);
    assert_int_equal(child.used, 0);
    /* a budget too small for the first records: nothing allocated */
    calib_budget_init(&b, 8, NULL);
    assert_int_equal(calib_ring_init(&r, 1, 100, &b), CALIB_ENOMEM);
    assert_int_equal(b.used, 0);
}

/* calib_budget_grow moves a block to a larger one with its bytes, taking
 * the difference; refused or past the limit, the block and the budget
 * stay as they were. */
static void budget_grow_moves_and_counts(void **state)
{
    (void)state;
    calib_budget parent, b;
    calib_budget_init(&parent, 100, NULL);
    calib_budget_init(&b, SIZE_MAX, &parent);
    assert_int_equal(calib_budget_take(&b, 10), CALIB_OK);
    unsigned char *p = malloc(10);
    assert_non_null(p);
    for (int i = 0; i < 10; i++)
        p[i] = (unsigned char)(i * 7 + 1);
    unsigned char *q = calib_budget_grow(&b, p, 10, 60);
    assert_non_null(q);
    for (int i = 0; i < 10; i++)
        assert_int_equal(q[i], i * 7 + 1);
    assert_int_equal(parent.used, 60);
    assert_int_equal(b.used, 60);
    /* 60 + 41 > 100: refused, q untouched and still ours */
    assert_null(calib_budget_grow(&b, q, 60, 101));
    assert_int_equal(parent.used, 60);
    assert_int_equal(parent.refused, 1);
    assert_int_equal(q[9], 9 * 7 + 1);
    /* a shrink is not a growth */
    assert_null(calib_budget_grow(&b, q, 60, 59));
    assert_int_equal(parent.used, 60);
    /* from nothing */
    unsigned char *r = calib_budget_grow(&b, NULL, 0, 40);
    assert_non_null(r);
    assert_int_equal(parent.used, 100);
    free(q);
    free(r);
}

/* calib_ring_slot is where calib_ring_get reads, filling and wrapped;
 * calib_store_limit lowers a store's capacity and gives back what is
 * allocated past it, refusing a capacity below its records or above its
 * own. */
static void ring_slot_and_store_limit(void **state)
{
    calib_ring r;
    calib_budget b;
    calib_budget_init(&b, SIZE_MAX, NULL);
    assert_int_equal(calib_ring_init(&r, 1, 5, &b), CALIB_OK);
    for (int n = 0; n < 13; n++) {
        for (size_t i = 0; i < calib_ring_len(&r); i++)
            assert_ptr_equal(calib_ring_get(&r, i).x, r.s.data + calib_ring_slot(&r, i) * 3);
        double x = n;
        calib_ring_push(&r, &x, 0, n);
    }
    assert_close(r.s.data[calib_ring_slot(&r, 4) * 3], 12, 0); /* the newest */
    calib_ring_free(&r);

    calib_store s;
    assert_int_equal(calib_store_init(&s, 1, 100, &b), CALIB_OK);
    assert_int_equal(calib_store_reserve(&s, 40), CALIB_OK);
    assert_int_equal(s.alloc, 40);
    s.len = 20;
    assert_int_equal(calib_store_limit(&s, 19), CALIB_EINVAL);
    assert_int_equal(calib_store_limit(&s, 101), CALIB_EINVAL);
    assert_int_equal(calib_store_limit(&s, 25), CALIB_OK);
    assert_int_equal(s.cap, 25);
    assert_int_equal(s.alloc, 25);
    assert_int_equal(b.used, calib_store_held(&s));
    assert_int_equal(calib_store_reserve(&s, 26), CALIB_EINVAL);
    assert_int_equal(calib_store_limit(&s, 30), CALIB_EINVAL);
    calib_store_free(&s);
    assert_int_equal(b.used, 0);
}

static void reservoir_fills_then_skips(void **state)
{
    calib_reservoir r;
    assert_int_equal(calib_reservoir_init(&r, 1, 4, 5, NULL), CALIB_OK);
    long stored = 0;
    for (int i = 0; i < 4; i++) {
        double x = i;
        assert_int_equal(calib_reservoir_len(&r), (size_t)i);
        assert_int_equal(calib_reservoir_offer(&r, &x, 1, 2), i);
    }
    assert_int_equal(calib_reservoir_len(&r), 4);
    for (int i = 4; i < 100000; i++) {
        double x = i;
        stored += calib_reservoir_offer(&r, &x, 1, 2) >= 0;
    }
    assert_int_equal(calib_reservoir_len(&r), 4); /* full: replaces, never grows */
    /* E[replacements] = sum_{i=5}^{N} 4/i ~= 4 ln(N/4) ~= 40 */
    assert_true(stored > 15 && stored < 80);
    /* same seed, same stream, same contents */
    calib_reservoir s;
    calib_reservoir_init(&s, 1, 4, 5, NULL);
    for (int i = 0; i < 100000; i++) {
        double x = i;
        calib_reservoir_offer(&s, &x, 1, 2);
    }
    assert_memory_equal(r.s.data, s.s.data, 4 * 3 * sizeof(double));
    calib_reservoir_free(&r);
    calib_reservoir_free(&s);
}

/* A store of cap records of width doubles holds two more per record. */
static void bytes_of_store(void **state)
{
    assert_int_equal(calib_store_bytes(10, 1000), 1000 * 12 * sizeof(double));
    assert_int_equal(calib_store_bytes(0, 10), 0);
    assert_int_equal(calib_store_bytes(10, 0), 0);
    assert_int_equal(calib_store_bytes(SIZE_MAX / 2, 4), 0);
}

/* Two reservoirs of 300 and 100 records offered (as shards of one stream
 * of 400), capacity 50, merged 4000 times: each record of either stream
 * is in the merged sample with probability 50/400, so 3/4 of the merged
 * records come from the first stream; the merged reservoir has seen 400
 * and goes on sampling (its next replacement comes). */
static void reservoir_merge_is_weighted(void **state)
{
    double from_a = 0, hits_first = 0;
    const int reps = 4000;
    for (int rep = 0; rep < reps; rep++) {
        calib_reservoir a, b;
        assert_int_equal(calib_reservoir_init(&a, 1, 50, 1000 + rep, NULL), CALIB_OK);
        assert_int_equal(calib_reservoir_init(&b, 1, 50, 9000 + rep, NULL), CALIB_OK);
        for (int i = 0; i < 300; i++) {
            double x = i;
            calib_reservoir_offer(&a, &x, 0, i);
        }
        for (int i = 0; i < 100; i++) {
            double x = 1000 + i;
            calib_reservoir_offer(&b, &x, 1, i);
        }
        assert_int_equal(calib_reservoir_merge(&a, &b), CALIB_OK);
        assert_int_equal(calib_reservoir_len(&a), 50);
        assert_int_equal(a.seen, 400);
        for (size_t i = 0; i < 50; i++) {
            calib_record r = calib_store_get(&a.s, i);
            from_a += r.y == 0;
            hits_first += r.x[0] == 0; /* record 0 of the first stream */
        }
        /* it goes on: within 400 more records at least one replacement */
        int replaced = 0;
        for (int i = 0; i < 400; i++) {
            double x = 5000;
            replaced |= calib_reservoir_offer(&a, &x, 2, i) >= 0;
        }
        assert_true(replaced);
        calib_reservoir_free(&a);
        calib_reservoir_free(&b);
    }
    double share = from_a / (50.0 * reps);
    /* sd of the share over 200000 draws (not independent within a rep):
     * well under 0.005 */
    assert_true(fabs(share - 0.75) < 0.01);
    /* one given record: p = 50/400 = 0.125, sd sqrt(p(1-p)/4000) = 0.0052 */
    assert_true(fabs(hits_first / reps - 0.125) < 0.025);
    calib_reservoir a, b;
    assert_int_equal(calib_reservoir_init(&a, 1, 5, 1, NULL), CALIB_OK);
    assert_int_equal(calib_reservoir_init(&b, 2, 5, 1, NULL), CALIB_OK);
    assert_int_equal(calib_reservoir_merge(&a, &b), CALIB_EINVAL);
    calib_reservoir_free(&a);
    calib_reservoir_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bytes_of_store),
        cmocka_unit_test(rng_is_seeded),
        cmocka_unit_test(categorical_draws),
        cmocka_unit_test(ring_keeps_most_recent),
        cmocka_unit_test(reservoir_uniform),
        cmocka_unit_test(reservoir_fills_then_skips),
        cmocka_unit_test(reservoir_stopped_by_budget_is_uniform),
        cmocka_unit_test(ring_grows_then_stops),
        cmocka_unit_test(ring_slot_and_store_limit),
        cmocka_unit_test(budget_grow_moves_and_counts),
        cmocka_unit_test(reservoir_merge_is_weighted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
