/* http_ingest.c — protocol v1 messages over HTTP (see http_ingest.h). The
 * server's thread reads a request's body and queues it; the loop takes
 * the queue on its wake-up, ingests each body as a ZeroMQ message is
 * ingested, writes the outcome into the request and resumes its
 * connection, which the server's thread then answers. A request is the
 * job: the loop touches it only between taking it and resuming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "calib/protocol.h"
#include "calibd.h"
#include "http_ingest.h"
#include "ingest.h"
#include "json_msg.h"
#include "kserve.h"
#include "textbuf.h"

#define PREFIX "/v1/models/"
#define CLOUDEVENTS "/v1/cloudevents"
#define CE_REQUEST "org.kubeflow.serving.inference.request"
#define CE_RESPONSE "org.kubeflow.serving.inference.response"
#define RETRY_AFTER "1" /* seconds a busy answer asks the sender to wait */

typedef struct http_ingest_job {
    struct http_ingest_job *next;
    http_ingest *g;
    struct MHD_Connection *conn;
    int type;               /* CALIB_MSG_PRED or CALIB_MSG_LABEL: the route's */
    int json;               /* the body is JSON, else msgpack */
    char topic[129];
    size_t topic_len;
    char *body;             /* as read; once queued, msgpack */
    size_t len, cap;
    int too_large;          /* the body passed max_body: 413 */
    int over;               /* its buffer would pass ingest_memory: 503 */
    size_t held;            /* its buffer's bytes counted in g->reading */
    int queued;             /* handed to the loop */
    uint64_t queued_at;     /* uv_hrtime then */
    int answered;           /* the loop has ingested it (or refused its JSON) */
    size_t bytes;           /* its share of the queue's budget */
    char why[256];          /* the JSON's fault, when it is no JSON object */
    /* a CloudEvent of KServe's payload logger: its id, and whether it is
     * the response (else the request, counted and ignored) */
    int ce, ce_response;
    char ce_id[KSERVE_ID_MAX + 1];
    int ignored;            /* the loop ignored it: 2, no usable output */
    ingest_outcome out;
} http_ingest_job;

int http_ingest_route(const char *url, char name[129], size_t *name_len, int *type)
{
    if (strcmp(url, CLOUDEVENTS) == 0) { /* the model is the event's */
        name[0] = 0;
        *name_len = 0;
        *type = CALIB_MSG_PRED;
        return 1;
    }
    if (strncmp(url, PREFIX, sizeof PREFIX - 1) != 0)
        return 0;
    const char *n = url + sizeof PREFIX - 1, *slash = strchr(n, '/');
    if (!slash || slash == n || (size_t)(slash - n) > 128)
        return 0;
    if (strcmp(slash, "/predictions") == 0)
        *type = CALIB_MSG_PRED;
    else if (strcmp(slash, "/labels") == 0)
        *type = CALIB_MSG_LABEL;
    else
        return 0;
    *name_len = (size_t)(slash - n);
    memcpy(name, n, *name_len);
    name[*name_len] = 0;
    return 1;
}

/* ------------------------------------------------------------ the loop's side */

/* Loop thread: one body ingested (or its JSON refused, counted as a
 * rejection of its model), the outcome written, the connection resumed:
 * the job is the server thread's again from the resume on. */
/* Loop thread: a KServe response event (a request's was answered by the
 * server's thread, unread): its output made a "pred" message as the
 * model's kserve_output and kserve_form say, and ingested; one without a
 * usable output is counted, logged at a limited rate and ignored. */
static void take_event(http_ingest *g, http_ingest_job *j)
{
    calibd *d = g->d;
    model_cfg mc;
    config_model_for(&d->cfg, j->topic, &mc);
    kserve_opts o = {mc.kserve_output, mc.kserve_form};
    calib_mpw w;
    calib_mpw_init(&w);
    int n = kserve_to_msg(j->body ? j->body : "", j->len, j->ce_id, &o, &w, j->why,
                          sizeof j->why);
    if (n > 0) {
        ingest_message(d, j->topic, j->topic_len, w.sb.data, w.sb.size, CALIB_MSG_PRED, &j->out);
    } else if (n == 0) {
        j->ignored = 2;
        char id[LOG_ESCAPE_SIZE(KSERVE_ID_MAX)], topic[LOG_ESCAPE_SIZE(128)];
        log_escape(id, sizeof id, j->ce_id, strlen(j->ce_id), KSERVE_ID_MAX);
        log_escape(topic, sizeof topic, j->topic, j->topic_len, 128);
        log_rl_key(&d->log, "kserve_unusable", LOG_WARN, "http",
                   "KServe event %s of %s: ignored: %s", id, topic, j->why);
    } else {
        ingest_reject(d, j->topic, j->topic_len, REJ_BAD_JSON, j->why, &j->out);
    }
    calib_mpw_destroy(&w);
}

static void take(http_ingest *g, http_ingest_job *j)
{
    calibd *d = g->d;
    uint64_t t0 = uv_hrtime();
    if (j->ce)
        take_event(g, j);
    else if (j->why[0])
        ingest_reject(d, j->topic, j->topic_len, REJ_BAD_JSON, j->why, &j->out);
    else
        ingest_message(d, j->topic, j->topic_len, j->body, j->len, j->type, &j->out);
    /* the loop's time per byte, a moving mean over the last 16 or so */
    double per_byte = (double)(uv_hrtime() - t0) / (double)j->bytes;
    pthread_mutex_lock(&g->lock);
    g->ns_per_byte = g->ns_per_byte > 0 ? g->ns_per_byte + (per_byte - g->ns_per_byte) / 16
                                        : per_byte;
    g->queued -= j->bytes;
    g->messages++;
    g->kserve_unusable += j->ignored == 2;
    j->answered = 1;
    struct MHD_Connection *c = j->conn;
    pthread_mutex_unlock(&g->lock);
    MHD_resume_connection(c);
}

/* Loop thread: the jobs queued, in order, for at most DRAIN_NS at once
 * (the loop's other work goes on between): the rest at the next wake-up.
 * all: every one, whatever it takes (at stop). */
#define DRAIN_NS 5000000ull
static void drain(http_ingest *g, int all)
{
    uint64_t start = uv_hrtime();
    for (;;) {
        if (!all && uv_hrtime() - start >= DRAIN_NS) {
            pthread_mutex_lock(&g->lock);
            if (g->head && g->async_ready)
                uv_async_send(&g->async);
            pthread_mutex_unlock(&g->lock);
            return;
        }
        pthread_mutex_lock(&g->lock);
        http_ingest_job *j = g->head;
        if (j) {
            g->head = j->next;
            if (!g->head)
                g->tail = NULL;
        }
        pthread_mutex_unlock(&g->lock);
        if (!j)
            return;
        take(g, j);
    }
}

static void on_async(uv_async_t *a)
{
    drain(a->data, 0);
}

int http_ingest_init(http_ingest *g, int on, size_t max_body, size_t budget, double timeout,
                     const char *token_file, char *err, size_t errlen)
{
    g->on = on;
    g->max_body = max_body;
    g->budget = budget;
    g->timeout = timeout;
    pthread_mutex_init(&g->lock, NULL);
    if (on && token_file && http_auth_load(&g->auth, token_file, NULL, err, errlen) != 0) {
        pthread_mutex_destroy(&g->lock);
        return -1;
    }
    return 0;
}

int http_ingest_start(http_ingest *g, calibd *d)
{
    g->d = d;
    if (!g->on)
        return 0;
    g->async.data = g;
    if (uv_async_init(d->loop, &g->async, on_async) != 0)
        return -1;
    pthread_mutex_lock(&g->lock);
    g->async_ready = 1;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

void http_ingest_stop(http_ingest *g)
{
    pthread_mutex_lock(&g->lock);
    g->closed = 1; /* later requests: 503 */
    pthread_mutex_unlock(&g->lock);
    if (g->d)
        drain(g, 1);
    pthread_mutex_lock(&g->lock);
    int ready = g->async_ready;
    g->async_ready = 0;
    pthread_mutex_unlock(&g->lock);
    if (ready)
        uv_close((uv_handle_t *)&g->async, NULL);
}

void http_ingest_free(http_ingest *g)
{
    http_auth_free(&g->auth);
    pthread_mutex_destroy(&g->lock);
}

/* ------------------------------------------------------------ the server's side */

static struct MHD_Response *json_response(textbuf *t)
{
    if (t->failed) {
        free(t->buf);
        return NULL;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(t->len, t->buf,
                                                             MHD_RESPMEM_MUST_FREE);
    if (r)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    else
        free(t->buf);
    return r;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned code, textbuf *t,
                                 const char *retry_after)
{
    struct MHD_Response *r = json_response(t);
    if (!r)
        return MHD_NO;
    if (retry_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* {"ok": false, "error": what[, "detail": ...]} */
static enum MHD_Result refuse(struct MHD_Connection *c, unsigned code, const char *what,
                              const char *detail, const char *retry_after)
{
    textbuf t = {0};
    textbuf_put(&t, "{\"ok\":false,\"error\":");
    textbuf_json_str(&t, what);
    if (detail) {
        textbuf_put(&t, ",\"detail\":");
        textbuf_json_str(&t, detail);
    }
    textbuf_put(&t, "}\n");
    return send_json(c, code, &t, retry_after);
}

/* The loop's outcome: 200 when the message was taken and some record of
 * it (or none had to be) was, or a KServe event was ignored; 400 with the
 * first reason otherwise. */
static enum MHD_Result answer_outcome(struct MHD_Connection *c, const http_ingest_job *j)
{
    const ingest_outcome *o = &j->out;
    if (j->ignored) {
        textbuf t = {0};
        textbuf_put(&t, "{\"ok\":true,\"records\":0,\"ignored\":\"unusable\",\"detail\":");
        textbuf_json_str(&t, j->why);
        textbuf_put(&t, "}\n");
        return send_json(c, MHD_HTTP_OK, &t, NULL);
    }
    int rejected = o->reason != 0 || (o->records > 0 && o->rejected >= o->records);
    /* calibd's own limits are no fault of the message: send again later
     * (503), or configure the model (404) */
    unsigned code = !rejected                            ? MHD_HTTP_OK
                    : o->reason == REJ_UNKNOWN_MODEL     ? MHD_HTTP_NOT_FOUND
                    : o->reason == REJ_TOO_MANY_MODELS || o->reason == REJ_MEMORY_LIMIT ||
                              o->reason == CALIB_REJ_NO_MEMORY
                                                         ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                         : MHD_HTTP_BAD_REQUEST;
    textbuf t = {0};
    textbuf_put(&t, "{\"ok\":%s,\"records\":%zu,\"rejected\":%zu", rejected ? "false" : "true",
                o->reason ? 0 : o->records, o->reason ? 0 : o->rejected);
    if (o->first) {
        textbuf_put(&t, ",\"error\":");
        textbuf_json_str(&t, reject_name(o->first));
        if (o->key[0]) {
            textbuf_put(&t, ",\"key\":");
            textbuf_json_str(&t, o->key);
        }
        if (o->detail[0]) {
            textbuf_put(&t, ",\"detail\":");
            textbuf_json_str(&t, o->detail);
        }
    }
    textbuf_put(&t, "}\n");
    return send_json(c, code, &t, code == MHD_HTTP_SERVICE_UNAVAILABLE ? RETRY_AFTER : NULL);
}

/* application/json or application/msgpack (parameters ignored): 1 JSON,
 * 0 msgpack, -1 anything else. */
static int content_kind(struct MHD_Connection *c)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct)
        return -1;
    size_t n = strcspn(ct, "; \t");
    if (n == 16 && strncasecmp(ct, "application/json", n) == 0)
        return 1;
    if ((n == 19 && strncasecmp(ct, "application/msgpack", n) == 0) ||
        (n == 21 && strncasecmp(ct, "application/x-msgpack", n) == 0))
        return 0;
    return -1;
}

static void count(http_ingest *g, unsigned long long *n)
{
    pthread_mutex_lock(&g->lock);
    ++*n;
    pthread_mutex_unlock(&g->lock);
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* A binary-mode CloudEvent as KServe's payload logger sends it: its
 * ce-specversion 1.x, ce-type, ce-id (the prediction ids), and the model,
 * ce-inferenceservicename, or NAME:canary for the canary endpoint
 * (ce-endpoint). 0, or -1 with why. Its body is JSON whatever its
 * Content-Type (the logger copies the inference request's). */
static int event_of(struct MHD_Connection *c, http_ingest_job *j, char *why, size_t len)
{
    const char *spec = header(c, "ce-specversion"), *type = header(c, "ce-type"),
               *id = header(c, "ce-id"), *name = header(c, "ce-inferenceservicename"),
               *endpoint = header(c, "ce-endpoint");
    if (!spec || strncmp(spec, "1.", 2) != 0)
        return snprintf(why, len, "not a CloudEvent of specversion 1.x (ce-specversion)"), -1;
    if (!type || (strcmp(type, CE_RESPONSE) != 0 && strcmp(type, CE_REQUEST) != 0))
        return snprintf(why, len, "ce-type is neither %s nor %s", CE_RESPONSE, CE_REQUEST), -1;
    /* '/' separates an event's rows' ids (ID/0, ID/1...): in a ce-id, the
     * one-row event "x/0" would be the first row of event "x" */
    if (!id || !id[0] || strlen(id) > KSERVE_ID_MAX || strchr(id, '/'))
        return snprintf(why, len, "ce-id: 1 to %d bytes, without '/' (it separates the "
                        "ids of an event's rows)", KSERVE_ID_MAX), -1;
    /* ':' marks the canary (NAME:canary): no service may be named so */
    int canary = endpoint && strcmp(endpoint, "canary") == 0;
    size_t n = name ? strlen(name) : 0;
    if (!n || n + (canary ? 7 : 0) > 128 || !calib_proto_topic_ok(name, n) || memchr(name, ':', n))
        return snprintf(why, len, "ce-inferenceservicename: 1 to 121 bytes of "
                        "[A-Za-z0-9._-] (':' marks the canary)"), -1;
    j->ce = 1;
    j->ce_response = strcmp(type, CE_RESPONSE) == 0;
    memcpy(j->ce_id, id, strlen(id) + 1);
    j->topic_len = (size_t)snprintf(j->topic, sizeof j->topic, "%s%s", name,
                                    canary ? ":canary" : "");
    return 0;
}

/* The first call: the headers alone. A request refused now is answered at
 * once (libmicrohttpd then discards its body). */
static enum MHD_Result begin(http_ingest *g, struct MHD_Connection *c, const char *url,
                             const char *method, void **state)
{
    if (strcmp(method, "POST") != 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
        MHD_destroy_response(r);
        return ret;
    }
    /* KServe's logger gives its events the inference request's content
     * type, whatever it was: an event's body is read as JSON regardless */
    int event = strcmp(url, CLOUDEVENTS) == 0;
    int json = event ? 1 : content_kind(c);
    if (json < 0) {
        count(g, &g->unsupported);
        return refuse(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                      "the body is one protocol v1 message map: Content-Type "
                      "application/json or application/msgpack", NULL);
    }
    http_ingest_job *j = calloc(1, sizeof *j);
    if (!j)
        return MHD_NO;
    j->g = g;
    if (!http_ingest_route(url, j->topic, &j->topic_len, &j->type)) {
        free(j);
        return MHD_NO;
    }
    if (event) {
        char why[160];
        if (event_of(c, j, why, sizeof why) != 0) {
            free(j);
            count(g, &g->bad_event);
            return refuse(c, MHD_HTTP_BAD_REQUEST, "bad_event", why, NULL);
        }
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > g->max_body && !(j->ce && !j->ce_response)) {
        free(j);
        count(g, &g->too_large);
        return refuse(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                      "the body passes max_msg_size", NULL);
    }
    j->json = json;
    j->conn = c;
    *state = j;
    return MHD_YES;
}

static void count_bytes(http_ingest *g, size_t n)
{
    pthread_mutex_lock(&g->lock);
    g->received += n;
    pthread_mutex_unlock(&g->lock);
}

/* The bytes of j's buffer no longer counted as being read. */
static void release(http_ingest *g, http_ingest_job *j)
{
    if (!j->held)
        return;
    pthread_mutex_lock(&g->lock);
    g->reading -= j->held;
    pthread_mutex_unlock(&g->lock);
    j->held = 0;
}

/* The body's buffer dropped, the rest of it discarded as it comes. */
static void drop_body(http_ingest *g, http_ingest_job *j)
{
    release(g, j);
    free(j->body);
    j->body = NULL;
    j->len = j->cap = 0;
}

/* A chunk of the body; past max_body, or past what ingest_memory leaves
 * (bodies being read and bodies waiting for the loop together; a body
 * alone always fits), the rest is discarded. */
static void append(http_ingest *g, http_ingest_job *j, const char *data, size_t len)
{
    if (j->too_large || j->over)
        return;
    if (len > g->max_body - j->len) {
        j->too_large = 1;
        drop_body(g, j);
        return;
    }
    if (j->len + len > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (cap < j->len + len)
            cap *= 2;
        if (cap > g->max_body)
            cap = g->max_body;
        size_t more = cap - j->cap;
        pthread_mutex_lock(&g->lock);
        size_t used = g->reading + g->queued;
        int fits = used == j->held || (used <= g->budget && more <= g->budget - used);
        if (fits) {
            g->reading += more;
            j->held += more;
            if (g->reading > g->reading_max)
                g->reading_max = g->reading;
        }
        pthread_mutex_unlock(&g->lock);
        if (!fits) {
            j->over = 1;
            drop_body(g, j);
            return;
        }
        char *b = realloc(j->body, cap);
        if (!b) {
            j->too_large = 1; /* answered as too large: nothing is half-read */
            drop_body(g, j);
            return;
        }
        j->body = b;
        j->cap = cap;
    }
    memcpy(j->body + j->len, data, len);
    j->len += len;
}

/* The whole body read: JSON made msgpack (or its fault kept for the loop
 * to count), then queued unless the queue is full or closed. */
static enum MHD_Result hand_over(http_ingest *g, struct MHD_Connection *c, http_ingest_job *j)
{
    release(g, j); /* read: counted as waiting from here, if taken */
    if (j->over) {
        count(g, &g->busy);
        return refuse(c, MHD_HTTP_SERVICE_UNAVAILABLE, "busy",
                      "the bodies being read and waiting would pass ingest_memory: send "
                      "again later", RETRY_AFTER);
    }
    if (j->too_large) {
        count(g, &g->too_large);
        return refuse(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                      "the body passes max_msg_size", NULL);
    }
    if (j->json && !j->ce) { /* an event's JSON is the loop's to read (kserve.h) */
        calib_mpw w;
        calib_mpw_init(&w);
        if (json_msg_to_msgpack(j->body ? j->body : "", j->len, &w, j->why, sizeof j->why) == 0) {
            free(j->body);
            j->body = w.sb.data; /* the writer's buffer, taken over */
            j->len = j->cap = w.sb.size;
            w.sb.data = NULL;
            w.sb.size = w.sb.alloc = 0;
        } else if (!j->why[0]) {
            snprintf(j->why, sizeof j->why, "not JSON");
        }
        calib_mpw_destroy(&w);
    }
    j->bytes = j->len + sizeof *j;
    uint64_t now = uv_hrtime();
    pthread_mutex_lock(&g->lock);
    /* a body alone always fits (max_msg_size <= ingest_memory is not
     * required of the configuration): the budget bounds what waits */
    int busy = g->closed || !g->async_ready || (g->queued && g->queued + j->bytes > g->budget);
    /* and a message is taken only when its answer is expected within
     * http_timeout: the time the first waiting one has waited (the loop's
     * other work shows there), plus the loop's time for every byte up to
     * this body's end. A message taken is answered however long it takes
     * (its connection is held, http.c), so this keeps the producer's own
     * timeout, which is likely about calibd's, from cutting an answer. */
    double wait = 0;
    int late = 0;
    if (!busy && g->head) {
        wait = (double)(now - g->head->queued_at) / 1e9 +
               (double)(g->queued + j->bytes) * g->ns_per_byte / 1e9;
        late = wait > g->timeout;
    }
    if (late) {
        g->late++;
    } else if (busy) {
        g->busy++;
    } else {
        /* suspended before the loop can see it, so that its resume comes
         * after */
        MHD_suspend_connection(c);
        j->queued = 1;
        j->queued_at = now;
        g->queued += j->bytes;
        if (g->tail)
            g->tail->next = j;
        else
            g->head = j;
        g->tail = j;
        uv_async_send(&g->async); /* under the lock: stop closes it under it too */
    }
    pthread_mutex_unlock(&g->lock);
    if (busy || late) {
        /* Retry-After: the expected wait, at least 1 s */
        char after[24];
        snprintf(after, sizeof after, "%.0f", wait > 1 ? ceil(wait) : 1.0);
        return refuse(c, MHD_HTTP_SERVICE_UNAVAILABLE, late ? "late" : "busy",
                      late ? "the answer would come later than http_timeout: send again later"
                           : "calibd is behind (or stopping): send again later", after);
    }
    return MHD_YES;
}

enum MHD_Result http_ingest_answer(http_ingest *g, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *upload,
                                   size_t *upload_len, void **state)
{
    http_ingest_job *j = *state;
    if (!j)
        return begin(g, c, url, method, state);
    int request = j->ce && !j->ce_response;
    if (*upload_len) {
        count_bytes(g, *upload_len);
        if (!request) /* a request event's inputs: read, not kept */
            append(g, j, upload, *upload_len);
        *upload_len = 0;
        return MHD_YES;
    }
    if (request) { /* counted and ignored; answered once read, so that the
                      connection stays open (an answer before the body
                      closes it) */
        count(g, &g->kserve_requests);
        textbuf t = {0};
        textbuf_put(&t, "{\"ok\":true,\"records\":0,\"ignored\":\"request\"}\n");
        return send_json(c, MHD_HTTP_OK, &t, NULL);
    }
    if (!j->queued)
        return hand_over(g, c, j);
    pthread_mutex_lock(&g->lock);
    int answered = j->answered;
    pthread_mutex_unlock(&g->lock);
    if (!answered) /* a call before the loop resumed it: nothing to say yet */
        return MHD_YES;
    return answer_outcome(c, j);
}

void http_ingest_done(void **state)
{
    http_ingest_job *j = *state;
    if (!j)
        return;
    release(j->g, j); /* a connection gone mid-body */
    free(j->body);
    free(j);
    *state = NULL;
}
