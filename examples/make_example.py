#!/usr/bin/env python3
"""Writes examples/data/overconfident.csv: the simulation of Gruber & Buettner
(2022, appendix) in small. A K-class model reports softmax(z) for logits
z ~ N(0, 1.5^2) per class, while outcomes are drawn from softmax(z / T) with
T = 2: the model is overconfident, and temperature scaling with T = 2 would
calibrate it. Seeded, so the file is reproducible:

    python3 examples/make_example.py > examples/data/overconfident.csv
"""
import math
import random

K, N, T, SEED = 10, 5000, 2.0, 20221128


def softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


def main():
    rng = random.Random(SEED)
    print("y," + ",".join(f"z{k}" for k in range(K)))
    for _ in range(N):
        z = [rng.gauss(0.0, 1.5) for _ in range(K)]
        truth = softmax([v / T for v in z])
        y = rng.choices(range(K), weights=truth)[0]
        print(f"{y}," + ",".join(f"{v:.6f}" for v in z))


if __name__ == "__main__":
    main()
