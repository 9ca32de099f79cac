/* snapshot_file.c — the snapshot file around the models (see
 * snapshot.h): its header (the frame: format, version, clocks, counts,
 * the body's length and CRC-32), the header's slot, and the walk over the
 * body's model maps. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

#include "calib/calib.h"
#include "calib/mpr.h"
#include "calib/protocol.h"
#include "snapshot.h"

/* Rejection counts by reason name (REJ_MAX counters). */
void snapshot_pack_rejected(calib_mpw *w, const uint64_t counts[REJ_MAX])
{
    calib_mpw_map(w);
    for (int r = 0; r < REJ_MAX; r++)
        if (counts[r])
            calib_mpw_key_uint(w, reject_name(r), counts[r]);
    calib_mpw_end(w);
}

/* A reason this version does not know counts as internal. */
int snapshot_read_rejected(calib_mpr *r, const msgpack_object *map, uint64_t counts[REJ_MAX])
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "rejected: not a map");
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return calib_mpr_fail(r, "rejected: a count is not an integer");
        int reason = REJ_INTERNAL; /* a reason this version does not know */
        for (int c = 0; c < REJ_MAX; c++)
            if (calib_mpr_is_str(&kv->key, reject_name(c)) && c != CALIB_REJ_NONE) {
                reason = c;
                break;
            }
        counts[reason] += kv->val.via.u64;
    }
    return 1;
}

/* zlib's crc32 takes a uInt length: in steps */
static uint32_t crc_of(const char *p, size_t len)
{
    return snapshot_crc((uint32_t)crc32(0L, Z_NULL, 0), p, len);
}

uint32_t snapshot_crc(uint32_t crc, const char *p, size_t len)
{
    uLong c = crc;
    for (size_t off = 0; off < len;) {
        uInt n = len - off > (1u << 30) ? 1u << 30 : (uInt)(len - off);
        c = crc32(c, (const Bytef *)p + off, n);
        off += n;
    }
    return (uint32_t)c;
}

/* ------------------------------------------------------------------ sections */

static const char section_magic[8] = {'\xc1', 'c', 'a', 'l', 's', 'e', 'c', '\xc1'};

static void put_le(char *p, uint64_t x, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (char)(x >> (8 * i));
}

static uint64_t get_le(const char *p, int n)
{
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--)
        x = x << 8 | (unsigned char)p[i];
    return x;
}

size_t snapshot_section_begin(calib_mpw *w)
{
    static const char zeros[SNAPSHOT_SECTION_HEAD];
    size_t at = w->sb.size;
    calib_mpw_raw(w, zeros, sizeof zeros);
    return at;
}

void snapshot_section_end(calib_mpw *w, size_t at)
{
    if (calib_mpw_error(w) != CALIB_OK || w->sb.size < at + SNAPSHOT_SECTION_HEAD)
        return;
    char *h = w->sb.data + at;
    const char *map = h + SNAPSHOT_SECTION_HEAD;
    size_t len = w->sb.size - at - SNAPSHOT_SECTION_HEAD;
    memcpy(h, section_magic, 8);
    put_le(h + 8, len, 8);
    put_le(h + 16, crc_of(map, len), 4);
    put_le(h + 20, crc_of(h, 20), 4);
}

void snapshot_section(calib_mpw *w, const char *map, size_t len)
{
    size_t at = snapshot_section_begin(w);
    calib_mpw_raw(w, map, len);
    snapshot_section_end(w, at);
}

/* An intact section head at p (n bytes there): 1 and *len. */
static int section_head(const char *p, size_t n, uint64_t *len)
{
    if (n < SNAPSHOT_SECTION_HEAD || memcmp(p, section_magic, 8) != 0 ||
        get_le(p + 20, 4) != crc_of(p, 20))
        return 0;
    *len = get_le(p + 8, 8);
    return 1;
}

/* The next section of a version 4 body: snapshot_next's. */
static int next_section(const snapshot_head *h, size_t *off, msgpack_unpacked *u, char *err,
                        size_t errlen)
{
    const char *p = h->body + *off;
    size_t left = h->len - *off, end;
    uint64_t len;
    if (!section_head(p, left, &len)) {
        /* on to the next intact head: a damaged byte in a head costs that
         * section (a head's own CRC-32 tells a real one from the magic's
         * bytes inside a map) */
        size_t skip = 1;
        for (; skip < left; skip++) {
            const char *q = memchr(p + skip, section_magic[0], left - skip);
            if (!q) {
                skip = left;
                break;
            }
            skip = (size_t)(q - p);
            if (section_head(q, left - skip, &len))
                break;
        }
        snprintf(err, errlen, "%s at body byte %zu: %zu bytes skipped",
                 left < SNAPSHOT_SECTION_HEAD ? "a section cut short" : "a damaged section head",
                 *off, skip);
        *off += skip;
        return 2;
    }
    size_t at = *off;
    if (len > left - SNAPSHOT_SECTION_HEAD) {
        snprintf(err, errlen, "the section at body byte %zu is cut short (%zu of %llu bytes)",
                 at, left - SNAPSHOT_SECTION_HEAD, (unsigned long long)len);
        *off = h->len;
        return 2;
    }
    const char *map = p + SNAPSHOT_SECTION_HEAD;
    *off += SNAPSHOT_SECTION_HEAD + (size_t)len;
    uint32_t c = crc_of(map, (size_t)len);
    if (c != (uint32_t)get_le(p + 16, 4)) {
        snprintf(err, errlen, "the section at body byte %zu (%llu bytes) is damaged: its "
                 "checksum does not match", at, (unsigned long long)len);
        return 2;
    }
    /* a checksum proves no intent: every count backed by bytes first */
    size_t used = 0;
    if (calib_proto_scan(map, (size_t)len, &end) != CALIB_REJ_NONE || end != len ||
        msgpack_unpack_next(u, map, (size_t)len, &used) != MSGPACK_UNPACK_SUCCESS ||
        used != len || u->data.type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "the section at body byte %zu is not one model map", at);
        return 2;
    }
    return 1;
}

void snapshot_frame(calib_mpw *w, const char *body, size_t len, uint64_t models, double wall,
                    double mono, const snapshot_counts *counts)
{
    snapshot_frame_sum(w, len, crc_of(body, len), models, wall, mono, NULL, counts, NULL);
}

/* The header's "daemon" map: its counters by name, beside "messages" and
 * "rejected" (the one codec of both sides). */
static const struct {
    const char *key;
    size_t at;
} daemon_counts[] = {
    {"publish_errors", offsetof(snapshot_counts, publish_errors)},
    {"config_reloads", offsetof(snapshot_counts, reloads)},
    {"config_reloads_refused", offsetof(snapshot_counts, reloads_refused)},
    {"models_forgotten", offsetof(snapshot_counts, models_forgotten)},
    {"models_expired", offsetof(snapshot_counts, models_expired)},
    {"alerts_sent", offsetof(snapshot_counts, alerts_sent)},
    {"alerts_suppressed", offsetof(snapshot_counts, alerts_suppressed)},
    {"alert_sinks_failed", offsetof(snapshot_counts, sinks_failed)},
    {"alert_sinks_killed", offsetof(snapshot_counts, sinks_killed)},
    {"alert_sinks_dropped", offsetof(snapshot_counts, sinks_dropped)},
};

#define NCOUNTS (sizeof daemon_counts / sizeof *daemon_counts)

static uint64_t count_get(const snapshot_counts *c, size_t i)
{
    uint64_t v;
    memcpy(&v, (const char *)c + daemon_counts[i].at, sizeof v);
    return v;
}

void snapshot_counts_add(snapshot_counts *dst, const snapshot_counts *src)
{
    dst->messages += src->messages;
    for (int i = 0; i < REJ_MAX; i++)
        dst->rejected[i] += src->rejected[i];
    for (size_t i = 0; i < NCOUNTS; i++) {
        uint64_t v = count_get(dst, i) + count_get(src, i);
        memcpy((char *)dst + daemon_counts[i].at, &v, sizeof v);
    }
}

static void pack_counts(calib_mpw *w, const snapshot_counts *c)
{
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "messages", c->messages);
    calib_mpw_key(w, "rejected");
    snapshot_pack_rejected(w, c->rejected);
    for (size_t i = 0; i < NCOUNTS; i++)
        calib_mpw_key_uint(w, daemon_counts[i].key, count_get(c, i));
    calib_mpw_end(w);
}

static void read_counts(calib_mpr *r, const msgpack_object *dm, snapshot_counts *c)
{
    c->messages = calib_mpr_uint(r, dm, "messages", 0, UINT64_MAX);
    if (!r->failed)
        snapshot_read_rejected(r, calib_mpr_get(r, dm, "rejected"), c->rejected);
    for (size_t i = 0; i < NCOUNTS && !r->failed; i++) {
        if (!calib_mpr_find(dm, daemon_counts[i].key)) /* an older file: 0 */
            continue;
        uint64_t v = calib_mpr_uint(r, dm, daemon_counts[i].key, 0, UINT64_MAX);
        memcpy((char *)c + daemon_counts[i].at, &v, sizeof v);
    }
}

/* The header's fields; with pad >= 0 a last key "pad" of that many zero
 * bytes (readers skip unknown keys: the header can fill a slot). */
static void frame_fields(calib_mpw *w, long pad, uint64_t len, uint32_t crc, uint64_t models,
                         double wall, double mono, const snapshot_clocks *clocks,
                         const snapshot_counts *counts, const snapshot_source *src)
{
    static const char zeros[SNAPSHOT_HEAD_SLOT];
    calib_mpw_reset(w);
    calib_mpw_map(w);
    calib_mpw_key(w, "format");
    calib_mpw_str(w, "calibd-snapshot");
    calib_mpw_key_uint(w, "v", SNAPSHOT_VERSION);
    calib_mpw_key_uint(w, "compat", SNAPSHOT_COMPAT);
    calib_mpw_key(w, "byte_order");
    calib_mpw_str(w, "little");
    calib_mpw_key_double(w, "written", wall);
    calib_mpw_key_double(w, "mono", mono);
    if (clocks && isfinite(clocks->steady)) { /* optional keys: snapshot_clocks */
        calib_mpw_key_double(w, "steady", clocks->steady);
        calib_mpw_key_double(w, "boottime", clocks->boottime);
        calib_mpw_key(w, "boot_id");
        calib_mpw_str(w, clocks->boot_id);
    }
    if (src) {
        calib_mpw_key(w, "kafka");
        calib_mpw_map(w);
        calib_mpw_key(w, "topic");
        calib_mpw_str(w, src->topic);
        calib_mpw_key_uint(w, "partition", (uint64_t)src->partition);
        calib_mpw_key_uint(w, "offset", (uint64_t)src->offset);
        calib_mpw_end(w);
    }
    calib_mpw_key_uint(w, "models", models);
    calib_mpw_key(w, "daemon");
    pack_counts(w, counts);
    calib_mpw_key_uint(w, "body_bytes", len);
    calib_mpw_key_uint(w, "crc32", crc);
    if (pad >= 0) {
        calib_mpw_key(w, "pad");
        calib_mpw_bin(w, zeros, (size_t)pad);
    }
    calib_mpw_end(w);
}

void snapshot_frame_sum(calib_mpw *w, uint64_t len, uint32_t crc, uint64_t models, double wall,
                        double mono, const snapshot_clocks *clocks,
                        const snapshot_counts *counts, const snapshot_source *src)
{
    frame_fields(w, -1, len, crc, models, wall, mono, clocks, counts, src);
}

int snapshot_frame_slot(calib_mpw *w, uint64_t len, uint32_t crc, uint64_t models, double wall,
                        double mono, const snapshot_clocks *clocks,
                        const snapshot_counts *counts)
{
    long pad = 0;
    for (int i = 0; i < 4 && pad >= 0 && pad < SNAPSHOT_HEAD_SLOT; i++) {
        frame_fields(w, pad, len, crc, models, wall, mono, clocks, counts, NULL);
        if (calib_mpw_error(w) != CALIB_OK)
            return -1;
        if (w->sb.size == SNAPSHOT_HEAD_SLOT)
            return 0;
        /* the pad's own length field may take another byte or two */
        pad += (long)SNAPSHOT_HEAD_SLOT - (long)w->sb.size;
    }
    return -1;
}

int snapshot_open(const char *data, size_t len, snapshot_head *h, char *err, size_t errlen)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    calib_mpr r;
    calib_mpr_init(&r, err, errlen);
    size_t off = 0, end;
    memset(h, 0, sizeof *h);
    /* every count backed by bytes before msgpack-c allocates for it: the
     * header has no checksum (tests/fuzz/corpus/snapshot/crash-huge_header) */
    if (calib_proto_scan(data, len, &end) != CALIB_REJ_NONE ||
        msgpack_unpack_next(&u, data, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        calib_mpr_fail(&r, "no msgpack map at the start (empty, truncated or not a snapshot)");
        goto out;
    }
    const msgpack_object *o = &u.data, *fmt = calib_mpr_find(o, "format"), *v = calib_mpr_find(o, "v"),
                         *bo = calib_mpr_find(o, "byte_order");
    if (!fmt || !calib_mpr_is_str(fmt, "calibd-snapshot")) {
        calib_mpr_fail(&r, "not a calibd snapshot");
        goto out;
    }
    /* version 1 is version 2 without the stores' bounds (and with the
     * ring's record numbers tied to its slots): read alike; a later one
     * whose compat is at most this one's, as this one (its known parts) */
    const msgpack_object *compat = calib_mpr_find(o, "compat");
    uint64_t need = v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : 0;
    if (need > SNAPSHOT_VERSION && compat && compat->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        need = compat->via.u64 >= 1 ? compat->via.u64 : 0;
    if (need < 1 || need > SNAPSHOT_VERSION) {
        calib_mpr_fail(&r, "a snapshot of another format version (this calibd reads versions 1 "
                 "to %d, and later ones written to be read by it)", SNAPSHOT_VERSION);
        goto out;
    }
    h->version = v->via.u64 > UINT_MAX ? UINT_MAX : (unsigned)v->via.u64;
    if (!bo || !calib_mpr_is_str(bo, "little")) {
        calib_mpr_fail(&r, "a snapshot of another byte order");
        goto out;
    }
    h->written = calib_mpr_finite(&r, o, "written");
    h->mono = calib_mpr_finite(&r, o, "mono");
    h->clocks.steady = NAN;
    const msgpack_object *bid = calib_mpr_find(o, "boot_id");
    if (calib_mpr_find(o, "steady") && bid && bid->type == MSGPACK_OBJECT_STR &&
        bid->via.str.size < sizeof h->clocks.boot_id) {
        h->clocks.steady = calib_mpr_finite(&r, o, "steady");
        h->clocks.boottime = calib_mpr_finite(&r, o, "boottime");
        memcpy(h->clocks.boot_id, bid->via.str.ptr, bid->via.str.size);
        h->clocks.boot_id[bid->via.str.size] = 0;
    }
    const msgpack_object *ks = calib_mpr_find(o, "kafka");
    if (ks) {
        const msgpack_object *t = calib_mpr_get(&r, ks, "topic");
        if (!r.failed && (t->type != MSGPACK_OBJECT_STR ||
                          !config_kafka_topic_ok(t->via.str.ptr, t->via.str.size)))
            calib_mpr_fail(&r, "kafka: topic: not a topic name");
        int64_t part = (int64_t)calib_mpr_uint(&r, ks, "partition", 0, INT32_MAX);
        int64_t offset = (int64_t)calib_mpr_uint(&r, ks, "offset", 0, INT64_MAX);
        if (r.failed)
            goto out;
        memcpy(h->source.topic, t->via.str.ptr, t->via.str.size);
        h->source.topic[t->via.str.size] = 0;
        h->source.partition = (int32_t)part;
        h->source.offset = offset;
        h->has_source = 1;
    }
    h->models = calib_mpr_uint(&r, o, "models", 0, UINT64_MAX);
    const msgpack_object *dm = calib_mpr_map(&r, o, "daemon");
    if (!r.failed)
        read_counts(&r, dm, &h->counts);
    uint64_t blen = calib_mpr_uint(&r, o, "body_bytes", 0, UINT64_MAX);
    uint64_t crc = calib_mpr_uint(&r, o, "crc32", 0, UINT32_MAX);
    if (r.failed)
        goto out;
    h->body_bytes = blen;
    /* the format this calibd reads it as: a later one's compat */
    h->sections = need >= 4;
    if (h->sections) {
        /* checked section by section (next_section): a file cut short
         * keeps the sections it still holds whole */
        h->body = data + off;
        h->len = blen < len - off ? (size_t)blen : len - off;
        goto out;
    }
    if (blen != len - off) {
        calib_mpr_fail(&r, "%zu bytes follow the header, not the %llu written (truncated?)",
                 len - off, (unsigned long long)blen);
        goto out;
    }
    uint32_t c = crc_of(data + off, len - off);
    if (c != crc) {
        calib_mpr_fail(&r, "the checksum does not match: the file is damaged (crc32 %08lx, "
                 "stored %08llx)", (unsigned long)c, (unsigned long long)crc);
        goto out;
    }
    h->body = data + off;
    h->len = len - off;
out:
    msgpack_unpacked_destroy(&u);
    return r.failed ? -1 : 0;
}

int snapshot_next(const snapshot_head *h, size_t *off, msgpack_unpacked *u, char *err,
                  size_t errlen)
{
    size_t end;
    if (*off >= h->len)
        return 0;
    if (h->sections)
        return next_section(h, off, u, err, errlen);
    /* a checksum proves no intent: a crafted body's map of 2^32 entries
     * would have msgpack-c allocate 64 GiB (tests/fuzz/corpus/snapshot/
     * crash-huge_count) */
    if (calib_proto_scan(h->body + *off, h->len - *off, &end) != CALIB_REJ_NONE ||
        msgpack_unpack_next(u, h->body, h->len, off) != MSGPACK_UNPACK_SUCCESS ||
        u->data.type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "the body does not parse as model maps");
        return -1;
    }
    return 1;
}

