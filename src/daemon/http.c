/* http.c — GET /metrics in the Prometheus text format. */
#include "config.h"
#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "calibd.h"
#include "http.h"

/* ------------------------------------------------------------ text buffer */

typedef struct text {
    char *buf;
    size_t len, cap;
    int failed;
} text;

__attribute__((format(printf, 2, 3)))
static void put(text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n + 1;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->failed = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

/* One sample, name{labels} value, or none when the value is not finite:
 * a series without data is absent, never NaN, so that an alert rule on
 * it is not silently false. */
__attribute__((format(printf, 3, 4)))
static void sample(text *t, double x, const char *fmt, ...)
{
    if (!isfinite(x) || t->failed)
        return;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof head) {
        t->failed = 1;
        return;
    }
    put(t, "%s %.17g\n", head, x);
}

/* ------------------------------------------------------------ metrics */

/* One model as the metrics see it: its window as the tick summed it
 * (model_view), the same that status and the alert rules read. */
typedef struct snap {
    const model *m;
    const calib_pane *w; /* both views' window scores; raw window bins */
    int have_w;
} snap;

static void help(text *t, const char *name, const char *type, const char *what)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, what, name, type);
}

static void counters(text *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *what;
        size_t offset;
    } fam[] = {
        {"calibd_predictions_total", "Predictions accepted.", offsetof(model, predictions)},
        {"calibd_labels_total", "Labels accepted.", offsetof(model, labels)},
        {"calibd_scored_total", "Prediction-outcome pairs scored.", offsetof(model, scored)},
        {"calibd_drift_alarms_total", "Drift alarms of the calibrated score.",
         offsetof(model, loop.drift_alarms)},
        {"calibd_refits_total", "Refits started.", offsetof(model, loop.refits)},
        {"calibd_refit_errors_total", "Refits whose fit failed.", offsetof(model, loop.refit_errors)},
        {"calibd_candidates_total", "Candidate parameters put in shadow.",
         offsetof(model, loop.candidates)},
        {"calibd_candidates_published_total", "Candidates that passed the gate and were published.",
         offsetof(model, loop.published)},
        {"calibd_candidates_rejected_total", "Candidates the gate did not pass.",
         offsetof(model, loop.rejected)},
        {"calibd_candidates_store_errors_total", "Candidates that passed the gate but the "
         "state directory refused to store, so were not published.",
         offsetof(model, loop.store_errors)},
        {"calibd_alerts_total", "Alerts sent.", offsetof(model, alerts)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, "counter", fam[f].what);
        for (size_t i = 0; i < n; i++)
            put(t, "%s{model=\"%s\"} %llu\n", fam[f].name, s[i].m->name,
                *(const unsigned long long *)((const char *)s[i].m + fam[f].offset));
    }
    help(t, "calibd_params_version", "gauge", "Version of the current parameters.");
    for (size_t i = 0; i < n; i++)
        put(t, "calibd_params_version{model=\"%s\"} %llu\n", s[i].m->name,
            (unsigned long long)s[i].m->params.version);
}

static void rejections(text *t, const calibd *d, const snap *s, size_t n)
{
    help(t, "calibd_rejected_total", "counter",
         "Rejected messages or records, by model (empty when unknown) and reason.");
    for (int r = 0; r < REJ_MAX; r++)
        if (d->rejected[r])
            put(t, "calibd_rejected_total{model=\"\",reason=\"%s\"} %llu\n", reject_name(r),
                (unsigned long long)d->rejected[r]);
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < REJ_MAX; r++)
            if (s[i].m->rejected[r])
                put(t, "calibd_rejected_total{model=\"%s\",reason=\"%s\"} %llu\n",
                    s[i].m->name, reject_name(r), (unsigned long long)s[i].m->rejected[r]);
}

static void joins(text *t, const snap *s, size_t n)
{
    static const struct {
        const char *name, *type, *what;
    } fam[] = {
        {"calibd_join_waiting", "gauge", "Predictions or labels waiting to be joined."},
        {"calibd_join_expired_total", "counter", "Items that waited the label TTL unmatched."},
        {"calibd_join_evicted_total", "counter", "Waiting items evicted by the memory bound."},
        {"calibd_join_duplicates_total", "counter", "Duplicate predictions or labels."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, fam[f].type, fam[f].what);
        for (size_t i = 0; i < n; i++) {
            const calib_join *j = &s[i].m->join;
            const char *name = s[i].m->name;
            if (!s[i].m->shaped)
                continue;
            uint64_t v[4][2] = {{j->waiting_preds, j->waiting_labels},
                                {j->expired_preds, j->expired_labels},
                                {j->evicted, 0},
                                {j->duplicate_preds, j->duplicate_labels}};
            if (f == 2) {
                put(t, "%s{model=\"%s\"} %llu\n", fam[f].name, name,
                    (unsigned long long)v[f][0]);
                continue;
            }
            put(t, "%s{model=\"%s\",kind=\"prediction\"} %llu\n", fam[f].name, name,
                (unsigned long long)v[f][0]);
            put(t, "%s{model=\"%s\",kind=\"label\"} %llu\n", fam[f].name, name,
                (unsigned long long)v[f][1]);
        }
    }
}


/* The accumulators of one model, view and scope; NULL if not available. */
static const calib_accum *accums(const snap *s, int view, int window)
{
    if (!window)
        return s->m->cum[view];
    return s->have_w ? &s->w->stat[view * WS_PER_VIEW] : NULL;
}

/* which 0: mean, 1: lower end of the interval, 2: upper end */
static void score_family(text *t, const snap *s, size_t n, int which)
{
    static const char *names[3] = {"calibd_score_mean", "calibd_score_ci_low",
                                   "calibd_score_ci_high"};
    static const char *whats[3] = {
        "Mean proper score: for brier and log, the calibration upper bound U.",
        "Lower end of the 95% interval of the mean score.",
        "Upper end of the 95% interval of the mean score."};
    static const char *views[VIEWS] = {"raw", "calibrated"}, *scopes[2] = {"cumulative", "window"};
    help(t, names[which], "gauge", whats[which]);
    for (size_t i = 0; i < n; i++) {
        if (!s[i].m->shaped)
            continue;
        int reg = s[i].m->form == CALIB_FORM_GAUSSIAN;
        for (int v = 0; v < VIEWS; v++)
            for (int w = 0; w < 2; w++) {
                const calib_accum *acc = accums(&s[i], v, w);
                for (int k = 0; acc && k < (reg ? 1 : 2); k++) {
                    double ci[2];
                    calib_accum_ci95(&acc[k], ci);
                    sample(t, which == 0 ? calib_accum_mean(&acc[k]) : ci[which - 1],
                           "%s{model=\"%s\",view=\"%s\",scope=\"%s\",score=\"%s\"}",
                           names[which], s[i].m->name, views[v], scopes[w],
                           reg ? "dss" : k ? "log" : "brier");
                }
            }
    }
}

static void ece_family(text *t, const snap *s, size_t n)
{
    help(t, "calibd_ece", "gauge", "Expected calibration error (binned lower bound).");
    for (size_t i = 0; i < n; i++) {
        const model *m = s[i].m;
        if (!m->shaped || m->form == CALIB_FORM_GAUSSIAN)
            continue;
        sample(t, calib_bins_ece(&m->top[VIEW_RAW]),
               "calibd_ece{model=\"%s\",view=\"raw\",scope=\"cumulative\"}", m->name);
        sample(t, calib_bins_ece(&m->top[VIEW_CAL]),
               "calibd_ece{model=\"%s\",view=\"calibrated\",scope=\"cumulative\"}", m->name);
        if (s[i].have_w) {
            sample(t, calib_bins_ece(&s[i].w->top[VIEW_RAW]),
                   "calibd_ece{model=\"%s\",view=\"raw\",scope=\"window\"}", m->name);
            /* the value alert_ece fires on */
            sample(t, calib_bins_ece(&s[i].w->top[VIEW_CAL]),
                   "calibd_ece{model=\"%s\",view=\"calibrated\",scope=\"window\"}", m->name);
        }
    }
}

/* The ingest sockets: what ZeroMQ delivered, and the two ways calibd
 * learns it is losing messages it never receives. */
static void sockets(text *t, const calibd *d)
{
    const zsock *z[2] = {&d->ingest, d->have_pull ? &d->pull : NULL};
    static const struct {
        const char *name, *what;
        size_t offset;
    } fam[] = {
        {"calibd_socket_received_total", "Messages received, by ingest socket.",
         offsetof(zsock, received)},
        {"calibd_socket_saturated_total", "Receive turns that ended on drain_time with "
         "messages still queued: calibd is behind (a full SUB queue makes producers' "
         "PUB sockets drop).", offsetof(zsock, saturated)},
        {"calibd_socket_disconnects_total", "Producer connections that ended: closed, or "
         "cut by ZeroMQ for a message over max_msg_size.", offsetof(zsock, disconnects)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        help(t, fam[f].name, "counter", fam[f].what);
        for (int i = 0; i < 2; i++)
            if (z[i])
                put(t, "%s{socket=\"%s\"} %llu\n", fam[f].name, z[i]->name,
                    *(const unsigned long long *)((const char *)z[i] + fam[f].offset));
    }
}

static void http_counters(text *t, http_server *h)
{
    help(t, "calibd_http_timeouts_total", "counter",
         "HTTP connections cut for not completing a request within http_timeout.");
    pthread_mutex_lock(&h->lock);
    unsigned long long n = h->timeouts;
    pthread_mutex_unlock(&h->lock);
    put(t, "calibd_http_timeouts_total %llu\n", n);
}

static void render(text *t, calibd *d)
{
    snap *s = calloc(d->nmodels ? d->nmodels : 1, sizeof *s);
    if (!s) {
        t->failed = 1;
        return;
    }
    for (size_t i = 0; i < d->nmodels; i++) {
        s[i].m = d->models[i];
        s[i].w = &s[i].m->view.w;
        s[i].have_w = s[i].m->view.have;
    }
    help(t, "calibd_build_info", "gauge", "Always 1; the version of calibd as a label.");
    put(t, "calibd_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
    help(t, "calibd_start_time_seconds", "gauge", "When calibd started, seconds since the epoch.");
    sample(t, d->started, "calibd_start_time_seconds");
    help(t, "calibd_messages_total", "counter", "Messages received on the ingest sockets.");
    put(t, "calibd_messages_total %llu\n", (unsigned long long)d->messages);
    sockets(t, d);
    http_counters(t, &d->http);
    rejections(t, d, s, d->nmodels);
    counters(t, s, d->nmodels);
    joins(t, s, d->nmodels);
    for (int which = 0; which < 3; which++)
        score_family(t, s, d->nmodels, which);
    ece_family(t, s, d->nmodels);
    free(s);
}

/* ------------------------------------------------------------ server */

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_len, void **state)
{
    http_server *h = cls;
    (void)version;
    (void)upload;
    (void)upload_len;
    (void)state;
    struct MHD_Response *r;
    unsigned code = MHD_HTTP_OK;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    } else if (strcmp(url, "/metrics") != 0) {
        static const char body[] = "calibd: see /metrics\n";
        code = MHD_HTTP_NOT_FOUND;
        r = MHD_create_response_from_buffer(sizeof body - 1, (void *)body,
                                            MHD_RESPMEM_PERSISTENT);
    } else {
        pthread_mutex_lock(&h->lock);
        if (h->text) {
            r = MHD_create_response_from_buffer(h->len, h->text, MHD_RESPMEM_MUST_COPY);
            if (r)
                MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
        } else {
            /* no snapshot yet (the first render failed): say so, not an
             * empty exposition a scraper would take for "no series" */
            static const char body[] = "calibd: no metrics snapshot yet\n";
            code = MHD_HTTP_SERVICE_UNAVAILABLE;
            r = MHD_create_response_from_buffer(sizeof body - 1, (void *)body,
                                                MHD_RESPMEM_PERSISTENT);
            if (r)
                MHD_add_response_header(r, "Retry-After", "1");
        }
        pthread_mutex_unlock(&h->lock);
    }
    if (!r)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* MHD's thread: a connection opens or closes. MHD calls CLOSED before it
 * closes the descriptor, so under the lock the list never holds a closed
 * one, and http_update's shutdown can never reach a reused descriptor. */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *h = cls;
    http_conn *hc = *ctx;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info || !(hc = calloc(1, sizeof *hc)))
            return; /* untracked: MHD's own idle timeout still applies */
        hc->fd = info->connect_fd;
        hc->since = mono_now();
        pthread_mutex_lock(&h->lock);
        hc->next = h->conns;
        if (h->conns)
            h->conns->prev = hc;
        h->conns = hc;
        pthread_mutex_unlock(&h->lock);
        *ctx = hc;
    } else if (hc) {
        pthread_mutex_lock(&h->lock);
        if (hc->prev)
            hc->prev->next = hc->next;
        else
            h->conns = hc->next;
        if (hc->next)
            hc->next->prev = hc->prev;
        pthread_mutex_unlock(&h->lock);
        free(hc);
        *ctx = NULL;
    }
}

/* MHD's thread: a request was answered; its connection's clock restarts. */
static void on_request_done(void *cls, struct MHD_Connection *c, void **req_ctx,
                            enum MHD_RequestTerminationCode code)
{
    http_server *h = cls;
    (void)req_ctx;
    (void)code;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!info || !info->socket_context)
        return;
    pthread_mutex_lock(&h->lock);
    ((http_conn *)info->socket_context)->since = mono_now();
    pthread_mutex_unlock(&h->lock);
}

/* Loop thread: shuts down connections past their deadline; MHD then reads
 * end-of-file and closes them. */
static void cut_slow(http_server *h)
{
    double now = mono_now();
    pthread_mutex_lock(&h->lock);
    for (http_conn *c = h->conns; c; c = c->next)
        if (!c->cut && now - c->since > h->lim.timeout) {
            shutdown(c->fd, SHUT_RDWR);
            c->cut = 1;
            h->timeouts++;
        }
    pthread_mutex_unlock(&h->lock);
}

int http_start(http_server *h, const char *addr, const http_limits *lim, char *err,
               size_t errlen)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    char *end;
    unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
    memset(h, 0, sizeof *h);
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host || *end ||
        port > 65535) {
        snprintf(err, errlen, "http: '%s' is not ADDR:PORT", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "http: '%s' is not an IPv4 address", host);
        return -1;
    }
    pthread_mutex_init(&h->lock, NULL);
    h->lim = *lim;
    unsigned idle = (unsigned)ceil(lim->timeout);
    /* one polling thread (epoll where there is one): a slow client costs a
     * descriptor and a small memory pool, never a thread */
    h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                                  MHD_USE_ERROR_LOG,
                              (uint16_t)port, NULL, NULL, answer, h, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                              lim->max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                              lim->max_per_addr, MHD_OPTION_CONNECTION_TIMEOUT,
                              idle ? idle : 1u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)32768, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                              h, MHD_OPTION_NOTIFY_COMPLETED, on_request_done, h,
                              MHD_OPTION_END);
    if (!h->mhd) {
        pthread_mutex_destroy(&h->lock);
        snprintf(err, errlen, "http: cannot listen on %s", addr);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    return info && info->port ? info->port : (int)port;
}

void http_update(http_server *h, calibd *d)
{
    if (!h->mhd)
        return;
    cut_slow(h);
    text t = {.cap = 1 << 16};
    if (!(t.buf = malloc(t.cap)))
        return; /* keep serving the previous snapshot */
    render(&t, d);
    if (t.failed) {
        free(t.buf);
        return; /* keep serving the previous snapshot */
    }
    pthread_mutex_lock(&h->lock);
    free(h->text);
    h->text = t.buf;
    h->len = t.len;
    pthread_mutex_unlock(&h->lock);
}

void http_stop(http_server *h)
{
    if (!h->mhd)
        return;
    MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
    pthread_mutex_destroy(&h->lock);
    free(h->text);
    h->text = NULL;
}
