/* test_plugin.c — the built-in descriptors, descriptor checks, the registry,
 * loading the ets plugin and refusing one built against another ABI, and
 * ensemble temperature scaling at work. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/plugin.h"

/* $dir/$name, from an environment variable set by Makefile.am. */
static void plugin_path(char *buf, size_t len, const char *var, const char *name)
{
    const char *dir = getenv(var);
    if (!dir) {
        print_error("%s is not set (run through make check)\n", var);
        fail();
    }
    assert_true((size_t)snprintf(buf, len, "%s/%s", dir, name) < len);
}

/* ------------------------------------------------------------------ built-ins */

static void builtins_by_name(void **state)
{
    const calib_plugin *t = calib_plugin_find(NULL, "temperature");
    const calib_plugin *p = calib_plugin_builtin("platt");
    const calib_plugin *v = calib_plugin_builtin("variance");
    assert_non_null(t);
    assert_non_null(p);
    assert_non_null(v);
    assert_null(calib_plugin_builtin("ets"));
    assert_null(calib_plugin_find(NULL, "nope"));
    assert_null(calib_plugin_find(NULL, NULL));
    assert_int_equal(t->nparams, 1);
    assert_string_equal(t->param_names[0], "T");
    assert_true(t->fit == calib_recal_fit_temperature);
    assert_true(t->apply == calib_recal_apply_temperature);
    assert_int_equal(p->nparams, 2);
    assert_string_equal(p->param_names[0], "a");
    assert_string_equal(p->param_names[1], "b");
    assert_true(p->identity[0] == 1 && p->identity[1] == 0);
    assert_string_equal(v->param_names[0], "w");
    assert_true(v->forms == CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN));
    const calib_plugin *ls = calib_plugin_find(NULL, "location_scale");
    assert_non_null(ls);
    assert_int_equal(ls->nparams, 3);
    assert_string_equal(ls->param_names[2], "c");
    assert_true(ls->identity[0] == 0 && ls->identity[1] == 1 && ls->identity[2] == 1);
    assert_true(ls->forms == CALIB_FORM_BIT(CALIB_FORM_GAUSSIAN));
    assert_true(ls->fit == calib_recal_fit_location_scale);
    assert_true(ls->apply == calib_recal_apply_location_scale);
    const calib_plugin *all[4] = {t, p, v, ls};
    for (int i = 0; i < 4; i++)
        assert_int_equal(calib_plugin_check(all[i], NULL, 0), CALIB_OK);
}

/* ------------------------------------------------------------------ checks and registry */

static int dummy_fit(const calib_dataset *ds, const calib_recal_opts *opts,
                     calib_recal_result *res)
{
    return CALIB_EINVAL;
}

static int dummy_apply(const double *params, int form, size_t k,
                       const double *x, double *out)
{
    return CALIB_EINVAL;
}

static int init_calls, free_calls;

static int init_ok(char *err, size_t errlen)
{
    init_calls++;
    return 0;
}

static int init_fails(char *err, size_t errlen)
{
    snprintf(err, errlen, "no licence for %s", "frobnication");
    return -1;
}

static void free_counted(void)
{
    free_calls++;
}

#define DUMMY(nm)                                                           \
    {                                                                       \
        .abi_version = CALIB_PLUGIN_ABI_VERSION, .name = (nm),              \
        .forms = CALIB_FORM_BIT(CALIB_FORM_LOGITS), .nparams = 1,           \
        .param_names = {"x"}, .identity = {1}, .fit = dummy_fit,            \
        .apply = dummy_apply,                                               \
    }

static void descriptor_checks(void **state)
{
    char err[256];
    calib_plugin d = DUMMY("ok-name_1.2");
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_OK);
    char long_name[CALIB_PLUGIN_NAME_MAX + 1];
    memset(long_name, 'm', sizeof long_name);
    assert_true(calib_plugin_name_ok("ok-name_1.2", 11));
    assert_true(calib_plugin_name_ok(long_name, CALIB_PLUGIN_NAME_MAX));
    assert_false(calib_plugin_name_ok(long_name, sizeof long_name));
    assert_false(calib_plugin_name_ok("a:b", 3)); /* a topic's ':' is not a name's */
    assert_false(calib_plugin_name_ok("", 0));

    d.name = "has space";
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    assert_non_null(strstr(err, "name"));
    d.name = "";
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    d.name = "0123456789012345678901234567890123456789012345678901234567890123";
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    d.name = "x";
    d.nparams = 0;
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    d.nparams = CALIB_RECAL_MAX_PARAMS + 1;
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    d.nparams = 2; /* second name missing */
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    assert_non_null(strstr(err, "parameter 1"));
    d.nparams = 1;
    d.forms = 1u << 7;
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    d.forms = CALIB_FORM_BIT(CALIB_FORM_PROBS);
    d.apply = NULL;
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EINVAL);
    d.apply = dummy_apply;
    d.abi_version = 0;
    assert_int_equal(calib_plugin_check(&d, err, sizeof err), CALIB_EPLUGIN_ABI);
    assert_non_null(strstr(err, "ABI version 0"));
    /* a tiny buffer is truncated, never overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    calib_plugin_check(&d, tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), 7);
    assert_int_equal(calib_plugin_check(NULL, NULL, 0), CALIB_EINVAL);
    assert_string_equal(calib_plugin_strerror(CALIB_EPLUGIN_ABI),
                        "plugin built against another ABI version");
    assert_string_equal(calib_plugin_strerror(CALIB_EEMPTY), calib_strerror(CALIB_EEMPTY));
}

static calib_plugin many[CALIB_PLUGIN_MAX + 1];
static char many_names[CALIB_PLUGIN_MAX + 1][16];

static void registry_add_and_free(void **state)
{
    calib_plugin_registry r;
    char err[256];
    static const calib_plugin dup = DUMMY("temperature");
    static calib_plugin hooked = DUMMY("hooked");
    static calib_plugin failing = DUMMY("failing");
    hooked.init = init_ok;
    hooked.free = free_counted;
    failing.init = init_fails;
    failing.free = free_counted;

    calib_plugin_registry_init(&r);
    assert_int_equal(calib_plugin_add(&r, &dup, err, sizeof err), CALIB_EPLUGIN_EXISTS);
    assert_non_null(strstr(err, "\"temperature\" is already registered"));
    assert_int_equal(calib_plugin_add(&r, &failing, err, sizeof err), CALIB_EPLUGIN_INIT);
    assert_non_null(strstr(err, "failing: init failed: no licence for frobnication"));
    assert_null(calib_plugin_find(&r, "failing"));
    init_calls = free_calls = 0;
    assert_int_equal(calib_plugin_add(&r, &hooked, err, sizeof err), CALIB_OK);
    assert_int_equal(init_calls, 1);
    assert_ptr_equal(calib_plugin_find(&r, "hooked"), &hooked);
    assert_int_equal(calib_plugin_add(&r, &hooked, err, sizeof err), CALIB_EPLUGIN_EXISTS);
    assert_int_equal(init_calls, 1);
    for (size_t i = 1; i < CALIB_PLUGIN_MAX; i++) {
        snprintf(many_names[i], sizeof many_names[i], "m%zu", i);
        many[i] = (calib_plugin)DUMMY(many_names[i]);
        assert_int_equal(calib_plugin_add(&r, &many[i], err, sizeof err), CALIB_OK);
    }
    snprintf(many_names[0], sizeof many_names[0], "one-too-many");
    many[0] = (calib_plugin)DUMMY(many_names[0]);
    assert_int_equal(calib_plugin_add(&r, &many[0], err, sizeof err), CALIB_EFULL);
    assert_int_equal(r.len, CALIB_PLUGIN_MAX);
    calib_plugin_registry_free(&r);
    assert_int_equal(free_calls, 1);
    assert_int_equal(r.len, 0);
    assert_null(calib_plugin_find(&r, "hooked"));
}

/* ------------------------------------------------------------------ loading */

static void load_ets(void **state)
{
    calib_plugin_registry r;
    char path[4096], err[512];
    plugin_path(path, sizeof path, "CALIB_PLUGIN_DIR", "ets.so");
    calib_plugin_registry_init(&r);
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_OK);
    const calib_plugin *e = calib_plugin_find(&r, "ets");
    assert_non_null(e);
    assert_int_equal(e->nparams, 4);
    assert_string_equal(e->param_names[0], "t");
    assert_string_equal(e->param_names[3], "w3");
    assert_int_equal(calib_plugin_check(e, err, sizeof err), CALIB_OK);
    /* loading it twice is refused by name, and leaves the first alone */
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_EPLUGIN_EXISTS);
    assert_non_null(strstr(err, path));
    assert_int_equal(r.len, 1);
    assert_ptr_equal(calib_plugin_find(&r, "ets"), e);
    calib_plugin_registry_free(&r);
}

static void refuse_other_abi(void **state)
{
    calib_plugin_registry r;
    char path[4096], err[512], want[64];
    plugin_path(path, sizeof path, "CALIB_TEST_PLUGIN_DIR", "bad_abi.so");
    calib_plugin_registry_init(&r);
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_EPLUGIN_ABI);
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    snprintf(want, sizeof want, "plugin ABI version %u, but this libcalib has ABI version %u",
             CALIB_PLUGIN_ABI_VERSION + 1, CALIB_PLUGIN_ABI_VERSION);
    assert_non_null(strstr(err, want));
    assert_int_equal(r.len, 0);
    assert_null(calib_plugin_find(&r, "bad_abi"));
    calib_plugin_registry_free(&r);
}

static void refuse_missing_and_foreign(void **state)
{
    calib_plugin_registry r;
    char path[4096], err[512];
    calib_plugin_registry_init(&r);
    plugin_path(path, sizeof path, "CALIB_PLUGIN_DIR", "no-such-plugin.so");
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_EPLUGIN_OPEN);
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    /* a shared object that is not a plugin: libcalib itself */
    plugin_path(path, sizeof path, "BUILDDIR", ".libs/libcalib.so");
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_EPLUGIN_SYMBOL);
    assert_non_null(strstr(err, CALIB_PLUGIN_SYMBOL));
    assert_int_equal(calib_plugin_load(&r, NULL, err, sizeof err), CALIB_EINVAL);
    assert_int_equal(r.len, 0);
    calib_plugin_registry_free(&r);
}

/* ------------------------------------------------------------------ ets at work */

/* Logits z ~ N(0, 1.5^2); labels from 0.8 softmax(z / 2) + 0.2 uniform: an
 * overconfident model whose errors are partly uniform, the case ETS's
 * uniform component is for. */
static double *gen_distorted(size_t n, size_t k, uint64_t seed)
{
    calib_rng r;
    double *rec = malloc(n * (k + 1) * sizeof *rec), *p = malloc(k * sizeof *p);
    assert_non_null(rec);
    assert_non_null(p);
    calib_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        double *z = rec + i * (k + 1), u, c = 0;
        for (size_t j = 0; j < k; j++) {
            z[j] = 1.5 * calib_rng_normal(&r);
            p[j] = z[j] / 2;
        }
        calib_softmax(p, k, p);
        z[k] = (double)(k - 1);
        u = calib_rng_uniform(&r);
        for (size_t j = 0; j < k; j++) {
            c += 0.8 * p[j] + 0.2 / (double)k;
            if (u < c) {
                z[k] = (double)j;
                break;
            }
        }
    }
    free(p);
    return rec;
}

static void ets_improves_brier(void **state)
{
    calib_plugin_registry r;
    char path[4096], err[512];
    const size_t n = 20000, k = 10;
    plugin_path(path, sizeof path, "CALIB_PLUGIN_DIR", "ets.so");
    calib_plugin_registry_init(&r);
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_OK);
    const calib_plugin *ets = calib_plugin_find(&r, "ets");
    const calib_plugin *temp = calib_plugin_find(&r, "temperature");
    double *fit = gen_distorted(n, k, 81), *test = gen_distorted(n, k, 82);
    calib_dataset dfit = {CALIB_FORM_LOGITS, k, n, k + 1, fit};
    calib_dataset dtest = {CALIB_FORM_LOGITS, k, n, k + 1, test};
    calib_recal_result res, tres;
    calib_recal_improvement imp;

    assert_int_equal(ets->fit(&dfit, NULL, &res), CALIB_OK);
    assert_int_equal(res.nparams, 4);
    assert_int_equal(res.objective, CALIB_RECAL_OBJ_BRIER);
    assert_true(res.converged);
    double t = res.params[0], *w = res.params + 1;
    assert_true(t >= CALIB_RECAL_T_MIN && t <= CALIB_RECAL_T_MAX);
    assert_true(w[0] >= 0 && w[1] >= 0 && w[2] >= 0);
    assert_close(w[0] + w[1] + w[2], 1, 1e-12);
    assert_true(w[2] > 0.05); /* it found the uniform part */
    assert_true(res.objective_after < res.objective_before);

    /* ETS contains temperature scaling (w = (1, 0, 0)): on the fitting data
     * it is at least as good as temperature fitted by the same score */
    calib_recal_opts bo = {.objective = CALIB_RECAL_OBJ_BRIER};
    assert_int_equal(temp->fit(&dfit, &bo, &tres), CALIB_OK);
    assert_true(res.objective_after <= tres.objective_after + 1e-12);

    /* and on fresh data it improves the Brier score, with an interval
     * above 0, over the raw outputs and over the temperature alone */
    assert_int_equal(calib_recal_compare(&dtest, NULL, NULL, ets->apply, res.params, &imp),
                     CALIB_OK);
    assert_true(imp.brier.mean > 0 && imp.brier.ci[0] > 0);
    assert_int_equal(calib_recal_compare(&dtest, temp->apply, tres.params, ets->apply,
                                         res.params, &imp),
                     CALIB_OK);
    assert_true(imp.brier.mean > 0 && imp.brier.ci[0] > 0);

    /* identity parameters reproduce the raw outputs */
    assert_int_equal(calib_recal_compare(&dtest, NULL, NULL, ets->apply, ets->identity, &imp),
                     CALIB_OK);
    assert_close(imp.brier.mean, 0, 1e-14);
    free(fit);
    free(test);
    calib_plugin_registry_free(&r);
}

static void ets_apply_in_place_and_probs(void **state)
{
    calib_plugin_registry r;
    char path[4096], err[512];
    plugin_path(path, sizeof path, "CALIB_PLUGIN_DIR", "ets.so");
    calib_plugin_registry_init(&r);
    assert_int_equal(calib_plugin_load(&r, path, err, sizeof err), CALIB_OK);
    const calib_plugin *ets = calib_plugin_find(&r, "ets");
    const double params[4] = {1.7, 0.6, 0.3, 0.1};
    double z[5] = {0.3, -1, 2, 0.5, -0.2}, a[5], b[5], out[5], inplace[5], pr[5];
    for (int j = 0; j < 5; j++) {
        a[j] = z[j] / 1.7;
        b[j] = z[j];
    }
    calib_softmax(a, 5, a);
    calib_softmax(b, 5, b);
    assert_int_equal(ets->apply(params, CALIB_FORM_LOGITS, 5, z, out), CALIB_OK);
    memcpy(inplace, z, sizeof z);
    ets->apply(params, CALIB_FORM_LOGITS, 5, inplace, inplace);
    calib_softmax(z, 5, pr);
    ets->apply(params, CALIB_FORM_PROBS, 5, pr, pr);
    double sum = 0;
    for (int j = 0; j < 5; j++) {
        double want = 0.6 * a[j] + 0.3 * b[j] + 0.1 / 5;
        assert_close(out[j], want, 1e-15);
        assert_close(inplace[j], want, 1e-15);
        assert_close(pr[j], want, 1e-14);
        sum += out[j];
    }
    assert_close(sum, 1, 1e-15);
    assert_int_equal(ets->apply(params, CALIB_FORM_GAUSSIAN, 0, z, out), CALIB_EINVAL);

    /* fit validates: bad warm start, wrong objective, wrong form */
    calib_dataset ds = {CALIB_FORM_LOGITS, 5, 1, 6, (double[6]){0, 1, 2, 3, 4, 2}};
    calib_recal_result res;
    const double bad[4] = {1, 0.5, 0.6, 0};
    calib_recal_opts o = {.init = bad};
    assert_int_equal(ets->fit(&ds, &o, &res), CALIB_EINVAL);
    o = (calib_recal_opts){.objective = CALIB_RECAL_OBJ_NLL};
    assert_int_equal(ets->fit(&ds, &o, &res), CALIB_EINVAL);
    ds.form = CALIB_FORM_GAUSSIAN;
    assert_int_equal(ets->fit(&ds, NULL, &res), CALIB_EINVAL);
    ds.form = CALIB_FORM_LOGITS;
    ds.n = 0;
    assert_int_equal(ets->fit(&ds, NULL, &res), CALIB_EEMPTY);
    calib_plugin_registry_free(&r);
}

/* Stored or received parameters outside a method's domain are refused
 * with the parameter's name; the identity and fitted values pass. */
static void params_domain(void **state)
{
    const calib_plugin *t = calib_plugin_builtin("temperature"),
                       *pl = calib_plugin_builtin("platt"),
                       *v = calib_plugin_builtin("variance"),
                       *ls = calib_plugin_builtin("location_scale");
    char err[256];
    const struct {
        const calib_plugin *p;
        double v[3];
        int ok;
        const char *says;
    } cases[] = {
        {t, {1, 0}, 1, NULL},
        {t, {0.05, 0}, 1, NULL},
        {t, {1e6, 0}, 1, NULL},
        {t, {0, 0}, 0, "T = 0 must be > 0"},
        {t, {-2, 0}, 0, "T = -2 must be > 0"},
        {t, {NAN, 0}, 0, "T = nan is not finite"},
        {t, {INFINITY, 0}, 0, "not finite"},
        {pl, {1, 0}, 1, NULL},
        {pl, {-0.5, 3}, 1, NULL},
        {pl, {1, NAN}, 0, "b = nan is not finite"},
        {v, {1, 0}, 1, NULL},
        {v, {4, 0.25}, 1, NULL},
        {v, {0, 1}, 0, "w = 0 must be > 0"},
        {v, {-1, 0}, 0, "w = -1 must be > 0"},
        {v, {1, -0.5}, 0, "b = -0.5 must be >= 0"},
        {ls, {0, 1, 1}, 1, NULL},
        {ls, {-3.5, 0.2, 4}, 1, NULL},
        {ls, {0, 0, 1}, 0, "b = 0 must be > 0"},
        {ls, {0, 1, 0}, 0, "c = 0 must be > 0"},
        {ls, {NAN, 1, 1}, 0, "a = nan is not finite"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        int rc = calib_plugin_params_check(cases[i].p, cases[i].v, err, sizeof err);
        assert_int_equal(rc, cases[i].ok ? CALIB_OK : CALIB_EINVAL);
        if (cases[i].says && !strstr(err, cases[i].says)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, cases[i].says);
            fail();
        }
    }
    assert_int_equal(calib_plugin_params_check(NULL, cases[0].v, err, sizeof err),
                     CALIB_EINVAL);
}

/* A plugin whose apply accepts anything: the probe catches parameters that
 * make it output invalid predictions. */
static int apply_scale(const double *params, int form, size_t k, const double *x,
                       double *out)
{
    for (size_t j = 0; j < calib_form_width(form, k); j++)
        out[j] = params[0] * x[j];
    return CALIB_OK;
}

static void params_probe_plugin(void **state)
{
    calib_plugin scale = {
        .abi_version = CALIB_PLUGIN_ABI_VERSION, .name = "scale",
        .forms = CALIB_FORM_BIT(CALIB_FORM_BINARY), .nparams = 1,
        .param_names = {"s"}, .identity = {1},
        .fit = calib_recal_fit_temperature, .apply = apply_scale,
    };
    char err[256];
    double good = 1, bad = 3;
    assert_int_equal(calib_plugin_params_check(&scale, &good, err, sizeof err), CALIB_OK);
    assert_int_equal(calib_plugin_params_check(&scale, &bad, err, sizeof err), CALIB_EINVAL);
    assert_non_null(strstr(err, "do not map a binary prediction to a valid one"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(builtins_by_name),
        cmocka_unit_test(descriptor_checks),
        cmocka_unit_test(registry_add_and_free),
        cmocka_unit_test(load_ets),
        cmocka_unit_test(params_domain),
        cmocka_unit_test(params_probe_plugin),
        cmocka_unit_test(refuse_other_abi),
        cmocka_unit_test(refuse_missing_and_foreign),
        cmocka_unit_test(ets_improves_brier),
        cmocka_unit_test(ets_apply_in_place_and_probs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
