#!/usr/bin/env python3
"""worked.py - the hand-worked cases in this directory.

    python3 worked.py          # (re)write every NAME.csv and NAME.expected.json
    python3 worked.py --check  # only check that the files on disk match

Everything that needs judgement (which bin a value falls in, the argmax with
ties, the sort order, the em-bin edges, the KS maximum) was worked out by hand
and is typed in below as per-row values and per-bin groups (n_b, mean value,
mean outcome); README.md shows the working.  This script only does the final
arithmetic, mostly in exact fractions, so it shares no binning or sorting
code with calib_ref.py or the C library.
"""
import json
import math
import os
import sys
from fractions import Fraction as F

Z = 1.959963984540054
LOGCAP = -math.log(1e-15)            # 34.538776394910684
LN2, LN3 = math.log(2), math.log(3)
HERE = os.path.dirname(os.path.abspath(__file__))


def mean_ci(xs):
    n = len(xs)
    m = math.fsum(xs) / n
    if n == 1:
        return m, None
    s2 = math.fsum((x - m) ** 2 for x in xs) / (n - 1)
    se = math.sqrt(s2 / n)
    return m, [m - Z * se, m + Z * se]


def plugin(groups, n, q):
    """groups: [(n_b, mean value, mean outcome)] of the non-empty bins."""
    return sum(F(nb) / n * abs(F(v) - F(o)) ** q for nb, v, o in groups)


def em(groups, n):
    s = F(0)
    for nb, v, a in groups:
        if nb >= 2:
            a = F(a)
            s += F(nb) / n * ((F(v) - a) ** 2 - a * (1 - a) / (nb - 1))
    return math.sqrt(max(0.0, float(s)))


def classification(c):
    n = len(c['correct'])
    brier, brier_ci = mean_ci([float(x) for x in c['brier_rows']])
    log, log_ci = mean_ci([float(x) for x in c['log_rows']])
    cw15 = sum(plugin(g, n, 2) for g in c['cw15'])
    cw100 = sum(plugin(g, n, 2) for g in c['cw100'])
    rel = cw15                                  # same bins, same formula
    res = F(0)
    for g, yb in zip(c['cw15'], c['ybar']):
        res += sum(F(nb) / n * (F(o) - F(yb)) ** 2 for nb, v, o in g)
    unc = sum(F(yb) * (1 - F(yb)) for yb in c['ybar'])
    # Murphy: rel - res + unc = brier - gap, where gap sums, over bins holding
    # more than one value, (p_i - pbar)^2 - 2 (p_i - pbar)(o_i - obar), over n.
    gap = c.get('murphy_gap', 0)
    assert abs(float(rel - res + unc) + float(gap) - brier) < 1e-12, \
        (c['name'], float(rel - res + unc), brier)
    out = {
        'n': n, 'k': c['k'], 'form': c['form'],
        'accuracy': float(F(sum(c['correct']), n)),
        'brier': brier, 'brier_ci': brier_ci, 'rbs': math.sqrt(brier),
        'log': log, 'log_ci': log_ci,
        'ece': float(plugin(c['tce15'], n, 1)),
        'tce2_15': math.sqrt(plugin(c['tce15'], n, 2)),
        'tce2_100': math.sqrt(plugin(c['tce100'], n, 2)),
        'tce2_15em_debiased': em(c['em'], n),
        'cwce2_15': math.sqrt(cw15),
        'cwce2_100': math.sqrt(cw100),
        'ks': float(c['ks']),
        'brier_reliability': float(rel),
        'brier_resolution': float(res),
        'brier_uncertainty': float(unc),
    }
    return out


h = F(1, 2)
q = F(1, 4)
t = F(3, 4)
e8 = F(1, 8)
CASES = []

# ---------------------------------------------------------------------------
# tiny_probs: K = 3, columns out of order, a top tie (row 2), p_y = 0 (row 4).
CASES.append(dict(
    name='tiny_probs', form='probs', k=3,
    csv='p2,y,p0,p1\n0.25,0,0.5,0.25\n0,1,0.5,0.5\n0.75,2,0.25,0\n1,1,0,0\n',
    # rows (y; p0 p1 p2): (0; .5 .25 .25) (1; .5 .5 0) (2; .25 0 .75) (1; 0 0 1)
    brier_rows=[F(3, 8), h, e8, 2],
    log_rows=[LN2, LN2, -math.log(0.75), LOGCAP],
    correct=[1, 0, 1, 0],                     # conf .5 .5 .75 1
    tce15=[(2, h, h), (1, t, 1), (1, 1, 0)],   # bins 8, 12, 15
    tce100=[(2, h, h), (1, t, 1), (1, 1, 0)],  # bins 50, 75, 100
    em=[(2, h, h), (1, t, 1), (1, 1, 0)],      # edges .5 .625 .875 1
    ks=F(3, 16),                               # C-A: .5 0 -.25 .75
    cw15=[[(2, h, h), (1, q, 0), (1, 0, 0)],
          [(1, q, 0), (1, h, 1), (2, 0, h)],
          [(1, q, 0), (1, 0, 0), (1, t, 1), (1, 1, 0)]],
    cw100=[[(2, h, h), (1, q, 0), (1, 0, 0)],
           [(1, q, 0), (1, h, 1), (2, 0, h)],
           [(1, q, 0), (1, 0, 0), (1, t, 1), (1, 1, 0)]],
    ybar=[q, h, q],
))

# ---------------------------------------------------------------------------
# tiny_logits: K = 3; all-equal logits (tie -> class 0), saturated softmax
# (p exactly 1 and 0, log score capped), and z = (1, 0, 0).
E = math.e
P0 = E / (E + 2)          # 0.5761168847658291
P1 = 1 / (E + 2)          # 0.2119415576170855
CASES.append(dict(
    name='tiny_logits', form='logits', k=3,
    csv='z1,z0,y,z2\n2,2.0,1,2e0\n0,1e3,0,-1000\n0.0,1000,2,-1e+3\n0,1,0,0\n',
    # rows (y; z0 z1 z2): (1; 2 2 2) (0; 1000 0 -1000) (2; same) (0; 1 0 0)
    brier_rows=[2 / 3, 0, 2, 6 / (E + 2) ** 2],
    log_rows=[LN3, 0, LOGCAP, math.log(E + 2) - 1],
    correct=[0, 1, 0, 1],                        # conf 1/3, 1, 1, P0
    tce15=[(1, 1 / 3, 0), (2, 1, h), (1, P0, 1)],
    tce100=[(1, 1 / 3, 0), (2, 1, h), (1, P0, 1)],
    em=[(1, 1 / 3, 0), (1, P0, 1), (2, 1, h)],   # edges mid, mid, 1 (dup 1 dropped)
    ks=F(1, 3) / 4 + F(P0) / 4,                  # C-A: 1/3, P0-2/3, P0-2/3, 1/3+P0
    cw15=[[(1, 1 / 3, 0), (2, 1, h), (1, P0, 1)],
          [(1, 1 / 3, 1), (2, 0, 0), (1, P1, 0)],
          [(1, 1 / 3, 0), (2, 0, h), (1, P1, 0)]],
    cw100=[[(1, 1 / 3, 0), (2, 1, h), (1, P0, 1)],
           [(1, 1 / 3, 1), (2, 0, 0), (1, P1, 0)],
           [(1, 1 / 3, 0), (2, 0, h), (1, P1, 0)]],
    ybar=[h, q, q],
))

# ---------------------------------------------------------------------------
# tiny_binary: y,p form; p = .5 tie (predicts class 0), p = 0 with y = 1
# (log floor), p = .8 exactly on the edge 12/15 (shares bin 12 with .75 for
# M = 15, but not for M = 100), 1 - .8 = .19999999999999996 just below 3/15.
P8 = 0.8
CASES.append(dict(
    name='tiny_binary', form='binary', k=2,
    csv='p,y\n0.75,1\n0.5,0\n.5,1\n0,1\n1,1\n0.8,0\n',
    brier_rows=[e8, h, h, 2, 0, ((1 - P8) - 1) ** 2 + P8 ** 2],
    log_rows=[-math.log(0.75), LN2, LN2, LOGCAP, 0.0, -math.log(1 - P8)],
    correct=[1, 1, 0, 0, 1, 0],                  # conf .75 .5 .5 1 1 .8
    tce15=[(2, (0.75 + P8) / 2, h), (2, h, h), (2, 1, h)],
    tce100=[(1, t, 1), (1, P8, 0), (2, h, h), (2, 1, h)],
    em=[(2, h, h), (1, t, 1), (1, P8, 0), (2, 1, h)],
    ks=F(155, 600),                              # C-A: -.5 0 -.25 .55 1.55 1.55
    cw15=[[(1, q, 0), (2, h, h), (1, 1, 0), (1, 0, 0), (1, 1 - P8, 1)],
          [(2, (0.75 + P8) / 2, h), (2, h, h), (1, 0, 1), (1, 1, 1)]],
    cw100=[[(1, q, 0), (2, h, h), (1, 1, 0), (1, 0, 0), (1, 1 - P8, 1)],
           [(1, t, 1), (1, P8, 0), (2, h, h), (1, 0, 1), (1, 1, 1)]],
    ybar=[F(2, 6), F(4, 6)],
    # class 1, bin 12 holds .75 (o = 1) and .8 (o = 0), pbar .775, obar .5:
    # (.025^2 + .025^2 - 2 (-.025 * .5 + .025 * -.5)) / 6 = .05125 / 6
    murphy_gap=(2 * (F(P8) - F(0.75)) ** 2 / 4 + 2 * (F(P8) - F(0.75)) / 2) / 6,
))

# ---------------------------------------------------------------------------
# tiny_em: n = 16 binary rows built so that the em-debiased TCE is positive:
# ceil(16/15) = 2 per chunk, sorted confidences
#   .5 .5 | .5 .5 | .625 .625 | .75 .75 | .75 .875 | .875 .875 | 1 1 | 1 1
# edges .5 .5625 .6875 .75 .875 .9375 1 1 -> duplicates dropped; bins
# (.5: 4 values) (.5625: empty) (.6875: 2) (.75: 3) (.875: 3) (.9375: empty) (1: 4).
# Some confidences come from p < .5 (predicting class 0).
EM_ROWS = [  # (p, y) in file order; conf, correct in the comment
    ('.5', 1),    # .5 0
    ('1', 1),     # 1 1
    ('0.75', 0),  # .75 0
    ('0.5', 0),   # .5 1
    ('0.625', 0),  # .625 0
    ('0.875', 1),  # .875 1
    ('0', 0),     # 1 1
    ('5e-1', 0),  # .5 1
    ('0.25', 1),  # .75 0
    ('0.75', 1),  # .75 1
    ('0.125', 0),  # .875 1
    ('6.25e-1', 0),  # .625 0
    ('1.0', 0),   # 1 0
    ('0.50', 1),  # .5 0
    ('0.875', 1),  # .875 1
    ('1', 1),     # 1 1
]


def _bin_brier(p, y):
    return 2 * (F(p) - y) ** 2


def _bin_log(p, y):
    py = float(p) if y == 1 else 1 - float(p)
    return -math.log(max(py, 1e-15))


CASES.append(dict(
    name='tiny_em', form='binary', k=2,
    csv='y,p\n' + ''.join('%d,%s\n' % (y, p) for p, y in EM_ROWS),
    brier_rows=[_bin_brier(float(p), y) for p, y in EM_ROWS],
    log_rows=[_bin_log(p, y) for p, y in EM_ROWS],
    correct=[0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1],
    tce15=[(4, h, h), (2, F(5, 8), 0), (3, t, F(1, 3)), (3, F(7, 8), 1), (4, 1, t)],
    tce100=[(4, h, h), (2, F(5, 8), 0), (3, t, F(1, 3)), (3, F(7, 8), 1), (4, 1, t)],
    em=[(4, h, h), (2, F(5, 8), 0), (3, t, F(1, 3)), (3, F(7, 8), 1), (4, 1, t)],
    # sorted: .5(0 1 1 0) .625(0 0) .75(0 0 1) .875(1 1 1) 1(1 1 0 1);
    # C-A: .5 0 -.5 0 .625 1.25 2 2.75 2.5 2.375 2.25 2.125 2.125 2.125 3.125 3.125
    ks=F(3125, 16000),
    cw15=[  # class 0: value 1-p, outcome y==0
          [(3, 0, F(1, 3)), (2, e8, 0), (2, q, h), (2, F(3, 8), 1), (4, h, h),
           (1, t, 0), (1, F(7, 8), 1), (1, 1, 1)],
          # class 1: value p, outcome y==1
          [(1, 0, 0), (1, e8, 0), (1, q, 1), (4, h, h), (2, F(5, 8), 0),
           (2, t, h), (2, F(7, 8), 1), (3, 1, F(2, 3))]],
    cw100=[[(3, 0, F(1, 3)), (2, e8, 0), (2, q, h), (2, F(3, 8), 1), (4, h, h),
            (1, t, 0), (1, F(7, 8), 1), (1, 1, 1)],
           [(1, 0, 0), (1, e8, 0), (1, q, 1), (4, h, h), (2, F(5, 8), 0),
            (2, t, h), (2, F(7, 8), 1), (3, 1, F(2, 3))]],
    ybar=[h, h],
))


# ---------------------------------------------------------------------------
# tiny_gaussian: dss = (y-mean)^2/var + ln var per row.
def gaussian_case():
    rows = [(1.0, 0.0, 1.0), (2.0, 2.0, 4.0), (-1.0, 1.0, 0.5)]
    dss_rows = [1.0, math.log(4), 8 - LN2]
    dss, dss_ci = mean_ci(dss_rows)
    return dict(
        name='tiny_gaussian',
        csv='var,y,mean\n1,1,0\n4,2,2.0\n0.5,-1,1e0\n',
        expected={'n': 3, 'form': 'gaussian', 'dss': dss, 'dss_ci': dss_ci,
                  'mse': 5 / 3, 'mean_var': 5.5 / 3},
    ), rows


def outputs():
    for c in CASES:
        yield c['name'], c['csv'], classification(c)
    g, _ = gaussian_case()
    yield g['name'], g['csv'], g['expected']


def main(argv):
    check = '--check' in argv
    bad = 0
    for name, csv, exp in outputs():
        text = json.dumps(exp) + '\n'
        paths = [(os.path.join(HERE, name + '.csv'), csv),
                 (os.path.join(HERE, name + '.expected.json'), text)]
        for path, content in paths:
            if check:
                with open(path) as f:
                    if f.read() != content:
                        print('differs: %s' % path)
                        bad += 1
            else:
                with open(path, 'w') as f:
                    f.write(content)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
