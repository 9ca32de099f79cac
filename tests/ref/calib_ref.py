#!/usr/bin/env python3
"""calib_ref.py - independent reference implementation of `calibctl score`.

    python3 calib_ref.py FILE

prints the same JSON object as `calibctl score FILE`.  Standard library only,
written from the specification (not from the C sources) so that the two can
be compared (see score_ref.sh).  Sums are exact-then-rounded (math.fsum); the
comparison tolerance against the C side is 1e-9 relative / 1e-12 absolute.

Input validation is deliberately simple: the randomized test only feeds valid
files.  On bad input this script exits 2 with "calibctl: FILE:LINE: problem".
"""
import bisect
import json
import math
import sys
from fractions import Fraction

Z95 = 1.959963984540054
LOG_FLOOR = 1e-15
LOG_CAP = -math.log(1e-15)


class InputError(Exception):
    def __init__(self, line, msg):
        Exception.__init__(self, msg)
        self.line = line
        self.msg = msg


# ---------------------------------------------------------------- reading
def parse_number(text, line, col):
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        raise InputError(line, "'%s' in column %d is not a finite number" % (t, col))
    if not math.isfinite(v) or t.lower().lstrip('+-') in ('nan', 'inf', 'infinity'):
        raise InputError(line, "'%s' in column %d is not a finite number" % (t, col))
    return v


def read_csv(path):
    if path == '-':
        text = sys.stdin.read()
    else:
        with open(path, 'r', newline='') as f:
            text = f.read()
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    lines = [ln[:-1] if ln.endswith('\r') else ln for ln in lines]
    if not lines:
        raise InputError(1, 'empty file')
    header = [h.strip() for h in lines[0].split(',')]
    rows = []
    for i, ln in enumerate(lines[1:], start=2):
        fields = ln.split(',')
        if len(fields) != len(header):
            raise InputError(i, 'row has %d fields, the header has %d'
                             % (len(fields), len(header)))
        rows.append((i, fields))
    if not rows:
        raise InputError(1, 'no data rows')
    return header, rows


def indexed_columns(header, prefix):
    """{k: column} for headers prefix0, prefix1, ..."""
    out = {}
    for j, h in enumerate(header):
        if len(h) > len(prefix) and h.startswith(prefix) and h[len(prefix):].isdigit():
            out[int(h[len(prefix):])] = j
    return out


def load(path):
    header, rows = read_csv(path)
    seen = set()
    for h in header:
        if h in seen:
            raise InputError(1, "column '%s' appears twice" % h)
        seen.add(h)
    if 'y' not in header:
        raise InputError(1, "no column 'y'")
    iy = header.index('y')
    zc = indexed_columns(header, 'z')
    pc = indexed_columns(header, 'p')
    forms = []
    if zc:
        forms.append('logits')
    if pc:
        forms.append('probs')
    if 'p' in header:
        forms.append('binary')
    if 'mean' in header or 'var' in header:
        forms.append('gaussian')
    if len(forms) > 1:
        raise InputError(1, 'more than one output form')
    if not forms:
        raise InputError(1, 'no outputs')
    form = forms[0]

    if form == 'gaussian':
        if 'mean' not in header or 'var' not in header:
            raise InputError(1, "needs both 'mean' and 'var'")
        im, iv = header.index('mean'), header.index('var')
        data = []
        for line, f in rows:
            y = parse_number(f[iy], line, iy + 1)
            m = parse_number(f[im], line, im + 1)
            v = parse_number(f[iv], line, iv + 1)
            if not v > 0:
                raise InputError(line, 'variance is not positive')
            data.append((y, m, v))
        return form, None, data

    if form == 'binary':
        K = 2
        cols = None
        ip = header.index('p')
    else:
        cmap = zc if form == 'logits' else pc
        K = max(cmap) + 1
        if sorted(cmap) != list(range(K)):
            pre = 'z' if form == 'logits' else 'p'
            raise InputError(1, 'columns %s0..%s%d are not all present' % (pre, pre, K - 1))
        if K < 2:
            raise InputError(1, 'at least 2 classes')
        cols = [cmap[k] for k in range(K)]

    data = []
    for line, f in rows:
        yv = parse_number(f[iy], line, iy + 1)
        if yv != math.floor(yv) or not (0 <= yv < K):
            raise InputError(line, 'label %s is not a class in [0, %d)' % (f[iy].strip(), K))
        y = int(yv)
        if form == 'binary':
            p = parse_number(f[ip], line, ip + 1)
            if not (0.0 <= p <= 1.0):
                raise InputError(line, 'probability outside [0, 1]')
            data.append((y, p))
        else:
            vals = [parse_number(f[j], line, j + 1) for j in cols]
            if form == 'probs':
                if any(not (0.0 <= v <= 1.0) for v in vals):
                    raise InputError(line, 'probability outside [0, 1]')
                if abs(math.fsum(vals) - 1.0) > 1e-3:
                    raise InputError(line, 'probabilities do not sum to 1 within 1e-3')
            data.append((y, vals))
    return form, K, data


# ---------------------------------------------------------------- scores
def row_probs_logits(z, y):
    """(p vector, log score) from logits, exactly as specified."""
    m = max(z)
    d = [v - m for v in z]
    e = [math.exp(v) for v in d]
    s = 0.0
    for v in e:                      # plain left-to-right sum
        s += v
    lse = math.log(s)
    p = [v / s for v in e]
    log_score = min(-(d[y] - lse), LOG_CAP)
    return p, log_score


def argmax_lowest(p):
    best = 0
    for k in range(1, len(p)):
        if p[k] > p[best]:
            best = k
    return best


def mean(xs):
    return math.fsum(xs) / len(xs)


def mean_ci(xs):
    n = len(xs)
    m = mean(xs)
    if n < 2:
        return m, None
    s2 = math.fsum((x - m) ** 2 for x in xs) / (n - 1)
    se = math.sqrt(s2 / n)
    return m, [m - Z95 * se, m + Z95 * se]


# ---------------------------------------------------------------- binning
def equal_edges(M):
    return [i / M for i in range(1, M + 1)]


def bin_index(edges, v):
    """First bin (0-based) whose upper edge >= v; values above the last edge
    (cannot happen for valid data) go to the last bin."""
    b = bisect.bisect_left(edges, v)
    return min(b, len(edges) - 1)


def bins_of(values, outcomes, edges):
    """list of (values, outcomes) per bin."""
    B = [([], []) for _ in edges]
    for v, o in zip(values, outcomes):
        b = bin_index(edges, v)
        B[b][0].append(v)
        B[b][1].append(o)
    return B


def plugin(values, outcomes, M, q):
    n = len(values)
    terms = []
    for vs, os_ in bins_of(values, outcomes, equal_edges(M)):
        nb = len(vs)
        if nb == 0:
            continue
        terms.append(nb / n * abs(mean(vs) - mean(os_)) ** q)
    return math.fsum(terms)


def em_debiased(conf, correct, M=15):
    n = len(conf)
    order = sorted(range(n), key=lambda i: conf[i])   # stable
    c = [conf[i] for i in order]
    a = [correct[i] for i in order]
    size = -(-n // M)                                  # ceil(n/M)
    chunks = [c[i:i + size] for i in range(0, n, size)]
    edges = []
    for i in range(len(chunks) - 1):
        edges.append((chunks[i][-1] + chunks[i + 1][0]) / 2)
    edges.append(1.0)
    dedup = []
    for e in edges:
        if e not in dedup:
            dedup.append(e)
    edges = dedup
    B = [([], []) for _ in edges]
    for v, o in zip(c, a):
        b = None
        for j, e in enumerate(edges):     # first bin whose upper edge >= v
            if e >= v:
                b = j
                break
        if b is None:
            b = len(edges) - 1
        B[b][0].append(v)
        B[b][1].append(o)
    terms = []
    for vs, os_ in B:
        nb = len(vs)
        if nb < 2:
            continue
        ab = mean(os_)
        terms.append(nb / n * ((mean(vs) - ab) ** 2 - ab * (1 - ab) / (nb - 1)))
    return math.sqrt(max(0.0, math.fsum(terms)))


def ks_stat(conf, correct):
    """max_i |C_i/n - A_i/n| over the stable ascending order of conf; the
    cumulative sums are kept exact (Fraction) and rounded once at the end."""
    n = len(conf)
    order = sorted(range(n), key=lambda i: conf[i])   # stable
    best = Fraction(0)
    C = Fraction(0)
    A = 0
    for i in order:
        C += Fraction(conf[i])
        A += correct[i]
        d = abs(C - A)
        if d > best:
            best = d
    return float(best / n)


# ---------------------------------------------------------------- metrics
def score_classification(form, K, data):
    n = len(data)
    P = []
    Y = []
    logs = []
    for row in data:
        if form == 'logits':
            y, z = row
            p, ls = row_probs_logits(z, y)
        elif form == 'probs':
            y, p = row
            ls = -math.log(max(p[y], LOG_FLOOR))
        else:
            y, pb = row
            p = [1.0 - pb, pb]
            ls = -math.log(max(p[y], LOG_FLOOR))
        P.append(p)
        Y.append(y)
        logs.append(ls)

    briers = [math.fsum((p[k] - (1.0 if y == k else 0.0)) ** 2 for k in range(K))
              for p, y in zip(P, Y)]
    conf = [max(p) for p in P]
    correct = [1 if argmax_lowest(p) == y else 0 for p, y in zip(P, Y)]

    brier, brier_ci = mean_ci(briers)
    log, log_ci = mean_ci(logs)

    cw = {15: [], 100: []}
    rel, res, unc = [], [], []
    edges15 = equal_edges(15)
    for k in range(K):
        pk = [p[k] for p in P]
        ok = [1 if y == k else 0 for y in Y]
        for M in (15, 100):
            cw[M].append(plugin(pk, ok, M, 2))
        ybar = sum(ok) / n
        unc.append(ybar * (1 - ybar))
        for vs, os_ in bins_of(pk, ok, edges15):
            nb = len(vs)
            if nb == 0:
                continue
            pbar = mean(vs)
            obar = sum(os_) / nb
            rel.append(nb / n * (pbar - obar) ** 2)
            res.append(nb / n * (obar - ybar) ** 2)

    return {
        'n': n,
        'k': K,
        'form': form,
        'accuracy': sum(correct) / n,
        'brier': brier,
        'brier_ci': brier_ci,
        'rbs': math.sqrt(brier),
        'log': log,
        'log_ci': log_ci,
        'ece': plugin(conf, correct, 15, 1),
        'tce2_15': math.sqrt(plugin(conf, correct, 15, 2)),
        'tce2_100': math.sqrt(plugin(conf, correct, 100, 2)),
        'tce2_15em_debiased': em_debiased(conf, correct, 15),
        'cwce2_15': math.sqrt(math.fsum(cw[15])),
        'cwce2_100': math.sqrt(math.fsum(cw[100])),
        'ks': ks_stat(conf, correct),
        'brier_reliability': math.fsum(rel),
        'brier_resolution': math.fsum(res),
        'brier_uncertainty': math.fsum(unc),
    }


def score_gaussian(data):
    n = len(data)
    dss = [(y - m) ** 2 / v + math.log(v) for y, m, v in data]
    d, d_ci = mean_ci(dss)
    return {
        'n': n,
        'form': 'gaussian',
        'dss': d,
        'dss_ci': d_ci,
        'mse': mean([(y - m) ** 2 for y, m, v in data]),
        'mean_var': mean([v for y, m, v in data]),
    }


def nan_to_none(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, list):
        return [nan_to_none(v) for v in x]
    return x


def reference(path):
    """(status, output): FILE's figures as one JSON line and 0, or the
    message calibctl would give and 2 (bad input) or 1 (unreadable)."""
    try:
        form, K, data = load(path)
    except InputError as e:
        return 2, 'calibctl: %s:%d: %s\n' % (path, e.line, e.msg)
    except OSError as e:
        return 1, 'calibctl: %s: %s\n' % (path, e.strerror)
    if form == 'gaussian':
        out = score_gaussian(data)
    else:
        out = score_classification(form, K, data)
    out = {k: nan_to_none(v) for k, v in out.items()}
    return 0, json.dumps(out, allow_nan=False) + '\n'


def main(argv):
    if len(argv) != 2:
        sys.stderr.write('usage: calib_ref.py FILE\n')
        return 2
    rc, text = reference(argv[1])
    (sys.stdout if rc == 0 else sys.stderr).write(text)
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv))
