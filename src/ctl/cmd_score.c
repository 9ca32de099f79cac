/* cmd_score.c — `calibctl score FILE`: an offline calibration audit. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "audit.h"
#include "calib/calib.h"
#include "csv_table.h"
#include "ctl.h"
#include "json_out.h"
#include "pred_csv.h"

typedef struct score_run {
    const char *path;
    pred_layout layout;
    int have_layout;
    double *x;  /* [width] outputs of the row */
    double *p;  /* [k] probabilities of the row */
    audit au;                    /* classification */
    calib_accum dss, sqerr, var; /* regression */
} score_run;

static int on_header(void *ctx, char *const *names, size_t ncol, char *err,
                     size_t errlen)
{
    score_run *s = ctx;
    if (pred_layout_init(&s->layout, s->path, names, ncol, err, errlen) != 0)
        return -1;
    s->have_layout = 1;
    const pred_layout *l = &s->layout;
    s->x = calloc(l->width, sizeof *s->x);
    s->p = calloc(l->k ? l->k : 1, sizeof *s->p);
    int rc = !s->x || !s->p ? CALIB_ENOMEM : CALIB_OK;
    if (rc == CALIB_OK && l->k)
        rc = audit_init(&s->au, l->k, 1024);
    if (rc != CALIB_OK) {
        snprintf(err, errlen, "%s", calib_strerror(rc));
        return -1;
    }
    return 0;
}

static int on_row(void *ctx, const double *v, size_t ncol, unsigned long line,
                  char *err, size_t errlen)
{
    score_run *s = ctx;
    double y;
    if (pred_row(&s->layout, v, s->x, &y, err, errlen) != 0)
        return -1;
    if (s->layout.form == CALIB_FORM_GAUSSIAN) {
        double d = y - s->x[0];
        calib_accum_add(&s->dss, calib_score_dss(s->x[0], s->x[1], y));
        calib_accum_add(&s->sqerr, d * d);
        calib_accum_add(&s->var, s->x[1]);
        return 0;
    }
    calib_score sc;
    audit_classify(&s->layout, s->x, (size_t)y, s->p, &sc);
    int rc = audit_add(&s->au, s->p, (size_t)y, &sc);
    if (rc != CALIB_OK) {
        snprintf(err, errlen, "%s", calib_strerror(rc));
        return -1;
    }
    return 0;
}

static void print_mean_ci(json_out *j, const char *key, const char *ci_key,
                          const calib_accum *a)
{
    double ci[2];
    calib_accum_ci95(a, ci);
    json_num(j, key, calib_accum_mean(a));
    json_pair(j, ci_key, ci);
}

static int report(score_run *s)
{
    json_out j;
    const pred_layout *l = &s->layout;
    if (l->form == CALIB_FORM_GAUSSIAN) {
        json_begin(&j, stdout);
        json_uint(&j, "n", s->dss.n);
        json_str(&j, "form", calib_form_name(l->form));
        print_mean_ci(&j, "dss", "dss_ci", &s->dss);
        json_num(&j, "mse", calib_accum_mean(&s->sqerr));
        json_num(&j, "mean_var", calib_accum_mean(&s->var));
        json_end(&j);
        return CTL_OK;
    }
    audit_figures f;
    calib_brier_decomp d;
    if (audit_finish(&s->au, &f) != CALIB_OK ||
        calib_cwbins_brier_decomp(&s->au.est.cw15, &d) != CALIB_OK)
        return CTL_BADINPUT; /* no rows: caught before, kept for safety */
    const calib_estimates e = f.e;
    json_begin(&j, stdout);
    json_uint(&j, "n", e.n);
    json_uint(&j, "k", l->k);
    json_str(&j, "form", calib_form_name(l->form));
    json_num(&j, "accuracy", e.accuracy);
    print_mean_ci(&j, "brier", "brier_ci", &s->au.brier);
    json_num(&j, "rbs", f.rbs);
    print_mean_ci(&j, "log", "log_ci", &s->au.log);
    json_num(&j, "ece", e.ece);
    json_num(&j, "tce2_15", e.tce2_15);
    json_num(&j, "tce2_100", e.tce2_100);
    json_num(&j, "tce2_15em_debiased", e.tce2_15em_debiased);
    json_num(&j, "cwce2_15", e.cwce2_15);
    json_num(&j, "cwce2_100", e.cwce2_100);
    json_num(&j, "ks", e.ks);
    json_num(&j, "brier_reliability", d.reliability);
    json_num(&j, "brier_resolution", d.resolution);
    json_num(&j, "brier_uncertainty", d.uncertainty);
    json_end(&j);
    return CTL_OK;
}

static void score_usage(FILE *f)
{
    fputs("usage: calibctl score FILE\n"
          "  FILE: CSV with a header: y and z0..z{K-1} (logits), p0..p{K-1}\n"
          "  (probabilities), p (binary), or mean and var (regression); - reads\n"
          "  standard input. Prints one JSON object. See calibctl(1).\n", f);
}

int cmd_score(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            score_usage(stdout);
            return CTL_OK;
        }
        score_usage(stderr);
        return CTL_BADINPUT;
    }
    if (optind + 1 != argc) {
        score_usage(stderr);
        return CTL_BADINPUT;
    }
    score_run s = {.path = argv[optind]};
    char err[256];
    unsigned long line;
    int rc = csv_table_read(s.path, on_header, on_row, &s, err, sizeof err, &line);
    if (rc == 0 && s.au.brier.n + s.dss.n == 0) {
        rc = -1;
        line = 1;
        snprintf(err, sizeof err, "no data rows");
    }
    if (rc != 0)
        ctl_error(s.path, line, "%s", err);
    else
        rc = report(&s);
    if (s.have_layout && s.layout.k)
        audit_free(&s.au);
    pred_layout_free(&s.layout);
    free(s.x);
    free(s.p);
    return rc == 0 ? CTL_OK : rc == -2 ? CTL_FAIL : CTL_BADINPUT;
}
