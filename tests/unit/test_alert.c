/* test_alert.c — the alert rules without a daemon: one alert per incident
 * (hysteresis), at most one per cooldown, and label starvation. A fake
 * clock throughout. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "model.h"

/* One alert per incident: the condition holding again and again raises
 * nothing more until the incident has closed below level x (1 - h). */
static void one_alert_per_incident(void **state)
{
    alert_state st = {0};
    const double level = 0.5, h = 0.1, cooldown = 0;
    /* value, then what the rule does */
    const struct {
        double value;
        int verdict;
    } seq[] = {
        {0.40, ALERT_NONE},   {0.51, ALERT_OPENED}, {0.60, ALERT_NONE},
        {0.47, ALERT_NONE},   /* below the level, above 0.45: still open */
        {0.52, ALERT_NONE},   {0.44, ALERT_CLOSED}, {0.44, ALERT_NONE},
        {0.55, ALERT_OPENED}, /* a new incident */
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        double v = seq[i].value;
        assert_int_equal(alert_step(&st, v > level, v < level * (1 - h), 100 + (double)i,
                                    cooldown),
                         seq[i].verdict);
    }
}

/* A new incident within the cooldown of the rule's last alert opens
 * without an alert (counted by the caller); after it, alerts again. */
static void cooldown_between_alerts(void **state)
{
    alert_state st = {0};
    assert_int_equal(alert_step(&st, 1, 0, 1000, 300), ALERT_OPENED);
    assert_int_equal(alert_step(&st, 0, 1, 1010, 300), ALERT_CLOSED);
    assert_int_equal(alert_step(&st, 1, 0, 1100, 300), ALERT_SUPPRESSED);
    assert_true(st.open); /* the incident is open all the same */
    assert_int_equal(alert_step(&st, 0, 1, 1200, 300), ALERT_CLOSED);
    /* the cooldown runs from the last alert sent (1000), not the last incident */
    assert_int_equal(alert_step(&st, 1, 0, 1299.9, 300), ALERT_SUPPRESSED);
    alert_step(&st, 0, 1, 1300, 300);
    assert_int_equal(alert_step(&st, 1, 0, 1300, 300), ALERT_OPENED);
    /* the very first alert is never held back, whatever the clock says */
    alert_state fresh = {0};
    assert_int_equal(alert_step(&fresh, 1, 0, 0.5, 300), ALERT_OPENED);
}

static model *starving_model(double limit)
{
    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->cfg.label_starvation = limit;
    return m;
}

/* Predictions keep coming, labels do not: starved after `limit` seconds,
 * from the first prediction before any label, else from the last label;
 * a label (or inline outcome, which ingest records as one) closes it. */
static void label_starvation(void **state)
{
    model *m = starving_model(60);
    double since;
    int open, close;
    /* no prediction yet: idle, never starved */
    alert_starvation(m, 5000, 0.1, &since, &open, &close);
    assert_false(open);
    m->predictions = 10;
    m->first_prediction_mono = 1000;
    m->last_prediction_mono = 1050;
    alert_starvation(m, 1059, 0.1, &since, &open, &close);
    assert_false(open);
    assert_close(since, 59, 1e-12);
    alert_starvation(m, 1061, 0.1, &since, &open, &close);
    assert_true(open);
    /* a label came at 1070; predictions after it */
    m->last_label_mono = 1070;
    m->last_prediction_mono = 1080;
    alert_starvation(m, 1075, 0.1, &since, &open, &close);
    assert_false(open);
    assert_true(close); /* 5 s < 54 s: the incident closes */
    alert_starvation(m, 1131, 0.1, &since, &open, &close);
    assert_true(open);
    /* nothing at all since the last label: idle, not starved */
    m->last_prediction_mono = 1060;
    alert_starvation(m, 5000, 0.1, &since, &open, &close);
    assert_false(open);
    /* the rule off */
    m->cfg.label_starvation = 0;
    m->last_prediction_mono = 4000;
    alert_starvation(m, 5000, 0.1, &since, &open, &close);
    assert_false(open);
    assert_false(close);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_alert_per_incident),
        cmocka_unit_test(cooldown_between_alerts),
        cmocka_unit_test(label_starvation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
