/* cmd_fit.c — `calibctl fit`: fits a recalibration map on one file and,
 * with --test, measures on another what it gains over the raw outputs. */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/online.h"
#include "calib/plugin.h"
#include "cfg.h"
#include "csv_table.h"
#include "ctl.h"
#include "json_out.h"
#include "model.h"
#include "pred_csv.h"

/* ------------------------------------------------------------ reading */

/* A prediction file as a calib_dataset: records of width outputs, then y. */
typedef struct table {
    const char *path;
    pred_layout layout;
    int have_layout;
    double *rec;
    size_t n, cap;
    calib_dataset ds;
} table;

static int on_header(void *ctx, char *const *names, size_t ncol, unsigned char *text,
                     char *err, size_t errlen)
{
    table *t = ctx;
    if (pred_layout_init(&t->layout, t->path, names, ncol, NULL, err, errlen) != 0)
        return -1;
    t->have_layout = 1;
    pred_layout_text_unused(&t->layout, text, ncol); /* ignored, whatever they hold */
    return 0;
}

static int on_row(void *ctx, const double *v, const csv_text *text, size_t ncol,
                  unsigned long line, char *err, size_t errlen)
{
    table *t = ctx;
    size_t stride = t->layout.width + 1;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        double *r = cap > SIZE_MAX / sizeof *r / stride ? NULL
                                                        : realloc(t->rec, cap * stride * sizeof *r);
        if (!r) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        t->rec = r;
        t->cap = cap;
    }
    double *row = t->rec + t->n * stride;
    if (pred_row(&t->layout, v, row, &row[t->layout.width], err, errlen) != 0)
        return -1;
    t->n++;
    return 0;
}

/* Reads path; returns CTL_OK, or an exit code after printing the error. */
static int table_read(table *t, const char *path)
{
    char err[256];
    unsigned long line;
    *t = (table){.path = path};
    int rc = csv_table_read(path, on_header, on_row, t, err, sizeof err, &line);
    if (rc == 0 && t->n == 0) {
        rc = -1;
        line = 1;
        snprintf(err, sizeof err, "no data rows");
    }
    if (rc != 0) {
        ctl_error(path, line, "%s", err);
        return rc == -2 ? CTL_FAIL : CTL_BADINPUT;
    }
    t->ds = (calib_dataset){.form = t->layout.form, .k = t->layout.k, .n = t->n,
                            .stride = t->layout.width + 1, .rec = t->rec};
    return CTL_OK;
}

static void table_free(table *t)
{
    if (t->have_layout)
        pred_layout_free(&t->layout);
    free(t->rec);
}

/* ------------------------------------------------------------ output */

static void print_params(json_out *j, const calib_plugin *m, const double *p)
{
    json_object(j, "params");
    for (unsigned i = 0; i < m->nparams; i++)
        json_num(j, m->param_names[i], p[i]);
    json_close(j);
}

static void print_delta(json_out *j, const char *key, const calib_recal_delta *d)
{
    json_object(j, key);
    json_num(j, "before", d->before);
    json_num(j, "after", d->after);
    json_num(j, "improvement", d->mean);
    json_pair(j, "ci", d->ci);
    json_close(j);
}

static const char *objective_name(int o)
{
    return o == CALIB_RECAL_OBJ_NLL ? "nll" : o == CALIB_RECAL_OBJ_BRIER ? "brier"
           : o == CALIB_RECAL_OBJ_DSS ? "dss" : "default";
}

/* ------------------------------------------------------------ command */

static void fit_usage(FILE *f)
{
    fputs("usage: calibctl fit --method METHOD [--loss nll|brier] [--test FILE2]\n"
          "                    [--fit-params NAMES] [--plugin-dir DIR] FILE\n"
          "       calibctl fit --online --method temperature|platt|variance\n"
          "                    [--gamma G] [--eps E] [--test FILE2] FILE\n"
          "  METHOD: temperature, platt, variance, location_scale, or a plugin's name (loaded\n"
          "  from DIR/METHOD.so; default DIR " PKGLIBDIR "). See calibctl(1).\n", f);
}

typedef struct fit_args {
    const char *method, *test, *plugin_dir, *file;
    int objective;
    int online;             /* --online: the rows replayed in order */
    calib_online_cfg ocfg;  /* --gamma, --eps */
    char params[CFG_METHOD_MAX + 1]; /* --fit-params, as calibd.conf's */
} fit_args;

static int parse_fit_args(int argc, char **argv, fit_args *a)
{
    static const struct option opts[] = {
        {"method", required_argument, NULL, 'm'}, {"loss", required_argument, NULL, 'l'},
        {"test", required_argument, NULL, 't'},   {"plugin-dir", required_argument, NULL, 'p'},
        {"fit-params", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'},
        {"online", no_argument, NULL, 'o'}, {"gamma", required_argument, NULL, 'g'},
        {"eps", required_argument, NULL, 'e'}, {0},
    };
    int o;
    *a = (fit_args){.plugin_dir = PKGLIBDIR};
    optind = 1;
    while ((o = getopt_long(argc, argv, "m:l:t:p:f:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': a->method = optarg; break;
        case 'o': a->online = 1; break;
        case 'g':
        case 'e': {
            char *end;
            double v = strtod(optarg, &end);
            double lo = o == 'g' ? 1e-6 : 1e-9, hi = o == 'g' ? 1e6 : 1e9;
            if (end == optarg || *end || !(v >= lo && v <= hi)) {
                ctl_error(NULL, 0, "--%s: expected a number in [%g, %g], not '%s'",
                          o == 'g' ? "gamma" : "eps", lo, hi, optarg);
                return -1;
            }
            *(o == 'g' ? &a->ocfg.gamma : &a->ocfg.eps) = v;
            break;
        }
        case 'f':
            if (cfg_parse_params(optarg, a->params) != 0) {
                ctl_error(NULL, 0, "--fit-params: expected all or parameter names separated "
                          "by commas, not '%s'", optarg);
                return -1;
            }
            break;
        case 't': a->test = optarg; break;
        case 'p': a->plugin_dir = optarg; break;
        case 'l':
            if (strcmp(optarg, "nll") == 0)
                a->objective = CALIB_RECAL_OBJ_NLL;
            else if (strcmp(optarg, "brier") == 0)
                a->objective = CALIB_RECAL_OBJ_BRIER;
            else {
                ctl_error(NULL, 0, "--loss: expected nll or brier, not '%s'", optarg);
                return -1;
            }
            break;
        case 'h': fit_usage(stdout); exit(CTL_OK);
        default: fit_usage(stderr); return -1;
        }
    }
    if (!a->method || optind + 1 != argc) {
        fit_usage(stderr);
        return -1;
    }
    if (!a->online && (a->ocfg.gamma || a->ocfg.eps)) {
        ctl_error(NULL, 0, "--gamma and --eps are --online's");
        return -1;
    }
    if (a->online && (a->objective || a->params[0])) {
        ctl_error(NULL, 0, "--online learns by the log score (variance: the DSS), all "
                  "parameters: no --loss, no --fit-params");
        return -1;
    }
    a->file = argv[optind];
    return 0;
}

/* The method by name: a built-in, or DIR/NAME.so loaded into r. */
static const calib_plugin *find_method(calib_plugin_registry *r, const fit_args *a)
{
    const calib_plugin *m = calib_plugin_find(r, a->method);
    if (m)
        return m;
    if (strspn(a->method, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
        strlen(a->method)) {
        ctl_error(NULL, 0, "unknown method '%s'", a->method);
        return NULL;
    }
    char path[PATH_MAX], err[512];
    snprintf(path, sizeof path, "%s/%s.so", a->plugin_dir, a->method);
    if (calib_plugin_load(r, path, err, sizeof err) != CALIB_OK) {
        ctl_error(NULL, 0, "unknown method '%s' (%s)", a->method, err);
        return NULL;
    }
    return calib_plugin_find(r, a->method);
}

/* ------------------------------------------------------------ online */

/* --online: the file's rows, in order, through calib_online (as a model
 * learning online would take its pairs); res gets the map in force after
 * the last, and the mean of each pair's loss under the map in force
 * before it as objective_after. *learned counts the rows learned from,
 * *refused those calib_online_update's checks refused. */
static int fit_online(const table *t, const fit_args *a, calib_recal_result *res,
                      uint64_t *learned, uint64_t *refused)
{
    calib_online o;
    int e = calib_online_init(&o, a->method, t->ds.form, t->ds.k, &a->ocfg);
    if (e != CALIB_OK) {
        ctl_error(a->file, 0, e == CALIB_ENOMEM ? "out of memory"
                  : "--online learns temperature, platt (binary or K = 2) or variance "
                    "(gaussian), not %s on %s outputs", a->method,
                  calib_form_name(t->ds.form));
        return e;
    }
    *refused = 0;
    for (size_t i = 0; i < t->ds.n; i++) {
        const double *row = t->ds.rec + i * t->ds.stride;
        *refused += calib_online_update(&o, row, row[t->ds.stride - 1]) != CALIB_OK;
    }
    memset(res, 0, sizeof *res);
    res->objective = t->ds.form == CALIB_FORM_GAUSSIAN ? CALIB_RECAL_OBJ_DSS
                                                      : CALIB_RECAL_OBJ_NLL;
    res->nparams = o.method == CALIB_ONLINE_TEMPERATURE ? 1 : 2;
    calib_online_params(&o, res->params);
    *learned = o.n;
    res->objective_before = NAN;
    res->objective_after = o.n ? calib_ksum_value(&o.loss) / (double)o.n : NAN;
    calib_online_free(&o);
    return o.n ? CALIB_OK : CALIB_EEMPTY;
}

int cmd_fit(int argc, char **argv)
{
    fit_args a;
    if (parse_fit_args(argc, argv, &a) != 0)
        return CTL_BADINPUT;
    calib_plugin_registry reg;
    calib_plugin_registry_init(&reg);
    table train = {0}, test = {0};
    int rc = CTL_BADINPUT;
    const calib_plugin *m = find_method(&reg, &a);
    if (!m || (rc = table_read(&train, a.file)) != CTL_OK)
        goto out;
    rc = CTL_BADINPUT;
    if (!(m->forms & CALIB_FORM_BIT(train.ds.form))) {
        ctl_error(a.file, 1, "method %s does not take %s outputs", m->name,
                  calib_form_name(train.ds.form));
        goto out;
    }
    if (a.test) {
        if ((rc = table_read(&test, a.test)) != CTL_OK)
            goto out;
        rc = CTL_BADINPUT;
        if (test.ds.form != train.ds.form || test.ds.k != train.ds.k) {
            ctl_error(a.test, 1, "outputs differ from %s's", a.file);
            goto out;
        }
    }
    calib_recal_opts opts = {.objective = a.objective};
    char why[256];
    if (model_fit_holds(a.params, m, &opts.flags, why, sizeof why) != 0) {
        ctl_error(NULL, 0, "--fit-params: %s", why);
        goto out;
    }
    calib_recal_result res;
    uint64_t learned = 0, refused = 0;
    int e = a.online ? fit_online(&train, &a, &res, &learned, &refused)
                     : m->fit(&train.ds, &opts, &res);
    if (a.online && e == CALIB_EEMPTY) {
        ctl_error(a.file, 0, "--online learned from none of its %zu rows (each refused: "
                  "a gradient past the learner's bound, or outputs its checks refuse)",
                  train.ds.n);
        goto out;
    }
    if (a.online && e != CALIB_OK) {
        rc = e == CALIB_ENOMEM ? CTL_FAIL : CTL_BADINPUT;
        goto out;
    }
    if (e != CALIB_OK) {
        ctl_error(a.file, 0, "fit failed: %s", calib_plugin_strerror(e));
        rc = e == CALIB_ENOMEM ? CTL_FAIL : CTL_BADINPUT;
        goto out;
    }
    calib_recal_improvement imp;
    if (a.test && (e = calib_recal_compare(&test.ds, NULL, NULL, m->apply, res.params,
                                               &imp)) != CALIB_OK) {
        ctl_error(a.test, 0, "evaluation failed: %s", calib_plugin_strerror(e));
        rc = CTL_BADINPUT;
        goto out;
    }
    json_out j;
    json_begin(&j, stdout);
    json_str(&j, "method", m->name);
    json_uint(&j, "n", train.n);
    print_params(&j, m, res.params);
    json_str(&j, "objective", objective_name(res.objective));
    if (a.online) {
        json_object(&j, "online");
        json_uint(&j, "pairs", learned);
        json_uint(&j, "refused", refused);
        json_num(&j, "mean_loss", res.objective_after);
        json_close(&j);
    } else {
        json_uint(&j, "iterations", res.iterations);
        json_bool(&j, "converged", res.converged);
        json_bool(&j, "at_bound", res.at_bound);
        json_num(&j, "objective_before", res.objective_before);
        json_num(&j, "objective_after", res.objective_after);
    }
    if (a.test) {
        json_object(&j, "test");
        json_uint(&j, "n", imp.n);
        if (test.ds.form == CALIB_FORM_GAUSSIAN) {
            print_delta(&j, "dss", &imp.dss);
        } else {
            print_delta(&j, "brier", &imp.brier);
            print_delta(&j, "log", &imp.log);
        }
        json_close(&j);
    }
    json_end(&j);
    rc = CTL_OK;
out:
    table_free(&train);
    table_free(&test);
    calib_plugin_registry_free(&reg);
    return rc;
}
