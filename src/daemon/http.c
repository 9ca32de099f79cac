/* http.c — GET /metrics in the Prometheus text format. */
#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Prometheus numbers: NaN is written as such, and is legal. */
static void put_value(text *t, double x)
{
    if (isnan(x))
        put(t, "NaN\n");
    else
        put(t, "%.17g\n", x);
}

/* ------------------------------------------------------------ metrics */

static void help(text *t, const char *name, const char *type, const char *what)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, what, name, type);
}

static void scores(text *t, const model *m, const char *scope, const calib_accum *acc,
                   const char *view)
{
    static const char *names[2][2] = {{"brier", "log"}, {"dss", ""}};
    int reg = m->form == CALIB_FORM_GAUSSIAN;
    for (int s = 0; s < (reg ? 1 : 2); s++) {
        double ci[2];
        calib_accum_ci95(&acc[s], ci);
        const char *score = names[reg][s];
        put(t, "calibd_score_mean{model=\"%s\",view=\"%s\",scope=\"%s\",score=\"%s\"} ",
            m->name, view, scope, score);
        put_value(t, calib_accum_mean(&acc[s]));
        put(t, "calibd_score_ci_low{model=\"%s\",view=\"%s\",scope=\"%s\",score=\"%s\"} ",
            m->name, view, scope, score);
        put_value(t, ci[0]);
        put(t, "calibd_score_ci_high{model=\"%s\",view=\"%s\",scope=\"%s\",score=\"%s\"} ",
            m->name, view, scope, score);
        put_value(t, ci[1]);
    }
}

static void model_metrics(text *t, const model *m, double now)
{
    static const char *views[VIEWS] = {"raw", "calibrated"};
    put(t, "calibd_predictions_total{model=\"%s\"} %llu\n", m->name,
        (unsigned long long)m->predictions);
    put(t, "calibd_labels_total{model=\"%s\"} %llu\n", m->name, (unsigned long long)m->labels);
    put(t, "calibd_scored_total{model=\"%s\"} %llu\n", m->name, (unsigned long long)m->scored);
    put(t, "calibd_params_version{model=\"%s\"} %llu\n", m->name,
        (unsigned long long)m->params.version);
    for (int r = 0; r < REJ_MAX; r++)
        if (m->rejected[r])
            put(t, "calibd_rejected_total{model=\"%s\",reason=\"%s\"} %llu\n", m->name,
                reject_name(r), (unsigned long long)m->rejected[r]);
    if (!m->shaped)
        return;
    const calib_join *j = &m->join;
    put(t, "calibd_join_waiting{model=\"%s\",kind=\"prediction\"} %llu\n", m->name,
        (unsigned long long)j->waiting_preds);
    put(t, "calibd_join_waiting{model=\"%s\",kind=\"label\"} %llu\n", m->name,
        (unsigned long long)j->waiting_labels);
    put(t, "calibd_join_expired_total{model=\"%s\",kind=\"prediction\"} %llu\n", m->name,
        (unsigned long long)j->expired_preds);
    put(t, "calibd_join_expired_total{model=\"%s\",kind=\"label\"} %llu\n", m->name,
        (unsigned long long)j->expired_labels);
    put(t, "calibd_join_evicted_total{model=\"%s\"} %llu\n", m->name,
        (unsigned long long)j->evicted);
    put(t, "calibd_join_duplicates_total{model=\"%s\",kind=\"prediction\"} %llu\n", m->name,
        (unsigned long long)j->duplicate_preds);
    put(t, "calibd_join_duplicates_total{model=\"%s\",kind=\"label\"} %llu\n", m->name,
        (unsigned long long)j->duplicate_labels);
    for (int v = 0; v < VIEWS; v++) {
        scores(t, m, "cumulative", m->cum[v], views[v]);
        if (m->form != CALIB_FORM_GAUSSIAN) {
            put(t, "calibd_ece{model=\"%s\",view=\"%s\",scope=\"cumulative\"} ", m->name,
                views[v]);
            put_value(t, calib_bins_ece(&m->top[v]));
        }
    }
    calib_pane w;
    if (model_window_pane(m, &w) == CALIB_OK && calib_window_sum(&m->win, now, &w) == CALIB_OK) {
        for (int v = 0; v < VIEWS; v++)
            scores(t, m, "window", &w.stat[v * WS_PER_VIEW], views[v]);
        if (m->form != CALIB_FORM_GAUSSIAN) {
            put(t, "calibd_ece{model=\"%s\",view=\"raw\",scope=\"window\"} ", m->name);
            put_value(t, calib_bins_ece(&w.top));
        }
    }
    calib_pane_free(&w);
}

static void render(text *t, calibd *d)
{
    double now = wall_now();
    help(t, "calibd_messages_total", "counter", "Messages received on the ingest sockets.");
    put(t, "calibd_messages_total %llu\n", (unsigned long long)d->messages);
    help(t, "calibd_rejected_total", "counter",
         "Rejected messages or records, by model (empty when unknown) and reason.");
    for (int r = 0; r < REJ_MAX; r++)
        if (d->rejected[r])
            put(t, "calibd_rejected_total{model=\"\",reason=\"%s\"} %llu\n", reject_name(r),
                (unsigned long long)d->rejected[r]);
    help(t, "calibd_score_mean", "gauge",
         "Mean proper score: for brier and log, the calibration upper bound U.");
    help(t, "calibd_score_ci_low", "gauge", "Lower end of the 95% interval of the mean score.");
    help(t, "calibd_score_ci_high", "gauge", "Upper end of the 95% interval of the mean score.");
    help(t, "calibd_ece", "gauge", "Expected calibration error (binned lower bound).");
    help(t, "calibd_predictions_total", "counter", "Predictions accepted.");
    help(t, "calibd_labels_total", "counter", "Labels accepted.");
    help(t, "calibd_scored_total", "counter", "Prediction-outcome pairs scored.");
    help(t, "calibd_params_version", "gauge", "Version of the current parameters.");
    help(t, "calibd_join_waiting", "gauge", "Predictions or labels waiting to be joined.");
    help(t, "calibd_join_expired_total", "counter", "Items that waited the label TTL unmatched.");
    help(t, "calibd_join_evicted_total", "counter", "Waiting items evicted by the memory bound.");
    help(t, "calibd_join_duplicates_total", "counter", "Duplicate predictions or labels.");
    for (size_t i = 0; i < d->nmodels; i++)
        model_metrics(t, d->models[i], now);
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
        r = MHD_create_response_from_buffer(h->len, h->text ? h->text : "",
                                            MHD_RESPMEM_MUST_COPY);
        pthread_mutex_unlock(&h->lock);
        if (r)
            MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
    }
    if (!r)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

int http_start(http_server *h, const char *addr, char *err, size_t errlen)
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
    h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                              (uint16_t)port, NULL, NULL, answer, h, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, 64u,
                              MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!h->mhd) {
        pthread_mutex_destroy(&h->lock);
        snprintf(err, errlen, "http: cannot listen on %s", addr);
        return -1;
    }
    return 0;
}

void http_update(http_server *h, calibd *d)
{
    if (!h->mhd)
        return;
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
