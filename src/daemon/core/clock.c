/* clock.c — the system's clocks, read (see clock.h); the event loop's
 * clocks are in clock_loop.c. */
#include <stdio.h>
#include <string.h>
#include <time.h>

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
