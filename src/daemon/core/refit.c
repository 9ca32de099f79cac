/* refit.c — the closed loop's state machine (see refit.h). Pure: it reads
 * its arguments and writes the machine and *out, nothing else. */
#include <string.h>

#include "refit.h"

void refit_init(refit_machine *r, int on, double interval, double now)
{
    memset(r, 0, sizeof *r);
    r->phase = on ? PHASE_IDLE : PHASE_OFF;
    r->interval = interval > 0 ? interval : 0;
    r->next_refit = r->interval ? now + r->interval : 0;
}

const char *refit_phase_name(int phase)
{
    static const char *const names[] = {"off", "idle", "fitting", "shadow", "storing"};
    return phase >= PHASE_OFF && phase <= PHASE_STORING ? names[phase] : "unknown";
}

const char *refit_reason_name(int reason)
{
    static const char *const names[] = {NULL,       "drift",    "schedule",
                                        "manual",   "rollback", "miscalibration"};
    return reason > REFIT_NONE && reason <= REFIT_MISCAL ? names[reason] : NULL;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The refit under way is stale: a drift alarm stands that it does not
 * answer (its samples predate the change). The detector stays in alarm
 * until the machine restarts it, which it never does for a stale refit,
 * so this is read off the alarm, not kept. */
static int stale(const refit_machine *r, const refit_in *in)
{
    return r->phase > PHASE_IDLE && r->reason != REFIT_DRIFT && in->drift_alarm;
}

/* IDLE -> FITTING on the newest n records. */
static void start(refit_machine *r, int reason, size_t n, refit_out *out)
{
    r->phase = PHASE_FITTING;
    r->reason = reason;
    r->pending = REFIT_NONE;
    out->actions |= ACT_START_FIT;
    out->reason = reason;
    out->samples = n;
}

/* Back to IDLE after any outcome: the trigger's evidence was about the
 * parameters and samples before it; a stale refit leaves its drift alarm
 * standing, to a fit of its own. */
static void to_idle(refit_machine *r, const refit_in *in, refit_out *out)
{
    out->actions |= ACT_TRIGGER_RESTART;
    if (stale(r, in))
        r->pending = REFIT_DRIFT;
    r->phase = PHASE_IDLE;
}

/* Back to IDLE after an outcome that leaves the refit's reason open: a
 * drift a fitted candidate did not explain is measured anew. */
static void idle_after(refit_machine *r, unsigned action, const refit_in *in, refit_out *out)
{
    out->actions |= action;
    if (r->reason == REFIT_DRIFT)
        out->actions |= ACT_DRIFT_RESTART;
    to_idle(r, in, out);
}

/* A fit that failed (no samples left, a fit error, memory) answered
 * nothing: a drift alarm stands, and its refit is tried again once
 * refit_min_samples more labelled samples came. */
static void fit_failed(refit_machine *r, const refit_in *in, refit_out *out)
{
    out->actions |= ACT_FIT_FAILED;
    if (r->reason == REFIT_DRIFT) {
        r->pending = REFIT_DRIFT;
        r->retry_at = in->seen + in->need;
    }
    to_idle(r, in, out);
}

/* A stale candidate dropped (in shadow, or as its fit ends). */
static void cancel(refit_machine *r, const refit_in *in, refit_out *out)
{
    out->actions |= ACT_CANCELLED;
    out->cancelled = r->reason;
    to_idle(r, in, out);
}

static void tick(refit_machine *r, double now, const refit_in *in, refit_out *out)
{
    if (r->pending == REFIT_DRIFT && !in->drift_alarm) /* restarted: answered */
        r->pending = REFIT_NONE;
    if (r->interval > 0 && now >= r->next_refit) {
        r->next_refit = now + r->interval;
        if (r->phase == PHASE_IDLE && r->pending == REFIT_NONE)
            r->pending = REFIT_SCHEDULE;
    }
    /* busy: an alarm is level-triggered and is seen again at an idle tick
     * (unless the outcome of a fit after its change point answered it); a
     * stale candidate in shadow is cancelled at once, a stale fit when it
     * ends, and a stale store goes on without clearing the alarm */
    if (r->phase == PHASE_SHADOW && stale(r, in))
        cancel(r, in, out);
    if (r->phase != PHASE_IDLE)
        return;
    if (in->guard_alarm) { /* no fit: the previous parameters, stored */
        r->phase = PHASE_STORING;
        r->reason = REFIT_ROLLBACK;
        out->actions |= ACT_STORE;
        out->reason = REFIT_ROLLBACK;
        return; /* a pending reason waits for the next idle tick */
    }
    if (in->drift_alarm)
        r->pending = REFIT_DRIFT;
    if (!in->drift_alarm && in->miscal_alarm &&
        (r->pending == REFIT_NONE || r->pending == REFIT_SCHEDULE))
        r->pending = REFIT_MISCAL;
    if (r->pending == REFIT_NONE)
        return;
    size_t want = min_size(in->want, in->available);
    if (r->pending == REFIT_DRIFT) {
        if (in->since_change < in->need || in->seen < r->retry_at)
            return; /* wait for more of the new regime, or after a failure */
        want = min_size(want, in->since_change);
    }
    if (r->pending == REFIT_MISCAL)
        want = min_size(want, in->since_trigger > in->need ? in->since_trigger : in->need);
    if (want < in->need) {
        if (r->pending == REFIT_SCHEDULE) {
            r->pending = REFIT_NONE;
            out->actions |= ACT_SKIPPED;
            out->refusal = "too few labelled samples in the ring (refit_min_samples)";
        }
        return;
    }
    start(r, r->pending, want, out);
}

static void manual(refit_machine *r, const refit_in *in, refit_out *out)
{
    static const char *const busy[] = {
        [PHASE_OFF] = "the closed loop is off for this model (see calibd's log)",
        [PHASE_FITTING] = "a refit of this model is running",
        [PHASE_SHADOW] = "a candidate of this model is in shadow",
        [PHASE_STORING] = "a new version of this model is being stored",
    };
    size_t n = min_size(in->want, in->available);
    /* while a drift alarm stands, only samples after its change point
     * are worth a fit: the request starts the drift's refit */
    int reason = in->drift_alarm ? REFIT_DRIFT : REFIT_MANUAL;
    if (in->drift_alarm)
        n = min_size(n, in->since_change);
    if (r->phase != PHASE_IDLE)
        out->refusal = busy[r->phase];
    else if (n < in->need && in->drift_alarm)
        out->refusal = "a drift alarm stands, and too few labelled samples came after its "
                       "change point (refit_min_samples)";
    else if (n < in->need)
        out->refusal = "too few labelled samples in the ring (refit_min_samples)";
    if (out->refusal) {
        out->actions |= ACT_REFUSED;
        return;
    }
    start(r, reason, n, out);
}

unsigned refit_step(refit_machine *r, int event, double now, const refit_in *in,
                    refit_out *out)
{
    memset(out, 0, sizeof *out);
    out->reason = r->reason;
    /* an alarm raised since the last tick makes the refit under way stale
     * at its outcome as well (stale() reads the alarm as it is now), or a
     * store's drift restart would erase it */
    switch (event) {
    case EV_TICK:
        if (r->phase != PHASE_OFF)
            tick(r, now, in, out);
        break;
    case EV_MANUAL:
        manual(r, in, out);
        break;
    case EV_FIT_DONE:
        if (r->phase == PHASE_FITTING && stale(r, in))
            cancel(r, in, out);
        else if (r->phase == PHASE_FITTING) {
            r->phase = PHASE_SHADOW;
            out->actions |= ACT_START_SHADOW;
        }
        break;
    case EV_FIT_FAILED:
        if (r->phase == PHASE_FITTING)
            fit_failed(r, in, out);
        break;
    case EV_GATE_PASSED:
        if (r->phase != PHASE_SHADOW)
            break;
        if (stale(r, in)) {
            cancel(r, in, out);
        } else if (in->auto_publish) {
            r->phase = PHASE_STORING;
            out->actions |= ACT_STORE;
        } else {
            idle_after(r, ACT_WITHHELD, in, out);
        }
        break;
    case EV_GATE_REJECTED:
        if (r->phase == PHASE_SHADOW)
            idle_after(r, ACT_REJECTED, in, out);
        break;
    case EV_STORED:
    case EV_STORE_FAILED:
        /* whatever the reason, the parameters in force decide the
         * reference; but a stale store leaves its drift alarm standing */
        if (r->phase == PHASE_STORING) {
            out->actions |= event == EV_STORED ? ACT_PUBLISH : ACT_STORE_FAILED;
            if (!stale(r, in))
                out->actions |= ACT_DRIFT_RESTART;
            to_idle(r, in, out);
        }
        break;
    }
    /* a restarted detector answers a drift that waited for its samples
     * (after a rollback, say): its alarm comes again if the drift is real */
    if ((out->actions & ACT_DRIFT_RESTART) && r->pending == REFIT_DRIFT)
        r->pending = REFIT_NONE;
    return out->actions;
}
