#!/usr/bin/env python3
"""bench_monitor.py — the calibration monitor a user would write in Python
instead of running calibd, for tests/bench/bench_floor.sh (issue 41): a
PULL socket, msgpack, and numpy, doing what the C floor does (bench_rate
null --floor T): for each prediction with its outcome inline, both views'
softmax (the logits as sent, and divided by T), their Brier and log scores
and their top-label reliability bin (15 bins), vectorised over the rows of
a message.

    bench_monitor.py --endpoint tcp://127.0.0.1:* --count N --floor T

Prints "endpoint=ADDRESS" once bound, and at the end what it received, its
CPU seconds (user + system) from the first message on (the interpreter's
and numpy's start-up left out) and its figures, in bench_rate's form.
"""
import argparse
import resource
import sys
import time

import msgpack
import numpy as np
import zmq

BINS = 15


def views(z, y, inv_t, sums):
    """Rows z (n x K) with outcomes y (n): both views into sums."""
    rows = np.arange(len(y))
    for v, scale in enumerate((1.0, inv_t)):
        e = np.exp((z - z.max(axis=1, keepdims=True)) * scale)
        p = e / e.sum(axis=1, keepdims=True)
        onehot = np.zeros_like(p)
        onehot[rows, y] = 1
        sums["brier"][v] += float(((p - onehot) ** 2).sum())
        sums["log"][v] -= float(np.log(p[rows, y]).sum())
        top = p.max(axis=1)
        b = np.minimum((top * BINS).astype(int), BINS - 1)
        sums["bin_n"][v] += np.bincount(b, minlength=BINS)
        sums["bin_conf"][v] += np.bincount(b, weights=top, minlength=BINS)
        sums["bin_acc"][v] += np.bincount(b, weights=p.argmax(axis=1) == y, minlength=BINS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--floor", type=float, default=1.5)
    a = ap.parse_args()
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.bind(a.endpoint)
    print("endpoint=%s" % s.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
    sums = {"brier": [0.0, 0.0], "log": [0.0, 0.0],
            "bin_n": np.zeros((2, BINS)), "bin_conf": np.zeros((2, BINS)),
            "bin_acc": np.zeros((2, BINS))}
    inv_t, preds, rows, t0, cpu0 = 1 / a.floor, 0, 0, None, 0.0
    while preds < a.count:
        _topic, body = s.recv_multipart()
        if t0 is None:  # the interpreter's and the imports' start-up not counted
            t0 = time.monotonic()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            cpu0 = r0.ru_utime + r0.ru_stime
        m = msgpack.unpackb(body, raw=False)
        if m.get("type") != "pred":
            continue
        n = m.get("n", 1)
        preds += n
        k = m["k"]
        z = np.frombuffer(m["logits"], dtype="<f4").reshape(n, k).astype(float)
        y = np.asarray(m["y"] if "n" in m else [m["y"]], dtype=int)
        views(z, y, inv_t, sums)
        rows += n
    r = resource.getrusage(resource.RUSAGE_SELF)
    print("received=%d labels=0 bad=0 seconds=%.3f cpu=%.6f" %
          (preds, time.monotonic() - t0, r.ru_utime + r.ru_stime - cpu0))
    print("floor rows=%d brier=%.6f/%.6f log=%.6f/%.6f" %
          (rows, sums["brier"][0] / rows, sums["brier"][1] / rows,
           sums["log"][0] / rows, sums["log"][1] / rows))
    s.close(0)
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
