/*
 * zsock.h — a ZeroMQ socket in the libuv loop.
 *
 * ZMQ_FD is edge-triggered: it signals when the socket becomes readable, not
 * while it stays so. After every wakeup we receive while ZMQ_EVENTS has
 * ZMQ_POLLIN. To keep one busy socket from starving the loop, a wakeup
 * receives for at most `budget` nanoseconds of the loop's time, however
 * cheap or costly each message is (a count would let expensive messages
 * starve the control socket and the tick); if more may be queued, a
 * uv_idle handle brings us back on the next loop iteration (without it the
 * socket would stall with messages queued and no edge to come). All calls
 * on the loop thread.
 *
 * A socket monitor (zsock_monitor) reports the socket's peers going away:
 * ZeroMQ disconnects a peer that sends a message over ZMQ_MAXMSGSIZE, and
 * that disconnect is the only trace such a message leaves.
 */
#ifndef CALIBD_ZSOCK_H
#define CALIBD_ZSOCK_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <zmq.h>

#define ZSOCK_MAX_FRAMES 8 /* frames kept per message (a ZAP request has 7);
                              the count is exact */

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
    uint64_t budget;  /* ns of receiving per wakeup */
    zsock_recv_fn on_recv;
    void *arg;
    /* read-only counters */
    unsigned long long received;     /* messages delivered to on_recv */
    unsigned long long saturated;    /* wakeups that ended on the budget with
                                        messages still queued: calibd is
                                        behind this socket's producers */
    unsigned long long disconnects;  /* peers gone (monitor): closed, or cut
                                        by ZeroMQ for an oversize message */
    unsigned long long handshake_failures; /* connections refused in their
                                        handshake (monitor): with CURVE, no
                                        key, another server key, a key not
                                        allowed */
    void *monitor;                   /* the monitor's PAIR socket, or NULL */
    zsock *monitor_z;                /* its zsock (watched like this one) */
};

/* A peer of z went away: the event (ZMQ_EVENT_DISCONNECTED, ...) and the
 * peer's address as ZeroMQ gives it (not NUL-terminated). */
typedef void (*zsock_peer_fn)(zsock *z, unsigned event, const char *addr, size_t len,
                              void *arg);

/* Creates the zmq socket (LINGER set). Returns 0 or -1 (errno). */
int zsock_open(zsock *z, void *zctx, int type, const char *name);

/* Binds or connects to a comma-separated list of endpoints, each "@ep" (bind),
 * ">ep" (connect) or "ep" (bind). Returns 0, or -1 with err set. The bound
 * address (useful with port *) is written to last, if given. */
int zsock_attach(zsock *z, const char *endpoints, char *last, size_t lastlen,
                 char *err, size_t errlen);

/* Starts receiving in loop, for at most budget_ns per wakeup (0: one
 * message). Returns 0 or a libuv error. */
int zsock_watch(zsock *z, uv_loop_t *loop, uint64_t budget_ns, zsock_recv_fn fn,
                void *arg);

/* The monitor events of a failed handshake (ZeroMQ 4.3). */
#define ZSOCK_HANDSHAKE_FAILED                                                       \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |     \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* Monitors z's peers for events (ZMQ_EVENT_DISCONNECTED and/or
 * ZSOCK_HANDSHAKE_FAILED): counts z->disconnects and z->handshake_failures
 * and calls fn for each. mon must stay valid as long as z; zsock_close(z)
 * closes it. Returns 0, or -1 with errno. */
int zsock_monitor(zsock *z, zsock *mon, void *zctx, uv_loop_t *loop, int events,
                  zsock_peer_fn fn, void *arg);

/* Stops receiving, closes the handles and the socket. The zsock memory must
 * stay valid until the loop has run the close callbacks. */
void zsock_close(zsock *z);

#endif
