#!/usr/bin/env bash
# sizes_cli.sh — `calibctl sizes`: Gruber & Buettner's experiment on
# simulated miscalibrated models with a known answer. The binned estimates
# (ECE, TCE2, CWCE2) must fall markedly with the test-set size, while the
# mean Brier and log scores stay flat, at the file's mean (and the Brier at
# its known expectation); subsamples are drawn without replacement; the
# whole-file row is `calibctl score`'s; the text table and the SVG plot are
# well-formed; bad arguments exit 2 with a message.
set -u
: "${CALIBCTL:?CALIBCTL must name the calibctl binary}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../integ/tap.sh"

# Simulated files, with a fixed seed, and the true expected mean Brier score
# of each (given the model's outputs) with the sd of the file's mean around
# it. logits: K = 10, z ~ N(0, 1.5^2), outcomes from softmax(z / 2): the
# model's softmax(z) is overconfident (true temperature 2). binary: the
# model says sigmoid(s), the truth is sigmoid(s / 2), s ~ N(0, 2^2).
python3 - "$tmp" <<'PY' || { echo "Bail out! cannot generate the test files"; exit 1; }
import json, math, random, sys
d = sys.argv[1]
r = random.Random(20221128)

def softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]

def write(name, header, rows, expect, var):
    with open(d + "/" + name + ".csv", "w") as f:
        f.write(header + "\n")
        f.write("\n".join(rows) + "\n")
    n = len(rows)
    json.dump({"brier": expect / n, "sd": math.sqrt(var) / n},
              open(d + "/" + name + ".truth.json", "w"))

# K = 10 logits, written with 17 digits so the file is what was simulated
rows, expect, var = [], 0.0, 0.0
for _ in range(20000):
    z = [r.gauss(0, 1.5) for _ in range(10)]
    p, q = softmax(z), softmax([v / 2 for v in z])
    y = r.choices(range(10), weights=q)[0]
    rows.append("%d," % y + ",".join("%.17g" % v for v in z))
    # Brier = sum p^2 - 2 p_y + 1: E over y ~ q, and var = 4 var(p_y)
    s2 = sum(v * v for v in p)
    m1 = sum(a * b for a, b in zip(p, q))
    m2 = sum(a * a * b for a, b in zip(p, q))
    expect += s2 - 2 * m1 + 1
    var += 4 * (m2 - m1 * m1)
write("logits", "y," + ",".join("z%d" % k for k in range(10)), rows, expect, var)

# the same model as probabilities, 2000 rows (every form must work)
with open(d + "/probs.csv", "w") as f:
    f.write("y," + ",".join("p%d" % k for k in range(10)) + "\n")
    for line in rows[:2000]:
        v = line.split(",")
        p = softmax([float(x) for x in v[1:]])
        f.write(v[0] + "," + ",".join("%.17g" % x for x in p) + "\n")

# binary: Brier 2 (p - y)^2, E = 2 ((p - q)^2 + q (1 - q)),
# var = q (1 - q) (2 (1 - p)^2 - 2 p^2)^2
rows, expect, var = [], 0.0, 0.0
for _ in range(5000):
    s = r.gauss(0, 2)
    p, q = 1 / (1 + math.exp(-s)), 1 / (1 + math.exp(-s / 2))
    rows.append("%d,%.17g" % (r.random() < q, p))
    expect += 2 * ((p - q) ** 2 + q * (1 - q))
    var += q * (1 - q) * (2 * (1 - p) ** 2 - 2 * p * p) ** 2
write("binary", "y,p", rows, expect, var)

# regression: N(mu, var) predictions of y ~ N(mu, 2 var)
with open(d + "/gauss.csv", "w") as f:
    f.write("y,mean,var\n")
    for _ in range(2000):
        mu, v = r.gauss(0, 1), r.uniform(0.5, 2)
        f.write("%.17g,%.17g,%.17g\n" % (r.gauss(mu, math.sqrt(2 * v)), mu, v))

# ten rows of distinct Brier scores, for the without-replacement check
with open(d + "/ten.csv", "w") as f:
    f.write("y,p\n")
    for i in range(10):
        f.write("%d,%.17g\n" % (i % 2, 0.05 + 0.09 * i))
PY

# pycheck NAME PYTHON-ASSERTIONS FILE...: python3 with r = the first file's
# JSON; argv[2:] are the others
pycheck() {
    local name=$1 py=$2
    shift 2
    if python3 -c "
import json, math, sys
r = json.load(open(sys.argv[1]))
by_n = {s['n']: s for s in r.get('sizes', [])}
se = lambda s, key: s[key]['sd'] / math.sqrt(s['reps'])
$py" "$@" 2> "$tmp/pyerr"; then
        ok "$name"
    else
        bad "$name
$(tail -n 5 "$tmp/pyerr")"
    fi
}

# ----------------------------------------------------------- the experiment

"$CALIBCTL" sizes --sizes 50,100,200,500,1000,2000,5000,20000 --reps 200 --seed 7 \
    "$tmp/logits.csv" > "$tmp/logits.json" 2> "$tmp/err"
check logits_runs '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'

pycheck logits_shape "
assert r['rows'] == 20000 and r['k'] == 10 and r['form'] == 'logits'
assert r['reps'] == 200 and r['seed'] == 7
assert [s['n'] for s in r['sizes']] == [50, 100, 200, 500, 1000, 2000, 5000, 20000]
# the whole file is drawn once: every subsample of it is the file
assert [s['reps'] for s in r['sizes']] == [200] * 7 + [1]
keys = ['ece', 'tce2_15', 'tce2_100', 'tce2_15em_debiased', 'cwce2_15',
        'cwce2_100', 'ks', 'rbs', 'brier', 'log']
for s in r['sizes']:
    assert [k for k in s if k not in ('n', 'reps')] == keys, list(s)
    for k in keys:
        st = s[k]
        assert st['q05'] <= st['q95'], (s['n'], k, st)
        assert st['q05'] - 1e-12 <= st['mean'] <= st['q95'] + 1e-12, (s['n'], k, st)
        assert (st['sd'] is None) == (s['reps'] == 1), (s['n'], k, st)
        assert st['sd'] is None or st['sd'] >= 0
" "$tmp/logits.json"

# The binned estimates fall with n: the ECE at n = 50 is above the ECE at
# n = 5000 by far more than their standard errors and by more than 10%;
# TCE2 and CWCE2 on 100 bins fall at every step, to the whole file's value.
pycheck ece_falls_with_n "
a, b = by_n[50], by_n[5000]
gap = a['ece']['mean'] - b['ece']['mean']
assert gap > 5 * math.hypot(se(a, 'ece'), se(b, 'ece')), (gap, se(a, 'ece'), se(b, 'ece'))
assert a['ece']['mean'] > 1.1 * b['ece']['mean'], (a['ece'], b['ece'])
for k in ('tce2_15', 'tce2_100', 'cwce2_15', 'cwce2_100'):
    g = a[k]['mean'] - b[k]['mean']
    assert g > 5 * math.hypot(se(a, k), se(b, k)), (k, g)
for k in ('tce2_100', 'cwce2_100'):
    m = [s[k]['mean'] for s in r['sizes']]
    assert all(x > y for x, y in zip(m, m[1:])), (k, m)
" "$tmp/logits.json"

# The debiased TCE2 moves much less between n = 50 and 5000 than the plain
# TCE2 on the same 15 bins.
pycheck debiased_moves_less "
a, b = by_n[50], by_n[5000]
d_plain = abs(a['tce2_15']['mean'] - b['tce2_15']['mean'])
d_deb = abs(a['tce2_15em_debiased']['mean'] - b['tce2_15em_debiased']['mean'])
assert d_deb < d_plain / 3, (d_deb, d_plain)
" "$tmp/logits.json"

# The mean Brier and log scores are flat: at every n, the mean over
# subsamples is within 4 standard errors of the whole file's (each
# subsample's mean is an unbiased estimate of it), and the file's mean Brier
# is within 4 sd of the true expected Brier score.
pycheck brier_flat "
t = json.load(open(sys.argv[2]))
full = by_n[20000]
for k in ('brier', 'log'):
    for s in r['sizes'][:-1]:
        dev = abs(s[k]['mean'] - full[k]['mean'])
        assert dev <= 4 * se(s, k), (k, s['n'], dev, se(s, k))
assert abs(full['brier']['mean'] - t['brier']) <= 4 * t['sd'], (full['brier'], t)
# and unlike the ECE, its spread, not its level, shrinks with n
assert by_n[50]['brier']['sd'] > 5 * by_n[5000]['brier']['sd']
" "$tmp/logits.json" "$tmp/logits.truth.json"

# RBS = sqrt(mean Brier) of each subsample: its mean sits at or below the
# square root of the mean Brier (Jensen), by little.
pycheck rbs_jensen "
for s in r['sizes']:
    rb, br = s['rbs']['mean'], s['brier']['mean']
    assert rb <= math.sqrt(br) + 1e-12 and math.sqrt(br) - rb < 0.01, (s['n'], rb, br)
" "$tmp/logits.json"

# The whole-file row is what calibctl score prints: the same code.
# same_as_score NAME SIZES-JSON FILE
same_as_score() {
    if "$CALIBCTL" score "$3" > "$tmp/score.json" 2> "$tmp/err"; then
        pycheck "$1" "
sc = json.load(open(sys.argv[2]))
full = r['sizes'][-1]
assert full['n'] == sc['n'] == r['rows'] and full['reps'] == 1
keys = [k for k in full if k not in ('n', 'reps')]
assert len(keys) >= 2
for k in keys:
    a, b = full[k]['mean'], sc[k]
    assert abs(a - b) <= 1e-12 * max(1, abs(b)), (k, a, b)
    assert full[k]['q05'] == full[k]['q95'] == a
" "$2" "$tmp/score.json"
    else
        bad "$1 (score: $(cat "$tmp/err"))"
    fi
}
same_as_score logits_full_is_score "$tmp/logits.json" "$tmp/logits.csv"

# The binary model, read from standard input.
"$CALIBCTL" sizes --sizes 50,200,1000,5000 --reps 300 - < "$tmp/binary.csv" \
    > "$tmp/binary.json" 2> "$tmp/err"
check binary_stdin_runs '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'
pycheck binary_effects "
t = json.load(open(sys.argv[2]))
assert r['form'] == 'binary' and r['k'] == 2 and r['rows'] == 5000 and r['file'] == '-'
a, b, full = by_n[50], by_n[1000], by_n[5000]
gap = a['ece']['mean'] - b['ece']['mean']
assert gap > 5 * math.hypot(se(a, 'ece'), se(b, 'ece')) and gap > 0.1 * b['ece']['mean'], gap
for s in r['sizes'][:-1]:
    assert abs(s['brier']['mean'] - full['brier']['mean']) <= 4 * se(s, 'brier'), s['n']
assert abs(full['brier']['mean'] - t['brier']) <= 4 * t['sd'], (full['brier'], t)
" "$tmp/binary.json" "$tmp/binary.truth.json"
same_as_score binary_full_is_score "$tmp/binary.json" "$tmp/binary.csv"

# Probabilities and regression work as well; regression has dss and mse.
for form in probs gauss; do
    "$CALIBCTL" sizes --sizes 10,100,2000 --reps 20 "$tmp/$form.csv" > "$tmp/$form.json" 2> "$tmp/err"
    check "${form}_runs" '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'
    same_as_score "${form}_full_is_score" "$tmp/$form.json" "$tmp/$form.csv"
done
pycheck gauss_keys "
assert r['form'] == 'gaussian' and 'k' not in r
assert [k for k in r['sizes'][0] if k not in ('n', 'reps')] == ['dss', 'mse']
" "$tmp/gauss.json"

# ----------------------------------------------------------- sampling

# Without replacement: the mean Brier of 5 of 10 rows varies with the
# finite-population correction, sd = sigma sqrt((N - n) / ((N - 1) n)),
# sigma^2 the rows' variance; drawn with replacement it would be 34% wider.
"$CALIBCTL" sizes --sizes 5,10 --reps 20000 --seed 3 "$tmp/ten.csv" > "$tmp/ten.json" 2> "$tmp/err"
pycheck without_replacement "
b = [2 * (0.05 + 0.09 * i - i % 2) ** 2 for i in range(10)]
mu = sum(b) / 10
sigma = math.sqrt(sum((x - mu) ** 2 for x in b) / 10)
want = sigma * math.sqrt((10 - 5) / (9 * 5))
s = by_n[5]
assert abs(s['brier']['sd'] / want - 1) < 0.03, (s['brier']['sd'], want)
assert abs(s['brier']['mean'] - mu) <= 4 * se(s, 'brier'), (s['brier'], mu)
assert abs(by_n[10]['brier']['mean'] - mu) < 1e-12 and by_n[10]['reps'] == 1
# no subsample repeats a row: 5 distinct rows of 10 have a mean Brier of
# at least the mean of the 5 smallest scores, at most that of the 5 largest
lo, hi = sum(sorted(b)[:5]) / 5, sum(sorted(b)[5:]) / 5
assert lo - 1e-12 <= s['brier']['q05'] and s['brier']['q95'] <= hi + 1e-12
" "$tmp/ten.json"

# Reproducible: the same seed gives the same output; another seed does not;
# a size gives the same figures whichever other sizes are asked for.
"$CALIBCTL" sizes --sizes 50,100,200,500,1000,2000,5000,20000 --reps 200 --seed 7 \
    "$tmp/logits.csv" > "$tmp/again.json" 2> /dev/null
check same_seed_same_output 'cmp -s "$tmp/logits.json" "$tmp/again.json"'
"$CALIBCTL" sizes --sizes 100 --reps 200 --seed 7 "$tmp/logits.csv" > "$tmp/one.json" 2> /dev/null
"$CALIBCTL" sizes --sizes 100 --reps 200 --seed 8 "$tmp/logits.csv" > "$tmp/other.json" 2> /dev/null
pycheck size_independent_of_others "
one = json.load(open(sys.argv[2]))['sizes']
other = json.load(open(sys.argv[3]))['sizes']
assert len(one) == 1 and one[0] == by_n[100], (one, by_n[100])
assert other[0]['n'] == 100 and other[0]['ece'] != by_n[100]['ece']
" "$tmp/logits.json" "$tmp/one.json" "$tmp/other.json"

# Default sizes: 50, 100, 200, 500, ... below the rows, then the rows.
"$CALIBCTL" sizes --reps 3 "$tmp/logits.csv" > "$tmp/default.json" 2> /dev/null
pycheck default_sizes "
assert [s['n'] for s in r['sizes']] == [50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000]
assert [s['reps'] for s in r['sizes']] == [3] * 8 + [1] and r['reps'] == 3
" "$tmp/default.json"
"$CALIBCTL" sizes "$tmp/ten.csv" > "$tmp/default10.json" 2> /dev/null
pycheck default_sizes_small_file "
assert [s['n'] for s in r['sizes']] == [10] and r['sizes'][0]['reps'] == 1
" "$tmp/default10.json"

# Sizes above the file's rows are dropped, with a warning naming them.
"$CALIBCTL" sizes --sizes 50,5,20,10 --reps 10 "$tmp/ten.csv" > "$tmp/drop.json" 2> "$tmp/err"
rc=$?
if [ $rc -eq 0 ] &&
   grep -q "^calibctl: $tmp/ten.csv: warning: dropping sizes larger than the file's 10 rows: 20, 50$" "$tmp/err"; then
    pycheck drop_large_sizes "assert [s['n'] for s in r['sizes']] == [5, 10]" "$tmp/drop.json"
else
    bad "drop_large_sizes (rc $rc: $(cat "$tmp/err"))"
fi

# ----------------------------------------------------------- text and SVG

"$CALIBCTL" sizes --sizes 50,100,200,500,1000,2000,5000,20000 --reps 200 --seed 7 --text \
    --svg "$tmp/plot.svg" "$tmp/logits.csv" > "$tmp/text" 2> "$tmp/err"
check text_runs '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'
pycheck text_table "
lines = open(sys.argv[2]).read().split('\n')
assert lines[0].startswith('# ') and '20000 rows, K = 10, logits; 200 subsamples' in lines[0], lines[0]
assert lines[1].split() == ['estimator', 'n', 'reps', 'mean', 'sd', 'q05', 'q95'], lines[1]
assert lines[-1] == ''
body = lines[2:-1]
rows = [l for l in body if l]
assert len(rows) == 10 * 8 and len(body) == 10 * 8 + 9
# aligned: every line of the table is as wide as the header
assert all(len(l) == len(lines[1]) for l in rows), set(len(l) for l in rows)
cells = [l.split() for l in rows]
for c in cells:
    s = by_n[int(c[1])][c[0]]
    assert int(c[2]) == by_n[int(c[1])]['reps']
    for i, k in enumerate(('mean', 'sd', 'q05', 'q95')):
        want = s[k]
        assert (c[3 + i] == '-') if want is None else float(c[3 + i]) == float('%.6g' % want), (c, k, want)
" "$tmp/logits.json" "$tmp/text"

# svg_check NAME SVG JSON: well-formed XML, one mean path per estimator of
# the JSON, named after it, and a band per estimator
svg_check() {
    pycheck "$1" "
import xml.etree.ElementTree as ET
ns = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[2]).getroot()
assert root.tag == ns + 'svg', root.tag
est = [k for k in r['sizes'][0] if k not in ('n', 'reps')]
paths = list(root.iter(ns + 'path'))
assert [p.get('id') for p in paths] == ['mean-' + k for k in est], [p.get('id') for p in paths]
for p in paths:
    d = p.get('d')
    assert d.startswith('M') and d.count('L') == len(r['sizes']) - 1, d
assert len(list(root.iter(ns + 'polygon'))) == len(est)
text = ' '.join(t.text or '' for t in root.iter(ns + 'text'))
assert 'test-set size n (log scale)' in text
for k in est:
    assert k in text, k  # the legend
" "$3" "$2"
}
svg_check svg_logits "$tmp/plot.svg" "$tmp/logits.json"
"$CALIBCTL" sizes --sizes 10,2000 --reps 5 --svg "$tmp/gauss.svg" "$tmp/gauss.csv" > "$tmp/g.json" 2> /dev/null
svg_check svg_gauss "$tmp/gauss.svg" "$tmp/g.json"
# one size, and a file name XML must escape
cp "$tmp/ten.csv" "$tmp/a&b<c>'\".csv"
"$CALIBCTL" sizes --sizes 10 --svg "$tmp/one.svg" "$tmp/a&b<c>'\".csv" > "$tmp/one10.json" 2> /dev/null
svg_check svg_one_size_escaped "$tmp/one.svg" "$tmp/one10.json"
grep -q "a&amp;b&lt;c&gt;&apos;&quot;.csv" "$tmp/one.svg" && ok svg_title_escaped || bad svg_title_escaped

# ----------------------------------------------------------- bad arguments

# expect_usage NAME PATTERN ARGS...: exit 2, nothing on stdout, PATTERN on stderr
expect_usage() {
    local name=$1 pattern=$2
    shift 2
    "$CALIBCTL" sizes "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q -- "$pattern" "$tmp/err"; then
        ok "$name"
    else
        bad "$name (rc $rc, stderr: $(head -c 300 "$tmp/err"), stdout: $(head -c 100 "$tmp/out"))"
    fi
}
f=$tmp/ten.csv
expect_usage reps_zero "^calibctl: --reps: '0' is not an integer in \[1, 1000000\]" --reps 0 "$f"
expect_usage reps_word "^calibctl: --reps: 'abc' is not an integer" --reps abc "$f"
expect_usage reps_negative "^calibctl: --reps: '-3' is not" --reps -3 "$f"
expect_usage reps_too_many "^calibctl: --reps: '1000001' is not" --reps 1000001 "$f"
expect_usage reps_empty "^calibctl: --reps: '' is not" --reps '' "$f"
expect_usage reps_float "^calibctl: --reps: '1e3' is not" --reps 1e3 "$f"
expect_usage sizes_zero "^calibctl: --sizes: '0' is not a positive integer" --sizes 0 "$f"
expect_usage sizes_empty_item "^calibctl: --sizes: '' is not a positive integer" --sizes 10,,20 "$f"
expect_usage sizes_trailing_comma "^calibctl: --sizes: '' is not" --sizes 10, "$f"
expect_usage sizes_empty "^calibctl: --sizes: '' is not" --sizes '' "$f"
expect_usage sizes_word "^calibctl: --sizes: 'ten' is not" --sizes 5,ten "$f"
expect_usage sizes_negative "^calibctl: --sizes: '-5' is not" --sizes -5 "$f"
expect_usage sizes_fraction "^calibctl: --sizes: '1.5' is not" --sizes 1.5 "$f"
expect_usage sizes_space "^calibctl: --sizes: ' 20' is not" --sizes '10, 20' "$f"
expect_usage sizes_overflow "^calibctl: --sizes: '99999999999999999999999' is not" \
    --sizes 99999999999999999999999 "$f"
expect_usage sizes_all_too_large "^calibctl: $f: no size in --sizes is at most the file's 10 rows" \
    --sizes 11,100 "$f"
expect_usage seed_word "^calibctl: --seed: 'x' is not an integer in \[0, 2^64)" --seed x "$f"
expect_usage seed_negative "^calibctl: --seed: '-1' is not" --seed -1 "$f"
expect_usage seed_2_64 "^calibctl: --seed: '18446744073709551616' is not" --seed 18446744073709551616 "$f"
expect_usage svg_empty "^calibctl: --svg: empty file name" --svg '' "$f"
expect_usage unknown_option "usage: calibctl sizes" --bogus "$f"
expect_usage no_file "usage: calibctl sizes" --reps 5
expect_usage two_files "usage: calibctl sizes" "$f" "$f"
printf 'y,p\n0,0.5\n3,0.5\n' > "$tmp/badlabel.csv"
expect_usage bad_label "^calibctl: $tmp/badlabel.csv:3: label 3 is not a class" "$tmp/badlabel.csv"
printf 'y,p\n' > "$tmp/norows.csv"
expect_usage no_rows "^calibctl: $tmp/norows.csv:1: no data rows" "$tmp/norows.csv"
"$CALIBCTL" sizes --seed 18446744073709551615 --reps 2 "$f" > /dev/null 2>&1
check seed_max_accepted '[ $? -eq 0 ]'

# runtime failures: exit 1
"$CALIBCTL" sizes "$tmp/missing.csv" > "$tmp/out" 2> "$tmp/err"
check missing_file '[ $? -eq 1 ] && grep -q "^calibctl: $tmp/missing.csv: No such file" "$tmp/err"'
"$CALIBCTL" sizes --svg "$tmp/no/such/dir/plot.svg" "$f" > "$tmp/out" 2> "$tmp/err"
check svg_unwritable '[ $? -eq 1 ] && [ ! -s "$tmp/out" ] &&
    grep -q "^calibctl: $tmp/no/such/dir/plot.svg: No such file" "$tmp/err"'

"$CALIBCTL" sizes --help > "$tmp/out" 2>&1
check help '[ $? -eq 0 ] && grep -q "^usage: calibctl sizes" "$tmp/out"'
"$CALIBCTL" --help | grep -q '^  sizes \[OPTIONS\] FILE' && ok listed_in_usage || bad listed_in_usage

# ----------------------------------------------------------- a large file

# 20,000 rows of 10 classes, 100 subsamples at each default size: every
# size up to the whole file, each with its repetitions (what 10^5 rows
# cost, seconds, is tests/bench/bench_sizes.sh's, in BENCHMARKS.md)
python3 - "$tmp/big.csv" <<'PY'
import random, sys
r = random.Random(1)
with open(sys.argv[1], "w") as f:
    f.write("y," + ",".join("z%d" % k for k in range(10)) + "\n")
    f.write("\n".join("%d," % r.randrange(10) + ",".join("%.4f" % r.gauss(0, 1.5) for _ in range(10))
                      for _ in range(20000)) + "\n")
PY
"$CALIBCTL" sizes "$tmp/big.csv" > "$tmp/big.json" 2> "$tmp/err"
rc=$?
check "large_file: 20,000 rows, every default size with its repetitions (rc $rc)" \
    '[ $rc -eq 0 ] && python3 - "$tmp/big.json" <<'"'"'PY'"'"'
import json, sys
r = json.load(open(sys.argv[1]))
sizes = [(s["n"], s["reps"]) for s in r["sizes"]]
assert r["rows"] == 20000 and r["k"] == 10, r
assert sizes == [(n, 100) for n in (50, 100, 200, 500, 1000, 2000, 5000, 10000)] + [(20000, 1)], sizes
PY'

finish
