/* test_registry.c — the daemon's models by name, without sockets: hashed
 * lookup over many names, creation refused past max_models, past
 * memory_limit, or for an unknown name without auto_models, and removal
 * (calibctl forget, model_idle_ttl). */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibd.h"
#include "ingest.h"
#include "kafka.h"
#include "registry.h"
#include "status.h"

static calibd *daemon_new(void)
{
    calibd *d = calloc(1, sizeof *d);
    assert_non_null(d);
    assert_int_equal(config_init(&d->cfg), 0);
    log_init(&d->log, LOG_ERROR, stderr);
    /* the default loop for its clock only: models note their creation */
    assert_int_equal(calibd_init(d, uv_default_loop(), 12345), 0);
    /* small models: many fit */
    d->cfg.defaults.max_pending = 16;
    d->cfg.defaults.joined_memory = 16;
    return d;
}

static void daemon_free(calibd *d)
{
    calibd_free(d);
    free(d);
}

static void many_names_found(void **state)
{
    enum { MANY = 3000 }; /* past the old fixed bound of 1024 */
    calibd *d = daemon_new();
    d->cfg.max_models = MANY;
    char name[32];
    int why = 0;
    for (int i = 0; i < MANY; i++) {
        int n = snprintf(name, sizeof name, "model-%d", i);
        assert_non_null(registry_get(d, name, (size_t)n, 1, &why));
    }
    assert_int_equal(d->reg.n, MANY);
    for (int i = MANY - 1; i >= 0; i--) {
        int n = snprintf(name, sizeof name, "model-%d", i);
        model *m = registry_find(d, name, (size_t)n);
        assert_non_null(m);
        assert_string_equal(m->name, name);
        /* a prefix or an extension is another name */
        assert_true(registry_find(d, name, (size_t)n - 1) != m);
    }
    assert_null(registry_find(d, "model-", 6));
    assert_null(registry_find(d, "model-1x", 8));
    /* asking again does not create twice */
    assert_ptr_equal(registry_get(d, "model-7", 7, 1, &why), registry_find(d, "model-7", 7));
    assert_int_equal(d->reg.n, MANY);
    /* one more is refused */
    why = 0;
    assert_null(registry_get(d, "one-more", 8, 1, &why));
    assert_int_equal(why, REJ_TOO_MANY_MODELS);
    daemon_free(d);
}

static void creation_refused(void **state)
{
    calibd *d = daemon_new();
    int why = 0;
    /* not found, not created: nothing happens */
    assert_null(registry_get(d, "a", 1, 0, &why));
    assert_int_equal(d->reg.n, 0);
    /* memory_limit: room for three models and no more; what one holds
     * when new is measured on a first one */
    assert_non_null(registry_get(d, "first", 5, 1, &why));
    size_t one = d->reg.mem.used;
    assert_true(one > sizeof(model) && one < 256 * 1024);
    registry_free(d);
    assert_int_equal(d->reg.mem.used, 0);
    d->cfg.memory_limit = 3 * one + one / 2;
    assert_non_null(registry_get(d, "a", 1, 1, &why));
    assert_non_null(registry_get(d, "b", 1, 1, &why));
    assert_non_null(registry_get(d, "c", 1, 1, &why));
    assert_null(registry_get(d, "d", 1, 1, &why));
    assert_int_equal(why, REJ_MEMORY_LIMIT);
    assert_int_equal(d->reg.mem.used, 3 * one);
    /* auto_models = no: only configured names */
    d->cfg.auto_models = 0;
    d->cfg.memory_limit = (uint64_t)1 << 40;
    why = 0;
    assert_null(registry_get(d, "e", 1, 1, &why));
    assert_int_equal(why, REJ_UNKNOWN_MODEL);
    /* a name too long for a model is never created */
    char longname[CFG_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname);
    d->cfg.auto_models = 1;
    assert_null(registry_get(d, longname, sizeof longname, 1, &why));
    daemon_free(d);
}

/* A model removed: the others keep their order and are still found, its
 * memory goes back, and its name can be made again. */
static void removal_keeps_the_others(void **state)
{
    calibd *d = daemon_new();
    int why = 0;
    const char *names[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        assert_non_null(registry_get(d, names[i], 1, 1, &why));
    size_t four = d->reg.mem.used;
    registry_remove(d, registry_find(d, "b", 1));
    assert_int_equal(d->reg.n, 3);
    assert_true(d->reg.mem.used < four);
    assert_null(registry_find(d, "b", 1));
    for (int i = 0; i < 4; i++)
        if (i != 1)
            assert_string_equal(registry_find(d, names[i], 1)->name, names[i]);
    assert_string_equal(d->reg.models[1]->name, "c");
    assert_non_null(registry_get(d, "b", 1, 1, &why));
    assert_int_equal(d->reg.mem.used, four);
    daemon_free(d);
}

static void no_warning(void *arg, const char *msg)
{
    fail_msg("unexpected warning: %s", msg);
}

/* registry_collect: a model marked forgotten goes, unless something walks
 * the models (busy) or a worker holds it (a fit under way); with
 * model_idle_ttl, an unconfigured model without a pair goes after that
 * long without a message, a configured one or one with pairs stays. */
static void collect_forgotten_and_idle(void **state)
{
    calibd *d = daemon_new();
    d->cfg.model_idle_ttl = 60;
    char err[300], path[] = "/tmp/test_registry.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("[model kept]\n", f); /* configured: never expires */
    fclose(f);
    assert_int_equal(config_load(&d->cfg, path, no_warning, NULL, err, sizeof err), 0);
    unlink(path);
    int why = 0;
    model *gone = registry_get(d, "gone", 4, 1, &why), *idle = registry_get(d, "idle", 4, 1, &why);
    model *busy = registry_get(d, "busy", 4, 1, &why), *kept = registry_get(d, "kept", 4, 1, &why);
    model *scored = registry_get(d, "scored", 6, 1, &why);
    assert_true(gone && idle && busy && kept && scored);
    scored->scored = 1;
    gone->forget = 1;
    busy->forget = 1;
    busy->recalib.refit.phase = PHASE_FITTING;
    /* times of the loop's clock that hold their differences exactly: the
     * clock's own reading, far from 0, would round t0 + 70 - (t0 + 10)
     * below 60 for some readings */
    double t0 = 1000;
    gone->created_mono = idle->created_mono = busy->created_mono = t0;
    kept->created_mono = scored->created_mono = t0;
    /* something walks the models: nothing goes; two walks, each held
     * until its end, and an end too many changes nothing */
    registry_walk_begin(&d->reg);
    registry_walk_begin(&d->reg);
    assert_int_equal(registry_collect(d, t0 + 1, registry_walked(d)), 0);
    registry_walk_end(&d->reg);
    assert_int_equal(registry_collect(d, t0 + 1, registry_walked(d)), 0);
    registry_walk_end(&d->reg);
    registry_walk_end(&d->reg);
    assert_false(registry_walked(d));
    assert_int_equal(registry_collect(d, t0 + 1, registry_walked(d)), 1);
    assert_null(registry_find(d, "gone", 4));
    assert_int_equal(d->reg.forgotten, 1);
    /* idle for 60 s: the unconfigured one without pairs goes */
    idle->last_prediction_mono = t0 + 10;
    assert_int_equal(registry_collect(d, t0 + 69, 0), 0);
    assert_int_equal(registry_collect(d, t0 + 70, 0), 1);
    assert_null(registry_find(d, "idle", 4));
    assert_int_equal(d->reg.expired, 1);
    assert_non_null(registry_find(d, "kept", 4));
    assert_non_null(registry_find(d, "scored", 6));
    /* the fit done, the forgotten one goes */
    busy->recalib.refit.phase = PHASE_IDLE;
    assert_int_equal(registry_collect(d, t0 + 71, 0), 1);
    assert_int_equal(d->reg.n, 2);
    assert_int_equal(d->reg.forgotten, 2);
    daemon_free(d);
}

/* A revoked Kafka partition's models (kafka.h): out of the index at once,
 * so that the name makes a new model (a message, or a snapshot restored
 * when the partition comes back); not listed; freed once no worker holds
 * them, counted as handed over. A message from elsewhere to a partition's
 * model, or from a partition to another's, is refused (other_source). */
static void handed_over_models(void **state)
{
    calibd *d = daemon_new();
    d->cfg.defaults.form = CALIB_FORM_BINARY;
    kafka_part p0 = {.topic = "preds", .partition = 0}, p1 = {.topic = "preds", .partition = 1};
    int why = 0;
    d->source = &p0;
    model *a = registry_get(d, "a", 1, 1, &why), *b = registry_get(d, "b", 1, 1, &why);
    d->source = NULL;
    model *z = registry_get(d, "z", 1, 1, &why);
    assert_true(a && b && z);
    assert_ptr_equal(a->kpart, &p0);
    assert_ptr_equal(b->kpart, &p0);
    assert_null(z->kpart);
    /* the rule of sources, through the ingest path */
    char msg[64];
    size_t len = 0;
    {
        calib_mpw w;
        calib_mpw_init(&w);
        calib_mpw_map(&w);
        calib_mpw_key_uint(&w, "v", 1);
        calib_mpw_key(&w, "type");
        calib_mpw_str(&w, "label");
        calib_mpw_key(&w, "id");
        calib_mpw_str(&w, "x");
        calib_mpw_key_uint(&w, "y", 1);
        calib_mpw_end(&w);
        assert_true(w.sb.size <= sizeof msg);
        len = w.sb.size;
        memcpy(msg, w.sb.data, len);
        calib_mpw_destroy(&w);
    }
    ingest_message(d, "a", 1, msg, len, -1, NULL); /* ZeroMQ to p0's model */
    assert_int_equal(a->rejected[REJ_OTHER_SOURCE], 1);
    d->source = &p1;
    ingest_message(d, "a", 1, msg, len, -1, NULL); /* p1 to p0's model */
    ingest_message(d, "z", 1, msg, len, -1, NULL); /* p1 to ZeroMQ's model */
    d->source = &p0;
    ingest_message(d, "a", 1, msg, len, -1, NULL); /* its own: taken */
    d->source = NULL;
    assert_int_equal(a->rejected[REJ_OTHER_SOURCE], 2);
    assert_int_equal(z->rejected[REJ_OTHER_SOURCE], 1);
    assert_int_equal(a->join.waiting_labels, 1);
    assert_string_equal(reject_name(REJ_OTHER_SOURCE), "other_source");
    /* p0 revoked: b is held by a worker */
    b->recalib.refit.phase = PHASE_FITTING;
    model *v[2] = {a, b};
    registry_hand_over(d, v, 2);
    assert_true(a->handed_over && b->handed_over);
    assert_null(registry_find(d, "a", 1));
    assert_null(registry_find(d, "b", 1));
    assert_ptr_equal(registry_find(d, "z", 1), z);
    /* not counted against max_models while they wait to be freed */
    assert_int_equal(d->reg.leaving, 2);
    d->cfg.max_models = 2;
    /* the names are free: p0 back (a restored snapshot) makes new ones */
    d->source = &p0;
    model *a2 = registry_get(d, "a", 1, 1, &why);
    d->source = NULL;
    assert_non_null(a2);
    assert_true(a2 != a && !a2->handed_over && a2->kpart == &p0);
    assert_ptr_equal(registry_find(d, "a", 1), a2);
    assert_null(registry_get(d, "c", 1, 1, &why)); /* z and a2: max_models */
    assert_int_equal(why, REJ_TOO_MANY_MODELS);
    /* status lists the live ones only */
    calib_mpw w;
    calib_mpw_init(&w);
    status_daemon sd = {0};
    status_pack(&w, &sd, d->reg.models, d->reg.n, NULL);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    assert_int_equal(msgpack_unpack_next(&u, w.sb.data, w.sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *models = NULL;
    for (uint32_t i = 0; i < u.data.via.map.size; i++)
        if (u.data.via.map.ptr[i].key.via.str.size == 6 &&
            memcmp(u.data.via.map.ptr[i].key.via.str.ptr, "models", 6) == 0)
            models = &u.data.via.map.ptr[i].val;
    assert_non_null(models);
    assert_int_equal(models->via.map.size, 2); /* z and the new a */
    msgpack_unpacked_destroy(&u);
    calib_mpw_destroy(&w);
    /* freed when nothing holds them */
    assert_int_equal(registry_collect(d, tick_now(d), 0), 1);
    assert_int_equal(d->reg.handed_over, 1);
    b->recalib.refit.phase = PHASE_IDLE;
    assert_int_equal(registry_collect(d, tick_now(d), 0), 1);
    assert_int_equal(d->reg.handed_over, 2);
    assert_int_equal(d->reg.forgotten, 0);
    assert_int_equal(d->reg.n, 2);
    assert_int_equal(d->reg.leaving, 0);
    assert_ptr_equal(registry_find(d, "a", 1), a2);
    daemon_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_names_found),
        cmocka_unit_test(creation_refused),
        cmocka_unit_test(removal_keeps_the_others),
        cmocka_unit_test(collect_forgotten_and_idle),
        cmocka_unit_test(handed_over_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
