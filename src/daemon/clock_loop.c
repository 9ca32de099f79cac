/* clock_loop.c — the event loop's clocks: its cached monotonic clock and
 * the steady clock built on it (see clock.h). Apart from clock.c, which
 * reads the system's clocks with no libuv, for calibctl. */
#include <uv.h>

#include "calibd.h"
#include "clock.h"

double tick_now(const calibd *d)
{
    return (double)uv_now(d->loop) / 1000;
}

double steady_now(const calibd *d)
{
    return d->steady_base + tick_now(d);
}

void clock_start(calibd *d)
{
    uv_update_time(d->loop);
    d->steady_base = wall_now() - tick_now(d);
}

void clock_resume(calibd *d, double steady)
{
    uv_update_time(d->loop);
    d->steady_base = steady - tick_now(d);
}
