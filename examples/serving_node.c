/*
 * serving_node.c — a small serving node: follows calibd's recalibration
 * parameters with libcalib_client and applies them while it "predicts".
 *
 *   serving_node --connect EP [--connect EP2] --model NAME [--model NAME2 ...]
 *                [--until-version V] [--timeout SECONDS] [--verbose]
 *
 * Prints one line per new version received, at once:
 *   NAME VERSION METHOD key=value [key=value ...]     (values with %.17g)
 * With --until-version it exits 0 as soon as every model holds a version
 * >= V; with --timeout it exits 1 when that many seconds have passed first;
 * otherwise it runs until SIGINT or SIGTERM and exits 0. Usage errors exit 2.
 *
 * The main thread receives (calib_client_poll); two "predict" threads apply
 * whatever is held to fixed demo outputs meanwhile, as a serving node's
 * request threads would. With --verbose they report on stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/client.h"

#define MAX_ENDPOINTS 16
#define PREDICTORS 2

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;
}

static void usage(FILE *f)
{
    fputs("usage: serving_node --connect EP [--connect EP2 ...] --model NAME"
          " [--model NAME2 ...]\n"
          "                    [--until-version V] [--timeout SECONDS]"
          " [--verbose]\n"
          "                    [--key FILE --server-key FILE]   (CURVE: this node's"
          " key pair,\n"
          "                                                    calibd's public key)\n", f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ output */

/* On the receiving thread, once per newer version. */
static void print_params(const calib_client_params *p, void *arg)
{
    (void)arg;
    printf("%s %" PRIu64 " %s", p->model, p->version, p->method);
    for (unsigned j = 0; j < p->nparams; j++)
        printf(" %s=%.17g", p->names[j], p->values[j]);
    for (unsigned j = 0; j < p->nweights; j++) /* a label-free prior correction */
        printf("%s%.17g", j ? "," : " prior_weights=", p->weights[j]);
    putchar('\n');
    fflush(stdout);
}

static void print_alert(const calib_client_alert *a, void *arg)
{
    const int *verbose = arg;
    if (*verbose)
        fprintf(stderr, "serving_node: alert %s %s %s: %s\n", a->model,
                a->severity, a->kind, a->message);
}

/* ------------------------------------------------------------------ predicting */

typedef struct predictor {
    calib_client *c;
    char **models;
    int nmodels;
    int id;
    int verbose;
    atomic_int *stop;
    pthread_t thread;
} predictor;

/*
 * One demo prediction of a model whose output form this node does not
 * know: K = 3 logits, else a binary p, else a Gaussian -- the first the
 * held method takes. Returns the form used, or a negative code.
 */
static int predict_one(calib_client *c, const char *model, double out[3],
                       uint64_t *version)
{
    static const double logits[3] = {2.0, 0.5, -1.0};
    static const double p[1] = {0.8};
    static const double gauss[2] = {1.0, 0.5};
    int rc = calib_client_apply(c, model, CALIB_FORM_LOGITS, 3, logits, out, version);
    if (rc == CALIB_OK)
        return CALIB_FORM_LOGITS;
    if (rc != CALIB_EINVAL && rc != CALIB_ECLIENT_FORM)
        return rc;
    rc = calib_client_apply(c, model, CALIB_FORM_BINARY, 2, p, out, version);
    if (rc == CALIB_OK)
        return CALIB_FORM_BINARY;
    if (rc != CALIB_EINVAL && rc != CALIB_ECLIENT_FORM)
        return rc;
    rc = calib_client_apply(c, model, CALIB_FORM_GAUSSIAN, 0, gauss, out, version);
    return rc == CALIB_OK ? CALIB_FORM_GAUSSIAN : rc;
}

static void *predict_main(void *arg)
{
    predictor *pr = arg;
    uint64_t last[64] = {0};
    int reported[64] = {0};
    struct timespec pause = {0, 10 * 1000 * 1000};
    while (!atomic_load(pr->stop)) {
        for (int i = 0; i < pr->nmodels; i++) {
            double out[3];
            uint64_t v = 0;
            int form = predict_one(pr->c, pr->models[i], out, &v);
            if (!pr->verbose || i >= 64 || (reported[i] && v == last[i]))
                continue;
            reported[i] = 1;
            last[i] = v;
            if (form < 0)
                fprintf(stderr, "serving_node: predict[%d]: %s v%" PRIu64 ": %s\n",
                        pr->id, pr->models[i], v, calib_client_strerror(form));
            else if (form == CALIB_FORM_LOGITS)
                fprintf(stderr, "serving_node: predict[%d]: %s v%" PRIu64
                        ": logits (2, 0.5, -1) -> probs (%.4f, %.4f, %.4f)\n",
                        pr->id, pr->models[i], v, out[0], out[1], out[2]);
            else if (form == CALIB_FORM_BINARY)
                fprintf(stderr, "serving_node: predict[%d]: %s v%" PRIu64
                        ": p 0.8 -> %.4f\n", pr->id, pr->models[i], v, out[0]);
            else
                fprintf(stderr, "serving_node: predict[%d]: %s v%" PRIu64
                        ": N(1, 0.5) -> N(%.4f, %.4f)\n", pr->id, pr->models[i],
                        v, out[0], out[1]);
        }
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* ------------------------------------------------------------------ main */

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* 1 if every model holds a version >= v. */
static int all_reached(calib_client *c, char **models, int n, uint64_t v)
{
    for (int i = 0; i < n; i++) {
        uint64_t held = 0;
        if (calib_client_version(c, models[i], &held) != CALIB_OK || held < v)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    enum { O_CONNECT = 1, O_MODEL, O_UNTIL, O_TIMEOUT, O_VERBOSE, O_KEY, O_SERVER_KEY,
           O_HELP };
    static const struct option opts[] = {
        {"connect", required_argument, NULL, O_CONNECT},
        {"model", required_argument, NULL, O_MODEL},
        {"until-version", required_argument, NULL, O_UNTIL},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"key", required_argument, NULL, O_KEY},
        {"server-key", required_argument, NULL, O_SERVER_KEY},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    char *endpoints[MAX_ENDPOINTS];
    char *models[CALIB_CLIENT_MAX_MODELS];
    int nep = 0, nmodels = 0, verbose = 0, has_until = 0, o;
    uint64_t until = 0;
    double timeout = -1;
    const char *key = NULL, *server_key = NULL;

    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_CONNECT:
            if (nep == MAX_ENDPOINTS) {
                fprintf(stderr, "serving_node: at most %d --connect\n", MAX_ENDPOINTS);
                return 2;
            }
            endpoints[nep++] = optarg;
            break;
        case O_MODEL:
            if (nmodels == CALIB_CLIENT_MAX_MODELS) {
                fprintf(stderr, "serving_node: at most %d --model\n",
                        CALIB_CLIENT_MAX_MODELS);
                return 2;
            }
            models[nmodels++] = optarg;
            break;
        case O_UNTIL:
            if (parse_u64(optarg, &until)) {
                fprintf(stderr, "serving_node: --until-version: not an unsigned"
                        " integer: %s\n", optarg);
                return 2;
            }
            has_until = 1;
            break;
        case O_TIMEOUT:
            if (parse_seconds(optarg, &timeout)) {
                fprintf(stderr, "serving_node: --timeout: not a number of"
                        " seconds: %s\n", optarg);
                return 2;
            }
            break;
        case O_VERBOSE: verbose = 1; break;
        case O_KEY: key = optarg; break;
        case O_SERVER_KEY: server_key = optarg; break;
        case O_HELP: usage(stdout); return 0;
        default:
            fprintf(stderr, "serving_node: bad option %s\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (!key != !server_key) {
        fprintf(stderr, "serving_node: CURVE needs both --key and --server-key\n");
        return 2;
    }
    if (optind < argc || nep == 0 || nmodels == 0) {
        if (optind < argc)
            fprintf(stderr, "serving_node: unexpected argument %s\n", argv[optind]);
        else
            fprintf(stderr, "serving_node: --connect and --model are required\n");
        usage(stderr);
        return 2;
    }

    calib_client *c;
    calib_client_opts copts = {.on_params = print_params,
                               .on_alert = print_alert, .arg = &verbose};
    int rc = calib_client_create(&c, &copts);
    if (rc) {
        fprintf(stderr, "serving_node: %s\n", calib_client_strerror(rc));
        return 1;
    }
    char why[600];
    if (key && (rc = calib_client_curve(c, key, server_key, why, sizeof why))) {
        fprintf(stderr, "serving_node: %s\n", why);
        calib_client_destroy(c);
        return 2;
    }
    for (int i = 0; i < nmodels; i++) {
        if ((rc = calib_client_subscribe(c, models[i]))) {
            fprintf(stderr, "serving_node: --model %s: %s\n", models[i],
                    rc == CALIB_EINVAL ? "not 1..128 bytes of [A-Za-z0-9._:-]"
                                       : calib_client_strerror(rc));
            calib_client_destroy(c);
            return rc == CALIB_EINVAL ? 2 : 1;
        }
    }
    for (int i = 0; i < nep; i++) {
        if ((rc = calib_client_connect(c, endpoints[i]))) {
            int err = errno;
            int usage_err = rc == CALIB_EINVAL || err == EINVAL
                            || err == EPROTONOSUPPORT;
            fprintf(stderr, "serving_node: --connect %s: %s\n", endpoints[i],
                    rc == CALIB_ECLIENT_ZMQ ? strerror(err)
                                            : calib_client_strerror(rc));
            calib_client_destroy(c);
            return usage_err ? 2 : 1;
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: the wait returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* the predictors block the signals, so they interrupt the main wait */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    atomic_int stop;
    atomic_init(&stop, 0);
    predictor pr[PREDICTORS];
    int started = 0;
    for (int i = 0; i < PREDICTORS; i++) {
        pr[i] = (predictor){.c = c, .models = models, .nmodels = nmodels,
                            .id = i, .verbose = verbose, .stop = &stop};
        if (pthread_create(&pr[i].thread, NULL, predict_main, &pr[i]) != 0)
            break;
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    int status = 0;
    double deadline = timeout >= 0 ? now_s() + timeout : INFINITY;
    for (;;) {
        if (has_until && all_reached(c, models, nmodels, until))
            break;
        if (got_signal)
            break;
        double left = deadline - now_s();
        if (left <= 0) {
            if (verbose)
                fprintf(stderr, "serving_node: timed out\n");
            status = 1;
            break;
        }
        int ms = left < 0.2 ? (int)ceil(left * 1000) : 200;
        rc = calib_client_poll(c, ms);
        if (rc < 0) {
            fprintf(stderr, "serving_node: receiving: %s: %s\n",
                    calib_client_strerror(rc), strerror(errno));
            status = 1;
            break;
        }
    }

    atomic_store(&stop, 1);
    for (int i = 0; i < started; i++)
        pthread_join(pr[i].thread, NULL);
    if (verbose) {
        calib_client_stats st;
        calib_client_stats_get(c, &st);
        fprintf(stderr, "serving_node: received %" PRIu64 ", accepted %" PRIu64
                ", stale %" PRIu64 ", rejected %" PRIu64 "\n", st.received,
                st.accepted, st.stale, st.rejected);
        for (int r = 0; r < CALIB_REJ_COUNT; r++)
            if (st.reject[r])
                fprintf(stderr, "serving_node:   %s %" PRIu64 "\n",
                        calib_reject_name(r), st.reject[r]);
    }
    calib_client_destroy(c);
    fflush(stdout);
    return status;
}
