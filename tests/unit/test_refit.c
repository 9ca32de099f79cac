/* test_refit.c — the closed loop's state machine (src/daemon/core/refit.c) with a
 * fake clock: every transition, and the orders of events that once lost
 * alarms or refitted every tick. No sockets, no threads. */
#include "unit.h"

#include <string.h>

#include "refit.h"

/* Enough samples for anything; a test lowers what it needs. */
static refit_in plenty(void)
{
    return (refit_in){.drift_alarm = 0, .available = 5000, .since_change = 5000,
                      .want = 10000, .need = 1000, .auto_publish = 1};
}

static unsigned step(refit_machine *r, int ev, double now, const refit_in *in, refit_out *o)
{
    return refit_step(r, ev, now, in, o);
}

/* A machine with a schedule of 10 s whose first scheduled candidate is in
 * shadow at t = 11. */
static void scheduled_in_shadow(refit_machine *r, const refit_in *in)
{
    refit_out o;
    refit_init(r, 1, 10, 0);
    assert_int_equal(step(r, EV_TICK, 10, in, &o), ACT_START_FIT);
    assert_int_equal(step(r, EV_FIT_DONE, 11, in, &o), ACT_START_SHADOW);
}

static void off_does_nothing(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    in.drift_alarm = 1;
    refit_init(&r, 0, 10, 0);
    assert_int_equal(r.phase, PHASE_OFF);
    for (int ev = EV_TICK; ev <= EV_STORE_FAILED; ev++)
        if (ev != EV_MANUAL)
            assert_int_equal(step(&r, ev, 100, &in, &o), 0);
    assert_int_equal(step(&r, EV_MANUAL, 100, &in, &o), ACT_REFUSED);
    assert_non_null(strstr(o.refusal, "off"));
    assert_int_equal(r.phase, PHASE_OFF);
}

/* The schedule: due every interval; when due with enough samples it fits
 * on the newest refit_samples (or what the ring has); too few: skipped. */
static void schedule_fits_or_skips(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 10, 0);
    assert_true(r.next_refit == 10);
    assert_int_equal(step(&r, EV_TICK, 9.99, &in, &o), 0);
    assert_int_equal(step(&r, EV_TICK, 10, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_SCHEDULE);
    assert_int_equal(o.samples, 5000); /* all the ring has: under want */
    assert_int_equal(r.phase, PHASE_FITTING);
    assert_int_equal(r.pending, REFIT_NONE);
    assert_true(r.next_refit == 20);
    /* due again while busy: not queued */
    assert_int_equal(step(&r, EV_TICK, 20, &in, &o), 0);
    assert_true(r.next_refit == 30);
    assert_int_equal(r.pending, REFIT_NONE);
    assert_int_equal(step(&r, EV_FIT_FAILED, 21, &in, &o), ACT_FIT_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(r.phase, PHASE_IDLE);
    assert_int_equal(step(&r, EV_TICK, 25, &in, &o), 0); /* the skipped round stays skipped */
    in.available = 999;
    assert_int_equal(step(&r, EV_TICK, 30, &in, &o), ACT_SKIPPED);
    assert_non_null(strstr(o.refusal, "refit_min_samples"));
    assert_int_equal(r.pending, REFIT_NONE);
    assert_int_equal(step(&r, EV_TICK, 31, &in, &o), 0); /* not every tick after */
    /* no schedule: never due */
    refit_init(&r, 1, 0, 0);
    in = plenty();
    assert_int_equal(step(&r, EV_TICK, 1e9, &in, &o), 0);
}

/* A drift refit waits for refit_min_samples since the change point and
 * fits on those alone. */
static void drift_waits_for_the_new_regime(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    in.drift_alarm = 1;
    in.since_change = 400;
    assert_int_equal(step(&r, EV_TICK, 1, &in, &o), 0);
    assert_int_equal(r.pending, REFIT_DRIFT);
    in.since_change = 1500;
    assert_int_equal(step(&r, EV_TICK, 2, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(o.samples, 1500);
    assert_int_equal(r.reason, REFIT_DRIFT);
}

/*
 * A drift alarm while a candidate fitted before it is in shadow: the
 * candidate is stale, cancelled at that tick, and the drift's refit starts
 * on the samples after the change point (once enough of them are there).
 * Its publish would once have "cleared" the alarm 5 ms after it was raised.
 */
static void alarm_during_shadow(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 10, 0);
    assert_int_equal(step(&r, EV_TICK, 10, &in, &o), ACT_START_FIT);
    assert_int_equal(step(&r, EV_FIT_DONE, 11, &in, &o), ACT_START_SHADOW);
    assert_int_equal(o.reason, REFIT_SCHEDULE);
    assert_int_equal(r.phase, PHASE_SHADOW);
    in.drift_alarm = 1;
    in.since_change = 300; /* too few of the new regime yet */
    assert_int_equal(step(&r, EV_TICK, 12, &in, &o), ACT_CANCELLED | ACT_TRIGGER_RESTART);
    assert_int_equal(o.cancelled, REFIT_SCHEDULE);
    assert_int_equal(r.phase, PHASE_IDLE);
    assert_int_equal(r.pending, REFIT_DRIFT);
    /* a gate's verdict on the cancelled candidate changes nothing */
    assert_int_equal(step(&r, EV_GATE_PASSED, 13, &in, &o), 0);
    assert_int_equal(step(&r, EV_TICK, 14, &in, &o), 0);
    in.since_change = 1200;
    assert_int_equal(step(&r, EV_TICK, 15, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(o.samples, 1200); /* after the change point only */

    /* enough samples of the new regime at once: cancelled and refit at
     * the same tick */
    in = plenty();
    scheduled_in_shadow(&r, &in);
    in.drift_alarm = 1;
    in.since_change = 2000;
    assert_int_equal(step(&r, EV_TICK, 12, &in, &o),
                     ACT_CANCELLED | ACT_TRIGGER_RESTART | ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(o.samples, 2000);

    /* the drift's own candidate in shadow is not stale: the alarm stands
     * while it runs, since only its outcome answers it */
    assert_int_equal(step(&r, EV_FIT_DONE, 13, &in, &o), ACT_START_SHADOW);
    assert_int_equal(step(&r, EV_TICK, 14, &in, &o), 0);
    assert_int_equal(r.phase, PHASE_SHADOW);
    assert_int_equal(step(&r, EV_GATE_PASSED, 15, &in, &o), ACT_STORE);
    assert_int_equal(step(&r, EV_STORED, 16, &in, &o),
                     ACT_PUBLISH | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
}

/* A drift alarm while a candidate fitted before it is being stored: the
 * store goes on and publishes (the gate passed it), but the detector is
 * not restarted: the alarm stands, and its refit follows on the samples
 * after the change point. */
static void alarm_during_store(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    scheduled_in_shadow(&r, &in);
    assert_int_equal(step(&r, EV_GATE_PASSED, 12, &in, &o), ACT_STORE);
    in.drift_alarm = 1;
    in.since_change = 1500;
    assert_int_equal(step(&r, EV_TICK, 13, &in, &o), 0); /* storing: busy */
    assert_int_equal(r.phase, PHASE_STORING);
    assert_int_equal(step(&r, EV_STORED, 14, &in, &o), ACT_PUBLISH | ACT_TRIGGER_RESTART);
    assert_int_equal(r.pending, REFIT_DRIFT);
    assert_int_equal(step(&r, EV_TICK, 15, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(o.samples, 1500);

    /* a refused store: the same, the alarm stands */
    in = plenty();
    scheduled_in_shadow(&r, &in);
    step(&r, EV_GATE_PASSED, 12, &in, &o);
    in.drift_alarm = 1;
    step(&r, EV_TICK, 13, &in, &o);
    assert_int_equal(step(&r, EV_STORE_FAILED, 14, &in, &o),
                     ACT_STORE_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(step(&r, EV_TICK, 15, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
}

/* A drift alarm raised between two ticks, while a refit of another reason
 * is under way: its outcome sees it (a store's drift restart would
 * otherwise erase an alarm no tick had reported). */
static void alarm_between_ticks(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    scheduled_in_shadow(&r, &in);
    assert_int_equal(step(&r, EV_GATE_PASSED, 12, &in, &o), ACT_STORE);
    in.drift_alarm = 1;
    assert_int_equal(step(&r, EV_STORED, 13, &in, &o), ACT_PUBLISH | ACT_TRIGGER_RESTART);
    assert_int_equal(r.pending, REFIT_DRIFT);
    /* a gate that passes after an alarm no tick saw: cancelled */
    in = plenty();
    scheduled_in_shadow(&r, &in);
    in.drift_alarm = 1;
    assert_int_equal(step(&r, EV_GATE_PASSED, 12, &in, &o), ACT_CANCELLED | ACT_TRIGGER_RESTART);
    assert_int_equal(o.cancelled, REFIT_SCHEDULE);
    assert_int_equal(r.pending, REFIT_DRIFT);
    /* a rollback's refused store, the same */
    refit_init(&r, 1, 0, 0);
    in = plenty();
    in.guard_alarm = 1;
    step(&r, EV_TICK, 1, &in, &o);
    in.drift_alarm = 1;
    assert_int_equal(step(&r, EV_STORE_FAILED, 2, &in, &o),
                     ACT_STORE_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(r.pending, REFIT_DRIFT);
}

/* A drift alarm while a fit on samples before it runs: when the fit ends
 * its candidate is cancelled, never put in shadow; a failed one is counted
 * as failed; either way the drift's refit follows. */
static void alarm_during_fit(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    in.miscal_alarm = 1;
    assert_int_equal(step(&r, EV_TICK, 1, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_MISCAL);
    in.drift_alarm = 1;
    in.since_change = 1100;
    assert_int_equal(step(&r, EV_TICK, 2, &in, &o), 0);
    assert_int_equal(r.phase, PHASE_FITTING);
    assert_int_equal(step(&r, EV_FIT_DONE, 3, &in, &o), ACT_CANCELLED | ACT_TRIGGER_RESTART);
    assert_int_equal(o.cancelled, REFIT_MISCAL);
    assert_int_equal(r.phase, PHASE_IDLE);
    assert_int_equal(step(&r, EV_TICK, 4, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(o.samples, 1100);

    refit_init(&r, 1, 0, 0);
    in = plenty();
    step(&r, EV_MANUAL, 1, &in, &o);
    in.drift_alarm = 1;
    step(&r, EV_TICK, 2, &in, &o);
    assert_int_equal(step(&r, EV_FIT_FAILED, 3, &in, &o), ACT_FIT_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(r.pending, REFIT_DRIFT);
    assert_int_equal(step(&r, EV_TICK, 4, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
}

/* The miscalibration trigger: at an idle tick it starts a fit on the
 * newest refit_samples (what the ring has); a drift alarm outranks it, it
 * outranks the schedule; while busy it waits (the shell restarts it after
 * the outcome, so a stale alarm of it is not seen again). */
static void miscalibration_trigger(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 10, 0);
    in.miscal_alarm = 1;
    in.since_trigger = 5000;
    assert_int_equal(step(&r, EV_TICK, 10, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_MISCAL);
    assert_int_equal(o.samples, 5000);
    assert_string_equal(refit_reason_name(o.reason), "miscalibration");
    assert_int_equal(step(&r, EV_TICK, 11, &in, &o), 0); /* busy */
    assert_int_equal(step(&r, EV_FIT_DONE, 12, &in, &o), ACT_START_SHADOW);
    assert_int_equal(step(&r, EV_GATE_REJECTED, 13, &in, &o), ACT_REJECTED | ACT_TRIGGER_RESTART);
    in.miscal_alarm = 0; /* restarted by the shell */
    assert_int_equal(step(&r, EV_TICK, 14, &in, &o), 0);
    /* drift outranks it */
    in.miscal_alarm = 1;
    in.drift_alarm = 1;
    assert_int_equal(step(&r, EV_TICK, 15, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    /* it outranks a pending schedule, whose round it takes */
    refit_init(&r, 1, 10, 0);
    in = plenty();
    in.available = 500; /* the schedule waits... */
    in.need = 1000;
    in.miscal_alarm = 1;
    assert_int_equal(step(&r, EV_TICK, 10, &in, &o), 0);
    assert_int_equal(r.pending, REFIT_MISCAL); /* ... and it waits too */
    in.available = 1000;
    assert_int_equal(step(&r, EV_TICK, 11, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_MISCAL);
    assert_int_equal(o.samples, 1000);
    /* it fits on the pairs since the trigger's last restart (the regime its
     * evidence is about: after a publish, say), refit_min_samples at least */
    refit_init(&r, 1, 0, 0);
    in = plenty();
    in.miscal_alarm = 1;
    in.since_trigger = 300;
    assert_int_equal(step(&r, EV_TICK, 1, &in, &o), ACT_START_FIT);
    assert_int_equal(o.samples, 1000);
    refit_init(&r, 1, 0, 0);
    in.since_trigger = 2500;
    assert_int_equal(step(&r, EV_TICK, 1, &in, &o), ACT_START_FIT);
    assert_int_equal(o.samples, 2500);
}

/* A failed fit (no samples left, a fit error, memory): back to idle,
 * counted; a drift alarm stands (its detector is not restarted) and its
 * refit is tried again once refit_min_samples more labelled samples came,
 * not at every tick. */
static void failed_fit(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    in.drift_alarm = 1;
    in.seen = 7000;
    step(&r, EV_TICK, 1, &in, &o);
    assert_int_equal(step(&r, EV_FIT_FAILED, 2, &in, &o), ACT_FIT_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(r.phase, PHASE_IDLE);
    assert_int_equal(r.pending, REFIT_DRIFT);
    /* the alarm stands: no retry until need (1000) more samples came */
    assert_int_equal(step(&r, EV_TICK, 3, &in, &o), 0);
    in.seen = 7999;
    assert_int_equal(step(&r, EV_TICK, 4, &in, &o), 0);
    in.seen = 8000;
    assert_int_equal(step(&r, EV_TICK, 5, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    /* failing again waits again; a fit that ends restarts the detector */
    assert_int_equal(step(&r, EV_FIT_FAILED, 6, &in, &o), ACT_FIT_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(step(&r, EV_TICK, 7, &in, &o), 0);
    in.seen = 9000;
    assert_int_equal(step(&r, EV_TICK, 8, &in, &o), ACT_START_FIT);
    assert_int_equal(step(&r, EV_FIT_DONE, 9, &in, &o), ACT_START_SHADOW);
    assert_int_equal(step(&r, EV_GATE_REJECTED, 10, &in, &o),
                     ACT_REJECTED | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
    in.drift_alarm = 0; /* restarted */
    assert_int_equal(step(&r, EV_TICK, 11, &in, &o), 0);
    /* a manual refit's failure leaves any drift detector alone */
    assert_int_equal(step(&r, EV_MANUAL, 12, &in, &o), ACT_START_FIT);
    assert_int_equal(step(&r, EV_FIT_FAILED, 13, &in, &o), ACT_FIT_FAILED | ACT_TRIGGER_RESTART);
    assert_int_equal(r.pending, REFIT_NONE);
}

/* A store the state directory refuses: nothing published, counted, the
 * detector restarts (the parameters in force did not change, but the
 * candidate's shadow run has answered the alarm); the next version tries
 * again later. */
static void failed_store(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    step(&r, EV_MANUAL, 1, &in, &o);
    step(&r, EV_FIT_DONE, 2, &in, &o);
    assert_int_equal(step(&r, EV_GATE_PASSED, 3, &in, &o), ACT_STORE);
    assert_int_equal(step(&r, EV_STORE_FAILED, 4, &in, &o),
                     ACT_STORE_FAILED | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
    assert_int_equal(o.reason, REFIT_MANUAL);
    assert_int_equal(r.phase, PHASE_IDLE);
    assert_int_equal(step(&r, EV_MANUAL, 5, &in, &o), ACT_START_FIT);
}

/* Manual requests: refused with the phase as the reason while busy, or
 * with too few samples; started at once otherwise. */
static void manual_refit(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    assert_int_equal(step(&r, EV_MANUAL, 1, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_MANUAL);
    assert_int_equal(o.samples, 5000);
    assert_int_equal(step(&r, EV_MANUAL, 2, &in, &o), ACT_REFUSED);
    assert_string_equal(o.refusal, "a refit of this model is running");
    assert_int_equal(r.phase, PHASE_FITTING);
    step(&r, EV_FIT_DONE, 3, &in, &o);
    assert_int_equal(step(&r, EV_MANUAL, 4, &in, &o), ACT_REFUSED);
    assert_string_equal(o.refusal, "a candidate of this model is in shadow");
    step(&r, EV_GATE_PASSED, 5, &in, &o);
    assert_int_equal(step(&r, EV_MANUAL, 6, &in, &o), ACT_REFUSED);
    assert_string_equal(o.refusal, "a new version of this model is being stored");
    step(&r, EV_STORED, 7, &in, &o);
    in.available = 10;
    assert_int_equal(step(&r, EV_MANUAL, 8, &in, &o), ACT_REFUSED);
    assert_non_null(strstr(o.refusal, "refit_min_samples"));
    assert_int_equal(r.phase, PHASE_IDLE);
    /* a manual refit takes at most refit_samples */
    in = plenty();
    in.available = 50000;
    assert_int_equal(step(&r, EV_MANUAL, 9, &in, &o), ACT_START_FIT);
    assert_int_equal(o.samples, 10000);
}

/* auto_publish = no: a candidate that passes is withheld; a drift's
 * detector then measures anew. */
static void withheld_candidate(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    in.auto_publish = 0;
    in.drift_alarm = 1;
    refit_init(&r, 1, 0, 0);
    step(&r, EV_TICK, 1, &in, &o);
    step(&r, EV_FIT_DONE, 2, &in, &o);
    assert_int_equal(step(&r, EV_GATE_PASSED, 3, &in, &o),
                     ACT_WITHHELD | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
    assert_int_equal(r.phase, PHASE_IDLE);
    /* a drift candidate the gate rejects: the same restart */
    step(&r, EV_TICK, 4, &in, &o);
    step(&r, EV_FIT_DONE, 5, &in, &o);
    assert_int_equal(step(&r, EV_GATE_REJECTED, 6, &in, &o),
                     ACT_REJECTED | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
}

/* Events a phase does not expect change nothing. */
static void unexpected_events_ignored(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    const int idle_ignores[] = {EV_FIT_DONE, EV_FIT_FAILED, EV_GATE_PASSED,
                                EV_GATE_REJECTED, EV_STORED, EV_STORE_FAILED};
    for (size_t i = 0; i < sizeof idle_ignores / sizeof *idle_ignores; i++) {
        assert_int_equal(step(&r, idle_ignores[i], 1, &in, &o), 0);
        assert_int_equal(r.phase, PHASE_IDLE);
    }
    step(&r, EV_MANUAL, 2, &in, &o);
    assert_int_equal(step(&r, EV_GATE_PASSED, 3, &in, &o), 0);
    assert_int_equal(step(&r, EV_STORED, 3, &in, &o), 0);
    assert_int_equal(r.phase, PHASE_FITTING);
    step(&r, EV_FIT_DONE, 4, &in, &o);
    assert_int_equal(step(&r, EV_FIT_FAILED, 5, &in, &o), 0);
    assert_int_equal(step(&r, EV_STORE_FAILED, 5, &in, &o), 0);
    assert_int_equal(r.phase, PHASE_SHADOW);
}

/* The guard's alarm: at an idle tick a store of the previous parameters
 * (no fit, no shadow run), which outranks a drift alarm; while busy it
 * waits, and a version published meanwhile answers it (the shell starts
 * that version's own guard, so the alarm is gone at the next tick). */
static void rollback(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    in.guard_alarm = 1;
    in.drift_alarm = 1;
    assert_int_equal(step(&r, EV_TICK, 1, &in, &o), ACT_STORE);
    assert_int_equal(o.reason, REFIT_ROLLBACK);
    assert_int_equal(r.phase, PHASE_STORING);
    assert_int_equal(step(&r, EV_MANUAL, 2, &in, &o), ACT_REFUSED);
    /* the rollback does not answer the drift alarm: it stands */
    assert_int_equal(step(&r, EV_STORED, 3, &in, &o), ACT_PUBLISH | ACT_TRIGGER_RESTART);
    assert_int_equal(o.reason, REFIT_ROLLBACK);
    assert_int_equal(r.pending, REFIT_DRIFT);
    in.guard_alarm = 0; /* the shell ended the guard: a rollback is not guarded */
    assert_int_equal(step(&r, EV_TICK, 4, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);

    /* a drift refit waiting for samples of the new regime when the guard
     * alarms: after the rollback it waits on; once the detector is
     * restarted (by the outcome of another path) the pending drift is
     * answered and the schedule goes on (it once stayed pending for ever) */
    refit_init(&r, 1, 60, 0);
    in = plenty();
    in.drift_alarm = 1;
    in.since_change = 10; /* below need */
    assert_int_equal(step(&r, EV_TICK, 1, &in, &o), 0);
    assert_int_equal(r.pending, REFIT_DRIFT);
    in.guard_alarm = 1;
    assert_int_equal(step(&r, EV_TICK, 2, &in, &o), ACT_STORE);
    assert_int_equal(o.reason, REFIT_ROLLBACK);
    assert_int_equal(step(&r, EV_STORED, 3, &in, &o), ACT_PUBLISH | ACT_TRIGGER_RESTART);
    assert_int_equal(r.pending, REFIT_DRIFT);
    in.guard_alarm = 0;
    assert_int_equal(step(&r, EV_TICK, 4, &in, &o), 0); /* still too few */
    in = plenty(); /* the detector restarted: no alarm */
    in.since_change = 0;
    assert_int_equal(step(&r, EV_TICK, 61, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_SCHEDULE);

    /* busy in shadow: the rollback waits for the candidate's outcome */
    refit_init(&r, 1, 0, 0);
    in = plenty();
    step(&r, EV_MANUAL, 1, &in, &o);
    step(&r, EV_FIT_DONE, 2, &in, &o);
    in.guard_alarm = 1;
    assert_int_equal(step(&r, EV_TICK, 3, &in, &o), 0);
    assert_int_equal(r.phase, PHASE_SHADOW);
    assert_int_equal(step(&r, EV_GATE_REJECTED, 4, &in, &o), ACT_REJECTED | ACT_TRIGGER_RESTART);
    assert_int_equal(step(&r, EV_TICK, 5, &in, &o), ACT_STORE);
    assert_int_equal(o.reason, REFIT_ROLLBACK);
    /* a rollback the state directory refuses: back to idle, counted */
    assert_int_equal(step(&r, EV_STORE_FAILED, 6, &in, &o),
                     ACT_STORE_FAILED | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
    assert_int_equal(r.phase, PHASE_IDLE);

    /* a candidate published while the guard alarms answers it */
    refit_init(&r, 1, 0, 0);
    in = plenty();
    step(&r, EV_MANUAL, 1, &in, &o);
    step(&r, EV_FIT_DONE, 2, &in, &o);
    in.guard_alarm = 1;
    assert_int_equal(step(&r, EV_GATE_PASSED, 3, &in, &o), ACT_STORE);
    assert_int_equal(o.reason, REFIT_MANUAL);
    assert_int_equal(step(&r, EV_STORED, 4, &in, &o),
                     ACT_PUBLISH | ACT_DRIFT_RESTART | ACT_TRIGGER_RESTART);
    in.guard_alarm = 0; /* the new version's guard starts afresh */
    assert_int_equal(step(&r, EV_TICK, 5, &in, &o), 0);
    assert_int_equal(r.phase, PHASE_IDLE);
}

/* A manual request while a drift alarm stands starts the drift's refit, on
 * the samples after its change point, or is refused until there are
 * enough of them: a fit on the older ones would be cancelled as stale. */
static void manual_during_drift(void **state)
{
    refit_machine r;
    refit_out o;
    refit_in in = plenty();
    refit_init(&r, 1, 0, 0);
    in.drift_alarm = 1;
    in.since_change = 200;
    step(&r, EV_TICK, 1, &in, &o);
    assert_int_equal(step(&r, EV_MANUAL, 2, &in, &o), ACT_REFUSED);
    assert_non_null(strstr(o.refusal, "change point"));
    in.since_change = 3000;
    assert_int_equal(step(&r, EV_MANUAL, 3, &in, &o), ACT_START_FIT);
    assert_int_equal(o.reason, REFIT_DRIFT);
    assert_int_equal(o.samples, 3000);
    assert_int_equal(step(&r, EV_FIT_DONE, 4, &in, &o), ACT_START_SHADOW);
}

static void names(void **state)
{
    assert_string_equal(refit_reason_name(REFIT_ROLLBACK), "rollback");
    assert_string_equal(refit_phase_name(PHASE_SHADOW), "shadow");
    assert_string_equal(refit_phase_name(99), "unknown");
    assert_string_equal(refit_reason_name(REFIT_DRIFT), "drift");
    assert_null(refit_reason_name(REFIT_NONE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(off_does_nothing),
        cmocka_unit_test(schedule_fits_or_skips),
        cmocka_unit_test(drift_waits_for_the_new_regime),
        cmocka_unit_test(alarm_during_shadow),
        cmocka_unit_test(alarm_during_store),
        cmocka_unit_test(alarm_during_fit),
        cmocka_unit_test(alarm_between_ticks),
        cmocka_unit_test(miscalibration_trigger),
        cmocka_unit_test(manual_during_drift),
        cmocka_unit_test(failed_fit),
        cmocka_unit_test(failed_store),
        cmocka_unit_test(manual_refit),
        cmocka_unit_test(withheld_candidate),
        cmocka_unit_test(unexpected_events_ignored),
        cmocka_unit_test(rollback),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
