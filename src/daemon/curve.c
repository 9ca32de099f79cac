/* curve.c — CURVE keys, allow-lists and the ZAP handler (curve.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "curve.h"
#include "calib/calib.h"

const char *const curve_role_name[AUTH_ROLES] = {"producers", "operators", "subscribers"};

static const char *role_key(int role)
{
    static const char *const key[AUTH_ROLES] = {"curve_producers", "curve_operators",
                                                "curve_subscribers"};
    return key[role];
}

static const char *role_value(const daemon_cfg *c, int role)
{
    return role == AUTH_PRODUCERS   ? c->curve_producers
           : role == AUTH_OPERATORS ? c->curve_operators
                                    : c->curve_subscribers;
}

static int cmp_key(const void *x, const void *y)
{
    return memcmp(x, y, 32);
}

static void list_free(curve_list *l)
{
    free(l->keys);
    *l = (curve_list){0};
}

/* The name ends in ".key": a public certificate (NAME.key_secret, the
 * key pair, does not, and is not read). */
static int is_public_cert(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".key") == 0;
}

/* Every NAME.key in dir, decoded and sorted; duplicates kept once. A file
 * that is no public key is skipped with a line in log: one bad file (a
 * key half copied, say) must not keep the others out, nor, at a reload,
 * keep in a key removed meanwhile. */
static int list_load(curve_list *l, const char *dir, const char *key, logger *log, char *err,
                     size_t errlen)
{
    *l = (curve_list){0};
    if (strcmp(dir, "any") == 0) {
        l->any = 1;
        return 0;
    }
    DIR *dh = opendir(dir);
    if (!dh) {
        snprintf(err, errlen, "%s = %s: %s (a directory of NAME.key files, or any)", key,
                 dir, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dh))) {
        if (!is_public_cert(e->d_name))
            continue;
        char path[4096], why[ERR_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        calib_curve_cert cert;
        if (calib_curve_load(path, &cert, why, sizeof why) != CALIB_OK) {
            log_msg(log, LOG_ERROR, "auth", "%s: %s: skipped, its key is not allowed", key, why);
            continue;
        }
        memset(cert.secret_key, 0, sizeof cert.secret_key);
        if (l->n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            void *k = realloc(l->keys, ncap * sizeof *l->keys);
            if (!k) {
                snprintf(err, errlen, "%s: out of memory", key);
                rc = -1;
                break;
            }
            l->keys = k;
            cap = ncap;
        }
        zmq_z85_decode(l->keys[l->n++], cert.public_key); /* checked by the load */
    }
    closedir(dh);
    if (rc != 0) {
        list_free(l);
        return -1;
    }
    if (l->n)
        qsort(l->keys, l->n, sizeof *l->keys, cmp_key);
    size_t u = 0; /* the same key in two files counts once */
    for (size_t i = 0; i < l->n; i++)
        if (u == 0 || memcmp(l->keys[u - 1], l->keys[i], 32) != 0)
            memmove(l->keys[u++], l->keys[i], 32);
    l->n = u;
    return 0;
}

/* All three lists of c, or none (err set). */
static int lists_load(curve_list out[AUTH_ROLES], const daemon_cfg *c, logger *log, char *err,
                      size_t errlen)
{
    for (int r = 0; r < AUTH_ROLES; r++) {
        if (list_load(&out[r], role_value(c, r), role_key(r), log, err, errlen) != 0) {
            while (r-- > 0)
                list_free(&out[r]);
            return -1;
        }
    }
    return 0;
}

static void log_empty(curve_ctx *a, const daemon_cfg *c)
{
    for (int r = 0; r < AUTH_ROLES; r++)
        if (!a->allow[r].any && a->allow[r].n == 0)
            log_msg(a->log, LOG_WARN, "auth", "%s = %s holds no NAME.key file: every %s "
                    "connection is refused", role_key(r), role_value(c, r), curve_role_name[r]);
}

int curve_load(curve_ctx *a, const daemon_cfg *c, logger *log, char *err, size_t errlen)
{
    *a = (curve_ctx){.log = log};
    int roles = 0;
    for (int r = 0; r < AUTH_ROLES; r++)
        roles += role_value(c, r) != NULL;
    if (!c->curve_secret_key && roles == 0)
        return 0;
    if (!c->curve_secret_key) {
        snprintf(err, errlen, "curve_producers, curve_operators and curve_subscribers need "
                 "curve_secret_key: calibd's key pair (calibctl keygen calibd)");
        return -1;
    }
    if (roles < AUTH_ROLES) {
        for (int r = 0; r < AUTH_ROLES; r++)
            if (!role_value(c, r)) {
                snprintf(err, errlen, "curve_secret_key is set but %s is not: name a "
                         "directory of allowed public keys (NAME.key), or any", role_key(r));
                return -1;
            }
    }
    if (!zmq_has("curve")) {
        snprintf(err, errlen, "curve_secret_key: this libzmq was built without CURVE");
        return -1;
    }
    char why[ERR_MAX];
    if (calib_curve_load(c->curve_secret_key, &a->server, why, sizeof why) != CALIB_OK) {
        snprintf(err, errlen, "curve_secret_key: %s", why);
        return -1;
    }
    if (!a->server.secret_key[0]) {
        snprintf(err, errlen, "curve_secret_key = %s holds no secret-key: give calibd's "
                 "key pair (NAME.key_secret)", c->curve_secret_key);
        memset(&a->server, 0, sizeof a->server);
        return -1;
    }
    if (lists_load(a->allow, c, log, err, errlen) != 0) {
        memset(&a->server, 0, sizeof a->server);
        return -1;
    }
    a->on = 1;
    log_empty(a, c);
    return 0;
}

int curve_reload(curve_ctx *a, const daemon_cfg *fresh, char *err, size_t errlen)
{
    curve_ctx next;
    if (curve_load(&next, fresh, a->log, err, errlen) != 0)
        return -1;
    if (next.on != a->on || strcmp(next.server.public_key, a->server.public_key) != 0)
        log_msg(a->log, LOG_WARN, "auth", "reload: CURVE %s and calibd's key pair take "
                "effect at restart", next.on ? "on" : "off");
    if (a->on && next.on) {
        for (int r = 0; r < AUTH_ROLES; r++) {
            list_free(&a->allow[r]);
            a->allow[r] = next.allow[r];
            next.allow[r] = (curve_list){0};
        }
        log_msg(a->log, LOG_INFO, "auth", "allow-lists reloaded: %zu producer, %zu operator, "
                "%zu subscriber keys", a->allow[0].n, a->allow[1].n, a->allow[2].n);
    }
    curve_free(&next);
    return 0;
}

void curve_free(curve_ctx *a)
{
    for (int r = 0; r < AUTH_ROLES; r++)
        list_free(&a->allow[r]);
    memset(&a->server, 0, sizeof a->server);
    a->on = 0;
}

int curve_server(const curve_ctx *a, void *sock, int role)
{
    int one = 1;
    const char *domain = curve_role_name[role];
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, a->server.secret_key,
                       CALIB_CURVE_KEY_LEN + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0)
        return -1;
    return 0;
}

static int frame_is(const void *f, size_t len, const char *s)
{
    return len == strlen(s) && memcmp(f, s, len) == 0;
}

void curve_zap(curve_ctx *a, const void *const *frames, const size_t *len, size_t n,
              const char **code, const char **text, curve_verdict *v)
{
    *v = (curve_verdict){.role = AUTH_ROLES};
    *code = "400";
    /* version, request id, domain, address, routing id, mechanism, key */
    if (n < 6 || !frame_is(frames[0], len[0], "1.0")) {
        a->malformed++;
        *text = "not a ZAP 1.0 request";
        return;
    }
    v->address = frames[3];
    v->address_len = len[3];
    for (int r = 0; r < AUTH_ROLES; r++)
        if (frame_is(frames[2], len[2], curve_role_name[r]))
            v->role = r;
    if (v->role == AUTH_ROLES) {
        a->malformed++;
        *text = "unknown domain";
        return;
    }
    if (n != 7 || !frame_is(frames[5], len[5], "CURVE") || len[6] != 32) {
        a->refused[v->role]++;
        *text = "CURVE required";
        return;
    }
    zmq_z85_encode(v->key, frames[6], 32);
    const curve_list *l = &a->allow[v->role];
    v->allowed = a->on && (l->any || (l->n && bsearch(frames[6], l->keys, l->n,
                                                      sizeof *l->keys, cmp_key)));
    if (v->allowed) {
        a->accepted[v->role]++;
        *code = "200";
        *text = "OK";
    } else {
        a->refused[v->role]++;
        *text = "key not allowed";
    }
}

void curve_on_zap(zsock *z, zmq_msg_t *frames, size_t n, void *arg)
{
    curve_ctx *a = arg;
    const void *f[ZSOCK_MAX_FRAMES];
    size_t len[ZSOCK_MAX_FRAMES];
    size_t kept = n < ZSOCK_MAX_FRAMES ? n : ZSOCK_MAX_FRAMES;
    for (size_t i = 0; i < kept; i++) {
        f[i] = zmq_msg_data(&frames[i]);
        len[i] = zmq_msg_size(&frames[i]);
    }
    const char *code, *text;
    curve_verdict v;
    curve_zap(a, f, len, n <= ZSOCK_MAX_FRAMES ? n : 0, &code, &text, &v);
    char addr[LOG_ESCAPE_SIZE(64)];
    log_escape(addr, sizeof addr, v.address, v.address ? v.address_len : 0, 64);
    if (v.allowed)
        log_msg(a->log, LOG_DEBUG, "auth", "%s: admitted key %s from %s",
                curve_role_name[v.role], v.key, addr);
    else if (v.role < AUTH_ROLES)
        log_rl_key(a->log, curve_role_name[v.role], LOG_WARN, "auth", "%s: refused %s%s "
                   "from %s: %s (%s)", curve_role_name[v.role], v.key[0] ? "key " : "",
                   v.key, addr, text, role_key(v.role));
    else
        log_rl(a->log, LOG_WARN, "auth", "ZAP: refused a request: %s", text);
    /* the reply: version, request id, status code and text, user id,
     * metadata; a REP socket must answer even a malformed request */
    const char *reply[6] = {"1.0", "", code, text, "", ""};
    const void *rid = kept > 1 ? f[1] : "";
    size_t rid_len = kept > 1 ? len[1] : 0;
    for (int i = 0; i < 6; i++) {
        int more = i < 5 ? ZMQ_SNDMORE : 0, rc;
        do /* a signal between two frames must not leave the reply half sent */
            rc = i == 1 ? zmq_send(z->sock, rid, rid_len, more)
                        : zmq_send(z->sock, reply[i], strlen(reply[i]), more);
        while (rc < 0 && errno == EINTR);
        if (rc < 0) { /* ETERM: calibd is stopping */
            log_rl(a->log, LOG_ERROR, "auth", "ZAP: cannot reply: %s", zmq_strerror(errno));
            return;
        }
    }
}
