/*
 * pred_csv.h — the prediction CSV of calibctl(1): a header naming a label
 * column y and the model's outputs (z0..z{K-1} logits, p0..p{K-1}
 * probabilities, p for a binary classifier, or mean and var), one row per
 * prediction.
 */
#ifndef CALIBCTL_PRED_CSV_H
#define CALIBCTL_PRED_CSV_H

#include <stddef.h>

typedef struct pred_layout {
    int form;      /* enum calib_form */
    size_t k;      /* classes; 2 for binary, 0 for gaussian */
    size_t width;  /* outputs per row */
    size_t col_y;
    size_t *col_x; /* [width] column of each output */
} pred_layout;

/* Maps the header. Unknown columns are warned about on stderr and ignored,
 * but for the column named `own` (NULL: none), which the caller reads.
 * Returns 0, or -1 with err set. */
int pred_layout_init(pred_layout *l, const char *path, char *const *names,
                     size_t ncol, const char *own, char *err, size_t errlen);
/* As pred_layout_init, for a file of predictions whose column y may be
 * missing (pred_row then gives y = NaN and checks none): every column but
 * the outputs and y is ignored. */
int pred_layout_init_outputs(pred_layout *l, const char *path, char *const *names,
                             size_t ncol, char *err, size_t errlen);
/* 1 when column c is one pred_row reads (y or an output). */
int pred_layout_uses(const pred_layout *l, size_t c);
/* Marks in text[ncol] every column pred_row does not read: the reader then
 * takes them as text, so that an ignored column (an id, a segment) is
 * ignored whatever it holds. */
void pred_layout_text_unused(const pred_layout *l, unsigned char *text, size_t ncol);
void pred_layout_free(pred_layout *l);

/* Extracts and checks one row's outputs x[width] and outcome y. Returns 0,
 * or -1 with err set. */
int pred_row(const pred_layout *l, const double *v, double *x, double *y,
             char *err, size_t errlen);
#endif
