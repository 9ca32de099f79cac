/*
 * join_load.h — a join table under a steady load, for tests/unit/test_join.c
 * and tests/bench/bench_join_load.c: predictions of distinct integer ids
 * arrive at rate R = factor * capacity / delay (exponential gaps), each
 * label `delay` seconds after its prediction (a fraction `drop` never),
 * for `periods` delays. A table of `capacity` items holds a pair for
 * `delay`, so capacity allows capacity / delay pairs a second: the share of
 * the offered pairs it allows is min(1, 1 / factor). Counted after the
 * first `warmup` delays (the steady state), and over the whole run. With
 * factor_after, the load changes to it half way.
 */
#ifndef JOIN_LOAD_H
#define JOIN_LOAD_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "calib/calib.h"
#include "calib/join.h"
#include "calib/sample.h"

typedef struct join_load {
    /* in */
    double factor, delay, periods, warmup, drop;
    double factor_after; /* the load from half the run on (0: factor) */
    size_t capacity;
    uint64_t seed;
    /* out: whole run, and steady state (predictions after warmup delays) */
    uint64_t offered, joined, steady_offered, steady_joined;
    double allowed;  /* min(1, 1 / factor) */
    double fraction; /* the table's sample at the last prediction */
    uint64_t sampled_out, evicted, expired;
} join_load;

/* 0, or -1 when the table cannot be made. */
static int join_load_run(join_load *L)
{
    calib_join j;
    calib_join_cfg cfg = {.ttl = 4 * L->delay, .capacity = L->capacity, .width = 1,
                          .joined_capacity = L->capacity, .seed = L->seed};
    if (calib_join_init(&j, &cfg) != CALIB_OK)
        return -1;
    calib_rng rng;
    calib_rng_seed(&rng, L->seed);
    double rate = L->factor * (double)L->capacity / L->delay, end = L->periods * L->delay;
    double x = 0.5, t_pred = 0;
    uint64_t next = 0, label = 0; /* ids: next prediction, next label */
    /* the labels' times, in the predictions' order (one delay later) */
    size_t cap = (size_t)(rate * end * 1.2) + 64;
    double *due = malloc(cap * sizeof *due);
    unsigned char *dropped = malloc(cap);
    if (!due || !dropped) {
        free(due);
        free(dropped);
        calib_join_free(&j);
        return -1;
    }
    L->offered = L->joined = L->steady_offered = L->steady_joined = 0;
    for (;;) {
        int pred_next = t_pred < end && next < cap &&
                        (label == next || t_pred <= due[label]);
        if (!pred_next && label == next)
            break;
        calib_id id;
        calib_join_result r;
        if (pred_next) {
            calib_id_u64(&id, next);
            due[next] = t_pred + L->delay;
            dropped[next] = calib_rng_uniform(&rng) < L->drop;
            calib_join_pred(&j, &id, &x, t_pred, t_pred, &r);
            int steady = t_pred >= L->warmup * L->delay;
            if (!dropped[next]) {
                L->offered++;
                L->steady_offered += steady;
            }
            next++;
            L->fraction = calib_join_sample_fraction(&j);
            if (L->factor_after > 0 && t_pred >= end / 2)
                rate = L->factor_after * (double)L->capacity / L->delay;
            t_pred += -log(1 - calib_rng_uniform(&rng)) / rate;
        } else {
            if (!dropped[label]) {
                calib_id_u64(&id, label);
                calib_join_label(&j, &id, 1, due[label], due[label], &r);
                if (r.status == CALIB_JOIN_JOINED) {
                    L->joined++;
                    L->steady_joined += due[label] - L->delay >= L->warmup * L->delay;
                }
            }
            label++;
        }
    }
    L->allowed = L->factor > 1 ? 1 / L->factor : 1;
    L->sampled_out = j.sampled_out_preds + j.sampled_out_labels;
    L->evicted = j.evicted;
    L->expired = j.expired_preds + j.expired_labels;
    free(due);
    free(dropped);
    calib_join_free(&j);
    return 0;
}

#endif
