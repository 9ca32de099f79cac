/* save.c — each saved libcalib structure to msgpack and back (see
 * calib/save.h and calib_save(3)): for each, the writer and then the
 * reader, so that a key is spelled in one place for both. Over 1,000
 * lines because the structures share the helpers of the form and the
 * decoders of the 0.1 form; split by structure, those would become an
 * internal header that every part must keep in step with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/protocol.h"
#include "calib/save.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the binaries of numbers are little-endian, as this host's must be"
#endif

/* ------------------------------------------------------------------ helpers */

static void key_form(calib_mpw *w)
{
    calib_mpw_key_uint(w, "v", CALIB_SAVE_FORM);
}

unsigned calib_save_form(const msgpack_object *o)
{
    const msgpack_object *v = calib_mpr_find(o, "v");
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return 0;
    return v->via.u64 > 1000 ? 1000 : (unsigned)v->via.u64;
}

/* 1 when the section o is of a form this reader reads, 0 when higher
 * (the caller returns CALIB_LOAD_LATER). */
static int form_known(const msgpack_object *o)
{
    return calib_save_form(o) <= CALIB_SAVE_FORM;
}

/* Little-endian numbers at p (the 0.1 form's binaries). */
static uint64_t le_u64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static double le_f64(const char *p)
{
    double v;
    memcpy(&v, p, 8);
    return v;
}

/* key's value: a binary of exactly len bytes (NULL and r failed if not). */
static const char *bin_at(calib_mpr *r, const msgpack_object *map, const char *key,
                          size_t len)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return NULL;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != len)
        return calib_mpr_fail(r, "%s: not a binary of %zu bytes", key, len), NULL;
    return o->via.bin.ptr;
}

void calib_doubles_save(calib_mpw *w, const double *v, size_t n)
{
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        calib_mpw_double(w, v[i]);
    calib_mpw_end(w);
}

/* n numbers at key into v: doubles, or with `integers` unsigned 64-bit
 * integers; an array of n, or of the 0.1 form a binary of n little-endian
 * ones (this host's order: their bytes are the values). */
static int numbers_load(calib_mpr *r, const msgpack_object *map, const char *key, void *v,
                        size_t n, int integers)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_BIN) {
        const char *p = bin_at(r, map, key, n * 8);
        if (p && n)
            memcpy(v, p, n * 8);
        return p != NULL;
    }
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
        return calib_mpr_fail(r, "%s: not an array of %zu %s", key, n,
                              integers ? "integers" : "numbers");
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        if (integers && e->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            ((uint64_t *)v)[i] = e->via.u64;
        else if (integers || !calib_mpr_number(e, &((double *)v)[i]))
            return calib_mpr_fail(r, "%s: value %zu is not %s", key, i,
                                  integers ? "an unsigned integer" : "a number");
    }
    return 1;
}

int calib_doubles_load(calib_mpr *r, const msgpack_object *map, const char *key, double *v,
                       size_t n)
{
    return numbers_load(r, map, key, v, n, 0);
}

void calib_uints_save(calib_mpw *w, const uint64_t *v, size_t n)
{
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        calib_mpw_uint(w, v[i]);
    calib_mpw_end(w);
}

int calib_uints_load(calib_mpr *r, const msgpack_object *map, const char *key, uint64_t *v,
                     size_t n)
{
    return numbers_load(r, map, key, v, n, 1);
}

/* n compensated sums: the sums at key, their compensations at key_c
 * (the 0.1 form: a binary of n pairs at key). */
static void ksums_save(calib_mpw *w, const char *key, const char *key_c, const calib_ksum *k,
                       size_t n)
{
    calib_mpw_key(w, key);
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        calib_mpw_double(w, k[i].sum);
    calib_mpw_end(w);
    calib_mpw_key(w, key_c);
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        calib_mpw_double(w, k[i].comp);
    calib_mpw_end(w);
}

static int ksums_load(calib_mpr *r, const msgpack_object *map, const char *key,
                      const char *key_c, calib_ksum *k, size_t n)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_BIN) { /* the 0.1 form: n (sum, comp) */
        const char *p = bin_at(r, map, key, n * 16);
        for (size_t i = 0; p && i < n; i++)
            k[i] = (calib_ksum){le_f64(p + 16 * i), le_f64(p + 16 * i + 8)};
        return p != NULL;
    }
    double *v = malloc((n ? n : 1) * 2 * sizeof *v);
    if (!v)
        return calib_mpr_fail(r, "%s: out of memory", key);
    int ok = calib_doubles_load(r, map, key, v, n) && calib_doubles_load(r, map, key_c, v + n, n);
    for (size_t i = 0; ok && i < n; i++)
        k[i] = (calib_ksum){v[i], v[n + i]};
    free(v);
    return ok;
}

/* ------------------------------------------------------------------ accumulators */

void calib_accum_save(calib_mpw *w, const calib_accum *a)
{
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "n", a->n);
    calib_mpw_key_double(w, "sum", a->s1.sum);
    calib_mpw_key_double(w, "sum_c", a->s1.comp);
    calib_mpw_key_double(w, "sq", a->s2.sum);
    calib_mpw_key_double(w, "sq_c", a->s2.comp);
    calib_mpw_end(w);
}

/* The 0.1 form: n, then the two compensated sums (40 bytes). */
enum { ACCUM_01 = 40 };

static void accum_01(const char *p, calib_accum *a)
{
    a->n = le_u64(p);
    a->s1 = (calib_ksum){le_f64(p + 8), le_f64(p + 16)};
    a->s2 = (calib_ksum){le_f64(p + 24), le_f64(p + 32)};
}

static int accum_ok(calib_mpr *r, const calib_accum *a)
{
    if (isnan(a->s1.sum) || isnan(a->s1.comp) || isnan(a->s2.sum) || isnan(a->s2.comp))
        return calib_mpr_fail(r, "an accumulator's sum is NaN");
    return 1;
}

int calib_accum_load(calib_mpr *r, const msgpack_object *o, calib_accum *a)
{
    if (r->failed)
        return 0;
    if (!o)
        return calib_mpr_fail(r, "an accumulator is missing");
    calib_accum t;
    if (o->type == MSGPACK_OBJECT_BIN && o->via.bin.size == ACCUM_01) {
        accum_01(o->via.bin.ptr, &t);
    } else if (o->type == MSGPACK_OBJECT_MAP) {
        t.n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
        t.s1 = (calib_ksum){calib_mpr_double(r, o, "sum"), calib_mpr_double(r, o, "sum_c")};
        t.s2 = (calib_ksum){calib_mpr_double(r, o, "sq"), calib_mpr_double(r, o, "sq_c")};
        if (r->failed)
            return 0;
    } else {
        return calib_mpr_fail(r, "an accumulator is not a map");
    }
    if (!accum_ok(r, &t))
        return 0;
    *a = t;
    return 1;
}

void calib_accums_save(calib_mpw *w, const calib_accum *a, size_t n)
{
    calib_mpw_array(w);
    for (size_t i = 0; i < n; i++)
        calib_accum_save(w, &a[i]);
    calib_mpw_end(w);
}

int calib_accums_load(calib_mpr *r, const msgpack_object *map, const char *key,
                      calib_accum *a, size_t n)
{
    const msgpack_object *o = calib_mpr_get(r, map, key);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_BIN) { /* the 0.1 form */
        const char *p = bin_at(r, map, key, n * ACCUM_01);
        if (!p)
            return 0;
        for (size_t i = 0; i < n; i++) {
            calib_accum t;
            accum_01(p + ACCUM_01 * i, &t);
            if (!accum_ok(r, &t))
                return calib_mpr_fail(r, "%s: a sum is NaN", key);
            a[i] = t;
        }
        return 1;
    }
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
        return calib_mpr_fail(r, "%s: not an array of %zu accumulators", key, n);
    for (size_t i = 0; i < n; i++)
        if (!calib_accum_load(r, &o->via.array.ptr[i], &a[i]))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ e-processes */

void calib_eproc_save(calib_mpw *w, const calib_eproc *e)
{
    calib_mpw_map(w);
    calib_mpw_key_double(w, "lo", e->lo);
    calib_mpw_key_double(w, "hi", e->hi);
    calib_mpw_key_double(w, "m", e->m);
    calib_mpw_key_double(w, "lambda", e->lambda);
    calib_mpw_key_double(w, "a", e->a);
    calib_mpw_key_double(w, "log_wealth", e->log_wealth);
    calib_mpw_key_double(w, "min_log_wealth", e->min_log_wealth);
    calib_mpw_key_uint(w, "argmin", e->argmin);
    calib_mpw_key_uint(w, "n", e->n);
    calib_mpw_end(w);
}

/* The 0.1 form: seven doubles, then argmin and n (72 bytes). */
enum { EPROC_01 = 72 };

static void eproc_01(const char *p, calib_eproc *e)
{
    double *f[7] = {&e->lo, &e->hi, &e->m, &e->lambda, &e->a, &e->log_wealth,
                    &e->min_log_wealth};
    for (int i = 0; i < 7; i++)
        *f[i] = le_f64(p + 8 * i);
    e->argmin = le_u64(p + 56);
    e->n = le_u64(p + 64);
}

/* One calib_eproc_add can go on with. */
static int eproc_ok(calib_mpr *r, const calib_eproc *t)
{
    if (!(isfinite(t->lo) && isfinite(t->hi) && isfinite(t->m) && t->lo < t->m &&
          t->m < t->hi && isfinite(t->lambda) && isfinite(t->a) && !isnan(t->log_wealth) &&
          !isnan(t->min_log_wealth)))
        return calib_mpr_fail(r, "an e-process is inconsistent");
    return 1;
}

int calib_eproc_load(calib_mpr *r, const msgpack_object *o, calib_eproc *e)
{
    if (r->failed)
        return 0;
    if (!o)
        return calib_mpr_fail(r, "an e-process is missing");
    calib_eproc t;
    if (o->type == MSGPACK_OBJECT_BIN && o->via.bin.size == EPROC_01) {
        eproc_01(o->via.bin.ptr, &t);
    } else if (o->type == MSGPACK_OBJECT_MAP) {
        t.lo = calib_mpr_double(r, o, "lo");
        t.hi = calib_mpr_double(r, o, "hi");
        t.m = calib_mpr_double(r, o, "m");
        t.lambda = calib_mpr_double(r, o, "lambda");
        t.a = calib_mpr_double(r, o, "a");
        t.log_wealth = calib_mpr_double(r, o, "log_wealth");
        t.min_log_wealth = calib_mpr_double(r, o, "min_log_wealth");
        t.argmin = calib_mpr_uint(r, o, "argmin", 0, UINT64_MAX);
        t.n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
        if (r->failed)
            return 0;
    } else {
        return calib_mpr_fail(r, "an e-process is not a map");
    }
    if (!eproc_ok(r, &t))
        return 0;
    *e = t;
    return 1;
}

/* ------------------------------------------------------------------ bins */

void calib_bins_save(calib_mpw *w, const calib_bins *b)
{
    calib_mpw_map(w);
    key_form(w);
    calib_mpw_key_uint(w, "m", b->m);
    calib_mpw_key_uint(w, "n", b->n);
    calib_mpw_key(w, "count");
    calib_uints_save(w, b->count, b->m);
    ksums_save(w, "conf", "conf_c", b->conf, b->m);
    calib_mpw_key(w, "correct");
    calib_uints_save(w, b->correct, b->m);
    calib_mpw_end(w);
}

int calib_bins_load(calib_mpr *r, const msgpack_object *o, calib_bins *b)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "bins: not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    if (calib_mpr_uint(r, o, "m", 0, UINT32_MAX) != b->m && !r->failed)
        return calib_mpr_fail(r, "bins: %u bins expected", b->m);
    uint64_t n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
    if (r->failed)
        return 0;
    size_t m = b->m;
    uint64_t *count = calloc(2 * m + 1, sizeof *count);
    calib_ksum *conf = calloc(m + 1, sizeof *conf);
    int ok = count && conf;
    if (!ok)
        calib_mpr_fail(r, "bins: out of memory");
    ok = ok && calib_uints_load(r, o, "count", count, m) &&
         ksums_load(r, o, "conf", "conf_c", conf, m) &&
         calib_uints_load(r, o, "correct", count + m, m);
    uint64_t sum = 0;
    for (size_t i = 0; ok && i < m; i++) {
        if (count[m + i] > count[i] || !isfinite(conf[i].sum) || count[i] > UINT64_MAX - sum)
            ok = calib_mpr_fail(r, "bins: bin %zu is inconsistent", i);
        sum += count[i];
    }
    if (ok && sum != n)
        ok = calib_mpr_fail(r, "bins: counts add to %llu, not n = %llu",
                            (unsigned long long)sum, (unsigned long long)n);
    if (ok) {
        memcpy(b->count, count, m * sizeof *count);
        memcpy(b->correct, count + m, m * sizeof *count);
        memcpy(b->conf, conf, m * sizeof *conf);
        b->n = n;
    }
    free(count);
    free(conf);
    return ok;
}

void calib_cwbins_save(calib_mpw *w, const calib_cwbins *b)
{
    if (!b->k) {
        calib_mpw_nil(w);
        return;
    }
    size_t cells = (size_t)b->k * b->m;
    calib_mpw_map(w);
    key_form(w);
    calib_mpw_key_uint(w, "k", b->k);
    calib_mpw_key_uint(w, "m", b->m);
    calib_mpw_key_uint(w, "n", b->n);
    calib_mpw_key(w, "count");
    calib_uints_save(w, b->count, cells);
    ksums_save(w, "psum", "psum_c", b->psum, cells);
    calib_mpw_key(w, "hits");
    calib_uints_save(w, b->hits, cells);
    calib_mpw_end(w);
}

int calib_cwbins_load(calib_mpr *r, const msgpack_object *o, calib_cwbins *b)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "class-wise bins: not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    uint64_t k = calib_mpr_uint(r, o, "k", 0, UINT32_MAX),
             m = calib_mpr_uint(r, o, "m", 0, UINT32_MAX);
    if (!r->failed && (k != b->k || m != b->m))
        return calib_mpr_fail(r, "class-wise bins: %u x %u expected", b->k, b->m);
    uint64_t n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
    if (r->failed)
        return 0;
    size_t cells = (size_t)b->k * b->m;
    uint64_t *count = calloc(2 * cells + 1, sizeof *count);
    calib_ksum *psum = calloc(cells + 1, sizeof *psum);
    int ok = count && psum;
    if (!ok)
        calib_mpr_fail(r, "class-wise bins: out of memory");
    ok = ok && calib_uints_load(r, o, "count", count, cells) &&
         ksums_load(r, o, "psum", "psum_c", psum, cells) &&
         calib_uints_load(r, o, "hits", count + cells, cells);
    for (size_t i = 0; ok && i < cells; i++)
        if (count[cells + i] > count[i] || !isfinite(psum[i].sum))
            ok = calib_mpr_fail(r, "class-wise bins: cell %zu is inconsistent", i);
    if (ok) {
        memcpy(b->count, count, cells * sizeof *count);
        memcpy(b->hits, count + cells, cells * sizeof *count);
        memcpy(b->psum, psum, cells * sizeof *psum);
        b->n = n;
    }
    free(count);
    free(psum);
    return ok;
}

/* ------------------------------------------------------------------ settings */

/* A structure's settings as numbers, stored as an array and compared with
 * the running configuration's at restore: a section is restored only into
 * the same settings. */
enum { CFG_NUMBERS = 8 };

static void key_numbers(calib_mpw *w, const double v[CFG_NUMBERS])
{
    calib_mpw_key(w, "cfg");
    calib_doubles_save(w, v, CFG_NUMBERS);
}

/* 1 when the stored settings (key "cfg" of o) are v, 0 when not or on
 * failure. */
static int numbers_match(calib_mpr *r, const msgpack_object *o, const double v[CFG_NUMBERS])
{
    double s[CFG_NUMBERS];
    if (!calib_doubles_load(r, o, "cfg", s, CFG_NUMBERS))
        return 0;
    for (int i = 0; i < CFG_NUMBERS; i++)
        if (s[i] != v[i])
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ window */

static void window_numbers(const calib_window_cfg *c, double v[CFG_NUMBERS])
{
    const double n[CFG_NUMBERS] = {c->kind, c->span, c->panes, c->nstat,
                                   c->top_bins, c->top_sets, c->cw_k, c->cw_bins};
    memcpy(v, n, sizeof n);
}

void calib_window_save(calib_mpw *w, const calib_window *win)
{
    const calib_window_cfg *c = &win->cfg;
    uint32_t sets = c->top_sets ? c->top_sets : 1;
    double v[CFG_NUMBERS];
    window_numbers(c, v);
    calib_mpw_map(w);
    key_form(w);
    key_numbers(w, v);
    calib_mpw_key(w, "head");
    calib_mpw_int(w, win->head);
    calib_mpw_key_uint(w, "clock", win->clock);
    calib_mpw_key(w, "panes");
    calib_mpw_array(w);
    for (uint32_t i = 0; i < c->panes; i++) {
        const calib_pane *p = &win->pane[i];
        calib_mpw_map(w);
        calib_mpw_key(w, "index");
        calib_mpw_int(w, p->index);
        calib_mpw_key(w, "stat");
        calib_accums_save(w, p->stat, c->nstat);
        calib_mpw_key(w, "top");
        calib_mpw_array(w);
        for (uint32_t s = 0; c->top_bins && s < sets; s++)
            calib_bins_save(w, &p->top[s]);
        calib_mpw_end(w);
        calib_mpw_key(w, "cw");
        calib_cwbins_save(w, &p->cw);
        calib_mpw_end(w);
    }
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* The panes are read into win's own: a failure part-way leaves some read
 * (the caller then drops the model's whole state, as for any failure). */
int calib_window_load(calib_mpr *r, const msgpack_object *o, calib_window *win)
{
    const calib_window_cfg *c = &win->cfg;
    double v[CFG_NUMBERS];
    window_numbers(c, v);
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "window: not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    int same = numbers_match(r, o, v);
    if (r->failed)
        return 0;
    if (!same)
        return CALIB_LOAD_OTHER;
    uint32_t sets = c->top_bins ? (c->top_sets ? c->top_sets : 1) : 0;
    int64_t head = calib_mpr_int(r, o, "head");
    uint64_t clock = calib_mpr_uint(r, o, "clock", 0, UINT64_MAX);
    const msgpack_object *panes = calib_mpr_array(r, o, "panes", c->panes);
    if (r->failed)
        return 0;
    if (head < -1)
        return calib_mpr_fail(r, "window: head %lld", (long long)head);
    for (uint32_t i = 0; i < c->panes; i++) {
        const msgpack_object *po = &panes->via.array.ptr[i];
        calib_pane *p = &win->pane[i];
        int64_t index = calib_mpr_int(r, po, "index");
        const msgpack_object *top = calib_mpr_array(r, po, "top", sets);
        const msgpack_object *cw = calib_mpr_get(r, po, "cw");
        if (r->failed)
            return 0;
        /* a pane holds index i mod P, up to head */
        if (index != INT64_MIN &&
            (index < 0 || index > head || (uint64_t)index % c->panes != i))
            return calib_mpr_fail(r, "window: pane %u holds index %lld (head %lld)", i,
                                  (long long)index, (long long)head);
        p->index = index;
        if (!calib_accums_load(r, po, "stat", p->stat, c->nstat))
            return 0;
        for (uint32_t s = 0; s < sets; s++)
            if (calib_bins_load(r, &top->via.array.ptr[s], &p->top[s]) != CALIB_LOAD_OK)
                return calib_mpr_fail(r, "window: pane %u's bins", i);
        if (c->cw_k ? calib_cwbins_load(r, cw, &p->cw) != CALIB_LOAD_OK
                    : cw->type != MSGPACK_OBJECT_NIL)
            return calib_mpr_fail(r, "window: class-wise bins");
        /* older than the window: earlier calibds kept such panes (summed
         * by no one); they hold nothing of the window */
        if (index != INT64_MIN && head - index >= (int64_t)c->panes)
            calib_pane_reset(p);
    }
    win->head = head;
    win->clock = clock;
    return CALIB_LOAD_OK;
}

/* ------------------------------------------------------------------ stores */

void calib_store_save(calib_mpw *w, const calib_store *s, size_t bound)
{
    calib_mpw_key_uint(w, "width", s->width);
    calib_mpw_key_uint(w, "cap", s->cap);
    calib_mpw_key_uint(w, "bound", bound);
    calib_mpw_key_uint(w, "len", s->len);
    /* len records of width + 2 doubles: x..., y, t */
    calib_mpw_key(w, "data");
    calib_mpw_bin(w, s->data, s->len * (s->width + 2) * sizeof(double));
}

void calib_store_caps(calib_mpr *r, const msgpack_object *o, uint64_t *cap, uint64_t *bound)
{
    *cap = calib_mpr_uint(r, o, "cap", 0, UINT64_MAX);
    *bound = calib_mpr_find(o, "bound") ? calib_mpr_uint(r, o, "bound", 0, UINT64_MAX) : *cap;
}

/* n items of `size` bytes from src, where the oldest is item `first`,
 * into dst oldest first. */
static void copy_oldest_first(void *dst, const char *src, size_t n, size_t first, size_t size)
{
    if (!n)
        return;
    memcpy(dst, src + first * size, (n - first) * size);
    if (first)
        memcpy((char *)dst + (n - first) * size, src, first * size);
}

long calib_store_load(calib_mpr *r, const msgpack_object *o, calib_store *s, size_t cap,
                      size_t first)
{
    uint64_t width = calib_mpr_uint(r, o, "width", 0, UINT64_MAX);
    uint64_t len = calib_mpr_uint(r, o, "len", 0, cap);
    if (r->failed)
        return -1;
    if (width != s->width)
        return calib_mpr_fail(r, "records of width %llu, not %zu", (unsigned long long)width,
                              s->width), -1;
    if (first && first >= len)
        return calib_mpr_fail(r, "the oldest record at slot %zu of %llu", first,
                              (unsigned long long)len), -1;
    size_t rec = (s->width + 2) * sizeof(double);
    const char *data = bin_at(r, o, "data", (size_t)len * rec);
    if (!data)
        return -1;
    if (calib_store_reserve(s, (size_t)len) != CALIB_OK)
        return -2;
    copy_oldest_first(s->data, data, (size_t)len, first, rec);
    s->len = (size_t)len;
    return (long)len;
}

void calib_reservoir_save(calib_mpw *w, const calib_reservoir *v, size_t bound)
{
    calib_mpw_map(w);
    key_form(w);
    calib_store_save(w, &v->s, bound);
    calib_mpw_key_uint(w, "seen", v->seen);
    calib_mpw_key_uint(w, "skip", v->skip);
    calib_mpw_key_double(w, "w", v->w);
    calib_mpw_key(w, "rng");
    calib_uints_save(w, v->rng.s, 4);
    calib_mpw_end(w);
}

int calib_reservoir_load(calib_mpr *r, const msgpack_object *o, calib_reservoir *v,
                         size_t cap)
{
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    uint64_t seen = calib_mpr_uint(r, o, "seen", 0, UINT64_MAX);
    uint64_t skip = calib_mpr_uint(r, o, "skip", 0, UINT64_MAX);
    double w = calib_mpr_double(r, o, "w");
    uint64_t rng[4];
    calib_uints_load(r, o, "rng", rng, 4);
    if (r->failed)
        return 0;
    /* the room first: refused, v is as it was */
    if (cap < v->s.cap && (calib_store_reserve(&v->s, cap) != CALIB_OK ||
                           calib_store_limit(&v->s, cap) != CALIB_OK))
        return CALIB_LOAD_NO_ROOM;
    long len = calib_store_load(r, o, &v->s, v->s.cap, 0);
    if (len < 0)
        return len == -2 ? CALIB_LOAD_NO_ROOM : 0;
    if ((uint64_t)len != (seen < v->s.cap ? seen : v->s.cap) || !(w > 0 && w <= 1) ||
        !(rng[0] | rng[1] | rng[2] | rng[3]))
        return calib_mpr_fail(r, "reservoir: %ld records after %llu offered, W %g", len,
                              (unsigned long long)seen, w);
    v->seen = seen;
    v->skip = skip;
    v->w = w;
    memcpy(v->rng.s, rng, sizeof rng);
    return CALIB_LOAD_OK;
}

/* ------------------------------------------------------------------ join */

static void pack_id(calib_mpw *w, const calib_id *id)
{
    if (id->kind == CALIB_ID_U64)
        calib_mpw_uint(w, id->v.u64);
    else
        calib_mpw_bin(w, id->v.str, id->len);
}

typedef struct item_writer {
    calib_mpw *w;
    size_t width;
} item_writer;

static int write_item(void *arg, const calib_join_item *it)
{
    item_writer *iw = arg;
    calib_mpw *w = iw->w;
    calib_mpw_array(w);
    calib_mpw_uint(w, (uint64_t)it->kind);
    pack_id(w, &it->id);
    calib_mpw_double(w, it->arrived);
    calib_mpw_double(w, it->ts);
    if (it->kind == CALIB_JOIN_PRED)
        calib_mpw_bin(w, it->x, iw->width * sizeof(double));
    else
        calib_mpw_double(w, it->y);
    calib_mpw_end(w);
    return 0;
}

static int write_done(void *arg, const calib_id *id, double arrived)
{
    item_writer *iw = arg;
    calib_mpw_array(iw->w);
    pack_id(iw->w, id);
    calib_mpw_double(iw->w, arrived);
    calib_mpw_end(iw->w);
    return 0;
}

/* The counters, by name, in the join's fields. */
#define JOIN_COUNTERS 9
static const char *const join_keys[JOIN_COUNTERS] = {
    "joined", "evicted", "expired_preds", "expired_labels", "duplicate_preds",
    "duplicate_labels", "forgotten", "sampled_out_preds", "sampled_out_labels"};

static void join_counters(calib_join *j, uint64_t *c[JOIN_COUNTERS])
{
    uint64_t *p[JOIN_COUNTERS] = {&j->joined, &j->evicted, &j->expired_preds,
                                  &j->expired_labels, &j->duplicate_preds,
                                  &j->duplicate_labels, &j->forgotten,
                                  &j->sampled_out_preds, &j->sampled_out_labels};
    memcpy(c, p, sizeof p);
}

void calib_join_save(calib_mpw *w, const calib_join *j)
{
    item_writer iw = {w, j->cfg.width};
    uint64_t *c[JOIN_COUNTERS];
    join_counters((calib_join *)j, c);
    calib_mpw_map(w);
    key_form(w);
    calib_mpw_key_uint(w, "width", j->cfg.width);
    for (int i = 0; i < JOIN_COUNTERS; i++)
        calib_mpw_key_uint(w, join_keys[i], *c[i]);
    /* the sample over capacity */
    calib_join_sampling sm;
    calib_join_sampling_get(j, &sm);
    calib_mpw_key_uint(w, "sample", sm.sample);
    calib_mpw_key_uint(w, "label_sample", sm.label_sample);
    calib_mpw_key_double(w, "label_until", sm.label_until);
    calib_mpw_key_uint(w, "arrivals", sm.arrivals);
    /* [kind, id, arrived, ts, y or outputs], oldest first */
    calib_mpw_key(w, "items");
    calib_mpw_array(w);
    calib_join_each(j, write_item, NULL, &iw);
    calib_mpw_end(w);
    /* [id, arrived], oldest first */
    calib_mpw_key(w, "done");
    calib_mpw_array(w);
    calib_join_each(j, NULL, write_done, &iw);
    calib_mpw_end(w);
    calib_mpw_end(w);
}

/* An id: an unsigned integer or a binary of 1..CALIB_ID_MAX bytes. */
static int read_id(calib_mpr *r, const msgpack_object *o, calib_id *id)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        calib_id_u64(id, o->via.u64);
        return 1;
    }
    if (o->type == MSGPACK_OBJECT_BIN && calib_id_str(id, o->via.bin.ptr, o->via.bin.size) == 0)
        return 1;
    return calib_mpr_fail(r, "join: an id is neither an integer nor 1 to %d bytes",
                          CALIB_ID_MAX);
}

int calib_join_load(calib_mpr *r, const msgpack_object *o, calib_join *j, double shift,
                    double *x, size_t *lost)
{
    return calib_join_load_tags(r, o, j, shift, x, j->cfg.width, 0, lost);
}

int calib_join_load_tags(calib_mpr *r, const msgpack_object *o, calib_join *j, double shift,
                         double *x, size_t keep, size_t tags, size_t *lost)
{
    *lost = 0;
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "join: not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    uint64_t width = calib_mpr_uint(r, o, "width", 0, CALIB_PROTO_MAX_K + 1);
    const msgpack_object *items = calib_mpr_array(r, o, "items", UINT32_MAX);
    const msgpack_object *done = calib_mpr_array(r, o, "done", UINT32_MAX);
    uint64_t c[JOIN_COUNTERS] = {0};
    /* the sampled-out counters are absent before the sample: 0 */
    for (int i = 0; i < JOIN_COUNTERS; i++)
        if (i < 7 || calib_mpr_find(o, join_keys[i]))
            c[i] = calib_mpr_uint(r, o, join_keys[i], 0, UINT64_MAX);
    if (r->failed)
        return 0;
    for (uint32_t i = 0; i < items->via.array.size; i++) {
        const msgpack_object *a = &items->via.array.ptr[i];
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 5)
            return calib_mpr_fail(r, "join: item %u is not [kind, id, arrived, ts, y or x]", i);
        const msgpack_object *f = a->via.array.ptr;
        calib_join_item it = {0};
        if (f[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            (f[0].via.u64 != CALIB_JOIN_PRED && f[0].via.u64 != CALIB_JOIN_LABEL) ||
            !read_id(r, &f[1], &it.id) || !calib_mpr_number(&f[2], &it.arrived) ||
            !calib_mpr_number(&f[3], &it.ts) || !isfinite(it.arrived))
            return calib_mpr_fail(r, "join: item %u is malformed", i);
        it.kind = (int)f[0].via.u64;
        it.arrived += shift;
        if (it.kind == CALIB_JOIN_LABEL) {
            if (!calib_mpr_number(&f[4], &it.y))
                return calib_mpr_fail(r, "join: label %u has no y", i);
        } else {
            if (f[4].type != MSGPACK_OBJECT_BIN || f[4].via.bin.size != width * sizeof(double))
                return calib_mpr_fail(r, "join: prediction %u has not %llu outputs", i,
                                      (unsigned long long)width);
            size_t have = j->cfg.width;
            if (!x || (width != have && (width < keep || have < keep))) {
                ++*lost; /* another shape: these cannot be kept */
                continue;
            }
            /* the outputs, then as many of the tags as both have and the
             * caller takes, 0 beyond */
            size_t copy = width < have ? (size_t)width : have;
            if (copy > keep + tags)
                copy = keep + tags;
            memcpy(x, f[4].via.bin.ptr, copy * sizeof *x);
            for (size_t t = copy; t < have; t++)
                x[t] = 0;
            it.x = x;
        }
        if (calib_join_put(j, &it) != CALIB_OK)
            return calib_mpr_fail(r, "join: item %u is out of order or twice", i);
    }
    for (uint32_t i = 0; i < done->via.array.size; i++) {
        const msgpack_object *a = &done->via.array.ptr[i];
        calib_id id;
        double arrived;
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != 2 ||
            !read_id(r, &a->via.array.ptr[0], &id) ||
            !calib_mpr_number(&a->via.array.ptr[1], &arrived) ||
            calib_join_put_done(j, &id, arrived + shift) != CALIB_OK)
            return calib_mpr_fail(r, "join: joined id %u is malformed, out of order or twice",
                                  i);
    }
    uint64_t *dst[JOIN_COUNTERS];
    join_counters(j, dst);
    uint64_t evicted = j->evicted; /* the put's evictions count too */
    for (int i = 0; i < JOIN_COUNTERS; i++)
        *dst[i] = c[i];
    j->evicted += evicted;
    if (calib_mpr_find(o, "sample")) { /* absent from files before the sample */
        calib_join_sampling sm;
        sm.sample = (uint32_t)calib_mpr_uint(r, o, "sample", 0, UINT32_MAX);
        sm.label_sample = (uint32_t)calib_mpr_uint(r, o, "label_sample", 0, UINT32_MAX);
        sm.label_until = calib_mpr_double(r, o, "label_until") + shift;
        sm.arrivals = calib_mpr_uint(r, o, "arrivals", 0, UINT64_MAX);
        if (r->failed)
            return 0;
        if (calib_join_sampling_set(j, &sm) != CALIB_OK)
            return calib_mpr_fail(r, "join: the sample (label sample above it, or no time)");
    }
    return CALIB_LOAD_OK;
}

/* ------------------------------------------------------------------ drift */

static void drift_numbers(const calib_drift_cfg *c, double v[CFG_NUMBERS])
{
    const double n[CFG_NUMBERS] = {c->kind, c->lo, c->hi, c->alpha, c->min_effect, c->quantile,
                                   (double)c->reference, (double)c->restart};
    memcpy(v, n, sizeof n);
}

static void pair_save(calib_mpw *w, const calib_drift_pair *p)
{
    calib_mpw_map(w);
    calib_mpw_key_uint(w, "start", p->start);
    calib_mpw_key_uint(w, "pos", p->pos);
    calib_mpw_key_uint(w, "budget", p->budget);
    calib_mpw_key_uint(w, "left", p->left);
    calib_mpw_key_uint(w, "phase", p->phase);
    calib_mpw_key_double(w, "log_w", p->log_w);
    calib_mpw_key_double(w, "lambda", p->lambda);
    calib_mpw_key_double(w, "a", p->a);
    calib_mpw_key_double(w, "log_wealth", p->log_wealth);
    calib_mpw_key_double(w, "min_log_wealth", p->min_log_wealth);
    calib_mpw_key_uint(w, "argmin", p->argmin);
    calib_mpw_key_uint(w, "n", p->n);
    calib_mpw_key(w, "ref");
    calib_accum_save(w, &p->ref);
    calib_mpw_end(w);
}

static int pair_load(calib_mpr *r, const msgpack_object *o, calib_drift_pair *p)
{
    p->start = calib_mpr_uint(r, o, "start", 0, UINT64_MAX);
    p->pos = calib_mpr_uint(r, o, "pos", 0, UINT64_MAX);
    p->budget = calib_mpr_uint(r, o, "budget", 0, UINT64_MAX);
    p->left = calib_mpr_uint(r, o, "left", 0, UINT64_MAX);
    p->phase = (unsigned)calib_mpr_uint(r, o, "phase", 0, UINT32_MAX);
    p->log_w = calib_mpr_double(r, o, "log_w");
    p->lambda = calib_mpr_double(r, o, "lambda");
    p->a = calib_mpr_double(r, o, "a");
    p->log_wealth = calib_mpr_double(r, o, "log_wealth");
    p->min_log_wealth = calib_mpr_double(r, o, "min_log_wealth");
    p->argmin = calib_mpr_uint(r, o, "argmin", 0, UINT64_MAX);
    p->n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
    const msgpack_object *ref = calib_mpr_get(r, o, "ref");
    return !r->failed && calib_accum_load(r, ref, &p->ref);
}

/* The 0.1 form of a pair (136 bytes): start, pos, budget, left, phase
 * (4 bytes and 4 of padding), log_w, lambda, a, log_wealth,
 * min_log_wealth, argmin, n, and its accumulator. */
enum { PAIR_01 = 136 };

static void pair_01(const char *p, calib_drift_pair *q)
{
    uint32_t phase;
    q->start = le_u64(p);
    q->pos = le_u64(p + 8);
    q->budget = le_u64(p + 16);
    q->left = le_u64(p + 24);
    memcpy(&phase, p + 32, 4);
    q->phase = phase;
    q->log_w = le_f64(p + 40);
    q->lambda = le_f64(p + 48);
    q->a = le_f64(p + 56);
    q->log_wealth = le_f64(p + 64);
    q->min_log_wealth = le_f64(p + 72);
    q->argmin = le_u64(p + 80);
    q->n = le_u64(p + 88);
    accum_01(p + 96, &q->ref);
}

void calib_drift_save(calib_mpw *w, const calib_drift *d)
{
    const calib_drift_cfg *c = &d->cfg;
    double v[CFG_NUMBERS];
    drift_numbers(c, v);
    calib_mpw_map(w);
    key_form(w);
    key_numbers(w, v);
    calib_mpw_key_uint(w, "state", (uint64_t)d->state);
    calib_mpw_key(w, "ref");
    calib_accum_save(w, &d->ref);
    calib_mpw_key(w, "ref_x"); /* EXCEED: its reference sample */
    calib_mpw_bin(w, d->ref_x, d->ref_x ? c->reference * sizeof(double) : 0);
    calib_mpw_key_double(w, "threshold", d->threshold);
    calib_mpw_key_double(w, "null_mean", d->null_mean);
    calib_mpw_key(w, "bank"); /* EXCEED: the e-processes kept */
    calib_mpw_array(w);
    for (unsigned i = 0; i < d->nbank; i++)
        calib_eproc_save(w, &d->bank[i]);
    calib_mpw_end(w);
    calib_mpw_key(w, "log_w");
    calib_doubles_save(w, d->log_w, d->nbank);
    calib_mpw_key(w, "start");
    calib_uints_save(w, d->start, d->nbank);
    calib_mpw_key_uint(w, "started", d->started);
    calib_mpw_key(w, "watch");
    calib_accum_save(w, &d->watch);
    calib_mpw_key_uint(w, "n", d->n);
    calib_mpw_key_uint(w, "alarm_at", d->alarm_at);
    calib_mpw_key_uint(w, "change_at", d->change_at);
    calib_mpw_key_uint(w, "resets", d->resets);
    /* MEAN: its ring of 16-bit scores, its pairs, every score's level */
    calib_mpw_key(w, "ring");
    calib_mpw_bin(w, d->ring, d->ring ? d->ring_len * sizeof(uint16_t) : 0);
    calib_mpw_key_uint(w, "ring_n", d->ring_n);
    calib_mpw_key(w, "pair");
    calib_mpw_array(w);
    for (unsigned i = 0; i < d->npair; i++)
        pair_save(w, &d->pair[i]);
    calib_mpw_end(w);
    calib_mpw_key(w, "all");
    calib_accum_save(w, &d->all);
    calib_mpw_end(w);
}

/* The bank, its weights and starts: arrays of nbank (the 0.1 form:
 * binaries of CALIB_DRIFT_BANK, nbank apart). */
static int bank_load(calib_mpr *r, const msgpack_object *o, calib_drift *t)
{
    const msgpack_object *bank = calib_mpr_get(r, o, "bank");
    if (!bank)
        return 0;
    if (bank->type == MSGPACK_OBJECT_BIN) {
        const char *b = bin_at(r, o, "bank", CALIB_DRIFT_BANK * EPROC_01);
        t->nbank = (unsigned)calib_mpr_uint(r, o, "nbank", 0, CALIB_DRIFT_BANK);
        if (!b || r->failed)
            return 0;
        for (unsigned i = 0; i < CALIB_DRIFT_BANK; i++) {
            eproc_01(b + EPROC_01 * i, &t->bank[i]);
            if (i < t->nbank && !eproc_ok(r, &t->bank[i]))
                return 0;
        }
        return calib_doubles_load(r, o, "log_w", t->log_w, CALIB_DRIFT_BANK) &&
               calib_uints_load(r, o, "start", t->start, CALIB_DRIFT_BANK);
    }
    if (bank->type != MSGPACK_OBJECT_ARRAY || bank->via.array.size > CALIB_DRIFT_BANK)
        return calib_mpr_fail(r, "bank: not an array of at most %d", CALIB_DRIFT_BANK);
    t->nbank = bank->via.array.size;
    for (unsigned i = 0; i < t->nbank; i++)
        if (!calib_eproc_load(r, &bank->via.array.ptr[i], &t->bank[i]))
            return 0;
    return calib_doubles_load(r, o, "log_w", t->log_w, t->nbank) &&
           calib_uints_load(r, o, "start", t->start, t->nbank);
}

static int pairs_load(calib_mpr *r, const msgpack_object *o, calib_drift *t)
{
    const msgpack_object *pair = calib_mpr_get(r, o, "pair");
    if (!pair)
        return 0;
    if (pair->type == MSGPACK_OBJECT_BIN) {
        const char *b = bin_at(r, o, "pair", CALIB_DRIFT_BANK * PAIR_01);
        t->npair = (unsigned)calib_mpr_uint(r, o, "npair", 0, CALIB_DRIFT_BANK);
        if (!b || r->failed)
            return 0;
        for (unsigned i = 0; i < CALIB_DRIFT_BANK; i++) {
            pair_01(b + PAIR_01 * i, &t->pair[i]);
            if (i < t->npair && !accum_ok(r, &t->pair[i].ref))
                return 0;
        }
        return 1;
    }
    if (pair->type != MSGPACK_OBJECT_ARRAY || pair->via.array.size > CALIB_DRIFT_BANK)
        return calib_mpr_fail(r, "pair: not an array of at most %d", CALIB_DRIFT_BANK);
    t->npair = pair->via.array.size;
    for (unsigned i = 0; i < t->npair; i++)
        if (!pair_load(r, &pair->via.array.ptr[i], &t->pair[i]))
            return 0;
    return 1;
}

int calib_drift_settings(calib_mpr *r, const msgpack_object *o, const calib_drift *d)
{
    double v[CFG_NUMBERS];
    drift_numbers(&d->cfg, v);
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "drift: not a map");
    return numbers_match(r, o, v);
}

int calib_drift_load(calib_mpr *r, const msgpack_object *o, calib_drift *d)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "drift: not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    int same = calib_drift_settings(r, o, d);
    if (r->failed)
        return 0;
    if (!same)
        return CALIB_LOAD_OTHER;
    calib_drift t = *d; /* the scalars first, into a copy */
    t.state = (int)calib_mpr_uint(r, o, "state", CALIB_DRIFT_REFERENCE, CALIB_DRIFT_ALARM);
    calib_accum_load(r, calib_mpr_get(r, o, "ref"), &t.ref);
    t.threshold = calib_mpr_double(r, o, "threshold");
    t.null_mean = calib_mpr_double(r, o, "null_mean");
    bank_load(r, o, &t);
    t.started = calib_mpr_uint(r, o, "started", 0, UINT64_MAX);
    calib_accum_load(r, calib_mpr_get(r, o, "watch"), &t.watch);
    t.n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
    t.alarm_at = calib_mpr_uint(r, o, "alarm_at", 0, UINT64_MAX);
    t.change_at = calib_mpr_uint(r, o, "change_at", 0, UINT64_MAX);
    t.resets = calib_mpr_uint(r, o, "resets", 0, UINT64_MAX);
    /* MEAN's pairs, ring and level: absent from files before them, which
     * leave them as calib_drift_init did (calib_drift(3)) */
    int paired = calib_mpr_find(o, "pair") != NULL;
    if (paired && !r->failed) {
        pairs_load(r, o, &t);
        t.ring_n = calib_mpr_uint(r, o, "ring_n", 0, d->ring_len);
        calib_accum_load(r, calib_mpr_get(r, o, "all"), &t.all);
    }
    if (r->failed)
        return 0;
    if (calib_drift_check(&t) != CALIB_OK)
        return calib_mpr_fail(r, "drift: its state is inconsistent");
    for (unsigned i = 0; i < t.nbank; i++)
        if (isnan(t.log_w[i]) || t.start[i] > t.n)
            return calib_mpr_fail(r, "drift: e-process %u is inconsistent", i);
    if (t.state != CALIB_DRIFT_REFERENCE && isnan(t.null_mean))
        return calib_mpr_fail(r, "drift: watching without a null mean");
    /* EXCEED keeps its reference sample, MEAN its ring: d's own arrays */
    if (!calib_mpr_bin(r, o, "ref_x", d->ref_x, d->ref_x ? d->cfg.reference * sizeof(double) : 0))
        return 0;
    if (paired && !calib_mpr_bin(r, o, "ring", d->ring, d->ring ? d->ring_len * sizeof(uint16_t) : 0))
        return 0;
    t.ref_x = d->ref_x;
    *d = t;
    return CALIB_LOAD_OK;
}

/* ------------------------------------------------------------------ gate */

void calib_gate_save(calib_mpw *w, const calib_gate *g)
{
    calib_mpw_map(w);
    key_form(w);
    calib_mpw_key_double(w, "alpha", g->cfg.alpha);
    calib_mpw_key_double(w, "min_improvement", g->cfg.min_improvement);
    calib_mpw_key_double(w, "lo", g->cfg.lo);
    calib_mpw_key_double(w, "hi", g->cfg.hi);
    calib_mpw_key_uint(w, "max_samples", g->cfg.max_samples);
    calib_mpw_key_uint(w, "state", (uint64_t)g->state);
    calib_mpw_key(w, "e");
    calib_eproc_save(w, &g->e);
    calib_mpw_key(w, "diff");
    calib_accum_save(w, &g->diff);
    calib_mpw_key(w, "current");
    calib_accum_save(w, &g->current);
    calib_mpw_key(w, "candidate");
    calib_accum_save(w, &g->candidate);
    calib_mpw_key_uint(w, "pairs", g->pairs);
    calib_mpw_end(w);
}

int calib_gate_load(calib_mpr *r, const msgpack_object *o, calib_gate *g)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "gate: not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    calib_gate_cfg c = {.alpha = calib_mpr_finite(r, o, "alpha"),
                        .min_improvement = calib_mpr_finite(r, o, "min_improvement"),
                        .lo = calib_mpr_finite(r, o, "lo"), .hi = calib_mpr_finite(r, o, "hi"),
                        .max_samples = calib_mpr_uint(r, o, "max_samples", 1, UINT64_MAX)};
    calib_gate t;
    if (r->failed || calib_gate_init(&t, &c) != CALIB_OK)
        return calib_mpr_fail(r, "gate: its configuration is refused");
    /* decided, too: a state can be saved between a gate's decision and the
     * step that acts on it */
    t.state = (int)calib_mpr_uint(r, o, "state", CALIB_GATE_RUNNING, CALIB_GATE_FAILED);
    calib_eproc_load(r, calib_mpr_get(r, o, "e"), &t.e);
    calib_accum_load(r, calib_mpr_get(r, o, "diff"), &t.diff);
    calib_accum_load(r, calib_mpr_get(r, o, "current"), &t.current);
    calib_accum_load(r, calib_mpr_get(r, o, "candidate"), &t.candidate);
    t.pairs = calib_mpr_uint(r, o, "pairs", 0, c.max_samples);
    if (r->failed)
        return 0;
    *g = t;
    return CALIB_LOAD_OK;
}

/* ------------------------------------------------------------------ confidence sequences */

/* its configuration, the scalars and the kept candidates' capitals; the
 * rest is derived (calib_cs(3)) */
void calib_cs_save(calib_mpw *w, const calib_cs *cs)
{
    calib_mpw_map(w);
    key_form(w);
    calib_mpw_key_double(w, "alpha", cs->alpha);
    calib_mpw_key_uint(w, "grid", cs->grid);
    calib_mpw_key_uint(w, "gsize", cs->gsize);
    calib_mpw_key_uint(w, "gbase", cs->gbase);
    calib_mpw_key_uint(w, "gstride", cs->gstride);
    calib_mpw_key_uint(w, "first", cs->first);
    calib_mpw_key_uint(w, "last", cs->last);
    uint64_t flags = (cs->low_out ? 1u : 0u) | (cs->high_out ? 2u : 0u) | (cs->empty ? 4u : 0u);
    calib_mpw_key_uint(w, "flags", flags);
    calib_mpw_key_uint(w, "n", cs->n);
    calib_mpw_key_uint(w, "clamped", cs->clamped);
    calib_mpw_key_uint(w, "refines", cs->refines);
    calib_mpw_key_double(w, "sum", cs->sum);
    calib_mpw_key_double(w, "sq", cs->sq);
    calib_mpw_key_double(w, "fold_bits", cs->fold_bits);
    /* lp, pp, ap, qp, lm, pm, am, qm of the kept candidates: binaries of
     * last - first doubles */
    const double *arr[8] = {cs->lp, cs->pp, cs->ap, cs->qp, cs->lm, cs->pm, cs->am, cs->qm};
    calib_mpw_key(w, "capital");
    calib_mpw_array(w);
    for (int i = 0; i < 8; i++)
        calib_mpw_bin(w, arr[i] + cs->first, (cs->last - cs->first) * sizeof(double));
    calib_mpw_end(w);
    calib_mpw_end(w);
}

int calib_cs_load(calib_mpr *r, const msgpack_object *o, calib_cs *cs)
{
    if (!o || o->type != MSGPACK_OBJECT_MAP)
        return calib_mpr_fail(r, "a confidence sequence is not a map");
    if (!form_known(o))
        return CALIB_LOAD_LATER;
    double alpha = calib_mpr_finite(r, o, "alpha");
    uint64_t grid = calib_mpr_uint(r, o, "grid", 0, UINT32_MAX);
    const msgpack_object *cap = calib_mpr_array(r, o, "capital", 8);
    if (r->failed)
        return 0;
    if (alpha != cs->alpha || grid != cs->grid)
        return CALIB_LOAD_OTHER;
    calib_cs t = *cs; /* the arrays are cs's own: written only once checked */
    t.gsize = (uint32_t)calib_mpr_uint(r, o, "gsize", 1, grid);
    t.gbase = calib_mpr_uint(r, o, "gbase", 0, UINT64_MAX);
    t.gstride = calib_mpr_uint(r, o, "gstride", 1, UINT64_MAX);
    t.first = (uint32_t)calib_mpr_uint(r, o, "first", 0, grid);
    t.last = (uint32_t)calib_mpr_uint(r, o, "last", 0, grid);
    uint64_t flags = calib_mpr_uint(r, o, "flags", 0, 7);
    t.n = calib_mpr_uint(r, o, "n", 0, UINT64_MAX);
    t.clamped = calib_mpr_uint(r, o, "clamped", 0, t.n);
    t.refines = calib_mpr_uint(r, o, "refines", 0, UINT64_MAX);
    t.sum = calib_mpr_finite(r, o, "sum");
    t.sq = calib_mpr_finite(r, o, "sq");
    t.fold_bits = calib_mpr_finite(r, o, "fold_bits");
    if (r->failed)
        return 0;
    size_t len = t.first < t.last ? (t.last - t.first) * sizeof(double) : 0;
    if (!len)
        return calib_mpr_fail(r, "a confidence sequence keeps no candidate");
    for (int i = 0; i < 8; i++) {
        const msgpack_object *b = &cap->via.array.ptr[i];
        if (b->type != MSGPACK_OBJECT_BIN || b->via.bin.size != len)
            return calib_mpr_fail(r, "a confidence sequence's capitals: %zu bytes expected",
                                  len);
    }
    t.low_out = !!(flags & 1);
    t.high_out = !!(flags & 2);
    t.empty = !!(flags & 4);
    double *arr[8] = {t.lp, t.pp, t.ap, t.qp, t.lm, t.pm, t.am, t.qm};
    for (int i = 0; i < 8; i++)
        memcpy(arr[i] + t.first, cap->via.array.ptr[i].via.bin.ptr, len);
    *cs = t;
    if (calib_cs_restore(cs) != CALIB_OK) /* it has reset cs */
        return CALIB_LOAD_REFUSED;
    return CALIB_LOAD_OK;
}
