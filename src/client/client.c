/*
 * client.c — the serving-node client: a SUB socket following calibd's
 * "params" messages, the newest parameters per model, and their application
 * to a model's outputs from any number of threads. See calib_client(3).
 *
 * Three parts, three homes: messages are decoded by libcalib's codec
 * (calib_pubmsg_decode), each model's parameters live in a params store
 * (params_store.h: one writer, lock-free readers), and this file keeps the
 * socket, the receiving thread, the counters and the callbacks.
 *
 * One receiving thread at a time (inside calib_client_poll, or the
 * background thread) owns the socket and is the only writer of every
 * store; an atomic flag (sock_busy) hands the socket over, its
 * acquire/release exchange being the full barrier ZeroMQ asks for when a
 * socket moves between threads. Any number of predicting threads read.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "calib/client.h"
#include "calib/curve.h"
#include "calib/protocol.h"
#include "calib/pubmsg.h"
#include "params_store.h"

#define POLL_BATCH 1024     /* messages handled per calib_client_poll */
#define THREAD_TICK_MS 1000 /* the background thread's wait; stop wakes it */

/* ------------------------------------------------------------------ state */

enum { ST_RECEIVED, ST_ACCEPTED, ST_STALE, ST_ALERTS, ST_OTHER,
       ST_UNSUBSCRIBED, ST_COUNT };

struct calib_client {
    void *zctx;
    int own_ctx;
    void *sub;
    const calib_plugin_registry *registry;
    void (*on_params)(const calib_client_params *p, void *arg);
    void (*on_alert)(const calib_client_alert *a, void *arg);
    void *arg;

    /* Models: slots [0, nmodels) are complete; appended under sock_busy. */
    pstore *models[CALIB_CLIENT_MAX_MODELS];
    _Atomic size_t nmodels;

    atomic_int sock_busy; /* 1 while a thread owns the socket */

    /* The background thread; start and stop serialise on ctl_lock. */
    pthread_mutex_t ctl_lock;
    pthread_t thread;
    int running;
    atomic_int stop;
    atomic_int thread_err; /* its last error, CALIB_OK if none */
    int wake[2];           /* a pipe: stop writes, the thread wakes */

    _Atomic uint64_t st[ST_COUNT];
    _Atomic uint64_t rej[CALIB_REJ_COUNT];
};

static void count(_Atomic uint64_t *ctr)
{
    atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------------ names */

const char *calib_client_strerror(int err)
{
    switch (err) {
    case CALIB_ECLIENT_ZMQ: return "ZeroMQ call failed";
    case CALIB_ECLIENT_MODEL: return "not a subscribed model";
    case CALIB_ECLIENT_METHOD: return "recalibration method unknown here";
    case CALIB_ECLIENT_FORM: return "method does not handle this output form";
    case CALIB_ECLIENT_BUSY: return "socket in use by another thread";
    case CALIB_ECURVE_KEY: return "CURVE key file unreadable or malformed";
    }
    return calib_plugin_strerror(err);
}

/* ================================================================== applying */

/* Checks one prediction; fixes k for the forms that imply it. */
static int check_input(int form, size_t *k, const double *x)
{
    switch (form) {
    case CALIB_FORM_LOGITS:
        return *k >= 2 ? calib_check_logits(x, *k) : CALIB_EINVAL;
    case CALIB_FORM_PROBS:
        return *k >= 2 ? calib_check_probs(x, *k) : CALIB_EINVAL;
    case CALIB_FORM_BINARY:
        *k = 2;
        return calib_check_binary(x[0]);
    case CALIB_FORM_GAUSSIAN:
        *k = 0;
        return calib_check_gaussian(x[0], x[1]);
    }
    return CALIB_EINVAL;
}

/* Version 0: the raw outputs, as a prediction of the output form. */
static int apply_identity(int form, size_t k, const double *x, double *out)
{
    if (form == CALIB_FORM_LOGITS)
        calib_softmax(x, k, out);
    else if (out != x)
        memmove(out, x, calib_form_width(form, k) * sizeof *out);
    return CALIB_OK;
}

/* The parameters apply reads: a version's method, its (or a segment's)
 * values, and its prior weights. */
typedef struct applied {
    uint64_t version;
    const calib_plugin *desc;
    const double *values;
    unsigned nweights;
    const double *weights;
} applied;

/* x is checked and k fixed; out untouched unless CALIB_OK (the built-ins
 * refuse a shape before writing; a plugin is trusted to do the same). The
 * prior weights follow the map (calib_prior_weigh); weights whose count is
 * not the prediction's classes refuse the form. */
static int apply_checked(const applied *a, int form, size_t k, const double *x, double *out)
{
    if (a->version == 0)
        return apply_identity(form, k, x, out);
    if (!a->desc)
        return CALIB_ECLIENT_METHOD;
    int of = calib_recal_out_form(form);
    if (!(a->desc->forms & CALIB_FORM_BIT(form)) ||
        (a->nweights && (of == CALIB_FORM_GAUSSIAN ||
                         a->nweights != (of == CALIB_FORM_BINARY ? 2 : k))))
        return CALIB_ECLIENT_FORM;
    int rc = a->desc->apply(a->values, form, k, x, out);
    if (rc == CALIB_OK && a->nweights)
        rc = calib_prior_weigh(a->weights, a->nweights, of, k, out);
    return rc;
}

static applied applied_of_msg(const calib_client_params *p, const double *values)
{
    return (applied){p->version, p->desc, values, p->nweights, p->weights};
}

static applied applied_of_snap(const pstore_snapshot *s)
{
    return (applied){s->version, s->desc, s->values, s->nweights, s->weights};
}

int calib_client_params_apply(const calib_client_params *p, int form, size_t k,
                              const double *x, double *out)
{
    if (!p || !x || !out)
        return CALIB_EINVAL;
    int rc = check_input(form, &k, x);
    if (rc)
        return rc;
    applied a = applied_of_msg(p, p->values);
    return apply_checked(&a, form, k, x, out);
}

/* ------------------------------------------------------------------ models */

static pstore *find_model_n(calib_client *c, const char *name, size_t len)
{
    size_t n = atomic_load_explicit(&c->nmodels, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        pstore *m = c->models[i];
        if (m->name_len == len && memcmp(m->name, name, len) == 0)
            return m;
    }
    return NULL;
}

static pstore *find_model(calib_client *c, const char *name)
{
    return name ? find_model_n(c, name, strlen(name)) : NULL;
}

int calib_client_apply(calib_client *c, const char *model, int form, size_t k,
                       const double *x, double *out, uint64_t *version)
{
    if (!c || !x || !out)
        return CALIB_EINVAL;
    pstore *m = find_model(c, model);
    if (!m)
        return CALIB_ECLIENT_MODEL;
    int rc = check_input(form, &k, x);
    if (rc)
        return rc;
    pstore_snapshot s;
    pstore_load(m, &s);
    if (version)
        *version = s.version;
    applied a = applied_of_snap(&s);
    return apply_checked(&a, form, k, x, out);
}

int calib_client_apply_seg(calib_client *c, const char *model, int form, size_t k,
                           const double *x, double *out, const char *const *keys,
                           const char *const *values, size_t nseg, uint64_t *version)
{
    if (!c || !x || !out || (nseg && (!keys || !values)))
        return CALIB_EINVAL;
    pstore *m = find_model(c, model);
    if (!m)
        return CALIB_ECLIENT_MODEL;
    if (!nseg || !atomic_load_explicit(&m->nsegments, memory_order_relaxed))
        return calib_client_apply(c, model, form, k, x, out, version);
    int rc = check_input(form, &k, x);
    if (rc)
        return rc;
    pstore_snapshot s;
    (void)pstore_segment(m, keys, values, nseg, &s);
    if (version)
        *version = s.version;
    applied a = applied_of_snap(&s);
    return apply_checked(&a, form, k, x, out);
}

int calib_client_params_apply_seg(const calib_client_params *p, int form, size_t k,
                                  const double *x, double *out, const char *const *keys,
                                  const char *const *values, size_t nseg)
{
    if (!p || !x || !out || (nseg && (!keys || !values)))
        return CALIB_EINVAL;
    int rc = check_input(form, &k, x);
    if (rc)
        return rc;
    const calib_params_segment *sg = calib_params_segment_find(p, keys, values, nseg);
    applied a = applied_of_msg(p, sg ? sg->values : p->values);
    return apply_checked(&a, form, k, x, out);
}

int calib_client_get(calib_client *c, const char *model,
                     calib_client_params *out)
{
    pstore *m = c && out ? find_model(c, model) : NULL;
    if (!m)
        return CALIB_ECLIENT_MODEL;
    pstore_get(m, out);
    return CALIB_OK;
}

int calib_client_version(calib_client *c, const char *model, uint64_t *version)
{
    pstore *m = c && version ? find_model(c, model) : NULL;
    if (!m)
        return CALIB_ECLIENT_MODEL;
    *version = pstore_version(m);
    return CALIB_OK;
}

void calib_client_stats_get(calib_client *c, calib_client_stats *out)
{
    memset(out, 0, sizeof *out);
    out->received = atomic_load_explicit(&c->st[ST_RECEIVED], memory_order_relaxed);
    out->accepted = atomic_load_explicit(&c->st[ST_ACCEPTED], memory_order_relaxed);
    out->stale = atomic_load_explicit(&c->st[ST_STALE], memory_order_relaxed);
    out->alerts = atomic_load_explicit(&c->st[ST_ALERTS], memory_order_relaxed);
    out->other = atomic_load_explicit(&c->st[ST_OTHER], memory_order_relaxed);
    out->unsubscribed =
        atomic_load_explicit(&c->st[ST_UNSUBSCRIBED], memory_order_relaxed);
    for (int r = 0; r < CALIB_REJ_COUNT; r++) {
        out->reject[r] = atomic_load_explicit(&c->rej[r], memory_order_relaxed);
        out->rejected += out->reject[r];
    }
}

/* ================================================================== receiving */

/* The socket is this thread's until sock_release; 0 or CALIB_ECLIENT_BUSY. */
static int sock_acquire(calib_client *c)
{
    return atomic_exchange_explicit(&c->sock_busy, 1, memory_order_acq_rel)
               ? CALIB_ECLIENT_BUSY
               : CALIB_OK;
}

static void sock_release(calib_client *c)
{
    atomic_store_explicit(&c->sock_busy, 0, memory_order_release);
}

/* Counts a rejection; a code that is no reason (a bug) is counted as
 * reject[CALIB_REJ_NONE], not lost. */
static void reject(calib_client *c, int reason)
{
    if (reason <= CALIB_REJ_NONE || reason >= CALIB_REJ_COUNT)
        reason = CALIB_REJ_NONE;
    count(&c->rej[reason]);
}

static void install(calib_client *c, pstore *m, const calib_client_params *p)
{
    if (!pstore_install(m, p)) {
        count(&c->st[ST_STALE]);
        return;
    }
    count(&c->st[ST_ACCEPTED]);
    if (c->on_params)
        c->on_params(p, c->arg);
}

/* One two-frame message: exact topic, then the payload by type. */
static void handle(calib_client *c, const char *topic, size_t topic_len,
                   const void *payload, size_t len)
{
    pstore *m = find_model_n(c, topic, topic_len);
    if (!m) {
        /* the SUB filter matched a prefix only */
        if (calib_proto_topic_ok(topic, topic_len))
            count(&c->st[ST_UNSUBSCRIBED]);
        else
            reject(c, CALIB_REJ_BAD_TOPIC);
        return;
    }
    calib_pubmsg msg;
    int r = calib_pubmsg_decode(topic, topic_len, payload, len, c->registry, &msg);
    if (r != CALIB_REJ_NONE) {
        reject(c, r);
        return;
    }
    switch (msg.type) {
    case CALIB_PUBMSG_PARAMS:
        install(c, m, &msg.params);
        break;
    case CALIB_PUBMSG_ALERT:
        count(&c->st[ST_ALERTS]);
        if (c->on_alert)
            c->on_alert(&msg.alert, c->arg);
        break;
    default:
        count(&c->st[ST_OTHER]);
        break;
    }
}

/*
 * Receives one message if one is queued: 1 if one was read (handled or
 * counted), 0 if none, CALIB_ECLIENT_ZMQ. The frames of a multipart message
 * arrive together, so only the first receive can find none.
 */
static int recv_one(calib_client *c)
{
    zmq_msg_t f[2];
    zmq_msg_init(&f[0]);
    if (zmq_msg_recv(&f[0], c->sub, ZMQ_DONTWAIT) < 0) {
        int err = errno;
        zmq_msg_close(&f[0]);
        if (err == EAGAIN || err == EINTR)
            return 0;
        errno = err;
        return CALIB_ECLIENT_ZMQ;
    }
    count(&c->st[ST_RECEIVED]);
    int frames = 1, more = zmq_msg_more(&f[0]);
    zmq_msg_init(&f[1]);
    if (more && zmq_msg_recv(&f[1], c->sub, 0) >= 0) {
        frames = 2;
        more = zmq_msg_more(&f[1]);
    }
    while (more) { /* a third frame or more: read them all, refuse */
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        if (zmq_msg_recv(&extra, c->sub, 0) < 0) {
            zmq_msg_close(&extra);
            break;
        }
        more = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
        frames++;
    }
    if (frames != 2)
        reject(c, CALIB_REJ_FRAMING);
    else
        handle(c, zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), zmq_msg_data(&f[1]),
               zmq_msg_size(&f[1]));
    zmq_msg_close(&f[0]);
    zmq_msg_close(&f[1]);
    return 1;
}

/* Waits on the socket (and the wake pipe, if wake_fd >= 0), then drains up
 * to POLL_BATCH messages. The caller holds the socket. */
static int poll_locked(calib_client *c, int timeout_ms, int wake_fd)
{
    zmq_pollitem_t it[2] = {
        {.socket = c->sub, .events = ZMQ_POLLIN},
        {.socket = NULL, .fd = wake_fd, .events = ZMQ_POLLIN},
    };
    int n = zmq_poll(it, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : CALIB_ECLIENT_ZMQ;
    if (!(it[0].revents & ZMQ_POLLIN))
        return 0;
    int handled = 0;
    while (handled < POLL_BATCH) {
        int r = recv_one(c);
        if (r < 0)
            return handled ? handled : r;
        if (r == 0)
            break;
        handled++;
    }
    return handled;
}

int calib_client_poll(calib_client *c, int timeout_ms)
{
    if (!c)
        return CALIB_EINVAL;
    if (sock_acquire(c))
        return CALIB_ECLIENT_BUSY;
    int r = poll_locked(c, timeout_ms, -1);
    int err = errno;
    sock_release(c);
    errno = err;
    return r;
}

static void *client_thread(void *arg)
{
    calib_client *c = arg;
    while (!atomic_load_explicit(&c->stop, memory_order_acquire)) {
        int r = poll_locked(c, THREAD_TICK_MS, c->wake[0]);
        if (r >= 0)
            continue;
        atomic_store(&c->thread_err, r);
        if (errno == ETERM) /* the context is ending: nothing more to read */
            break;
        /* anything else is unexpected: don't spin on it */
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int calib_client_start(calib_client *c)
{
    if (!c)
        return CALIB_EINVAL;
    pthread_mutex_lock(&c->ctl_lock);
    int rc = CALIB_ECLIENT_BUSY;
    if (!c->running && sock_acquire(c) == CALIB_OK) {
        atomic_store(&c->stop, 0);
        atomic_store(&c->thread_err, CALIB_OK);
        if (pthread_create(&c->thread, NULL, client_thread, c) == 0) {
            c->running = 1;
            rc = CALIB_OK;
        } else {
            sock_release(c);
            rc = CALIB_ENOMEM;
        }
    }
    pthread_mutex_unlock(&c->ctl_lock);
    return rc;
}

int calib_client_stop(calib_client *c)
{
    if (!c)
        return CALIB_EINVAL;
    pthread_mutex_lock(&c->ctl_lock);
    int rc = CALIB_OK;
    if (c->running) {
        atomic_store_explicit(&c->stop, 1, memory_order_release);
        ssize_t w;
        do
            w = write(c->wake[1], "", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(c->thread, NULL);
        char buf[64];
        while (read(c->wake[0], buf, sizeof buf) > 0)
            ;
        c->running = 0;
        rc = atomic_load(&c->thread_err);
        sock_release(c);
    }
    pthread_mutex_unlock(&c->ctl_lock);
    return rc;
}

/* ================================================================== set-up */

static int set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    fl = fcntl(fd, F_GETFD);
    return fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0 ? -1 : 0;
}

int calib_client_create(calib_client **out, const calib_client_opts *opts)
{
    static const calib_client_opts defaults = {0};
    if (!out)
        return CALIB_EINVAL;
    *out = NULL;
    if (!opts)
        opts = &defaults;
    if (opts->max_msg_size < 0 || opts->rcvhwm < 0)
        return CALIB_EINVAL;
    calib_client *c = calloc(1, sizeof *c);
    if (!c)
        return CALIB_ENOMEM;
    int rc = CALIB_ECLIENT_ZMQ;
    c->wake[0] = c->wake[1] = -1;
    c->registry = opts->registry;
    c->on_params = opts->on_params;
    c->on_alert = opts->on_alert;
    c->arg = opts->arg;
    atomic_init(&c->nmodels, 0);
    atomic_init(&c->sock_busy, 0);
    atomic_init(&c->stop, 0);
    atomic_init(&c->thread_err, CALIB_OK);
    for (int i = 0; i < ST_COUNT; i++)
        atomic_init(&c->st[i], 0);
    for (int i = 0; i < CALIB_REJ_COUNT; i++)
        atomic_init(&c->rej[i], 0);
    if (pthread_mutex_init(&c->ctl_lock, NULL) != 0) {
        free(c);
        return CALIB_ENOMEM;
    }

    c->zctx = opts->zmq_ctx;
    if (!c->zctx) {
        if (!(c->zctx = zmq_ctx_new()))
            goto err;
        c->own_ctx = 1;
    }
    if (!(c->sub = zmq_socket(c->zctx, ZMQ_SUB)))
        goto err;
    int linger = 0;
    int64_t maxsize = opts->max_msg_size ? opts->max_msg_size
                                         : CALIB_CLIENT_MAX_MSG_SIZE;
    if (zmq_setsockopt(c->sub, ZMQ_LINGER, &linger, sizeof linger) != 0
        || zmq_setsockopt(c->sub, ZMQ_MAXMSGSIZE, &maxsize, sizeof maxsize) != 0)
        goto err;
    if (opts->rcvhwm > 0
        && zmq_setsockopt(c->sub, ZMQ_RCVHWM, &opts->rcvhwm, sizeof opts->rcvhwm) != 0)
        goto err;
    if (pipe(c->wake) != 0 || set_nonblock_cloexec(c->wake[0]) != 0
        || set_nonblock_cloexec(c->wake[1]) != 0) {
        rc = CALIB_ENOMEM;
        goto err;
    }
    *out = c;
    return CALIB_OK;

err:;
    int err = errno;
    calib_client_destroy(c);
    errno = err;
    return rc;
}

void calib_client_destroy(calib_client *c)
{
    if (!c)
        return;
    calib_client_stop(c);
    if (c->sub)
        zmq_close(c->sub);
    if (c->own_ctx)
        zmq_ctx_term(c->zctx);
    for (int i = 0; i < 2; i++)
        if (c->wake[i] >= 0)
            close(c->wake[i]);
    size_t n = atomic_load(&c->nmodels);
    for (size_t i = 0; i < n; i++) {
        pstore_destroy(c->models[i]);
        free(c->models[i]);
    }
    pthread_mutex_destroy(&c->ctl_lock);
    free(c);
}

int calib_client_curve(calib_client *c, const char *key, const char *server_key, char *err,
                       size_t errlen)
{
    if (!c || !key || !server_key)
        return CALIB_EINVAL;
    if (sock_acquire(c))
        return CALIB_ECLIENT_BUSY;
    int r = calib_curve_client(c->sub, key, server_key, err, errlen);
    sock_release(c);
    return r;
}

int calib_client_connect(calib_client *c, const char *endpoint)
{
    if (!c || !endpoint || !*endpoint)
        return CALIB_EINVAL;
    if (sock_acquire(c))
        return CALIB_ECLIENT_BUSY;
    int r;
    if (endpoint[0] == '@')
        r = zmq_bind(c->sub, endpoint + 1);
    else
        r = zmq_connect(c->sub, endpoint + (endpoint[0] == '>'));
    int err = errno;
    sock_release(c);
    errno = err;
    return r == 0 ? CALIB_OK : CALIB_ECLIENT_ZMQ;
}

int calib_client_subscribe(calib_client *c, const char *model)
{
    if (!c || !model)
        return CALIB_EINVAL;
    size_t len = strlen(model);
    if (!calib_proto_topic_ok(model, len))
        return CALIB_EINVAL;
    if (sock_acquire(c))
        return CALIB_ECLIENT_BUSY;
    int rc = CALIB_OK;
    size_t n = atomic_load_explicit(&c->nmodels, memory_order_relaxed);
    pstore *m = NULL;
    if (find_model_n(c, model, len))
        goto out;
    rc = CALIB_EFULL;
    if (n == CALIB_CLIENT_MAX_MODELS)
        goto out;
    rc = CALIB_ENOMEM;
    if (!(m = malloc(sizeof *m)))
        goto out;
    if (pstore_init(m, model, len) != CALIB_OK) {
        free(m);
        goto out;
    }
    if (zmq_setsockopt(c->sub, ZMQ_SUBSCRIBE, model, len) != 0) {
        int err = errno;
        pstore_destroy(m);
        free(m);
        errno = err;
        rc = CALIB_ECLIENT_ZMQ;
        goto out;
    }
    c->models[n] = m;
    /* readers see the slot complete before they see the count */
    atomic_store_explicit(&c->nmodels, n + 1, memory_order_release);
    rc = CALIB_OK;
out:
    sock_release(c);
    return rc;
}
