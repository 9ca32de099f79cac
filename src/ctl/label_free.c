/*
 * label_free.c — calibctl score --label-free (calibctl(1)): calibd's
 * label-free estimates and label-shift test over a file of predictions, in
 * its order, at calibd's settings (model_lfree_cfg), with the reference
 * priors from a labelled file; printed as calibd's status prints a
 * model's "label_free" (pack_label_free), so that the two agree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/lfree.h"
#include "calib/mpw.h"
#include "cfg.h"
#include "csv_table.h"
#include "ctl.h"
#include "label_free.h"
#include "model.h"
#include "msgpack_json.h"
#include "pack.h"
#include "pred_csv.h"

typedef struct lf_run {
    const char *path;
    pred_layout layout;
    int have_layout;
    double *x, *p;      /* a row's outputs and served probabilities */
    const model_cfg *mc; /* calibd's settings */
    calib_lfree lf;
    int lf_on;
    uint64_t last_alarm;
    int predictions;    /* reading the predictions, not the reference */
    double *counts;     /* the reference file: labels per class */
    size_t counts_k;
} lf_run;

static int on_header(void *ctx, char *const *names, size_t ncol, unsigned char *text,
                     char *err, size_t errlen)
{
    lf_run *r = ctx;
    int rc = r->predictions ? pred_layout_init_outputs(&r->layout, r->path, names, ncol, err, errlen)
                       : pred_layout_init(&r->layout, r->path, names, ncol, NULL, err, errlen);
    if (rc != 0)
        return -1;
    r->have_layout = 1;
    pred_layout_text_unused(&r->layout, text, ncol);
    const pred_layout *l = &r->layout;
    r->x = calloc(l->width, sizeof *r->x);
    r->p = calloc(l->k ? l->k : 2, sizeof *r->p);
    if (!r->x || !r->p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!r->predictions) /* the reference file: its labels */
        return 0;
    if (r->counts_k && r->counts_k != l->k) {
        snprintf(err, errlen, "%zu classes, but the reference file has %zu", l->k,
                 r->counts_k);
        return -1;
    }
    calib_lfree_cfg lc;
    model_lfree_cfg(r->mc, l->form, l->k, &lc);
    if (!lc.recent) {
        snprintf(err, errlen, "--recent 0: no estimates");
        return -1;
    }
    if (calib_lfree_init(&r->lf, &lc) != CALIB_OK) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->lf_on = 1;
    return 0;
}

/* A labelled row of the reference file. */
static int on_ref_row(void *ctx, const double *v, const csv_text *text, size_t ncol,
                      unsigned long line, char *err, size_t errlen)
{
    (void)text, (void)ncol, (void)line;
    lf_run *r = ctx;
    double y;
    if (pred_row(&r->layout, v, r->x, &y, err, errlen) != 0)
        return -1;
    if (r->layout.form == CALIB_FORM_GAUSSIAN) {
        snprintf(err, errlen, "a reference is for classifiers: a Gaussian model has no priors");
        return -1;
    }
    if (!r->counts_k) {
        if (!(r->counts = calloc(r->layout.k, sizeof *r->counts))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        r->counts_k = r->layout.k;
    }
    r->counts[(size_t)y] += 1;
    return 0;
}

/* A prediction, as calibd serves it with identity parameters. */
static int on_row(void *ctx, const double *v, const csv_text *text, size_t ncol,
                  unsigned long line, char *err, size_t errlen)
{
    (void)text, (void)ncol, (void)line;
    lf_run *r = ctx;
    const pred_layout *l = &r->layout;
    double y;
    if (pred_row(l, v, r->x, &y, err, errlen) != 0)
        return -1;
    const double *served = r->x;
    if (l->form == CALIB_FORM_BINARY) {
        r->p[0] = 1 - r->x[0];
        r->p[1] = r->x[0];
        served = r->p;
    }
    /* logits: their softmax in float, as calibd computes it */
    int alarm = l->form == CALIB_FORM_LOGITS ? calib_lfree_add_logits(&r->lf, served)
                                             : calib_lfree_add(&r->lf, served);
    if (alarm)
        r->last_alarm = r->lf.total;
    return 0;
}

static int read_file(lf_run *r, const char *path, csv_row_fn row)
{
    char err[256];
    unsigned long line;
    r->path = path;
    int rc = csv_table_read(path, on_header, row, r, err, sizeof err, &line);
    if (rc != 0)
        ctl_error(path, line, "%s", err);
    if (r->have_layout)
        pred_layout_free(&r->layout);
    r->have_layout = 0;
    free(r->x);
    free(r->p);
    r->x = r->p = NULL;
    return rc;
}

static int print(const lf_run *r)
{
    calib_accum none[2];
    calib_accum_init(&none[0]);
    calib_accum_init(&none[1]);
    calib_mpw w;
    calib_mpw_init(&w);
    pack_label_free(&w, &r->lf, none, none, r->last_alarm);
    size_t len = 0;
    char *json = calib_mpw_error(&w) == CALIB_OK ? msgpack_to_json(w.sb.data, w.sb.size, &len)
                                                 : NULL;
    calib_mpw_destroy(&w);
    if (!json)
        return -1;
    printf("%s\n", json);
    free(json);
    return 0;
}

int score_label_free(const char *path, const char *reference, const model_cfg *mc)
{
    lf_run r = {.mc = mc};
    int rc = 0;
    if (reference && (rc = read_file(&r, reference, on_ref_row)) == 0 && !r.counts_k) {
        ctl_error(reference, 1, "no data rows");
        rc = -1;
    }
    r.predictions = 1;
    if (rc == 0 && (rc = read_file(&r, path, on_row)) == 0 && !r.lf.total) {
        ctl_error(path, 1, "no data rows");
        rc = -1;
    }
    if (rc == 0) {
        double *src = NULL;
        if (r.counts_k && (src = malloc(r.counts_k * sizeof *src)))
            calib_lfree_priors_of_counts(r.counts, r.counts_k, src);
        if (r.counts_k && !src)
            rc = -2;
        else
            calib_lfree_update(&r.lf, src);
        free(src);
        if (rc == 0 && print(&r) != 0)
            rc = -2;
        if (rc == -2)
            ctl_error(NULL, 0, "out of memory");
    }
    if (r.lf_on)
        calib_lfree_free(&r.lf);
    free(r.counts);
    return rc == 0 ? CTL_OK : rc == -2 ? CTL_FAIL : CTL_BADINPUT;
}
