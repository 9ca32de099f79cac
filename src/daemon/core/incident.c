/* incident.c — the alert rules' incidents (incident.h): no I/O. */
#include "model.h"

int alert_step(alert_state *st, int open_now, int close_now, double now, double cooldown)
{
    if (st->open) {
        if (!close_now)
            return ALERT_NONE;
        st->open = 0;
        return ALERT_CLOSED;
    }
    if (!open_now)
        return ALERT_NONE;
    st->open = 1;
    if (st->alerted && now - st->last < cooldown)
        return ALERT_SUPPRESSED;
    st->alerted = 1;
    st->last = now;
    return ALERT_OPENED;
}

/* Labels are missing when predictions keep coming and no label (nor an
 * inline outcome) has come for `label_starvation` seconds; a model that gets
 * nothing at all is idle, not starved. The incident closes with the next
 * label. */
void alert_starvation(const model *m, double now, double hysteresis, double *since,
                      int *open_now, int *close_now)
{
    double limit = m->cfg.label_starvation;
    *since = 0;
    *open_now = *close_now = 0;
    if (limit <= 0 || m->predictions == 0)
        return;
    /* the clock runs from the last label, or, before any, the first prediction */
    int labelled = m->last_label_mono > 0; /* the loop's clock starts far above 0 */
    *since = now - (labelled ? m->last_label_mono : m->first_prediction_mono);
    int predicting = !labelled || m->last_prediction_mono > m->last_label_mono;
    *open_now = predicting && *since > limit;
    *close_now = *since < limit * (1 - hysteresis);
}
