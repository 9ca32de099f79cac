/*
 * Sample stores: a uniform reservoir (Li's Algorithm L, with skip counts, so
 * a skipped sample costs one decrement) and a ring of the most recent R
 * samples. A record is `width` doubles of model outputs (K logits or
 * probabilities, a binary p, or mean and var), the outcome y and a time t.
 * Storage grows with the records held, by doubling, up to the capacity
 * (so a store that never fills costs what it holds, not its bound); a
 * growth the store's budget (calib_budget, calib.h) or malloc refuses
 * lowers the capacity to what is allocated instead: the ring then wraps
 * there, the reservoir samples that many. Once full, offering and pushing
 * never allocate.
 *
 * calib_rng is xoshiro256** seeded through splitmix64: the same seed gives
 * the same stream on every platform.
 */
#ifndef CALIB_SAMPLE_H
#define CALIB_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct calib_rng {
    uint64_t s[4];
} calib_rng;

void calib_rng_seed(calib_rng *r, uint64_t seed);
uint64_t calib_rng_next(calib_rng *r);
double calib_rng_uniform(calib_rng *r);  /* in (0, 1) */
double calib_rng_normal(calib_rng *r);   /* standard normal */
/* A class drawn with probabilities p[0..k) (summing to 1 up to rounding);
 * never one whose p is 0, even when rounding leaves the total below 1. */
size_t calib_rng_categorical(calib_rng *r, const double *p, size_t k);

typedef struct calib_record {
    const double *x; /* width outputs */
    double y;
    double t;
} calib_record;

struct calib_budget;

typedef struct calib_store {
    size_t width;   /* outputs per record */
    size_t cap;     /* records at most */
    size_t len;     /* records held */
    size_t alloc;   /* records allocated: len <= alloc <= cap */
    double *data;   /* alloc * (width + 2): x..., y, t */
    struct calib_budget *budget; /* the bytes come from it; NULL: no limit */
} calib_store;

/* The first records a store allocates (fewer if its capacity is lower). */
#define CALIB_STORE_FIRST 16

/* Allocates the first records; CALIB_EINVAL for a width or cap
 * calib_store_bytes refuses, CALIB_ENOMEM (malloc or the budget). */
int calib_store_init(calib_store *s, size_t width, size_t cap,
                     struct calib_budget *budget);
/* Bytes a store of cap records holds when full (a ring's or a
 * reservoir's most); 0 for a width or cap it refuses. */
size_t calib_store_bytes(size_t width, size_t cap);
/* Bytes a store holds now. */
size_t calib_store_held(const calib_store *s);
/* Makes room for n records (n <= cap), growing by doubling: CALIB_OK,
 * CALIB_EINVAL (n > cap), CALIB_ENOMEM (nothing changed). */
int calib_store_reserve(calib_store *s, size_t n);
/* Lowers the capacity to the records allocated (a growth that was
 * refused): the store holds no more from then on. */
void calib_store_stop(calib_store *s);
/* Lowers the capacity to n records (len <= n <= cap), giving back what is
 * allocated past n: a store restored where it had stopped. CALIB_OK,
 * CALIB_EINVAL (n out of range), CALIB_ENOMEM (nothing changed). */
int calib_store_limit(calib_store *s, size_t n);
void calib_store_free(calib_store *s);
/* dst becomes a copy of src that shares no memory with it and takes its
 * bytes from no budget (budget NULL); free it with calib_store_free.
 * CALIB_OK, or CALIB_ENOMEM (dst then holds nothing). */
int calib_store_copy(calib_store *dst, const calib_store *src);
/* Record i in storage order (i < len). */
calib_record calib_store_get(const calib_store *s, size_t i);

/*
 * A read-only view of n labelled records laid out as in calib_store: record i
 * starts at rec + i * stride, holds calib_form_width(form, k) outputs, then y
 * (and, in a store, t). What recalibration fits and evaluates on.
 */
typedef struct calib_dataset {
    int form;      /* enum calib_form */
    size_t k;      /* classes (2 for CALIB_FORM_BINARY, 0 for GAUSSIAN) */
    size_t n;
    size_t stride; /* doubles from one record to the next, >= width + 1 */
    const double *rec;
} calib_dataset;

typedef struct calib_ring {
    /* private: read through the functions below */
    calib_store s;
    size_t head;    /* slot of the next write */
    /* read-only */
    uint64_t total; /* records ever pushed */
} calib_ring;

int calib_ring_init(calib_ring *r, size_t width, size_t cap,
                    struct calib_budget *budget);
void calib_ring_free(calib_ring *r);
/* As calib_store_copy, the ring's place and count with it. */
int calib_ring_copy(calib_ring *dst, const calib_ring *src);
void calib_ring_push(calib_ring *r, const double *x, double y, double t);
/* The i-th oldest record held (0 = oldest, len - 1 = newest). */
calib_record calib_ring_get(const calib_ring *r, size_t i);
size_t calib_ring_len(const calib_ring *r);
/* Records the ring holds at most (it wraps there). */
size_t calib_ring_cap(const calib_ring *r);
/* The slot (< the records allocated) of the i-th oldest record (i < len):
 * where a caller keeps what goes with each record. Record numbers
 * (total) say nothing of slots: a ring restored where it had stopped is
 * laid out afresh, oldest first. */
size_t calib_ring_slot(const calib_ring *r, size_t i);

typedef struct calib_reservoir {
    /* private: read through the functions below */
    calib_store s;
    /* read-only */
    uint64_t seen;  /* records offered */
    /* private */
    uint64_t skip;  /* records still to skip before the next replacement */
    double w;       /* Algorithm L's W */
    calib_rng rng;
} calib_reservoir;

int calib_reservoir_init(calib_reservoir *r, size_t width, size_t cap,
                         uint64_t seed, struct calib_budget *budget);
void calib_reservoir_free(calib_reservoir *r);
/* As calib_store_copy, the sampler's state (its generator too) with it. */
int calib_reservoir_copy(calib_reservoir *dst, const calib_reservoir *src);
/* Offers a record; returns the slot it was stored in, or -1 if skipped. */
long calib_reservoir_offer(calib_reservoir *r, const double *x, double y,
                           double t);
/* Records the reservoir holds now (at most its capacity). */
size_t calib_reservoir_len(const calib_reservoir *r);
/* Merges src into dst (same width): dst then holds a uniform sample, of at
 * most its capacity, of the records offered to either, and has seen both
 * counts (calibctl merge). CALIB_EINVAL for another width, CALIB_ENOMEM
 * (dst unchanged). */
int calib_reservoir_merge(calib_reservoir *dst, const calib_reservoir *src);

#ifdef __cplusplus
}
#endif

#endif
