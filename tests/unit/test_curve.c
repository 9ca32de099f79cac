/* test_auth.c — CURVE without a network: certificate files written and read
 * back (and pyzmq's), the configuration rules of the curve_* keys, the
 * allow-lists, and the ZAP handler's decision on each kind of request. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "curve.h"
#include "calib/calib.h"
#include "calib/client.h"
#include "calib/curve.h"
#include "cfg.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_auth.XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A new pair saved as dir/sub/NAME.key and NAME.key_secret. */
static calib_curve_cert keygen(const char *sub, const char *name)
{
    calib_curve_cert c;
    char path[256], err[512];
    assert_int_equal(calib_curve_keypair(&c), CALIB_OK);
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/%s.key_secret", dir, sub, name);
    assert_int_equal(calib_curve_save(path, &c, 1, err, sizeof err), CALIB_OK);
    snprintf(path, sizeof path, "%s/%s/%s.key", dir, sub, name);
    assert_int_equal(calib_curve_save(path, &c, 0, err, sizeof err), CALIB_OK);
    return c;
}

static void cert_round_trip(void **state)
{
    make_dir();
    calib_curve_cert c = keygen("k", "node"), back;
    char path[256], err[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/k/node.key_secret", dir);
    assert_int_equal(calib_curve_load(path, &back, err, sizeof err), CALIB_OK);
    assert_string_equal(back.public_key, c.public_key);
    assert_string_equal(back.secret_key, c.secret_key);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* never over an existing key */
    assert_int_equal(calib_curve_save(path, &c, 1, err, sizeof err), CALIB_ECURVE_KEY);
    assert_non_null(strstr(err, "exists"));
    snprintf(path, sizeof path, "%s/k/node.key", dir);
    assert_int_equal(calib_curve_load(path, &back, err, sizeof err), CALIB_OK);
    assert_string_equal(back.public_key, c.public_key);
    assert_string_equal(back.secret_key, ""); /* the public file holds no secret */
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    remove_dir();
}

/* What pyzmq's zmq.auth.create_certificates writes (and czmq's zcert). */
static void reads_pyzmq_certificates(void **state)
{
    make_dir();
    char pub[41], sec[41], text[512], path[256], err[512];
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    snprintf(text, sizeof text,
             "#   ****  Generated on 2026-11-25 09:00:00.000000 by pyzmq  ****\n"
             "#   ZeroMQ CURVE **Secret** Certificate\n"
             "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
             "metadata\ncurve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
             pub, sec);
    write_file("py.key_secret", text);
    snprintf(path, sizeof path, "%s/py.key_secret", dir);
    calib_curve_cert c;
    assert_int_equal(calib_curve_load(path, &c, err, sizeof err), CALIB_OK);
    assert_string_equal(c.public_key, pub);
    assert_string_equal(c.secret_key, sec);
    remove_dir();
}

static void malformed_certificates_refused(void **state)
{
    make_dir();
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"curve\n    public-key = \"short\"\n", ":2: a public-key is 40"},
        /* 40 characters, but '~' is not Z85 */
        {"curve\n    public-key = \"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\"\n",
         ":2: a public-key is 40"},
        {"# nothing but a comment\n", "no public-key"},
        {"curve\n    secret-key \"abc\"\n", ":2: a secret-key is 40"},
    };
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/bad.key", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unlink(path);
        write_file("bad.key", bad[i].text);
        calib_curve_cert c;
        assert_int_equal(calib_curve_load(path, &c, err, sizeof err), CALIB_ECURVE_KEY);
        assert_non_null(strstr(err, bad[i].why));
        assert_non_null(strstr(err, path));
        assert_string_equal(c.public_key, "");
    }
    snprintf(path, sizeof path, "%s/missing.key", dir);
    calib_curve_cert c;
    assert_int_equal(calib_curve_load(path, &c, err, sizeof err), CALIB_ECURVE_KEY);
    remove_dir();
}

/* calib_curve_client makes a socket a CURVE client of the server's key. */
static void client_socket_takes_keys(void **state)
{
    make_dir();
    calib_curve_cert me = keygen("k", "me"), server = keygen("k", "server");
    char key[256], skey[256], err[512], got[41];
    snprintf(key, sizeof key, "%s/k/me.key_secret", dir);
    snprintf(skey, sizeof skey, "%s/k/server.key", dir);
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_SUB);
    assert_int_equal(calib_curve_client(s, key, skey, err, sizeof err), CALIB_OK);
    size_t len = sizeof got;
    assert_int_equal(zmq_getsockopt(s, ZMQ_CURVE_SERVERKEY, got, &len), 0);
    assert_string_equal(got, server.public_key);
    len = sizeof got;
    assert_int_equal(zmq_getsockopt(s, ZMQ_CURVE_PUBLICKEY, got, &len), 0);
    assert_string_equal(got, me.public_key);
    /* the public half alone cannot make a client */
    snprintf(key, sizeof key, "%s/k/me.key", dir);
    assert_int_equal(calib_curve_client(s, key, skey, err, sizeof err), CALIB_ECURVE_KEY);
    assert_non_null(strstr(err, "no secret-key"));
    zmq_close(s);
    zmq_ctx_term(ctx);
    remove_dir();
}

/* ------------------------------------------------------------ calibd's side */

static logger lg;
static FILE *log_file;

static void cfg_with(daemon_cfg *c, const char *secret, const char *prod, const char *ops,
                     const char *subs)
{
    char err[256];
    assert_int_equal(config_init(c), 0);
    const char *key[4] = {"curve_secret_key", "curve_producers", "curve_operators",
                          "curve_subscribers"};
    const char *val[4] = {secret, prod, ops, subs};
    for (int i = 0; i < 4; i++)
        if (val[i])
            assert_int_equal(config_set_daemon(c, key[i], val[i], err, sizeof err), 0);
}

static char *logged(void)
{
    static char buf[4096];
    fflush(log_file);
    rewind(log_file);
    size_t n = fread(buf, 1, sizeof buf - 1, log_file);
    buf[n] = 0;
    return buf;
}

static int setup(void **state)
{
    log_file = tmpfile();
    log_init(&lg, LOG_DEBUG, log_file);
    make_dir();
    return 0;
}

static int teardown(void **state)
{
    fclose(log_file);
    remove_dir();
    return 0;
}

static void load_rules(void **state)
{
    daemon_cfg c;
    curve_ctx a;
    char err[512], secret[256], pub[256], keys[256];
    keygen("srv", "calibd");
    snprintf(secret, sizeof secret, "%s/srv/calibd.key_secret", dir);
    snprintf(pub, sizeof pub, "%s/srv/calibd.key", dir);
    snprintf(keys, sizeof keys, "%s/srv", dir);

    cfg_with(&c, NULL, NULL, NULL, NULL); /* no CURVE */
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), 0);
    assert_false(a.on);
    config_free(&c);
    cfg_with(&c, "none", "none", "none", "none"); /* "none" is unset */
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), 0);
    assert_false(a.on);
    config_free(&c);

    cfg_with(&c, NULL, keys, NULL, NULL); /* allow-list without calibd's key */
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), -1);
    assert_non_null(strstr(err, "need curve_secret_key"));
    config_free(&c);

    cfg_with(&c, secret, keys, "any", NULL); /* a role left unset */
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), -1);
    assert_non_null(strstr(err, "curve_subscribers is not"));
    config_free(&c);

    cfg_with(&c, pub, keys, "any", "any"); /* the public half as calibd's pair */
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), -1);
    assert_non_null(strstr(err, "no secret-key"));
    config_free(&c);

    cfg_with(&c, secret, "/nonexistent/keys", "any", "any");
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), -1);
    assert_non_null(strstr(err, "curve_producers = /nonexistent/keys"));
    config_free(&c);

    /* a malformed NAME.key in an allow-list is skipped, named; the other
     * keys are read (one half-copied file must not keep them out, nor keep
     * in, at a reload, a key removed meanwhile) */
    write_file("srv/broken.key", "curve\n public-key = \"nope\"\n");
    cfg_with(&c, secret, keys, "any", "any");
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), 0);
    assert_int_equal(a.allow[AUTH_PRODUCERS].n, 1);
    assert_non_null(strstr(logged(), "broken.key:2"));
    assert_non_null(strstr(logged(), "skipped, its key is not allowed"));
    curve_free(&a);
    config_free(&c);
    char path[256];
    snprintf(path, sizeof path, "%s/srv/broken.key", dir);
    unlink(path);

    /* the same key in two files is admitted once */
    char same[600];
    snprintf(path, sizeof path, "%s/srv/calibd.key", dir);
    snprintf(same, sizeof same, "cp %s %s/srv/copy.key", path, dir);
    assert_int_equal(system(same), 0);

    /* an empty allow-list is allowed, and said */
    snprintf(path, sizeof path, "%s/empty", dir);
    mkdir(path, 0700);
    cfg_with(&c, secret, keys, path, "any");
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), 0);
    assert_true(a.on);
    assert_int_equal(a.allow[AUTH_PRODUCERS].n, 1); /* calibd.key and its copy: once */
    assert_int_equal(a.allow[AUTH_OPERATORS].n, 0);
    assert_true(a.allow[AUTH_SUBSCRIBERS].any);
    assert_non_null(strstr(logged(), "every operators connection is refused"));
    curve_free(&a);
    config_free(&c);
}

/* A ZAP request as libzmq sends it for a CURVE client. */
static void zap(curve_ctx *a, const char *domain, const char *mechanism, const uint8_t key[32],
                const char **code, curve_verdict *v)
{
    const void *f[7] = {"1.0", "7", domain, "127.0.0.1", "", mechanism, key};
    size_t len[7] = {3, 1, strlen(domain), 9, 0, strlen(mechanism), 32};
    const char *text;
    curve_zap(a, f, len, strcmp(mechanism, "CURVE") == 0 ? 7 : 6, code, &text, v);
}

static void zap_decides_by_role(void **state)
{
    daemon_cfg c;
    curve_ctx a;
    char err[512], secret[256], prod[256], ops[256];
    keygen("srv", "calibd");
    calib_curve_cert p1 = keygen("producers", "p1"), p2 = keygen("producers", "p2");
    calib_curve_cert op = keygen("operators", "op");
    calib_curve_cert stranger = keygen("elsewhere", "stranger");
    snprintf(secret, sizeof secret, "%s/srv/calibd.key_secret", dir);
    snprintf(prod, sizeof prod, "%s/producers", dir);
    snprintf(ops, sizeof ops, "%s/operators", dir);
    cfg_with(&c, secret, prod, ops, "any");
    assert_int_equal(curve_load(&a, &c, &lg, err, sizeof err), 0);
    assert_int_equal(a.allow[AUTH_PRODUCERS].n, 2); /* the .key_secret files not read */

    uint8_t k[32];
    const char *code;
    curve_verdict v;
    zmq_z85_decode(k, p1.public_key);
    zap(&a, "producers", "CURVE", k, &code, &v);
    assert_string_equal(code, "200");
    assert_true(v.allowed);
    assert_string_equal(v.key, p1.public_key);
    zmq_z85_decode(k, p2.public_key);
    zap(&a, "producers", "CURVE", k, &code, &v);
    assert_string_equal(code, "200");
    /* a producer's key opens no other role */
    zap(&a, "operators", "CURVE", k, &code, &v);
    assert_string_equal(code, "400");
    assert_int_equal(v.role, AUTH_OPERATORS);
    zmq_z85_decode(k, op.public_key);
    zap(&a, "operators", "CURVE", k, &code, &v);
    assert_string_equal(code, "200");
    /* a key in no list: refused, except where the role is "any" */
    zmq_z85_decode(k, stranger.public_key);
    zap(&a, "producers", "CURVE", k, &code, &v);
    assert_string_equal(code, "400");
    assert_false(v.allowed);
    assert_string_equal(v.key, stranger.public_key);
    zap(&a, "subscribers", "CURVE", k, &code, &v);
    assert_string_equal(code, "200");
    assert_int_equal(a.accepted[AUTH_PRODUCERS], 2);
    assert_int_equal(a.refused[AUTH_PRODUCERS], 1);
    assert_int_equal(a.accepted[AUTH_OPERATORS], 1);
    assert_int_equal(a.refused[AUTH_OPERATORS], 1);
    assert_int_equal(a.accepted[AUTH_SUBSCRIBERS], 1);

    /* not CURVE, an unknown domain, not ZAP 1.0: refused */
    zap(&a, "producers", "NULL", k, &code, &v);
    assert_string_equal(code, "400");
    assert_int_equal(a.refused[AUTH_PRODUCERS], 2);
    zap(&a, "admins", "CURVE", k, &code, &v);
    assert_string_equal(code, "400");
    assert_int_equal(v.role, AUTH_ROLES);
    const void *f[2] = {"2.0", "1"};
    size_t len[2] = {3, 1};
    const char *text;
    curve_zap(&a, f, len, 2, &code, &text, &v);
    assert_string_equal(code, "400");
    assert_int_equal(a.malformed, 2);

    /* SIGHUP: a key added to the directory is admitted from then on */
    char from[256], to[256];
    snprintf(from, sizeof from, "%s/elsewhere/stranger.key", dir);
    snprintf(to, sizeof to, "%s/producers/stranger.key", dir);
    assert_int_equal(rename(from, to), 0);
    assert_int_equal(curve_reload(&a, &c, err, sizeof err), 0);
    zap(&a, "producers", "CURVE", k, &code, &v);
    assert_string_equal(code, "200");
    /* a malformed file beside does not fail the reload, and a key removed
     * meanwhile is revoked all the same */
    write_file("producers/broken.key", "public-key = x\n");
    assert_int_equal(rename(to, from), 0);
    assert_int_equal(curve_reload(&a, &c, err, sizeof err), 0);
    zap(&a, "producers", "CURVE", k, &code, &v);
    assert_string_equal(code, "400");
    assert_int_equal(a.allow[AUTH_PRODUCERS].n, 2);
    /* a reload that fails (the directory gone) keeps the lists in force */
    char gone[256];
    snprintf(gone, sizeof gone, "%s/producers-gone", dir);
    assert_int_equal(rename(prod, gone), 0);
    assert_int_equal(curve_reload(&a, &c, err, sizeof err), -1);
    assert_int_equal(a.allow[AUTH_PRODUCERS].n, 2);
    assert_int_equal(rename(gone, prod), 0);
    curve_free(&a);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cert_round_trip),
        cmocka_unit_test(reads_pyzmq_certificates),
        cmocka_unit_test(malformed_certificates_refused),
        cmocka_unit_test(client_socket_takes_keys),
        cmocka_unit_test_setup_teardown(load_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(zap_decides_by_role, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
