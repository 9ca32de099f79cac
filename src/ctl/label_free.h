/* label_free.h — calibctl score --label-free (label_free.c). */
#ifndef CALIBCTL_LABEL_FREE_H
#define CALIBCTL_LABEL_FREE_H

#include "cfg.h"

/* The label-free figures of the predictions in path (in their order; a
 * column y, if any, is not read), at the settings mc (calibd's), with the
 * reference priors from the labels of the file `reference` (NULL: none),
 * printed as JSON on stdout. Returns a CTL_* code, errors on stderr. */
int score_label_free(const char *path, const char *reference, const model_cfg *mc);

#endif
