/*
 * clock.h — calibd's two clocks, and the one rule for which is for what:
 *
 *  - the wall clock (CLOCK_REALTIME, seconds since the epoch) for what is
 *    dated: window panes, the time a pair was scored, published `ts`,
 *    alert times;
 *  - the loop's monotonic clock (libuv's, seconds) for intervals: label
 *    TTLs, timeouts, schedules, cooldowns, starvation -- which a step of
 *    the wall clock (NTP, an operator) must neither stretch nor shrink.
 *    A waiting item dated by the wall clock would all expire at once when
 *    the clock steps forward.
 */
#ifndef CALIBD_CLOCK_H
#define CALIBD_CLOCK_H

struct calibd;

/* Wall-clock seconds since the epoch. */
double wall_now(void);
/* Monotonic seconds: the loop's clock (cached per loop iteration). */
double loop_now(const struct calibd *d);

#endif
