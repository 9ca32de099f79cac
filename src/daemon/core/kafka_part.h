/* kafka_part.h — what calibd keeps of a Kafka partition it has held, and
 * the consumer's figures: plain data, which status and /metrics read
 * (kafka.h owns the consumer that fills them). */
#ifndef CALIBD_KAFKA_PART_H
#define CALIBD_KAFKA_PART_H

#include <stddef.h>
#include <stdint.h>

#include "cfg.h"

/* A partition this instance has held. */
typedef struct kafka_part {
    char topic[KAFKA_TOPIC_MAX + 1];
    int32_t partition;
    int assigned;
    int64_t next;      /* the offset after the last message applied: the
                          models hold every earlier one (-1: none read
                          since assigned, and no snapshot) */
    int64_t saved;     /* the offset of the last snapshot written, -1 none */
    int64_t committed; /* the last offset committed, -1 none */
    uint64_t messages; /* messages read from it */
    uint64_t epoch;    /* assignments so far: a snapshot packed in an
                          earlier one is not this one's */
    int32_t count;     /* the topic's partitions, from the brokers' metadata
                          at the assignment; 0: unknown */
} kafka_part;

/* Figures for /metrics and status. */
typedef struct kafka_stats {
    uint64_t messages, skipped, stray, errors;
    uint64_t rebalances, assigned, revoked, lost;
    uint64_t snapshots, snapshot_errors, commits, commit_errors;
    uint64_t restored, restore_errors;
    size_t partitions; /* assigned now */
} kafka_stats;

/* What the consumer shows of itself: kafka.c keeps it up to date, and
 * calibd.h points at it (NULL when Kafka is off), so that status and
 * /metrics read it as data, without a call into the consumer. */
typedef struct kafka_figures {
    kafka_stats st;     /* partitions: counted by the reader (assigned ones) */
    kafka_part **parts; /* every partition ever held */
    size_t nparts;
} kafka_figures;

#endif
