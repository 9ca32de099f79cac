/* slicer.c — the loop's work a slice at a time (slicer.h). */
#include "slicer.h"

static void on_idle(uv_idle_t *h)
{
    slicer *s = h->data;
    uint64_t t0 = s->clock_ns();
    while (s->running && s->next < s->count(s->arg)) {
        s->step(s->arg, s->next);
        if (s->paused)
            break;
        s->next++;
        if (s->clock_ns() - t0 >= SLICE_NS)
            break;
    }
    double slice = (double)(s->clock_ns() - t0) * 1e-9;
    if (slice > s->slice_max)
        s->slice_max = slice;
    if (s->running && s->paused) {
        uv_idle_stop(&s->idle);
        return;
    }
    if (!s->running || s->next < s->count(s->arg))
        return;
    slicer_stop(s);
    s->done(s->arg);
}

int slicer_init(slicer *s, uv_loop_t *loop, size_t (*count)(void *arg),
                void (*step)(void *arg, size_t i), void (*done)(void *arg), void *arg)
{
    *s = (slicer){.count = count, .step = step, .done = done, .arg = arg, .clock_ns = uv_hrtime};
    int rc = uv_idle_init(loop, &s->idle);
    if (rc != 0)
        return rc;
    s->idle.data = s;
    s->ready = 1;
    return 0;
}

void slicer_start(slicer *s)
{
    if (!s->ready || s->running)
        return;
    s->next = 0;
    s->slice_max = 0;
    s->running = 1;
    s->paused = 0;
    uv_idle_start(&s->idle, on_idle);
}

void slicer_pause(slicer *s)
{
    if (s->running)
        s->paused = 1;
}

void slicer_resume(slicer *s)
{
    if (!s->ready || !s->running || !s->paused)
        return;
    s->paused = 0;
    uv_idle_start(&s->idle, on_idle);
}

void slicer_stop(slicer *s)
{
    if (!s->ready)
        return;
    s->running = 0;
    s->paused = 0;
    uv_idle_stop(&s->idle);
}

void slicer_close(slicer *s)
{
    if (!s->ready)
        return;
    slicer_stop(s);
    uv_close((uv_handle_t *)&s->idle, NULL);
    s->ready = 0;
}
