/* pub.h — the PUB socket to the serving nodes: params and alert messages
 * (calibd-protocol(7)), frame 0 the model's name. On the loop thread. */
#ifndef CALIBD_PUB_H
#define CALIBD_PUB_H

#include <stddef.h>

#include "calib/mpw.h"

struct calibd;

/* Sends a two-frame message (topic, payload); never blocks. A message the
 * socket refuses (no PUB socket: nothing; at the high-water mark ZeroMQ
 * drops it silently) is counted in publish_errors and logged at a limited
 * rate. */
void publish(struct calibd *d, const char *topic, const void *buf, size_t len);

/* Publishes the message w holds (calib_params_msg_write, ...); one that
 * could not be written whole (out of memory) is counted in publish_errors
 * and logged instead. Returns 0 if it was handed to the socket, else -1. */
int publish_written(struct calibd *d, const char *topic, const calib_mpw *w);

#endif
