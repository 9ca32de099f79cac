/* pub.c — the PUB socket to the serving nodes (see pub.h). */
#include <string.h>

#include "calibd.h"
#include "pub.h"

void publish(calibd *d, const char *topic, const void *buf, size_t len)
{
    if (!d->pub)
        return;
    if (d->may_act && !d->may_act(d, topic)) /* a stalled member's stale parameters */
        return;
    /* PUB never blocks: at the high-water mark the message is dropped */
    if (zmq_send(d->pub, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(d->pub, buf, len, ZMQ_DONTWAIT) < 0) {
        d->publish_errors++;
        log_rl(&d->log, LOG_WARN, "publish", "%s: %s", topic, zmq_strerror(zmq_errno()));
    }
}

int publish_written(calibd *d, const char *topic, const calib_mpw *w)
{
    int err = calib_mpw_error(w);
    if (err != CALIB_OK) {
        d->publish_errors++;
        log_rl(&d->log, LOG_ERROR, "publish", "%s: cannot write the message: %s", topic,
               calib_strerror(err));
        return -1;
    }
    publish(d, topic, w->sb.data, w->sb.size);
    return 0;
}
