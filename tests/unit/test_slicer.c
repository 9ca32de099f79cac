/* test_slicer.c — the loop's work a slice at a time (slicer.h), on a libuv
 * loop without sockets: every item handled once, in order, in slices that
 * end with the item that brings them to SLICE_NS, one a turn of the loop;
 * items added during a run are taken; a run stopped midway ends without
 * done; a step that pauses gets its item again at the resume, and the run
 * waits without its idle handle meanwhile. The slicer reads the test's clock, which each item advances by its
 * cost: a loaded machine cannot stretch a slice. */
#define _POSIX_C_SOURCE 200809L
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "slicer.h"

/* the test's clock, in ns: each item advances it by its cost */
static uint64_t clock_now;
static uint64_t test_clock(void)
{
    return clock_now;
}

/* turns of the loop so far (a check handle: after each poll) */
static size_t turns;
static void on_turn(uv_check_t *h)
{
    (void)h;
    turns++;
}

typedef struct job {
    size_t n;            /* items now */
    size_t *seen;        /* order of the items handled */
    size_t *turn;        /* the loop's turn each was handled in */
    size_t nseen, cap;
    int done;
    uint64_t step_ns;    /* each item's cost */
    size_t grow_at, grow_to; /* at item grow_at, n becomes grow_to */
    size_t stop_at;      /* at item stop_at, the run is stopped */
    size_t pause_at;     /* item pause_at is refused once: the run pauses */
    int paused;          /* it was */
    int idle_while_paused; /* the idle handle was active at the resume */
    uv_timer_t resume;   /* resumes the run a turn later */
    slicer *s;
} job;

static size_t count(void *arg)
{
    return ((job *)arg)->n;
}

static void on_resume(uv_timer_t *t)
{
    job *j = t->data;
    j->idle_while_paused = uv_is_active((uv_handle_t *)&j->s->idle);
    uv_close((uv_handle_t *)t, NULL);
    slicer_resume(j->s);
}

static void step(void *arg, size_t i)
{
    job *j = arg;
    if (i == j->pause_at && !j->paused) {
        j->paused = 1;
        slicer_pause(j->s);
        assert_int_equal(uv_timer_init(j->s->idle.loop, &j->resume), 0);
        j->resume.data = j;
        assert_int_equal(uv_timer_start(&j->resume, on_resume, 1, 0), 0);
        return;
    }
    assert_true(j->nseen < j->cap);
    if (j->turn)
        j->turn[j->nseen] = turns;
    j->seen[j->nseen++] = i;
    clock_now += j->step_ns;
    if (i == j->grow_at)
        j->n = j->grow_to;
    if (i == j->stop_at)
        slicer_stop(j->s);
}

static void done(void *arg)
{
    ((job *)arg)->done++;
}

/* Runs a job on a fresh loop; returns the slicer's longest slice. */
static double run(job *j, uv_loop_t *loop, slicer *s)
{
    uv_check_t check;
    j->s = s;
    assert_int_equal(slicer_init(s, loop, count, step, done, j), 0);
    s->clock_ns = test_clock;
    assert_int_equal(uv_check_init(loop, &check), 0);
    assert_int_equal(uv_check_start(&check, on_turn), 0);
    uv_unref((uv_handle_t *)&check); /* the slicer alone keeps the loop going */
    turns = 0;
    slicer_start(s);
    slicer_start(s); /* running: nothing */
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    double max = s->slice_max;
    slicer_close(s);
    uv_close((uv_handle_t *)&check, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    return max;
}

/* 1000 items of 30 us: 30 ms of work, in slices of 67 items (the 67th
 * brings a slice to 2.01 ms, past SLICE_NS), one a turn of the loop; the
 * last slice has the 49 left. */
static void all_in_order_in_slices(void **state)
{
    uv_loop_t loop;
    slicer s;
    assert_int_equal(uv_loop_init(&loop), 0);
    job j = {.n = 1000, .cap = 1000, .step_ns = 30000, .grow_at = SIZE_MAX,
             .stop_at = SIZE_MAX, .pause_at = SIZE_MAX};
    j.seen = calloc(j.cap, sizeof *j.seen);
    j.turn = calloc(j.cap, sizeof *j.turn);
    assert_true(j.seen && j.turn);
    double max = run(&j, &loop, &s);
    assert_int_equal(j.nseen, 1000);
    for (size_t i = 0; i < 1000; i++) {
        assert_int_equal(j.seen[i], i);
        /* item i in slice i / 67, each slice a turn of its own */
        assert_int_equal(j.turn[i] - j.turn[0], i / 67);
    }
    assert_int_equal(j.done, 1);
    assert_true(max == 67 * 30000 * 1e-9);
    free(j.seen);
    free(j.turn);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Items added during the run are handled in the same run; a run stopped
 * midway calls no done and handles nothing more. */
static void grows_and_stops(void **state)
{
    uv_loop_t loop;
    slicer s;
    assert_int_equal(uv_loop_init(&loop), 0);
    job j = {.n = 10, .cap = 100, .grow_at = 5, .grow_to = 40, .stop_at = SIZE_MAX,
             .pause_at = SIZE_MAX};
    j.seen = calloc(j.cap, sizeof *j.seen);
    assert_non_null(j.seen);
    run(&j, &loop, &s);
    assert_int_equal(j.nseen, 40);
    assert_int_equal(j.done, 1);
    j = (job){.n = 50, .cap = 100, .seen = j.seen, .grow_at = SIZE_MAX, .stop_at = 20,
              .pause_at = SIZE_MAX};
    run(&j, &loop, &s);
    assert_int_equal(j.nseen, 21);
    assert_int_equal(j.done, 0);
    free(j.seen);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A step that pauses at item 7: the run stops its idle handle (no
 * busy wait) until the resume, then gets item 7 again; every item is
 * handled once, in order, and done comes once. */
static void pauses_and_resumes(void **state)
{
    uv_loop_t loop;
    slicer s;
    assert_int_equal(uv_loop_init(&loop), 0);
    job j = {.n = 20, .cap = 20, .grow_at = SIZE_MAX, .stop_at = SIZE_MAX, .pause_at = 7,
             .idle_while_paused = -1};
    j.seen = calloc(j.cap, sizeof *j.seen);
    assert_non_null(j.seen);
    run(&j, &loop, &s);
    assert_int_equal(j.paused, 1);
    assert_int_equal(j.idle_while_paused, 0);
    assert_int_equal(j.nseen, 20);
    for (size_t i = 0; i < 20; i++)
        assert_int_equal(j.seen[i], i);
    assert_int_equal(j.done, 1);
    free(j.seen);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_in_order_in_slices),
        cmocka_unit_test(grows_and_stops),
        cmocka_unit_test(pauses_and_resumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
