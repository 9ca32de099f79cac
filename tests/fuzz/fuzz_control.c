/*
 * fuzz_control.c — requests to calibd's control socket ({"v": 1, "cmd":
 * "ping" | "status" | "refit", ...}, calibd(8)) through control_reply, the
 * handler control_on_message calls, without the socket. The daemon holds
 * models of every form with scored pairs and waiting items, so that a
 * status packs real statistics; they hold fewer samples than
 * refit_min_samples, so a refit is refused the same way every time (a
 * started one would run on a worker thread). Checked: every request,
 * whatever its bytes, is answered with exactly one msgpack map.
 *
 * An input is one request frame.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "calib/sample.h"
#include "calibd.h"
#include "control.h"
#include "registry.h"

#include "fuzz.h"

static calibd *d;

/* Model name, shaped with form and k (form < 0: never shaped), fed n
 * pairs and a few waiting predictions from a fixed seed. */
static void add_model(const char *name, int form, size_t k, int n)
{
    int why = 0;
    char err[300];
    model *m = registry_get(d, name, strlen(name), 1, &why);
    FUZZ_CHECK(m != NULL);
    if (form < 0)
        return;
    FUZZ_CHECK(registry_shape(d, m, form, k, err, sizeof err) == 0);
    calib_rng r;
    calib_rng_seed(&r, 42);
    double x[8 + SEG_MAX_KEYS] = {0}, t = 1.7e9; /* outputs, then no segment codes */
    for (int i = 0; i < n + 5; i++) {
        double u = (double)(calib_rng_next(&r) % 1000) / 1000;
        for (size_t j = 0; j < 8; j++)
            x[j] = form == CALIB_FORM_PROBS ? 1.0 / (double)k : u * (double)j - 1;
        if (form == CALIB_FORM_BINARY)
            x[0] = 0.05 + 0.9 * u;
        if (form == CALIB_FORM_GAUSSIAN)
            x[1] = 0.5 + u;
        double y = form == CALIB_FORM_GAUSSIAN ? u : (double)(calib_rng_next(&r) % (k ? k : 2));
        if (i < n) {
            model_observe(m, x, y, t + i, NULL);
        } else {
            calib_id id;
            calib_join_result jr;
            calib_id_u64(&id, (uint64_t)i);
            FUZZ_CHECK(calib_join_pred(&m->join, &id, x, t + i, tick_now(d), &jr) == CALIB_OK);
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d = fuzz_daemon_new();
    add_model("logits", CALIB_FORM_LOGITS, 3, 200);
    add_model("probs", CALIB_FORM_PROBS, 4, 50);
    add_model("binary", CALIB_FORM_BINARY, 2, 300);
    add_model("gauss", CALIB_FORM_GAUSSIAN, 0, 120);
    add_model("waiting", -1, 0, 0);
    fuzz_daemon_status(d); /* fills the views a status reads */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a frame of its own: ASan sees a read past its end */
    void *req = malloc(size ? size : 1);
    FUZZ_CHECK(req != NULL);
    memcpy(req, data, size);
    calib_mpw w;
    calib_mpw_init(&w);
    control_reply(d, req, size, &w);
    size_t end = 0;
    FUZZ_CHECK(calib_mpw_error(&w) == CALIB_OK);
    FUZZ_CHECK(calib_proto_scan(w.sb.data, w.sb.size, &end) == CALIB_REJ_NONE);
    FUZZ_CHECK(end == w.sb.size && fuzz_is_map(w.sb.data, w.sb.size));
    calib_mpw_destroy(&w);
    free(req);
    return 0;
}
