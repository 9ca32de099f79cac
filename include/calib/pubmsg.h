/*
 * The messages calibd publishes to serving nodes ("params" and "alert" of
 * calibd-protocol(7)): one codec, one key table. calibd writes them with
 * calib_params_msg_write / calib_alert_msg_write, serving nodes
 * (libcalib_client) read them with calib_pubmsg_decode, and a round trip
 * gives back what was written. See calib_protocol(3).
 *
 * The writers take a calib_mpw (calib/mpw.h, which needs msgpack); this
 * header itself needs neither msgpack nor ZeroMQ.
 */
#ifndef CALIB_PUBMSG_H
#define CALIB_PUBMSG_H

#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"
#include "calib/plugin.h"
#include "calib/recal.h"
#include "calib/reject.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_PUBMSG_MODEL_MAX 128     /* bytes of a model name (topic) */
#define CALIB_PUBMSG_PARAM_NAME_MAX 31 /* bytes of a parameter's name */
#define CALIB_PUBMSG_MAX_VALUES 16     /* an alert's "values" */
#define CALIB_PUBMSG_VALUE_NAME_MAX 31 /* bytes of a value's name */
#define CALIB_PUBMSG_MAX_SEGMENTS 16   /* a params message's "segments" */
#define CALIB_PUBMSG_SEG_NAME_MAX 64   /* bytes of a segment key or value */
#define CALIB_PUBMSG_MAX_WEIGHTS 64    /* a params message's "prior_weights" */
/* "v" of a params message holding "prior_weights": readers that do not
 * know them refuse the message (bad_version) rather than misapply it */
#define CALIB_PUBMSG_VERSION_WEIGHTS 2
/* The most bytes a message written here takes, its topic frame included:
 * every field is bounded (tests/unit/test_pubmsg.c writes the largest) */
#define CALIB_PUBMSG_MAX_BYTES 10240

enum calib_pubmsg_type {
    CALIB_PUBMSG_OTHER = 0,  /* well formed, of a type not decoded here */
    CALIB_PUBMSG_PARAMS = 1,
    CALIB_PUBMSG_ALERT = 2,
};

/* A version's estimated expected scores ("before", "after"); NaN: absent
 * (classification carries brier and log, regression dss; version 0 none). */
typedef struct calib_pubmsg_scores {
    double brier, log, dss;
} calib_pubmsg_scores;

/* One segment's own parameters (the extension "segments" of a params
 * message): for predictions whose segment `key` has `value`. */
typedef struct calib_params_segment {
    char key[CALIB_PUBMSG_SEG_NAME_MAX + 1];
    char value[CALIB_PUBMSG_SEG_NAME_MAX + 1];
    double values[CALIB_RECAL_MAX_PARAMS]; /* in the order of names[] */
} calib_params_segment;

/* A "params" message. */
typedef struct calib_params_msg {
    char model[CALIB_PUBMSG_MODEL_MAX + 1];
    uint64_t version;                      /* 0: the identity */
    char method[CALIB_PLUGIN_NAME_MAX + 1]; /* calibd's version 0: "identity" */
    const calib_plugin *desc;  /* decoded: the method's descriptor; NULL if
                                  unknown (or version 0). Not written. */
    unsigned nparams;
    /* In the method's order (param_names) when it is known, else in the
     * order of the message. */
    char names[CALIB_RECAL_MAX_PARAMS][CALIB_PUBMSG_PARAM_NAME_MAX + 1];
    double values[CALIB_RECAL_MAX_PARAMS];
    /* Informational: NaN (n, shadow_n: 0) when the message did not carry
     * them; a NaN ts, published or score is not written. */
    double ts;             /* send time, seconds since the epoch */
    double published;      /* when this version was first published */
    uint64_t n;            /* labelled samples the fit used */
    uint64_t shadow_n;     /* pairs the shadow gate scored */
    calib_pubmsg_scores before, after;
    double improvement;    /* "improvement" (or its "mean") */
    double ci[2];          /* "ci" (or improvement's "ci") */
    /* "segments": per segment, parameters of the same method that apply
     * instead of values[] to the predictions of that segment; where a
     * prediction has several, the first in this order. Written only when
     * nsegments > 0. */
    unsigned nsegments;
    calib_params_segment segments[CALIB_PUBMSG_MAX_SEGMENTS];
    /* "prior_weights": the prior correction of a label shift, applied
     * after the method's map (and a segment's) by calib_prior_weigh;
     * nweights = K, or 0: none. A message holding them is written with
     * "v": CALIB_PUBMSG_VERSION_WEIGHTS. */
    unsigned nweights;
    double weights[CALIB_PUBMSG_MAX_WEIGHTS];
    int label_free; /* "label_free": true: published before any label
                       judged it (written only when true) */
} calib_params_msg;

/* The segment parameters of p that apply to a prediction whose segments
 * are keys[i] = values[i], i < n (NUL-terminated strings): the first of
 * p->segments whose key and value the prediction has, or NULL. */
const calib_params_segment *calib_params_segment_find(const calib_params_msg *p,
                                                      const char *const *keys,
                                                      const char *const *values, size_t n);

/* An "alert" message; strings are NUL-terminated ("" when absent),
 * truncated when decoded. */
typedef struct calib_alert_msg {
    char model[CALIB_PUBMSG_MODEL_MAX + 1];
    char severity[16];     /* "warning", "critical" */
    char kind[32];         /* "drift", "threshold", "refit", ... */
    char message[512];
    double ts;             /* NaN when absent */
    unsigned nvalues;      /* "values": the figures that raised it */
    char value_names[CALIB_PUBMSG_MAX_VALUES][CALIB_PUBMSG_VALUE_NAME_MAX + 1];
    double values[CALIB_PUBMSG_MAX_VALUES]; /* NaN: nil */
    const void *payload;   /* decoded: the raw msgpack map, valid as long */
    size_t payload_len;    /*   as the buffer decoded. Not written. */
} calib_alert_msg;

/* One decoded message: type tells which member is filled. */
typedef struct calib_pubmsg {
    int type; /* enum calib_pubmsg_type */
    calib_params_msg params;
    calib_alert_msg alert;
} calib_pubmsg;

/* An empty params message for model: version 0, no parameters, every
 * informational figure absent (NaN, 0). */
void calib_params_msg_init(calib_params_msg *m, const char *model);
/* The same for an alert. */
void calib_alert_msg_init(calib_alert_msg *a, const char *model);

/*
 * Decodes one message: topic (frame 0) and payload (frame 1), fully
 * validated. Methods are resolved with calib_plugin_find(registry, method)
 * (NULL: the built-ins only). Returns CALIB_REJ_NONE and fills out (type
 * CALIB_PUBMSG_OTHER for a well-formed message of another type), or the
 * reason it is rejected (out is then unspecified); CALIB_EINVAL if out is
 * NULL. Pure: no I/O, allocations bounded by a small multiple of
 * payload_len, never reads outside the buffers. Unknown keys are ignored
 * (the protocol grows by adding keys).
 */
int calib_pubmsg_decode(const void *topic, size_t topic_len,
                        const void *payload, size_t payload_len,
                        const calib_plugin_registry *registry,
                        calib_pubmsg *out);

struct calib_mpw;

/*
 * Writes one message as a map into w (after what w holds): "v", "type",
 * "model", then the fields. A NaN ts, published or score is not written;
 * "n", "shadow_n", "improvement" and "ci" always are (a NaN as nil), as are
 * an alert's "values". Returns calib_mpw_error(w).
 */
int calib_params_msg_write(struct calib_mpw *w, const calib_params_msg *m);
int calib_alert_msg_write(struct calib_mpw *w, const calib_alert_msg *a);

#ifdef __cplusplus
}
#endif

#endif
