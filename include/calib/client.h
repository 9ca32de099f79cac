/*
 * Serving-node client: follows the recalibration parameters calibd publishes
 * ("params" messages of calibd-protocol(7)) and applies them to a model's
 * outputs. See calib_client(3).
 *
 * A client owns one ZeroMQ SUB socket, connected to one or more calibd PUB
 * endpoints and subscribed to one or more model names (exact match: the SUB
 * prefix filter is checked again against frame 0). It keeps, per model, the
 * newest parameters received: a message whose version is not greater than
 * the one held is ignored, so repeats and late duplicates are harmless.
 * Until the first message a model holds version 0, the identity.
 *
 * Threads: the socket is used by one thread at a time -- the one inside
 * calib_client_poll(), or the background thread of calib_client_start();
 * calib_client_connect(), _subscribe() and _poll() return CALIB_ECLIENT_BUSY
 * while another thread holds it. calib_client_apply(), _get(), _version()
 * and _stats() may be called from any number of threads at any time: a
 * reader sees the old or the new parameters in full, never a mix.
 *
 * Lives in libcalib_client (link -lcalib_client -lcalib); libcalib itself
 * has no ZeroMQ. This header needs neither <zmq.h> nor <msgpack.h>.
 */
#ifndef CALIB_CLIENT_H
#define CALIB_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"
#include "calib/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_CLIENT_MODEL_MAX 128     /* bytes of a model name (topic) */
#define CALIB_CLIENT_METHOD_MAX CALIB_PLUGIN_NAME_MAX
#define CALIB_CLIENT_PARAM_NAME_MAX 31 /* bytes of a parameter's name */
#define CALIB_CLIENT_MAX_MODELS 256    /* subscriptions per client */
#define CALIB_CLIENT_MAX_MSG_SIZE (1 << 20) /* default ZMQ_MAXMSGSIZE */

/* Codes of the client, beyond the CALIB_E* of calib.h and plugin.h. */
enum calib_client_error {
    CALIB_ECLIENT_ZMQ = -80,    /* a ZeroMQ call failed; errno tells why */
    CALIB_ECLIENT_MODEL = -81,  /* not a subscribed model */
    CALIB_ECLIENT_METHOD = -82, /* the held method is unknown here (no
                                   built-in, not in the registry): its
                                   parameters are kept, not applicable */
    CALIB_ECLIENT_FORM = -83,   /* the held method does not handle this
                                   output form */
    CALIB_ECLIENT_BUSY = -84,   /* another thread holds the socket */
};

/*
 * Why a received message was not taken. Names (calib_client_reject_name)
 * are stable snake_case counter labels: never renumber; add before
 * CALIB_CLIENT_REJ_COUNT.
 */
enum calib_client_reject {
    CALIB_CLIENT_REJ_NONE = 0,
    CALIB_CLIENT_REJ_OTHER_TYPE,     /* not a rejection: a well-formed
                                        message of another type (an alert
                                        for calib_client_decode, ...) */
    CALIB_CLIENT_REJ_FRAMING,        /* not exactly two frames */
    CALIB_CLIENT_REJ_BAD_TOPIC,      /* not 1..128 bytes of [A-Za-z0-9._:-] */
    CALIB_CLIENT_REJ_BAD_MSGPACK,    /* undecodable, truncated, or a declared
                                        count larger than the bytes left */
    CALIB_CLIENT_REJ_TOO_DEEP,       /* more than 32 nested containers */
    CALIB_CLIENT_REJ_TRAILING_BYTES, /* bytes after the one object */
    CALIB_CLIENT_REJ_NOT_A_MAP,      /* the payload is not a map */
    CALIB_CLIENT_REJ_BAD_KEY,        /* a key of the payload is not a string */
    CALIB_CLIENT_REJ_DUPLICATE_KEY,  /* a known key (or parameter) twice */
    CALIB_CLIENT_REJ_BAD_VERSION,    /* "v" missing or not the integer 1 */
    CALIB_CLIENT_REJ_BAD_TYPE,       /* "type" missing or not a string */
    CALIB_CLIENT_REJ_MISSING_KEY,    /* model, version, method or params */
    CALIB_CLIENT_REJ_KEY_TYPE,       /* a known key's value has the wrong type */
    CALIB_CLIENT_REJ_MODEL_MISMATCH, /* "model" differs from the topic */
    CALIB_CLIENT_REJ_BAD_METHOD,     /* not 1..63 bytes of [A-Za-z0-9._-] */
    CALIB_CLIENT_REJ_BAD_PARAMS,     /* a parameter of the method missing; an
                                        unknown method's map empty, over
                                        CALIB_RECAL_MAX_PARAMS, or with a bad
                                        name (version 0, the identity, may
                                        have an empty map) */
    CALIB_CLIENT_REJ_BAD_VALUE,      /* a parameter non-finite or outside its
                                        method's domain (T <= 0; variance
                                        w <= 0 or b < 0); "ts" non-finite */
    CALIB_CLIENT_REJ_NO_MEMORY,      /* msgpack-c could not allocate */
    CALIB_CLIENT_REJ_COUNT
};

/* A set of parameters: decoded from one message, or held for a model. */
typedef struct calib_client_params {
    char model[CALIB_CLIENT_MODEL_MAX + 1];
    uint64_t version;                      /* 0: the identity */
    char method[CALIB_CLIENT_METHOD_MAX + 1]; /* "" for version 0 */
    const calib_plugin *desc;  /* the method's descriptor; NULL if unknown
                                  (or version 0) */
    unsigned nparams;
    /* In the method's order (param_names) when it is known, else in the
     * order of the message. */
    char names[CALIB_RECAL_MAX_PARAMS][CALIB_CLIENT_PARAM_NAME_MAX + 1];
    double values[CALIB_RECAL_MAX_PARAMS];
    /* Informational; NaN (n: 0) when the message did not carry them. */
    double ts;             /* publish time, seconds since the epoch */
    uint64_t n;            /* labelled samples the fit used */
    double improvement;    /* "improvement" (or its "mean") */
    double ci[2];          /* "ci" (or improvement's "ci") */
} calib_client_params;

/* An alert, for calib_client_opts.on_alert; strings are NUL-terminated,
 * truncated copies ("" when absent). */
typedef struct calib_client_alert {
    char model[CALIB_CLIENT_MODEL_MAX + 1];
    char severity[16];
    char kind[32];
    char message[512];
    double ts;                 /* NaN when absent */
    const void *payload;       /* the raw msgpack map, valid during the */
    size_t payload_len;        /*   callback only */
} calib_client_alert;

/* Counters since creation; each read atomically, not all at one instant. */
typedef struct calib_client_stats {
    uint64_t received;     /* messages read from the socket */
    uint64_t accepted;     /* params that installed a newer version */
    uint64_t stale;        /* params whose version was not newer */
    uint64_t alerts;       /* well-formed alerts */
    uint64_t other;        /* well-formed messages of another type */
    uint64_t unsubscribed; /* topics that only prefix-matched a model */
    uint64_t rejected;     /* malformed: the sum of reject[] */
    uint64_t reject[CALIB_CLIENT_REJ_COUNT]; /* by calib_client_reject */
} calib_client_stats;

/* Creation options; a zero-initialised struct (or NULL) gives defaults. */
typedef struct calib_client_opts {
    /* Methods beyond the built-ins, resolved when a message is accepted (on
     * the receiving thread). Must outlive the client and not change while
     * the client receives. NULL: built-ins only. */
    const calib_plugin_registry *registry;
    /* Called on the receiving thread after a newer version is installed,
     * and for each alert of a subscribed model. They may call
     * calib_client_apply/_get/_version/_stats, not _poll. */
    void (*on_params)(const calib_client_params *p, void *arg);
    void (*on_alert)(const calib_client_alert *a, void *arg);
    void *arg;
    void *zmq_ctx;         /* NULL: the client makes (and ends) its own */
    int64_t max_msg_size;  /* ZMQ_MAXMSGSIZE; 0: CALIB_CLIENT_MAX_MSG_SIZE */
    int rcvhwm;            /* ZMQ_RCVHWM; 0: ZeroMQ's default */
} calib_client_opts;

typedef struct calib_client calib_client;

/* Creates a client (not yet connected or subscribed) in *out. CALIB_OK,
 * CALIB_ENOMEM or CALIB_ECLIENT_ZMQ. */
int calib_client_create(calib_client **out, const calib_client_opts *opts);

/* Stops the background thread if it runs, closes the socket, frees. */
void calib_client_destroy(calib_client *c);

/*
 * Connects to a PUB endpoint: "tcp://host:port", "ipc://...", ... A leading
 * '>' (connect) or '@' (bind) is understood as in calibd's configuration.
 * May be called more than once. CALIB_EINVAL, CALIB_ECLIENT_ZMQ (errno set),
 * CALIB_ECLIENT_BUSY.
 */
int calib_client_connect(calib_client *c, const char *endpoint);

/*
 * Subscribes to a model (1..128 bytes of [A-Za-z0-9._:-]); it holds version
 * 0 until parameters arrive. Again for a subscribed model is a no-op.
 * CALIB_EINVAL, CALIB_EFULL (CALIB_CLIENT_MAX_MODELS), CALIB_ENOMEM,
 * CALIB_ECLIENT_ZMQ, CALIB_ECLIENT_BUSY.
 */
int calib_client_subscribe(calib_client *c, const char *model);

/*
 * Waits up to timeout_ms (-1: forever, 0: not at all) for messages, then
 * handles those queued (at most 1024). Returns the number of messages read
 * (0 on timeout or when a signal interrupted the wait), or
 * CALIB_ECLIENT_ZMQ, CALIB_ECLIENT_BUSY. Callbacks run inside.
 */
int calib_client_poll(calib_client *c, int timeout_ms);

/* Runs calib_client_poll in a background thread until calib_client_stop.
 * CALIB_ECLIENT_BUSY if it already runs or a poll is in progress;
 * CALIB_ENOMEM if no thread could be made. */
int calib_client_start(calib_client *c);

/* Stops and joins the background thread (at once, without waiting for a
 * timeout). CALIB_OK if none ran; else the thread's last error, if any. */
int calib_client_stop(calib_client *c);

/*
 * Applies the parameters held for model to one prediction x of the given
 * form (calib_form: k logits, k probabilities, a binary p, or mean then
 * variance) and writes the recalibrated one to out: k probabilities for
 * logits or probabilities, p, or mean and variance -- as many doubles as x;
 * out may equal x (in place). k: classes (>= 2) for logits and probs,
 * ignored for binary (2) and gaussian. x is checked (calib_check_*).
 * Version 0 applies the identity (softmax for logits). *version (if not
 * NULL) receives the version applied.
 *
 * Returns CALIB_OK; CALIB_EINVAL (bad form or k, or the method refuses the
 * shape, e.g. platt with k > 2), a check's CALIB_E* code, CALIB_ECLIENT_MODEL,
 * CALIB_ECLIENT_METHOD or CALIB_ECLIENT_FORM, leaving out untouched.
 * Thread-safe, lock-free for readers, never allocates.
 */
int calib_client_apply(calib_client *c, const char *model, int form, size_t k,
                       const double *x, double *out, uint64_t *version);

/* As calib_client_apply, with a set of parameters the caller holds (from
 * calib_client_get or calib_client_decode): one version for a batch. */
int calib_client_params_apply(const calib_client_params *p, int form, size_t k,
                              const double *x, double *out);

/* Copies the parameters held for model. CALIB_OK or CALIB_ECLIENT_MODEL. */
int calib_client_get(calib_client *c, const char *model,
                     calib_client_params *out);

/* The version held for model in *version. CALIB_OK or CALIB_ECLIENT_MODEL. */
int calib_client_version(calib_client *c, const char *model,
                         uint64_t *version);

void calib_client_stats_get(calib_client *c, calib_client_stats *out);

/*
 * Decodes one params message: topic (frame 0) and payload (frame 1), fully
 * validated. Methods are resolved with calib_plugin_find(registry, method).
 * Returns CALIB_CLIENT_REJ_NONE and fills out; CALIB_CLIENT_REJ_OTHER_TYPE
 * for a well-formed message of another type; or the reason it is rejected
 * (out is then unspecified); CALIB_EINVAL if out is NULL. Pure: no I/O, allocations bounded by a small
 * multiple of payload_len, never reads outside the buffers.
 */
int calib_client_decode(const void *topic, size_t topic_len,
                        const void *payload, size_t payload_len,
                        const calib_plugin_registry *registry,
                        calib_client_params *out);

/* The same for an alert: CALIB_CLIENT_REJ_NONE, _OTHER_TYPE for another
 * type (params included), or a reason. */
int calib_client_decode_alert(const void *topic, size_t topic_len,
                              const void *payload, size_t payload_len,
                              calib_client_alert *out);

/* "framing", "bad_topic", ...; "unknown" for a value outside the enum. */
const char *calib_client_reject_name(int reason);

/* calib_plugin_strerror(), knowing the CALIB_ECLIENT_* codes too. */
const char *calib_client_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
