/* test_window.c — sliding windows expire exactly what they should. */
#include "unit.h"

#include "calib/calib.h"

/* Count window, span 10 in 5 panes of 2: after sample c (0-based), it holds
 * the samples whose pane c' / 2 lies in (c / 2 - 5, c / 2]. */
static void count_window_expiry(void **state)
{
    calib_window w;
    calib_window_cfg cfg = {.kind = CALIB_WINDOW_COUNT, .span = 10, .panes = 5,
                            .nstat = 2, .top_bins = 15};
    calib_pane sum;
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_OK);
    assert_int_equal(calib_pane_init(&sum, &cfg), CALIB_OK);
    for (int c = 0; c < 57; c++) {
        calib_pane *p = calib_window_next(&w);
        assert_non_null(p);
        calib_accum_add(&p->stat[0], c);
        calib_accum_add(&p->stat[1], 1);
        calib_bins_add(&p->top[0], (c % 10) / 10.0, c % 2);
        assert_int_equal(calib_window_sum(&w, 0, &sum), CALIB_OK);
        double want = 0;
        uint64_t n = 0;
        for (int d = 0; d <= c; d++)
            if (d / 2 > c / 2 - 5) {
                want += d;
                n++;
            }
        assert_int_equal(sum.stat[0].n, n);
        assert_close(calib_ksum_value(&sum.stat[0].s1), want, 0);
        assert_int_equal(sum.top[0].n, n);
        assert_true(c < 8 || (n >= 8 && n <= 10));
    }
    calib_pane_free(&sum);
    calib_window_free(&w);
}

/* Time window, 60 s in 6 panes of 10 s. */
static void time_window_expiry(void **state)
{
    calib_window w;
    calib_window_cfg cfg = {.kind = CALIB_WINDOW_TIME, .span = 60, .panes = 6,
                            .nstat = 1};
    calib_pane sum, *p;
    int err;
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_OK);
    assert_int_equal(calib_pane_init(&sum, &cfg), CALIB_OK);
    for (int t = 0; t < 60; t += 5) { /* 12 samples in panes 0..5 */
        p = calib_window_at(&w, 1000 + t, &err);
        assert_non_null(p);
        calib_accum_add(&p->stat[0], t);
    }
    calib_window_sum(&w, 1059.9, &sum);
    assert_int_equal(sum.stat[0].n, 12);
    /* t = 1060 opens pane 106 and drops pane 100 (t 1000 and 1005) */
    p = calib_window_at(&w, 1060, &err);
    calib_accum_add(&p->stat[0], 60);
    calib_window_sum(&w, 1060, &sum);
    assert_int_equal(sum.stat[0].n, 11);
    assert_close(calib_ksum_value(&sum.stat[0].s1), 10 + 15 + 20 + 25 + 30 + 35 + 40 + 45 + 50 + 55 + 60, 0);
    /* a late sample whose pane is held lands in it; an older one is refused */
    p = calib_window_at(&w, 1012, &err);
    assert_non_null(p);
    assert_int_equal(err, CALIB_OK);
    calib_accum_add(&p->stat[0], 12);
    assert_null(calib_window_at(&w, 1009.99, &err));
    assert_int_equal(err, CALIB_ESTALE);
    assert_null(calib_window_at(&w, NAN, &err));
    assert_int_equal(err, CALIB_ENONFINITE);
    calib_window_sum(&w, 1060, &sum);
    assert_int_equal(sum.stat[0].n, 12);
    /* reading later, with no new samples, expires by the clock */
    calib_window_sum(&w, 1105, &sum); /* holds panes 105..110 */
    assert_int_equal(sum.stat[0].n, 3); /* t = 1050, 1055, 1060 */
    calib_window_sum(&w, 1200, &sum);
    assert_int_equal(sum.stat[0].n, 0);
    /* a jump far ahead reuses slots without stale data */
    p = calib_window_at(&w, 5000, &err);
    calib_accum_add(&p->stat[0], 1);
    calib_window_sum(&w, 5000, &sum);
    assert_int_equal(sum.stat[0].n, 1);
    calib_pane_free(&sum);
    calib_window_free(&w);
}

/* After a silence longer than the window, a new sample leaves no pane
 * behind the window: each one held is within P of the head (what the
 * snapshot's reader checks). Before, the slots the new pane did not take
 * kept their old indexes. */
static void silence_empties_left_panes(void **state)
{
    calib_window w;
    calib_window_cfg cfg = {.kind = CALIB_WINDOW_TIME, .span = 20, .panes = 4, .nstat = 1};
    int err;
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_OK);
    for (int t = 0; t < 20; t++)
        calib_accum_add(&calib_window_at(&w, 1000 + t, &err)->stat[0], 1);
    calib_pane *p = calib_window_at(&w, 1046, &err); /* 26 s after the last */
    assert_non_null(p);
    calib_accum_add(&p->stat[0], 1);
    int held = 0;
    for (uint32_t i = 0; i < cfg.panes; i++) {
        if (w.pane[i].index == INT64_MIN) {
            assert_int_equal(w.pane[i].stat[0].n, 0);
            continue;
        }
        assert_true(w.pane[i].index > w.head - (int64_t)cfg.panes && w.pane[i].index <= w.head);
        held++;
    }
    assert_int_equal(held, 1);
    calib_window_free(&w);
}

static void bad_configs(void **state)
{
    calib_window w;
    calib_window_cfg cfg = {.kind = CALIB_WINDOW_COUNT, .span = 10, .panes = 0};
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_EINVAL);
    cfg.panes = 3; /* 10 is not a multiple of 3 */
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_EINVAL);
    cfg.panes = 5;
    cfg.nstat = CALIB_WINDOW_MAXSTAT + 1;
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_EINVAL);
    cfg.nstat = 1;
    cfg.span = NAN;
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_EINVAL);
    cfg.span = 10;
    cfg.cw_k = 3; /* class-wise bins need a bin count */
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_EINVAL);
    cfg.cw_bins = 15;
    assert_int_equal(calib_window_init(&w, &cfg), CALIB_OK);
    calib_window_free(&w);
}

/* A window's bytes: its panes, each with its bins. */
static void bytes_of_window(void **state)
{
    calib_window_cfg c = {.kind = CALIB_WINDOW_TIME, .span = 60, .panes = 12,
                          .nstat = 2, .top_bins = 15};
    assert_int_equal(calib_window_bytes(&c), 12 * (sizeof(calib_pane) + calib_bins_bytes(15)));
    c.cw_k = 10;
    c.cw_bins = 15;
    assert_int_equal(calib_window_bytes(&c), 12 * (sizeof(calib_pane) + calib_bins_bytes(15)
                                                   + calib_cwbins_bytes(10, 15)));
    c.panes = 0;
    assert_int_equal(calib_window_bytes(&c), 0);
}

/* Two sets of top-label bins per pane: independent, summed set by set,
 * and counted in the bytes; more than CALIB_WINDOW_MAXTOP is refused. */
static void two_bin_sets(void **state)
{
    calib_window w;
    calib_window_cfg c = {.kind = CALIB_WINDOW_COUNT, .span = 30, .panes = 3,
                          .nstat = 1, .top_bins = 10, .top_sets = 2};
    assert_int_equal(calib_window_bytes(&c), 3 * (sizeof(calib_pane) + 2 * calib_bins_bytes(10)));
    assert_int_equal(calib_window_init(&w, &c), CALIB_OK);
    for (int i = 0; i < 25; i++) {
        calib_pane *p = calib_window_next(&w);
        calib_bins_add(&p->top[0], 0.95, 1);
        if (i % 5 == 0)
            calib_bins_add(&p->top[1], 0.15, 0);
    }
    calib_pane sum;
    assert_int_equal(calib_pane_init(&sum, &c), CALIB_OK);
    assert_int_equal(calib_window_sum(&w, 0, &sum), CALIB_OK);
    assert_int_equal(sum.top[0].n, 25);
    assert_int_equal(sum.top[1].n, 5);
    assert_close(calib_bins_ece(&sum.top[0]), 0.05, 1e-12);
    assert_close(calib_bins_ece(&sum.top[1]), 0.15, 1e-12); /* |0 - 0.15| */
    calib_pane_free(&sum);
    calib_window_free(&w);
    c.top_sets = CALIB_WINDOW_MAXTOP + 1;
    assert_int_equal(calib_window_init(&w, &c), CALIB_EINVAL);
    assert_int_equal(calib_window_bytes(&c), 0);
    assert_int_equal(calib_pane_init(&sum, &c), CALIB_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_bin_sets),
        cmocka_unit_test(bytes_of_window),
        cmocka_unit_test(count_window_expiry),
        cmocka_unit_test(time_window_expiry),
        cmocka_unit_test(silence_empties_left_panes),
        cmocka_unit_test(bad_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
