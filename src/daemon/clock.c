/* clock.c — the wall clock and the loop's monotonic clock (see clock.h). */
#include <time.h>

#include "calibd.h"
#include "clock.h"

double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double loop_now(const calibd *d)
{
    return (double)uv_now(d->loop) / 1000;
}

double steady_now(const calibd *d)
{
    return d->steady_base + loop_now(d);
}

void clock_start(calibd *d)
{
    uv_update_time(d->loop);
    d->steady_base = wall_now() - loop_now(d);
}
