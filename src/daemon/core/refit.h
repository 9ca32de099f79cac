/*
 * refit.h — the closed loop of one model as a state machine: one phase, a
 * pending reason and a schedule, advanced by one pure function of an event
 * and the time that returns the actions to take. No libuv, no zmq, no log:
 * recalib.c is the shell that feeds it events and performs its actions, and
 * tests/unit/test_refit.c drives it with a fake clock.
 *
 *   OFF ----------------------------------------------- (no method: stays)
 *   IDLE --tick: a reason pending and its samples there--> FITTING
 *   FITTING --fit done--> SHADOW        --fit failed--> IDLE
 *   SHADOW --gate passed, auto_publish--> STORING
 *   SHADOW --gate passed, auto_publish = no / rejected--> IDLE
 *   STORING --stored--> IDLE (publish)  --store failed--> IDLE
 *   IDLE --tick: the guard in alarm--> STORING (the previous version's
 *          parameters, as the next version: a rollback)
 *   FITTING, SHADOW, STORING --tick: a drift alarm the refit under way
 *          does not answer--> stale: SHADOW is cancelled at once (IDLE),
 *          FITTING is cancelled when its fit ends, STORING publishes but
 *          leaves the alarm standing; each then refits for the drift
 *
 * Reasons: a drift alarm (the detector in alarm at a tick), the
 * miscalibration trigger (its test rejected "no recalibration lowers the
 * bound by miscal_min_effect"), the schedule (refit_interval), or a manual
 * request; and a rollback, which needs no
 * fit nor shadow run: the guard (rollback = yes) compared the version in
 * force with the one before it on the same pairs and showed it worse. A
 * guard alarm is level-triggered like a drift alarm and outranks it; while
 * busy it waits, and a version published meanwhile (whose own guard starts
 * afresh) answers it. One fit, candidate or store at a
 * time: a drift alarm while busy makes the refit under way stale (unless
 * it is the drift's own), and its refit starts once the model is idle (it
 * outranks a pending schedule); a scheduled
 * refit due while busy is not queued; a manual request while busy is
 * refused with the phase as the reason, and one during a drift alarm
 * starts the drift's refit. After a drift alarm the fit takes only
 * samples since the estimated change point, and waits until
 * refit_min_samples of them are there; a scheduled refit without enough
 * samples is dropped. The drift reference restarts (ACT_DRIFT_RESTART)
 * after every outcome that leaves a drift unexplained -- a rejected or
 * withheld candidate of a drift refit -- and after every
 * store, published or failed, since the parameters in force then decide
 * the reference -- except a store that went stale: no path clears a drift
 * alarm but an outcome of a fit on samples after its change point. A
 * drift refit whose fit failed (no samples left, a fit error, memory)
 * leaves the alarm standing and is tried again once refit_min_samples
 * more labelled samples came (refit_in.seen). The
 * miscalibration trigger restarts (ACT_TRIGGER_RESTART) after every
 * outcome, whatever its reason: its evidence was about the parameters and
 * the samples before it. A drift alarm outranks the trigger, which
 * outranks the schedule.
 */
#ifndef CALIBD_REFIT_H
#define CALIBD_REFIT_H

#include <stddef.h>

enum refit_phase { PHASE_OFF, PHASE_IDLE, PHASE_FITTING, PHASE_SHADOW, PHASE_STORING };

/* Why a refit started (or waits to). */
enum refit_reason {
    REFIT_NONE, REFIT_DRIFT, REFIT_SCHEDULE, REFIT_MANUAL, REFIT_ROLLBACK,
    REFIT_MISCAL, /* the miscalibration trigger (last: snapshots keep numbers) */
};

enum refit_event {
    EV_TICK,          /* the periodic tick */
    EV_MANUAL,        /* calibctl refit */
    EV_FIT_DONE,      /* the worker's fit gave usable parameters */
    EV_FIT_FAILED,    /* ... or did not */
    EV_GATE_PASSED,   /* the shadow gate established the improvement */
    EV_GATE_REJECTED, /* ... or gave up */
    EV_STORED,        /* the new version is on disk */
    EV_STORE_FAILED,  /* ... or the state directory refused it */
};

/* What the shell must do, as bits of refit_out.actions. */
enum refit_action {
    ACT_START_FIT = 1 << 0,     /* fit on the newest out.samples records */
    ACT_START_SHADOW = 1 << 1,  /* put the fitted candidate in shadow */
    ACT_STORE = 1 << 2,         /* store the candidate as the next version */
    ACT_PUBLISH = 1 << 3,       /* stored: adopt it and send it */
    ACT_REJECTED = 1 << 4,      /* count and report: the gate rejected it */
    ACT_WITHHELD = 1 << 5,      /* ... it passed, auto_publish = no */
    ACT_FIT_FAILED = 1 << 6,    /* count and report a failed fit */
    ACT_STORE_FAILED = 1 << 7,  /* count and report a refused store */
    ACT_DRIFT_RESTART = 1 << 8, /* restart the drift detector's reference */
    ACT_REFUSED = 1 << 9,       /* a manual request refused: out.refusal */
    ACT_SKIPPED = 1 << 10,      /* a scheduled refit dropped: too few samples */
    ACT_CANCELLED = 1 << 11,    /* a stale refit dropped: its candidate (in
                                   shadow, or whose fit just ended) predates
                                   a drift alarm */
    ACT_TRIGGER_RESTART = 1 << 12, /* restart the miscalibration trigger */
};

/* What a transition reads besides the event and the time. */
typedef struct refit_in {
    int drift_alarm;      /* the drift detector is in alarm */
    int miscal_alarm;     /* the miscalibration trigger rejected */
    int guard_alarm;      /* the guard showed the version in force worse
                             than the one before it */
    size_t available;     /* labelled records in the ring */
    size_t since_change;  /* of them, since the estimated change point */
    size_t since_trigger; /* of them, since the trigger's last restart: a
                             miscalibration refit fits on these (at least
                             need), the regime its evidence is about */
    size_t want;          /* refit_samples */
    size_t need;          /* refit_min_samples, at most the ring's capacity */
    unsigned long long seen; /* labelled records the ring ever took */
    int auto_publish;
} refit_in;

typedef struct refit_out {
    unsigned actions;     /* enum refit_action bits */
    int reason;           /* the refit's reason (ACT_START_FIT, and the
                             outcomes of its fit, shadow and store) */
    size_t samples;       /* ACT_START_FIT: records to fit on */
    int cancelled;        /* ACT_CANCELLED: the reason of the refit dropped */
    const char *refusal;  /* ACT_REFUSED, ACT_SKIPPED: why, a static string */
} refit_out;

typedef struct refit_machine {
    /* read-only */
    int phase;            /* enum refit_phase */
    int pending;          /* enum refit_reason waiting to start */
    int reason;           /* of the fit, candidate or store under way */
    double next_refit;    /* when the schedule is next due; 0: no schedule */
    /* private */
    double interval;      /* refit_interval; 0: no schedule */
    unsigned long long retry_at; /* a failed drift refit's retry: seen */
} refit_machine;

/* A machine in IDLE (on: the model has a usable method) or OFF, whose
 * schedule of refit_interval seconds (0: none) starts at now. */
void refit_init(refit_machine *r, int on, double interval, double now);

/* One event at time now (monotonic seconds): advances the machine and
 * returns out->actions (also the return value). An event the phase does
 * not expect (a fit result while idle, say) changes nothing. */
unsigned refit_step(refit_machine *r, int event, double now, const refit_in *in,
                    refit_out *out);

/* "off", "idle", "fitting", "shadow", "storing"; and "drift", "schedule",
 * "manual", "rollback", "miscalibration" (NULL for REFIT_NONE). */
const char *refit_phase_name(int phase);
const char *refit_reason_name(int reason);

#endif
