/* http.h — calibd over HTTP (libmicrohttpd): the server, its table of
 * routes and its rendering rounds. The server thread only ever serves
 * text that the loop thread renders, a slice at a time, in rounds (one
 * starts each tick when none runs), so no daemon state is read off the
 * loop thread. The metrics' text is prom.h's, the credentials http_auth.h's. */
#ifndef CALIBD_HTTP_H
#define CALIBD_HTTP_H

#include <pthread.h>
#include <stddef.h>

#include <uv.h>

#include "calib/mpw.h"
#include "history.h"
#include "http_ingest.h"
#include "http_auth.h"
#include "log.h"
#include "prom.h"
#include "slicer.h"

struct calibd;

/* One open connection (MHD's socket context), in the server's list. */
typedef struct http_conn {
    int fd;
    double since;  /* monotonic seconds: opened, or its last request done */
    int cut;       /* shut down for its deadline */
    int held;      /* its body waits for the loop: no deadline until answered */
    struct http_conn *prev, *next;
} http_conn;

/* Limits against slow or greedy clients (calibd.conf(5): http_*). */
typedef struct http_limits {
    double timeout;         /* seconds a connection has for each request */
    unsigned max_conns;     /* connections at once */
    unsigned max_per_addr;  /* connections at once from one address */
    size_t history;         /* points kept of each model's history (0: none) */
    double history_step;    /* seconds between two points */
} http_limits;

/* TLS and authentication (calibd.conf(5): http_tls_*, http_auth_*). The
 * files are read once, by http_start; NULL turns each off. */
typedef struct http_access {
    const char *tls_cert, *tls_key; /* PEM files: both or neither */
    const char *token_file;         /* one bearer token */
    const char *basic_file;         /* user:password lines (basic auth) */
    int auth_metrics;               /* /metrics needs credentials too */
    logger *log;                    /* warnings at start, or NULL */
    int ingest;                     /* http_ingest: the POST routes */
    const char *ingest_token_file;  /* the producers' bearer token, or NULL */
    size_t ingest_max_body;         /* max_msg_size */
    size_t ingest_budget;           /* ingest_memory */
} http_access;

/* A line for the log, from the server's thread, that the loop writes. */
typedef struct http_note {
    int kind;       /* 0: an unauthorized request, 1: libmicrohttpd's */
    char text[256];
} http_note;
#define HTTP_NOTES 16 /* notes kept between two ticks; more are counted */

/* A round of rendering: each model's metrics (into one buffer per metric
 * family, so that a family's samples stay together as the text format
 * wants), its status and, when due, its history point, a slice at a time;
 * then a worker joins the parts into the text served, and the loop swaps
 * it in. Its buffers are kept from round to round. */
enum round_phase {
    ROUND_IDLE,      /* none: the parts are free */
    ROUND_RENDERING, /* the models walked on the loop, a slice at a time */
    ROUND_JOINING,   /* the worker joins the parts */
};
typedef struct http_round {
    slicer models;          /* model i, in slices */
    uv_work_t work;         /* the join */
    enum round_phase phase; /* not idle: the parts are the round's */
    int metrics, status;    /* what it renders */
    int point;              /* with a history point at point_at (wall) */
    double point_at;
    int failed;             /* out of memory: the last snapshots stay */
    double begun;           /* monotonic time of its start */
    textbuf daemon;            /* the daemon-wide metrics */
    prom_families fam;      /* the models' */
    calib_mpw st;           /* the status, msgpack */
    char *text, *json;      /* the worker's joined results */
    size_t text_len, json_len;
} http_round;

typedef struct http_server {
    struct MHD_Daemon *mhd;
    struct calibd *d;       /* the loop's: set by http_update */
    int started;            /* http_start succeeded; http_free undoes it */
    pthread_mutex_t lock;   /* everything below that the server thread reads */
    struct http_blob *text;   /* the current /metrics snapshot, or NULL */
    struct http_blob *status; /* the current /status snapshot (JSON), or NULL */
    double status_wanted;   /* monotonic time /status was last asked for */
    double metrics_wanted;  /* monotonic time /metrics was last asked for */
    double beat;            /* monotonic time of the loop's last tick */
    double health_timeout;  /* /healthz fails past beat + health_timeout */
    history hist;           /* each model's history (GET /history): its own lock */
    http_limits lim;
    http_conn *conns;       /* open connections */
    unsigned long long timeouts; /* connections cut at their deadline */
    unsigned long long unauthorized[2]; /* 401s: credentials missing, wrong */
    /* set at start, then read-only */
    http_auth auth;
    http_ingest ingest;     /* POST /v1/models/NAME/...: its own lock */
    char *tls_cert, *tls_key; /* PEM, NUL-terminated; NULL: plain HTTP */
    size_t tls_cert_len, tls_key_len;
    /* lines for the log (the logger is the loop's): its own lock, since
     * libmicrohttpd may log from anywhere */
    pthread_mutex_t note_lock;
    http_note notes[HTTP_NOTES];
    unsigned nnotes;
    unsigned long long notes_lost;
    int mhd_up;             /* libmicrohttpd started: its lines are notes */
    char start_err[512];    /* until then, its lines for http_start's error */
    /* the loop's alone */
    http_round round;
    double round_seconds;   /* the last round, start to swapped in */
    double round_slice_max; /* its longest slice on the loop */
} http_server;

/* Starts serving on "ADDR:PORT" (IPv4; port 0 picks one), over TLS and
 * with authentication as acc says (NULL: plain HTTP, open). Returns the
 * port bound, or -1 with err set (a file that cannot be read or is not
 * what it should be, TLS or basic auth that libmicrohttpd lacks, an
 * address that cannot be bound).
 *
 * Authentication: every request but GET /metrics (unless
 * acc->auth_metrics) needs a right bearer token or user:password when
 * either is configured; others are answered 401 with WWW-Authenticate,
 * counted (calibd_http_unauthorized_total) and logged, at a limited rate,
 * with the peer's address by the next tick.
 *
 * Slow clients: a connection has lim->timeout seconds from its opening, or
 * from its last complete request, to send a complete request; trickling
 * bytes does not extend it (libmicrohttpd's own timeout, which does, is
 * set to the same value for idle connections). Each tick (http_update)
 * shuts down the connections past their deadline. At most lim->max_conns
 * connections, lim->max_per_addr from one address. */
int http_start(http_server *h, const char *addr, const http_limits *lim,
               const http_access *acc, char *err, size_t errlen);

/* Loop thread, each tick: logs the server thread's notes, marks the loop
 * alive (/healthz), starts a round
 * that renders the metrics and status of d anew (unless one runs), with a
 * history point every history_step, starts a save of the history every
 * HISTORY_SAVE seconds (history.h), and cuts the connections past their
 * deadline.
 * d->loop runs the rounds. */
void http_update(http_server *h, struct calibd *d);
/* From the loop, at stop: serves no more, ends the rounds (a worker's join
 * or write still finishes in the loop). */
void http_stop(http_server *h);
/* After the loop: frees everything. */
void http_free(http_server *h);

/* Whether path is a route served without credentials unless
 * http_auth_metrics (/metrics); a path that is no route is not. */
int http_route_open(const char *path);
/* The 404 text, made from the table of routes, into out (len bytes, cut
 * short if need be); its length whole, as snprintf's. */
size_t http_routes_text(char *out, size_t len, int ingest);

/* With more models than this, /status and /metrics are rendered only
 * while asked for (within the last minute); the first request then answers
 * 503. */
#define HTTP_STATUS_ALWAYS 256
#define HTTP_WANTED 60.0 /* seconds a request keeps its text rendered */

#endif
