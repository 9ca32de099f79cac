/*
 * bad_abi.c — a plugin that claims the ABI version after the current one,
 * as one built against a future libcalib would. test_plugin checks that the
 * loader refuses it by that version alone, before using any other field.
 */
#include "calib/plugin.h"

static int never_fit(const calib_dataset *ds, const calib_recal_opts *opts,
                     calib_recal_result *res)
{
    return CALIB_EINVAL;
}

static int never_apply(const double *params, int form, size_t k,
                       const double *x, double *out)
{
    return CALIB_EINVAL;
}

const calib_plugin calib_plugin_descriptor = {
    .abi_version = CALIB_PLUGIN_ABI_VERSION + 1,
    .name = "bad_abi",
    .summary = "built against another ABI version",
    .forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS),
    .nparams = 1,
    .param_names = {"T"},
    .identity = {1},
    .fit = never_fit,
    .apply = never_apply,
};
