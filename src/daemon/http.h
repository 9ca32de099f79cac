/* http.h — Prometheus metrics over HTTP (libmicrohttpd). The server thread
 * only ever serves a text snapshot that the loop thread rebuilds each tick,
 * so no daemon state is read off the loop thread. */
#ifndef CALIBD_HTTP_H
#define CALIBD_HTTP_H

#include <pthread.h>
#include <stddef.h>

struct calibd;

typedef struct http_server {
    struct MHD_Daemon *mhd;
    pthread_mutex_t lock;
    char *text; /* the current snapshot, owned */
    size_t len;
} http_server;

/* Starts serving on "ADDR:PORT" (IPv4; port 0 picks one). Returns the port
 * bound, or -1 with err set. */
int http_start(http_server *h, const char *addr, char *err, size_t errlen);
/* Replaces the snapshot with the metrics of d (loop thread). */
void http_update(http_server *h, struct calibd *d);
void http_stop(http_server *h);

#endif
