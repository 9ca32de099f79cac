/*
 * fuzz_snapshot.c — a snapshot file (snapshot.h, calibd(8) SNAPSHOTS)
 * read both ways it is read:
 *   - by calibd at start: persist_restore() from the state directory,
 *     then the restored models take pairs, expire their waiting items and
 *     show their status; what they hold, snapshotted again, must restore
 *     again (else a restart would move calibd's own snapshot aside);
 *   - by calibctl: `calibctl snapshot FILE` (cmd_snapshot.c rebuilds each
 *     model from the configuration the file stores), and `calibctl merge
 *     FILE FILE -o OUT`, whose output `calibctl snapshot` must read.
 *
 * The body's sections are checksummed, which mutations would rarely keep:
 * the first byte of an input chooses what the rest is. Bit 0 clear: the
 * whole file; set: the body's maps only, each framed here in its section
 * (what follows the last whole map, as it is) under a header of the right
 * length and model count, so that mutations reach the models' parsing.
 * Bit 1 set: the rest is also read as the state directory's other msgpack
 * file, the page's history (hist.c, which http.c loads at start); what it
 * reads, written again, must read back to the same bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibd.h"
#include "ctl.h"
#include "hist.h"
#include "registry.h"
#include "snapshot.h"
#include "persist.h"

#include "fuzz.h"

static calibd *d;
static double *x; /* one prediction of any shape */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d = fuzz_daemon_new();
    FUZZ_CHECK((x = calloc(CALIB_PROTO_MAX_K, sizeof *x)) != NULL);
    fuzz_quiet_stdout(); /* calibctl prints its JSON */
    return 0;
}

/* body's maps framed as calibd frames them, each in its section (the
 * rest, past the last map, as it is: a damaged section), counting them */
static void frame(calib_mpw *head, calib_mpw *sections, const void *body, size_t len)
{
    uint64_t models = 0;
    size_t at = 0, end;
    const char *b = body;
    calib_mpw_reset(sections);
    while (at < len && calib_proto_scan(b + at, len - at, &end) == CALIB_REJ_NONE) {
        snapshot_section(sections, b + at, end);
        at += end;
        models++;
    }
    calib_mpw_raw(sections, b + at, len - at);
    snapshot_counts c = {.messages = 42, .alerts_sent = 5};
    c.rejected[REJ_SHAPE] = 3;
    snapshot_frame(head, sections->sb.data, sections->sb.size, models, 1.7e9, 1000, &c);
    FUZZ_CHECK(calib_mpw_error(head) == CALIB_OK && calib_mpw_error(sections) == CALIB_OK);
}

static int file_exists(const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    return access(path, F_OK) == 0;
}

/* calibd's snapshot of its models, as snapshots.c writes it */
static void snapshot_all(void)
{
    calib_mpw head, body;
    calib_mpw_init(&head);
    calib_mpw_init(&body);
    for (size_t i = 0; i < d->reg.n; i++)
        snapshot_pack_model(&body, d->reg.models[i]);
    snapshot_counts counts;
    calibd_counts(d, &counts);
    snapshot_frame(&head, body.sb.data, body.sb.size, d->reg.n, wall_now(), tick_now(d),
                   &counts);
    FUZZ_CHECK(calib_mpw_error(&head) == CALIB_OK && calib_mpw_error(&body) == CALIB_OK);
    size_t len = head.sb.size + body.sb.size;
    char *f = malloc(len);
    FUZZ_CHECK(f != NULL);
    memcpy(f, head.sb.data, head.sb.size);
    if (body.sb.size) /* no model: no buffer */
        memcpy(f + head.sb.size, body.sb.data, body.sb.size);
    fuzz_file(SNAPSHOT_FILE, f, len);
    free(f);
    calib_mpw_destroy(&head);
    calib_mpw_destroy(&body);
}

/* Pairs of the model's shape, and its waiting items expired. */
static void use(model *m)
{
    if (m->shaped) {
        size_t w = m->width;
        for (size_t j = 0; j < w; j++)
            x[j] = m->form == CALIB_FORM_PROBS ? 1.0 / (double)w
                   : m->form == CALIB_FORM_BINARY ? 0.25 : 1;
        for (int i = 0; i < 20; i++)
            model_observe(m, x, i % 2, 1.7e9 + i, NULL);
    }
    model_join_tick(m, tick_now(d) + 1e7);
}

static void as_calibd(const void *file, size_t len)
{
    fuzz_file(SNAPSHOT_FILE, file, len);
    FUZZ_CHECK(persist_restore(d) == 0);
    if (file_exists(SNAPSHOT_FILE)) { /* else moved aside: refused */
        /* a copy kept aside where a model's section was refused (that
         * model made afresh): what calibd writes now reads back whole */
        char bad[4400];
        snprintf(bad, sizeof bad, "%s/%s.bad", fuzz_dir(), SNAPSHOT_FILE);
        unlink(bad);
        size_t n = d->reg.n;
        snapshot_all();
        fuzz_daemon_clear(d);
        FUZZ_CHECK(persist_restore(d) == 0);
        FUZZ_CHECK(file_exists(SNAPSHOT_FILE) && !file_exists(SNAPSHOT_FILE ".bad"));
        FUZZ_CHECK(d->reg.n == n);
    }
    for (size_t i = 0; i < d->reg.n; i++)
        use(d->reg.models[i]);
    fuzz_daemon_status(d);
    fuzz_daemon_clear(d);
}

static void as_calibctl(const void *file, size_t len)
{
    char in[4400], out[4400];
    snprintf(in, sizeof in, "%s", fuzz_file("ctl.snapshot", file, len));
    snprintf(out, sizeof out, "%s/merged.snapshot", fuzz_dir());
    char *show[] = {"snapshot", in, NULL};
    int rc = cmd_snapshot(2, show);
    FUZZ_CHECK(rc == CTL_OK || rc == CTL_BADINPUT);
    char *merge[] = {"merge", in, in, "-o", out, NULL};
    if (cmd_merge(5, merge) == CTL_OK) {
        char *again[] = {"snapshot", out, NULL};
        FUZZ_CHECK(cmd_snapshot(2, again) == CTL_OK);
    }
}

static void as_history(const void *file, size_t len)
{
    hist h, again;
    char err[300];
    hist_init(&h, 32, 60);
    hist_init(&again, 32, 60);
    if (hist_read(&h, file, len, err, sizeof err) == 0) {
        calib_mpw w, w2;
        calib_mpw_init(&w);
        calib_mpw_init(&w2);
        hist_write(&h, &w);
        FUZZ_CHECK(calib_mpw_error(&w) == CALIB_OK);
        FUZZ_CHECK(hist_read(&again, w.sb.data, w.sb.size, err, sizeof err) == 0);
        hist_write(&again, &w2);
        FUZZ_CHECK(w.sb.size == w2.sb.size && memcmp(w.sb.data, w2.sb.data, w.sb.size) == 0);
        calib_mpw_destroy(&w);
        calib_mpw_destroy(&w2);
    }
    hist_free(&h);
    hist_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fuzz_dir_clear();
    const void *file = data + 1;
    size_t len = size - 1;
    calib_mpw head, sections;
    calib_mpw_init(&head);
    calib_mpw_init(&sections);
    char *framed = NULL;
    if (data[0] & 1) {
        frame(&head, &sections, data + 1, size - 1);
        len = head.sb.size + sections.sb.size;
        FUZZ_CHECK((framed = malloc(len ? len : 1)) != NULL);
        memcpy(framed, head.sb.data, head.sb.size);
        if (sections.sb.size)
            memcpy(framed + head.sb.size, sections.sb.data, sections.sb.size);
        file = framed;
    }
    if (data[0] & 2)
        as_history(data + 1, size - 1);
    as_calibd(file, len);
    as_calibctl(file, len);
    free(framed);
    calib_mpw_destroy(&head);
    calib_mpw_destroy(&sections);
    return 0;
}
