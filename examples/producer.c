/* producer.c — payload building shared by the example producers. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "calib/calib.h"
#include "calib/curve.h"
#include "producer.h"

int pack_buf_write(void *data, const char *buf, size_t len)
{
    pack_buf *b = data;
    if (b->oom)
        return -1;
    if (len > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return -1;
            }
            cap *= 2;
        }
        char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return -1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    return 0;
}

void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void store_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void store_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

int producer_parse_u64(const char *prog, const char *opt, const char *s, uint64_t lo,
                       uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '-' || *s == '\0' || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: --%s '%s': expected an integer in %" PRIu64 "..%" PRIu64 "\n",
                prog, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Waits up to timeout_ms for a subscription that covers topic (any, for
 * NULL) to reach the XPUB sock: from then on what is sent on the topic
 * reaches that subscriber. Returns 1 when one came, 0 when none did. */
static int wait_subscription(void *sock, const char *topic, int timeout_ms)
{
    size_t tlen = topic ? strlen(topic) : 0;
    double end = mono_ms() + timeout_ms;
    for (;;) {
        double left = end - mono_ms();
        if (left <= 0)
            return 0;
        zmq_pollitem_t item = {.socket = sock, .events = ZMQ_POLLIN};
        int rc = zmq_poll(&item, 1, (long)left + 1);
        if (rc < 0 && zmq_errno() != EINTR)
            return 0;
        if (rc <= 0)
            continue;
        /* a subscription is one frame: 1, then the topic prefix (0: an
         * unsubscription); a longer prefix than a topic covers nothing */
        unsigned char msg[1 + 256];
        int n = zmq_recv(sock, msg, sizeof msg, ZMQ_DONTWAIT);
        if (n < 1 || msg[0] != 1 || (size_t)n > sizeof msg)
            continue;
        size_t plen = (size_t)n - 1;
        if (!topic || (plen <= tlen && memcmp(msg + 1, topic, plen) == 0))
            return 1;
    }
}

int producer_open(const char *prog, const char *endpoint, int push, int sndhwm,
                  int warmup_ms, const char *topic, const char *key,
                  const char *server_key, void **ctx, void **sock)
{
    const char *ep = endpoint;
    int bind = ep[0] == '@';
    if (ep[0] == '@' || ep[0] == '>')
        ep++;
    /* an XPUB sends as a PUB does, and hands over the subscriptions */
    if (!(*ctx = zmq_ctx_new()) || !(*sock = zmq_socket(*ctx, push ? ZMQ_PUSH : ZMQ_XPUB))) {
        fprintf(stderr, "%s: zmq: %s\n", prog, zmq_strerror(zmq_errno()));
        return -1;
    }
    if (sndhwm > 0 && zmq_setsockopt(*sock, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm) != 0) {
        fprintf(stderr, "%s: ZMQ_SNDHWM: %s\n", prog, zmq_strerror(zmq_errno()));
        return -1;
    }
    char why[600];
    if ((key || server_key) &&
        (!key || !server_key ||
         calib_curve_client(*sock, key, server_key, why, sizeof why) != CALIB_OK)) {
        fprintf(stderr, "%s: %s\n", prog, key && server_key ? why : "CURVE needs both "
                "--key (this producer's key pair) and --server-key (calibd's public key)");
        return -1;
    }
    if ((bind ? zmq_bind(*sock, ep) : zmq_connect(*sock, ep)) != 0) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, bind ? "bind" : "connect", ep,
                zmq_strerror(zmq_errno()));
        return -1;
    }
    if (!push && warmup_ms > 0 && !wait_subscription(*sock, topic, warmup_ms))
        fprintf(stderr, "%s: no subscription to '%s' within %d ms: sending anyway "
                "(a PUB drops what no subscriber has asked for)\n", prog,
                topic ? topic : "", warmup_ms);
    return 0;
}
