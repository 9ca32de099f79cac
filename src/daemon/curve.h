/*
 * curve.h — CURVE on calibd's ZeroMQ sockets, and the ZAP handler that
 * admits clients by their public keys (calibd(8), SECURITY).
 *
 * With curve_secret_key set, every ZeroMQ socket of calibd is a CURVE
 * server holding calibd's key pair, whether it binds or connects, and
 * carries a ZAP domain naming its role: "producers" (the ingest SUB and
 * PULL sockets), "operators" (the control socket), "subscribers" (the PUB
 * socket). libzmq asks the ZAP handler (RFC 27, a REP socket bound to
 * inproc://zeromq.zap.01 in calibd's context) about each client whose
 * handshake proved it holds the secret key of the public key it shows; the
 * handler answers 200 when that key is in the role's allow-list (or the
 * role is "any"), 400 otherwise, and libzmq closes a refused connection
 * before a message of it is delivered. A client without CURVE, or with
 * another server key, fails the handshake itself (the sockets' monitors
 * count it).
 *
 * The decision is a function of the request's frames (curve_zap), testable
 * without sockets; curve_on_zap is the zsock callback that feeds it.
 */
#ifndef CALIBD_CURVE_H
#define CALIBD_CURVE_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "calib/curve.h"
#include "cfg.h"
#include "log.h"
#include "zsock.h"

enum curve_role { AUTH_PRODUCERS, AUTH_OPERATORS, AUTH_SUBSCRIBERS, AUTH_ROLES };

/* The ZAP domain of each role, also its label in metrics and logs. */
extern const char *const curve_role_name[AUTH_ROLES];

/* The public keys a role admits: sorted, for bsearch. */
typedef struct curve_list {
    int any;              /* "any": every key (encryption only) */
    size_t n;
    uint8_t (*keys)[32];
} curve_list;

typedef struct curve_ctx {
    int on;                       /* curve_secret_key set */
    calib_curve_cert server;      /* calibd's key pair */
    curve_list allow[AUTH_ROLES];
    logger *log;
    /* read-only counters, by role */
    unsigned long long accepted[AUTH_ROLES], refused[AUTH_ROLES];
    unsigned long long malformed; /* requests not of RFC 27 (none expected) */
} curve_ctx;

/* What curve_zap decided, for the log. */
typedef struct curve_verdict {
    int role;                  /* AUTH_ROLES: unknown domain */
    int allowed;
    char key[CALIB_CURVE_KEY_LEN + 1]; /* the client's public key, Z85 ("") */
    const char *address;       /* the peer's address (not NUL-terminated) */
    size_t address_len;
} curve_verdict;

/* Reads calibd's key pair and the allow-lists from c's curve_* keys into
 * a (zeroed first). All unset: a->on = 0. The secret key without all three
 * roles, or a role without the secret key, is an error, as is any
 * unreadable or malformed key file. Logs a role that admits no key.
 * Returns 0, or -1 with err set. */
int curve_load(curve_ctx *a, const daemon_cfg *c, logger *log, char *err, size_t errlen);

/* SIGHUP: the allow-lists of fresh replace a's (the key pair and CURVE on
 * or off need a restart, said in the log). 0, or -1 with err set and a
 * unchanged. Connections already admitted stay. */
int curve_reload(curve_ctx *a, const daemon_cfg *fresh, char *err, size_t errlen);

void curve_free(curve_ctx *a);

/* Makes sock a CURVE server of the role (before it binds or connects). */
int curve_server(const curve_ctx *a, void *sock, int role);

/* One ZAP request: frames[i] of len[i] bytes, n of them. Writes the reply's
 * status code ("200", "400") and text to *code and *text, decides and
 * counts. */
void curve_zap(curve_ctx *a, const void *const *frames, const size_t *len, size_t n,
              const char **code, const char **text, curve_verdict *v);

/* The zsock callback of the ZAP handler's REP socket; arg is the curve_ctx. */
void curve_on_zap(zsock *z, zmq_msg_t *frames, size_t n, void *arg);

#endif
