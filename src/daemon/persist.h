/*
 * persist.h — when calibd writes its snapshots of every model (snapshot.h has the
 * format): restored at start, packed by the loop a slice at a time
 * (slicer.h) every snapshot_interval seconds, written by a worker thread,
 * and written once more at exit.
 */
#ifndef CALIBD_PERSIST_H
#define CALIBD_PERSIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "calib/mpw.h"
#include "log.h"
#include "slicer.h"

struct calibd;

typedef struct persister {
    int ready;            /* the slicer is initialised */
    int packing;          /* models are being packed into the chunks */
    int all_packed;       /* every model packed; the last chunks to write */
    int flushing;         /* the worker owns chunk[!cur] and the file */
    int abandoned;        /* stopped while flushing: the file goes after it */
    int writing;          /* the worker owns head and the file */
    slicer pack;          /* packs model i into chunk[cur] */
    uv_work_t req, flush;
    calib_mpw head;
    calib_mpw chunk[2];   /* the loop packs into chunk[cur] (persist.c) */
    int cur;
    struct model *copy;   /* a large model's copy, for the worker to pack */
    FILE *chunks;         /* STATE_DIR/snapshot.tmp while packing and writing */
    uint64_t body_len;    /* bytes of the body written there */
    uint32_t crc;         /* their CRC-32 */
    int body_errno;       /* a chunk that could not be written */
    uint64_t begun_ns;    /* uv_hrtime at the start of packing */
    double next_due;      /* tick_now of the next snapshot */
    int rc;               /* the worker's: state_write_parts' */
    char err[ERR_MAX];
    /* figures (metrics) */
    uint64_t writes, errors;
    uint64_t models;      /* of the last snapshot written */
    uint64_t copied;      /* of them, copied by the loop and packed by the worker */
    size_t copies;        /* models copied so far */
    size_t packed;        /* models packed so far (a Kafka partition's are not) */
    double last_ok;       /* wall clock of the last success, 0 before */
    size_t bytes;         /* of the last snapshot written */
    double duration;      /* seconds from the start of packing to written */
    double slice_max;     /* the longest loop slice of the last snapshot */
    double restored_age;  /* the restored snapshot's age at start, -1: none */
} persister;

/* Before the models are created: restores STATE_DIR/snapshot, if any and
 * snapshot_interval > 0. A snapshot that cannot be used is moved aside
 * (STATE_DIR/snapshot.bad) with one log line and calibd starts without it;
 * models it created are dropped again. Returns -1 only when out of memory
 * for its own bookkeeping. */
int persist_restore(struct calibd *d);
/* The models of a snapshot's body, restored (a model of a Kafka
 * partition's snapshot with d->source set): n read, lost of them that start
 * afresh, their pairs and waiting items. age: how long ago it was written
 * (persist_down_time). 0, or -1 with err set when the body is malformed
 * (the models made so far stay: the caller drops them). */
struct snapshot_head;
int persist_restore_models(struct calibd *d, const struct snapshot_head *h, double age,
                           uint64_t *n, uint64_t *lost, uint64_t *pairs, uint64_t *waiting,
                           char *err, size_t errlen);
double persist_down_time(const struct snapshot_head *h);
/* From the tick: starts a snapshot when one is due. */
void persist_tick(struct calibd *d);
/* At stop, from the loop: stops packing (the final snapshot follows). */
void persist_stop(struct calibd *d);
/* After the loop has ended: every model, written now. 0, or -1 when it
 * could not be written (logged): calibd then exits 1, so that a service
 * manager sees that the state of the run is lost. */
int persist_final(struct calibd *d);
void persist_free(struct calibd *d);

#endif
