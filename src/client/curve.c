/* curve.c — CURVE certificate files and client sockets (calib/curve.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "calib/calib.h"
#include "calib/client.h"
#include "calib/curve.h"

int calib_curve_keypair(calib_curve_cert *out)
{
    memset(out, 0, sizeof *out);
    if (!zmq_has("curve") || zmq_curve_keypair(out->public_key, out->secret_key) != 0)
        return CALIB_ECLIENT_ZMQ;
    return CALIB_OK;
}

/* A key is 40 characters that Z85 decodes to 32 bytes. */
static int key_ok(const char *z85)
{
    uint8_t bin[32];
    return strlen(z85) == CALIB_CURVE_KEY_LEN && zmq_z85_decode(bin, z85) != NULL;
}

/* "name = value" with value optionally quoted, as zcert and pyzmq write it
 * (pyzmq strips spaces, tabs and both kinds of quote from both ends):
 * copies value to out and returns 1, 0 if the line holds another name,
 * -1 if the value cannot be a key. */
static int key_line(const char *line, const char *name, char out[CALIB_CURVE_KEY_LEN + 1])
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0)
        return 0;
    const char *p = line + n;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p++ != '=')
        return -1;
    while (*p && strchr(" \t'\"", *p))
        p++;
    size_t len = strlen(p);
    while (len && strchr(" \t'\"\r\n", p[len - 1]))
        len--;
    if (len != CALIB_CURVE_KEY_LEN)
        return -1;
    memcpy(out, p, len);
    out[len] = 0;
    return key_ok(out) ? 1 : -1;
}

int calib_curve_load(const char *path, calib_curve_cert *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return CALIB_ECURVE_KEY;
    }
    char line[512];
    unsigned long no = 0;
    int rc = CALIB_OK;
    while (rc == CALIB_OK && fgets(line, sizeof line, f)) {
        no++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "%s:%lu: line too long for a certificate", path, no);
            rc = CALIB_ECURVE_KEY;
            break;
        }
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        int pub = key_line(p, "public-key", out->public_key);
        int sec = pub ? 0 : key_line(p, "secret-key", out->secret_key);
        if (pub < 0 || sec < 0) {
            snprintf(err, errlen, "%s:%lu: a %s is 40 characters of Z85", path, no,
                     pub < 0 ? "public-key" : "secret-key");
            rc = CALIB_ECURVE_KEY;
        }
    }
    if (rc == CALIB_OK && ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = CALIB_ECURVE_KEY;
    }
    fclose(f);
    memset(line, 0, sizeof line); /* it may have held the secret key */
    if (rc == CALIB_OK && !out->public_key[0]) {
        snprintf(err, errlen, "%s: no public-key: not a ZeroMQ certificate (calibctl "
                 "keygen writes them)", path);
        rc = CALIB_ECURVE_KEY;
    }
    if (rc != CALIB_OK)
        memset(out, 0, sizeof *out); /* no half of a secret left behind */
    return rc;
}

int calib_curve_save(const char *path, const calib_curve_cert *c, int secret, char *err,
                     size_t errlen)
{
    if (!key_ok(c->public_key) || (secret && !key_ok(c->secret_key))) {
        snprintf(err, errlen, "%s: not a valid key pair", path);
        return CALIB_ECURVE_KEY;
    }
    /* O_EXCL: a key is never overwritten by mistake */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, secret ? 0600 : 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return CALIB_ECURVE_KEY;
    }
    char when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    char text[600];
    int n = snprintf(text, sizeof text,
                     "#   ****  Generated on %s by calibctl keygen  ****\n"
                     "#   ZeroMQ CURVE %s Certificate\n"
                     "#   %s\n\n"
                     "metadata\n"
                     "curve\n"
                     "    public-key = \"%s\"\n"
                     "%s%s%s",
                     when, secret ? "**Secret**" : "Public",
                     secret ? "DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its "
                              "permissions."
                            : "Exchange securely, or use a secure mechanism to verify "
                              "the contents of this file after exchange.",
                     c->public_key, secret ? "    secret-key = \"" : "",
                     secret ? c->secret_key : "", secret ? "\"\n" : "");
    int ok = n > 0 && (size_t)n < sizeof text && write(fd, text, (size_t)n) == n;
    memset(text, 0, sizeof text);
    ok = fsync(fd) == 0 && ok;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
        unlink(path);
        return CALIB_ECURVE_KEY;
    }
    return CALIB_OK;
}

int calib_curve_client(void *socket, const char *key, const char *server_key, char *err,
                       size_t errlen)
{
    if (!zmq_has("curve")) {
        snprintf(err, errlen, "this libzmq was built without CURVE");
        return CALIB_ECLIENT_ZMQ;
    }
    calib_curve_cert mine, server;
    if (calib_curve_load(key, &mine, err, errlen) != CALIB_OK ||
        calib_curve_load(server_key, &server, err, errlen) != CALIB_OK)
        return CALIB_ECURVE_KEY;
    int rc = CALIB_OK;
    if (!mine.secret_key[0]) {
        snprintf(err, errlen, "%s: no secret-key: give the key pair (NAME.key_secret), "
                 "not the public NAME.key", key);
        rc = CALIB_ECURVE_KEY;
    } else if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server.public_key,
                              CALIB_CURVE_KEY_LEN + 1) != 0 ||
               zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, mine.public_key,
                              CALIB_CURVE_KEY_LEN + 1) != 0 ||
               zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, mine.secret_key,
                              CALIB_CURVE_KEY_LEN + 1) != 0) {
        snprintf(err, errlen, "CURVE: %s", zmq_strerror(errno));
        rc = CALIB_ECLIENT_ZMQ;
    }
    memset(&mine, 0, sizeof mine);
    memset(&server, 0, sizeof server); /* a key pair file given as the server's */
    return rc;
}
