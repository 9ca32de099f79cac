#!/usr/bin/env bash
# score_cli.sh — `calibctl score` on good and bad files: exit codes, the
# "calibctl: FILE:LINE: problem" message, nothing on stdout on error, and
# values worked by hand.
set -u
: "${CALIBCTL:?CALIBCTL must name the calibctl binary}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../integ/tap.sh"

# expect_reject NAME LINE PATTERN CONTENT: exit 2, message on LINE, no stdout
expect_reject() {
    local name=$1 line=$2 pattern=$3 f="$tmp/$1.csv"
    printf '%b' "$4" > "$f"
    "$CALIBCTL" score "$f" > "$tmp/out" 2> "$tmp/err"
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

# expect_json NAME PYTHON-ASSERTIONS CONTENT: exit 0, JSON checked by python
expect_json() {
    local name=$1 f="$tmp/$1.csv"
    printf '%b' "$3" > "$f"
    if "$CALIBCTL" score "$f" > "$tmp/out" 2> "$tmp/err" &&
       python3 -c "
import json, math, sys
r = json.load(open(sys.argv[1]))
close = lambda a, b: abs(a - b) <= 1e-12 * max(1, abs(b))
$2" "$tmp/out"; then
        ok "$name"
    else
        bad "$name ($(cat "$tmp/err") $(cat "$tmp/out"))"
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

finish
