/* http_auth.c — HTTP credentials and TLS files (see http_auth.h). */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http_auth.h"

/* Overwrites a secret before its memory goes (a plain memset may be
 * optimised away, and explicit_bzero is not POSIX). */
void http_secret_wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

int http_secret_equal(const void *given, size_t given_len, const void *secret,
                      size_t secret_len)
{
    const unsigned char *g = given, *s = secret;
    /* every byte of the kept secret, whatever is given, to the end: the
     * time tells neither how much of a guess is right nor where it
     * differs */
    volatile unsigned diff = given_len != secret_len;
    for (size_t i = 0; i < secret_len; i++)
        diff |= (unsigned)(s[i] ^ (given_len ? g[i % given_len] : 0u));
    return diff == 0;
}

/* The file at path whole (at most max bytes), NUL-terminated, in *out;
 * 0, or -1 with err set. */
static int read_whole(const char *path, size_t max, char **out, size_t *len, char *err,
                      size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    const char *why = fstat(fd, &st) != 0          ? strerror(errno)
                      : !S_ISREG(st.st_mode)       ? "not a regular file"
                      : (uintmax_t)st.st_size > max ? "too large"
                                                    : NULL;
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st.st_size, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        close(fd);
        return -1;
    }
    while (n < cap) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            http_secret_wipe(buf, cap);
            free(buf);
            close(fd);
            return -1;
        }
        if (got == 0)
            break; /* shrunk meanwhile: what is there */
        n += (size_t)got;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* RFC 6750's b64token: what can follow "Bearer " in a header. */
static int token_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~+/", c));
}

/* The token of the file's text (its error says where, never the secret). */
static int parse_token(http_auth *a, const char *path, const char *buf, size_t len, char *err,
                       size_t errlen)
{
    size_t n = strcspn(buf, "\r\n"), body = n;
    for (size_t i = n; i < len; i++)
        if (buf[i] != '\r' && buf[i] != '\n') {
            snprintf(err, errlen, "%s: more than one line: the file holds one token", path);
            return -1;
        }
    while (body && buf[body - 1] == '=') /* padding, at the end only */
        body--;
    if (body == 0) {
        snprintf(err, errlen, "%s: empty: the file holds one token", path);
        return -1;
    }
    for (size_t i = 0; i < body; i++)
        if (!token_char((unsigned char)buf[i])) {
            snprintf(err, errlen, "%s: character %zu of the token is not one of A-Z a-z 0-9 "
                     "- . _ ~ + / (or = at the end)", path, i + 1);
            return -1;
        }
    if (n < HTTP_TOKEN_MIN || n > HTTP_SECRET_MAX) {
        snprintf(err, errlen, "%s: the token has %zu characters: %d to %d are needed "
                 "(e.g. openssl rand -hex 32)", path, n, HTTP_TOKEN_MIN, HTTP_SECRET_MAX);
        return -1;
    }
    if (!(a->token = malloc(n + 1))) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(a->token, buf, n);
    a->token[n] = 0;
    a->token_len = n;
    return 0;
}

static int printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* One user:password line (without its end) into a. */
static int parse_user(http_auth *a, const char *path, size_t lineno, const char *line,
                      size_t n, char *err, size_t errlen)
{
    const char *colon = memchr(line, ':', n);
    const char *why = NULL;
    if (n > HTTP_SECRET_MAX)
        why = "longer than 4096 bytes";
    else if (!colon)
        why = "expected user:password";
    else if (colon == line)
        why = "empty user name";
    else if (colon == line + n - 1)
        why = "empty password";
    else if (!printable(line, n))
        why = "a control character";
    else if (a->nusers == HTTP_USERS_MAX)
        why = "more than 256 users";
    if (why) {
        snprintf(err, errlen, "%s:%zu: %s", path, lineno, why);
        return -1;
    }
    size_t name_len = (size_t)(colon - line), pass_len = n - name_len - 1;
    for (size_t i = 0; i < a->nusers; i++)
        if (a->users[i].name_len == name_len && memcmp(a->users[i].name, line, name_len) == 0) {
            snprintf(err, errlen, "%s:%zu: user '%.*s' again", path, lineno, (int)name_len,
                     line);
            return -1;
        }
    http_user *u = realloc(a->users, (a->nusers + 1) * sizeof *u);
    if (!u) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    a->users = u;
    u = &a->users[a->nusers];
    if (!(u->name = malloc(n + 1))) { /* name and password in one block */
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(u->name, line, name_len);
    u->name[name_len] = 0;
    u->pass = u->name + name_len + 1;
    memcpy(u->pass, colon + 1, pass_len);
    u->pass[pass_len] = 0;
    u->name_len = name_len;
    u->pass_len = pass_len;
    a->nusers++;
    return 0;
}

static int parse_users(http_auth *a, const char *path, const char *buf, size_t len, char *err,
                       size_t errlen)
{
    size_t lineno = 0;
    for (const char *p = buf, *end = buf + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *next = nl ? nl + 1 : end;
        lineno++;
        if (n && p[n - 1] == '\r')
            n--;
        if (n && p[0] != '#' && parse_user(a, path, lineno, p, n, err, errlen) != 0)
            return -1;
        p = next;
    }
    if (a->nusers == 0) {
        snprintf(err, errlen, "%s: no user:password line", path);
        return -1;
    }
    return 0;
}

/* A secret file read, parsed by parse, then wiped. */
static int load_secret(http_auth *a, const char *path,
                       int (*parse)(http_auth *, const char *, const char *, size_t, char *,
                                    size_t),
                       char *err, size_t errlen)
{
    char *buf;
    size_t len;
    /* the whole basic-auth file's worth at most */
    if (read_whole(path, (size_t)HTTP_USERS_MAX * (HTTP_SECRET_MAX + 2), &buf, &len, err,
                   errlen) != 0)
        return -1;
    int rc = memchr(buf, 0, len) ? -1 : 0;
    if (rc != 0)
        snprintf(err, errlen, "%s: a NUL byte: expected text", path);
    else
        rc = parse(a, path, buf, len, err, errlen);
    http_secret_wipe(buf, len);
    free(buf);
    return rc;
}

int http_auth_load(http_auth *a, const char *token_file, const char *basic_file, char *err,
                   size_t errlen)
{
    *a = (http_auth){0};
    if ((token_file && load_secret(a, token_file, parse_token, err, errlen) != 0) ||
        (basic_file && load_secret(a, basic_file, parse_users, err, errlen) != 0)) {
        http_auth_free(a);
        return -1;
    }
    return 0;
}

void http_auth_free(http_auth *a)
{
    if (a->token) {
        http_secret_wipe(a->token, a->token_len);
        free(a->token);
    }
    for (size_t i = 0; i < a->nusers; i++) {
        http_secret_wipe(a->users[i].name, a->users[i].name_len + a->users[i].pass_len + 2);
        free(a->users[i].name);
    }
    free(a->users);
    *a = (http_auth){0};
}

int http_auth_required(const http_auth *a, int open)
{
    return (a->token || a->nusers) && (a->metrics || !open);
}

enum http_verdict http_auth_check(const http_auth *a, int open, const char *authorization,
                                  const char *user, const char *pass)
{
    if (!http_auth_required(a, open))
        return HTTP_AUTH_PASS;
    if (!authorization)
        return HTTP_AUTH_MISSING;
    int ok = 0;
    if (a->token && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *t = authorization + 7;
        while (*t == ' ')
            t++;
        ok = http_secret_equal(t, strlen(t), a->token, a->token_len);
    } else if (user && pass) {
        size_t ul = strlen(user), pl = strlen(pass);
        /* every user, each compare whole: which one matched, and whether
         * the name did, stays out of the time */
        for (size_t i = 0; i < a->nusers; i++)
            ok |= http_secret_equal(user, ul, a->users[i].name, a->users[i].name_len) &
                  http_secret_equal(pass, pl, a->users[i].pass, a->users[i].pass_len);
    }
    return ok ? HTTP_AUTH_PASS : HTTP_AUTH_WRONG;
}

/* Whether PEM text holds a block of the kind (see http_pem_load); NULL,
 * or what is wrong. */
static const char *pem_check(const char *buf, const char *kind)
{
    int key = strcmp(kind, "PRIVATE KEY") == 0, encrypted = 0;
    static const char begin[] = "-----BEGIN ";
    for (const char *p = strstr(buf, begin); p; p = strstr(p + 1, begin)) {
        const char *label = p + sizeof begin - 1, *end = strstr(label, "-----");
        if (!end)
            break;
        size_t n = (size_t)(end - label), kn = strlen(kind);
        if (!key && n == kn && memcmp(label, kind, n) == 0)
            return NULL;
        if (key && n >= kn && memcmp(end - kn, kind, kn) == 0) {
            const char *next = strstr(end, begin);
            const char *proc = strstr(end, "Proc-Type: 4,ENCRYPTED");
            static const char pkcs8[] = "ENCRYPTED PRIVATE KEY";
            if ((n == sizeof pkcs8 - 1 && memcmp(label, pkcs8, n) == 0) ||
                (proc && (!next || proc < next)))
                encrypted = 1;
            else
                return NULL;
        }
    }
    if (encrypted)
        return "the private key is encrypted; calibd needs it unencrypted, readable by "
               "calibd alone (openssl pkey -in KEY -out PLAIN)";
    return key ? "no PEM private key (-----BEGIN ... PRIVATE KEY-----)"
               : "no PEM certificate (-----BEGIN CERTIFICATE-----)";
}

int http_pem_load(const char *path, const char *kind, char **out, size_t *len, char *err,
                  size_t errlen)
{
    char *buf;
    size_t n;
    if (read_whole(path, HTTP_PEM_MAX, &buf, &n, err, errlen) != 0)
        return -1;
    const char *why = memchr(buf, 0, n) ? "a NUL byte: expected PEM text (DER? openssl "
                                          "x509 -inform der or openssl pkey -inform der "
                                          "converts it)"
                                        : pem_check(buf, kind);
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        http_secret_wipe(buf, n);
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}
