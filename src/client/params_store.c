/* params_store.c — one model's parameters on a serving node: one writer,
 * lock-free readers (see params_store.h). */
#include <sched.h>
#include <string.h>

#include "calib/calib.h"
#include "params_store.h"

_Static_assert(sizeof(double) == sizeof(uint64_t), "doubles travel as 64 bits");

int pstore_init(pstore *s, const char *name, size_t len)
{
    if (len > CALIB_PUBMSG_MODEL_MAX)
        return CALIB_EINVAL;
    memset(s, 0, sizeof *s);
    if (pthread_mutex_init(&s->lock, NULL) != 0)
        return CALIB_ENOMEM;
    memcpy(s->name, name, len);
    s->name[len] = '\0';
    s->name_len = len;
    calib_params_msg_init(&s->full, s->name);
    atomic_init(&s->seq, 0);
    atomic_init(&s->version, 0);
    atomic_init(&s->desc, NULL);
    for (unsigned j = 0; j < CALIB_RECAL_MAX_PARAMS; j++)
        atomic_init(&s->bits[j], 0);
    atomic_init(&s->nweights, 0);
    for (unsigned j = 0; j < CALIB_PUBMSG_MAX_WEIGHTS; j++)
        atomic_init(&s->wbits[j], 0);
    return CALIB_OK;
}

void pstore_destroy(pstore *s)
{
    pthread_mutex_destroy(&s->lock);
}

/* The seqlock's writer. */
static void snap_store(pstore *s, const calib_params_msg *p)
{
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    /* no store below may become visible before the odd sequence */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->version, p->version, memory_order_relaxed);
    atomic_store_explicit(&s->desc, p->desc, memory_order_relaxed);
    for (unsigned j = 0; j < CALIB_RECAL_MAX_PARAMS; j++) {
        uint64_t b = 0;
        if (j < p->nparams)
            memcpy(&b, &p->values[j], sizeof b);
        atomic_store_explicit(&s->bits[j], b, memory_order_relaxed);
    }
    unsigned nw = p->nweights <= CALIB_PUBMSG_MAX_WEIGHTS ? p->nweights : 0;
    for (unsigned j = 0; j < nw; j++) {
        uint64_t b;
        memcpy(&b, &p->weights[j], sizeof b);
        atomic_store_explicit(&s->wbits[j], b, memory_order_relaxed);
    }
    atomic_store_explicit(&s->nweights, nw, memory_order_relaxed);
    atomic_store_explicit(&s->nsegments, p->nsegments, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 2, memory_order_release);
}

int pstore_install(pstore *s, const calib_params_msg *p)
{
    /* only the writer writes the version: a plain read of it is current */
    if (p->version <= atomic_load_explicit(&s->version, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&s->lock);
    s->full = *p;
    pthread_mutex_unlock(&s->lock);
    snap_store(s, p);
    return 1;
}

void pstore_load(pstore *s, pstore_snapshot *out)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (!(q & 1)) {
            out->version = atomic_load_explicit(&s->version, memory_order_relaxed);
            out->desc = atomic_load_explicit(&s->desc, memory_order_relaxed);
            for (unsigned j = 0; j < CALIB_RECAL_MAX_PARAMS; j++) {
                uint64_t b = atomic_load_explicit(&s->bits[j], memory_order_relaxed);
                memcpy(&out->values[j], &b, sizeof b);
            }
            unsigned nw = atomic_load_explicit(&s->nweights, memory_order_relaxed);
            out->nweights = nw <= CALIB_PUBMSG_MAX_WEIGHTS ? nw : 0;
            for (unsigned j = 0; j < out->nweights; j++) {
                uint64_t b = atomic_load_explicit(&s->wbits[j], memory_order_relaxed);
                memcpy(&out->weights[j], &b, sizeof b);
            }
            /* the loads above happen before the re-read of seq */
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->seq, memory_order_relaxed) == q)
                return;
        }
        /* a writer is mid-update (a few stores): let it finish */
        if (spins >= 16)
            sched_yield();
    }
}

int pstore_segment(pstore *s, const char *const *keys, const char *const *values, size_t n,
                   pstore_snapshot *out)
{
    pthread_mutex_lock(&s->lock);
    const calib_params_msg *p = &s->full;
    const calib_params_segment *sg = calib_params_segment_find(p, keys, values, n);
    out->version = p->version;
    out->desc = p->desc;
    memcpy(out->values, sg ? sg->values : p->values, sizeof out->values);
    out->nweights = p->nweights;
    memcpy(out->weights, p->weights, sizeof out->weights);
    pthread_mutex_unlock(&s->lock);
    return sg != NULL;
}

void pstore_get(pstore *s, calib_params_msg *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->full;
    pthread_mutex_unlock(&s->lock);
}

uint64_t pstore_version(pstore *s)
{
    return atomic_load_explicit(&s->version, memory_order_acquire);
}
