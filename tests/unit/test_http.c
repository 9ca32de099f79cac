/* test_http.c — calibd's HTTP server on a loopback port, driven without a
 * daemon: /healthz follows the loop's heartbeat (and fails when the loop
 * stops ticking), /status and /metrics serve the loop's snapshots (503
 * before there is one), / is the self-contained page, /history answers
 * JSON, and other paths and methods are refused. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "calibd.h"
#include "http.h"
#include "registry.h"

/* One request; returns the whole response (malloc'ed) and its status. */
static char *request(int port, const char *method, const char *path, int *status)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: x\r\n\r\n", method, path);
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
} fixture;

/* A tick's round, run to its end: the loop runs the slices and the join. */
static void tick(fixture *f)
{
    http_update(&f->d.http, &f->d);
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(config_init(&f->d.cfg), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->d.loop = &f->loop;
    log_init(&f->d.log, LOG_ERROR, stderr);
    f->d.hash_seed = 5;
    f->d.cfg.health_timeout = 5;
    f->d.ingest.name = "ingest";
    f->d.started = 1;
    http_limits lim = {.timeout = 10, .max_conns = 16, .max_per_addr = 16, .history = 10,
                       .history_step = 60};
    char err[200];
    f->port = http_start(&f->d.http, "127.0.0.1:0", &lim, err, sizeof err);
    assert_true(f->port > 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    http_stop(&f->d.http);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* the handles' closing */
    http_free(&f->d.http);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    registry_free(&f->d);
    config_free(&f->d.cfg);
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
static void history(void **state)
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
    pthread_mutex_lock(&h->lock);
    long i = hist_find(&h->hist, "m", 1);
    hist_point p = {.t = 1700000000, .v = {0.5f, 0.25f, 0.75f, NAN, NAN, NAN}, .n = 12};
    assert_int_equal(hist_add(&h->hist, (size_t)i, &p), 0);
    pthread_mutex_unlock(&h->lock);
    r = request(f->port, "GET", "/history?model=m", &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(r, "\"points\":[[1700000000,0.5,0.25,0.75,null,null,null,12]]}"));
    free(r);
}

/* Other paths 404, other methods 405. */
static void refusals(void **state)
{
    fixture *f = *state;
    int code;
    free(request(f->port, "GET", "/nope", &code));
    assert_int_equal(code, 404);
    free(request(f->port, "POST", "/metrics", &code));
    assert_int_equal(code, 405);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(healthz_follows_the_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(rendered_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(families_stay_together, setup, teardown),
        cmocka_unit_test_setup_teardown(the_page, setup, teardown),
        cmocka_unit_test_setup_teardown(history, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
