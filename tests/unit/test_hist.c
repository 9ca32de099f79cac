/* test_hist.c — the per-model histories of the page: bounded series that
 * grow with their points, keep the newest, and survive a save and a load;
 * a file that is no history is refused whole. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mpw.h"
#include "hist.h"

static hist_point point(double t)
{
    hist_point p = {.t = t, .n = (uint32_t)t};
    for (int k = 0; k < HIST_VALUES; k++)
        p.v[k] = (float)(t + k / 8.0);
    return p;
}

/* Past cap, the oldest go; the memory grows to cap and no further. */
static void keeps_the_newest(void **state)
{
    hist h;
    hist_init(&h, 40, 60);
    assert_int_equal(hist_find(&h, "a", 0), -1);
    long a = hist_find(&h, "a", 1), b = hist_find(&h, "b", 1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(hist_find(&h, "a", 1), 0); /* found, not made again */
    for (int i = 0; i < 10; i++)
        assert_int_equal(hist_add(&h, (size_t)a, &(hist_point){.t = i}), 0);
    assert_int_equal(h.s[a]->len, 10);
    assert_true(h.s[a]->alloc >= 10 && h.s[a]->alloc < 40); /* grows with its points */
    for (int i = 0; i < 100; i++) {
        hist_point p = point(i);
        assert_int_equal(hist_add(&h, (size_t)b, &p), 0);
    }
    assert_int_equal(h.s[b]->len, 40);
    assert_int_equal(h.s[b]->alloc, 40);
    for (size_t j = 0; j < 40; j++) {
        const hist_point *p = hist_at(&h, (size_t)b, j);
        assert_true(p->t == 60 + (double)j);
        assert_true(p->v[HIST_CAL_HI] == (float)(60 + (double)j + 5 / 8.0));
    }
    assert_int_equal(hist_add(&h, 7, &(hist_point){0}), -1); /* no such series */
    hist_free(&h);

    hist_init(&h, 0, 60); /* history off */
    a = hist_find(&h, "a", 1);
    assert_int_equal(hist_add(&h, (size_t)a, &(hist_point){0}), -1);
    hist_free(&h);
}

/* What hist_write writes, hist_read reads: the same points, NaN as NaN;
 * a smaller cap keeps the newest. */
static void round_trip(void **state)
{
    hist h;
    hist_init(&h, 50, 60);
    long a = hist_find(&h, "model-a", 1), b = hist_find(&h, "b", 1);
    for (int i = 0; i < 70; i++) {
        hist_point p = point(1000 + i);
        if (i == 65)
            p.v[HIST_RAW_LO] = NAN;
        assert_int_equal(hist_add(&h, (size_t)a, &p), 0);
    }
    hist_point one = point(5);
    assert_int_equal(hist_add(&h, (size_t)b, &one), 0);
    calib_mpw w;
    calib_mpw_init(&w);
    hist_write(&h, &w);
    assert_int_equal(calib_mpw_error(&w), 0);

    hist r;
    char err[200];
    hist_init(&r, 50, 60);
    assert_int_equal(hist_read(&r, w.sb.data, w.sb.size, err, sizeof err), 0);
    assert_int_equal(r.n, 2);
    long ra = hist_find(&r, "model-a", 0);
    assert_true(ra >= 0);
    assert_int_equal(r.s[ra]->len, 50);
    for (size_t j = 0; j < 50; j++) {
        const hist_point *x = hist_at(&h, (size_t)a, j), *y = hist_at(&r, (size_t)ra, j);
        assert_true(x->t == y->t && x->n == y->n);
        for (int k = 0; k < HIST_VALUES; k++)
            assert_true(x->v[k] == y->v[k] || (isnan(x->v[k]) && isnan(y->v[k])));
    }
    assert_nan(hist_at(&r, (size_t)ra, 45)->v[HIST_RAW_LO]); /* point 65 */
    hist_free(&r);

    hist_init(&r, 10, 60); /* a smaller cap: the newest 10 */
    assert_int_equal(hist_read(&r, w.sb.data, w.sb.size, err, sizeof err), 0);
    ra = hist_find(&r, "model-a", 0);
    assert_int_equal(r.s[ra]->len, 10);
    assert_true(hist_at(&r, (size_t)ra, 0)->t == 1060);
    hist_free(&r);
    calib_mpw_destroy(&w);
    hist_free(&h);
}

/* Anything else is refused whole, with a reason, and leaves h empty. */
static void refuses_what_is_not_a_history(void **state)
{
    hist h, r;
    char err[200];
    hist_init(&h, 50, 60);
    long a = hist_find(&h, "a", 1);
    hist_point p = point(1);
    assert_int_equal(hist_add(&h, (size_t)a, &p), 0);
    calib_mpw w;
    calib_mpw_init(&w);
    hist_write(&h, &w);
    hist_free(&h);
    char *buf = malloc(w.sb.size);
    assert_non_null(buf);

    hist_init(&r, 50, 60);
    /* truncated at every length */
    for (size_t n = 0; n < w.sb.size; n++) {
        err[0] = 0;
        assert_int_equal(hist_read(&r, w.sb.data, n, err, sizeof err), -1);
        assert_true(err[0] != 0);
        assert_int_equal(r.n, 0);
    }
    /* every single bit flipped: refused, or read as some valid history,
     * never a crash; the format's name and version are checked */
    for (size_t i = 0; i < w.sb.size * 8; i++) {
        memcpy(buf, w.sb.data, w.sb.size);
        buf[i / 8] ^= (char)(1 << (i % 8));
        if (hist_read(&r, buf, w.sb.size, err, sizeof err) == 0)
            hist_free(&r);
        assert_int_equal(r.n, 0);
    }
    /* a foreign version */
    calib_mpw v;
    calib_mpw_init(&v);
    calib_mpw_map(&v);
    calib_mpw_key(&v, "format");
    calib_mpw_str(&v, "calibd-history");
    calib_mpw_key(&v, "v");
    calib_mpw_uint(&v, 3);
    calib_mpw_key(&v, "series");
    calib_mpw_map(&v);
    calib_mpw_end(&v);
    calib_mpw_end(&v);
    assert_int_equal(hist_read(&r, v.sb.data, v.sb.size, err, sizeof err), -1);
    assert_string_equal(err, "not a calibd history of version 1 or 2");
    /* the first form: six values a point, read with no estimate; nine
     * values in it are refused */
    for (int values = HIST_VALUES_V1; values <= HIST_VALUES; values += HIST_VALUES - HIST_VALUES_V1) {
        calib_mpw_reset(&v);
        calib_mpw_map(&v);
        calib_mpw_key(&v, "format");
        calib_mpw_str(&v, "calibd-history");
        calib_mpw_key(&v, "v");
        calib_mpw_uint(&v, 1);
        calib_mpw_key(&v, "series");
        calib_mpw_map(&v);
        calib_mpw_key(&v, "old");
        calib_mpw_array(&v);
        calib_mpw_array(&v);
        calib_mpw_double(&v, 1000);
        for (int k = 0; k < values; k++)
            calib_mpw_double(&v, 0.25 + k);
        calib_mpw_uint(&v, 7);
        calib_mpw_end(&v);
        calib_mpw_end(&v);
        calib_mpw_end(&v);
        calib_mpw_end(&v);
        int rc = hist_read(&r, v.sb.data, v.sb.size, err, sizeof err);
        if (values == HIST_VALUES) {
            assert_int_equal(rc, -1);
            continue;
        }
        assert_int_equal(rc, 0);
        const hist_point *q = hist_at(&r, 0, 0);
        assert_true(q->t == 1000 && q->n == 7 && q->v[HIST_CAL_HI] == 5.25f);
        assert_true(isnan(q->v[HIST_EST]) && isnan(q->v[HIST_EST_HI]));
        hist_free(&r);
        hist_init(&r, 50, 60);
    }
    /* trailing bytes */
    memcpy(buf, w.sb.data, w.sb.size);
    assert_int_equal(hist_read(&r, "\x90\x90", 2, err, sizeof err), -1);
    /* a map of 2^32 entries in 5 bytes: refused before msgpack-c allocates
     * 64 GiB for it, which the sanitizers' allocator would abort on
     * (tests/fuzz/corpus/snapshot/crash-history_huge_count) */
    assert_int_equal(hist_read(&r, "\xdf\xff\xff\xff\xff", 5, err, sizeof err), -1);
    assert_int_equal(hist_read(&r, "\x82\xa6""format\xdd\x7f\xff\xff\xff", 13, err,
                               sizeof err), -1);
    calib_mpw_destroy(&v);
    calib_mpw_destroy(&w);
    free(buf);
    hist_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keeps_the_newest),
        cmocka_unit_test(round_trip),
        cmocka_unit_test(refuses_what_is_not_a_history),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
