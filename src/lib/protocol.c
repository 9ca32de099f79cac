/*
 * protocol.c — the pure decoder of calibd's wire protocol v1.
 *
 * Decoding is two passes. calib_proto_scan() first walks the raw bytes
 * without allocating, because msgpack_unpack_next() allocates every array and
 * map's declared count up front: a 6-byte payload declaring 2^32 elements
 * would otherwise ask for 100 GB. Once the walk has proved that every
 * declared element exists, msgpack-c's allocations are bounded by a small
 * multiple of the payload length, and its nesting limit cannot be hit.
 * Then the map is read into per-column views (bins, arrays, numbers) whose
 * shapes and types are checked once; calib_msg_record() converts one record
 * to doubles and applies the value checks of libcalib.
 */
#include <math.h>
#include <string.h>

#include "calib/protocol.h"
#include "vec4.h"

/* Bins are IEEE 754 binary32 / binary64; their bytes are assembled into
 * integers by shifts (any host byte order), then copied into the float. */
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8,
               "protocol bins need 4-byte float and 8-byte double");

enum calib_col_kind {
    CALIB_COL_NONE = 0, /* absent */
    CALIB_COL_SCALAR,   /* one number for the whole message (m->ts) */
    CALIB_COL_BIN,      /* little-endian float32/float64, row-major */
    CALIB_COL_FLAT,     /* obj[i * width + j]: numbers (or ids) */
    CALIB_COL_NESTED,   /* obj[i].via.array.ptr[j]: arrays of numbers */
};

/* ------------------------------------------------------------------ names */

static const char *const reject_names[CALIB_REJ_COUNT] = {
    [CALIB_REJ_NONE] = "none",
    [CALIB_REJ_BAD_TOPIC] = "bad_topic",
    [CALIB_REJ_BAD_MSGPACK] = "bad_msgpack",
    [CALIB_REJ_TOO_DEEP] = "too_deep",
    [CALIB_REJ_TRAILING_BYTES] = "trailing_bytes",
    [CALIB_REJ_NOT_A_MAP] = "not_a_map",
    [CALIB_REJ_BAD_KEY] = "bad_key",
    [CALIB_REJ_DUPLICATE_KEY] = "duplicate_key",
    [CALIB_REJ_BAD_VERSION] = "bad_version",
    [CALIB_REJ_BAD_TYPE] = "bad_type",
    [CALIB_REJ_MISSING_KEY] = "missing_key",
    [CALIB_REJ_MISSING_ID] = "missing_id",
    [CALIB_REJ_KEY_TYPE] = "key_type",
    [CALIB_REJ_BIN_LENGTH] = "bin_length",
    [CALIB_REJ_N_RANGE] = "n_range",
    [CALIB_REJ_K_RANGE] = "k_range",
    [CALIB_REJ_AMBIGUOUS_OUTPUT] = "ambiguous_output",
    [CALIB_REJ_ARRAY_LENGTH] = "array_length",
    [CALIB_REJ_NO_MEMORY] = "no_memory",
    [CALIB_REJ_NONFINITE] = "nonfinite",
    [CALIB_REJ_PROB_RANGE] = "prob_range",
    [CALIB_REJ_PROB_SUM] = "prob_sum",
    [CALIB_REJ_VAR_NONPOSITIVE] = "var_nonpositive",
    [CALIB_REJ_LABEL_RANGE] = "label_range",
    [CALIB_REJ_BAD_ID] = "bad_id",
    [CALIB_REJ_BIN_AMBIGUOUS] = "bin_ambiguous",
    [CALIB_REJ_FRAMING] = "framing",
    [CALIB_REJ_MODEL_MISMATCH] = "model_mismatch",
    [CALIB_REJ_BAD_METHOD] = "bad_method",
    [CALIB_REJ_BAD_PARAMS] = "bad_params",
    [CALIB_REJ_BAD_VALUE] = "bad_value",
    [CALIB_REJ_BAD_SEGMENT] = "bad_segment",
};

const char *calib_reject_name(int reason)
{
    if (reason < 0 || reason >= CALIB_REJ_COUNT)
        return "unknown";
    return reject_names[reason];
}

int calib_reject_is_record(int reason)
{
    return reason >= CALIB_REJ_NONFINITE && reason <= CALIB_REJ_BAD_ID;
}

/* ------------------------------------------------------------------ numbers */

int calib_proto_number(const msgpack_object *o, double *out)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; return 1;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; return 1;
    case MSGPACK_OBJECT_FLOAT32: /* msgpack-c widens float32 into f64 */
    case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; return 1;
    default: return 0;
    }
}

static int is_number(const msgpack_object *o)
{
    double unused;
    return calib_proto_number(o, &unused);
}

static double load_le(const unsigned char *p, size_t elem)
{
    if (elem == 4) {
        uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    uint64_t u = 0;
    for (int b = 7; b >= 0; b--)
        u = u << 8 | p[b];
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* n little-endian elements of elem bytes from p into x: the loop of
 * load_le over a row, in one place (a row of K = 1000 is read per
 * prediction). float32 on a little-endian host: four floats at a time
 * widened in a vector (vec4.h; a float's widening is exact, so the same
 * doubles). */
CALIB_CLONES
static void load_le_row(const unsigned char *p, size_t elem, size_t n, double *x)
{
    if (elem == 4) {
        size_t j = 0;
#if defined(CALIB_VEC4) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        typedef float vec4f __attribute__((vector_size(4 * sizeof(float))));
        for (; j + 4 <= n; j += 4, p += 16) {
            vec4f f;
            memcpy(&f, p, sizeof f);
            calib_vec4 d = __builtin_convertvector(f, calib_vec4);
            memcpy(x + j, &d, sizeof d);
        }
#endif
        for (; j < n; j++, p += 4) {
            uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                         (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            float f;
            memcpy(&f, &u, sizeof f);
            x[j] = f;
        }
        return;
    }
    for (size_t j = 0; j < n; j++, p += 8)
        x[j] = load_le(p, 8);
}

/* ------------------------------------------------------------------ raw scan */

static uint64_t load_be(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/*
 * The header of the object at b[0 .. left), left >= 1: *skip bytes of header
 * and inline data, *items objects that follow inside it (2 per map entry),
 * *container if it is an array or a map. -1 for the unused byte 0xc1 or a
 * header cut short.
 */
static int scan_head(const unsigned char *b, size_t left, uint64_t *skip,
                     uint64_t *items, int *container)
{
    unsigned c = b[0];
    size_t lb = 0;       /* bytes of the big-endian length or count */
    uint64_t extra = 0;  /* fixed bytes after the length (ext's type) */
    int kind = 0;        /* 0: data of `length` bytes, 1: array, 2: map */

    *skip = 1;
    *items = 0;
    *container = 0;
    if (c <= 0x7f || c >= 0xe0)
        return 0;                        /* fixint */
    if (c <= 0x9f) {                     /* fixmap, fixarray */
        *container = 1;
        *items = c <= 0x8f ? 2u * (c & 0x0f) : (c & 0x0f);
        return 0;
    }
    if (c <= 0xbf) {                     /* fixstr */
        *skip = 1 + (c & 0x1f);
        return 0;
    }
    switch (c) {
    case 0xc0: case 0xc2: case 0xc3: return 0;       /* nil, false, true */
    case 0xc4: case 0xd9: lb = 1; break;             /* bin8, str8 */
    case 0xc5: case 0xda: lb = 2; break;             /* bin16, str16 */
    case 0xc6: case 0xdb: lb = 4; break;             /* bin32, str32 */
    case 0xc7: lb = 1; extra = 1; break;             /* ext8 */
    case 0xc8: lb = 2; extra = 1; break;             /* ext16 */
    case 0xc9: lb = 4; extra = 1; break;             /* ext32 */
    case 0xca: case 0xce: case 0xd2: *skip = 5; return 0;
    case 0xcb: case 0xcf: case 0xd3: *skip = 9; return 0;
    case 0xcc: case 0xd0: *skip = 2; return 0;
    case 0xcd: case 0xd1: *skip = 3; return 0;
    case 0xd4: *skip = 3; return 0;                  /* fixext 1 */
    case 0xd5: *skip = 4; return 0;
    case 0xd6: *skip = 6; return 0;
    case 0xd7: *skip = 10; return 0;
    case 0xd8: *skip = 18; return 0;                 /* fixext 16 */
    case 0xdc: lb = 2; kind = 1; break;              /* array16 */
    case 0xdd: lb = 4; kind = 1; break;              /* array32 */
    case 0xde: lb = 2; kind = 2; break;              /* map16 */
    case 0xdf: lb = 4; kind = 2; break;              /* map32 */
    default: return -1;                              /* 0xc1 */
    }
    if (lb >= left)
        return -1;
    uint64_t v = load_be(b + 1, lb);
    *skip = 1 + lb;
    if (kind == 0)
        *skip += extra + v;
    else {
        *container = 1;
        *items = kind == 2 ? 2 * v : v;
    }
    return 0;
}

int calib_proto_scan(const void *buf, size_t len, size_t *end)
{
    const unsigned char *b = buf;
    uint64_t left[CALIB_PROTO_MAX_DEPTH + 1]; /* objects still due per level */
    int d = 0;
    size_t pos = 0;

    left[0] = 1;
    for (;;) {
        while (left[d] == 0) {
            if (d == 0) {
                *end = pos;
                return CALIB_REJ_NONE;
            }
            d--;
        }
        left[d]--;
        uint64_t skip, items;
        int container;
        if (pos >= len || scan_head(b + pos, len - pos, &skip, &items,
                                    &container) < 0)
            return CALIB_REJ_BAD_MSGPACK;
        if (skip > len - pos)
            return CALIB_REJ_BAD_MSGPACK;
        pos += (size_t)skip;
        if (!container)
            continue;
        /* msgpack-c refuses a container inside 32 others, even an empty one */
        if (d == CALIB_PROTO_MAX_DEPTH)
            return CALIB_REJ_TOO_DEEP;
        /* every object takes at least one byte: more is a lie or truncation */
        if (items > len - pos)
            return CALIB_REJ_BAD_MSGPACK;
        if (items > 0)
            left[++d] = items;
    }
}

/* ------------------------------------------------------------------ topic */

static int topic_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
           c == '-';
}

int calib_proto_topic_ok(const void *topic, size_t len)
{
    const unsigned char *t = topic;
    if (t == NULL || len == 0 || len > CALIB_PROTO_MAX_TOPIC)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!topic_char_ok(t[i]))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ keys */

enum proto_key {
    KEY_V, KEY_TYPE, KEY_ID, KEY_TS, KEY_LOGITS, KEY_PROBS, KEY_P, KEY_MEAN,
    KEY_VAR, KEY_Y, KEY_N, KEY_K, KEY_SEG, KEY_COUNT
};

#define KEY(s) {s, (uint8_t)(sizeof(s) - 1)}
static const struct {
    const char *name;
    uint8_t len;
} keys[KEY_COUNT] = {
    KEY("v"), KEY("type"), KEY("id"), KEY("ts"), KEY("logits"), KEY("probs"), KEY("p"),
    KEY("mean"), KEY("var"), KEY("y"), KEY("n"), KEY("k"), KEY("seg"),
};

int calib_proto_str_is(const msgpack_object_str *s, const char *lit)
{
    size_t n = strlen(lit);
    return s->size == n && memcmp(s->ptr, lit, n) == 0;
}

/* Told apart by length and first byte before any comparison, without a
 * strlen per key per message. */
static int key_index(const msgpack_object_str *s)
{
    for (int i = 0; i < KEY_COUNT; i++)
        if (s->size == keys[i].len && s->ptr[0] == keys[i].name[0] &&
            memcmp(s->ptr, keys[i].name, keys[i].len) == 0)
            return i;
    return -1;
}

/* Returns r; a rejection records `key` as the one at fault, unless a more
 * precise (inner) step recorded one already. */
static int blame(calib_msg *m, int key, int r)
{
    if (r != CALIB_REJ_NONE && m->fault.key == NULL)
        m->fault.key = keys[key].name;
    return r;
}

/* The values of the known keys into val[]; unknown keys are ignored, but a
 * second copy of a known key is ambiguous and rejected. */
static int gather_keys(calib_msg *m, const msgpack_object_map *map,
                       const msgpack_object *val[KEY_COUNT])
{
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object_kv *kv = &map->ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            return CALIB_REJ_BAD_KEY;
        int idx = key_index(&kv->key.via.str);
        if (idx < 0)
            continue;
        if (val[idx] != NULL)
            return blame(m, idx, CALIB_REJ_DUPLICATE_KEY);
        val[idx] = &kv->val;
    }
    return CALIB_REJ_NONE;
}

static int check_version(const msgpack_object *v)
{
    if (v == NULL || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        v->via.u64 != CALIB_PROTO_VERSION)
        return CALIB_REJ_BAD_VERSION;
    return CALIB_REJ_NONE;
}

static int read_type(calib_msg *m, const msgpack_object *t)
{
    if (t == NULL || t->type != MSGPACK_OBJECT_STR)
        return CALIB_REJ_BAD_TYPE;
    if (calib_proto_str_is(&t->via.str, "pred"))
        m->type = CALIB_MSG_PRED;
    else if (calib_proto_str_is(&t->via.str, "label"))
        m->type = CALIB_MSG_LABEL;
    else
        return CALIB_REJ_BAD_TYPE;
    return CALIB_REJ_NONE;
}

/* An integer in lo..hi into *out: a non-integer is mistyped, an integer
 * outside the range (negative ones included) is `range`. */
static int read_count(const msgpack_object *o, uint64_t lo, uint64_t hi,
                      int range, size_t *out)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return range;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return CALIB_REJ_KEY_TYPE;
    if (o->via.u64 < lo || o->via.u64 > hi)
        return range;
    *out = (size_t)o->via.u64;
    return CALIB_REJ_NONE;
}

static int read_n(calib_msg *m, const msgpack_object *n)
{
    m->batch = n != NULL;
    m->n = 1;
    if (n == NULL)
        return CALIB_REJ_NONE;
    return read_count(n, 1, CALIB_PROTO_MAX_N, CALIB_REJ_N_RANGE, &m->n);
}

/* ------------------------------------------------------------------ columns */

static int all_numbers(const msgpack_object *o, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_number(&o[i]))
            return 0;
    return 1;
}

/* A bin of `count` float32 or float64 values, told apart by its length. */
static int bin_col(calib_msg_col *c, const msgpack_object *o, uint64_t count)
{
    uint64_t size = o->via.bin.size;
    if (size == 4 * count)
        c->elem = 4;
    else if (size == 8 * count)
        c->elem = 8;
    else
        return CALIB_REJ_BIN_LENGTH;
    c->kind = CALIB_COL_BIN;
    c->bin = (const unsigned char *)o->via.bin.ptr;
    return CALIB_REJ_NONE;
}

/* bin_col for the key `key` of m: a bad length is recorded in m->fault. */
static int bin_of(calib_msg *m, int key, calib_msg_col *c,
                  const msgpack_object *o, uint64_t count)
{
    int r = bin_col(c, o, count);
    if (r != CALIB_REJ_NONE) {
        m->fault.bin_bytes = o->via.bin.size;
        m->fault.bin_values = count;
    }
    return blame(m, key, r);
}

/* `len` numbers in an array, one per record (batch) or per class (row). */
static int flat_col(calib_msg_col *c, const msgpack_object *o, size_t len)
{
    if (o->via.array.size != len)
        return CALIB_REJ_ARRAY_LENGTH;
    if (!all_numbers(o->via.array.ptr, len))
        return CALIB_REJ_KEY_TYPE;
    c->kind = CALIB_COL_FLAT;
    c->obj = o->via.array.ptr;
    return CALIB_REJ_NONE;
}

/* The batch form's array of n arrays of k numbers. */
static int nested_col(calib_msg_col *c, const msgpack_object *o, size_t n,
                      size_t k)
{
    if (o->via.array.size != n)
        return CALIB_REJ_ARRAY_LENGTH;
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *row = &o->via.array.ptr[i];
        if (row->type != MSGPACK_OBJECT_ARRAY)
            return CALIB_REJ_KEY_TYPE;
        if (row->via.array.size != k)
            return CALIB_REJ_ARRAY_LENGTH;
        if (!all_numbers(row->via.array.ptr, k))
            return CALIB_REJ_KEY_TYPE;
    }
    c->kind = CALIB_COL_NESTED;
    c->obj = o->via.array.ptr;
    return CALIB_REJ_NONE;
}

/* One number per record of key `key`: a number in the row form; an array
 * of n numbers (or, when bins are allowed, a bin of n floats) in the batch
 * form. */
static int num_col(calib_msg *m, int key, calib_msg_col *c,
                   const msgpack_object *o, int bin_ok)
{
    if (!m->batch) {
        if (!is_number(o))
            return blame(m, key, CALIB_REJ_KEY_TYPE);
        c->kind = CALIB_COL_FLAT;
        c->obj = o;
        return CALIB_REJ_NONE;
    }
    if (bin_ok && o->type == MSGPACK_OBJECT_BIN)
        return bin_of(m, key, c, o, m->n);
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return blame(m, key, CALIB_REJ_KEY_TYPE);
    return blame(m, key, flat_col(c, o, m->n));
}

/*
 * K of a row-form bin without "k": the caller's hint (the model's K, when
 * known) or, failing that, its length when only one reading exists: a
 * length that is a multiple of 4 but not of 8 can only be float32. A
 * multiple of 8 could be K float32 or K/2 float64: guessing would silently
 * corrupt the producers of the other type, so it is rejected with a reason
 * of its own. A length that is no multiple of 4 fits no K at all.
 */
static int row_bin_k(calib_msg *m, int key, size_t len)
{
    if (m->k_hint) {
        m->k = m->k_hint;
        return CALIB_REJ_NONE;
    }
    if (len % 4 != 0 || (len > 0 && len % 8 == 0)) {
        m->fault.bin_bytes = len;
        return blame(m, key, len % 4 ? CALIB_REJ_BIN_LENGTH
                                     : CALIB_REJ_BIN_AMBIGUOUS);
    }
    m->k = len / 4;
    return CALIB_REJ_NONE;
}

/*
 * K numbers per record (logits, probs) under key `key`. K comes from "k";
 * a row-form array states it by its length alone; a row-form bin without
 * "k" as row_bin_k says.
 */
static int vec_col(calib_msg *m, int key, const msgpack_object *o,
                   const msgpack_object *k)
{
    int r;

    if (o->type != MSGPACK_OBJECT_BIN && o->type != MSGPACK_OBJECT_ARRAY)
        return blame(m, key, CALIB_REJ_KEY_TYPE);
    if (k != NULL) {
        r = read_count(k, 2, CALIB_PROTO_MAX_K, CALIB_REJ_K_RANGE, &m->k);
        if (r)
            return blame(m, KEY_K, r);
    } else if (m->batch) {
        return blame(m, KEY_K, CALIB_REJ_MISSING_KEY);
    } else if (o->type == MSGPACK_OBJECT_BIN) {
        if ((r = row_bin_k(m, key, o->via.bin.size)))
            return r;
    } else {
        m->k = o->via.array.size;
    }
    if (m->k < 2 || m->k > CALIB_PROTO_MAX_K)
        return blame(m, k != NULL ? KEY_K : key, CALIB_REJ_K_RANGE);
    m->width = m->k;
    if (o->type == MSGPACK_OBJECT_BIN)
        return bin_of(m, key, &m->out[0], o, (uint64_t)m->n * m->k);
    if (!m->batch)
        return blame(m, key, flat_col(&m->out[0], o, m->k));
    return blame(m, key, nested_col(&m->out[0], o, m->n, m->k));
}

/* Of several output keys, the second in key order: the one to drop. */
static int second_output(const msgpack_object *const val[KEY_COUNT])
{
    static const int outs[] = {KEY_LOGITS, KEY_PROBS, KEY_P, KEY_MEAN, KEY_VAR};
    int seen = 0;
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (val[outs[i]] != NULL && seen++ == 1)
            return outs[i];
    return KEY_VAR; /* unreachable with two forms or more */
}

/* Exactly one output form; mean and var come together. */
static int pick_form(calib_msg *m, const msgpack_object *const val[KEY_COUNT])
{
    int gauss = val[KEY_MEAN] != NULL || val[KEY_VAR] != NULL;
    int forms = (val[KEY_LOGITS] != NULL) + (val[KEY_PROBS] != NULL) +
                (val[KEY_P] != NULL) + gauss;

    if (forms != 1)
        return forms ? blame(m, second_output(val), CALIB_REJ_AMBIGUOUS_OUTPUT)
                     : CALIB_REJ_AMBIGUOUS_OUTPUT;
    if (gauss && (val[KEY_MEAN] == NULL || val[KEY_VAR] == NULL))
        return blame(m, val[KEY_MEAN] ? KEY_VAR : KEY_MEAN, CALIB_REJ_MISSING_KEY);
    m->form = val[KEY_LOGITS] ? CALIB_FORM_LOGITS
            : val[KEY_PROBS]  ? CALIB_FORM_PROBS
            : val[KEY_P]      ? CALIB_FORM_BINARY
                              : CALIB_FORM_GAUSSIAN;
    return CALIB_REJ_NONE;
}

static int decode_outputs(calib_msg *m, const msgpack_object *const val[KEY_COUNT])
{
    int r = pick_form(m, val);
    if (r)
        return r;
    switch (m->form) {
    case CALIB_FORM_LOGITS:
        return vec_col(m, KEY_LOGITS, val[KEY_LOGITS], val[KEY_K]);
    case CALIB_FORM_PROBS:
        return vec_col(m, KEY_PROBS, val[KEY_PROBS], val[KEY_K]);
    case CALIB_FORM_BINARY:
        m->k = 2;
        m->width = 1;
        return num_col(m, KEY_P, &m->out[0], val[KEY_P], 1);
    default:
        m->k = 0;
        m->width = 2;
        r = num_col(m, KEY_MEAN, &m->out[0], val[KEY_MEAN], 1);
        return r ? r : num_col(m, KEY_VAR, &m->out[1], val[KEY_VAR], 1);
    }
}

/* ts: absent (receive time), one number for every record, or in the batch
 * form an array of n numbers. */
static int decode_ts(calib_msg *m, const msgpack_object *ts)
{
    if (ts == NULL)
        return CALIB_REJ_NONE;
    if (calib_proto_number(ts, &m->ts)) {
        m->ts_col.kind = CALIB_COL_SCALAR;
        return CALIB_REJ_NONE;
    }
    if (!m->batch || ts->type != MSGPACK_OBJECT_ARRAY)
        return blame(m, KEY_TS, CALIB_REJ_KEY_TYPE);
    return blame(m, KEY_TS, flat_col(&m->ts_col, ts, m->n));
}

/* ids are checked per record (a bad id rejects its record alone); here only
 * the batch form's array of n. */
static int decode_id(calib_msg *m, const msgpack_object *id)
{
    if (!m->batch) {
        m->id.kind = CALIB_COL_FLAT;
        m->id.obj = id;
        return CALIB_REJ_NONE;
    }
    if (id->type != MSGPACK_OBJECT_ARRAY)
        return blame(m, KEY_ID, CALIB_REJ_KEY_TYPE);
    if (id->via.array.size != m->n)
        return blame(m, KEY_ID, CALIB_REJ_ARRAY_LENGTH);
    m->id.kind = CALIB_COL_FLAT;
    m->id.obj = id->via.array.ptr;
    return CALIB_REJ_NONE;
}

int calib_proto_seg_key_ok(const void *s, size_t len)
{
    const unsigned char *b = s;
    if (!b || len < 1 || len > CALIB_PROTO_MAX_SEG_NAME)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= 'A' && b[i] <= 'Z') ||
              (b[i] >= '0' && b[i] <= '9') || b[i] == '_' || b[i] == '.' || b[i] == '-'))
            return 0;
    return 1;
}

/* The length of the UTF-8 sequence at b (left bytes), or 0 when it is not
 * one, or is a control character (C0, DEL or C1). */
static size_t utf8_char(const unsigned char *b, size_t left)
{
    unsigned c = b[0];
    if (c < 0x80)
        return c >= 0x20 && c != 0x7f;
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n || n > left)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((b[i] & 0xc0) != 0x80)
            return 0;
    /* no overlong form, surrogate, code point above U+10FFFF, nor C1 */
    if ((c == 0xe0 && b[1] < 0xa0) || (c == 0xed && b[1] > 0x9f) ||
        (c == 0xf0 && b[1] < 0x90) || (c == 0xf4 && b[1] > 0x8f) || (c == 0xc2 && b[1] < 0xa0))
        return 0;
    return n;
}

int calib_proto_seg_value_ok(const void *s, size_t len)
{
    const unsigned char *b = s;
    if (!b || len < 1 || len > CALIB_PROTO_MAX_SEG_NAME)
        return 0;
    for (size_t i = 0, n; i < len; i += n)
        if (!(n = utf8_char(b + i, len - i)))
            return 0;
    return 1;
}

static int seg_value(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_STR && calib_proto_seg_value_ok(o->via.str.ptr, o->via.str.size);
}

/* "seg": a map of segment keys to a value, or in the batch form to one
 * value or an array of n; every key and value is checked here, so that a
 * record never fails for its segments. */
static int decode_seg(calib_msg *m, const msgpack_object *seg)
{
    if (seg == NULL)
        return CALIB_REJ_NONE;
    if (seg->type != MSGPACK_OBJECT_MAP || seg->via.map.size > CALIB_PROTO_MAX_SEG)
        return blame(m, KEY_SEG, CALIB_REJ_BAD_SEGMENT);
    for (uint32_t i = 0; i < seg->via.map.size; i++) {
        const msgpack_object_kv *kv = &seg->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR ||
            !calib_proto_seg_key_ok(kv->key.via.str.ptr, kv->key.via.str.size))
            return blame(m, KEY_SEG, CALIB_REJ_BAD_SEGMENT);
        for (uint32_t j = 0; j < i; j++)
            if (m->seg[j].key_len == kv->key.via.str.size &&
                memcmp(m->seg[j].key, kv->key.via.str.ptr, m->seg[j].key_len) == 0)
                return blame(m, KEY_SEG, CALIB_REJ_BAD_SEGMENT);
        calib_msg_segcol *c = &m->seg[i];
        *c = (calib_msg_segcol){.key = kv->key.via.str.ptr, .key_len = kv->key.via.str.size,
                                .val = &kv->val};
        if (m->batch && kv->val.type == MSGPACK_OBJECT_ARRAY) {
            if (kv->val.via.array.size != m->n)
                return blame(m, KEY_SEG, CALIB_REJ_BAD_SEGMENT);
            for (size_t r = 0; r < m->n; r++)
                if (!seg_value(&kv->val.via.array.ptr[r]))
                    return blame(m, KEY_SEG, CALIB_REJ_BAD_SEGMENT);
            c->per_record = 1;
            c->val = kv->val.via.array.ptr;
        } else if (!seg_value(&kv->val)) {
            return blame(m, KEY_SEG, CALIB_REJ_BAD_SEGMENT);
        }
        m->nseg = i + 1;
    }
    return CALIB_REJ_NONE;
}

int calib_msg_seg(const calib_msg *m, size_t i, size_t j, const char **key, size_t *key_len,
                  const char **val, size_t *val_len)
{
    if (!m || m->type != CALIB_MSG_PRED || i >= m->n || j >= m->nseg)
        return CALIB_EINVAL;
    const calib_msg_segcol *c = &m->seg[j];
    const msgpack_object *o = c->per_record ? &c->val[i] : c->val;
    *key = c->key;
    *key_len = c->key_len;
    *val = o->via.str.ptr;
    *val_len = o->via.str.size;
    return CALIB_OK;
}

static int decode_pred(calib_msg *m, const msgpack_object *const val[KEY_COUNT])
{
    int r = decode_outputs(m, val);
    if (r)
        return r;
    if ((r = decode_seg(m, val[KEY_SEG])))
        return r;
    if (val[KEY_Y] != NULL && (r = num_col(m, KEY_Y, &m->y, val[KEY_Y], 0)))
        return r;
    if (val[KEY_ID] != NULL)
        return decode_id(m, val[KEY_ID]);
    return val[KEY_Y] != NULL ? CALIB_REJ_NONE
                              : blame(m, KEY_ID, CALIB_REJ_MISSING_ID);
}

static int decode_label(calib_msg *m, const msgpack_object *const val[KEY_COUNT])
{
    int r;
    if (val[KEY_ID] == NULL)
        return blame(m, KEY_ID, CALIB_REJ_MISSING_ID);
    if (val[KEY_Y] == NULL)
        return blame(m, KEY_Y, CALIB_REJ_MISSING_KEY);
    if ((r = num_col(m, KEY_Y, &m->y, val[KEY_Y], 0)))
        return r;
    return decode_id(m, val[KEY_ID]);
}

/* ------------------------------------------------------------------ decode */

void calib_msg_init(calib_msg *m)
{
    memset(m, 0, sizeof *m);
    m->form = -1;
    m->ts = NAN;
    /* out of memory: unpack tries again, and rejects as no_memory */
    m->zone_ready = msgpack_zone_init(&m->zone, CALIB_MSG_ZONE);
}

void calib_msg_destroy(calib_msg *m)
{
    if (m->zone_ready)
        msgpack_zone_destroy(&m->zone);
    m->zone_ready = 0;
    m->n = 0;
}

/* Forgets the previous message but keeps msgpack's zone for reuse. */
static void msg_reset(calib_msg *m, size_t k_hint)
{
    msgpack_zone zone = m->zone;
    int ready = m->zone_ready;
    memset(m, 0, sizeof *m);
    m->zone = zone;
    m->zone_ready = ready;
    m->k_hint = k_hint;
    m->form = -1;
    m->ts = NAN;
}

static int unpack(calib_msg *m, const void *payload, size_t len)
{
    size_t end = 0, off = 0;

    if (payload == NULL || len == 0)
        return CALIB_REJ_BAD_MSGPACK;
    int r = calib_proto_scan(payload, len, &end);
    if (r)
        return r;
    if (end != len)
        return CALIB_REJ_TRAILING_BYTES;
    if (!m->zone_ready && !(m->zone_ready = msgpack_zone_init(&m->zone, CALIB_MSG_ZONE)))
        return CALIB_REJ_NO_MEMORY;
    /* into the zone kept from message to message: msgpack_unpack_next
     * would allocate a zone and its first chunk for each */
    msgpack_zone_clear(&m->zone);
    switch (msgpack_unpack(payload, len, &off, &m->zone, &m->root)) {
    case MSGPACK_UNPACK_SUCCESS: break;
    case MSGPACK_UNPACK_EXTRA_BYTES: return CALIB_REJ_TRAILING_BYTES;
    case MSGPACK_UNPACK_NOMEM_ERROR: return CALIB_REJ_NO_MEMORY;
    default: return CALIB_REJ_BAD_MSGPACK; /* CONTINUE: truncated */
    }
    return off == len ? CALIB_REJ_NONE : CALIB_REJ_TRAILING_BYTES;
}

static int decode_map(calib_msg *m)
{
    const msgpack_object *root = &m->root;
    const msgpack_object *val[KEY_COUNT] = {0};
    int r;

    if (root->type != MSGPACK_OBJECT_MAP)
        return CALIB_REJ_NOT_A_MAP;
    if ((r = gather_keys(m, &root->via.map, val)))
        return r;
    if ((r = blame(m, KEY_V, check_version(val[KEY_V]))))
        return r;
    if ((r = blame(m, KEY_TYPE, read_type(m, val[KEY_TYPE]))))
        return r;
    if ((r = blame(m, KEY_N, read_n(m, val[KEY_N]))))
        return r;
    if ((r = decode_ts(m, val[KEY_TS])))
        return r;
    if (m->type == CALIB_MSG_PRED)
        return decode_pred(m, val);
    return decode_label(m, val);
}

int calib_msg_decode(calib_msg *m, const void *topic, size_t topic_len,
                     const void *payload, size_t payload_len)
{
    return calib_msg_decode_k(m, topic, topic_len, payload, payload_len, 0);
}

int calib_msg_decode_k(calib_msg *m, const void *topic, size_t topic_len,
                       const void *payload, size_t payload_len, size_t k_hint)
{
    int r;

    msg_reset(m, k_hint);
    if (!calib_proto_topic_ok(topic, topic_len))
        r = CALIB_REJ_BAD_TOPIC;
    else if ((r = unpack(m, payload, payload_len)) == CALIB_REJ_NONE)
        r = decode_map(m);
    if (r) {
        calib_msg_fault fault = m->fault;
        msg_reset(m, 0);
        m->fault = fault;
        return r;
    }
    m->topic = topic;
    m->topic_len = topic_len;
    return CALIB_REJ_NONE;
}

/* ------------------------------------------------------------------ records */

/* Value j of record i of a column of `width` values per record; the column's
 * shape and number types were checked by calib_msg_decode. */
static double col_value(const calib_msg_col *c, size_t i, size_t width,
                        size_t j)
{
    double v = NAN;
    switch (c->kind) {
    case CALIB_COL_BIN:
        return load_le(c->bin + (i * width + j) * c->elem, c->elem);
    case CALIB_COL_FLAT:
        calib_proto_number(&c->obj[i * width + j], &v);
        return v;
    case CALIB_COL_NESTED:
        calib_proto_number(&c->obj[i].via.array.ptr[j], &v);
        return v;
    default:
        return v;
    }
}

static int reject_of(int calib_err)
{
    switch (calib_err) {
    case CALIB_OK: return CALIB_REJ_NONE;
    case CALIB_EPROB: return CALIB_REJ_PROB_RANGE;
    case CALIB_EPROBSUM: return CALIB_REJ_PROB_SUM;
    case CALIB_EVAR: return CALIB_REJ_VAR_NONPOSITIVE;
    case CALIB_ELABEL: return CALIB_REJ_LABEL_RANGE;
    default: return CALIB_REJ_NONFINITE;
    }
}

int calib_proto_check_y(int form, size_t k, double y)
{
    if (!isfinite(y))
        return CALIB_REJ_NONFINITE;
    switch (form) {
    case CALIB_FORM_GAUSSIAN: return CALIB_REJ_NONE;
    case CALIB_FORM_BINARY: return reject_of(calib_check_label(y, 2));
    default: return reject_of(calib_check_label(y, k));
    }
}

static int rec_id(const calib_msg *m, size_t i, calib_msg_rec *out)
{
    if (m->id.kind == CALIB_COL_NONE)
        return CALIB_REJ_NONE;
    const msgpack_object *o = &m->id.obj[i];
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        out->id_kind = CALIB_MSG_ID_UINT;
        out->id_num = o->via.u64;
        return CALIB_REJ_NONE;
    }
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size == 0 ||
        o->via.str.size > CALIB_PROTO_MAX_ID)
        return CALIB_REJ_BAD_ID;
    out->id_kind = CALIB_MSG_ID_STR;
    out->id = o->via.str.ptr;
    out->id_len = o->via.str.size;
    return CALIB_REJ_NONE;
}

static int rec_ts(const calib_msg *m, size_t i, calib_msg_rec *out)
{
    if (m->ts_col.kind == CALIB_COL_NONE)
        return CALIB_REJ_NONE;
    out->ts = m->ts_col.kind == CALIB_COL_SCALAR ? m->ts
                                                 : col_value(&m->ts_col, i, 1, 0);
    return isfinite(out->ts) ? CALIB_REJ_NONE : CALIB_REJ_NONFINITE;
}

static int rec_outputs(const calib_msg *m, size_t i, double *x)
{
    if (m->form == CALIB_FORM_GAUSSIAN) {
        x[0] = col_value(&m->out[0], i, 1, 0);
        x[1] = col_value(&m->out[1], i, 1, 0);
    } else if (m->out[0].kind == CALIB_COL_BIN) {
        load_le_row(m->out[0].bin + i * m->width * m->out[0].elem, m->out[0].elem, m->width, x);
    } else {
        for (size_t j = 0; j < m->width; j++)
            x[j] = col_value(&m->out[0], i, m->width, j);
    }
    switch (m->form) {
    case CALIB_FORM_LOGITS: return reject_of(calib_check_logits(x, m->k));
    case CALIB_FORM_PROBS: return reject_of(calib_check_probs(x, m->k));
    case CALIB_FORM_BINARY: return reject_of(calib_check_binary(x[0]));
    default: return reject_of(calib_check_gaussian(x[0], x[1]));
    }
}

static int rec_y(const calib_msg *m, size_t i, calib_msg_rec *out)
{
    if (m->y.kind == CALIB_COL_NONE)
        return CALIB_REJ_NONE;
    out->has_y = 1;
    out->y = col_value(&m->y, i, 1, 0);
    if (m->type == CALIB_MSG_LABEL)
        return isfinite(out->y) ? CALIB_REJ_NONE : CALIB_REJ_NONFINITE;
    return calib_proto_check_y(m->form, m->k, out->y);
}

/* The key of a prediction's outputs x that failed their check. */
static int outputs_key(const calib_msg *m, const double *x)
{
    switch (m->form) {
    case CALIB_FORM_LOGITS: return KEY_LOGITS;
    case CALIB_FORM_PROBS: return KEY_PROBS;
    case CALIB_FORM_BINARY: return KEY_P;
    default: return isfinite(x[0]) ? KEY_VAR : KEY_MEAN;
    }
}

/* Returns r; a rejection names `key` in out. */
static int rec_fault(calib_msg_rec *out, int key, int r)
{
    if (r != CALIB_REJ_NONE)
        out->fault_key = keys[key].name;
    return r;
}

int calib_msg_record(const calib_msg *m, size_t i, calib_msg_rec *out,
                     double *x)
{
    int r;

    if (m == NULL || out == NULL || i >= m->n ||
        (m->type == CALIB_MSG_PRED && x == NULL))
        return CALIB_EINVAL;
    memset(out, 0, sizeof *out);
    out->id_kind = CALIB_MSG_ID_NONE;
    out->y = NAN;
    out->ts = NAN;
    if ((r = rec_id(m, i, out)))
        return rec_fault(out, KEY_ID, r);
    if ((r = rec_ts(m, i, out)))
        return rec_fault(out, KEY_TS, r);
    if (m->type == CALIB_MSG_PRED && (r = rec_outputs(m, i, x)))
        return rec_fault(out, outputs_key(m, x), r);
    return rec_fault(out, KEY_Y, rec_y(m, i, out));
}
