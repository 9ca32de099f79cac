/* snapshot.c — a model's full state to msgpack and back (see snapshot.h),
 * composed of libcalib's structures as calib/save.h writes and reads
 * them, and the model's own fields. The file around the models (its
 * header, checksum and walk) is snapshot_file.c's. As libcalib's save.c
 * does: for each part, the writer and then the reader, so that a key is
 * spelled in one place for both; a reader's helpers come before the pair. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/plugin.h"
#include "calib/protocol.h"
#include "calib/mpr.h"
#include "calib/save.h"
#include "log.h"
#include "clock.h"
#include "snapshot.h"
#include "state.h"

/* Long arrays of numbers are binaries of little-endian numbers. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshots are written in the host's byte order, which must be little-endian"
#endif

/* ------------------------------------------------------------------ helpers */

/* A note of a section left fresh, appended to skipped. */
typedef struct notes {
    char *buf;
    size_t len;
} notes;

__attribute__((format(printf, 2, 3)))
static void note(notes *n, const char *fmt, ...)
{
    size_t at = strlen(n->buf);
    if (at + 3 >= n->len)
        return;
    if (at)
        at += (size_t)snprintf(n->buf + at, n->len - at, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->buf + at, n->len - at, fmt, ap);
    va_end(ap);
}

/* The binary at key of exactly len bytes, or NULL (r says why). */
static const msgpack_object *bin_of(calib_mpr *r, const msgpack_object *map, const char *key,
                                    size_t len)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (o && (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != len))
        return calib_mpr_fail(r, "%s: not a binary of %zu bytes", key, len), NULL;
    return o;
}

/* ------------------------------------------------------------------ ring */

static void pack_ring(calib_mpw *w, const model *m)
{
    const calib_ring *r = &m->ring;
    calib_mpw_map(w);
    calib_store_save(w, &r->s, m->sizes.ring);
    calib_mpw_key_uint(w, "head", r->head);
    calib_mpw_key_uint(w, "total", r->total);
    /* the drift detector's score of each record, by slot: doubles */
    calib_mpw_key(w, "score");
    calib_mpw_bin(w, m->ring_score, r->s.len * sizeof(double));
    calib_mpw_end(w);
}

/*
 * The stored ring, of capacity cap, into the model's: cap is the ring's
 * (its records stay in their slots), or lower where memory_limit had
 * stopped it (version 2: see read_shaped): its records then go in oldest
 * first, and the ring, filling again, grows as memory allows (or stops
 * again). Record numbers (total) are not tied to slots: a ring restored so
 * and grown again has pushed more than its slots show. CALIB_LOAD_OK,
 * CALIB_LOAD_FAILED (r says why), or CALIB_LOAD_NO_ROOM with the ring as
 * it was.
 */
static int read_ring(calib_mpr *r, const msgpack_object *o, model *m, size_t cap)
{
    calib_ring *g = &m->ring;
    int unroll = cap < calib_ring_cap(g);
    uint64_t head = calib_mpr_uint(r, o, "head", 0, cap - 1);
    uint64_t total = calib_mpr_uint(r, o, "total", 0, UINT64_MAX);
    uint64_t held = calib_mpr_uint(r, o, "len", 0, cap);
    if (r->failed)
        return 0;
    /* filling: the oldest at slot 0, the next write at len; full: the
     * oldest at head, where the next write goes */
    if (total < held || (held < cap && head != held))
        return calib_mpr_fail(r, "ring: head %llu, %llu records, %llu pushed",
                        (unsigned long long)head, (unsigned long long)held,
                        (unsigned long long)total);
    if (model_ring_reserve(m, (size_t)held) != CALIB_OK)
        return CALIB_LOAD_NO_ROOM;
    size_t first = unroll && held == cap ? (size_t)head : 0;
    long len = calib_store_load(r, o, &g->s, cap, first);
    if (len < 0)
        return len == -2 ? CALIB_LOAD_NO_ROOM : CALIB_LOAD_FAILED;
    /* the drift scores by slot, as the records: oldest first from first */
    size_t n = (size_t)len, d = sizeof(double);
    const msgpack_object *score = bin_of(r, o, "score", n * d);
    if (!score)
        return CALIB_LOAD_FAILED;
    if (n) {
        memcpy(m->ring_score, score->via.bin.ptr + first * d, (n - first) * d);
        memcpy(m->ring_score + (n - first), score->via.bin.ptr, first * d);
    }
    g->head = unroll ? n : (size_t)head;
    g->total = total;
    return CALIB_LOAD_OK;
}

/* ------------------------------------------------------------------ parameters */

/* "prior_weights" and "label_free", optional (absent before them). */
static int read_weights(calib_mpr *r, const msgpack_object *o, model_params *p)
{
    const msgpack_object *w = calib_mpr_find(o, "prior_weights");
    if (!w || r->failed)
        return !r->failed;
    size_t n = w->type == MSGPACK_OBJECT_ARRAY ? w->via.array.size : SIZE_MAX;
    if (n > CALIB_PUBMSG_MAX_WEIGHTS || !calib_doubles_load(r, o, "prior_weights", p->w, n))
        return calib_mpr_fail(r, "params: prior_weights is not a list of at most %d",
                              CALIB_PUBMSG_MAX_WEIGHTS);
    if (n && !calib_prior_weights_ok(p->w, n))
        return calib_mpr_fail(r, "params: prior_weights out of bounds");
    p->nw = (unsigned)n;
    const msgpack_object *lf = calib_mpr_find(o, "label_free");
    p->label_free = lf && lf->type == MSGPACK_OBJECT_BOOLEAN && lf->via.boolean;
    return 1;
}

static void pack_params(calib_mpw *w, const model_params *p)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "method");
    calib_mpw_str(w, p->method);
    calib_mpw_key_uint(w, "version", p->version);
    calib_mpw_key(w, "names");
    calib_mpw_array(w);
    for (unsigned i = 0; p->desc && i < p->n; i++)
        calib_mpw_str(w, p->desc->param_names[i]);
    calib_mpw_end(w);
    calib_mpw_key(w, "values");
    calib_doubles_save(w, p->values, p->desc ? p->n : 0);
    calib_mpw_key_double(w, "ts", p->ts);
    calib_mpw_key_uint(w, "fit_n", p->fit_n);
    calib_mpw_key_uint(w, "shadow_n", p->shadow_n);
    calib_mpw_key(w, "before");
    calib_doubles_save(w, p->before, 2);
    calib_mpw_key(w, "after");
    calib_doubles_save(w, p->after, 2);
    calib_mpw_key_double(w, "improvement", p->improvement);
    calib_mpw_key(w, "ci");
    calib_doubles_save(w, p->ci, 2);
    calib_mpw_key(w, "prior_weights"); /* optional: absent before them */
    calib_doubles_save(w, p->w, p->nw);
    calib_mpw_key(w, "label_free");
    calib_mpw_bool(w, p->label_free);
    calib_mpw_key(w, "segments"); /* optional: absent before them */
    calib_mpw_array(w);
    for (unsigned i = 0; p->desc && i < p->nseg; i++) {
        calib_mpw_map(w);
        calib_mpw_key(w, "key");
        calib_mpw_str(w, p->seg[i].key);
        calib_mpw_key(w, "value");
        calib_mpw_str(w, p->seg[i].value);
        calib_mpw_key(w, "values"); /* in the order of "names" */
        calib_doubles_save(w, p->seg[i].values, p->n);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_end(w);
}

static int read_params(calib_mpr *r, const msgpack_object *o, model_params *p)
{
    memset(p, 0, sizeof *p);
    calib_mpr_str(r, o, "method", p->method, sizeof p->method);
    p->version = calib_mpr_uint(r, o, "version", 0, UINT64_MAX);
    const msgpack_object *names = calib_mpr_array(r, o, "names", UINT32_MAX);
    if (r->failed)
        return 0;
    if (names->via.array.size > PARAMS_MAX)
        return calib_mpr_fail(r, "params: more than %d values", PARAMS_MAX);
    p->n = names->via.array.size;
    if (!calib_doubles_load(r, o, "values", p->values, p->n))
        return calib_mpr_fail(r, "params: names and values do not match");
    p->ts = calib_mpr_double(r, o, "ts");
    p->fit_n = calib_mpr_uint(r, o, "fit_n", 0, UINT64_MAX);
    p->shadow_n = calib_mpr_uint(r, o, "shadow_n", 0, UINT64_MAX);
    calib_doubles_load(r, o, "before", p->before, 2);
    calib_doubles_load(r, o, "after", p->after, 2);
    p->improvement = calib_mpr_double(r, o, "improvement");
    calib_doubles_load(r, o, "ci", p->ci, 2);
    if (!read_weights(r, o, p))
        return 0;
    const msgpack_object *segs = calib_mpr_find(o, "segments");
    if (!segs || r->failed)
        return !r->failed;
    if (segs->type != MSGPACK_OBJECT_ARRAY || segs->via.array.size > CALIB_PUBMSG_MAX_SEGMENTS ||
        (segs->via.array.size && !p->n))
        return calib_mpr_fail(r, "params: segments is not a list of at most %d",
                              CALIB_PUBMSG_MAX_SEGMENTS);
    for (uint32_t i = 0; i < segs->via.array.size; i++) {
        const msgpack_object *e = &segs->via.array.ptr[i];
        calib_params_segment *sg = &p->seg[i];
        if (!calib_mpr_str(r, e, "key", sg->key, sizeof sg->key) ||
            !calib_mpr_str(r, e, "value", sg->value, sizeof sg->value) ||
            !calib_doubles_load(r, e, "values", sg->values, p->n))
            return 0;
        if (!calib_proto_seg_key_ok(sg->key, strlen(sg->key)) ||
            !calib_proto_seg_value_ok(sg->value, strlen(sg->value)))
            return calib_mpr_fail(r, "params: segment %u is no segment", i);
        for (unsigned j = 0; j < p->n; j++)
            if (!isfinite(sg->values[j]))
                return calib_mpr_fail(r, "params: segment %u has a value not finite", i);
    }
    p->nseg = segs->via.array.size;
    return 1;
}

/* The stored names of a params map, for state_params_by_name. */
static int read_param_names(calib_mpr *r, const msgpack_object *o, state_param_names *names)
{
    const msgpack_object *a = calib_mpr_array(r, o, "names", UINT32_MAX);
    if (!a || a->via.array.size > PARAMS_MAX)
        return calib_mpr_fail(r, "params: names");
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *s = &a->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size == 0 ||
            s->via.str.size > CALIB_PLUGIN_NAME_MAX || memchr(s->via.str.ptr, 0, s->via.str.size))
            return calib_mpr_fail(r, "params: name %u", i);
        memcpy((*names)[i], s->via.str.ptr, s->via.str.size);
        (*names)[i][s->via.str.size] = 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ period */

/* A confidence sequence into cs, initialised with the model's settings: 1,
 * or 0 for a file that fails; one of other settings, or whose state its
 * checks refuse, is noted and left fresh. */
static int read_cs(calib_mpr *r, const msgpack_object *o, calib_cs *cs, notes *skipped)
{
    int rc = calib_cs_load(r, o, cs);
    if (rc == CALIB_LOAD_OTHER)
        note(skipped, "a confidence sequence (of another cs_alpha)");
    else if (rc == CALIB_LOAD_REFUSED)
        note(skipped, "a confidence sequence (its state is inconsistent)");
    else if (rc == CALIB_LOAD_LATER)
        note(skipped, "a confidence sequence (of a later form)");
    return rc != CALIB_LOAD_FAILED;
}

/* The window's period (model_period): nil when none runs; its last
 * closed period's intervals (NaN for an empty one), nil when none. */
static void pack_period(calib_mpw *w, const model *m)
{
    const model_period *pd = &m->period;
    if (!m->cs_on || !pd->running) {
        calib_mpw_nil(w);
        return;
    }
    calib_mpw_map(w);
    calib_mpw_key_double(w, "since", pd->since);
    calib_mpw_key_double(w, "end", pd->end);
    calib_mpw_key(w, "cs");
    calib_mpw_array(w);
    for (int v = 0; v < VIEWS; v++)
        calib_cs_save(w, &pd->cs[v]);
    calib_mpw_end(w);
    calib_mpw_key(w, "last");
    if (!pd->last.n) {
        calib_mpw_nil(w);
    } else {
        calib_mpw_map(w);
        calib_mpw_key_double(w, "since", pd->last.since);
        calib_mpw_key_double(w, "until", pd->last.until);
        calib_mpw_key_uint(w, "n", pd->last.n);
        calib_mpw_key(w, "interval"); /* per view: low, high */
        calib_mpw_array(w);
        for (int v = 0; v < VIEWS; v++)
            calib_mpw_pair(w, (const double[2]){pd->last.lo[v], pd->last.hi[v]});
        calib_mpw_end(w);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* The window's period into m->period (model_period); its sequences go as
 * read_cs reads them. 1, or 0 for a file that fails. */
static int read_period(calib_mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_period *pd = &m->period;
    double since = calib_mpr_finite(r, o, "since"), end = calib_mpr_finite(r, o, "end");
    const msgpack_object *cs = calib_mpr_array(r, o, "cs", VIEWS);
    const msgpack_object *last = calib_mpr_get(r, o, "last");
    if (r->failed)
        return 0;
    if (!(since < end))
        return calib_mpr_fail(r, "paired: the period ends before it starts");
    model_period_end e = {0};
    if (last->type == MSGPACK_OBJECT_MAP) {
        e.since = calib_mpr_finite(r, last, "since");
        e.until = calib_mpr_finite(r, last, "until");
        e.n = calib_mpr_uint(r, last, "n", 1, UINT64_MAX);
        const msgpack_object *iv = calib_mpr_array(r, last, "interval", VIEWS);
        if (r->failed)
            return 0;
        for (int v = 0; v < VIEWS; v++) {
            const msgpack_object *b = &iv->via.array.ptr[v];
            e.rc[v] = -1;
            e.lo[v] = e.hi[v] = NAN;
            if (b->type == MSGPACK_OBJECT_NIL)
                continue;
            if (b->type != MSGPACK_OBJECT_ARRAY || b->via.array.size != 2 ||
                !calib_mpr_number(&b->via.array.ptr[0], &e.lo[v]) ||
                !calib_mpr_number(&b->via.array.ptr[1], &e.hi[v]) || !(e.lo[v] <= e.hi[v]))
                return calib_mpr_fail(r, "paired: the last period's interval is not [low, high]");
            e.rc[v] = 1;
        }
    } else if (last->type != MSGPACK_OBJECT_NIL) {
        return calib_mpr_fail(r, "paired: the last period is neither a map nor nil");
    }
    for (int v = 0; v < VIEWS; v++)
        if (cs->via.array.ptr[v].type != MSGPACK_OBJECT_MAP ||
            !read_cs(r, &cs->via.array.ptr[v], &pd->cs[v], skipped))
            return r->failed ? 0 : calib_mpr_fail(r, "paired: a period's cs is not a map");
    pd->running = 1;
    pd->since = since;
    pd->end = end;
    pd->last = e;
    return 1;
}

/* ------------------------------------------------------------------ counters */

/* Counters by name (model_counters, recalib_counters). */
static void pack_counters(calib_mpw *w, const model *m, const size_t *at,
                          const char *const *names, size_t n)
{
    uint64_t v[RECALIB_COUNTERS > MODEL_COUNTERS ? RECALIB_COUNTERS : MODEL_COUNTERS];
    model_counters_get(m, at, n, v);
    calib_mpw_map(w);
    for (size_t i = 0; i < n; i++)
        calib_mpw_key_uint(w, names[i], v[i]);
    calib_mpw_end(w);
}

/* Counters by name (a name absent: 0, a name unknown: skipped), or of
 * formats 1 and 2, a binary of them in the lists' order. */
static int read_counters(calib_mpr *r, const msgpack_object *o, model *m, const size_t *at,
                         const char *const *names, size_t n)
{
    uint64_t v[RECALIB_COUNTERS > MODEL_COUNTERS ? RECALIB_COUNTERS : MODEL_COUNTERS] = {0};
    const msgpack_object *c = calib_mpr_get(r, o, "counters");
    if (c && c->type == MSGPACK_OBJECT_MAP) {
        for (size_t i = 0; i < n; i++)
            if (calib_mpr_find(c, names[i]))
                v[i] = calib_mpr_uint(r, c, names[i], 0, UINT64_MAX);
    } else {
        calib_uints_load(r, o, "counters", v, n);
    }
    if (r->failed)
        return 0;
    model_counters_set(m, at, n, v);
    return 1;
}

/* ------------------------------------------------------------------ sums */

/* The sums beside each cumulative accumulator. */
static void pack_sums(calib_mpw *w, const model_sums *s, size_t n)
{
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++) {
        calib_mpw_map(w);
        calib_mpw_key_double(w, "pos", s[i].pos);
        calib_mpw_key_double(w, "neg", s[i].neg);
        calib_mpw_key_double(w, "sq", s[i].sq);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
}

/* The sums beside the cumulative accumulators: maps, or of formats 1 and
 * 2 a binary of n times three doubles. */
static int read_sums(calib_mpr *r, const msgpack_object *o, model_sums *s, size_t n)
{
    const msgpack_object *a = calib_mpr_get(r, o, "sums");
    if (!a)
        return 0;
    if (a->type == MSGPACK_OBJECT_BIN) {
        double *v = malloc(3 * n * sizeof *v);
        int ok = v && calib_doubles_load(r, o, "sums", v, 3 * n);
        for (size_t i = 0; ok && i < n; i++)
            s[i] = (model_sums){v[3 * i], v[3 * i + 1], v[3 * i + 2]};
        free(v);
        return ok || calib_mpr_fail(r, "sums: unreadable");
    }
    if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != n)
        return calib_mpr_fail(r, "sums: not an array of %zu", n);
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *e = &a->via.array.ptr[i];
        s[i] = (model_sums){calib_mpr_double(r, e, "pos"), calib_mpr_double(r, e, "neg"),
                            calib_mpr_double(r, e, "sq")};
    }
    return !r->failed;
}

/* ------------------------------------------------------------------ recalib */

/* Parameters of the current method, as a shadow run or a guard holds them:
 * 1 with *p resolved, 0 for a file that fails to read, -1 (noted as what)
 * when they are not of the model's method now. */
static int read_method_params(calib_mpr *r, const msgpack_object *o, const model *m,
                              model_params *p, const char *what, notes *skipped)
{
    state_param_names names;
    char why[ERR_MAX];
    if (r->failed || !read_params(r, o, p) || !read_param_names(r, o, &names))
        return 0;
    if (!m->params.desc || strcmp(p->method, m->params.method) != 0 ||
        state_params_by_name(p, names, m->params.desc, why, sizeof why) != 0) {
        note(skipped, "%s (not of method %s)", what, m->params.method);
        return -1;
    }
    p->desc = m->params.desc;
    p->identity = model_params_is_identity(p);
    return 1;
}

/* A gate: 1, or 0 when it fails (r failed) or is of a form this calibd
 * does not read (noted as what). */
static int gate_of(calib_mpr *r, const msgpack_object *o, calib_gate *g, const char *what,
                   notes *skipped)
{
    int rc = calib_gate_load(r, o, g);
    if (rc == CALIB_LOAD_LATER)
        note(skipped, "%s (its gate is of a later form)", what);
    return rc == CALIB_LOAD_OK;
}

/* The guard of the version in force: the previous version's parameters and
 * its gate. */
static int read_guard(calib_mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_recalib *l = &m->recalib;
    const msgpack_object *po = calib_mpr_map(r, o, "prev"), *go = calib_mpr_map(r, o, "gate");
    double low = calib_mpr_double(r, o, "low");
    uint64_t version = calib_mpr_uint(r, o, "version", 1, UINT64_MAX);
    model_params prev;
    calib_gate g;
    calib_accum since[3];
    if (r->failed || !calib_accums_load(r, o, "since", since, 3))
        return 0;
    if (!(low <= 0))
        return calib_mpr_fail(r, "guard: its low is not an e-value's at most 1");
    int ok = read_method_params(r, po, m, &prev, "the guard", skipped);
    if (ok <= 0)
        return ok == 0 ? 0 : 1;
    /* the stored parameters are the state directory's: a version published
     * (or rolled back) after this snapshot has its own guard, or none */
    if (version != m->params.version || prev.version >= version) {
        note(skipped, "the guard (of version %llu; version %llu is in force)",
             (unsigned long long)version, (unsigned long long)m->params.version);
        return 1;
    }
    if (!gate_of(r, go, &g, "the guard", skipped))
        return !r->failed;
    l->guard_prev = prev;
    l->guard = g;
    l->guard_low = low;
    memcpy(l->guard_since, since, sizeof since);
    l->guard_on = 1;
    return 1;
}

/* The miscalibration trigger: its challenger, in the current method, and
 * its gate; a gate of other settings (changed since) starts afresh. */
static int read_trigger(calib_mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_recalib *l = &m->recalib;
    const msgpack_object *co = calib_mpr_map(r, o, "challenger"), *go = calib_mpr_map(r, o, "gate");
    uint64_t at = calib_mpr_uint(r, o, "fit_at", 0, UINT64_MAX);
    uint64_t start = calib_mpr_uint(r, o, "start", 0, UINT64_MAX);
    uint64_t quiet = calib_mpr_find(o, "quiet_until") ? calib_mpr_uint(r, o, "quiet_until", 0, UINT64_MAX)
                                                 : 0;
    int reported = (int)calib_mpr_uint(r, o, "reported", 0, 1);
    if (!r->failed && (at > m->ring.total || start > m->ring.total)) {
        /* counts of another ring (a merge's, say): the trigger starts afresh */
        note(skipped, "the miscalibration trigger (its counts are past the ring's)");
        return 1;
    }
    model_params ch;
    int ok = read_method_params(r, co, m, &ch, "the miscalibration trigger", skipped);
    if (ok <= 0)
        return ok == 0 ? 0 : 1;
    calib_gate g;
    if (!gate_of(r, go, &g, "the miscalibration trigger", skipped))
        return !r->failed;
    calib_gate_cfg now;
    model_trigger_cfg(m, &now);
    if (memcmp(&now, &g.cfg, sizeof now) != 0) {
        note(skipped, "the miscalibration trigger's evidence (its settings changed)");
        if (calib_gate_init(&g, &now) != CALIB_OK)
            return calib_mpr_fail(r, "trigger: the configuration's gate is refused");
        reported = 0;
    }
    l->challenger = ch;
    l->trig = g;
    l->trig_fit_at = at;
    l->trig_start = start;
    /* no quiet longer than a period from now */
    l->trig_quiet_until = quiet < m->ring.total + m->cfg.miscal_period
                              ? quiet : m->ring.total + m->cfg.miscal_period;
    l->trig_reported = reported;
    l->trig_on = 1;
    return 1;
}

/* A Gaussian model's two location tests, beside its score detector
 * (loaded already): CALIB_LOAD_OK, CALIB_LOAD_FAILED, or anything else
 * when they cannot be kept (absent in an older calibd's snapshot, other
 * settings, a later form: noted), which restarts all three. */
static int read_loc(calib_mpr *r, const msgpack_object *a, model_recalib *l, notes *skipped)
{
    if (!a || a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 2) {
        note(skipped, "the drift detectors (no location tests: an older calibd's)");
        return CALIB_LOAD_OTHER;
    }
    for (int i = 0; i < 2; i++) {
        const msgpack_object *o = &a->via.array.ptr[i];
        if (!calib_drift_settings(r, o, &l->loc[i])) {
            if (r->failed)
                return CALIB_LOAD_FAILED;
            note(skipped, "the drift detectors (the location tests' settings changed)");
            return CALIB_LOAD_OTHER;
        }
        int rc = calib_drift_load(r, o, &l->loc[i]);
        if (rc == CALIB_LOAD_LATER)
            note(skipped, "the drift detectors (a location test of a later form)");
        if (rc != CALIB_LOAD_OK)
            return rc;
    }
    return CALIB_LOAD_OK;
}

/* The shadow run: its candidate, in the current method, and its gate. */
static int read_shadow(calib_mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    model_recalib *l = &m->recalib;
    const msgpack_object *co = calib_mpr_map(r, o, "candidate"), *go = calib_mpr_map(r, o, "gate");
    model_params cand;
    calib_accum log[2];
    if (r->failed || !calib_accums_load(r, o, "log", log, 2))
        return 0;
    int ok = read_method_params(r, co, m, &cand, "the shadow run's candidate", skipped);
    if (ok <= 0)
        return ok == 0 ? 0 : 1;
    calib_gate g;
    if (!gate_of(r, go, &g, "the shadow run", skipped))
        return !r->failed;
    l->candidate = cand;
    l->gate = g;
    memcpy(l->shadow_log, log, sizeof log);
    l->refit.phase = PHASE_SHADOW;
    return 1;
}

static void pack_recalib(calib_mpw *w, const model *m)
{
    const model_recalib *l = &m->recalib;
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "phase", (uint64_t)l->refit.phase);
    calib_mpw_key_uint(w, "pending", (uint64_t)l->refit.pending);
    calib_mpw_key_uint(w, "reason", (uint64_t)l->refit.reason);
    calib_mpw_key_double(w, "next_refit", l->refit.next_refit);
    calib_mpw_key(w, "drift");
    if (l->drift_on)
        calib_drift_save(w, &l->drift);
    else
        calib_mpw_nil(w);
    calib_mpw_key(w, "drift_loc"); /* a Gaussian model's location tests */
    if (l->loc_on) {
        calib_mpw_array(w);
        for (int i = 0; i < 2; i++)
            calib_drift_save(w, &l->loc[i]);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    calib_mpw_key_uint(w, "drift_base", l->drift_base);
    calib_mpw_key_uint(w, "drift_alarm", (uint64_t)(l->drift_alarm != 0));
    calib_mpw_key(w, "shadow");
    if (l->refit.phase == PHASE_SHADOW) {
        calib_mpw_map(w);
        calib_mpw_key(w, "candidate");
        pack_params(w, &l->candidate);
        calib_mpw_key(w, "gate");
        calib_gate_save(w, &l->gate);
        calib_mpw_key(w, "log");
        calib_accums_save(w, l->shadow_log, 2);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    /* optional keys (absent from files before the guard): read_recalib */
    calib_mpw_key(w, "guard");
    if (l->guard_on) {
        calib_mpw_map(w);
        calib_mpw_key_uint(w, "version", m->params.version); /* the version guarded */
        calib_mpw_key(w, "prev");
        pack_params(w, &l->guard_prev);
        calib_mpw_key(w, "gate");
        calib_gate_save(w, &l->guard);
        calib_mpw_key_double(w, "low", l->guard_low);
        calib_mpw_key(w, "since");
        calib_accums_save(w, l->guard_since, 3);
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    calib_mpw_key(w, "trigger"); /* optional: read_recalib */
    if (l->trig_on) {
        calib_mpw_map(w);
        calib_mpw_key(w, "challenger");
        pack_params(w, &l->challenger);
        calib_mpw_key(w, "gate");
        calib_gate_save(w, &l->trig);
        calib_mpw_key_uint(w, "fit_at", l->trig_fit_at);
        calib_mpw_key_uint(w, "start", l->trig_start);
        calib_mpw_key_uint(w, "quiet_until", l->trig_quiet_until);
        calib_mpw_key_uint(w, "reported", (uint64_t)(l->trig_reported != 0));
        calib_mpw_end(w);
    } else {
        calib_mpw_nil(w);
    }
    calib_mpw_key_uint(w, "rollbacks", l->rollbacks);
    calib_mpw_key_uint(w, "miscal_alarms", l->miscal_alarms);
    calib_mpw_key_uint(w, "cancelled", l->cancelled);
    calib_mpw_key(w, "counters");
    pack_counters(w, m, recalib_counters, recalib_counter_names, RECALIB_COUNTERS);
    calib_mpw_end(w);
}

static int read_recalib(calib_mpr *r, const msgpack_object *o, model *m, double shift, notes *skipped)
{
    model_recalib *l = &m->recalib;
    int phase = (int)calib_mpr_uint(r, o, "phase", PHASE_OFF, PHASE_STORING);
    int pending = (int)calib_mpr_uint(r, o, "pending", REFIT_NONE, REFIT_MISCAL);
    int reason = (int)calib_mpr_uint(r, o, "reason", REFIT_NONE, REFIT_MISCAL);
    if (pending == REFIT_ROLLBACK)
        return calib_mpr_fail(r, "loop: a rollback is never pending");
    /* a rollback is stored without a fit or a shadow run; idle after it,
     * the machine keeps it as the reason of its last outcome */
    if (reason == REFIT_ROLLBACK && (phase == PHASE_FITTING || phase == PHASE_SHADOW))
        return calib_mpr_fail(r, "loop: a rollback is never fitted nor in shadow");
    double next = calib_mpr_double(r, o, "next_refit");
    const msgpack_object *drift = calib_mpr_get(r, o, "drift"), *shadow = calib_mpr_get(r, o, "shadow");
    uint64_t base = calib_mpr_uint(r, o, "drift_base", 0, m->ring.total);
    int alarm = (int)calib_mpr_uint(r, o, "drift_alarm", 0, 1);
    if (!read_counters(r, o, m, recalib_counters, recalib_counter_names, RECALIB_COUNTERS))
        return 0;
    const msgpack_object *rb = calib_mpr_find(o, "rollbacks"), *guard = calib_mpr_find(o, "guard");
    if (rb) /* absent before the guard */
        l->rollbacks = calib_mpr_uint(r, o, "rollbacks", 0, UINT64_MAX);
    if (calib_mpr_find(o, "miscal_alarms")) /* absent before the trigger */
        l->miscal_alarms = calib_mpr_uint(r, o, "miscal_alarms", 0, UINT64_MAX);
    if (calib_mpr_find(o, "cancelled"))
        l->cancelled = calib_mpr_uint(r, o, "cancelled", 0, UINT64_MAX);
    if (r->failed)
        return 0;
    if (l->refit.phase == PHASE_OFF) /* the loop is off now: nothing more to resume */
        return 1;
    if (guard && guard->type != MSGPACK_OBJECT_NIL && m->cfg.rollback) {
        if (guard->type != MSGPACK_OBJECT_MAP)
            return calib_mpr_fail(r, "guard: not a map");
        if (!read_guard(r, guard, m, skipped))
            return 0;
    }

    const msgpack_object *trig = calib_mpr_find(o, "trigger"); /* absent before it */
    if (trig && trig->type != MSGPACK_OBJECT_NIL && m->cfg.miscal_trigger) {
        if (trig->type != MSGPACK_OBJECT_MAP)
            return calib_mpr_fail(r, "trigger: not a map");
        if (!read_trigger(r, trig, m, skipped))
            return 0;
    }
    if (drift->type != MSGPACK_OBJECT_NIL && l->drift_on) {
        int rc = CALIB_LOAD_OTHER;
        int same = calib_drift_settings(r, drift, &l->drift);
        if (r->failed)
            return 0;
        if (!same)
            note(skipped, "the drift detector (its settings changed)");
        else if (l->drift.cfg.kind == CALIB_DRIFT_MEAN && !calib_mpr_find(drift, "pair"))
            note(skipped, "the drift detector (an older calibd's test)");
        else if ((rc = calib_drift_load(r, drift, &l->drift)) == CALIB_LOAD_LATER)
            note(skipped, "the drift detector (of a later form)");
        if (rc == CALIB_LOAD_FAILED)
            return 0;
        if (rc == CALIB_LOAD_OK && l->loc_on)
            rc = read_loc(r, calib_mpr_find(o, "drift_loc"), l, skipped);
        if (rc == CALIB_LOAD_FAILED)
            return 0;
        if (rc == CALIB_LOAD_OK) {
            l->drift_base = base;
            l->drift_alarm = alarm;
        } else { /* the detectors share one reset: all start afresh */
            model_drift_reset(m);
        }
    }
    /* the schedule keeps its time; a refit that was running starts again
     * at the next tick (its worker's result was lost with the process) */
    if (isfinite(next) && next != 0 && l->refit.next_refit != 0)
        l->refit.next_refit = next + shift;
    l->refit.pending = pending;
    l->refit.reason = reason; /* idle: the reason of the last outcome */
    if (phase == PHASE_FITTING || phase == PHASE_STORING) {
        /* a rollback starts again from the guard's alarm, restored above */
        if (!l->refit.pending && reason != REFIT_ROLLBACK)
            l->refit.pending = reason ? reason : REFIT_MANUAL;
        note(skipped, "the %s under way (it starts again)",
             phase == PHASE_FITTING ? "fit" : "store");
    } else if (phase == PHASE_SHADOW && shadow->type == MSGPACK_OBJECT_MAP) {
        if (!read_shadow(r, shadow, m, skipped))
            return 0;
        l->refit.reason = reason;
        if (l->refit.phase != PHASE_SHADOW && !l->refit.pending)
            l->refit.pending = reason ? reason : REFIT_MANUAL;
    }
    return 1;
}

/* ------------------------------------------------------------------ configuration */

/* The model's configuration as the text of its [model] keys, with the
 * capacities its byte budgets allowed (model_size; not those memory_limit
 * stopped a ring or reservoir at, which their maps hold), so that calibctl
 * can rebuild it without the daemon's file. */
static void pack_cfg(calib_mpw *w, const model *m)
{
    model_cfg c = m->cfg;
    c.max_pending = m->join.cfg.capacity;
    c.joined_memory = m->join.cfg.joined_capacity ? m->join.cfg.joined_capacity : 1;
    if (m->shaped) {
        c.ring = m->sizes.ring;
        c.reservoir = m->sizes.reservoir;
    }
    char value[128];
    const char *key;
    calib_mpw_map(w);
    for (size_t i = 0; (key = config_model_key(i, &c, value, sizeof value)); i++) {
        calib_mpw_key(w, key);
        calib_mpw_str(w, value);
    }
    calib_mpw_end(w);
}

int snapshot_model_cfg(const msgpack_object *o, model_cfg *c, char *err, size_t errlen)
{
    calib_mpr r;
    calib_mpr_init(&r, err, errlen);
    const msgpack_object *cfg = calib_mpr_map(&r, o, "cfg");
    if (!cfg)
        return -1;
    for (uint32_t i = 0; i < cfg->via.map.size; i++) {
        const msgpack_object_kv *kv = &cfg->via.map.ptr[i];
        char key[64], value[128];
        if (kv->key.type != MSGPACK_OBJECT_STR || kv->val.type != MSGPACK_OBJECT_STR ||
            kv->key.via.str.size >= sizeof key || kv->val.via.str.size >= sizeof value) {
            snprintf(err, errlen, "cfg: entry %u is not a key and a value", i);
            return -1;
        }
        snprintf(key, sizeof key, "%.*s", (int)kv->key.via.str.size, kv->key.via.str.ptr);
        snprintf(value, sizeof value, "%.*s", (int)kv->val.via.str.size, kv->val.via.str.ptr);
        if (config_set_model(c, key, value, err, errlen) < 0)
            return -1; /* an unknown key (a later version's) is left alone */
    }
    /* the capacities are the stored ones: no byte budget caps them */
    c->join_memory = c->sample_memory = (uint64_t)1 << 40;
    return 0;
}

/* ------------------------------------------------------------------ model */

/* The last arrivals on the monotonic clock (0: none). */
static const char *const last_names[3] = {"label", "first_prediction", "prediction"};

/* The segments (absent before them): 1 restored, 0 not (noted), -1 a
 * malformed section. */
static int read_segments(calib_mpr *r, const msgpack_object *o, model *m, notes *skipped)
{
    const msgpack_object *seg = calib_mpr_find(o, "segments");
    if (!seg)
        return 0;
    int rc = seg_load(r, seg, &m->seg);
    if (rc == CALIB_LOAD_FAILED)
        return -1;
    if (rc != CALIB_LOAD_OK)
        note(skipped, "the segments (%s; the waiting predictions' segments with them)",
             rc == CALIB_LOAD_LATER ? "of a later form"
             : rc == CALIB_LOAD_NO_ROOM ? "no room under memory_limit"
             : "segment_values, bins, segment_min_effect or segment_keys changed");
    return rc == CALIB_LOAD_OK;
}

static int read_events(calib_mpr *r, const msgpack_object *o, model *m)
{
    uint64_t total = calib_mpr_uint(r, o, "nevents", 0, UINT64_MAX);
    const msgpack_object *ev = calib_mpr_array(r, o, "events", UINT32_MAX);
    if (r->failed)
        return 0;
    uint32_t n = ev->via.array.size;
    if (n > MODEL_EVENTS || n > total)
        return calib_mpr_fail(r, "events: %u kept of %llu", n, (unsigned long long)total);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *a = &ev->via.array.ptr[i];
        model_event *e = &m->events[(total - n + i) % MODEL_EVENTS];
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 3 ||
            !calib_mpr_number(&a->via.array.ptr[0], &e->t) ||
            a->via.array.ptr[1].type != MSGPACK_OBJECT_STR ||
            a->via.array.ptr[2].type != MSGPACK_OBJECT_STR)
            return calib_mpr_fail(r, "events: event %u is not [t, kind, text]", i);
        const msgpack_object_str *k = &a->via.array.ptr[1].via.str,
                                 *t = &a->via.array.ptr[2].via.str;
        snprintf(e->kind, sizeof e->kind, "%.*s", (int)(k->size < 64 ? k->size : 64), k->ptr);
        snprintf(e->text, sizeof e->text, "%.*s", (int)(t->size < 512 ? t->size : 512), t->ptr);
    }
    m->nevents = total;
    return 1;
}

static int read_alerts(calib_mpr *r, const msgpack_object *o, model *m, double shift)
{
    const msgpack_object *a = calib_mpr_array(r, o, "alert", RULES);
    if (!a)
        return 0;
    for (int i = 0; i < RULES; i++) {
        const msgpack_object *s = &a->via.array.ptr[i];
        double open, alerted, last;
        if (s->type != MSGPACK_OBJECT_ARRAY || s->via.array.size != 3 ||
            !calib_mpr_number(&s->via.array.ptr[0], &open) ||
            !calib_mpr_number(&s->via.array.ptr[1], &alerted) ||
            !calib_mpr_number(&s->via.array.ptr[2], &last) || !isfinite(last))
            return calib_mpr_fail(r, "alert: rule %d is not [open, alerted, last]", i);
        m->alert[i] = (alert_state){.open = open != 0, .alerted = alerted != 0,
                                    .last = last != 0 ? last + shift : 0};
    }
    return 1;
}

/* Whether a stored store goes into one of capacity cap, given bound (a
 * model just shaped: cap = bound): of the same capacity, or given the same
 * bound and stopped lower by memory_limit. A store whose configured
 * capacity changed (ring, reservoir, sample_memory) does not. */
static int caps_fit(uint64_t stored, uint64_t stored_bound, size_t cap, size_t bound)
{
    return stored == cap || (stored_bound == bound && stored >= 1 && stored < cap);
}

int snapshot_model_head(const msgpack_object *o, char name[CFG_NAME_MAX + 1], int *shaped,
                        int *form, size_t *k, char *err, size_t errlen)
{
    calib_mpr r;
    calib_mpr_init(&r, err, errlen);
    calib_mpr_str(&r, o, "name", name, CFG_NAME_MAX + 1);
    *shaped = (int)calib_mpr_uint(&r, o, "shaped", 0, 1);
    *form = (int)calib_mpr_uint(&r, o, "form", 0, CALIB_FORM_GAUSSIAN);
    *k = (size_t)calib_mpr_uint(&r, o, "k", 0, CALIB_PROTO_MAX_K);
    if (!r.failed && *shaped && calib_form_width(*form, *k) == 0)
        calib_mpr_fail(&r, "model %s: form %d with k %zu is no shape", name, *form, *k);
    return r.failed ? -1 : 0;
}

void snapshot_pack_model(calib_mpw *w, const model *m)
{
    size_t at = snapshot_section_begin(w);
    calib_mpw_map(w);
    calib_mpw_key(w, "name");
    calib_mpw_str(w, m->name);
    calib_mpw_key_uint(w, "shaped", (uint64_t)(m->shaped != 0));
    calib_mpw_key_uint(w, "form", (uint64_t)(m->shaped ? m->form : 0));
    calib_mpw_key_uint(w, "k", m->shaped ? m->k : 0);
    calib_mpw_key(w, "cfg");
    pack_cfg(w, m);
    calib_mpw_key(w, "counters");
    pack_counters(w, m, model_counters, model_counter_names, MODEL_COUNTERS);
    calib_mpw_key(w, "rejected");
    snapshot_pack_rejected(w, m->rejected);
    const double last[3] = {m->last_label_mono, m->first_prediction_mono,
                            m->last_prediction_mono};
    calib_mpw_key(w, "last");
    calib_mpw_map(w);
    for (int i = 0; i < 3; i++)
        calib_mpw_key_double(w, last_names[i], last[i]);
    calib_mpw_end(w);
    calib_mpw_key(w, "join");
    calib_join_save(w, &m->join);
    calib_mpw_key_uint(w, "nevents", m->nevents);
    calib_mpw_key(w, "events");
    calib_mpw_array(w);
    for (size_t i = 0; i < model_events_len(m); i++) {
        const model_event *e = model_event_get(m, i);
        calib_mpw_array(w);
        calib_mpw_double(w, e->t);
        calib_mpw_str(w, e->kind);
        calib_mpw_str(w, e->text);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_key(w, "alert");
    calib_mpw_array(w);
    for (int i = 0; i < RULES; i++) {
        calib_mpw_array(w);
        calib_mpw_uint(w, (uint64_t)(m->alert[i].open != 0));
        calib_mpw_uint(w, (uint64_t)(m->alert[i].alerted != 0));
        calib_mpw_double(w, m->alert[i].last);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_key(w, "params");
    pack_params(w, &m->params);
    if (m->shaped) {
        /* [VIEWS][WS_PER_VIEW], row by row */
        calib_mpw_key(w, "cum");
        calib_accums_save(w, &m->cum[0][0], VIEWS * WS_PER_VIEW);
        calib_mpw_key(w, "sums");
        pack_sums(w, &m->sums[0][0], VIEWS * WS_PER_VIEW);
        calib_mpw_key(w, "paired");
        calib_mpw_map(w);
        calib_mpw_key_uint(w, "version", m->paired.version);
        calib_mpw_key_double(w, "since", m->paired.since);
        calib_mpw_key(w, "view");
        calib_accums_save(w, &m->paired.view[0][0], VIEWS * WS_PER_VIEW);
        calib_mpw_key(w, "diff");
        calib_accums_save(w, m->paired.diff, WS_PER_VIEW);
        calib_mpw_key(w, "cs"); /* optional: absent before the sequences */
        if (m->cs_on) {
            calib_mpw_array(w);
            for (int v = 0; v < VIEWS; v++)
                calib_cs_save(w, &m->cs[v]);
            calib_mpw_end(w);
        } else {
            calib_mpw_nil(w);
        }
        calib_mpw_key(w, "period"); /* optional: absent before the window's */
        pack_period(w, m);
        calib_mpw_end(w);
        calib_mpw_key(w, "top");
        calib_mpw_array(w);
        for (int v = 0; v < VIEWS && m->top[v].m; v++)
            calib_bins_save(w, &m->top[v]);
        calib_mpw_end(w);
        calib_mpw_key(w, "cw");
        calib_cwbins_save(w, &m->cw);
        calib_mpw_key(w, "window");
        calib_window_save(w, &m->win);
        calib_mpw_key(w, "reservoir");
        calib_reservoir_save(w, &m->reservoir, m->sizes.reservoir);
        calib_mpw_key(w, "ring");
        pack_ring(w, m);
        calib_mpw_key(w, "loop");
        pack_recalib(w, m);
        calib_mpw_key(w, "segments"); /* optional: absent before them */
        seg_save(w, &m->seg);
    }
    calib_mpw_end(w);
    snapshot_section_end(w, at);
}

/* The statistics of a shaped model, section by section: a section whose
 * dimensions changed with the configuration stays fresh. */
static int read_shaped(calib_mpr *r, const msgpack_object *o, model *m, double shift, notes *skipped)
{
    calib_accums_load(r, o, "cum", &m->cum[0][0], VIEWS * WS_PER_VIEW);
    read_sums(r, o, &m->sums[0][0], VIEWS * WS_PER_VIEW);
    const msgpack_object *po = calib_mpr_map(r, o, "paired");
    uint64_t version = calib_mpr_uint(r, po, "version", 0, UINT64_MAX);
    if (r->failed)
        return 0;
    if (version == m->params.version) {
        m->paired.version = version;
        m->paired.since = calib_mpr_finite(r, po, "since");
        calib_accums_load(r, po, "view", &m->paired.view[0][0], VIEWS * WS_PER_VIEW);
        calib_accums_load(r, po, "diff", m->paired.diff, WS_PER_VIEW);
        const msgpack_object *cs = calib_mpr_find(po, "cs");
        if (cs && cs->type == MSGPACK_OBJECT_ARRAY && m->cs_on) {
            if (cs->via.array.size != VIEWS)
                return calib_mpr_fail(r, "paired: cs is not one sequence a view");
            for (int v = 0; v < VIEWS; v++)
                if (cs->via.array.ptr[v].type != MSGPACK_OBJECT_MAP ||
                    !read_cs(r, &cs->via.array.ptr[v], &m->cs[v], skipped))
                    return r->failed ? 0 : calib_mpr_fail(r, "paired: a cs is not a map");
        } else if (cs && cs->type != MSGPACK_OBJECT_NIL && cs->type != MSGPACK_OBJECT_ARRAY) {
            return calib_mpr_fail(r, "paired: cs is neither a list nor nil");
        } else if (m->cs_on) {
            note(skipped, "the confidence sequences (none in the file: they start afresh)");
        }
        const msgpack_object *pd = calib_mpr_find(po, "period");
        if (pd && pd->type == MSGPACK_OBJECT_MAP && m->cs_on) {
            if (!read_period(r, pd, m, skipped))
                return 0;
        } else if (pd && pd->type != MSGPACK_OBJECT_NIL && pd->type != MSGPACK_OBJECT_MAP) {
            return calib_mpr_fail(r, "paired: period is neither a map nor nil");
        } else if (m->cs_on && !pd) {
            note(skipped, "the window's confidence sequences (none in the file: they start "
                          "afresh)");
        }
    } else {
        note(skipped, "the paired comparison (of version %llu, now %llu)",
             (unsigned long long)version, (unsigned long long)m->params.version);
    }
    int bins = m->form != CALIB_FORM_GAUSSIAN;
    const msgpack_object *top = calib_mpr_array(r, o, "top", bins ? VIEWS : 0);
    const msgpack_object *cw = calib_mpr_get(r, o, "cw");
    if (r->failed)
        return 0;
    const msgpack_object *m0 = bins ? calib_mpr_find(&top->via.array.ptr[0], "m") : NULL;
    int later = 0; /* the views' bins are restored together or not at all */
    for (int v = 0; bins && v < VIEWS; v++)
        later |= calib_save_form(&top->via.array.ptr[v]) > CALIB_SAVE_FORM;
    if (bins && (!m0 || m0->type != MSGPACK_OBJECT_POSITIVE_INTEGER || m0->via.u64 != m->top[0].m)) {
        note(skipped, "the cumulative bins (bins changed)");
    } else if (later) {
        note(skipped, "the cumulative bins (of a later form)");
    } else {
        for (int v = 0; bins && v < VIEWS; v++)
            if (calib_bins_load(r, &top->via.array.ptr[v], &m->top[v]) != CALIB_LOAD_OK)
                return 0;
        int rc = CALIB_LOAD_OTHER;
        if (m->cw.k && cw->type == MSGPACK_OBJECT_MAP &&
            (rc = calib_cwbins_load(r, cw, &m->cw)) == CALIB_LOAD_FAILED)
            return 0;
        if (rc != CALIB_LOAD_OK && (m->cw.k || cw->type != MSGPACK_OBJECT_NIL))
            note(skipped, "the class-wise bins%s", rc == CALIB_LOAD_LATER ? " (of a later "
                 "form)" : "");
    }
    int rc = calib_window_load(r, calib_mpr_map(r, o, "window"), &m->win);
    if (rc == CALIB_LOAD_FAILED)
        return 0;
    if (rc == CALIB_LOAD_OTHER)
        note(skipped, "the window (window, window_panes or bins changed)");
    else if (rc == CALIB_LOAD_LATER)
        note(skipped, "the window (of a later form)");
    const msgpack_object *res = calib_mpr_map(r, o, "reservoir"), *ring = calib_mpr_map(r, o, "ring");
    uint64_t rcap, rbound, gcap, gbound;
    calib_store_caps(r, res, &rcap, &rbound);
    calib_store_caps(r, ring, &gcap, &gbound);
    if (r->failed)
        return 0;
    if (!caps_fit(rcap, rbound, m->reservoir.s.cap, m->sizes.reservoir))
        note(skipped, "the reservoir (its capacity changed: %llu records, now %zu)",
             (unsigned long long)rbound, m->sizes.reservoir);
    else if ((rc = calib_reservoir_load(r, res, &m->reservoir, (size_t)rcap)) ==
             CALIB_LOAD_NO_ROOM)
        note(skipped, "the reservoir (no room under memory_limit)");
    else if (rc == CALIB_LOAD_LATER)
        note(skipped, "the reservoir (of a later form)");
    else if (rc == CALIB_LOAD_FAILED)
        return 0;
    if (!caps_fit(gcap, gbound, calib_ring_cap(&m->ring), m->sizes.ring)) {
        note(skipped, "the ring and the loop (the ring's capacity changed: %llu records, "
             "now %zu)", (unsigned long long)gbound, m->sizes.ring);
        return 1; /* the drift detector's base and the fits index the ring */
    }
    if ((rc = read_ring(r, ring, m, (size_t)gcap)) == CALIB_LOAD_NO_ROOM) {
        note(skipped, "the ring and the loop (no room under memory_limit)");
        return 1;
    }
    if (rc == CALIB_LOAD_FAILED)
        return 0;
    return read_recalib(r, calib_mpr_map(r, o, "loop"), m, shift, skipped);
}

int snapshot_restore_model(model *m, const msgpack_object *o, double shift, int with_params,
                           char *skipped, size_t skippedlen, char *err, size_t errlen)
{
    calib_mpr r;
    calib_mpr_init(&r, err, errlen);
    notes sk = {skipped, skippedlen};
    if (skippedlen)
        skipped[0] = 0;
    double last[3] = {0, 0, 0};
    const msgpack_object *lo = calib_mpr_get(&r, o, "last");
    if (lo && lo->type == MSGPACK_OBJECT_MAP) {
        for (int i = 0; i < 3; i++)
            if (calib_mpr_find(lo, last_names[i]))
                last[i] = calib_mpr_double(&r, lo, last_names[i]);
    } else if (lo) {
        calib_doubles_load(&r, o, "last", last, 3);
    }
    uint64_t rejected[REJ_MAX] = {0};
    if (!r.failed)
        snapshot_read_rejected(&r, calib_mpr_get(&r, o, "rejected"), rejected);
    const msgpack_object *params = calib_mpr_map(&r, o, "params");
    if (r.failed)
        return -1;
    if (with_params) {
        state_param_names names;
        model_params p;
        if (!read_params(&r, params, &p) || !read_param_names(&r, params, &names))
            return -1;
        /* a built-in method by name, its values in its order; a plugin's
         * (not loaded here) keeps its values unnamed */
        const calib_plugin *desc = calib_plugin_builtin(p.method);
        char why[ERR_MAX];
        p.desc = desc && state_params_by_name(&p, names, desc, why, sizeof why) == 0 ? desc
                                                                                   : NULL;
        p.identity = model_params_is_identity(&p);
        m->params = p;
    }
    if (!read_counters(&r, o, m, model_counters, model_counter_names, MODEL_COUNTERS))
        return -1;
    for (int i = 0; i < REJ_MAX; i++)
        m->rejected[i] += rejected[i];
    double *mono[3] = {&m->last_label_mono, &m->first_prediction_mono,
                       &m->last_prediction_mono};
    for (int i = 0; i < 3; i++)
        if (isfinite(last[i]) && last[i] != 0)
            *mono[i] = last[i] + shift;
    /* the segments before the join: a waiting prediction's codes name
     * their slots, and mean nothing to a table that was not restored */
    int segs = m->shaped ? read_segments(&r, o, m, &sk) : 0;
    if (segs < 0)
        return -1;
    /* a waiting prediction's outputs pass through the model's scratch, kept
     * whatever the number of segment codes after them */
    size_t lost = 0;
    int rc = calib_join_load_tags(&r, calib_mpr_map(&r, o, "join"), &m->join, shift,
                                  m->shaped ? m->xcal : NULL, m->width,
                                  segs ? m->seg.cfg.keys : 0, &lost);
    if (rc == CALIB_LOAD_FAILED || !read_events(&r, o, m) || !read_alerts(&r, o, m, shift))
        return -1;
    if (rc == CALIB_LOAD_LATER)
        note(&sk, "the join table (of a later form)");
    if (lost)
        note(&sk, "%zu waiting predictions of another width", lost);
    if (m->shaped && !read_shaped(&r, o, m, shift, &sk))
        return -1;
    return r.failed ? -1 : 0;
}
