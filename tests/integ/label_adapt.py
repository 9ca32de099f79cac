#!/usr/bin/env python3
"""label_adapt.py send|follow|labels ... — the streams of label_adapt.sh.

send ENDPOINT MODEL SEED N_SOURCE N_TARGET STATE: label_shift.py's K = 5
  classifier, calibrated under uniform priors: N_SOURCE predictions with
  their labels, then N_TARGET under the priors 0.5 / 0.2 / 0.15 / 0.1 / 0.05
  without; STATE (.npz) keeps the target's outputs, labels and true
  posteriors.
follow PUBLISH MODEL STATE OUT: a serving node (the Python Follower) waits
  for a version with prior weights and writes to OUT the expected Brier
  score, under the true posteriors, of the target's outputs served as they
  are, as that version serves them, and as the true posteriors would (the
  best a prior correction can do).
labels ENDPOINT MODEL SEED N_SOURCE STATE: the target's withheld labels,
  at last, then N_TARGET new predictions of the target (made after the
  correction) with their labels."""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import label_shift  # noqa: E402
from label_shift import TGT, draw  # noqa: E402

from calibd import PROBS, Follower, Producer  # noqa: E402


def send(endpoint, model, seed, n_src, n_tgt, state):
    rng = np.random.default_rng(int(seed))
    _, (y, ps, pt) = label_shift.send(endpoint, model, rng, int(n_src), int(n_tgt))
    np.savez(state + ".tmp.npz", y=y, ps=ps, pt=pt)
    os.rename(state + ".tmp.npz", state)  # whole when the follower sees it


def expected_brier(p, q):
    """E[Brier(p, y)] for y ~ q, row by row, averaged."""
    return float((1 - 2 * (p * q).sum(axis=1) + (p * p).sum(axis=1)).mean())


def follow(publish, model, state, out):
    with Follower(publish, [model]) as f:
        f.start()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not (f.held(model).weights and
                                                   os.path.exists(state)):
            time.sleep(0.05)
        s = np.load(state)
        p = f.held(model)
        served = np.array([f.apply(model, PROBS, list(row))[1] for row in s["ps"]])
    res = {"version": p.version, "weights": list(p.weights), "label_free": p.label_free,
           "as_is": expected_brier(s["ps"], s["pt"]),
           "adapted": expected_brier(served, s["pt"]),
           "oracle": expected_brier(s["pt"], s["pt"])}
    with open(out, "w") as fh:
        json.dump(res, fh)


def labels(endpoint, model, seed, n_src, state):
    y = np.load(state)["y"]
    n_src, n_tgt = int(n_src), len(y)
    rng = np.random.default_rng(int(seed) + 1)
    y2, ps2, _ = draw(rng, TGT, n_tgt)
    with Producer(endpoint) as prod:
        for a in range(0, n_tgt, 1000):
            ids = list(range(n_src + a, n_src + min(a + 1000, n_tgt)))
            prod.label(model, ids, y[a:a + 1000])
        base = n_src + n_tgt
        for a in range(0, n_tgt, 1000):
            ids = list(range(base + a, base + min(a + 1000, n_tgt)))
            prod.predict(model, ids, probs=ps2[a:a + 1000])
            prod.label(model, ids, y2[a:a + 1000])


if __name__ == "__main__":
    {"send": send, "follow": follow, "labels": labels}[sys.argv[1]](*sys.argv[2:])
