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
#include "calib/pubmsg.h"
#include "calib/reject.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * A set of parameters: decoded from one message, or held for a model
 * (calib/pubmsg.h). Until the first message a model holds version 0 with
 * no parameters and NaN figures.
 */
typedef calib_params_msg calib_client_params;

/* An alert, for calib_client_opts.on_alert (calib/pubmsg.h); its payload
 * is valid during the callback only. */
typedef calib_alert_msg calib_client_alert;

/* Counters since creation; each read atomically, not all at one instant. */
typedef struct calib_client_stats {
    uint64_t received;     /* messages read from the socket */
    uint64_t accepted;     /* params that installed a newer version */
    uint64_t stale;        /* params whose version was not newer */
    uint64_t alerts;       /* well-formed alerts */
    uint64_t other;        /* well-formed messages of another type */
    uint64_t unsubscribed; /* topics that only prefix-matched a model */
    uint64_t rejected;     /* malformed: the sum of reject[] */
    uint64_t reject[CALIB_REJ_COUNT]; /* by reason (calib/reject.h): the
                                         decoder's, and CALIB_REJ_FRAMING */
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

/* Makes the client a CURVE client of calibd (calib/curve.h): key is this
 * node's key pair file (NAME.key_secret), server_key calibd's public key
 * file. Call before calib_client_connect; needed when calibd runs with
 * curve_secret_key. CALIB_OK, CALIB_EINVAL, CALIB_ECLIENT_BUSY, or
 * CALIB_ECURVE_KEY / CALIB_ECLIENT_ZMQ with err (errlen bytes) saying why. */
int calib_client_curve(calib_client *c, const char *key, const char *server_key, char *err,
                       size_t errlen);

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
 * calib_client_get or calib_pubmsg_decode): one version for a batch. */
int calib_client_params_apply(const calib_client_params *p, int form, size_t k,
                              const double *x, double *out);

/*
 * As calib_client_apply for a prediction of known segments, keys[i] =
 * values[i] for i < nseg (NUL-terminated strings, as the producer sends
 * them in "seg"): the held version's parameters for the first of its
 * segments ("segments" of the params message) that the prediction has,
 * else the model's own. nseg 0 is calib_client_apply. A model with
 * segment parameters is read under a mutex (the lock-free path stays for
 * the others). Returns as calib_client_apply.
 */
int calib_client_apply_seg(calib_client *c, const char *model, int form, size_t k,
                           const double *x, double *out, const char *const *keys,
                           const char *const *values, size_t nseg, uint64_t *version);
/* The same with parameters the caller holds. */
int calib_client_params_apply_seg(const calib_client_params *p, int form, size_t k,
                                  const double *x, double *out, const char *const *keys,
                                  const char *const *values, size_t nseg);

/* Copies the parameters held for model. CALIB_OK or CALIB_ECLIENT_MODEL. */
int calib_client_get(calib_client *c, const char *model,
                     calib_client_params *out);

/* The version held for model in *version. CALIB_OK or CALIB_ECLIENT_MODEL. */
int calib_client_version(calib_client *c, const char *model,
                         uint64_t *version);

void calib_client_stats_get(calib_client *c, calib_client_stats *out);

/* calib_plugin_strerror(), knowing the CALIB_ECLIENT_* codes too. */
const char *calib_client_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
