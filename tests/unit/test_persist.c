/* test_persist.c — the daemon's periodic snapshot on a libuv loop,
 * without sockets: the loop packs the models into one chunk while the
 * worker writes the other, and copies a large model for the worker to
 * pack; the file so written holds the same body, byte for byte, as the
 * final snapshot written in one go on the calling thread; it opens, checks
 * out, and restores every model with its pairs, and a daemon restored from
 * it counts on from the daemon's counters. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibd.h"
#include "persist.h"
#include "registry.h"
#include "snapshot.h"
#include "state.h"

enum { MODELS = 24, K = 10, PAIRS = 1500, BIG = 12, BIG_PAIRS = 60000 };

static calibd *daemon_new(uv_loop_t *loop, char *dir)
{
    calibd *d = calloc(1, sizeof *d);
    assert_non_null(d);
    assert_int_equal(config_init(&d->cfg), 0);
    log_init(&d->log, LOG_ERROR, stderr);
    assert_int_equal(calibd_init(d, loop, 12345), 0);
    free(d->cfg.state_dir);
    d->cfg.state_dir = strdup(dir);
    assert_non_null(d->cfg.state_dir);
    d->cfg.snapshot_interval = 30;
    return d;
}

static void daemon_free(calibd *d)
{
    persist_stop(d);
    persist_free(d);
    calibd_free(d);
    free(d);
}

/* MODELS models of K logits, each with PAIRS pairs in its ring: about
 * 200 KB packed each, so that the body spans several chunks; model BIG
 * with BIG_PAIRS, over 4 MiB, the size a snapshot copies. */
static void fill(calibd *d)
{
    d->cfg.defaults.ring = BIG_PAIRS;
    char name[32], why[256];
    int reject = 0;
    calib_rng r;
    calib_rng_seed(&r, 99);
    double x[K + SEG_MAX_KEYS] = {0};
    for (int i = 0; i < MODELS; i++) {
        int n = snprintf(name, sizeof name, "m%02d", i);
        model *m = registry_get(d, name, (size_t)n, 1, &reject);
        assert_non_null(m);
        assert_int_equal(registry_shape(d, m, CALIB_FORM_LOGITS, K, why, sizeof why), 0);
        for (int p = 0; p < (i == BIG ? BIG_PAIRS : PAIRS); p++) {
            for (int j = 0; j < K; j++)
                x[j] = 2 * calib_rng_normal(&r);
            model_observe(m, x, (double)(calib_rng_next(&r) % K), 1000 + 0.01 * p, NULL);
            m->predictions++, m->labels++;
        }
    }
}

static char *read_snapshot(const char *dir, size_t *len)
{
    char *data = NULL, err[256];
    assert_int_equal(state_read_file(dir, SNAPSHOT_FILE, (size_t)1 << 30, &data, len, err,
                                     sizeof err), 0);
    return data;
}

static void periodic_equals_final(void **state)
{
    char dir[] = "/tmp/calibd-persist-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    calibd *d = daemon_new(&loop, dir);
    fill(d);
    /* a counter of each kind the status map shows */
    d->messages = 90001;
    d->rejected[REJ_SHAPE] = 7;
    d->publish_errors = 2;
    d->reloads = 3, d->reloads_refused = 1;
    d->reg.forgotten = 4, d->reg.expired = 5;
    d->alert.sent = 6, d->alert.suppressed = 8;
    d->alert.sinks_failed = 9, d->alert.sinks_killed = 10, d->alert.sinks_dropped = 11;
    persist_tick(d);            /* the first tick readies the slicer */
    d->snap.next_due = -1e300;  /* due now */
    persist_tick(d);
    assert_true(d->snap.packing);
    uv_run(&loop, UV_RUN_DEFAULT); /* the slices, the worker's chunks, the write */
    assert_int_equal(d->snap.errors, 0);
    assert_int_equal(d->snap.writes, 1);
    assert_int_equal(d->snap.models, MODELS);
    assert_true(d->reg.models[BIG]->mem.used >= ((size_t)4 << 20));
    assert_int_equal(d->snap.copied, 1); /* BIG, packed by the worker */
    assert_false(d->snap.packing || d->snap.all_packed || d->snap.flushing ||
                 d->snap.writing);
    /* the body spanned chunks: the worker wrote several of them */
    assert_true(d->snap.bytes > SNAPSHOT_HEAD_SLOT + 3 * ((size_t)1 << 20));
    size_t plen, flen;
    char *periodic = read_snapshot(dir, &plen);
    assert_int_equal(plen, d->snap.bytes);

    assert_int_equal(persist_final(d), 0);
    char *final = read_snapshot(dir, &flen);
    assert_int_equal(flen, plen);
    assert_memory_equal(periodic + SNAPSHOT_HEAD_SLOT, final + SNAPSHOT_HEAD_SLOT,
                        plen - SNAPSHOT_HEAD_SLOT);

    /* the periodic file checks out and restores every model whole */
    snapshot_head h;
    char err[600];
    assert_int_equal(snapshot_open(periodic, plen, &h, err, sizeof err), 0);
    assert_int_equal(h.models, MODELS);
    calibd *e = daemon_new(&loop, dir);
    uint64_t n, lost, pairs, waiting;
    assert_int_equal(persist_restore_models(e, &h, 0, &n, &lost, &pairs, &waiting, err,
                                            sizeof err), 0);
    assert_int_equal(n, MODELS);
    assert_int_equal(lost, 0);
    assert_int_equal(pairs, (uint64_t)(MODELS - 1) * PAIRS + BIG_PAIRS);
    assert_int_equal(e->reg.n, MODELS);
    free(periodic);
    free(final);
    daemon_free(e);
    /* a daemon restored from the final file: its models, and the counters
     * on from where they were */
    e = daemon_new(&loop, dir);
    assert_int_equal(persist_restore(e), 0);
    assert_int_equal(e->reg.n, MODELS);
    snapshot_counts was, now;
    calibd_counts(d, &was);
    calibd_counts(e, &now);
    assert_memory_equal(&was, &now, sizeof was);
    assert_int_equal(now.alerts_sent, 6);
    assert_int_equal(now.sinks_dropped, 11);
    daemon_free(e);
    daemon_free(d);
    uv_run(&loop, UV_RUN_DEFAULT); /* the closed handles */
    assert_int_equal(uv_loop_close(&loop), 0);
    char path[sizeof dir + sizeof SNAPSHOT_FILE + 1];
    snprintf(path, sizeof path, "%s/%s", dir, SNAPSHOT_FILE);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(periodic_equals_final),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
