/*
 * params_store.h — the parameters a serving node holds for one model:
 * written by one thread (the client's receiving thread), read by any
 * number of predicting threads without locks. Internal to libcalib_client.
 *
 * Each store keeps its parameters twice: the few numbers apply needs
 * (version, method, values) under a seqlock, so that readers never wait
 * for each other, and the full record (names, figures) under a mutex, for
 * calib_client_get. The seqlock follows Boehm, "Can seqlocks get along
 * with programming language memory models?" (MSPC 2012): the protected
 * data are relaxed atomics (no data race), the writer fences with release
 * after making the sequence odd, the reader fences with acquire before
 * re-reading it.
 *
 * Contract: pstore_install from one thread at a time (the caller
 * serialises writers); pstore_load, _get and _version from any thread, at
 * any time, concurrently with install. A reader sees the old or the new
 * parameters in full, never a mix.
 */
#ifndef CALIB_CLIENT_PARAMS_STORE_H
#define CALIB_CLIENT_PARAMS_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "calib/plugin.h"
#include "calib/pubmsg.h"
#include "calib/recal.h"

typedef struct pstore {
    char name[CALIB_PUBMSG_MODEL_MAX + 1];
    size_t name_len;
    /* private: what apply reads, under the seqlock */
    _Atomic uint64_t seq; /* odd while a write is in progress */
    _Atomic uint64_t version;
    _Atomic(const calib_plugin *) desc;
    _Atomic uint64_t bits[CALIB_RECAL_MAX_PARAMS]; /* values, as bits */
    _Atomic unsigned nweights;  /* prior weights, as bits: */
    _Atomic uint64_t wbits[CALIB_PUBMSG_MAX_WEIGHTS];
    _Atomic unsigned nsegments; /* segment parameters of the version held:
                                   pstore_segment reads them under the mutex */
    /* private: the full record, for pstore_get */
    pthread_mutex_t lock;
    calib_params_msg full;
} pstore;

/* One consistent copy of what apply needs. */
typedef struct pstore_snapshot {
    uint64_t version;
    const calib_plugin *desc;
    double values[CALIB_RECAL_MAX_PARAMS];
    unsigned nweights; /* 0: no prior correction */
    double weights[CALIB_PUBMSG_MAX_WEIGHTS];
} pstore_snapshot;

/* A store for model name[0..len) (len <= CALIB_PUBMSG_MODEL_MAX) holding
 * version 0, the identity, with no figures. CALIB_OK, CALIB_EINVAL (name
 * too long) or CALIB_ENOMEM (the mutex). */
int pstore_init(pstore *s, const char *name, size_t len);
void pstore_destroy(pstore *s);

/* Installs p if its version is newer than the one held: 1; else 0 and
 * nothing changes. The one writer. */
int pstore_install(pstore *s, const calib_params_msg *p);

/* A consistent copy of version, method, values and weights; lock-free. */
void pstore_load(pstore *s, pstore_snapshot *out);

/* The full record of the version held. */
void pstore_get(pstore *s, calib_params_msg *out);

/* The version held. */
uint64_t pstore_version(pstore *s);

/* What applies to a prediction with segments keys[i] = values[i], i < n:
 * the first segment parameters of the version held that match (1), or
 * the model's own (0), with the version and method; under the mutex. */
int pstore_segment(pstore *s, const char *const *keys, const char *const *values, size_t n,
                   pstore_snapshot *out);

#endif
