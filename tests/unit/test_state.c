/* test_state.c — calibd's state directory without a daemon: parameters
 * stored and read back (by name, never by position), files calibd cannot
 * trust refused, the directory's lock, stale temporary files. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/plugin.h"
#include "state.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/test_state.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int exists(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Saved, read back and ordered by name: every field as written. */
static void params_round_trip(void **state)
{
    const calib_plugin *platt = calib_plugin_builtin("platt");
    model_params p = {.desc = platt, .method = "platt", .version = 7, .n = 2,
                      .values = {1.25, -0.5}, .ts = 1700000000.5, .fit_n = 9000,
                      .shadow_n = 1234, .before = {0.4, 0.9}, .after = {0.35, 0.8},
                      .improvement = 0.05, .ci = {0.01, 0.09}};
    char err[512];
    assert_int_equal(state_save_params(dir, "m", &p, err, sizeof err), 0);
    assert_false(exists("model.m.params.tmp"));
    model_params q;
    state_param_names names;
    assert_int_equal(state_load_params(dir, "m", &q, names, err, sizeof err), 0);
    assert_int_equal(state_params_by_name(&q, names, platt, err, sizeof err), 0);
    assert_string_equal(q.method, "platt");
    assert_int_equal(q.version, 7);
    assert_int_equal(q.n, 2);
    assert_true(q.values[0] == 1.25 && q.values[1] == -0.5);
    assert_true(q.ts == p.ts && q.fit_n == 9000 && q.shadow_n == 1234);
    assert_true(q.before[1] == 0.9 && q.after[0] == 0.35);
    assert_true(q.improvement == 0.05 && q.ci[0] == 0.01 && q.ci[1] == 0.09);
    assert_int_equal(q.nseg, 0);
    /* segments' own parameters: a value with spaces and '=' comes back */
    p.nseg = 2;
    p.seg[0] = (calib_params_segment){"country", "DE", {2.5, 0.25}};
    p.seg[1] = (calib_params_segment){"city", "S\xc3\xa3o Paulo = SP", {0.5, -1}};
    assert_int_equal(state_save_params(dir, "m", &p, err, sizeof err), 0);
    assert_int_equal(state_load_params(dir, "m", &q, names, err, sizeof err), 0);
    assert_int_equal(state_params_by_name(&q, names, platt, err, sizeof err), 0);
    assert_int_equal(q.nseg, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(q.seg[i].key, p.seg[i].key);
        assert_string_equal(q.seg[i].value, p.seg[i].value);
        assert_true(q.seg[i].values[0] == p.seg[i].values[0] &&
                    q.seg[i].values[1] == p.seg[i].values[1]);
    }
    /* the prior correction of a label-free version, at its largest */
    p.nw = CALIB_PUBMSG_MAX_WEIGHTS;
    for (unsigned j = 0; j < p.nw; j++)
        p.w[j] = 1.0 / 3 + j;
    p.label_free = 1;
    assert_int_equal(state_save_params(dir, "m", &p, err, sizeof err), 0);
    assert_int_equal(state_load_params(dir, "m", &q, names, err, sizeof err), 0);
    assert_int_equal(q.nw, p.nw);
    for (unsigned j = 0; j < p.nw; j++)
        assert_true(q.w[j] == p.w[j]);
    assert_int_equal(q.label_free, 1);
    assert_int_equal(q.nseg, 2);
    /* no file: nothing stored */
    assert_int_equal(state_load_params(dir, "none", &q, names, err, sizeof err), 1);
}

/* Parameters are restored by their names: a file that lists b before a
 * (written by hand, or by another version) means the same map. */
static void params_by_name_not_position(void **state)
{
    const calib_plugin *platt = calib_plugin_builtin("platt");
    char err[512];
    model_params q;
    state_param_names names;
    write_file("model.swap.params",
               "version 3\nmethod platt\nparam b -0.5\nparam a 1.25\nsegment 7 3 k=v\n");
    assert_int_equal(state_load_params(dir, "swap", &q, names, err, sizeof err), 0);
    assert_int_equal(state_params_by_name(&q, names, platt, err, sizeof err), 0);
    assert_true(q.values[0] == 1.25 && q.values[1] == -0.5);
    /* a segment's values follow the param lines' order: b 7, a 3 */
    assert_true(q.seg[0].values[0] == 3 && q.seg[0].values[1] == 7);
    /* a last line without its newline is read too */
    write_file("model.swap.params", "version 3\nmethod temperature\nparam T 2\nsegment 3 k=v w");
    assert_int_equal(state_load_params(dir, "swap", &q, names, err, sizeof err), 0);
    assert_string_equal(q.seg[0].value, "v w");
    /* a segment's values outside the method's domain: refused */
    write_file("model.swap.params", "version 3\nmethod temperature\nparam T 2\nsegment -1 k=v\n");
    assert_int_equal(state_load_params(dir, "swap", &q, names, err, sizeof err), 0);
    assert_int_equal(state_params_by_name(&q, names, calib_plugin_builtin("temperature"), err,
                                          sizeof err), -1);
    assert_non_null(strstr(err, "segment k=v"));

    const struct {
        const char *text, *says;
    } bad[] = {
        {"version 3\nmethod platt\nparam a 1\n", "platt parameter b is not stored"},
        {"version 3\nmethod platt\nparam a 1\nparam a 2\n", "platt parameter a is stored twice"},
        {"version 3\nmethod platt\nparam a 1\nparam b 0\nparam c 2\n",
         "3 parameters stored, platt has 2"},
        {"version 3\nmethod platt\nparam T 1\nparam b 0\n", "platt parameter a is not stored"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file("model.bad.params", bad[i].text);
        assert_int_equal(state_load_params(dir, "bad", &q, names, err, sizeof err), 0);
        assert_int_equal(state_params_by_name(&q, names, platt, err, sizeof err), -1);
        if (!strstr(err, bad[i].says)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, err, bad[i].says);
            fail();
        }
    }
}

/* A file calibd did not write, or one cut short, is not trusted. */
static void untrusted_files_refused(void **state)
{
    char err[512];
    model_params q;
    state_param_names names;
    const char *bad[] = {
        "version 3\nmethod temperature\n",              /* no parameter */
        "method temperature\nparam T 2\n",              /* no version */
        "version 3\nparam T 2\n",                       /* no method */
        "version 3\nmethod temperature\nparam T nan\n", /* not finite */
        "version x\nmethod temperature\nparam T 2\n",   /* not a line calibd writes */
        "version 3\nmethod temperature\nparam T 2\ngarbage\n",
        "version 3\nmethod temperature\nsegment 2 k=v\nparam T 2\n", /* before params */
        "version 3\nmethod temperature\nparam T 2\nsegment 2 kv\n",   /* no '=' */
        "version 3\nmethod temperature\nparam T 2\nsegment 2 a b=v\n", /* bad key */
        "version 3\nmethod temperature\nparam T 2\nsegment nan k=v\n",
        "version 3\nmethod temperature\nparam T 2\nsegment 2 k=\n",   /* no value */
        "version 3\nmethod temperature\nparam T 2\nsegment 2 k=v\nparam U 1\n",
        "version 3\nmethod temperature\nparam T 2\nprior_weights 2\n",      /* one */
        "version 3\nmethod temperature\nparam T 2\nprior_weights 2 0\n",    /* 0 */
        "version 3\nmethod temperature\nparam T 2\nprior_weights 2 x\n",
        "version 3\nmethod temperature\nparam T 2\nprior_weights 1 1\nprior_weights 1 1\n",
        "version 3\nmethod temperature\nparam T 2\nlabel_free 2\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file("model.t.params", bad[i]);
        assert_int_equal(state_load_params(dir, "t", &q, names, err, sizeof err), -1);
        assert_non_null(strstr(err, "model.t.params"));
    }
}

/* One holder at a time: a second lock on the directory is refused with
 * the holder's pid, and taken once the first is released. */
static void lock_is_exclusive(void **state)
{
    char err[512], want[64];
    int fd = state_lock(dir, err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(state_lock(dir, err, sizeof err), -1);
    snprintf(want, sizeof want, "in use by another calibd (pid %ld", (long)getpid());
    assert_non_null(strstr(err, want));
    close(fd);
    fd = state_lock(dir, err, sizeof err);
    assert_true(fd >= 0);
    close(fd);
    /* a directory that cannot be made */
    assert_int_equal(state_lock("/proc/no/such/dir", err, sizeof err), -1);
    assert_non_null(strstr(err, "state directory /proc/no/such/dir"));
}

static int removed_count;
static void count_removed(void *arg, const char *name)
{
    (void)arg;
    (void)name;
    removed_count++;
}

/* Only the temporary files calibd writes are removed. */
static void stale_files_removed(void **state)
{
    write_file("model.a.params.tmp", "x");
    write_file("endpoints.tmp", "x");
    write_file("notes.tmp", "x");
    write_file("model.a.params", "version 1\nmethod temperature\nparam T 2\n");
    removed_count = 0;
    assert_int_equal(state_remove_stale(dir, count_removed, NULL), 2);
    assert_int_equal(removed_count, 2);
    assert_false(exists("model.a.params.tmp"));
    assert_false(exists("endpoints.tmp"));
    assert_true(exists("notes.tmp"));
    assert_true(exists("model.a.params"));
    assert_int_equal(state_remove_stale("/proc/no/such/dir", count_removed, NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(params_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(params_by_name_not_position, setup, teardown),
        cmocka_unit_test_setup_teardown(untrusted_files_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(lock_is_exclusive, setup, teardown),
        cmocka_unit_test_setup_teardown(stale_files_removed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
