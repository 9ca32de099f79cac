/* cmd_control.c — `calibctl status`, `ping` and `refit`: one request to a
 * running calibd's control socket, its msgpack answer printed as JSON; and
 * `calibctl keygen`, the key pairs of CURVE (calib/curve.h). */
#include <getopt.h>
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "calib/calib.h"
#include "calib/curve.h"
#include "calib/mpw.h"
#include "ctl.h"
#include "msgpack_json.h"

#define DEFAULT_CONTROL "tcp://127.0.0.1:7452"

/* ------------------------------------------------------------ request */

/* Where the control socket is, and the CURVE keys to reach it with. */
typedef struct target {
    const char *endpoint;
    const char *key, *server_key; /* both or neither */
    int pretty;                   /* --pretty: the answer indented */
} target;

/* Sends one request and prints the answer. */
static int request(const target *t, int timeout_ms, const char *cmd, const char *model)
{
    const char *endpoint = t->endpoint;
    const char *addr = endpoint[0] == '>' || endpoint[0] == '@' ? endpoint + 1 : endpoint;
    calib_mpw w;
    calib_mpw_init(&w);
    calib_mpw_map(&w);
    calib_mpw_key(&w, "v");
    calib_mpw_uint(&w, 1);
    calib_mpw_key(&w, "cmd");
    calib_mpw_str(&w, cmd);
    if (model) {
        calib_mpw_key(&w, "model");
        calib_mpw_str(&w, model);
    }
    calib_mpw_end(&w);
    int rc = CTL_FAIL, linger = 0;
    void *ctx = zmq_ctx_new(), *s = ctx ? zmq_socket(ctx, ZMQ_REQ) : NULL;
    zmq_msg_t reply;
    zmq_msg_init(&reply);
    if (!s) {
        ctl_error(NULL, 0, "cannot create a socket: %s", zmq_strerror(zmq_errno()));
        goto out;
    }
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    char why[600];
    if (t->key && calib_curve_client(s, t->key, t->server_key, why, sizeof why) != CALIB_OK) {
        ctl_error(NULL, 0, "%s", why);
        rc = CTL_BADINPUT;
        goto out;
    }
    if (zmq_connect(s, addr) != 0) {
        ctl_error(NULL, 0, "%s: %s", addr, zmq_strerror(zmq_errno()));
        rc = CTL_BADINPUT;
        goto out;
    }
    if (calib_mpw_error(&w) != CALIB_OK || zmq_send(s, w.sb.data, w.sb.size, 0) < 0 ||
        zmq_msg_recv(&reply, s, 0) < 0) {
        ctl_error(NULL, 0, "%s: no answer from calibd within %d ms%s", addr, timeout_ms,
                  t->key ? " (with CURVE: is this key allowed in curve_operators, and is "
                           "the server key calibd's?)"
                         : "");
        goto out;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, zmq_msg_data(&reply), zmq_msg_size(&reply), &off) !=
        MSGPACK_UNPACK_SUCCESS) {
        ctl_error(NULL, 0, "%s: the answer is not msgpack", addr);
    } else {
        msgpack_print_json_indented(stdout, &u.data, t->pretty ? 2 : 0);
        fputc('\n', stdout);
        rc = CTL_OK;
        /* {"ok": false, "error": ...}: the daemon refused the request */
        for (uint32_t i = 0; u.data.type == MSGPACK_OBJECT_MAP && i < u.data.via.map.size; i++) {
            const msgpack_object_kv *kv = &u.data.via.map.ptr[i];
            if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 2 &&
                memcmp(kv->key.via.str.ptr, "ok", 2) == 0 &&
                kv->val.type == MSGPACK_OBJECT_BOOLEAN && !kv->val.via.boolean)
                rc = CTL_FAIL;
        }
    }
    msgpack_unpacked_destroy(&u);
out:
    zmq_msg_close(&reply);
    if (s)
        zmq_close(s);
    if (ctx)
        zmq_ctx_term(ctx);
    calib_mpw_destroy(&w);
    return rc;
}

/* SECONDS of --timeout or CALIBD_TIMEOUT (named by what): 0, or -1 said */
static int parse_timeout(const char *arg, const char *what, double *timeout)
{
    char *end;
    double v = strtod(arg, &end);
    if (*end || !(v > 0) || v > 86400) {
        ctl_error(NULL, 0, "%s: expected seconds in (0, 86400]", what);
        return -1;
    }
    *timeout = v;
    return 0;
}

/* takes_model: 0 none, 1 optional, 2 required */
static int control_command(int argc, char **argv, const char *cmd, int takes_model)
{
    static const struct option opts[] = {
        {"control", required_argument, NULL, 'c'},
        {"timeout", required_argument, NULL, 't'},
        {"key", required_argument, NULL, 'k'},
        {"server-key", required_argument, NULL, 's'},
        {"pretty", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    target t = {getenv("CALIBD_CONTROL"), getenv("CALIBD_KEY"), getenv("CALIBD_SERVER_KEY"), 0};
    double timeout = 5;
    const char *env_timeout = getenv("CALIBD_TIMEOUT");
    if (env_timeout && *env_timeout && parse_timeout(env_timeout, "CALIBD_TIMEOUT", &timeout))
        return CTL_BADINPUT;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:t:ph", opts, NULL)) != -1) {
        switch (o) {
        case 'c': t.endpoint = optarg; break;
        case 'p': t.pretty = 1; break;
        case 'k': t.key = optarg; break;
        case 's': t.server_key = optarg; break;
        case 't':
            if (parse_timeout(optarg, "--timeout", &timeout))
                return CTL_BADINPUT;
            break;
        case 'h':
            printf("usage: calibctl %s [--control EP] [--timeout SECONDS] [--key FILE "
                   "--server-key FILE] [--pretty]%s\n", cmd,
                   takes_model == 2 ? " MODEL" : takes_model ? " [MODEL]" : "");
            return CTL_OK;
        default: return CTL_BADINPUT;
        }
    }
    if (argc - optind > (takes_model ? 1 : 0)) {
        ctl_error(NULL, 0, "%s: unexpected argument '%s'", cmd, argv[argc - 1]);
        return CTL_BADINPUT;
    }
    if (takes_model == 2 && optind == argc) {
        ctl_error(NULL, 0, "%s: which model?", cmd);
        return CTL_BADINPUT;
    }
    if (!t.key != !t.server_key) {
        ctl_error(NULL, 0, "%s: CURVE needs both --key (this operator's key pair) and "
                  "--server-key (calibd's public key)", cmd);
        return CTL_BADINPUT;
    }
    const char *model = optind < argc ? argv[optind] : NULL;
    t.endpoint = t.endpoint ? t.endpoint : DEFAULT_CONTROL;
    return request(&t, (int)(timeout * 1000), cmd, model);
}

int cmd_status(int argc, char **argv)
{
    return control_command(argc, argv, "status", 1);
}

int cmd_ping(int argc, char **argv)
{
    return control_command(argc, argv, "ping", 0);
}

int cmd_refit(int argc, char **argv)
{
    return control_command(argc, argv, "refit", 2);
}

int cmd_forget(int argc, char **argv)
{
    return control_command(argc, argv, "forget", 2);
}

/* keygen NAME: NAME.key (the public key, to hand out) and NAME.key_secret
 * (the pair, kept; mode 0600); never over an existing file. */
int cmd_keygen(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: calibctl keygen NAME   writes NAME.key and NAME.key_secret\n");
        return CTL_OK;
    }
    if (argc != 2 || !argv[1][0] || argv[1][0] == '-') {
        ctl_error(NULL, 0, "keygen: expected one NAME (writes NAME.key and NAME.key_secret)");
        return CTL_BADINPUT;
    }
    char pub[4096], sec[4096], why[4200];
    if ((size_t)snprintf(pub, sizeof pub, "%s.key", argv[1]) >= sizeof pub ||
        (size_t)snprintf(sec, sizeof sec, "%s.key_secret", argv[1]) >= sizeof sec) {
        ctl_error(NULL, 0, "keygen: NAME too long");
        return CTL_BADINPUT;
    }
    calib_curve_cert c;
    if (calib_curve_keypair(&c) != CALIB_OK) {
        ctl_error(NULL, 0, "keygen: this libzmq was built without CURVE");
        return CTL_FAIL;
    }
    int rc = CTL_OK;
    if (calib_curve_save(sec, &c, 1, why, sizeof why) != CALIB_OK) {
        ctl_error(NULL, 0, "keygen: %s", why);
        rc = CTL_FAIL;
    } else if (calib_curve_save(pub, &c, 0, why, sizeof why) != CALIB_OK) {
        ctl_error(NULL, 0, "keygen: %s", why);
        remove(sec); /* no half pair left */
        rc = CTL_FAIL;
    } else {
        printf("%s\n%s\n", pub, sec);
    }
    memset(&c, 0, sizeof c);
    return rc;
}
