/* cfg.h — calibd's configuration: [daemon], [defaults], [model NAME]. */
#ifndef CALIBD_CFG_H
#define CALIBD_CFG_H

#include <stddef.h>
#include <stdint.h>

#define CFG_MAX_ENDPOINTS 16
#define CFG_MAX_MODELS 100000 /* the most max_models can be, and [model] sections */
#define CFG_NAME_MAX 128
#define CFG_METHOD_MAX 63 /* CALIB_PLUGIN_NAME_MAX */

/* Settings of one model; [defaults] then [model NAME] override the built-in
 * values field by field. */
typedef struct model_cfg {
    char name[CFG_NAME_MAX + 1];
    int form;               /* enum calib_form, or -1: the first prediction's */
    uint64_t k;             /* 0: the first prediction's */
    double label_ttl;       /* seconds a prediction or label waits */
    uint64_t max_pending;   /* waiting predictions + labels */
    uint64_t joined_memory; /* joined ids remembered to spot duplicate labels */
    uint64_t join_memory;   /* bytes for waiting items: caps max_pending */
    uint64_t sample_memory; /* bytes for ring + reservoir: caps both */
    double window;          /* seconds of the sliding window */
    uint64_t window_panes;
    uint64_t bins;          /* equal-width bins of the reliability diagram */
    uint64_t ring;          /* recent samples kept */
    uint64_t reservoir;     /* uniform samples kept */
    uint64_t seed;
    /* the closed loop (calibd(8), LOOP) */
    char method[CFG_METHOD_MAX + 1]; /* "auto": temperature, or
                                        location_scale for a Gaussian model */
    char fit_params[CFG_METHOD_MAX + 1]; /* the map's parameters the fits
                                        fit, space-separated; "": all */
    unsigned long method_line; /* the file's line that set method (0: none) */
    unsigned long fit_params_line; /* ... fit_params */
    int drift;              /* detect drift of the calibrated score */
    double drift_alpha, drift_min_effect, drift_quantile;
    uint64_t drift_reference;
    double refit_interval;  /* seconds between scheduled refits, 0: never */
    uint64_t refit_min_samples, refit_samples;
    int auto_publish;       /* no: candidates are tested, never published */
    int rollback;           /* guard each published version against the one
                               before; roll back when it is shown worse */
    double cs_alpha;        /* level of the Brier confidence sequences, [0, 1)
                               (0: none) */
    double gate_alpha, min_improvement, gate_dss_clip;
    uint64_t gate_max_samples;
    /* the miscalibration trigger: a challenger refit on past pairs,
     * tested on each new one against the parameters in force */
    int miscal_trigger;
    double miscal_alpha, miscal_min_effect;
    uint64_t miscal_period;
    /* alerts; a level of 0 turns its rule off */
    double alert_brier, alert_rbs, alert_ece, alert_dss;
    uint64_t alert_min_samples;
    double alert_hysteresis, alert_cooldown, label_starvation;
    /* KServe's payload logger (kserve.h): the output tensor read ("": the
     * first of probability rows, or the first numeric one with a form),
     * and its form (-1: probability rows, detected) */
    char kserve_output[CFG_METHOD_MAX + 1];
    int kserve_form;
    /* calibration per segment (segment.h): keys and values tracked, the
     * e-BH level per key and the null's half-width */
    uint64_t segment_keys, segment_values;
    double segment_alpha, segment_min_effect;
    uint64_t segment_metrics; /* values per key /metrics exports, worst first */
    uint64_t segment_status;  /* values per key status lists, worst first */
    int segment_refit;        /* a flagged segment gets its own parameters */
    uint64_t segment_refit_samples; /* pairs its fit takes */
    /* label-free estimates (calib/lfree.h; calibd(8), LABEL-FREE) */
    uint64_t label_free_recent;  /* predictions kept, 0: off */
    uint64_t label_free_memory;  /* bytes for them: caps label_free_recent */
    double label_free_interval;  /* seconds between two updates at least */
    double label_shift_alpha;    /* the shift test's level, 0: no test */
    uint64_t label_shift_reference; /* predictions between its segments */
    int label_shift_adapt;       /* an alarm publishes the prior correction */
    uint64_t set;           /* bit i: field i given in this section */
} model_cfg;

typedef struct endpoint_list {
    size_t n;
    char *ep[CFG_MAX_ENDPOINTS];
} endpoint_list;

/* [kafka] (kafka.h): the consumer group calibd reads predictions and
 * labels from. brokers NULL: no Kafka. */
#define KAFKA_MAX_TOPICS 64
#define KAFKA_MAX_PROPS 64
#define KAFKA_TOPIC_MAX 249 /* Kafka's own limit on a topic's name */
/* the longest topic [kafka] takes: partition.TOPIC.N.tmp within a file
 * name's 255 bytes */
#define KAFKA_TOPIC_FILE_MAX 200
typedef struct kafka_cfg {
    char *brokers;   /* host:port,... (bootstrap.servers) */
    char *group;     /* group.id */
    char *state_dir; /* shared by every instance of the group */
    char *topics[KAFKA_MAX_TOPICS];
    size_t ntopics;
    /* librdkafka's own properties (a key with a dot), in the file's order */
    char *prop_key[KAFKA_MAX_PROPS], *prop_value[KAFKA_MAX_PROPS];
    size_t nprops;
} kafka_cfg;

typedef struct daemon_cfg {
    endpoint_list ingest, ingest_pull;
    endpoint_list subscribe;  /* topic prefixes of the SUB socket; none: all */
    char *publish, *control, *http, *state_dir, *log_level;
    int auto_models;
    uint64_t max_models;      /* models at most */
    uint64_t max_msg_size, rcvhwm, sndhwm;
    uint64_t publish_memory;  /* bytes one subscriber's queue may hold */
    uint64_t ingest_memory;   /* receive queue bytes per producer connection */
    uint64_t memory_limit;    /* bytes all models may hold at most */
    double drain_time;        /* seconds of receiving per socket wakeup */
    double http_timeout;      /* seconds an HTTP connection has per request */
    uint64_t http_max_connections, http_max_per_address;
    /* HTTP TLS and authentication: files read at start (NULL: off) */
    char *http_tls_cert, *http_tls_key;  /* PEM certificate chain, private key */
    char *http_auth_token_file;          /* a bearer token */
    char *http_auth_basic_file;          /* user:password lines */
    int http_auth_metrics;               /* /metrics needs credentials too */
    int http_ingest;                     /* POST /v1/models/NAME/... (http_ingest.h) */
    char *http_ingest_token_file;        /* the producers' bearer token, or NULL */
    double health_timeout;    /* /healthz fails when no tick for this long */
    uint64_t history;         /* points of each model's history (0: off) */
    double history_step;      /* seconds between two points of the history */
    double snapshot_interval; /* seconds between two snapshots (0: at exit only) */
    double tick;
    double params_interval;   /* seconds between republished parameters */
    double model_idle_ttl;    /* an unconfigured model that never scored a
                                 pair goes after this long without a
                                 message (0: never) */
    char *alert_exec;         /* absolute path of the exec sink, or NULL */
    double alert_exec_timeout;
    char *plugin_dir;         /* where method NAME is NAME.so */
    /* CURVE (curve.h): calibd's key pair file, and per role a directory of
     * allowed public keys or "any"; all NULL: no CURVE */
    char *curve_secret_key, *curve_producers, *curve_operators, *curve_subscribers;
    kafka_cfg kafka;
    model_cfg defaults;
    model_cfg *models; /* [nmodels], resolved over defaults */
    size_t nmodels;
} daemon_cfg;

/* The receive high-water mark in force: rcvhwm, lowered so that a full
 * queue of max_msg_size messages stays within ingest_memory. */
uint64_t config_rcvhwm(const daemon_cfg *c);
/* The send high-water mark in force: sndhwm, lowered so that a subscriber
 * that reads nothing holds at most publish_memory bytes of messages. */
uint64_t config_sndhwm(const daemon_cfg *c);

#define CFG_DEFAULT_INGEST "@tcp://127.0.0.1:7450"
/* the PULL socket a producer's PUSH (the Python Producer's default) finds */
#define CFG_DEFAULT_PULL "@tcp://127.0.0.1:7454"
#define CFG_DEFAULT_PUBLISH "@tcp://127.0.0.1:7451"
#define CFG_DEFAULT_CONTROL "@tcp://127.0.0.1:7452"
#define CFG_DEFAULT_HTTP "127.0.0.1:7453"
#define CFG_DEFAULT_STATE_DIR "/var/lib/calibd"

/* Built-in defaults; -1 when out of memory. */
int config_init(daemon_cfg *c);
void config_clear_endpoints(endpoint_list *l);
void config_free(daemon_cfg *c);

/* Reads an INI file over c. Unknown sections and keys are reported through
 * warn (with file and line) and ignored. Returns 0, or -1 with err holding
 * "FILE:LINE: reason". */
typedef void (*config_warn_fn)(void *arg, const char *msg);
int config_load(daemon_cfg *c, const char *path, config_warn_fn warn, void *arg,
                char *err, size_t errlen);

/* Sets a [daemon] key from the command line; same checks as the file. */
int config_set_daemon(daemon_cfg *c, const char *key, const char *value, char *err,
                      size_t errlen);

/* Sets a [kafka] key: brokers, topics (a comma list), group, state_dir,
 * or a librdkafka property (a key with a dot, passed through as it is).
 * 0, 1 for an unknown key, -1 with err set for a bad value. */
int config_set_kafka(kafka_cfg *k, const char *key, const char *value, char *err,
                     size_t errlen);
/* A Kafka topic's name: 1..249 bytes of [A-Za-z0-9._-], not "." or "..". */
int config_kafka_topic_ok(const char *t, size_t len);

/* Settings of a model named by the first message (auto_models): defaults. */
void config_model_for(const daemon_cfg *c, const char *name, model_cfg *out);
/* Sets one key of a [model] section from its text, as the file would:
 * 0, 1 for an unknown key, -1 with err set for a bad value. */
int config_set_model(model_cfg *m, const char *key, const char *value, char *err,
                     size_t errlen);
/* The name of model key number i (0, 1, ... until NULL) and its value in
 * m as text that config_set_model reads back to the same value. */
const char *config_model_key(size_t i, const model_cfg *m, char *value, size_t len);
const model_cfg *config_find_model(const daemon_cfg *c, const char *name);

/* fit_params' syntax: "all" into "", else 1..8 names of [A-Za-z0-9_]
 * (1..15 each) separated by commas or spaces, into out (CFG_METHOD_MAX + 1
 * bytes) separated by one space; -1 when s is not so. */
int cfg_parse_params(const char *s, char *out);

/* The nearest of names (NULL-terminated) to word, by edit distance, or
 * NULL when none is within a third of word's length (2 at least): what a
 * typo of it meant. */
const char *config_nearest(const char *word, const char *const *names);
/* The i-th key of [daemon], of [kafka] (without librdkafka's dotted
 * ones); NULL past the last. */
const char *config_daemon_key(size_t i);
const char *config_kafka_key(size_t i);

#endif
