#!/usr/bin/env bash
# drift.sh — the closed loop end to end. The simulator streams a model whose
# true temperature moves from 1 to 2 mid-stream; calibd must detect the
# drift, refit, pass the shadow gate and publish T within 5% of 2, which the
# C and Python serving nodes receive, and store it; the calibrated Brier
# score must come back to the level of a calibrated model. Alongside: a
# regression model whose variance drifts, and a stationary model that must
# see no alarm; each incident alerts once through an exec sink.
. "$(dirname "$0")/lib.sh"
SERVING=$(built examples/serving_node)
PYSERVING="$srcdir/examples/python/serving_node.py"

make_sink
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
params_interval = 1
alert_exec = $work/sink.sh
alert_exec_timeout = $(scaled 5)
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
[model reg]
form = gaussian
EOF2
start_calibd -c "$work/calibd.conf"

# serving nodes, subscribed before anything is published
"$SERVING" --connect "$PUBLISH" --model drift --until-version 1 --timeout "$(scaled 60)" \
    > "$work/node.out" 2> "$work/node.err" &
node_pid=$!
"$PY" "$PYSERVING" --connect "$PUBLISH" --model drift --until-version 1 --timeout "$(scaled 60)" \
    > "$work/pynode.out" 2> "$work/pynode.err" &
pynode_pid=$!
track $node_pid $pynode_pid

sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 100 "$@"; }
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
track $sim_drift $sim_steady $sim_reg
wait $sim_drift $sim_steady $sim_reg

check "all pairs scored" \
    'wait_for "$work/s1.json" "r[\"models\"][\"drift\"][\"scored\"] >= 100000 and r[\"models\"][\"steady\"][\"scored\"] >= 60000 and r[\"models\"][\"reg\"][\"scored\"] >= 80000"'
# the published version is in status once the serving nodes have it
wait "$node_pid"; node_rc=$?
wait "$pynode_pid"; pynode_rc=$?
wait_for "$work/s1.json" "r['models']['drift']['params']['version'] >= 1 and r['models']['reg']['params']['version'] >= 1" ||
    echo "# no version 1 for drift or reg"
python3 - "$work/s1.json" <<'PY' && ok "drift: detected, refit, gated, T within 5% of 2" || bad "drift: detected, refit, gated, T within 5% of 2"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["drift"]
l, p = m["loop"], m["params"]
print(f"# drift: alarms {l['drift']['alarms']}, refits {l['refits']}, candidates {l['candidates']}, "
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
print(f"# calibrated since publish {after['mean']:.5f} (n {after['n']}), calibrated level "
      f"{level['mean']:.5f}; improvement at publish {imp['improvement']:.5f} {imp['ci']}")
assert after["n"] >= 20000, after
assert abs(after["mean"] - level["mean"]) < 0.01, (after, level)
assert imp["ci"][0] > 0.02, imp
PY
python3 - "$work/s1.json" <<'PY' && ok "regression: robust drift detector, location-scale published" || bad "regression: robust drift detector, location-scale published"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["reg"]
l, p = m["loop"], m["params"]
print(f"# reg: alarms {l['drift']['alarms']}, published {l['published']}, params {p['values']}, "
      f"DSS since publish {m['calibrated_since_params']['dss']['mean']:.4f}, raw {m['raw']['dss']['mean']:.4f}")
assert l["drift"]["alarms"] == 1 and l["published"] == 1 and p["method"] == "location_scale", (l, p)
v = p["values"]
# the default map for regression: var' = c var with var = 1 must come out
# near T*^2 = 4, the mean left as it is (a = 0, b = 1)
assert abs(v["c"] - 4) < 0.4 and abs(v["a"]) < 0.1 and abs(v["b"] - 1) < 0.1, v
assert p["improvement"] > 0 and p["ci"][0] > 0, p
PY
python3 - "$work/s1.json" <<'PY' && ok "stationary model: no alarm; scheduled candidates all rejected" || bad "stationary model: no alarm; scheduled candidates all rejected"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["steady"]
l = m["loop"]
print(f"# steady: candidates {l['candidates']}, rejected {l['rejected']}, alarms {l['drift']['alarms']}")
assert l["drift"]["alarms"] == 0 and l["published"] == 0 and m["params"]["version"] == 0, l
assert l["candidates"] >= 1 and l["drift"]["state"] == "watching", l
PY

# the serving nodes hold what status says
T=$(json_get "$work/s1.json" "r['models']['drift']['params']['values']['T']")
for n in node pynode; do
    rc=$node_rc
    [ $n = pynode ] && rc=$pynode_rc
    check "$n: received version 1 (exit $rc)
$(tail -c 300 "$work/$n.err")" \
        "[ $rc -eq 0 ] && awk -v t=$T '\$1 == \"drift\" && \$2 == 1 && \$3 == \"temperature\" { split(\$4, a, \"=\"); d = a[2] - t; if (a[1] == \"T\" && d < 1e-9 && d > -1e-9) f = 1 } END { exit !f }' $work/$n.out"
done

# alerts: one per incident. Every alert sent has reached the sink, and a
# second passed (5 ticks) in which none may repeat
status > "$work/s2.json"
uptime_past 1 "$work/s2.json"
wait_for "$work/s3.json" "r['alerts']['sent'] == sum(1 for l in open('$work/alerts.jsonl') if l.strip())"
python3 - "$work/alerts.jsonl" "$work/s3.json" <<'PY' && ok "alerts once per incident" || bad "alerts once per incident"
import collections, json, sys
alerts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = json.load(open(sys.argv[2]))
count = collections.Counter((a["model"], a["kind"]) for a in alerts)
print("# alerts:", dict(count), "; sent:", r["alerts"]["sent"])
assert r["alerts"]["sent"] == len(alerts) and not r["alerts"]["sink_failed"], r["alerts"]
for a in alerts:
    assert a["v"] == 1 and a["type"] == "alert" and a["severity"] in ("warning", "critical"), a
    assert isinstance(a["message"], str) and isinstance(a["values"], dict), a
assert count[("drift", "drift")] == 1, count
assert count[("drift", "refit")] == 1, count
assert count[("reg", "drift")] == 1 and count[("reg", "refit")] == 1, count
# a drift alert reports the level the detector tested, since the change
# point: above the bound the test rejected, which lies above the reference
for model in ("drift", "reg"):
    a = next(a for a in alerts if a["model"] == model and a["kind"] == "drift")
    v = a["values"]
    print(f"# {model}: {a['message']}")
    assert "since the estimated change point" in a["message"], a
    assert v["current"] > v["bound"] > v["reference"], a
    assert 0 < v["since_change"] <= 20000 and v["samples"] > 0, a
assert ("steady", "drift") not in count, count
steady = [a for a in alerts if a["model"] == "steady"]
assert steady and all(a["kind"] == "refit" and "rejected" in a["message"] for a in steady), steady
refit = next(a for a in alerts if a["model"] == "drift" and a["kind"] == "refit")
assert refit["values"]["version"] == 1 and refit["values"]["improvement"] > 0, refit
PY

check "calibd stops cleanly" "stop_calibd"
check "version 1 stored durably, with the T in force" \
    "grep -qx 'version 1' $work/state/model.drift.params &&
     awk -v t=$T '\$1 == \"param\" && \$2 == \"T\" { d = \$3 - t; if (d < 1e-12 && d > -1e-12) f = 1 } END { exit !f }' $work/state/model.drift.params"
finish
