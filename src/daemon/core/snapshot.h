/*
 * snapshot.h — every model's full state in one file, STATE_DIR/snapshot,
 * so that a restart (or a crash) loses at most one snapshot_interval of
 * pairs (calibd(8), SNAPSHOTS).
 *
 * The file is a msgpack map, the header,
 *   {"format": "calibd-snapshot", "v": 2, "byte_order": "little",
 *    "written": wall seconds, "mono": the loop's monotonic seconds then,
 *    "models": N, "daemon": {counters: snapshot_counts}, "body_bytes": B,
 *    "crc32": CRC-32 of the body}
 * followed by the body, B bytes: N sections, one per model, back to back,
 * each a msgpack map framed with its own length and CRC-32 (version 4):
 * one damaged byte costs the model it falls in, not the file. The loop packs
 * them a few at a time between messages (snapshot_pack_model), never
 * holding up ingest for long, and a worker thread writes the framed file
 * atomically (state_write_file). Arrays of numbers are binaries of the
 * host's little-endian doubles and integers, copied in and out whole.
 *
 * Reading trusts nothing: the frame, the version, the byte order and the
 * checksum are checked before the body is parsed, and every length, index
 * and count in a model is checked against the model it is restored into.
 * A section whose dimensions no longer match the configuration (another
 * window, ring or bin count) is left fresh and named in `skipped`.
 *
 * Version 2 stores beside a ring's and a reservoir's capacity ("cap") the
 * one it was given ("bound", model_size's): a store memory_limit stopped
 * lower is restored into a model of the same configuration (the ring then
 * grows again as memory allows, the reservoir stays where it stopped), and
 * a ring's record count ("total") is no longer tied to its slots (a ring
 * so restored and grown again has pushed more than its slots show).
 * Version 1 (no bound) is read as well: a store stopped lower in it cannot
 * be told from one configured so, and is left fresh as before. Versions 1
 * to 3 hold bare maps under the header's one CRC-32, checked whole.
 */
#ifndef CALIBD_SNAPSHOT_H
#define CALIBD_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "calib/mpr.h"
#include "calib/mpw.h"
#include "model.h"

#define SNAPSHOT_FILE "snapshot"
/* The format written, and the oldest a reader must know to read what this
 * one writes: a reader of format >= compat reads a file of a later format
 * (v > its own) all the same, its known parts, skipping the keys it does
 * not know (calib_save(3)); one of format < compat refuses it. Formats 1
 * and 2 (calibd 0.1) have no compat: a reader reads them up to its own. */
#define SNAPSHOT_VERSION 4
#define SNAPSHOT_COMPAT 4

/* What the frame says. body points into the data given to snapshot_open. */
/* The writer's clocks when it wrote (clock.h), so that the next start
 * knows how long calibd was down and goes on with the steady clock: the
 * steady clock, and the boot's id and time since boot (CLOCK_BOOTTIME,
 * which runs through suspend and no step moves). steady NAN: unknown (a
 * file before them, or a merge). */
typedef struct snapshot_clocks {
    double steady, boottime;
    char boot_id[40];
} snapshot_clocks;

/* A Kafka partition's snapshot (kafka.h) says which partition its models
 * come from and the offset of the first message they have not seen: the
 * optional header key "kafka": {"topic", "partition", "offset"}. */
typedef struct snapshot_source {
    char topic[KAFKA_TOPIC_MAX + 1];
    int32_t partition;
    int64_t offset;
} snapshot_source;

/* The daemon's counters, the status map's but memory's: the header's
 * "daemon" map, so that a restarted calibd counts on from them (and
 * calibctl snapshot shows what status showed). A key absent from the file
 * (a file written before they were kept holds messages and rejected only)
 * reads 0. */
typedef struct snapshot_counts {
    uint64_t messages;
    uint64_t rejected[REJ_MAX]; /* rejections whose model is unknown */
    uint64_t publish_errors, reloads, reloads_refused, models_forgotten, models_expired;
    uint64_t alerts_sent, alerts_suppressed, sinks_failed, sinks_killed, sinks_dropped;
} snapshot_counts;
/* dst += src, counter by counter (calibctl merge sums its files'). */
void snapshot_counts_add(snapshot_counts *dst, const snapshot_counts *src);

typedef struct snapshot_head {
    unsigned version; /* the file's format (later ones read as this one's) */
    int sections;     /* the body is checked section by section (v >= 4) */
    uint64_t body_bytes; /* what the header says the body holds: more than
                            len when the file was cut short (sections) */
    double written;   /* wall clock */
    double mono;      /* the writer's monotonic clock at `written` */
    snapshot_clocks clocks; /* optional keys, absent from older files */
    int has_source;         /* a Kafka partition's snapshot */
    snapshot_source source;
    uint64_t models;
    snapshot_counts counts;
    const char *body;
    size_t len;
} snapshot_head;

/* Appends model m's state to w as one section (its map, framed). */
void snapshot_pack_model(calib_mpw *w, const model *m);

/* A section of the body (version 4): SNAPSHOT_SECTION_HEAD bytes, the
 * magic "\xc1calsec\xc1" (0xc1 is never msgpack), the map's length and
 * CRC-32 and the CRC-32 of these 20 bytes (little-endian u64, u32, u32),
 * then the map. begin reserves the head and returns where it is; end
 * fills it for what was written since. snapshot_section frames a map
 * packed elsewhere (tests, fuzzing). */
#define SNAPSHOT_SECTION_HEAD 24
size_t snapshot_section_begin(calib_mpw *w);
void snapshot_section_end(calib_mpw *w, size_t at);
void snapshot_section(calib_mpw *w, const char *map, size_t len);

/* The CRC-32 (zlib's) of len more bytes at p, after crc (0 to start). */
uint32_t snapshot_crc(uint32_t crc, const char *p, size_t len);
/* The header of a body of len bytes whose CRC-32 is crc, written
 * elsewhere (persist.c streams the body to a file in chunks), with the
 * writer's clocks (NULL: none) and the Kafka partition of its models (NULL:
 * none). */
void snapshot_frame_sum(calib_mpw *w, uint64_t len, uint32_t crc, uint64_t models, double wall,
                        double mono, const snapshot_clocks *clocks,
                        const snapshot_counts *counts, const snapshot_source *src);
/* The same, SNAPSHOT_HEAD_SLOT bytes exactly (a last key "pad" fills it),
 * so that the body can be written after the slot before the header is
 * known: 0, or -1 when the header does not fit (or out of memory). */
#define SNAPSHOT_HEAD_SLOT 4096
int snapshot_frame_slot(calib_mpw *w, uint64_t len, uint32_t crc, uint64_t models, double wall,
                        double mono, const snapshot_clocks *clocks,
                        const snapshot_counts *counts);
/* The header of a body of len bytes holding `models` maps into w (reset
 * first), with the daemon's counters: the file is the header, then the
 * body. */
void snapshot_frame(calib_mpw *w, const char *body, size_t len, uint64_t models, double wall,
                    double mono, const snapshot_counts *counts);

/* Checks the frame of a file's len bytes and fills h; 0, or -1 with err
 * set (not a snapshot, a version this calibd does not read, another byte
 * order, a checksum that does not match). */
int snapshot_open(const char *data, size_t len, snapshot_head *h, char *err, size_t errlen);

/* The next model map of the body from *off into u: 1, 0 at the end, -1
 * with err set when the body does not parse (a file before version 4,
 * whose one checksum covers the body), 2 with err set when a section is
 * damaged (version 4: its checksum does not match, its map does not parse,
 * it is cut short, or its head is damaged and the walk goes on at the next
 * intact head): that section's model is lost, the walk goes on. */
int snapshot_next(const snapshot_head *h, size_t *off, msgpack_unpacked *u, char *err,
                  size_t errlen);

/* A model map's name and shape (shaped 0: form and k unset). 0 or -1. */
int snapshot_model_head(const msgpack_object *o, char name[CFG_NAME_MAX + 1], int *shaped,
                        int *form, size_t *k, char *err, size_t errlen);

/* The model's configuration as the map stores it, over c (defaults and
 * the name set by the caller), with byte budgets that keep its stored
 * capacities: to rebuild a model without the daemon's configuration
 * (calibctl). 0, or -1 with err set. */
int snapshot_model_cfg(const msgpack_object *o, model_cfg *c, char *err, size_t errlen);

/*
 * Restores a model map into m, which has the map's name and shape (see
 * snapshot_model_head) and, if shaped, its loop attached (recalib_attach):
 * statistics, windows, bins, reservoir, ring, waiting items and joined ids,
 * the loop's detectors and shadow run, counters, events, alert states.
 * The stored parameters are not restored (the state directory's
 * model.NAME.params are the authority; the paired comparison is kept only
 * if its version is theirs); with_params = 1 restores them too (calibctl,
 * which has no state directory), with a built-in method's description. shift is added to every monotonic time
 * (now on this clock - the writer's mono - the time the daemon was down).
 * Returns 0 (skipped names the sections left fresh, "" if none), or -1
 * with err set when the map is malformed: m is then partly restored and
 * must be dropped.
 */
int snapshot_restore_model(model *m, const msgpack_object *o, double shift, int with_params,
                           char *skipped, size_t skippedlen, char *err, size_t errlen);

/* Rejection counts by reason name, as the header and each model keep
 * them; reading adds to counts (a reason this calibd does not know counts
 * as internal): 1, or 0 with r failed. */
void snapshot_pack_rejected(calib_mpw *w, const uint64_t counts[REJ_MAX]);
int snapshot_read_rejected(calib_mpr *r, const msgpack_object *map, uint64_t counts[REJ_MAX]);

#endif
