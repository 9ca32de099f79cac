/*
 * merge.h — one model's state merged into another's, for `calibctl merge`
 * (calibd(8), SHARDING): calibd's statistics are sums, so the models of
 * several shards, or of several days, add up.
 *
 * Exact: the counters, the cumulative and paired score sums (compensated
 * sums merge exactly), the reliability and class-wise bins, the window's
 * panes (a pane of the same time adds; the newer of two in one slot
 * stays). Sampled: the reservoir, as a uniform sample of both streams
 * weighted by their counts (calib_reservoir_merge); the ring keeps the
 * newest records of both by time; the join table keeps both tables' waiting
 * items and joined ids (an id in both once); the events the newest of both.
 * Segments (seg_merge) match by key and value names: their statistics add,
 * a flag of either stays, and src's waiting predictions keep their
 * segments (their codes made dst's); the tests start again.
 * The closed loop's detectors and runs belong to one daemon: the merged
 * model's start afresh (its counters add), and the parameters are those of
 * the newest version.
 */
#ifndef CALIBD_MERGE_H
#define CALIBD_MERGE_H

#include <stddef.h>

#include "model.h"

/* Merges src into dst, which has the same shape, bins and window (times of
 * both on one clock). 0 (why notes ids kept once, or is ""), or -1 with
 * why set: the models cannot be merged (dst unchanged), or memory ran out
 * (dst partly merged: drop it). */
int model_merge(model *dst, const model *src, char *why, size_t len);

#endif
