/* main.c — calibd: command line, start-up, the loop, shut-down. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alert.h"
#include "calibd.h"
#include "control.h"
#include "ingest.h"
#include "kafka.h"
#include "registry.h"
#include "recalib.h"
#include "tick.h"
#include "state.h"

static void usage(FILE *f)
{
    fputs("usage: calibd [OPTIONS]\n"
          "  -c, --config FILE       configuration file (INI; see calibd.conf(5))\n"
          "      --ingest EP         SUB endpoint for producers (repeatable)\n"
          "      --ingest-pull EP    PULL endpoint for producers (repeatable; none)\n"
          "      --publish EP        PUB endpoint for serving nodes\n"
          "      --control EP        REP endpoint for calibctl\n"
          "      --http ADDR:PORT    HTTP address for metrics, or 'off'\n"
          "      --state-dir DIR     where state is kept\n"
          "      --log-level LEVEL   error, warn, info or debug\n"
          "      --check-config FILE check FILE (and the command line) and exit:\n"
          "                          0 when calibd would start with it, 2 if not\n"
          "      --version           print the version and exit\n"
          "  -h, --help              this text\n"
          "Endpoints: @tcp://host:port binds, >tcp://host:port connects, no prefix binds;\n  --ingest-pull none opens no PULL socket.\n"
          "Defaults: ingest " CFG_DEFAULT_INGEST ", ingest_pull " CFG_DEFAULT_PULL
          ",\n  publish " CFG_DEFAULT_PUBLISH
          ",\n  control " CFG_DEFAULT_CONTROL ", http " CFG_DEFAULT_HTTP
          ", state " CFG_DEFAULT_STATE_DIR ".\nSee calibd(8).\n", f);
}

static void warn_config(void *arg, const char *msg)
{
    calibd *d = arg;
    log_msg(&d->log, LOG_WARN, "config", "%s", msg);
}

/* Command-line options override the file; repeated --ingest replace its list. */
typedef struct cli {
    const char *config;
    int check;          /* --check-config: validate the file and exit */
    endpoint_list ingest, pull;
    const char *daemon_keys[8][2];
    int nkeys;
} cli;

static int parse_cli(int argc, char **argv, cli *c)
{
    enum { O_INGEST = 256, O_PULL, O_PUBLISH, O_CONTROL, O_HTTP, O_STATE, O_LOG, O_VERSION,
           O_CHECK };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"ingest", required_argument, NULL, O_INGEST},
        {"ingest-pull", required_argument, NULL, O_PULL},
        {"publish", required_argument, NULL, O_PUBLISH},
        {"control", required_argument, NULL, O_CONTROL},
        {"http", required_argument, NULL, O_HTTP},
        {"state-dir", required_argument, NULL, O_STATE},
        {"log-level", required_argument, NULL, O_LOG},
        {"version", no_argument, NULL, O_VERSION},
        {"check-config", required_argument, NULL, O_CHECK},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    static const char *keys[] = {"publish", "control", "http", "state_dir", "log_level"};
    int o;
    while ((o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': c->config = optarg; break;
        case O_CHECK: c->config = optarg, c->check = 1; break;
        case 'h': usage(stdout); exit(0);
        case O_VERSION: printf("calibd %s\n", PACKAGE_VERSION); exit(0);
        case O_INGEST:
        case O_PULL: {
            endpoint_list *l = o == O_INGEST ? &c->ingest : &c->pull;
            if (l->n == CFG_MAX_ENDPOINTS) {
                fprintf(stderr, "calibd: more than %d endpoints\n", CFG_MAX_ENDPOINTS);
                return -1;
            }
            l->ep[l->n++] = optarg;
            break;
        }
        case O_PUBLISH: case O_CONTROL: case O_HTTP: case O_STATE: case O_LOG:
            c->daemon_keys[c->nkeys][0] = keys[o - O_PUBLISH];
            c->daemon_keys[c->nkeys++][1] = optarg;
            if (c->nkeys == 8) {
                fprintf(stderr, "calibd: too many options\n");
                return -1;
            }
            break;
        default: usage(stderr); return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "calibd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

static int apply_endpoints(daemon_cfg *cfg, const char *key, endpoint_list *l,
                           const endpoint_list *from, char *err, size_t errlen)
{
    if (from->n == 0)
        return 0;
    config_clear_endpoints(l);
    for (size_t i = 0; i < from->n; i++)
        if (config_set_daemon(cfg, key, from->ep[i], err, errlen) != 0)
            return -1;
    return 0;
}

/* The command line's settings over a configuration read from the file. */
static int apply_cli(daemon_cfg *cfg, const cli *c, char *err, size_t errlen)
{
    for (int i = 0; i < c->nkeys; i++)
        if (config_set_daemon(cfg, c->daemon_keys[i][0], c->daemon_keys[i][1], err,
                              errlen) != 0)
            return -1;
    if (apply_endpoints(cfg, "ingest", &cfg->ingest, &c->ingest, err, errlen) ||
        apply_endpoints(cfg, "ingest_pull", &cfg->ingest_pull, &c->pull, err, errlen))
        return -1;
    return 0;
}

/* A model's method (and fit_params) as configured: a built-in, or a plugin
 * file in plugin_dir (loaded when the model takes its shape); else the
 * file, the line and the nearest built-in. */
static int check_method(const daemon_cfg *cfg, const char *path, const model_cfg *m,
                        char *err, size_t errlen)
{
    static const char *const builtins[] = {"auto", "temperature", "platt", "variance",
                                           "location_scale", NULL};
    char where[CFG_NAME_MAX + 64], fwhere[CFG_NAME_MAX + 64];
    snprintf(where, sizeof where, "%s:%lu: [%s%s]", path ? path : "the command line",
             m->method_line, m->name[0] ? "model " : "defaults", m->name);
    snprintf(fwhere, sizeof fwhere, "%s:%lu: [%s%s]", path ? path : "the command line",
             m->fit_params_line, m->name[0] ? "model " : "defaults", m->name);
    unsigned holds;
    char why[256];
    if (strcmp(m->method, "auto") == 0) { /* fit_params is location_scale's */
        if (model_fit_holds(m->fit_params, calib_plugin_builtin("location_scale"), &holds,
                            why, sizeof why) != 0) {
            snprintf(err, errlen, "%s: fit_params: %s", fwhere, why);
            return -1;
        }
        return 0;
    }
    const calib_plugin *p = calib_plugin_builtin(m->method);
    if (!p) {
        char so[4400];
        snprintf(so, sizeof so, "%s/%s.so", cfg->plugin_dir, m->method);
        if (access(so, R_OK) == 0)
            return 0; /* a plugin's parameters are known once it is loaded */
        const char *near = config_nearest(m->method, builtins);
        snprintf(err, errlen, "%s: method '%s' is neither a built-in (temperature, platt, "
                 "variance, location_scale) nor a plugin (%s: %s)%s%s%s", where, m->method,
                 so, strerror(errno), near ? "; the nearest is '" : "", near ? near : "",
                 near ? "'" : "");
        return -1;
    }
    if (model_fit_holds(m->fit_params, p, &holds, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: fit_params: %s", fwhere, why);
        return -1;
    }
    return 0;
}

/* Built-in defaults, then the file, then the command line. */
static int load_config(calibd *d, const cli *c, char *err, size_t errlen)
{
    if (config_init(&d->cfg) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    d->config_path = c->config;
    d->cli = c;
    if (c->config && config_load(&d->cfg, c->config, warn_config, d, err, errlen) != 0)
        return -1;
    if (apply_cli(&d->cfg, c, err, errlen) != 0 ||
        check_method(&d->cfg, c->config, &d->cfg.defaults, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < d->cfg.nmodels; i++)
        if (check_method(&d->cfg, c->config, &d->cfg.models[i], err, errlen) != 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------ state dir */

/* Creates the state directory and records the endpoints actually bound
 * there (useful with port *): one "name endpoint" line each. */
static int write_endpoints(calibd *d, const char (*bound)[2][256], int n, char *err,
                           size_t errlen)
{
    const char *dir = d->cfg.state_dir;
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "state directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char text[(2 * CFG_MAX_ENDPOINTS + 3) * 520]; /* as many lines as bound holds */
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof text; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s %s\n", bound[i][0],
                                bound[i][1]);
    if (len >= sizeof text) {
        snprintf(err, errlen, "%s/endpoints: too many endpoints", dir);
        return -1;
    }
    /* written and renamed as every state file (state.c) */
    return state_write_file(dir, "endpoints", text, len, err, errlen) < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ sockets */

static int set_int(void *sock, int opt, int64_t v)
{
    if (opt == ZMQ_MAXMSGSIZE)
        return zmq_setsockopt(sock, opt, &v, sizeof v);
    int i = (int)v;
    return zmq_setsockopt(sock, opt, &i, sizeof i);
}

static int open_sockets(calibd *d, char *err, size_t errlen)
{
    const daemon_cfg *c = &d->cfg;
    char bound[2 * CFG_MAX_ENDPOINTS + 3][2][256];
    int nb = 0;
    if (!(d->zctx = zmq_ctx_new())) {
        snprintf(err, errlen, "zmq_ctx_new: %s", zmq_strerror(errno));
        return -1;
    }
    if (curve_load(&d->curve, c, &d->log, err, errlen) != 0)
        return -1;
    /* the handler first: a CURVE server without one admits every key */
    if (d->curve.on && (zsock_open(&d->zap, d->zctx, ZMQ_REP, "zap") != 0 ||
                       zmq_bind(d->zap.sock, "inproc://zeromq.zap.01") != 0)) {
        snprintf(err, errlen, "ZAP handler: %s", zmq_strerror(errno));
        return -1;
    }
    if (zsock_open(&d->ingest, d->zctx, ZMQ_SUB, "ingest") != 0 ||
        (d->curve.on && curve_server(&d->curve, d->ingest.sock, AUTH_PRODUCERS) != 0))
        goto zerr;
    set_int(d->ingest.sock, ZMQ_MAXMSGSIZE, (int64_t)c->max_msg_size);
    set_int(d->ingest.sock, ZMQ_RCVHWM, (int64_t)config_rcvhwm(c));
    /* every model, unless `subscribe` names the prefixes of the models this
     * instance owns (a shard): an unconfigured topic must be counted as
     * rejected, so a configured model is no filter */
    if (!c->subscribe.n)
        zmq_setsockopt(d->ingest.sock, ZMQ_SUBSCRIBE, "", 0);
    for (size_t i = 0; i < c->subscribe.n; i++)
        zmq_setsockopt(d->ingest.sock, ZMQ_SUBSCRIBE, c->subscribe.ep[i],
                       strlen(c->subscribe.ep[i]));
    for (size_t i = 0; i < c->ingest.n; i++) {
        snprintf(bound[nb][0], 256, "ingest");
        if (zsock_attach(&d->ingest, c->ingest.ep[i], bound[nb][1], 256, err, errlen))
            return -1;
        nb++;
    }
    if (c->ingest_pull.n) {
        if (zsock_open(&d->pull, d->zctx, ZMQ_PULL, "ingest-pull") != 0 ||
            (d->curve.on && curve_server(&d->curve, d->pull.sock, AUTH_PRODUCERS) != 0))
            goto zerr;
        d->have_pull = 1;
        set_int(d->pull.sock, ZMQ_MAXMSGSIZE, (int64_t)c->max_msg_size);
        set_int(d->pull.sock, ZMQ_RCVHWM, (int64_t)config_rcvhwm(c));
        for (size_t i = 0; i < c->ingest_pull.n; i++) {
            snprintf(bound[nb][0], 256, "ingest_pull");
            if (zsock_attach(&d->pull, c->ingest_pull.ep[i], bound[nb][1], 256, err, errlen))
                return -1;
            nb++;
        }
    }
    if (zsock_open(&d->control, d->zctx, ZMQ_REP, "control") != 0 ||
        (d->curve.on && curve_server(&d->curve, d->control.sock, AUTH_OPERATORS) != 0))
        goto zerr;
    set_int(d->control.sock, ZMQ_MAXMSGSIZE, 1 << 16);
    snprintf(bound[nb][0], 256, "control");
    if (zsock_attach(&d->control, c->control, bound[nb][1], 256, err, errlen))
        return -1;
    nb++;
    if (zsock_open(&d->publish, d->zctx, ZMQ_PUB, "publish") != 0 ||
        (d->curve.on && curve_server(&d->curve, d->publish.sock, AUTH_SUBSCRIBERS) != 0))
        goto zerr;
    d->pub = d->publish.sock;
    set_int(d->pub, ZMQ_SNDHWM, (int64_t)config_sndhwm(c));
    log_msg(&d->log, LOG_INFO, "main", "publish: at most %llu messages (publish_memory = %llu "
            "bytes) queued for a subscriber", (unsigned long long)config_sndhwm(c),
            (unsigned long long)c->publish_memory);
    snprintf(bound[nb][0], 256, "publish");
    if (zsock_attach(&d->publish, c->publish, bound[nb][1], 256, err, errlen))
        return -1;
    nb++;
    if (strcmp(c->http, "off") != 0) {
        http_limits lim = {c->http_timeout, (unsigned)c->http_max_connections,
                           (unsigned)c->http_max_per_address, (size_t)c->history,
                           c->history_step};
        http_access acc = {c->http_tls_cert, c->http_tls_key, c->http_auth_token_file,
                           c->http_auth_basic_file, c->http_auth_metrics, &d->log,
                           c->http_ingest, c->http_ingest_token_file,
                           (size_t)c->max_msg_size, (size_t)c->ingest_memory};
        int port = http_start(&d->http, c->http, &lim, &acc, err, errlen);
        if (port < 0)
            return -1;
        history_load(&d->http.hist, d);
        snprintf(bound[nb][0], 256, "http");
        snprintf(bound[nb][1], 256, "%s://%.*s:%d/metrics", c->http_tls_cert ? "https" : "http",
                 (int)(strrchr(c->http, ':') - c->http), c->http, port);
        nb++;
    }
    if (write_endpoints(d, (const char (*)[2][256])bound, nb, err, errlen) != 0)
        return -1;
    for (int i = 0; i < nb; i++) {
        const char *u = bound[i][1], *tail = strrchr(u, '/');
        if (strcmp(bound[i][0], "http") == 0 && tail) /* where a user looks first */
            log_msg(&d->log, LOG_INFO, "main", "http on %s: the page at %.*s/, status at "
                    "%.*s/status", u, (int)(tail - u), u, (int)(tail - u), u);
        else
            log_msg(&d->log, LOG_INFO, "main", "%s on %s", bound[i][0], u);
    }
    return 0;
zerr:
    snprintf(err, errlen, "zmq_socket: %s", zmq_strerror(errno));
    return -1;
}

/* Configured models exist from the start (shaped, if form and K are set),
 * so that status shows them and early labels can wait for their predictions. */
static int create_models(calibd *d, char *err, size_t errlen)
{
    for (size_t i = 0; i < d->cfg.nmodels; i++) {
        const char *name = d->cfg.models[i].name;
        int why = 0;
        if (!registry_get(d, name, strlen(name), 1, &why)) {
            snprintf(err, errlen, "model %s: %s", name, reject_name(why));
            return -1;
        }
    }
    return 0;
}

static void log_stale(void *arg, const char *name)
{
    calibd *d = arg;
    log_msg(&d->log, LOG_WARN, "state", "removed %s/%s, a temporary file left by a "
            "daemon that stopped while writing it", d->cfg.state_dir, name);
}

/* ------------------------------------------------------------ loop */

static void on_tick(uv_timer_t *t)
{
    daemon_tick(t->data);
}

static void close_all(calibd *d)
{
    kafka_stop(d); /* leaves the group: its partitions written and committed */
    zsock_close(&d->ingest);
    if (d->have_pull)
        zsock_close(&d->pull);
    zsock_close(&d->control);
    zsock_close(&d->publish);
    d->pub = NULL;
    zsock_close(&d->zap); /* after the sockets it answers for */
    http_stop(&d->http); /* the history is saved after the loop */
    slicer_close(&d->pass.models);
    recalib_workers_free(d);
    persist_stop(d); /* the final snapshot is written after the loop */
    alert_sinks_kill(d);
    if (!d->handles_ready)
        return;
    uv_timer_stop(&d->tick);
    uv_close((uv_handle_t *)&d->tick, NULL);
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)&d->sig[i], NULL);
}

/* A configuration file that holds nothing (a file caught while an editor
 * or a deployment tool writes it in place): refused at a reload, where it
 * would put every setting back to its default. 1 when empty, 0 when not,
 * -1 (err set) when it cannot be read. */
static int config_file_empty(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int c, empty = 1, comment = 0;
    while (empty && (c = getc(f)) != EOF) {
        if (c == '\n')
            comment = 0;
        else if (c == '#' || c == ';')
            comment = 1;
        else if (!comment && !isspace(c))
            empty = 0;
    }
    fclose(f);
    return empty;
}

/* SIGHUP: all or nothing. The file is read and checked whole (and the
 * command line, and the allow-lists) before anything changes; a file that
 * fails, or holds nothing, keeps the running configuration, with a log line
 * and a count (reloads_refused). Settings that need no new memory take
 * effect at once (label TTL, log level, allow-lists, new [model] sections
 * for models not yet seen); the others are kept until a restart, which the
 * log says. Statistics are never lost. */
static void reload(calibd *d)
{
    if (!d->config_path) {
        log_msg(&d->log, LOG_INFO, "config", "SIGHUP: no configuration file to reload");
        return;
    }
    daemon_cfg fresh;
    char err[ERR_MAX];
    int empty = config_file_empty(d->config_path, err, sizeof err), rc = -1;
    if (empty == 1)
        snprintf(err, sizeof err, "%s holds no setting (caught while it was being "
                 "written? write it elsewhere and rename it into place)", d->config_path);
    if (config_init(&fresh) != 0) {
        snprintf(err, sizeof err, "out of memory");
    } else if (empty == 0 &&
               config_load(&fresh, d->config_path, warn_config, d, err, sizeof err) == 0 &&
               apply_cli(&fresh, d->cli, err, sizeof err) == 0 &&
               curve_reload(&d->curve, &fresh, err, sizeof err) == 0) {
        rc = 0; /* nothing can fail from here on */
    }
    if (rc != 0) {
        d->reloads_refused++;
        log_msg(&d->log, LOG_ERROR, "config", "reload refused, keeping the running "
                "configuration: %s", err);
        config_free(&fresh);
        return;
    }
    int level = log_level_parse(fresh.log_level);
    if (level >= 0)
        d->log.level = level;
    /* the tick gives the join tables their new TTL, for what waits too */
    for (size_t i = 0; i < d->reg.n; i++) {
        model *m = d->reg.models[i];
        model_cfg mc;
        config_model_for(&fresh, m->name, &mc);
        m->cfg.label_ttl = mc.label_ttl;
    }
    /* future models take the new [defaults] and [model] sections */
    daemon_cfg old = d->cfg;
    d->cfg.defaults = fresh.defaults;
    d->cfg.models = fresh.models;
    d->cfg.nmodels = fresh.nmodels;
    d->cfg.auto_models = fresh.auto_models;
    d->cfg.model_idle_ttl = fresh.model_idle_ttl;
    fresh.models = old.models;
    config_free(&fresh);
    d->reloads++;
    log_msg(&d->log, LOG_INFO, "config", "reloaded %s (endpoints, windows and sample "
            "sizes of existing models change at restart)", d->config_path);
}

static void on_signal(uv_signal_t *s, int signum)
{
    calibd *d = s->data;
    if (signum == SIGHUP) {
        reload(d);
        return;
    }
    if (d->stopping)
        return;
    d->stopping = 1;
    log_msg(&d->log, LOG_INFO, "main", "signal %d: stopping", signum);
    /* stop ingest first; what was received has been processed in full,
     * since each message is handled within one callback */
    close_all(d);
}

/* A producer's connection ended: it closed it, or ZeroMQ cut it for a
 * message over max_msg_size. libzmq 4.3 reports both as the same
 * ZMQ_EVENT_DISCONNECTED, without a reason, so the line is info (the
 * ordinary case) and names the other. Or a peer of any socket failed its
 * handshake: closed during it (NO_DETAIL: a producer that sent nothing and
 * stopped, info), or a protocol failure (warn); one refused by the ZAP
 * handler (AUTH) has been logged there, with its key. */
static void on_peer_gone(zsock *z, unsigned event, const char *addr, size_t len, void *arg)
{
    calibd *d = arg;
    int n = (int)(len < 200 ? len : 200);
    if (event & ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return;
    if (event & ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) /* the connection ended in it */
        log_rl(&d->log, LOG_INFO, "socket", "%s: peer %.*s closed its connection during "
               "the handshake (a client that stopped at once; or not a ZeroMQ peer)",
               z->name, n, addr);
    else if (event & ZSOCK_HANDSHAKE_FAILED)
        log_rl(&d->log, LOG_WARN, "socket", "%s: peer %.*s failed its handshake (%s)",
               z->name, n, addr, d->curve.on ? "CURVE is on: a client needs a key pair and "
               "calibd's public key" : "CURVE is off: a client must not use it; or not a "
               "ZeroMQ peer");
    else
        log_rl(&d->log, LOG_INFO, "socket", "%s: peer %.*s disconnected (a producer that "
               "stopped%s; ZeroMQ also cuts a sender of a message over max_msg_size = %llu "
               "bytes, and does not say which)", z->name, n, addr,
               d->curve.on ? ", or one refused in its handshake" : "",
               (unsigned long long)d->cfg.max_msg_size);
}

static int start_loop(calibd *d, char *err, size_t errlen)
{
    int rc;
    uint64_t budget = (uint64_t)(d->cfg.drain_time * 1e9);
    if ((rc = zsock_watch(&d->ingest, d->loop, budget, ingest_on_message, d)) ||
        (d->have_pull && (rc = zsock_watch(&d->pull, d->loop, budget, ingest_on_message, d))) ||
        (rc = zsock_watch(&d->control, d->loop, budget, control_on_message, d)) ||
        (d->curve.on && (rc = zsock_watch(&d->zap, d->loop, budget, curve_on_zap, &d->curve)))) {
        snprintf(err, errlen, "uv_poll: %s", uv_strerror(rc));
        return -1;
    }
    static const int signums[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(d->loop, &d->sig[i]);
        d->sig[i].data = d;
        uv_signal_start(&d->sig[i], on_signal, signums[i]);
    }
    /* producers going away are worth a line; operators and serving nodes
     * come and go, only their failed handshakes are */
    const int peers = ZMQ_EVENT_DISCONNECTED | ZSOCK_HANDSHAKE_FAILED;
    if (zsock_monitor(&d->ingest, &d->ingest_monitor, d->zctx, d->loop, peers,
                      on_peer_gone, d) != 0 ||
        (d->have_pull && zsock_monitor(&d->pull, &d->pull_monitor, d->zctx, d->loop, peers,
                                       on_peer_gone, d) != 0) ||
        zsock_monitor(&d->control, &d->control_monitor, d->zctx, d->loop,
                      ZSOCK_HANDSHAKE_FAILED, on_peer_gone, d) != 0 ||
        zsock_monitor(&d->publish, &d->publish_monitor, d->zctx, d->loop,
                      ZSOCK_HANDSHAKE_FAILED, on_peer_gone, d) != 0) {
        snprintf(err, errlen, "zmq_socket_monitor: %s", zmq_strerror(errno));
        return -1;
    }
    if ((rc = daemon_tick_init(d)) != 0 || (rc = recalib_workers_init(d)) != 0) {
        snprintf(err, errlen, "uv_idle_init: %s", uv_strerror(rc));
        return -1;
    }
    if (kafka_start(d, err, errlen) != 0)
        return -1;
    uv_timer_init(d->loop, &d->tick);
    d->tick.data = d;
    uint64_t ms = (uint64_t)(d->cfg.tick * 1000);
    uv_timer_start(&d->tick, on_tick, ms ? ms : 1, ms ? ms : 1);
    /* /metrics from the start, not after the first tick */
    http_update(&d->http, d);
    d->handles_ready = 1;
    return 0;
}

/* Every producer, subscriber and HTTP client takes a descriptor, and so do
 * the state files: the soft limit (1,024 under systemd's default, without
 * the unit's LimitNOFILE) ran out at ~1,000 idle producer connections, and
 * every snapshot then failed. It goes up to the hard limit, which the
 * administrator set. */
static void raise_fd_limit(calibd *d)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        log_msg(&d->log, LOG_INFO, "main", "descriptors: soft limit raised from %llu to the "
                "hard limit, %llu", (unsigned long long)was, (unsigned long long)rl.rlim_max);
    else
        log_msg(&d->log, LOG_WARN, "main", "descriptors: the soft limit stays at %llu: %s",
                (unsigned long long)was, strerror(errno));
}

/* A file that can be opened for reading, or err says why. */
static int readable(const char *key, const char *path, char *err, size_t errlen)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (path && !f) {
        snprintf(err, errlen, "%s = %s: %s", key, path, strerror(errno));
        return 0;
    }
    if (f)
        fclose(f);
    return 1;
}

/* --check-config: what a start would refuse, without binding a socket or
 * writing the state directory: the file and the command line (read
 * already), the allow-lists, the HTTP credentials' files, and the
 * configured models (max_models, memory_limit, their methods, their stored
 * parameters, read only). 0 (ok, said on stdout) or 2 (the reason). */
static int check_config(calibd *d, const char *path)
{
    char err[ERR_MAX];
    curve_ctx a;
    const daemon_cfg *c = &d->cfg;
    int ok = curve_load(&a, c, &d->log, err, sizeof err) == 0;
    curve_free(&a);
    ok = ok && readable("http_tls_cert", c->http_tls_cert, err, sizeof err) &&
         readable("http_tls_key", c->http_tls_key, err, sizeof err) &&
         readable("http_auth_token_file", c->http_auth_token_file, err, sizeof err) &&
         readable("http_auth_basic_file", c->http_auth_basic_file, err, sizeof err) &&
         readable("http_ingest_token_file", c->http_ingest_token_file, err, sizeof err) &&
         kafka_check(c, err, sizeof err) == 0 && create_models(d, err, sizeof err) == 0;
    if (ok)
        printf("calibd: %s: ok\n", path);
    else
        fprintf(stderr, "calibd: %s\n", err);
    calibd_free(d);
    return ok ? 0 : 2;
}

int main(int argc, char **argv)
{
    static calibd d; /* large; zeroed; lives as long as the process */
    cli c = {0};
    char err[ERR_MAX];
    log_init(&d.log, LOG_INFO, stderr);
    if (parse_cli(argc, argv, &c) != 0)
        return 2;
    if (load_config(&d, &c, err, sizeof err) != 0) {
        fprintf(stderr, "calibd: %s\n", err);
        config_free(&d.cfg);
        return 2;
    }
    d.log.level = log_level_parse(d.cfg.log_level);
    raise_fd_limit(&d);
    uint64_t seed;
    if (uv_random(NULL, NULL, &seed, sizeof seed, 0, NULL) != 0)
        seed = (uint64_t)wall_now() ^ (uint64_t)getpid();
    if (calibd_init(&d, uv_default_loop(), seed) != 0) {
        fprintf(stderr, "calibd: out of memory\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN); /* an exec sink that exits early must not kill us */
    if (c.check)
        return check_config(&d, c.config);
    /* before anything reads or writes the state directory */
    int lock = state_lock(d.cfg.state_dir, err, sizeof err);
    if (lock < 0) {
        log_msg(&d.log, LOG_ERROR, "main", "%s", err);
        calibd_free(&d);
        return 1;
    }
    if (state_remove_stale(d.cfg.state_dir, log_stale, &d) < 0)
        log_msg(&d.log, LOG_WARN, "state", "cannot read %s: %s", d.cfg.state_dir,
                strerror(errno));
    int code = 0;
    /* with Kafka, a configured model is made by its first message or its
     * partition's snapshot, so that it belongs to the source that feeds it
     * (kafka.h); --check-config still makes them all, to check them */
    if (persist_restore(&d) != 0 ||
        (!d.cfg.kafka.brokers && create_models(&d, err, sizeof err) != 0) ||
        open_sockets(&d, err, sizeof err) != 0 ||
        start_loop(&d, err, sizeof err) != 0) {
        log_msg(&d.log, LOG_ERROR, "main", "%s", err);
        code = 1;
        d.stopping = 1;
        close_all(&d);
    } else {
        log_msg(&d.log, LOG_INFO, "main", "calibd %s running", PACKAGE_VERSION);
    }
    uv_run(d.loop, UV_RUN_DEFAULT);
    if (code == 0 && persist_final(&d) != 0) {
        log_msg(&d.log, LOG_ERROR, "main", "the final snapshot was not written: the state "
                "since the last one is lost; exiting 1");
        code = 1;
    }
    kafka_free(&d);
    persist_free(&d);
    if (d.http.started) /* after the loop: no save may run */
        history_save(&d.http.hist, &d);
    http_free(&d.http);
    uv_loop_close(d.loop);
    if (d.zctx)
        zmq_ctx_term(d.zctx);
    calibd_free(&d);
    log_msg(&d.log, LOG_INFO, "main", "stopped");
    close(lock);
    return code;
}
