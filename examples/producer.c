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

int producer_open(const char *prog, const char *endpoint, int push, int sndhwm,
                  int warmup_ms, const char *key, const char *server_key, void **ctx,
                  void **sock)
{
    const char *ep = endpoint;
    int bind = ep[0] == '@';
    if (ep[0] == '@' || ep[0] == '>')
        ep++;
    if (!(*ctx = zmq_ctx_new()) || !(*sock = zmq_socket(*ctx, push ? ZMQ_PUSH : ZMQ_PUB))) {
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
    if (!push && warmup_ms > 0) {
        struct timespec ts = {.tv_sec = warmup_ms / 1000,
                              .tv_nsec = (long)(warmup_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    return 0;
}
