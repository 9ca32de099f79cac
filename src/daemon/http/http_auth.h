/* http_auth.h — HTTP credentials: a bearer token and basic-auth users,
 * read from files once at start, checked in constant time; and the PEM
 * files of HTTP's TLS. (CURVE, ZeroMQ's authentication, is auth.h.) */
#ifndef CALIBD_HTTP_AUTH_H
#define CALIBD_HTTP_AUTH_H

#include <stddef.h>

/* One user of basic auth. */
typedef struct http_user {
    char *name, *pass;
    size_t name_len, pass_len;
} http_user;

/* The credentials accepted: with neither a token nor a user, every
 * request passes. */
typedef struct http_auth {
    char *token;            /* NULL: no bearer token accepted */
    size_t token_len;
    http_user *users;       /* [nusers]: none, no basic auth */
    size_t nusers;
    int metrics;            /* /metrics needs credentials too */
} http_auth;

/* What a request's credentials are worth. */
enum http_verdict {
    HTTP_AUTH_PASS,    /* none needed, or the right ones */
    HTTP_AUTH_MISSING, /* needed, and no Authorization header */
    HTTP_AUTH_WRONG,   /* an Authorization header that is not accepted */
};

#define HTTP_TOKEN_MIN 16      /* characters of a bearer token at least */
#define HTTP_SECRET_MAX 4096   /* bytes of a token, or of a user:password line */
#define HTTP_USERS_MAX 256     /* lines of the basic-auth file */
#define HTTP_PEM_MAX (1 << 20) /* bytes of a certificate chain or key file */
#define HTTP_REALM "calibd"

/* Whether the secret given equals the one kept, in a time that depends on
 * the kept one's length alone: never on how much of a guess is right. */
int http_secret_equal(const void *given, size_t given_len, const void *secret,
                      size_t secret_len);
/* Overwrites a secret before its memory goes. */
void http_secret_wipe(void *p, size_t n);
/* Reads the token file (one token of RFC 6750's b64token characters, at
 * least HTTP_TOKEN_MIN long, on one line) and the basic-auth file (lines
 * user:password; blank lines and lines starting with # skipped; the user
 * without ':', neither empty, no control characters, no user twice) into
 * a, either path NULL. 0, or -1 with err saying which file and line and
 * why (a holds nothing then). */
int http_auth_load(http_auth *a, const char *token_file, const char *basic_file,
                   char *err, size_t errlen);
/* Forgets the secrets, overwriting them first. */
void http_auth_free(http_auth *a);
/* Whether a request needs credentials: any are configured, and the path
 * is not an open one (http_route_open: /metrics), or a->metrics. */
int http_auth_required(const http_auth *a, int open);
/* The verdict on a request (open as above) with the Authorization header
 * authorization (or NULL) and, when that is a basic one, its user and
 * password as libmicrohttpd decoded them (or NULL): "Bearer TOKEN" is
 * checked against the token, user:password against every user (all of
 * them, whatever matches, in constant time). */
enum http_verdict http_auth_check(const http_auth *a, int open,
                                  const char *authorization, const char *user,
                                  const char *pass);
/* The PEM file at path whole, NUL-terminated, in *out (malloc'ed), after
 * checking that it holds a block of the kind: "CERTIFICATE", or any
 * unencrypted "PRIVATE KEY". 0, or -1 with err set. */
int http_pem_load(const char *path, const char *kind, char **out, size_t *len, char *err,
                  size_t errlen);

#endif
