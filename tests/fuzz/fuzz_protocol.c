/*
 * fuzz_protocol.c — producers' messages (calibd-protocol(7)) through the
 * protocol v1 decoder and calibd's ingest path: decode, route to a model
 * (created on the fly), join predictions and labels, score; then every
 * model's status. The decoder's contract (calib_protocol(3)) is checked
 * on its own as well.
 *
 * An input is a sequence of ZeroMQ messages, each:
 *   1 byte   T, the topic's length; 0xff: a message of one frame (no
 *            topic, no payload), 0xfe: one of three frames
 *   T bytes  the topic (frame 0)
 *   2 bytes  P, the payload's length, little-endian
 *   P bytes  the payload (frame 1; fewer when the input ends first)
 * Each input starts with a fresh daemon, so that runs repeat.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "calib/protocol.h"
#include "calibd.h"
#include "ingest.h"

#include "fuzz.h"

#define MAX_MESSAGES 64

static calibd *d;
static calib_msg plain;  /* the decoder alone, without a hint */
static double *x;        /* one record's outputs */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d = fuzz_daemon_new();
    calib_msg_init(&plain);
    x = malloc(CALIB_PROTO_MAX_K * sizeof *x);
    FUZZ_CHECK(x != NULL);
    return 0;
}

/* calib_msg_decode's promises, whatever the bytes. */
static void check_decoder(const void *topic, size_t topic_len, const void *payload,
                          size_t len)
{
    int rc = calib_msg_decode(&plain, topic, topic_len, payload, len);
    if (rc != CALIB_REJ_NONE) {
        FUZZ_CHECK(rc > CALIB_REJ_NONE && rc < CALIB_REJ_COUNT);
        FUZZ_CHECK(!calib_reject_is_record(rc));
        FUZZ_CHECK(plain.n == 0);
        calib_msg_rec r;
        FUZZ_CHECK(calib_msg_record(&plain, 0, &r, x) == CALIB_EINVAL);
        return;
    }
    size_t end = 0;
    FUZZ_CHECK(calib_proto_topic_ok(topic, topic_len));
    FUZZ_CHECK(calib_proto_scan(payload, len, &end) == CALIB_REJ_NONE && end == len);
    FUZZ_CHECK(plain.type == CALIB_MSG_PRED || plain.type == CALIB_MSG_LABEL);
    FUZZ_CHECK(plain.n >= 1 && plain.n <= CALIB_PROTO_MAX_N);
    FUZZ_CHECK(plain.batch || plain.n == 1);
    if (plain.type == CALIB_MSG_PRED) {
        FUZZ_CHECK(plain.form >= CALIB_FORM_LOGITS && plain.form <= CALIB_FORM_GAUSSIAN);
        FUZZ_CHECK(plain.width == calib_form_width(plain.form, plain.k));
        FUZZ_CHECK(plain.width >= 1 && plain.width <= CALIB_PROTO_MAX_K);
    }
    for (size_t i = 0; i < plain.n; i++) {
        calib_msg_rec r;
        int rr = calib_msg_record(&plain, i, &r, plain.type == CALIB_MSG_PRED ? x : NULL);
        FUZZ_CHECK(rr == CALIB_REJ_NONE || calib_reject_is_record(rr));
        if (rr != CALIB_REJ_NONE)
            continue;
        FUZZ_CHECK(r.id_kind != CALIB_MSG_ID_STR ||
                   (r.id_len >= 1 && r.id_len <= CALIB_PROTO_MAX_ID));
        FUZZ_CHECK(r.id_kind != CALIB_MSG_ID_NONE || r.has_y);
        if (plain.type == CALIB_MSG_LABEL)
            FUZZ_CHECK(r.has_y && r.id_kind != CALIB_MSG_ID_NONE);
    }
    calib_msg_rec r;
    FUZZ_CHECK(calib_msg_record(&plain, plain.n, &r, x) == CALIB_EINVAL);
}

/* One message into the daemon, as zsock delivers it: frames that live
 * during the call only. */
static void ingest(const uint8_t *topic, size_t topic_len, const uint8_t *payload,
                   size_t len, size_t nframes)
{
    zmq_msg_t f[3];
    /* copies: the decoder must not read past a frame's end, which ASan
     * sees on a buffer of the frame's exact size */
    FUZZ_CHECK(zmq_msg_init_size(&f[0], topic_len) == 0);
    FUZZ_CHECK(zmq_msg_init_size(&f[1], len) == 0);
    FUZZ_CHECK(zmq_msg_init_size(&f[2], 0) == 0);
    if (topic_len)
        memcpy(zmq_msg_data(&f[0]), topic, topic_len);
    if (len)
        memcpy(zmq_msg_data(&f[1]), payload, len);
    if (nframes == 2)
        check_decoder(zmq_msg_data(&f[0]), topic_len, zmq_msg_data(&f[1]), len);
    ingest_on_message(&d->ingest, f, nframes, d);
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&f[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0;
    for (int n = 0; n < MAX_MESSAGES && at < size; n++) {
        size_t t = data[at++], nframes = 2;
        if (t == 0xff || t == 0xfe) {
            nframes = t == 0xff ? 1 : 3;
            t = 0;
        }
        t = t < size - at ? t : size - at;
        const uint8_t *topic = data + at;
        at += t;
        size_t p = 0;
        if (size - at >= 2) {
            p = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
        } else {
            at = size;
        }
        p = p < size - at ? p : size - at;
        ingest(topic, t, data + at, p, nframes);
        at += p;
    }
    fuzz_daemon_status(d);
    fuzz_daemon_clear(d);
    return 0;
}
