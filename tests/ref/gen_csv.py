#!/usr/bin/env python3
"""gen_csv.py - write a random, valid, deliberately nasty `calibctl score` input.

    python3 gen_csv.py --seed S --kind logits|probs|binary|gaussian --n N --k K OUT

Reproducible for a given seed.  The rows mix ordinary random predictions with
the awkward cases: exact argmax ties (lowest index must win), probabilities
exactly 0 and 1, confidences exactly on the equal-width bin edges i/15 and
i/100, repeated identical confidences (ties for the stable sort), huge logits
(|z| ~ 1e3, some saturating softmax to exactly 1 and 0), probability rows that
sum to 1 only within ~5e-4, several number spellings, shuffled column order.
--k is ignored for binary and gaussian.
"""
import argparse
import math
import random

EDGES = sorted(set([i / 15 for i in range(1, 16)] + [i / 100 for i in range(1, 101)]
                   + [0.2, 0.5, 1.0]))


def fmt(rng, v, allow_int=True):
    """Some valid spelling of the float v (all parse back to exactly v,
    except '%.6f'/'%.10e', which are just other valid numbers)."""
    if allow_int and v == int(v) and abs(v) < 1e15 and rng.random() < 0.5:
        return str(int(v))
    r = rng.random()
    if r < 0.55:
        return repr(v)
    if r < 0.75:
        return '%.17g' % v
    if r < 0.85:
        return '%.17e' % v
    return repr(v)


def fmt_lossy(rng, v):
    """Short decimal or exponent text (value need not round-trip)."""
    r = rng.random()
    if r < 0.5:
        return '%.6f' % v
    return '%.10e' % v


def sample_class(rng, p):
    u = rng.random() * math.fsum(p)
    acc = 0.0
    for k, w in enumerate(p):
        acc += w
        if u < acc:
            return k
    return max(range(len(p)), key=lambda k: p[k])


def softmax(z, t=1.0):
    m = max(z)
    e = [math.exp((v - m) / t) for v in z]
    s = sum(e)
    return [v / s for v in e]


def dirichlet(rng, K, alpha):
    g = [rng.gammavariate(alpha, 1.0) for _ in range(K)]
    s = sum(g)
    if s == 0.0 or not math.isfinite(s):
        g = [1.0] * K
        s = float(K)
    return [v / s for v in g]


def pick_label(rng, p, K):
    """Mostly drawn from a miscalibrated version of p, sometimes uniform,
    sometimes a class with zero probability (log score floor)."""
    r = rng.random()
    if r < 0.12:
        return rng.randrange(K)
    if r < 0.17:
        zeros = [k for k in range(K) if p[k] == 0.0]
        if zeros:
            return rng.choice(zeros)
    # temper: sharpen/flatten the probabilities a little
    t = rng.choice([0.5, 1.0, 2.0])
    q = [max(v, 0.0) ** (1.0 / t) for v in p]
    if sum(q) == 0.0:
        return rng.randrange(K)
    return sample_class(rng, q)


# ---------------------------------------------------------------- logits
def gen_logits(rng, n, K):
    rows = []
    scale = rng.choice([0.5, 1.5, 4.0])
    for _ in range(n):
        kind = rng.random()
        if rows and kind < 0.10:                      # exact duplicate row
            z = list(rng.choice(rows)[1])
        elif kind < 0.40:                              # ordinary
            z = [rng.gauss(0.0, scale) for _ in range(K)]
        elif kind < 0.52:                              # top tie
            z = [rng.gauss(0.0, scale) for _ in range(K)]
            i, j = rng.sample(range(K), 2)
            top = max(z) + abs(rng.gauss(0, 1))
            z[i] = z[j] = top
        elif kind < 0.58:                              # all equal
            c = rng.choice([0.0, -0.0, 3.0, 1000.0, -1000.0, rng.gauss(0, 5)])
            z = [c] * K
        elif kind < 0.70:                              # huge logits
            base = rng.choice([1000.0, -1000.0, 0.0])
            z = [base + rng.gauss(0.0, 1.0) * rng.choice([1.0, 300.0, 1000.0])
                 for _ in range(K)]
        elif kind < 0.80:                              # saturating softmax
            z = [rng.gauss(0.0, 1.0) for _ in range(K)]
            z[rng.randrange(K)] = rng.choice([800.0, 1000.0, 745.5])
            if rng.random() < 0.3:                     # saturated tie
                z[rng.randrange(K)] = max(z)
        elif kind < 0.90:                              # small integers (many ties)
            z = [float(rng.randint(-3, 3)) for _ in range(K)]
        else:                                          # lossy text, see below
            z = [rng.gauss(0.0, scale) for _ in range(K)]
        p = softmax(z)
        y = pick_label(rng, p, K)
        lossy = kind >= 0.90
        rows.append((y, z, lossy))
    out = []
    for y, z, lossy in rows:
        if lossy:
            out.append((y, [fmt_lossy(rng, v) for v in z]))
        else:
            out.append((y, [fmt(rng, v) for v in z]))
    return ['z%d' % k for k in range(K)], out


# ---------------------------------------------------------------- probs
def edge_vector(rng, K, e):
    """probability vector with max exactly e (e >= 1/K) at a random index."""
    j = rng.randrange(K)
    r = 1.0 - e
    if K == 2:
        p = [0.0, 0.0]
        p[j] = e
        p[1 - j] = r
        return p
    w = dirichlet(rng, K - 1, rng.choice([0.3, 1.0, 3.0]))
    others = [r * v for v in w]
    if max(others) > e:
        others = [r / (K - 1)] * (K - 1)
    p = others[:j] + [e] + others[j:]
    return p


def gen_probs(rng, n, K):
    rows = []
    alpha = rng.choice([0.1, 0.5, 1.0, 5.0])
    for _ in range(n):
        kind = rng.random()
        text = None
        if rows and kind < 0.10:                       # duplicate row
            y0, p, text = rng.choice(rows)
            p = list(p)
        elif kind < 0.40:                               # Dirichlet
            p = dirichlet(rng, K, alpha)
        elif kind < 0.50:                               # one-hot: 0s and a 1
            p = [0.0] * K
            p[rng.randrange(K)] = 1.0
        elif kind < 0.65:                               # max exactly on an edge
            cands = [e for e in EDGES if e >= 1.0 / K]
            p = edge_vector(rng, K, rng.choice(cands))
        elif kind < 0.75:                               # tie at the top
            t = rng.uniform(1.0 / K, 0.5)
            if rng.random() < 0.3:
                t = rng.choice([e for e in EDGES if 1.0 / K <= e <= 0.5] or [0.5])
            i, j = rng.sample(range(K), 2)
            r = 1.0 - 2 * t
            rest = [r / (K - 2)] * (K - 2) if K > 2 else []
            if K > 2 and max(rest) > t:
                t = 1.0 / K
                rest = [t] * (K - 2)
            p = []
            it = iter(rest)
            for k in range(K):
                p.append(t if k in (i, j) else next(it))
        elif kind < 0.85:                               # sums to 1 only within ~5e-4
            p = dirichlet(rng, K, alpha)
            f = 1.0 + rng.uniform(-5e-4, 5e-4)
            p = [min(1.0, v * f) for v in p]
        elif kind < 0.92:                               # short decimals, some zeros
            cuts = sorted(rng.randint(0, 20) for _ in range(K - 1))
            parts = [b - a for a, b in zip([0] + cuts, cuts + [20])]
            p = [c / 20 for c in parts]
            text = ['%g' % (c * 5 / 100) for c in parts]
        else:                                           # near-uniform
            p = [1.0 / K] * K
        y = pick_label(rng, p, K)
        if text is None:
            text = [fmt(rng, v) for v in p]
        rows.append((y, p, text))
    return ['p%d' % k for k in range(K)], [(y, text) for y, p, text in rows]


# ---------------------------------------------------------------- binary
def gen_binary(rng, n):
    rows = []
    bias = rng.choice([0.0, 0.1, -0.1, 0.25])
    for _ in range(n):
        kind = rng.random()
        if rows and kind < 0.12:
            p, text = rng.choice(rows)[1:]
        else:
            if kind < 0.45:
                p = rng.random()
            elif kind < 0.65:
                p = rng.choice(EDGES)
            elif kind < 0.75:
                p = rng.choice([0.0, 1.0])
            elif kind < 0.80:
                p = 0.5
            elif kind < 0.90:
                p = 1.0 - rng.choice(EDGES)                # 1 - edge: conf on an edge-ish
            else:
                p = rng.betavariate(0.3, 0.3)
            text = fmt(rng, p) if kind < 0.95 else fmt_lossy(rng, p)
            p = float(text)
        r = rng.random()
        if r < 0.1:
            y = rng.randrange(2)
        else:
            q = min(1.0, max(0.0, p + bias))
            y = 1 if rng.random() < q else 0
        rows.append((y, p, text))
    return ['p'], [(y, [text]) for y, p, text in rows]


# ---------------------------------------------------------------- gaussian
def gen_gaussian(rng, n):
    rows = []
    for _ in range(n):
        kind = rng.random()
        if rows and kind < 0.1:
            rows.append(rng.choice(rows))
            continue
        m = rng.gauss(0.0, 10.0)
        if kind < 0.2:
            m = float(rng.randint(-5, 5))
        v = math.exp(rng.uniform(math.log(1e-3), math.log(1e3)))
        if kind > 0.9:
            v = rng.choice([1.0, 0.5, 2.0, 1e-3, 1e3])
        if kind < 0.3:
            y = m                                          # exact hit
        else:
            y = m + rng.gauss(0.0, math.sqrt(v)) * rng.choice([0.5, 1.0, 3.0])
        rows.append((y, m, v))
    out = []
    for y, m, v in rows:
        out.append(([fmt(rng, y), fmt(rng, m), fmt(rng, v)]))
    return out


def generate(seed, kind, n, k, out):
    """Writes the file for (seed, kind, n, k) to out."""
    rng = random.Random('%s:%d:%d:%d' % (kind, seed, n, k))

    if kind == 'gaussian':
        names = ['y', 'mean', 'var']
        body = gen_gaussian(rng, n)
    else:
        if kind == 'logits':
            cols, rows = gen_logits(rng, n, k)
        elif kind == 'probs':
            cols, rows = gen_probs(rng, n, k)
        else:
            cols, rows = gen_binary(rng, n)
        names = ['y'] + cols
        body = [[str(y)] + text for y, text in rows]

    order = list(range(len(names)))
    if rng.random() < 0.6:
        rng.shuffle(order)
    with open(out, 'w') as f:
        f.write(','.join(names[j] for j in order) + '\n')
        for fields in body:
            f.write(','.join(fields[j] for j in order) + '\n')


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, required=True)
    ap.add_argument('--kind', choices=['logits', 'probs', 'binary', 'gaussian'],
                    required=True)
    ap.add_argument('--n', type=int, required=True)
    ap.add_argument('--k', type=int, default=2)
    ap.add_argument('out')
    a = ap.parse_args(argv)
    if a.n < 1:
        ap.error('--n must be >= 1')
    if a.kind in ('logits', 'probs') and a.k < 2:
        ap.error('--k must be >= 2')
    generate(a.seed, a.kind, a.n, a.k, a.out)


if __name__ == '__main__':
    main()
