/* kafka.c — the Kafka consumer group: its queue served from the loop, the
 * partitions' snapshots and offsets, rebalancing (see kafka.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "calibd.h"
#include "ingest.h"
#include "kafka.h"
#include "persist.h"
#include "recalib.h"
#include "registry.h"
#include "snapshot.h"
#include "state.h"

/* One partition's snapshot, packed by the loop, written by a worker (or at
 * once, at a revocation). */
typedef struct part_write {
    kafka_part *p;
    uint64_t epoch; /* p's assignment it was packed in */
    int64_t offset;
    calib_mpw head, body;
    int cancelled; /* a revocation wrote a later one: under the lock */
    int done, rc;  /* written (state_write_parts' rc) */
    char err[ERR_MAX];
} part_write;

struct kafka {
    calibd *d;
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    int fds[2];      /* librdkafka writes a byte to [1] when its queue fills */
    uv_poll_t poll;  /* on fds[0] */
    uv_idle_t more;  /* the queue still holds messages after a slice */
    int handles;     /* poll and more initialised (closed at stop) */
    int closing;
    kafka_figures fig; /* d->kafka_fig: the partitions, the counters */
    size_t cap;        /* of fig.parts */
    uv_mutex_t lock; /* a partition's file: the worker's writes, a revocation's */
    uv_work_t req;
    part_write *batch;
    size_t nbatch;
    int writing;     /* the worker holds the batch */
    int fatal;       /* librdkafka's fatal error: no longer a member, writes nothing */
    double next_due;
    double next_commit; /* commit_behind's turn */
    kafka_part *behind[64];
    char tag[96];    /* this instance's temporary names in the shared
                        directory: host and a hash of its own state_dir */
    /* a stall of the loop past session.timeout.ms (SIGSTOP, a frozen VM):
     * the group may have gone on without this member, which holds its
     * partitions' writes and publishes until the group answers (a
     * rebalance) or three heartbeat intervals pass without one */
    uint64_t stall_ns, heartbeat_ns; /* a gap between two ticks longer than
                        stall_ns (the tick plus session.timeout.ms) is a stall */
    uint64_t last_tick;  /* uv_hrtime of the last kafka_tick */
    uint64_t held_until; /* 0: not held */
};

#define KAFKA_COMMIT_RETRY 5.0 /* seconds between two rounds of commits behind */
#define KAFKA_METADATA_MS 5000 /* the longest an assignment waits for a topic's
                                  partition count */

/* A key's partition among count, as the producers' partitioner puts it:
 * librdkafka's own functions (the _random variants differ only for
 * messages without a key, which calibd does not check). */
typedef int32_t (*partitioner_fn)(const rd_kafka_topic_t *, const void *, size_t, int32_t,
                                  void *, void *);
static const struct {
    const char *name;
    partitioner_fn fn;
} partitioners[] = {
    {"consistent_random", rd_kafka_msg_partitioner_consistent},
    {"consistent", rd_kafka_msg_partitioner_consistent},
    {"murmur2_random", rd_kafka_msg_partitioner_murmur2},
    {"murmur2", rd_kafka_msg_partitioner_murmur2},
    {"fnv1a_random", rd_kafka_msg_partitioner_fnv1a},
    {"fnv1a", rd_kafka_msg_partitioner_fnv1a},
};
/* one consumer a process: the partitioner its producers use */
static partitioner_fn partition_of = rd_kafka_msg_partitioner_consistent;

/* [kafka] partitioner (librdkafka's property; consistent_random when not
 * set): its function, or NULL with err set for one that does not hash the
 * key (random). */
static partitioner_fn partitioner_of(const kafka_cfg *c, char *err, size_t errlen)
{
    const char *name = "consistent_random";
    for (size_t i = 0; i < c->nprops; i++)
        if (strcmp(c->prop_key[i], "partitioner") == 0)
            name = c->prop_value[i];
    for (size_t i = 0; i < sizeof partitioners / sizeof *partitioners; i++)
        if (strcmp(name, partitioners[i].name) == 0)
            return partitioners[i].fn;
    snprintf(err, errlen, "[kafka] partitioner = %s: calibd needs the partitioner its producers "
             "use, one that hashes the key (consistent_random, the default, murmur2_random, "
             "fnv1a_random, or the same without _random)", name);
    return NULL;
}

int kafka_part_owns(const kafka_part *p, const void *key, size_t key_len, int32_t *want)
{
    if (p->count <= 0 || key_len == 0)
        return 1;
    *want = partition_of(NULL, key, key_len, p->count, NULL, NULL);
    return *want == p->partition;
}

void kafka_part_file(const char *topic, int32_t partition, char *name, size_t len)
{
    snprintf(name, len, "partition.%s.%" PRId32, topic, partition);
}

static kafka_part *part_find(struct kafka *k, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < k->fig.nparts; i++)
        if (k->fig.parts[i]->partition == partition && strcmp(k->fig.parts[i]->topic, topic) == 0)
            return k->fig.parts[i];
    return NULL;
}

/* The partition's entry, made on its first assignment; NULL out of memory
 * (or a topic name librdkafka should not have given). */
static kafka_part *part_get(struct kafka *k, const char *topic, int32_t partition)
{
    kafka_part *p = part_find(k, topic, partition);
    if (p || strlen(topic) > KAFKA_TOPIC_MAX)
        return p;
    if (k->fig.nparts == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 16;
        kafka_part **v = realloc(k->fig.parts, cap * sizeof *v);
        if (!v)
            return NULL;
        k->fig.parts = v;
        k->cap = cap;
    }
    if (!(p = calloc(1, sizeof *p)))
        return NULL;
    snprintf(p->topic, sizeof p->topic, "%s", topic);
    p->partition = partition;
    p->next = p->saved = p->committed = -1;
    k->fig.parts[k->fig.nparts++] = p;
    return p;
}

static void drain(struct kafka *k);

/* ------------------------------------------------------------ partition snapshots */

/* Packs partition p's models, as of now, into w. 0, or -1 out of memory. */
static int pack_part(calibd *d, kafka_part *p, part_write *w)
{
    /* the partition's messages; the daemon's counters are the daemon's */
    snapshot_counts counts = {.messages = p->messages};
    memset(w, 0, sizeof *w);
    w->p = p;
    w->epoch = p->epoch;
    w->offset = p->next;
    calib_mpw_init(&w->head);
    calib_mpw_init(&w->body);
    uint64_t n = 0;
    for (size_t i = 0; i < d->reg.n; i++) {
        const model *m = d->reg.models[i];
        if (m->kpart == p && !m->handed_over) {
            snapshot_pack_model(&w->body, m);
            n++;
        }
    }
    snapshot_clocks clocks = {steady_now(d), boot_now(), ""};
    boot_id(clocks.boot_id, sizeof clocks.boot_id);
    snapshot_source src = {.partition = p->partition, .offset = p->next};
    snprintf(src.topic, sizeof src.topic, "%s", p->topic);
    snapshot_frame_sum(&w->head, w->body.sb.size, snapshot_crc(0, w->body.sb.data,
                       w->body.sb.size), n, wall_now(), tick_now(d), &clocks, &counts,
                       &src);
    if (calib_mpw_error(&w->head) != CALIB_OK || calib_mpw_error(&w->body) != CALIB_OK) {
        snprintf(w->err, sizeof w->err, "out of memory to pack the partition's models");
        return -1;
    }
    return 0;
}

static void write_free(part_write *w)
{
    calib_mpw_destroy(&w->head);
    calib_mpw_destroy(&w->body);
}

/* Writes w's file durably, unless a revocation cancelled it (on any
 * thread: reads only w and the configuration). */
static void write_part(struct kafka *k, part_write *w)
{
    char name[KAFKA_TOPIC_MAX + 32];
    kafka_part_file(w->p->topic, w->p->partition, name, sizeof name);
    state_part parts[2] = {{w->head.sb.data, w->head.sb.size},
                           {w->body.sb.data, w->body.sb.size}};
    uv_mutex_lock(&k->lock);
    if (!w->cancelled && rd_kafka_assignment_lost(k->rk)) {
        /* the group went on without us (a stall past session.timeout.ms):
         * the partition's next owner writes it from now on */
        w->rc = -1;
        snprintf(w->err, sizeof w->err, "not written: this member's assignment is lost (the "
                 "group went on without it)");
        w->done = 1;
    } else if (!w->cancelled) {
        w->rc = state_write_parts(k->d->cfg.kafka.state_dir, name, k->tag, parts, 2, w->err,
                                  sizeof w->err);
        w->done = 1;
    }
    uv_mutex_unlock(&k->lock);
}

/* After a write on the loop: counted, logged; 1 if the snapshot is on
 * disk. */
static int part_written(struct kafka *k, part_write *w)
{
    calibd *d = k->d;
    if (!w->done)
        return 0;
    if (w->rc < 0) {
        k->fig.st.snapshot_errors++;
        log_rl(&d->log, LOG_ERROR, "kafka", "partition %s/%d: snapshot not written (its "
               "offset is not committed): %s", w->p->topic, (int)w->p->partition, w->err);
        return 0;
    }
    if (w->rc > 0)
        log_rl(&d->log, LOG_WARN, "kafka", "%s", w->err);
    k->fig.st.snapshots++;
    /* a snapshot of an earlier assignment says nothing of this one's */
    if (w->epoch != w->p->epoch || !w->p->assigned)
        return 0;
    if (w->offset > w->p->saved)
        w->p->saved = w->offset;
    return 1;
}

/* The worker's snapshot of p, if it holds one, is older than one written
 * now on the loop: it must not land after it. */
static void cancel_queued(struct kafka *k, const kafka_part *p)
{
    uv_mutex_lock(&k->lock);
    for (size_t i = 0; i < k->nbatch; i++)
        if (k->batch[i].p == p)
            k->batch[i].cancelled = 1;
    uv_mutex_unlock(&k->lock);
}

/* Writes p's snapshot now, on the loop, if it changed since the last one. */
static void write_now(struct kafka *k, kafka_part *p)
{
    if (k->fatal || p->next < 0 || p->next == p->saved)
        return;
    cancel_queued(k, p);
    part_write w;
    if (pack_part(k->d, p, &w) == 0) {
        write_part(k, &w);
    } else {
        w.done = 1;
        w.rc = -1;
    }
    part_written(k, &w);
    write_free(&w);
}

/* Commits the offsets of the snapshots on disk that the group does not
 * have yet (async: offset_committed counts the answer). */
static void commit_saved(struct kafka *k, kafka_part *const *parts, size_t n)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
    if (!l)
        return;
    for (size_t i = 0; i < n; i++)
        if (parts[i]->saved >= 0 && parts[i]->saved != parts[i]->committed)
            rd_kafka_topic_partition_list_add(l, parts[i]->topic, parts[i]->partition)->offset =
                parts[i]->saved;
    if (l->cnt) {
        rd_kafka_resp_err_t err = rd_kafka_commit(k->rk, l, 1);
        if (err) {
            k->fig.st.commit_errors++;
            log_rl(&k->d->log, LOG_WARN, "kafka", "commit: %s", rd_kafka_err2str(err));
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static void batch_work(uv_work_t *req)
{
    struct kafka *k = req->data;
    for (size_t i = 0; i < k->nbatch; i++)
        write_part(k, &k->batch[i]);
}

static void batch_done(uv_work_t *req, int status)
{
    struct kafka *k = req->data;
    kafka_part *written[64];
    size_t n = 0;
    for (size_t i = 0; i < k->nbatch; i++) {
        part_write *w = &k->batch[i];
        if (status != 0 && !w->done) {
            w->done = 1;
            w->rc = -1;
            snprintf(w->err, sizeof w->err, "%s", uv_strerror(status));
        }
        if (part_written(k, w) && w->p->assigned)
            written[n++] = w->p;
        if (n == sizeof written / sizeof *written) {
            commit_saved(k, written, n);
            n = 0;
        }
        write_free(w);
    }
    if (n)
        commit_saved(k, written, n);
    free(k->batch);
    k->batch = NULL;
    k->nbatch = 0;
    k->writing = 0;
    k->next_due = tick_now(k->d) + k->d->cfg.snapshot_interval;
}

/* The offsets of snapshots on disk that the group lacks, committed again
 * (a commit refused, or one not made yet for a partition just restored). */
static void commit_behind(struct kafka *k)
{
    size_t n = 0;
    for (size_t i = 0; i < k->fig.nparts; i++) {
        kafka_part *p = k->fig.parts[i];
        if (p->assigned && p->saved >= 0 && p->saved != p->committed &&
            n < sizeof k->behind / sizeof *k->behind)
            k->behind[n++] = p;
    }
    if (n)
        commit_saved(k, k->behind, n);
}

int kafka_may_act(calibd *d, const char *name)
{
    struct kafka *k = d->kafka;
    if (!k)
        return 1;
    if (name) {
        const model *m = registry_find(d, name, strlen(name));
        if (!m || !m->kpart)
            return 1;
    }
    uint64_t now = uv_hrtime();
    int ok = !(k->last_tick && now - k->last_tick > k->stall_ns) && /* stalled now */
             !(k->held_until && now < k->held_until) && !rd_kafka_assignment_lost(k->rk);
    return ok;
}

void kafka_tick(calibd *d)
{
    struct kafka *k = d->kafka;
    if (!k || k->closing)
        return;
    uint64_t t = uv_hrtime();
    if (k->last_tick && t - k->last_tick > k->stall_ns) {
        k->held_until = t + 3 * k->heartbeat_ns;
        log_msg(&d->log, LOG_WARN, "kafka", "the loop stalled %.1f s, past session.timeout.ms: "
                "the partitions' writes and publishes are held until the group answers",
                (double)(t - k->last_tick) / 1e9);
    }
    k->last_tick = t;
    /* the queue served each tick too: an idle group is polled within
     * max.poll.interval.ms, or librdkafka would leave it */
    drain(k);
    if (k->closing || k->fatal)
        return;
    double now = tick_now(d);
    if (now >= k->next_commit) {
        k->next_commit = now + KAFKA_COMMIT_RETRY;
        commit_behind(k);
    }
    if (k->writing || d->cfg.snapshot_interval <= 0 || now < k->next_due)
        return;
    if (!kafka_may_act(d, NULL)) /* lost, or maybe: its revocation comes next */
        return;
    k->next_due = now + d->cfg.snapshot_interval;
    size_t n = 0;
    for (size_t i = 0; i < k->fig.nparts; i++) {
        const kafka_part *p = k->fig.parts[i];
        n += p->assigned && p->next >= 0 && p->next != p->saved;
    }
    if (!n || !(k->batch = calloc(n, sizeof *k->batch)))
        return;
    for (size_t i = 0; i < k->fig.nparts; i++) {
        kafka_part *p = k->fig.parts[i];
        if (!p->assigned || p->next < 0 || p->next == p->saved)
            continue;
        part_write *w = &k->batch[k->nbatch];
        if (pack_part(d, p, w) != 0) {
            k->fig.st.snapshot_errors++;
            log_rl(&d->log, LOG_ERROR, "kafka", "partition %s/%d: %s", p->topic,
                   (int)p->partition, w->err);
            write_free(w);
            continue;
        }
        k->nbatch++;
    }
    k->writing = 1;
    k->req.data = k;
    int rc = uv_queue_work(d->loop, &k->req, batch_work, batch_done);
    if (rc != 0)
        batch_done(&k->req, rc);
}

/* ------------------------------------------------------------ rebalancing */

/* p's models leave (registry_hand_over): a revoked partition's, or those a
 * snapshot that could not be used made. Inside a rebalance a walk over the
 * models may be under way: they are freed when it is safe. Returns how
 * many. */
static size_t drop_models(calibd *d, kafka_part *p)
{
    size_t n = 0, got = 0;
    for (size_t i = 0; i < d->reg.n; i++)
        n += d->reg.models[i]->kpart == p && !d->reg.models[i]->handed_over;
    model **v = n ? malloc(n * sizeof *v) : NULL;
    for (size_t i = 0; i < d->reg.n; i++) {
        model *m = d->reg.models[i];
        if (m->kpart != p || m->handed_over)
            continue;
        if (v)
            v[got++] = m;
        else /* out of memory for the list: one at a time */
            registry_hand_over(d, &m, 1);
    }
    registry_hand_over(d, v, got); /* the index rebuilt once */
    free(v);
    return n;
}

/* The group's committed offset of partition p (waits at most
 * KAFKA_METADATA_MS), or -1 when none or unknown. */
static int64_t committed_offset(struct kafka *k, const kafka_part *p)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    if (!l)
        return -1;
    rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
    int64_t off = -1;
    if (!rd_kafka_committed(k->rk, l, KAFKA_METADATA_MS) && !l->elems[0].err &&
        l->elems[0].offset >= 0)
        off = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    return off;
}

/* Restores partition p from its snapshot in the group's directory: the
 * offset to read it from (the file's); RD_KAFKA_OFFSET_STORED (the
 * group's committed offset, else auto.offset.reset) without one;
 * RD_KAFKA_OFFSET_BEGINNING when it cannot be used (its models' history
 * is read again). A file with damaged sections loses their models only:
 * they start afresh at the file's offset. */
static int64_t restore_part(struct kafka *k, kafka_part *p)
{
    calibd *d = k->d;
    const char *dir = d->cfg.kafka.state_dir;
    char name[KAFKA_TOPIC_MAX + 32], err[ERR_MAX], moved[4400];
    kafka_part_file(p->topic, p->partition, name, sizeof name);
    size_t max = (size_t)(d->cfg.memory_limit < SIZE_MAX / 2 ? 2 * d->cfg.memory_limit
                                                               : SIZE_MAX / 2);
    char *data = NULL;
    size_t len = 0;
    p->next = p->saved = -1;
    int rc = state_read_file(dir, name, max, &data, &len, err, sizeof err);
    if (rc == 1) {
        log_msg(&d->log, LOG_INFO, "kafka", "partition %s/%d: no snapshot in %s: read from "
                "the group's committed offset", p->topic, (int)p->partition, dir);
        return RD_KAFKA_OFFSET_STORED;
    }
    snapshot_head h;
    uint64_t n = 0, lost = 0, pairs = 0, waiting = 0;
    if (rc == 0 && snapshot_open(data, len, &h, err, sizeof err) == 0) {
        int64_t committed;
        if (!h.has_source || strcmp(h.source.topic, p->topic) != 0 ||
            h.source.partition != p->partition) {
            snprintf(err, sizeof err, "not this partition's snapshot");
            rc = -1;
        } else if ((committed = committed_offset(k, p)) >= 0 && h.source.offset < committed) {
            /* the group committed past it: a later owner's file was
             * written over by a member fenced since (a stall past
             * session.timeout.ms); the broker refused that member's
             * commit, not its file */
            snprintf(err, sizeof err, "stale: its offset %lld is behind the group's committed "
                     "%lld (written by a member the group had fenced)",
                     (long long)h.source.offset, (long long)committed);
            rc = -1;
        } else {
            d->source = p;
            rc = persist_restore_models(d, &h, persist_down_time(&h), &n, &lost, &pairs,
                                        &waiting, err, sizeof err);
            d->source = NULL;
        }
    } else {
        rc = -1;
    }
    if (rc == 0) {
        if (lost) {
            int kept = state_keep_aside(dir, name, data, len, moved, sizeof moved) == 0;
            log_msg(&d->log, LOG_ERROR, "kafka", "partition %s/%d: %llu of %llu models could "
                    "not be restored; the file is %s%s", p->topic, (int)p->partition,
                    (unsigned long long)lost, (unsigned long long)n,
                    kept ? "kept in " : "not kept aside: ", kept ? moved : strerror(errno));
        }
        free(data);
        p->next = h.source.offset;
        /* after a loss the file is written again at the next chance (not
         * restored again, and kept aside again, by every next owner) */
        p->saved = lost ? -1 : h.source.offset;
        k->fig.st.restored++;
        log_msg(&d->log, LOG_INFO, "kafka", "partition %s/%d: restored %llu models (%llu pairs "
                "scored, %llu items waiting); reading from offset %lld", p->topic,
                (int)p->partition, (unsigned long long)(n - lost), (unsigned long long)pairs,
                (unsigned long long)waiting, (long long)h.source.offset);
        return h.source.offset;
    }
    free(data);
    drop_models(d, p);
    k->fig.st.restore_errors++;
    /* the group's committed offset is past the messages whose state is
     * lost (a commit follows a snapshot): the partition is read again
     * from the earliest message the brokers hold */
    if (state_move_aside(dir, name, moved, sizeof moved) == 0)
        log_msg(&d->log, LOG_ERROR, "kafka", "partition %s/%d: %s/%s cannot be used (%s): "
                "moved aside to %s; read again from the earliest offset the brokers hold",
                p->topic, (int)p->partition, dir, name, err, moved);
    else
        log_msg(&d->log, LOG_ERROR, "kafka", "partition %s/%d: %s/%s cannot be used (%s) nor "
                "moved aside (%s); read again from the earliest offset the brokers hold",
                p->topic, (int)p->partition, dir, name, err, strerror(errno));
    return RD_KAFKA_OFFSET_BEGINNING;
}

/* Hands librdkafka the partitions taken (take) or let go, incrementally
 * under the cooperative protocol, the whole assignment under the eager
 * one. 0, or -1 (logged). */
static int reassign(struct kafka *k, rd_kafka_topic_partition_list_t *l, int take)
{
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (strcmp(rd_kafka_rebalance_protocol(k->rk), "COOPERATIVE") == 0)
        error = take ? rd_kafka_incremental_assign(k->rk, l)
                     : rd_kafka_incremental_unassign(k->rk, l);
    else
        err = rd_kafka_assign(k->rk, take ? l : NULL);
    if (!error && !err)
        return 0;
    log_msg(&k->d->log, LOG_ERROR, "kafka", "%s: %s%s", take ? "assign" : "unassign",
            error ? rd_kafka_error_string(error) : rd_kafka_err2str(err),
            take ? "; the partitions are left to the group's next rebalance" : "");
    rd_kafka_error_destroy(error);
    return -1;
}

/* The topic's partition count from the brokers' metadata (waits at most
 * KAFKA_METADATA_MS, on the loop, as the rest of an assignment does), or
 * 0 when unknown (logged: its models then belong to the first of its
 * partitions that feeds them). */
static int32_t topic_partitions(struct kafka *k, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rkt ? rd_kafka_metadata(k->rk, 0, rkt, &md, KAFKA_METADATA_MS)
                                : rd_kafka_last_error();
    int32_t n = 0;
    for (int i = 0; !e && md && i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, topic) == 0 && !md->topics[i].err)
            n = md->topics[i].partition_cnt;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    if (n <= 0)
        log_msg(&k->d->log, LOG_WARN, "kafka", "%s: its partition count is unknown (%s): a "
                "model belongs to the first of its partitions that feeds it", topic,
                e ? rd_kafka_err2str(e) : "not in the brokers' metadata");
    return n;
}

static void assign(struct kafka *k, rd_kafka_topic_partition_list_t *l)
{
    calibd *d = k->d;
    /* the models handed over at the revocation before, out of the way */
    registry_collect(d, tick_now(d), registry_walked(d));
    kafka_part **mine = calloc((size_t)l->cnt + 1, sizeof *mine);
    size_t nmine = 0;
    for (int i = 0; i < l->cnt; i++) {
        rd_kafka_topic_partition_t *e = &l->elems[i];
        kafka_part *p = part_get(k, e->topic, e->partition);
        if (!p) { /* its messages are counted as stray, and dropped */
            log_msg(&d->log, LOG_ERROR, "kafka", "partition %s/%d: out of memory to hold it",
                    e->topic, (int)e->partition);
            continue;
        }
        if (p->assigned) /* ours already (a cooperative rebalance's extra) */
            continue;
        /* the topic's count, asked once an assignment (partitions added to
         * a topic rebalance the group) */
        p->count = 0;
        for (int j = 0; j < i && !p->count; j++) {
            kafka_part *q = part_find(k, l->elems[j].topic, l->elems[j].partition);
            if (q && q->count && strcmp(l->elems[j].topic, e->topic) == 0)
                p->count = q->count;
        }
        if (!p->count)
            p->count = topic_partitions(k, e->topic);
        p->epoch++;
        p->committed = -1; /* the group's, as far as this assignment knows */
        e->offset = restore_part(k, p);
        p->assigned = 1;
        k->fig.st.assigned++;
        if (mine)
            mine[nmine++] = p;
    }
    if (reassign(k, l, 1) != 0) {
        /* not read: restored for nothing, and no one's here */
        for (size_t i = 0; i < nmine; i++) {
            drop_models(d, mine[i]);
            mine[i]->assigned = 0;
            mine[i]->next = -1;
        }
    }
    free(mine);
}

/* Partitions revoked: each one's snapshot written and committed (unless
 * lost: another instance may have it already), then its models handed
 * over. */
static void revoke(struct kafka *k, rd_kafka_topic_partition_list_t *l)
{
    calibd *d = k->d;
    int lost = rd_kafka_assignment_lost(k->rk);
    /* the versions being stored reach the disk before the next owner reads
     * them: it must never start below the last one */
    recalib_wait_stores(d);
    kafka_part **done = calloc((size_t)l->cnt + 1, sizeof *done);
    size_t ndone = 0;
    for (int j = 0; j < l->cnt; j++) {
        kafka_part *p = part_find(k, l->elems[j].topic, l->elems[j].partition);
        if (!p || !p->assigned)
            continue;
        if (lost) /* another instance may hold it already: no write */
            cancel_queued(k, p);
        else
            write_now(k, p);
        if (!lost && done)
            done[ndone++] = p;
        /* its models: another instance's from now on */
        size_t n = drop_models(d, p);
        log_msg(&d->log, LOG_INFO, "kafka", "partition %s/%d %s at offset %lld: %zu models "
                "handed over", p->topic, (int)p->partition, lost ? "lost" : "revoked",
                (long long)p->next, n);
        p->assigned = 0;
        p->next = -1;
        *(lost ? &k->fig.st.lost : &k->fig.st.revoked) += 1;
    }
    if (ndone)
        commit_saved(k, done, ndone);
    free(done);
    reassign(k, l, 0);
    /* the handed-over models go now if nothing holds them */
    registry_collect(d, tick_now(d), registry_walked(d));
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *l, void *opaque)
{
    calibd *d = opaque;
    struct kafka *k = d->kafka;
    (void)rk;
    k->fig.st.rebalances++;
    k->held_until = 0; /* the group answered */
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        assign(k, l);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        revoke(k, l);
    } else {
        log_msg(&d->log, LOG_ERROR, "kafka", "rebalance: %s", rd_kafka_err2str(err));
        revoke(k, l);
    }
}

static void on_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *l, void *opaque)
{
    calibd *d = opaque;
    struct kafka *k = d->kafka;
    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return;
    for (int i = 0; l && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &l->elems[i];
        kafka_part *p = part_find(k, e->topic, e->partition);
        if (err || e->err) {
            k->fig.st.commit_errors++;
            log_rl(&d->log, LOG_WARN, "kafka", "partition %s/%d: offset %lld not committed: "
                   "%s (the snapshot holds it; the next commit catches up)", e->topic,
                   (int)e->partition, (long long)e->offset, rd_kafka_err2str(err ? err : e->err));
        } else {
            k->fig.st.commits++;
            if (p && e->offset == p->saved) /* an older answer says less */
                p->committed = e->offset;
        }
    }
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    calibd *d = opaque;
    struct kafka *k = d->kafka;
    (void)rk;
    k->fig.st.errors++;
    if (err == RD_KAFKA_RESP_ERR__FATAL && !k->fatal) {
        /* no longer a member (fenced): its partitions are another's; it
         * writes nothing more and hands every model over */
        k->fatal = 1;
        for (size_t i = 0; i < k->fig.nparts; i++)
            if (k->fig.parts[i]->assigned) {
                cancel_queued(k, k->fig.parts[i]);
                drop_models(d, k->fig.parts[i]);
                k->fig.parts[i]->assigned = 0;
                k->fig.st.lost++;
            }
    }
    log_rl(&d->log, err == RD_KAFKA_RESP_ERR__FATAL ? LOG_ERROR : LOG_WARN, "kafka", "%s: %s",
           rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/* librdkafka's own log lines, served from the loop (log.queue). */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    calibd *d = rd_kafka_opaque(rk);
    int lv = level <= 3 ? LOG_ERROR : level <= 4 ? LOG_WARN : level <= 6 ? LOG_INFO : LOG_DEBUG;
    log_rl(&d->log, lv, "kafka", "librdkafka %s: %s", fac, buf);
}

/* ------------------------------------------------------------ messages */

static void on_message(struct kafka *k, rd_kafka_message_t *msg)
{
    calibd *d = k->d;
    if (msg->err) {
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            return;
        k->fig.st.errors++;
        log_rl(&d->log, LOG_WARN, "kafka", "consumer: %s", rd_kafka_message_errstr(msg));
        return;
    }
    const char *topic = rd_kafka_topic_name(msg->rkt);
    kafka_part *p = part_find(k, topic, msg->partition);
    if (!p || !p->assigned) { /* a partition no longer (or never) ours */
        k->fig.st.stray++;
        return;
    }
    if (msg->offset < p->next) { /* in the models already */
        k->fig.st.skipped++;
        return;
    }
    int32_t want;
    if (msg->key_len && !kafka_part_owns(p, msg->key, msg->key_len, &want)) {
        /* a stray: its model is another partition's, and stays so */
        char why[KAFKA_TOPIC_MAX + 200];
        snprintf(why, sizeof why, "on partition %s/%d, but its key hashes to partition %d of "
                 "%d (a producer with another partitioner? calibd(8), KAFKA)", topic,
                 (int)p->partition, (int)want, (int)p->count);
        ingest_reject(d, msg->key, msg->key_len, REJ_OTHER_SOURCE, why, NULL);
    } else {
        d->source = p;
        if (msg->key_len)
            ingest_message(d, msg->key, msg->key_len, msg->payload, msg->len, -1, NULL);
        else
            ingest_message(d, topic, strlen(topic), msg->payload, msg->len, -1, NULL);
        d->source = NULL;
    }
    p->next = msg->offset + 1;
    p->messages++;
    k->fig.st.messages++;
}

static void on_more(uv_idle_t *h);

/* Serves the queue: messages, rebalances, commits, errors, logs; for at
 * most drain_time, then the other sockets get their turn. */
static void drain(struct kafka *k)
{
    uint64_t until = uv_hrtime() + (uint64_t)(k->d->cfg.drain_time * 1e9);
    while (!k->closing) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(k->rk, 0);
        if (!msg) {
            /* a poll can return nothing with messages still queued (an
             * internal yield); the pipe is only written when the queue
             * goes from empty to not, so they would wait for the tick */
            if (rd_kafka_queue_length(k->queue) > 0)
                uv_idle_start(&k->more, on_more);
            else
                uv_idle_stop(&k->more);
            return;
        }
        on_message(k, msg);
        rd_kafka_message_destroy(msg);
        if (uv_hrtime() >= until) {
            uv_idle_start(&k->more, on_more);
            return;
        }
    }
}

static void on_more(uv_idle_t *h)
{
    drain(h->data);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct kafka *k = h->data;
    char buf[256];
    (void)status;
    (void)events;
    while (read(k->fds[0], buf, sizeof buf) > 0)
        ;
    drain(k);
}

/* ------------------------------------------------------------ start, stop */

static int set(rd_kafka_conf_t *conf, const char *key, const char *value, char *err,
               size_t errlen)
{
    char why[512];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof why) == RD_KAFKA_CONF_OK)
        return 0;
    snprintf(err, errlen, "[kafka] %s: %s", key, why); /* not the value: it may be a secret */
    return -1;
}

static int configured(const kafka_cfg *c, const char *key)
{
    for (size_t i = 0; i < c->nprops; i++)
        if (strcmp(c->prop_key[i], key) == 0)
            return 1;
    return 0;
}

/* --check-config does not load code: librdkafka dlopens
 * plugin.library.paths as the property is set, so a check only looks for
 * the files. Each ';'-separated entry with a '/' must be readable as named
 * or with ".so" appended (librdkafka appends it to a name without an
 * extension); a bare name is the dynamic loader's to find and is not
 * checked. */
static int plugin_paths_exist(const char *list, char *err, size_t errlen)
{
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ";");
        char path[PATH_MAX];
        if (n > 0 && memchr(p, '/', n)) {
            if (n + 4 >= sizeof path) {
                snprintf(err, errlen, "[kafka] plugin.library.paths: a path is too long");
                return -1;
            }
            memcpy(path, p, n);
            path[n] = '\0';
            int found = access(path, R_OK) == 0;
            if (!found) {
                memcpy(path + n, ".so", 4);
                found = access(path, R_OK) == 0;
                path[n] = '\0';
            }
            if (!found) {
                snprintf(err, errlen, "[kafka] plugin.library.paths: %s: %s", path,
                         strerror(errno));
                return -1;
            }
        }
        p += n + (p[n] == ';');
    }
    return 0;
}

/* librdkafka's configuration from [kafka]: NULL with err set when it
 * refuses a property or a value. With check (--check-config), properties
 * that load code are checked, not set. */
static rd_kafka_conf_t *make_conf(const kafka_cfg *c, int check, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) {
        snprintf(err, errlen, "kafka: out of memory");
        return NULL;
    }
    /* calibd's own, then what the administrator adds (kafka_owned refuses
     * to override the offsets' keys), then calibd's defaults */
    int bad = set(conf, "bootstrap.servers", c->brokers, err, errlen) ||
              set(conf, "group.id", c->group, err, errlen) ||
              set(conf, "enable.auto.commit", "false", err, errlen) ||
              set(conf, "enable.auto.offset.store", "false", err, errlen) ||
              set(conf, "enable.partition.eof", "false", err, errlen) ||
              set(conf, "log.queue", "true", err, errlen);
    for (size_t i = 0; !bad && i < c->nprops; i++)
        bad = check && strcmp(c->prop_key[i], "plugin.library.paths") == 0
                  ? plugin_paths_exist(c->prop_value[i], err, errlen)
                  : set(conf, c->prop_key[i], c->prop_value[i], err, errlen);
    if (!bad && !configured(c, "auto.offset.reset")) /* a new group reads it all */
        bad = set(conf, "auto.offset.reset", "earliest", err, errlen);
    if (!bad && !configured(c, "client.id"))
        bad = set(conf, "client.id", "calibd", err, errlen);
    if (bad) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

int kafka_check(const daemon_cfg *c, char *err, size_t errlen)
{
    if (!c->kafka.brokers)
        return 0;
    if (!partitioner_of(&c->kafka, err, errlen))
        return -1;
    rd_kafka_conf_t *conf = make_conf(&c->kafka, 1, err, errlen);
    if (!conf)
        return -1;
    rd_kafka_conf_destroy(conf);
    return 0;
}

/* The callbacks, all served on the loop through the consumer queue. */
static void set_callbacks(rd_kafka_conf_t *conf, calibd *d)
{
    rd_kafka_conf_set_opaque(conf, d);
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    rd_kafka_conf_set_offset_commit_cb(conf, on_commit);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, on_log);
}

/* A [kafka] property in milliseconds, or librdkafka's default def. */
static uint64_t prop_ms(const kafka_cfg *c, const char *key, uint64_t def)
{
    for (size_t i = 0; i < c->nprops; i++)
        if (strcmp(c->prop_key[i], key) == 0) {
            char *end;
            unsigned long long v = strtoull(c->prop_value[i], &end, 10);
            return *end || !v ? def : v;
        }
    return def;
}

/* This instance's tag for temporary names in the shared directory: its
 * host and its own state directory's device and inode, a directory one
 * live calibd holds at a time (state_lock): two members never write the
 * same temporary file, and a member's restart writes over what its crash
 * left. */
static void make_tag(char *tag, size_t len, const char *state_dir)
{
    char host[65] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "host");
    for (char *c = host; *c; c++) /* a file name's: no '/' */
        if (*c == '/' || *c == '.')
            *c = '-';
    struct stat st;
    if (stat(state_dir, &st) != 0)
        st.st_dev = 0, st.st_ino = (ino_t)getpid();
    snprintf(tag, len, "%s-%jx-%jx", host, (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
}

int kafka_start(calibd *d, char *err, size_t errlen)
{
    const kafka_cfg *c = &d->cfg.kafka;
    if (!c->brokers)
        return 0;
    struct kafka *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(err, errlen, "kafka: out of memory");
        return -1;
    }
    k->d = d;
    k->fds[0] = k->fds[1] = -1;
    make_tag(k->tag, sizeof k->tag, d->cfg.state_dir);
    k->stall_ns = prop_ms(c, "session.timeout.ms", 45000) * 1000000ull +
                  (uint64_t)(d->cfg.tick * 1e9);
    k->heartbeat_ns = prop_ms(c, "heartbeat.interval.ms", 3000) * 1000000ull;
    d->kafka = k;
    if (uv_mutex_init(&k->lock) != 0) {
        snprintf(err, errlen, "kafka: out of memory");
        free(k);
        d->kafka = NULL;
        return -1;
    }
    d->kafka_fig = &k->fig;
    /* the group's directory, made if missing (a shared one usually exists) */
    if (mkdir(c->state_dir, 0750) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "[kafka] state_dir %s: %s", c->state_dir, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (stat(c->state_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "[kafka] state_dir %s: not a directory", c->state_dir);
        return -1;
    }
    partitioner_fn fn = partitioner_of(c, err, errlen);
    if (!fn)
        return -1;
    partition_of = fn;
    rd_kafka_conf_t *conf = make_conf(c, 0, err, errlen);
    if (!conf)
        return -1;
    set_callbacks(conf, d);
    char why[512];
    if (!(k->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why))) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "kafka: %s", why);
        return -1;
    }
    rd_kafka_set_log_queue(k->rk, NULL); /* its log lines to the main queue, */
    rd_kafka_poll_set_consumer(k->rk);   /* and that to the consumer's */
    if (!(k->queue = rd_kafka_queue_get_consumer(k->rk))) {
        snprintf(err, errlen, "kafka: no consumer queue");
        return -1;
    }
    if (pipe(k->fds) != 0 || fcntl(k->fds[0], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(k->fds[1], F_SETFL, O_NONBLOCK) != 0 || fcntl(k->fds[0], F_SETFD, FD_CLOEXEC) ||
        fcntl(k->fds[1], F_SETFD, FD_CLOEXEC)) {
        snprintf(err, errlen, "kafka: pipe: %s", strerror(errno));
        return -1;
    }
    rd_kafka_queue_io_event_enable(k->queue, k->fds[1], "1", 1);
    int rc = uv_poll_init(d->loop, &k->poll, k->fds[0]);
    if (rc == 0 && (rc = uv_idle_init(d->loop, &k->more)) != 0)
        uv_close((uv_handle_t *)&k->poll, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "kafka: %s", uv_strerror(rc));
        return -1;
    }
    k->handles = 1;
    k->poll.data = k->more.data = k;
    uv_poll_start(&k->poll, UV_READABLE, on_readable);
    rd_kafka_topic_partition_list_t *topics =
        rd_kafka_topic_partition_list_new((int)c->ntopics);
    if (!topics) {
        snprintf(err, errlen, "kafka: out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->ntopics; i++)
        rd_kafka_topic_partition_list_add(topics, c->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(k->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e) {
        snprintf(err, errlen, "kafka: subscribe: %s", rd_kafka_err2str(e));
        return -1;
    }
    k->next_due = tick_now(d) + d->cfg.snapshot_interval;
    d->may_act = kafka_may_act; /* a member now: its consumer exists */
    log_msg(&d->log, LOG_INFO, "kafka", "consumer of group %s on %s (%zu topics); partition "
            "state in %s", c->group, c->brokers, c->ntopics, c->state_dir);
    /* what librdkafka queued before the pipe was set */
    drain(k);
    return 0;
}

void kafka_stop(calibd *d)
{
    struct kafka *k = d->kafka;
    if (!k || k->closing)
        return;
    k->closing = 1;
    if (k->handles) {
        uv_poll_stop(&k->poll);
        uv_idle_stop(&k->more);
        uv_close((uv_handle_t *)&k->poll, NULL);
        uv_close((uv_handle_t *)&k->more, NULL);
    }
    if (!k->rk)
        return;
    /* leaves the group: the revocation (on_rebalance) writes and commits
     * every partition before this returns; a write of the worker's still
     * under way is cancelled for the later one */
    rd_kafka_resp_err_t err = rd_kafka_consumer_close(k->rk);
    if (err)
        log_msg(&d->log, LOG_WARN, "kafka", "leaving the group: %s", rd_kafka_err2str(err));
    /* a partition the revocation could not reach (no group, no broker):
     * its snapshot is written all the same */
    for (size_t i = 0; i < k->fig.nparts; i++) {
        kafka_part *p = k->fig.parts[i];
        if (p->assigned)
            write_now(k, p);
        p->assigned = 0;
    }
}

void kafka_free(calibd *d)
{
    struct kafka *k = d->kafka;
    if (!k)
        return;
    if (k->queue)
        rd_kafka_queue_destroy(k->queue);
    if (k->rk)
        rd_kafka_destroy(k->rk);
    for (size_t i = 0; i < k->fig.nparts; i++)
        free(k->fig.parts[i]);
    free(k->fig.parts);
    for (int i = 0; i < 2; i++)
        if (k->fds[i] >= 0)
            close(k->fds[i]);
    uv_mutex_destroy(&k->lock);
    free(k);
    d->kafka = NULL;
    d->kafka_fig = NULL;
    d->may_act = NULL;
}
