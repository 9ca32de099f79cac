#!/usr/bin/env python3
"""label_shift.py ENDPOINT MODEL SEED N_SOURCE N_TARGET TRUTH_JSON [CSV_DIR]

A K = 5 classifier exactly calibrated under uniform priors (x | y = j ~
N(2 j, 1), the outputs its posteriors), sent with calibd's Python Producer:
N_SOURCE predictions with their labels, then N_TARGET predictions whose
labels are drawn from the priors 0.5 / 0.2 / 0.15 / 0.1 / 0.05 and never
sent. TRUTH_JSON receives what the withheld labels would show on the last
10,000 of them: the exact expected Brier score and accuracy of the served
outputs (their posteriors under the target priors known), the naive
estimates, and the target priors. With CSV_DIR, the predictions as sent go
to CSV_DIR/predictions.csv and the last 10,000 labelled ones (what calibd's
ring holds) to CSV_DIR/reference.csv, for calibctl score --label-free."""
import json
import sys

import numpy as np

from calibd import Producer

K = 5
SRC = np.full(K, 1.0 / K)
TGT = np.array([0.5, 0.2, 0.15, 0.1, 0.05])


def draw(rng, priors, n):
    y = rng.choice(K, size=n, p=priors)
    x = 2.0 * y + rng.standard_normal(n)
    lik = np.exp(-0.5 * (x[:, None] - 2.0 * np.arange(K)[None, :]) ** 2)
    ps = SRC * lik
    ps /= ps.sum(axis=1, keepdims=True)
    pt = TGT * lik
    pt /= pt.sum(axis=1, keepdims=True)
    return y, ps, pt


def send(endpoint, model, rng, n_src, n_tgt):
    """The two phases: n_src source predictions with their labels (ids 0..),
    then n_tgt target predictions without (ids n_src..). Returns the
    source's (y, ps) and the target's (y, ps, pt)."""
    with Producer(endpoint) as prod:
        y, ps, _ = draw(rng, SRC, n_src)
        for a in range(0, n_src, 1000):
            ids = list(range(a, min(a + 1000, n_src)))
            prod.predict(model, ids, probs=ps[a:a + 1000])
            prod.label(model, ids, y[a:a + 1000])
        src = (y, ps)
        tgt = draw(rng, TGT, n_tgt)
        prod.predict(model, list(range(n_src, n_src + n_tgt)), probs=tgt[1])
    return src, tgt


def main():
    endpoint, model, seed, n_src, n_tgt, out = sys.argv[1:7]
    csv_dir = sys.argv[7] if len(sys.argv) > 7 else None
    rng = np.random.default_rng(int(seed))
    n_src, n_tgt = int(n_src), int(n_tgt)
    src, (y, ps, pt) = send(endpoint, model, rng, n_src, n_tgt)
    if csv_dir:
        head = ",".join("p%d" % j for j in range(K))
        with open(csv_dir + "/predictions.csv", "w") as f:
            f.write(head + "\n")
            for row in np.concatenate([src[1], ps]):
                f.write(",".join(repr(float(v)) for v in row) + "\n")
        with open(csv_dir + "/reference.csv", "w") as f:
            f.write(head + ",y\n")
            for row, label in zip(src[1][-10000:], src[0][-10000:]):
                f.write(",".join(repr(float(v)) for v in row) + ",%d\n" % label)
    if not n_tgt:
        return
    last = slice(max(0, n_tgt - 10000), n_tgt)
    p, q = ps[last], pt[last]
    exp_brier = 1 - 2 * (p * q).sum(axis=1) + (p * p).sum(axis=1)
    top = p.argmax(axis=1)
    truth = {
        "brier": float(exp_brier.mean()),
        "naive_brier": float((1 - (p * p).sum(axis=1)).mean()),
        "accuracy": float(q[np.arange(len(top)), top].mean()),
        "priors": TGT.tolist(),
    }
    with open(out, "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main()
