/*
 * CURVE keys (libcalib_client): ZeroMQ's CURVE mechanism encrypts and
 * authenticates a connection with Curve25519 key pairs. calibd holds a
 * server key pair; each producer, operator and serving node holds a client
 * key pair, and knows calibd's public key. calibd admits a client whose
 * public key is in the allow-list of the socket's role (calibd(8),
 * SECURITY).
 *
 * Keys live in ZeroMQ certificate files, the text format of czmq's zcert
 * and pyzmq's zmq.auth (so zmq.auth.load_certificate reads ours and we read
 * theirs): comment lines starting with '#', then
 *
 *     metadata
 *     curve
 *         public-key = "<40 characters of Z85>"
 *         secret-key = "<40 characters of Z85>"
 *
 * A key pair is written as two files: NAME.key holds the public key only
 * (hand it out; an allow-list directory holds such files) and
 * NAME.key_secret holds both (keep it; written with mode 0600).
 */
#ifndef CALIB_CURVE_H
#define CALIB_CURVE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_CURVE_KEY_LEN 40 /* a 32-byte key in Z85 text */

/* Code beyond those of calib/client.h. */
#define CALIB_ECURVE_KEY (-85) /* a key file is unreadable or not a certificate */

typedef struct calib_curve_cert {
    char public_key[CALIB_CURVE_KEY_LEN + 1];
    char secret_key[CALIB_CURVE_KEY_LEN + 1]; /* "" in a public certificate */
} calib_curve_cert;

/* A new key pair from libzmq (zmq_curve_keypair). CALIB_OK, or
 * CALIB_ECLIENT_ZMQ when libzmq was built without CURVE. */
int calib_curve_keypair(calib_curve_cert *out);

/* Reads a certificate file. A key present must be 40 characters of Z85;
 * the public key must be present. CALIB_OK, or CALIB_ECURVE_KEY with err
 * ("PATH: reason") set. */
int calib_curve_load(const char *path, calib_curve_cert *out, char *err, size_t errlen);

/* Writes c as a certificate file at path, created exclusively (O_EXCL) and
 * removed again if writing it fails: with its secret key and mode 0600 when
 * secret is 1 (c must hold one), the public key only and mode 0644 when 0.
 * Refuses to replace an existing file. CALIB_OK, or CALIB_ECURVE_KEY with
 * err set. */
int calib_curve_save(const char *path, const calib_curve_cert *c, int secret, char *err,
                     size_t errlen);

/* Makes socket a CURVE client of a server whose public key is in the file
 * server_key, with the key pair in the file key (its secret key needed).
 * Call before connecting. CALIB_OK, CALIB_ECURVE_KEY (err set) or
 * CALIB_ECLIENT_ZMQ (err set: no CURVE in this libzmq). */
int calib_curve_client(void *socket, const char *key, const char *server_key, char *err,
                       size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
