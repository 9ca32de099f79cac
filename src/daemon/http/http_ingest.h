/* http_ingest.h — protocol v1 messages over HTTP (calibd-protocol(7),
 * HTTP; calibd(8), HTTP INGEST): POST /v1/models/NAME/predictions and
 * POST /v1/models/NAME/labels, the body one message map as JSON
 * (application/json) or msgpack (application/msgpack). The server's
 * thread reads the body and hands it to the loop, which ingests it with
 * the same code as a ZeroMQ message (ingest_message) and answers: 200
 * with the records taken, 400 with the reason when the message (or every
 * record of it) is rejected, counted like any rejection; 413 over
 * max_msg_size, 415 for another content type, 503 with Retry-After when
 * the bodies being read and waiting for the loop would pass ingest_memory
 * (the rest of a body past it is discarded as it comes), or when the
 * expected wait for the loop would pass http_timeout. A message taken is
 * always answered: its connection has no deadline while it waits. And POST
 * /v1/cloudevents: KServe's payload logger's CloudEvents (kserve.h). */
#ifndef CALIBD_HTTP_INGEST_H
#define CALIBD_HTTP_INGEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>
#include <uv.h>

#include "http_auth.h"

struct calibd;
struct http_ingest_job;

typedef struct http_ingest {
    int on;                 /* http_ingest = yes */
    size_t max_body;        /* max_msg_size */
    size_t budget;          /* ingest_memory: bytes of bodies waiting at most */
    double timeout;         /* http_timeout: the longest expected wait taken */
    http_auth auth;         /* the producers' token (http_ingest_token_file) */
    pthread_mutex_t lock;   /* the queue and the counters */
    struct http_ingest_job *head, *tail; /* waiting for the loop */
    size_t queued;          /* their bytes */
    size_t reading;         /* bytes of the buffers of bodies being read:
                               with queued, at most budget (one body alone
                               always fits) */
    size_t reading_max;     /* the most reading has been */
    unsigned long long received; /* bytes of bodies received, kept or not */
    double ns_per_byte;     /* the loop's time to ingest a byte (moving mean) */
    int closed;             /* no loop to take them: 503 */
    uv_async_t async;       /* the loop's wake-up */
    int async_ready;
    struct calibd *d;
    /* counters (calibd_http_ingest_*): messages answered by the loop, and
     * requests refused before it: too large, unsupported type, busy */
    unsigned long long messages, too_large, unsupported, busy, bad_event;
    unsigned long long late;  /* refused: the expected wait passed http_timeout */
    /* KServe events ignored: requests, and responses without a usable output */
    unsigned long long kserve_requests, kserve_unusable;
} http_ingest;

/* On the server's start: the settings and the producers' token file
 * (NULL: none). 0, or -1 with err set. */
int http_ingest_init(http_ingest *g, int on, size_t max_body, size_t budget, double timeout,
                     const char *token_file, char *err, size_t errlen);
/* At the first tick, on the loop: the wake-up handle. 0, or -1 (libuv). */
int http_ingest_start(http_ingest *g, struct calibd *d);
/* At stop, from the loop: every waiting body is answered (ingested, as it
 * would have been) and later requests get 503. */
void http_ingest_stop(http_ingest *g);
void http_ingest_free(http_ingest *g);

/* Whether url is an ingest route: the model's name (1..128 bytes, not
 * checked further here; "" for POST /v1/cloudevents, whose events name it)
 * into name, the message type (CALIB_MSG_PRED or CALIB_MSG_LABEL) into
 * *type. */
int http_ingest_route(const char *url, char name[129], size_t *name_len, int *type);

/* libmicrohttpd's access handler for an ingest route (credentials already
 * checked): reads the body, queues it, suspends the connection and, once
 * the loop has resumed it, answers. */
enum MHD_Result http_ingest_answer(http_ingest *g, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *upload,
                                   size_t *upload_len, void **state);
/* libmicrohttpd's request-completed callback's share: frees the request's
 * state (a body not handed over, an answered job). */
void http_ingest_done(void **state);

#endif
