/*
 * mock — a Kafka cluster for the tests, librdkafka's mock cluster
 * (rd_kafka_mock_cluster_new): brokers in this process that speak the real
 * protocol to any client, consumer groups and offset commits included.
 * Debian packages no Kafka broker.
 *
 *   tests/kafka/mock [--brokers N] TOPIC:PARTITIONS...
 *
 * Creates the topics, prints the bootstrap servers (host:port,...) on one
 * line of stdout, and serves until SIGTERM or SIGINT.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    int brokers = 1, first = 1;
    if (argc > 2 && strcmp(argv[1], "--brokers") == 0) {
        brokers = atoi(argv[2]);
        first = 3;
    }
    if (brokers < 1 || first >= argc) {
        fprintf(stderr, "usage: %s [--brokers N] TOPIC:PARTITIONS...\n", argv[0]);
        return 2;
    }
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* the cluster's threads run on a client handle of their own */
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "mock: %s\n", err);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
    if (!mc) {
        fprintf(stderr, "mock: no mock cluster\n");
        return 1;
    }
    for (int i = first; i < argc; i++) {
        char *colon = strrchr(argv[i], ':');
        int parts = colon ? atoi(colon + 1) : 0;
        if (!colon || parts < 1) {
            fprintf(stderr, "mock: %s: expected TOPIC:PARTITIONS\n", argv[i]);
            return 2;
        }
        *colon = 0;
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, argv[i], parts, 1);
        if (e) {
            fprintf(stderr, "mock: topic %s: %s\n", argv[i], rd_kafka_err2str(e));
            return 1;
        }
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);
    while (!stop)
        pause();
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    return 0;
}
