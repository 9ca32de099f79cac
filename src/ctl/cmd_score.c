/*
 * cmd_score.c — `calibctl score FILE`: an offline calibration audit; with
 * --segment COLUMN, also per value of that column, by calibd's own segment
 * monitor (segment.h): the same sketch, test and e-BH, as if calibd had
 * received the rows in file order and ticked every SEG_DECIDE_ROWS rows.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "calib/calib.h"
#include "calib/protocol.h"
#include "csv_table.h"
#include "ctl.h"
#include "json_out.h"
#include "pred_csv.h"
#include "label_free.h"
#include "segment.h"

#define SEG_DECIDE_ROWS 100 /* rows between two e-BH decisions */
#define SEG_BINS 15         /* top-label bins of a value (its ece) */
#define SEG_VIEW 1          /* the view shown: calibd's calibrated one (VIEW_CAL);
                               both views hold the file's outputs here */

typedef struct score_run {
    const char *path;
    pred_layout layout;
    int have_layout;
    double *x;  /* [width] outputs of the row */
    double *p;  /* [k] probabilities of the row */
    audit au;                    /* classification */
    calib_accum dss, sqerr, var; /* regression */
    /* --segment */
    const char *seg_name;        /* the column; NULL: no segments */
    seg_cfg seg_cfg;             /* keys 0 until the header is read */
    seg_table seg;
    size_t seg_col;
    unsigned long long rows;
} score_run;

static int on_header(void *ctx, char *const *names, size_t ncol, unsigned char *text,
                     char *err, size_t errlen)
{
    score_run *s = ctx;
    if (pred_layout_init(&s->layout, s->path, names, ncol, s->seg_name, err, errlen) != 0)
        return -1;
    s->have_layout = 1;
    pred_layout_text_unused(&s->layout, text, ncol); /* ignored, whatever they hold */
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
    if (!s->seg_name)
        return 0;
    for (s->seg_col = 0; s->seg_col < ncol; s->seg_col++)
        if (strcmp(names[s->seg_col], s->seg_name) == 0)
            break;
    if (s->seg_col == ncol) {
        snprintf(err, errlen, "no column '%s' (named by --segment)", s->seg_name);
        return -1;
    }
    if (pred_layout_uses(l, s->seg_col)) {
        snprintf(err, errlen, "--segment: column '%s' is the outcome or an output, "
                 "not a segment column", s->seg_name);
        return -1;
    }
    text[s->seg_col] = 1;
    /* one key, the column; regression: scores only (no bins, no test) */
    s->seg_cfg.keys = 1;
    s->seg_cfg.bins = l->form == CALIB_FORM_GAUSSIAN ? 0 : SEG_BINS;
    if (seg_init(&s->seg, &s->seg_cfg, NULL) != CALIB_OK) { /* checked with the options */
        snprintf(err, errlen, "bad segment settings");
        return -1;
    }
    if (seg_add_key(&s->seg, s->seg_name, strlen(s->seg_name)) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* A cell as an error message shows it: at most 32 bytes, control bytes as
 * \xHH. */
static void show_cell(char *out, size_t outlen, const char *s, size_t len)
{
    size_t o = 0, max = 32;
    for (size_t i = 0; i < len && i < max && o + 5 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    if (len > max && o + 4 < outlen) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
}

/* A row's pair to its value's slot, as calibd's observe_segments routes a
 * pair of one view (the file's outputs stand for both the raw and the
 * calibrated view); e-BH every SEG_DECIDE_ROWS rows. */
static int segment_row(score_run *s, const csv_text *cell, const double score[2],
                       const calib_toplabel *top, char *err, size_t errlen)
{
    if (!calib_proto_seg_value_ok(cell->s, cell->len)) {
        char shown[160];
        show_cell(shown, sizeof shown, cell->s, cell->len);
        snprintf(err, errlen, "'%s'%s in column %zu is not a segment value (1 to %d bytes, "
                 "no control characters)", shown, cell->len > SEG_NAME_MAX ? " (too long)" : "",
                 s->seg_col + 1, SEG_NAME_MAX);
        return -1;
    }
    seg_kv kv = {.key = s->seg_name, .key_len = strlen(s->seg_name), .val = cell->s,
                 .val_len = cell->len};
    double code;
    seg_predict(&s->seg, &kv, 1, &code, 0);
    seg_obs o;
    for (int v = 0; v < SEG_VIEWS; v++) {
        o.s[v][0] = score[0];
        o.s[v][1] = score[1];
        o.conf[v] = top ? top->conf : NAN;
        o.correct[v] = top ? (int)top->correct : 0;
    }
    seg_observe(&s->seg, &code, &o);
    if (++s->rows % SEG_DECIDE_ROWS == 0)
        seg_decide(&s->seg, (double)s->rows, NULL, NULL);
    return 0;
}

static int on_row(void *ctx, const double *v, const csv_text *text, size_t ncol,
                  unsigned long line, char *err, size_t errlen)
{
    score_run *s = ctx;
    double y;
    if (pred_row(&s->layout, v, s->x, &y, err, errlen) != 0)
        return -1;
    if (s->layout.form == CALIB_FORM_GAUSSIAN) {
        double d = y - s->x[0], dss = calib_score_dss(s->x[0], s->x[1], y);
        calib_accum_add(&s->dss, dss);
        calib_accum_add(&s->sqerr, d * d);
        calib_accum_add(&s->var, s->x[1]);
        double score[2] = {dss, NAN};
        return s->seg_name ? segment_row(s, &text[s->seg_col], score, NULL, err, errlen) : 0;
    }
    calib_score sc;
    audit_classify(&s->layout, s->x, (size_t)y, s->p, &sc);
    int rc = audit_add(&s->au, s->p, (size_t)y, &sc);
    if (rc != CALIB_OK) {
        snprintf(err, errlen, "%s", calib_strerror(rc));
        return -1;
    }
    if (!s->seg_name)
        return 0;
    double score[2] = {sc.brier, sc.log};
    calib_toplabel top = audit_last(&s->au);
    return segment_row(s, &text[s->seg_col], score, &top, err, errlen);
}

static void print_mean_ci(json_out *j, const char *key, const char *ci_key,
                          const calib_accum *a)
{
    double ci[2];
    calib_accum_ci95(a, ci);
    json_num(j, key, calib_accum_mean(a));
    json_pair(j, ci_key, ci);
}

static void print_estimate(json_out *j, const char *key, const calib_accum *a)
{
    double ci[2];
    calib_accum_ci95(a, ci);
    json_object(j, key);
    json_num(j, "mean", calib_accum_mean(a));
    json_pair(j, "ci", ci);
    json_close(j);
}

/* One value (or "other"), as calibd's status shows a segment. */
static void print_segment(json_out *j, const seg_slot *sl, int gaussian, int other)
{
    seg_figures f;
    seg_figures_of(sl, &f);
    json_element(j);
    /* the other bucket: no value, since any string may be one */
    json_str_or_null(j, "value", other ? NULL : sl->name);
    json_bool(j, "other", other);
    json_uint(j, "pairs", f.pairs);
    print_estimate(j, gaussian ? "dss" : "brier", &sl->score[SEG_VIEW][0]);
    if (!gaussian) {
        print_estimate(j, "log", &sl->score[SEG_VIEW][1]);
        json_num(j, "ece", f.ece[SEG_VIEW]);
        json_num(j, "gap", f.gap);
        json_pair(j, "gap_ci", f.gap_ci);
        json_num(j, "gap_lo", f.gap_lo);
        if (!other) {
            json_num(j, "e", exp(f.log_e));
            json_bool(j, "flagged", sl->flagged);
            /* rows read when e-BH flagged it (calibd: the wall time) */
            json_num(j, "flagged_at_row", sl->flagged ? sl->flagged_at : NAN);
            json_num(j, "e_flagged", exp(f.log_e_flag)); /* the e-value it was flagged with */
        }
    }
    json_close(j);
}

/* The column's values, worst first (idx, n: seg_rank), then "other". */
static void print_segments(json_out *j, const score_run *s, const size_t *idx, size_t n)
{
    const seg_table *t = &s->seg;
    const seg_key *k = &t->key[0];
    int gaussian = s->layout.form == CALIB_FORM_GAUSSIAN;
    json_object(j, "segments");
    json_str(j, "key", k->name);
    json_uint(j, "values", t->cfg.values);
    json_uint(j, "tracked", k->used);
    json_uint(j, "evictions", k->evictions);
    json_num(j, "alpha", t->cfg.alpha);
    json_num(j, "min_effect", t->cfg.min_effect);
    json_num(j, "threshold", exp(seg_log_threshold(t, 1))); /* flags a value alone */
    json_uint(j, "flagged", k->flags);
    json_array(j, "segments");
    for (size_t i = 0; i < n; i++)
        print_segment(j, &k->slot[idx[i]], gaussian, 0);
    print_segment(j, seg_other(t, 0), gaussian, 1);
    json_array_end(j);
    json_close(j);
}

/* Prints the JSON object: 0; -2 out of memory (nothing printed). */
static int report(score_run *s)
{
    json_out j;
    const pred_layout *l = &s->layout;
    size_t *idx = NULL, n = 0;
    if (s->seg_name) {
        /* the flags of the file's end, then the order, before any output */
        seg_decide(&s->seg, (double)s->rows, NULL, NULL);
        const seg_key *k = &s->seg.key[0];
        if (!(idx = malloc(s->seg.cfg.values * sizeof *idx)) ||
            (n = seg_rank(&s->seg, 0, idx, s->seg.cfg.values)) != k->used) {
            free(idx); /* seg_rank's own allocation failed */
            return -2;
        }
    }
    if (l->form == CALIB_FORM_GAUSSIAN) {
        json_begin(&j, stdout);
        json_uint(&j, "n", s->dss.n);
        json_str(&j, "form", calib_form_name(l->form));
        print_mean_ci(&j, "dss", "dss_ci", &s->dss);
        json_num(&j, "mse", calib_accum_mean(&s->sqerr));
        json_num(&j, "mean_var", calib_accum_mean(&s->var));
        if (idx)
            print_segments(&j, s, idx, n);
        json_end(&j);
        free(idx);
        return 0;
    }
    audit_figures f;
    calib_brier_decomp d;
    if (audit_finish(&s->au, &f) != CALIB_OK ||
        calib_cwbins_brier_decomp(&s->au.est.cw15, &d) != CALIB_OK) {
        free(idx);
        return -1; /* no rows: caught before, kept for safety */
    }
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
    if (idx)
        print_segments(&j, s, idx, n);
    json_end(&j);
    free(idx);
    return 0;
}

static void score_usage(FILE *f)
{
    fputs("usage: calibctl score [--segment COLUMN [--segment-values N]\n"
          "                      [--segment-alpha A] [--segment-min-effect D]] FILE\n"
          "  FILE: CSV with a header: y and z0..z{K-1} (logits), p0..p{K-1}\n"
          "  (probabilities), p (binary), or mean and var (regression); - reads\n"
          "  standard input. Prints one JSON object. See calibctl(1).\n"
          "       calibctl score --label-free [--reference LABELLED] [--recent N]\n"
          "                      [--alpha A] [--shift-reference N] FILE\n"
          "  --label-free             calibd's label-free estimates over the newest N\n"
          "                           predictions of FILE (its y, if any, unread), and\n"
          "                           its label-shift test over all, in their order\n"
          "  --reference LABELLED     the reference priors: the class mix of LABELLED's y\n"
          "  --recent N               label_free_recent (default 10000)\n"
          "  --alpha A                label_shift_alpha (default 0.01; 0: no test)\n"
          "  --shift-reference N      label_shift_reference (default 2000)\n"
          "  --segment COLUMN         also per value of COLUMN (text), as calibd's\n"
          "                           segments: figures, and e-BH flags\n"
          "  --segment-values N       values tracked, 1..4096 (default 4096)\n"
          "  --segment-alpha A        false discovery rate, in (0, 1) (default 0.05)\n"
          "  --segment-min-effect D   |confidence - accuracy| tolerated, in [0, 1)\n"
          "                           (default 0.02)\n", f);
}

/* A number in (0, 1), or [0, 1) when zero_ok, nothing else. */
static int parse_unit(const char *opt, const char *a, int zero_ok, double *out)
{
    char *end;
    double v = strtod(a, &end);
    if (!*a || *end || !(zero_ok ? v >= 0 : v > 0) || !(v < 1)) {
        ctl_error(NULL, 0, "--%s: '%s' is not a number in %s0, 1)", opt, a,
                  zero_ok ? "[" : "(");
        return -1;
    }
    *out = v;
    return 0;
}

enum { OPT_SEGMENT = 256, OPT_SEG_VALUES, OPT_SEG_ALPHA, OPT_SEG_MIN_EFFECT, OPT_LABEL_FREE,
       OPT_REFERENCE, OPT_RECENT, OPT_ALPHA, OPT_SHIFT_REFERENCE };

/* --label-free's options into calibd's model settings mc; a label-free
 * option seen sets *lf_opt to its name. 1: not one of them; 0; -1. */
static int label_free_opt(int c, const char *arg, model_cfg *mc, const char **reference,
                          const char **lf_opt)
{
    unsigned long long v;
    switch (c) {
    case OPT_REFERENCE:
        *reference = arg;
        *lf_opt = "--reference";
        return 0;
    case OPT_RECENT:
        if (ctl_parse_uint(arg, strlen(arg), 1, 10000000, &v) != 0) {
            ctl_error(NULL, 0, "--recent: '%s' is not an integer in [1, 1e7]", arg);
            return -1;
        }
        mc->label_free_recent = v;
        *lf_opt = "--recent";
        return 0;
    case OPT_ALPHA:
        *lf_opt = "--alpha";
        return parse_unit("alpha", arg, 1, &mc->label_shift_alpha);
    case OPT_SHIFT_REFERENCE:
        if (ctl_parse_uint(arg, strlen(arg), 10, 10000000, &v) != 0) {
            ctl_error(NULL, 0, "--shift-reference: '%s' is not an integer in [10, 1e7]", arg);
            return -1;
        }
        mc->label_shift_reference = v;
        *lf_opt = "--shift-reference";
        return 0;
    }
    return 1;
}

int cmd_score(int argc, char **argv)
{
    static const struct option opts[] = {
        {"segment", required_argument, NULL, OPT_SEGMENT},
        {"segment-values", required_argument, NULL, OPT_SEG_VALUES},
        {"segment-alpha", required_argument, NULL, OPT_SEG_ALPHA},
        {"segment-min-effect", required_argument, NULL, OPT_SEG_MIN_EFFECT},
        {"label-free", no_argument, NULL, OPT_LABEL_FREE},
        {"reference", required_argument, NULL, OPT_REFERENCE},
        {"recent", required_argument, NULL, OPT_RECENT},
        {"alpha", required_argument, NULL, OPT_ALPHA},
        {"shift-reference", required_argument, NULL, OPT_SHIFT_REFERENCE},
        {"help", no_argument, NULL, 'h'},
        {0}};
    /* calibd's defaults (calibd.conf(5)) but values: every one, up to the most */
    score_run s = {.seg_cfg = {.values = SEG_MAX_VALUES, .alpha = 0.05, .min_effect = 0.02}};
    const char *seg_opt = NULL; /* a --segment-* option given */
    const char *lf_opt = NULL, *reference = NULL; /* --label-free's */
    int label_free = 0;
    daemon_cfg dc;
    if (config_init(&dc) != 0) {
        ctl_error(NULL, 0, "out of memory");
        return CTL_FAIL;
    }
    model_cfg mc = dc.defaults; /* calibd's settings, as the options change them */
    config_free(&dc);
    unsigned long long values;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int lf = label_free_opt(c, optarg, &mc, &reference, &lf_opt);
        if (lf < 0)
            return CTL_BADINPUT;
        if (lf == 0)
            continue;
        switch (c) {
        case OPT_LABEL_FREE:
            label_free = 1;
            break;
        case 'h':
            score_usage(stdout);
            return CTL_OK;
        case OPT_SEGMENT:
            if (!*optarg || strlen(optarg) > SEG_NAME_MAX) {
                ctl_error(NULL, 0, "--segment: '%s' is not a column name of 1 to %d bytes",
                          optarg, SEG_NAME_MAX);
                return CTL_BADINPUT;
            }
            s.seg_name = optarg;
            break;
        case OPT_SEG_VALUES:
            if (ctl_parse_uint(optarg, strlen(optarg), 1, SEG_MAX_VALUES, &values) != 0) {
                ctl_error(NULL, 0, "--segment-values: '%s' is not an integer in [1, %d]",
                          optarg, SEG_MAX_VALUES);
                return CTL_BADINPUT;
            }
            s.seg_cfg.values = (size_t)values;
            seg_opt = "--segment-values";
            break;
        case OPT_SEG_ALPHA:
            if (parse_unit("segment-alpha", optarg, 0, &s.seg_cfg.alpha) != 0)
                return CTL_BADINPUT;
            seg_opt = "--segment-alpha";
            break;
        case OPT_SEG_MIN_EFFECT:
            if (parse_unit("segment-min-effect", optarg, 1, &s.seg_cfg.min_effect) != 0)
                return CTL_BADINPUT;
            seg_opt = "--segment-min-effect";
            break;
        default:
            score_usage(stderr);
            return CTL_BADINPUT;
        }
    }
    if (seg_opt && !s.seg_name) {
        ctl_error(NULL, 0, "%s needs --segment COLUMN", seg_opt);
        return CTL_BADINPUT;
    }
    if (lf_opt && !label_free) {
        ctl_error(NULL, 0, "%s needs --label-free", lf_opt);
        return CTL_BADINPUT;
    }
    if (label_free && s.seg_name) {
        ctl_error(NULL, 0, "--label-free and --segment: one at a time");
        return CTL_BADINPUT;
    }
    if (optind + 1 != argc) {
        score_usage(stderr);
        return CTL_BADINPUT;
    }
    if (label_free)
        return score_label_free(argv[optind], reference, &mc);
    s.path = argv[optind];
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
    else if ((rc = report(&s)) == -2)
        ctl_error(s.path, 0, "out of memory");
    if (s.have_layout && s.layout.k)
        audit_free(&s.au);
    seg_free(&s.seg);
    pred_layout_free(&s.layout);
    free(s.x);
    free(s.p);
    return rc == 0 ? CTL_OK : rc == -2 ? CTL_FAIL : CTL_BADINPUT;
}
