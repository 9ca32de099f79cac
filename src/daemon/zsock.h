/*
 * zsock.h — a ZeroMQ socket in the libuv loop.
 *
 * ZMQ_FD is edge-triggered: it signals when the socket becomes readable, not
 * while it stays so. After every wakeup we receive while ZMQ_EVENTS has
 * ZMQ_POLLIN. To keep one busy socket from starving the loop, a wakeup takes
 * at most `batch` messages; if more may be queued, a uv_idle handle brings us
 * back on the next loop iteration (without it the socket would stall with
 * messages queued and no edge to come). All calls on the loop thread.
 */
#ifndef CALIBD_ZSOCK_H
#define CALIBD_ZSOCK_H

#include <stddef.h>
#include <uv.h>
#include <zmq.h>

#define ZSOCK_MAX_FRAMES 4 /* frames kept per message; the count is exact */

typedef struct zsock zsock;

/* One complete multipart message. frames[0..min(nframes, ZSOCK_MAX_FRAMES))
 * are valid during the call only. */
typedef void (*zsock_recv_fn)(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg);

struct zsock {
    void *sock;
    const char *name; /* for logs: "ingest", "control", ... */
    uv_poll_t poll;
    uv_idle_t idle;
    int watching;
    unsigned batch;
    zsock_recv_fn on_recv;
    void *arg;
    unsigned long long received;
};

/* Creates the zmq socket (LINGER set). Returns 0 or -1 (errno). */
int zsock_open(zsock *z, void *zctx, int type, const char *name);

/* Binds or connects to a comma-separated list of endpoints, each "@ep" (bind),
 * ">ep" (connect) or "ep" (bind). Returns 0, or -1 with err set. The bound
 * address (useful with port *) is written to last, if given. */
int zsock_attach(zsock *z, const char *endpoints, char *last, size_t lastlen,
                 char *err, size_t errlen);

/* Starts receiving in loop. Returns 0 or a libuv error. */
int zsock_watch(zsock *z, uv_loop_t *loop, unsigned batch, zsock_recv_fn fn, void *arg);

/* Stops receiving, closes the handles and the socket. The zsock memory must
 * stay valid until the loop has run the close callbacks. */
void zsock_close(zsock *z);

#endif
