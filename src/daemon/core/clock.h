/*
 * clock.h — calibd's clocks, and the one rule for which is for what: the
 * monotonic clock advances everything that lasts, the wall clock only
 * labels.
 *
 *  - the loop's monotonic clock (libuv's, seconds) for intervals: label
 *    TTLs, timeouts, schedules, cooldowns, starvation -- which a step of
 *    the wall clock (NTP, an operator) must neither stretch nor shrink.
 *    A waiting item dated by the wall clock would all expire at once when
 *    the clock steps forward;
 *  - the steady clock for what is placed in time and lasts: the time a
 *    pair was scored, window panes and periods, history points. It reads
 *    the wall clock at start and advances with the monotonic clock since,
 *    so it looks like a date (snapshots and the history carry it across
 *    restarts) but no step of the wall clock moves it: a step forward
 *    longer than the window once emptied the window for the step's length,
 *    and a step back stopped the history for as long;
 *  - the wall clock (CLOCK_REALTIME, seconds since the epoch) for labels:
 *    published `ts`, alert and event times, uptime.
 */
#ifndef CALIBD_CLOCK_H
#define CALIBD_CLOCK_H

struct calibd;

/* Wall-clock seconds since the epoch. */
double wall_now(void);
/* Monotonic seconds at this tick: the event loop's reading of CLOCK_MONOTONIC,
 * cached per loop iteration (libuv's uv_now). */
double tick_now(const struct calibd *d);
/* Monotonic seconds, read now (CLOCK_MONOTONIC, libuv's source too): for
 * threads other than the loop's, which may not read its cache (the HTTP
 * server's), and for timing the loop's own work. */
double mono_now(void);
/* The steady clock: the wall clock at start (clock_start) plus the loop's
 * clock since. */
double steady_now(const struct calibd *d);
/* Anchors the steady clock on the wall clock, once, at start. */
void clock_start(struct calibd *d);
/* Sets the steady clock to read `steady` now (a restore goes on from the
 * snapshot's: persist.c). */
void clock_resume(struct calibd *d, double steady);
/* Seconds since boot, suspend included (CLOCK_BOOTTIME): what no step of
 * the wall clock moves, across restarts of calibd within one boot. */
double boot_now(void);
/* This boot's id (/proc/sys/kernel/random/boot_id) into id (at least 37
 * bytes), or "" where there is none. */
void boot_id(char *id, size_t len);

#endif
