/* test_score_lanes.c — a row's exps, divisions, maxima and squares run in
 * vectors of four doubles and, on x86-64, are compiled for AVX2 and for
 * the baseline, the loader choosing: every path must score a row bit for
 * bit as plain scalar C does. This test compiles score.c a second time
 * without vectors and a third time for the baseline alone
 * (score_baseline.c), and runs the library's (the CPU's pick) and both on
 * the same rows: every length up to 17 and longer ones, temperatures,
 * classes far below the maximum (exp's range left) and at its end, at
 * every lane, and in place (p = z). */
#include "unit.h"

#include <string.h>

#include "calib/calib.h"
#include "softmax.h"

#define SCORE_PREFIX scalar_
#define CALIB_NO_VEC4 1
#include "score_renamed.h"

/* score_baseline.c: vectors, baseline only */
double baseline_row_max(const double *z, size_t k);
double baseline_softmax_row(const double *z, size_t k, double zmax, double beta, double *p);
void baseline_score_logits(const double *z, size_t k, size_t y, double *p, calib_score *s);
double baseline_log_softmax_at(const double *z, size_t k, size_t y);

/* one build of score.c's row functions */
typedef struct impl {
    const char *name;
    double (*row_max)(const double *, size_t);
    double (*softmax_row)(const double *, size_t, double, double, double *);
    void (*score_logits)(const double *, size_t, size_t, double *, calib_score *);
    double (*log_softmax_at)(const double *, size_t, size_t);
} impl;

static const impl impls[] = {
    {"scalar", scalar_row_max, scalar_softmax_row, scalar_score_logits, scalar_log_softmax_at},
    {"baseline", baseline_row_max, baseline_softmax_row, baseline_score_logits,
     baseline_log_softmax_at},
};

static void vectors_equal_scalar(void **state)
{
    enum { KMAX = 1001 };
    static double z[KMAX], p[KMAX], q[KMAX], w[KMAX];
    const size_t ks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 100, 1001};
    const double betas[] = {1, 1 / 1.5, 0.25, 3};
    calib_rng r;
    calib_rng_seed(&r, 7);
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
        for (size_t b = 0; b < sizeof betas / sizeof betas[0]; b++)
            for (int rep = 0; rep < 200; rep++) {
                size_t k = ks[a];
                unit_normal_row(&r, z, k, rep % 4 == 3 ? 300 : rep % 4 == 2 ? 20 : 2);
                if (rep % 5 == 4) /* one class out of exp's range */
                    z[calib_rng_next(&r) % k] = -800;
                if (rep % 7 == 6) /* at its end (exactly for beta 1, 1/4, 3), every lane in turn */
                    for (size_t i = 0; i < k; i++)
                        z[i] = i == (size_t)rep % k ? 0 : -708 / betas[b];
                size_t y = calib_rng_next(&r) % k;
                double m = calib_row_max(z, k);
                double sum = calib_softmax_row(z, k, m, betas[b], p);
                calib_score sc;
                calib_score_logits(z, k, y, w, &sc);
                double lsm = calib_log_softmax_at(z, k, y);
                for (size_t v = 0; v < sizeof impls / sizeof impls[0]; v++) {
                    const impl *f = &impls[v];
                    if (f->row_max(z, k) != m)
                        fail_msg("%s: row max", f->name);
                    double s2 = f->softmax_row(z, k, m, betas[b], q);
                    assert_memory_equal(&s2, &sum, sizeof sum);
                    assert_memory_equal(q, p, k * sizeof *p);
                    memcpy(q, z, k * sizeof *q); /* in place, as temperature scaling calls it */
                    f->softmax_row(q, k, m, betas[b], q);
                    assert_memory_equal(q, p, k * sizeof *p);
                    calib_score s3;
                    f->score_logits(z, k, y, q, &s3);
                    assert_memory_equal(&s3, &sc, sizeof sc);
                    assert_memory_equal(q, w, k * sizeof *w);
                    double l2 = f->log_softmax_at(z, k, y);
                    assert_memory_equal(&l2, &lsm, sizeof lsm);
                }
                memcpy(q, z, k * sizeof *q); /* the library in place too */
                calib_softmax_row(q, k, m, betas[b], q);
                assert_memory_equal(q, p, k * sizeof *p);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vectors_equal_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
