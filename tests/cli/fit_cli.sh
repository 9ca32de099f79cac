#!/usr/bin/env bash
# fit_cli.sh — `calibctl fit`: recovers a known temperature, Platt and
# variance map from simulated files, measures a positive paired improvement
# on a held-out file, loads the ETS plugin, and refuses bad requests; with
# --online, learns the same maps replaying the files in order (calib_online).
set -u
: "${CALIBCTL:?}" "${srcdir:?}" "${BUILDDIR:?}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../integ/tap.sh"
gen="$srcdir/examples/make_example.py"
python3 "$gen" --n 20000 --k 10 --t 2 --seed 11 > "$tmp/train.csv"
python3 "$gen" --n 20000 --k 10 --t 2 --seed 12 > "$tmp/test.csv"
# binary and regression files with known maps, written by a few lines here
python3 - "$tmp" <<'PY'
import math, random, sys
d = sys.argv[1]
r = random.Random(5)
with open(d + "/binary.csv", "w") as f:
    f.write("y,p\n")
    for _ in range(20000):
        s = r.gauss(0, 2)                       # the model's logit
        q = 1 / (1 + math.exp(-(0.5 * s - 0.7)))  # truth: sigmoid(a s + b)
        f.write("%d,%.17g\n" % (r.random() < q, 1 / (1 + math.exp(-s))))
with open(d + "/gauss.csv", "w") as f:
    f.write("y,mean,var\n")
    for _ in range(20000):
        mu, var = r.gauss(0, 1), r.uniform(0.5, 2)
        f.write("%.17g,%.17g,%.17g\n" % (r.gauss(mu, math.sqrt(3 * var + 0.5)), mu, var))
with open(d + "/biased.csv", "w") as f:   # y ~ N(0.5 + 0.8 mu, 1.5 var)
    f.write("y,mean,var\n")
    for _ in range(20000):
        mu, var = r.gauss(0, 1), r.uniform(0.5, 2)
        f.write("%.17g,%.17g,%.17g\n" % (r.gauss(0.5 + 0.8 * mu, math.sqrt(1.5 * var)), mu, var))
PY

# expect NAME PYTHON-ASSERTIONS ARGS...: exit 0 and JSON checked
expect() {
    local name=$1 py=$2
    shift 2
    if "$CALIBCTL" fit "$@" > "$tmp/out" 2> "$tmp/err" &&
       python3 -c "import json, sys; r = json.load(open(sys.argv[1])); $py" "$tmp/out"; then
        ok "$name"
    else
        bad "$name ($(cat "$tmp/err") $(cat "$tmp/out"))"
    fi
}

# n = 20000: the standard error of T is about 0.02; allow 5%
expect temperature_recovers "assert abs(r['params']['T'] - 2) < 0.1 and r['converged'] and not r['at_bound']; assert r['objective_after'] < r['objective_before']" \
    --method temperature "$tmp/train.csv"
expect paired_improvement "t = r['test']; assert t['n'] == 20000; b = t['brier']; assert b['ci'][0] > 0 and abs(b['improvement'] - (b['before'] - b['after'])) < 1e-12; assert t['log']['ci'][0] > 0" \
    --method temperature --test "$tmp/test.csv" "$tmp/train.csv"
expect temperature_brier "assert r['objective'] == 'brier' and abs(r['params']['T'] - 2) < 0.1" \
    --method temperature --loss brier "$tmp/train.csv"
expect platt_recovers "assert abs(r['params']['a'] - 0.5) < 0.05 and abs(r['params']['b'] + 0.7) < 0.07" \
    --method platt "$tmp/binary.csv"
expect variance_recovers "assert abs(r['params']['w'] - 3) < 0.25 and abs(r['params']['b'] - 0.5) < 0.3; assert r['objective'] == 'dss'" \
    --method variance "$tmp/gauss.csv"
expect location_scale_recovers "p = r['params']; assert abs(p['a'] - 0.5) < 0.05 and abs(p['b'] - 0.8) < 0.05 and abs(p['c'] - 1.5) < 0.1; assert r['objective'] == 'dss' and r['objective_after'] < r['objective_before']" \
    --method location_scale "$tmp/biased.csv"
expect location_scale_subset "p = r['params']; assert p['b'] == 1 and abs(p['a'] - 0.5) < 0.05 and p['c'] > 1" \
    --method location_scale --fit-params a,c "$tmp/biased.csv"
expect ets_plugin "assert r['method'] == 'ets' and r['test']['brier']['ci'][0] > 0; assert abs(sum(r['params'][w] for w in ('w1', 'w2', 'w3')) - 1) < 1e-9" \
    --method ets --plugin-dir "$BUILDDIR/plugins/.libs" --test "$tmp/test.csv" "$tmp/train.csv"
# a column calibctl does not read is ignored whatever it holds (the
# simulator's dump with --segments has one of text): the same fit
awk -F, 'BEGIN { OFS = "," } { print $0, (NR == 1 ? "segment" : "v" NR % 7 " x") }' \
    "$tmp/train.csv" > "$tmp/train_seg.csv"
"$CALIBCTL" fit --method temperature "$tmp/train.csv" > "$tmp/plain.json" 2> /dev/null
expect text_column_ignored "assert r['params'] == json.load(open('$tmp/plain.json'))['params']" \
    --method temperature "$tmp/train_seg.csv"

# --online: the rows in order, one step each; the map ends near the batch
# fit's (a regret of O(log n) leaves the last map close to the best one)
"$CALIBCTL" fit --method temperature "$tmp/train.csv" > "$tmp/batch.json" 2> /dev/null
expect online_temperature "b = json.load(open('$tmp/batch.json'))['params']['T']; o = r['online']; assert o['pairs'] == 20000 and o['refused'] == 0; assert abs(r['params']['T'] / b - 1) < 0.05, (r['params'], b); assert r['test']['log']['ci'][0] > 0" \
    --online --method temperature --test "$tmp/test.csv" "$tmp/train.csv"
"$CALIBCTL" fit --method platt "$tmp/binary.csv" > "$tmp/batch.json" 2> /dev/null
expect online_platt "b = json.load(open('$tmp/batch.json'))['params']; p = r['params']; assert abs(p['a'] - b['a']) < 0.05 and abs(p['b'] - b['b']) < 0.07, (p, b)" \
    --online --method platt "$tmp/binary.csv"
# variance: w alone (b = 0), the mean of (y - mu)^2 / var with one
# pseudo-pair at w = 1, to the last digits
python3 - "$tmp" > "$tmp/w.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/gauss.csv")))
print(repr((1 + sum((float(r["y"]) - float(r["mean"])) ** 2 / float(r["var"]) for r in rows)) / (1 + len(rows))))
PY
expect online_variance "w = float(open('$tmp/w.txt').read()); p = r['params']; assert abs(p['w'] / w - 1) < 1e-9 and p['b'] == 0, (p, w); assert r['objective'] == 'dss'" \
    --online --method variance "$tmp/gauss.csv"
"$CALIBCTL" fit --online --method temperature "$tmp/train.csv" > "$tmp/a.json" 2> /dev/null
expect online_replays_the_same "assert r == json.load(open('$tmp/a.json'))" \
    --online --method temperature "$tmp/train.csv"

# refusals: exit 2 and a message
refuse() {
    local name=$1 pattern=$2
    shift 2
    "$CALIBCTL" fit "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q -e "$pattern" "$tmp/err"; then
        ok "$name"
    else
        bad "$name (rc $rc: $(cat "$tmp/err"))"
    fi
}
refuse unknown_method "unknown method 'nope'" --method nope --plugin-dir "$tmp" "$tmp/train.csv"
refuse bad_loss "--loss: expected nll or brier" --method temperature --loss hinge "$tmp/train.csv"
refuse wrong_form "method variance does not take logits" --method variance "$tmp/train.csv"
refuse subset_of_variance "only location_scale fits a subset" --method variance --fit-params w "$tmp/gauss.csv"
refuse subset_unknown "d is not a parameter of method location_scale" --method location_scale --fit-params a,d "$tmp/gauss.csv"
refuse test_differs "outputs differ" --method temperature --test "$tmp/binary.csv" "$tmp/train.csv"
refuse no_method "usage" "$tmp/train.csv"
refuse online_platt_k10 "online learns temperature, platt (binary or K = 2)" --online --method platt "$tmp/train.csv"
refuse online_plugin "online learns" --online --method ets --plugin-dir "$BUILDDIR/plugins/.libs" "$tmp/train.csv"
refuse online_loss "no --loss" --online --method temperature --loss brier "$tmp/train.csv"
refuse gamma_not_online "--gamma and --eps are --online's" --method temperature --gamma 1 "$tmp/train.csv"
refuse bad_gamma "--gamma: expected a number in \[1e-06, 1e+06\]" --online --method temperature --gamma -1 "$tmp/train.csv"
printf 'y,z0,z1\n0,0,2e6\n0,-2e6,0\n' > "$tmp/far.csv"
refuse online_all_refused "learned from none of its 2 rows" --online --method platt "$tmp/far.csv"
printf 'y,z0,z1\n0,1\n' > "$tmp/ragged.csv"
refuse bad_file "ragged.csv:2: row has 2 fields" --method temperature "$tmp/ragged.csv"

finish
