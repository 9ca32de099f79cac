"""kafka_feed.py -- pairs of models into a Kafka topic, through the calibd
Python package's producer (socket="kafka"), for tests/integ/kafka.sh and
tests/bench/kafka_scaling.sh.

  kafka_feed.py BROKERS TOPIC OUT --models M --pairs N --from A --to B [--rate R]
                [--batch B] [--hold FILE]

Model i ("km-i") gets N / M pairs: logits of K = 4 classes, N(0, 2) each,
labels drawn from softmax(z / 2) (an overconfident model, so that the
closed loop refits it). Batch b of 50 predictions of every model is sent,
then the labels of batch b - 2 (labels come later, in the same partition:
the key is the model). Only rounds [A, B) are sent, so that a stream can
be sent in parts; every part draws the same numbers (one seed a model).
--hold FILE: the last round of the part waits until FILE exists.
--batch B: rows a message (default 50, a round's batch in one message;
1: the row form, each prediction and each label a message of its own).
OUT/km-i.csv gets the model's pairs of those rounds in the order their
labels were sent (calibctl score's columns), appended.
"""
import argparse
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from calibd import Producer  # noqa: E402

K, BATCH, LAG = 4, 50, 2

ap = argparse.ArgumentParser()
ap.add_argument("brokers")
ap.add_argument("topic")
ap.add_argument("out")
ap.add_argument("--models", type=int, default=8)
ap.add_argument("--pairs", type=int, default=100000)
ap.add_argument("--from", dest="start", type=int, default=0)
ap.add_argument("--to", dest="stop", type=int, default=None)
ap.add_argument("--rate", type=float, default=0, help="rounds a second (0: at once)")
ap.add_argument("--hold", metavar="FILE",
                help="before the part's last round, wait until FILE exists (10 min at most):"
                     " a stream still flowing when a test acts, however slow the machine")
ap.add_argument("--batch", type=int, default=BATCH,
                help="rows a message, at most %d (1: the row form)" % BATCH)
a = ap.parse_args()
if a.batch < 1:
    ap.error("--batch: 1 or more rows a message")
per = a.pairs // a.models
rounds = per // BATCH
stop = rounds + LAG if a.stop is None else min(a.stop, rounds + LAG)


def batch(model, b):
    """Batch b of a model: the same numbers whichever part sends it."""
    r = random.Random(model * 1000003 + b)
    rows = []
    for j in range(BATCH):
        z = [r.gauss(0, 2) for _ in range(K)]
        m = max(z)
        w = [math.exp((v - m) / 2) for v in z]
        y = r.choices(range(K), weights=w)[0]
        rows.append((f"{b}-{j}", z, y))
    return rows


p = Producer(a.brokers, socket="kafka", kafka_topic=a.topic, batch=max(1, min(a.batch, BATCH)),
             kafka_config={"linger.ms": 5})
outs = [open(os.path.join(a.out, f"km-{i}.csv"), "a") for i in range(a.models)]
for f in outs:
    if f.tell() == 0:
        f.write(",".join(f"z{j}" for j in range(K)) + ",y\n")
t0 = time.monotonic()
for rnd in range(a.start, stop):
    if a.rate > 0:  # paced: a stream that is still flowing when a test acts
        p.flush()
        time.sleep(max(0.0, t0 + (rnd - a.start) / a.rate - time.monotonic()))
    if a.hold and rnd == stop - 1:
        p.flush()
        held = time.monotonic() + 600
        while not os.path.exists(a.hold) and time.monotonic() < held:
            time.sleep(0.05)
    for i in range(a.models):
        name = f"km-{i}"
        if rnd < rounds:
            rows = batch(i, rnd)
            if a.batch == 1:
                for r in rows:
                    p.predict(name, r[0], logits=r[1])
            else:
                p.predict(name, [r[0] for r in rows], logits=[r[1] for r in rows])
        if 0 <= rnd - LAG < rounds:
            rows = batch(i, rnd - LAG)
            if a.batch == 1:
                for r in rows:
                    p.label(name, r[0], r[2])
            else:
                p.label(name, [r[0] for r in rows], [r[2] for r in rows])
            outs[i].write("".join(",".join(repr(v) for v in z) + f",{y}\n" for _, z, y in rows))
p.close()
for f in outs:
    f.close()
print(f"sent rounds {a.start}..{stop} of {rounds + LAG}: {p.sent}", file=sys.stderr)
