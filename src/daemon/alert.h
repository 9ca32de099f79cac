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
#include <stdint.h>

#include "incident.h"

struct calibd;
struct model;

#define SINKS_MAX 8 /* exec sinks running at once */

/* What the alert rules sent, and their exec sinks (alert.c). */
typedef struct alerting {
    uint64_t sent, suppressed;
    int sinks_running;
    uint64_t sinks_failed, sinks_killed, sinks_dropped;
} alerting;

typedef struct alert_value {
    const char *name;
    double value;
} alert_value;

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
