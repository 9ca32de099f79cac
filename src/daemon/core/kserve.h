/* kserve.h — KServe's payload logger, unchanged, pointed at calibd
 * (calibd(8), KSERVE): the body of an inference response it sends as a
 * CloudEvent (ce-type org.kubeflow.serving.inference.response), in the V1
 * protocol ({"predictions": ...}) or the V2 / Open Inference Protocol
 * ({"outputs": [{"name", "shape", "datatype", "data"}], data flat
 * row-major), made into one protocol v1 "pred" message for the ingest
 * path. Pure: no I/O. */
#ifndef CALIBD_KSERVE_H
#define CALIBD_KSERVE_H

#include <stddef.h>

#include "calib/mpw.h"

#define KSERVE_ID_MAX 64 /* bytes of a prediction id (protocol v1) */

/* Which output is read, and as what: [model NAME] kserve_output and
 * kserve_form (calibd.conf(5)). */
typedef struct kserve_opts {
    const char *output; /* the tensor's name (V2); "" or NULL: the first usable */
    int form;           /* CALIB_FORM_LOGITS, _PROBS, _BINARY (p), or -1: rows
                           that are probability vectors (non-negative, summing
                           to 1 within 1e-6) read as probabilities */
} kserve_opts;

/* The response body json[0..len) as one "pred" message in w: n rows of
 * the chosen output, with the ids id (one row) or id/0 .. id/(n-1). Returns
 * n >= 1; 0 when the body holds no usable output (why says what: the
 * event is counted and ignored); -1 when it is no JSON object, or an id
 * would pass KSERVE_ID_MAX bytes (why says what). */
int kserve_to_msg(const char *json, size_t len, const char *id, const kserve_opts *o,
                  calib_mpw *w, char *why, size_t whylen);

#endif
