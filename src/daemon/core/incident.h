/* incident.h — the alert rules' incidents as pure state machines: a
 * model's state per rule (model.h holds it), the step of one rule at one
 * evaluation, label starvation. alert.h sends what they decide. */
#ifndef CALIBD_INCIDENT_H
#define CALIBD_INCIDENT_H

#include <stddef.h>

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

#endif
