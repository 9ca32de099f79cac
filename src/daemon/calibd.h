/* calibd.h — the daemon's one context, passed explicitly everywhere. */
#ifndef CALIBD_CALIBD_H
#define CALIBD_CALIBD_H

#include <uv.h>

#include "curve.h"
#include "calib/plugin.h"
#include "calib/protocol.h"
#include "cfg.h"
#include "clock.h"
#include "alert.h"
#include "http.h"
#include "log.h"
#include "model.h"
#include "persist.h"
#include "recalib.h"
#include "registry.h"
#include "tick.h"
#include "zsock.h"

struct cli; /* main.c: the command line */
struct snapshot_counts; /* snapshot.h */

typedef struct calibd {
    daemon_cfg cfg;
    const char *config_path; /* NULL: built-in defaults */
    const struct cli *cli;   /* the command line, applied again at a reload */
    logger log;
    uv_loop_t *loop;
    void *zctx;
    zsock ingest, pull, control;
    zsock ingest_monitor, pull_monitor; /* peers that go away (zsock_monitor) */
    zsock publish;      /* the PUB socket: pub is its sock */
    zsock control_monitor, publish_monitor; /* handshakes that fail */
    zsock zap;          /* the ZAP handler's REP socket, with CURVE */
    curve_ctx curve;     /* CURVE: keys, allow-lists, counters (curve.c) */
    int have_pull;
    void *pub;
    uv_signal_t sig[3]; /* INT, TERM, HUP */
    uv_timer_t tick;
    http_server http;
    registry reg;       /* registry.c: the models */
    struct kafka *kafka;        /* kafka.c: the consumer group, NULL: none */
    const struct kafka_figures *kafka_fig; /* its figures (kafka_part.h),
                                              which status and /metrics
                                              read; NULL: none */
    /* Whether this instance may act for the model named (NULL: for all its
     * own) now: publish, write its state. Set by a source whose models
     * other instances may take over (kafka.c: kafka_may_act); NULL: it
     * always may. */
    int (*may_act)(struct calibd *d, const char *name);
    struct kafka_part *source;  /* the Kafka partition of the message or
                                   snapshot being taken in, NULL otherwise:
                                   the models it makes are that partition's */
    calib_msg msg;      /* the decoder's reusable state */
    struct ingest_outcome *ingest_out; /* ingest.c: the message's outcome, for
                                          a sender that waits (HTTP); NULL */
    double *x;          /* one record's outputs, CALIB_PROTO_MAX_K doubles */
    uint64_t messages;  /* ingest messages received */
    uint64_t publish_errors; /* PUB sends that failed */
    uint64_t reloads, reloads_refused; /* SIGHUPs applied, and refused whole */
    uint64_t rejected[REJ_MAX]; /* rejections whose model is unknown */
    double started;     /* wall clock at start */
    double steady_base; /* clock.c: the steady clock less the loop's */
    uint64_t hash_seed; /* from uv_random at start */
    calib_plugin_registry plugins; /* methods loaded from plugin_dir */
    double next_republish;         /* wall time of the next params round */
    alerting alert;     /* alert.c: what was sent, and the sinks */
    persister snap;     /* persist.c: when snapshots are written */
    tick_pass pass;     /* tick.c: the pass over the models */
    recalib_refits refits; /* recalib.c: refits whose samples are copied */
    recalib_stores stores; /* recalib.c: parameters files being written */
    int stopping;
    int handles_ready; /* signals and timer initialised */
    int exit_code;
} calibd;


/* calibd.c: the one way to make a daemon's context and to end it. On a
 * zeroed d whose configuration (config_init or config_load) and log are
 * set, calibd_init starts the clocks on loop (the steady clock from the
 * wall clock now), sets the seed of the join's sample hash, and makes what
 * every message needs (the decoder, the method registry, the row buffer).
 * 0, or -1 out of memory. calibd_free frees the models, the CURVE state,
 * the configuration and what calibd_init made; the event loop and the
 * sockets are the caller's. */
int calibd_init(calibd *d, uv_loop_t *loop, uint64_t hash_seed);
void calibd_free(calibd *d);
/* The daemon's counters as the status map opens with them (status.h). */
struct status_daemon;
void calibd_status(const calibd *d, struct status_daemon *s);
/* The counters a snapshot keeps (snapshot.h), and a restore's added on. */
void calibd_counts(const calibd *d, struct snapshot_counts *c);
void calibd_counts_add(calibd *d, const struct snapshot_counts *c);

#endif
