/*
 * Join table: pairs each model's predictions with their labels by id.
 *
 * A label joins the waiting prediction of the same id; only then is the pair
 * scored. Either side may arrive first and waits up to `ttl` seconds of the
 * caller's clock, then expires (counted). At most `capacity` items wait; a new
 * one arriving at a full table evicts the oldest waiting item (counted). A
 * prediction that carries its own y needs no join: the caller scores it at
 * once and never shows it to this table.
 *
 * Duplicates:
 *  - a prediction for an id whose prediction is still waiting replaces it
 *    (new outputs, new ts, its TTL restarts): REPLACED, duplicate_preds;
 *  - a label for an id whose label is still waiting replaces it likewise
 *    (the later label wins, as for predictions): REPLACED, duplicate_labels;
 *  - a prediction or a label for an id that was joined less than `ttl` ago is
 *    ignored: DUPLICATE, duplicate_preds or duplicate_labels. The pair was
 *    already scored; scoring it twice would bias every statistic.
 *
 * Over capacity: a sample, not a cliff. A table that is full and must take
 * a new item does not evict its oldest (whose other half is the one most
 * likely to come next: at a load just past capacity, every orphan would
 * evict the prediction whose label comes next, and nothing would join).
 * It keeps instead the ids whose sample hash (a fixed-seed hash of the id,
 * the same in every process and after every restart) is at most `sample`:
 * the sample shrinks by a 128th, the waiting items it no longer holds go
 * (sampled_out_*, status SAMPLED_OUT), and from then on a new item whose
 * id is out of the sample is refused at once, prediction and label alike,
 * so a label never waits for a prediction that was refused. The pairs that
 * join are a uniform random subsample of those offered (the hash does not
 * look at outputs or outcomes), in the fraction calib_join_sample_fraction
 * says, within a few hundredths of what the table can hold. (Where no
 * waiting item is in the band, the sample goes below the largest sample
 * hash waiting, by half at most; a table whose every id hashes lower than
 * that, ids crafted for it, evicts its oldest.) Once a table's worth of
 * items came since it last changed, the sample grows toward what would
 * fill 31/32 of the table (at most doubling at a time, by one at least). A
 * label without a waiting prediction is kept only when its id was in every
 * sample of the last ttl (its prediction, had it come, was kept).
 *
 * Joined ids are remembered in a second bounded store of `joined_capacity`
 * ids: one is forgotten when it is `ttl` old, or earlier (counted in
 * `forgotten`) when the store is full and room is needed for a newer one.
 * After that a late label for it is taken as a new orphan label.
 *
 * Time: `now` is the caller's clock in seconds. Items age by the `now` at
 * which they arrived, never by the producer's `ts`: producer clocks drift,
 * differ between hosts and can be set to anything, and one wrong clock must
 * not expire, or keep alive, everybody's items. A `now` earlier than one
 * already seen counts as the latest seen (so ageing is monotonic). An item
 * arrived at t expires once now >= t + ttl: it waits strictly less than ttl.
 * calib_join_pred and calib_join_label first expire what is due, so a join
 * never crosses the TTL; calib_join_expire is for an idle timer.
 *
 * Width: a table may be created before the width of its predictions is
 * known (cfg.width = 0): it then holds labels only, which is what a model
 * needs before its first prediction fixes its shape. calib_join_set_width
 * gives it the width later; its waiting labels stay.
 *
 * Memory grows with the contents: a table starts with 64 waiting slots and
 * 64 joined ids (fewer if its capacities are lower) and doubles either
 * store when it is full, up to its capacity; calib_join_held gives what it
 * holds, calib_join_bytes the most it can. Each allocation is taken from
 * cfg.budget (calib_budget, calib.h) first; a growth refused by the budget
 * or by malloc is not made, and the table then behaves as full at its
 * present size (evicted, forgotten). Ids are copied inline.
 *
 * Ids hash with a seeded 64-bit hash (calib_id_hash). It is not a keyed
 * cryptographic hash: the seed makes colliding ids expensive to precompute,
 * and a chain can never grow past `capacity` entries whatever the ids.
 */
#ifndef CALIB_JOIN_H
#define CALIB_JOIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CALIB_ID_MAX 64 /* bytes in a string id */

/* Most waiting items, or remembered joined ids, a table can hold. */
#define CALIB_JOIN_MAX_CAPACITY ((size_t)1 << 30)
#define CALIB_JOIN_MAX_WIDTH ((size_t)1 << 20)

enum calib_id_kind {
    CALIB_ID_STR = 1, /* 1..CALIB_ID_MAX bytes, any values */
    CALIB_ID_U64 = 2, /* an unsigned 64-bit integer */
};

/* An id. String "5" and integer 5 are different ids. Build with
 * calib_id_str or calib_id_u64; the bytes past len are not compared. */
typedef struct calib_id {
    union {
        uint64_t u64;
        unsigned char str[CALIB_ID_MAX];
    } v;
    uint8_t kind; /* enum calib_id_kind */
    uint8_t len;  /* string bytes; 8 for CALIB_ID_U64 */
} calib_id;

/* Copies len bytes; CALIB_EINVAL unless bytes is not NULL and
 * 1 <= len <= CALIB_ID_MAX. */
int calib_id_str(calib_id *id, const void *bytes, size_t len);
void calib_id_u64(calib_id *id, uint64_t v);
/* 1 if a and b are the same id, else 0. */
int calib_id_equal(const calib_id *a, const calib_id *b);
/* CALIB_OK for a well-formed id, else CALIB_EINVAL. */
int calib_id_check(const calib_id *id);
/* Seeded 64-bit hash of a well-formed id; its kind is part of it. */
uint64_t calib_id_hash(const calib_id *id, uint64_t seed);
/* The same value as the other kind of id: integer 5 as string "5", and a
 * string of decimal digits (no leading 0, below 2^64) as the integer; 1,
 * or 0 when it has none. What a producer that mixes the kinds meant. */
int calib_id_other_kind(const calib_id *id, calib_id *out);

typedef struct calib_join_cfg {
    double ttl;             /* seconds an item waits; finite, > 0 */
    size_t capacity;        /* waiting items (predictions + labels), >= 1 */
    size_t width;           /* doubles of model outputs per prediction; 0:
                               labels only, until calib_join_set_width */
    size_t joined_capacity; /* joined ids remembered; 0 remembers none */
    uint64_t seed;          /* hash seed: take it from a random source */
    struct calib_budget *budget; /* the bytes come from it; NULL: no limit */
} calib_join_cfg;

enum calib_join_status {
    CALIB_JOIN_WAITING = 1,   /* stored; waits for its other half */
    CALIB_JOIN_JOINED = 2,    /* matched a waiting item: score the pair */
    CALIB_JOIN_REPLACED = 3,  /* replaced a waiting item of the same kind */
    CALIB_JOIN_DUPLICATE = 4, /* id joined less than ttl ago: ignored */
    CALIB_JOIN_SAMPLED_OUT = 5, /* over capacity, its id out of the sample:
                                   dropped */
};

enum calib_join_kind {
    CALIB_JOIN_NONE = 0,
    CALIB_JOIN_PRED = 1,
    CALIB_JOIN_LABEL = 2,
};

typedef struct calib_join_result {
    int status;       /* enum calib_join_status */
    int evicted;      /* kind of the waiting item evicted for room, or NONE */
    /* JOINED only: */
    const double *x;  /* the prediction's width outputs (see below) */
    double y;         /* the label */
    double pred_ts;   /* the producer's ts of the prediction */
    double pred_arrived; /* the `now` of the prediction's arrival */
    double label_ts;  /* the producer's ts of the label */
} calib_join_result;

/* One waiting item (private). */
typedef struct calib_join_entry {
    calib_id id;
    double deadline; /* arrival now + ttl */
    double ts;       /* producer's ts */
    double y;        /* labels only */
    uint32_t hash;   /* low bits of calib_id_hash */
    uint32_t hnext;  /* next in the bucket chain */
    uint32_t prev;   /* FIFO neighbours; next doubles as the free list */
    uint32_t next;
    uint8_t kind;    /* enum calib_join_kind; NONE when free */
} calib_join_entry;

/* One remembered joined id (private). */
typedef struct calib_join_done {
    calib_id id;
    double deadline;
    uint32_t hash;
    uint32_t hnext;
} calib_join_done;

typedef struct calib_join {
    /* read-only */
    calib_join_cfg cfg;
    uint64_t joined;           /* pairs joined */
    uint64_t waiting_preds;    /* predictions waiting now */
    uint64_t waiting_labels;   /* labels waiting now */
    uint64_t expired_preds;    /* predictions that waited ttl unmatched */
    uint64_t expired_labels;   /* labels that waited ttl unmatched */
    uint64_t evicted;          /* waiting items evicted by a full table */
    uint64_t duplicate_preds;  /* predictions REPLACED or DUPLICATE */
    uint64_t duplicate_labels; /* labels REPLACED or DUPLICATE */
    uint64_t forgotten;        /* joined ids dropped before ttl (store full) */
    uint64_t sampled_out_preds;  /* predictions out of the sample: refused,
                                    or dropped as the sample shrank */
    uint64_t sampled_out_labels; /* labels likewise */
    uint32_t sample;           /* ids kept: sample hash <= sample (all:
                                  UINT32_MAX, the table was never full) */
    size_t nbuckets;           /* power of two; bucket = hash & (nbuckets-1) */
    /* private */
    uint32_t label_sample;     /* the smallest sample until label_until */
    double label_until;
    size_t arrivals;           /* new items offered since the sample changed */
    double now;                /* latest now seen */
    size_t alloc;              /* waiting slots allocated, <= capacity */
    size_t dalloc;             /* joined ids allocated, <= joined_capacity */
    size_t held;               /* bytes allocated */
    calib_join_entry *ent;     /* alloc waiting slots */
    double *x;                 /* alloc * width outputs, by slot */
    uint32_t *bucket;          /* nbuckets chain heads into ent */
    uint32_t head, tail, free; /* FIFO oldest, newest; free list */
    uint32_t fresh;            /* slots fresh.. were never used (not on the
                                  free list: init touches no entry) */
    calib_join_done *done;     /* ring of dalloc ids, oldest first */
    uint32_t *dbucket;         /* ndbuckets chain heads into done */
    size_t ndbuckets;
    size_t dhead, dlen;
} calib_join;

/* Allocates everything the table will use; CALIB_EINVAL for a bad cfg
 * (ttl not finite and > 0, capacity 0 or above the maximum, width or
 * joined_capacity above the maxima), CALIB_ENOMEM. */
int calib_join_init(calib_join *j, const calib_join_cfg *cfg);
void calib_join_free(calib_join *j);
/* dst becomes a copy of src that shares no memory with it and takes its
 * bytes from no budget (cfg.budget NULL); free it with calib_join_free.
 * CALIB_OK, or CALIB_ENOMEM (dst then holds nothing). */
int calib_join_copy(calib_join *dst, const calib_join *src);
/* Bytes a table of cfg holds at most (full), or 0 for a bad cfg. */
size_t calib_join_bytes(const calib_join_cfg *cfg);
/* Bytes a table holds now. */
size_t calib_join_held(const calib_join *j);
/*
 * Sets the number of doubles per prediction and allocates their outputs
 * (capacity * width doubles); width 0 releases them and the table takes
 * labels only. A capacity below the table's (0: keep it) shrinks the table
 * first, so that a wide prediction's outputs fit a byte budget: the oldest
 * waiting labels beyond it are evicted (counted in `evicted`). Waiting
 * labels and every counter stay. CALIB_OK (also when nothing changes),
 * CALIB_EINVAL for a width above CALIB_JOIN_MAX_WIDTH, a capacity above the
 * table's, a table not initialised, or a change while a prediction waits
 * (its outputs would be lost), CALIB_ENOMEM; on an error the table is
 * unchanged.
 */
int calib_join_set_width(calib_join *j, size_t width, size_t capacity);

/*
 * A prediction without y: `x` holds cfg.width outputs (copied), `ts` is the
 * producer's time (stored, not interpreted). Sets *out: JOINED (a waiting
 * label matched: out->x is this x, out->y the label), WAITING, REPLACED or
 * DUPLICATE. CALIB_EINVAL for a malformed id, a NULL pointer, a `now`
 * that is not finite, or a table of width 0; the table is then unchanged.
 */
int calib_join_pred(calib_join *j, const calib_id *id, const double *x,
                    double ts, double now, calib_join_result *out);
/*
 * A label y for id. Sets *out: JOINED (out->x points to the prediction's
 * outputs inside the table, valid until the next call on it), WAITING,
 * REPLACED or DUPLICATE. Errors as for calib_join_pred.
 */
/* What waits in the table under this id: CALIB_JOIN_PRED, CALIB_JOIN_LABEL,
 * or 0; changes nothing (no clock, no expiry). */
int calib_join_waiting(const calib_join *j, const calib_id *id);
int calib_join_label(calib_join *j, const calib_id *id, double y, double ts,
                     double now, calib_join_result *out);
/* Expires every item and joined id due at now; returns the number of
 * waiting items expired. A `now` that is not finite expires nothing. */
size_t calib_join_expire(calib_join *j, double now);
/*
 * A new TTL for the table, also for what waits now: every waiting item and
 * remembered joined id keeps its arrival time and takes arrival + ttl as
 * its deadline (a lowered TTL expires at the next expiry what has waited
 * longer). CALIB_EINVAL for a ttl that is not finite and > 0.
 */
int calib_join_set_ttl(calib_join *j, double ttl);

/* An id's sample hash: the same in every table, process and release. */
uint32_t calib_join_sample_hash(const calib_id *id);

/* The fraction of ids the table keeps, in (0, 1]: 1 until it is full. */
double calib_join_sample_fraction(const calib_join *j);

/* The sample as saved: sample, label_sample, label_until (the caller's
 * clock), arrivals. */
typedef struct calib_join_sampling {
    uint32_t sample, label_sample;
    double label_until;
    uint64_t arrivals;
} calib_join_sampling;
void calib_join_sampling_get(const calib_join *j, calib_join_sampling *s);
/* Puts it back (label_until moved onto this clock by the caller). CALIB_OK,
 * or CALIB_EINVAL for a label_sample above sample or a label_until that is
 * not finite nor -inf. */
int calib_join_sampling_set(calib_join *j, const calib_join_sampling *s);

/*
 * Saving and restoring a table (calibd's snapshots). An item as it waits:
 * its kind, id, arrival time (on the clock `now` is on: its deadline minus
 * the table's ttl), the producer's ts, and y (labels) or the cfg.width
 * outputs x (predictions; NULL for a label).
 */
typedef struct calib_join_item {
    int kind;          /* CALIB_JOIN_PRED or CALIB_JOIN_LABEL */
    calib_id id;
    double arrived;
    double ts;
    double y;
    const double *x;
} calib_join_item;

/* Calls fn for every waiting item, oldest first, then fn_done for every
 * remembered joined id, oldest first, with its arrival time; stops at the
 * first call that returns non-zero and returns that value (0 when every
 * call returned 0). Either callback may be NULL. The table must not change
 * meanwhile. */
int calib_join_each(const calib_join *j, int (*fn)(void *arg, const calib_join_item *it),
                    int (*fn_done)(void *arg, const calib_id *id, double arrived),
                    void *arg);
/*
 * Puts a waiting item back as it waited: its deadline is it->arrived +
 * ttl. Items go back oldest first, as calib_join_each gave them, into a
 * table whose width is the items' (predictions need width > 0); when the
 * table is full the oldest is evicted, as for a new item. CALIB_OK;
 * CALIB_EINVAL (nothing changes) for a malformed id or kind, an arrival
 * that is not finite or older than the newest item's, a prediction without
 * outputs or in a labels-only table, or an id that already waits or was
 * joined. Only waiting_preds/labels (and evicted, for an eviction) count.
 */
int calib_join_put(calib_join *j, const calib_join_item *it);
/* Puts a joined id back into the ring of remembered ids (oldest first,
 * deadline arrived + ttl). CALIB_EINVAL as above; CALIB_OK also when the
 * table remembers no ids (joined_capacity 0). */
int calib_join_put_done(calib_join *j, const calib_id *id, double arrived);

#ifdef __cplusplus
}
#endif

#endif
