/* persist.c — calibd's snapshots: restore, periodic packing in slices,
 * the worker's write, the final one (see persist.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibd.h"
#include "kafka.h"
#include "registry.h"
#include "snapshot.h"
#include "persist.h"
#include "state.h"

/* ------------------------------------------------------------------ restoring */

/* Restores one model map: 0 (also when the model cannot be restored for a
 * reason of this configuration, logged), 1 when its section cannot be read
 * (the model then starts afresh, logged), -1 with err set when the map has
 * no readable name and shape. Counts its pairs and waiting items. A Kafka
 * partition's model (d->source) not restored for any reason is lost (1):
 * its partition is read on from the file's offset, past its messages. */
static int restore_one(calibd *d, const msgpack_object *o, double shift, char *err,
                       size_t errlen, uint64_t *pairs, uint64_t *waiting)
{
    char name[CFG_NAME_MAX + 1], why[ERR_MAX], skipped[600];
    int shaped, form, reject = 0;
    size_t k;
    int unused = d->source ? 1 : 0; /* what a model not restored is */
    if (snapshot_model_head(o, name, &shaped, &form, &k, err, errlen) != 0)
        return -1;
    if (d->source && registry_find(d, name, strlen(name))) {
        /* a Kafka partition's model is restored only into a new one */
        log_msg(&d->log, LOG_ERROR, "kafka", "%s: not restored from partition %s/%d: a model "
                "of that name is fed from elsewhere here", name, d->source->topic,
                (int)d->source->partition);
        return 1;
    }
    model *m = registry_get(d, name, strlen(name), 1, &reject);
    if (!m) {
        log_msg(&d->log, LOG_WARN, "snapshot", "%s: not restored: %s", name,
                reject_name(reject));
        return unused;
    }
    if (shaped && !m->shaped && registry_shape(d, m, form, k, why, sizeof why) != 0) {
        log_msg(&d->log, LOG_WARN, "snapshot", "%s: not restored: %s", name, why);
        return unused;
    }
    if (shaped != m->shaped || (shaped && (form != m->form || k != m->k))) {
        log_msg(&d->log, LOG_WARN, "snapshot", "%s: not restored: its configured shape "
                "differs from the snapshot's", name);
        return unused;
    }
    if (snapshot_restore_model(m, o, shift, 0, skipped, sizeof skipped, why, sizeof why) != 0) {
        /* half restored: the model goes, and comes again as if new; the
         * other models of the file are not the worse for it */
        if (d->source && registry_walked(d)) /* a walk over the models is under way */
            registry_hand_over(d, &m, 1);
        else
            registry_remove(d, m);
        m = registry_get(d, name, strlen(name), 1, &reject);
        log_msg(&d->log, LOG_ERROR, "snapshot", "%s: its section cannot be used (%s): %s",
                name, why, m ? "it starts afresh" : reject_name(reject));
        return 1;
    }
    if (skipped[0])
        log_msg(&d->log, LOG_WARN, "snapshot", "%s: restored but for: %s", name, skipped);
    model_event_add(m, wall_now(), "restore", "state restored from the snapshot: %llu pairs "
                    "scored, %llu waiting", (unsigned long long)m->scored,
                    (unsigned long long)(m->join.waiting_preds + m->join.waiting_labels));
    *pairs += m->scored;
    *waiting += m->join.waiting_preds + m->join.waiting_labels;
    return 0;
}

/* The snapshot was written in this boot of the machine. */
static int same_boot(const snapshot_head *h)
{
    char id[40];
    boot_id(id, sizeof id);
    return isfinite(h->clocks.steady) && id[0] && strcmp(id, h->clocks.boot_id) == 0;
}

/* Seconds since the snapshot was written: on CLOCK_BOOTTIME within one
 * boot (no step of the wall clock moves it), else on the wall clock; 0 at
 * least. */
double persist_down_time(const snapshot_head *h)
{
    double age = same_boot(h) ? boot_now() - h->clocks.boottime : wall_now() - h->written;
    return age > 0 ? age : 0;
}

int persist_restore_models(calibd *d, const snapshot_head *h, double age, uint64_t *n,
                           uint64_t *lost, uint64_t *pairs, uint64_t *waiting, char *err,
                           size_t errlen)
{
    /* every monotonic time moves onto this process's clock, aged by the
     * time calibd was down */
    double shift = tick_now(d) - h->mono - age;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc;
    char why[ERR_MAX];
    *n = *lost = *pairs = *waiting = 0;
    while ((rc = snapshot_next(h, &off, &u, why, sizeof why)) > 0 && *n < h->models) {
        if (rc == 2) { /* a damaged section: its model only (snapshot.h) */
            log_msg(&d->log, LOG_ERROR, "snapshot", "%s: its model is lost", why);
            ++*lost;
            ++*n;
            continue;
        }
        int one = restore_one(d, &u.data, shift, err, errlen, pairs, waiting);
        if (one < 0) {
            if (!h->sections) {
                rc = -1;
                break;
            }
            /* intact but unusable: that model only */
            log_msg(&d->log, LOG_ERROR, "snapshot", "a section cannot be used (%s): its "
                    "model is lost", err);
            one = 1;
        }
        *lost += one == 1;
        ++*n;
    }
    msgpack_unpacked_destroy(&u);
    if (rc < 0)
        snprintf(err, errlen, "%s", why);
    if (rc == 0 && h->sections && *n < h->models) {
        /* cut short: the models of the sections that are not there */
        log_msg(&d->log, LOG_ERROR, "snapshot", "%llu of the %llu bytes of the body are "
                "there: %llu models lost", (unsigned long long)h->len,
                (unsigned long long)h->body_bytes, (unsigned long long)(h->models - *n));
        *lost += h->models - *n;
        *n = h->models;
    }
    if (rc == 0 && *n != h->models) {
        snprintf(err, errlen, "%llu models in the body, %llu in the header",
                 (unsigned long long)*n, (unsigned long long)h->models);
        rc = -1;
    } else if (rc > 0) {
        snprintf(err, errlen, "more models in the body than the header's %llu",
                 (unsigned long long)h->models);
        rc = -1;
    }
    return rc;
}

int persist_restore(calibd *d)
{
    persister *s = &d->snap;
    char err[ERR_MAX], moved[4400];
    char *data = NULL;
    size_t len = 0;
    s->restored_age = -1;
    if (d->cfg.snapshot_interval <= 0)
        return 0;
    /* no larger than all the models could be, with room for the framing */
    size_t max = (size_t)(d->cfg.memory_limit < SIZE_MAX / 2 ? 2 * d->cfg.memory_limit
                                                               : SIZE_MAX / 2);
    int rc = state_read_file(d->cfg.state_dir, SNAPSHOT_FILE, max, &data, &len, err,
                             sizeof err);
    if (rc == 1) {
        log_msg(&d->log, LOG_INFO, "snapshot", "no snapshot in %s: starting afresh",
                d->cfg.state_dir);
        return 0;
    }
    snapshot_head h;
    uint64_t n = 0, pairs = 0, waiting = 0, lost = 0;
    double age = 0;
    if (rc == 0 && snapshot_open(data, len, &h, err, sizeof err) == 0) {
        /* how long calibd was down: exact within one boot, on the wall
         * clock across a reboot (or for a file without its clocks) */
        age = persist_down_time(&h);
        /* the steady clock goes on from the file's (snapshot_clocks) */
        if (isfinite(h.clocks.steady)) {
            double from = h.clocks.steady + age;
            clock_resume(d, same_boot(&h) || from > wall_now() ? from : wall_now());
        }
        rc = persist_restore_models(d, &h, age, &n, &lost, &pairs, &waiting, err, sizeof err);
    } else {
        rc = -1;
    }
    if (rc == 0 && lost) {
        /* the next snapshot will be written over it: a copy keeps the
         * sections that could not be used, for a human */
        if (state_keep_aside(d->cfg.state_dir, SNAPSHOT_FILE, data, len, moved,
                             sizeof moved) == 0)
            log_msg(&d->log, LOG_ERROR, "snapshot", "%llu of %llu models could not be "
                    "restored; the file is kept in %s", (unsigned long long)lost,
                    (unsigned long long)n, moved);
        else
            log_msg(&d->log, LOG_ERROR, "snapshot", "%llu of %llu models could not be "
                    "restored, and the file could not be kept aside (%s)",
                    (unsigned long long)lost, (unsigned long long)n, strerror(errno));
    }
    free(data);
    if (rc == 0) {
        calibd_counts_add(d, &h.counts);
        s->restored_age = age;
        log_msg(&d->log, LOG_INFO, "snapshot", "restored %llu models from %s/%s, written %.0f s "
                "ago: %llu pairs scored, %llu items waiting", (unsigned long long)(n - lost),
                d->cfg.state_dir, SNAPSHOT_FILE, age, (unsigned long long)pairs,
                (unsigned long long)waiting);
        return 0;
    }
    /* nothing of it stays: the models it made go, the configured ones are
     * made afresh by the caller */
    registry_free(d);
    if (state_move_aside(d->cfg.state_dir, SNAPSHOT_FILE, moved, sizeof moved) == 0)
        log_msg(&d->log, LOG_ERROR, "snapshot", "%s/%s cannot be used (%s): moved aside to "
                "%s; starting without it", d->cfg.state_dir, SNAPSHOT_FILE, err, moved);
    else
        log_msg(&d->log, LOG_ERROR, "snapshot", "%s/%s cannot be used (%s) nor moved aside "
                "(%s); starting without it", d->cfg.state_dir, SNAPSHOT_FILE, err,
                strerror(errno));
    return 0;
}

/* ------------------------------------------------------------------ writing */

/*
 * The body goes into STATE_DIR/snapshot.tmp, after a slot for the header,
 * a chunk at a time while the loop packs the models, so that a snapshot
 * holds two chunks (and one model) in memory, not every model packed again
 * beside the models (13,609 models once took calibd to 3.3 GB under a
 * memory_limit of 2 GiB), and the disk holds the old snapshot and the new
 * one, no more. The loop packs into one chunk while the worker writes the
 * other to the file and sums its CRC-32 (a chunk's write and CRC took 40%
 * of the loop's time when the loop did them); a step that finds its chunk
 * full while the worker is still busy pauses the slicer until the worker
 * is done. A model holding SNAPSHOT_COPY_MIN bytes or more is not packed
 * on the loop (40 MB of segments took 0.30 s): the loop copies it
 * (model_copy: memory copied, not packed; about 4 ns a byte on the test
 * VM, whose page faults are dear, far less where they are cheap), and the
 * worker packs the copy, as of that moment, after the chunk before, and
 * frees it; without the memory for a copy, the loop packs it. After the
 * last chunk, the loop frames the header for the slot
 * (snapshot_frame_slot pads it to fill it), and the worker writes it,
 * syncs the file and renames it.
 */
#define SNAPSHOT_CHUNK ((size_t)1 << 20)
#define SNAPSHOT_COPY_MIN ((size_t)4 << 20)

/* The chunk the loop packs into. */
static calib_mpw *packing_chunk(persister *s)
{
    return &s->chunk[s->cur];
}

/* 0, or -1 with s->err set. */
static int body_open(calibd *d)
{
    persister *s = &d->snap;
    calib_mpw_reset(&s->chunk[0]);
    calib_mpw_reset(&s->chunk[1]);
    s->body_len = 0;
    s->crc = snapshot_crc(0, NULL, 0);
    s->body_errno = 0;
    s->chunks = state_open_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->err, sizeof s->err);
    if (!s->chunks)
        return -1;
    if (fseeko(s->chunks, SNAPSHOT_HEAD_SLOT, SEEK_SET) != 0) {
        snprintf(s->err, sizeof s->err, "its file cannot skip the header's slot: %s",
                 strerror(errno));
        state_drop_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->chunks);
        s->chunks = NULL;
        return -1;
    }
    return 0;
}

/* What chunk c holds goes to the file (unless an earlier chunk failed),
 * its CRC-32 summed; c is emptied. The worker's while s->flushing, else
 * the loop's. */
static void chunk_write(persister *s, calib_mpw *c)
{
    size_t n = c->sb.size;
    if (!s->body_errno && n) {
        if (fwrite(c->sb.data, 1, n, s->chunks) == n) {
            s->crc = snapshot_crc(s->crc, c->sb.data, n);
            s->body_len += n;
        } else {
            s->body_errno = errno ? errno : EIO;
        }
    }
    calib_mpw_reset(c);
}

/* A chunk that grew past two megabytes (a large model packed whole) gives
 * its buffer back between snapshots. */
static void chunks_trim(persister *s)
{
    for (int i = 0; i < 2; i++)
        if (s->chunk[i].sb.alloc > 2 * SNAPSHOT_CHUNK) {
            calib_mpw_destroy(&s->chunk[i]);
            calib_mpw_init(&s->chunk[i]);
        }
}

/* The header of `models` models for the slot, once the whole body is in
 * the file: 0, or -1 with s->err set and the file dropped. */
static int body_close(calibd *d, uint64_t models)
{
    persister *s = &d->snap;
    int oom = calib_mpw_error(packing_chunk(s)) != CALIB_OK;
    snapshot_clocks clocks = {steady_now(d), boot_now(), ""};
    boot_id(clocks.boot_id, sizeof clocks.boot_id);
    snapshot_counts counts;
    calibd_counts(d, &counts);
    if (oom || s->body_errno)
        snprintf(s->err, sizeof s->err, "%s%s", oom ? "out of memory to pack the models"
                 : "the body cannot be written: ", oom ? "" : strerror(s->body_errno));
    else if (snapshot_frame_slot(&s->head, s->body_len, s->crc, models, wall_now(), tick_now(d),
                                 &clocks, &counts) != 0)
        snprintf(s->err, sizeof s->err, "the header does not fit its %d bytes",
                 SNAPSHOT_HEAD_SLOT);
    else
        return 0;
    state_drop_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->chunks);
    s->chunks = NULL;
    return -1;
}

/* The header into its slot, the file synced and renamed (the worker's
 * share while `writing`; also the final snapshot's). */
static int write_file(calibd *d)
{
    persister *s = &d->snap;
    int rc = state_commit_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->chunks, s->head.sb.data,
                              s->head.sb.size, s->err, sizeof s->err);
    s->chunks = NULL;
    return rc;
}

static void write_work(uv_work_t *req)
{
    calibd *d = req->data;
    d->snap.rc = write_file(d);
}

static void written(calibd *d, int rc, const char *err)
{
    persister *s = &d->snap;
    if (rc < 0) {
        s->errors++;
        log_rl(&d->log, LOG_ERROR, "snapshot", "%s", err);
        return;
    }
    if (rc > 0) /* stored, the directory not synced */
        log_rl(&d->log, LOG_WARN, "snapshot", "%s", err);
    s->writes++;
    s->last_ok = wall_now();
    s->bytes = SNAPSHOT_HEAD_SLOT + s->body_len;
    s->duration = (double)(uv_hrtime() - s->begun_ns) * 1e-9;
}

static void write_done(uv_work_t *req, int status)
{
    calibd *d = req->data;
    persister *s = &d->snap;
    s->writing = 0;
    written(d, status == 0 ? s->rc : -1, status == 0 ? s->err : uv_strerror(status));
    s->next_due = tick_now(d) + d->cfg.snapshot_interval;
}

static void start_flush(calibd *d);

/* Every model packed and every chunk in the file: the header framed, the
 * worker writes it and renames the file. */
static void finish(calibd *d)
{
    persister *s = &d->snap;
    if (packing_chunk(s)->sb.size && calib_mpw_error(packing_chunk(s)) == CALIB_OK) {
        start_flush(d); /* the last chunk first: back here when written */
        return;
    }
    s->all_packed = 0;
    int rc = body_close(d, s->models);
    chunks_trim(s);
    if (rc != 0) {
        written(d, -1, s->err);
        s->next_due = tick_now(d) + d->cfg.snapshot_interval;
        return;
    }
    s->writing = 1;
    s->req.data = d;
    rc = uv_queue_work(d->loop, &s->req, write_work, write_done);
    if (rc != 0) {
        s->writing = 0;
        state_drop_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->chunks);
        s->chunks = NULL;
        written(d, -1, uv_strerror(rc));
        s->next_due = tick_now(d) + d->cfg.snapshot_interval;
    }
}

/* On the loop, the worker's chunk written: the packing goes on, or the
 * snapshot ends; a snapshot stopped meanwhile drops its file. */
static void flushed(calibd *d)
{
    persister *s = &d->snap;
    s->flushing = 0;
    if (s->abandoned) {
        s->abandoned = 0;
        state_drop_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->chunks);
        s->chunks = NULL;
        return;
    }
    if (s->all_packed)
        finish(d);
    else
        slicer_resume(&s->pack);
}

/* The worker's share (or the loop's without a worker): the full chunk
 * to the file, then the copy of a large model, if one waits, packed into
 * it and written too. */
static void flush(persister *s)
{
    calib_mpw *c = &s->chunk[!s->cur];
    chunk_write(s, c);
    if (!s->copy)
        return;
    snapshot_pack_model(c, s->copy);
    if (calib_mpw_error(c) == CALIB_OK)
        chunk_write(s, c);
    else if (!s->body_errno)
        s->body_errno = ENOMEM;
    calib_mpw_reset(c);
    model_free(s->copy);
    free(s->copy);
    s->copy = NULL;
}

static void flush_work(uv_work_t *req)
{
    flush(&((calibd *)req->data)->snap);
}

static void flush_done(uv_work_t *req, int status)
{
    (void)status; /* a work request is never cancelled here */
    flushed(req->data);
}

/* The full chunk goes to the worker; the loop packs into the other. */
static void start_flush(calibd *d)
{
    persister *s = &d->snap;
    s->cur = !s->cur;
    s->flushing = 1;
    s->flush.data = d;
    if (uv_queue_work(d->loop, &s->flush, flush_work, flush_done) != 0) {
        flush(s); /* no worker: written here */
        flushed(d);
    }
}

/* The loop's share, a slice at a time: the models, then the header. */
static size_t models_now(void *arg)
{
    return ((calibd *)arg)->reg.n;
}

/* A Kafka partition's model is in its partition's snapshot (kafka.h). */
static void pack_one(void *arg, size_t i)
{
    calibd *d = arg;
    persister *s = &d->snap;
    const model *m = d->reg.models[i];
    if (m->kpart)
        return;
    calib_mpw *c = packing_chunk(s);
    int large = m->mem.used >= SNAPSHOT_COPY_MIN;
    if (s->flushing && (large || c->sb.size >= SNAPSHOT_CHUNK)) {
        slicer_pause(&s->pack); /* the worker has the other chunk */
        return;
    }
    if (large && calib_mpw_error(c) == CALIB_OK && (s->copy = model_copy(m))) {
        s->packed++;
        s->copies++;
        start_flush(d); /* the chunk so far, then the copy */
        return;
    }
    snapshot_pack_model(c, m);
    s->packed++;
    if (c->sb.size >= SNAPSHOT_CHUNK && !s->flushing && calib_mpw_error(c) == CALIB_OK)
        start_flush(d);
}

static void packed(void *arg)
{
    calibd *d = arg;
    persister *s = &d->snap;
    s->packing = 0;
    registry_walk_end(&d->reg);
    s->slice_max = s->pack.slice_max;
    s->models = s->packed;
    s->copied = s->copies;
    s->all_packed = 1;
    if (!s->flushing)
        finish(d);
}

void persist_tick(calibd *d)
{
    persister *s = &d->snap;
    double now = tick_now(d);
    if (d->cfg.snapshot_interval <= 0 || d->stopping || s->packing || s->all_packed ||
        s->flushing || s->writing)
        return;
    if (!s->ready) {
        if (slicer_init(&s->pack, d->loop, models_now, pack_one, packed, d) != 0)
            return; /* tried again next tick */
        calib_mpw_init(&s->head);
        calib_mpw_init(&s->chunk[0]);
        calib_mpw_init(&s->chunk[1]);
        s->ready = 1;
        s->next_due = now + d->cfg.snapshot_interval;
        return;
    }
    if (now < s->next_due)
        return;
    s->begun_ns = uv_hrtime();
    if (body_open(d) != 0) {
        written(d, -1, s->err);
        s->next_due = now + d->cfg.snapshot_interval;
        return;
    }
    s->packing = 1;
    registry_walk_begin(&d->reg); /* until packed, or persist_stop */
    s->packed = s->copies = 0;
    slicer_start(&s->pack);
}

void persist_stop(calibd *d)
{
    persister *s = &d->snap;
    if (!s->ready)
        return;
    slicer_close(&s->pack);
    if ((s->packing || s->all_packed) && s->chunks) {
        /* cut short: the final snapshot follows (after the worker's chunk,
         * if it has one: the loop runs until it is written) */
        if (s->flushing)
            s->abandoned = 1;
        else {
            state_drop_tmp(d->cfg.state_dir, SNAPSHOT_FILE, s->chunks);
            s->chunks = NULL;
        }
    }
    if (s->packing)
        registry_walk_end(&d->reg);
    s->packing = s->all_packed = 0;
}

int persist_final(calibd *d)
{
    persister *s = &d->snap;
    if (d->cfg.snapshot_interval <= 0)
        return 0;
    if (!s->ready) {
        calib_mpw_init(&s->head);
        calib_mpw_init(&s->chunk[0]);
        calib_mpw_init(&s->chunk[1]);
        s->ready = 1;
    }
    s->begun_ns = uv_hrtime();
    int rc = body_open(d);
    s->packed = 0;
    if (rc == 0) {
        for (size_t i = 0; i < d->reg.n; i++) {
            const model *m = d->reg.models[i];
            if (!m->kpart) {
                snapshot_pack_model(packing_chunk(s), m);
                s->packed++;
            }
            if (packing_chunk(s)->sb.size >= SNAPSHOT_CHUNK)
                chunk_write(s, packing_chunk(s));
        }
        if (calib_mpw_error(packing_chunk(s)) == CALIB_OK)
            chunk_write(s, packing_chunk(s));
        rc = body_close(d, s->packed);
        chunks_trim(s);
    }
    if (rc == 0)
        rc = write_file(d);
    written(d, rc, s->err);
    if (rc < 0)
        return -1;
    log_msg(&d->log, LOG_INFO, "snapshot", "%zu models written to %s/%s (%zu bytes)",
            s->packed, d->cfg.state_dir, SNAPSHOT_FILE, s->bytes);
    return 0;
}

void persist_free(calibd *d)
{
    persister *s = &d->snap;
    if (!s->ready)
        return;
    calib_mpw_destroy(&s->head);
    calib_mpw_destroy(&s->chunk[0]);
    calib_mpw_destroy(&s->chunk[1]);
    if (s->copy) { /* (the loop ran to its end: the worker freed it) */
        model_free(s->copy);
        free(s->copy);
        s->copy = NULL;
    }
    s->ready = 0;
}
