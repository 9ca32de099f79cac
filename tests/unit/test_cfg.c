/* test_cfg.c — calibd's configuration without a daemon: defaults, a file
 * over them and the command line over both, [defaults] under [model],
 * unknown keys warned with their line, values and rules refused with the
 * file, the line and what is expected, and derived settings. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/plugin.h"
#include "calib/recal.h"
#include "cfg.h"
#include "model.h"

static char path[64];
static char warned[8][256];
static int nwarned;

static void warn(void *arg, const char *msg)
{
    (void)arg;
    if (nwarned < 8)
        snprintf(warned[nwarned++], sizeof warned[0], "%s", msg);
}

/* Loads text as a configuration file over the defaults into c. */
static int load(daemon_cfg *c, const char *text, char *err, size_t errlen)
{
    snprintf(path, sizeof path, "/tmp/test_cfg.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    nwarned = 0;
    assert_int_equal(config_init(c), 0);
    int rc = config_load(c, path, warn, NULL, err, errlen);
    unlink(path);
    return rc;
}

static void defaults_documented(void **state)
{
    daemon_cfg c;
    assert_int_equal(config_init(&c), 0);
    /* the figures calibd.conf(5) states */
    assert_int_equal(c.max_msg_size, 1 << 20);
    assert_int_equal(c.ingest_memory, 256u << 20);
    assert_int_equal(c.memory_limit, (uint64_t)2 << 30);
    assert_true(c.drain_time == 0.005 && c.http_timeout == 10 && c.tick == 1);
    assert_int_equal(c.http_max_connections, 256);
    assert_int_equal(c.http_max_per_address, 16);
    assert_int_equal(c.defaults.max_pending, 100000);
    assert_int_equal(c.defaults.join_memory, 32u << 20);
    assert_int_equal(c.defaults.sample_memory, 192u << 20);
    assert_true(c.defaults.label_ttl == 3600);
    assert_int_equal(c.defaults.label_free_recent, 10000);
    assert_int_equal(c.defaults.label_free_memory, 8u << 20);
    assert_true(c.defaults.label_free_interval == 5 && c.defaults.label_shift_alpha == 0.01);
    assert_int_equal(c.defaults.label_shift_reference, 2000);
    /* the receive high-water mark in force: bytes over max_msg_size */
    assert_int_equal(config_rcvhwm(&c), 256);
    c.max_msg_size = (uint64_t)1 << 31;
    assert_int_equal(config_rcvhwm(&c), 1);
    c.max_msg_size = 1024;
    c.rcvhwm = 1000;
    assert_int_equal(config_rcvhwm(&c), 1000);
    config_free(&c);
}

/* [defaults] then [model NAME], field by field; the command line over the
 * file. */
static void file_then_command_line(void **state)
{
    daemon_cfg c;
    char err[512];
    assert_int_equal(load(&c, "[daemon]\nmemory_limit = 1073741824\n"
                              "[defaults]\nlabel_ttl = 60\nbins = 10\n"
                              "[model a]\nbins = 20\nk = 3\nform = probs\n",
                          err, sizeof err), 0);
    assert_int_equal(c.memory_limit, 1u << 30);
    model_cfg a, b;
    config_model_for(&c, "a", &a);
    config_model_for(&c, "b", &b);
    assert_true(a.label_ttl == 60 && a.bins == 20 && a.k == 3);
    assert_true(b.label_ttl == 60 && b.bins == 10 && b.k == 0);
    assert_non_null(config_find_model(&c, "a"));
    assert_null(config_find_model(&c, "b"));
    assert_int_equal(nwarned, 0);
    assert_int_equal(config_set_daemon(&c, "memory_limit", "33554432", err, sizeof err), 0);
    assert_int_equal(c.memory_limit, 32u << 20);
    assert_int_equal(config_set_daemon(&c, "memory_limit", "1", err, sizeof err), -1);
    assert_non_null(strstr(err, "memory_limit = '1'"));
    config_free(&c);
}

/* A value out of its range, and rules across keys, are refused with the
 * file and line (or the section) and what is expected. */
/* libinih cuts section names at 49 bytes: a model of a longer name (up to
 * 128) still gets its keys, and no second model appears under the cut
 * name (the fuzzer found it). */
static void long_model_names(void **state)
{
    daemon_cfg c;
    char err[512], text[512], name[129];
    memset(name, 'n', 128);
    name[128] = 0;
    snprintf(text, sizeof text, "[model %s]\nk = 7\n[model short]\nk = 3\n", name);
    assert_int_equal(load(&c, text, err, sizeof err), 0);
    assert_int_equal(c.nmodels, 2);
    const model_cfg *m = config_find_model(&c, name);
    assert_non_null(m);
    assert_int_equal(m->k, 7);
    assert_int_equal(config_find_model(&c, "short")->k, 3);
    config_free(&c);
}

static void refusals_say_why(void **state)
{
    const struct {
        const char *text, *says;
    } bad[] = {
        {"[defaults]\nwindow = 60\nmax_pending = lots\n", ":3: max_pending = 'lots': expected 1..1e8"},
        {"[model a]\njoin_memory = 10\n", ":2: join_memory = '10': expected 65536..2^40 bytes"},
        {"[daemon]\ndrain_time = 2\n", ":2: drain_time = '2': expected seconds in (0, 1]"},
        {"[daemon]\nhttp_timeout = 0\n", ":2: http_timeout = '0'"},
        {"[daemon]\nhttp_max_per_address = 0\n", ":2: http_max_per_address = '0'"},
        {"[model a]\nrefit_samples = 100\nrefit_min_samples = 500\n",
         "refit_samples (100) is below refit_min_samples"},
        {"[defaults]\nlabel_shift_alpha = 1\n",
         ":2: label_shift_alpha = '1': expected 0 (off) or a level in (0, 1)"},
        {"[model a]\nlabel_shift_reference = 9\n", ":2: label_shift_reference = '9'"},
        {"[model a]\nlabel_free_interval = 0\n", ":2: label_free_interval = '0'"},
        {"[model a]\nfit_params = a;c\n", ":2: fit_params = 'a;c': expected all, or"},
        {"[model a]\nfit_params = ,\n", ":2: fit_params = ','"},
        /* typos stop the load, with the line and the nearest name */
        {"[daemon]\nmemory_limit = 1073741824\ncolour = blue\n",
         ":3: unknown key 'colour' in [daemon] (calibd.conf(5) lists them)"},
        {"[daemon]\nmemory_limt = 1073741824\n",
         ":2: unknown key 'memory_limt' in [daemon]; the nearest is 'memory_limit'"},
        {"[defaults]\nlabel_tll = 60\n",
         ":2: unknown key 'label_tll' in [defaults]; the nearest is 'label_ttl'"},
        {"[model a]\nbins = 20\nmetod = variance\n",
         ":3: unknown key 'metod' in [model a]; the nearest is 'method'"},
        {"[kafka]\nfetch_size = 3\n", ":2: unknown key 'fetch_size' in [kafka]"},
        {"[defaults]\nbins = 10\n[extras]\n", ":3: unknown section [extras] (sections:"},
        {"[defualts]\nbins = 10\n", ":1: unknown section [defualts]; the nearest is [defaults]"},
        {"[model]\nbins = 10\n", ":1: [model] needs the model's name: [model NAME]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        daemon_cfg c;
        char err[512] = "";
        assert_int_equal(load(&c, bad[i].text, err, sizeof err), -1);
        if (!strstr(err, bad[i].says)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, bad[i].says);
            fail();
        }
        config_free(&c);
    }
}

/* fit_params: "all" is every parameter; names are kept separated by one
 * space, and a method's holds are the names left out (location_scale
 * alone fits a subset). */
/* Every [daemon] and [kafka] key the suggestions know is a key indeed. */
static void key_names_known(void **state)
{
    (void)state;
    daemon_cfg c;
    char err[256];
    assert_int_equal(config_init(&c), 0);
    const char *k;
    for (size_t i = 0; (k = config_daemon_key(i)); i++)
        if (config_set_daemon(&c, k, "?", err, sizeof err) == 1)
            fail_msg("[daemon] %s is not a key", k);
    assert_non_null(config_daemon_key(0));
    for (size_t i = 0; (k = config_kafka_key(i)); i++)
        if (config_set_kafka(&c.kafka, k, "x", err, sizeof err) == 1)
            fail_msg("[kafka] %s is not a key", k);
    assert_string_equal(config_kafka_key(5), "partitioner");
    assert_null(config_kafka_key(6));
    /* unknown without a dot; a dotted key is librdkafka's */
    assert_int_equal(config_set_kafka(&c.kafka, "brokerz", "x", err, sizeof err), 1);
    assert_int_equal(config_set_kafka(&c.kafka, "fetch.wait.max.ms", "5", err, sizeof err), 0);
    assert_int_equal(config_set_kafka(&c.kafka, "group.id", "g", err, sizeof err), -1);
    config_free(&c);
    static const char *const names[] = {"alpha", "beta", "gamma", NULL};
    assert_string_equal(config_nearest("gamm", names), "gamma");
    assert_null(config_nearest("xyzzyq", names));
}

static void fit_params_names(void **state)
{
    (void)state;
    daemon_cfg c;
    char err[256];
    assert_int_equal(config_init(&c), 0);
    model_cfg *m = &c.defaults;
    assert_string_equal(m->fit_params, "");
    assert_int_equal(config_set_model(m, "fit_params", " a, c ", err, sizeof err), 0);
    assert_string_equal(m->fit_params, "a c");
    const calib_plugin *ls = calib_plugin_builtin("location_scale"),
                       *v = calib_plugin_builtin("variance");
    unsigned holds;
    assert_int_equal(model_fit_holds(m->fit_params, ls, &holds, err, sizeof err), 0);
    assert_int_equal(holds, CALIB_RECAL_HOLD(1));
    assert_int_equal(model_fit_holds("", ls, &holds, err, sizeof err), 0);
    assert_int_equal(holds, 0);
    assert_int_equal(model_fit_holds("b w", v, &holds, err, sizeof err), 0); /* all of them */
    assert_int_equal(holds, 0);
    assert_int_equal(model_fit_holds("w", v, &holds, err, sizeof err), -1);
    assert_non_null(strstr(err, "only location_scale fits a subset"));
    assert_int_equal(model_fit_holds("a x", ls, &holds, err, sizeof err), -1);
    assert_non_null(strstr(err, "x is not a parameter of method location_scale"));
    assert_int_equal(config_set_model(m, "fit_params", "all", err, sizeof err), 0);
    assert_string_equal(m->fit_params, "");
    assert_int_equal(config_set_model(m, "fit_params", "a b c d e f g h i", err, sizeof err), -1);
    config_free(&c);
}

/* The HTTP access keys: paths kept as written (read by http_start, not
 * here), none for no file, http_auth_metrics a yes or no; all off by
 * default. */
static void http_access_keys(void **state)
{
    daemon_cfg c;
    char err[512];
    assert_int_equal(config_init(&c), 0);
    assert_null(c.http_tls_cert);
    assert_null(c.http_tls_key);
    assert_null(c.http_auth_token_file);
    assert_null(c.http_auth_basic_file);
    assert_int_equal(c.http_auth_metrics, 0);
    config_free(&c);
    assert_int_equal(load(&c, "[daemon]\nhttp_tls_cert = /etc/calibd/http.crt\n"
                              "http_tls_key = /etc/calibd/http.key\n"
                              "http_auth_token_file = /etc/calibd/token\n"
                              "http_auth_basic_file = /etc/calibd/users\n"
                              "http_auth_metrics = yes\n",
                          err, sizeof err), 0);
    assert_int_equal(nwarned, 0);
    assert_string_equal(c.http_tls_cert, "/etc/calibd/http.crt");
    assert_string_equal(c.http_tls_key, "/etc/calibd/http.key");
    assert_string_equal(c.http_auth_token_file, "/etc/calibd/token");
    assert_string_equal(c.http_auth_basic_file, "/etc/calibd/users");
    assert_int_equal(c.http_auth_metrics, 1);
    assert_int_equal(config_set_daemon(&c, "http_auth_token_file", "none", err, sizeof err), 0);
    assert_null(c.http_auth_token_file);
    assert_int_equal(config_set_daemon(&c, "http_auth_metrics", "no", err, sizeof err), 0);
    assert_int_equal(c.http_auth_metrics, 0);
    assert_int_equal(config_set_daemon(&c, "http_auth_metrics", "sometimes", err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "http_auth_metrics = 'sometimes': expected yes or no"));
    assert_int_equal(config_set_daemon(&c, "http_tls_cert", "", err, sizeof err), -1);
    assert_non_null(strstr(err, "http_tls_cert: empty value"));
    config_free(&c);
    assert_null(c.http_tls_cert);
}

/* [kafka]: brokers, topics, group and state_dir go together; a key with a
 * dot is librdkafka's, passed through in order (a second one replaces the
 * first), except those calibd must own; bad topics and unknown plain keys
 * are said. */
static void kafka_section(void **state)
{
    daemon_cfg c;
    char err[512];
    assert_int_equal(load(&c, "[daemon]\n", err, sizeof err), 0);
    assert_null(c.kafka.brokers); /* off by default */
    config_free(&c);
    assert_int_equal(load(&c, "[kafka]\nbrokers = k1:9092,k2:9092\n"
                              "topics = preds, labels\ntopics = x.y_z-1\ngroup = calibd\n"
                              "state_dir = /srv/calibd-group\nsecurity.protocol = SASL_SSL\n"
                              "session.timeout.ms = 6000\nsecurity.protocol = SSL\n",
                          err, sizeof err), 0);
    assert_string_equal(c.kafka.brokers, "k1:9092,k2:9092");
    assert_string_equal(c.kafka.group, "calibd");
    assert_string_equal(c.kafka.state_dir, "/srv/calibd-group");
    assert_int_equal(c.kafka.ntopics, 3);
    assert_string_equal(c.kafka.topics[0], "preds");
    assert_string_equal(c.kafka.topics[1], "labels");
    assert_string_equal(c.kafka.topics[2], "x.y_z-1");
    assert_int_equal(c.kafka.nprops, 2);
    assert_string_equal(c.kafka.prop_key[0], "security.protocol");
    assert_string_equal(c.kafka.prop_value[0], "SSL");
    assert_string_equal(c.kafka.prop_key[1], "session.timeout.ms");
    config_free(&c);
    assert_null(c.kafka.brokers);
    const struct {
        const char *text, *says;
    } bad[] = {
        {"[kafka]\nbrokers = k:1\ntopics = a\ngroup = g\n", "[kafka]: state_dir is missing"},
        {"[kafka]\ntopics = a\n", "[kafka]: brokers is missing"},
        {"[kafka]\ntopics = a,b/c\n", ":2: topics: 'b/c' is no topic name"},
        {"[kafka]\ntopics = a,..\n", ":2: topics: '..' is no topic name"},
        {"[kafka]\ntopics = a, b, a\n", ":2: topics: 'a' is listed twice"},
        {"[kafka]\ntopics = a, b\ntopics = c, a\n", ":3: topics: 'a' is listed twice"},
        {"[kafka]\ntopics = ,\n", ":2: topics: expected a comma list"},
        {"[kafka]\ngroup =\n", ":2: group: expected a value"},
        {"[kafka]\nenable.auto.commit = true\n", ":2: enable.auto.commit is calibd's to set"},
        {"[kafka]\ngroup.id = x\n", ":2: group.id is calibd's to set"},
        {"[kafka]\nlog.queue = false\n", ":2: log.queue is calibd's to set"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(load(&c, bad[i].text, err, sizeof err), -1);
        if (!strstr(err, bad[i].says)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, bad[i].says);
            fail();
        }
        config_free(&c);
    }
    char topic[KAFKA_TOPIC_MAX + 2], text[KAFKA_TOPIC_MAX + 64];
    memset(topic, 'a', sizeof topic - 1);
    topic[sizeof topic - 1] = 0;
    /* a name Kafka takes but calibd cannot name a file after (set as the
     * file would: libinih's lines are too short for it) */
    kafka_cfg k = {0};
    snprintf(text, sizeof text, "%.*s", KAFKA_TOPIC_FILE_MAX + 1, topic);
    assert_int_equal(config_set_kafka(&k, "topics", text, err, sizeof err), -1);
    assert_non_null(strstr(err, "is longer than 200 characters"));
    text[KAFKA_TOPIC_FILE_MAX] = 0;
    assert_int_equal(config_set_kafka(&k, "topics", text, err, sizeof err), 0);
    assert_int_equal(config_set_kafka(&k, "debug", "cgrp", err, sizeof err), 0);
    assert_int_equal(config_set_kafka(&k, "fetch_size", "3", err, sizeof err), 1);
    assert_int_equal(k.ntopics, 1);
    assert_int_equal(k.nprops, 1);
    assert_string_equal(k.prop_key[0], "debug");
    daemon_cfg holder = {.kafka = k};
    config_free(&holder);
    assert_int_equal(config_kafka_topic_ok(topic, KAFKA_TOPIC_MAX), 1);
    assert_int_equal(config_kafka_topic_ok(topic, KAFKA_TOPIC_MAX + 1), 0);
    assert_int_equal(config_kafka_topic_ok("", 0), 0);
    assert_int_equal(config_kafka_topic_ok(".", 1), 0);
    assert_int_equal(config_kafka_topic_ok("...", 3), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_documented),
        cmocka_unit_test(file_then_command_line),
        cmocka_unit_test(refusals_say_why), cmocka_unit_test(fit_params_names),
        cmocka_unit_test(key_names_known),
        cmocka_unit_test(long_model_names),
        cmocka_unit_test(http_access_keys),
        cmocka_unit_test(kafka_section),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
