/* control.h — the REP control socket (control.c): ping, status, refit;
 * msgpack requests {"v": 1, "cmd": ...}, documented in calibd(8). */
#ifndef CALIBD_CONTROL_H
#define CALIBD_CONTROL_H

#include <stddef.h>
#include <zmq.h>

#include "calib/mpw.h"
#include "zsock.h"

/* A request from the control socket; arg is the calibd. Answers exactly
 * once, an error map for a request it cannot parse. */
void control_on_message(zsock *z, zmq_msg_t *frames, size_t nframes, void *arg);

struct calibd;
/* The reply to one request of len bytes, appended to w: what
 * control_on_message sends, without a socket (tests/fuzz/fuzz_control.c). */
void control_reply(struct calibd *d, const void *buf, size_t len, calib_mpw *w);

/* The reply to `status` (of the model named only[0..only_len), or of all
 * when only is NULL; an error map when there is no such model): status.h's
 * map, what calibctl status prints. */
void control_pack_status(struct calibd *d, calib_mpw *w, const char *only, size_t only_len);

#endif
