/*
 * registry.c — the daemon's models by name: a hashed lookup, creation
 * (auto_models, max_models, memory_limit) and the shaping that fixes a
 * model's form and K (calibd(8), LIMITS). What the models hold is taken
 * from one budget of memory_limit bytes (d->reg.mem), as they grow.
 */
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "recalib.h"
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

/* A join table's hash seed: random per process, distinct per model (a
 * count of models ever made, not of those held: removals free numbers). */
static uint64_t model_seed(calibd *d)
{
    return d->hash_seed + 0x9e3779b97f4a7c15ULL * ++d->reg.made;
}

/* The daemon's budget: memory_limit, which tests may change meanwhile. */
static calib_budget *budget(calibd *d)
{
    d->reg.mem.limit = d->cfg.memory_limit < SIZE_MAX ? (size_t)d->cfg.memory_limit : SIZE_MAX;
    return &d->reg.mem;
}

/* What a failed allocation of `what` is: REJ_MEMORY_LIMIT when the budget
 * refused it (refused counted more than `refused`), else out of memory;
 * why says what to do. */
static int refusal(calibd *d, uint64_t refused, const char *what, char *why, size_t len)
{
    if (d->reg.mem.refused == refused) {
        snprintf(why, len, "out of memory for %s", what);
        return CALIB_REJ_NO_MEMORY;
    }
    snprintf(why, len, "the models hold %zu bytes of memory_limit = %zu, no room for %s; "
             "raise memory_limit, or lower max_models or the models' max_pending, "
             "joined_memory, ring or reservoir", d->reg.mem.used, d->reg.mem.limit, what);
    return REJ_MEMORY_LIMIT;
}

/* Fixes a model's form and K, and starts its closed loop; on failure the
 * model stays unshaped, its waiting labels kept, and why says what to do. */
int registry_shape(calibd *d, model *m, int form, size_t k, char *why, size_t len)
{
    model_sizes sz;
    model_size(&m->cfg, form, k, &sz);
    uint64_t refused = budget(d)->refused;
    int rc = 0;
    if (!sz.bytes) {
        snprintf(why, len, "K = %zu is too large to be sized", k);
        return CALIB_REJ_NO_MEMORY;
    }
    if (model_shape(m, form, k) != CALIB_OK)
        rc = 1;
    else if (recalib_attach(d, m) != 0) {
        model_unshape(m);
        rc = 1;
    }
    if (rc) {
        char what[64];
        snprintf(what, sizeof what, "the model's state (K = %zu)", k);
        return refusal(d, refused, what, why, len);
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
    char why[ERR_MAX];
    int rc = registry_shape(d, m, c->form, k, why, sizeof why);
    if (rc)
        log_msg(&d->log, LOG_ERROR, "model", "%s: the configured shape is refused: %s",
                m->name, why);
    return rc;
}

static model *new_model(calibd *d, const char *name, int *reject)
{
    if (d->reg.n - d->reg.leaving >= d->cfg.max_models) {
        *reject = REJ_TOO_MANY_MODELS;
        return NULL;
    }
    if (!d->reg.index) {
        /* a power of two, at least twice max_models: never full */
        d->reg.index_cap = 2;
        while (d->reg.index_cap < 2 * d->cfg.max_models)
            d->reg.index_cap <<= 1;
        if (!(d->reg.index = malloc(d->reg.index_cap * sizeof *d->reg.index))) {
            *reject = CALIB_REJ_NO_MEMORY;
            return NULL;
        }
        memset(d->reg.index, 0xff, d->reg.index_cap * sizeof *d->reg.index);
    }
    if (d->reg.n == d->reg.cap) {
        size_t cap = d->reg.cap ? 2 * d->reg.cap : 8;
        model **v = realloc(d->reg.models, cap * sizeof *v);
        if (!v) {
            *reject = CALIB_REJ_NO_MEMORY;
            return NULL;
        }
        d->reg.models = v;
        d->reg.cap = cap;
    }
    model *m = malloc(sizeof *m);
    if (!m) {
        *reject = CALIB_REJ_NO_MEMORY;
        return NULL;
    }
    model_cfg mc;
    char why[ERR_MAX];
    config_model_for(&d->cfg, name, &mc);
    uint64_t refused = budget(d)->refused;
    /* the join table exists from the start, so labels that come before the
     * model's first prediction wait for it, whatever the model's shape */
    if (model_init(m, &mc, model_seed(d), &d->reg.mem) != CALIB_OK) {
        *reject = refusal(d, refused, "a new model", why, sizeof why);
        free(m);
        return NULL;
    }
    /* before its loop attaches: a Kafka partition's model keeps its
     * parameters in the group's directory (recalib_state_dir) */
    m->kpart = d->source;
    int rc = configured_shape(d, m);
    if (rc) {
        model_free(m);
        free(m);
        *reject = rc;
        return NULL;
    }
    m->created_mono = tick_now(d);
    d->reg.models[d->reg.n] = m;
    index_add(d, (uint32_t)d->reg.n++);
    log_msg(&d->log, LOG_INFO, "model", "%s: created%s", m->name,
            m->shaped ? " (shape from configuration)" : "");
    return m;
}

/* The model of that name among d->reg.models in order (no index: a registry
 * filled by hand, as calibctl snapshot's is). */
static model *scan(const calibd *d, const char *name, size_t len)
{
    for (size_t i = 0; i < d->reg.n; i++)
        if (strlen(d->reg.models[i]->name) == len && memcmp(d->reg.models[i]->name, name, len) == 0)
            return d->reg.models[i];
    return NULL;
}

model *registry_find(const calibd *d, const char *name, size_t len)
{
    if (!d->reg.index)
        return scan(d, name, len);
    uint32_t mask = (uint32_t)d->reg.index_cap - 1;
    for (uint32_t i = (uint32_t)name_hash(d, name, len) & mask;; i = (i + 1) & mask) {
        uint32_t slot = d->reg.index[i];
        if (slot == INDEX_EMPTY)
            return NULL;
        const model *m = d->reg.models[slot];
        if (m->name_len == len && memcmp(m->name, name, len) == 0)
            return d->reg.models[slot];
    }
}

/* Files model number slot under its name (the table never fills: at least
 * twice as many places as max_models). */
static void index_add(calibd *d, uint32_t slot)
{
    const char *name = d->reg.models[slot]->name;
    uint32_t mask = (uint32_t)d->reg.index_cap - 1;
    uint32_t i = (uint32_t)name_hash(d, name, strlen(name)) & mask;
    while (d->reg.index[i] != INDEX_EMPTY)
        i = (i + 1) & mask;
    d->reg.index[i] = slot;
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

/* Files every model again, after the slots moved. */
static void index_rebuild(calibd *d)
{
    if (!d->reg.index)
        return;
    memset(d->reg.index, 0xff, d->reg.index_cap * sizeof *d->reg.index);
    for (size_t j = 0; j < d->reg.n; j++)
        if (!d->reg.models[j]->handed_over)
            index_add(d, (uint32_t)j);
}

void registry_hand_over(calibd *d, model *const *models, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d->reg.leaving += !models[i]->handed_over;
        models[i]->handed_over = 1;
        models[i]->forget = 1;
    }
    if (n)
        index_rebuild(d);
}

void registry_remove(calibd *d, model *m)
{
    size_t i = 0;
    while (i < d->reg.n && d->reg.models[i] != m)
        i++;
    if (i == d->reg.n)
        return;
    d->reg.leaving -= m->handed_over != 0;
    model_free(m);
    free(m);
    memmove(&d->reg.models[i], &d->reg.models[i + 1], (d->reg.n - i - 1) * sizeof *d->reg.models);
    d->reg.n--;
    index_rebuild(d);
}

/* The loop's time of the model's last message, or of its creation. */
static double last_seen(const model *m)
{
    double t = m->created_mono;
    t = m->last_label_mono > t ? m->last_label_mono : t;
    return m->last_prediction_mono > t ? m->last_prediction_mono : t;
}

void registry_walk_begin(registry *r)
{
    r->walks++;
}

void registry_walk_end(registry *r)
{
    if (r->walks) /* a walk ends once */
        r->walks--;
}

int registry_walked(const calibd *d)
{
    return d->reg.walks > 0;
}

size_t registry_collect(calibd *d, double now, int busy)
{
    if (busy)
        return 0;
    /* one pass: the models that stay move down in order, the index is
     * rebuilt once (a flood of names expires in one tick) */
    size_t kept = 0;
    double ttl = d->cfg.model_idle_ttl;
    for (size_t i = 0; i < d->reg.n; i++) {
        model *m = d->reg.models[i];
        int phase = m->recalib.refit.phase;
        int idle = ttl > 0 && m->scored == 0 && now - last_seen(m) >= ttl &&
                   !config_find_model(&d->cfg, m->name);
        if ((!m->forget && !idle) || phase == PHASE_FITTING || phase == PHASE_STORING ||
            m->recalib.trig_fitting || m->recalib.seg_storing) { /* a worker holds it */
            d->reg.models[kept++] = m;
            continue;
        }
        log_msg(&d->log, LOG_INFO, "model", "%s: %s", m->name,
                m->handed_over ? "handed over with its Kafka partition"
                : m->forget ? "forgotten (calibctl forget)"
                            : "expired: no pair, and no message for model_idle_ttl");
        *(m->handed_over ? &d->reg.handed_over : m->forget ? &d->reg.forgotten
                                                           : &d->reg.expired) += 1;
        d->reg.leaving -= m->handed_over != 0;
        model_free(m);
        free(m);
    }
    size_t gone = d->reg.n - kept;
    d->reg.n = kept;
    if (gone)
        index_rebuild(d);
    return gone;
}

void registry_free(calibd *d)
{
    for (size_t i = 0; i < d->reg.n; i++) {
        model_free(d->reg.models[i]);
        free(d->reg.models[i]);
    }
    free(d->reg.models);
    d->reg.models = NULL;
    d->reg.n = d->reg.cap = d->reg.leaving = 0;
    free(d->reg.index);
    d->reg.index = NULL;
    d->reg.index_cap = 0;
}

