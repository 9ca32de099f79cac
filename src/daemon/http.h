/* http.h — Prometheus metrics over HTTP (libmicrohttpd). The server thread
 * only ever serves a text snapshot that the loop thread rebuilds each tick,
 * so no daemon state is read off the loop thread. */
#ifndef CALIBD_HTTP_H
#define CALIBD_HTTP_H

#include <pthread.h>
#include <stddef.h>

#include "hist.h"

struct calibd;

/* One open connection (MHD's socket context), in the server's list. */
typedef struct http_conn {
    int fd;
    double since;  /* monotonic seconds: opened, or its last request done */
    int cut;       /* shut down for its deadline */
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

typedef struct http_server {
    struct MHD_Daemon *mhd;
    pthread_mutex_t lock;   /* everything below that the server thread reads */
    char *text; /* the current /metrics snapshot, owned */
    size_t len;
    char *status;           /* the current /status snapshot (JSON), or NULL */
    size_t status_len;
    double status_wanted;   /* monotonic time /status was last asked for */
    double beat;            /* monotonic time of the loop's last tick */
    double health_timeout;  /* /healthz fails past beat + health_timeout */
    hist hist;              /* each model's history (GET /history) */
    double next_point;      /* wall time of the next history point */
    double next_save;       /* monotonic time of the next history save */
    http_limits lim;
    http_conn *conns;       /* open connections */
    unsigned long long timeouts; /* connections cut at their deadline */
} http_server;

/* Starts serving on "ADDR:PORT" (IPv4; port 0 picks one). Returns the port
 * bound, or -1 with err set.
 *
 * Slow clients: a connection has lim->timeout seconds from its opening, or
 * from its last complete request, to send a complete request; trickling
 * bytes does not extend it (libmicrohttpd's own timeout, which does, is
 * set to the same value for idle connections). Each tick (http_update)
 * shuts down the connections past their deadline. At most lim->max_conns
 * connections, lim->max_per_addr from one address. */
int http_start(http_server *h, const char *addr, const http_limits *lim, char *err,
               size_t errlen);
/* Loop thread, each tick: marks the loop alive (/healthz), replaces the
 * snapshots with the metrics and status of d, adds a history point every
 * history_step and saves the history every HTTP_HISTORY_SAVE seconds, and
 * cuts the connections past their deadline. */
void http_update(http_server *h, struct calibd *d);
/* Loads STATE_DIR/history (the history of the last run), keeping at most
 * d->cfg.history points a series; a file that cannot be trusted is moved
 * aside to history.bad with one log line. */
void http_history_load(http_server *h, struct calibd *d);
/* Saves the history to STATE_DIR/history, atomically. 0 or -1 (logged). */
int http_history_save(http_server *h, struct calibd *d);
void http_stop(http_server *h);

#define HTTP_HISTORY_SAVE 600.0 /* seconds between history saves */
/* With more models than this, /status is rendered only while asked for
 * (within the last minute); the first request then answers 503. */
#define HTTP_STATUS_ALWAYS 256

#endif
