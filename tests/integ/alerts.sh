#!/usr/bin/env bash
# alerts.sh — the threshold and label-starvation rules, through an exec
# sink: each incident alerts once (alert_cooldown), a model whose outcomes
# come inline is never starved of labels, and a model without predictions
# is idle, not starved.
. "$(dirname "$0")/lib.sh"

make_sink
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
alert_exec = $work/sink.sh
alert_exec_timeout = $(scaled 5)
[defaults]
form = logits
k = 10
alert_cooldown = 3600
[model held]
label_starvation = 1
[model hot]
drift = no
alert_brier = 0.1
alert_min_samples = 200
label_starvation = 1
[model starved]
drift = no
label_starvation = 1
EOF2
start_calibd -c "$work/calibd.conf"

sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 100 "$@"; }
sim --model hot --seed 13 --count 3000 --rate 5000 2> /dev/null &
sim_hot=$!
sim --model starved --seed 14 --count 3000 --rate 5000 --label-delay 1 --label-drop 1 2> /dev/null &
sim_starved=$!
track $sim_hot $sim_starved
wait $sim_hot $sim_starved

# both incidents alert, the sink has every alert sent; then a second (5
# ticks) passes in which none may repeat
check "threshold and starvation alerts sent" \
    'wait_for "$work/s1.json" "r[\"models\"][\"hot\"][\"alerts\"] >= 1 and r[\"models\"][\"starved\"][\"alerts\"] >= 1"'
uptime_past 1 "$work/s1.json"
check "every alert sent reached the sink" \
    "wait_for \"$work/s2.json\" \"r['alerts']['sent'] == sum(1 for l in open('$work/alerts.jsonl') if l.strip())\""
python3 - "$work/alerts.jsonl" "$work/s2.json" <<'PY' && ok "alerts once per incident" || bad "alerts once per incident"
import collections, json, sys
alerts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = json.load(open(sys.argv[2]))
count = collections.Counter((a["model"], a["kind"]) for a in alerts)
print("# alerts:", dict(count), "; status:", r["alerts"])
for a in alerts:
    assert a["v"] == 1 and a["type"] == "alert" and a["severity"] in ("warning", "critical"), a
    assert isinstance(a["message"], str) and isinstance(a["values"], dict), a
    print(f"# {a['model']} {a['kind']}: {a['message']}")
assert count[("hot", "threshold")] == 1, count
assert count[("starved", "label_starvation")] == 1, count
assert sum(count.values()) == 2, count
assert r["models"]["hot"]["alerts"] == 1 and r["models"]["starved"]["alerts"] == 1, r["models"]
PY
# inline outcomes are labels, and a model without predictions is idle
python3 - "$work/alerts.jsonl" <<'PY' && ok "no starvation alert for inline outcomes nor for an idle model" || bad "no starvation alert for inline outcomes nor for an idle model"
import json, sys
kinds = {(a["model"], a["kind"]) for a in map(json.loads, filter(str.strip, open(sys.argv[1])))}
assert ("hot", "label_starvation") not in kinds and ("held", "label_starvation") not in kinds, kinds
PY
check "calibd stops cleanly" "stop_calibd"
finish
