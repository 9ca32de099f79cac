#!/usr/bin/env bash
# rollback.sh — the guard after a publish, end to end. Two models see the
# same streams: first at a true temperature of 2, until a manual refit
# publishes version 1 (T near 2); then the drift reverses (true temperature
# 1, so version 1 now makes the outputs underconfident). The model with
# rollback = yes (the default) must publish version 0's parameters (T = 1)
# again as version 2, which a serving node receives, alert once with kind
# "rollback", and count it; the model with rollback = no keeps version 1.
# Drift detection and the miscalibration trigger are off, so that only the
# guard can act.
. "$(dirname "$0")/lib.sh"
SERVING="$BUILDDIR/examples/serving_node"

make_sink
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
params_interval = 1
alert_exec = $work/sink.sh
[defaults]
form = logits
k = 10
drift = no
miscal_trigger = no
refit_min_samples = 4000
refit_samples = 4000
ring = 5000
gate_max_samples = 20000
[model guarded]
[model unguarded]
rollback = no
EOF2
start_calibd -c "$work/calibd.conf" --log-level info
sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 "$@"; }
both() { # both SIM-ARGS...: the same stream to the two models
    (exec "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --model guarded "$@" 2> /dev/null) &
    track $!
    sim --model unguarded "$@" 2> /dev/null
}

# ---------------------------------------------------------------- version 1
both --seed 7 --temperature 2 --count 6000 --rate 20000
check "4000 pairs of each model in the ring" \
    'wait_for "$work/s0.json" "all(r[\"models\"][m][\"scored\"] >= 6000 for m in (\"guarded\", \"unguarded\"))"'
for m in guarded unguarded; do
    "$CALIBCTL" refit --control "$CONTROL" "$m" > "$work/refit.json" ||
        bad "calibctl refit $m: $(cat "$work/refit.json")"
done
# the shadow run needs fresh pairs of the same regime
both --seed 8 --temperature 2 --count 6000 --rate 20000
check "version 1 published for both (T near 2)" \
    'wait_for "$work/s1.json" "all(r[\"models\"][m][\"params\"][\"version\"] == 1 and abs(r[\"models\"][m][\"params\"][\"values\"][\"T\"] - 2) < 0.3 for m in (\"guarded\", \"unguarded\"))" 20'
check "the guard of version 1 runs against version 0" \
    '[ "$(json_get "$work/s1.json" "r[\"models\"][\"guarded\"][\"loop\"][\"guard\"][\"against\"]")" = 0 ]'
check "no guard with rollback = no" \
    '[ "$(json_get "$work/s1.json" "r[\"models\"][\"unguarded\"][\"loop\"][\"guard\"]")" = None ]'

# ---------------------------------------------------------------- the drift reverses
"$SERVING" --connect "$PUBLISH" --model guarded --until-version 2 --timeout "$(scaled 60)" \
    > "$work/node.out" 2> "$work/node.err" &
node=$!
track $node
both --seed 9 --temperature 1 --count 8000 --rate 20000
check "rolled back: version 2 is version 0's T = 1" \
    'wait_for "$work/s2.json" "r[\"models\"][\"guarded\"][\"params\"][\"version\"] == 2 and r[\"models\"][\"guarded\"][\"params\"][\"values\"][\"T\"] == 1" 20'
check "counted once, the guard ended" \
    '[ "$(json_get "$work/s2.json" "(r[\"models\"][\"guarded\"][\"loop\"][\"rollbacks\"], r[\"models\"][\"guarded\"][\"loop\"][\"published\"], r[\"models\"][\"guarded\"][\"loop\"][\"guard\"])")" = "(1, 1, None)" ]'
check "the serving node receives version 2" \
    'wait "$node" && grep -q "^guarded 2 temperature T=1$" "$work/node.out"'
check "version 2 is stored" "grep -qx 'version 2' $work/state/model.guarded.params"
check "the rollback says why: version 1 scored worse than version 0" \
    'wait_until "log_has \"guarded: rolled back: version 2 is version 0\""'
# rollback_alerts: "MODEL SEVERITY" of each alert of kind rollback
rollback_alerts() {
    python3 -c 'import json, sys
for a in map(json.loads, filter(str.strip, open(sys.argv[1]))):
    if a["kind"] == "rollback":
        print(a["model"], a["severity"])' "$work/alerts.jsonl"
}
check "one critical alert of kind rollback" \
    'wait_until "[ \"\$(rollback_alerts)\" = \"guarded critical\" ]"'
check "rollback = no keeps version 1 on the same pairs" \
    'wait_for "$work/s3.json" "r[\"models\"][\"unguarded\"][\"scored\"] == r[\"models\"][\"guarded\"][\"scored\"] and r[\"models\"][\"unguarded\"][\"params\"][\"version\"] == 1 and r[\"models\"][\"unguarded\"][\"loop\"][\"rollbacks\"] == 0"'
grep -h "rolled back\|rolling back\|published version" "$work/calibd.log" | sed "s/^/# /"
check "calibd stops cleanly" "stop_calibd"
finish
