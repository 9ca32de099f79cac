/* sample.c — seeded RNG, uniform reservoir (Algorithm L) and recent ring. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dup.h"

#include "calib/calib.h"

/* ------------------------------------------------------------------ rng */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void calib_rng_seed(calib_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t calib_rng_next(calib_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double calib_rng_uniform(calib_rng *r)
{
    /* 53 random bits, offset by half a step: never 0, never 1. */
    return ((double)(calib_rng_next(r) >> 11) + 0.5) * 0x1.0p-53;
}

double calib_rng_normal(calib_rng *r)
{
    /* Box-Muller; the second variate is dropped to keep the state small. */
    double u = calib_rng_uniform(r), v = calib_rng_uniform(r);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

size_t calib_rng_categorical(calib_rng *r, const double *p, size_t k)
{
    double u = calib_rng_uniform(r), acc = 0;
    size_t last = 0;
    for (size_t j = 0; j < k; j++) {
        if (!(p[j] > 0))
            continue;
        acc += p[j];
        last = j;
        if (u < acc)
            return j;
    }
    return last; /* rounding left u above the total */
}

/* ------------------------------------------------------------------ store */

size_t calib_store_bytes(size_t width, size_t cap)
{
    if (width == 0 || cap == 0 || width > SIZE_MAX / sizeof(double) - 2 ||
        cap > SIZE_MAX / sizeof(double) / (width + 2))
        return 0;
    return cap * (width + 2) * sizeof(double);
}

size_t calib_store_held(const calib_store *s)
{
    return s->alloc * (s->width + 2) * sizeof(double);
}

int calib_store_init(calib_store *s, size_t width, size_t cap, calib_budget *budget)
{
    *s = (calib_store){0};
    if (!calib_store_bytes(width, cap))
        return CALIB_EINVAL;
    s->width = width;
    s->cap = cap;
    s->budget = budget;
    int rc = calib_store_reserve(s, cap < CALIB_STORE_FIRST ? cap : CALIB_STORE_FIRST);
    if (rc != CALIB_OK)
        *s = (calib_store){0};
    return rc;
}

int calib_store_reserve(calib_store *s, size_t n)
{
    if (n > s->cap)
        return CALIB_EINVAL;
    if (n <= s->alloc)
        return CALIB_OK;
    size_t want = s->alloc > s->cap / 2 ? s->cap : 2 * s->alloc;
    want = want < n ? n : want;
    /* within calib_store_bytes(width, cap), which init checked */
    size_t had = calib_store_held(s), bytes = want * (s->width + 2) * sizeof(double);
    double *data = calib_budget_grow(s->budget, s->data, had, bytes);
    if (!data)
        return CALIB_ENOMEM;
    s->data = data;
    s->alloc = want;
    return CALIB_OK;
}

void calib_store_stop(calib_store *s)
{
    s->cap = s->alloc;
}

int calib_store_limit(calib_store *s, size_t n)
{
    if (n == 0 || n < s->len || n > s->cap)
        return CALIB_EINVAL;
    if (s->alloc > n) {
        size_t rec = (s->width + 2) * sizeof(double);
        double *data = realloc(s->data, n * rec);
        if (!data)
            return CALIB_ENOMEM;
        calib_budget_give(s->budget, (s->alloc - n) * rec);
        s->data = data;
        s->alloc = n;
    }
    s->cap = n;
    return CALIB_OK;
}

void calib_store_free(calib_store *s)
{
    calib_budget_give(s->budget, calib_store_held(s));
    free(s->data);
    *s = (calib_store){0};
}

/* Room for one more record at slot `len` of a store that is filling; when
 * the growth is refused the store stops where it is. 1 if there is room. */
static int store_room(calib_store *s)
{
    if (s->len < s->alloc)
        return 1;
    if (s->len < s->cap && calib_store_reserve(s, s->len + 1) == CALIB_OK)
        return 1;
    calib_store_stop(s);
    return 0;
}

calib_record calib_store_get(const calib_store *s, size_t i)
{
    const double *rec = s->data + i * (s->width + 2);
    return (calib_record){.x = rec, .y = rec[s->width], .t = rec[s->width + 1]};
}

static void store_put(calib_store *s, size_t slot, const double *x, double y,
                      double t)
{
    double *rec = s->data + slot * (s->width + 2);
    memcpy(rec, x, s->width * sizeof *rec);
    rec[s->width] = y;
    rec[s->width + 1] = t;
}

/* ------------------------------------------------------------------ ring */

int calib_ring_init(calib_ring *r, size_t width, size_t cap, calib_budget *budget)
{
    *r = (calib_ring){0};
    return calib_store_init(&r->s, width, cap, budget);
}

int calib_store_copy(calib_store *dst, const calib_store *src)
{
    int fail = 0;
    *dst = *src;
    dst->budget = NULL;
    dst->data = calib_dup(src->data, calib_store_held(src), &fail);
    if (fail) {
        *dst = (calib_store){0};
        return CALIB_ENOMEM;
    }
    return CALIB_OK;
}

int calib_ring_copy(calib_ring *dst, const calib_ring *src)
{
    *dst = *src;
    return calib_store_copy(&dst->s, &src->s);
}

int calib_reservoir_copy(calib_reservoir *dst, const calib_reservoir *src)
{
    *dst = *src;
    return calib_store_copy(&dst->s, &src->s);
}

void calib_ring_free(calib_ring *r)
{
    calib_store_free(&r->s);
}

void calib_ring_push(calib_ring *r, const double *x, double y, double t)
{
    /* filling (head = len): grow, or stop at what is allocated and wrap
     * there (the store may also have been stopped by the caller) */
    if (r->s.len < r->s.cap)
        store_room(&r->s);
    if (r->head >= r->s.cap)
        r->head = 0;
    store_put(&r->s, r->head, x, y, t);
    r->head = r->head + 1 == r->s.cap ? 0 : r->head + 1;
    if (r->s.len < r->s.cap)
        r->s.len++;
    r->total++;
}

size_t calib_ring_slot(const calib_ring *r, size_t i)
{
    /* The oldest record sits at head once the ring is full, else at 0. */
    size_t oldest = r->s.len < r->s.cap ? 0 : r->head;
    size_t slot = oldest + i;
    return slot >= r->s.cap ? slot - r->s.cap : slot;
}

calib_record calib_ring_get(const calib_ring *r, size_t i)
{
    return calib_store_get(&r->s, calib_ring_slot(r, i));
}

size_t calib_ring_len(const calib_ring *r)
{
    return r->s.len;
}

size_t calib_ring_cap(const calib_ring *r)
{
    return r->s.cap;
}

size_t calib_reservoir_len(const calib_reservoir *r)
{
    return r->s.len;
}

/* ------------------------------------------------------------------ reservoir */

/* Algorithm L (Li 1994): after the reservoir fills, the gap to the next
 * replacement is geometric with a parameter W that shrinks as W *= U^(1/k). */
static void reservoir_draw_gap(calib_reservoir *r)
{
    double g = floor(log(calib_rng_uniform(&r->rng)) / log1p(-r->w));
    r->skip = g < 1.8e19 ? (uint64_t)g : UINT64_MAX;
}

static void reservoir_draw_skip(calib_reservoir *r)
{
    double k = (double)r->s.cap;
    r->w *= exp(log(calib_rng_uniform(&r->rng)) / k);
    reservoir_draw_gap(r);
}

int calib_reservoir_init(calib_reservoir *r, size_t width, size_t cap,
                         uint64_t seed, calib_budget *budget)
{
    *r = (calib_reservoir){0};
    calib_rng_seed(&r->rng, seed);
    r->w = 1;
    return calib_store_init(&r->s, width, cap, budget);
}

void calib_reservoir_free(calib_reservoir *r)
{
    calib_store_free(&r->s);
}

long calib_reservoir_offer(calib_reservoir *r, const double *x, double y,
                           double t)
{
    r->seen++;
    if (r->s.len < r->s.cap && !store_room(&r->s)) /* full where it stopped */
        reservoir_draw_skip(r);
    if (r->s.len < r->s.cap) {
        size_t slot = r->s.len++;
        store_put(&r->s, slot, x, y, t);
        if (r->s.len == r->s.cap)
            reservoir_draw_skip(r);
        return (long)slot;
    }
    if (r->skip > 0) {
        r->skip--;
        return -1;
    }
    size_t slot = (size_t)(calib_rng_next(&r->rng) % r->s.cap);
    store_put(&r->s, slot, x, y, t);
    reservoir_draw_skip(r);
    return (long)slot;
}

/*
 * Merging. Both reservoirs are uniform samples of their streams, of sizes
 * k1 <= n1 and k2 <= n2 records offered. The merged sample is drawn one
 * record at a time without replacement: from the first with probability
 * r1 / (r1 + r2), r the records of each stream not yet drawn, a record
 * picked uniformly among its sample's remaining ones; so each record
 * offered to either ends up in it with probability k / (n1 + n2), as if
 * one reservoir had been offered both streams (exactly while neither
 * sample runs out before the draw ends, which holds whenever both are
 * full, or neither is).
 */
int calib_reservoir_merge(calib_reservoir *dst, const calib_reservoir *src)
{
    if (!dst || !src || dst->s.width != src->s.width)
        return CALIB_EINVAL;
    size_t w = dst->s.width + 2, k1 = dst->s.len, k2 = src->s.len;
    size_t k = k1 + k2 < dst->s.cap ? k1 + k2 : dst->s.cap;
    size_t alloc = k > dst->s.alloc ? k : dst->s.alloc, bytes = alloc * w * sizeof(double);
    if (calib_budget_take(dst->s.budget, bytes) != CALIB_OK)
        return CALIB_ENOMEM;
    double *data = malloc(bytes);
    size_t *ia = malloc((k1 ? k1 : 1) * sizeof *ia), *ib = malloc((k2 ? k2 : 1) * sizeof *ib);
    if (!data || !ia || !ib) {
        calib_budget_give(dst->s.budget, bytes);
        free(data);
        free(ia);
        free(ib);
        return CALIB_ENOMEM;
    }
    for (size_t i = 0; i < k1; i++)
        ia[i] = i;
    for (size_t i = 0; i < k2; i++)
        ib[i] = i;
    double r1 = (double)dst->seen, r2 = (double)src->seen;
    size_t t1 = 0, t2 = 0;
    for (size_t i = 0; i < k; i++) {
        int from_a = t2 == k2 || (t1 < k1 && calib_rng_uniform(&dst->rng) * (r1 + r2) < r1);
        size_t *idx = from_a ? ia : ib, *t = from_a ? &t1 : &t2, n = from_a ? k1 : k2;
        size_t j = *t + (size_t)(calib_rng_next(&dst->rng) % (n - *t));
        size_t pick = idx[j];
        idx[j] = idx[*t];
        idx[*t] = pick;
        (*t)++;
        const double *rec = (from_a ? dst->s.data : src->s.data) + pick * w;
        memcpy(data + i * w, rec, w * sizeof *data);
        if (from_a)
            r1--;
        else
            r2--;
    }
    free(ia);
    free(ib);
    calib_budget_give(dst->s.budget, calib_store_held(&dst->s));
    free(dst->s.data);
    dst->s.data = data;
    dst->s.alloc = alloc;
    dst->s.len = k;
    dst->seen += src->seen;
    /* Algorithm L's state for a full reservoir after `seen` records: its W
     * is the k-th smallest of `seen` uniform keys, taken at its mean
     * k / (seen + 1); the next gap is drawn from it */
    if (k == dst->s.cap && dst->s.cap) {
        dst->w = (double)k / ((double)dst->seen + 1);
        reservoir_draw_gap(dst);
    }
    return CALIB_OK;
}
