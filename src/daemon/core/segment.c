/* segment.c — calibration per segment: sketch, statistics, tests, e-BH.
 * See segment.h for what it computes and why it is valid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/join.h"
#include "calib/protocol.h"
#include "calib/save.h"
#include "dup.h"
#include "segment.h"

_Static_assert(SEG_MAX_KEYS == CALIB_PROTO_MAX_SEG && SEG_NAME_MAX == CALIB_PROTO_MAX_SEG_NAME,
               "a table holds what the protocol carries");

int seg_init(seg_table *t, const seg_cfg *cfg, calib_budget *budget)
{
    memset(t, 0, sizeof *t);
    if (!cfg || cfg->keys > SEG_MAX_KEYS || (cfg->keys &&
        (cfg->values < 1 || cfg->values > SEG_MAX_VALUES || !(cfg->alpha > 0 && cfg->alpha < 1) ||
         !(cfg->min_effect >= 0 && cfg->min_effect < 1))))
        return CALIB_EINVAL;
    t->cfg = *cfg;
    t->budget = budget;
    return CALIB_OK;
}

static size_t nbuckets_for(size_t values)
{
    size_t n = 16;
    while (n < 2 * values)
        n *= 2;
    return n;
}

size_t seg_key_bytes(const seg_cfg *c)
{
    size_t slots = c->values + 1, cells = slots * SEG_VIEWS * c->bins;
    return slots * sizeof(seg_slot) + nbuckets_for(c->values) * sizeof(uint32_t) +
           c->values * (sizeof(seg_ord) + sizeof(seg_bkt)) +
           cells * (2 * sizeof(uint64_t) + sizeof(calib_ksum));
}

static void key_free(seg_key *k)
{
    free(k->slot);
    free(k->bucket);
    free(k->ord);
    free(k->bkt);
    free(k->bin_count);
    free(k->bin_correct);
    free(k->bin_conf);
    memset(k, 0, sizeof *k);
}

void seg_free(seg_table *t)
{
    for (size_t i = 0; i < t->nkeys; i++) {
        for (size_t j = 0; t->key[i].slot && j < t->key[i].used; j++)
            seg_fix_end(t, &t->key[i].slot[j]);
        key_free(&t->key[i]);
    }
    if (t->nkeys)
        calib_budget_give(t->budget, t->nkeys * seg_key_bytes(&t->cfg));
    t->nkeys = 0;
}

int seg_copy(seg_table *dst, const seg_table *src)
{
    const seg_cfg *c = &src->cfg;
    size_t slots = c->values + 1, cells = slots * SEG_VIEWS * c->bins;
    int fail = 0;
    *dst = *src;
    dst->budget = NULL;
    for (size_t i = 0; i < src->nkeys; i++) { /* nothing of src's, before anything can fail */
        seg_key *k = &dst->key[i];
        k->slot = NULL;
        k->bucket = NULL;
        k->ord = NULL;
        k->bkt = NULL;
        k->bin_count = k->bin_correct = NULL;
        k->bin_conf = NULL;
    }
    for (size_t i = 0; i < src->nkeys && !fail; i++) {
        const seg_key *s = &src->key[i];
        seg_key *k = &dst->key[i];
        k->slot = calib_dup(s->slot, slots * sizeof *s->slot, &fail);
        if (k->slot) /* the fixes are the copy's own, below */
            for (size_t j = 0; j < slots; j++)
                k->slot[j].fix = NULL;
        k->bucket = calib_dup(s->bucket, k->nbuckets * sizeof *s->bucket, &fail);
        k->ord = calib_dup(s->ord, c->values * sizeof *s->ord, &fail);
        k->bkt = calib_dup(s->bkt, c->values * sizeof *s->bkt, &fail);
        if (cells) {
            k->bin_count = calib_dup(s->bin_count, cells * sizeof *s->bin_count, &fail);
            k->bin_correct = calib_dup(s->bin_correct, cells * sizeof *s->bin_correct, &fail);
            k->bin_conf = calib_dup(s->bin_conf, cells * sizeof *s->bin_conf, &fail);
        }
        if (fail)
            break;
        for (size_t j = 0; j < slots; j++) {
            const seg_slot *o = &s->slot[j];
            seg_slot *d = &k->slot[j];
            for (int v = 0; v < SEG_VIEWS && o->top[v].m; v++) { /* into the key's arrays */
                d->top[v].count = k->bin_count + (o->top[v].count - s->bin_count);
                d->top[v].conf = k->bin_conf + (o->top[v].conf - s->bin_conf);
                d->top[v].correct = k->bin_correct + (o->top[v].correct - s->bin_correct);
            }
            if (j < s->used && o->fix) { /* seg_free ends the fixes of used slots */
                d->fix = calib_dup(o->fix, sizeof *o->fix, &fail);
                if (d->fix) {
                    d->fix->rec = calib_dup(o->fix->rec, o->fix->stride * o->fix->cap *
                                              sizeof *o->fix->rec, &fail);
                    if (!d->fix->rec) {
                        free(d->fix);
                        d->fix = NULL;
                        fail = 1;
                    }
                }
            }
        }
    }
    if (fail) {
        seg_free(dst);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

/* A fresh occupant's statistics (the test's state is the slot's). */
static void slot_clear_stats(seg_slot *s)
{
    for (int v = 0; v < SEG_VIEWS; v++) {
        for (int i = 0; i < 2; i++)
            calib_accum_init(&s->score[v][i]);
        if (s->top[v].m)
            calib_bins_reset(&s->top[v]);
    }
    calib_accum_init(&s->resid);
}

static const double bets[SEG_BETS] = SEG_BET_VALUES;

/* Each bet's product from min(product, 1): what an occupant inherits (1 at
 * the start). */
static void slot_restart_test(seg_slot *s)
{
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < SEG_BETS; b++)
            s->lw[i][b] = s->lw[i][b] < 0 ? s->lw[i][b] : 0;
}

/* ------------------------------------------------- the sketch's order */

/* Every bucket free, no slot in the order. */
static void ord_clear(seg_key *k, size_t values)
{
    memset(k->ord, 0, values * sizeof *k->ord);
    for (size_t b = 0; b < values; b++)
        k->bkt[b] = (seg_bkt){.next = b + 1 < values ? (uint32_t)(b + 2) : 0};
    k->least = 0;
    k->free_bkt = values ? 1 : 0;
}

/* A free bucket of count c between prev and next (0: an end). There is
 * always one: each bucket in use holds a slot. */
static uint32_t bkt_new(seg_key *k, uint64_t c, uint32_t prev, uint32_t next)
{
    uint32_t b = k->free_bkt;
    seg_bkt *x = &k->bkt[b - 1];
    k->free_bkt = x->next;
    *x = (seg_bkt){.count = c, .prev = prev, .next = next};
    if (prev)
        k->bkt[prev - 1].next = b;
    else
        k->least = b;
    if (next)
        k->bkt[next - 1].prev = b;
    return b;
}

/* Slot j at the end of bucket b. */
static void bkt_link(seg_key *k, size_t j, uint32_t b)
{
    seg_bkt *x = &k->bkt[b - 1];
    k->ord[j] = (seg_ord){.prev = x->tail, .next = 0, .bkt = b};
    if (x->tail)
        k->ord[x->tail - 1].next = (uint32_t)(j + 1);
    else
        x->head = (uint32_t)(j + 1);
    x->tail = (uint32_t)(j + 1);
}

/* Slot j out of the order (nothing when it is not in it); its bucket is
 * freed when it empties. */
static void ord_remove(seg_key *k, size_t j)
{
    seg_ord *o = &k->ord[j];
    uint32_t b = o->bkt;
    if (!b)
        return;
    seg_bkt *x = &k->bkt[b - 1];
    if (o->prev)
        k->ord[o->prev - 1].next = o->next;
    else
        x->head = o->next;
    if (o->next)
        k->ord[o->next - 1].prev = o->prev;
    else
        x->tail = o->prev;
    *o = (seg_ord){0};
    if (x->head)
        return;
    if (x->prev)
        k->bkt[x->prev - 1].next = x->next;
    else
        k->least = x->next;
    if (x->next)
        k->bkt[x->next - 1].prev = x->prev;
    *x = (seg_bkt){.next = k->free_bkt};
    k->free_bkt = b;
}

/* Slot j into the order at its count, which is at most every count there. */
static void ord_add_least(seg_key *k, size_t j, uint64_t count)
{
    uint32_t b = k->least;
    if (!b || k->bkt[b - 1].count != count)
        b = bkt_new(k, count, 0, b);
    bkt_link(k, j, b);
}

/* Slot j's count grew by one, to count: it moves to the next bucket. */
static void ord_bump(seg_key *k, size_t j, uint64_t count)
{
    seg_ord *o = &k->ord[j];
    uint32_t b = o->bkt;
    if (!b)
        return;
    seg_bkt *x = &k->bkt[b - 1];
    uint32_t next = x->next;
    if (next && k->bkt[next - 1].count == count) {
        ord_remove(k, j);
        bkt_link(k, j, next);
    } else if (x->head == j + 1 && x->tail == j + 1) {
        x->count = count; /* alone in its bucket, the next one above count */
    } else {
        ord_remove(k, j); /* the bucket keeps its other slots */
        bkt_link(k, j, bkt_new(k, count, b, next));
    }
}

/* The slot of least count in the order, or -1 when it is empty. */
static long ord_least(const seg_key *k)
{
    return k->least ? (long)k->bkt[k->least - 1].head - 1 : -1;
}

typedef struct counted {
    uint64_t count;
    uint32_t slot;
} counted;

static int by_count_desc(const void *a, const void *b)
{
    const counted *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

/* The order built again from the slots (after a restore or a merge): the
 * unflagged occupied ones, each added as the least, largest count first.
 * O(values log values). CALIB_OK, or CALIB_ENOMEM (the order is then
 * empty: no slot is evicted until the next rebuild). */
static int ord_rebuild(seg_key *k, size_t values)
{
    ord_clear(k, values);
    counted *c = malloc((k->used ? k->used : 1) * sizeof *c);
    if (!c)
        return CALIB_ENOMEM;
    size_t n = 0;
    for (size_t j = 0; j < k->used; j++)
        if (!k->slot[j].flagged)
            c[n++] = (counted){k->slot[j].count, (uint32_t)j};
    qsort(c, n, sizeof *c, by_count_desc);
    for (size_t i = 0; i < n; i++)
        ord_add_least(k, c[i].slot, c[i].count);
    free(c);
    return CALIB_OK;
}

int seg_find_key(const seg_table *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->nkeys; i++)
        if (strlen(t->key[i].name) == len && memcmp(t->key[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

int seg_add_key(seg_table *t, const char *name, size_t len)
{
    int i = seg_find_key(t, name, len);
    if (i >= 0)
        return i;
    if (t->nkeys >= t->cfg.keys || len > SEG_NAME_MAX) {
        t->keys_full++;
        return -1;
    }
    const seg_cfg *c = &t->cfg;
    size_t bytes = seg_key_bytes(c), slots = c->values + 1, cells = slots * SEG_VIEWS * c->bins;
    if (calib_budget_take(t->budget, bytes) != CALIB_OK) {
        t->refused++;
        return -1;
    }
    seg_key *k = &t->key[t->nkeys];
    memset(k, 0, sizeof *k);
    k->nbuckets = nbuckets_for(c->values);
    k->slot = calloc(slots, sizeof *k->slot);
    k->bucket = calloc(k->nbuckets, sizeof *k->bucket);
    k->ord = malloc(c->values * sizeof *k->ord);
    k->bkt = malloc(c->values * sizeof *k->bkt);
    if (cells) {
        k->bin_count = calloc(cells, sizeof *k->bin_count);
        k->bin_correct = calloc(cells, sizeof *k->bin_correct);
        k->bin_conf = calloc(cells, sizeof *k->bin_conf);
    }
    if (!k->slot || !k->bucket || !k->ord || !k->bkt ||
        (cells && (!k->bin_count || !k->bin_correct || !k->bin_conf))) {
        key_free(k);
        calib_budget_give(t->budget, bytes);
        t->refused++;
        return -1;
    }
    memcpy(k->name, name, len);
    k->name[len] = 0;
    ord_clear(k, c->values);
    for (size_t j = 0; j < slots; j++) {
        seg_slot *s = &k->slot[j];
        for (int v = 0; v < SEG_VIEWS && c->bins; v++) {
            size_t off = (j * SEG_VIEWS + (size_t)v) * c->bins;
            s->top[v] = (calib_bins){.m = c->bins, .count = k->bin_count + off,
                                     .conf = k->bin_conf + off,
                                     .correct = k->bin_correct + off};
        }
        slot_clear_stats(s);
        slot_restart_test(s);
    }
    snprintf(k->slot[c->values].name, sizeof k->slot[c->values].name, "other");
    return (int)t->nkeys++;
}

static uint64_t value_hash(const seg_table *t, const char *v, size_t len)
{
    calib_id id;
    if (calib_id_str(&id, v, len) != CALIB_OK)
        return 0;
    return calib_id_hash(&id, t->cfg.seed);
}

static size_t bucket_of(const seg_key *k, uint64_t h)
{
    return (size_t)(h & (k->nbuckets - 1));
}

static long find_value(const seg_table *t, const seg_key *k, const char *v, size_t len,
                       uint64_t h)
{
    (void)t;
    for (uint32_t i = k->bucket[bucket_of(k, h)]; i; i = k->slot[i - 1].hnext) {
        const seg_slot *s = &k->slot[i - 1];
        if (strlen(s->name) == len && memcmp(s->name, v, len) == 0)
            return (long)i - 1;
    }
    return -1;
}

static void unlink_slot(const seg_table *t, seg_key *k, size_t j)
{
    seg_slot *s = &k->slot[j];
    uint64_t h = value_hash(t, s->name, strlen(s->name));
    uint32_t *p = &k->bucket[bucket_of(k, h)];
    while (*p && *p != j + 1)
        p = &k->slot[*p - 1].hnext;
    if (*p)
        *p = s->hnext;
    s->hnext = 0;
}

static void link_slot(const seg_table *t, seg_key *k, size_t j, uint64_t h)
{
    (void)t;
    uint32_t *b = &k->bucket[bucket_of(k, h)];
    k->slot[j].hnext = *b;
    *b = (uint32_t)(j + 1);
}

/* The slot for a value not tracked: a free one, else the unflagged one of
 * least count (space-saving, O(1): the order's first), whose occupant's
 * pairs go to "other"; -1 when every slot is flagged. The new occupant
 * enters the order at the count it inherits, the least there. */
static long take_slot(seg_table *t, seg_key *k, const char *v, size_t len, uint64_t h,
                      double now)
{
    const seg_cfg *c = &t->cfg;
    long j = -1;
    uint64_t inherit = 0;
    if (k->used < c->values) {
        j = (long)k->used++;
    } else {
        if ((j = ord_least(k)) < 0)
            return -1;
        ord_remove(k, (size_t)j);
        seg_slot *s = &k->slot[j], *o = &k->slot[c->values];
        for (int vw = 0; vw < SEG_VIEWS; vw++) {
            for (int i = 0; i < 2; i++)
                calib_accum_merge(&o->score[vw][i], &s->score[vw][i]);
            if (s->top[vw].m)
                (void)calib_bins_merge(&o->top[vw], &s->top[vw]);
        }
        calib_accum_merge(&o->resid, &s->resid);
        unlink_slot(t, k, (size_t)j);
        inherit = s->count;
        k->dirty = 1; /* the slot's bets restart */
        k->evictions++;
        slot_clear_stats(s);
        slot_restart_test(s);
    }
    seg_slot *s = &k->slot[j];
    memcpy(s->name, v, len);
    s->name[len] = 0;
    s->gen++;
    s->count = inherit;
    s->err = inherit;
    s->since = now;
    link_slot(t, k, (size_t)j, h);
    ord_add_least(k, (size_t)j, inherit);
    return j;
}

static double code_of(size_t slot, uint32_t gen)
{
    return (double)gen * (double)(1u << SEG_SLOT_BITS) + (double)slot + 1;
}

void seg_predict(seg_table *t, const seg_kv *kv, size_t n, double *codes, double now)
{
    for (size_t i = 0; i < t->cfg.keys; i++)
        codes[i] = 0;
    for (size_t i = 0; i < n; i++) {
        int ki = seg_add_key(t, kv[i].key, kv[i].key_len);
        if (ki < 0)
            continue;
        seg_key *k = &t->key[ki];
        uint64_t h = value_hash(t, kv[i].val, kv[i].val_len);
        long j = find_value(t, k, kv[i].val, kv[i].val_len, h);
        if (j < 0)
            j = take_slot(t, k, kv[i].val, kv[i].val_len, h, now);
        if (j < 0) {
            codes[ki] = code_of(t->cfg.values, 0); /* "other" */
            continue;
        }
        ord_bump(k, (size_t)j, ++k->slot[j].count);
        codes[ki] = code_of((size_t)j, k->slot[j].gen);
    }
}

/* The slot index code names in key (values: "other"), and whether its
 * occupant is still the one it named; -1 for no slot. */
static long code_slot(const seg_table *t, size_t key, double code, int *current)
{
    if (key >= t->nkeys || !(code >= 1) || !(code < 9007199254740992.0))
        return -1;
    uint64_t c = (uint64_t)code - 1;
    size_t j = (size_t)(c & ((1u << SEG_SLOT_BITS) - 1));
    if (j > t->cfg.values)
        return -1;
    *current = j == t->cfg.values || t->key[key].slot[j].gen == c >> SEG_SLOT_BITS;
    return (long)j;
}

seg_slot *seg_peek(const seg_table *t, size_t key, double code)
{
    int current = 0;
    long j = code_slot(t, key, code, &current);
    return j >= 0 && (size_t)j < t->cfg.values && current ? &t->key[key].slot[j] : NULL;
}

size_t seg_fix_bytes(size_t stride, size_t cap)
{
    return sizeof(seg_fix) + stride * cap * sizeof(double);
}

int seg_fix_start(seg_table *t, seg_slot *s, size_t stride, size_t cap)
{
    if (s->fix || !stride || !cap)
        return CALIB_EINVAL;
    size_t bytes = seg_fix_bytes(stride, cap);
    if (calib_budget_take(t->budget, bytes) != CALIB_OK)
        return CALIB_ENOMEM;
    seg_fix *f = calloc(1, sizeof *f);
    double *rec = calloc(stride * cap, sizeof *rec);
    if (!f || !rec) {
        free(f);
        free(rec);
        calib_budget_give(t->budget, bytes);
        return CALIB_ENOMEM;
    }
    *f = (seg_fix){.phase = SEG_FIX_COLLECT, .cap = cap, .stride = stride, .rec = rec};
    s->fix = f;
    return CALIB_OK;
}

void seg_fix_end(seg_table *t, seg_slot *s)
{
    if (!s->fix)
        return;
    calib_budget_give(t->budget, seg_fix_bytes(s->fix->stride, s->fix->cap));
    free(s->fix->rec);
    free(s->fix);
    s->fix = NULL;
}

seg_slot *seg_route(seg_table *t, size_t key, double code)
{
    int current = 0;
    long j = code_slot(t, key, code, &current);
    if (j < 0)
        return NULL;
    if (current)
        return &t->key[key].slot[j];
    t->late++;
    return seg_other(t, key);
}

double seg_log_e(const seg_slot *s)
{
    const double *lw = &s->lw[0][0];
    double hi = lw[0], sum = 0;
    for (int i = 1; i < 2 * SEG_BETS; i++)
        hi = lw[i] > hi ? lw[i] : hi;
    for (int i = 0; i < 2 * SEG_BETS; i++)
        sum += exp(lw[i] - hi);
    return hi + log(sum / (2 * SEG_BETS));
}

double seg_log_e_decide(const seg_slot *s)
{
    return s->flagged ? s->log_e_flag : seg_log_e(s);
}

static void slot_add(seg_table *t, seg_slot *s, const seg_obs *o, int test)
{
    for (int v = 0; v < SEG_VIEWS; v++) {
        for (int i = 0; i < 2; i++)
            if (!isnan(o->s[v][i]))
                calib_accum_add(&s->score[v][i], o->s[v][i]);
        if (s->top[v].m && !isnan(o->conf[v]))
            calib_bins_add(&s->top[v], o->conf[v], o->correct[v]);
    }
    double conf = o->conf[1];
    if (isnan(conf))
        return;
    double r = (o->correct[1] ? 1.0 : 0.0) - conf;
    calib_accum_add(&s->resid, r);
    if (!test)
        return;
    double d = t->cfg.min_effect, u[2] = {(r - d) / (1 + d), (-r - d) / (1 + d)};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < SEG_BETS; b++)
            s->lw[i][b] += log1p(bets[b] * u[i]); /* u >= -1, bet < 1 */
}

void seg_observe(seg_table *t, const double *codes, const seg_obs *o)
{
    for (size_t i = 0; i < t->nkeys; i++) {
        seg_slot *s = seg_route(t, i, codes[i]);
        if (!s)
            continue;
        int test = s != seg_other(t, i);
        slot_add(t, s, o, test);
        t->key[i].dirty |= test;
    }
}

double seg_log_threshold(const seg_table *t, size_t r)
{
    return log((double)t->cfg.values / (t->cfg.alpha * (double)r));
}

typedef struct cand {
    double log_e;
    uint32_t slot;
} cand;

static int by_log_e_desc(const void *a, const void *b)
{
    double x = ((const cand *)a)->log_e, y = ((const cand *)b)->log_e;
    return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * e-BH over a key's slots, done only for a key whose e-values changed
 * since the last call (dirty), and only over the slots that could be
 * rejected: e-BH rejects r slots when the r-th largest e-value is at
 * least K / (alpha r) >= 1 / alpha, so a slot below 1 / alpha is never in
 * the set and leaves r as it is. ln E is at most the largest bet's ln
 * product, so most slots are passed over without an exp. A tick with no
 * pairs costs nothing; one with pairs, a pass over the changed keys'
 * slots and a sort of the few candidates.
 */
size_t seg_decide(seg_table *t, double now, seg_flag_fn fn, void *arg)
{
    size_t flagged = 0;
    cand *e = NULL;
    double floor = seg_log_threshold(t, t->cfg.values); /* ln(1 / alpha) */
    for (size_t i = 0; i < t->nkeys; i++) {
        seg_key *k = &t->key[i];
        if (!k->dirty)
            continue;
        if (!e && !(e = malloc(t->cfg.values * sizeof *e)))
            return flagged; /* tried again at the next tick: still dirty */
        k->dirty = 0;
        size_t n = 0;
        for (size_t j = 0; j < k->used; j++) {
            const seg_slot *s = &k->slot[j];
            if (!s->flagged) {
                const double *lw = &s->lw[0][0];
                double hi = lw[0];
                for (int b = 1; b < 2 * SEG_BETS; b++)
                    hi = lw[b] > hi ? lw[b] : hi;
                if (hi < floor)
                    continue;
            }
            double le = seg_log_e_decide(s);
            if (le >= floor)
                e[n++] = (cand){le, (uint32_t)j};
        }
        if (!n)
            continue;
        qsort(e, n, sizeof *e, by_log_e_desc);
        /* e-BH: the largest r with e_(r) >= K / (alpha r) */
        size_t r = 0;
        for (size_t q = n; q >= 1 && !r; q--)
            if (e[q - 1].log_e >= seg_log_threshold(t, q))
                r = q;
        for (size_t q = 0; q < r; q++) {
            seg_slot *s = &k->slot[e[q].slot];
            if (s->flagged)
                continue;
            s->flagged = 1; /* never evicted: out of the order */
            ord_remove(k, e[q].slot);
            s->flagged_at = now;
            s->log_e_flag = e[q].log_e; /* its e-value from now on */
            k->flags++;
            flagged++;
            if (fn)
                fn(arg, k, s);
        }
    }
    free(e);
    return flagged;
}

/* The gap's 95% interval into ci, and the lower end of |gap|'s: 0 when
 * the interval holds 0 or is not there. */
static double gap_interval(const seg_slot *s, double ci[2])
{
    double r[2];
    calib_accum_ci95(&s->resid, r); /* of r; the gap is -r */
    ci[0] = -r[1];
    ci[1] = -r[0];
    return isnan(r[0]) ? 0 : ci[0] > 0 ? ci[0] : ci[1] < 0 ? -ci[1] : 0;
}

void seg_figures_of(const seg_slot *s, seg_figures *f)
{
    f->pairs = s->score[1][0].n;
    f->gap = -calib_accum_mean(&s->resid);
    f->gap_lo = gap_interval(s, f->gap_ci);
    for (int v = 0; v < SEG_VIEWS; v++) {
        f->brier[v] = calib_accum_mean(&s->score[v][0]);
        f->log[v] = calib_accum_mean(&s->score[v][1]);
        f->ece[v] = s->top[v].m ? calib_bins_ece(&s->top[v]) : NAN;
    }
    f->log_e = seg_log_e(s);
    f->log_e_flag = s->flagged ? s->log_e_flag : NAN;
}

typedef struct ranked {
    double gap_lo;
    uint64_t pairs;
    size_t slot;
} ranked;

static int worst_first(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->gap_lo != y->gap_lo)
        return x->gap_lo < y->gap_lo ? 1 : -1;
    if (x->pairs != y->pairs)
        return x->pairs < y->pairs ? 1 : -1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static ranked rank_of(const seg_slot *s, size_t j)
{
    double ci[2];
    return (ranked){gap_interval(s, ci), s->score[1][0].n, j};
}

/* Heap order: the root ranks after both children (it is the best of the
 * worst kept). */
static void sift_down(ranked *h, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && worst_first(&h[c + 1], &h[c]) > 0)
            c++;
        if (worst_first(&h[c], &h[i]) <= 0)
            return;
        ranked x = h[i];
        h[i] = h[c];
        h[c] = x;
        i = c;
    }
}

/* The max worst in O(used log max): a heap of those kept so far, whose
 * root a worse slot replaces; then sorted. */
size_t seg_rank(const seg_table *t, size_t key, size_t *idx, size_t max)
{
    if (key >= t->nkeys || !max)
        return 0;
    const seg_key *k = &t->key[key];
    size_t cap = k->used < max ? k->used : max, n = 0;
    ranked *h = malloc((cap ? cap : 1) * sizeof *h);
    if (!h)
        return 0;
    for (size_t j = 0; j < k->used; j++) {
        ranked r = rank_of(&k->slot[j], j);
        if (n < cap) {
            h[n++] = r;
            if (n == cap) /* heapify */
                for (size_t i = n / 2; i-- > 0;)
                    sift_down(h, n, i);
        } else if (worst_first(&r, &h[0]) < 0) {
            h[0] = r;
            sift_down(h, n, 0);
        }
    }
    qsort(h, n, sizeof *h, worst_first);
    for (size_t j = 0; j < n; j++)
        idx[j] = h[j].slot;
    free(h);
    return n;
}

/* ------------------------------------------------------------------ merge */

/* src's figures into dst's; the test restarts (see seg_merge). */
static void slot_merge(seg_slot *d, const seg_slot *s)
{
    for (int v = 0; v < SEG_VIEWS; v++) {
        for (int i = 0; i < 2; i++)
            calib_accum_merge(&d->score[v][i], &s->score[v][i]);
        if (d->top[v].m)
            (void)calib_bins_merge(&d->top[v], &s->top[v]); /* the same m */
    }
    calib_accum_merge(&d->resid, &s->resid);
    d->count += s->count;
    d->err += s->err;
    slot_restart_test(d);
    /* a flag of either stays; flagged in both, the mean of their e-values
     * (an e-value; their larger one is not) */
    if (s->flagged && d->flagged) {
        double a = d->log_e_flag, b = s->log_e_flag, hi = a > b ? a : b;
        d->log_e_flag = hi + log1p(exp(-fabs(a - b))) - 0.69314718055994530942;
        d->flagged_at = d->flagged_at < s->flagged_at ? d->flagged_at : s->flagged_at;
    } else if (s->flagged) {
        d->log_e_flag = s->log_e_flag;
        d->flagged_at = s->flagged_at;
    }
    d->flagged |= s->flagged;
}

void seg_map_free(seg_map *map)
{
    for (int i = 0; i < SEG_MAX_KEYS; i++) {
        free(map->slot[i]);
        map->slot[i] = NULL;
    }
}

int seg_merge(seg_table *dst, const seg_table *src, seg_map *map)
{
    const seg_cfg *c = &dst->cfg;
    if (c->values != src->cfg.values || c->bins != src->cfg.bins ||
        c->min_effect != src->cfg.min_effect)
        return CALIB_EINVAL;
    if (map)
        for (int i = 0; i < SEG_MAX_KEYS; i++)
            map->key[i] = -1, map->slot[i] = NULL;
    dst->keys_full += src->keys_full;
    dst->refused += src->refused;
    dst->late += src->late;
    for (size_t i = 0; i < src->nkeys; i++) {
        const seg_key *sk = &src->key[i];
        int di = seg_add_key(dst, sk->name, strlen(sk->name));
        if (di < 0)
            continue;
        seg_key *dk = &dst->key[di];
        dk->evictions += sk->evictions;
        uint32_t *to = map ? calloc(c->values + 1, sizeof *to) : NULL;
        if (map && !to)
            return CALIB_ENOMEM;
        if (map) {
            map->key[i] = di;
            map->slot[i] = to;
        }
        for (size_t j = 0; j < sk->used; j++) {
            const seg_slot *ss = &sk->slot[j];
            size_t len = strlen(ss->name);
            uint64_t h = value_hash(dst, ss->name, len);
            long dj = find_value(dst, dk, ss->name, len, h);
            if (dj < 0 && dk->used < c->values) {
                dj = (long)dk->used++;
                seg_slot *ds = &dk->slot[dj];
                memcpy(ds->name, ss->name, len + 1);
                ds->gen++;
                ds->since = ss->since;
                link_slot(dst, dk, (size_t)dj, h);
            }
            size_t target = dj < 0 ? c->values : (size_t)dj;
            int was = dk->slot[target].flagged;
            slot_merge(&dk->slot[target], ss);
            if (target == c->values)
                dk->slot[target].flagged = 0; /* "other" is no hypothesis */
            else if (dk->slot[target].flagged && !was)
                dk->flags++;
            if (to)
                to[j] = (uint32_t)target;
        }
        slot_merge(&dk->slot[c->values], &sk->slot[c->values]);
        dk->slot[c->values].flagged = 0;
        if (to)
            to[c->values] = (uint32_t)c->values;
        dk->dirty = 1;
        if (ord_rebuild(dk, c->values) != CALIB_OK) /* counts and flags changed */
            return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

static double merge_code(const seg_table *dst, const seg_table *src, const seg_map *map,
                         size_t i, double code)
{
    if (i >= src->nkeys || !(code >= 1) || !(code < 9007199254740992.0) || map->key[i] < 0 ||
        !map->slot[i])
        return 0;
    uint64_t cd = (uint64_t)code - 1;
    size_t j = (size_t)(cd & ((1u << SEG_SLOT_BITS) - 1));
    if (j > src->cfg.values)
        return 0;
    int di = map->key[i];
    /* a code of an occupant src had replaced routed to src's "other" */
    int stale = j < src->cfg.values && src->key[i].slot[j].gen != cd >> SEG_SLOT_BITS;
    size_t dj = stale ? dst->cfg.values : map->slot[i][j];
    return code_of(dj, dj == dst->cfg.values ? 0 : dst->key[di].slot[dj].gen);
}

void seg_merge_codes(const seg_table *dst, const seg_table *src, const seg_map *map,
                     const double *from, double *to)
{
    for (size_t i = 0; i < dst->cfg.keys; i++)
        to[i] = 0;
    for (size_t i = 0; i < src->nkeys && i < src->cfg.keys; i++)
        if (map->key[i] >= 0 && (size_t)map->key[i] < dst->cfg.keys)
            to[map->key[i]] = merge_code(dst, src, map, i, from[i]);
}

/* ------------------------------------------------------------------ snapshots */

static void slot_save(calib_mpw *w, const seg_slot *s, int bins)
{
    calib_mpw_map(w);
    calib_mpw_key(w, "name");
    calib_mpw_str(w, s->name);
    calib_mpw_key_uint(w, "gen", s->gen);
    calib_mpw_key_uint(w, "count", s->count);
    calib_mpw_key_uint(w, "err", s->err);
    calib_mpw_key_double(w, "since", s->since);
    calib_mpw_key(w, "score");
    calib_accums_save(w, &s->score[0][0], SEG_VIEWS * 2);
    calib_mpw_key(w, "resid");
    calib_accum_save(w, &s->resid);
    if (bins) {
        calib_mpw_key(w, "top");
        calib_mpw_array(w);
        for (int v = 0; v < SEG_VIEWS; v++)
            calib_bins_save(w, &s->top[v]);
        calib_mpw_end(w);
    }
    calib_mpw_key(w, "lw"); /* the bets' ln products, u+ then u- */
    calib_doubles_save(w, &s->lw[0][0], 2 * SEG_BETS);
    calib_mpw_key_uint(w, "flagged", (uint64_t)s->flagged);
    calib_mpw_key_double(w, "flagged_at", s->flagged_at);
    calib_mpw_key_double(w, "log_e_flag", s->log_e_flag);
    calib_mpw_key_uint(w, "fits", s->fits); /* a running fit is not kept */
    calib_mpw_key_uint(w, "fit_errors", s->fit_errors);
    calib_mpw_key_uint(w, "passed", s->passed);
    calib_mpw_key_uint(w, "failed", s->failed);
    calib_mpw_end(w);
}

void seg_save(calib_mpw *w, const seg_table *t)
{
    const seg_cfg *c = &t->cfg;
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "v", SEG_SAVE_FORM);
    calib_mpw_key_uint(w, "values", c->values);
    calib_mpw_key_uint(w, "bins", c->bins);
    calib_mpw_key_double(w, "min_effect", c->min_effect);
    calib_mpw_key(w, "bets");
    calib_doubles_save(w, bets, SEG_BETS);
    calib_mpw_key_uint(w, "keys_full", t->keys_full);
    calib_mpw_key_uint(w, "refused", t->refused);
    calib_mpw_key_uint(w, "late", t->late);
    calib_mpw_key(w, "keys");
    calib_mpw_array(w);
    for (size_t i = 0; i < t->nkeys; i++) {
        const seg_key *k = &t->key[i];
        calib_mpw_map(w);
        calib_mpw_key(w, "name");
        calib_mpw_str(w, k->name);
        calib_mpw_key_uint(w, "evictions", k->evictions);
        calib_mpw_key_uint(w, "flags", k->flags);
        calib_mpw_key(w, "slots"); /* the occupied ones, then "other" */
        calib_mpw_array(w);
        for (size_t j = 0; j <= k->used; j++)
            slot_save(w, j < k->used ? &k->slot[j] : &k->slot[c->values], c->bins > 0);
        calib_mpw_end(w);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_end(w);
}

#define KEYS_NO_ROOM (-1)

/* A string key of 1..SEG_NAME_MAX bytes that passes ok; "" allowed when
 * empty_ok. */
static int name_load(calib_mpr *r, const msgpack_object *o, const char *key, char *dst,
                     int (*ok)(const void *, size_t))
{
    const msgpack_object *v = calib_mpr_get(r, o, key);
    if (!v)
        return 0;
    if (v->type != MSGPACK_OBJECT_STR || v->via.str.size > SEG_NAME_MAX ||
        !ok(v->via.str.ptr, v->via.str.size))
        return calib_mpr_fail(r, "segments: %s is no segment name", key);
    memcpy(dst, v->via.str.ptr, v->via.str.size);
    dst[v->via.str.size] = 0;
    return 1;
}

static int slot_load(calib_mpr *r, const msgpack_object *o, seg_slot *s, int bins, int other)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "segments: a slot is not a map");
    char name[SEG_NAME_MAX + 1];
    if (!name_load(r, o, "name", name, calib_proto_seg_value_ok))
        return 0;
    if (other && strcmp(name, "other") != 0)
        return calib_mpr_fail(r, "segments: the last slot is not \"other\"");
    memcpy(s->name, name, sizeof name);
    s->gen = (uint32_t)calib_mpr_uint(r, o, "gen", other ? 0 : 1, UINT32_MAX);
    s->count = calib_mpr_uint(r, o, "count", 0, UINT64_MAX);
    s->err = calib_mpr_uint(r, o, "err", 0, s->count);
    s->since = calib_mpr_double(r, o, "since");
    s->flagged = (int)calib_mpr_uint(r, o, "flagged", 0, 1);
    s->flagged_at = calib_mpr_double(r, o, "flagged_at");
    s->log_e_flag = calib_mpr_double(r, o, "log_e_flag");
    if (r->failed || !calib_accums_load(r, o, "score", &s->score[0][0], SEG_VIEWS * 2) ||
        calib_accum_load(r, calib_mpr_get(r, o, "resid"), &s->resid) != CALIB_LOAD_OK ||
        !calib_doubles_load(r, o, "lw", &s->lw[0][0], 2 * SEG_BETS))
        return 0;
    for (int i = 0; i < 2 * SEG_BETS; i++)
        if (!isfinite((&s->lw[0][0])[i])) /* each factor is >= 1 - max bet */
            return calib_mpr_fail(r, "segments: a bet's wealth is not a number");
    if (s->flagged && !isfinite(s->log_e_flag))
        return calib_mpr_fail(r, "segments: a flag without its e-value");
    uint32_t *n[4] = {&s->fits, &s->fit_errors, &s->passed, &s->failed};
    static const char *const nk[4] = {"fits", "fit_errors", "passed", "failed"};
    for (int i = 0; i < 4; i++) /* absent before segment_refit */
        *n[i] = calib_mpr_find(o, nk[i]) ? (uint32_t)calib_mpr_uint(r, o, nk[i], 0, UINT32_MAX)
                                         : 0;
    if (bins) {
        const msgpack_object *top = calib_mpr_array(r, o, "top", SEG_VIEWS);
        for (int v = 0; top && v < SEG_VIEWS; v++)
            if (calib_bins_load(r, &top->via.array.ptr[v], &s->top[v]) != CALIB_LOAD_OK)
                return r->failed ? 0 : calib_mpr_fail(r, "segments: bins of a later form");
        if (!top)
            return 0;
    }
    return 1;
}

static int keys_load(calib_mpr *r, const msgpack_object *keys, seg_table *t)
{
    const seg_cfg *c = &t->cfg;
    for (uint32_t i = 0; i < keys->via.array.size; i++) {
        const msgpack_object *ko = &keys->via.array.ptr[i];
        char name[SEG_NAME_MAX + 1];
        if (ko->type != MSGPACK_OBJECT_MAP)
            return calib_mpr_fail(r, "segments: key %u is not a map", i);
        if (!name_load(r, ko, "name", name, calib_proto_seg_key_ok))
            return 0;
        if (seg_find_key(t, name, strlen(name)) >= 0)
            return calib_mpr_fail(r, "segments: key %s twice", name);
        int ki = seg_add_key(t, name, strlen(name));
        if (ki < 0)
            return KEYS_NO_ROOM; /* the budget (the number of keys is checked) */
        seg_key *k = &t->key[ki];
        k->evictions = calib_mpr_uint(r, ko, "evictions", 0, UINT64_MAX);
        k->flags = calib_mpr_uint(r, ko, "flags", 0, c->values);
        const msgpack_object *slots = calib_mpr_array(r, ko, "slots", UINT32_MAX);
        if (r->failed)
            return 0;
        uint32_t n = slots->via.array.size;
        if (n < 1 || n - 1 > c->values)
            return calib_mpr_fail(r, "segments: key %s has %u slots for %zu values", name,
                                  n, c->values);
        k->used = n - 1;
        for (uint32_t j = 0; j < n; j++) {
            int other = j == n - 1;
            seg_slot *s = other ? &k->slot[c->values] : &k->slot[j];
            if (!slot_load(r, &slots->via.array.ptr[j], s, c->bins > 0, other))
                return 0;
            if (other)
                continue;
            uint64_t h = value_hash(t, s->name, strlen(s->name));
            if (find_value(t, k, s->name, strlen(s->name), h) >= 0)
                return calib_mpr_fail(r, "segments: value %s of %s twice", s->name, name);
            link_slot(t, k, j, h);
        }
        k->dirty = 1;
        if (ord_rebuild(k, c->values) != CALIB_OK)
            return KEYS_NO_ROOM;
    }
    return 1;
}

int seg_load(calib_mpr *r, const msgpack_object *o, seg_table *t)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "segments: not a map");
    if (calib_save_form(o) > SEG_SAVE_FORM)
        return CALIB_LOAD_LATER;
    const seg_cfg *c = &t->cfg;
    uint64_t values = calib_mpr_uint(r, o, "values", 1, SEG_MAX_VALUES);
    uint64_t bins = calib_mpr_uint(r, o, "bins", 0, UINT32_MAX);
    double min_effect = calib_mpr_finite(r, o, "min_effect"), saved_bets[SEG_BETS];
    const msgpack_object *keys = calib_mpr_array(r, o, "keys", UINT32_MAX);
    const msgpack_object *bo = calib_mpr_get(r, o, "bets");
    if (r->failed)
        return CALIB_LOAD_FAILED;
    /* bets of another number or value: a test of other settings */
    int same_bets = bo->type == MSGPACK_OBJECT_ARRAY && bo->via.array.size == SEG_BETS &&
                    calib_doubles_load(r, o, "bets", saved_bets, SEG_BETS) &&
                    memcmp(saved_bets, bets, sizeof bets) == 0;
    if (r->failed)
        return CALIB_LOAD_FAILED;
    if (values != c->values || bins != c->bins || min_effect != c->min_effect ||
        keys->via.array.size > c->keys || !same_bets)
        return CALIB_LOAD_OTHER;
    /* into a table of its own, put in place once all of it read */
    seg_table fresh;
    if (seg_init(&fresh, c, t->budget) != CALIB_OK)
        return calib_mpr_fail(r, "segments: bad settings");
    fresh.keys_full = calib_mpr_uint(r, o, "keys_full", 0, UINT64_MAX);
    fresh.refused = calib_mpr_uint(r, o, "refused", 0, UINT64_MAX);
    fresh.late = calib_mpr_uint(r, o, "late", 0, UINT64_MAX);
    int rc = r->failed ? 0 : keys_load(r, keys, &fresh);
    if (rc != 1) {
        seg_free(&fresh);
        return rc == KEYS_NO_ROOM ? CALIB_LOAD_NO_ROOM : CALIB_LOAD_FAILED;
    }
    seg_free(t);
    *t = fresh;
    return CALIB_LOAD_OK;
}
