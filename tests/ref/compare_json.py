#!/usr/bin/env python3
"""compare_json.py - compare two `calibctl score` JSON outputs.

    python3 compare_json.py GOT.json WANT.json [LABEL]

Numbers agree when |a - b| <= 1e-9 * max(|a|, |b|) or |a - b| <= 1e-12;
arrays elementwise; null only equals null; strings exactly.  Both objects
must have exactly the documented key set for their form.  Prints one line per
differing key ("key: got X, want Y") and exits 1 on any difference, 0 if
they agree, 2 if a file is not a JSON object.
"""
import json
import math
import sys

RTOL = 1e-9
ATOL = 1e-12

CLASS_KEYS = ['n', 'k', 'form', 'accuracy', 'brier', 'brier_ci', 'rbs', 'log',
              'log_ci', 'ece', 'tce2_15', 'tce2_100', 'tce2_15em_debiased',
              'cwce2_15', 'cwce2_100', 'ks', 'brier_reliability',
              'brier_resolution', 'brier_uncertainty']
GAUSS_KEYS = ['n', 'form', 'dss', 'dss_ci', 'mse', 'mean_var']


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if is_num(a) and is_num(b):
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return False
        if a == b:
            return True
        d = abs(a - b)
        return d <= ATOL or d <= RTOL * max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False


def show(x):
    return json.dumps(x)


def load(path):
    with open(path) as f:
        obj = json.load(f)
    if not isinstance(obj, dict):
        raise ValueError('%s: not a JSON object' % path)
    return obj


def compare(got, want):
    """list of difference descriptions (empty when they agree)."""
    diffs = []
    form = want.get('form', got.get('form'))
    keys = GAUSS_KEYS if form == 'gaussian' else CLASS_KEYS
    for name, obj in (('got', got), ('want', want)):
        missing = [k for k in keys if k not in obj]
        extra = [k for k in obj if k not in keys]
        if missing:
            diffs.append('%s lacks keys: %s' % (name, ', '.join(missing)))
        if extra:
            diffs.append('%s has unexpected keys: %s' % (name, ', '.join(extra)))
    for k in keys:
        if k in got and k in want and not same(got[k], want[k]):
            diffs.append('%s: got %s, want %s' % (k, show(got[k]), show(want[k])))
    return diffs


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write('usage: compare_json.py GOT.json WANT.json [LABEL]\n')
        return 2
    label = argv[3] + ': ' if len(argv) == 4 else ''
    try:
        got = load(argv[1])
        want = load(argv[2])
    except (OSError, ValueError) as e:
        print('%s%s' % (label, e))
        return 2
    diffs = compare(got, want)
    for d in diffs:
        print('%s%s' % (label, d))
    return 1 if diffs else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
