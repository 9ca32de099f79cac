/* alert.c — alerts: incidents with hysteresis and cooldown, the PUB
 * message, and the exec sink (a program run without a shell, the alert as
 * JSON on its standard input, killed at its timeout). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "calibd.h"
#include "pub.h"
#include "msgpack_json.h"
#include "calib/pubmsg.h"

/* ------------------------------------------------------------ exec sink */

/* One running sink: its process, the pipe to its stdin and its timeout.
 * Freed when the last of the three handles is closed. */
typedef struct sink {
    calibd *d;
    uv_process_t proc;
    uv_pipe_t in;
    uv_timer_t timer;
    uv_write_t write;
    char *json;
    size_t len;
    int handles; /* still open */
    int killed;
} sink;

static void sink_closed(uv_handle_t *h)
{
    sink *s = h->data;
    if (--s->handles == 0) {
        s->d->alert.sinks_running--;
        free(s->json);
        free(s);
    }
}

static void sink_close(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, sink_closed);
}

static void sink_exited(uv_process_t *p, int64_t status, int signo)
{
    sink *s = p->data;
    calibd *d = s->d;
    if (s->killed)
        ; /* counted and logged at the timeout */
    else if (status != 0 || signo != 0) {
        d->alert.sinks_failed++;
        log_msg(&d->log, LOG_WARN, "alert", "exec sink %s: exit status %lld, signal %d",
                d->cfg.alert_exec, (long long)status, signo);
    }
    uv_timer_stop(&s->timer);
    sink_close((uv_handle_t *)&s->timer);
    sink_close((uv_handle_t *)&s->in);
    sink_close((uv_handle_t *)&s->proc);
}

/* The sink runs in a process group of its own (UV_PROCESS_DETACHED makes it
 * a session leader): killing the group takes what it started too. */
static void kill_group(uv_process_t *p)
{
    if (p->pid > 0)
        kill(-p->pid, SIGKILL);
}

static void sink_timeout(uv_timer_t *t)
{
    sink *s = t->data;
    calibd *d = s->d;
    s->killed = 1;
    d->alert.sinks_killed++;
    log_msg(&d->log, LOG_WARN, "alert", "exec sink %s: still running after %g s, killed",
            d->cfg.alert_exec, d->cfg.alert_exec_timeout);
    kill_group(&s->proc);
}

static void sink_written(uv_write_t *w, int status)
{
    sink *s = w->data;
    if (status < 0 && status != UV_ECANCELED)
        log_msg(&s->d->log, LOG_WARN, "alert", "exec sink %s: writing its input: %s",
                s->d->cfg.alert_exec, uv_strerror(status));
    sink_close((uv_handle_t *)&s->in); /* end of file for the program */
}

/* Starts the sink with json (taken over) on its standard input. */
static void sink_start(calibd *d, char *json, size_t len)
{
    if (d->alert.sinks_running >= SINKS_MAX) {
        d->alert.sinks_dropped++;
        log_rl(&d->log, LOG_WARN, "alert", "exec sink: %d already running, alert not "
               "handed over", SINKS_MAX);
        free(json);
        return;
    }
    sink *s = calloc(1, sizeof *s);
    if (!s) {
        d->alert.sinks_failed++;
        free(json);
        return;
    }
    s->d = d;
    s->json = json;
    s->len = len;
    uv_pipe_init(d->loop, &s->in, 0);
    uv_timer_init(d->loop, &s->timer);
    s->in.data = s->timer.data = s->proc.data = s->write.data = s;
    s->handles = 2;
    char *args[] = {d->cfg.alert_exec, NULL};
    uv_stdio_container_t io[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&s->in},
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
    };
    uv_process_options_t o = {.exit_cb = sink_exited, .file = d->cfg.alert_exec,
                              .args = args, .stdio = io, .stdio_count = 3,
                              .flags = UV_PROCESS_DETACHED};
    int rc = uv_spawn(d->loop, &s->proc, &o);
    d->alert.sinks_running++;
    if (rc != 0) {
        d->alert.sinks_failed++;
        log_rl(&d->log, LOG_WARN, "alert", "exec sink %s: %s", d->cfg.alert_exec,
               uv_strerror(rc));
        s->handles++; /* libuv wants the process handle closed even so */
        sink_close((uv_handle_t *)&s->proc);
        sink_close((uv_handle_t *)&s->in);
        sink_close((uv_handle_t *)&s->timer);
        return;
    }
    s->handles++;
    uv_timer_start(&s->timer, sink_timeout, (uint64_t)(d->cfg.alert_exec_timeout * 1000), 0);
    uv_buf_t buf = uv_buf_init(s->json, (unsigned)s->len);
    if ((rc = uv_write(&s->write, (uv_stream_t *)&s->in, &buf, 1, sink_written)) != 0)
        sink_written(&s->write, rc);
}

static void sink_kill_one(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type == UV_PROCESS && h->data && !uv_is_closing(h))
        kill_group((uv_process_t *)h);
}

void alert_sinks_kill(calibd *d)
{
    if (d->alert.sinks_running)
        uv_walk(d->loop, sink_kill_one, NULL);
}

/* ------------------------------------------------------------ alerts */

void alert_send(calibd *d, model *m, const char *kind, const char *severity,
                const char *message, const alert_value *v, size_t nv)
{
    calib_alert_msg a;
    calib_alert_msg_init(&a, m->name);
    a.ts = wall_now();
    snprintf(a.severity, sizeof a.severity, "%s", severity);
    snprintf(a.kind, sizeof a.kind, "%s", kind);
    snprintf(a.message, sizeof a.message, "%s", message);
    for (size_t i = 0; i < nv && i < CALIB_PUBMSG_MAX_VALUES; i++) {
        snprintf(a.value_names[i], sizeof a.value_names[i], "%s", v[i].name);
        a.values[i] = v[i].value;
        a.nvalues++;
    }
    m->alerts++;
    d->alert.sent++;
    log_msg(&d->log, LOG_WARN, "alert", "%s: %s %s: %s", m->name, severity, kind, message);
    /* refit results, drift, miscalibration and segments are events of their own */
    if (strcmp(kind, "refit") != 0 && strcmp(kind, "drift") != 0 &&
        strcmp(kind, "miscalibration") != 0 && strcmp(kind, "segment_miscalibrated") != 0 &&
        strcmp(kind, "label_shift") != 0)
        model_event_add(m, a.ts, "alert", "%s %s: %s", severity, kind, message);
    calib_mpw w;
    calib_mpw_init(&w);
    calib_alert_msg_write(&w, &a);
    if (publish_written(d, m->name, &w) == 0 && d->cfg.alert_exec) {
        size_t len = 0;
        char *json = msgpack_to_json(w.sb.data, w.sb.size, &len);
        if (json)
            sink_start(d, json, len);
        else
            d->alert.sinks_failed++;
    }
    calib_mpw_destroy(&w);
}

void alert_incident(calibd *d, model *m, int rule, int open_now, int close_now,
                    const char *kind, const char *severity, const char *message,
                    const alert_value *v, size_t nv)
{
    switch (alert_step(&m->alert[rule], open_now, close_now, tick_now(d),
                       m->cfg.alert_cooldown)) {
    case ALERT_CLOSED:
        log_msg(&d->log, LOG_INFO, "alert", "%s: %s cleared", m->name, kind);
        break;
    case ALERT_SUPPRESSED:
        d->alert.suppressed++;
        break;
    case ALERT_OPENED:
        alert_send(d, m, kind, severity, message, v, nv);
        break;
    }
}

/* A level rule: opens above level, closes below level (1 - hysteresis). */
static void level_rule(calibd *d, model *m, int rule, const char *name, double value,
                       double level, uint64_t n)
{
    if (level <= 0 || !isfinite(value))
        return;
    char msg[160];
    snprintf(msg, sizeof msg, "%s of the calibrated outputs over the window is %.6g, "
             "above %.6g", name, value, level);
    alert_value v[] = {{name, value}, {"level", level}, {"samples", (double)n}};
    alert_incident(d, m, rule, value > level, value < level * (1 - m->cfg.alert_hysteresis),
                   "threshold", "critical", msg, v, 3);
}

static void starvation_rule(calibd *d, model *m)
{
    double since, limit = m->cfg.label_starvation;
    int open_now, close_now;
    alert_starvation(m, tick_now(d), m->cfg.alert_hysteresis, &since, &open_now, &close_now);
    if (!open_now && !close_now)
        return;
    char msg[160];
    snprintf(msg, sizeof msg, "predictions but no labels for %.0f s (limit %g s)", since, limit);
    alert_value v[] = {{"seconds_without_labels", since}, {"limit", limit}};
    alert_incident(d, m, RULE_STARVATION, open_now, close_now, "label_starvation", "warning",
                   msg, v, 2);
}

typedef struct seg_alert_ctx {
    calibd *d;
    model *m;
} seg_alert_ctx;

/* A segment e-BH flagged: one alert each (a discovery is an event, flags
 * are never cleared). */
static void segment_flagged(void *arg, const seg_key *k, const seg_slot *s)
{
    seg_alert_ctx *c = arg;
    double ci[2], gap = -calib_accum_mean(&s->resid);
    calib_accum_ci95(&s->resid, ci);
    const char *value = s->name;
    char msg[400];
    snprintf(msg, sizeof msg, "segment %s=%s is miscalibrated: confidence minus accuracy "
             "%.4f (95%% interval %.4f to %.4f) over %llu pairs; e-value %.4g",
             k->name, value, gap, -ci[1], -ci[0], (unsigned long long)s->resid.n,
             exp(s->log_e_flag));
    alert_value v[] = {{"gap", gap}, {"gap_lo", -ci[1]}, {"gap_hi", -ci[0]},
                       {"pairs", (double)s->resid.n},
                       {"brier", calib_accum_mean(&s->score[VIEW_CAL][0])},
                       {"e_value", exp(s->log_e_flag)}};
    model_event_add(c->m, wall_now(), "segment", "%s=%s flagged: gap %.4f over %llu pairs",
                    k->name, value, gap, (unsigned long long)s->resid.n);
    alert_send(c->d, c->m, "segment_miscalibrated", "warning", msg, v, 6);
}

void alert_check(calibd *d, model *m)
{
    starvation_rule(d, m);
    seg_alert_ctx sc = {d, m};
    seg_decide(&m->seg, wall_now(), segment_flagged, &sc);
    const model_cfg *c = &m->cfg;
    if (c->alert_brier <= 0 && c->alert_rbs <= 0 && c->alert_ece <= 0 && c->alert_dss <= 0)
        return;
    /* the window as the tick summed it (model_view): what status and
     * /metrics show is what the rules test */
    const model_view *v = &m->view;
    const calib_accum *main = &v->w.stat[VIEW_CAL * WS_PER_VIEW + WS_MAIN];
    if (!v->have || main->n < c->alert_min_samples)
        return;
    double mean = calib_accum_mean(main);
    if (m->form == CALIB_FORM_GAUSSIAN) {
        level_rule(d, m, RULE_DSS, "dss", mean, c->alert_dss, main->n);
        return;
    }
    level_rule(d, m, RULE_BRIER, "brier", mean, c->alert_brier, main->n);
    level_rule(d, m, RULE_RBS, "rbs", sqrt(mean), c->alert_rbs, main->n);
    level_rule(d, m, RULE_ECE, "ece", calib_bins_ece(&v->w.top[VIEW_CAL]), c->alert_ece, main->n);
}
