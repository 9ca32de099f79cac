/* clock.c — the wall clock and the loop's monotonic clock (see clock.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "calibd.h"
#include "clock.h"

double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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

void clock_resume(calibd *d, double steady)
{
    uv_update_time(d->loop);
    d->steady_base = steady - loop_now(d);
}

double boot_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void boot_id(char *id, size_t len)
{
    id[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (!fgets(id, (int)len, f))
        id[0] = 0;
    fclose(f);
    id[strcspn(id, "\n")] = 0;
}
