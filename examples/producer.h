/* producer.h — what the example producers (examples/simulate and the
 * integration tests' hostile sender) share to build protocol v1 payloads. */
#ifndef CALIBD_PRODUCER_H
#define CALIBD_PRODUCER_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* A growing buffer behind a msgpack_packer. An allocation failure sets oom
 * and makes every later write fail, so a message is checked once, at the
 * end, instead of after each of its hundreds of pack calls. */
typedef struct pack_buf {
    char *data;
    size_t len, cap;
    int oom;
} pack_buf;

/* msgpack_packer_write callback: appends len bytes; 0, or -1 when out of
 * memory. */
int pack_buf_write(void *data, const char *buf, size_t len);

/* Packs a string (a map key, usually). */
void pack_str(msgpack_packer *pk, const char *s);

/* Little-endian stores that do not depend on the host's byte order. */
void store_le32(unsigned char *p, uint32_t v);
void store_le64(unsigned char *p, uint64_t v);

/* Parses option --opt's value s as an integer in [lo, hi]; on failure says
 * so on stderr, prefixed by prog, and returns -1. */
int producer_parse_u64(const char *prog, const char *opt, const char *s, uint64_t lo,
                       uint64_t hi, uint64_t *out);

/* A PUB (or, with push, PUSH) socket on endpoint ("@ep" binds, ">ep" or "ep"
 * connects), with ZMQ_SNDHWM sndhwm when > 0; a CURVE client when key (this
 * producer's key pair file) and server_key (calibd's public key file) are
 * given (calib/curve.h). A PUB drops what it sends before a subscriber has
 * joined (the slow joiner), so it is an XPUB that then waits, warmup_ms at
 * most, until a subscription covering topic (any, for NULL) has come: a
 * condition, not a fixed delay; past warmup_ms it says so on stderr and
 * goes on. Returns 0, or -1 after saying why on stderr. */
int producer_open(const char *prog, const char *endpoint, int push, int sndhwm,
                  int warmup_ms, const char *topic, const char *key,
                  const char *server_key, void **ctx, void **sock);

#endif
