/* error.c — error strings, form names and version of libcalib. */
#include "config.h"

#include <string.h>

#include "calib/calib.h"

static const char *const form_names[] = {
    [CALIB_FORM_LOGITS] = "logits",
    [CALIB_FORM_PROBS] = "probs",
    [CALIB_FORM_BINARY] = "binary",
    [CALIB_FORM_GAUSSIAN] = "gaussian",
};
#define NFORMS (int)(sizeof form_names / sizeof form_names[0])

const char *calib_form_name(int form)
{
    return form >= 0 && form < NFORMS ? form_names[form] : "unknown";
}

int calib_form_parse(const char *name)
{
    for (int f = 0; name && f < NFORMS; f++)
        if (strcmp(name, form_names[f]) == 0)
            return f;
    return -1;
}

const char *calib_strerror(int err)
{
    switch (err) {
    case CALIB_OK: return "success";
    case CALIB_EINVAL: return "invalid argument";
    case CALIB_ENOMEM: return "out of memory";
    case CALIB_ENONFINITE: return "number is NaN or infinite";
    case CALIB_EPROB: return "probability outside [0, 1]";
    case CALIB_EPROBSUM: return "probabilities do not sum to 1 within 1e-3";
    case CALIB_EVAR: return "variance is not positive";
    case CALIB_ELABEL: return "label out of range";
    case CALIB_EEMPTY: return "no samples";
    case CALIB_ESTALE: return "sample older than the window";
    case CALIB_EFULL: return "store is full";
    }
    return "unknown error";
}

const char *calib_version(void)
{
    return PACKAGE_VERSION;
}
