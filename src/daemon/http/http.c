/* http.c — calibd over HTTP: /metrics in the Prometheus text format,
 * /status (calibctl status as JSON), /history, /healthz and the page at /;
 * over TLS, and behind a bearer token or basic auth, when configured. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibd.h"
#include "status.h"
#include "http.h"
#include "registry.h"
#include "msgpack_json.h"
#include "state.h"

extern const char calibd_page[]; /* page.c, generated from page.html */
extern const size_t calibd_page_len;

/* ------------------------------------------------------------ history */

/* /history?model=NAME as JSON (server thread, under the lock). */
static void render_history(textbuf *t, const hist *h, long i, const char *name)
{
    /* the estimate's columns after "scored": added to the first form */
    static const char *cols = "[\"t\",\"raw\",\"raw_lo\",\"raw_hi\",\"calibrated\","
                              "\"calibrated_lo\",\"calibrated_hi\",\"scored\",\"estimated\","
                              "\"estimated_lo\",\"estimated_hi\"]";
    textbuf_put(t, "{\"model\":");
    textbuf_json_str(t, name);
    textbuf_put(t, ",\"step\":%g,\"columns\":%s,\"points\":[", h->step, cols);
    for (size_t j = 0; i >= 0 && j < h->s[i]->len; j++) {
        const hist_point *p = hist_at(h, (size_t)i, j);
        textbuf_put(t, "%s[%.17g", j ? "," : "", p->t);
        for (int k = 0; k < HIST_VALUES; k++) {
            if (k == HIST_EST)
                textbuf_put(t, ",%u", (unsigned)p->n);
            if (isfinite(p->v[k]))
                textbuf_put(t, ",%.9g", (double)p->v[k]);
            else
                textbuf_put(t, ",null");
        }
        textbuf_put(t, "]");
    }
    textbuf_put(t, "]}\n");
}

/* A line for the log from the server's thread, written by the next tick. */
__attribute__((format(printf, 3, 4)))
static void note(http_server *h, int kind, const char *fmt, ...)
{
    http_note n = {.kind = kind};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n.text, sizeof n.text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&h->note_lock);
    if (h->nnotes < HTTP_NOTES)
        h->notes[h->nnotes++] = n;
    else
        h->notes_lost++;
    pthread_mutex_unlock(&h->note_lock);
}

/* libmicrohttpd's lines: the error of a start that fails, then notes
 * (rate-limited by the loop: a client cannot flood the log with, say,
 * plain HTTP to the TLS port). */
__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *h = cls;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = 0;
    if (!n)
        return;
    pthread_mutex_lock(&h->note_lock);
    if (!h->mhd_up) {
        size_t used = strlen(h->start_err);
        snprintf(h->start_err + used, sizeof h->start_err - used, "%s%s", used ? "; " : "",
                 line);
    } else if (h->nnotes < HTTP_NOTES) {
        http_note *note_ = &h->notes[h->nnotes++];
        note_->kind = 1;
        snprintf(note_->text, sizeof note_->text, "%s", line);
    } else {
        h->notes_lost++;
    }
    pthread_mutex_unlock(&h->note_lock);
}

/* Loop thread: the notes into the log, at a limited rate. */
static void notes_flush(http_server *h, logger *log)
{
    http_note n[HTTP_NOTES];
    pthread_mutex_lock(&h->note_lock);
    unsigned k = h->nnotes;
    unsigned long long lost = h->notes_lost;
    memcpy(n, h->notes, k * sizeof n[0]);
    h->nnotes = 0;
    h->notes_lost = 0;
    pthread_mutex_unlock(&h->note_lock);
    for (unsigned i = 0; i < k; i++) {
        if (n[i].kind == 0)
            log_rl(log, LOG_WARN, "http", "unauthorized: %s", n[i].text);
        else
            log_rl(log, LOG_WARN, "http", "libmicrohttpd: %s", n[i].text);
    }
    if (lost)
        log_rl(log, LOG_WARN, "http", "%llu more lines of the HTTP server since the last tick "
               "not logged", lost);
}

/* A secret file others can read: said once, at start. */
static void warn_readable(logger *log, const char *key, const char *path)
{
    struct stat st;
    if (log && stat(path, &st) == 0 && (st.st_mode & S_IROTH))
        log_msg(log, LOG_WARN, "http", "%s %s can be read by every user (mode %03o): "
                "chmod o-rwx it", key, path, (unsigned)(st.st_mode & 0777));
}

/* Reads acc's files into h (before the server starts). 0, or -1 with err
 * set (what was read is freed by the caller, access_free). */
static int access_start(http_server *h, const http_access *acc, const char *host, char *err,
                        size_t errlen)
{
    char why[ERR_MAX];
    if (!acc->tls_cert != !acc->tls_key) {
        snprintf(err, errlen, "http: http_tls_cert and http_tls_key go together: set both, "
                 "or neither");
        return -1;
    }
    if (acc->tls_cert) {
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
            snprintf(err, errlen, "http: http_tls_cert: this libmicrohttpd (%s) was built "
                     "without TLS (GnuTLS)", MHD_get_version());
            return -1;
        }
        if (http_pem_load(acc->tls_cert, "CERTIFICATE", &h->tls_cert, &h->tls_cert_len, why,
                          sizeof why) != 0) {
            snprintf(err, errlen, "http: http_tls_cert %s", why);
            return -1;
        }
        if (http_pem_load(acc->tls_key, "PRIVATE KEY", &h->tls_key, &h->tls_key_len, why,
                          sizeof why) != 0) {
            snprintf(err, errlen, "http: http_tls_key %s", why);
            return -1;
        }
        warn_readable(acc->log, "http_tls_key", acc->tls_key);
    }
    if (acc->basic_file && !MHD_is_feature_supported(MHD_FEATURE_BASIC_AUTH)) {
        snprintf(err, errlen, "http: http_auth_basic_file: this libmicrohttpd (%s) was built "
                 "without basic authentication", MHD_get_version());
        return -1;
    }
    if (http_auth_load(&h->auth, acc->token_file, acc->basic_file, why, sizeof why) != 0) {
        snprintf(err, errlen, "http: %s", why);
        return -1;
    }
    int auth = h->auth.token || h->auth.nusers;
    if (acc->auth_metrics && !auth) { /* fail closed: /metrics would stay open */
        snprintf(err, errlen, "http: http_auth_metrics = yes needs credentials: "
                 "http_auth_token_file or http_auth_basic_file");
        return -1;
    }
    h->auth.metrics = acc->auth_metrics;
    if (acc->token_file)
        warn_readable(acc->log, "http_auth_token_file", acc->token_file);
    if (acc->basic_file)
        warn_readable(acc->log, "http_auth_basic_file", acc->basic_file);
    if (acc->log && strncmp(host, "127.", 4) != 0) {
        if (auth && !h->tls_cert)
            log_msg(acc->log, LOG_WARN, "http", "%s is not loopback and has no TLS: tokens and "
                    "passwords cross the network in clear (http_tls_cert, http_tls_key)", host);
        else if (!auth)
            log_msg(acc->log, LOG_WARN, "http", "%s is not loopback and needs no credentials: "
                    "/status, /history and the page are open to whoever reaches it "
                    "(http_auth_token_file, http_auth_basic_file)", host);
    }
    return 0;
}

static void access_free(http_server *h)
{
    http_auth_free(&h->auth);
    if (h->tls_key)
        http_secret_wipe(h->tls_key, h->tls_key_len);
    free(h->tls_key);
    free(h->tls_cert);
    h->tls_key = h->tls_cert = NULL;
}

/* The peer's address, for the log. */
static void peer_name(struct MHD_Connection *c, char *out, size_t len)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, len, "?");
    if (!info || !info->client_addr)
        return;
    if (info->client_addr->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, info->client_addr, sizeof in);
        if (!inet_ntop(AF_INET, &in.sin_addr, out, (socklen_t)len))
            snprintf(out, len, "?");
    } else if (info->client_addr->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, info->client_addr, sizeof in6);
        if (!inet_ntop(AF_INET6, &in6.sin6_addr, out, (socklen_t)len))
            snprintf(out, len, "?");
    }
}

static struct MHD_Response *text_response(const char *body);

/* 401, with a challenge for each kind of credentials accepted; counted,
 * and noted for the log. */
static enum MHD_Result refuse(http_server *h, const http_auth *a, struct MHD_Connection *c,
                              const char *method, const char *url, enum http_verdict v,
                              int bearer)
{
    char peer[INET6_ADDRSTRLEN + 1], what[LOG_ESCAPE_SIZE(64)], how[LOG_ESCAPE_SIZE(16)];
    peer_name(c, peer, sizeof peer);
    log_escape(what, sizeof what, url, strlen(url), 64);
    log_escape(how, sizeof how, method, strlen(method), 16);
    pthread_mutex_lock(&h->lock);
    h->unauthorized[v == HTTP_AUTH_WRONG]++;
    pthread_mutex_unlock(&h->lock);
    note(h, 0, "%s %s from %s: %s", how, what, peer,
         v == HTTP_AUTH_MISSING ? "no credentials" : "wrong credentials");
    struct MHD_Response *r = text_response("calibd: credentials needed\n");
    if (!r)
        return MHD_NO;
    enum MHD_Result ret = MHD_YES;
    if (a->token)
        ret = MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                      v == HTTP_AUTH_WRONG && bearer
                                          ? "Bearer realm=\"" HTTP_REALM "\", "
                                            "error=\"invalid_token\""
                                          : "Bearer realm=\"" HTTP_REALM "\"");
    if (ret == MHD_YES)
        ret = a->nusers ? MHD_queue_basic_auth_fail_response(c, HTTP_REALM, r)
                        : MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
    MHD_destroy_response(r);
    return ret;
}

/* The verdict of credentials a on a request, with libmicrohttpd's
 * decoding of basic auth. */
static enum http_verdict authorize(const http_auth *a, struct MHD_Connection *c, int open,
                                   int *bearer)
{
    const char *authz =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    char *user = NULL, *pass = NULL;
    *bearer = authz && strncasecmp(authz, "Bearer ", 7) == 0;
    if (a->nusers && authz && strncasecmp(authz, "Basic ", 6) == 0)
        user = MHD_basic_auth_get_username_password(c, &pass);
    enum http_verdict v = http_auth_check(a, open, authz, user, pass);
    if (pass) {
        http_secret_wipe(pass, strlen(pass));
        MHD_free(pass);
    }
    if (user)
        MHD_free(user);
    return v;
}

/* ------------------------------------------------------------ server */

static struct MHD_Response *text_response(const char *body)
{
    return MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
}

/* A copy of a snapshot (under the lock), or 503 with Retry-After when
 * there is none yet. */
/* Text served: the server's current one and each response that sends it
 * hold it, and the last to let go frees it, so a request copies nothing
 * and holds no lock while it is sent. */
typedef struct http_blob {
    atomic_size_t refs;
    size_t len;
    char *data;
} http_blob;

static http_blob *blob_new(char *data, size_t len)
{
    http_blob *b = malloc(sizeof *b);
    if (!b) {
        free(data);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->data = data;
    b->len = len;
    return b;
}

static void blob_release(void *arg)
{
    http_blob *b = arg;
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b->data);
        free(b);
    }
}

/* The response of a snapshot (under the lock), or a 503 before there is
 * one. */
static struct MHD_Response *snapshot(http_blob *b, const char *type, const char *what,
                                     unsigned *code)
{
    if (b) {
        atomic_fetch_add(&b->refs, 1);
        struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
            b->len, b->data, blob_release, b);
        if (r)
            MHD_add_response_header(r, "Content-Type", type);
        else
            blob_release(b);
        return r;
    }
    char body[128];
    snprintf(body, sizeof body, "calibd: no %s snapshot yet\n", what);
    *code = MHD_HTTP_SERVICE_UNAVAILABLE;
    struct MHD_Response *r = text_response(body);
    if (r)
        MHD_add_response_header(r, "Retry-After", "1");
    return r;
}

/* ------------------------------------------------------------ routes */

/* Each route's answer to GET (and HEAD): a response, with *code set when
 * it is not 200; NULL out of memory. */
typedef struct MHD_Response *serve_fn(http_server *h, struct MHD_Connection *c, unsigned *code);

static struct MHD_Response *serve_page(http_server *h, struct MHD_Connection *c, unsigned *code)
{
    (void)h, (void)c, (void)code;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        calibd_page_len, (void *)calibd_page, MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        /* nothing from elsewhere: the page works with no network */
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "script-src 'self' 'unsafe-inline'; img-src 'self' data:");
    }
    return r;
}

static struct MHD_Response *serve_healthz(http_server *h, struct MHD_Connection *c,
                                          unsigned *code)
{
    (void)c;
    pthread_mutex_lock(&h->lock);
    double age = mono_now() - h->beat, limit = h->health_timeout;
    pthread_mutex_unlock(&h->lock);
    char body[160];
    if (age <= limit) {
        snprintf(body, sizeof body, "ok\n");
    } else {
        *code = MHD_HTTP_SERVICE_UNAVAILABLE;
        snprintf(body, sizeof body, "calibd: the event loop has not ticked for %.1f s "
                 "(health_timeout %g s)\n", age, limit);
    }
    return text_response(body);
}

static struct MHD_Response *serve_history(http_server *h, struct MHD_Connection *c,
                                          unsigned *code)
{
    const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
    textbuf t = {.cap = 4096};
    if (!(t.buf = malloc(t.cap)))
        return NULL;
    pthread_mutex_lock(&h->hist.lock);
    long i = name ? hist_find(&h->hist.h, name, 0) : -1;
    if (i >= 0)
        render_history(&t, &h->hist.h, i, name);
    pthread_mutex_unlock(&h->hist.lock);
    if (i < 0) {
        *code = MHD_HTTP_NOT_FOUND;
        textbuf_put(&t, "{\"error\":\"%s\"}\n", name ? "no history for this model yet"
                                                  : "expected ?model=NAME");
    }
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(t.len, t.buf, MHD_RESPMEM_MUST_FREE);
    if (r)
        MHD_add_response_header(r, "Content-Type", "application/json");
    else
        free(t.buf);
    return r;
}

/* The text the rounds render, the metrics' or the status's, noted as
 * asked for (with many models, rendered only while asked for). */
static struct MHD_Response *rendered(http_server *h, int metrics, unsigned *code)
{
    pthread_mutex_lock(&h->lock);
    *(metrics ? &h->metrics_wanted : &h->status_wanted) = mono_now();
    struct MHD_Response *r =
        metrics ? snapshot(h->text, "text/plain; version=0.0.4", "metrics", code)
                : snapshot(h->status, "application/json", "status", code);
    pthread_mutex_unlock(&h->lock);
    return r;
}

static struct MHD_Response *serve_metrics(http_server *h, struct MHD_Connection *c,
                                          unsigned *code)
{
    (void)c;
    return rendered(h, 1, code);
}

static struct MHD_Response *serve_status(http_server *h, struct MHD_Connection *c,
                                         unsigned *code)
{
    (void)c;
    return rendered(h, 0, code);
}

/* What calibd serves. Every route answers GET and HEAD alone; an open
 * route needs no credentials unless http_auth_metrics says so. */
static const struct {
    const char *path, *query; /* the query, for the list of routes */
    int open;
    serve_fn *serve;
} routes[] = {
    {"/", "", 0, serve_page},
    {"/metrics", "", 1, serve_metrics},
    {"/status", "", 0, serve_status},
    {"/history", "?model=NAME", 0, serve_history},
    {"/healthz", "", 0, serve_healthz},
};
#define NROUTES (sizeof routes / sizeof routes[0])
#define ALLOWED "GET, HEAD"

/* The route of path, or -1. */
static int route_of(const char *path)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (strcmp(routes[i].path, path) == 0)
            return (int)i;
    return -1;
}

int http_route_open(const char *path)
{
    int i = route_of(path);
    return i >= 0 && routes[i].open;
}

size_t http_routes_text(char *out, size_t len, int ingest)
{
    size_t n = (size_t)snprintf(out, len, "calibd: the paths served are");
    for (size_t i = 0; i < NROUTES; i++)
        n += (size_t)snprintf(out + (n < len ? n : len), n < len ? len - n : 0, "%s %s%s",
                              i ? "," : "", routes[i].path, routes[i].query);
    if (ingest) /* http_ingest.h's, by pattern */
        n += (size_t)snprintf(out + (n < len ? n : len), n < len ? len - n : 0,
                              ", POST /v1/models/NAME/predictions, "
                              "POST /v1/models/NAME/labels, POST /v1/cloudevents");
    n += (size_t)snprintf(out + (n < len ? n : len), n < len ? len - n : 0, "\n");
    return n;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_len, void **state)
{
    http_server *h = cls;
    (void)version;
    char name[129];
    size_t name_len;
    int type;
    if (h->ingest.on && http_ingest_route(url, name, &name_len, &type)) {
        /* the producers' token where there is one, else the operators'
         * credentials; checked with the headers, before any body */
        const http_auth *a = h->ingest.auth.token ? &h->ingest.auth : &h->auth;
        int bearer;
        enum http_verdict v;
        if (!*state && http_auth_required(a, 0) &&
            (v = authorize(a, c, 0, &bearer)) != HTTP_AUTH_PASS)
            return refuse(h, a, c, method, url, v, bearer);
        if (*state && !*upload_len) {
            /* the body is complete: from here calibd answers it (or
             * refuses it at once), and a message it takes is answered
             * however long the loop takes (the expected wait is bounded:
             * http_ingest.c). The deadline stops before the body is
             * queued, under the lock cut_slow takes, so that no tick can
             * cut a connection whose message the loop may take; one cut
             * already (its body read before the cut) is not taken. */
            const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
            int cut = 0;
            if (info && info->socket_context) {
                http_conn *hc = info->socket_context;
                pthread_mutex_lock(&h->lock);
                hc->held = !hc->cut;
                cut = hc->cut;
                pthread_mutex_unlock(&h->lock);
            }
            if (cut)
                return MHD_NO;
        }
        return http_ingest_answer(&h->ingest, c, url, method, upload, upload_len, state);
    }
    int i = route_of(url);
    /* credentials first: without them, not even which paths exist */
    if (http_auth_required(&h->auth, i >= 0 && routes[i].open)) {
        int bearer;
        enum http_verdict v = authorize(&h->auth, c, i >= 0 && routes[i].open, &bearer);
        if (v != HTTP_AUTH_PASS)
            return refuse(h, &h->auth, c, method, url, v, bearer);
    }
    struct MHD_Response *r;
    unsigned code = MHD_HTTP_OK;
    if (i < 0) {
        char body[256];
        http_routes_text(body, sizeof body, h->ingest.on);
        code = MHD_HTTP_NOT_FOUND;
        r = text_response(body);
    } else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (r)
            MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, ALLOWED);
    } else {
        r = routes[i].serve(h, c, &code);
    }
    if (!r)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
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
    (void)code;
    http_ingest_done(req_ctx); /* an ingest request's job, if it was one */
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!info || !info->socket_context)
        return;
    pthread_mutex_lock(&h->lock);
    ((http_conn *)info->socket_context)->since = mono_now();
    ((http_conn *)info->socket_context)->held = 0;
    pthread_mutex_unlock(&h->lock);
}

/* Loop thread: shuts down connections past their deadline; MHD then reads
 * end-of-file and closes them. */
static void cut_slow(http_server *h)
{
    double now = mono_now();
    pthread_mutex_lock(&h->lock);
    for (http_conn *c = h->conns; c; c = c->next)
        if (!c->cut && !c->held && now - c->since > h->lim.timeout) {
            shutdown(c->fd, SHUT_RDWR);
            c->cut = 1;
            h->timeouts++;
        }
    pthread_mutex_unlock(&h->lock);
}

int http_start(http_server *h, const char *addr, const http_limits *lim,
               const http_access *acc, char *err, size_t errlen)
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
    pthread_mutex_init(&h->note_lock, NULL);
    h->lim = *lim;
    history_init(&h->hist, lim->history, lim->history_step);
    if (http_ingest_init(&h->ingest, acc && acc->ingest, acc ? acc->ingest_max_body : 0,
                         acc ? acc->ingest_budget : 0, lim->timeout,
                         acc ? acc->ingest_token_file : NULL, err, errlen) != 0) {
        history_free(&h->hist);
        pthread_mutex_destroy(&h->note_lock);
        pthread_mutex_destroy(&h->lock);
        return -1;
    }
    if (acc && access_start(h, acc, host, err, errlen) != 0)
        goto fail;
    /* libmicrohttpd's own idle cut is a backstop for a stalled loop: the
     * deadline (cut_slow, counted) comes first, even for a client too
     * starved of CPU to trickle its bytes */
    unsigned idle = (unsigned)ceil(2 * lim->timeout) + 1;
    /* TLS 1.2 and 1.3 only, from the key and certificate read above */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
        {MHD_OPTION_END, 0, NULL},
    };
    /* one polling thread (epoll where there is one): a slow client costs a
     * descriptor and a small memory pool, never a thread */
    h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                                  MHD_ALLOW_SUSPEND_RESUME |
                                  MHD_USE_ERROR_LOG | (h->tls_cert ? MHD_USE_TLS : 0),
                              (uint16_t)port, NULL, NULL, answer, h,
                              /* first, so that every line of its start goes there */
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                              lim->max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                              lim->max_per_addr, MHD_OPTION_CONNECTION_TIMEOUT,
                              idle ? idle : 1u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)32768, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                              h, MHD_OPTION_NOTIFY_COMPLETED, on_request_done, h,
                              MHD_OPTION_ARRAY, &tls[h->tls_cert ? 0 : 3], MHD_OPTION_END);
    if (!h->mhd) {
        /* libmicrohttpd's own lines say why: the port, or GnuTLS on the
         * certificate and key (which must match) */
        snprintf(err, errlen, "http: cannot %s on %s%s%s",
                 h->tls_cert ? "serve TLS" : "listen", addr, h->start_err[0] ? ": " : "",
                 h->start_err[0] ? h->start_err : "");
        goto fail;
    }
    pthread_mutex_lock(&h->note_lock);
    h->mhd_up = 1; /* a line it wrote on its way up is worth the log too */
    if (h->start_err[0] && h->nnotes < HTTP_NOTES) { /* cut to a note's size */
        http_note *n = &h->notes[h->nnotes++];
        size_t len = strnlen(h->start_err, sizeof n->text - 1);
        n->kind = 1;
        memcpy(n->text, h->start_err, len);
        n->text[len] = 0;
    }
    pthread_mutex_unlock(&h->note_lock);
    h->started = 1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    return info && info->port ? info->port : (int)port;
fail:
    access_free(h);
    history_free(&h->hist);
    http_ingest_free(&h->ingest);
    pthread_mutex_destroy(&h->note_lock);
    pthread_mutex_destroy(&h->lock);
    return -1;
}

/* ------------------------------------------------------------ rounds */

static size_t models_now(void *arg)
{
    return ((http_server *)arg)->d->reg.n;
}

/* One model into the round: its metrics, family by family, its status,
 * its history point. */
static void round_model(void *arg, size_t i)
{
    http_server *h = arg;
    http_round *r = &h->round;
    model *m = h->d->reg.models[i];
    if (m->handed_over) /* another instance's now (kafka.h) */
        return;
    if (r->metrics && !r->failed)
        r->failed = prom_model(&r->fam, m) != 0;
    if (r->status)
        status_model(&r->st, m);
    if (r->point)
        history_add(&h->hist, m, r->point_at);
}

/* The worker's share: the parts joined into the text served, the status
 * converted to JSON. Only the round's buffers are read. */
static void join_work(uv_work_t *req)
{
    http_round *r = &((http_server *)req->data)->round;
    r->text = r->json = NULL;
    if (r->metrics && !r->failed) {
        size_t len = r->daemon.len + prom_families_len(&r->fam);
        if ((r->text = malloc(len ? len : 1))) {
            memcpy(r->text, r->daemon.buf, r->daemon.len);
            r->text_len = r->daemon.len;
            for (size_t f = 0; f < r->fam.n; f++) {
                memcpy(r->text + r->text_len, r->fam.f[f].buf, r->fam.f[f].len);
                r->text_len += r->fam.f[f].len;
            }
        }
    }
    /* the families' buffers go: the joined text is their copy, and the
     * next round's grow again (one copy of the text kept, not two) */
    prom_families_release(&r->fam);
    if (r->status && calib_mpw_error(&r->st) == CALIB_OK)
        r->json = msgpack_to_json(r->st.sb.data, r->st.sb.size, &r->json_len);
}

/* Swaps in a new text (NULL: drop the current one, when keep is 0). */
static void swap_blob(http_blob **cur, char *data, size_t len, int keep)
{
    http_blob *b = data ? blob_new(data, len) : NULL;
    if (!b && keep)
        return; /* out of memory: the last one stays */
    blob_release(*cur);
    *cur = b;
}

static void join_done(uv_work_t *req, int status)
{
    http_server *h = req->data;
    http_round *r = &h->round;
    if (status != 0) /* cancelled: nothing joined */
        r->text = r->json = NULL;
    r->phase = ROUND_IDLE;
    h->round_seconds = mono_now() - r->begun;
    h->round_slice_max = r->models.slice_max;
    if (!h->mhd) { /* stopped meanwhile */
        free(r->text);
        free(r->json);
        return;
    }
    pthread_mutex_lock(&h->lock);
    if (r->metrics || h->text) /* not asked for: dropped, so never stale */
        swap_blob(&h->text, r->text, r->text_len, r->metrics);
    if (r->status || h->status) /* not asked for: dropped, so never stale */
        swap_blob(&h->status, r->json, r->json_len, r->status);
    pthread_mutex_unlock(&h->lock);
}

static void round_rendered(void *arg)
{
    http_server *h = arg;
    http_round *r = &h->round;
    if (r->status)
        status_end(&r->st);
    r->phase = ROUND_JOINING; /* the worker's: the models are walked */
    registry_walk_end(&h->d->reg);
    r->work.data = h;
    if (uv_queue_work(h->d->loop, &r->work, join_work, join_done) != 0) {
        join_work(&r->work); /* no worker: at once */
        join_done(&r->work, 0);
    }
}

/* Starts a round: the daemon-wide metrics and every family's header now,
 * the models in slices. */
static void round_start(http_server *h, calibd *d, int metrics, int status, double point_at)
{
    http_round *r = &h->round;
    r->phase = ROUND_RENDERING;
    registry_walk_begin(&d->reg); /* until round_rendered, or http_stop */
    r->metrics = metrics;
    r->status = status;
    r->point = point_at > 0;
    r->point_at = point_at;
    r->failed = 0;
    r->begun = mono_now();
    if (metrics) {
        r->daemon.len = 0; /* its buffer kept from round to round */
        r->daemon.failed = 0;
        r->failed = prom_daemon(&r->daemon, d) != 0;
        r->failed |= prom_headers(&r->fam, d) != 0;
    }
    if (status) {
        status_daemon s;
        calibd_status(d, &s);
        calib_mpw_reset(&r->st);
        status_begin(&r->st, &s);
    }
    slicer_start(&r->models);
}

/* The rounds' handles and buffers, at the first tick. */
static int rounds_init(http_server *h, calibd *d)
{
    h->d = d;
    calib_mpw_init(&h->round.st);
    if (slicer_init(&h->round.models, d->loop, models_now, round_model, round_rendered, h) ||
        history_start(&h->hist, d) || http_ingest_start(&h->ingest, d))
        return -1;
    return 0;
}

void http_update(http_server *h, calibd *d)
{
    if (!h->mhd)
        return;
    if (!h->d && rounds_init(h, d) != 0)
        log_rl(&d->log, LOG_ERROR, "http", "cannot start rendering (libuv)");
    notes_flush(h, &d->log);
    double now = mono_now(), wall = steady_now(d); /* history points: steady */
    pthread_mutex_lock(&h->lock);
    h->beat = now;
    h->health_timeout = d->cfg.health_timeout; /* a reload may change it */
    int few = d->reg.n <= HTTP_STATUS_ALWAYS;
    int status = few || now - h->status_wanted < HTTP_WANTED;
    int metrics = few || now - h->metrics_wanted < HTTP_WANTED;
    pthread_mutex_unlock(&h->lock);
    cut_slow(h);
    if (h->round.phase != ROUND_IDLE || !h->round.models.ready)
        return;
    round_start(h, d, metrics, status, history_due(&h->hist, wall, now));
}

void http_stop(http_server *h)
{
    if (!h->mhd)
        return;
    http_ingest_stop(&h->ingest); /* no connection may stay suspended */
    MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
    slicer_close(&h->round.models);
    history_stop(&h->hist);
    if (h->round.phase == ROUND_RENDERING) { /* a walk cut short; a join still ends */
        h->round.phase = ROUND_IDLE;
        registry_walk_end(&h->d->reg);
    }
}

void http_free(http_server *h)
{
    if (!h->started)
        return;
    http_stop(h);
    access_free(h);
    http_ingest_free(&h->ingest);
    pthread_mutex_destroy(&h->note_lock);
    pthread_mutex_destroy(&h->lock);
    blob_release(h->text);
    blob_release(h->status);
    h->text = h->status = NULL;
    history_free(&h->hist);
    free(h->round.daemon.buf);
    prom_families_free(&h->round.fam);
    calib_mpw_destroy(&h->round.st);
    h->round = (http_round){0};
    h->started = 0;
}
