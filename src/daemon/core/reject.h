/* reject.h — why the daemon refuses a message: the decoders' reasons
 * (calib/reject.h) and the daemon's own, their names (the counters'
 * labels in status and /metrics) and their counting. */
#ifndef CALIBD_REJECT_H
#define CALIBD_REJECT_H

#include <stdint.h>

#include "calib/reject.h"

/* Reasons the daemon adds to the decoders' (calib_reject, which has
 * CALIB_REJ_FRAMING and CALIB_REJ_NO_MEMORY: a model's state that could
 * not be allocated counts as no_memory too). */
enum daemon_reject {
    REJ_UNKNOWN_MODEL = 100, /* auto_models = no and the model is not configured */
    REJ_TOO_MANY_MODELS,
    REJ_SHAPE,         /* K or output form differs from the model's */
    REJ_MEMORY_LIMIT,  /* the model would take the models past memory_limit */
    REJ_BAD_JSON,      /* an HTTP body that is no JSON object (json_msg.h) */
    REJ_OTHER_SOURCE,  /* a model fed from a Kafka partition (kafka.h) takes
                          messages from that partition only */
    REJ_INTERNAL,      /* a code that is no reason: a bug, counted, not lost */
};
#define REJ_MAX 128 /* counters per model, indexed by reason */

const char *reject_name(int reason);
/* Counts a rejection in counts[REJ_MAX]: a reason outside the decoder's
 * (calib_reject) and the daemon's own counts as REJ_INTERNAL. Returns the
 * reason counted. */
int reject_count(uint64_t counts[REJ_MAX], int reason);

#endif
