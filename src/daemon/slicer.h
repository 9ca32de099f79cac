/*
 * slicer.h — work the loop does a slice at a time between rounds of
 * messages, so that no round of it delays a message or a control reply by
 * more than SLICE_NS: items 0, 1, ... are handled in order from an idle
 * handle (which runs once per loop iteration, after the sockets were
 * polled), for at most SLICE_NS at a time; one item is handled whole,
 * however long it takes. Snapshots pack their models this way, the HTTP
 * server renders its metrics and status, and saves its history.
 *
 * A step that cannot take its item now (a snapshot's writer still busy
 * with the chunk before) calls slicer_pause and returns: the item is not
 * counted as handled, and the run waits, using no CPU, until
 * slicer_resume, which hands it the same item again.
 */
#ifndef CALIBD_SLICER_H
#define CALIBD_SLICER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define SLICE_NS 2000000ull

typedef struct slicer {
    uv_idle_t idle;
    int ready;                        /* the handle is initialised */
    int running;
    int paused;                       /* slicer_pause: waits for slicer_resume */
    size_t next;                      /* the item handled next */
    size_t (*count)(void *arg);       /* items now: read before each item,
                                         so the run takes items added meanwhile */
    void (*step)(void *arg, size_t i);
    void (*done)(void *arg);          /* after the last item, the run over */
    void *arg;
    double slice_max;                 /* the longest slice of the run, seconds */
    uint64_t (*clock_ns)(void);       /* uv_hrtime; a test's own clock */
} slicer;

/* 0, or a libuv error code. */
int slicer_init(slicer *s, uv_loop_t *loop, size_t (*count)(void *arg),
                void (*step)(void *arg, size_t i), void (*done)(void *arg), void *arg);
/* Starts a run from item 0 (nothing if one is running). */
void slicer_start(slicer *s);
/* From a step: its item is not taken; the run waits for slicer_resume. */
void slicer_pause(slicer *s);
/* A paused run goes on, from the item it paused at (nothing otherwise). */
void slicer_resume(slicer *s);
/* Ends a run where it is, without calling done. */
void slicer_stop(slicer *s);
/* Stops it and closes its handle (before the loop's end). */
void slicer_close(slicer *s);

#endif
