/* ingest.h — producer messages (ingest.c): decode, route to the model
 * (registry.h), join, score. */
#ifndef CALIBD_INGEST_H
#define CALIBD_INGEST_H

#include <stddef.h>
#include <zmq.h>

#include "zsock.h"

struct calibd;

/* What became of one message, for a sender that waits for the answer
 * (HTTP ingest): the message's rejection (0: accepted), or how many of its
 * records were rejected, and the first reason (reject_name) and key. */
typedef struct ingest_outcome {
    int reason;         /* the whole message's, or 0 */
    size_t records;     /* records in an accepted message */
    size_t rejected;    /* of which were rejected */
    int first;          /* the first rejection's reason, 0 if none */
    char key[32];       /* the key at fault, "" if none */
    char detail[256];   /* what to fix, "" if nothing to add */
} ingest_outcome;

/* A message from an ingest socket (SUB or PULL); arg is the calibd.
 * Every rejection is counted by model and reason and logged at a limited
 * rate; nothing a producer sends stops the daemon. */
void ingest_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg);
/* The same for one message given as its topic and payload, which must be
 * of type want (a calib_msg_type; -1: any, as on the sockets); out (NULL:
 * none) gets what became of it. */
void ingest_message(struct calibd *d, const void *topic, size_t topic_len,
                    const void *payload, size_t payload_len, int want, ingest_outcome *out);
/* A message refused before it could be decoded (an HTTP body that is no
 * JSON object): counted for the topic's model (if it exists) and logged,
 * with why. */
void ingest_reject(struct calibd *d, const void *topic, size_t topic_len, int reason,
                   const char *why, ingest_outcome *out);

#endif
