#!/usr/bin/env python3
"""Writes examples/data/overconfident.csv: the simulation of Gruber & Buettner
(2022, appendix) in small. A K-class model reports softmax(z) for logits
z ~ N(0, 1.5^2) per class, while outcomes are drawn from softmax(z / T) with
T = 2: the model is overconfident, and temperature scaling with T = 2 would
calibrate it. Seeded, so the file is reproducible:

    python3 examples/make_example.py > examples/data/overconfident.csv

Options change the size, temperature and seed: --n N --k K --t T --seed S.
"""
import argparse
import math
import random


def softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--t", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=20221128)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    out = ["y," + ",".join(f"z{k}" for k in range(a.k))]
    for _ in range(a.n):
        z = [rng.gauss(0.0, 1.5) for _ in range(a.k)]
        truth = softmax([v / a.t for v in z])
        y = rng.choices(range(a.k), weights=truth)[0]
        out.append(f"{y}," + ",".join(f"{v:.6f}" for v in z))
        if len(out) >= 10000:
            print("\n".join(out))
            out.clear()
    if out:
        print("\n".join(out))


if __name__ == "__main__":
    main()
