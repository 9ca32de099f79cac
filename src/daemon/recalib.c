/* recalib.c — drift -> refit (worker thread) -> shadow gate -> publish: the
 * actions of the closed loop's state machine (refit.c), each outcome of
 * which lands here, and the loop's share of the tick (recalib_tick; the
 * tick itself is tick.c). Over 1,000 lines because the actions share the
 * jobs' queues and the stores; split, each file would hold half of them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/pubmsg.h"
#include "calib/recal.h"
#include "alert.h"
#include "calibd.h"
#include "recalib.h"
#include "registry.h"
#include "pack.h"
#include "pub.h"
#include "state.h"

static const char *reason_name(int r)
{
    const char *n = refit_reason_name(r);
    return n ? n : "none";
}

void recalib_format_params(const model_params *p, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (unsigned i = 0; p->desc && i < p->n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s=%.6g", i ? " " : "",
                                p->desc->param_names[i], p->values[i]);
}

/* ------------------------------------------------------------ publishing */

/* A published version's figures into s: brier and log, or dss; none for
 * version 0, which no shadow run measured. */
static void scores_of(const model *m, const model_params *p, const double v[2],
                      calib_pubmsg_scores *s)
{
    if (p->version == 0)
        return;
    if (m->form == CALIB_FORM_GAUSSIAN) {
        s->dss = v[0];
    } else {
        s->brier = v[0];
        s->log = v[1];
    }
}

void recalib_params_msg(const model *m, double now, calib_params_msg *msg)
{
    const model_params *p = &m->params;
    calib_params_msg_init(msg, m->name);
    msg->ts = now;
    msg->version = p->version;
    snprintf(msg->method, sizeof msg->method, "%s", p->method);
    msg->nparams = p->desc ? p->n : 0;
    for (unsigned i = 0; i < msg->nparams; i++) {
        snprintf(msg->names[i], sizeof msg->names[i], "%s", p->desc->param_names[i]);
        msg->values[i] = p->values[i];
    }
    msg->nsegments = p->desc ? p->nseg : 0; /* extension: per-segment parameters */
    memcpy(msg->segments, p->seg, msg->nsegments * sizeof *msg->segments);
    msg->nweights = p->desc ? p->nw : 0; /* extension: the prior correction */
    memcpy(msg->weights, p->w, msg->nweights * sizeof *msg->weights);
    msg->label_free = p->label_free;
    msg->published = p->ts; /* extension: when this version was first sent */
    msg->n = p->fit_n;
    msg->shadow_n = p->shadow_n; /* extension */
    scores_of(m, p, p->before, &msg->before);
    scores_of(m, p, p->after, &msg->after);
    /* version 0 is the identity measured against itself: exactly 0 */
    msg->improvement = p->version ? p->improvement : 0;
    msg->ci[0] = p->version ? p->ci[0] : 0;
    msg->ci[1] = p->version ? p->ci[1] : 0;
}

/* The "params" message of the current parameters (calibd-protocol(7)). */
static void send_params(calibd *d, const model *m)
{
    calib_params_msg msg;
    calib_mpw w;
    recalib_params_msg(m, wall_now(), &msg);
    calib_mpw_init(&w);
    calib_params_msg_write(&w, &msg);
    publish_written(d, m->name, &w);
    calib_mpw_destroy(&w);
}

/* ------------------------------------------------------------ attaching */

static const calib_plugin *find_method(calibd *d, const char *name, char *err, size_t len)
{
    const calib_plugin *p = calib_plugin_find(&d->plugins, name);
    if (p)
        return p;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.so", d->cfg.plugin_dir, name);
    if (calib_plugin_load(&d->plugins, path, err, len) != CALIB_OK)
        return NULL;
    return calib_plugin_find(&d->plugins, name);
}

/* Whether method p handles this model's outputs: its identity applied to
 * a valid record must succeed (Platt, for one, needs K = 2). */
static int method_fits(model *m, const calib_plugin *p)
{
    if (!(p->forms & CALIB_FORM_BIT(m->form)))
        return 0;
    double *x = m->xcal;
    for (size_t i = 0; i < m->width; i++)
        x[i] = m->form == CALIB_FORM_PROBS ? 1.0 / (double)m->k : 0.5;
    if (m->form == CALIB_FORM_GAUSSIAN)
        x[0] = 0, x[1] = 1;
    return p->apply(p->identity, m->form, m->k, x, m->recalib.xcand) == CALIB_OK;
}

static void identity_params(model_params *p, const calib_plugin *desc)
{
    memset(p, 0, sizeof *p);
    p->n = desc->nparams;
    memcpy(p->values, desc->identity, sizeof p->values);
    p->before[0] = p->before[1] = p->after[0] = p->after[1] = NAN;
    p->improvement = NAN;
    p->ci[0] = p->ci[1] = NAN;
}

const char *recalib_state_dir(const calibd *d, const model *m)
{
    return m->kpart ? d->cfg.kafka.state_dir : d->cfg.state_dir;
}

int recalib_attach(calibd *d, model *m)
{
    const model_cfg *c = &m->cfg;
    int gauss = m->form == CALIB_FORM_GAUSSIAN;
    double now = tick_now(d);
    char err[ERR_MAX];
    model_params p;
    model_paired_reset(m, 0, steady_now(d)); /* stays so if the loop is off */
    state_param_names names;
    const char *dir = recalib_state_dir(d, m);
    int rc = state_load_params(dir, m->name, &p, names, err, sizeof err);
    if (rc < 0) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: %s; the loop is off for this model until "
                "the file is repaired or removed (a version must never go back)", m->name, err);
        return 0;
    }
    const char *name = rc == 0 ? p.method
                       : strcmp(c->method, "auto") != 0 ? c->method
                       : gauss ? "location_scale" : "temperature";
    const calib_plugin *desc = find_method(d, name, err, sizeof err);
    if (!desc || !method_fits(m, desc)) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: method %s %s; the loop is off for this "
                "model", m->name, name, !desc ? err : "does not handle this model's outputs");
        return 0;
    }
    if (rc == 0 && state_params_by_name(&p, names, desc, err, sizeof err) != 0) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: the stored parameters in %s/model.%s.params "
                "do not fit method %s: %s; the loop is off for this model until the file is "
                "repaired or removed", m->name, dir, m->name, desc->name, err);
        return 0;
    }
    if (rc == 0 && calib_plugin_params_check(desc, p.values, err, sizeof err) != CALIB_OK) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: the stored parameters in %s/model.%s.params "
                "are refused (%s); they are not published, and the loop is off for this "
                "model until the file is repaired or removed", m->name, dir,
                m->name, err);
        return 0;
    }
    unsigned holds = 0;
    if (c->fit_params[0] && strcmp(desc->name, "location_scale") != 0) {
        /* method auto for a classifier, or a stored method: it fits all */
        log_msg(&d->log, LOG_WARN, "loop", "%s: fit_params = %s is location_scale's; "
                "method %s fits all its parameters", m->name, c->fit_params, desc->name);
    } else if (model_fit_holds(c->fit_params, desc, &holds, err, sizeof err) != 0) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: fit_params: %s; the loop is off for this "
                "model", m->name, err);
        return 0;
    }
    m->recalib.fit_holds = holds;
    if (rc == 1)
        identity_params(&p, desc);
    p.desc = desc;
    snprintf(p.method, sizeof p.method, "%s", desc->name);
    p.identity = model_params_is_identity(&p);
    m->params = p;
    model_paired_reset(m, p.version, steady_now(d));
    /* a label-free version restored: the predictions from before the
     * restart may be of the mix it corrected */
    m->recalib.fresh_from = p.label_free ? mono_now() : 0;
    char v[200];
    recalib_format_params(&p, v, sizeof v);
    model_event_add(m, wall_now(), "start", "%s version %llu: %s %s", rc == 0 ? "restored" :
                    "identity,", (unsigned long long)p.version, p.method, v);
    if (rc == 0) {
        log_msg(&d->log, LOG_INFO, "loop", "%s: parameters version %llu restored (%s %s)",
                m->name, (unsigned long long)p.version, p.method, v);
        if (strcmp(c->method, "auto") != 0 && strcmp(c->method, p.method) != 0)
            log_msg(&d->log, LOG_WARN, "loop", "%s: method = %s is configured, but the "
                    "stored parameters are %s, which stay in force and are refitted; remove "
                    "%s/model.%s.params to change the method (the next version restarts "
                    "from 1)", m->name, c->method, p.method, dir, m->name);
    }
    if ((rc = model_recalib_attach(m, now)) != CALIB_OK) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: drift detector: %s", m->name,
                calib_strerror(rc));
        return rc == CALIB_ENOMEM ? -1 : 0;
    }
    return 0;
}

/* ------------------------------------------------------------ the machine's shell */

static void drift_restart(calibd *d, model *m);
static int start_refit(calibd *d, model *m, size_t n, int reason);
static void publish_candidate(calibd *d, model *m);
static void publish_rollback(calibd *d, model *m);
struct store_job;
static void side_stored(calibd *d, model *m, struct store_job *j, int status);
static void guard_start(model *m, const model_params *prev);

/* Samples a refit needs: refit_min_samples, or all the ring can hold. */
static size_t refit_need(const model *m)
{
    size_t cap = calib_ring_cap(&m->ring);
    return m->cfg.refit_min_samples < cap ? (size_t)m->cfg.refit_min_samples : cap;
}

/* What the closed loop's machine reads of the model now. */
static refit_in machine_in(const model *m)
{
    const model_recalib *l = &m->recalib;
    size_t len = calib_ring_len(&m->ring);
    const calib_drift *dr = model_drift_alarmed(m, NULL);
    int alarm = dr != NULL;
    uint64_t change = alarm ? l->drift_base + dr->change_at : m->ring.total;
    uint64_t since = m->ring.total > change ? m->ring.total - change : 0;
    int guard = l->guard_on && l->guard.state == CALIB_GATE_PASSED;
    int miscal = l->trig_on && l->trig.state == CALIB_GATE_PASSED;
    uint64_t since_trig = m->ring.total - l->trig_start;
    return (refit_in){.drift_alarm = alarm, .guard_alarm = guard, .miscal_alarm = miscal,
                      .available = len,
                      .since_change = since < len ? (size_t)since : len,
                      .since_trigger = since_trig < len ? (size_t)since_trig : len,
                      .want = (size_t)m->cfg.refit_samples, .need = refit_need(m),
                      .seen = m->ring.total, .auto_publish = m->cfg.auto_publish};
}

static void act(calibd *d, model *m, const refit_out *o);
static void trigger_restart(model *m, int quiet);

/* One event through the model's machine, then what it says to do. */
static unsigned feed(calibd *d, model *m, int event, refit_out *o)
{
    refit_in in = machine_in(m);
    refit_step(&m->recalib.refit, event, tick_now(d), &in, o);
    act(d, m, o);
    return o->actions;
}

/* The machine's actions that need nothing but the model: counters, the
 * start of a fit or a store, the drift detector's restart. Starting the
 * shadow run and publishing need the worker's result: their callbacks do
 * that part. A start that fails is fed back as its failure. */
static void act(calibd *d, model *m, const refit_out *o)
{
    model_recalib *l = &m->recalib;
    unsigned a = o->actions;
    refit_out again;
    l->rejected += !!(a & ACT_REJECTED);
    l->withheld += !!(a & ACT_WITHHELD);
    l->refit_errors += !!(a & ACT_FIT_FAILED);
    l->store_errors += !!(a & ACT_STORE_FAILED);
    /* a rollback is counted by store_done, not as a candidate published */
    l->published += (a & ACT_PUBLISH) && o->reason != REFIT_ROLLBACK;
    if (a & ACT_SKIPPED)
        log_msg(&d->log, LOG_DEBUG, "loop", "%s: scheduled refit skipped: %s", m->name,
                o->refusal);
    if (a & ACT_CANCELLED) {
        l->cancelled++;
        log_msg(&d->log, LOG_INFO, "loop", "%s: the %s refit's candidate is cancelled: a "
                "drift alarm came after the samples it was fit on; the drift's refit follows, "
                "on samples after the change point", m->name, reason_name(o->cancelled));
        model_event_add(m, wall_now(), "cancelled", "the %s refit's candidate is cancelled: "
                        "fit before the drift; refit on the new regime follows",
                        reason_name(o->cancelled));
    }
    if (a & ACT_DRIFT_RESTART)
        drift_restart(d, m);
    if (a & ACT_TRIGGER_RESTART) /* quiet for a period unless it changed the parameters */
        trigger_restart(m, !(a & ACT_PUBLISH));
    if ((a & ACT_START_FIT) && start_refit(d, m, o->samples, o->reason) != 0)
        feed(d, m, EV_FIT_FAILED, &again);
    if ((a & ACT_STORE) && l->seg_storing) /* one version stores at a time */
        l->store_deferred = 1 + o->reason;
    else if ((a & ACT_STORE) && o->reason == REFIT_ROLLBACK)
        publish_rollback(d, m);
    else if (a & ACT_STORE)
        publish_candidate(d, m);
}

/* ------------------------------------------------------------ refit job */

typedef struct refit_job {
    uv_work_t req;
    calibd *d;
    model *m;
    int reason;
    int challenger;        /* the miscalibration trigger's fit, not a refit */
    const calib_plugin *desc;
    double *data;
    uint64_t first;        /* record number of the first sample to copy */
    size_t n;              /* samples to copy */
    struct refit_job *next; /* the copy queue */
    int form;              /* the model's, for the worker's check */
    size_t k;
    double *out;           /* the worker's: one record's outputs */
    int usable;            /* the worker's verdict on the fit (fit_usable) */
    double copy_s, copy_slice; /* the copy: seconds in all, its longest slice */
    uint64_t copy_begun;   /* uv_hrtime when its copy began */
    calib_dataset ds;
    double init[PARAMS_MAX];
    unsigned holds;        /* CALIB_RECAL_HOLD flags (fit_params) */
    calib_recal_result res;
    int rc;
    uint64_t ns; /* time the fit took */
} refit_job;

/* Bytes a fit's copy of n records of m holds. */
static size_t fit_bytes(const model *m, size_t n)
{
    return n * (m->width + 2) * sizeof(double);
}

/* A fit's result must be the method's number of finite parameters that its
 * apply takes on a record of the model (plugins are not trusted). */
static int fit_usable(const refit_job *j)
{
    const calib_recal_result *r = &j->res;
    if (r->nparams != j->desc->nparams)
        return 0;
    for (unsigned i = 0; i < r->nparams; i++)
        if (!isfinite(r->params[i]))
            return 0;
    return j->desc->apply(r->params, j->form, j->k, j->data, j->out) == CALIB_OK;
}

/* The worker thread: reads only the job. The samples are freed here too:
 * unmapping 80 MB takes milliseconds the loop need not spend. */
static void refit_work(uv_work_t *req)
{
    refit_job *j = req->data;
    calib_recal_opts o = {.init = j->init, .flags = j->holds};
    uint64_t t0 = uv_hrtime();
    j->rc = j->desc->fit(&j->ds, &o, &j->res);
    j->ns = uv_hrtime() - t0;
    j->usable = j->rc == CALIB_OK && fit_usable(j);
    free(j->data);
    j->data = NULL;
}

/* The parameters a fit gave, unpublished (version 0, no shadow figures). */
static void params_of_fit(const refit_job *j, model_params *p)
{
    memset(p, 0, sizeof *p);
    p->desc = j->desc;
    snprintf(p->method, sizeof p->method, "%s", j->desc->name);
    p->n = j->res.nparams;
    memcpy(p->values, j->res.params, sizeof p->values);
    p->fit_n = j->ds.n;
    p->identity = model_params_is_identity(p);
}

static void start_shadow(calibd *d, model *m, const refit_job *j)
{
    model_recalib *l = &m->recalib;
    calib_gate_cfg gc;
    model_gate_cfg(m, &gc);
    model_params *p = &l->candidate;
    params_of_fit(j, p);
    model_params_keep_segments(m, p); /* scored as it would be served */
    l->candidates++;
    char v[200];
    recalib_format_params(p, v, sizeof v);
    int rc = calib_gate_init(&l->gate, &gc);
    if (rc != CALIB_OK) { /* the configuration checks make this unreachable */
        log_msg(&d->log, LOG_ERROR, "loop", "%s: candidate %llu (%s) dropped: the gate "
                "refuses min_improvement = %g (%s)", m->name, (unsigned long long)l->candidates,
                v, m->cfg.min_improvement, calib_strerror(rc));
        refit_out o;
        feed(d, m, EV_GATE_REJECTED, &o);
        return;
    }
    calib_accum_init(&l->shadow_log[0]);
    calib_accum_init(&l->shadow_log[1]);
    log_msg(&d->log, LOG_INFO, "loop", "%s: candidate %llu: %s %s, fit on %zu samples in "
            "%.1f ms (objective %.6g -> %.6g; samples copied in %.1f ms, at most %.1f ms at "
            "a time); in shadow", m->name, (unsigned long long)l->candidates, p->method, v,
            j->ds.n, (double)j->ns / 1e6, j->res.objective_before, j->res.objective_after,
            j->copy_s * 1e3, j->copy_slice * 1e3);
    model_event_add(m, wall_now(), "shadow_start", "candidate %llu: %s %s, fit on %zu "
                    "samples; in shadow", (unsigned long long)l->candidates, p->method, v,
                    j->ds.n);
}

/* A challenger's fit ended: it replaces the one the trigger tests (the
 * first starts the trigger's gate). A failure leaves the old one. */
static void challenger_done(calibd *d, model *m, const refit_job *j, int status)
{
    model_recalib *l = &m->recalib;
    l->trig_fitting = 0;
    d->refits.challenger_bytes -= fit_bytes(m, j->n);
    if (d->stopping)
        return;
    if (status != 0 || j->rc != CALIB_OK || !j->usable) {
        log_msg(&d->log, LOG_DEBUG, "loop", "%s: the miscalibration trigger's fit on %zu "
                "samples failed: %s", m->name, j->ds.n,
                status ? uv_strerror(status) : j->rc == CALIB_OK ? "unusable parameters"
                                                                 : calib_plugin_strerror(j->rc));
        return;
    }
    model_params *p = &l->challenger;
    params_of_fit(j, p);
    model_params_keep_segments(m, p); /* scored as it would be served */
    if (!l->trig_on) { /* the first: its regime begins with its samples */
        l->trig_on = 1;
        trigger_restart(m, 0);
        l->trig_start = l->trig_fit_at - (l->trig_fit_at < j->ds.n ? l->trig_fit_at : j->ds.n);
    }
}

static void refit_done(uv_work_t *req, int status)
{
    refit_job *j = req->data;
    calibd *d = j->d;
    model *m = j->m;
    refit_out o;
    if (m->handed_over) { /* another instance's now (kafka.h): nothing follows */
        if (j->challenger) {
            m->recalib.trig_fitting = 0;
            d->refits.challenger_bytes -= fit_bytes(m, j->n);
        } else {
            m->recalib.refit.phase = PHASE_OFF;
        }
    } else if (j->challenger) {
        challenger_done(d, m, j, status);
    } else if (!d->stopping) {
        if (status == 0 && j->rc == CALIB_OK && !j->usable) {
            j->rc = CALIB_ENONFINITE; /* a plugin's fit gave what apply refuses */
            log_msg(&d->log, LOG_WARN, "loop", "%s: the fit of %s returned %u parameters "
                    "that are not finite or that its apply refuses", m->name, j->desc->name,
                    j->res.nparams);
        }
        if (status == 0 && j->rc == CALIB_OK) {
            if (feed(d, m, EV_FIT_DONE, &o) & ACT_START_SHADOW)
                start_shadow(d, m, j);
        } else {
            const char *why = status ? uv_strerror(status) : calib_plugin_strerror(j->rc);
            log_msg(&d->log, LOG_WARN, "loop", "%s: refit (%s) on %zu samples failed: %s",
                    m->name, reason_name(j->reason), j->ds.n, why);
            model_event_add(m, wall_now(), "refit_error", "refit (%s) on %zu samples failed: "
                            "%s", reason_name(j->reason), j->ds.n, why);
            feed(d, m, EV_FIT_FAILED, &o); /* a drift measures anew, not again at once */
        }
    }
    free(j->data); /* NULL unless the worker never ran */
    free(j->out);
    free(j);
}

/*
 * The samples of a refit are copied out of the ring by the loop, a record
 * at a time (slicer.h), before the worker fits on the copy: 10,000 records
 * of K = 1000 are 80 MB, whose copy (and first touch) held the loop for
 * ~30 ms in one go. Jobs wait in a queue, copied one after the other.
 * Messages keep coming meanwhile; a record the ring overwrote before its
 * turn is left out. The copy goes from the newest record back, into the
 * end of the buffer first: the ring overwrites the oldest, so a feed
 * faster than the copy costs the fit its oldest samples, never all of
 * them (copied oldest first, a refit on a full ring once lost every one
 * to the overwrites and failed with "no samples").
 */
static size_t copy_count(void *arg)
{
    refit_job *j = ((calibd *)arg)->refits.head;
    if (j && !j->copy_begun)
        j->copy_begun = uv_hrtime();
    return j ? j->n : 0;
}

static void copy_record(void *arg, size_t i)
{
    refit_job *j = ((calibd *)arg)->refits.head;
    const calib_ring *r = &j->m->ring;
    uint64_t t = j->first + (j->n - 1 - i), held = calib_ring_len(r);
    if (t + held < r->total || t >= r->total)
        return; /* overwritten already */
    calib_record rec = calib_ring_get(r, (size_t)(held - (r->total - t)));
    size_t w = j->m->width, stride = w + 2;
    double *out = j->data + (j->n - 1 - j->ds.n) * stride;
    memcpy(out, rec.x, w * sizeof *out);
    out[w] = rec.y;
    out[w + 1] = rec.t;
    j->ds.n++;
}

static void copied(void *arg)
{
    calibd *d = arg;
    refit_job *j = d->refits.head;
    j->copy_s = (double)(uv_hrtime() - j->copy_begun) * 1e-9;
    j->copy_slice = d->refits.copy.slice_max;
    d->refits.head = j->next;
    if (!d->refits.head)
        d->refits.tail = NULL;
    size_t stride = j->m->width + 2; /* the copied, in time order, at the start */
    if (j->ds.n && j->ds.n < j->n)
        memmove(j->data, j->data + (j->n - j->ds.n) * stride,
                j->ds.n * stride * sizeof *j->data);
    int rc = j->ds.n ? uv_queue_work(d->loop, &j->req, refit_work, refit_done) : 0;
    if (!j->ds.n) {
        j->rc = CALIB_EEMPTY; /* every record overwritten: fed back as a failed fit */
        refit_done(&j->req, 0);
    } else if (rc != 0) {
        refit_done(&j->req, rc);
    }
    if (d->refits.head)
        slicer_start(&d->refits.copy);
}

int recalib_workers_init(calibd *d)
{
    return slicer_init(&d->refits.copy, d->loop, copy_count, copy_record, copied, d);
}

static void store_written(calibd *d)
{
    uv_mutex_lock(&d->stores.lock);
    d->stores.writing--;
    uv_cond_broadcast(&d->stores.done);
    uv_mutex_unlock(&d->stores.lock);
}

void recalib_wait_stores(calibd *d)
{
    uv_mutex_lock(&d->stores.lock);
    while (d->stores.writing)
        uv_cond_wait(&d->stores.done, &d->stores.lock);
    uv_mutex_unlock(&d->stores.lock);
}

void recalib_workers_free(calibd *d)
{
    slicer_close(&d->refits.copy);
    while (d->refits.head) {
        refit_job *j = d->refits.head;
        d->refits.head = j->next;
        free(j->data);
        free(j->out);
        free(j);
    }
    d->refits.tail = NULL;
}

/* Queues a fit of the method in force on the newest n records: a refit of
 * the machine's (reason), or the trigger's challenger. */
static int queue_fit(calibd *d, model *m, size_t n, int reason, int challenger)
{
    size_t w = m->width, stride = w + 2, len = calib_ring_len(&m->ring);
    if (n > len || n > SIZE_MAX / sizeof(double) / stride || !d->refits.copy.ready)
        return -1;
    refit_job *j = calloc(1, sizeof *j);
    double *data = malloc(n * stride * sizeof *data), *out = malloc(w * sizeof *out);
    if (!j || !data || !out) {
        free(j);
        free(data);
        free(out);
        log_msg(&d->log, LOG_ERROR, "loop", "%s: out of memory for a refit on %zu samples",
                m->name, n);
        return -1;
    }
    *j = (refit_job){.d = d, .m = m, .reason = reason, .challenger = challenger,
                     .desc = m->params.desc, .data = data,
                     .first = m->ring.total - n, .n = n, .form = m->form, .k = m->k, .out = out,
                     .ds = {.form = m->form, .k = m->form == CALIB_FORM_GAUSSIAN ? 0 : m->k,
                            .n = 0, .stride = stride, .rec = data}};
    memcpy(j->init, m->params.values, sizeof j->init);
    j->holds = m->recalib.fit_holds;
    j->req.data = j;
    if (d->refits.tail)
        d->refits.tail->next = j;
    else
        d->refits.head = j;
    d->refits.tail = j;
    slicer_start(&d->refits.copy); /* if not copying already */
    return 0;
}

static int start_refit(calibd *d, model *m, size_t n, int reason)
{
    model_recalib *l = &m->recalib;
    if (queue_fit(d, m, n, reason, 0) != 0)
        return -1;
    l->refits++;
    log_msg(&d->log, LOG_INFO, "loop", "%s: refit %llu (%s) of %s on the %zu newest samples",
            m->name, (unsigned long long)l->refits, reason_name(reason), m->params.method, n);
    model_event_add(m, wall_now(), "refit", "refit %llu (%s) of %s on the %zu newest samples",
                    (unsigned long long)l->refits, reason_name(reason), m->params.method, n);
    return 0;
}

size_t recalib_refit_now(calibd *d, model *m, char *why, size_t len)
{
    refit_out o;
    if (!m->shaped) {
        snprintf(why, len, "the model has had no prediction yet");
        return 0;
    }
    feed(d, m, EV_MANUAL, &o);
    if (o.actions & ACT_REFUSED) {
        refit_in in = machine_in(m);
        if (m->recalib.refit.phase == PHASE_IDLE && in.drift_alarm)
            snprintf(why, len, "a drift alarm stands: %zu labelled samples since its change "
                     "point, %zu needed (refit_min_samples)", in.since_change, in.need);
        else if (m->recalib.refit.phase == PHASE_IDLE) /* too few samples */
            snprintf(why, len, "%zu labelled samples in the ring, %zu needed "
                     "(refit_min_samples)", in.available, in.need);
        else
            snprintf(why, len, "%s", o.refusal);
        return 0;
    }
    if (m->recalib.refit.phase != PHASE_FITTING) {
        snprintf(why, len, "cannot start the refit (see calibd's log)");
        return 0;
    }
    return o.samples;
}

/* ------------------------------------------------------------ drift, gate */

static void drift_restart(calibd *d, model *m)
{
    if (!m->recalib.drift_on)
        return;
    model_drift_reset(m);
    alert_incident(d, m, RULE_DRIFT, 0, 1, "drift", "warning", NULL, NULL, 0);
}

/* The reference period's fraction of scores above the robust detector's
 * threshold: the rate its bound was built on. */
static double reference_rate(const calib_drift *dr)
{
    size_t n = dr->cfg.reference, above = 0;
    for (size_t i = 0; dr->ref_x && i < n; i++)
        above += dr->ref_x[i] > dr->threshold;
    return n ? (double)above / (double)n : NAN;
}

/* The alert's message: the level tested (mean score, or for the robust
 * detector the rate above the reference quantile) since the change point,
 * the reference level and the bound the test rejected. */
static void drift_message(const model *m, const calib_drift *dr, int which,
                          const model_level *lv, double ref, char *msg, size_t len)
{
    double e = exp(calib_drift_log_e(dr));
    char since[160];
    snprintf(since, sizeof since, "the %zu %spairs since the estimated change point, after "
             "pair %llu of the %llu watched", lv->n, lv->truncated ? "newest " : "",
             (unsigned long long)(dr->change_at - dr->cfg.reference),
             (unsigned long long)(dr->n - dr->cfg.reference));
    if (which > 0) /* a location test */
        snprintf(msg, len, "the calibrated forecasts' standardised residual lay %s its "
                 "reference median %.4g in a fraction %.4g of %s, against %.4g in the "
                 "reference period; the test rejected a rate of at most %.4g (e-value %.3g): "
                 "the outcomes moved %s the forecast means (mean residual %.4g)",
                 which == 1 ? "above" : "below", which == 1 ? dr->threshold : -dr->threshold,
                 lv->above, since, ref, dr->null_mean, e, which == 1 ? "above" : "below",
                 which == 1 ? lv->mean : -lv->mean);
    else if (m->form == CALIB_FORM_GAUSSIAN)
        snprintf(msg, len, "the calibrated DSS exceeded its reference %.4g-quantile %.4g in "
                 "a fraction %.4g of %s, against %.4g in the reference period; the drift "
                 "test rejected a rate of at most %.4g (e-value %.3g)", dr->cfg.quantile,
                 dr->threshold, lv->above, since, ref, dr->null_mean, e);
    else
        snprintf(msg, len, "the calibrated Brier score %s %.4g over %s, against %.4g in the "
                 "reference period; the drift test rejected a mean of at most %.4g "
                 "(e-value %.3g)", lv->mean > ref ? "rose to" : "is", lv->mean, since, ref,
                 dr->null_mean, e);
}

/*
 * The alert says what the detector tested: the level since the estimated
 * change point. The mean since the reference period would mix in the
 * samples before the change, and could even lie below the reference.
 */
static void on_drift(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    int which = 0;
    const calib_drift *dr = model_drift_alarmed(m, &which);
    if (!dr)
        return;
    int gauss = m->form == CALIB_FORM_GAUSSIAN;
    l->drift_alarms++;
    uint64_t from = l->drift_base + dr->change_at;
    model_level lv = which ? model_z_level_since(m, from, which == 1 ? 1 : -1, dr->threshold)
                           : model_level_since(m, from, dr->threshold);
    double ref = gauss ? reference_rate(dr) : calib_accum_mean(&dr->ref);
    char msg[1024];
    drift_message(m, dr, which, &lv, ref, msg, sizeof msg);
    model_event_add(m, wall_now(), "drift", "%s", msg);
    alert_value v[] = {{"reference", ref}, {"current", gauss ? lv.above : lv.mean},
                       {"bound", dr->null_mean}, {"log_e", calib_drift_log_e(dr)},
                       {"samples", (double)(dr->n - dr->cfg.reference)},
                       {"since_change", (double)lv.n}};
    alert_incident(d, m, RULE_DRIFT, 1, 0, "drift", "warning", msg, v, 6);
}

/* Storing a version durably (two fsyncs) is slow I/O: a worker does it,
 * and the message leaves from the after-work callback, once it is stored. */
typedef struct store_job {
    uv_work_t req;
    calibd *d;
    model *m;
    int rollback; /* p is the version before the one in force, again */
    uint64_t from, to; /* rollback: the version in force, the one restored */
    uint64_t pairs;    /* rollback: the guard's pairs in all */
    int segment;       /* 1 + the index in p->seg of a segment's new parameters */
    int label_free;    /* the prior correction of a label shift (LABEL-FREE) */
    /* what the worker reads: copies, never the daemon's state */
    char dir[4096], name[CFG_NAME_MAX + 1];
    model_params p;
    int saved; /* state_save_params() */
    char err[ERR_MAX];
} store_job;

/* The worker thread: reads only the job. */
static void store_work(uv_work_t *req)
{
    store_job *j = req->data;
    j->saved = state_save_params(j->dir, j->name, &j->p, j->err, sizeof j->err);
    store_written(j->d);
}

/* A model handed over with its Kafka partition (kafka.h) while a version
 * was being stored: the file is written (the next owner reads it), but
 * this instance sends nothing of it any more. */
static int store_handed(calibd *d, model *m, const store_job *j)
{
    if (!m->handed_over)
        return 0;
    log_msg(&d->log, LOG_INFO, "loop", "%s: version %llu %s, not published here: the model "
            "was handed over with its partition", m->name, (unsigned long long)j->p.version,
            j->saved >= 0 ? "stored" : "not stored");
    if (j->segment || j->label_free) { /* only what the job holds: a refit may run */
        m->recalib.seg_storing = 0;
        if (m->recalib.store_deferred) { /* a store that waited for it, never queued */
            m->recalib.store_deferred = 0;
            m->recalib.refit.phase = PHASE_OFF;
        }
    } else {
        m->recalib.refit.phase = PHASE_OFF;
    }
    return 1;
}

static void store_done(uv_work_t *req, int status)
{
    store_job *j = req->data;
    calibd *d = j->d;
    model *m = j->m;
    const model_params *p = &j->p;
    char v[200], msg[1024];
    refit_out o;
    recalib_format_params(p, v, sizeof v);
    if (status != 0) /* never run: not counted as written */
        store_written(d);
    if (store_handed(d, m, j)) {
        free(j);
        return;
    }
    if (j->segment || j->label_free) {
        side_stored(d, m, j, status);
        free(j);
        return;
    }
    if (status != 0 || j->saved < 0) {
        /* passed the gate: counted as a store error, not a rejection */
        log_msg(&d->log, LOG_ERROR, "loop", "%s: %s; version %llu (%s) not published",
                m->name, status ? uv_strerror(status) : j->err,
                (unsigned long long)p->version, v);
        model_event_add(m, wall_now(), "store_error", "version %llu (%s) not published: %s",
                        (unsigned long long)p->version, v,
                        status ? uv_strerror(status) : j->err);
        alert_value av[] = {{"version", (double)p->version}};
        if (!d->stopping)
            alert_send(d, m, "refit", "critical", "the state directory refused the new "
                       "parameters; they were not published", av, 1);
        if (j->rollback) /* not retried every tick: the alert said it */
            m->recalib.guard_on = 0;
        feed(d, m, EV_STORE_FAILED, &o);
        free(j);
        return;
    }
    if (j->saved > 0)
        log_msg(&d->log, LOG_WARN, "loop", "%s: %s", m->name, j->err);
    model_params prev = m->params;
    m->params = *p;
    model_paired_reset(m, p->version, steady_now(d)); /* p->ts: the wall's label */
    if (j->rollback) {
        m->recalib.guard_on = 0; /* a rollback is not guarded: no back and forth */
        m->recalib.rollbacks++;
    } else {
        guard_start(m, &prev);
    }
    /* the reference restarts under the new parameters */
    feed(d, m, EV_STORED, &o);
    send_params(d, m);
    const char *score = m->form == CALIB_FORM_GAUSSIAN ? "DSS" : "Brier";
    if (j->rollback)
        snprintf(msg, sizeof msg, "rolled back: version %llu is version %llu's parameters "
                 "(%s %s) again: version %llu's %s exceeds version %llu's at gate_alpha, "
                 "on the same pairs since the estimated change (the %llu newest of %llu "
                 "since version %llu was published: %.4g against %.4g, by %.4g [%.4g, %.4g])",
                 (unsigned long long)p->version, (unsigned long long)j->to, p->method, v,
                 (unsigned long long)j->from, score, (unsigned long long)j->to,
                 (unsigned long long)p->shadow_n, (unsigned long long)j->pairs,
                 (unsigned long long)j->from, p->before[0], p->after[0], p->improvement,
                 p->ci[0], p->ci[1]);
    else
        snprintf(msg, sizeof msg, "published version %llu: %s %s; %s %.4g -> %.4g, "
                 "improvement %.4g [%.4g, %.4g] on %llu shadow samples",
                 (unsigned long long)p->version, p->method, v, score, p->before[0],
                 p->after[0], p->improvement, p->ci[0], p->ci[1],
                 (unsigned long long)p->shadow_n);
    log_msg(&d->log, j->rollback ? LOG_WARN : LOG_INFO, "loop", "%s: %s", m->name, msg);
    model_event_add(m, wall_now(), j->rollback ? "rollback" : "publish", "%s", msg);
    alert_value av[] = {{"version", (double)p->version}, {"before", p->before[0]},
                        {"after", p->after[0]}, {"improvement", p->improvement},
                        {"ci_lo", p->ci[0]}, {"ci_hi", p->ci[1]},
                        {"samples", (double)p->shadow_n}, {"from", (double)j->from},
                        {"to", (double)j->to}};
    if (!d->stopping)
        alert_send(d, m, j->rollback ? "rollback" : "refit",
                   j->rollback ? "critical" : "warning", msg, av, j->rollback ? 9 : 7);
    free(j);
}

/* Stores j->p as the next version in a worker; store_done publishes it. */
static void queue_store(calibd *d, model *m, store_job *j)
{
    j->d = d;
    j->m = m;
    snprintf(j->dir, sizeof j->dir, "%s", recalib_state_dir(d, m));
    snprintf(j->name, sizeof j->name, "%s", m->name);
    j->req.data = j;
    uv_mutex_lock(&d->stores.lock);
    d->stores.writing++;
    uv_mutex_unlock(&d->stores.lock);
    int rc = uv_queue_work(d->loop, &j->req, store_work, store_done);
    if (rc != 0)
        store_done(&j->req, rc);
}

/* The guard of the version just published: the same fresh pairs scored
 * under prev, the version it replaced, in a gate that tests whether prev
 * does better (H0: E[S(new) - S(prev)] <= 0; a pass rejects it at
 * gate_alpha), for at most gate_max_samples pairs. */
static void guard_start(model *m, const model_params *prev)
{
    model_recalib *l = &m->recalib;
    const model_cfg *c = &m->cfg;
    double clip = m->form == CALIB_FORM_GAUSSIAN ? c->gate_dss_clip : 2;
    calib_gate_cfg gc = {.alpha = c->gate_alpha, .min_improvement = 0, .lo = -clip,
                         .hi = clip, .max_samples = c->gate_max_samples};
    l->guard_on = c->rollback && prev->desc && calib_gate_init(&l->guard, &gc) == CALIB_OK;
    if (!l->guard_on)
        return;

    l->guard_prev = *prev;
    l->guard_low = 0;
    for (int i = 0; i < 3; i++)
        calib_accum_init(&l->guard_since[i]);
}

/* The guard showed the version in force worse than the one before it: that
 * one's parameters, stored as the next version, then sent (store_done). */
static void publish_rollback(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    const calib_gate *g = &l->guard;
    store_job *j = NULL;
    if (!l->guard_on || g->state != CALIB_GATE_PASSED || !l->guard_prev.desc) {
        refit_out o; /* the machine asked without an alarm: nothing to restore */
        log_msg(&d->log, LOG_ERROR, "loop", "%s: a rollback without a guard's alarm: "
                "nothing published", m->name);
        l->guard_on = 0;
        feed(d, m, EV_STORE_FAILED, &o);
        return;
    }
    if (!(j = calloc(1, sizeof *j))) {
        refit_out o;
        log_msg(&d->log, LOG_ERROR, "loop", "%s: out of memory rolling back", m->name);
        l->guard_on = 0;
        feed(d, m, EV_STORE_FAILED, &o);
        return;
    }
    model_params *p = &j->p;
    *p = l->guard_prev;
    p->version = m->params.version + 1;
    p->ts = wall_now();
    /* the figures of the stretch that made the evidence */
    const calib_accum *since = l->guard_since;
    p->shadow_n = since[2].n;
    p->before[0] = calib_accum_mean(&since[0]);
    p->after[0] = calib_accum_mean(&since[1]);
    p->before[1] = p->after[1] = NAN; /* the guard tests the main score only */
    p->improvement = calib_accum_mean(&since[2]);
    calib_accum_ci95(&since[2], p->ci);
    j->rollback = 1;
    j->pairs = g->diff.n;
    j->from = m->params.version;
    j->to = l->guard_prev.version;
    log_msg(&d->log, LOG_WARN, "loop", "%s: the guard showed version %llu worse than "
            "version %llu (e-value %.3g after %llu pairs): rolling back", m->name,
            (unsigned long long)j->from, (unsigned long long)j->to,
            exp(calib_gate_log_e(g)), (unsigned long long)g->diff.n);
    queue_store(d, m, j);
}

/* The candidate passed: version n + 1, stored by a worker, then sent. */
static void publish_candidate(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    const calib_gate *g = &l->gate;
    store_job *j = calloc(1, sizeof *j);
    if (!j) {
        refit_out o;
        log_msg(&d->log, LOG_ERROR, "loop", "%s: out of memory publishing a candidate",
                m->name);
        feed(d, m, EV_STORE_FAILED, &o);
        return;
    }
    model_params *p = &j->p;
    *p = l->candidate;
    p->version = m->params.version + 1;
    p->nseg = m->params.nseg; /* the segments' parameters stay */
    memcpy(p->seg, m->params.seg, sizeof p->seg);
    p->ts = wall_now();
    p->shadow_n = g->diff.n;
    p->before[0] = calib_accum_mean(&g->current);
    p->after[0] = calib_accum_mean(&g->candidate);
    p->before[1] = calib_accum_mean(&l->shadow_log[0]);
    p->after[1] = calib_accum_mean(&l->shadow_log[1]);
    p->improvement = calib_accum_mean(&g->diff);
    calib_accum_ci95(&g->diff, p->ci);
    queue_store(d, m, j);
}

/* The gate has decided: publish, or count and report the rejection. */
static void decide(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    const calib_gate *g = &l->gate;
    int passed = g->state == CALIB_GATE_PASSED;
    refit_in in = machine_in(m);
    refit_out o;
    refit_step(&l->refit, passed ? EV_GATE_PASSED : EV_GATE_REJECTED, tick_now(d), &in, &o);
    if (o.actions & ACT_STORE) {
        act(d, m, &o);
        return;
    }
    double ci[2];
    calib_accum_ci95(&g->diff, ci);
    char v[200], msg[1024];
    recalib_format_params(&l->candidate, v, sizeof v);
    snprintf(msg, sizeof msg, "candidate %llu (%s %s) %s after %llu shadow samples: "
             "improvement %.4g [%.4g, %.4g], %s", (unsigned long long)l->candidates,
             l->candidate.method, v, passed ? "passed, not published (auto_publish = no)"
             : "rejected", (unsigned long long)g->diff.n, calib_accum_mean(&g->diff), ci[0],
             ci[1], passed ? "established" : "not established at gate_alpha above "
             "min_improvement");
    log_msg(&d->log, LOG_INFO, "loop", "%s: %s", m->name, msg);
    model_event_add(m, wall_now(), passed ? "withheld" : "shadow_fail", "%s", msg);
    alert_value av[] = {{"improvement", calib_accum_mean(&g->diff)}, {"ci_lo", ci[0]},
                        {"ci_hi", ci[1]}, {"samples", (double)g->diff.n}};
    alert_send(d, m, "refit", "warning", msg, av, 4);
    act(d, m, &o); /* counted; a drift stays unexplained: measure anew */
}

/* ------------------------------------------------------------ miscalibration */

/* A new gate for the trigger (a new period of miscal_period pairs, or
 * after an outcome of the loop), testing the challenger there is; quiet:
 * from miscal_period pairs on (after an outcome that left the parameters
 * in force as they were: an alarm again at once would refit for nothing). */
static void trigger_restart(model *m, int quiet)
{
    model_recalib *l = &m->recalib;
    if (!l->trig_on)
        return;
    calib_gate_cfg gc;
    model_trigger_cfg(m, &gc);
    if (calib_gate_init(&l->trig, &gc) != CALIB_OK) /* the configuration checks forbid it */
        l->trig_on = 0;
    l->trig_reported = 0;
    l->trig_start = m->ring.total;
    l->trig_quiet_until = m->ring.total + (quiet ? m->cfg.miscal_period : 0);
}

/* A challenger is refit at most this often (seconds): at 100,000 pairs/s a
 * fit every refit_min_samples pairs would be 100 fits a second. */
#define CHALLENGER_REFIT_SECONDS 5.0
/* A challenger's copy holds CHALLENGER_BYTES at most, and those of all
 * models' challenger fits under way CHALLENGERS_BYTES: a model whose fit
 * would pass that waits a tick, however many models there are (34 fits of
 * 10,000 records of K = 10 at once; 4 of K = 1000). */
#define CHALLENGER_BYTES ((size_t)8 << 20)
#define CHALLENGERS_BYTES ((size_t)32 << 20)

/* The trigger at a tick: its rejection reported (once), its period
 * renewed, its challenger refit while idle, every refit_min_samples pairs
 * and CHALLENGER_REFIT_SECONDS at most. */
static void trigger_tick(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    const model_cfg *c = &m->cfg;
    if (!c->miscal_trigger || !m->params.desc || m->forget)
        return;
    if (l->trig_on && l->trig.state == CALIB_GATE_PASSED && !l->trig_reported) {
        const calib_gate *g = &l->trig;
        double ci[2];
        char v[200], msg[1024];
        calib_accum_ci95(&g->diff, ci);
        recalib_format_params(&l->challenger, v, sizeof v);
        const char *score = m->form == CALIB_FORM_GAUSSIAN ? "DSS" : "Brier";
        snprintf(msg, sizeof msg, "miscalibrated: a recalibration (%s %s, fit on earlier "
                 "pairs) lowers the %s by %.4g [%.4g, %.4g] on the %llu pairs since, more "
                 "than %g (miscal_min_effect, or min_improvement if larger) at miscal_alpha "
                 "= %g (e-value %.3g); refit",
                 l->challenger.method, v, score, calib_accum_mean(&g->diff), ci[0], ci[1],
                 (unsigned long long)g->diff.n, g->cfg.min_improvement, c->miscal_alpha,
                 exp(calib_gate_log_e(g)));
        l->trig_reported = 1;
        l->miscal_alarms++;
        log_msg(&d->log, LOG_INFO, "loop", "%s: %s", m->name, msg);
        model_event_add(m, wall_now(), "miscalibration", "%s", msg);
        alert_value av[] = {{"improvement", calib_accum_mean(&g->diff)}, {"ci_lo", ci[0]},
                            {"ci_hi", ci[1]}, {"samples", (double)g->diff.n},
                            {"log_e", calib_gate_log_e(g)}};
        alert_send(d, m, "miscalibration", "warning", msg, av, 5);
    }
    if (l->trig_on && l->trig.state == CALIB_GATE_FAILED)
        trigger_restart(m, 0); /* a period without evidence: the next one */
    size_t len = calib_ring_len(&m->ring);
    if (l->refit.phase != PHASE_IDLE || l->trig_fitting || len < refit_need(m) ||
        l->trig.state == CALIB_GATE_PASSED ||
        (l->trig_fit_at && (m->ring.total - l->trig_fit_at < c->refit_min_samples ||
                            tick_now(d) - l->trig_fit_time < CHALLENGER_REFIT_SECONDS)))
        return;
    /* the pairs since the last restart, the regime the test is about (at
     * least refit_min_samples), at most refit_samples */
    uint64_t since = m->ring.total - l->trig_start;
    size_t n = since > refit_need(m) ? (since < len ? (size_t)since : len) : refit_need(m);
    n = n < c->refit_samples ? n : (size_t)c->refit_samples;
    /* a copy of CHALLENGER_BYTES at most (10,000 records of K = 10; 1,046
     * of K = 1000), refit_min_samples at least */
    size_t cap = CHALLENGER_BYTES / fit_bytes(m, 1);
    cap = cap > refit_need(m) ? cap : refit_need(m);
    n = n < cap ? n : cap;
    if (d->refits.challenger_bytes + fit_bytes(m, n) > CHALLENGERS_BYTES &&
        d->refits.challenger_bytes > 0)
        return; /* the others' first: its turn comes at a later tick */
    if (queue_fit(d, m, n, REFIT_MISCAL, 1) == 0) {
        d->refits.challenger_bytes += fit_bytes(m, n);
        l->trig_fitting = 1;
        l->trig_fit_at = m->ring.total;
        l->trig_fit_time = tick_now(d);
    }
}

/* ------------------------------------------------------------ tick */

static void model_tick(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    refit_out o;
    if (l->drift_alarm) {
        l->drift_alarm = 0;
        on_drift(d, m);
    }
    trigger_tick(d, m);
    if (l->guard_on && l->guard.state == CALIB_GATE_FAILED) {
        /* gate_max_samples pairs without the previous version doing better:
         * the version in force stays, and later changes are the drift
         * detector's */
        l->guard_on = 0;
        model_event_add(m, wall_now(), "guard", "version %llu held against version %llu "
                        "over %llu pairs: difference %.4g", (unsigned long long)m->params.version,
                        (unsigned long long)l->guard_prev.version,
                        (unsigned long long)l->guard.diff.n, calib_accum_mean(&l->guard.diff));
    }
    /* the machine first: a drift alarm makes a candidate fitted before it
     * stale, cancelled even if its gate has passed meanwhile */
    feed(d, m, EV_TICK, &o);
    if (l->refit.phase == PHASE_SHADOW && l->gate.state != CALIB_GATE_RUNNING)
        decide(d, m);
}

/* ------------------------------------------------------------ segments */

/* A K-vector for a message: its first 8 values, " ..." after them if
 * there are more. */
static void format_classes(char *buf, size_t len, const double *v, size_t k)
{
    size_t a = 0;
    buf[0] = 0;
    for (size_t j = 0; j < k && j < 8; j++)
        a += (size_t)snprintf(buf + a, a < len ? len - a : 0, "%s%.3f", j ? " " : "", v[j]);
    if (k > 8 && a < len)
        snprintf(buf + a, len - a, " ...");
}

/* A label-free version's message: its weights, and what they came from. */
static void label_free_message(const model_params *p, char *msg, size_t len)
{
    char w[128], v[200]; /* 8 weights of at most 11 characters */
    format_classes(w, sizeof w, p->w, p->nw);
    recalib_format_params(p, v, sizeof v);
    snprintf(msg, len, "published version %llu without labels: %s %s with prior weights [%s] "
             "(a label shift estimated on the newest %llu predictions; expected Brier of the "
             "outputs before them %.4g); the guard judges it on the labels of predictions "
             "from now on", (unsigned long long)p->version, p->method, v, w,
             (unsigned long long)p->fit_n, p->before[0]);
}

/* A version stored outside the refit machine (a segment's parameters, a
 * label-free prior correction): installed, guarded and sent; a store of
 * the machine that waited for it goes on. */
static void side_stored(calibd *d, model *m, store_job *j, int status)
{
    model_recalib *l = &m->recalib;
    const model_params *p = &j->p;
    const calib_params_segment *sg = j->segment ? &p->seg[j->segment - 1] : NULL;
    char v[200], msg[1024], what[160];
    if (sg)
        snprintf(what, sizeof what, "segment %s=%s's parameters", sg->key, sg->value);
    else
        snprintf(what, sizeof what, "the prior correction of a label shift");
    l->seg_storing = 0;
    if (status != 0 || j->saved < 0) {
        log_msg(&d->log, LOG_ERROR, "loop", "%s: %s; %s not published", m->name,
                status ? uv_strerror(status) : j->err, what);
        model_event_add(m, wall_now(), "store_error", "%s not published: %s", what,
                        status ? uv_strerror(status) : j->err);
        l->store_errors++;
        if (!sg) { /* not tried again for this alarm: the test starts anew */
            calib_lfree_test_reset(&m->lf);
            m->lf_alarm_at = 0;
            m->lf_reported = 0;
        }
    } else {
        if (j->saved > 0)
            log_msg(&d->log, LOG_WARN, "loop", "%s: %s", m->name, j->err);
        model_params prev = m->params;
        m->params = *p;
        model_paired_reset(m, p->version, steady_now(d));
        if (!sg) /* the earlier predictions are of the mix it corrected */
            l->fresh_from = mono_now();
        guard_start(m, &prev);
        send_params(d, m);
        if (!sg) {
            label_free_message(p, msg, sizeof msg);
            log_msg(&d->log, LOG_INFO, "loop", "%s: %s", m->name, msg);
            model_event_add(m, wall_now(), "publish", "%s", msg);
            alert_value av[] = {{"version", (double)p->version}, {"before", p->before[0]},
                                {"predictions", (double)p->fit_n}};
            if (!d->stopping)
                alert_send(d, m, "label_shift", "warning", msg, av, 3);
            goto deferred;
        }
        model_params one = *p;
        memcpy(one.values, sg->values, sizeof one.values);
        recalib_format_params(&one, v, sizeof v);
        snprintf(msg, sizeof msg, "published version %llu: segment %s=%s gets %s %s; "
                 "its %s %.4g -> %.4g, improvement %.4g [%.4g, %.4g] on %llu shadow pairs",
                 (unsigned long long)p->version, sg->key, sg->value, p->method, v,
                 m->form == CALIB_FORM_GAUSSIAN ? "DSS" : "Brier", p->before[0], p->after[0],
                 p->improvement, p->ci[0], p->ci[1], (unsigned long long)p->shadow_n);
        log_msg(&d->log, LOG_INFO, "loop", "%s: %s", m->name, msg);
        model_event_add(m, wall_now(), "publish", "%s", msg);
        alert_value av[] = {{"version", (double)p->version}, {"before", p->before[0]},
                            {"after", p->after[0]}, {"improvement", p->improvement},
                            {"ci_lo", p->ci[0]}, {"ci_hi", p->ci[1]},
                            {"samples", (double)p->shadow_n}};
        if (!d->stopping)
            alert_send(d, m, "refit", "warning", msg, av, 7);
    }
deferred:;
    int waiting = l->store_deferred;
    l->store_deferred = 0;
    if (waiting == 1 + REFIT_ROLLBACK)
        publish_rollback(d, m);
    else if (waiting)
        publish_candidate(d, m);
}

/* A segment's fitted parameters passed their gate: stored as the next
 * version (the model's parameters and the other segments' as they are,
 * this segment's added or replaced), then sent. */
static int segment_publish(calibd *d, model *m, const seg_key *k, seg_slot *s)
{
    store_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1; /* tried again at the next tick: the gate stays passed */
    unsigned e;
    model_params_with_segment(m, k, s, wall_now(), &j->p, &e);
    j->segment = 1 + (int)e;
    m->recalib.seg_storing = 1;
    queue_store(d, m, j);
    return 0;
}

/* A segment's parameters passed their gate: stored (segment_publish)
 * while nothing else stores and the closed loop is idle; else not yet. */
static int segment_ready(void *arg, model *m, const seg_key *k, seg_slot *s)
{
    calibd *d = arg;
    model_recalib *l = &m->recalib;
    if (l->seg_storing || d->stopping || m->forget ||
        (l->refit.phase != PHASE_IDLE && l->refit.phase != PHASE_OFF))
        return -1;
    return segment_publish(d, m, k, s);
}

static void segment_tick(calibd *d, model *m)
{
    model_segments_step(m, segment_ready, d, &d->log);
}

/* The label-free figures kept up to date, and a label-shift alarm
 * reported once: logged, an event and an alert naming the estimated
 * priors against the reference's. */
/* label_shift_adapt: a reported shift, label_shift_reference predictions
 * after its alarm, is corrected without labels: the parameters in force
 * with EM's prior weights, stored as the next version (side_stored) while
 * nothing else stores and the closed loop is idle, then guarded like any
 * version once labels come. */
static void label_shift_adapt(calibd *d, model *m)
{
    model_recalib *l = &m->recalib;
    const model_cfg *c = &m->cfg;
    uint64_t need = c->label_shift_reference < c->label_free_recent ? c->label_shift_reference
                                                                     : c->label_free_recent;
    double now = tick_now(d);
    if (!c->label_shift_adapt || !m->lf_alarm_at || !m->lf_reported ||
        m->lf.total - m->lf_alarm_at < need || !m->params.desc || l->seg_storing ||
        d->stopping || m->forget || m->handed_over ||
        (l->refit.phase != PHASE_IDLE && l->refit.phase != PHASE_OFF) ||
        now - m->lf_adapt_tried < c->label_free_interval)
        return;
    m->lf_adapt_tried = now;
    double w[CALIB_PUBMSG_MAX_WEIGHTS];
    store_job *j = NULL;
    if (!model_lfree_weights(m, w) || !(j = calloc(1, sizeof *j)))
        return; /* tried again at the next update */
    const calib_lfree_fig *f = &m->lf.fig;
    model_params *p = &j->p;
    *p = m->params; /* the map and the segments in force, new weights */
    memcpy(p->w, w, m->k * sizeof *w);
    p->nw = (unsigned)m->k;
    p->label_free = 1;
    p->version = m->params.version + 1;
    p->ts = wall_now();
    p->fit_n = f->n;
    p->shadow_n = 0;
    p->before[0] = f->corrected_est[CALIB_LFREE_MAIN].mean;
    p->before[1] = f->corrected_est[CALIB_LFREE_LOG].mean;
    p->after[0] = p->after[1] = p->improvement = p->ci[0] = p->ci[1] = NAN;
    j->label_free = 1;
    l->seg_storing = 1;
    queue_store(d, m, j);
}

/* The label-free figures when due; a new alarm reported; a reported one
 * corrected (first: an alarm that stood for label_free_recent predictions
 * restarts the test in model_lfree_step). */
static void label_free_tick(calibd *d, model *m)
{
    label_shift_adapt(d, m);
    if (!model_lfree_step(m, tick_now(d)) || !m->lf_alarm_at || m->lf_reported)
        return;
    const calib_lfree *lf = &m->lf;
    m->lf_reported = 1;
    alert_value v[CALIB_PUBMSG_MAX_VALUES] = {{"log_e", calib_lfree_log_e(lf)},
                                              {"predictions", (double)lf->test_n}};
    size_t nv = 2;
    static const char *const names[] = {"prior_0", "prior_1", "prior_2", "prior_3", "prior_4",
                                        "prior_5", "prior_6", "prior_7", "prior_8", "prior_9",
                                        "prior_10", "prior_11", "prior_12", "prior_13"};
    _Static_assert(2 + sizeof names / sizeof *names == CALIB_PUBMSG_MAX_VALUES, "all values");
    for (size_t j = 0; j < m->k && nv < CALIB_PUBMSG_MAX_VALUES; j++)
        v[nv++] = (alert_value){names[j], lf->priors[j]};
    char msg[512], pri[128], ref[128]; /* 8 values of 5 characters, for priors */
    format_classes(pri, sizeof pri, lf->priors, m->k);
    format_classes(ref, sizeof ref, lf->src, m->k);
    if (lf->fig.corrected)
        snprintf(msg, sizeof msg, "label shift: the class mix of the predictions moved "
                 "(ln e = %.3g after %llu predictions); estimated priors [%s], reference "
                 "[%s]", calib_lfree_log_e(lf), (unsigned long long)lf->test_n, pri, ref);
    else
        snprintf(msg, sizeof msg, "label shift: the class mix of the predictions moved "
                 "(ln e = %.3g after %llu predictions); mean probabilities [%s], no labelled "
                 "pair to compare with yet", calib_lfree_log_e(lf),
                 (unsigned long long)lf->test_n, pri);
    model_event_add(m, wall_now(), "label_shift", "%s", msg);
    alert_send(d, m, "label_shift", "warning", msg, v, nv);
}

void recalib_tick(calibd *d, model *m, int republish)
{
    segment_tick(d, m);
    label_free_tick(d, m);
    if (m->recalib.refit.phase == PHASE_OFF)
        return;
    model_tick(d, m);
    if (republish)
        send_params(d, m);
}
