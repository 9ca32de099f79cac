/*
 * bench_join.c — join table throughput: 10^6 predictions (K = 10 outputs,
 * ~60-byte string ids) into a table of capacity 10^6, then their 10^6 labels
 * in shuffled order; then the same with labels first. Ids are built before
 * the clock starts. Build and run:
 *
 *   make tests/bench/bench_join && ./tests/bench/bench_join [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "calib/calib.h"
#include "calib/join.h"

enum { WIDTH = 10 };

static double seconds(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int make_ids(calib_id *ids, size_t n, calib_rng *rng)
{
    for (size_t i = 0; i < n; i++) {
        char buf[CALIB_ID_MAX + 1];
        int len = snprintf(buf, sizeof buf, "tenant-3/model-17/req-%020zu-%016llx",
                           i, (unsigned long long)calib_rng_next(rng));
        if (len <= 0 || calib_id_str(&ids[i], buf, (size_t)len) != CALIB_OK)
            return -1;
    }
    return 0;
}

static void shuffle(size_t *a, size_t n, calib_rng *rng)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t k = (size_t)(calib_rng_next(rng) % (i + 1)), t = a[i];
        a[i] = a[k];
        a[k] = t;
    }
}

/* Runs one pass; returns the number of pairs joined. */
static size_t run(calib_join *j, const calib_id *ids, const size_t *order,
                  size_t n, int labels_first, double *secs)
{
    double x[WIDTH] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    calib_join_result r;
    size_t joined = 0;
    double t0 = seconds();
    for (size_t i = 0; i < n; i++) {
        if (labels_first)
            calib_join_label(j, &ids[i], (double)(i % WIDTH), 1, 1, &r);
        else
            calib_join_pred(j, &ids[i], x, 1, 1, &r);
    }
    for (size_t i = 0; i < n; i++) {
        const calib_id *id = &ids[order[i]];
        if (labels_first)
            calib_join_pred(j, id, x, 2, 2, &r);
        else
            calib_join_label(j, id, 1, 2, 2, &r);
        joined += r.status == CALIB_JOIN_JOINED;
    }
    *secs = seconds() - t0;
    return joined;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    calib_id *ids = malloc(n * sizeof *ids);
    size_t *order = malloc(n * sizeof *order);
    if (n == 0 || !ids || !order) {
        fprintf(stderr, "bench_join: bad N or out of memory\n");
        return 1;
    }
    calib_rng rng;
    calib_rng_seed(&rng, 1);
    if (make_ids(ids, n, &rng) != 0) {
        fprintf(stderr, "bench_join: id too long\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    shuffle(order, n, &rng);
    calib_join_cfg cfg = {.ttl = 3600, .capacity = n, .width = WIDTH,
                          .joined_capacity = n, .seed = 0x5eed};
    printf("N = %zu, id %u bytes, width %d, table %.0f MiB\n", n,
           (unsigned)ids[0].len, WIDTH, calib_join_bytes(&cfg) / 1048576.0);
    for (int labels_first = 0; labels_first < 2; labels_first++) {
        calib_join j;
        if (calib_join_init(&j, &cfg) != CALIB_OK) {
            fprintf(stderr, "bench_join: calib_join_init failed\n");
            return 1;
        }
        double secs;
        size_t joined = run(&j, ids, order, n, labels_first, &secs);
        printf("%s first: %zu pairs joined in %.3f s: %.2f M ops/s "
               "(%.0f ns per op)\n", labels_first ? "labels" : "predictions",
               joined, secs, 2.0 * (double)n / secs / 1e6, secs * 1e9 / (2.0 * (double)n));
        calib_join_free(&j);
    }
    free(ids);
    free(order);
    return 0;
}
