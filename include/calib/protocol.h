/*
 * Protocol v1 decoder: a pure function from (topic, payload) to a decoded
 * message or a reject reason. No sockets, no I/O, never prints; see
 * calib_protocol(3) and the wire contract in calibd-protocol(7).
 *
 * Lifetime: strings and bins of a decoded message point into the payload,
 * which must stay alive and unchanged while the message is used (keep the
 * zmq_msg_t). A calib_msg can be decoded into again and again; it keeps its
 * msgpack zone between messages and releases it in calib_msg_destroy().
 *
 * This header includes <msgpack.h>: code that includes it needs msgpack's
 * compiler flags (pkg-config msgpack or msgpack-c). calib/calib.h does not
 * include it.
 */
#ifndef CALIB_PROTOCOL_H
#define CALIB_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "calib/calib.h"
#include "calib/reject.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_PROTO_VERSION 1
#define CALIB_PROTO_MAX_TOPIC 128  /* bytes of [A-Za-z0-9._:-] */
#define CALIB_PROTO_MAX_ID 64      /* bytes of a string id */
#define CALIB_PROTO_MAX_N 65536    /* records in a batch */
#define CALIB_PROTO_MAX_K 65536    /* classes of logits / probs */
#define CALIB_PROTO_MAX_DEPTH 32   /* nested arrays and maps, as msgpack-c */
#define CALIB_PROTO_MAX_SEG 8      /* segment keys of a prediction ("seg") */
#define CALIB_PROTO_MAX_SEG_NAME 64 /* bytes of a segment key or value */

enum calib_msg_type {
    CALIB_MSG_PRED = 1,
    CALIB_MSG_LABEL = 2,
};

enum calib_msg_id_kind {
    CALIB_MSG_ID_NONE = 0, /* no id (a pred that carries y) */
    CALIB_MSG_ID_STR = 1,  /* id, id_len bytes, not NUL-terminated */
    CALIB_MSG_ID_UINT = 2, /* id_num */
};

/* Private: where one column's values are. */
typedef struct calib_msg_col {
    int kind;                   /* CALIB_COL_* in protocol.c */
    size_t elem;                /* bins: 4 (float32) or 8 (float64) */
    const unsigned char *bin;   /* bins: little-endian elements */
    const msgpack_object *obj;  /* objects, one per value (or per row) */
} calib_msg_col;

/* Private: one segment key of a prediction and where its values are. */
typedef struct calib_msg_segcol {
    const char *key;
    size_t key_len;
    const msgpack_object *val; /* one string, or (batch form) n of them */
    int per_record;            /* val is an array of n strings */
} calib_msg_segcol;

/* What a rejected message had wrong, beyond the reason: for a log line
 * that tells the producer what to fix. */
typedef struct calib_msg_fault {
    const char *key;   /* the key at fault ("k", "logits", "y", ...), a
                          static string; NULL when no one key is (the topic,
                          undecodable bytes, a key that is not a string, a
                          prediction without any output) */
    size_t bin_bytes;  /* _BIN_LENGTH, _BIN_AMBIGUOUS: the bin's length */
    uint64_t bin_values; /* _BIN_LENGTH: the values it had to hold; 0 when
                            no K could be known (a row-form bin without "k") */
} calib_msg_fault;

typedef struct calib_msg {
    /* read-only after a successful calib_msg_decode */
    int type;                 /* enum calib_msg_type */
    int form;                 /* enum calib_form; pred only */
    int batch;                /* 1 if the batch form ("n" given) */
    size_t n;                 /* records: "n", or 1 in the row form */
    size_t k;                 /* K: classes; 2 for p; 0 for mean+var */
    size_t k_hint;            /* the caller's K for a row-form bin, or 0 */
    size_t width;             /* doubles per record: calib_form_width() */
    double ts;                /* scalar "ts"; NaN if absent or an array */
    const char *topic;        /* the topic (not NUL-terminated) */
    size_t topic_len;
    /* read-only after a rejection (zero after a success) */
    calib_msg_fault fault;
    /* private */
    calib_msg_col id, ts_col, y, out[2];
    calib_msg_segcol seg[CALIB_PROTO_MAX_SEG];
    size_t nseg;              /* segment keys of a pred ("seg"), read-only */
    msgpack_zone zone;        /* the decoded objects: cleared, never freed,
                                 between messages (no allocation per message
                                 below CALIB_MSG_ZONE bytes of objects) */
    int zone_ready;
    msgpack_object root;
} calib_msg;

/* The objects of a message that decoding keeps without allocating: about
 * 2,700 msgpack objects (a batch of 1,000 rows with ids and outcomes). */
#define CALIB_MSG_ZONE 65536

/* One record of a decoded message. */
typedef struct calib_msg_rec {
    int id_kind;         /* enum calib_msg_id_kind */
    const char *id;      /* CALIB_MSG_ID_STR: into the payload */
    size_t id_len;
    uint64_t id_num;     /* CALIB_MSG_ID_UINT */
    int has_y;
    double y;            /* the outcome, if has_y */
    double ts;           /* seconds since the epoch; NaN: use receive time */
    const char *fault_key; /* after a record-level reason: the key at fault
                              ("id", "ts", "logits", "var", "y", ...) */
} calib_msg_rec;

void calib_msg_init(calib_msg *m);
void calib_msg_destroy(calib_msg *m);

/*
 * Decodes one message. Returns CALIB_REJ_NONE and fills m, or a reason that
 * rejects the whole message (then m->n is 0 and m->fault says what was at
 * fault). Never reads outside topic and payload, never allocates more than
 * a small multiple of payload_len.
 */
int calib_msg_decode(calib_msg *m, const void *topic, size_t topic_len,
                     const void *payload, size_t payload_len);

/*
 * As calib_msg_decode, with the K the model is known to have (0 if not yet
 * known): a row-form bin of logits or probs without "k" is then read as K
 * values, its element size told by its length (4K or 8K bytes). Without "k"
 * and without a hint, such a bin is read as float32 when its length is a
 * multiple of 4 and not of 8; a multiple of 8 could be K float32 or K/2
 * float64 and is rejected as CALIB_REJ_BIN_AMBIGUOUS, never guessed.
 */
int calib_msg_decode_k(calib_msg *m, const void *topic, size_t topic_len,
                       const void *payload, size_t payload_len, size_t k_hint);

/*
 * Extracts record i < m->n: fills out and, for a pred, the m->width outputs
 * into x (logits or probs, p, or mean then var; may be NULL for a label).
 * Returns CALIB_REJ_NONE, a record-level reason (out->fault_key names the
 * key), or CALIB_EINVAL if i is out of range or m holds no decoded message.
 * A label's y is only checked to be finite: its range depends on the model
 * (calib_proto_check_y).
 */
int calib_msg_record(const calib_msg *m, size_t i, calib_msg_rec *out,
                     double *x);

/*
 * Segment j < m->nseg of record i < m->n of a decoded prediction: its key
 * and value (into the payload, not NUL-terminated), both checked at
 * decoding. CALIB_OK, or CALIB_EINVAL for an index out of range.
 */
int calib_msg_seg(const calib_msg *m, size_t i, size_t j, const char **key, size_t *key_len,
                  const char **val, size_t *val_len);

/* 1 when the bytes make a segment key: 1..CALIB_PROTO_MAX_SEG_NAME bytes
 * of [A-Za-z0-9_.-]; else 0. */
int calib_proto_seg_key_ok(const void *s, size_t len);
/* 1 when the bytes make a segment value: 1..CALIB_PROTO_MAX_SEG_NAME
 * bytes of valid UTF-8 without a control character (C0, DEL, C1); else 0. */
int calib_proto_seg_value_ok(const void *s, size_t len);

/*
 * Checks an outcome against a model of form `form` and k classes: an integer
 * class in [0, k) (0 or 1 for CALIB_FORM_BINARY), or any finite number for
 * CALIB_FORM_GAUSSIAN. Returns CALIB_REJ_NONE, _NONFINITE or _LABEL_RANGE.
 */
int calib_proto_check_y(int form, size_t k, double y);

/*
 * The value of a msgpack number (positive or negative integer, float32,
 * float64) in *out; returns 0 for any other type.
 */
int calib_proto_number(const msgpack_object *o, double *out);

/* 1 when the msgpack string s is the NUL-terminated lit, byte for byte. */
int calib_proto_str_is(const msgpack_object_str *s, const char *lit);

/* 1 when topic is a model name: 1..CALIB_PROTO_MAX_TOPIC bytes of
 * [A-Za-z0-9._:-]; else 0. */
int calib_proto_topic_ok(const void *topic, size_t len);

/*
 * Walks raw msgpack bytes without allocating: one complete object, every
 * container's declared count no larger than the bytes left, at most
 * CALIB_PROTO_MAX_DEPTH nested containers. Returns CALIB_REJ_NONE with *end
 * the length of the object, or _BAD_MSGPACK / _TOO_DEEP.
 */
int calib_proto_scan(const void *buf, size_t len, size_t *end);

#ifdef __cplusplus
}
#endif

#endif
