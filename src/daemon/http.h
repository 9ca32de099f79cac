/* http.h — Prometheus metrics over HTTP (libmicrohttpd). The server thread
 * only ever serves a text snapshot that the loop thread rebuilds each tick,
 * so no daemon state is read off the loop thread. */
#ifndef CALIBD_HTTP_H
#define CALIBD_HTTP_H

#include <pthread.h>
#include <stddef.h>

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
} http_limits;

typedef struct http_server {
    struct MHD_Daemon *mhd;
    pthread_mutex_t lock;   /* text, len and the connection list */
    char *text; /* the current snapshot, owned */
    size_t len;
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
/* Replaces the snapshot with the metrics of d and cuts the connections
 * past their deadline (loop thread). */
void http_update(http_server *h, struct calibd *d);
void http_stop(http_server *h);

#endif
