/* reject.c — the daemon's rejection reasons (reject.h). */
#include "reject.h"

const char *reject_name(int reason)
{
    switch (reason) {
    case REJ_UNKNOWN_MODEL: return "unknown_model";
    case REJ_TOO_MANY_MODELS: return "too_many_models";
    case REJ_SHAPE: return "shape_mismatch";
    case REJ_MEMORY_LIMIT: return "memory_limit";
    case REJ_BAD_JSON: return "bad_json";
    case REJ_OTHER_SOURCE: return "other_source";
    case REJ_INTERNAL: return "internal";
    }
    return calib_reject_name(reason);
}

_Static_assert((int)CALIB_REJ_COUNT <= (int)REJ_UNKNOWN_MODEL,
               "the decoder's reasons end before the daemon's");
_Static_assert(REJ_INTERNAL < REJ_MAX, "every reason has a counter");

int reject_count(uint64_t counts[REJ_MAX], int reason)
{
    int known = (reason > CALIB_REJ_NONE && reason < CALIB_REJ_COUNT) ||
                (reason >= REJ_UNKNOWN_MODEL && reason < REJ_INTERNAL);
    reason = known ? reason : REJ_INTERNAL;
    counts[reason]++;
    return reason;
}
