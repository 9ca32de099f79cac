/* pred_csv.c — header mapping and row checks of prediction CSV files. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "ctl.h"
#include "pred_csv.h"

/* "z12" -> 12 for prefix 'z'; -1 unless the rest is a canonical decimal. */
static long class_index(const char *name, char prefix)
{
    if (name[0] != prefix || name[1] < '0' || name[1] > '9')
        return -1;
    if (name[1] == '0' && name[2] != 0)
        return -1;
    long v = 0;
    for (const char *c = name + 1; *c; c++) {
        if (*c < '0' || *c > '9' || v > CTL_MAX_CLASSES)
            return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

enum { NONE = (size_t)-1 };

/* Collects the columns prefix0..prefix{K-1}; K = 0 when there are none. */
static int class_columns(char *const *names, size_t ncol,
                         char prefix, size_t **cols, size_t *k, char *err,
                         size_t errlen)
{
    size_t found = 0;
    long top = -1;
    for (size_t c = 0; c < ncol; c++) {
        long i = class_index(names[c], prefix);
        if (i >= 0) {
            found++;
            top = i > top ? i : top;
        }
    }
    *k = 0;
    if (!found)
        return 0;
    if (top > CTL_MAX_CLASSES - 1) {
        snprintf(err, errlen, "more than %d classes", CTL_MAX_CLASSES);
        return -1;
    }
    if ((size_t)top + 1 != found) {
        snprintf(err, errlen, "columns %c0..%c%ld are not all present exactly once",
                 prefix, prefix, top);
        return -1;
    }
    if (!(*cols = malloc(found * sizeof **cols))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t c = 0; c < ncol; c++) {
        long i = class_index(names[c], prefix);
        if (i >= 0)
            (*cols)[i] = c;
    }
    *k = found;
    return 0;
}

static int known_name(const char *name)
{
    return strcmp(name, "y") == 0 || strcmp(name, "p") == 0 ||
           strcmp(name, "mean") == 0 || strcmp(name, "var") == 0 ||
           class_index(name, 'z') >= 0 || class_index(name, 'p') >= 0;
}

static size_t column(char *const *names, size_t ncol, const char *want)
{
    for (size_t c = 0; c < ncol; c++)
        if (strcmp(names[c], want) == 0)
            return c;
    return NONE;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A name that appears twice in the header, else NULL; -1 out of memory.
 * Sorted pointers, so O(n log n) for any number of columns. */
static int duplicate_name(char *const *names, size_t ncol, const char **dup)
{
    *dup = NULL;
    if (ncol < 2)
        return 0;
    char **sorted = malloc(ncol * sizeof *sorted);
    if (!sorted)
        return -1;
    memcpy(sorted, names, ncol * sizeof *sorted);
    qsort(sorted, ncol, sizeof *sorted, cmp_name);
    for (size_t c = 1; c < ncol && !*dup; c++)
        if (strcmp(sorted[c - 1], sorted[c]) == 0)
            *dup = sorted[c];
    free(sorted);
    return 0;
}

/* One warning line for all unknown columns but own, naming the first
 * three. */
static void warn_unknown(const char *path, char *const *names, size_t ncol,
                         const char *own)
{
    const char *first[3];
    size_t unknown = 0;
    for (size_t c = 0; c < ncol; c++)
        if (!known_name(names[c]) && !(own && strcmp(names[c], own) == 0) &&
            unknown++ < 3)
            first[unknown - 1] = names[c];
    if (unknown == 1)
        ctl_error(path, 1, "warning: ignoring unknown column '%s'", first[0]);
    else if (unknown > 1)
        ctl_error(path, 1, "warning: ignoring %zu unknown columns: '%s', '%s'%s%s%s%s",
                  unknown, first[0], first[1], unknown > 2 ? ", '" : "",
                  unknown > 2 ? first[2] : "", unknown > 2 ? "'" : "",
                  unknown > 3 ? ", ..." : "");
}

static int layout_init(pred_layout *l, const char *path, char *const *names, size_t ncol,
                       const char *own, int y_optional, char *err, size_t errlen);

int pred_layout_init(pred_layout *l, const char *path, char *const *names,
                     size_t ncol, const char *own, char *err, size_t errlen)
{
    return layout_init(l, path, names, ncol, own, 0, err, errlen);
}

int pred_layout_init_outputs(pred_layout *l, const char *path, char *const *names,
                             size_t ncol, char *err, size_t errlen)
{
    return layout_init(l, path, names, ncol, NULL, 1, err, errlen);
}

static int layout_init(pred_layout *l, const char *path, char *const *names, size_t ncol,
                       const char *own, int y_optional, char *err, size_t errlen)
{
    *l = (pred_layout){.col_y = NONE};
    const char *dup;
    if (duplicate_name(names, ncol, &dup) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (dup) {
        snprintf(err, errlen, "column '%s' appears twice", dup);
        return -1;
    }
    warn_unknown(path, names, ncol, own);
    if ((l->col_y = column(names, ncol, "y")) == NONE && !y_optional) {
        snprintf(err, errlen, "no column 'y' (the outcome)");
        return -1;
    }
    size_t kz, kp, *cz = NULL, *cp = NULL;
    if (class_columns(names, ncol, 'z', &cz, &kz, err, errlen) != 0 ||
        class_columns(names, ncol, 'p', &cp, &kp, err, errlen) != 0)
        goto err;
    size_t cbin = column(names, ncol, "p"), cmean = column(names, ncol, "mean"),
           cvar = column(names, ncol, "var");
    int forms = (kz > 0) + (kp > 0) + (cbin != NONE) + (cmean != NONE || cvar != NONE);
    if (forms != 1) {
        snprintf(err, errlen, forms ? "more than one output form in the header"
                                    : "no outputs: expected z0..z{K-1}, p0..p{K-1}, "
                                      "p, or mean and var");
        goto err;
    }
    if (kz || kp) {
        l->form = kz ? CALIB_FORM_LOGITS : CALIB_FORM_PROBS;
        l->k = l->width = kz ? kz : kp;
        l->col_x = kz ? cz : cp;
        if (l->k < 2) {
            snprintf(err, errlen, "need at least 2 classes");
            goto err;
        }
        return 0;
    }
    free(cz);
    free(cp);
    cz = cp = NULL;
    if (cbin != NONE) {
        l->form = CALIB_FORM_BINARY;
        l->k = 2;
        l->width = 1;
    } else {
        if (cmean == NONE || cvar == NONE) {
            snprintf(err, errlen, "regression needs both 'mean' and 'var'");
            goto err;
        }
        l->form = CALIB_FORM_GAUSSIAN;
        l->width = 2;
    }
    if (!(l->col_x = malloc(l->width * sizeof *l->col_x))) {
        snprintf(err, errlen, "out of memory");
        goto err;
    }
    l->col_x[0] = cbin != NONE ? cbin : cmean;
    if (l->width == 2)
        l->col_x[1] = cvar;
    return 0;
err:
    free(cz);
    free(cp);
    l->col_x = NULL;
    return -1;
}

int pred_layout_uses(const pred_layout *l, size_t c)
{
    if (c == l->col_y)
        return 1;
    for (size_t i = 0; i < l->width; i++)
        if (l->col_x[i] == c)
            return 1;
    return 0;
}

void pred_layout_text_unused(const pred_layout *l, unsigned char *text, size_t ncol)
{
    for (size_t c = 0; c < ncol; c++)
        if (!pred_layout_uses(l, c))
            text[c] = 1;
}

void pred_layout_free(pred_layout *l)
{
    free(l->col_x);
    l->col_x = NULL;
}

int pred_row(const pred_layout *l, const double *v, double *x, double *y,
             char *err, size_t errlen)
{
    int rc;
    for (size_t i = 0; i < l->width; i++)
        x[i] = v[l->col_x[i]];
    *y = l->col_y == NONE ? NAN : v[l->col_y];
    switch (l->form) {
    case CALIB_FORM_LOGITS: rc = calib_check_logits(x, l->k); break;
    case CALIB_FORM_PROBS: rc = calib_check_probs(x, l->k); break;
    case CALIB_FORM_BINARY: rc = calib_check_binary(x[0]); break;
    default: rc = calib_check_gaussian(x[0], x[1]); break;
    }
    if (rc == CALIB_OK && l->form != CALIB_FORM_GAUSSIAN && l->col_y != NONE)
        rc = calib_check_label(*y, l->k);
    if (rc != CALIB_OK) {
        if (rc == CALIB_ELABEL)
            snprintf(err, errlen, "label %.17g is not a class in [0, %zu)", *y, l->k);
        else
            snprintf(err, errlen, "%s", calib_strerror(rc));
        return -1;
    }
    return 0;
}
