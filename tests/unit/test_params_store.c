/* test_params_store.c — the parameters a serving node holds for a model,
 * without ZeroMQ: what a fresh store holds, newer versions only, the full
 * record, and readers that never see a torn set while a writer installs
 * a new one as fast as it can. */
#include "unit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/plugin.h"
#include "params_store.h"

#define NP CALIB_RECAL_MAX_PARAMS

/* Version v's set: every value a function of v and its slot, the method
 * alternating, so that a mix of two versions is visible. */
static double value_of(uint64_t v, unsigned j)
{
    return (double)v * NP + j;
}

static const calib_plugin *desc_of(uint64_t v)
{
    return calib_plugin_builtin(v % 2 ? "temperature" : "platt");
}

static void version_msg(calib_params_msg *p, uint64_t v)
{
    calib_params_msg_init(p, "m1");
    p->version = v;
    p->desc = desc_of(v);
    snprintf(p->method, sizeof p->method, "%s", p->desc->name);
    p->nparams = NP;
    for (unsigned j = 0; j < NP; j++) {
        snprintf(p->names[j], sizeof p->names[j], "p%u", j);
        p->values[j] = value_of(v, j);
    }
    p->n = v * 10;
}

static void fresh_store_holds_the_identity(void **state)
{
    pstore s;
    assert_int_equal(pstore_init(&s, "m1", 2), CALIB_OK);
    assert_string_equal(s.name, "m1");
    assert_true(pstore_version(&s) == 0);
    pstore_snapshot snap;
    pstore_load(&s, &snap);
    assert_true(snap.version == 0);
    assert_null(snap.desc);
    for (unsigned j = 0; j < NP; j++)
        assert_true(snap.values[j] == 0);
    calib_params_msg full;
    pstore_get(&s, &full);
    assert_string_equal(full.model, "m1");
    assert_true(full.version == 0 && full.nparams == 0 && full.n == 0);
    assert_nan(full.ts);
    assert_nan(full.improvement);
    assert_nan(full.ci[0]);
    assert_nan(full.ci[1]);
    pstore_destroy(&s);

    char longname[CALIB_PUBMSG_MODEL_MAX + 1];
    memset(longname, 'a', sizeof longname);
    assert_int_equal(pstore_init(&s, longname, sizeof longname), CALIB_EINVAL);
}

static void only_newer_versions_install(void **state)
{
    pstore s;
    calib_params_msg p, full;
    pstore_snapshot snap;
    assert_int_equal(pstore_init(&s, "m1", 2), CALIB_OK);

    version_msg(&p, 5);
    assert_int_equal(pstore_install(&s, &p), 1);
    assert_true(pstore_version(&s) == 5);
    pstore_load(&s, &snap);
    assert_true(snap.version == 5);
    assert_ptr_equal(snap.desc, desc_of(5));
    assert_true(snap.values[7] == 47);

    /* equal and older versions are refused and change nothing */
    version_msg(&p, 5);
    p.values[0] = -1;
    assert_int_equal(pstore_install(&s, &p), 0);
    version_msg(&p, 4);
    assert_int_equal(pstore_install(&s, &p), 0);
    pstore_load(&s, &snap);
    assert_true(snap.version == 5 && snap.values[0] == 40);
    pstore_get(&s, &full);
    assert_true(full.version == 5 && full.values[0] == 40 && full.n == 50);

    /* the full record is the last one installed */
    version_msg(&p, 9);
    p.nparams = 2;
    p.ts = 1.5e9;
    assert_int_equal(pstore_install(&s, &p), 1);
    pstore_get(&s, &full);
    assert_true(full.version == 9 && full.nparams == 2 && full.ts == 1.5e9);
    assert_string_equal(full.names[1], "p1");
    /* the seqlock copies the parameters the set has, zeros after */
    pstore_load(&s, &snap);
    assert_true(snap.values[1] == 73 && snap.values[2] == 0);
    pstore_destroy(&s);
}

/* ------------------------------------------------------------ threads */

#define VERSIONS 200000
#define READERS 2

typedef struct race {
    pstore s;
    atomic_int done;
} race;

typedef struct reader {
    race *r;
    uint64_t loads, torn, backwards, distinct;
} reader;

static void *write_versions(void *arg)
{
    race *r = arg;
    calib_params_msg p;
    for (uint64_t v = 1; v <= VERSIONS; v++) {
        version_msg(&p, v);
        pstore_install(&r->s, &p);
    }
    atomic_store(&r->done, 1);
    return NULL;
}

static int consistent(const pstore_snapshot *snap)
{
    if (snap->version == 0)
        return snap->desc == NULL && snap->values[0] == 0;
    if (snap->desc != desc_of(snap->version))
        return 0;
    for (unsigned j = 0; j < NP; j++)
        if (snap->values[j] != value_of(snap->version, j))
            return 0;
    return 1;
}

static void *read_versions(void *arg)
{
    reader *rd = arg;
    uint64_t last = 0;
    int finished = 0;
    /* one more pass after the writer is done */
    while (!finished) {
        finished = atomic_load(&rd->r->done);
        pstore_snapshot snap;
        pstore_load(&rd->r->s, &snap);
        rd->loads++;
        rd->torn += !consistent(&snap);
        rd->backwards += snap.version < last;
        rd->distinct += snap.version != last;
        last = snap.version;
    }
    return NULL;
}

/* Readers race one writer: every set they load is one version's, whole,
 * and the versions they see never go back. */
static void readers_never_see_a_torn_set(void **state)
{
    static race r;
    reader rd[READERS];
    pthread_t w, t[READERS];
    assert_int_equal(pstore_init(&r.s, "m1", 2), CALIB_OK);
    atomic_init(&r.done, 0);
    for (int i = 0; i < READERS; i++) {
        rd[i] = (reader){.r = &r};
        assert_int_equal(pthread_create(&t[i], NULL, read_versions, &rd[i]), 0);
    }
    assert_int_equal(pthread_create(&w, NULL, write_versions, &r), 0);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < READERS; i++) {
        print_message("reader %d: %llu loads, %llu versions seen, %llu torn\n", i,
                      (unsigned long long)rd[i].loads, (unsigned long long)rd[i].distinct,
                      (unsigned long long)rd[i].torn);
        assert_true(rd[i].torn == 0);
        assert_true(rd[i].backwards == 0);
        assert_true(rd[i].distinct > 1);
    }
    assert_true(pstore_version(&r.s) == VERSIONS);
    pstore_destroy(&r.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fresh_store_holds_the_identity),
        cmocka_unit_test(only_newer_versions_install),
        cmocka_unit_test(readers_never_see_a_torn_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
