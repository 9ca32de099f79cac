/*
 * fuzz_json.c — an HTTP ingest body in JSON (calibd-protocol(7), HTTP)
 * through json_msg_to_msgpack and, when that takes it, calibd's ingest path
 * as http_ingest.c drives it (ingest_message with the route's type, the
 * outcome the answer is made of). Checked: a body refused has a reason;
 * one taken is one msgpack map; the outcome is consistent (a rejected
 * message has a reason and no records; a taken one's rejections are its
 * records' and have a first reason).
 *
 * An input: 1 byte, the route (even: predictions, odd: labels), then the
 * body. Each input starts with a fresh daemon, so that runs repeat.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "calib/protocol.h"
#include "calibd.h"
#include "ingest.h"
#include "json_msg.h"

#include "fuzz.h"

static calibd *d;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d = fuzz_daemon_new();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
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
