/* pub.h — the PUB socket to the serving nodes: params and alert messages
 * (calibd-protocol(7)), frame 0 the model's name. On the loop thread. */
#ifndef CALIBD_PUB_H
#define CALIBD_PUB_H

#include <stddef.h>

struct calibd;

/* Sends a two-frame message (topic, payload); never blocks. A message the
 * socket refuses (no PUB socket: nothing; at the high-water mark ZeroMQ
 * drops it silently) is counted in publish_errors and logged at a limited
 * rate. */
void publish(struct calibd *d, const char *topic, const void *buf, size_t len);

#endif
