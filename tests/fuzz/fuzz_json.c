/*
 * fuzz_json.c — an HTTP ingest body in JSON (calibd-protocol(7), HTTP)
 * through json_msg_to_msgpack and, when that takes it, calibd's ingest path
 * as http_ingest.c drives it (ingest_message with the route's type, the
 * outcome the answer is made of). Checked: a body refused has a reason;
 * one taken is one msgpack map; the outcome is consistent (a rejected
 * message has a reason and no records; a taken one's rejections are its
 * records' and have a first reason).
 *
 * And a KServe inference response (kserve.h) through kserve_to_msg and the
 * same path: a body it reads gives one "pred" map of the rows it says.
 *
 * An input: 1 byte, the route (bits 0-1: 0 predictions, 1 labels, 2 a
 * KServe response read as probability rows, 3 one read with a form and
 * output named by bits 2-3: logits, probs, p, p of the output "y"), then
 * the body. Each input starts with a fresh daemon, so that runs repeat.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "calib/protocol.h"
#include "calibd.h"
#include "ingest.h"
#include "json_msg.h"
#include "kserve.h"

#include "fuzz.h"

static calibd *d;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d = fuzz_daemon_new();
    return 0;
}

/* A KServe response: read, it is one map ingested as predictions. */
static void kserve(const uint8_t *data, size_t size)
{
    static const int forms[4] = {CALIB_FORM_LOGITS, CALIB_FORM_PROBS, CALIB_FORM_BINARY,
                                 CALIB_FORM_BINARY};
    int route = data[0] & 3, pick = (data[0] >> 2) & 3;
    kserve_opts o = {route == 3 && pick == 3 ? "y" : NULL, route == 3 ? forms[pick] : -1};
    calib_mpw w;
    calib_mpw_init(&w);
    char why[256] = "";
    int n = kserve_to_msg((const char *)data + 1, size - 1, "ce-id-1", &o, &w, why, sizeof why);
    if (n <= 0) {
        FUZZ_CHECK(why[0] != 0);
    } else {
        FUZZ_CHECK(calib_mpw_error(&w) == CALIB_OK && fuzz_is_map(w.sb.data, w.sb.size));
        calib_msg m;
        calib_msg_init(&m);
        int rc = calib_msg_decode(&m, "m", 1, w.sb.data, w.sb.size);
        /* a message calibd made: nothing wrong with its structure */
        FUZZ_CHECK(rc == CALIB_REJ_NONE && m.type == CALIB_MSG_PRED && m.n == (size_t)n);
        calib_msg_destroy(&m);
        ingest_outcome out;
        ingest_message(d, "m", 1, w.sb.data, w.sb.size, CALIB_MSG_PRED, &out);
        FUZZ_CHECK(out.reason == 0 || out.reason == REJ_SHAPE);
    }
    calib_mpw_destroy(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if ((data[0] & 3) >= 2) {
        kserve(data, size);
        fuzz_daemon_status(d);
        fuzz_daemon_clear(d);
        return 0;
    }
    int want = data[0] & 1 ? CALIB_MSG_LABEL : CALIB_MSG_PRED;
    calib_mpw w;
    calib_mpw_init(&w);
    char err[256] = "";
    ingest_outcome out;
    if (json_msg_to_msgpack((const char *)data + 1, size - 1, &w, err, sizeof err) != 0) {
        FUZZ_CHECK(err[0] != 0);
        ingest_reject(d, "m", 1, REJ_BAD_JSON, err, &out);
        FUZZ_CHECK(out.reason == REJ_BAD_JSON && out.first == REJ_BAD_JSON);
    } else {
        FUZZ_CHECK(calib_mpw_error(&w) == CALIB_OK);
        FUZZ_CHECK(fuzz_is_map(w.sb.data, w.sb.size));
        ingest_message(d, "m", 1, w.sb.data, w.sb.size, want, &out);
        if (out.reason) {
            FUZZ_CHECK(out.first == out.reason && out.records == 0);
        } else {
            FUZZ_CHECK(out.rejected <= out.records);
            FUZZ_CHECK((out.rejected > 0) == (out.first != 0));
        }
        FUZZ_CHECK(strlen(out.key) < sizeof out.key && strlen(out.detail) < sizeof out.detail);
    }
    calib_mpw_destroy(&w);
    fuzz_daemon_status(d);
    fuzz_daemon_clear(d);
    return 0;
}
