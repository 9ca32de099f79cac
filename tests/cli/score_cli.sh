#!/usr/bin/env bash
# score_cli.sh — `calibctl score` on good and bad files: exit codes, the
# "calibctl: FILE:LINE: problem" message, nothing on stdout on error, and
# values worked by hand.
set -u
: "${CALIBCTL:?CALIBCTL must name the calibctl binary}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../integ/tap.sh"

# expect_reject NAME LINE PATTERN CONTENT [OPTION...]: exit 2, message on
# LINE, no stdout
expect_reject() {
    local name=$1 line=$2 pattern=$3 f="$tmp/$1.csv"
    printf '%b' "$4" > "$f"
    "$CALIBCTL" score "${@:5}" "$f" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] &&
       grep -q "^calibctl: $f:$line: .*$pattern" "$tmp/err"; then
        ok "$name"
    else
        bad "$name (rc $rc, stderr: $(cat "$tmp/err"), stdout: $(head -c 200 "$tmp/out"))"
    fi
}

expect_reject ragged_short 3 "row has 2 fields, the header has 3" 'y,p0,p1\n0,0.5,0.5\n1,0.5\n'
expect_reject ragged_long 2 "row has 4 fields" 'y,p0,p1\n0,0.5,0.5,7\n'
expect_reject blank_lines_counted 4 "row has 2 fields" 'y,p0,p1\n0,0.5,0.5\n\n1,0.5\n'
expect_reject crlf 3 "not a finite number" 'y,z0,z1\r\n0,1,2\r\n1,x,2\r\n'
expect_reject not_a_number 2 "'abc' in column 2 is not a finite number" 'y,z0,z1\n0,abc,1\n'
expect_reject empty_field 2 "'' in column 3" 'y,z0,z1\n0,1,\n'
expect_reject nan 2 "'nan' in column 2" 'y,z0,z1\n0,nan,1\n'
expect_reject inf 3 "'-inf' in column 3" 'y,z0,z1\n0,0,1\n1,2,-inf\n'
expect_reject huge 2 "not a finite number" 'y,z0,z1\n0,1e999,1\n'
expect_reject label_range 2 "label 2 is not a class in \\[0, 2)" 'y,z0,z1\n2,0,1\n'
expect_reject label_negative 2 "label -1 is not a class" 'y,p\n-1,0.5\n'
expect_reject label_fraction 2 "label 0.5 is not a class" 'y,p0,p1\n0.5,0.5,0.5\n'
expect_reject prob_above_one 2 "probability outside \\[0, 1\\]" 'y,p0,p1\n0,1.5,-0.5\n'
expect_reject prob_binary 3 "probability outside" 'y,p\n0,0.5\n1,1.01\n'
expect_reject prob_sum 2 "do not sum to 1 within 1e-3" 'y,p0,p1\n0,0.5,0.4\n'
expect_reject var_zero 2 "variance is not positive" 'y,mean,var\n1,0,0\n'
expect_reject var_negative 3 "variance is not positive" 'y,mean,var\n1,0,1\n1,0,-2\n'
expect_reject empty_file 1 "empty file" ''
expect_reject header_only 1 "no data rows" 'y,p0,p1\n'
expect_reject no_y 1 "no column 'y'" 'z0,z1\n0,1\n'
expect_reject gap_in_classes 1 "columns z0..z2 are not all present" 'y,z0,z2\n0,0,1\n'
expect_reject one_class 1 "at least 2 classes" 'y,z0\n0,1\n'
expect_reject two_forms 1 "more than one output form" 'y,z0,z1,p\n0,0,1,0.5\n'
expect_reject mean_only 1 "needs both 'mean' and 'var'" 'y,mean\n0,1\n'
expect_reject no_outputs 1 "no outputs" 'y,x\n0,1\n'
expect_reject duplicate_column 1 "column 'z0' appears twice" 'y,z0,z0\n0,1,1\n'
expect_reject bad_quote 2 "malformed CSV" 'y,z0,z1\n0,"1,2\n'

# a missing file is a runtime failure: exit 1
"$CALIBCTL" score "$tmp/missing.csv" > "$tmp/out" 2> "$tmp/err"
if [ $? -eq 1 ] && grep -q "^calibctl: $tmp/missing.csv: No such file" "$tmp/err"; then
    ok missing_file
else
    bad "missing_file ($(cat "$tmp/err"))"
fi

# usage errors: exit 2
"$CALIBCTL" score > /dev/null 2>&1; [ $? -eq 2 ] && ok usage_no_file || bad usage_no_file
"$CALIBCTL" nosuch > /dev/null 2>&1; [ $? -eq 2 ] && ok usage_command || bad usage_command
"$CALIBCTL" --version | grep -q '^calibctl ' && ok version || bad version

# expect_json NAME PYTHON-ASSERTIONS CONTENT [OPTIONS...]: calibctl score
# OPTIONS FILE of CONTENT exits 0, and its JSON passes the assertions
expect_json() {
    local name=$1 f="$tmp/$1.csv"
    printf '%b' "$3" > "$f"
    if "$CALIBCTL" score "${@:4}" "$f" > "$tmp/out" 2> "$tmp/err" &&
       python3 -c "
import json, math, sys
r = json.load(open(sys.argv[1]))
close = lambda a, b: abs(a - b) <= 1e-12 * max(1, abs(b))
$2" "$tmp/out"; then
        ok "$name"
    else
        bad "$name ($(cat "$tmp/err") $(head -c 600 "$tmp/out"))"
    fi
}

# One row [.7 .2 .1], y 0: Brier .14, log -ln .7, conf .7 correct: ECE .3
expect_json one_row "
assert r['n'] == 1 and r['k'] == 3 and r['form'] == 'probs'
assert close(r['brier'], 0.14) and close(r['rbs'], math.sqrt(0.14))
assert close(r['log'], -math.log(0.7)) and r['brier_ci'] is None
assert close(r['ece'], 0.3) and close(r['tce2_15'], 0.3) and close(r['ks'], 0.3)
assert r['accuracy'] == 1 and r['tce2_15em_debiased'] == 0
" 'y,p0,p1,p2\n0,0.7,0.2,0.1\n'

# Logits [0 0] twice: p = .5 .5, Brier .5, log ln 2, conf .5 correct (tie -> 0)
expect_json logits_tie "
assert r['form'] == 'logits' and r['n'] == 2
assert close(r['brier'], 0.5) and close(r['log'], math.log(2))
assert r['accuracy'] == 0.5 and close(r['ece'], 0.0)
assert r['brier_ci'] == [0.5, 0.5]
" 'y,z0,z1\n0,0,0\n1,0,0\n'

# Columns in any order, spaces trimmed, unknown columns warned and ignored
expect_json column_order "
assert r['form'] == 'binary' and r['k'] == 2 and close(r['brier'], 2 * 0.04)
" 'id, p ,y\n17, 0.8 ,1\n'
grep -q "warning: ignoring unknown column 'id'" "$tmp/err" && ok warn_unknown || bad warn_unknown

# 80,000 unknown columns: one warning line that counts them, and a duplicate
# among many columns is still found (the check sorts: it was O(n^2))
python3 -c "
import sys
n = 80000
sys.stdout.write(','.join(['y', 'p'] + ['c%d' % i for i in range(n)]) + '\\n')
sys.stdout.write(','.join(['1', '0.5'] + ['0'] * n) + '\\n')
" > "$tmp/wide.csv"
"$CALIBCTL" score "$tmp/wide.csv" > "$tmp/out" 2> "$tmp/err"
if [ $? -eq 0 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] &&
   grep -q "warning: ignoring 80000 unknown columns: 'c0', 'c1', 'c2', \.\.\.$" "$tmp/err"; then
    ok warn_unknown_many
else
    bad "warn_unknown_many ($(head -c 300 "$tmp/err"))"
fi
sed -i '1s/$/,c79999/; 2s/$/,0/' "$tmp/wide.csv"
"$CALIBCTL" score "$tmp/wide.csv" > "$tmp/out" 2> "$tmp/err"
[ $? -eq 2 ] && grep -q "column 'c79999' appears twice" "$tmp/err" &&
    ok duplicate_among_many || bad "duplicate_among_many ($(head -c 300 "$tmp/err"))"

# Regression: (y - mean)^2 / var + ln var
expect_json gaussian "
assert r['form'] == 'gaussian' and r['n'] == 2
assert close(r['dss'], ((1 - 0.5)**2 / 2 + math.log(2) + 0 + 0) / 2)
assert close(r['mse'], 0.125) and close(r['mean_var'], 1.5)
" 'y,mean,var\n1,0.5,2\n3,3,1\n'

# standard input
printf 'y,p\n1,0.5\n' | "$CALIBCTL" score - | grep -q '"n": 1' && ok stdin || bad stdin

# ------------------------------------------------------------ --segment
# The bad cells and columns of a segment column: exit 2, FILE:LINE, as above
seg_msg="is not a segment value (1 to 64 bytes, no control characters)"
expect_reject segment_no_column 1 "no column 'region' (named by --segment)" \
    'y,p,segment\n1,0.5,a\n' --segment region
expect_reject segment_is_output 1 "column 'p' is the outcome or an output" \
    'y,p,segment\n1,0.5,a\n' --segment p
expect_reject segment_empty_cell 3 "'' in column 3 $seg_msg" \
    'y,p,segment\n1,0.5,a\n0,0.5,\n' --segment segment
expect_reject segment_control_cell 2 "'a\\\\x09b' in column 1 $seg_msg" \
    'segment,y,p\n"a\tb",1,0.5\n' --segment segment
expect_reject segment_long_cell 2 "'a\\{32\\}\\.\\.\\.' (too long) in column 3" \
    "y,p,segment\n1,0.5,$(printf 'a%.0s' {1..65})\n" --segment segment
expect_reject segment_number_still_checked 2 "'x' in column 2 is not a finite number" \
    'y,p,segment\n1,x,a\n' --segment segment
# without --segment, a column of text is ignored (with a warning), as any
# unknown column
expect_json segment_column_without_option "
assert r['n'] == 1 and 'segments' not in r
" 'y,p,segment\n1,0.5,a\n'

# bad options: exit 2, the option named
expect_usage() {
    local name=$1 pattern=$2
    shift 2
    "$CALIBCTL" score "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q "^calibctl: $pattern" "$tmp/err"; then
        ok "$name"
    else
        bad "$name (rc $rc, stderr: $(cat "$tmp/err"))"
    fi
}
printf 'y,p,segment\n1,0.5,a\n' > "$tmp/seg1.csv"
expect_usage segment_values_zero "--segment-values: '0' is not an integer in \\[1, 4096\\]" \
    --segment segment --segment-values 0 "$tmp/seg1.csv"
expect_usage segment_values_big "--segment-values: '4097'" \
    --segment segment --segment-values 4097 "$tmp/seg1.csv"
expect_usage segment_alpha_one "--segment-alpha: '1' is not a number in (0, 1)" \
    --segment segment --segment-alpha 1 "$tmp/seg1.csv"
expect_usage segment_min_effect_negative "--segment-min-effect: '-0.1' is not a number in \\[0, 1)" \
    --segment segment --segment-min-effect -0.1 "$tmp/seg1.csv"
expect_usage segment_option_alone "--segment-alpha needs --segment COLUMN" \
    --segment-alpha 0.1 "$tmp/seg1.csv"
expect_usage segment_empty_name "--segment: '' is not a column name" \
    --segment '' "$tmp/seg1.csv"

# Regression: each value's DSS, no test (as calibd)
expect_json segment_gaussian "
s = r['segments']
assert s['key'] == 'g' and s['tracked'] == 2 and s['values'] == 4096 and s['flagged'] == 0
a, b, other = s['segments']
assert (a['value'], a['pairs'], b['value'], b['pairs']) == ('a', 2, 'b', 1), s
assert close(a['dss']['mean'], ((1 - 0.5)**2 / 2 + math.log(2) + 1) / 2)
assert other['value'] is None and other['other'] is True and other['pairs'] == 0 and other['dss']['mean'] is None
assert all(set(x) == {'value', 'other', 'pairs', 'dss'} for x in s['segments'])
assert close(r['dss'], ((1 - 0.5)**2 / 2 + math.log(2) + 0 + 1) / 3)
" 'y,mean,var,g\n1,0.5,2,a\n3,3,1,b\n1,0,1,a\n' --segment g

# The simulator's scenario (tests/integ/segments.sh, without a daemon: the
# PUB socket binds in-process and nobody listens): 40 values, labels of
# v0 v1 v2 drawn at temperature 2, the model calibrated elsewhere
SIMULATE=${SIMULATE:-${BUILDDIR:-.}/examples/simulate}
dump=$tmp/segments.csv
"$SIMULATE" --endpoint '@inproc://score_cli' --warmup-ms 0 --linger-ms 0 --batch 100 \
    --count 20000 --sigma 3 --segments 40 --miscal-segments 3 --seed 1 \
    --dump "$dump" 2> "$tmp/sim.err"
rc=$?
check "simulator dump: 20000 rows with a segment column
$SIMULATE: $(cat "$tmp/sim.err")" \
    '[ $rc -eq 0 ] && [ "$(wc -l < "$dump")" -eq 20001 ] && head -1 "$dump" | grep -q ",segment$"'
"$CALIBCTL" score --segment segment "$dump" > "$tmp/seg.json" 2> "$tmp/err"
rc=$?
check "score --segment on it: exit 0, no warning (the column is read)
$(cat "$tmp/err")" '[ $rc -eq 0 ] && [ ! -s "$tmp/err" ]'

# pycheck NAME [ARG...] < PYTHON: a check by the assertions of PYTHON, run
# with seg.json's path and ARGs in sys.argv[1:]; what it prints (and a
# failed assertion) follows as diagnostics
pycheck() {
    local name=$1 out
    shift
    out=$(python3 - "$tmp/seg.json" "$@" 2>&1)
    local rc=$?
    if [ $rc -eq 0 ]; then
        ok "$name${out:+
$out}"
    else
        bad "$name
$out"
    fi
}
pycheck "exactly v0 v1 v2 are flagged, and they rank first" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r['segments']
flagged = sorted(x['value'] for x in s['segments'] if x.get('flagged'))
first = [x['value'] for x in s['segments'][:5]]
print('flagged', flagged, 'first', first)
assert flagged == ['v0', 'v1', 'v2'] and s['flagged'] == 3
assert sorted(first[:3]) == flagged
PY
pycheck "all 40 values tracked, every pair in one, \"other\" last and empty; flags at ticks" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r['segments']
v = s['segments']
assert (s['key'], s['values'], s['tracked'], s['evictions']) == ('segment', 4096, 40, 0), s
assert (s['alpha'], s['min_effect']) == (0.05, 0.02)
assert abs(s['threshold'] - 4096 / 0.05) < 1e-9 * 81920
assert len(v) == 41 and v[-1]['value'] is None and v[-1]['other'] and not any(s['other'] for s in v[:-1]) and v[-1]['pairs'] == 0
assert sum(x['pairs'] for x in v) == r['n'] == 20000
for x in v[:-1]:
    if x['flagged']:  # e-BH at a tick: row 100 t, e above K / (alpha r) for some r <= 3
        assert x['flagged_at_row'] % 100 == 0 and x['e_flagged'] >= s['threshold'] / 3, x
    else:
        assert x['flagged_at_row'] is None and x['e_flagged'] is None, x
PY
# Each value's pairs, Brier and log scores and gap as python finds them in
# the CSV: softmax of the logits, sum_k (p_k - [y = k])^2, -ln p_y, mean
# max p - accuracy
pycheck "v1's and v17's pairs, Brier and log score (1e-12 relative) and gap as python's" \
    "$dump" <<'PY'
import csv, json, math, sys
s = {x['value']: x for x in json.load(open(sys.argv[1]))['segments']['segments']}
rows = list(csv.reader(open(sys.argv[2])))
head, rows = rows[0], rows[1:]
kz = [i for i, h in enumerate(head) if h.startswith('z')]
iy, iseg = head.index('y'), head.index('segment')
close = lambda a, b: abs(a - b) <= 1e-12 * abs(b)
for value in ('v1', 'v17'):
    brier, logs, conf, right = [], [], [], 0
    for row in rows:
        if row[iseg] != value:
            continue
        z = [float(row[i]) for i in kz]
        y = int(row[iy])
        e = [math.exp(x - max(z)) for x in z]
        p = [x / math.fsum(e) for x in e]
        brier.append(math.fsum((pk - (k == y)) ** 2 for k, pk in enumerate(p)))
        logs.append(-math.log(p[y]))
        conf.append(max(p))
        right += p.index(max(p)) == y
    n = len(brier)
    got = s[value]
    print(value, n, got['brier']['mean'], math.fsum(brier) / n)
    assert got['pairs'] == n, (got['pairs'], n)
    assert close(got['brier']['mean'], math.fsum(brier) / n)
    assert close(got['log']['mean'], math.fsum(logs) / n)
    assert abs(got['gap'] - (math.fsum(conf) - right) / n) <= 1e-12
PY

# --segment adds "segments" and changes nothing else: the other keys as
# score prints them for the file without the column
cut -d, -f1-11 "$dump" > "$tmp/noseg.csv"
"$CALIBCTL" score "$tmp/noseg.csv" > "$tmp/noseg.json" 2> /dev/null
pycheck "the other keys are those score prints for the file without the column" \
    "$tmp/noseg.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert list(a)[-1] == 'segments'
del a['segments']
assert list(a.items()) == list(b.items())
PY

# ------------------------------------------------------------ --label-free
# options that need --label-free, a reference of another K, a Gaussian
# reference, and the figures by hand on a tiny file
printf 'y,p\n1,0.5\n' > "$tmp/lf1.csv"
"$CALIBCTL" score --reference "$tmp/lf1.csv" "$tmp/lf1.csv" > "$tmp/out" 2> "$tmp/err"
check "lf_reference_alone" "[ \$? -eq 2 ] && [ ! -s '$tmp/out' ] && grep -q -- '--reference needs --label-free' '$tmp/err'"
printf 'y,p0,p1,p2\n0,0.2,0.3,0.5\n' > "$tmp/ref3.csv"
expect_reject lf_reference_k 1 "2 classes, but the reference file has 3" 'p0,p1\n0.5,0.5\n' \
    --label-free --reference "$tmp/ref3.csv"
printf 'y,mean,var\n0.5,0,1\n' > "$tmp/refg.csv"
"$CALIBCTL" score --label-free --reference "$tmp/refg.csv" "$tmp/ref3.csv" > "$tmp/out" 2> "$tmp/err"
check "lf_reference_gaussian" "[ \$? -eq 2 ] && [ ! -s '$tmp/out' ] && grep -q 'a Gaussian model has no priors' '$tmp/err'"
printf 'p0,p1\n0.75,0.25\n0.5,0.5\n' > "$tmp/lf.csv"
"$CALIBCTL" score --label-free "$tmp/lf.csv" > "$tmp/lf.json" 2> "$tmp/err"
check "--label-free: the naive figures by hand, no reference" "python3 - '$tmp/lf.json' <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
brier = ((1 - 0.75**2 - 0.25**2) + (1 - 0.5**2 - 0.5**2)) / 2
assert abs(o['brier']['mean'] - brier) < 1e-12 and not o['corrected'], o
assert abs(o['accuracy']['mean'] - (0.75 + 0.5) / 2) < 1e-12, o
assert o['predictions'] == 2 and o['reference_priors'] is None, o
assert abs(o['priors'][0] - 0.625) < 1e-12, o
PY"

finish
