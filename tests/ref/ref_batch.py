#!/usr/bin/env python3
"""ref_batch.py - score_ref.sh's python work in two processes, not three
a file (gen_csv.py, calib_ref.py, compare_json.py: 50 ms of CPU each to
start, 140 starts a run).

    python3 ref_batch.py gen DIR < LIST
        LIST: lines "KIND N K"; the i-th of them (from 1) is seed i.
        Writes DIR/NAME.csv, NAME = KIND-sSEED-nN-kK, as gen_csv.py would,
        and prints NAME; "! NAME REASON" where it cannot.
    python3 ref_batch.py check < CASES
        CASES: lines "NAME<TAB>CSV<TAB>CALIBCTL.json<TAB>EXPECTED.json",
        the last field empty where there is none. For each: calib_ref.py's
        figures for CSV against calibctl's, and where EXPECTED is given
        both against it (compare_json.py). Prints NAME, then each
        difference on a line of its own starting with a space.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calib_ref  # noqa: E402
import compare_json  # noqa: E402
import gen_csv  # noqa: E402


def gen(out_dir):
    seed = 0
    for line in sys.stdin:
        if not line.split():
            continue
        seed += 1
        kind, n, k = line.split()
        name = '%s-s%d-n%s-k%s' % (kind, seed, n, k)
        try:
            gen_csv.generate(seed, kind, int(n), int(k), os.path.join(out_dir, name + '.csv'))
        except Exception as e:  # reported as the case's failure
            print('! %s %s' % (name, ' '.join(str(e).split())))
            continue
        print(name)
    return 0


def compared(label, got, want):
    return ['%s: %s' % (label, d) for d in compare_json.compare(got, want)]


def check():
    for line in sys.stdin:
        name, csv, got_path, expected = line.rstrip('\n').split('\t')
        print(name)
        rc, text = calib_ref.reference(csv)
        if rc != 0:
            print(' calib_ref.py failed: %s' % ' '.join(text.split())[:500])
            continue
        ref = json.loads(text)
        try:
            got = compare_json.load(got_path)
            want = compare_json.load(expected) if expected else None
        except (OSError, ValueError) as e:
            print(' %s' % e)
            continue
        msgs = compared('calibctl vs ref', got, ref)
        if want is not None:
            msgs += compared('calibctl vs expected', got, want)
            msgs += compared('ref vs expected', ref, want)
        for m in msgs:
            print(' ' + m)
    return 0


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'gen':
        sys.exit(gen(sys.argv[2]))
    if len(sys.argv) == 2 and sys.argv[1] == 'check':
        sys.exit(check())
    sys.exit(__doc__)
