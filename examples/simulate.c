/*
 * simulate.c — the bundled producer: protocol v1 predictions and labels of a
 * simulated model, after the appendix of Gruber & Buettner (NeurIPS 2022).
 *
 * A K-class model reports softmax(z) for logits z ~ N(0, sigma^2) per class
 * while the outcome is drawn from softmax(z / T*): T* > 1 makes the reported
 * probabilities overconfident, and temperature scaling with T = T* would
 * calibrate them. A binary model reports p = sigmoid(s), s ~ N(0, sigma^2),
 * with y ~ Bernoulli(sigmoid(s / T*)); a regression model reports N(mean, 1)
 * with mean ~ N(0, 1) while y ~ N(mean, T*^2). --temperature-after and
 * --switch-after change T* mid-run: a drift for calibd to detect.
 * --label-shift R from --label-shift-after N on keeps each pair of class 0
 * R times as often as the others (rejection: p(x | y) stays, the class
 * priors move), a label shift for calibd to see before the labels.
 *
 * Labels go inline (`y` in the prediction) or, with a delay, duplicates,
 * drops or shuffling, as separate label messages from a FIFO of pending
 * labels. --dump writes every pair whose label is sent as calibctl(1) CSV, so
 * `calibctl score` on the dump is the offline truth calibd should reproduce.
 * See calibd-simulate(1) and calibd-protocol(7).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>
#include <zmq.h>

#include "calib/calib.h"
#include "calib/mpw.h"
#include "producer.h"

#define PROG "simulate"
#define MAX_K 65536
#define MAX_BATCH 65536
/* outputs (doubles) per message: keeps a message and its scratch < 512 MiB */
#define MAX_BATCH_VALUES ((size_t)1 << 25)

enum sim_encoding { ENC_F32, ENC_F64, ENC_ARRAY };

typedef struct sim_opts {
    const char *endpoint;
    int push;
    const char *model;
    unsigned long k;
    double sigma;
    double temp, temp_after;
    double bias, bias_after; /* gaussian: y's mean less the forecast's */
    uint64_t switch_after;
    int drift;               /* --temperature-after or --bias-after, and
                                --switch-after given */
    double rate;             /* predictions per second; 0: unpaced */
    uint64_t count;          /* predictions; 0: until a signal */
    size_t batch;
    int form;                /* enum calib_form */
    int enc;                 /* enum sim_encoding */
    int int_ids;
    double label_delay;
    int shuffle;
    double dup, drop;
    uint64_t seed;
    const char *dump;
    int linger_ms, sndhwm, warmup_ms;
    const char *key, *server_key; /* CURVE: our key pair, calibd's public key */
    int flush_now;
    uint64_t segments;       /* values v0.. of segment key "segment"; 0: none */
    uint64_t miscal_segments; /* the first ones, labelled with seg_temp */
    double seg_temp;
    double shift;            /* class 0's weight under the label shift; 1: none */
    uint64_t shift_after;    /* predictions before it */
} sim_opts;

/* ------------------------------------------------------------ packing */

/* ------------------------------------------------------------ labels FIFO */

typedef struct pending_label {
    double due;   /* CLOCK_MONOTONIC seconds */
    uint64_t seq; /* the prediction's id */
    double y;
} pending_label;

/* A ring that doubles when full. Dues are pushed in time order (one delay
 * for all), so the head is always the next label due. */
typedef struct label_fifo {
    pending_label *v;
    size_t head, len, cap;
} label_fifo;

static int fifo_push(label_fifo *f, const pending_label *l)
{
    if (f->len == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 1024;
        if (cap > SIZE_MAX / sizeof *f->v)
            return -1;
        pending_label *v = malloc(cap * sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < f->len; i++)
            v[i] = f->v[(f->head + i) % f->cap];
        free(f->v);
        f->v = v;
        f->cap = cap;
        f->head = 0;
    }
    f->v[(f->head + f->len) % f->cap] = *l;
    f->len++;
    return 0;
}

static const pending_label *fifo_front(const label_fifo *f)
{
    return f->len ? &f->v[f->head] : NULL;
}

static void fifo_pop(label_fifo *f)
{
    f->head = (f->head + 1) % f->cap;
    f->len--;
}

/* ------------------------------------------------------------ state */

typedef struct sim {
    sim_opts o;
    void *ctx, *sock;
    calib_rng rng;
    size_t k;            /* classes; 2 binary, 0 gaussian */
    size_t width;        /* outputs per prediction */
    int inline_y;        /* labels ride in the predictions as `y` */
    double *x;           /* batch * width outputs, as sent */
    double *y;           /* batch outcomes */
    uint64_t *seq;       /* batch ids */
    uint64_t *segv;      /* batch segment values (--segments) */
    double *z, *q;       /* k scratch */
    unsigned char *bin;  /* batch * width * 8 bytes */
    pending_label *lab;  /* batch labels of one label message */
    calib_mpw w; /* the payload being packed */
    label_fifo fifo;
    FILE *dump;
    uint64_t made, pred_msgs, label_msgs, labels, dropped, dups;
    double t0;
} sim;

static volatile sig_atomic_t g_signals;

static void on_signal(int sig)
{
    (void)sig;
    g_signals++;
}

static double clock_at(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double mono_now(void) { return clock_at(CLOCK_MONOTONIC); }
static double wall_now(void) { return clock_at(CLOCK_REALTIME); }

/* Sleeps until monotonic time t, or less when a signal interrupts. */
static void sleep_until(double t)
{
    double dt = t - mono_now();
    if (dt <= 0)
        return;
    if (dt > 1)
        dt = 1; /* wake up now and then to notice signals and new dues */
    struct timespec ts = {.tv_sec = (time_t)dt,
                          .tv_nsec = (long)((dt - floor(dt)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ the model */

static double sigmoid(double s)
{
    /* split so exp never overflows */
    if (s >= 0)
        return 1 / (1 + exp(-s));
    double e = exp(s);
    return e / (1 + e);
}

/* A class drawn from probabilities q (summing to 1 up to rounding). */
static double true_temperature(const sim *s, uint64_t seq, uint64_t seg)
{
    if (seg < s->o.miscal_segments)
        return s->o.seg_temp;
    return s->o.drift && seq >= s->o.switch_after ? s->o.temp_after : s->o.temp;
}

/* Under --label-shift, whether a pair of class y is kept: class 0 with
 * probability w0 / max(w0, 1), any other 1 / max(w0, 1). */
static int shift_keeps(sim *s, uint64_t seq, double y)
{
    double w0 = s->o.shift;
    if (w0 == 1 || seq < s->o.shift_after)
        return 1;
    double w = y == 0 ? w0 : 1, most = w0 > 1 ? w0 : 1;
    return w == most || calib_rng_uniform(&s->rng) < w / most;
}

static void simulate_draw(sim *s, uint64_t seq, double *x, double *y, uint64_t *seg);

/* One prediction into x (width outputs, as they will be sent) and its y;
 * its segment value (uniform over --segments) into *seg; drawn again
 * until the label shift keeps it. */
static void simulate_one(sim *s, uint64_t seq, double *x, double *y, uint64_t *seg)
{
    do
        simulate_draw(s, seq, x, y, seg);
    while (s->o.form != CALIB_FORM_GAUSSIAN && !shift_keeps(s, seq, *y));
}

static void simulate_draw(sim *s, uint64_t seq, double *x, double *y, uint64_t *seg)
{
    *seg = s->o.segments ? calib_rng_next(&s->rng) % s->o.segments : UINT64_MAX;
    double t = true_temperature(s, seq, *seg);
    switch (s->o.form) {
    case CALIB_FORM_LOGITS:
    case CALIB_FORM_PROBS:
        for (size_t j = 0; j < s->k; j++) {
            s->z[j] = s->o.sigma * calib_rng_normal(&s->rng);
            s->q[j] = s->z[j] / t;
        }
        calib_softmax(s->q, s->k, s->q);
        *y = (double)calib_rng_categorical(&s->rng, s->q, s->k);
        if (s->o.form == CALIB_FORM_LOGITS)
            memcpy(x, s->z, s->k * sizeof *x);
        else
            calib_softmax(s->z, s->k, x);
        break;
    case CALIB_FORM_BINARY: {
        double sc = s->o.sigma * calib_rng_normal(&s->rng);
        x[0] = sigmoid(sc);
        *y = calib_rng_uniform(&s->rng) < sigmoid(sc / t) ? 1 : 0;
        break;
    }
    default:
        x[0] = calib_rng_normal(&s->rng);
        x[1] = 1;
        *y = x[0] + (s->o.drift && seq >= s->o.switch_after ? s->o.bias_after : s->o.bias) +
             t * calib_rng_normal(&s->rng);
        break;
    }
    /* what the receiver decodes is the float32 value: keep that one, so the
     * dump and the receiver agree bit for bit */
    if (s->o.enc == ENC_F32)
        for (size_t j = 0; j < s->width; j++)
            x[j] = (double)(float)x[j];
}

/* ------------------------------------------------------------ dump */

static const char *const output_prefix[] = {
    [CALIB_FORM_LOGITS] = "z", [CALIB_FORM_PROBS] = "p",
};

static void dump_header(sim *s)
{
    fputs("y", s->dump);
    if (s->o.form == CALIB_FORM_BINARY)
        fputs(",p", s->dump);
    else if (s->o.form == CALIB_FORM_GAUSSIAN)
        fputs(",mean,var", s->dump);
    else
        for (size_t j = 0; j < s->k; j++)
            fprintf(s->dump, ",%s%zu", output_prefix[s->o.form], j);
    if (s->o.segments)
        fputs(",segment", s->dump);
    fputc('\n', s->dump);
}

static void dump_row(sim *s, const double *x, double y, uint64_t seg)
{
    /* 9 significant digits round-trip a float32, 17 a double */
    int digits = s->o.enc == ENC_F32 ? 9 : 17;
    if (s->o.form == CALIB_FORM_GAUSSIAN)
        fprintf(s->dump, "%.17g", y);
    else
        fprintf(s->dump, "%lu", (unsigned long)y);
    for (size_t j = 0; j < s->width; j++)
        fprintf(s->dump, ",%.*g", digits, x[j]);
    if (s->o.segments)
        fprintf(s->dump, ",v%" PRIu64, seg);
    fputc('\n', s->dump);
}

/* ------------------------------------------------------------ messages */

static void pack_id(sim *s, calib_mpw *w, uint64_t seq)
{
    if (s->o.int_ids) {
        calib_mpw_uint(w, seq);
        return;
    }
    char id[64];
    int n = snprintf(id, sizeof id, "p-%" PRIu64 "-%" PRIu64, s->o.seed, seq);
    calib_mpw_strn(w, id, (size_t)n);
}

static void pack_y(sim *s, calib_mpw *w, double y)
{
    if (s->o.form == CALIB_FORM_GAUSSIAN)
        calib_mpw_double(w, y);
    else
        calib_mpw_uint(w, (uint64_t)y);
}

static void pack_number(sim *s, calib_mpw *w, double v)
{
    if (s->o.enc == ENC_F32)
        calib_mpw_float(w, (float)v);
    else
        calib_mpw_double(w, v);
}

/* Outputs off..off+per-1 of records 0..n-1 as one bin, row-major. */
static void pack_bin(sim *s, calib_mpw *w, size_t n, size_t off, size_t per)
{
    size_t elem = s->o.enc == ENC_F32 ? 4 : 8, at = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < per; j++, at += elem) {
            double v = s->x[i * s->width + off + j];
            if (elem == 4) {
                float f = (float)v;
                uint32_t u;
                memcpy(&u, &f, sizeof u);
                store_le32(s->bin + at, u);
            } else {
                uint64_t u;
                memcpy(&u, &v, sizeof u);
                store_le64(s->bin + at, u);
            }
        }
    calib_mpw_bin(w, s->bin, at);
}

/*
 * One output column of n records, `per` values each starting at output off:
 * a bin (f32/f64) unless the value is a row form's single number; with
 * --encoding array, a number, an array of per numbers (row), an array of n
 * numbers or of n arrays (batch, columnar as protocol.md asks).
 */
static void pack_outputs(sim *s, calib_mpw *w, size_t n, size_t off,
                         size_t per, int batch)
{
    if (s->o.enc != ENC_ARRAY && (batch || per > 1)) {
        pack_bin(s, w, n, off, per);
        return;
    }
    if (batch)
        calib_mpw_array(w);
    for (size_t i = 0; i < n; i++) {
        const double *x = s->x + i * s->width + off;
        if (per > 1)
            calib_mpw_array(w);
        for (size_t j = 0; j < per; j++)
            pack_number(s, w, x[j]);
        if (per > 1)
            calib_mpw_end(w);
    }
    if (batch)
        calib_mpw_end(w);
}

/* The head every message shares: opens the map, then "v", "type", "n"
 * (batch form), "ts", and "id": s->seq[0], or the array of s->seq[0..n). */
static void pack_head(sim *s, calib_mpw *w, const char *type, int batch, size_t n,
                      double ts)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "v");
    calib_mpw_uint(w, 1);
    calib_mpw_key(w, "type");
    calib_mpw_str(w, type);
    if (batch) {
        calib_mpw_key(w, "n");
        calib_mpw_uint(w, n);
    }
    calib_mpw_key(w, "ts");
    calib_mpw_double(w, ts);
    calib_mpw_key(w, "id");
    if (batch)
        calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        pack_id(s, w, s->seq[i]);
    if (batch)
        calib_mpw_end(w);
}

/* "y": s->y[0], or the array of s->y[0..n). */
static void pack_ys(sim *s, calib_mpw *w, int batch, size_t n)
{
    calib_mpw_key(w, "y");
    if (batch)
        calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        pack_y(s, w, s->y[i]);
    if (batch)
        calib_mpw_end(w);
}

static void pack_pred(sim *s, calib_mpw *w, size_t n, double ts)
{
    int batch = s->o.batch > 1, vec = s->k && s->o.form != CALIB_FORM_BINARY;

    pack_head(s, w, "pred", batch, n, ts);
    if (vec) {
        /* "k" in the row form too: a bin of 4K bytes could otherwise be K
         * float32 or K/2 float64 to a daemon that does not know K yet */
        calib_mpw_key(w, "k");
        calib_mpw_uint(w, s->k);
        calib_mpw_key(w, calib_form_name(s->o.form));
        pack_outputs(s, w, n, 0, s->k, batch);
    } else if (s->o.form == CALIB_FORM_BINARY) {
        calib_mpw_key(w, "p");
        pack_outputs(s, w, n, 0, 1, batch);
    } else {
        calib_mpw_key(w, "mean");
        pack_outputs(s, w, n, 0, 1, batch);
        calib_mpw_key(w, "var");
        pack_outputs(s, w, n, 1, 1, batch);
    }
    if (s->inline_y)
        pack_ys(s, w, batch, n);
    if (s->o.segments) { /* "seg": {"segment": "vI"}, or an array of n */
        calib_mpw_key(w, "seg");
        calib_mpw_map(w);
        calib_mpw_key(w, "segment");
        if (batch)
            calib_mpw_array(w);
        for (size_t i = 0; i < n; i++) {
            char v[32];
            int len = snprintf(v, sizeof v, "v%" PRIu64, s->segv[i]);
            calib_mpw_strn(w, v, (size_t)len);
        }
        if (batch)
            calib_mpw_end(w);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* The labels of s->seq[0..n), s->y[0..n). */
static void pack_labels(sim *s, calib_mpw *w, size_t n, double ts)
{
    int batch = s->o.batch > 1;
    pack_head(s, w, "label", batch, n, ts);
    pack_ys(s, w, batch, n);
    calib_mpw_end(w);
}

/* Sends one frame; a signal interrupts a blocking PUSH send, which is then
 * retried unless the user insists (a second signal). */
static int send_frame(sim *s, const void *data, size_t len, int flags)
{
    for (;;) {
        if (zmq_send(s->sock, data, len, flags) >= 0)
            return 0;
        if (zmq_errno() != EINTR || g_signals >= 2) {
            fprintf(stderr, PROG ": send: %s\n", zmq_strerror(zmq_errno()));
            return -1;
        }
    }
}

/* Sends the topic and the packed payload in s->w. */
static int send_payload(sim *s)
{
    if (calib_mpw_error(&s->w) != CALIB_OK) {
        fprintf(stderr, PROG ": cannot pack a message: %s\n",
                calib_strerror(calib_mpw_error(&s->w)));
        return -1;
    }
    if (send_frame(s, s->o.model, strlen(s->o.model), ZMQ_SNDMORE) ||
        send_frame(s, s->w.sb.data, s->w.sb.size, 0))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ the run */

/* Decides a label's fate and queues it: dropped, sent, or sent twice. */
static int queue_label(sim *s, uint64_t seq, double y, double due)
{
    if (calib_rng_uniform(&s->rng) < s->o.drop) {
        s->dropped++;
        return 0;
    }
    pending_label l = {.due = due, .seq = seq, .y = y};
    int copies = calib_rng_uniform(&s->rng) < s->o.dup ? 2 : 1;
    for (int c = 0; c < copies; c++)
        if (fifo_push(&s->fifo, &l)) {
            fprintf(stderr, PROG ": out of memory for pending labels\n");
            return -1;
        }
    s->labels++;
    s->dups += (uint64_t)(copies - 1);
    return 1;
}

/* `slot` is when the message was due (with --rate, its first prediction's
 * place in the schedule; else now): its labels are due label_delay after
 * it, so a simulator that stalls and catches up never puts more than
 * rate x delay predictions between a prediction and its label. */
static int send_predictions(sim *s, size_t n, double slot)
{
    double due = slot + s->o.label_delay;

    for (size_t i = 0; i < n; i++) {
        s->seq[i] = s->made + i;
        simulate_one(s, s->seq[i], s->x + i * s->width, &s->y[i], &s->segv[i]);
        int sent = 1;
        if (!s->inline_y && (sent = queue_label(s, s->seq[i], s->y[i], due)) < 0)
            return -1;
        if (s->dump && sent)
            dump_row(s, s->x + i * s->width, s->y[i], s->segv[i]);
    }
    calib_mpw_reset(&s->w);
    pack_pred(s, &s->w, n, wall_now());
    if (send_payload(s))
        return -1;
    s->made += n;
    s->pred_msgs++;
    if (s->inline_y)
        s->labels += n;
    return 0;
}

/* Sends, in messages of up to --batch labels, every label due by `now`. */
static int flush_labels(sim *s, double now)
{
    const pending_label *l;

    while ((l = fifo_front(&s->fifo)) && l->due <= now) {
        size_t n = 0;
        while (n < s->o.batch && (l = fifo_front(&s->fifo)) && l->due <= now) {
            s->lab[n++] = *l;
            fifo_pop(&s->fifo);
        }
        if (s->o.shuffle) /* Fisher-Yates */
            for (size_t i = n; i > 1; i--) {
                size_t j = (size_t)(calib_rng_next(&s->rng) % i);
                pending_label t = s->lab[i - 1];
                s->lab[i - 1] = s->lab[j];
                s->lab[j] = t;
            }
        /* the predictions' buffers are free between two sends */
        for (size_t i = 0; i < n; i++) {
            s->seq[i] = s->lab[i].seq;
            s->y[i] = s->lab[i].y;
        }
        calib_mpw_reset(&s->w);
        pack_labels(s, &s->w, n, wall_now());
        if (send_payload(s))
            return -1;
        s->label_msgs++;
    }
    return 0;
}

static double next_due(const sim *s)
{
    const pending_label *l = fifo_front(&s->fifo);
    return l ? l->due : INFINITY;
}

/* Pending labels after the last prediction: on their time, or all at once
 * with --flush-labels-now or when a signal arrives meanwhile. */
static int drain_labels(sim *s)
{
    sig_atomic_t seen = g_signals;
    while (s->fifo.len) {
        int now_all = s->o.flush_now || g_signals != seen;
        if (flush_labels(s, now_all ? INFINITY : mono_now()))
            return -1;
        if (s->fifo.len)
            sleep_until(next_due(s));
    }
    return 0;
}

static int run(sim *s)
{
    s->t0 = mono_now();
    while (!g_signals && (s->o.count == 0 || s->made < s->o.count)) {
        double now = mono_now();
        /* pace whole messages: message m waits for its first prediction's
         * slot, so a slow sleep is caught up, not accumulated */
        double slot = s->o.rate > 0 ? s->t0 + (double)s->made / s->o.rate : now;
        /* the labels due before it go first; a simulator catching up keeps
         * the schedule's order (labels due by the slot, not by now), so the
         * stream is the same however it was scheduled */
        if (flush_labels(s, slot < now ? slot : now))
            return -1;
        if (slot > now) {
            double wake = next_due(s);
            sleep_until(wake < slot ? wake : slot);
            continue;
        }
        size_t n = s->o.batch;
        if (s->o.count && s->o.count - s->made < n)
            n = (size_t)(s->o.count - s->made);
        if (send_predictions(s, n, slot))
            return -1;
        /* labels without delay follow their predictions at once */
        if (s->o.label_delay == 0 && flush_labels(s, mono_now()))
            return -1;
    }
    return drain_labels(s);
}

/* ------------------------------------------------------------ setup */

static int open_socket(sim *s)
{
    return producer_open(PROG, s->o.endpoint, s->o.push, s->o.sndhwm, s->o.warmup_ms,
                         s->o.model, s->o.key, s->o.server_key, &s->ctx, &s->sock);
}

static void close_socket(sim *s)
{
    if (s->sock) {
        /* linger so the queued tail is delivered, not discarded */
        zmq_setsockopt(s->sock, ZMQ_LINGER, &s->o.linger_ms, sizeof s->o.linger_ms);
        zmq_close(s->sock);
    }
    if (s->ctx)
        zmq_ctx_term(s->ctx);
}

static int sim_alloc(sim *s)
{
    size_t b = s->o.batch, w = s->width, kk = s->k ? s->k : 1;
    s->x = malloc(b * w * sizeof *s->x);
    s->y = malloc(b * sizeof *s->y);
    s->seq = malloc(b * sizeof *s->seq);
    s->segv = malloc(b * sizeof *s->segv);
    s->z = malloc(kk * sizeof *s->z);
    s->q = malloc(kk * sizeof *s->q);
    s->bin = malloc(b * w * 8);
    s->lab = malloc(b * sizeof *s->lab);
    if (!s->x || !s->y || !s->seq || !s->segv || !s->z || !s->q || !s->bin || !s->lab) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    return 0;
}

static void sim_free(sim *s)
{
    free(s->x);
    free(s->y);
    free(s->seq);
    free(s->segv);
    free(s->z);
    free(s->q);
    free(s->bin);
    free(s->lab);
    calib_mpw_destroy(&s->w);
    free(s->fifo.v);
}

/* ------------------------------------------------------------ options */

static void usage(FILE *f)
{
    fputs(
"usage: simulate [OPTIONS]\n"
"Sends simulated predictions and labels to calibd (protocol v1). The model\n"
"reports softmax(z), z ~ N(0, sigma^2) per class; labels come from\n"
"softmax(z / T*). See calibd-simulate(1).\n"
"\n"
"  -e, --endpoint EP          >EP connects, @EP binds, no prefix connects\n"
"                             (default >tcp://127.0.0.1:7450)\n"
"      --push                 a PUSH socket (back-pressure) instead of PUB\n"
"  -m, --model NAME           topic: the model name (default sim)\n"
"  -k, --k K                  classes, 2..65536 (default 10; logits, probs)\n"
"      --sigma S              logits' standard deviation (default 1.5)\n"
"  -t, --temperature T        true temperature T* (default 1; > 1: the\n"
"                             reported outputs are overconfident)\n"
"      --temperature-after T2 T* after --switch-after predictions (drift)\n"
"      --switch-after N       predictions before T* becomes T2 (and the\n"
"                             bias B2)\n"
"      --bias B               gaussian: outcomes ~ N(mean + B, T*^2)\n"
"                             (default 0: unbiased)\n"
"      --bias-after B2        the bias after --switch-after predictions\n"
"      --label-shift R        a label shift: class 0 kept R times as often as\n"
"                             the others, 0.01..100 (default 1: none)\n"
"      --label-shift-after N  predictions before it (default 0)\n"
"  -r, --rate R               predictions per second; 0 = unpaced (default 0)\n"
"  -n, --count N              predictions; 0 = until SIGINT/SIGTERM (default 1000)\n"
"  -b, --batch B              predictions per message, 1..65536; 1 = row form\n"
"                             (default 1)\n"
"  -f, --form F               logits|probs|binary|gaussian (default logits)\n"
"      --encoding E           f32|f64|array: bins of float32 or float64, or\n"
"                             msgpack arrays of numbers (default f32)\n"
"      --ids KIND             str|int (default str: \"p-SEED-COUNTER\")\n"
"      --label-delay SECONDS  send labels that long after their prediction;\n"
"                             0 = inline y (default 0)\n"
"      --label-shuffle        send each batch of labels in random order\n"
"      --label-dup FRAC       fraction of labels sent twice (default 0)\n"
"      --label-drop FRAC      fraction of labels never sent (default 0)\n"
"      --flush-labels-now     at the end, send pending labels at once\n"
"      --segments N           each prediction carries segment key \"segment\"\n"
"                             with a value v0..v(N-1), uniform (default 0: none)\n"
"      --miscal-segments M    the first M values' labels come from\n"
"                             softmax(z / T_seg) instead (default 0)\n"
"      --segment-temperature T_seg  (default 2)\n"
"  -s, --seed S               random seed (default 1)\n"
"  -d, --dump FILE            write the pairs whose label is sent as\n"
"                             calibctl CSV ('-' is stdout)\n"
"      --warmup-ms MS         PUB: wait for calibd's subscription, MS at most\n"
"                             (default 10000)\n"
"      --linger-ms MS         ZMQ_LINGER at exit (default 2000)\n"
"      --sndhwm N             ZMQ_SNDHWM in messages (default 100000)\n"
"      --key FILE             CURVE: this producer's key pair (NAME.key_secret)\n"
"      --server-key FILE      CURVE: calibd's public key (NAME.key)\n"
"  -h, --help                 this help\n", f);
}

static int bad_option(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, PROG ": --%s '%s': expected %s\n", opt, val, want);
    return -1;
}

static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi,
                     uint64_t *out)
{
    return producer_parse_u64(PROG, opt, s, lo, hi, out);
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    uint64_t v;
    if (parse_u64(opt, s, (uint64_t)lo, (uint64_t)hi, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* A finite number in [lo, hi]; > lo instead when open_lo. */
static int parse_double(const char *opt, const char *s, double lo, double hi,
                        int open_lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end || errno || !isfinite(v) || v < lo || v > hi ||
        (open_lo && v == lo)) {
        char want[96];
        if (isinf(hi))
            snprintf(want, sizeof want, "a number %s %g", open_lo ? ">" : ">=", lo);
        else
            snprintf(want, sizeof want, "a number %s %g and <= %g", open_lo ? ">" : ">=", lo,
                     hi);
        return bad_option(opt, s, want);
    }
    *out = v;
    return 0;
}

static int parse_choice(const char *opt, const char *s, const char *const *names,
                        int n, const char *want, int *out)
{
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return bad_option(opt, s, want);
}

enum {
    OPT_PUSH = 256, OPT_SIGMA, OPT_TEMP_AFTER, OPT_SWITCH_AFTER, OPT_ENCODING,
    OPT_IDS, OPT_DELAY, OPT_SHUFFLE, OPT_DUP, OPT_DROP, OPT_FLUSH_NOW,
    OPT_WARMUP, OPT_LINGER, OPT_SNDHWM, OPT_KEY, OPT_SERVER_KEY, OPT_SEGMENTS,
    OPT_MISCAL_SEGMENTS, OPT_SEG_TEMP, OPT_SHIFT, OPT_SHIFT_AFTER, OPT_BIAS, OPT_BIAS_AFTER,
};

static const struct option long_opts[] = {
    {"endpoint", required_argument, NULL, 'e'},
    {"push", no_argument, NULL, OPT_PUSH},
    {"model", required_argument, NULL, 'm'},
    {"k", required_argument, NULL, 'k'},
    {"sigma", required_argument, NULL, OPT_SIGMA},
    {"temperature", required_argument, NULL, 't'},
    {"temperature-after", required_argument, NULL, OPT_TEMP_AFTER},
    {"switch-after", required_argument, NULL, OPT_SWITCH_AFTER},
    {"bias", required_argument, NULL, OPT_BIAS},
    {"bias-after", required_argument, NULL, OPT_BIAS_AFTER},
    {"rate", required_argument, NULL, 'r'},
    {"count", required_argument, NULL, 'n'},
    {"batch", required_argument, NULL, 'b'},
    {"form", required_argument, NULL, 'f'},
    {"encoding", required_argument, NULL, OPT_ENCODING},
    {"ids", required_argument, NULL, OPT_IDS},
    {"label-delay", required_argument, NULL, OPT_DELAY},
    {"label-shuffle", no_argument, NULL, OPT_SHUFFLE},
    {"label-dup", required_argument, NULL, OPT_DUP},
    {"label-drop", required_argument, NULL, OPT_DROP},
    {"flush-labels-now", no_argument, NULL, OPT_FLUSH_NOW},
    {"seed", required_argument, NULL, 's'},
    {"dump", required_argument, NULL, 'd'},
    {"warmup-ms", required_argument, NULL, OPT_WARMUP},
    {"linger-ms", required_argument, NULL, OPT_LINGER},
    {"sndhwm", required_argument, NULL, OPT_SNDHWM},
    {"key", required_argument, NULL, OPT_KEY},
    {"server-key", required_argument, NULL, OPT_SERVER_KEY},
    {"segments", required_argument, NULL, OPT_SEGMENTS},
    {"miscal-segments", required_argument, NULL, OPT_MISCAL_SEGMENTS},
    {"segment-temperature", required_argument, NULL, OPT_SEG_TEMP},
    {"label-shift", required_argument, NULL, OPT_SHIFT},
    {"label-shift-after", required_argument, NULL, OPT_SHIFT_AFTER},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char *const enc_names[] = {
    [ENC_F32] = "f32", [ENC_F64] = "f64", [ENC_ARRAY] = "array",
};
static const char *const id_names[] = {"str", "int"};

/* One option into o; -1 on a bad value (already reported). */
static int parse_one(sim_opts *o, int c, const char *a, int *have_after,
                     int *have_switch)
{
    uint64_t u;
    double inf = INFINITY;
    switch (c) {
    case 'e': o->endpoint = a; return 0;
    case OPT_PUSH: o->push = 1; return 0;
    case 'm':
        /* the topic rules of protocol.md, so a typo fails here, not silently
         * in the daemon's rejection counters */
        if (!*a || strlen(a) > 128 || strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            "abcdefghijklmnopqrstuvwxyz0123456789._:-") != strlen(a))
            return bad_option("model", a, "1..128 characters of [A-Za-z0-9._:-]");
        o->model = a;
        return 0;
    case 'k':
        if (parse_u64("k", a, 2, MAX_K, &u))
            return -1;
        o->k = (unsigned long)u;
        return 0;
    case OPT_SIGMA: return parse_double("sigma", a, 0, inf, 1, &o->sigma);
    case 't': return parse_double("temperature", a, 0, inf, 1, &o->temp);
    case OPT_TEMP_AFTER:
        *have_after |= 1;
        return parse_double("temperature-after", a, 0, inf, 1, &o->temp_after);
    case OPT_BIAS: return parse_double("bias", a, -1e6, 1e6, 0, &o->bias);
    case OPT_BIAS_AFTER:
        *have_after |= 2;
        return parse_double("bias-after", a, -1e6, 1e6, 0, &o->bias_after);
    case OPT_SWITCH_AFTER:
        *have_switch = 1;
        return parse_u64("switch-after", a, 0, UINT64_MAX, &o->switch_after);
    case 'r': return parse_double("rate", a, 0, inf, 0, &o->rate);
    case 'n': return parse_u64("count", a, 0, UINT64_MAX, &o->count);
    case 'b':
        if (parse_u64("batch", a, 1, MAX_BATCH, &u))
            return -1;
        o->batch = (size_t)u;
        return 0;
    case 'f':
        if ((o->form = calib_form_parse(a)) < 0)
            return bad_option("form", a, "logits, probs, binary or gaussian");
        return 0;
    case OPT_ENCODING:
        return parse_choice("encoding", a, enc_names, 3, "f32, f64 or array", &o->enc);
    case OPT_IDS: return parse_choice("ids", a, id_names, 2, "str or int", &o->int_ids);
    case OPT_DELAY: return parse_double("label-delay", a, 0, inf, 0, &o->label_delay);
    case OPT_SHUFFLE: o->shuffle = 1; return 0;
    case OPT_DUP: return parse_double("label-dup", a, 0, 1, 0, &o->dup);
    case OPT_DROP: return parse_double("label-drop", a, 0, 1, 0, &o->drop);
    case OPT_FLUSH_NOW: o->flush_now = 1; return 0;
    case 's': return parse_u64("seed", a, 0, UINT64_MAX, &o->seed);
    case 'd': o->dump = a; return 0;
    case OPT_WARMUP: return parse_int("warmup-ms", a, 0, 3600000, &o->warmup_ms);
    case OPT_KEY: o->key = a; return 0;
    case OPT_SERVER_KEY: o->server_key = a; return 0;
    case OPT_LINGER: return parse_int("linger-ms", a, 0, 3600000, &o->linger_ms);
    case OPT_SNDHWM: return parse_int("sndhwm", a, 0, 100000000, &o->sndhwm);
    case OPT_SEGMENTS: return parse_u64("segments", a, 0, 1000000, &o->segments);
    case OPT_MISCAL_SEGMENTS:
        return parse_u64("miscal-segments", a, 0, 1000000, &o->miscal_segments);
    case OPT_SEG_TEMP: return parse_double("segment-temperature", a, 0, inf, 1, &o->seg_temp);
    case OPT_SHIFT: return parse_double("label-shift", a, 0.01, 100, 0, &o->shift);
    case OPT_SHIFT_AFTER: return parse_u64("label-shift-after", a, 0, UINT64_MAX, &o->shift_after);
    }
    return -1;
}

/* Returns 0 to run, 1 after --help, -1 on bad options (reported). */
static int parse_options(sim_opts *o, int argc, char **argv)
{
    int c, have_after = 0, have_switch = 0;
    *o = (sim_opts){
        .endpoint = ">tcp://127.0.0.1:7450", .model = "sim", .k = 10,
        .sigma = 1.5, .temp = 1, .count = 1000, .batch = 1,
        .form = CALIB_FORM_LOGITS, .enc = ENC_F32, .seed = 1,
        .linger_ms = 2000, .sndhwm = 100000, .warmup_ms = 10000, .seg_temp = 2, .shift = 1,
    };
    while ((c = getopt_long(argc, argv, "e:m:k:t:r:n:b:f:s:d:h", long_opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 1;
        }
        if (c == '?' || parse_one(o, c, optarg, &have_after, &have_switch))
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!have_after != !have_switch) {
        fprintf(stderr, PROG ": --temperature-after or --bias-after and --switch-after go "
                        "together\n");
        return -1;
    }
    o->drift = have_after != 0;
    if (!(have_after & 1))
        o->temp_after = o->temp;
    if (!(have_after & 2))
        o->bias_after = o->bias;
    if ((o->bias != 0 || o->bias_after != 0) && o->form != CALIB_FORM_GAUSSIAN) {
        fprintf(stderr, PROG ": --bias and --bias-after are for --form gaussian\n");
        return -1;
    }
    if (o->miscal_segments > o->segments) {
        fprintf(stderr, PROG ": --miscal-segments is more than --segments\n");
        return -1;
    }
    size_t width = calib_form_width(o->form, o->k);
    if (o->batch > MAX_BATCH_VALUES / width) {
        fprintf(stderr, PROG ": --batch %zu times %zu outputs is over %zu values "
                "per message\n", o->batch, width, MAX_BATCH_VALUES);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ main */

static int open_dump(sim *s)
{
    if (!s->o.dump)
        return 0;
    s->dump = strcmp(s->o.dump, "-") == 0 ? stdout : fopen(s->o.dump, "w");
    if (!s->dump) {
        fprintf(stderr, PROG ": %s: %s\n", s->o.dump, strerror(errno));
        return -1;
    }
    dump_header(s);
    return 0;
}

static int close_dump(sim *s)
{
    if (!s->dump)
        return 0;
    int bad = ferror(s->dump) != 0;
    bad |= s->dump == stdout ? fflush(s->dump) != 0 : fclose(s->dump) != 0;
    if (bad)
        fprintf(stderr, PROG ": %s: write failed\n", s->o.dump);
    return bad ? -1 : 0;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: sleeps end early */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int main(int argc, char **argv)
{
    sim s;
    memset(&s, 0, sizeof s);
    calib_mpw_init(&s.w);
    int r = parse_options(&s.o, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;

    s.k = s.o.form == CALIB_FORM_BINARY ? 2 : s.o.form == CALIB_FORM_GAUSSIAN ? 0 : s.o.k;
    s.width = calib_form_width(s.o.form, s.k);
    /* inline y cannot be dropped, duplicated or reordered record by record
     * in the columnar form, so those options send label messages */
    s.inline_y = s.o.label_delay == 0 && s.o.drop == 0 && s.o.dup == 0 && !s.o.shuffle;
    calib_rng_seed(&s.rng, s.o.seed);
    install_signals();

    int rc = 1;
    if (sim_alloc(&s) == 0 && open_dump(&s) == 0 && open_socket(&s) == 0 &&
        run(&s) == 0)
        rc = 0;
    if (close_dump(&s))
        rc = 1;
    fprintf(stderr, PROG ": %" PRIu64 " predictions in %" PRIu64 " messages, "
            "%" PRIu64 " labels sent (%s) in %" PRIu64 " messages, %" PRIu64
            " dropped, %" PRIu64 " duplicated\n", s.made, s.pred_msgs, s.labels,
            s.inline_y ? "inline" : "separately", s.label_msgs, s.dropped, s.dups);
    close_socket(&s);
    sim_free(&s);
    return rc;
}
