/*
 * join.c — the per-model join table of predictions and labels.
 *
 * Waiting items live in a slab of entries, with their outputs in a parallel
 * slab of width doubles per entry (none while the table has width 0, labels
 * only, as a model's does before its first prediction). The slabs start at
 * JOIN_FIRST entries and double when every entry is in use, up to
 * `capacity`: a table costs what it holds, not its bound. Entries are
 * addressed by 32-bit index, never by pointer, so a growth copies the slabs
 * and rebuilds the hash chains, and nothing else changes. Two intrusive
 * structures thread through the slab by index:
 *
 *  - index-chained hash buckets (id -> slot), a power of two of them, at
 *    least as many as slots, so the mean chain length stays below 1;
 *  - one FIFO of waiting items in arrival order, doubly linked so that a join
 *    or a replacement can unlink an item from the middle in O(1).
 *
 * Why a FIFO and not a heap: the TTL is one constant per table and arrival
 * times are made monotonic (a clock that goes back counts as the latest
 * seen), so deadlines = arrival + ttl are non-decreasing along the FIFO. The
 * items due are always a prefix of it: expiry pops from the head in O(1)
 * each, and the oldest item — the one to evict when full — is the head too.
 * A replaced item gets a new arrival time, so it moves to the tail.
 *
 * Joined ids are remembered for duplicate detection in a ring of
 * `joined_capacity` entries, oldest first, with their own hash buckets. They
 * only ever leave from the oldest end (expired, or pushed out when full), so
 * a ring suffices; it grows like the slabs, unwrapped into the larger one.
 *
 * Every allocation is taken from cfg.budget first. A growth it (or malloc)
 * refuses is not made: the table then behaves as full at its present size.
 *
 * Full, it samples (calib/join.h): the sample hash is computed only while
 * the sample is less than all, or to decide what a shrink drops. A shrink
 * walks the FIFO twice and frees about a 128th of the table, so its cost
 * spreads over the arrivals it makes room for (a 128th of the table).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dup.h"

#include "calib/calib.h"
#include "calib/join.h"

#define NIL UINT32_MAX
#define JOIN_FIRST 64 /* entries and joined ids a table starts with */
#define SAMPLE_ALL UINT32_MAX
#define SAMPLE_SEED 0x63616c6962646a6fULL /* fixed: a sample outlives restarts */

/* ------------------------------------------------------------------ ids */

int calib_id_str(calib_id *id, const void *bytes, size_t len)
{
    if (len == 0 || len > CALIB_ID_MAX || !bytes)
        return CALIB_EINVAL;
    memcpy(id->v.str, bytes, len);
    id->kind = CALIB_ID_STR;
    id->len = (uint8_t)len;
    return CALIB_OK;
}

void calib_id_u64(calib_id *id, uint64_t v)
{
    id->v.u64 = v;
    id->kind = CALIB_ID_U64;
    id->len = sizeof(uint64_t);
}

int calib_id_check(const calib_id *id)
{
    if (id->kind == CALIB_ID_STR)
        return id->len >= 1 && id->len <= CALIB_ID_MAX ? CALIB_OK : CALIB_EINVAL;
    if (id->kind == CALIB_ID_U64)
        return id->len == sizeof(uint64_t) ? CALIB_OK : CALIB_EINVAL;
    return CALIB_EINVAL;
}

int calib_id_equal(const calib_id *a, const calib_id *b)
{
    if (a->kind != b->kind || a->len != b->len)
        return 0;
    if (a->kind == CALIB_ID_U64)
        return a->v.u64 == b->v.u64;
    return memcmp(a->v.str, b->v.str, a->len) == 0;
}

/* splitmix64's finaliser: a bijection with full avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/*
 * The state starts from the seed, kind and length (so "a" and "a\0", or "5"
 * and 5, differ), absorbs 8-byte words by xor, odd multiply and rotation —
 * each step a bijection of the state, so equal-length ids that differ in one
 * word always reach different states — and ends with a full avalanche. The
 * last word is zero-padded: bytes past len are never read.
 */
uint64_t calib_id_hash(const calib_id *id, uint64_t seed)
{
    const uint64_t k = 0x9e3779b97f4a7c15ULL;
    uint64_t h = mix64(seed ^ (((uint64_t)id->kind << 8 | id->len) * k));
    if (id->kind == CALIB_ID_U64)
        return mix64(rotl64((h ^ id->v.u64) * k, 29));
    size_t len = id->len <= CALIB_ID_MAX ? id->len : CALIB_ID_MAX;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = 0;
        memcpy(&w, id->v.str + i, len - i < 8 ? len - i : 8);
        h = rotl64((h ^ w) * k, 29);
    }
    return mix64(h);
}

/* ------------------------------------------------------------------ sizes */

struct join_sizes {
    size_t nbuckets, ndbuckets;
    size_t ent, x, bucket, done, dbucket; /* bytes */
};

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

/* Whether capacity * width doubles of outputs can be sized in a size_t. */
static int outputs_fit(size_t capacity, size_t width)
{
    return width == 0 || capacity <= SIZE_MAX / sizeof(double) / width;
}

/* Validates cfg and sizes every allocation; 0 if cfg is bad or the sizes
 * overflow size_t. */
static int join_sizes(const calib_join_cfg *cfg, struct join_sizes *s)
{
    if (!cfg || !isfinite(cfg->ttl) || !(cfg->ttl > 0) || cfg->capacity == 0 ||
        cfg->capacity > CALIB_JOIN_MAX_CAPACITY ||
        cfg->width > CALIB_JOIN_MAX_WIDTH ||
        cfg->joined_capacity > CALIB_JOIN_MAX_CAPACITY)
        return 0;
    s->nbuckets = pow2_at_least(cfg->capacity);
    s->ndbuckets = cfg->joined_capacity ? pow2_at_least(cfg->joined_capacity) : 0;
    if (cfg->capacity > SIZE_MAX / sizeof(calib_join_entry) ||
        !outputs_fit(cfg->capacity, cfg->width) ||
        s->nbuckets > SIZE_MAX / sizeof(uint32_t) ||
        cfg->joined_capacity > SIZE_MAX / sizeof(calib_join_done) ||
        s->ndbuckets > SIZE_MAX / sizeof(uint32_t))
        return 0;
    s->ent = cfg->capacity * sizeof(calib_join_entry);
    s->x = cfg->capacity * cfg->width * sizeof(double);
    s->bucket = s->nbuckets * sizeof(uint32_t);
    s->done = cfg->joined_capacity * sizeof(calib_join_done);
    s->dbucket = s->ndbuckets * sizeof(uint32_t);
    return 1;
}

size_t calib_join_bytes(const calib_join_cfg *cfg)
{
    struct join_sizes s;
    if (!join_sizes(cfg, &s))
        return 0;
    size_t parts[] = {s.ent, s.x, s.bucket, s.done, s.dbucket}, sum = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i] > SIZE_MAX - sum)
            return 0;
        sum += parts[i];
    }
    return sum;
}

/* ------------------------------------------------------------------ memory */

/* n bytes taken from the budget, then malloc'ed; NULL (nothing taken) if
 * either refuses. */
static void *join_malloc(calib_join *j, size_t n)
{
    if (calib_budget_take(j->cfg.budget, n) != CALIB_OK)
        return NULL;
    void *p = malloc(n ? n : 1);
    if (!p) {
        calib_budget_give(j->cfg.budget, n);
        return NULL;
    }
    j->held += n;
    return p;
}

/* Frees what join_malloc gave for n bytes (p may be NULL). */
static void join_release(calib_join *j, void *p, size_t n)
{
    if (!p)
        return;
    free(p);
    calib_budget_give(j->cfg.budget, n);
    j->held -= n;
}

static size_t ent_bytes(size_t n) { return n * sizeof(calib_join_entry); }
static size_t x_bytes(size_t n, size_t width) { return n * width * sizeof(double); }
static size_t bucket_bytes(size_t n) { return n * sizeof(uint32_t); }
static size_t done_bytes(size_t n) { return n * sizeof(calib_join_done); }

static void free_waiting(calib_join *j)
{
    join_release(j, j->ent, ent_bytes(j->alloc));
    join_release(j, j->x, x_bytes(j->alloc, j->cfg.width));
    join_release(j, j->bucket, bucket_bytes(j->nbuckets));
    j->ent = NULL;
    j->x = NULL;
    j->bucket = NULL;
}

/* Threads waiting slot i onto its chain of bucket[nbuckets]. */
static void chain_add(calib_join_entry *ent, uint32_t *bucket, size_t nbuckets, uint32_t i)
{
    uint32_t *h = &bucket[ent[i].hash & (nbuckets - 1)];
    ent[i].hnext = *h;
    *h = i;
}

/* Doubles the waiting slabs (up to capacity) when every slot is in use:
 * copies them and rebuilds the chains. CALIB_ENOMEM: unchanged. */
static int waiting_grow(calib_join *j)
{
    size_t cap = j->cfg.capacity, w = j->cfg.width;
    size_t a = j->alloc > cap / 2 ? cap : 2 * j->alloc, nb = pow2_at_least(a);
    calib_join_entry *ent = join_malloc(j, ent_bytes(a));
    double *x = ent && w ? join_malloc(j, x_bytes(a, w)) : NULL;
    uint32_t *bucket = ent && (x || !w) ? join_malloc(j, bucket_bytes(nb)) : NULL;
    if (!bucket) {
        join_release(j, ent, ent_bytes(a));
        join_release(j, x, x_bytes(a, w));
        return CALIB_ENOMEM;
    }
    /* grown when full: slots 0..fresh are the ones ever used */
    memcpy(ent, j->ent, ent_bytes(j->fresh));
    if (w)
        memcpy(x, j->x, x_bytes(j->fresh, w));
    memset(bucket, 0xff, bucket_bytes(nb));
    for (uint32_t i = j->head; i != NIL; i = ent[i].next)
        chain_add(ent, bucket, nb, i);
    free_waiting(j);
    j->ent = ent;
    j->x = x;
    j->bucket = bucket;
    j->alloc = a;
    j->nbuckets = nb;
    return CALIB_OK;
}

/* Doubles the ring of joined ids (up to joined_capacity) when it is full:
 * unwraps it, oldest at 0, and rebuilds its chains. CALIB_ENOMEM:
 * unchanged. */
static int done_grow(calib_join *j)
{
    size_t cap = j->cfg.joined_capacity;
    size_t a = j->dalloc > cap / 2 ? cap : 2 * j->dalloc, nb = pow2_at_least(a);
    calib_join_done *done = join_malloc(j, done_bytes(a));
    uint32_t *dbucket = done ? join_malloc(j, bucket_bytes(nb)) : NULL;
    if (!dbucket) {
        join_release(j, done, done_bytes(a));
        return CALIB_ENOMEM;
    }
    memset(dbucket, 0xff, bucket_bytes(nb));
    for (size_t n = 0; n < j->dlen; n++) {
        size_t at = j->dhead + n;
        done[n] = j->done[at >= j->dalloc ? at - j->dalloc : at];
        uint32_t *h = &dbucket[done[n].hash & (nb - 1)];
        done[n].hnext = *h;
        *h = (uint32_t)n;
    }
    join_release(j, j->done, done_bytes(j->dalloc));
    join_release(j, j->dbucket, bucket_bytes(j->ndbuckets));
    j->done = done;
    j->dbucket = dbucket;
    j->dalloc = a;
    j->ndbuckets = nb;
    j->dhead = 0;
    return CALIB_OK;
}

size_t calib_join_held(const calib_join *j)
{
    return j->held;
}

/* ------------------------------------------------------------------ init */

int calib_join_init(calib_join *j, const calib_join_cfg *cfg)
{
    struct join_sizes s;
    *j = (calib_join){0};
    if (!join_sizes(cfg, &s) || calib_join_bytes(cfg) == 0)
        return CALIB_EINVAL;
    j->cfg = *cfg;
    j->alloc = cfg->capacity < JOIN_FIRST ? cfg->capacity : JOIN_FIRST;
    j->nbuckets = pow2_at_least(j->alloc);
    j->now = -INFINITY;
    j->ent = join_malloc(j, ent_bytes(j->alloc));
    j->x = cfg->width ? join_malloc(j, x_bytes(j->alloc, cfg->width)) : NULL;
    j->bucket = join_malloc(j, bucket_bytes(j->nbuckets));
    if (!j->ent || (cfg->width && !j->x) || !j->bucket)
        goto err;
    if (cfg->joined_capacity) {
        j->dalloc = cfg->joined_capacity < JOIN_FIRST ? cfg->joined_capacity : JOIN_FIRST;
        j->ndbuckets = pow2_at_least(j->dalloc);
        j->done = join_malloc(j, done_bytes(j->dalloc));
        j->dbucket = join_malloc(j, bucket_bytes(j->ndbuckets));
        if (!j->done || !j->dbucket)
            goto err;
        memset(j->dbucket, 0xff, bucket_bytes(j->ndbuckets)); /* all NIL */
    }
    memset(j->bucket, 0xff, bucket_bytes(j->nbuckets));
    j->head = j->tail = NIL;
    j->free = NIL;
    j->fresh = 0;
    j->sample = j->label_sample = SAMPLE_ALL;
    j->label_until = -INFINITY;
    return CALIB_OK;
err:
    calib_join_free(j);
    return CALIB_ENOMEM;
}

/*
 * Moves the waiting items into fresh slabs of `capacity` slots (allocated
 * by the caller: ent, bucket of nbuckets heads), the newest `capacity` of
 * them in FIFO order at slots 0.., evicting the older ones, and frees the
 * old slabs but the outputs. Only labels wait (no outputs to move).
 */
static void join_compact(calib_join *j, calib_join_entry *ent, uint32_t *bucket,
                         size_t nbuckets, size_t capacity)
{
    size_t waiting = j->waiting_labels, skip = waiting > capacity ? waiting - capacity : 0;
    uint32_t n = 0;
    memset(bucket, 0xff, nbuckets * sizeof *bucket);
    for (uint32_t i = j->head; i != NIL; i = j->ent[i].next) {
        if (skip) {
            skip--;
            j->evicted++;
            j->waiting_labels--;
            continue;
        }
        calib_join_entry *e = &ent[n];
        *e = j->ent[i];
        e->prev = n ? n - 1 : NIL;
        e->next = NIL;
        if (n)
            ent[n - 1].next = n;
        chain_add(ent, bucket, nbuckets, n);
        n++;
    }
    join_release(j, j->ent, ent_bytes(j->alloc));
    join_release(j, j->bucket, bucket_bytes(j->nbuckets));
    j->ent = ent;
    j->bucket = bucket;
    j->nbuckets = nbuckets;
    j->alloc = capacity;
    j->head = n ? 0 : NIL;
    j->tail = n ? n - 1 : NIL;
    j->free = NIL;
    j->fresh = n;
}

int calib_join_set_width(calib_join *j, size_t width, size_t capacity)
{
    if (!j || !j->ent || width > CALIB_JOIN_MAX_WIDTH || capacity > j->cfg.capacity)
        return CALIB_EINVAL;
    capacity = capacity ? capacity : j->cfg.capacity;
    if (!outputs_fit(capacity, width))
        return CALIB_EINVAL;
    if (width == j->cfg.width && capacity == j->cfg.capacity)
        return CALIB_OK;
    if (j->waiting_preds)
        return CALIB_EINVAL;
    /* the slabs keep their size, or shrink to the new capacity */
    size_t a = j->alloc < capacity ? j->alloc : capacity, nb = pow2_at_least(a);
    size_t had = x_bytes(j->alloc, j->cfg.width);
    double *x = NULL;
    calib_join_entry *ent = NULL;
    uint32_t *bucket = NULL;
    if (width && !(x = join_malloc(j, x_bytes(a, width))))
        goto nomem;
    if (a < j->alloc &&
        (!(ent = join_malloc(j, ent_bytes(a))) || !(bucket = join_malloc(j, bucket_bytes(nb)))))
        goto nomem;
    if (ent)
        join_compact(j, ent, bucket, nb, a);
    join_release(j, j->x, had);
    j->x = x;
    j->cfg.width = width;
    j->cfg.capacity = capacity;
    return CALIB_OK;
nomem:
    join_release(j, x, x_bytes(a, width));
    join_release(j, ent, ent_bytes(a));
    join_release(j, bucket, bucket_bytes(nb));
    return CALIB_ENOMEM;
}

int calib_join_set_ttl(calib_join *j, double ttl)
{
    if (!j || !isfinite(ttl) || !(ttl > 0))
        return CALIB_EINVAL;
    double shift = ttl - j->cfg.ttl;
    if (shift == 0)
        return CALIB_OK;
    /* one shift for all keeps the FIFO and the ring sorted by deadline */
    for (uint32_t i = j->head; i != NIL; i = j->ent[i].next)
        j->ent[i].deadline += shift;
    for (size_t n = 0; n < j->dlen; n++)
        j->done[(j->dhead + n) % j->dalloc].deadline += shift;
    j->cfg.ttl = ttl;
    return CALIB_OK;
}

int calib_join_copy(calib_join *dst, const calib_join *src)
{
    int fail = 0;
    *dst = *src;
    dst->cfg.budget = NULL;
    dst->ent = calib_dup(src->ent, ent_bytes(src->alloc), &fail);
    dst->x = calib_dup(src->x, x_bytes(src->alloc, src->cfg.width), &fail);
    dst->bucket = calib_dup(src->bucket, bucket_bytes(src->nbuckets), &fail);
    dst->done = calib_dup(src->done, done_bytes(src->dalloc), &fail);
    dst->dbucket = calib_dup(src->dbucket, bucket_bytes(src->ndbuckets), &fail);
    if (fail) {
        calib_join_free(dst);
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

void calib_join_free(calib_join *j)
{
    free_waiting(j);
    join_release(j, j->done, done_bytes(j->dalloc));
    join_release(j, j->dbucket, bucket_bytes(j->ndbuckets));
    *j = (calib_join){0};
}

/* ------------------------------------------------------------------ waiting */

static uint32_t *chain_head(calib_join *j, uint32_t hash)
{
    return &j->bucket[hash & (j->nbuckets - 1)];
}

static uint32_t waiting_find(calib_join *j, const calib_id *id, uint32_t hash)
{
    for (uint32_t i = *chain_head(j, hash); i != NIL; i = j->ent[i].hnext)
        if (j->ent[i].hash == hash && calib_id_equal(&j->ent[i].id, id))
            return i;
    return NIL;
}

static void chain_unlink(calib_join *j, uint32_t slot)
{
    uint32_t *p = chain_head(j, j->ent[slot].hash);
    while (*p != slot)
        p = &j->ent[*p].hnext;
    *p = j->ent[slot].hnext;
}

static void fifo_unlink(calib_join *j, uint32_t slot)
{
    calib_join_entry *e = &j->ent[slot];
    if (e->prev != NIL)
        j->ent[e->prev].next = e->next;
    else
        j->head = e->next;
    if (e->next != NIL)
        j->ent[e->next].prev = e->prev;
    else
        j->tail = e->prev;
}

static void fifo_append(calib_join *j, uint32_t slot)
{
    calib_join_entry *e = &j->ent[slot];
    e->prev = j->tail;
    e->next = NIL;
    if (j->tail != NIL)
        j->ent[j->tail].next = slot;
    else
        j->head = slot;
    j->tail = slot;
}

/* Takes a waiting item out of the table; its outputs stay readable in the
 * slab until the slot is reused. */
static void waiting_remove(calib_join *j, uint32_t slot)
{
    calib_join_entry *e = &j->ent[slot];
    chain_unlink(j, slot);
    fifo_unlink(j, slot);
    if (e->kind == CALIB_JOIN_PRED)
        j->waiting_preds--;
    else
        j->waiting_labels--;
    e->kind = CALIB_JOIN_NONE;
    e->next = j->free;
    j->free = slot;
}

/* A free slot, growing the slabs if all are in use, else evicting the
 * oldest waiting item; *evicted receives that item's kind. */
static uint32_t waiting_take_slot(calib_join *j, int *evicted)
{
    if (j->free == NIL && j->fresh == j->alloc && j->alloc < j->cfg.capacity)
        waiting_grow(j); /* refused: evict as when full */
    if (j->free == NIL && j->fresh < j->alloc)
        return j->fresh++;
    if (j->free == NIL) {
        *evicted = j->ent[j->head].kind;
        waiting_remove(j, j->head);
        j->evicted++;
    }
    uint32_t slot = j->free;
    j->free = j->ent[slot].next;
    return slot;
}

/* Stamps a slot with a new arrival and puts it at the FIFO's tail. */
static void waiting_stamp(calib_join *j, uint32_t slot, double ts, double y,
                          const double *x)
{
    calib_join_entry *e = &j->ent[slot];
    e->deadline = j->now + j->cfg.ttl;
    e->ts = ts;
    e->y = y;
    /* memmove: x may be a joined prediction's outputs inside this slab. */
    if (x)
        memmove(j->x + (size_t)slot * j->cfg.width, x,
               j->cfg.width * sizeof(double));
    fifo_append(j, slot);
}

/* Whether x lies inside the outputs slab (a joined prediction's), and
 * where (*at, in doubles): such an x must follow a growth of the slab. */
static int slab_offset(const calib_join *j, const double *x, size_t *at)
{
    uintptr_t p = (uintptr_t)x, base = (uintptr_t)j->x;
    int inside = x && j->x && p >= base && p < base + x_bytes(j->alloc, j->cfg.width);
    *at = inside ? (size_t)(p - base) / sizeof(double) : 0;
    return inside;
}

static void waiting_insert(calib_join *j, const calib_id *id, uint32_t hash,
                           int kind, double ts, double y, const double *x,
                           int *evicted)
{
    size_t at;
    int inside = slab_offset(j, x, &at);
    uint32_t slot = waiting_take_slot(j, evicted);
    if (inside)
        x = j->x + at;
    calib_join_entry *e = &j->ent[slot];
    e->id = *id;
    e->hash = hash;
    e->kind = (uint8_t)kind;
    uint32_t *head = chain_head(j, hash);
    e->hnext = *head;
    *head = slot;
    waiting_stamp(j, slot, ts, y, x);
    if (kind == CALIB_JOIN_PRED)
        j->waiting_preds++;
    else
        j->waiting_labels++;
}

/* ------------------------------------------------------------------ sample */

uint32_t calib_join_sample_hash(const calib_id *id)
{
    return (uint32_t)(calib_id_hash(id, SAMPLE_SEED) >> 32);
}

/* A free slot, or one the table can still grow into. */
static int has_room(calib_join *j)
{
    if (j->free != NIL || j->fresh < j->alloc)
        return 1;
    return j->alloc < j->cfg.capacity && waiting_grow(j) == CALIB_OK;
}

/* The sample a new label without its prediction must be in. */
static uint32_t label_limit(const calib_join *j)
{
    return j->now < j->label_until ? j->label_sample : j->sample;
}

/* Shrinks the sample by a 128th, or to below the largest sample hash
 * waiting where that is less, and drops the waiting items it no longer
 * holds: at least one goes (unless every id waiting hashes to 0). Small
 * steps: the sample settles within a few hundredths of what the table can
 * hold. */
static void sample_shrink(calib_join *j)
{
    uint32_t top = 0;
    for (uint32_t i = j->head; i != NIL; i = j->ent[i].next) {
        uint32_t h = calib_join_sample_hash(&j->ent[i].id);
        top = h > top ? h : top;
    }
    uint32_t s = j->sample - j->sample / 128;
    if (top <= s) /* none in the band: below the largest, by half at most
                     (a table of ids crafted to hash low then evicts its
                     oldest rather than starve every other id) */
        s = top > j->sample / 2 ? top - 1 : j->sample / 2;
    /* labels meet the smallest sample of the last ttl */
    j->label_sample = j->now < j->label_until && j->label_sample < s ? j->label_sample : s;
    j->sample = s;
    j->label_until = j->now + j->cfg.ttl;
    j->arrivals = 0;
    for (uint32_t i = j->head, next; i != NIL; i = next) {
        next = j->ent[i].next;
        if (calib_join_sample_hash(&j->ent[i].id) <= s)
            continue;
        if (j->ent[i].kind == CALIB_JOIN_PRED)
            j->sampled_out_preds++;
        else
            j->sampled_out_labels++;
        waiting_remove(j, i);
    }
}

/* Grows the sample back once a table's worth of new items were offered
 * since it last changed (about the time an item waits, at capacity), toward
 * what would fill 31/32 of the table at the rate of that while (twice at
 * most): offered, not admitted, so that a sample shrunk to almost nothing
 * grows back too. */
static void sample_grow(calib_join *j)
{
    if (j->sample == SAMPLE_ALL || j->arrivals < j->alloc)
        return;
    double held = (double)(j->waiting_preds + j->waiting_labels);
    double want = (double)j->alloc * 31 / 32, grow = held > 0 ? want / held : 2;
    if (grow <= 1 + 1.0 / 128)
        return;
    double next = (double)j->sample * (grow < 2 ? grow : 2);
    if (next < (double)j->sample + 1) /* a sample of 0 grows too */
        next = (double)j->sample + 1;
    /* the labels of the predictions refused until now come within a ttl:
     * they still meet the smallest sample of the last ttl until then */
    if (j->now >= j->label_until)
        j->label_sample = j->sample;
    j->label_until = j->now + j->cfg.ttl;
    j->sample = next >= (double)SAMPLE_ALL ? SAMPLE_ALL : (uint32_t)next;
    j->arrivals = 0;
}

/* Whether a new waiting item of id (a label without its prediction, with
 * label) may take a slot: its id in the sample, which shrinks first when
 * the table is full. Counts a refusal. */
static int admit(calib_join *j, const calib_id *id, int label)
{
    int full = !has_room(j);
    if (full)
        sample_shrink(j);
    j->arrivals++;
    uint32_t limit = label ? label_limit(j) : j->sample;
    if (limit != SAMPLE_ALL && calib_join_sample_hash(id) > limit) {
        if (label)
            j->sampled_out_labels++;
        else
            j->sampled_out_preds++;
        return 0;
    }
    return 1;
}

double calib_join_sample_fraction(const calib_join *j)
{
    return ((double)j->sample + 1) / 4294967296.0;
}

void calib_join_sampling_get(const calib_join *j, calib_join_sampling *s)
{
    *s = (calib_join_sampling){j->sample, j->label_sample, j->label_until, j->arrivals};
}

int calib_join_sampling_set(calib_join *j, const calib_join_sampling *s)
{
    if (s->label_sample > s->sample || isnan(s->label_until) || s->label_until == INFINITY)
        return CALIB_EINVAL;
    j->sample = s->sample;
    j->label_sample = s->label_sample;
    j->label_until = s->label_until;
    j->arrivals = (size_t)s->arrivals;
    return CALIB_OK;
}

/* ------------------------------------------------------------------ joined */

static uint32_t *dchain_head(calib_join *j, uint32_t hash)
{
    return &j->dbucket[hash & (j->ndbuckets - 1)];
}

static int done_find(calib_join *j, const calib_id *id, uint32_t hash)
{
    if (!j->dlen)
        return 0;
    for (uint32_t i = *dchain_head(j, hash); i != NIL; i = j->done[i].hnext)
        if (j->done[i].hash == hash && calib_id_equal(&j->done[i].id, id))
            return 1;
    return 0;
}

static void done_pop_oldest(calib_join *j)
{
    uint32_t slot = (uint32_t)j->dhead;
    uint32_t *p = dchain_head(j, j->done[slot].hash);
    while (*p != slot)
        p = &j->done[*p].hnext;
    *p = j->done[slot].hnext;
    j->dhead = j->dhead + 1 == j->dalloc ? 0 : j->dhead + 1;
    j->dlen--;
}

static void done_push(calib_join *j, const calib_id *id, uint32_t hash)
{
    if (j->cfg.joined_capacity == 0)
        return;
    if (j->dlen == j->dalloc &&
        (j->dalloc == j->cfg.joined_capacity || done_grow(j) != CALIB_OK)) {
        done_pop_oldest(j);
        j->forgotten++;
    }
    size_t cap = j->dalloc, at = j->dhead + j->dlen;
    uint32_t slot = (uint32_t)(at >= cap ? at - cap : at);
    calib_join_done *d = &j->done[slot];
    d->id = *id;
    d->hash = hash;
    d->deadline = j->now + j->cfg.ttl;
    uint32_t *head = dchain_head(j, hash);
    d->hnext = *head;
    *head = slot;
    j->dlen++;
}

/* ------------------------------------------------------------------ time */

/* A clock that goes back counts as the latest seen: deadlines then stay in
 * FIFO order. */
static void join_clock(calib_join *j, double now)
{
    if (now > j->now)
        j->now = now;
}

static size_t join_expire_due(calib_join *j)
{
    size_t n = 0;
    while (j->head != NIL && j->ent[j->head].deadline <= j->now) {
        if (j->ent[j->head].kind == CALIB_JOIN_PRED)
            j->expired_preds++;
        else
            j->expired_labels++;
        waiting_remove(j, j->head);
        n++;
    }
    while (j->dlen && j->done[j->dhead].deadline <= j->now)
        done_pop_oldest(j);
    return n;
}

size_t calib_join_expire(calib_join *j, double now)
{
    if (!isfinite(now))
        return 0;
    join_clock(j, now);
    return join_expire_due(j);
}

/* ------------------------------------------------------------------ join */

static int join_begin(calib_join *j, const calib_id *id, double now,
                      calib_join_result *out, uint32_t *hash)
{
    if (!j || !id || !out || calib_id_check(id) != CALIB_OK || !isfinite(now))
        return CALIB_EINVAL;
    *out = (calib_join_result){.evicted = CALIB_JOIN_NONE};
    join_clock(j, now);
    join_expire_due(j);
    *hash = (uint32_t)calib_id_hash(id, j->cfg.seed);
    sample_grow(j);
    return CALIB_OK;
}

static void join_done(calib_join *j, const calib_id *id, uint32_t hash,
                      calib_join_result *out)
{
    out->status = CALIB_JOIN_JOINED;
    j->joined++;
    done_push(j, id, hash);
}

int calib_join_pred(calib_join *j, const calib_id *id, const double *x,
                    double ts, double now, calib_join_result *out)
{
    uint32_t hash;
    if (!x || !j || j->cfg.width == 0 ||
        join_begin(j, id, now, out, &hash) != CALIB_OK)
        return CALIB_EINVAL;
    uint32_t slot = waiting_find(j, id, hash);
    if (slot != NIL && j->ent[slot].kind == CALIB_JOIN_PRED) {
        fifo_unlink(j, slot);
        waiting_stamp(j, slot, ts, 0, x);
        j->duplicate_preds++;
        out->status = CALIB_JOIN_REPLACED;
    } else if (slot != NIL) {
        out->x = x;
        out->y = j->ent[slot].y;
        out->pred_ts = ts;
        out->pred_arrived = j->now;
        out->label_ts = j->ent[slot].ts;
        waiting_remove(j, slot);
        join_done(j, id, hash, out);
    } else if (done_find(j, id, hash)) {
        j->duplicate_preds++;
        out->status = CALIB_JOIN_DUPLICATE;
    } else {
        size_t at;
        int inside = slab_offset(j, x, &at); /* admit may grow the slab */
        if (admit(j, id, 0)) {
            waiting_insert(j, id, hash, CALIB_JOIN_PRED, ts, 0, inside ? j->x + at : x,
                           &out->evicted);
            out->status = CALIB_JOIN_WAITING;
        } else {
            out->status = CALIB_JOIN_SAMPLED_OUT;
        }
    }
    return CALIB_OK;
}

int calib_join_label(calib_join *j, const calib_id *id, double y, double ts,
                     double now, calib_join_result *out)
{
    uint32_t hash;
    if (join_begin(j, id, now, out, &hash) != CALIB_OK)
        return CALIB_EINVAL;
    uint32_t slot = waiting_find(j, id, hash);
    if (slot != NIL && j->ent[slot].kind == CALIB_JOIN_LABEL) {
        fifo_unlink(j, slot);
        waiting_stamp(j, slot, ts, y, NULL);
        j->duplicate_labels++;
        out->status = CALIB_JOIN_REPLACED;
    } else if (slot != NIL) {
        /* waiting_remove leaves the outputs in place until the slot is
         * reused, which no call before the caller's next one can do. */
        out->x = j->x + (size_t)slot * j->cfg.width;
        out->y = y;
        out->pred_ts = j->ent[slot].ts;
        out->pred_arrived = j->ent[slot].deadline - j->cfg.ttl;
        out->label_ts = ts;
        waiting_remove(j, slot);
        join_done(j, id, hash, out);
    } else if (done_find(j, id, hash)) {
        j->duplicate_labels++;
        out->status = CALIB_JOIN_DUPLICATE;
    } else if (!admit(j, id, 1)) {
        out->status = CALIB_JOIN_SAMPLED_OUT;
    } else {
        waiting_insert(j, id, hash, CALIB_JOIN_LABEL, ts, y, NULL, &out->evicted);
        out->status = CALIB_JOIN_WAITING;
    }
    return CALIB_OK;
}

int calib_join_waiting(const calib_join *j, const calib_id *id)
{
    if (!j || !id || calib_id_check(id) != CALIB_OK || !j->bucket || !j->nbuckets)
        return 0;
    uint32_t hash = (uint32_t)calib_id_hash(id, j->cfg.seed);
    /* waiting_find reads only (its chain_head is not const) */
    uint32_t slot = waiting_find((calib_join *)j, id, hash);
    return slot != NIL ? j->ent[slot].kind : 0;
}

int calib_id_other_kind(const calib_id *id, calib_id *out)
{
    if (id->kind == CALIB_ID_U64) {
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)id->v.u64);
        return calib_id_str(out, buf, (size_t)n) == CALIB_OK;
    }
    /* a string of decimal digits, without a leading 0 (but "0"), that fits */
    if (id->kind != CALIB_ID_STR || id->len == 0 || id->len > 20 ||
        (id->v.str[0] == '0' && id->len > 1))
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < id->len; i++) {
        unsigned d = (unsigned)id->v.str[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    calib_id_u64(out, v);
    return 1;
}

/* ------------------------------------------------------------------ saving */

int calib_join_each(const calib_join *j, int (*fn)(void *arg, const calib_join_item *it),
                    int (*fn_done)(void *arg, const calib_id *id, double arrived),
                    void *arg)
{
    int rc;
    for (uint32_t i = j->head; fn && i != NIL; i = j->ent[i].next) {
        const calib_join_entry *e = &j->ent[i];
        calib_join_item it = {.kind = e->kind, .id = e->id,
                              .arrived = e->deadline - j->cfg.ttl, .ts = e->ts,
                              .y = e->kind == CALIB_JOIN_LABEL ? e->y : 0,
                              .x = e->kind == CALIB_JOIN_PRED
                                       ? j->x + (size_t)i * j->cfg.width : NULL};
        if ((rc = fn(arg, &it)) != 0)
            return rc;
    }
    for (size_t n = 0; fn_done && n < j->dlen; n++) {
        size_t at = j->dhead + n;
        const calib_join_done *d = &j->done[at >= j->dalloc ? at - j->dalloc : at];
        if ((rc = fn_done(arg, &d->id, d->deadline - j->cfg.ttl)) != 0)
            return rc;
    }
    return 0;
}

/* The newest deadline in the FIFO, or -inf. Order is checked on
 * deadlines, as the FIFO keeps it: arrival + ttl rounds monotonically, so
 * items in arrival order get deadlines in order, while an arrival taken
 * back from a deadline (deadline - ttl) may round past the next one's. */
static double newest_deadline(const calib_join *j)
{
    return j->tail == NIL ? -INFINITY : j->ent[j->tail].deadline;
}

int calib_join_put(calib_join *j, const calib_join_item *it)
{
    if (!j || !it || calib_id_check(&it->id) != CALIB_OK || !isfinite(it->arrived) ||
        it->arrived + j->cfg.ttl < newest_deadline(j) ||
        (it->kind != CALIB_JOIN_PRED && it->kind != CALIB_JOIN_LABEL) ||
        (it->kind == CALIB_JOIN_PRED && (!it->x || j->cfg.width == 0)))
        return CALIB_EINVAL;
    uint32_t hash = (uint32_t)calib_id_hash(&it->id, j->cfg.seed);
    if (waiting_find(j, &it->id, hash) != NIL || done_find(j, &it->id, hash))
        return CALIB_EINVAL;
    int evicted = CALIB_JOIN_NONE;
    /* waiting_stamp dates the item j->now: the clock is set to its arrival
     * for the insertion, then to the latest seen again */
    double now = j->now;
    j->now = it->arrived;
    waiting_insert(j, &it->id, hash, it->kind, it->ts,
                   it->kind == CALIB_JOIN_LABEL ? it->y : 0, it->x, &evicted);
    j->now = now > it->arrived ? now : it->arrived;
    return CALIB_OK;
}

int calib_join_put_done(calib_join *j, const calib_id *id, double arrived)
{
    if (!j || !id || calib_id_check(id) != CALIB_OK || !isfinite(arrived))
        return CALIB_EINVAL;
    if (j->cfg.joined_capacity == 0)
        return CALIB_OK;
    size_t cap = j->dalloc;
    if (j->dlen) {
        size_t at = j->dhead + j->dlen - 1;
        if (arrived + j->cfg.ttl < j->done[at >= cap ? at - cap : at].deadline)
            return CALIB_EINVAL;
    }
    uint32_t hash = (uint32_t)calib_id_hash(id, j->cfg.seed);
    if (waiting_find(j, id, hash) != NIL || done_find(j, id, hash))
        return CALIB_EINVAL;
    double now = j->now;
    j->now = arrived;
    done_push(j, id, hash);
    j->now = now > arrived ? now : arrived;
    return CALIB_OK;
}
