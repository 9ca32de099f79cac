/* test_bins.c — bin edges, plugin estimates, class-wise bins, decomposition. */
#include "unit.h"

#include <stdlib.h>

#include "calib/calib.h"

/* Every edge i/m belongs to bin i-1 (right-closed); the next double up to
 * bin i; 0 to the first bin, 1 to the last. */
static void edges_right_closed(void **state)
{
    for (uint32_t m = 1; m <= 200; m++) {
        assert_int_equal(calib_bin_index(0, m), 0);
        assert_int_equal(calib_bin_index(1, m), m - 1);
        for (uint32_t i = 1; i <= m; i++) {
            double edge = (double)i / m;
            assert_int_equal(calib_bin_index(edge, m), i - 1);
            if (i < m)
                assert_int_equal(calib_bin_index(nextafter(edge, 2), m), i);
        }
    }
    assert_int_equal(calib_bin_index(0.7, 10), 6);
    assert_int_equal(calib_bin_index(0.3, 10), 2);
    assert_int_equal(calib_bin_index(5e-324, 15), 0);
}

/* The bin settled against every edge as a double, as calib_bin_index did
 * before its fast path: the reference it must agree with everywhere. */
static uint32_t bin_by_edges(double v, uint32_t m)
{
    if (!(v > 0))
        return 0;
    if (v >= 1)
        return m - 1;
    uint32_t i = 0;
    while (i < m - 1 && v > (double)(i + 1) / m)
        i++;
    return i;
}

/* The fast path (one multiplication away from the edges) agrees with the
 * edges as doubles: a million uniform values, and every edge and the four
 * doubles around it, for bin counts up to 1000 and some large ones. */
static void fast_path_matches_edges(void **state)
{
    calib_rng r;
    calib_rng_seed(&r, 11);
    const uint32_t ms[] = {1, 2, 3, 7, 10, 15, 49, 100, 255, 1000};
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++) {
        uint32_t m = ms[a];
        for (int t = 0; t < 100000; t++) {
            double v = calib_rng_uniform(&r);
            assert_int_equal(calib_bin_index(v, m), bin_by_edges(v, m));
        }
        for (uint32_t i = 0; i <= m; i++) {
            double v = (double)i / m;
            for (int s = 0; s < 3; s++, v = nextafter(v, -1)) {
                assert_int_equal(calib_bin_index(v, m), bin_by_edges(v, m));
            }
            v = (double)i / m;
            for (int s = 0; s < 3; s++, v = nextafter(v, 2))
                assert_int_equal(calib_bin_index(v, m), bin_by_edges(v, m));
        }
    }
    /* a large count: the edges as doubles, near and far */
    for (int t = 0; t < 100000; t++) {
        double v = calib_rng_uniform(&r);
        assert_int_equal(calib_bin_index(v, 1u << 20), (uint32_t)ceil(v * (1u << 20)) - 1);
    }
}

/* (0.9,1) (0.9,0) (0.6,1) (0.2,0) in 5 bins: gaps 0.4 (w 1/2), 0.4 (1/4),
 * 0.2 (1/4; 0.2 sits on an edge, so bin 1). */
static void plugin_by_hand(void **state)
{
    calib_bins b;
    assert_int_equal(calib_bins_init(&b, 5), CALIB_OK);
    assert_nan(calib_bins_ece(&b));
    calib_bins_add(&b, 0.9, 1);
    calib_bins_add(&b, 0.9, 0);
    calib_bins_add(&b, 0.6, 1);
    calib_bins_add(&b, 0.2, 0);
    assert_int_equal(b.count[0], 1);
    assert_int_equal(b.count[2], 1);
    assert_int_equal(b.count[4], 2);
    assert_close(calib_bins_ece(&b), 0.2 + 0.1 + 0.05, 1e-15);
    assert_close(calib_bins_tce2(&b), sqrt(0.08 + 0.04 + 0.01), 1e-15);
    assert_close(calib_bins_plugin(&b, 3), 0.5 * 0.064 + 0.25 * 0.064 + 0.25 * 0.008,
                 1e-15);
    assert_close(calib_bins_accuracy(&b), 0.5, 0);
    calib_bins_reset(&b);
    assert_int_equal(b.n, 0);
    calib_bins_add(&b, 1, 1); /* n = 1, perfectly calibrated */
    assert_close(calib_bins_ece(&b), 0, 0);
    calib_bins_free(&b);
    assert_int_equal(calib_bins_init(&b, 0), CALIB_EINVAL);
}

static void merge_equals_sequential(void **state)
{
    calib_bins all, a, c;
    calib_cwbins cwall, cwa, cwc;
    calib_rng r;
    calib_rng_seed(&r, 3);
    assert_int_equal(calib_bins_init(&all, 15) | calib_bins_init(&a, 15) |
                         calib_bins_init(&c, 15),
                     0);
    assert_int_equal(calib_cwbins_init(&cwall, 3, 10) | calib_cwbins_init(&cwa, 3, 10) |
                         calib_cwbins_init(&cwc, 3, 10),
                     0);
    for (int i = 0; i < 5000; i++) {
        double u = calib_rng_uniform(&r), v = calib_rng_uniform(&r);
        double p[3] = {u * v, u * (1 - v), 1 - u};
        size_t y = calib_rng_next(&r) % 3;
        size_t top = calib_argmax(p, 3);
        calib_bins_add(&all, p[top], top == y);
        calib_bins_add(i % 3 ? &a : &c, p[top], top == y);
        calib_cwbins_add(&cwall, p, y);
        calib_cwbins_add(i % 3 ? &cwa : &cwc, p, y);
    }
    assert_int_equal(calib_bins_merge(&a, &c), CALIB_OK);
    assert_int_equal(calib_cwbins_merge(&cwa, &cwc), CALIB_OK);
    assert_int_equal(a.n, all.n);
    for (int i = 0; i < 15; i++) {
        assert_int_equal(a.count[i], all.count[i]);
        assert_int_equal(a.correct[i], all.correct[i]);
    }
    assert_close(calib_bins_ece(&a), calib_bins_ece(&all), 1e-14);
    assert_close(calib_cwbins_cwce2(&cwa), calib_cwbins_cwce2(&cwall), 1e-14);
    calib_bins other;
    calib_bins_init(&other, 16);
    assert_int_equal(calib_bins_merge(&a, &other), CALIB_EINVAL);
    calib_bins_free(&other);
    calib_bins_free(&all);
    calib_bins_free(&a);
    calib_bins_free(&c);
    calib_cwbins_free(&cwall);
    calib_cwbins_free(&cwa);
    calib_cwbins_free(&cwc);
}

/* K = 2, M = 2: ([0.7,0.3], y 0) and ([0.4,0.6], y 1).
 * class 0: bin (.5,1] {.7 hit} gap .3; bin [0,.5] {.4 miss} gap .4
 * class 1: bin [0,.5] {.3 miss} gap .3; bin (.5,1] {.6 hit} gap .4
 * ybar = 1/2 for both classes; every bin's obar is 0 or 1. */
static void classwise_by_hand(void **state)
{
    calib_cwbins b;
    calib_brier_decomp d;
    assert_int_equal(calib_cwbins_init(&b, 2, 2), CALIB_OK);
    assert_int_equal(calib_cwbins_brier_decomp(&b, &d), CALIB_EEMPTY);
    double p1[2] = {0.7, 0.3}, p2[2] = {0.4, 0.6};
    calib_cwbins_add(&b, p1, 0);
    calib_cwbins_add(&b, p2, 1);
    double plug = 0.5 * (0.09 + 0.16 + 0.09 + 0.16);
    assert_close(calib_cwbins_plugin(&b, 2), plug, 1e-15);
    assert_close(calib_cwbins_cwce2(&b), sqrt(plug), 1e-15);
    assert_int_equal(calib_cwbins_brier_decomp(&b, &d), CALIB_OK);
    assert_close(d.reliability, plug, 1e-15);
    assert_close(d.resolution, 4 * 0.5 * 0.25, 1e-15);
    assert_close(d.uncertainty, 0.25 + 0.25, 1e-15);
    /* the mean Brier is (.18 + .32) / 2 = REL - RES + UNC here */
    assert_close(d.reliability - d.resolution + d.uncertainty, 0.25, 1e-15);
    /* hits where the outcome is, one per sample; an outcome out of range
     * counts the sample in every class's bins and hits none */
    assert_int_equal(b.hits[0 * 2 + 1] + b.hits[1 * 2 + 1], 2);
    calib_cwbins_add(&b, p1, 2);
    calib_cwbins_add(&b, p1, SIZE_MAX);
    uint64_t hits = 0, count = 0;
    for (int i = 0; i < 4; i++)
        hits += b.hits[i], count += b.count[i];
    assert_int_equal(hits, 2);
    assert_int_equal(count, 2 * 4);
    calib_cwbins_free(&b);
}

/* When each bin holds one distinct forecast, REL - RES + UNC is the mean
 * Brier score exactly (Murphy 1973). */
static void decomposition_identity(void **state)
{
    calib_cwbins b;
    calib_rng r;
    calib_rng_seed(&r, 11);
    calib_accum brier;
    calib_accum_init(&brier);
    assert_int_equal(calib_cwbins_init(&b, 2, 2), CALIB_OK);
    for (int i = 0; i < 1000; i++) {
        double p[2];
        p[1] = calib_rng_uniform(&r) < 0.5 ? 0.125 : 0.875;
        p[0] = 1 - p[1];
        size_t y = calib_rng_uniform(&r) < (p[1] == 0.125 ? 0.3 : 0.6);
        calib_score s;
        calib_score_probs(p, 2, y, &s);
        calib_accum_add(&brier, s.brier);
        calib_cwbins_add(&b, p, y);
    }
    calib_brier_decomp d;
    calib_cwbins_brier_decomp(&b, &d);
    assert_close(d.reliability - d.resolution + d.uncertainty,
                 calib_accum_mean(&brier), 1e-13);
    calib_cwbins_free(&b);
}

static void classwise_k1000(void **state)
{
    enum { K = 1000 };
    calib_cwbins b;
    double *p = calloc(K, sizeof *p);
    assert_non_null(p);
    for (int i = 0; i < K; i++)
        p[i] = 1.0 / K;
    assert_int_equal(calib_cwbins_init(&b, K, 15), CALIB_OK);
    calib_cwbins_add(&b, p, 999);
    /* one sample: class 999 has gap 0.999, the others 0.001 */
    assert_close(calib_cwbins_plugin(&b, 2), 0.999 * 0.999 + 999 * 1e-6, 1e-13);
    calib_cwbins_free(&b);
    free(p);
}

/* What init allocates, as the memory bound of calibd(8) counts it. */
static void bytes_of_bins(void **state)
{
    assert_int_equal(calib_bins_bytes(15), 15 * (8 + sizeof(calib_ksum) + 8));
    assert_int_equal(calib_bins_bytes(0), 0);
    assert_int_equal(calib_cwbins_bytes(10, 15), 150 * (8 + sizeof(calib_ksum) + 8));
    assert_int_equal(calib_cwbins_bytes(0, 15), 0);
    assert_int_equal(calib_cwbins_bytes(UINT32_MAX, UINT32_MAX), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bytes_of_bins),
        cmocka_unit_test(edges_right_closed),
        cmocka_unit_test(fast_path_matches_edges),
        cmocka_unit_test(plugin_by_hand),
        cmocka_unit_test(merge_equals_sequential),
        cmocka_unit_test(classwise_by_hand),
        cmocka_unit_test(decomposition_identity),
        cmocka_unit_test(classwise_k1000),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
