/* alert.h — alert messages on the PUB socket and the optional exec sink.
 *
 * Rules with a state (thresholds, label starvation, drift) raise one alert
 * per incident: an incident opens when its condition holds, and closes only
 * when the value falls below level x (1 - alert_hysteresis); a new incident
 * of the same rule raises no alert within alert_cooldown seconds of the
 * last. Events (refit published or rejected) raise one alert each. */
#ifndef CALIBD_ALERT_H
#define CALIBD_ALERT_H

#include <stddef.h>

struct calibd;
struct model;

/* The rules with incidents, one state each per model. */
enum alert_rule {
    RULE_DRIFT,
    RULE_BRIER,
    RULE_RBS,
    RULE_ECE,
    RULE_DSS,
    RULE_STARVATION,
    RULES
};

typedef struct alert_state {
    int open;     /* an incident is open */
    int alerted;  /* the rule has sent an alert */
    double last;  /* tick_now() of this rule's last alert */
} alert_state;

typedef struct alert_value {
    const char *name;
    double value;
} alert_value;

/* What an incident rule does at one evaluation. */
enum alert_verdict {
    ALERT_NONE,       /* nothing changes */
    ALERT_OPENED,     /* an incident opens: send its alert */
    ALERT_SUPPRESSED, /* an incident opens within alert_cooldown of the
                         rule's last alert: counted, not sent */
    ALERT_CLOSED,     /* the open incident closes */
};

/* The incident state machine of one rule, pure: open_now (the condition
 * holds) opens an incident if none is open; close_now (the value is below
 * level x (1 - hysteresis)) closes an open one; a rule alerts at most once
 * per cooldown seconds of the monotonic clock (now). */
int alert_step(alert_state *st, int open_now, int close_now, double now, double cooldown);

/* Label starvation, pure: with predictions, no label nor inline outcome
 * for more than limit seconds (from the last label or, before any, the
 * first prediction) while predictions keep coming; closes below
 * limit x (1 - hysteresis), i.e. once labels come again. A model that has
 * no prediction, or that gets nothing at all, is idle, not starved. Sets
 * *since; limit <= 0: never. */
void alert_starvation(const struct model *m, double now, double hysteresis, double *since,
                      int *open_now, int *close_now);

/* Publishes an alert and hands it to the exec sink; counts and logs it. */
void alert_send(struct calibd *d, struct model *m, const char *kind, const char *severity,
                const char *message, const alert_value *v, size_t nv);

/* Opens rule's incident (and alerts, cooldown permitting) when open_now is
 * true and none is open; closes it when close_now is true. */
void alert_incident(struct calibd *d, struct model *m, int rule, int open_now, int close_now,
                    const char *kind, const char *severity, const char *message,
                    const alert_value *v, size_t nv);

/* Threshold rules over the model's window as the tick summed it (its
 * model_view) and label starvation; from the tick. */
void alert_check(struct calibd *d, struct model *m);

/* Kills the exec sinks still running (at shut-down). */
void alert_sinks_kill(struct calibd *d);

#endif
