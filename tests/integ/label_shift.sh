#!/usr/bin/env bash
# label_shift.sh — calibd before the labels. A K = 5 classifier calibrated
# under uniform priors sends 20,000 predictions with their labels, then
# 20,000 whose labels (drawn from the priors 0.5 / 0.2 / 0.15 / 0.1 / 0.05)
# never come. From the predictions alone calibd must raise one label-shift
# alarm (an event and an alert through the exec sink naming the priors),
# estimate the priors within 0.1 (L1) and the Brier score the withheld
# labels would give closer than the naive estimate does (label_shift.py
# computes both exactly); /metrics exports them. A second model sends
# the source stream only and must see no alarm. A third, from the bundled
# simulator's --label-shift, must see its shift.
. "$(dirname "$0")/lib.sh"

make_sink
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
ingest_pull = tcp://127.0.0.1:*
alert_exec = $work/sink.sh
alert_exec_timeout = $(scaled 5)
[defaults]
form = probs
k = 5
drift = no
miscal_trigger = no
label_free_interval = 0.5
EOF2
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0

"$PY" "$srcdir/tests/integ/label_shift.py" "$PULL" shifted 39 20000 20000 "$work/truth.json" \
    "$work" 2> "$work/shifted.err" &
shifted=$!
"$PY" "$srcdir/tests/integ/label_shift.py" "$PULL" steady 40 40000 0 "$work/truth0.json" \
    2> "$work/steady.err" &
steady=$!
track $shifted $steady
check "the producers end" "wait $shifted && wait $steady"
sed 's/^/# /' "$work/shifted.err" "$work/steady.err"

# every prediction taken, every label joined (a loaded machine takes the
# labels after the predictions), and the figures updated after the last
check "figures over the newest 10,000 predictions" \
    'wait_for "$work/s.json" "r[\"models\"][\"shifted\"][\"predictions\"] == 40000 and r[\"models\"][\"steady\"][\"predictions\"] == 40000 and r[\"models\"][\"shifted\"][\"scored\"] == 20000 and r[\"models\"][\"steady\"][\"scored\"] == 40000 and r[\"models\"][\"shifted\"][\"label_free\"][\"predictions\"] == 10000 and r[\"models\"][\"shifted\"][\"label_free\"][\"figures_seen\"] == 40000 and r[\"models\"][\"steady\"][\"label_free\"][\"seen\"] == 40000"'
check "label-shift alarm, estimates against the withheld labels" "python3 - '$work/s.json' '$work/truth.json' <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['models']
truth = json.load(open(sys.argv[2]))
lf = r['shifted']['label_free']
print('# shifted:', json.dumps(lf))
print('# truth:', json.dumps(truth))
# one alarm, within 3,000 predictions of the shift (it then stood for
# 10,000 predictions, and the test restarted with the new mix)
assert lf['shift']['alarms'] == 1, lf['shift']
assert 20000 < lf['shift']['last_alarm_seen'] <= 23000, lf['shift']
assert lf['corrected'], lf
l1 = sum(abs(a - b) for a, b in zip(lf['priors'], truth['priors']))
assert l1 < 0.1, l1
assert all(lo <= p <= hi for lo, p, hi in zip(lf['priors_lo'], lf['priors'], lf['priors_hi'])), lf
assert all(abs(x - 0.2) < 0.03 for x in lf['reference_priors']), lf['reference_priors']
naive = abs(lf['naive_brier']['mean'] - truth['brier'])
corr = abs(lf['brier']['mean'] - truth['brier'])
assert naive > 0.003 and corr < 0.3 * naive, (naive, corr)
assert abs(lf['naive_brier']['mean'] - truth['naive_brier']) < 1e-5, (lf['naive_brier'], truth)
assert lf['brier']['lo'] <= lf['brier']['mean'] <= lf['brier']['hi'], lf['brier']
assert lf['accuracy']['lo'] <= truth['accuracy'] <= lf['accuracy']['hi'], (lf['accuracy'], truth)
st = r['steady']['label_free']
print('# steady:', json.dumps(st['shift']))
assert st['shift']['alarms'] == 0 and st['shift']['last_alarm_seen'] is None, st['shift']
assert r['steady']['scored'] == 40000
# graded: a calibrated model's Brier less its estimate is 0 on average
g = st['graded']
print('# steady graded:', json.dumps(g))
assert g['naive']['n'] == 40000 and abs(g['naive']['mean']) < 0.01, g
assert g['naive']['ci'][0] < g['naive']['mean'] < g['naive']['ci'][1], g
assert lf['graded']['naive']['n'] == 20000, lf['graded']
ev = [e for e in r['shifted']['events'] if e['kind'] == 'label_shift']
assert len(ev) == 1 and 'estimated priors' in ev[0]['text'], ev
PY"

# the exec sink appends asynchronously: the alert the tick above sent may
# not be in the file yet (the same tick can report the alarm and the
# figures of the last predictions)
check "one label_shift alert, with the priors" "wait_for \"\$work/s2.json\" \"r['alerts']['sent'] == sum(1 for l in open('\$work/alerts.jsonl') if l.strip())\" &&
    python3 - '$work/alerts.jsonl' <<'PY'
import json, sys
alerts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ls = [a for a in alerts if a['kind'] == 'label_shift']
print('# alerts:', [(a['model'], a['kind']) for a in alerts])
assert len(ls) == 1 and ls[0]['model'] == 'shifted', ls
v = ls[0]['values']
# the priors are EM's over the ring when the tick reported the alarm: how
# many shifted predictions the ring held then is the machine's speed
priors = [v['prior_%d' % j] for j in range(5)]
assert v['log_e'] >= 4.6 and v['predictions'] > 0 and abs(sum(priors) - 1) < 1e-6, v
assert 'estimated priors' in ls[0]['message'], ls[0]
PY"

# the loop renders /metrics while it is asked for: scrape until it shows
# the figures the status above showed
agree() {
    curl -sS --max-time "$(scaled 5)" "$HTTP" > "$work/metrics.txt" && python3 - "$work/metrics.txt" "$work/s.json" > "$work/agree.out" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('calibd_label_')]
print(''.join('# ' + l for l in lines), end='')
r = json.load(open(sys.argv[2]))['models']
def value(head):
    return next(float(l.split()[-1]) for l in lines if l.startswith(head + ' '))
assert value('calibd_label_free_brier{model="shifted",estimate="corrected"}') == r['shifted']['label_free']['brier']['mean']
assert value('calibd_label_free_brier{model="shifted",estimate="naive"}') == r['shifted']['label_free']['naive_brier']['mean']
assert value('calibd_label_free_prior{model="shifted",class="0"}') == r['shifted']['label_free']['priors'][0]
assert value('calibd_label_shift_alarms_total{model="shifted"}') == 1
assert value('calibd_label_shift_alarms_total{model="steady"}') == 0
assert value('calibd_label_shift_alarm{model="steady"}') == 0
assert value('calibd_label_free_predictions{model="steady"}') == 10000
PY
}
agreed=no
wait_until agree && agreed=yes
check "/metrics has the estimates and the alarms
$(cat "$work/agree.out")" '[ $agreed = yes ]'
# offline, the same figures from the same predictions: calibctl score
# --label-free with the ring's labelled pairs as the reference
"$CALIBCTL" score --label-free --reference "$work/reference.csv" "$work/predictions.csv" \
    > "$work/offline.json" 2> "$work/offline.err"
check "calibctl score --label-free equals calibd's figures" "python3 - '$work/s.json' '$work/offline.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))['models']['shifted']['label_free']
o = json.load(open(sys.argv[2]))
print('# offline:', json.dumps({k: o[k] for k in ('brier', 'priors', 'em')}))
def same(a, b, path):
    if isinstance(a, dict):
        for k in a:
            same(a[k], b[k], path + '.' + k)
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, '%s[%d]' % (path, i))
    elif isinstance(a, float):
        # EM stops when no prior moves by 1e-6 in a pass: calibd starts it
        # from its last priors, calibctl from the reference's
        assert abs(a - b) <= 1e-4, (path, a, b)
    else:
        assert a == b, (path, a, b)
for key in ('predictions', 'corrected', 'brier', 'naive_brier', 'log', 'naive_log', 'accuracy',
            'naive_accuracy', 'priors', 'priors_lo', 'priors_hi', 'reference_priors'):
    same(d[key], o[key], key)
# the naive figures do not go through EM: equal to the last bit
assert d['naive_brier'] == o['naive_brier'] and d['naive_log'] == o['naive_log'], (d, o)
assert o['seen'] == 40000 and o['shift']['alarms'] == 1, o['shift']
assert 20000 < o['shift']['last_alarm_seen'] <= 23000, o['shift']
PY"
# the bundled simulator's label shift (calibd-simulate(1), --label-shift):
# class 0 kept 4 times as often after 20,000 predictions, whose labels
# are never sent (--label-drop 1); calibd sees it from the predictions alone
"$SIMULATE" --endpoint ">$PULL" --push --model simshift --form probs --k 5 --count 30000 \
    --batch 100 --label-delay 1 --label-drop 1 --label-shift 4 --label-shift-after 20000 --seed 3 \
    --linger-ms "$LINGER_MS" 2> "$work/sim.err"
check "the simulator's label shift is seen: one alarm, after its start" \
    'wait_for "$work/sim.json" "r[\"models\"][\"simshift\"][\"label_free\"][\"seen\"] == 30000 and r[\"models\"][\"simshift\"][\"label_free\"][\"shift\"][\"alarms\"] == 1" &&
     [ "$(json_get "$work/sim.json" "20000 < r[\"models\"][\"simshift\"][\"label_free\"][\"shift\"][\"last_alarm_seen\"] <= 23000")" = True ]'
check "calibd stops cleanly" "stop_calibd"
finish
