/*
 * bench_join_load.c — joined pairs against offered load: a join table of
 * capacity C (10,000, calibd's default max_pending) whose labels come 5 s
 * after their predictions, offered 0.5x to 10x the pairs its capacity
 * allows (C / 5 s = 2,000 a second), for 20 label delays. Prints, per
 * load, the pairs joined as a share of what capacity allows, in the steady
 * state (after 3 delays) and over the whole run, and the sample the table
 * settled at. Over capacity the table keeps a uniform sample of ids
 * (calib/join.h); before, a full table evicted its oldest item, and 5% over
 * capacity nothing joined. Build and run:
 *
 *   make tests/bench/bench_join_load && ./tests/bench/bench_join_load [C]
 */
#include <stdio.h>
#include <stdlib.h>

#include "../join_load.h"

int main(int argc, char **argv)
{
    size_t cap = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 10000;
    static const double factors[] = {0.5, 0.95, 1.05, 1.5, 2, 5, 10};
    printf("capacity %zu, labels 5 s late: capacity allows %.0f pairs/s\n", cap, cap / 5.0);
    printf("%7s %10s %9s %16s %16s %8s %11s %8s\n", "load", "pairs/s", "offered",
           "joined/allowed", "(whole run)", "sample", "sampled_out", "evicted");
    for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++) {
        join_load L = {.factor = factors[i], .delay = 5, .periods = 20, .warmup = 3,
                       .capacity = cap, .seed = 7};
        if (join_load_run(&L) != 0) {
            fprintf(stderr, "bench_join_load: out of memory\n");
            return 1;
        }
        double steady = (double)L.steady_joined / (L.allowed * (double)L.steady_offered);
        double whole = (double)L.joined / (L.allowed * (double)L.offered);
        printf("%6.2fx %10.0f %9llu %15.1f%% %15.1f%% %8.4f %11llu %8llu\n", factors[i],
               factors[i] * cap / 5.0, (unsigned long long)L.offered, 100 * steady,
               100 * whole, L.fraction, (unsigned long long)L.sampled_out,
               (unsigned long long)L.evicted);
    }
    return 0;
}
