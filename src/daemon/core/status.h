/* status.h — the status map: the daemon's counters and each model's state,
 * what `calibctl status` prints, GET /status serves (as JSON) and
 * `calibctl snapshot` prints of a snapshot (calibd(8), CONTROL). Pure: it
 * reads and packs, with no I/O, so that calibctl packs it without a
 * running daemon. */
#ifndef CALIBD_STATUS_H
#define CALIBD_STATUS_H

#include "calib/mpw.h"
#include "kafka_part.h"
#include "model.h"
#include "snapshot.h"

/* The daemon's figures the map opens with: counters, whoever holds them
 * (calibd_status fills them from a running daemon, calibctl from a
 * snapshot's header). */
typedef struct status_daemon {
    double uptime; /* seconds */
    snapshot_counts counts; /* the counters a snapshot keeps */
    uint64_t mem_bytes, mem_limit, mem_refused, models, max_models;
    /* Kafka (kafka.h): kafka 0 when off; the partitions ever held (those
     * assigned now are listed) */
    int kafka;
    const char *kafka_group;
    kafka_stats kstats;
    kafka_part *const *kparts;
    size_t nkparts;
} status_daemon;

/* The whole map: the n models' entries, or only's alone. */
void status_pack(calib_mpw *w, const status_daemon *s, model *const *models, size_t n,
                 const model *only);
/* The same map in parts, for a caller that packs the models a few at a
 * time (http.c): begin, then each model's entry, then end. */
void status_begin(calib_mpw *w, const status_daemon *s);
void status_model(calib_mpw *w, const model *m);
void status_end(calib_mpw *w);
/* An error reply, {"ok": false, "error": why}. */
void status_error(calib_mpw *w, const char *why);
/* {"T": t} or {"a": a, "b": b}...: the values of p by their names. */
void status_pack_values(calib_mpw *w, const model_params *p);

#endif
