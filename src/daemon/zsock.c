/* zsock.c — ZeroMQ sockets driven by uv_poll on ZMQ_FD. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zsock.h"

int zsock_open(zsock *z, void *zctx, int type, const char *name)
{
    memset(z, 0, sizeof *z);
    z->name = name;
    if (!(z->sock = zmq_socket(zctx, type)))
        return -1;
    int linger = 0; /* closing must not wait for peers */
    zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger);
    return 0;
}

static int attach_one(zsock *z, const char *ep, char *last, size_t lastlen,
                      char *err, size_t errlen)
{
    int connect = ep[0] == '>';
    const char *addr = ep[0] == '>' || ep[0] == '@' ? ep + 1 : ep;
    int rc = connect ? zmq_connect(z->sock, addr) : zmq_bind(z->sock, addr);
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot %s %s: %s", z->name,
                 connect ? "connect to" : "bind", addr, zmq_strerror(errno));
        return -1;
    }
    if (last && !connect) {
        size_t len = lastlen;
        if (zmq_getsockopt(z->sock, ZMQ_LAST_ENDPOINT, last, &len) != 0)
            snprintf(last, lastlen, "%s", addr);
    }
    return 0;
}

int zsock_attach(zsock *z, const char *endpoints, char *last, size_t lastlen,
                 char *err, size_t errlen)
{
    char ep[512];
    const char *p = endpoints;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof ep) {
            snprintf(err, errlen, "%s: bad endpoint list '%s'", z->name, endpoints);
            return -1;
        }
        memcpy(ep, p, len);
        ep[len] = 0;
        if (attach_one(z, ep, last, lastlen, err, errlen) != 0)
            return -1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Receives one whole multipart message. Its bytes (at least 1):
 * delivered, 0: nothing queued, -1: error. ZeroMQ delivers multipart
 * messages atomically, so once the first frame is here the others are too. */
static long recv_one(zsock *z)
{
    long bytes = 1;
    zmq_msg_t frames[ZSOCK_MAX_FRAMES];
    size_t n = 0;
    int more;
    do {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, z->sock, ZMQ_DONTWAIT) < 0) {
            int e = errno;
            zmq_msg_close(&part);
            for (size_t i = 0; i < n && i < ZSOCK_MAX_FRAMES; i++)
                zmq_msg_close(&frames[i]);
            return n == 0 && e == EAGAIN ? 0 : -1;
        }
        more = zmq_msg_more(&part);
        bytes += (long)zmq_msg_size(&part);
        if (n < ZSOCK_MAX_FRAMES)
            frames[n] = part; /* moves ownership */
        else
            zmq_msg_close(&part);
        n++;
    } while (more);
    z->received++;
    z->on_recv(z, frames, n, z->arg);
    for (size_t i = 0; i < n && i < ZSOCK_MAX_FRAMES; i++)
        zmq_msg_close(&frames[i]);
    return bytes;
}

static void on_idle(uv_idle_t *h);

/* Between two looks at the clock, at most 16 messages or 16 KiB of them:
 * reading it costs about as much as a small message's handling, and 16
 * small ones take microseconds, while the time to handle a message grows
 * with its size (a 1 MiB batch takes milliseconds: every one is timed). */
#define DRAIN_CLOCK_MSGS 16
#define DRAIN_CLOCK_BYTES 16384

/*
 * Receives until nothing is queued, as ZMQ_FD's edge asks: with
 * ZMQ_DONTWAIT until EAGAIN, then once more while ZMQ_EVENTS says a message
 * came meanwhile (asking ZMQ_EVENTS, which costs a system call, only then,
 * not per message); or until the budget is spent, and an idle handle
 * brings the loop back for the rest.
 */
static void drain(zsock *z)
{
    uint64_t start = uv_hrtime();
    unsigned msgs = 0;
    long bytes = 0;
    for (;;) {
        long r = recv_one(z);
        if (r == 0) {
            int events = 0;
            size_t len = sizeof events;
            if (zmq_getsockopt(z->sock, ZMQ_EVENTS, &events, &len) == 0 &&
                (events & ZMQ_POLLIN))
                continue;
        }
        if (r <= 0) {
            uv_idle_stop(&z->idle);
            return;
        }
        bytes += r;
        if (++msgs < DRAIN_CLOCK_MSGS && bytes < DRAIN_CLOCK_BYTES)
            continue;
        msgs = 0;
        bytes = 0;
        if (uv_hrtime() - start >= z->budget)
            break;
    }
    z->saturated++;
    uv_idle_start(&z->idle, on_idle); /* more may be queued: come back */
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events; /* a readable ZMQ_FD says only "look at ZMQ_EVENTS" */
    drain(h->data);
}

static void on_idle(uv_idle_t *h)
{
    drain(h->data);
}

int zsock_watch(zsock *z, uv_loop_t *loop, uint64_t budget_ns, zsock_recv_fn fn,
                void *arg)
{
    int fd, rc;
    size_t len = sizeof fd;
    if (zmq_getsockopt(z->sock, ZMQ_FD, &fd, &len) != 0)
        return UV_EINVAL;
    z->budget = budget_ns;
    z->on_recv = fn;
    z->arg = arg;
    if ((rc = uv_poll_init(loop, &z->poll, fd)) != 0)
        return rc;
    z->poll.data = z;
    uv_idle_init(loop, &z->idle);
    z->idle.data = z;
    z->watching = 1;
    if ((rc = uv_poll_start(&z->poll, UV_READABLE, on_poll)) != 0)
        return rc;
    /* messages may have queued before we watched: no edge would tell us */
    uv_idle_start(&z->idle, on_idle);
    return 0;
}

/* ------------------------------------------------------------ monitor */

typedef struct monitor_ctx {
    zsock *z;
    zsock_peer_fn fn;
    void *arg;
} monitor_ctx;

/* One monitor event: frame 0 is a 16-bit event and a 32-bit value, frame 1
 * the peer's address (ZeroMQ's version 1 monitor format). */
static void on_monitor(zsock *mon, zmq_msg_t *frames, size_t n, void *arg)
{
    monitor_ctx *c = arg;
    (void)mon;
    if (n != 2 || zmq_msg_size(&frames[0]) < 6)
        return;
    uint16_t event;
    memcpy(&event, zmq_msg_data(&frames[0]), sizeof event);
    if (event & ZSOCK_HANDSHAKE_FAILED)
        c->z->handshake_failures++;
    else if (event & ZMQ_EVENT_DISCONNECTED)
        c->z->disconnects++;
    else
        return;
    if (c->fn)
        c->fn(c->z, event, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]), c->arg);
}

int zsock_monitor(zsock *z, zsock *mon, void *zctx, uv_loop_t *loop, int events,
                  zsock_peer_fn fn, void *arg)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://calibd-monitor-%p", (void *)z);
    if (zmq_socket_monitor(z->sock, ep, events) != 0)
        return -1;
    if (zsock_open(mon, zctx, ZMQ_PAIR, "monitor") != 0)
        return -1;
    monitor_ctx *c = malloc(sizeof *c);
    if (!c || zmq_connect(mon->sock, ep) != 0 ||
        zsock_watch(mon, loop, 1000000, on_monitor, c) != 0) {
        free(c);
        zsock_close(mon);
        errno = errno ? errno : ENOMEM;
        return -1;
    }
    *c = (monitor_ctx){z, fn, arg};
    z->monitor = c;
    z->monitor_z = mon;
    return 0;
}

void zsock_close(zsock *z)
{
    if (z->monitor_z) {
        zsock_close(z->monitor_z);
        free(z->monitor);
        z->monitor_z = NULL;
        z->monitor = NULL;
    }
    if (z->watching) {
        uv_poll_stop(&z->poll);
        uv_idle_stop(&z->idle);
        uv_close((uv_handle_t *)&z->poll, NULL);
        uv_close((uv_handle_t *)&z->idle, NULL);
        z->watching = 0;
    }
    if (z->sock)
        zmq_close(z->sock);
    z->sock = NULL;
}
