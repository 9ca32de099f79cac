/*
 * bench_rate.c — the parts of tests/bench/bench_throughput.sh that must be
 * fast: a producer of pre-encoded protocol-v1 messages, a null consumer
 * (the transport's limit: receive with libzmq, decode with msgpack-c, count
 * the predictions), and a waiter that asks calibd's control socket until a
 * model has scored so many pairs.
 *
 *   bench_rate send --endpoint EP --model M --k K --batch B --count N [--labels]
 *                   [--first ID]
 *   bench_rate null --endpoint EP --count N [--labels] [--floor T]
 *   bench_rate wait --control EP --model M --scored N [--timeout S]
 *   bench_rate ping --control EP --seconds S
 *
 * send: N predictions of K float32 logits in messages of B rows (B = 1: the
 * row form), with their outcomes inline, or (--labels) without, each
 * message followed by one of labels for the same ids. The messages are
 * encoded once, from 64 templates; only the ids (fixed-width uint64, at
 * known offsets) are written per message, so the producer costs a memcpy
 * and a send; ids run from --first (default 1). PUSH blocks when calibd's
 * queue is full: nothing is dropped.
 * null: binds a PULL socket on EP (prints "endpoint=" with the address
 * bound first), decodes every message with msgpack-c and exits when it has
 * counted N predictions (and N labels with --labels). --floor T makes it
 * the floor of issue 41: the least any monitor of these pairs must do
 * (outcomes inline): for each row both views' softmax (the logits as
 * sent, and divided by T) with glibc's scalar exp, their Brier and log
 * scores, and their top-label reliability bin (15 bins); no join, window,
 * interval, test or sample. Both print their CPU seconds (user + system,
 * getrusage, from the first message on) at the end: cpu=.
 * wait: polls {"cmd": "status", "model": M} every 5 ms until "scored" >= N.
 * ping: sends {"cmd": "ping"} back to back for S seconds; prints the
 * replies' count and latency (median, p99, max, in ms): how long the loop
 * leaves a control request waiting.
 * With CURVE: send, wait and ping take --key F --server-key F (a client's
 * pair, the server's public key), null takes --curve-server F (its pair).
 * Each prints what it did on one line; exit 0, 1 on failure, 2 on usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "calib/calib.h"
#include "calib/curve.h"
#include "calib/mpw.h"

#define TEMPLATES 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

static int flag(int argc, char **argv, const char *name)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

static int die(const char *what)
{
    fprintf(stderr, "bench_rate: %s: %s\n", what, zmq_strerror(zmq_errno()));
    return 1;
}

/* A socket of type on ep (bound when bind, else connected) in a new
 * context, with CURVE when asked: --key F --server-key F make it a client
 * (send, wait, ping), --curve-server F (a key pair) a server admitting
 * every client (null: no ZAP handler), so that a run with CURVE costs the
 * null consumer what it costs calibd. NULL after saying why. */
static void *open_socket(int argc, char **argv, int type, const char *ep, int bind,
                         void **ctx)
{
    const char *key = opt(argc, argv, "--key", NULL);
    const char *server_key = opt(argc, argv, "--server-key", NULL);
    const char *server = opt(argc, argv, "--curve-server", NULL);
    char err[600] = "";
    void *s = (*ctx = zmq_ctx_new()) ? zmq_socket(*ctx, type) : NULL;
    if (!s) {
        die("socket");
        return NULL;
    }
    int ok = 1;
    if (key && server_key) {
        ok = calib_curve_client(s, key, server_key, err, sizeof err) == CALIB_OK;
    } else if (server) {
        calib_curve_cert c;
        int one = 1;
        ok = calib_curve_load(server, &c, err, sizeof err) == CALIB_OK &&
             zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one) == 0 &&
             zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, c.secret_key, sizeof c.secret_key) == 0;
        if (!ok && !err[0])
            snprintf(err, sizeof err, "%s: no secret-key", server);
    }
    if (!ok) {
        fprintf(stderr, "bench_rate: %s\n", err);
        return NULL;
    }
    if ((bind ? zmq_bind(s, ep) : zmq_connect(s, ep)) != 0) {
        die(bind ? "bind" : "connect");
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------------ send */

/* One encoded message and where its ids' 8 bytes are. */
typedef struct tmpl {
    calib_mpw w;
    size_t *id_at; /* batch offsets of the big-endian ids */
} tmpl;

/* Ids are written as this sentinel plus the row: at least 2^32, so msgpack
 * gives each the 9-byte uint64 form (0xcf and 8 bytes), found again in the
 * finished message and overwritten per send. */
#define ID_SENTINEL 0xa5a5a5a500000000ULL

/* Where sentinel id v's 8 bytes are in the message, or SIZE_MAX. */
static size_t find_id(const calib_mpw *w, uint64_t v)
{
    unsigned char pat[9] = {0xcf};
    for (int j = 0; j < 8; j++)
        pat[1 + j] = (unsigned char)(v >> (56 - 8 * j));
    for (size_t i = 0; i + sizeof pat <= w->sb.size; i++)
        if (memcmp(w->sb.data + i, pat, sizeof pat) == 0)
            return i + 1;
    return SIZE_MAX;
}

/* A message of b rows (the row form when b = 1): predictions (pred 1) of
 * K float32 logits with or without their outcomes, or labels. */
static int encode(tmpl *t, int pred, size_t k, size_t b, int with_y, uint64_t *rng)
{
    calib_mpw *w = &t->w;
    calib_mpw_init(w);
    t->id_at = malloc(b * sizeof *t->id_at);
    float *x = malloc(b * k * sizeof *x);
    if (!t->id_at || !x) {
        free(x);
        return -1;
    }
    int row = b == 1;
    calib_mpw_map(w);
    calib_mpw_key(w, "v");
    calib_mpw_uint(w, 1);
    calib_mpw_key(w, "type");
    calib_mpw_str(w, pred ? "pred" : "label");
    if (!row) {
        calib_mpw_key(w, "n");
        calib_mpw_uint(w, b);
    }
    calib_mpw_key(w, "id");
    if (!row)
        calib_mpw_array(w);
    for (size_t i = 0; i < b; i++)
        calib_mpw_uint(w, ID_SENTINEL + i);
    if (!row)
        calib_mpw_end(w);
    if (pred) {
        calib_mpw_key(w, "k");
        calib_mpw_uint(w, k);
        for (size_t i = 0; i < b * k; i++) {
            *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = (float)((double)(*rng >> 11) * 0x1.0p-53 * 6 - 3);
        }
        calib_mpw_key(w, "logits");
        calib_mpw_bin(w, x, b * k * sizeof *x); /* little-endian hosts */
    }
    if (with_y) {
        calib_mpw_key(w, "y");
        if (!row)
            calib_mpw_array(w);
        for (size_t i = 0; i < b; i++)
            calib_mpw_uint(w, (i * 7 + *rng) % k);
        if (!row)
            calib_mpw_end(w);
    }
    calib_mpw_end(w);
    free(x);
    if (calib_mpw_error(w) != CALIB_OK)
        return -1;
    for (size_t i = 0; i < b; i++)
        if ((t->id_at[i] = find_id(w, ID_SENTINEL + i)) == SIZE_MAX)
            return -1;
    return 0;
}

static void put_ids(tmpl *t, size_t b, uint64_t first)
{
    for (size_t i = 0; i < b; i++) {
        uint64_t v = first + i;
        unsigned char *p = (unsigned char *)t->w.sb.data + t->id_at[i];
        for (int j = 0; j < 8; j++)
            p[j] = (unsigned char)(v >> (56 - 8 * j));
    }
}

static int send_one(void *s, const char *model, const tmpl *t)
{
    if (zmq_send(s, model, strlen(model), ZMQ_SNDMORE) < 0 ||
        zmq_send(s, t->w.sb.data, t->w.sb.size, 0) < 0)
        return -1;
    return 0;
}

static int cmd_send(int argc, char **argv)
{
    const char *ep = opt(argc, argv, "--endpoint", NULL), *model = opt(argc, argv, "--model", NULL);
    size_t k = strtoul(opt(argc, argv, "--k", "10"), NULL, 10);
    size_t b = strtoul(opt(argc, argv, "--batch", "1"), NULL, 10);
    uint64_t n = strtoull(opt(argc, argv, "--count", "0"), NULL, 10);
    int labels = flag(argc, argv, "--labels");
    uint64_t first = strtoull(opt(argc, argv, "--first", "1"), NULL, 10);
    if (!ep || !model || k < 2 || b < 1 || n % b) {
        fprintf(stderr, "bench_rate send: --endpoint, --model, --k >= 2, --batch dividing --count\n");
        return 2;
    }
    tmpl preds[TEMPLATES], labs[TEMPLATES];
    uint64_t rng = 42;
    for (int i = 0; i < TEMPLATES; i++)
        if (encode(&preds[i], 1, k, b, !labels, &rng) != 0 ||
            (labels && encode(&labs[i], 0, k, b, 1, &rng) != 0)) {
            fprintf(stderr, "bench_rate: out of memory\n");
            return 1;
        }
    void *ctx, *s = open_socket(argc, argv, ZMQ_PUSH, ep, 0, &ctx);
    if (!s)
        return 1;
    int linger = -1;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    double t0 = now();
    uint64_t msgs = 0;
    for (uint64_t id = first; id < first + n; id += b) {
        tmpl *p = &preds[(id / b) % TEMPLATES];
        put_ids(p, b, id);
        if (send_one(s, model, p) != 0)
            return die("send");
        msgs++;
        if (labels) {
            tmpl *l = &labs[(id / b) % TEMPLATES];
            put_ids(l, b, id);
            if (send_one(s, model, l) != 0)
                return die("send");
            msgs++;
        }
    }
    double t = now() - t0;
    printf("sent=%llu messages=%llu seconds=%.3f bytes_per_message=%zu\n",
           (unsigned long long)n, (unsigned long long)msgs, t, preds[0].w.sb.size);
    zmq_close(s);
    zmq_ctx_term(ctx);
    for (int i = 0; i < TEMPLATES; i++) {
        calib_mpw_destroy(&preds[i].w);
        free(preds[i].id_at);
        if (labels) {
            calib_mpw_destroy(&labs[i].w);
            free(labs[i].id_at);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ null */

static const msgpack_object *get(const msgpack_object *o, const char *k)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object *kk = &o->via.map.ptr[i].key;
        if (kk->type == MSGPACK_OBJECT_STR && kk->via.str.size == strlen(k) &&
            memcmp(kk->via.str.ptr, k, kk->via.str.size) == 0)
            return &o->via.map.ptr[i].val;
    }
    return NULL;
}

/* The floor's sums: per view, the Brier and log scores' sums, and per
 * top-label bin the count, the confidence's and the accuracy's sums. */
enum { FLOOR_BINS = 15 };
typedef struct floor_sums {
    double brier[2], logs[2];
    double bin_n[2][FLOOR_BINS], bin_conf[2][FLOOR_BINS], bin_acc[2][FLOOR_BINS];
    double *p; /* K probabilities, scratch */
    size_t cap;
    uint64_t rows;
} floor_sums;

/* One row's views: z (K float32 as sent), its outcome y, 1/T. */
static void floor_row(floor_sums *f, const float *z, size_t k, size_t y, double inv_t)
{
    for (int v = 0; v < 2; v++) {
        double scale = v ? inv_t : 1, zmax = -HUGE_VAL, sum = 0;
        for (size_t j = 0; j < k; j++)
            zmax = z[j] > zmax ? z[j] : zmax;
        for (size_t j = 0; j < k; j++)
            sum += f->p[j] = exp((z[j] - zmax) * scale);
        double brier = 0, top = 0;
        size_t arg = 0;
        for (size_t j = 0; j < k; j++) {
            double p = f->p[j] / sum, d = p - (j == y);
            brier += d * d;
            if (p > top) {
                top = p;
                arg = j;
            }
        }
        f->brier[v] += brier;
        f->logs[v] -= log(f->p[y] / sum);
        size_t b = (size_t)(top * FLOOR_BINS);
        b = b < FLOOR_BINS ? b : FLOOR_BINS - 1;
        f->bin_n[v][b] += 1;
        f->bin_conf[v][b] += top;
        f->bin_acc[v][b] += arg == y;
    }
    f->rows++;
}

/* A prediction message's rows into the floor's sums: "k", "logits" (a bin
 * of float32) and "y" (one class, or n of them); others are skipped. */
static void floor_message(floor_sums *f, const msgpack_object *o, uint64_t rows, double inv_t)
{
    const msgpack_object *k = get(o, "k"), *z = get(o, "logits"), *y = get(o, "y");
    if (!k || k->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !z || z->type != MSGPACK_OBJECT_BIN ||
        !y || z->via.bin.size != rows * k->via.u64 * sizeof(float))
        return;
    size_t kk = k->via.u64;
    if (kk > f->cap) {
        double *p = realloc(f->p, kk * sizeof *p);
        if (!p)
            return;
        f->p = p;
        f->cap = kk;
    }
    for (uint64_t i = 0; i < rows; i++) {
        const msgpack_object *yi =
            y->type == MSGPACK_OBJECT_ARRAY && i < y->via.array.size ? &y->via.array.ptr[i] : y;
        if (yi->type != MSGPACK_OBJECT_POSITIVE_INTEGER || yi->via.u64 >= kk)
            continue;
        float zi[kk]; /* the bin's bytes, aligned */
        memcpy(zi, z->via.bin.ptr + i * kk * sizeof(float), kk * sizeof(float));
        floor_row(f, zi, kk, (size_t)yi->via.u64, inv_t);
    }
}

static double cpu_seconds(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec * 1e-6;
}

static int cmd_null(int argc, char **argv)
{
    const char *ep = opt(argc, argv, "--endpoint", NULL);
    uint64_t n = strtoull(opt(argc, argv, "--count", "0"), NULL, 10);
    int labels = flag(argc, argv, "--labels");
    const char *ft = opt(argc, argv, "--floor", NULL);
    double inv_t = ft ? 1 / atof(ft) : 0;
    floor_sums fl = {0};
    double cpu0 = 0;
    if (!ep || !n) {
        fprintf(stderr, "bench_rate null: --endpoint, --count\n");
        return 2;
    }
    void *ctx, *s = open_socket(argc, argv, ZMQ_PULL, ep, 1, &ctx);
    if (!s)
        return 1;
    char bound[256];
    size_t blen = sizeof bound;
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, bound, &blen) == 0) {
        printf("endpoint=%s\n", bound); /* for an ephemeral port (tcp://HOST:*) */
        fflush(stdout);
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    zmq_msg_t topic, body;
    zmq_msg_init(&topic);
    zmq_msg_init(&body);
    uint64_t preds = 0, labs = 0, bad = 0;
    double t0 = 0;
    while (preds < n || (labels && labs < n)) {
        if (zmq_msg_recv(&topic, s, 0) < 0 || zmq_msg_recv(&body, s, 0) < 0)
            return die("recv");
        if (!t0) {
            t0 = now();
            cpu0 = cpu_seconds(); /* the start-up left out */
        }
        size_t off = 0;
        if (msgpack_unpack_next(&u, zmq_msg_data(&body), zmq_msg_size(&body), &off) !=
            MSGPACK_UNPACK_SUCCESS) {
            bad++;
            continue;
        }
        const msgpack_object *type = get(&u.data, "type"), *cnt = get(&u.data, "n");
        uint64_t rows = cnt && cnt->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? cnt->via.u64 : 1;
        if (type && type->type == MSGPACK_OBJECT_STR && type->via.str.size == 4) {
            preds += rows;
            if (ft)
                floor_message(&fl, &u.data, rows, inv_t);
        } else {
            labs += rows;
        }
    }
    printf("received=%llu labels=%llu bad=%llu seconds=%.3f cpu=%.6f\n",
           (unsigned long long)preds, (unsigned long long)labs, (unsigned long long)bad,
           now() - t0, cpu_seconds() - cpu0);
    if (ft) /* the figures: nothing of the floor's work is left out as unused */
        printf("floor rows=%llu brier=%.6f/%.6f log=%.6f/%.6f top_bins_full=%.0f\n",
               (unsigned long long)fl.rows, fl.brier[0] / (double)fl.rows,
               fl.brier[1] / (double)fl.rows, fl.logs[0] / (double)fl.rows,
               fl.logs[1] / (double)fl.rows, fl.bin_n[0][FLOOR_BINS - 1]);
    free(fl.p);
    msgpack_unpacked_destroy(&u);
    zmq_msg_close(&topic);
    zmq_msg_close(&body);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ wait */

/* A control request {"v": 1, "cmd": cmd[, "model": model]}. */
static void request(calib_mpw *w, const char *cmd, const char *model)
{
    calib_mpw_init(w);
    calib_mpw_map(w);
    calib_mpw_key(w, "v");
    calib_mpw_uint(w, 1);
    calib_mpw_key(w, "cmd");
    calib_mpw_str(w, cmd);
    if (model) {
        calib_mpw_key(w, "model");
        calib_mpw_str(w, model);
    }
    calib_mpw_end(w);
}

/* The model's "scored" in a status reply, or -1. */
static long long scored_of(const char *data, size_t len, const char *model)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    long long v = -1;
    if (msgpack_unpack_next(&u, data, len, &off) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *ms = get(&u.data, "models"), *m = ms ? get(ms, model) : NULL,
                             *sc = m ? get(m, "scored") : NULL;
        if (sc && sc->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            v = (long long)sc->via.u64;
    }
    msgpack_unpacked_destroy(&u);
    return v;
}

static int cmd_wait(int argc, char **argv)
{
    const char *ep = opt(argc, argv, "--control", NULL), *model = opt(argc, argv, "--model", NULL);
    long long n = strtoll(opt(argc, argv, "--scored", "0"), NULL, 10);
    double timeout = strtod(opt(argc, argv, "--timeout", "600"), NULL);
    if (!ep || !model) {
        fprintf(stderr, "bench_rate wait: --control, --model, --scored\n");
        return 2;
    }
    calib_mpw req;
    request(&req, "status", model);
    void *ctx, *s = open_socket(argc, argv, ZMQ_REQ, ep, 0, &ctx);
    if (!s)
        return 1;
    double t0 = now();
    long long got = -1;
    struct timespec pause = {0, 5000000};
    while (now() - t0 < timeout) {
        zmq_msg_t rep;
        zmq_msg_init(&rep);
        if (zmq_send(s, req.sb.data, req.sb.size, 0) < 0 || zmq_msg_recv(&rep, s, 0) < 0)
            return die("control");
        got = scored_of(zmq_msg_data(&rep), zmq_msg_size(&rep), model);
        zmq_msg_close(&rep);
        if (got >= n)
            break;
        nanosleep(&pause, NULL);
    }
    printf("scored=%lld seconds=%.3f\n", got, now() - t0);
    calib_mpw_destroy(&req);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return got >= n ? 0 : 1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmd_ping(int argc, char **argv)
{
    const char *ep = opt(argc, argv, "--control", NULL);
    double secs = strtod(opt(argc, argv, "--seconds", "5"), NULL);
    if (!ep) {
        fprintf(stderr, "bench_rate ping: --control, --seconds\n");
        return 2;
    }
    calib_mpw req;
    request(&req, "ping", NULL);
    void *ctx, *s = open_socket(argc, argv, ZMQ_REQ, ep, 0, &ctx);
    if (!s)
        return 1;
    size_t n = 0, cap = 1 << 20;
    double *lat = malloc(cap * sizeof *lat), t0 = now();
    if (!lat)
        return 1;
    while (now() - t0 < secs && n < cap) {
        zmq_msg_t rep;
        zmq_msg_init(&rep);
        double t = now();
        if (zmq_send(s, req.sb.data, req.sb.size, 0) < 0 || zmq_msg_recv(&rep, s, 0) < 0)
            return die("control");
        lat[n++] = (now() - t) * 1e3;
        zmq_msg_close(&rep);
    }
    qsort(lat, n, sizeof *lat, by_value);
    printf("pings=%zu median_ms=%.3f p99_ms=%.3f max_ms=%.3f\n", n, n ? lat[n / 2] : 0,
           n ? lat[(size_t)(0.99 * (double)(n - 1))] : 0, n ? lat[n - 1] : 0);
    free(lat);
    calib_mpw_destroy(&req);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "send") == 0)
        return cmd_send(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "null") == 0)
        return cmd_null(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "wait") == 0)
        return cmd_wait(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "ping") == 0)
        return cmd_ping(argc, argv);
    fprintf(stderr, "usage: bench_rate send|null|wait ... (see the source's head)\n");
    return 2;
}
