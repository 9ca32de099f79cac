#!/usr/bin/env bash
# loop.sh — the closed loop end to end. The simulator streams a model whose
# true temperature moves from 1 to 2 mid-stream; calibd must detect the
# drift, refit, pass the shadow gate and publish T within 5% of 2, which the
# C and Python serving nodes receive; the calibrated Brier score must come
# back to the level of a calibrated model. Alongside: a stationary model
# that must see no alarm, threshold and label-starvation alerts once per
# incident through an exec sink, a restart whose versions continue from the
# stored one, a manual refit, and a hanging sink killed at its timeout.
. "$(dirname "$0")/lib.sh"
SERVING="$BUILDDIR/examples/serving_node"
PYSERVING="$srcdir/examples/python/serving_node.py"
PY=/usr/bin/python3 # Debian's, with python3-zmq and python3-msgpack

cat > "$work/sink.sh" <<EOF
#!/bin/sh
# an alert sink: keeps each alert; hangs while the flag file exists
cat >> "$work/alerts.jsonl"
[ -e "$work/hang" ] && sleep 4321 # a child: the kill must take it too
exit 0
EOF
chmod +x "$work/sink.sh"
: > "$work/alerts.jsonl"

cat > "$work/calibd.conf" <<EOF
[daemon]
tick = 0.2
params_interval = 1
alert_exec = $work/sink.sh
alert_exec_timeout = 1
[defaults]
form = logits
k = 10
drift_reference = 2000
refit_min_samples = 15000
refit_samples = 15000
ring = 20000
gate_max_samples = 5000
alert_cooldown = 3600
[model drift]
gate_max_samples = 30000
[model steady]
refit_interval = 2
[model held]
auto_publish = no
label_starvation = 1
gate_max_samples = 30000
[model reg]
form = gaussian
[model hot]
drift = no
alert_brier = 0.1
alert_min_samples = 200
label_starvation = 1
[model starved]
drift = no
label_starvation = 1
EOF
start_calibd -c "$work/calibd.conf"

# serving nodes, subscribed before anything is published
"$SERVING" --connect "$PUBLISH" --model drift --until-version 1 --timeout 60 \
    > "$work/node.out" 2> "$work/node.err" &
node_pid=$!
"$PY" "$PYSERVING" --connect "$PUBLISH" --model drift --until-version 1 --timeout 60 \
    > "$work/pynode.out" 2> "$work/pynode.err" &
pynode_pid=$!

sim() { "$SIMULATE" --endpoint ">$INGEST" --warmup-ms 300 --linger-ms 1000 --batch 100 "$@"; }
sim --model drift --seed 11 --temperature 1 --temperature-after 2 --switch-after 20000 \
    --count 100000 --rate 10000 2> "$work/sim-drift.err" &
sim_drift=$!
# calibrated, and distributed as the drifting model's outputs after T = 2:
# z / 2 with z ~ N(0, 1.5^2) is N(0, 0.75^2); its Brier score is the level
# the recalibrated model must come back to
sim --model steady --seed 12 --sigma 0.75 --temperature 1 --count 60000 --rate 10000 \
    2> "$work/sim-steady.err" &
sim_steady=$!
# regression: y ~ N(mean, T*^2) while the model says variance 1; T* 1 -> 2
sim --model reg --seed 16 --form gaussian --temperature 1 --temperature-after 2 \
    --switch-after 20000 --count 80000 --rate 10000 2> "$work/sim-reg.err" &
sim_reg=$!
sim --model hot --seed 13 --count 3000 --rate 5000 2> /dev/null &
sim --model starved --seed 14 --count 3000 --rate 5000 --label-delay 1 --label-drop 1 2> /dev/null &
wait $sim_drift $sim_steady $sim_reg

wait_for "$work/s1.json" "r['models']['drift']['scored'] >= 100000 and r['models']['steady']['scored'] >= 60000 and r['models']['reg']['scored'] >= 80000" ||
    bad "all pairs scored"
python3 - "$work/s1.json" <<'PY' && ok "drift: detected, refit, gated, T within 5% of 2" || bad "drift: detected, refit, gated, T within 5% of 2"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["drift"]
l, p = m["loop"], m["params"]
print(f"    drift: alarms {l['drift']['alarms']}, refits {l['refits']}, candidates {l['candidates']}, "
      f"published {l['published']}, params {p}")
assert l["drift"]["alarms"] == 1, l
assert l["published"] == 1 and p["version"] == 1, (l, p)
assert p["method"] == "temperature"
assert abs(p["values"]["T"] - 2) <= 0.1, p
assert p["improvement"] > 0 and p["ci"][0] > 0, p
PY
python3 - "$work/s1.json" <<'PY' && ok "calibrated Brier back to the calibrated level" || bad "calibrated Brier back to the calibrated level"
import json, sys
ms = json.load(open(sys.argv[1]))["models"]
after = ms["drift"]["calibrated_since_params"]["brier"]
level = ms["steady"]["raw"]["brier"]
imp = ms["drift"]["params"]
print(f"    calibrated since publish {after['mean']:.5f} (n {after['n']}), calibrated level "
      f"{level['mean']:.5f}; improvement at publish {imp['improvement']:.5f} {imp['ci']}")
assert after["n"] >= 20000, after
assert abs(after["mean"] - level["mean"]) < 0.01, (after, level)
assert imp["ci"][0] > 0.02, imp
PY
python3 - "$work/s1.json" <<'PY' && ok "regression: robust drift detector, variance scaling published" || bad "regression: robust drift detector, variance scaling published"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["reg"]
l, p = m["loop"], m["params"]
print(f"    reg: alarms {l['drift']['alarms']}, published {l['published']}, params {p['values']}, "
      f"DSS since publish {m['calibrated_since_params']['dss']['mean']:.4f}, raw {m['raw']['dss']['mean']:.4f}")
assert l["drift"]["alarms"] == 1 and l["published"] == 1 and p["method"] == "variance", (l, p)
v = p["values"]
# var' = w var + b with var = 1 must come out near T*^2 = 4
assert abs(v["w"] + v["b"] - 4) < 0.4, v
assert p["improvement"] > 0 and p["ci"][0] > 0, p
PY
python3 - "$work/s1.json" <<'PY' && ok "stationary model: no alarm; scheduled candidates all rejected" || bad "stationary model: no alarm; scheduled candidates all rejected"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["steady"]
l = m["loop"]
print(f"    steady: candidates {l['candidates']}, rejected {l['rejected']}, alarms {l['drift']['alarms']}")
assert l["drift"]["alarms"] == 0 and l["published"] == 0 and m["params"]["version"] == 0, l
assert l["candidates"] >= 1 and l["drift"]["state"] == "watching", l
PY

# the serving nodes hold what status says
wait "$node_pid"; node_rc=$?
wait "$pynode_pid"; pynode_rc=$?
T=$(json_get "$work/s1.json" "r['models']['drift']['params']['values']['T']")
for n in node pynode; do
    rc=$node_rc
    [ $n = pynode ] && rc=$pynode_rc
    check "$n: received version 1 (exit $rc: $(tail -c 300 "$work/$n.err"))" \
        "[ $rc -eq 0 ] && awk -v t=$T '\$1 == \"drift\" && \$2 == 1 && \$3 == \"temperature\" { split(\$4, a, \"=\"); d = a[2] - t; if (a[1] == \"T\" && d < 1e-9 && d > -1e-9) f = 1 } END { exit !f }' $work/$n.out"
done

# alerts: one per incident
sleep 2
python3 - "$work/alerts.jsonl" <<'PY' && ok "alerts once per incident" || bad "alerts once per incident"
import collections, json, sys
alerts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
count = collections.Counter((a["model"], a["kind"]) for a in alerts)
print("    alerts:", dict(count))
for a in alerts:
    assert a["v"] == 1 and a["type"] == "alert" and a["severity"] in ("warning", "critical"), a
    assert isinstance(a["message"], str) and isinstance(a["values"], dict), a
assert count[("drift", "drift")] == 1, count
assert count[("drift", "refit")] == 1, count
assert count[("hot", "threshold")] == 1, count
assert count[("starved", "label_starvation")] == 1, count
# inline outcomes are labels, and a model without predictions is idle
assert ("hot", "label_starvation") not in count and ("held", "label_starvation") not in count, count
assert count[("reg", "drift")] == 1 and count[("reg", "refit")] == 1, count
# a drift alert reports the level the detector tested, since the change
# point: above the bound the test rejected, which lies above the reference
for model in ("drift", "reg"):
    a = next(a for a in alerts if a["model"] == model and a["kind"] == "drift")
    v = a["values"]
    print(f"    {model}: {a['message']}")
    assert "since the estimated change point" in a["message"], a
    assert v["current"] > v["bound"] > v["reference"], a
    assert 0 < v["since_change"] <= 20000 and v["samples"] > 0, a
assert ("steady", "drift") not in count, count
steady = [a for a in alerts if a["model"] == "steady"]
assert steady and all(a["kind"] == "refit" and "rejected" in a["message"] for a in steady), steady
refit = next(a for a in alerts if a["model"] == "drift" and a["kind"] == "refit")
assert refit["values"]["version"] == 1 and refit["values"]["improvement"] > 0, refit
PY

# ---------------------------------------------------------------- restart
check "calibd stops cleanly" "stop_calibd"
check "version 1 stored durably" "grep -qx 'version 1' $work/state/model.drift.params"
touch "$work/hang"
start_calibd -c "$work/calibd.conf"
wait_for "$work/s2.json" "r['models']['drift']['params']['version'] == 1" &&
    ok "restart: version 1 restored" || bad "restart: version 1 restored"
check "restart: same T" "[ \"$(json_get "$work/s2.json" "r['models']['drift']['params']['values']['T']")\" = \"$T\" ]"
"$SERVING" --connect "$PUBLISH" --model drift --until-version 1 --timeout 10 > "$work/late.out" 2>&1
check "a late serving node converges through republishing" "[ $? -eq 0 ] && grep -q '^drift 1 temperature' $work/late.out"

# a manual refit on a stream at T* = 4 publishes version 2
sim --model drift --seed 21 --temperature 4 --count 100000 --rate 10000 2> /dev/null &
sim_pid=$!
# and one with auto_publish = no: its candidate passes but is withheld
sim --model held --seed 22 --temperature 4 --count 60000 --rate 10000 2> /dev/null &
sim_held=$!
wait_for "$work/s3.json" "r['models']['drift']['samples']['ring'] >= 15000 and r['models']['held']['samples']['ring'] >= 15000" ||
    bad "ring filled"
"$CALIBCTL" refit --control "$CONTROL" held > /dev/null || bad "calibctl refit held"
# first the state directory refuses the new version: nothing is published
mkdir "$work/state/model.drift.params.tmp"
"$CALIBCTL" refit --control "$CONTROL" drift > "$work/refit.json" && ok "calibctl refit" || bad "calibctl refit: $(cat "$work/refit.json")"
wait_for "$work/s3b.json" "r['models']['drift']['loop']['store_errors'] == 1" &&
    [ "$(json_get "$work/s3b.json" "r['models']['drift']['params']['version']")" = 1 ] &&
    grep -q "version 2 (.*) not published" "$work/calibd.log" &&
    ok "a version the state directory refuses is not published" ||
    bad "a version the state directory refuses is not published"
rmdir "$work/state/model.drift.params.tmp"
"$CALIBCTL" refit --control "$CONTROL" drift > "$work/refit.json" || bad "calibctl refit again: $(cat "$work/refit.json")"
check "a second refit of the same model does not start while one runs" \
    "! $CALIBCTL refit --control $CONTROL drift > $work/refit2.json && grep -q 'running\|shadow' $work/refit2.json"
wait $sim_pid $sim_held
wait_for "$work/s4.json" "r['models']['drift']['params']['version'] == 2 and r['models']['held']['loop']['withheld'] == 1" &&
    ok "versions continue: 2 after the stored 1" || bad "versions continue: 2 after the stored 1 ($(json_get "$work/s4.json" "r['models']['drift']['loop']"))"
json_get "$work/s4.json" "'    version 2: ' + str(r['models']['drift']['params'])"
check "auto_publish = no: the candidate passed, withheld, nothing published" \
    "json_get $work/s4.json \"(r['models']['held']['params']['version'], r['models']['held']['loop']['published'], r['models']['held']['loop']['withheld'])\" | grep -qx '(0, 0, 1)'"
check "version 2 has T near 4" "json_get $work/s4.json \"abs(r['models']['drift']['params']['values']['T'] - 4) < 0.4\" | grep -q True"

# the starved model starves again: its alert goes to a sink that hangs
sim --model starved --seed 15 --count 500 --rate 5000 --label-delay 1 --label-drop 1 2> /dev/null
blocked=0
for _ in 1 2 3 4 5 6 7 8; do
    "$CALIBCTL" ping --control "$CONTROL" --timeout 0.5 > /dev/null || blocked=1
    sleep 0.25
done
check "calibd answers while the sink hangs" "[ $blocked -eq 0 ]"
wait_for "$work/s5.json" "r['alerts']['sink_killed'] >= 1" &&
    ok "a hanging exec sink is killed at its timeout" || bad "a hanging exec sink is killed at its timeout"
rm -f "$work/hang"
check "calibd stops cleanly after the sink" "stop_calibd"
grep -q "killed" "$work/calibd.log" && ok "the kill is logged" || bad "the kill is logged"
check "the sink's own children are killed with it" "! pgrep -f 'sleep 4321' > /dev/null"
finish
