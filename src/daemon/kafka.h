/*
 * kafka.h — predictions and labels from a Kafka consumer group (calibd(8),
 * KAFKA), beside ZeroMQ, on the loop's one thread.
 *
 * A message's value is a protocol v1 message (msgpack), its key the model's
 * name (no key: the topic's name), so that a model's predictions and labels
 * meet on one partition and so on one instance of the group. A model's
 * partition is the one its key hashes to with the producers' partitioner
 * (kafka_part_owns): a message keyed to another is rejected
 * (REJ_OTHER_SOURCE) and changes nothing. The models fed from a partition
 * are that partition's: they take messages from it alone, and their state
 * is kept per partition, in the group's shared directory ([kafka]
 * state_dir):
 *
 *   partition.TOPIC.N   a snapshot (snapshot.h) of the partition's models,
 *                       whose header names the partition and the offset of
 *                       the first message they have not seen;
 *   model.NAME.params   each model's parameters (state.h).
 *
 * Exactly once: a partition's models are packed together between two
 * messages, with the offset after the last one applied; the file is
 * written durably, and only then is that offset committed to the group.
 * A partition assigned is restored from its file and read from the file's
 * offset (no file: from the committed offset, else from the earliest), so
 * that after a crash the models hold every message once, as in a run
 * without it. A partition revoked is written and committed, its models
 * handed over (registry_hand_over) once no parameters file is being
 * written: a model's closed loop runs on one instance at a time, and its
 * next owner starts from its last version. A partition lost (the group
 * went on without this member) is handed over unwritten: its next owner
 * replays it from its last snapshot. With [kafka], configured models are
 * made by their first message or their partition's snapshot (main.c), so
 * that they belong to the source that feeds them.
 *
 * Fenced: a member writes its partitions' files under its own temporary
 * names, holds its writes and publishes while its assignment is lost or
 * after its loop stalled past session.timeout.ms (kafka_may_act), and a
 * file whose offset is behind the group's committed one (the brokers
 * fence commits by generation) is refused at restore as stale: its
 * partition is read again from the earliest offset.
 */
#ifndef CALIBD_KAFKA_H
#define CALIBD_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "cfg.h"
#include "kafka_part.h"

struct calibd;

/* Whether a message keyed key (key_len > 0) belongs on partition p: the
 * partition the producers' partitioner ([kafka] partitioner, librdkafka's
 * property; consistent_random by default) hashes the key to among
 * p->count. 1 when it does or the count is unknown; 0 with *want the
 * partition it belongs on. */
int kafka_part_owns(const kafka_part *p, const void *key, size_t key_len, int32_t *want);

/* The partition snapshot's file name: "partition.TOPIC.N". */
void kafka_part_file(const char *topic, int32_t partition, char *name, size_t len);

/* Creates the consumer from cfg.kafka and joins the group: its events are
 * served from the loop. 0, or -1 with err set. Nothing when [kafka] is not
 * configured. */
int kafka_start(struct calibd *d, char *err, size_t errlen);
/* --check-config: whether librdkafka takes [kafka]'s properties. 0, or -1
 * with err set. */
int kafka_check(const daemon_cfg *c, char *err, size_t errlen);
/* From the tick: writes every assigned partition's snapshot that changed,
 * every snapshot_interval, in a worker, and commits their offsets after. */
void kafka_tick(struct calibd *d);
/* Whether this member may write or publish for its partitions now
 * (name: for that model, NULL: for all): not while its assignment is
 * lost, nor while its loop is stalled past session.timeout.ms, nor after
 * such a stall until the group answers (a rebalance) or three heartbeat
 * intervals pass. 1 too without [kafka], or for a model not fed from
 * Kafka. */
int kafka_may_act(struct calibd *d, const char *name);
/* At stop, on the loop: leaves the group; every partition is written and
 * committed (the revocation) before this returns. */
void kafka_stop(struct calibd *d);
void kafka_free(struct calibd *d);

#endif
