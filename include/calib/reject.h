/*
 * Why a message or a record was rejected: one list for every decoder of
 * the protocol -- calibd's of the producers' messages (calib/protocol.h)
 * and the serving nodes' of calibd's (calib/pubmsg.h). Needs no msgpack.
 */
#ifndef CALIB_REJECT_H
#define CALIB_REJECT_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Why a message or a record was rejected. Every value has a stable snake_case
 * name (calib_reject_name) that the daemon uses as a counter label: never
 * renumber or rename; add new reasons before CALIB_REJ_COUNT.
 */
enum calib_reject {
    CALIB_REJ_NONE = 0,
    /* the whole message (calib_msg_decode) */
    CALIB_REJ_BAD_TOPIC,        /* topic not 1..128 bytes of [A-Za-z0-9._:-] */
    CALIB_REJ_BAD_MSGPACK,      /* undecodable, truncated, or a count > bytes left */
    CALIB_REJ_TOO_DEEP,         /* more than 32 nested arrays/maps */
    CALIB_REJ_TRAILING_BYTES,   /* bytes after the payload's one object */
    CALIB_REJ_NOT_A_MAP,        /* the payload is not a map */
    CALIB_REJ_BAD_KEY,          /* a key of the payload map is not a string */
    CALIB_REJ_DUPLICATE_KEY,    /* a known key appears twice */
    CALIB_REJ_BAD_VERSION,      /* "v" missing or not the positive integer 1 */
    CALIB_REJ_BAD_TYPE,         /* "type" missing, not a string, or unknown */
    CALIB_REJ_MISSING_KEY,      /* a required key other than "id" is absent */
    CALIB_REJ_MISSING_ID,       /* "id" absent (pred without "y", or label) */
    CALIB_REJ_KEY_TYPE,         /* a known key's value has the wrong type */
    CALIB_REJ_BIN_LENGTH,       /* a bin is not 4*N*W or 8*N*W bytes */
    CALIB_REJ_N_RANGE,          /* "n" not in 1..CALIB_PROTO_MAX_N */
    CALIB_REJ_K_RANGE,          /* K not in 2..CALIB_PROTO_MAX_K */
    CALIB_REJ_AMBIGUOUS_OUTPUT, /* zero or several of logits/probs/p/mean+var */
    CALIB_REJ_ARRAY_LENGTH,     /* an array does not hold N (or K) items */
    CALIB_REJ_NO_MEMORY,        /* msgpack-c could not allocate */
    /* one record (calib_msg_record) */
    CALIB_REJ_NONFINITE,        /* a number is NaN or infinite */
    CALIB_REJ_PROB_RANGE,       /* a probability outside [0, 1] */
    CALIB_REJ_PROB_SUM,         /* probs not summing to 1 within 1e-3 */
    CALIB_REJ_VAR_NONPOSITIVE,  /* var <= 0 */
    CALIB_REJ_LABEL_RANGE,      /* y not an integer class in [0, K) */
    CALIB_REJ_BAD_ID,           /* id empty, over 64 bytes, or not str/uint */
    /* the whole message again (added after the record reasons) */
    CALIB_REJ_BIN_AMBIGUOUS,    /* a row-form bin of logits/probs without "k"
                                   whose length fits both K float32 and K/2
                                   float64 (a multiple of 8), K unknown */
    /* the whole message, either side: a ZeroMQ message that is not
       exactly two frames (topic, payload) */
    CALIB_REJ_FRAMING,
    /* the whole message, calibd's own (calib_pubmsg_decode) */
    CALIB_REJ_MODEL_MISMATCH,   /* "model" differs from the topic */
    CALIB_REJ_BAD_METHOD,       /* "method" not 1..63 bytes of [A-Za-z0-9._-] */
    CALIB_REJ_BAD_PARAMS,       /* a parameter of the method missing; an
                                   unknown method's map empty, over
                                   CALIB_RECAL_MAX_PARAMS, or with a bad name
                                   (version 0, the identity, may have an
                                   empty map); an alert's "values" over
                                   CALIB_PUBMSG_MAX_VALUES */
    CALIB_REJ_BAD_VALUE,        /* a parameter non-finite or outside its
                                   method's domain (T <= 0; variance w <= 0
                                   or b < 0); "ts" non-finite */
    /* the whole message again: a prediction's "seg" not a map of at most
       CALIB_PROTO_MAX_SEG segment keys (1..64 bytes of [A-Za-z0-9_.-]) to
       values (1..64 bytes, none a control character; in the batch form
       also an array of n of them), or a key twice */
    CALIB_REJ_BAD_SEGMENT,
    CALIB_REJ_COUNT
};

/* "bad_topic", ...; "unknown" for a value outside the enum. */
const char *calib_reject_name(int reason);

/* 1 if the reason rejects one record of a batch (CALIB_REJ_NONFINITE ..
 * CALIB_REJ_BAD_ID), 0 if the whole message. */
int calib_reject_is_record(int reason);

#ifdef __cplusplus
}
#endif

#endif
