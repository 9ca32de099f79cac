/* ingest.h — producer messages (ingest.c): decode, route to the model
 * (registry.h), join, score. */
#ifndef CALIBD_INGEST_H
#define CALIBD_INGEST_H

#include <stddef.h>
#include <zmq.h>

#include "zsock.h"

/* A message from an ingest socket (SUB or PULL); arg is the calibd.
 * Every rejection is counted by model and reason and logged at a limited
 * rate; nothing a producer sends stops the daemon. */
void ingest_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg);

#endif
