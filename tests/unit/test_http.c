/* test_http.c — calibd's HTTP server on a loopback port, driven without a
 * daemon: /healthz follows the loop's heartbeat (and fails when the loop
 * stops ticking), /status and /metrics serve the loop's snapshots (503
 * before there is one), / is the self-contained page, /history answers
 * JSON, and other paths and methods are refused. Authentication without
 * sockets: the secret comparison, the token, basic-auth and PEM files and
 * their refusals, the verdict on each request; then over a socket: 401
 * with both challenges, counted and logged with the peer, /metrics open. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "calibd.h"
#include "http.h"
#include "registry.h"

/* A connection to the server on port. */
static int connect_local(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* One request with one more header line (or NULL); returns the whole
 * response (malloc'ed) and its status. */
static char *request_with(int port, const char *method, const char *path, const char *header,
                          int *status)
{
    int fd = connect_local(port);
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: x\r\n%s%s\r\n", method, path,
                     header ? header : "", header ? "\r\n" : "");
    assert_true(n > 0 && (size_t)n < sizeof req);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    ssize_t got;
    while ((got = read(fd, buf + len, cap - len)) > 0) {
        len += (size_t)got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    close(fd);
    buf[len] = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", status), 1);
    return buf;
}

static char *request(int port, const char *method, const char *path, int *status)
{
    return request_with(port, method, path, NULL, status);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct fixture {
    calibd d;
    uv_loop_t loop;
    int port;
    char dir[64];     /* the secret files, or "" */
    FILE *log;        /* the log, in logbuf, or NULL */
    char *logbuf;
    size_t loglen;
} fixture;

/* A tick's round, run to its end: the loop runs the slices and the join. */
static void tick(fixture *f)
{
    http_update(&f->d.http, &f->d);
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

/* A server with acc's access, or NULL; with f->log set, logging to it. */
static int setup_access(void **state, fixture *f, const http_access *acc)
{
    assert_non_null(f);
    assert_int_equal(config_init(&f->d.cfg), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    log_init(&f->d.log, f->log ? LOG_WARN : LOG_ERROR, f->log ? f->log : stderr);
    assert_int_equal(calibd_init(&f->d, &f->loop, 5), 0);
    f->d.cfg.health_timeout = 5;
    f->d.ingest.name = "ingest";
    f->d.started = 1;
    http_limits lim = {.timeout = 10, .max_conns = 16, .max_per_addr = 16, .history = 10,
                       .history_step = 60};
    char err[200];
    f->port = http_start(&f->d.http, "127.0.0.1:0", &lim, acc, err, sizeof err);
    if (f->port <= 0)
        print_error("http_start: %s\n", err);
    assert_true(f->port > 0);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    return setup_access(state, f, NULL);
}

static int teardown(void **state)
{
    fixture *f = *state;
    http_stop(&f->d.http);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* the handles' closing */
    http_free(&f->d.http);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    calibd_free(&f->d);
    if (f->log) {
        fclose(f->log);
        free(f->logbuf);
    }
    if (f->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
        assert_int_equal(system(cmd), 0);
    }
    free(f);
    return 0;
}

static void set_beat(http_server *h, double beat)
{
    pthread_mutex_lock(&h->lock);
    h->beat = beat;
    pthread_mutex_unlock(&h->lock);
}

/* 503 before the first tick and when the loop stops ticking, 200 while it
 * ticks. */
static void healthz_follows_the_loop(void **state)
{
    fixture *f = *state;
    int code;
    char *r = request(f->port, "GET", "/healthz", &code);
    assert_int_equal(code, 503); /* no tick yet */
    free(r);
    tick(f);
    r = request(f->port, "GET", "/healthz", &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "\r\n\r\nok\n"));
    free(r);
    set_beat(&f->d.http, mono() - 6); /* the loop stuck for 6 s, limit 5 */
    r = request(f->port, "GET", "/healthz", &code);
    assert_int_equal(code, 503);
    assert_non_null(strstr(r, "has not ticked for 6."));
    free(r);
    tick(f); /* it ticks again */
    r = request(f->port, "GET", "/healthz", &code);
    assert_int_equal(code, 200);
    free(r);
}

/* The snapshots: 503 with Retry-After before the first, then the JSON of
 * calibctl status and the metrics. */
static void rendered_snapshots(void **state)
{
    fixture *f = *state;
    int code;
    char *r = request(f->port, "GET", "/status", &code);
    assert_int_equal(code, 503);
    assert_non_null(strstr(r, "Retry-After: 1"));
    free(r);
    r = request(f->port, "GET", "/metrics", &code);
    assert_int_equal(code, 503);
    free(r);
    tick(f);
    r = request(f->port, "GET", "/status", &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "Content-Type: application/json"));
    assert_non_null(strstr(r, "{\"ok\": true, \"version\": \"" PACKAGE_VERSION "\""));
    assert_non_null(strstr(r, "\"models\": {}"));
    free(r);
    r = request(f->port, "GET", "/metrics", &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "calibd_build_info{version=\"" PACKAGE_VERSION "\"} 1\n"));
    free(r);
}

/* Models rendered one at a time into a family each keep the text format's
 * rule: every family's samples in one group under its one HELP and TYPE;
 * and every model is there, in the metrics and in the status. */
static void families_stay_together(void **state)
{
    fixture *f = *state;
    f->d.cfg.defaults.form = CALIB_FORM_LOGITS;
    f->d.cfg.defaults.k = 3;
    f->d.cfg.defaults.max_pending = 16;
    char name[16];
    int why = 0;
    for (int i = 0; i < 5; i++) {
        int n = snprintf(name, sizeof name, "m%d", i);
        assert_non_null(registry_get(&f->d, name, (size_t)n, 1, &why));
    }
    tick(f);
    int code;
    char *r = request(f->port, "GET", "/metrics", &code);
    assert_int_equal(code, 200);
    char *body = strstr(r, "\r\n\r\n");
    assert_non_null(body);
    /* each TYPE once; each sample under the TYPE of its name */
    char types[256][96], cur[96] = "";
    size_t ntypes = 0, samples = 0, scored = 0;
    for (char *line = strtok(body + 4, "\n"); line; line = strtok(NULL, "\n")) {
        char nm[96];
        if (sscanf(line, "# TYPE %95s", nm) == 1) {
            for (size_t i = 0; i < ntypes; i++)
                assert_string_not_equal(types[i], nm);
            assert_true(ntypes < 256);
            snprintf(types[ntypes++], sizeof types[0], "%s", nm);
            snprintf(cur, sizeof cur, "%s", nm);
        } else if (line[0] != '#') {
            size_t len = strcspn(line, "{ ");
            assert_true(len == strlen(cur) && strncmp(line, cur, len) == 0);
            samples++;
            const char *sc = "calibd_scored_total{model=\"m";
            scored += strncmp(line, sc, strlen(sc)) == 0;
        }
    }
    assert_int_equal(scored, 5);
    assert_true(ntypes > 40 && samples > 5 * 40);
    free(r);
    r = request(f->port, "GET", "/status", &code);
    assert_int_equal(code, 200);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "\"m%d\": {", i);
        assert_non_null(strstr(r, name));
    }
    free(r);
}

/* The page: HTML, with a policy that allows nothing from elsewhere. */
static void the_page(void **state)
{
    fixture *f = *state;
    int code;
    char *r = request(f->port, "GET", "/", &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "Content-Type: text/html; charset=utf-8"));
    assert_non_null(strstr(r, "Content-Security-Policy: default-src 'self';"));
    assert_non_null(strstr(r, "<html"));
    free(r);
}

/* /history: 404 JSON for a model without one, its points otherwise. */
static void history_route(void **state)
{
    fixture *f = *state;
    http_server *h = &f->d.http;
    int code;
    char *r = request(f->port, "GET", "/history?model=m", &code);
    assert_int_equal(code, 404);
    assert_non_null(strstr(r, "{\"error\":"));
    free(r);
    r = request(f->port, "GET", "/history", &code);
    assert_int_equal(code, 404);
    free(r);
    pthread_mutex_lock(&h->hist.lock);
    long i = hist_find(&h->hist.h, "m", 1);
    hist_point p = {.t = 1700000000, .v = {0.5f, 0.25f, 0.75f, NAN, NAN, NAN, 0.375f, 0.25f, 0.5f},
                    .n = 12};
    assert_int_equal(hist_add(&h->hist.h, (size_t)i, &p), 0);
    pthread_mutex_unlock(&h->hist.lock);
    r = request(f->port, "GET", "/history?model=m", &code);
    assert_int_equal(code, 200);
    /* the estimate's columns after "scored", where the first form ended */
    assert_non_null(strstr(r, "\"scored\",\"estimated\",\"estimated_lo\",\"estimated_hi\"]"));
    assert_non_null(
        strstr(r, "\"points\":[[1700000000,0.5,0.25,0.75,null,null,null,12,0.375,0.25,0.5]]}"));
    free(r);
}

/* Other paths 404, whatever the method, with the routes listed from the
 * table; other methods on a route 405, with the methods allowed. */
static void refusals(void **state)
{
    fixture *f = *state;
    int code;
    char routes[256];
    size_t n = http_routes_text(routes, sizeof routes, 0);
    assert_true(n < sizeof routes);
    assert_non_null(strstr(routes, " /history?model=NAME,"));
    const char *paths[] = {"/", "/metrics", "/status", "/history", "/healthz"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char word[32];
        snprintf(word, sizeof word, " %s", paths[i]);
        assert_non_null(strstr(routes, word));
    }
    char *r = request(f->port, "GET", "/nope", &code);
    assert_int_equal(code, 404);
    assert_non_null(strstr(r, routes));
    free(r);
    free(request(f->port, "POST", "/nope", &code));
    assert_int_equal(code, 404);
    r = request(f->port, "POST", "/metrics", &code);
    assert_int_equal(code, 405);
    assert_non_null(strstr(r, "\r\nAllow: GET, HEAD\r\n"));
    free(r);
    /* a text cut short still says how long it is whole */
    char small[8];
    assert_int_equal(http_routes_text(small, sizeof small, 0), n);
    assert_int_equal(strlen(small), sizeof small - 1);
}


/* ------------------------------------------------------------ access */

#define TOKEN "0123456789abcdef0123456789abcdef"

/* dir/name with text; its path in out. */
static void write_file(const char *dir, const char *name, const void *text, size_t len,
                       char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    FILE *fp = fopen(out, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

static void make_dir(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/test_http.XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Equal only when both length and every byte are; a prefix, an extension,
 * a byte off anywhere, or nothing given are not. */
static void secret_comparison(void **state)
{
    (void)state;
    const char *s = "correct horse battery";
    size_t n = strlen(s);
    assert_true(http_secret_equal(s, n, "correct horse battery", n));
    assert_false(http_secret_equal("correct horse batterx", n, s, n));
    assert_false(http_secret_equal("Correct horse battery", n, s, n));
    assert_false(http_secret_equal(s, n - 1, s, n));     /* a prefix */
    assert_false(http_secret_equal("correct horse battery!", n + 1, s, n));
    assert_false(http_secret_equal("", 0, s, n));
    /* a guess that repeats to the secret's length is no match either */
    assert_false(http_secret_equal("ab", 2, "abab", 4));
}

/* The token file: one token, its line end and padding allowed; anything
 * else refused with the file and why, never the token itself. */
static void token_file(void **state)
{
    (void)state;
    char dir[64], path[128], err[600];
    make_dir(dir, sizeof dir);
    static const struct {
        const char *text;
        const char *token, *says; /* the token read, or what the refusal says */
    } cases[] = {
        {TOKEN "\n", TOKEN, NULL},
        {TOKEN "\r\n\r\n", TOKEN, NULL},
        {TOKEN, TOKEN, NULL},
        {"a-b.c_d~e+f/g0123==\n", "a-b.c_d~e+f/g0123==", NULL},
        {"", NULL, "empty"},
        {"\n", NULL, "empty"},
        {"===\n", NULL, "empty"},
        {"short\n", NULL, "the token has 5 characters: 16 to 4096"},
        {"0123456789abcdef 0123\n", NULL, "character 17 of the token"},
        {"0123456789=abcdef0123\n", NULL, "character 11 of the token"},
        {TOKEN "\n" TOKEN "\n", NULL, "more than one line"},
        {" " TOKEN "\n", NULL, "character 1 of the token"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(dir, "token", cases[i].text, strlen(cases[i].text), path, sizeof path);
        http_auth a;
        err[0] = 0;
        int rc = http_auth_load(&a, path, NULL, err, sizeof err);
        if (cases[i].token) {
            assert_int_equal(rc, 0);
            assert_string_equal(a.token, cases[i].token);
            assert_int_equal(a.token_len, strlen(cases[i].token));
            assert_int_equal(a.nusers, 0);
            http_auth_free(&a);
            assert_null(a.token);
        } else {
            assert_int_equal(rc, -1);
            if (!strstr(err, cases[i].says) || !strstr(err, path)) {
                print_error("case %zu: '%s' lacks '%s'\n", i, err, cases[i].says);
                fail();
            }
            assert_null(strstr(err, "0123456789abcdef0")); /* no secret in the message */
            assert_null(a.token);
        }
    }
    assert_int_equal(http_auth_load(&(http_auth){0}, dir, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(path, sizeof path, "%s/absent", dir);
    http_auth a;
    assert_int_equal(http_auth_load(&a, path, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "absent: No such file or directory"));
    write_file(dir, "nul", "0123456789abcdef\0x", 18, path, sizeof path);
    assert_int_equal(http_auth_load(&a, path, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "a NUL byte"));
    remove_dir(dir);
}

/* The basic-auth file: user:password lines (the password may hold ':'),
 * comments and blank lines skipped; a bad line refused with its number. */
static void basic_file(void **state)
{
    (void)state;
    char dir[64], path[128], err[600];
    make_dir(dir, sizeof dir);
    const char *good = "# who may look\n\nalice:s3cret:x\r\nbob:hunter2hunter2\n";
    write_file(dir, "users", good, strlen(good), path, sizeof path);
    http_auth a;
    assert_int_equal(http_auth_load(&a, NULL, path, err, sizeof err), 0);
    assert_null(a.token);
    assert_int_equal(a.nusers, 2);
    assert_string_equal(a.users[0].name, "alice");
    assert_string_equal(a.users[0].pass, "s3cret:x");
    assert_int_equal(a.users[0].pass_len, 8);
    assert_string_equal(a.users[1].name, "bob");
    assert_string_equal(a.users[1].pass, "hunter2hunter2");
    http_auth_free(&a);
    assert_int_equal(a.nusers, 0);
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"alice:x\n\nbob\n", ":3: expected user:password"},
        {":x\n", ":1: empty user name"},
        {"alice:\n", ":1: empty password"},
        {"alice:x\nalice:y\n", ":2: user 'alice' again"},
        {"al\tice:x\n", ":1: a control character"},
        {"# nobody\n\n", "no user:password line"},
        {"", "no user:password line"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file(dir, "users", bad[i].text, strlen(bad[i].text), path, sizeof path);
        assert_int_equal(http_auth_load(&a, NULL, path, err, sizeof err), -1);
        if (!strstr(err, bad[i].says) || !strstr(err, path)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, bad[i].says);
            fail();
        }
        assert_int_equal(a.nusers, 0);
        assert_null(a.users);
    }
    /* a good token with a bad users file: nothing kept */
    char token[128];
    write_file(dir, "token", TOKEN "\n", strlen(TOKEN) + 1, token, sizeof token);
    assert_int_equal(http_auth_load(&a, token, path, err, sizeof err), -1);
    assert_null(a.token);
    remove_dir(dir);
}

/* The verdict: nothing configured passes all; /metrics open unless
 * metrics is set; no header is missing; the token (scheme in any case,
 * spaces after it) or any user's name and password pass; anything else,
 * a prefix or an extension of the token included, is wrong. */
/* whether a path is an open route (http.c's table) */
#define OPEN(path) http_route_open(path)

static void verdicts(void **state)
{
    (void)state;
    http_auth none = {0};
    assert_false(http_auth_required(&none, OPEN("/status")));
    assert_int_equal(http_auth_check(&none, OPEN("/status"), NULL, NULL, NULL), HTTP_AUTH_PASS);
    assert_int_equal(http_auth_check(&none, OPEN("/"), "Bearer junk", NULL, NULL), HTTP_AUTH_PASS);
    char token[] = TOKEN, alice[] = "alice\0s3cret:x", bob[] = "bob\0hunter2hunter2";
    http_user users[2] = {{alice, alice + 6, 5, 8}, {bob, bob + 4, 3, 14}};
    http_auth a = {.token = token, .token_len = strlen(token), .users = users, .nusers = 2};
    assert_false(http_auth_required(&a, OPEN("/metrics")));
    assert_true(http_auth_required(&a, OPEN("/metrics/")));
    assert_true(http_auth_required(&a, OPEN("/")));
    assert_true(http_auth_required(&a, OPEN("/healthz")));
    assert_int_equal(http_auth_check(&a, OPEN("/metrics"), NULL, NULL, NULL), HTTP_AUTH_PASS);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), NULL, NULL, NULL), HTTP_AUTH_MISSING);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), "Bearer " TOKEN, NULL, NULL),
                     HTTP_AUTH_PASS);
    assert_int_equal(http_auth_check(&a, OPEN("/"), "bearer   " TOKEN, NULL, NULL), HTTP_AUTH_PASS);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), "Bearer " TOKEN "0", NULL, NULL),
                     HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), "Bearer 0123456789abcdef", NULL, NULL),
                     HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), "Bearer", NULL, NULL), HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), "Bearer ", NULL, NULL), HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), "Token " TOKEN, NULL, NULL),
                     HTTP_AUTH_WRONG);
    const char *basic = "Basic eA=="; /* what the header was does not matter here */
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, "alice", "s3cret:x"), HTTP_AUTH_PASS);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, "bob", "hunter2hunter2"),
                     HTTP_AUTH_PASS);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, "alice", "hunter2hunter2"),
                     HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, "alice", "s3cret"), HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, "Alice", "s3cret:x"),
                     HTTP_AUTH_WRONG);
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, NULL, NULL), HTTP_AUTH_WRONG);
    /* the token as a password is no way in */
    assert_int_equal(http_auth_check(&a, OPEN("/status"), basic, "alice", TOKEN), HTTP_AUTH_WRONG);
    /* a token alone: a basic header is wrong, whatever it says */
    http_auth only_token = {.token = token, .token_len = strlen(token)};
    assert_int_equal(http_auth_check(&only_token, OPEN("/status"), basic, "alice", "s3cret:x"),
                     HTTP_AUTH_WRONG);
    /* users alone: a bearer header is wrong, even with a user's password */
    http_auth only_users = {.users = users, .nusers = 2};
    assert_int_equal(http_auth_check(&only_users, OPEN("/status"), "Bearer s3cret:x", NULL, NULL),
                     HTTP_AUTH_WRONG);
    /* metrics set: /metrics like the rest */
    a.metrics = 1;
    assert_true(http_auth_required(&a, OPEN("/metrics")));
    assert_int_equal(http_auth_check(&a, OPEN("/metrics"), NULL, NULL, NULL), HTTP_AUTH_MISSING);
    assert_int_equal(http_auth_check(&a, OPEN("/metrics"), "Bearer " TOKEN, NULL, NULL),
                     HTTP_AUTH_PASS);
}

/* PEM files: a certificate, a private key of any type; an encrypted key,
 * the wrong kind of block, binary data refused with why. */
static void pem_files(void **state)
{
    (void)state;
    char dir[64], path[128], err[600], *pem;
    size_t len;
    make_dir(dir, sizeof dir);
    static const struct {
        const char *kind, *text, *says; /* says NULL: loads */
    } cases[] = {
        {"CERTIFICATE", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", NULL},
        {"CERTIFICATE", "junk\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
                        "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n", NULL},
        {"PRIVATE KEY", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n", NULL},
        {"PRIVATE KEY", "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n",
         NULL},
        {"PRIVATE KEY", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
         NULL},
        {"PRIVATE KEY", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n"
                        "-----END ENCRYPTED PRIVATE KEY-----\n", "is encrypted"},
        {"PRIVATE KEY", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
                        "DEK-Info: AES-256-CBC,00\n\nMIIE\n-----END RSA PRIVATE KEY-----\n",
         "is encrypted"},
        {"PRIVATE KEY", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
         "no PEM private key"},
        {"CERTIFICATE", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
         "no PEM certificate"},
        {"CERTIFICATE", "-----BEGIN TRUSTED CERTIFICATE-----\nMIIB\n"
                        "-----END TRUSTED CERTIFICATE-----\n", "no PEM certificate"},
        {"CERTIFICATE", "", "no PEM certificate"},
        {"CERTIFICATE", "-----BEGIN CERTIFICATE", "no PEM certificate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(dir, "pem", cases[i].text, strlen(cases[i].text), path, sizeof path);
        pem = NULL;
        int rc = http_pem_load(path, cases[i].kind, &pem, &len, err, sizeof err);
        if (!cases[i].says) {
            assert_int_equal(rc, 0);
            assert_int_equal(len, strlen(cases[i].text));
            assert_string_equal(pem, cases[i].text); /* whole, NUL-terminated */
            free(pem);
            continue;
        }
        assert_int_equal(rc, -1);
        assert_null(pem);
        if (!strstr(err, cases[i].says) || !strstr(err, path)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, cases[i].says);
            fail();
        }
    }
    write_file(dir, "der", "\x30\x82\x01\x00", 4, path, sizeof path);
    assert_int_equal(http_pem_load(path, "CERTIFICATE", &pem, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "expected PEM text"));
    remove_dir(dir);
}

/* http_start refuses, saying why: half of TLS, a file it cannot read,
 * http_auth_metrics without credentials (it would leave /metrics open). */
static void start_refusals(void **state)
{
    (void)state;
    char dir[64], token[128], missing[128], err[600];
    make_dir(dir, sizeof dir);
    write_file(dir, "token", TOKEN "\n", strlen(TOKEN) + 1, token, sizeof token);
    snprintf(missing, sizeof missing, "%s/absent.pem", dir);
    http_limits lim = {.timeout = 10, .max_conns = 4, .max_per_addr = 4};
    static http_server h; /* large: off the stack */
    static const char *const says[] = {
        "http_tls_cert and http_tls_key go together",
        "http_tls_cert and http_tls_key go together",
        "http_tls_cert " /* then the path */,
        "http_auth_metrics = yes needs credentials",
        "absent.pem: No such file or directory",
    };
    http_access acc[] = {
        {.tls_cert = token},
        {.tls_key = token},
        {.tls_cert = missing, .tls_key = missing},
        {.auth_metrics = 1},
        {.basic_file = missing},
    };
    for (size_t i = 0; i < sizeof acc / sizeof *acc; i++) {
        err[0] = 0;
        assert_int_equal(http_start(&h, "127.0.0.1:0", &lim, &acc[i], err, sizeof err), -1);
        if (!strstr(err, says[i])) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, says[i]);
            fail();
        }
        http_free(&h); /* nothing to free: not started */
    }
    remove_dir(dir);
}

/* Over a socket, with a token and two users: /metrics open; /status, /,
 * an unknown path and another method 401 with both challenges until the
 * right credentials come; each 401 counted by reason and logged with the
 * peer's address by the next tick. */
static int setup_auth(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    char token[128], users[128];
    make_dir(f->dir, sizeof f->dir);
    write_file(f->dir, "token", TOKEN "\n", strlen(TOKEN) + 1, token, sizeof token);
    const char *u = "alice:s3cret:x\nbob:hunter2hunter2\n";
    write_file(f->dir, "users", u, strlen(u), users, sizeof users);
    assert_non_null(f->log = open_memstream(&f->logbuf, &f->loglen));
    http_access acc = {.token_file = token, .basic_file = users, .log = &f->d.log};
    return setup_access(state, f, &acc);
}

static void unauthorized_counted_and_logged(void **state)
{
    fixture *f = *state;
    int code;
    tick(f);
    char *r = request(f->port, "GET", "/status", &code);
    assert_int_equal(code, 401);
    assert_non_null(strstr(r, "WWW-Authenticate: Bearer realm=\"calibd\"\r\n"));
    assert_non_null(strstr(r, "WWW-Authenticate: Basic realm=\"calibd\""));
    assert_null(strstr(r, "\"models\""));
    free(r);
    free(request(f->port, "GET", "/", &code));
    assert_int_equal(code, 401);
    free(request(f->port, "GET", "/nope", &code)); /* not 404: which paths exist is hidden */
    assert_int_equal(code, 401);
    free(request(f->port, "POST", "/status", &code));
    assert_int_equal(code, 401);
    r = request_with(f->port, "GET", "/status", "Authorization: Bearer nottheright0token", &code);
    assert_int_equal(code, 401);
    assert_non_null(strstr(r, "error=\"invalid_token\""));
    free(r);
    free(request_with(f->port, "GET", "/status", "Authorization: Basic YWxpY2U6d3Jvbmc=", &code));
    assert_int_equal(code, 401); /* alice:wrong */
    r = request_with(f->port, "GET", "/status", "Authorization: Bearer " TOKEN, &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "\"models\": {}"));
    free(r);
    free(request_with(f->port, "GET", "/", "Authorization: Basic YWxpY2U6czNjcmV0Ong=", &code));
    assert_int_equal(code, 200); /* alice:s3cret:x */
    free(request_with(f->port, "GET", "/healthz",
                      "Authorization: Basic Ym9iOmh1bnRlcjJodW50ZXIy", &code));
    assert_int_equal(code, 200); /* bob:hunter2hunter2 */
    free(request_with(f->port, "POST", "/status", "Authorization: Bearer " TOKEN, &code));
    assert_int_equal(code, 405); /* past the credentials, the method */
    tick(f);
    r = request(f->port, "GET", "/metrics", &code); /* open: http_auth_metrics = no */
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "calibd_http_unauthorized_total{reason=\"missing\"} 4\n"));
    assert_non_null(strstr(r, "calibd_http_unauthorized_total{reason=\"wrong\"} 2\n"));
    free(r);
    fflush(f->log);
    assert_non_null(f->logbuf);
    assert_non_null(strstr(f->logbuf, "warn: http: unauthorized: GET /status from 127.0.0.1: "
                                      "no credentials\n"));
    assert_non_null(strstr(f->logbuf, "unauthorized: POST /status from 127.0.0.1: no "
                                      "credentials\n"));
    assert_non_null(strstr(f->logbuf, "unauthorized: GET /status from 127.0.0.1: wrong "
                                      "credentials\n"));
    assert_null(strstr(f->logbuf, "nottheright")); /* no credentials in the log */
}

/* ------------------------------------------------------------ ingest */

/* A POST of body (msgpack) to path, sent whole; the socket, unread. */
static int post_msgpack(int port, const char *path, const char *body, size_t len)
{
    int fd = connect_local(port);
    char head[256];
    int n = snprintf(head, sizeof head, "POST %s HTTP/1.0\r\nHost: x\r\nContent-Type: "
                     "application/msgpack\r\nContent-Length: %zu\r\n\r\n", path, len);
    assert_int_equal(write(fd, head, (size_t)n), n);
    assert_int_equal(write(fd, body, len), (ssize_t)len);
    return fd;
}

/* The response on fd, read to its end, within ~30 s, the loop run in the
 * meantime (it answers the queued bodies); its status. */
static int response_of(fixture *f, int fd, char *buf, size_t cap)
{
    size_t len = 0;
    double end = mono() + 30;
    for (;;) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        struct timeval tv = {0, 10000};
        fd_set r;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        if (select(fd + 1, &r, NULL, NULL, &tv) > 0) {
            ssize_t got = read(fd, buf + len, cap - 1 - len);
            if (got <= 0)
                break;
            len += (size_t)got;
        }
        assert_true(mono() < end);
    }
    close(fd);
    buf[len] = 0;
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &status), 1);
    return status;
}

static int setup_ingest(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    /* a budget below one body of this test's: a body alone is taken all
     * the same (else it would be refused for ever), a second one is not */
    http_access acc = {.ingest = 1, .ingest_max_body = 65536, .ingest_budget = 4000};
    return setup_access(state, f, &acc);
}

/* While the loop has not taken the first body (queued though past the
 * budget, since nothing else waits), a second one is answered 503 with
 * Retry-After at once; the first is answered 200 once the loop runs, its
 * predictions counted on the model. */
static void ingest_back_pressure(void **state)
{
    fixture *f = *state;
    http_update(&f->d.http, &f->d); /* the first tick: the ingest's wake-up */
    char body[5000];
    /* {"v": 1, "type": "pred", "id": "a", "p": 0.5, "pad": bin} */
    size_t n = 0;
    const char head[] = "\x85\xa1v\x01\xa4type\xa4pred\xa2id\xa1" "a\xa1p\xcb\x3f\xe0\0\0\0\0\0\0"
                        "\xa3pad\xc5";
    memcpy(body, head, sizeof head - 1);
    n = sizeof head - 1;
    size_t pad = sizeof body - n - 2;
    body[n++] = (char)(pad >> 8);
    body[n++] = (char)(pad & 0xff);
    memset(body + n, 0, pad);
    n += pad;
    int first = post_msgpack(f->port, "/v1/models/m/predictions", body, n);
    /* the first waits for the loop, which does not run: once it is queued
     * (the server's counters say so) the second finds no room */
    double end = mono() + 30;
    for (;;) {
        pthread_mutex_lock(&f->d.http.ingest.lock);
        size_t queued = f->d.http.ingest.queued;
        pthread_mutex_unlock(&f->d.http.ingest.lock);
        if (queued)
            break;
        assert_true(mono() < end);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    int second = post_msgpack(f->port, "/v1/models/m/predictions", body, n);
    char buf[4096];
    struct timeval tv = {30, 0};
    setsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t got = 0, r;
    while ((r = read(second, buf + got, sizeof buf - 1 - (size_t)got)) > 0)
        got += r;
    close(second);
    buf[got] = 0;
    assert_non_null(strstr(buf, " 503 "));
    assert_non_null(strstr(buf, "Retry-After: 1"));
    assert_non_null(strstr(buf, "\"busy\""));
    assert_int_equal(response_of(f, first, buf, sizeof buf), 200);
    assert_non_null(strstr(buf, "\"records\":1"));
    model *m = registry_find(&f->d, "m", 1);
    assert_non_null(m);
    assert_int_equal(m->predictions, 1);
    assert_int_equal(f->d.http.ingest.busy, 1);
    assert_int_equal(f->d.http.ingest.messages, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(healthz_follows_the_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(rendered_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(families_stay_together, setup, teardown),
        cmocka_unit_test_setup_teardown(the_page, setup, teardown),
        cmocka_unit_test_setup_teardown(history_route, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
        cmocka_unit_test(secret_comparison),
        cmocka_unit_test(token_file),
        cmocka_unit_test(basic_file),
        cmocka_unit_test(verdicts),
        cmocka_unit_test(pem_files),
        cmocka_unit_test(start_refusals),
        cmocka_unit_test_setup_teardown(unauthorized_counted_and_logged, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(ingest_back_pressure, setup_ingest, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
