/*
 * cmd_sizes.c — `calibctl sizes FILE`: the experiment of Gruber & Buettner
 * (NeurIPS 2022) on one file. Random subsamples of the rows at each test-set
 * size n, and per n the mean, spread and quantiles over the subsamples of
 * the binned estimators (biased: they move with n) and of the mean proper
 * scores (unbiased: flat in n). Every figure of a subsample is computed as
 * `calibctl score` computes it on a file of those rows (audit.h).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "calib/calib.h"
#include "csv_table.h"
#include "ctl.h"
#include "json_out.h"
#include "pred_csv.h"
#include "sizes.h"

#define SIZES_DEFAULT_REPS 100
#define SIZES_MAX_REPS 1000000UL
#define SIZES_MAX_LIST 1000 /* sizes in one --sizes list */
#define SIZES_FIRST 50      /* the smallest default size */

/* The estimators in output order, under calibctl score's keys. */
static const sizes_est class_est[] = {
    {"ece", SIZES_PANEL_ERROR, 0},
    {"tce2_15", SIZES_PANEL_ERROR, 0},
    {"tce2_100", SIZES_PANEL_ERROR, 0},
    {"tce2_15em_debiased", SIZES_PANEL_ERROR, 0},
    {"cwce2_15", SIZES_PANEL_ERROR, 0},
    {"cwce2_100", SIZES_PANEL_ERROR, 0},
    {"ks", SIZES_PANEL_ERROR, 0},
    {"rbs", SIZES_PANEL_ERROR, 1},
    {"brier", SIZES_PANEL_SCORE, 0},
    {"log", SIZES_PANEL_SCORE, 0},
};
#define NCLASS_EST (sizeof class_est / sizeof class_est[0])

static const sizes_est gauss_est[] = {
    {"dss", SIZES_PANEL_SCORE, 0},
    {"mse", SIZES_PANEL_SCORE, 0},
};
#define NGAUSS_EST (sizeof gauss_est / sizeof gauss_est[0])
#define MAX_EST (NCLASS_EST > NGAUSS_EST ? NCLASS_EST : NGAUSS_EST)

/* class_est's values from one subsample's figures, in its order. */
static void class_values(const audit_figures *f, double *v)
{
    const double w[] = {f->e.ece,      f->e.tce2_15,  f->e.tce2_100,
                        f->e.tce2_15em_debiased,      f->e.cwce2_15,
                        f->e.cwce2_100, f->e.ks,      f->rbs,
                        f->brier,      f->log};
    _Static_assert(sizeof w / sizeof w[0] == NCLASS_EST, "one value per estimator");
    memcpy(v, w, sizeof w);
}

/* ------------------------------------------------------------ reading */

/* The file, scored once: each row's probabilities and per-sample scores are
 * what every subsample holding the row uses, so a subsample costs only the
 * accumulation, not the softmax. */
typedef struct sizes_data {
    const char *path;
    pred_layout layout;
    int have_layout;
    double *x;       /* [width] one row's outputs */
    size_t n, cap;   /* rows held, rows allocated */
    double *p;       /* classification: [cap * k] probabilities */
    uint32_t *y;     /* [cap] labels */
    calib_score *sc; /* [cap] Brier and log scores */
    double *g;       /* regression: [cap * 2] DSS and squared error */
} sizes_data;

static int on_header(void *ctx, char *const *names, size_t ncol, unsigned char *text,
                     char *err, size_t errlen)
{
    sizes_data *d = ctx;
    if (pred_layout_init(&d->layout, d->path, names, ncol, NULL, err, errlen) != 0)
        return -1;
    d->have_layout = 1;
    pred_layout_text_unused(&d->layout, text, ncol); /* ignored, whatever they hold */
    if (!(d->x = calloc(d->layout.width, sizeof *d->x))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* realloc of n items of size bytes, NULL on overflow as on failure. */
static void *grow(void *old, size_t n, size_t size)
{
    return n > SIZE_MAX / size ? NULL : realloc(old, n * size);
}

static int reserve(sizes_data *d, size_t cap)
{
    size_t k = d->layout.k;
    if (k) {
        if (cap > SIZE_MAX / k)
            return -1;
        double *p = grow(d->p, cap * k, sizeof *p);
        if (!p)
            return -1;
        d->p = p;
        uint32_t *y = grow(d->y, cap, sizeof *y);
        if (!y)
            return -1;
        d->y = y;
        calib_score *sc = grow(d->sc, cap, sizeof *sc);
        if (!sc)
            return -1;
        d->sc = sc;
    } else {
        if (cap > SIZE_MAX / 2)
            return -1;
        double *g = grow(d->g, 2 * cap, sizeof *g);
        if (!g)
            return -1;
        d->g = g;
    }
    d->cap = cap;
    return 0;
}

static int on_row(void *ctx, const double *v, const csv_text *text, size_t ncol,
                  unsigned long line, char *err, size_t errlen)
{
    sizes_data *d = ctx;
    double y;
    if (pred_row(&d->layout, v, d->x, &y, err, errlen) != 0)
        return -1;
    if (d->n == d->cap &&
        (d->cap > SIZE_MAX / 2 || reserve(d, d->cap ? 2 * d->cap : 1024) != 0)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (d->layout.form == CALIB_FORM_GAUSSIAN) {
        double e = y - d->x[0];
        d->g[2 * d->n] = calib_score_dss(d->x[0], d->x[1], y);
        d->g[2 * d->n + 1] = e * e;
    } else {
        size_t k = d->layout.k;
        /* pred_row checked y: an integer in [0, k), k <= CTL_MAX_CLASSES */
        d->y[d->n] = (uint32_t)y;
        audit_classify(&d->layout, d->x, (size_t)y, d->p + d->n * k, &d->sc[d->n]);
    }
    d->n++;
    return 0;
}

static void data_free(sizes_data *d)
{
    if (d->have_layout)
        pred_layout_free(&d->layout);
    free(d->x);
    free(d->p);
    free(d->y);
    free(d->sc);
    free(d->g);
}

/* ------------------------------------------------------------ sampling */

/* Uniform in [0, bound), bound >= 1: rejection of the top partial range of
 * 2^64, so that no value is favoured (plain modulo would be biased). */
static uint64_t below(calib_rng *r, uint64_t bound)
{
    uint64_t floor_ = -bound % bound; /* 2^64 mod bound */
    for (;;) {
        uint64_t x = calib_rng_next(r);
        if (x >= floor_)
            return x % bound;
    }
}

/* A uniformly random n-subset of [0, rows) in idx[0..n): a partial
 * Fisher-Yates shuffle, which needs idx to hold a permutation of [0, rows)
 * (any one: it still is after the call), O(n) per draw. */
static void draw(size_t *idx, size_t rows, size_t n, calib_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        size_t j = i + (size_t)below(r, rows - i);
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

/* ------------------------------------------------------------ statistics */

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y); /* NaN last */
    return (x > y) - (x < y);
}

/* Quantile q of sorted v[n], n >= 1, interpolated linearly between order
 * statistics (Hyndman and Fan's type 7, numpy's default). */
static double quantile(const double *v, size_t n, double q)
{
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)h;
    if (lo + 1 >= n)
        return v[n - 1];
    return v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

/* Mean, sd and quantiles of v[n]; sorts v. NaN when any value is. */
static sizes_stat summarize(double *v, size_t n)
{
    calib_accum a;
    calib_accum_init(&a);
    for (size_t i = 0; i < n; i++)
        calib_accum_add(&a, v[i]);
    qsort(v, n, sizeof *v, cmp_double);
    if (isnan(v[n - 1]))
        return (sizes_stat){NAN, NAN, NAN, NAN};
    return (sizes_stat){.mean = calib_accum_mean(&a),
                        .sd = n > 1 ? sqrt(calib_accum_var(&a)) : NAN,
                        .q05 = quantile(v, n, 0.05),
                        .q95 = quantile(v, n, 0.95)};
}

/* A seed per size, so that a size's figures depend on the file, the seed
 * and the size only, not on the other sizes asked for. */
static uint64_t size_seed(uint64_t seed, size_t n)
{
    return seed ^ ((uint64_t)n * 0x9e3779b97f4a7c15u);
}

/* Fills st[nsizes * nest] and reps_of. Returns CTL_OK or CTL_FAIL (memory,
 * reported). */
static int run(const sizes_data *d, const size_t *size, size_t nsizes,
               unsigned long reps, uint64_t seed, sizes_stat *st,
               unsigned long *reps_of)
{
    const size_t rows = d->n, k = d->layout.k;
    const size_t nest = k ? NCLASS_EST : NGAUSS_EST;
    size_t *idx = rows > SIZE_MAX / sizeof *idx ? NULL : malloc(rows * sizeof *idx);
    double *vals = reps > SIZE_MAX / sizeof *vals / nest ? NULL
                                                         : malloc(reps * nest * sizeof *vals);
    audit au = {0};
    int rc = idx && vals ? CALIB_OK : CALIB_ENOMEM;
    /* room for the largest subsample: adding never allocates */
    if (rc == CALIB_OK && k)
        rc = audit_init(&au, k, size[nsizes - 1]);
    for (size_t s = 0; rc == CALIB_OK && s < nsizes; s++) {
        size_t n = size[s];
        /* every subsample of the whole file is the file: one is enough */
        unsigned long r_n = n == rows ? 1 : reps;
        calib_rng rng;
        calib_rng_seed(&rng, size_seed(seed, n));
        for (size_t i = 0; i < rows; i++)
            idx[i] = i;
        for (unsigned long r = 0; rc == CALIB_OK && r < r_n; r++) {
            if (n < rows) {
                draw(idx, rows, n, &rng);
                /* file order: the subsample is then a file of those rows
                 * to the estimators too (KS keeps equal confidences in
                 * input order), and memory is read forwards */
                qsort(idx, n, sizeof *idx, cmp_size);
            }
            double v[MAX_EST];
            if (k) {
                audit_figures f;
                audit_reset(&au);
                for (size_t i = 0; rc == CALIB_OK && i < n; i++) {
                    size_t j = idx[i];
                    rc = audit_add(&au, d->p + j * k, d->y[j], &d->sc[j]);
                }
                if (rc == CALIB_OK && (rc = audit_finish(&au, &f)) == CALIB_OK)
                    class_values(&f, v);
            } else {
                calib_accum dss, sqerr;
                calib_accum_init(&dss);
                calib_accum_init(&sqerr);
                for (size_t i = 0; i < n; i++) {
                    calib_accum_add(&dss, d->g[2 * idx[i]]);
                    calib_accum_add(&sqerr, d->g[2 * idx[i] + 1]);
                }
                v[0] = calib_accum_mean(&dss);
                v[1] = calib_accum_mean(&sqerr);
            }
            for (size_t e = 0; rc == CALIB_OK && e < nest; e++)
                vals[e * reps + r] = v[e];
        }
        for (size_t e = 0; rc == CALIB_OK && e < nest; e++)
            st[s * nest + e] = summarize(vals + e * reps, r_n);
        reps_of[s] = r_n;
    }
    if (k)
        audit_free(&au);
    free(idx);
    free(vals);
    if (rc != CALIB_OK) {
        ctl_error(d->path, 0, "%s", calib_strerror(rc));
        return CTL_FAIL;
    }
    return CTL_OK;
}

/* ------------------------------------------------------------ output */

static void print_json(const sizes_result *r)
{
    json_out j;
    json_begin(&j, stdout);
    json_str(&j, "file", r->path);
    json_uint(&j, "rows", r->rows);
    if (r->k)
        json_uint(&j, "k", r->k);
    json_str(&j, "form", r->form);
    json_uint(&j, "reps", r->reps);
    json_uint(&j, "seed", r->seed);
    json_array(&j, "sizes");
    for (size_t s = 0; s < r->nsizes; s++) {
        json_element(&j);
        json_uint(&j, "n", r->size[s]);
        json_uint(&j, "reps", r->reps_of[s]);
        for (size_t e = 0; e < r->nest; e++) {
            const sizes_stat *st = &r->stat[s * r->nest + e];
            json_object(&j, r->est[e].name);
            json_num(&j, "mean", st->mean);
            json_num(&j, "sd", st->sd);
            json_num(&j, "q05", st->q05);
            json_num(&j, "q95", st->q95);
            json_close(&j);
        }
        json_close(&j);
    }
    json_array_end(&j);
    json_end(&j);
}

static void text_num(double x)
{
    if (isfinite(x))
        printf(" %12.6g", x);
    else
        printf(" %12s", "-");
}

/* One block per estimator, a line per size: a trend reads down a column. */
static void print_text(const sizes_result *r)
{
    printf("# %s: %zu rows", r->path, r->rows);
    if (r->k)
        printf(", K = %zu", r->k);
    printf(", %s; %lu subsamples per size (seed %llu)\n", r->form, r->reps,
           (unsigned long long)r->seed);
    printf("%-20s %9s %7s %12s %12s %12s %12s\n", "estimator", "n", "reps", "mean",
           "sd", "q05", "q95");
    for (size_t e = 0; e < r->nest; e++) {
        if (e)
            putchar('\n');
        for (size_t s = 0; s < r->nsizes; s++) {
            const sizes_stat *st = &r->stat[s * r->nest + e];
            printf("%-20s %9zu %7lu", r->est[e].name, r->size[s], r->reps_of[s]);
            text_num(st->mean);
            text_num(st->sd);
            text_num(st->q05);
            text_num(st->q95);
            putchar('\n');
        }
    }
}

static int write_svg(const sizes_result *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        ctl_error(path, 0, "%s", strerror(errno));
        return CTL_FAIL;
    }
    int bad = sizes_svg_write(r, f) != 0;
    int err = bad ? errno : 0;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        ctl_error(path, 0, "writing failed: %s", err ? strerror(err) : "I/O error");
        return CTL_FAIL;
    }
    return CTL_OK;
}

/* ------------------------------------------------------------ arguments */

/* "50,100,200" into size[], sorted, duplicates removed. */
static int parse_sizes(const char *arg, size_t *size, size_t *nsizes)
{
    size_t n = 0;
    const char *s = arg;
    for (;;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        unsigned long long v;
        if (ctl_parse_uint(s, len, 1, SIZE_MAX, &v) != 0) {
            ctl_error(NULL, 0, "--sizes: '%.*s' is not a positive integer "
                      "(give a list such as 50,100,1000)", (int)(len > 40 ? 40 : len), s);
            return -1;
        }
        if (n == SIZES_MAX_LIST) {
            ctl_error(NULL, 0, "--sizes: more than %d sizes", SIZES_MAX_LIST);
            return -1;
        }
        size[n++] = (size_t)v;
        if (!end)
            break;
        s = end + 1;
    }
    qsort(size, n, sizeof *size, cmp_size);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || size[i] != size[m - 1])
            size[m++] = size[i];
    *nsizes = m;
    return 0;
}

/* 50, 100, 200, 500, 1000, ... below rows, then rows itself. */
static size_t default_sizes(size_t rows, size_t *size)
{
    static const unsigned step[] = {1, 2, 5};
    size_t n = 0;
    for (size_t decade = 10; n < SIZES_MAX_LIST - 1; decade *= 10) {
        for (size_t i = 0; i < 3 && n < SIZES_MAX_LIST - 1; i++) {
            size_t v = step[i] * decade;
            if (v >= rows)
                goto done;
            if (v >= SIZES_FIRST)
                size[n++] = v;
        }
        if (decade > SIZE_MAX / 50)
            break;
    }
done:
    size[n++] = rows;
    return n;
}

/* Drops the sizes above rows, with a warning naming them; 0 if none is
 * left. */
static size_t fit_sizes(const char *path, size_t rows, size_t *size, size_t n)
{
    size_t keep = 0;
    while (keep < n && size[keep] <= rows)
        keep++;
    if (keep < n) {
        char list[128];
        size_t len = 0;
        for (size_t i = keep; i < n && len < sizeof list; i++) {
            int w = snprintf(list + len, sizeof list - len, "%s%zu", i > keep ? ", " : "",
                             size[i]);
            if (w < 0)
                break;
            len += (size_t)w;
        }
        if (len >= sizeof list)
            memcpy(list + sizeof list - 4, "...", 4);
        if (keep)
            ctl_error(path, 0, "warning: dropping sizes larger than the file's %zu rows: %s",
                      rows, list);
    }
    return keep;
}

static void sizes_usage(FILE *f)
{
    fputs("usage: calibctl sizes [--sizes N,N,...] [--reps R] [--seed S] [--text]\n"
          "                      [--svg OUT] FILE\n"
          "  Draws R random subsamples (without replacement) of FILE's rows at each\n"
          "  test-set size n and prints, per n, the mean, standard deviation and 5%\n"
          "  and 95% quantiles over the subsamples of the binned estimators (ECE,\n"
          "  TCE2, CWCE2, KS, debiased TCE2) and of the mean Brier and log scores\n"
          "  and RBS, which, unlike the binned ones, do not move with n.\n"
          "  --sizes L  the sizes (default 50,100,200,500,... below the number of\n"
          "             rows, and the number of rows: the whole file, drawn once)\n"
          "  --reps R   subsamples per size (default 100)\n"
          "  --seed S   the random seed (default 1)\n"
          "  --text     an aligned text table instead of JSON\n"
          "  --svg OUT  also plot the means and 5-95% bands against n in OUT\n"
          "  FILE: as calibctl score reads it; - reads standard input.\n"
          "  See calibctl(1).\n", f);
}

int cmd_sizes(int argc, char **argv)
{
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, 'n'}, {"reps", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 's'},  {"text", no_argument, NULL, 't'},
        {"svg", required_argument, NULL, 'g'},   {"help", no_argument, NULL, 'h'},
        {0}};
    static size_t size[SIZES_MAX_LIST];
    size_t nsizes = 0;
    unsigned long long reps = SIZES_DEFAULT_REPS, seed = 1;
    int text = 0, c;
    const char *svg = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            sizes_usage(stdout);
            return CTL_OK;
        case 'n':
            if (parse_sizes(optarg, size, &nsizes) != 0)
                return CTL_BADINPUT;
            break;
        case 'r':
            if (ctl_parse_uint(optarg, strlen(optarg), 1, SIZES_MAX_REPS, &reps) != 0) {
                ctl_error(NULL, 0, "--reps: '%s' is not an integer in [1, %lu]", optarg,
                          SIZES_MAX_REPS);
                return CTL_BADINPUT;
            }
            break;
        case 's':
            if (ctl_parse_uint(optarg, strlen(optarg), 0, UINT64_MAX, &seed) != 0) {
                ctl_error(NULL, 0, "--seed: '%s' is not an integer in [0, 2^64)", optarg);
                return CTL_BADINPUT;
            }
            break;
        case 't':
            text = 1;
            break;
        case 'g':
            if (!*optarg) {
                ctl_error(NULL, 0, "--svg: empty file name");
                return CTL_BADINPUT;
            }
            svg = optarg;
            break;
        default:
            sizes_usage(stderr);
            return CTL_BADINPUT;
        }
    }
    if (optind + 1 != argc) {
        sizes_usage(stderr);
        return CTL_BADINPUT;
    }

    sizes_data d = {.path = argv[optind]};
    char err[256];
    unsigned long line;
    int rc = csv_table_read(d.path, on_header, on_row, &d, err, sizeof err, &line);
    if (rc == 0 && d.n == 0) {
        rc = -1;
        line = 1;
        snprintf(err, sizeof err, "no data rows");
    }
    if (rc != 0) {
        ctl_error(d.path, line, "%s", err);
        data_free(&d);
        return rc == -2 ? CTL_FAIL : CTL_BADINPUT;
    }
    if (nsizes == 0)
        nsizes = default_sizes(d.n, size);
    else if ((nsizes = fit_sizes(d.path, d.n, size, nsizes)) == 0) {
        ctl_error(d.path, 0, "no size in --sizes is at most the file's %zu rows", d.n);
        data_free(&d);
        return CTL_BADINPUT;
    }

    const size_t nest = d.layout.k ? NCLASS_EST : NGAUSS_EST;
    sizes_stat *st = calloc(nsizes * nest, sizeof *st);
    unsigned long *reps_of = calloc(nsizes, sizeof *reps_of);
    if (!st || !reps_of) {
        ctl_error(d.path, 0, "out of memory");
        rc = CTL_FAIL;
    } else {
        rc = run(&d, size, nsizes, (unsigned long)reps, (uint64_t)seed, st, reps_of);
    }
    if (rc == CTL_OK) {
        sizes_result r = {.path = d.path,
                          .rows = d.n,
                          .k = d.layout.k,
                          .form = calib_form_name(d.layout.form),
                          .seed = (uint64_t)seed,
                          .reps = (unsigned long)reps,
                          .est = d.layout.k ? class_est : gauss_est,
                          .nest = nest,
                          .nsizes = nsizes,
                          .size = size,
                          .reps_of = reps_of,
                          .stat = st};
        if (svg)
            rc = write_svg(&r, svg);
        if (rc == CTL_OK) {
            if (text)
                print_text(&r);
            else
                print_json(&r);
            if (fflush(stdout) != 0) {
                ctl_error(NULL, 0, "standard output: %s", strerror(errno));
                rc = CTL_FAIL;
            }
        }
    }
    free(st);
    free(reps_of);
    data_free(&d);
    return rc;
}
