/*
 * registry.c — the daemon's models by name: a hashed lookup, creation
 * (auto_models, CFG_MAX_MODELS, memory_limit) and the shaping that fixes a
 * model's form and K and charges what it may hold (calibd(8), LIMITS).
 */
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "loop.h"
#include "registry.h"

#define INDEX_EMPTY UINT32_MAX

static void index_add(calibd *d, uint32_t slot);

/* A name's place in the index: seeded (names come from producers), so a
 * set of colliding names cannot be prepared in advance. */
static uint64_t name_hash(const calibd *d, const char *name, size_t len)
{
    calib_id id;
    if (len <= CALIB_ID_MAX && calib_id_str(&id, name, len) == CALIB_OK)
        return calib_id_hash(&id, d->hash_seed);
    uint64_t h = d->hash_seed ^ 0xcbf29ce484222325ULL; /* FNV-1a, longer names */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 0x100000001b3ULL;
    return h;
}

/* A join table's hash seed: random per process, distinct per model. */
static uint64_t model_seed(const calibd *d)
{
    return d->hash_seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(d->nmodels + 1);
}

/*
 * Charges the most a model may hold, need bytes where it held had, against
 * memory_limit (calibd(8), LIMITS): 0, or REJ_MEMORY_LIMIT with what to
 * change in why. need 0: the model cannot even be sized.
 */
static int charge(calibd *d, size_t had, size_t need, char *why, size_t len)
{
    size_t others = d->model_bytes - had;
    uint64_t limit = d->cfg.memory_limit;
    if (!need || need > limit || others > limit - need) {
        snprintf(why, len, "it would hold up to %zu bytes, the other models up to %zu, over "
                 "memory_limit = %llu; raise memory_limit, or lower the model's join_memory, "
                 "sample_memory, max_pending or joined_memory", need, others,
                 (unsigned long long)limit);
        return REJ_MEMORY_LIMIT;
    }
    d->model_bytes = others + need;
    return 0;
}

/* Fixes a model's form and K, and starts its closed loop; on failure the
 * model stays unshaped, its waiting labels kept, and why says what to do. */
int registry_shape(calibd *d, model *m, int form, size_t k, char *why, size_t len)
{
    model_sizes sz;
    size_t had = m->sizes.bytes;
    model_size(&m->cfg, form, k, &sz);
    int rc = charge(d, had, sz.bytes, why, len);
    if (rc)
        return rc;
    if (model_shape(m, form, k) != CALIB_OK)
        rc = CALIB_REJ_NO_MEMORY;
    else if (loop_attach(d, m) != 0) {
        model_unshape(m);
        rc = CALIB_REJ_NO_MEMORY;
    }
    if (rc) {
        d->model_bytes = d->model_bytes - sz.bytes + m->sizes.bytes;
        snprintf(why, len, "out of memory for the model's state (K = %zu)", k);
        return rc;
    }
    const model_cfg *c = &m->cfg;
    if (sz.pending < c->max_pending || sz.ring < c->ring || sz.reservoir < c->reservoir)
        log_msg(&d->log, LOG_INFO, "model", "%s: K = %zu: up to %zu waiting items "
                "(join_memory), %zu ring and %zu reservoir records (sample_memory)",
                m->name, k, sz.pending, sz.ring, sz.reservoir);
    return 0;
}

/* A model configured with its form and K is shaped at creation. */
static int configured_shape(calibd *d, model *m)
{
    const model_cfg *c = &m->cfg;
    if (c->form < 0 || (c->form != CALIB_FORM_GAUSSIAN && c->form != CALIB_FORM_BINARY && !c->k))
        return 0;
    size_t k = c->form == CALIB_FORM_BINARY ? 2 : c->form == CALIB_FORM_GAUSSIAN ? 0 : c->k;
    char why[300];
    int rc = registry_shape(d, m, c->form, k, why, sizeof why);
    if (rc)
        log_msg(&d->log, LOG_ERROR, "model", "%s: the configured shape is refused: %s",
                m->name, why);
    return rc;
}

static model *new_model(calibd *d, const char *name, int *reject)
{
    if (d->nmodels == CFG_MAX_MODELS) {
        *reject = REJ_TOO_MANY_MODELS;
        return NULL;
    }
    if (!d->model_index) {
        d->index_cap = 2 * CFG_MAX_MODELS;
        if (!(d->model_index = malloc(d->index_cap * sizeof *d->model_index))) {
            *reject = CALIB_REJ_NO_MEMORY;
            return NULL;
        }
        memset(d->model_index, 0xff, d->index_cap * sizeof *d->model_index);
    }
    if (d->nmodels == d->cap_models) {
        size_t cap = d->cap_models ? 2 * d->cap_models : 8;
        model **v = realloc(d->models, cap * sizeof *v);
        if (!v) {
            *reject = CALIB_REJ_NO_MEMORY;
            return NULL;
        }
        d->models = v;
        d->cap_models = cap;
    }
    model *m = malloc(sizeof *m);
    if (!m) {
        *reject = CALIB_REJ_NO_MEMORY;
        return NULL;
    }
    model_cfg mc;
    model_sizes sz;
    char why[300];
    config_model_for(&d->cfg, name, &mc);
    model_size(&mc, -1, 0, &sz);
    if ((*reject = charge(d, 0, sz.bytes, why, sizeof why)) != 0) {
        free(m);
        return NULL;
    }
    /* the join table exists from the start, so labels that come before the
     * model's first prediction wait for it, whatever the model's shape */
    int rc = model_init(m, &mc, model_seed(d)) != CALIB_OK ? CALIB_REJ_NO_MEMORY
             : configured_shape(d, m);
    if (rc) {
        d->model_bytes -= m->sizes.bytes ? m->sizes.bytes : sz.bytes;
        model_free(m);
        free(m);
        *reject = rc;
        return NULL;
    }
    d->models[d->nmodels] = m;
    index_add(d, (uint32_t)d->nmodels++);
    log_msg(&d->log, LOG_INFO, "model", "%s: created%s", m->name,
            m->shaped ? " (shape from configuration)" : "");
    return m;
}

model *registry_find(const calibd *d, const char *name, size_t len)
{
    if (!d->model_index)
        return NULL;
    uint32_t mask = (uint32_t)d->index_cap - 1;
    for (uint32_t i = (uint32_t)name_hash(d, name, len) & mask;; i = (i + 1) & mask) {
        uint32_t slot = d->model_index[i];
        if (slot == INDEX_EMPTY)
            return NULL;
        const model *m = d->models[slot];
        if (strlen(m->name) == len && memcmp(m->name, name, len) == 0)
            return d->models[slot];
    }
}

/* Files model number slot under its name (the table never fills: twice as
 * many places as CFG_MAX_MODELS). */
static void index_add(calibd *d, uint32_t slot)
{
    const char *name = d->models[slot]->name;
    uint32_t mask = (uint32_t)d->index_cap - 1;
    uint32_t i = (uint32_t)name_hash(d, name, strlen(name)) & mask;
    while (d->model_index[i] != INDEX_EMPTY)
        i = (i + 1) & mask;
    d->model_index[i] = slot;
}

model *registry_get(calibd *d, const char *name, size_t len, int create, int *reject)
{
    model *m = registry_find(d, name, len);
    if (m || !create)
        return m;
    char buf[CFG_NAME_MAX + 1];
    if (len > CFG_NAME_MAX)
        return NULL;
    memcpy(buf, name, len);
    buf[len] = 0;
    if (!d->cfg.auto_models && !config_find_model(&d->cfg, buf)) {
        *reject = REJ_UNKNOWN_MODEL;
        return NULL;
    }
    return new_model(d, buf, reject);
}

void registry_free(calibd *d)
{
    for (size_t i = 0; i < d->nmodels; i++) {
        model_free(d->models[i]);
        free(d->models[i]);
    }
    free(d->models);
    d->models = NULL;
    d->nmodels = d->cap_models = 0;
    d->model_bytes = 0;
    free(d->model_index);
    d->model_index = NULL;
    d->index_cap = 0;
}

